"""Settings: every face's flags as a dataclass, parts of it, and the README's "From Python"."""
import dataclasses
import json
import os
import re

import pytest
import tensorflow as tf
import tf_keras

from absl import flags

import create_pretraining_data
import create_vocab
import convert_hf_checkpoint
import convert_tf1_checkpoint
import export_saved_model
import extract_features
import modeling
import run_classifier
import run_multiple_choice
import run_ner
import run_pretraining
import run_squad
from bert_tf2 import flags_common
from bert_tf2 import settings as settings_lib
from bert_tf2.trainer import checkpoints
from conftest import REPO_ROOT, write_text

FACES = [create_pretraining_data, create_vocab, convert_hf_checkpoint, convert_tf1_checkpoint,
         export_saved_model, extract_features, run_classifier, run_multiple_choice, run_ner,
         run_pretraining, run_squad]


@pytest.mark.parametrize("face", FACES, ids=lambda m: m.__name__)
def test_settings_fields_are_the_flags(face):
    fv = flags.FlagValues()
    face.define_flags(fv)
    names = {name for name in fv if fv[name].name == name}
    fields = {f.name: f for f in dataclasses.fields(face.Settings)}
    assert set(fields) == names
    default = face.Settings()
    for name in names:
        assert getattr(default, name) == fv[name].default, name
        assert fv[name].help in face.Settings.__doc__
    # A field name never hides what every settings object can do.
    assert not [name for name in names if hasattr(settings_lib.Settings, name)]
    assert callable(face.run)


def test_given_means_named_by_the_user():
    on_line = flags_common.parse_flags(run_classifier.define_flags,
                                       ["--max_seq_length=128", "--do_train"])
    for settings in (run_classifier.Settings.of(on_line),
                     run_classifier.Settings(max_seq_length=128, do_train=True)):
        assert settings.given("max_seq_length") and settings.given("do_train")
        assert not settings.given("do_lower_case") and not settings.given("do_eval")
        filled = settings.with_defaults({"max_seq_length": 64, "do_lower_case": False})
        assert (filled.max_seq_length, filled.do_lower_case) == (128, False)
        assert not filled.given("do_lower_case")
        part = settings.part("max_seq_length", "do_lower_case", "no_such_flag", "do_train")
        assert [f.name for f in dataclasses.fields(part)] == ["max_seq_length",
                                                              "do_lower_case", "do_train"]
        assert part.given("do_train") and not part.given("do_lower_case")
        assert part.flag("do_lower_case") == "--do_lower_case"
        assert part.flag("max_seq_length") == "--max_seq_length=128"
        assert "no_such_flag" not in part and "do_train" in part


def test_a_mode_refuses_the_fields_only_another_mode_reads():
    only = {"from_hf": ("hf_dir", "write_tf2"), "to_hf": ("init_checkpoint", "labels_file")}
    settings = convert_hf_checkpoint.Settings(direction="to_hf", init_checkpoint="m",
                                              hf_dir="x")
    with pytest.raises(ValueError, match="^--hf_dir=x has no effect with --direction=to_hf$"):
        settings.refuse_other_modes("direction", only)
    # The chosen mode's own fields, and another mode's left at their defaults, pass.
    settings.replace(hf_dir=None).refuse_other_modes("direction", only)
    convert_hf_checkpoint.Settings(direction="from_hf", hf_dir="x", write_tf2=True,
                                   labels_file=None).refuse_other_modes("direction", only)
    with pytest.raises(ValueError, match="^--write_tf2 has no effect with --direction=to_hf"):
        settings.replace(hf_dir=None, write_tf2=True).refuse_other_modes("direction", only)


def test_settings_are_checked_and_copied_by_run():
    # A Python caller reads the fields' names (the command line: --eval_batch_size=0), as
    # soon as the Settings is made.
    with pytest.raises(ValueError, match=r"^eval_batch_size=0 must be >= 1$"):
        run_classifier.Settings(eval_batch_size=0)
    with pytest.raises(ValueError, match=r"^data_dir is required$"):
        run_classifier.run(run_classifier.Settings(task_name="mrpc"))
    mine = run_classifier.Settings(task_name="mrpc")
    assert run_classifier.Settings.of(mine) is not mine
    with pytest.raises(TypeError, match="has no field nope"):
        mine.replace(nope=1)
    with pytest.raises(TypeError, match="run_classifier.Settings or absl FlagValues"):
        run_classifier.Settings.of({"task_name": "mrpc"})


