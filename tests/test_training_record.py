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
from bert_tf2.trainer import training_record
from bert_tf2.trainer import written_files
from conftest import write_text
from test_training import absl_records  # noqa: F401

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


def test_a_run_records_resumes_the_same_refuses_continues_and_restarts(tmp_path,
                                                                        absl_records):
    out = tmp_path / "out"
    first = _run(tmp_path)
    assert (first.steps_trained, first.global_step) == (2, 2)
    record = json.loads((out / training_record.RECORD_FILE).read_text())
    assert len(record["runs"]) == 1 and record["runs"][0]["from_step"] == 0
    saved = record["runs"][0]["settings"]
    assert saved["learning_rate"] == 5e-5 and saved["train_batch_size"] == 4
    assert saved["max_seq_length"] == 16 and saved["task_name"] == "sst-2"
    assert saved["num_train_epochs"] == 1.0 and saved["seed"] == 1
    assert saved["train_data"] == training_record.examples_fingerprint(
        run_classifier.Sst2Processor().get_train_examples(str(tmp_path / "sst")))
    assert saved["train_data"].startswith("8 examples, sha256 ")
    assert saved["bert_config_file"] == training_record.file_fingerprint(
        [str(tmp_path / "bert_config.json")])
    assert "data_dir" not in saved  # the data by content, not by place
    assert "trained 2 steps (global step 2)" in [  # a success is not a warning
        r.getMessage() for r in absl_records.records if r.levelname == "INFO"]
    # TensorBoard: real scalars (EventAccumulator.Scalars), one per step.
    events = event_accumulator.EventAccumulator(str(out / "train"))
    events.Reload()
    assert {"loss", "learning_rate"} <= set(events.Tags()["scalars"])
    assert [e.step for e in events.Scalars("loss")] == [1, 2]
    # 10% warm-up of 2 steps is 0 steps: linear decay, 5e-5 * (1 - 1/2) after step 1.
    assert events.Scalars("learning_rate")[0].value == pytest.approx(2.5e-5)

    absl_records.clear()
    again = _run(tmp_path)  # the same settings: silently at its last step
    assert (again.steps_trained, again.global_step) == (0, 2)
    assert _warnings(absl_records) == [
        "trained 0 steps: --output_dir=%s already at step 2" % out]

    # A Settings from Python refuses other settings by default.
    with pytest.raises(ValueError) as refused:
        _run(tmp_path, learning_rate=1e-4, train_batch_size=2)
    assert str(refused.value) == (  # named as a Python caller names fields
        "output_dir=%s holds a checkpoint (step 2) trained with other settings: "
        "learning_rate 5e-05 -> 0.0001, train_batch_size 4 -> 2; use a new output_dir, "
        "existing_checkpoint=restart to start over, or existing_checkpoint=continue to "
        "go on from it" % out)

    # The command line continues as the reference did, with one line.
    values = _files(tmp_path)
    argv = ["--%s=%s" % (k, v) for k, v in values.items() if k != "do_train"] + [
        "--do_train", "--learning_rate=1e-4"]
    fv = flags_common.parse_flags(run_classifier.define_flags, argv)
    assert fv.existing_checkpoint == "continue"
    assert run_classifier.Settings().existing_checkpoint is None  # Python: refuse
    absl_records.clear()
    result = run_classifier.run(fv)
    assert (result.steps_trained, result.global_step) == (0, 2)
    assert _warnings(absl_records) == [
        "--output_dir=%s was trained with other settings (learning_rate 5e-05 -> 0.0001): "
        "continuing from its checkpoint at step 2, 0 steps to train "
        "(--existing_checkpoint=restart starts over)" % out,
        "trained 0 steps: --output_dir=%s already at step 2" % out]
    assert len(training_record.read(out)["runs"]) == 1  # nothing trained with them

    # restart plans before it removes: a refusal leaves the folder as it was.
    def tree():
        return {os.path.relpath(os.path.join(d, f), out): open(os.path.join(d, f), "rb").read()
                for d, _, files in os.walk(out) for f in files}
    before = tree()
    with pytest.raises(ValueError, match="^existing_checkpoint=restart would remove "
                                         "init_checkpoint=%s, the checkpoint the run starts "
                                         "from" % (out / "model.ckpt-2")):
        _run(tmp_path, learning_rate=1e-4, existing_checkpoint="restart",
             init_checkpoint=str(out / "model.ckpt-2"))
    assert tree() == before
    shared = tmp_path / "shared"  # train/ linked to a TensorBoard folder shared with others
    os.rename(out / "train", shared)
    write_text(shared / "events.out.tfevents.9.other", "another run's")
    os.symlink(shared, out / "train")
    before = tree()  # the link not followed
    shared_before = {n: (shared / n).read_bytes() for n in os.listdir(shared)}
    with pytest.raises(ValueError, match="^existing_checkpoint=restart: output_dir=%s: %s is a "
                                         "symbolic link" % (out, out / "train")):
        _run(tmp_path, learning_rate=1e-4, existing_checkpoint="restart")
    assert tree() == before
    assert {n: (shared / n).read_bytes() for n in os.listdir(shared)} == shared_before
    os.remove(out / "train")
    os.rename(shared, out / "train")
    os.remove(out / "train" / "events.out.tfevents.9.other")

    # restart: the user's files and the run's other outputs stay.
    write_text(out / "notes.txt", "mine\n")
    write_text(out / "model.ckpt-notes.txt", "mine too\n")
    write_text(tmp_path / "sst" / "train.tsv", "sentence\tlabel\n" + "a dog .\t0\n" * 8)
    absl_records.clear()
    result = _run(tmp_path, learning_rate=1e-4, existing_checkpoint="restart")
    assert (result.steps_trained, result.global_step) == (2, 2)
    assert (out / "notes.txt").read_text() == "mine\n"
    assert (out / "model.ckpt-notes.txt").read_text() == "mine too\n"
    assert (out / "label_list.txt").exists() and (out / "bert_config.json").exists()
    runs = training_record.read(out)["runs"]
    assert len(runs) == 1 and runs[0]["settings"]["learning_rate"] == 1e-4
    warning = _warnings(absl_records)[0]
    assert warning.startswith("--output_dir=%s was trained with other settings (learning_rate "
                              "5e-05 -> 0.0001, train_data \"8 examples, sha256 " % out)
    # 2 checkpoints (index + data), the state file, the record, train/'s event file
    assert warning.endswith("--existing_checkpoint=restart removed its 7 training files; "
                            "training from step 0")
    events = event_accumulator.EventAccumulator(str(out / "train"))
    events.Reload()
    assert [e.step for e in events.Scalars("loss")] == [1, 2]  # the new run's only


