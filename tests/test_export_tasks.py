"""export_saved_model --model_type=multiple_choice: served answers equal the runner's.

The model is trained for a few steps by its runner, exported, then loaded in a fresh
Python process (no project module imported) and called on raw text. The tagger's case
(served tags and entities equal run_ner's) is in tests/test_tagger_doors.py, on the
taggers trained there.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import export_saved_model as esm
import run_multiple_choice
from bert_tf2 import flags_common
from conftest import write_text
from conftest import HANG_GUARD_SECONDS

_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "john", "smith", "lives", "in",
          "paris", "works", "for", "acme", "corp", "and", "mary", "visited", "berlin", ".",
          "the", "cat", "sat", "on", "mat", "then", "it", "saw", "dog", "bird", "##s"]
_CONFIG = {"vocab_size": len(_VOCAB), "hidden_size": 32, "num_hidden_layers": 2,
           "num_attention_heads": 2, "intermediate_size": 64, "hidden_act": "gelu",
           "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
           "max_position_embeddings": 64, "type_vocab_size": 2, "initializer_range": 0.02}
_SERVE = """
import json, sys
import tensorflow as tf
export_dir, inputs, output = sys.argv[1:]
model = tf.saved_model.load(export_dir)
args = json.load(open(inputs))
out = model.signatures["serving_default"](**{k: tf.constant(v) for k, v in args.items()})
json.dump({k: v.numpy().tolist() for k, v in out.items()}, open(output, "w"),
          default=lambda b: b.decode("utf-8"))
"""


def serve_in_fresh_process(tmp_path, export_dir, inputs):
    """serving_default of the SavedModel in `export_dir` called on `inputs` ({name: list})
    in a fresh Python process that imports no module of the project: its outputs as lists."""
    inputs_file = write_text(tmp_path / "inputs.json", json.dumps(inputs))
    output = str(tmp_path / "served.json")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    subprocess.run([sys.executable, "-c", _SERVE, str(export_dir), inputs_file, output],
                   check=True, env=env, cwd=str(tmp_path), timeout=HANG_GUARD_SECONDS)
    with open(output, encoding="utf-8") as f:
        return json.load(f)


def _common(tmp_path):
    return ["--vocab_file=%s" % write_text(tmp_path / "vocab.txt", "\n".join(_VOCAB) + "\n"),
            "--bert_config_file=%s" % write_text(tmp_path / "bert_config.json",
                                             json.dumps(_CONFIG))]


@pytest.mark.slow
def test_served_multiple_choice_equals_run_multiple_choice(tmp_path):
    rows = [{"context": "the cat sat on the mat .", "question": "then it",
             "endings": ["saw the dog .", "sat .", "saw the bird ."], "label": i % 3}
            for i in range(6)]
    data = tmp_path / "mc"
    for name in ("train.jsonl", "dev.jsonl", "test.jsonl"):
        write_text(data / name, "".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "mc_out"
    run_multiple_choice.run(flags_common.parse_flags(
        run_multiple_choice.define_flags, _common(tmp_path) + [
            "--task_name=jsonl", "--data_dir=%s" % data, "--output_dir=%s" % out,
            "--do_train", "--do_predict", "--max_seq_length=16", "--train_batch_size=2",
            "--num_train_epochs=1", "--seed=3"]))
    export_dir = tmp_path / "mc_model"
    esm.run(flags_common.parse_flags(esm.define_flags, _common(tmp_path) + [
        "--model_type=multiple_choice", "--init_checkpoint=%s" % out, "--max_seq_length=16",
        "--export_dir=%s" % export_dir]))
    served = serve_in_fresh_process(tmp_path, export_dir, {
        "context": [r["context"] for r in rows],
        "endings": [["%s %s" % (r["question"], e) for e in r["endings"]] for r in rows]})
    want = np.loadtxt(str(out / "test_results.tsv"), delimiter="\t")
    np.testing.assert_allclose(served["probabilities"], want, atol=1e-5)
