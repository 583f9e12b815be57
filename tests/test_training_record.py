"""training_record.py: one meaning per output_dir (continue / refuse / restart), the
Result of a training run (steps_trained, eval_history, best, to_dict), TensorBoard
scalars every reader sees."""
import json
import os

import numpy as np
import pytest
from tensorboard.backend.event_processing import event_accumulator

import run_classifier
from bert_tf2 import flags_common
from bert_tf2 import settings as settings_lib
from bert_tf2.trainer import periodic_eval
from bert_tf2.trainer import training
from bert_tf2.trainer import training_record
from conftest import write_text
from test_training import (absl_records, classifier_loss, dataset_fn_of,  # noqa: F401
                           features, make_runner)

_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "a", "dog", "."]
_CONFIG = {"vocab_size": len(_VOCAB), "hidden_size": 16, "num_hidden_layers": 1,
           "num_attention_heads": 2, "intermediate_size": 32, "hidden_act": "gelu",
           "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
           "max_position_embeddings": 32, "type_vocab_size": 2, "initializer_range": 0.02}


def _files(tmp_path):
    """{flag: value} of a tiny SST-2 run: 8 training examples, batch 4 (2 steps an epoch)."""
    vocab = write_text(tmp_path / "vocab.txt", "\n".join(_VOCAB) + "\n")
    config = write_text(tmp_path / "bert_config.json", json.dumps(_CONFIG))
    rows = "".join("%s\t%d\n" % ("the cat sat ." if i % 2 else "a dog .", i % 2)
                   for i in range(8))
    for name in ("train", "dev"):
        if not (tmp_path / "sst" / (name + ".tsv")).exists():  # a test's change stays
            write_text(tmp_path / "sst" / (name + ".tsv"), "sentence\tlabel\n" + rows)
    return dict(task_name="sst-2", data_dir=str(tmp_path / "sst"), vocab_file=vocab,
                bert_config_file=config, output_dir=str(tmp_path / "out"), max_seq_length=16,
                do_train=True, train_batch_size=4, num_train_epochs=1.0, seed=1,
                save_checkpoints_steps=1)


def _run(tmp_path, **values):
    return run_classifier.run(run_classifier.Settings(**dict(_files(tmp_path), **values)))


def _warnings(records):
    return [r.getMessage() for r in records.records if r.levelname == "WARNING"]


def test_python_default_refuses_other_settings_and_resumes_the_same(tmp_path, absl_records):
    out = tmp_path / "out"
    first = _run(tmp_path)
    assert (first.steps_trained, first.global_step) == (2, 2)
    record = json.loads((out / training_record.RECORD_FILE).read_text())
    assert len(record["runs"]) == 1 and record["runs"][0]["from_step"] == 0
    saved = record["runs"][0]["settings"]
    assert saved["learning_rate"] == 5e-5 and saved["train_batch_size"] == 4
    assert saved["max_seq_length"] == 16 and saved["task_name"] == "sst-2"
    assert saved["num_train_epochs"] == 1.0 and saved["seed"] == 1
    assert saved["train_data"].startswith("8 examples, sha256 ")
    assert saved["bert_config_file"] == training_record.file_fingerprint(
        [str(tmp_path / "bert_config.json")])
    assert "data_dir" not in saved  # the data by content, not by place
    assert "trained 2 steps (global step 2)" in _warnings(absl_records)

    absl_records.clear()
    again = _run(tmp_path)  # the same settings: silently at its last step
    assert (again.steps_trained, again.global_step) == (0, 2)
    assert _warnings(absl_records) == [
        "trained 0 steps: --output_dir=%s already at step 2" % out]

    with pytest.raises(ValueError) as refused:
        _run(tmp_path, learning_rate=1e-4, train_batch_size=2)
    assert "\n" not in str(refused.value)
    assert str(refused.value) == (
        "--output_dir=%s holds a checkpoint (step 2) trained with other settings: "
        "learning_rate 5e-05 -> 0.0001, train_batch_size 4 -> 2; use a new --output_dir, "
        "--existing_checkpoint=restart to start over, or --existing_checkpoint=continue to "
        "go on from it" % out)
    # Other training data is another model too.
    write_text(tmp_path / "sst" / "train.tsv", "sentence\tlabel\n" + "a dog .\t0\n" * 8)
    with pytest.raises(ValueError, match=r"train_data \"8 examples, sha256 [0-9a-f]{16}\" -> "
                                         r"\"8 examples, sha256 [0-9a-f]{16}\""):
        _run(tmp_path)


