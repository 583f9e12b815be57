"""--keep_checkpoint_max (TF1 RunConfig's) and --keep_best_only: what a run leaves on disk."""
import os
import re

import numpy as np
import pytest
import tensorflow as tf

import run_classifier
from bert_tf2 import fileutil
from bert_tf2 import flags_common
from bert_tf2.trainer import checkpoints
from bert_tf2.trainer import periodic_eval
from bert_tf2.trainer import training
from bert_tf2.trainer import written_files
from test_training import classifier_loss, dataset_fn_of, features, make_runner


def _indexes(folder):
    return sorted((n for n in os.listdir(folder) if n.endswith(".index")),
                  key=lambda n: int(n.split("-")[1].split(".")[0]))


def _train(runner, evaluation=None):
    runner.train(dataset_fn_of(features(8), 4), classifier_loss, evaluation=evaluation)


class _Accuracy:
    """evaluate(runner) with a scripted accuracy per step; raises at `stop_at` (a kill)."""

    def __init__(self, accuracy, stop_at=None):
        self.accuracy = accuracy
        self.stop_at = stop_at

    def __call__(self, runner):
        step = runner.global_step
        if step == self.stop_at:
            raise KeyboardInterrupt()
        return {"eval_accuracy": np.float32(self.accuracy.get(step, 0.5)),
                "eval_loss": np.float32(1.0), "global_step": step}


def _evaluation(accuracy, stop_at=None):
    return periodic_eval.PeriodicEval(_Accuracy(accuracy, stop_at), 2, "eval_accuracy", None,
                                      ["eval_accuracy", "eval_loss"])


@pytest.mark.parametrize("keep,left", [(2, ["model.ckpt-4.index", "model.ckpt-5.index"]),
                                       (0, ["model.ckpt-%d.index" % s for s in range(1, 6)]),
                                       (None, ["model.ckpt-%d.index" % s for s in range(1, 6)])])
def test_keep_checkpoint_max_keeps_the_most_recent(tmp_path, keep, left):
    runner = make_runner(tmp_path, "run", num_train_steps=5, save_checkpoints_steps=1,
                         iterations_per_loop=1, keep_checkpoint_max=keep)
    _train(runner)
    assert _indexes(tmp_path / "run") == left
    # The latest is restored by a rerun (a resumed run finds its step).
    assert make_runner(tmp_path, "run", num_train_steps=5).global_step == 5


def test_a_negative_keep_checkpoint_max_is_one_line(tmp_path):
    with pytest.raises(ValueError, match=r"^--keep_checkpoint_max=-1 must be an integer >= 0"):
        make_runner(tmp_path, "run", keep_checkpoint_max=-1)
    with pytest.raises(ValueError, match=r"keep_checkpoint_max=-1 must be >= 0"):
        run_classifier.Settings(do_train=True, keep_checkpoint_max=-1)
    with pytest.raises(ValueError, match=r"^--keep_checkpoint_max=-2 must be >= 0"):
        flags_common.parse_flags(run_classifier.define_flags, ["--keep_checkpoint_max=-2",
                                                               "--do_train"])


def test_the_flag_and_the_setting_reach_the_run_config():
    fv = flags_common.parse_flags(run_classifier.define_flags, ["--keep_checkpoint_max=2",
                                                                "--keep_best_only"])
    settings = run_classifier.Settings.of(fv)
    assert (settings.keep_checkpoint_max, settings.keep_best_only) == (2, True)
    assert run_classifier.Settings().keep_checkpoint_max == 5  # TF1 RunConfig's default
    config = training.RunConfig.from_settings(
        run_classifier.Settings(keep_checkpoint_max=0, keep_best_only=True).part(
            *training.SETTINGS), output_dir="x")
    assert (config.keep_checkpoint_max, config.keep_best_only) == (0, True)


def test_keep_best_only_needs_a_best():
    with pytest.raises(ValueError, match=r"^--keep_best_only needs --eval_every_n_steps"):
        periodic_eval.check_settings(run_classifier.Settings(
            do_train=True, do_eval=True, keep_best_only=True).part(*periodic_eval.SETTINGS))
    part = run_classifier.Settings(do_train=True, do_eval=True, eval_every_n_steps=2,
                                   keep_best_only=True).part(*periodic_eval.SETTINGS)
    with pytest.raises(ValueError, match=r"^--keep_best_only needs --best_metric"):
        periodic_eval.check_settings(part)
    periodic_eval.check_settings(part.replace(best_metric="eval_accuracy"))
    periodic_eval.check_settings(part.replace(early_stopping_patience=2))


