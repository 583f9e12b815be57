"""periodic_eval.py: evaluation during training, the best checkpoint, early stopping, resume."""
import json
import os
import signal

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bert_tf2 import fileutil
from bert_tf2 import heads
from bert_tf2.tasks import long_text
from bert_tf2.tasks import pooling
from bert_tf2.trainer import checkpoints
from bert_tf2.trainer import periodic_eval
from conftest import write_text
from bert_tf2.trainer import training
from test_training import (absl_records, classifier_loss, dataset_fn_of,  # noqa: F401
                           features, make_runner, tiny_config)


class _Killed(Exception):
    """Stands for a kill of the process in the middle of an evaluation."""


class _Scripted:
    """evaluate(runner): a real forward pass over a dev set, the accuracy from a script.

    Keeps the weights seen at each step and counts how often the predict step is traced.
    """

    def __init__(self, accuracy, kill_at=None):
        self.accuracy = accuracy
        self.kill_at = kill_at
        self.weights = {}
        self.traces = 0
        self.dev = features(6, seed=3)

    def predict_fn(self, model, feats):
        self.traces += 1  # Python runs only while tracing
        logits = model(feats)["logits"]
        return {"loss": tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=feats["label_ids"], logits=logits)}

    def __call__(self, runner):
        step = runner.global_step
        if step == self.kill_at:
            raise _Killed()
        self.weights[step] = [v.numpy() for v in runner.model.variables]
        dataset_fn = lambda ctx=None: tf.data.Dataset.from_tensor_slices(self.dev).batch(4)
        losses = np.concatenate([o["loss"] for o in runner.predict(dataset_fn,
                                                                   self.predict_fn)])
        return {"eval_accuracy": np.float32(self.accuracy[step]),
                "eval_loss": np.float32(losses.mean()), "global_step": step}


def _evaluation(script, patience=3, metric="eval_accuracy"):
    return periodic_eval.PeriodicEval(script, 2, metric, patience,
                                      ["eval_accuracy", "eval_loss"])


def _history(folder):
    with open(os.path.join(folder, periodic_eval.HISTORY_FILE)) as f:
        return [json.loads(line) for line in f]


def _best_weights(folder):
    model = heads.BertClassifier(tiny_config(), 2)
    model(heads.dummy_features())
    checkpoints.load_checkpoint(model, folder)
    return [v.numpy() for v in model.variables]


def test_history_best_checkpoint_and_early_stopping(tmp_path, absl_records):
    script = _Scripted({2: 0.5, 4: 0.75, 6: 0.7, 8: 0.75, 10: 0.6, 12: 0.9})
    runner = make_runner(tmp_path, "run", num_train_steps=20)
    write_text(tmp_path / "run" / fileutil.LABEL_LIST_FILE, "0\n1\n")
    runner.train(dataset_fn_of(features(8), 4), classifier_loss,
                 evaluation=_evaluation(script))
    # 4 is the best; 6, 8 (equal is no improvement) and 10 are not: stopped at 10 of 20.
    assert runner.global_step == 10
    history = _history(tmp_path / "run")
    assert [r["global_step"] for r in history] == [2, 4, 6, 8, 10]
    assert [r["eval_accuracy"] for r in history] == [0.5, 0.75, 0.7, 0.75, 0.6]
    # Numbers as eval_results.txt prints them: a float32's shortest text.
    assert all(repr(r["eval_loss"]) == str(np.float32(r["eval_loss"])) for r in history)
    best = tmp_path / "run" / "best"
    assert json.loads((best / "best.json").read_text()) == {
        "metric": "eval_accuracy", "value": 0.75, "global_step": 4}
    assert sorted(n for n in os.listdir(best) if n.endswith(".index")) == ["model.ckpt-4.index"]
    assert (best / fileutil.LABEL_LIST_FILE).read_text() == "0\n1\n"
    assert checkpoints.checkpoint_step(str(best)) == 4
    for got, want in zip(_best_weights(str(best)), script.weights[4]):
        np.testing.assert_array_equal(got, want)
    assert not np.array_equal(script.weights[4][0], script.weights[10][0])
    # Every evaluation's step is a checkpoint, the last one the latest.
    assert tf.train.latest_checkpoint(str(tmp_path / "run")).endswith("model.ckpt-10")
    assert script.traces == 1  # five evaluations, one traced predict step
    assert os.listdir(tmp_path / "run" / "eval")  # TensorBoard events
    messages = [r.getMessage() for r in absl_records.records]
    assert any(m.startswith("Early stopping at step 10: eval_accuracy has not improved "
                            "for 3 evaluations") for m in messages)


