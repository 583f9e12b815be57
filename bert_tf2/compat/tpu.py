"""tf.contrib.tpu for forks of the reference: TPUEstimator as TF 1.x ran it with use_tpu=False.

The reference's scripts (and every fork of them) build a TPUEstimator even on CPU / GPU;
TF 1.x then fell back to a plain Estimator with TPUEstimator's conventions, and so does
this module, on bert_tf2.compat.estimator:

- `input_fn(params)` and `model_fn(..., params)` get params["batch_size"]: the
  train / eval / predict batch size of the mode (and params["use_tpu"] = False);
- model_fn may return a `TPUEstimatorSpec`: its `scaffold_fn` is called (so
  `init_from_checkpoint` inside it takes effect), `eval_metrics = (metric_fn, tensors)`
  becomes metric_fn(*tensors) (or **tensors for a dict), `host_call`'s ops run each step;
- `RunConfig(cluster, master, tpu_config=TPUConfig(...), ...)`, `InputPipelineConfig`,
  `CrossShardOptimizer` (the wrapped optimizer's own updates on one device).

`use_tpu=True` is refused in one line: bert-tf2's TF2 runners run on TPUs through
tf.distribute; a TPUEstimator here never silently trains on the CPU instead.
"""
import collections

import tensorflow as tf

from bert_tf2.compat import contrib
from bert_tf2.compat import estimator as estimator_lib

v1 = tf.compat.v1
logging = v1.logging

BATCH_SIZE = "batch_size"
USE_TPU = "use_tpu"
# Keys TPUEstimator fills in params itself ("context" held TF 1.x's TPUContext).
_RESERVED_PARAMS = (BATCH_SIZE, "context")
# The collection tf.summary's graph-mode writers put their initializers in.
_SUMMARY_WRITER_INITS = "_SUMMARY_WRITER_V2"

_TPU_REFUSAL = (
    "TPUEstimator(use_tpu=True)%s: bert_tf2 runs TPUEstimator on CPU / GPU only "
    "(use_tpu=False, the reference's default); on a TPU run bert-tf2's TF2 runners "
    "(run_classifier.py / run_squad.py / run_pretraining.py --use_tpu --tpu_name=...), "
    "which train through tf.distribute.TPUStrategy")


class InputPipelineConfig:
    """How TF 1.x fed TPU hosts (kept for forks' configs; one device reads the input here)."""

    PER_SHARD_V1 = 1
    PER_HOST_V1 = 2
    PER_HOST_V2 = 3
    BROADCAST = 4
    SLICED = 5


TPUConfig = collections.namedtuple("TPUConfig", [
    "iterations_per_loop", "num_shards", "num_cores_per_replica",
    "per_host_input_for_training", "tpu_job_name", "initial_infeed_sleep_secs",
    "input_partition_dims", "eval_training_input_configuration",
    "experimental_host_call_every_n_steps", "experimental_allow_per_host_v2_parallel_get_next",
    "experimental_feed_hook"])
TPUConfig.__new__.__defaults__ = (2, None, None, True, None, None, None,
                                  InputPipelineConfig.PER_HOST_V1, 1, False, None)


class RunConfig(estimator_lib.RunConfig):
    """TPUEstimator's RunConfig: the Estimator's, plus the TPU's config, master and cluster."""

    def __init__(self, tpu_config=None, evaluation_master=None, master=None, cluster=None,
                 **kwargs):
        super().__init__(**kwargs)
        self.tpu_config = tpu_config if tpu_config is not None else TPUConfig()
        self.cluster = cluster
        self.master = master or ""
        self.evaluation_master = evaluation_master or self.master


_TPU_SPEC_FIELDS = ("mode", "predictions", "loss", "train_op", "eval_metrics",
                    "export_outputs", "scaffold_fn", "host_call", "training_hooks",
                    "evaluation_hooks", "prediction_hooks")


