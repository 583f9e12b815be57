"""tf.estimator.experimental's early-stopping hooks of TF 1.15 (tf.contrib.estimator's too),
and the global-step read every training hook here stands on.

stop_if_higher_hook / stop_if_lower_hook / stop_if_no_increase_hook /
stop_if_no_decrease_hook and make_early_stopping_hook read the scalar summaries the
evaluations wrote in the estimator's eval_dir() (read_eval_metrics) and stop the training
they are passed to, as TF's did. global_step_read is the graph's copy of the step a training
step reads before its update (TF 1.x's global_step_read_op_cache); GlobalStepHook fetches it.
Forks reach these through bert_tf2.compat.estimator (`tf.estimator.experimental.stop_if_*`,
`tf.estimator.GlobalStepHook`...), which re-exports them.
"""
import collections
import operator
import os

import tensorflow as tf

from bert_tf2.base import path_match

v1 = tf.compat.v1
logging = v1.logging  # TF 1.x's hooks logged through tf.logging, as the estimator does


def read_eval_metrics(eval_dir):
    """{step: {tag: value}} of the scalar summaries in `eval_dir`'s event files (what the
    evaluations wrote), by increasing step; {} when there are none."""
    from tensorflow.core.util import event_pb2
    by_step = collections.defaultdict(dict)
    for path in sorted(path_match.matching(os.path.join(eval_dir, "events.out.tfevents"), "*")):
        for record in _records(path):
            event = event_pb2.Event.FromString(record)
            if not event.HasField("summary"):
                continue
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    by_step[event.step][value.tag] = value.simple_value
    return collections.OrderedDict(sorted(by_step.items()))


def _records(path):
    """The records of a TFRecord file (an event file): each a little-endian uint64 length,
    a 4-byte CRC of it, the data and a 4-byte CRC of the data; a cut last record is left
    out (an evaluation still writing it)."""
    with v1.gfile.GFile(path, "rb") as f:
        data = f.read()
    position = 0
    while position + 12 <= len(data):
        length = int.from_bytes(data[position:position + 8], "little")
        start = position + 12
        if start + length + 4 > len(data):
            break
        yield data[start:start + length]
        position = start + length + 4


# TF 1.x's graph collection of the global step's read (its StopAtStepHook fetches it too).
_GLOBAL_STEP_READ = "global_step_read_op_cache"


def global_step_read(global_step):
    """The graph's copy of the global step that a training step reads before its update.

    Made once per graph and kept in TF 1.x's collection; before the variable is initialized
    (the init run) it gives the initial value.
    """
    graph = global_step.graph
    made = graph.get_collection(_GLOBAL_STEP_READ)
    if made:
        return made[0]
    with graph.as_default(), graph.name_scope(None), \
            graph.name_scope(global_step.op.name + "/"):
        value = tf.cond(v1.is_variable_initialized(global_step), global_step.read_value,
                        lambda: global_step.initial_value)
        read = value + 0
    graph.add_to_collection(_GLOBAL_STEP_READ, read)
    return read


class GlobalStepHook(v1.train.SessionRunHook):
    """A hook that fetches the global step with every training step: after_run finds it
    in run_values.results (its value before that step's update)."""

    _global_step = None

    def begin(self):
        self._global_step = global_step_read(v1.train.get_global_step())

    def before_run(self, run_context):
        del run_context
        return v1.train.SessionRunArgs(self._global_step)


class _StopOnPredicateHook(GlobalStepHook):
    """Asks `should_stop_fn` every run_every_secs seconds or run_every_steps steps (after
    a training step), and stops the training when it answers True."""

    def __init__(self, should_stop_fn, run_every_secs, run_every_steps):
        if not callable(should_stop_fn):
            raise TypeError("make_early_stopping_hook: should_stop_fn must be callable")
        if (run_every_secs is None) == (run_every_steps is None):
            raise ValueError(
                "early stopping hook: give exactly one of run_every_secs=%r and "
                "run_every_steps=%r (pass run_every_secs=None with run_every_steps)"
                % (run_every_secs, run_every_steps))
        self._should_stop = should_stop_fn
        self._timer = v1.train.SecondOrStepTimer(every_secs=run_every_secs,
                                                 every_steps=run_every_steps)

    def after_run(self, run_context, run_values):
        step = run_values.results
        if not self._timer.should_trigger_for_step(step):
            return
        self._timer.update_last_triggered_step(step)
        if self._should_stop():
            logging.info("Requesting early stopping at global step %d", step)
            run_context.request_stop()


class EstimatorBase:
    """What the hooks here take as an estimator: compat/estimator.Estimator derives from it
    (so this module needs no import of that one, which re-exports these hooks)."""