def test_resume_after_a_kill_keeps_history_and_best(tmp_path, absl_records):
    folder = str(tmp_path / "run")
    first = _Scripted({2: 0.5, 4: 0.8}, kill_at=6)
    runner = make_runner(tmp_path, "run", num_train_steps=12)
    with pytest.raises(_Killed):
        runner.train(dataset_fn_of(features(8), 4), classifier_loss,
                     evaluation=_evaluation(first))
    assert [r["global_step"] for r in _history(folder)] == [2, 4]
    # The restarted run: step 6's checkpoint is there, its evaluation is not.
    second = _Scripted({6: 0.7, 8: 0.6, 10: 0.65, 12: 0.7})
    resumed = make_runner(tmp_path, "run", num_train_steps=12)
    assert resumed.global_step == 6
    resumed.train(dataset_fn_of(features(8), 4), classifier_loss,
                  evaluation=_evaluation(second))
    # 0.7 at step 6 is below the 0.8 of step 4 (known from best.json), and the count
    # of evaluations without improvement goes on: 6, 8, 10 -> stopped at 10.
    assert resumed.global_step == 10
    assert [r["global_step"] for r in _history(folder)] == [2, 4, 6, 8, 10]
    assert json.loads(open(os.path.join(folder, "best", "best.json")).read())[
        "global_step"] == 4
    for got, want in zip(_best_weights(os.path.join(folder, "best")), first.weights[4]):
        np.testing.assert_array_equal(got, want)
    # Once stopped, a restart neither trains nor evaluates again.
    absl_records.clear()
    again = make_runner(tmp_path, "run", num_train_steps=12)
    again.train(dataset_fn_of(features(8), 4), classifier_loss,
                evaluation=_evaluation(_Scripted({})))
    assert again.global_step == 10 and len(_history(folder)) == 5
    assert any("not training further" in r.getMessage() for r in absl_records.records)


def _dropout_runner(tmp_path, name, iterations_per_loop):
    """20 steps of a model with dropout: a changed random stream would show."""
    tf_keras.utils.set_random_seed(7)
    config = tiny_config()
    config.hidden_dropout_prob = config.attention_probs_dropout_prob = 0.2
    return training.Runner(tf.distribute.get_strategy(),
                           lambda: heads.BertClassifier(config, 2), training.RunConfig(
                               output_dir=str(tmp_path / name), learning_rate=1e-2,
                               num_train_steps=20, iterations_per_loop=iterations_per_loop))


def _dropout_loss(model, feats, is_training):
    logits = model(feats, training=is_training)["logits"]
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=feats["label_ids"], logits=logits)), {}


