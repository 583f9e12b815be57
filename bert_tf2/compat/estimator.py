"""tf.estimator for forks of the reference on TF 2.x: Estimator, EstimatorSpec, RunConfig, ModeKeys.

TensorFlow 2.16+ ships no tf.estimator (and tensorflow-estimator no longer imports), yet
every fork of run_classifier.py drives its model through one. This module runs a fork's
`model_fn` / `input_fn` as TF 1.15's Estimator did, on what tf.compat.v1 still has: each
call builds a fresh tf.Graph (so it works whether eager execution is on or off), calls
`input_fn` and `model_fn` by the arguments they declare, and runs the graph through a
MonitoredSession with TF's own checkpoint, logging, step-counter and summary hooks:

- `train`: resumes from model_dir's latest checkpoint (else runs the initializers, so
  `init_from_checkpoint` inside model_fn takes effect), saves model.ckpt-N every
  `save_checkpoints_steps` (or `_secs`) and at the end, keeps `keep_checkpoint_max`,
  logs "loss = ..., step = N" and "global_step/sec: ..."; `steps` trains that many more,
  `max_steps` stops at that step (returning at once when a checkpoint is already there).
- `evaluate`: restores the latest checkpoint (or `checkpoint_path`; with none, runs the
  initializers as TF 1.15 did), runs the metrics' update ops for `steps` batches or until
  the input ends, returns {metric: value, "loss", "global_step"} and writes them as
  summaries to model_dir/eval[_name].
- `predict`: restores the same way and yields the predictions, one dict per example.

`train_and_evaluate` trains and evaluates after checkpoint saves (throttle_secs apart) and at
the end, as TF 1.x did in one process. Not here: distribution strategies in RunConfig,
SavedModel export (refused in one line naming what to use instead). The early-stopping
hooks of TF 1.15 (experimental.stop_if_higher_hook / lower / no_increase / no_decrease,
make_early_stopping_hook; tf.contrib.estimator's too) read the evaluations' summaries in
eval_dir() as TF's did and stop the training they are passed to: they live in
early_stopping.py, and this module re-exports them.
"""
import collections
import functools
import inspect
import itertools
import os
import tempfile
import time
import warnings

import numpy as np
import tensorflow as tf
from google.protobuf import text_format

from bert_tf2.base import path_match
from bert_tf2.compat import contrib
from bert_tf2.compat import early_stopping
# The early-stopping hooks and the global-step read, re-exported: forks reach them here.
from bert_tf2.compat.early_stopping import (  # noqa: F401  pylint: disable=unused-import
    EARLY_STOPPING, GlobalStepHook, global_step_read, make_early_stopping_hook,
    read_eval_metrics, stop_if_higher_hook, stop_if_lower_hook, stop_if_no_decrease_hook,
    stop_if_no_increase_hook)

v1 = tf.compat.v1
# TF 1.x's Estimator logged through tf.logging ("INFO:tensorflow:..."); forks' users read
# those lines, so ours go the same way.
logging = v1.logging
# TF's graph.pbtxt writer calls text_format with float_format, which protobuf 6 warns is
# deprecated: a line about TensorFlow's own code, in every fork's first training run, that the
# fork can do nothing about (protobuf 7 refuses it: write_graph_text).
warnings.filterwarnings("ignore", message="float_format is deprecated for text_format",
                        category=UserWarning)

GLOBAL_STEP = "global_step"
LOSS = "loss"


class ModeKeys:
    """The modes a model_fn is called in (the values TF 1.x used)."""

    TRAIN = "train"
    EVAL = "eval"
    PREDICT = "infer"


_MODES = (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT)

_SPEC_FIELDS = ("mode", "predictions", "loss", "train_op", "eval_metric_ops",
                "export_outputs", "training_chief_hooks", "training_hooks", "scaffold",
                "evaluation_hooks", "prediction_hooks")