def make_early_stopping_hook(estimator, should_stop_fn, run_every_secs=60,
                             run_every_steps=None):
    """A training hook that stops when `should_stop_fn()` returns True (TF 1.15's)."""
    if not isinstance(estimator, EstimatorBase):
        raise TypeError("make_early_stopping_hook: estimator must be an Estimator, not %s"
                        % type(estimator).__name__)
    return _StopOnPredicateHook(should_stop_fn, run_every_secs, run_every_steps)


def _metric_of(metrics, metric_name, step, eval_dir):
    if metric_name not in metrics:
        raise ValueError("early stopping: the evaluation at step %d in %s has no metric %r "
                         "(it has %s)" % (step, eval_dir, metric_name,
                                          ", ".join(sorted(metrics)) or "none"))
    return metrics[metric_name]


def _threshold_hook(estimator, metric_name, threshold, eval_dir, min_steps, run_every_secs,
                    run_every_steps, higher_is_better):
    eval_dir = eval_dir or estimator.eval_dir()
    better = operator.gt if higher_is_better else operator.lt
    side = "greater" if higher_is_better else "less"

    def crossed():
        for step, metrics in read_eval_metrics(eval_dir).items():
            if step < min_steps:
                continue
            value = _metric_of(metrics, metric_name, step, eval_dir)
            if better(value, threshold):
                logging.info("At step %s, metric %r has value %s, %s than the threshold %s "
                             "for early stopping", step, metric_name, value, side, threshold)
                return True
        return False
    return make_early_stopping_hook(estimator, crossed, run_every_secs, run_every_steps)


def _no_improvement_hook(estimator, metric_name, max_steps, eval_dir, min_steps,
                         run_every_secs, run_every_steps, higher_is_better):
    eval_dir = eval_dir or estimator.eval_dir()
    better = operator.gt if higher_is_better else operator.lt
    change = "increase" if higher_is_better else "decrease"

    def stalled():
        best, best_step = None, None
        for step, metrics in read_eval_metrics(eval_dir).items():
            if step < min_steps:
                continue
            value = _metric_of(metrics, metric_name, step, eval_dir)
            if best is None or better(value, best):
                best, best_step = value, step
            if step - best_step >= max_steps:
                logging.info("No %s in metric %r for %d steps (at least %s): early stopping",
                             change, metric_name, step - best_step, max_steps)
                return True
        return False
    return make_early_stopping_hook(estimator, stalled, run_every_secs, run_every_steps)


def stop_if_higher_hook(estimator, metric_name, threshold, eval_dir=None, min_steps=0,
                        run_every_secs=60, run_every_steps=None):
    """Stops training once an evaluation (at step >= min_steps) has metric > threshold."""
    return _threshold_hook(estimator, metric_name, threshold, eval_dir, min_steps,
                           run_every_secs, run_every_steps, higher_is_better=True)


def stop_if_lower_hook(estimator, metric_name, threshold, eval_dir=None, min_steps=0,
                       run_every_secs=60, run_every_steps=None):
    """Stops training once an evaluation (at step >= min_steps) has metric < threshold."""
    return _threshold_hook(estimator, metric_name, threshold, eval_dir, min_steps,
                           run_every_secs, run_every_steps, higher_is_better=False)


def stop_if_no_increase_hook(estimator, metric_name, max_steps_without_increase,
                             eval_dir=None, min_steps=0, run_every_secs=60,
                             run_every_steps=None):
    """Stops training once an evaluation is max_steps_without_increase steps or more after
    the one with the highest metric (evaluations before min_steps ignored)."""
    return _no_improvement_hook(estimator, metric_name, max_steps_without_increase, eval_dir,
                                min_steps, run_every_secs, run_every_steps,
                                higher_is_better=True)


def stop_if_no_decrease_hook(estimator, metric_name, max_steps_without_decrease,
                             eval_dir=None, min_steps=0, run_every_secs=60,
                             run_every_steps=None):
    """Stops training once an evaluation is max_steps_without_decrease steps or more after
    the one with the lowest metric (evaluations before min_steps ignored)."""
    return _no_improvement_hook(estimator, metric_name, max_steps_without_decrease, eval_dir,
                                min_steps, run_every_secs, run_every_steps,
                                higher_is_better=False)


EARLY_STOPPING = {"make_early_stopping_hook": make_early_stopping_hook,
                  "stop_if_higher_hook": stop_if_higher_hook,
                  "stop_if_lower_hook": stop_if_lower_hook,
                  "stop_if_no_increase_hook": stop_if_no_increase_hook,
                  "stop_if_no_decrease_hook": stop_if_no_decrease_hook}