def test_evaluations_leave_the_training_as_it_was(tmp_path):
    # Dropout draws its masks per loop call (as with --iterations_per_loop): a run that
    # evaluates every 4 steps trains as one whose calls end at the same steps.
    evaluated = _dropout_runner(tmp_path, "evaluated", 1000)
    evaluated.train(dataset_fn_of(features(16), 4), _dropout_loss, evaluation=
                    periodic_eval.PeriodicEval(_Scripted(dict.fromkeys(range(21), 0.5)), 4))
    plain = _dropout_runner(tmp_path, "plain", 4)
    plain.train(dataset_fn_of(features(16), 4), _dropout_loss)
    assert evaluated.global_step == plain.global_step == 20
    for a, b in zip(evaluated.model.variables, plain.model.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert [r["global_step"] for r in _history(tmp_path / "evaluated")] == [4, 8, 12, 16, 20]
    assert not (tmp_path / "evaluated" / "best").exists()  # no --best_metric, no best/


def test_lower_is_better_for_losses_and_a_cut_last_line_is_dropped(tmp_path):
    assert periodic_eval.lower_is_better("eval_loss") and periodic_eval.lower_is_better("loss")
    assert not periodic_eval.lower_is_better("eval_accuracy")
    path = write_text(tmp_path / "h.jsonl", '{"global_step": 2, "eval_loss": 0.5}\n'
                                            '{"global_step": 4, "eval_lo')
    assert periodic_eval.read_history(path) == [{"global_step": 2, "eval_loss": 0.5}]
    write_text(tmp_path / "bad.jsonl", 'nope\n{"global_step": 4}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl, line 1: not an evaluation record"):
        periodic_eval.read_history(str(tmp_path / "bad.jsonl"))


def test_settings_files_of_the_tasks_go_along_to_best():
    for name in (fileutil.LABEL_LIST_FILE, long_text.SETTINGS_FILE, pooling.SETTINGS_FILE):
        assert name in fileutil.SETTINGS_FILES


def _kill_when(monkeypatch, module, name, when):
    """Makes module.name raise _Killed on the calls for which when(*args) is true."""
    original = getattr(module, name)

    def killed(*args, **kwargs):
        if when(*args):
            raise _Killed()
        return original(*args, **kwargs)
    monkeypatch.setattr(module, name, killed)


def test_a_kill_after_the_best_before_its_history_line_is_no_lost_patience(tmp_path,
                                                                          monkeypatch):
    folder = str(tmp_path / "run")
    # Killed at step 4 with best/ and best.json of step 4 written, its history line not.
    _kill_when(monkeypatch, periodic_eval, "write_history",
               lambda path, records: records[-1]["global_step"] == 4)
    runner = make_runner(tmp_path, "run", num_train_steps=16)
    with pytest.raises(_Killed):
        runner.train(dataset_fn_of(features(8), 4), classifier_loss,
                     evaluation=_evaluation(_Scripted({2: 0.5, 4: 0.8}), patience=2))
    assert json.loads(open(os.path.join(folder, "best", "best.json")).read())[
        "global_step"] == 4
    assert [r["global_step"] for r in _history(folder)] == [2]
    monkeypatch.undo()
    resumed = make_runner(tmp_path, "run", num_train_steps=16)
    resumed.train(dataset_fn_of(features(8), 4), classifier_loss, evaluation=_evaluation(
        _Scripted({4: 0.8, 6: 0.7, 8: 0.7, 10: 0.9}), patience=2))
    # Step 4's evaluation again is the best it kept, not one without improvement:
    # 6 and 8 are the two without, so the run stops at 8 (at 6 before).
    assert resumed.global_step == 8
    assert [r["global_step"] for r in _history(folder)] == [2, 4, 6, 8]


def test_best_and_best_json_always_name_the_same_step(tmp_path, monkeypatch):
    folder = str(tmp_path / "run")
    best = os.path.join(folder, "best")
    # Killed in the middle of the swap at step 4: the old best/ (step 2) is under its
    # temporary name, the new one complete beside it.
    _kill_when(monkeypatch, tf.io.gfile, "rename",
               lambda source, target, *a: target == best and "-4" in str(os.listdir(source)))
    runner = make_runner(tmp_path, "run", num_train_steps=8)
    with pytest.raises(_Killed):
        runner.train(dataset_fn_of(features(8), 4), classifier_loss,
                     evaluation=_evaluation(_Scripted({2: 0.5, 4: 0.8})))
    assert not os.path.exists(best)
    assert sorted(n.split("-")[0] for n in os.listdir(folder) if n.startswith("best.")) == [
        "best.old", "best.tmp"]
    monkeypatch.undo()
    # The rerun puts the old best/ back (best.json and weights of step 2), then
    # evaluates step 4 again: a new best, swapped in whole.
    resumed = make_runner(tmp_path, "run", num_train_steps=8)
    script = _Scripted({4: 0.8, 6: 0.7, 8: 0.6})
    resumed.train(dataset_fn_of(features(8), 4), classifier_loss,
                  evaluation=_evaluation(script))
    assert [n for n in os.listdir(folder) if n.startswith("best")] == ["best"]
    assert json.loads(open(os.path.join(best, "best.json")).read())["global_step"] == 4
    assert checkpoints.checkpoint_step(best) == 4
    for got, want in zip(_best_weights(best), script.weights[4]):
        np.testing.assert_array_equal(got, want)
    # A best/ whose weights and best.json disagree (another program's) is refused.
    with open(os.path.join(best, "best.json"), "w") as f:
        f.write('{"metric": "eval_accuracy", "value": 0.9, "global_step": 2}\n')
    again = make_runner(tmp_path, "run", num_train_steps=10)
    with pytest.raises(ValueError, match=r"best holds the checkpoint of step 4 but its "
                                         r"best.json names step 2: remove"):
        again.train(dataset_fn_of(features(8), 4), classifier_loss,
                    evaluation=_evaluation(_Scripted({})))


def test_a_nan_metric_is_written_as_such_and_never_stops_the_run(tmp_path, absl_records):
    folder = str(tmp_path / "run")
    # A Pearson correlation on a constant dev set: NaN at every evaluation.
    script = _Scripted(dict.fromkeys(range(0, 13, 2), float("nan")))
    runner = make_runner(tmp_path, "run", num_train_steps=10)
    runner.train(dataset_fn_of(features(8), 4), classifier_loss,
                 evaluation=_evaluation(script, patience=1))
    assert runner.global_step == 10  # patience 1 did not stop it
    with open(os.path.join(folder, periodic_eval.HISTORY_FILE)) as f:
        lines = f.read().splitlines()
    assert len(lines) == 5 and all('"eval_accuracy": "nan"' in line for line in lines)
    history = periodic_eval.read_history(os.path.join(folder, periodic_eval.HISTORY_FILE))
    assert all(np.isnan(r["eval_accuracy"]) and np.isfinite(r["eval_loss"]) for r in history)
    assert not os.path.exists(os.path.join(folder, "best"))
    warnings = [r.getMessage() for r in absl_records.records
                if "early stopping cannot judge it" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].startswith("--best_metric=eval_accuracy is nan")
    path = str(tmp_path / "h.jsonl")
    periodic_eval.write_history(path, [{"global_step": 2, "a": float("inf"),
                                        "b": float("-inf"), "c": 0.5}])
    got = periodic_eval.read_history(path)
    assert got == [{"global_step": 2, "a": float("inf"), "b": float("-inf"), "c": 0.5}]


def test_sigterm_during_an_evaluation_stops_between_its_batches(tmp_path):
    folder = str(tmp_path / "run")
    seen = []

    def evaluate(runner):
        dev = features(40, seed=3)
        dataset_fn = lambda ctx=None: tf.data.Dataset.from_tensor_slices(dev).batch(4)
        for out in runner.predict(dataset_fn, lambda model, f: model(f)):
            seen.append(out)
            if len(seen) == 2:  # a real signal, as a preemption sends it
                os.kill(os.getpid(), signal.SIGTERM)
        return {"eval_accuracy": 0.5}

    before = signal.getsignal(signal.SIGTERM)  # SIG_DFL: no door installs a handler (test_doors)
    runner = make_runner(tmp_path, "run", num_train_steps=8)
    with pytest.raises(SystemExit) as stop:
        runner.train(dataset_fn_of(features(8), 4), classifier_loss,
                     evaluation=periodic_eval.PeriodicEval(evaluate, 2))
    # Stopped after 2 of the 10 batches of step 2's evaluation, its checkpoint kept.
    assert stop.value.code == 143 and len(seen) == 2
    assert runner.global_step == 2
    assert tf.train.latest_checkpoint(folder).endswith("model.ckpt-2")
    assert not os.path.exists(os.path.join(folder, periodic_eval.HISTORY_FILE))
    # The handler is the process's again, and a rerun evaluates step 2 first.
    assert signal.getsignal(signal.SIGTERM) is before
    seen.clear()
    resumed = make_runner(tmp_path, "run", num_train_steps=2)
    resumed.train(dataset_fn_of(features(8), 4), classifier_loss, evaluation=
                  periodic_eval.PeriodicEval(lambda r: {"eval_accuracy": 0.5}, 2))
    assert [r["global_step"] for r in _history(folder)] == [2]
