"""Evidence for `import bert_tf2.tf1 as tf`: the reference's own library modules on TF 2.20.

With BERT_REFERENCE_DIR naming a folder of google-research/bert's .py files (nothing is
fetched), modeling.py, tokenization.py, optimization.py and run_classifier.py are copied with
only their `import tensorflow as tf` line changed and run in TF1 graph mode in a subprocess
(tests/reference_fork_graph.py): the reference's BertModel on a TF1 checkpoint equals
bert-tf2's modeling.py (eager, same checkpoint and inputs), its FullTokenizer equals ours,
its create_optimizer trains a step, and run_classifier's TFRecord file and input_fn batches
(tf.contrib.data.map_and_batch) equal ours.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import modeling
import run_classifier
import tokenization
from bert_tf2.trainer import checkpoints
from conftest import REPO_ROOT

SCRIPT = os.path.join(str(REPO_ROOT), "tests", "reference_fork_graph.py")
MODULES = ("modeling.py", "tokenization.py", "optimization.py", "run_classifier.py")
# The same arrays and texts as reference_fork_graph.py's.
INPUT_IDS = np.array([[2, 5, 6, 7, 8, 9, 3, 0], [2, 10, 11, 12, 13, 1, 3, 4]], np.int32)
INPUT_MASK = np.array([[1, 1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 1, 1]], np.int32)
TOKEN_TYPE_IDS = np.array([[0, 0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 1, 1, 1]], np.int32)
PAIRS = [("The cat sat.", "A cat was sitting.", "1"), ("Stocks fell.", "It rained.", "0"),
         ("Hello world", None, "1"), ("na\u00efve caf\u00e9 owners", "Caf\u00e9s!", "0"),
         ("One more sentence here", "and its pair", "1")]
TEXTS = ["Hello, World! UNwant\u00e9d running", "na\u00efve caf\u00e9 --- 3.14 [MASK]",
         "\u4e2d\u6587 and \u00c5ngstr\u00f6m's  \t tabs", ""]


def _reference_dir():
    folder = os.environ.get("BERT_REFERENCE_DIR")
    if not folder:
        pytest.skip("BERT_REFERENCE_DIR is not set (a folder of google-research/bert's .py "
                    "files: modeling.py, tokenization.py, optimization.py)")
    missing = [m for m in MODULES if not os.path.isfile(os.path.join(folder, m))]
    if missing:
        pytest.fail("BERT_REFERENCE_DIR=%s lacks %s" % (folder, ", ".join(missing)))
    return folder


def _fork(reference, folder):
    """The reference's modules in `folder` with the one import line changed."""
    for name in MODULES:
        with open(os.path.join(reference, name), encoding="utf-8") as f:
            text = f.read()
        assert text.count("\nimport tensorflow as tf\n") == 1, name
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write(text.replace("\nimport tensorflow as tf\n",
                                 "\nimport bert_tf2.tf1 as tf\n"))


@pytest.fixture(scope="module")
def fork(tmp_path_factory, shared_dir):
    """What reference_fork_graph.py found, and the checkpoint and vocab it used."""
    reference = _reference_dir()
    folder = tmp_path_factory.mktemp("fork")
    _fork(reference, str(folder))
    checkpoint = str(shared_dir / "data" / "tf1_checkpoints" / "kerasbert_tiny" /
                     "bert_model.ckpt")
    vocab = str(shared_dir / "data" / "vocab" / "uncased_vocab.txt")
    out = str(folder / "results.npz")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run([sys.executable, SCRIPT, str(REPO_ROOT), str(folder), checkpoint,
                           vocab, out], capture_output=True, text=True, env=env, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = dict(np.load(out))
    results.update(checkpoint=checkpoint, vocab=vocab, folder=str(folder), texts=PAIRS)
    return results


def _ours(checkpoint):
    """bert-tf2's modeling.BertModel (eager) on the checkpoint and the same inputs."""
    config = modeling.BertConfig.from_json_file(
        os.path.join(os.path.dirname(checkpoint), "bert_config.json"))
    model = modeling.BertModel(config)
    model(INPUT_IDS, input_mask=INPUT_MASK, token_type_ids=TOKEN_TYPE_IDS)
    loaded = checkpoints.load_checkpoint(model, checkpoint, log=False)
    assert loaded.not_in_checkpoint == []
    return model(INPUT_IDS, input_mask=INPUT_MASK, token_type_ids=TOKEN_TYPE_IDS,
                 training=False)


def test_the_references_bert_model_equals_ours_on_a_tf1_checkpoint(fork):
    assert os.path.dirname(str(fork["modeling_file"])) == fork["folder"]
    assert int(fork["initialized"]) > 0
    ours = _ours(fork["checkpoint"])
    deltas = {key: float(np.abs(fork[key] - ours[key].numpy()).max())
              for key in ("sequence_output", "pooled_output")}
    print("max |delta| reference (bert_tf2.tf1, graph) vs ours (eager): %s" % deltas)
    assert max(deltas.values()) <= 1e-5, deltas


def test_the_references_tokenizer_equals_ours(fork):
    ours = []
    for lower in (True, False):
        tokenizer = tokenization.FullTokenizer(vocab_file=fork["vocab"], do_lower_case=lower)
        ours += [tokenizer.tokenize(text) for text in TEXTS]
    assert json.loads(str(fork["tokens"])) == ours
    assert ours[0][:4] == ["hello", ",", "world", "!"]


def test_the_references_optimizer_trains_a_step_in_graph_mode(fork):
    assert int(fork["step"]) == 1
    assert float(fork["kernel_change"]) > 0
    assert [str(s) for s in fork["slots"]] == ["bert/embeddings/LayerNorm/beta/adam_m:0",
                                               "bert/embeddings/LayerNorm/beta/adam_v:0"]


def test_the_references_classifier_records_and_batches_equal_ours(fork, tmp_path):
    # The same records from our writer, and our input_fn's batches from the
    # reference's file: the same rows (ours pads the last eval batch with is_real_example 0).
    tokenizer = tokenization.FullTokenizer(vocab_file=fork["vocab"], do_lower_case=True)
    examples = [run_classifier.InputExample(guid="dev-%d" % i, text_a=a, text_b=b, label=label)
                for i, (a, b, label) in enumerate(PAIRS)]
    ours = str(tmp_path / "dev.tf_record")
    run_classifier.file_based_convert_examples_to_features(examples, ["0", "1"], 16,
                                                           tokenizer, ours)
    records = [[tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(path)]
               for path in (ours, os.path.join(fork["folder"], "dev.tf_record"))]
    assert len(records[0]) == 5 and records[0] == records[1]  # maps compared by key
    assert fork["sizes_drop0"].tolist() == [2, 2, 1]
    assert fork["sizes_drop1"].tolist() == [2, 2]
    batches = list(run_classifier.file_based_input_fn_builder(
        os.path.join(fork["folder"], "dev.tf_record"), 16, False, False)(
            {"batch_size": 2}).as_numpy_iterator())
    real = np.concatenate([b["is_real_example"] for b in batches]) == 1
    for key in ("input_ids", "input_mask", "segment_ids", "label_ids", "is_real_example"):
        np.testing.assert_array_equal(
            np.concatenate([b[key] for b in batches])[real], fork["records_drop0_" + key])
        np.testing.assert_array_equal(fork["records_drop1_" + key],
                                      fork["records_drop0_" + key][:4])