def test_continue_warns_and_restart_removes_only_the_training_files(tmp_path, absl_records):
    out = tmp_path / "out"
    _run(tmp_path)
    absl_records.clear()
    # continue: the reference's way, one line naming the difference; nothing to train.
    result = _run(tmp_path, learning_rate=1e-4, existing_checkpoint="continue")
    assert (result.steps_trained, result.global_step) == (0, 2)
    assert _warnings(absl_records) == [
        "--output_dir=%s was trained with other settings (learning_rate 5e-05 -> 0.0001): "
        "continuing from its checkpoint at step 2, 0 steps to train "
        "(--existing_checkpoint=restart starts over)" % out,
        "trained 0 steps: --output_dir=%s already at step 2" % out]
    # More epochs under continue: trained, and the record keeps both runs.
    result = _run(tmp_path, num_train_epochs=2.0, existing_checkpoint="continue")
    assert (result.steps_trained, result.global_step) == (2, 4)
    runs = json.loads((out / training_record.RECORD_FILE).read_text())["runs"]
    assert [(r["from_step"], r["settings"]["num_train_epochs"]) for r in runs] == [
        (0, 1.0), (2, 2.0)]
    assert _run(tmp_path, num_train_epochs=2.0).steps_trained == 0  # the last run's: same

    # restart: the user's file and the run's other outputs stay.
    write_text(out / "notes.txt", "mine\n")
    write_text(out / "model.ckpt-notes.txt", "mine too\n")
    absl_records.clear()
    result = _run(tmp_path, learning_rate=1e-4, existing_checkpoint="restart")
    assert (result.steps_trained, result.global_step) == (2, 2)
    assert (out / "notes.txt").read_text() == "mine\n"
    assert (out / "model.ckpt-notes.txt").read_text() == "mine too\n"
    assert (out / "label_list.txt").exists() and (out / "bert_config.json").exists()
    assert not (out / "model.ckpt-4.index").exists()
    assert sorted(p.name for p in out.glob("model.ckpt-*.index")) == [
        "model.ckpt-1.index", "model.ckpt-2.index"]
    runs = json.loads((out / training_record.RECORD_FILE).read_text())["runs"]
    assert len(runs) == 1 and runs[0]["settings"]["learning_rate"] == 1e-4
    assert any(w.startswith("--output_dir=%s was trained with other settings (learning_rate "
                            "5e-05 -> 0.0001, num_train_epochs 2.0 -> 1.0): "
                            "--existing_checkpoint=restart removed its " % out)
               for w in _warnings(absl_records))


def test_command_line_default_continues_as_the_reference(tmp_path, absl_records):
    values = _files(tmp_path)
    argv = ["--%s=%s" % (k, v) for k, v in values.items() if k != "do_train"] + ["--do_train"]
    fv = flags_common.parse_flags(run_classifier.define_flags, argv)
    assert fv.existing_checkpoint == "continue"
    assert run_classifier.Settings().existing_checkpoint is None  # Python: refuse
    assert run_classifier.run(fv).steps_trained == 2
    absl_records.clear()
    fv = flags_common.parse_flags(run_classifier.define_flags, argv + ["--learning_rate=1e-4"])
    result = run_classifier.run(fv)
    assert (result.steps_trained, result.global_step) == (0, 2)
    assert "continuing from its checkpoint at step 2" in _warnings(absl_records)[0]


def test_a_folder_without_a_record_continues_with_a_note(tmp_path, absl_records):
    out = tmp_path / "out"
    _run(tmp_path)
    os.remove(out / training_record.RECORD_FILE)  # as an earlier version left it
    absl_records.clear()
    result = _run(tmp_path, learning_rate=1e-4)  # even under the Python default
    assert (result.steps_trained, result.global_step) == (0, 2)
    assert _warnings(absl_records)[0] == (
        "--output_dir=%s has no training_record.json (trained by an earlier version): "
        "continuing from its checkpoint at step 2" % out)
    with pytest.raises(ValueError, match="has a checkpoint but no training_record.json"):
        _run(tmp_path, learning_rate=1e-4, existing_checkpoint="restart")
    assert (out / "model.ckpt-2.index").exists()