class TPUEstimatorSpec(collections.namedtuple("TPUEstimatorSpec", _TPU_SPEC_FIELDS)):
    """What a TPUEstimator's model_fn returns; `as_estimator_spec` is how it runs here."""

    def __new__(cls, mode, predictions=None, loss=None, train_op=None, eval_metrics=None,
                export_outputs=None, scaffold_fn=None, host_call=None, training_hooks=None,
                evaluation_hooks=None, prediction_hooks=None):
        for name, call in (("eval_metrics", eval_metrics), ("host_call", host_call)):
            _check_call(name, call)
        if scaffold_fn is not None and not callable(scaffold_fn):
            raise ValueError("TPUEstimatorSpec: scaffold_fn must be a function returning a "
                             "Scaffold")
        return super().__new__(
            cls, mode, predictions, loss, train_op, eval_metrics, export_outputs, scaffold_fn,
            host_call, tuple(training_hooks or ()), tuple(evaluation_hooks or ()),
            tuple(prediction_hooks or ()))

    def as_estimator_spec(self):
        """The EstimatorSpec this spec runs as on CPU / GPU (metric_fn and scaffold_fn called).

        Returns:
          An estimator.EstimatorSpec.
        """
        eval_metric_ops = _call(self.eval_metrics) if self.eval_metrics is not None else None
        hooks = []
        if self.host_call is not None:
            hooks.append(_HostCallHook(_call(self.host_call)))
        scaffold = self.scaffold_fn() if self.scaffold_fn is not None else None
        return estimator_lib.EstimatorSpec(
            mode=self.mode, predictions=self.predictions, loss=self.loss,
            train_op=self.train_op, eval_metric_ops=eval_metric_ops,
            export_outputs=self.export_outputs, scaffold=scaffold,
            training_hooks=list(self.training_hooks) + hooks,
            evaluation_hooks=list(self.evaluation_hooks) + hooks,
            prediction_hooks=list(self.prediction_hooks) + hooks)


def _check_call(name, call):
    if call is None:
        return
    if not (isinstance(call, (tuple, list)) and len(call) == 2 and callable(call[0])):
        raise ValueError("TPUEstimatorSpec: %s must be (function, list or dict of tensors)" % name)
    if not isinstance(call[1], (tuple, list, dict)):
        raise ValueError("TPUEstimatorSpec: %s's tensors must be a list or a dict, not %s"
                         % (name, type(call[1]).__name__))


def _call(call):
    fn, tensors = call
    if isinstance(tensors, dict):
        return fn(**tensors)
    return fn(*tensors)


class _HostCallHook(v1.train.SessionRunHook):
    """Runs a host_call's ops with every step (its summary writers started first)."""

    def __init__(self, ops):
        self._ops = ops

    def begin(self):
        self._writer_inits = v1.get_collection(_SUMMARY_WRITER_INITS)

    def after_create_session(self, session, coord):
        del coord
        if self._writer_inits:
            session.run(self._writer_inits)

    def before_run(self, run_context):
        del run_context
        return v1.train.SessionRunArgs(self._ops)


class _ExamplesPerSecondHook(estimator_lib.GlobalStepHook):
    """Logs "examples/sec: N" beside global_step/sec, as TPUEstimator did."""

    def __init__(self, batch_size, every_n_steps):
        self._batch_size = batch_size
        self._timer = v1.train.SecondOrStepTimer(every_steps=every_n_steps)

    def after_run(self, run_context, run_values):
        del run_context
        step = run_values.results + 1   # the value fetched is the one before this step's update
        if self._timer.should_trigger_for_step(step):
            seconds, steps = self._timer.update_last_triggered_step(step)
            if seconds:
                logging.info("examples/sec: %g", steps * self._batch_size / seconds)