def _fake_folder(folder, values):
    """A folder as training leaves it (files of the right names), with `values` recorded."""
    for name in ("model.ckpt-2.index", "model.ckpt-2.data-00000-of-00001", "checkpoint",
                 "eval_history.jsonl", "best/model.ckpt-1.index", "best/best.json",
                 "best/label_list.txt", "train/events.out.tfevents.1.host",
                 "eval/events.out.tfevents.2.host", "train.tf_record", "label_list.txt",
                 "bert_config.json", "notes.txt", "best/notes.txt", "train/mine.txt",
                 "model.ckpt-2.index.bak"):
        write_text(os.path.join(folder, name), name)
    if values is not None:
        training_record.write(folder, values, 0)
        # What training records writing (written_files): a restart removes only these.
        written_files.note(folder, _TRAINING_WROTE)
        for sub in ("best", "train", "eval"):
            written_files.note_folder(folder, sub)


_TRAINING_WROTE = ("model.ckpt-2.index", "model.ckpt-2.data-00000-of-00001", "checkpoint",
                   "eval_history.jsonl", "best/model.ckpt-1.index", "best/best.json",
                   "best/label_list.txt", "train/events.out.tfevents.1.host",
                   "eval/events.out.tfevents.2.host")


def test_decisions_of_each_mode(tmp_path, absl_records):
    old = {"learning_rate": 5e-5, "train_data": "8 examples, sha256 01", "seed": None}
    new = dict(old, learning_rate=1e-4, train_batch_size=8)  # a setting only one has: not
    folder = str(tmp_path / "f")
    _fake_folder(folder, old)
    for mode in training_record.MODES:  # the same settings: resume, the record as it is
        decision = training_record.decide(folder, dict(old), mode, 2, 4)
        assert (decision.restart, decision.append) == (False, False)
    assert _warnings(absl_records) == []
    with pytest.raises(ValueError, match=r"^--output_dir=\S+ holds a checkpoint \(step 2\) "
                                         r"trained with other settings: learning_rate 5e-05 -> "
                                         r"0.0001; use a new --output_dir"):
        training_record.decide(folder, new, "refuse", 2, 4)
    decision = training_record.decide(folder, new, "continue", 2, 5)
    assert (decision.restart, decision.append) == (False, True)
    assert "continuing from its checkpoint at step 2, 3 steps to train" in \
        _warnings(absl_records)[-1]
    training_record.write(folder, new, 2, decision.record)
    assert [r["from_step"] for r in training_record.read(folder)["runs"]] == [0, 2]
    assert training_record.decide(folder, dict(new), "refuse", 5, 5).append is False

    # A file of the user's in best/ would outlive the restart and stop the new run:
    # refused before anything is removed.
    with pytest.raises(ValueError, match="holds notes.txt in best/, which training did not "
                                         "write; .* nothing was removed$"):
        training_record.decide(folder, old, "restart", 5, 5)
    assert os.path.exists(os.path.join(folder, "best", "model.ckpt-1.index"))
    os.remove(os.path.join(folder, "best", "notes.txt"))
    decision = training_record.decide(folder, old, "restart", 5, 5)
    assert (decision.restart, decision.record) == (True, None)
    left = sorted(os.path.relpath(os.path.join(d, f), folder)
                  for d, _, files in os.walk(folder) for f in files)
    assert left == ["bert_config.json", "label_list.txt",
                    "model.ckpt-2.index.bak", "notes.txt", "train.tf_record",
                    "train/mine.txt", written_files.FILE]
    assert not os.path.exists(os.path.join(folder, "best"))
    assert not os.path.exists(os.path.join(folder, "eval"))  # emptied: removed

    # No record (an earlier version's folder): continue with a note, whatever the mode
    # but restart, which cannot tell the tool's files from others.
    bare = str(tmp_path / "bare")
    _fake_folder(bare, None)
    absl_records.clear()
    for mode in ("continue", "refuse"):
        decision = training_record.decide(bare, new, mode, 2, 4)
        assert (decision.restart, decision.append) == (False, False)
    assert _warnings(absl_records) == [
        "--output_dir=%s has no training_record.json (trained by an earlier version): "
        "continuing from its checkpoint at step 2" % bare] * 2
    with pytest.raises(ValueError, match="has a checkpoint but no training_record.json"):
        training_record.decide(bare, new, "restart", 2, 4)
    assert os.path.exists(os.path.join(bare, "model.ckpt-2.index"))