def test_an_interrupted_run_resumes_silently_with_the_same_settings(tmp_path, monkeypatch,
                                                                    absl_records):
    values = {"learning_rate": 0.01, "train_data": "8 examples, sha256 0123"}

    def runner():
        return make_runner(tmp_path, "run", num_train_steps=4, save_checkpoints_steps=2,
                           iterations_per_loop=1, record=dict(values))
    first = runner()
    log_progress = first._log_progress

    def ctrl_c(writer, step, *args):
        log_progress(writer, step, *args)
        if step == 3:
            raise KeyboardInterrupt
    monkeypatch.setattr(first, "_log_progress", ctrl_c)
    with pytest.raises(training.Interrupted):
        first.train(dataset_fn_of(features(8), 4), classifier_loss)
    absl_records.clear()
    second = runner()  # the Python default (refuse): the same settings resume
    assert second.global_step == 2
    second.train(dataset_fn_of(features(8), 4), classifier_loss)
    assert (second.steps_trained, second.global_step) == (2, 4)
    assert _warnings(absl_records) == ["trained 2 steps (global step 4)"]
    runs = training_record.read(tmp_path / "run")["runs"]
    assert runs == [{"from_step": 0, "settings": values}]
    # TensorBoard: real scalars (EventAccumulator.Scalars), one per step of both calls.
    events = event_accumulator.EventAccumulator(str(tmp_path / "run" / "train"))
    events.Reload()
    assert {"loss", "learning_rate"} <= set(events.Tags()["scalars"])
    assert [e.step for e in events.Scalars("loss")] == [1, 2, 3, 3, 4]
    assert events.Scalars("learning_rate")[0].value == pytest.approx(0.01 * 3 / 4)


def test_result_has_the_history_the_best_and_plain_json_values(tmp_path):
    result = _run(tmp_path, do_eval=True, eval_every_n_steps=1, best_metric="eval_accuracy")
    assert result.steps_trained == 2
    assert [r["global_step"] for r in result.eval_history] == [1, 2]
    history = periodic_eval.read_history(os.path.join(result.output_dir, "eval_history.jsonl"))
    assert result.eval_history == history
    best = max(history, key=lambda r: (r["eval_accuracy"], -r["global_step"]))
    assert result.best_metric == {"metric": "eval_accuracy", "value": best["eval_accuracy"],
                                  "global_step": best["global_step"]}
    assert result.best_checkpoint.endswith("best/model.ckpt-%d" % best["global_step"])
    assert all(type(v) in (float, int) for v in result.metrics.values())
    assert type(result.metrics["global_step"]) is int
    text = open(os.path.join(result.output_dir, "eval_results.txt")).read()
    assert "eval_accuracy = %r\n" % result.metrics["eval_accuracy"] in text
    loaded = json.loads(json.dumps(result.to_dict()))
    assert loaded["steps_trained"] == 2 and loaded["eval_history"] == history
    assert loaded["metrics"] == result.metrics
    # The evaluations' TensorBoard scalars: real ones too.
    events = event_accumulator.EventAccumulator(os.path.join(result.output_dir, "eval"))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("eval_accuracy")] == [
        (r["global_step"], pytest.approx(r["eval_accuracy"])) for r in history]


def test_result_values_become_plain_python():
    result = settings_lib.Result(output_dir=None, metrics={
        "eval_accuracy": np.float32(0.6671585), "global_step": np.int64(3)})
    result.update({"steps_trained": np.int32(2), "output_dir": __import__("pathlib").Path("/x")})
    assert result.metrics == {"eval_accuracy": 0.6671585, "global_step": 3}
    assert type(result.metrics["eval_accuracy"]) is float
    assert type(result.steps_trained) is int and result.output_dir == "/x"
    assert json.loads(json.dumps(result.to_dict()))["metrics"]["eval_accuracy"] == 0.6671585
    with pytest.raises(TypeError, match="no field nonsense"):
        result.update({"nonsense": 1})