class EstimatorSpec(collections.namedtuple("EstimatorSpec", _SPEC_FIELDS)):
    """What a model_fn returns: the ops of one mode, checked for what that mode needs."""

    def __new__(cls, mode, predictions=None, loss=None, train_op=None,
                eval_metric_ops=None, export_outputs=None, training_chief_hooks=None,
                training_hooks=None, scaffold=None, evaluation_hooks=None,
                prediction_hooks=None):
        if mode not in _MODES:
            raise ValueError("EstimatorSpec: mode=%r is none of %s" % (mode, list(_MODES)))
        needs = {ModeKeys.TRAIN: ("loss", "train_op"), ModeKeys.EVAL: ("loss",),
                 ModeKeys.PREDICT: ("predictions",)}[mode]
        given = {"loss": loss, "train_op": train_op, "predictions": predictions}
        missing = [name for name in needs if given[name] is None]
        if missing:
            raise ValueError("EstimatorSpec(mode=%r) needs %s" % (mode, " and ".join(missing)))
        eval_metric_ops = dict(eval_metric_ops or {})
        for name, pair in eval_metric_ops.items():
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
                raise ValueError("EstimatorSpec: eval_metric_ops[%r] is not a (value, update_op) "
                                 "pair, as tf.compat.v1.metrics returns" % name)
        return super().__new__(
            cls, mode, predictions, loss, train_op, eval_metric_ops, export_outputs,
            tuple(training_chief_hooks or ()), tuple(training_hooks or ()),
            scaffold if scaffold is not None else v1.train.Scaffold(),
            tuple(evaluation_hooks or ()), tuple(prediction_hooks or ()))


_DEFAULT = object()   # "not given": save_checkpoints_secs defaults only when steps are not given
_RUN_CONFIG_FIELDS = (
    "model_dir", "tf_random_seed", "save_summary_steps", "save_checkpoints_steps",
    "save_checkpoints_secs", "session_config", "keep_checkpoint_max",
    "keep_checkpoint_every_n_hours", "log_step_count_steps", "train_distribute",
    "device_fn", "protocol", "eval_distribute", "experimental_distribute",
    "experimental_max_worker_delay_secs", "session_creation_timeout_secs",
    "checkpoint_save_graph_def")


class RunConfig:
    """Where and how often an Estimator saves, logs and seeds (TF 1.x's arguments and defaults)."""

    def __init__(self, model_dir=None, tf_random_seed=None, save_summary_steps=100,
                 save_checkpoints_steps=_DEFAULT, save_checkpoints_secs=_DEFAULT,
                 session_config=None, keep_checkpoint_max=5,
                 keep_checkpoint_every_n_hours=10000, log_step_count_steps=100,
                 train_distribute=None, device_fn=None, protocol=None, eval_distribute=None,
                 experimental_distribute=None, experimental_max_worker_delay_secs=None,
                 session_creation_timeout_secs=7200, checkpoint_save_graph_def=True):
        steps_given = save_checkpoints_steps is not _DEFAULT
        secs_given = save_checkpoints_secs is not _DEFAULT
        if not steps_given and not secs_given:
            save_checkpoints_steps, save_checkpoints_secs = None, 600
        elif not secs_given:
            save_checkpoints_secs = None
        elif not steps_given:
            save_checkpoints_steps = None
        if save_checkpoints_steps is not None and save_checkpoints_secs is not None:
            raise ValueError("RunConfig: give save_checkpoints_steps or save_checkpoints_secs, "
                             "not both")
        values = dict(locals())
        for name in _RUN_CONFIG_FIELDS:
            setattr(self, name, values[name])
        self.model_dir = os.fspath(model_dir) if model_dir is not None else None

    # A single local process: what TF 1.x's RunConfig said without a TF_CONFIG.
    is_chief = True
    master = ""
    evaluation_master = ""
    num_ps_replicas = 0
    num_worker_replicas = 1
    task_type = "worker"
    task_id = 0
    global_id_in_cluster = 0
    cluster_spec = None
    service = None

    def replace(self, **changes):
        """Returns a copy with the named fields changed.

        Args:
          **changes: RunConfig fields and their new values.

        Returns:
          A new RunConfig (of the same class).
        """
        unknown = sorted(set(changes) - set(self._fields()))
        if unknown:
            raise ValueError("%s.replace: no field %s" % (type(self).__name__, ", ".join(unknown)))
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy.__dict__.update(changes)
        return copy

    def _fields(self):
        return [name for name in self.__dict__ if not name.startswith("_")]


WarmStartSettings = collections.namedtuple(
    "WarmStartSettings", ["ckpt_to_initialize_from", "vars_to_warm_start",
                          "var_name_to_vocab_info", "var_name_to_prev_var_name"])
