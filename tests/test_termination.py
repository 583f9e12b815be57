"""A SIGTERM during training ends it within a step (bert_tf2/trainer/termination.py), not at
the end of an --iterations_per_loop call (issue 91 item 13: run_pretraining trained on for
about 2.5 minutes after one, its calls being 1000 steps long)."""
import os
import signal

import numpy as np
import pytest
import tensorflow as tf

from test_training import classifier_loss, features, make_runner


@pytest.mark.slow
def test_a_sigterm_inside_a_long_training_call_stops_after_the_step(tmp_path):
    """The signal is sent from the input pipeline while the main thread is inside a call
    of 1000 steps (where Python runs no handler until the call ends): the call ends after
    the step in progress, its checkpoint is written and the run stops with 143, the
    handler and the wakeup fd back as they were."""
    sent_at = 5
    data = features(8)

    def dataset_fn(ctx=None):
        del ctx
        count = tf.Variable(0, dtype=tf.int64)

        def signal_at(batch):
            def send(seen):
                if int(seen) == sent_at:
                    os.kill(os.getpid(), signal.SIGTERM)
                return seen
            seen = tf.py_function(send, [count.assign_add(1)], tf.int64)
            with tf.control_dependencies([seen]):
                return {k: tf.identity(v) for k, v in batch.items()}
        return tf.data.Dataset.from_tensor_slices(data).batch(4, drop_remainder=True) \
            .repeat().map(signal_at)

    before = signal.getsignal(signal.SIGTERM)
    runner = make_runner(tmp_path, "run", num_train_steps=100000, iterations_per_loop=1000,
                         save_checkpoints_steps=100000)
    with pytest.raises(SystemExit) as stop:
        runner.train(dataset_fn, classifier_loss)
    assert stop.value.code == 143
    # Batches are read a few ahead of the steps (prefetch): a handful of steps, not 1000.
    assert sent_at - 4 <= runner.global_step <= sent_at + 20, runner.global_step
    assert tf.train.latest_checkpoint(str(tmp_path / "run")).endswith(
        "model.ckpt-%d" % runner.global_step)
    assert signal.getsignal(signal.SIGTERM) is before
    left = signal.set_wakeup_fd(-1)  # none left behind (the probe puts back what it found)
    if left != -1:
        signal.set_wakeup_fd(left)
    assert left == -1


@pytest.mark.slow
def test_a_full_training_call_is_unchanged_by_the_watch(tmp_path, monkeypatch):
    """Without a signal a call runs all its steps, and the step-by-step stop check changes
    no number: the weights and the mean metrics equal those of the loop without it (the
    watch's variable left out, as on several workers), the same shapes and kernels: exact."""
    from bert_tf2.trainer import termination  # pylint: disable=import-outside-toplevel
    from bert_tf2.trainer import training  # pylint: disable=import-outside-toplevel
    data = features(8)
    dataset_fn = lambda ctx=None: tf.data.Dataset.from_tensor_slices(data).batch(
        4, drop_remainder=True).repeat()
    first = make_runner(tmp_path, "checked", num_train_steps=6, iterations_per_loop=3)
    start = [v.numpy() for v in first.model.variables]
    checked = first.train(dataset_fn, classifier_loss)
    assert first.global_step == 6 and checked["loss"] > 0

    class Unchecked(termination.TerminationWatch):
        def __init__(self):
            super().__init__()
            self.stop = None  # the loop reads no stop variable (the loop before the watch)

    monkeypatch.setattr(training.termination_watch, "TerminationWatch", Unchecked)
    second = make_runner(tmp_path, "unchecked", num_train_steps=6, iterations_per_loop=3)
    for variable, value in zip(second.model.variables, start):
        variable.assign(value)
    unchecked = second.train(dataset_fn, classifier_loss)
    assert second.global_step == 6
    assert {k: float(v) for k, v in checked.items()} == \
        {k: float(v) for k, v in unchecked.items()}
    for a, b in zip(first.model.variables, second.model.variables):
        assert np.array_equal(a.numpy(), b.numpy()), a.name