# ---------------------------------------------------------------------------
# The README's "From Python" block, run as written (twice: train + evaluate, predict)
# ---------------------------------------------------------------------------

_WORDS = ["good", "great", "fine", "bad", "awful", "poor", "the", "screen", "battery", "is",
          "was", "very", "not"]
_CONFIG = {"vocab_size": 5 + len(_WORDS), "hidden_size": 16, "num_hidden_layers": 1,
           "num_attention_heads": 2, "intermediate_size": 32, "hidden_act": "gelu",
           "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
           "max_position_embeddings": 64, "type_vocab_size": 2, "initializer_range": 0.02}


def _readme_block(title):
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## %s\n" % title):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def _reviews(folder):
    rows = []
    for i in range(24):
        good = i % 2 == 0
        words = ["the", "screen" if i % 3 else "battery", "is" if i % 4 else "was",
                 "very" if i % 5 else "not", _WORDS[(i // 2) % 3 + (0 if good else 3)]]
        rows.append('%d,"%s",%s\n' % (i, " ".join(words), "positive" if good else "negative"))
    for name, part in (("train", rows[:16]), ("dev", rows[16:]), ("test", rows[16:])):
        write_text(os.path.join(folder, "%s.csv" % name), "id,text,label\n" + "".join(part))


def _eval_results(path):
    """{key: float} of an eval_results.txt ("key = value" lines)."""
    with open(path) as f:
        return dict((key, float(value)) for key, value in
                    (line.strip().split(" = ") for line in f if line.strip()))


def _numbers(metrics):
    """The metrics as eval_results.txt prints them, read back."""
    return {key: float("%s" % value) for key, value in metrics.items()}


@pytest.mark.slow
def test_readme_from_python_runs_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _reviews("reviews")
    write_text("model/vocab.txt", "".join(
        t + "\n" for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + _WORDS))
    write_text("model/bert_config.json", json.dumps(_CONFIG))
    # "model" as a pre-trained checkpoint: an encoder's initial weights (no training run).
    encoder = modeling.BertModel(modeling.BertConfig.from_dict(_CONFIG))
    encoder(tf.zeros([1, 4], tf.int32))
    checkpoints.write_tf1_checkpoint(
        {n: v.numpy() for n, v in checkpoints.tf1_variable_map(encoder).items()},
        "model/bert_model.ckpt")
    namespace = {}
    exec(compile(_readme_block("From Python"), "README.md", "exec"), namespace)  # noqa: S102
    result, predicted = namespace["result"], namespace["predicted"]
    assert _numbers(result.metrics) == _eval_results("reviews_out/eval_results.txt")
    assert result.global_step == result.metrics["global_step"] == 8  # 16 x 2 epochs / 4
    assert result.outputs["eval_results"] == os.path.join("reviews_out", "eval_results.txt")
    assert result.best_checkpoint.startswith(os.path.join("reviews_out", "best", "model.ckpt-"))
    assert os.path.exists(result.best_checkpoint + ".index")
    assert predicted.global_step == 8 and predicted.metrics == {}
    with open(predicted.outputs["test_results"]) as f:
        assert len(f.readlines()) == 8
    with open(predicted.outputs["test_predictions"]) as f:  # ids of the csv's id column
        assert [json.loads(line)["id"] for line in f] == [str(i) for i in range(16, 24)]
    assert str(result.metrics["eval_accuracy"]) in capsys.readouterr().out
    # A bf16 run leaves the process's precision policy as it found it.
    before = tf_keras.mixed_precision.global_policy().name
    bf16 = run_classifier.run(run_classifier.Settings(
        do_predict=True, dtype="bf16", output_dir="reviews_out", **{
            k: v for k, v in namespace["task"].items() if k != "output_dir"}))
    assert bf16.outputs["test_results"] == predicted.outputs["test_results"]
    assert tf_keras.mixed_precision.global_policy().name == before == "float32"