WarmStartSettings.__new__.__defaults__ = (".*", None, None)


def arg_names(fn):
    """Names of the arguments a function (or partial, method, callable object) still takes.

    Args:
      fn: the callable.

    Returns:
      A tuple of parameter names; a partial's bound ones left out, as TF 1.x did.
    """
    if isinstance(fn, functools.partial):
        inner = arg_names(fn.func)[len(fn.args):]
        return tuple(name for name in inner if name not in (fn.keywords or {}))
    return tuple(inspect.signature(fn).parameters)


def call_input_fn(input_fn, mode, params, config):
    """Calls input_fn with the arguments it declares (mode, params, config).

    Args:
      input_fn: the user's function.
      mode: a ModeKeys value.
      params: the dict passed as `params`.
      config: the RunConfig passed as `config`.

    Returns:
      (features, labels or None, hooks that initialize a dataset's iterator).
    """
    names = arg_names(input_fn)
    offered = {"mode": mode, "params": params, "config": config}
    kwargs = {name: value for name, value in offered.items() if name in names}
    # Input pipelines on the host, as TF 1.x placed them.
    with tf.device("/cpu:0"):
        result = input_fn(**kwargs)
    hooks = []
    if isinstance(result, tf.data.Dataset):
        iterator = v1.data.make_initializable_iterator(result)
        hooks.append(_IteratorInitHook(iterator))
        result = iterator.get_next()
    if isinstance(result, (tuple, list)):
        if len(result) != 2:
            raise ValueError("input_fn returned %d values; it returns features, (features, "
                             "labels) or a tf.data.Dataset of either" % len(result))
        return result[0], result[1], hooks
    return result, None, hooks


def call_model_fn(model_fn, features, labels, mode, params, config):
    """Calls model_fn with the arguments it declares (labels, mode, params, config).

    Args:
      model_fn: the user's function; `features` is its one required argument.
      features: the input_fn's features.
      labels: the input_fn's labels, or None.
      mode: a ModeKeys value.
      params: the dict passed as `params`.
      config: the RunConfig passed as `config`.

    Returns:
      Whatever model_fn returns.
    """
    names = arg_names(model_fn)
    kwargs = {}
    if "labels" in names:
        kwargs["labels"] = labels
    elif labels is not None:
        raise ValueError("model_fn takes no labels argument, but input_fn returns labels")
    offered = {"mode": mode, "params": params, "config": config}
    kwargs.update({name: value for name, value in offered.items() if name in names})
    logging.info("Calling model_fn.")
    result = model_fn(features=features, **kwargs)
    logging.info("Done calling model_fn.")
    return result


def _check_model_fn(model_fn, params):
    names = arg_names(model_fn)
    if "features" not in names:
        raise ValueError("model_fn %s has no features argument" % getattr(
            model_fn, "__name__", model_fn))
    if params is not None and "params" not in names:
        raise ValueError("model_fn %s takes no params argument, but params are given to the "
                         "Estimator" % getattr(model_fn, "__name__", model_fn))


def _model_dir(model_dir, config_dir):
    model_dir = os.fspath(model_dir) if model_dir is not None else None
    if model_dir and config_dir and os.path.normpath(model_dir) != os.path.normpath(config_dir):
        raise ValueError("Estimator: model_dir=%s differs from RunConfig's model_dir=%s"
                         % (model_dir, config_dir))
    model_dir = model_dir or config_dir
    if not model_dir:
        model_dir = tempfile.mkdtemp()
        logging.warning("Using temporary folder as model directory: %s", model_dir)
    return model_dir


def _refuse_distribution(config):
    for name in ("train_distribute", "eval_distribute", "experimental_distribute"):
        if getattr(config, name, None) is not None:
            raise ValueError(
                "RunConfig(%s=...): bert_tf2's Estimator runs on one device; for several GPUs "
                "run bert-tf2's TF2 runners (run_classifier.py --distribution_strategy=mirrored, "
                "run_squad.py, run_pretraining.py), which train through tf.distribute" % name)


def checkpoint_step(path):
    """The global step saved in a checkpoint, or None when it holds none.

    Args:
      path: a checkpoint prefix.

    Returns:
      An int, or None.
    """
    names = dict(tf.train.list_variables(path))
    if GLOBAL_STEP not in names:
        return None
    return int(tf.train.load_variable(path, GLOBAL_STEP))