def _names(folder):
    """The files a run left, TensorBoard's events by folder (their names hold a time);
    the lock of the run (its process still holds it) left out."""
    found = []
    for top, _, files in os.walk(str(folder)):
        for name in files:
            rel = os.path.relpath(os.path.join(top, name), str(folder))
            if rel != fileutil.LOCK_FILE:
                found.append(re.sub(r"events\.out\.tfevents\..*", "events", rel))
    return sorted(set(found))


def test_keep_best_only_after_a_stop_leaves_what_a_clean_run_leaves(tmp_path):
    """A stopped run keeps every checkpoint (it resumes from them); once the resumed run
    ends, the folder is the one a clean run leaves: best/ alone, no model.ckpt-N and no
    state file naming a mid-run step (before the fix: model.ckpt-2/4/6 and a state file
    naming step 6 of 8 stayed, served by predict(OUT) and retrained by a rerun)."""
    folder = tmp_path / "run"
    first = make_runner(tmp_path, "run", num_train_steps=8, keep_best_only=True,
                        keep_checkpoint_max=0)
    with pytest.raises(KeyboardInterrupt):
        _train(first, _evaluation({2: 0.5, 4: 0.9}, stop_at=6))
    assert _indexes(folder) == ["model.ckpt-2.index", "model.ckpt-4.index",
                                "model.ckpt-6.index"]
    resumed = make_runner(tmp_path, "run", num_train_steps=8, keep_best_only=True,
                          keep_checkpoint_max=0)
    assert resumed.global_step == 6
    _train(resumed, _evaluation({6: 0.6, 8: 0.95}))
    assert _indexes(folder) == [] and not (folder / "checkpoint").exists()
    assert _indexes(folder / "best") == ["model.ckpt-8.index"]
    # What a clean run leaves (test_a_rerun_of_a_finished_keep_best_only_run_...).
    assert _names(folder) == [
        "best/best.json", "best/checkpoint", "best/model.ckpt-8.data-00000-of-00001",
        "best/model.ckpt-8.index", "eval/events", "eval_history.jsonl", "train/events",
        written_files.FILE]
    # What serves the folder names best/ in one line; a rerun trains nothing.
    for out in (folder,):
        with pytest.raises(ValueError, match=r"^no checkpoint found in directory "
                                             r"--init_checkpoint=\S+: its model is \S+/best/"
                                             r"model.ckpt-8, the best checkpoint a "
                                             r"--keep_best_only run keeps .*: use \S+/best$"):
            checkpoints.resolve_checkpoint(str(out), "--init_checkpoint")
        with pytest.raises(ValueError, match=r"no checkpoint to restore: .*its model is \S+/best/"
                                             r"model.ckpt-8"):
            make_runner(tmp_path, out.name, num_train_steps=8, keep_best_only=True)


def test_keep_best_only_removes_no_checkpoint_training_did_not_record(tmp_path):
    """A checkpoint in the folder that training did not record writing (the user's, put
    there during the run) stays; training's own go."""
    folder = tmp_path / "run"
    runner = make_runner(tmp_path, "run", num_train_steps=4, keep_best_only=True,
                         keep_checkpoint_max=0)
    runner.train(dataset_fn_of(features(8), 4), classifier_loss,
                 evaluation=_evaluation({2: 0.9, 4: 0.5}))
    assert _indexes(folder) == []
    # The user's checkpoint of the same model (written by TensorFlow, not by a training).
    tf.train.Checkpoint(model=runner.model, optimizer=runner.optimizer).write(
        str(folder / "model.ckpt-9"))
    assert checkpoints.remove_written_checkpoints(str(folder)) == 0
    assert _indexes(folder) == ["model.ckpt-9.index"]


def test_keep_best_only_without_a_best_keeps_the_checkpoints(tmp_path, caplog):
    runner = make_runner(tmp_path, "run", num_train_steps=4, keep_best_only=True)
    _train(runner, _evaluation({2: float("nan"), 4: float("nan")}))
    assert _indexes(tmp_path / "run") == ["model.ckpt-2.index", "model.ckpt-4.index"]
    assert not (tmp_path / "run" / "best").exists()


def _contents(folder):
    """{relative name: bytes} of a folder's files, the run's lock left out."""
    return {rel: (folder / rel).read_bytes() for rel in
            (os.path.relpath(os.path.join(top, n), str(folder))
             for top, _, files in os.walk(str(folder)) for n in files)
            if rel != fileutil.LOCK_FILE}