def test_recorded_values_are_json_whatever_the_caller_passed(tmp_path):
    import pathlib
    config = write_text(tmp_path / "bert_config.json", json.dumps(_CONFIG))
    part = run_classifier.Settings(
        task_name="sst-2", bert_config_file=pathlib.Path(config), learning_rate=np.float32(0.5),
        init_checkpoint=tmp_path / "init").part(*training_record.SETTINGS)
    values = training_record.of(part, files=[pathlib.Path(config)])
    assert json.loads(json.dumps(values)) == values
    assert values["init_checkpoint"] == str(tmp_path / "init")
    assert values["learning_rate"] == 0.5 and type(values["learning_rate"]) is float
    assert values["bert_config_file"] == values["train_data"] == \
        training_record.file_fingerprint([config])
    assert values["bert_config_file"].startswith("%d bytes, sha256 " % len(json.dumps(_CONFIG)))


def test_fingerprints_follow_the_content():
    a = [run_classifier.InputExample("train-0", "a dog .", None, "0")]
    b = [run_classifier.InputExample("train-0", "a dog .", None, "1")]
    assert training_record.examples_fingerprint(a) == training_record.examples_fingerprint(
        [run_classifier.InputExample("train-0", "a dog .", None, "0")])
    assert training_record.examples_fingerprint(a) != training_record.examples_fingerprint(b)
    assert training_record.examples_fingerprint(a).startswith("1 examples, sha256 ")


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