def _batch_size(name, value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError("TPUEstimator: %s=%r must be a positive integer" % (name, value))
    return value


class TPUEstimator(estimator_lib.Estimator):
    """TF 1.x's TPUEstimator with use_tpu=False: an Estimator with per-mode batch sizes."""

    def __init__(self, model_fn=None, model_dir=None, config=None, params=None, use_tpu=True,
                 train_batch_size=None, eval_batch_size=None, predict_batch_size=None,
                 batch_axis=None, eval_on_tpu=True, export_to_tpu=True, export_to_cpu=True,
                 warm_start_from=None, embedding_config_spec=None,
                 export_saved_model_api_version=None):
        del batch_axis, eval_on_tpu, export_to_tpu, export_to_cpu, export_saved_model_api_version
        config = config if config is not None else RunConfig()
        if use_tpu:
            raise ValueError(_TPU_REFUSAL % _tpu_named(config))
        if embedding_config_spec is not None:
            raise ValueError("TPUEstimator(embedding_config_spec=...): TPU embeddings need a "
                             "TPU; bert_tf2 runs TPUEstimator on CPU / GPU only")
        reserved = [key for key in _RESERVED_PARAMS if key in (params or {})]
        if reserved:
            raise ValueError("TPUEstimator: params hold %s, which TPUEstimator sets itself"
                             % ", ".join(reserved))
        self._batch_sizes = {
            estimator_lib.ModeKeys.TRAIN: _batch_size("train_batch_size", train_batch_size),
            estimator_lib.ModeKeys.EVAL: _batch_size("eval_batch_size", eval_batch_size),
            estimator_lib.ModeKeys.PREDICT: _batch_size("predict_batch_size",
                                                        predict_batch_size)}
        super().__init__(model_fn, model_dir=model_dir, config=config, params=params,
                         warm_start_from=warm_start_from)

    def params_for_mode(self, mode):
        """The user's params plus this mode's batch_size and use_tpu=False.

        Args:
          mode: an estimator.ModeKeys value.

        Returns:
          A dict.
        """
        params = self.params
        if self._batch_sizes[mode] is not None:
            params[BATCH_SIZE] = self._batch_sizes[mode]
        params[USE_TPU] = False
        return params

    def spec_of(self, model_fn_result):
        """The EstimatorSpec of a TPUEstimatorSpec (or an EstimatorSpec as it is)."""
        if isinstance(model_fn_result, TPUEstimatorSpec):
            model_fn_result = model_fn_result.as_estimator_spec()
        return super().spec_of(model_fn_result)

    def train(self, input_fn, hooks=None, steps=None, max_steps=None, saving_listeners=None):
        """Estimator.train, logging examples/sec too when train_batch_size is known."""
        hooks = list(hooks or ())
        size = self._batch_sizes[estimator_lib.ModeKeys.TRAIN]
        if size and self.config.log_step_count_steps:
            hooks.append(_ExamplesPerSecondHook(size, self.config.log_step_count_steps))
        return super().train(input_fn, hooks=hooks, steps=steps, max_steps=max_steps,
                             saving_listeners=saving_listeners)


def _tpu_named(config):
    cluster = getattr(config, "cluster", None)
    if cluster is not None:
        master = getattr(cluster, "master", None)
        try:
            return " with cluster %s" % (master() if callable(master) else cluster)
        except (ValueError, RuntimeError, OSError):
            return " with a TPUClusterResolver"
    if getattr(config, "master", ""):
        return " with master %s" % config.master
    return ""


class CrossShardOptimizer(v1.train.Optimizer):
    """TF 1.x's cross-shard wrapper; on one device the wrapped optimizer's own updates."""

    def __init__(self, opt, reduction="weighted_sum_over_batch_size",
                 name="CrossShardOptimizer", group_assignment=None):
        del reduction, group_assignment
        super().__init__(use_locking=False, name=name)
        self._opt = opt

    def compute_gradients(self, loss, var_list=None, **kwargs):
        """The wrapped optimizer's gradients (one shard: nothing to average)."""
        return self._opt.compute_gradients(loss, var_list=var_list, **kwargs)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """The wrapped optimizer's update."""
        return self._opt.apply_gradients(grads_and_vars, global_step=global_step, name=name)

    def get_slot(self, *args, **kwargs):
        """The wrapped optimizer's slot."""
        return self._opt.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        """The wrapped optimizer's slot names."""
        return self._opt.get_slot_names(*args, **kwargs)

    def variables(self):
        """The wrapped optimizer's variables."""
        return self._opt.variables()


# A name this module lacks: one line naming it and what to use instead.
__getattr__ = contrib.missing_names(
    "tf.contrib.tpu.%s is not in bert_tf2.compat.tpu, which runs TPUEstimator on CPU / GPU "
    "(TPUEstimator, TPUEstimatorSpec, RunConfig, TPUConfig, InputPipelineConfig, "
    "CrossShardOptimizer); for TPUs use bert-tf2's TF2 runners with --use_tpu")