class _IteratorInitHook(v1.train.SessionRunHook):
    """Starts a dataset's iterator once the session exists."""

    def __init__(self, iterator):
        self._iterator = iterator

    def after_create_session(self, session, coord):
        del coord
        session.run(self._iterator.initializer)


class _EvalHook(v1.train.SessionRunHook):
    """Stops an evaluation after `steps` batches and reads the metrics' values at its end."""

    def __init__(self, final_ops, steps):
        self._final_ops = final_ops
        self._steps = steps
        self._done = 0
        self.values = None

    def after_run(self, run_context, run_values):
        del run_values
        self._done += 1
        if self._steps is not None:
            if self._done % max(self._steps // 10, 1) == 0 or self._done == self._steps:
                logging.info("Evaluation [%d/%d]", self._done, self._steps)
            if self._done >= self._steps:
                run_context.request_stop()

    def end(self, session):
        self.values = session.run(self._final_ops)


def write_graph_text(graph_def, folder, name="graph.pbtxt"):
    """Writes `graph_def` as text to folder/name, as TF's tf.io.write_graph does; its path.

    TF 2.20's writer passes float_format='' to protobuf's text_format.MessageToString, an
    argument protobuf 7 removed (TypeError). There the text is written without it: the same
    graph, its float attributes printed in float32's shortest form rather than the double's.
    """
    try:
        return tf.io.write_graph(graph_def, folder, name)
    except TypeError as error:
        if "float_format" not in str(error):
            raise
    tf.io.gfile.makedirs(folder)
    path = os.path.join(folder, name)
    temporary = "%s.tmp%d" % (path, os.getpid())
    with tf.io.gfile.GFile(temporary, "w") as f:
        f.write(text_format.MessageToString(graph_def))
    tf.io.gfile.rename(temporary, path, overwrite=True)
    return path


class _GraphTextHook(v1.train.SessionRunHook):
    """model_dir/graph.pbtxt once the graph is final, as CheckpointSaverHook wrote it."""

    def __init__(self, folder):
        self._folder = folder

    def after_create_session(self, session, coord):
        del coord
        write_graph_text(session.graph.as_graph_def(add_shapes=True), self._folder)


class _MetaGraphListener(v1.train.CheckpointSaverListener):
    """model.ckpt-N.meta beside each checkpoint, as CheckpointSaverHook's Saver wrote it."""

    def __init__(self, folder, scaffold):
        self._prefix = os.path.join(folder, "model.ckpt")
        self._scaffold = scaffold

    def after_save(self, session, global_step_value):
        with session.graph.as_default():
            self._scaffold.saver.export_meta_graph("%s-%d.meta" % (self._prefix,
                                                                   global_step_value))


def _default_session_config():
    return v1.ConfigProto(allow_soft_placement=True)


class Estimator(early_stopping.EstimatorBase):
    """Trains, evaluates and predicts with a model_fn, as TF 1.x's tf.estimator.Estimator."""

    def __init__(self, model_fn, model_dir=None, config=None, params=None,
                 warm_start_from=None):
        config = config if config is not None else RunConfig()
        if not isinstance(config, RunConfig):
            raise ValueError("Estimator: config must be a RunConfig, not %s" % type(config).__name__)
        _check_model_fn(model_fn, params)
        self._config = config.replace(model_dir=_model_dir(model_dir, config.model_dir))
        _refuse_distribution(self._config)
        self._model_fn = model_fn
        self._params = dict(params or {})
        if isinstance(warm_start_from, (str, os.PathLike)):
            warm_start_from = WarmStartSettings(os.fspath(warm_start_from))
        self._warm_start = warm_start_from

    @property
    def model_dir(self):
        return self._config.model_dir

    @property
    def config(self):
        return self._config

    @property
    def params(self):
        return dict(self._params)

    @property
    def model_fn(self):
        return self._model_fn

    def params_for_mode(self, mode):
        """The params (a dict) input_fn and model_fn get in `mode`, a ModeKeys value: the
        Estimator's own, copied."""
        del mode
        return self.params

    def spec_of(self, model_fn_result):
        """The EstimatorSpec that `model_fn_result`, what model_fn returned, stands for
        (checked)."""
        if not isinstance(model_fn_result, EstimatorSpec):
            raise ValueError("model_fn returned %s, not an EstimatorSpec"
                             % type(model_fn_result).__name__)
        return model_fn_result

    def latest_checkpoint(self):
        """The prefix of model_dir's latest checkpoint, or None."""
        return path_match.latest_checkpoint(self.model_dir)

    def eval_dir(self, name=None):
        """The folder an evaluation writes its summaries to."""
        return os.path.join(self.model_dir, "eval" if not name else "eval_" + name)

    def get_variable_names(self):
        """Names of the variables in the latest checkpoint."""
        return [name for name, _ in tf.train.list_variables(self._saved_checkpoint())]

    def get_variable_value(self, name):
        """The value of one variable in the latest checkpoint (a numpy array)."""
        return tf.train.load_variable(self._saved_checkpoint(), name)

    def _saved_checkpoint(self):
        path = self.latest_checkpoint()
        if not path:
            raise ValueError("Estimator: no checkpoint in model_dir %s (train first)"
                             % self.model_dir)
        return path

    def _build(self, input_fn, mode):
        """Builds one mode's graph in the default graph; returns (spec, input hooks)."""
        if self._config.tf_random_seed is not None:
            v1.set_random_seed(self._config.tf_random_seed)
        global_step = v1.train.get_or_create_global_step()
        params = self.params_for_mode(mode)
        features, labels, hooks = call_input_fn(input_fn, mode, params, self._config)
        if mode == ModeKeys.PREDICT:
            labels = None   # predict's input_fn may yield labels; model_fn never sees them
        # Training: every op of model_fn (the step's increment too) runs after the step is
        # read, so a hook fetching global_step_read() sees the value before this step's
        # update on every run (as TF 1.x's Estimator); a bare variable read races with it.
        after = [global_step_read(global_step)] if mode == ModeKeys.TRAIN else []
        with tf.control_dependencies(after):
            spec = self.spec_of(call_model_fn(self._model_fn, features, labels, mode, params,
                                              self._config))
        if spec.mode != mode:
            raise ValueError("model_fn returned a spec of mode %r when called with mode %r"
                             % (spec.mode, mode))
        return spec, hooks

    def _session_config(self):
        return self._config.session_config or _default_session_config()

    def _checkpoint_for(self, checkpoint_path, purpose):
        """The checkpoint an evaluation or prediction restores (None: initialize)."""
        if checkpoint_path:
            path = os.fspath(checkpoint_path)
            if tf.io.gfile.isdir(path):
                path = path_match.latest_checkpoint(path) or path
            if not tf.io.gfile.exists(path + ".index"):
                raise ValueError("checkpoint_path=%s: no checkpoint there (no %s.index)"
                                 % (checkpoint_path, path))
            return path
        path = self.latest_checkpoint()
        if not path:
            logging.info("Could not find trained model in model_dir: %s, running "
                         "initialization to %s.", self.model_dir, purpose)
        return path

    def train(self, input_fn, hooks=None, steps=None, max_steps=None, saving_listeners=None):
        """Trains from model_dir's latest checkpoint for `steps` more, or up to `max_steps`.

        Args:
          input_fn: returns a tf.data.Dataset of (features, labels), or the tensors.
          hooks: more SessionRunHooks.
          steps: how many more steps (None with max_steps None: until the input ends).
          max_steps: the step to stop at.
          saving_listeners: CheckpointSaverListeners called around each save.

        Returns:
          self.
        """
        _check_steps(steps, max_steps)
        if max_steps is not None:
            latest = self.latest_checkpoint()
            if latest and (checkpoint_step(latest) or 0) >= max_steps:
                logging.info("Skipping training since max_steps has already saved.")
                return self
        with tf.Graph().as_default():
            loss = self._train_graph(input_fn, list(hooks or ()), steps, max_steps,
                                     list(saving_listeners or ()))
        logging.info("Loss for final step: %s.", loss)
        return self

    def _train_graph(self, input_fn, hooks, steps, max_steps, saving_listeners):
        """Builds the training graph and runs it; returns the last step's loss."""
        config = self._config
        spec, input_hooks = self._build(input_fn, ModeKeys.TRAIN)
        if self._warm_start is not None and not self.latest_checkpoint():
            _warm_start(self._warm_start)
        global_step = v1.train.get_global_step()
        hooks = input_hooks + hooks + list(spec.training_hooks) + [
            v1.train.NanTensorHook(spec.loss)]
        if steps is not None or max_steps is not None:
            hooks.append(v1.train.StopAtStepHook(num_steps=steps, last_step=max_steps))
        if config.log_step_count_steps:
            hooks.append(v1.train.LoggingTensorHook(
                {LOSS: spec.loss, "step": global_step}, every_n_iter=config.log_step_count_steps))
        _add_default_saver(spec.scaffold, config)
        chief_hooks = list(spec.training_chief_hooks)
        saves = config.save_checkpoints_steps or config.save_checkpoints_secs
        if saves and not any(isinstance(h, v1.train.CheckpointSaverHook) for h in hooks):
            # TF's hook writes graph.pbtxt through a writer that fails on protobuf 7: ours
            # write it and the checkpoints' .meta files it would have written.
            if config.checkpoint_save_graph_def:
                chief_hooks.append(_GraphTextHook(config.model_dir))
                saving_listeners = [_MetaGraphListener(config.model_dir, spec.scaffold)] + \
                    saving_listeners
            chief_hooks.append(v1.train.CheckpointSaverHook(
                config.model_dir, save_secs=config.save_checkpoints_secs,
                save_steps=config.save_checkpoints_steps, scaffold=spec.scaffold,
                listeners=saving_listeners, save_graph_def=False))
        loss = None
        with v1.train.MonitoredTrainingSession(
                is_chief=True, checkpoint_dir=config.model_dir, scaffold=spec.scaffold,
                hooks=hooks, chief_only_hooks=chief_hooks, save_checkpoint_secs=0,
                save_summaries_steps=config.save_summary_steps, config=self._session_config(),
                log_step_count_steps=config.log_step_count_steps) as session:
            while not session.should_stop():
                _, loss = session.run([spec.train_op, spec.loss])
        return loss

    def evaluate(self, input_fn, steps=None, hooks=None, checkpoint_path=None, name=None):
        """Evaluates the latest checkpoint (or checkpoint_path) on `steps` batches or all.

        Args:
          input_fn: returns a tf.data.Dataset of (features, labels), or the tensors.
          steps: batches to evaluate; None: until the input ends.
          hooks: more SessionRunHooks.
          checkpoint_path: a checkpoint prefix (or a folder: its latest) to evaluate.
          name: evaluations of different data keep their summaries in eval_<name>.

        Returns:
          {metric name: value, "loss": mean loss, "global_step": the checkpoint's step}.
        """
        if steps is not None and steps <= 0:
            raise ValueError("evaluate: steps=%s must be positive" % steps)
        path = self._checkpoint_for(checkpoint_path, "evaluate")
        with tf.Graph().as_default():
            spec, input_hooks = self._build(input_fn, ModeKeys.EVAL)
            metrics = _metrics_with_loss(spec)
            evaluation = _EvalHook({**{k: v[0] for k, v in metrics.items()},
                                    GLOBAL_STEP: v1.train.get_global_step()}, steps)
            all_hooks = input_hooks + list(hooks or ()) + list(spec.evaluation_hooks)
            creator = v1.train.ChiefSessionCreator(
                scaffold=spec.scaffold, checkpoint_filename_with_path=path,
                config=self._session_config())
            logging.info("Starting evaluation")
            with v1.train.MonitoredSession(session_creator=creator,
                                           hooks=all_hooks + [evaluation]) as session:
                update_ops = {k: v[1] for k, v in metrics.items()}
                while not session.should_stop():
                    session.run(update_ops)
        results = dict(evaluation.values)
        logging.info("Finished evaluation")
        logging.info("Saving dict for global step %d: %s", results[GLOBAL_STEP], ", ".join(
            "%s = %s" % (k, results[k]) for k in sorted(results)))
        _write_summaries(self.eval_dir(name), results)
        return results

    def predict(self, input_fn, predict_keys=None, hooks=None, checkpoint_path=None,
                yield_single_examples=True):
        """Yields the model's predictions for the input, restored as `evaluate` does.

        Args:
          input_fn: returns a tf.data.Dataset of features (labels, if any, are dropped).
          predict_keys: the prediction names to keep (None: all).
          hooks: more SessionRunHooks.
          checkpoint_path: a checkpoint prefix (or a folder: its latest).
          yield_single_examples: one item per example (split at the batch dimension);
            False: one per batch.

        Yields:
          A dict {name: numpy value} per example (or batch); a model whose predictions are
          one tensor yields that tensor's values.
        """
        path = self._checkpoint_for(checkpoint_path, "predict")
        graph = tf.Graph()
        with graph.as_default():
            spec, input_hooks = self._build(input_fn, ModeKeys.PREDICT)
            predictions = _selected(spec.predictions, predict_keys)
            creator = v1.train.ChiefSessionCreator(
                scaffold=spec.scaffold, checkpoint_filename_with_path=path,
                config=self._session_config())
            session = v1.train.MonitoredSession(
                session_creator=creator,
                hooks=input_hooks + list(hooks or ()) + list(spec.prediction_hooks))
        # The graph is made the default only around each run: between items the caller's
        # own code (eager, or another graph) runs as it would without us.
        try:
            while True:
                with graph.as_default():
                    if session.should_stop():
                        break
                    try:
                        values = session.run(predictions)
                    except tf.errors.OutOfRangeError:
                        break
                yield from _items(values, yield_single_examples)
        finally:
            with graph.as_default():
                session.close()

    def export_saved_model(self, *args, **kwargs):
        """Refused: SavedModel export of a model_fn (one line naming what to use instead)."""
        del args, kwargs
        raise NotImplementedError(
            "Estimator.export_saved_model is not in bert_tf2's Estimator; export the trained "
            "checkpoint with bert-tf2's export_saved_model.py (a TF2 SavedModel for TF Serving)")

    export_savedmodel = export_saved_model
    experimental_export_all_saved_models = export_saved_model


def _check_steps(steps, max_steps):
    if steps is not None and max_steps is not None:
        raise ValueError("train: give steps or max_steps, not both")
    if steps is not None and steps <= 0:
        raise ValueError("train: steps=%s must be positive" % steps)
    if max_steps is not None and max_steps <= 0:
        raise ValueError("train: max_steps=%s must be positive" % max_steps)


def _warm_start(settings):
    v1.train.warm_start(settings.ckpt_to_initialize_from, settings.vars_to_warm_start,
                        settings.var_name_to_vocab_info, settings.var_name_to_prev_var_name)


def _add_default_saver(scaffold, config):
    """TF 1.x's Estimator saver: sharded, relative paths, keep_checkpoint_max kept."""
    if scaffold.saver is not None or v1.get_collection(v1.GraphKeys.SAVERS):
        return
    v1.add_to_collection(v1.GraphKeys.SAVERS, v1.train.Saver(
        sharded=True, max_to_keep=config.keep_checkpoint_max,
        keep_checkpoint_every_n_hours=config.keep_checkpoint_every_n_hours,
        defer_build=True, save_relative_paths=True))


def _metrics_with_loss(spec):
    metrics = dict(spec.eval_metric_ops)
    for reserved in (LOSS, GLOBAL_STEP):
        if reserved in metrics:
            raise ValueError("eval_metric_ops: the name %r is the Estimator's own metric; "
                             "name yours differently" % reserved)
    metrics[LOSS] = v1.metrics.mean(spec.loss)
    return metrics


def _selected(predictions, keys):
    if keys is None:
        return predictions
    if not isinstance(predictions, dict):
        raise ValueError("predict_keys given, but model_fn's predictions are one tensor, "
                         "not a dict")
    keys = [keys] if isinstance(keys, str) else list(keys)
    missing = [k for k in keys if k not in predictions]
    if missing:
        raise ValueError("predict_keys %s are not among the predictions %s"
                         % (missing, sorted(predictions)))
    return {k: predictions[k] for k in keys}


def _items(values, single_examples):
    """The predictions of one batch, as one item or one per example."""
    if not single_examples:
        yield values
        return
    if not isinstance(values, dict):
        yield from _batch_rows("predictions", values)
        return
    lengths = {}
    for key, value in values.items():
        lengths[key] = len(_batch_rows(key, value))
    if len(set(lengths.values())) > 1:
        raise ValueError("predictions of different batch lengths %s; use "
                         "yield_single_examples=False" % lengths)
    for i in range(next(iter(lengths.values()), 0)):
        yield {key: value[i] for key, value in values.items()}


def _batch_rows(name, value):
    if np.ndim(value) == 0:
        raise ValueError("prediction %s has no batch dimension (a scalar); use "
                         "yield_single_examples=False" % name)
    return value


_SUMMARY_FILES = itertools.count()


def _write_summaries(folder, results):
    """Writes an evaluation's scalar results as summaries at its global step."""
    summary = v1.Summary()
    for key, value in sorted(results.items()):
        if key != GLOBAL_STEP and np.ndim(value) == 0 and np.issubdtype(
                np.asarray(value).dtype, np.number):
            summary.value.add(tag=key, simple_value=float(value))
    # FileWriter is graph-mode only; a graph of its own keeps the caller's mode untouched.
    with tf.Graph().as_default():
        # A file of its own per evaluation: two in one second would share a name.
        writer = v1.summary.FileWriter(folder, filename_suffix=".%d.%d" % (
            int(results[GLOBAL_STEP]), next(_SUMMARY_FILES)))
        try:
            writer.add_summary(summary, int(results[GLOBAL_STEP]))
        finally:
            writer.close()


TrainSpec = collections.namedtuple("TrainSpec", ["input_fn", "max_steps", "hooks"])
TrainSpec.__new__.__defaults__ = (None, ())
EvalSpec = collections.namedtuple(
    "EvalSpec", ["input_fn", "steps", "name", "hooks", "exporters", "start_delay_secs",
                 "throttle_secs"])
EvalSpec.__new__.__defaults__ = (100, None, (), (), 120, 600)


class _EvaluateAfterSaves(v1.train.CheckpointSaverListener):
    """Evaluates after a checkpoint save once throttle_secs have passed, and at the end."""

    def __init__(self, estimator, eval_spec):
        self._estimator = estimator
        self._spec = eval_spec
        self._last_time = None
        self._saves = 0
        self.last_step = None
        self.result = None

    def after_save(self, session, global_step_value):
        del session
        self._saves += 1
        if self._saves == 1:
            return   # the save of the starting step, before any training
        if self._last_time is None or (time.time() - self._last_time
                                       >= (self._spec.throttle_secs or 0)):
            self._evaluate(global_step_value)

    def end(self, session, global_step_value):
        del session
        if self.last_step != global_step_value:
            self._evaluate(global_step_value)

    def _evaluate(self, step):
        spec = self._spec
        self.result = self._estimator.evaluate(spec.input_fn, steps=spec.steps,
                                               hooks=spec.hooks, name=spec.name)
        self._last_time = time.time()
        self.last_step = step


def train_and_evaluate(estimator, train_spec, eval_spec):
    """Trains to train_spec.max_steps, evaluating after checkpoint saves, as TF 1.x locally.

    An evaluation follows a save once eval_spec.throttle_secs have passed since the last
    one, and the final checkpoint is always evaluated (start_delay_secs: distributed only).

    Args:
      estimator: an Estimator.
      train_spec: a TrainSpec.
      eval_spec: an EvalSpec (exporters refused).

    Returns:
      (the last evaluation's results, []) as TF 1.x's local mode.
    """
    if eval_spec.exporters:
        raise NotImplementedError(
            "EvalSpec(exporters=...) is not in bert_tf2's Estimator; export with bert-tf2's "
            "export_saved_model.py")
    listener = _EvaluateAfterSaves(estimator, eval_spec)
    estimator.train(train_spec.input_fn, hooks=train_spec.hooks,
                    max_steps=train_spec.max_steps, saving_listeners=[listener])
    if listener.result is None:   # training had nothing to do, or saved no checkpoint
        listener.result = estimator.evaluate(eval_spec.input_fn, steps=eval_spec.steps,
                                             hooks=eval_spec.hooks, name=eval_spec.name)
    return listener.result, []


# tf.estimator.experimental: the early-stopping hooks (TF 1.15's other experimental names
# answer with a line naming them).
experimental = contrib.Namespace("tf.estimator.experimental", EARLY_STOPPING)


# A name this module lacks: one line naming it and what to use instead.
__getattr__ = contrib.missing_names(
    "tf.estimator.%s is not in bert_tf2.compat.estimator (Estimator, EstimatorSpec, "
    "RunConfig, ModeKeys, WarmStartSettings, TrainSpec, EvalSpec, train_and_evaluate); "
    "export with bert-tf2's export_saved_model.py, stop early with the runners' "
    "--eval_every_n_steps / --early_stopping_patience")