def test_a_rerun_of_a_finished_keep_best_only_run_trains_nothing_and_serves_best(tmp_path):
    """Issue 72 item 2: the same command rerun in a folder a --keep_best_only run
    finished (best/ and the records alone) trains nothing, changes no file, and
    evaluates / predicts with best/'s model (before the fix: refused, "no checkpoint to
    restore"). A folder not proven finished with these settings is still refused. First,
    what the run leaves (best/ alone, no optimizer slots), checked on the same training."""
    values = {"learning_rate": 0.01, "train_data": "8 examples, sha256 0123"}
    folder = tmp_path / "run"

    def runner(record=values, steps=8):
        return make_runner(tmp_path, "run", num_train_steps=steps, keep_best_only=True,
                           keep_checkpoint_max=0, record=dict(record))
    first = runner()
    _train(first, _evaluation({2: 0.5, 4: 0.9, 6: 0.6, 8: 0.7}))
    # What the run leaves: best/ alone, without the optimizer's slots; no model.ckpt-N and
    # no state file naming what is gone.
    assert _indexes(folder) == [] and _indexes(folder / "best") == ["model.ckpt-4.index"]
    assert not [n for n in os.listdir(folder) if n.startswith("model.ckpt")]
    assert not (folder / "checkpoint").exists()
    assert _names(folder) == sorted([
        "best/best.json", "best/checkpoint", "best/model.ckpt-4.data-00000-of-00001",
        "best/model.ckpt-4.index", "eval/events", "eval_history.jsonl", "train/events",
        "training_record.json", written_files.FILE])
    names = [name for name, _ in tf.train.list_variables(str(folder / "best" / "model.ckpt-4"))]
    assert names and not [n for n in names if "optimizer" in n]
    assert first.global_step == 8  # the trained model stays in memory for eval / predict
    # A rerun with no record of these settings is refused in one line (best/ has no
    # checkpoint to resume), never a silent start from step 0.
    with pytest.raises(ValueError, match="no checkpoint to restore"):
        make_runner(tmp_path, "run", num_train_steps=8)
    before = _contents(folder)
    rerun = runner()
    assert (rerun.global_step, rerun.restored_from) == (4, str(folder / "best" / "model.ckpt-4"))
    # The model is best/'s: the one a run that does not train loads from OUT/best.
    served = make_runner(tmp_path, "served", num_train_steps=0,
                         init_checkpoint=str(folder / "best"))
    assert len(rerun.model.variables) == len(served.model.variables)
    for mine, theirs in zip(rerun.model.variables, served.model.variables):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    assert rerun.train(dataset_fn_of(features(8), 4), classifier_loss,
                       evaluation=_evaluation({})) == {}
    assert rerun.steps_trained == 0
    assert rerun.global_step == 4 and _contents(folder) == before  # nothing trained or written
    # Other settings, or a folder whose finish is not proven: refused as before.
    with pytest.raises(ValueError, match="no checkpoint to restore"):
        runner(dict(values, learning_rate=0.02))
    best_json = folder / "best" / "best.json"
    best_json.write_text(best_json.read_text().replace("0.9", "0.95"))
    with pytest.raises(ValueError, match="no checkpoint to restore"):
        runner()
    best_json.write_bytes(before["best/best.json"])
    runner()  # proven again
    record = folder / "training_record.json"
    record.write_text(record.read_text().replace('"finished"', '"ended"'))
    with pytest.raises(ValueError, match="no checkpoint to restore"):
        runner()


def test_a_kill_right_after_best_is_renamed_in_still_finishes_provably(tmp_path, monkeypatch):
    """Issue 91 item 7: --keep_best_only killed right after the new best/ took its place
    (before training recorded its files): the rerun ends clean, and the same command a
    third time trains 0 steps (before the fix: refused, "no checkpoint to restore", as
    best/'s files were never recorded)."""
    values = {"learning_rate": 0.01, "train_data": "8 examples, sha256 0123"}
    folder = tmp_path / "run"

    def runner():
        return make_runner(tmp_path, "run", num_train_steps=8, keep_best_only=True,
                           keep_checkpoint_max=0, record=dict(values))
    real = tf.io.gfile.rename

    def killed_after_best_is_in(source, target, *args, **kwargs):
        real(source, target, *args, **kwargs)
        if target.endswith("/best") and fileutil.is_temporary(source):
            raise KeyboardInterrupt()
    with monkeypatch.context() as patch:
        patch.setattr(tf.io.gfile, "rename", killed_after_best_is_in)
        with pytest.raises(KeyboardInterrupt):
            _train(runner(), _evaluation({2: 0.5, 4: 0.9}))
    assert _indexes(folder / "best") == ["model.ckpt-2.index"]
    _train(runner(), _evaluation({2: 0.5, 4: 0.4, 6: 0.3, 8: 0.2}))
    assert _indexes(folder) == [] and _indexes(folder / "best") == ["model.ckpt-2.index"]
    third = runner()
    assert third.global_step == 2 and third.finished
    assert third.train(dataset_fn_of(features(8), 4), classifier_loss,
                       evaluation=_evaluation({})) == {}
    assert third.steps_trained == 0
