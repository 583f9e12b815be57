"""Optimizer, learning-rate schedule and gradient clipping for BERT training.

This module reproduces, in TensorFlow 2 / tf_keras, the weight-update
behaviour of the original TF1 BERT training code:

* ``WarmupPolynomialDecay`` -- learning rate that rises linearly from 0 over
  ``num_warmup_steps`` updates and then falls linearly to 0 at
  ``num_train_steps`` (staying at 0 afterwards).
* ``AdamWeightDecay`` -- Adam *without* bias correction plus decoupled weight
  decay that is skipped for variables whose name matches one of a list of
  regular expressions (LayerNorm parameters and biases by default).
* ``LAMB`` -- the layer-wise adaptive rule of tf-models-official's LAMB, for
  large-batch pre-training (same slots and checkpoints as that class).
* ``clip_gradients`` -- clipping by global norm (1.0), which the training step
  applies to the gradients before handing them to ``apply_gradients`` (or
  the optimizer does, with ``clip_norm=1.0``).
* ``create_optimizer`` -- builds the schedule and the optimizer ("adamw" for
  the reference behaviour, "lamb" for large-batch pre-training); called as the
  reference calls it, ``create_optimizer(loss, init_lr, num_train_steps,
  num_warmup_steps, use_tpu)``, it returns the reference's train op instead
  (tf.compat.v1 graph mode, ``AdamWeightDecayOptimizer``, same update rule).

Two ways to run the same update (``create_optimizer(..., fused=...)``):

* ``fused=True`` (default; fused_update.py): the variables of each device are updated by XLA in
  a few fused computations (one for all of them on GPU/TPU, one per variable
  on CPU), the clipping scale folded in; the new values are then assigned to
  the same per-variable slots.  XLA contracts multiply-adds, so values are
  within a few ulp of the op-by-op update (tests/test_optimization.py states
  and checks the bound over 100 steps).
* ``fused=False``: the TF1 update op by op, per variable, bit for bit.

Update rule of ``AdamWeightDecay`` for a parameter ``p`` with gradient ``g``
at the update that follows ``t`` completed updates (``t = optimizer.iterations``)::

    m <- beta_1 * m + (1 - beta_1) * g
    v <- beta_2 * v + (1 - beta_2) * g * g
    u  = m / (sqrt(v) + epsilon)
    u += weight_decay_rate * p          (only if p is not excluded by name)
    p <- p - lr(t) * u

Slot variables are called ``"adam_m"`` and ``"adam_v"`` (tf_keras slot
mechanism, tracked per variable for checkpoints).  Their TF1 names,
``"<variable name>/adam_m"`` and ``"<variable name>/adam_v"``, are given by
``optimizer.slot_tf1_names()``; a single slot is ``optimizer.get_slot(var,
"adam_m")``.  (The slot variables' own ``.name`` follows the same layout but
may be prefixed by the optimizer's name scope, e.g. "AdamWeightDecay/".)

Only ``tf_keras`` (Keras 2) is used, never ``tf.keras``, so the module behaves
the same whether or not ``TF_USE_LEGACY_KERAS`` is set.
"""

import math
import numbers
import re

import tensorflow as tf
import tf_keras

from bert_tf2.base import fused_update
from bert_tf2.base.fused_update import FUSED_GROUPINGS  # noqa: F401 (part of this module's API)

__all__ = [
    "DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY",
    "OPTIMIZER_TYPES",
    "WarmupPolynomialDecay",
    "AdamWeightDecay",
    "LAMB",
    "FUSED_GROUPINGS",
    "clip_gradients",
    "create_optimizer",
    "keras_optimizer",
    "create_train_op",
    "AdamWeightDecayOptimizer",
]

# Name patterns (searched with re.search) of variables that get no weight decay.
DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")

# Accepted values of ``create_optimizer(optimizer_type=...)``.
OPTIMIZER_TYPES = ("adamw", "lamb")

# Names of the two moment slots, as in the TF1 checkpoints.
_SLOT_M = "adam_m"
_SLOT_V = "adam_v"

_OUTPUT_INDEX_SUFFIX = re.compile(r":\d+$")


# --------------------------------------------------------------------------- #
# Argument checking helpers
# --------------------------------------------------------------------------- #
def _as_step_count(value, arg_name, minimum):
    """Returns ``value`` as a Python int, checking it is an integer >= minimum."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(
            f"{arg_name} must be an integer, got {value!r} "
            f"({type(value).__name__}).")
    if isinstance(value, numbers.Integral):
        as_int = int(value)
    else:
        as_float = float(value)
        if not math.isfinite(as_float) or as_float != int(as_float):
            raise ValueError(f"{arg_name} must be a whole number, got {value!r}.")
        as_int = int(as_float)
    if as_int < minimum:
        comparison = "positive" if minimum == 1 else f">= {minimum}"
        raise ValueError(f"{arg_name} must be {comparison}, got {value!r}.")
    return as_int


def _as_float(value, arg_name, low=None, high=None, low_inclusive=True,
              high_inclusive=True):
    """Returns ``value`` as a Python float after range checks."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(
            f"{arg_name} must be a real number, got {value!r} "
            f"({type(value).__name__}).")
    as_float = float(value)
    if not math.isfinite(as_float):
        raise ValueError(f"{arg_name} must be finite, got {value!r}.")
    if low is not None and (as_float < low or (not low_inclusive and as_float == low)):
        bound = ">=" if low_inclusive else ">"
        raise ValueError(f"{arg_name} must be {bound} {low}, got {value!r}.")
    if high is not None and (as_float > high or
                             (not high_inclusive and as_float == high)):
        bound = "<=" if high_inclusive else "<"
        raise ValueError(f"{arg_name} must be {bound} {high}, got {value!r}.")
    return as_float


def _as_pattern_list(patterns, arg_name):
    """Normalises a collection of regex strings into a list (None -> [])."""
    if patterns is None:
        return []
    if isinstance(patterns, (str, bytes)):
        raise ValueError(
            f"{arg_name} must be a list of regular expressions, not a single "
            f"string ({patterns!r}); wrap it in a list.")
    result = []
    for pattern in patterns:
        if not isinstance(pattern, str):
            raise ValueError(
                f"{arg_name} entries must be strings, got {pattern!r}.")
        try:
            re.compile(pattern)
        except re.error as err:
            raise ValueError(
                f"{arg_name} entry {pattern!r} is not a valid regular "
                f"expression: {err}") from err
        result.append(pattern)
    return result


def _strip_output_index(name):
    """'a/b/kernel:0' -> 'a/b/kernel' (names without a suffix are unchanged)."""
    return _OUTPUT_INDEX_SUFFIX.sub("", name)


def _logical_variable(var):
    """For a per-replica component of a distributed variable, its container.

    Under MirroredStrategy the optimizer's per-variable hooks receive the
    component living on one device, whose name may carry a "/replica_N"
    suffix.  Name-based decisions are taken on the logical variable instead
    so that every replica decides the same way.
    """
    container_fn = getattr(var, "_distributed_container", None)
    if callable(container_fn):
        container = container_fn()
        if container is not None:
            return container
    try:
        # Plain resource variables of a replica carry the link on the handle.
        handle = getattr(var, "handle", None)
        container_fn = getattr(handle, "_distributed_container", None)
        container = container_fn() if callable(container_fn) else None
    except Exception:  # pylint: disable=broad-except
        container = None
    return var if container is None else container


# --------------------------------------------------------------------------- #
# Learning-rate schedule
# --------------------------------------------------------------------------- #
@tf_keras.utils.register_keras_serializable(package="bert_tf2")
class WarmupPolynomialDecay(tf_keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up followed by linear (power 1) decay to zero.

    For ``t`` completed updates (the value of ``optimizer.iterations`` when the
    next update is computed)::

        lr(t) = init_lr * t / num_warmup_steps                   if t < num_warmup_steps
        lr(t) = init_lr * (1 - min(t, num_train_steps) / num_train_steps)   otherwise

    So the very first update (t = 0) uses a learning rate of 0 when there is a
    warm-up, and every update from ``num_train_steps`` on uses 0.  With
    ``num_warmup_steps == 0`` there is no warm-up phase at all.

    All arithmetic is done in float32, in the same order as the TF1 graph
    (``tf.train.polynomial_decay`` + the warm-up blend), so values agree
    bit for bit with the original implementation.
    """

    def __init__(self, init_lr, num_train_steps, num_warmup_steps=0, name=None):
        super().__init__()
        self.init_lr = _as_float(init_lr, "init_lr", low=0.0)
        self.num_train_steps = _as_step_count(num_train_steps, "num_train_steps", 1)
        self.num_warmup_steps = _as_step_count(
            num_warmup_steps, "num_warmup_steps", 0)
        self.name = name

    def __call__(self, step):
        with tf.name_scope(self.name or "WarmupPolynomialDecay"):
            step = tf.convert_to_tensor(step)
            if step.dtype.is_integer:
                step_int = tf.cast(step, tf.int64)
                step_float = tf.cast(step_int, tf.float32)
            else:
                step_float = tf.cast(step, tf.float32)
                step_int = None

            init_lr = tf.constant(self.init_lr, dtype=tf.float32)
            total = tf.constant(float(self.num_train_steps), dtype=tf.float32)

            # Polynomial (power 1) decay towards 0, frozen after num_train_steps.
            fraction_done = tf.minimum(step_float, total) / total
            decayed_lr = init_lr * (1.0 - fraction_done)

            if not self.num_warmup_steps:
                return decayed_lr

            warmup = tf.constant(float(self.num_warmup_steps), dtype=tf.float32)
            warmup_lr = init_lr * (step_float / warmup)
            if step_int is not None:
                in_warmup = step_int < tf.constant(self.num_warmup_steps, tf.int64)
            else:
                in_warmup = step_float < warmup
            return tf.where(in_warmup, warmup_lr, decayed_lr)

    def get_config(self):
        """The optimizer's settings, for Keras serialization."""
        return {
            "init_lr": self.init_lr,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
            "name": self.name,
        }


# --------------------------------------------------------------------------- #
# AdamWeightDecay
# --------------------------------------------------------------------------- #
@tf_keras.utils.register_keras_serializable(package="bert_tf2")
class AdamWeightDecay(fused_update.FusedOptimizer):
    """Adam without bias correction, with decoupled weight decay (BERT's rule).

    Subclasses the classic tf_keras optimizer (``OptimizerV2``), which gives
    slot variables tracked per variable (checkpoint-friendly, restorable in any
    creation order), support for ``tf.distribute`` strategies, for
    ``tf_keras.mixed_precision.LossScaleOptimizer`` and for XLA compilation.

    Args:
      learning_rate: float, tensor, or ``LearningRateSchedule`` (called with
        ``optimizer.iterations``, i.e. the number of completed updates).
      weight_decay_rate: decay coefficient added to the Adam direction as
        ``weight_decay_rate * param``; 0 disables decay entirely.
      beta_1, beta_2: moment decay rates.
      epsilon: added to ``sqrt(v)`` in the denominator.
      exclude_from_weight_decay: regular expressions; a variable whose name
        (":N" suffix removed) contains a match gets no weight decay.  Defaults
        to ("LayerNorm", "layer_norm", "bias"); ``None`` or ``[]`` excludes
        nothing.
      name: optimizer name.
      jit_compile: per-variable path only (``fused=False``): compile each
        variable's update with XLA.  XLA contracts multiply-adds, so values may
        differ from the op-by-op update in the last bit.
      fused: True (default): the fused update (see ``fused_update.FusedOptimizer``): the
        same formula compiled by XLA over the variables of each device, within
        a few ulp of the op-by-op update (XLA contracts multiply-adds; bound in
        tests/test_fused_optimizer.py).  False: the TF1 update op by op, per
        variable, bit for bit the reference's.
      fused_grouping: "auto" (default: "batched" on CPU, "device" on GPU/TPU),
        "device", "batched" or "variable": how the fused update is split into
        XLA computations (see ``fused_update.FusedOptimizer``).
      clip_norm: if set, ``apply_gradients`` clips the gradients to this
        global norm first (``tf.clip_by_global_norm``'s scale; with the fused
        update the multiplication is folded into the update).  None (default):
        no clipping here -- clip with ``clip_gradients`` before.
      **kwargs: passed to the tf_keras base class.
    """

    _SLOT_NAMES = (_SLOT_M, _SLOT_V)

    def __init__(self,
                 learning_rate,
                 weight_decay_rate=0.01,
                 beta_1=0.9,
                 beta_2=0.999,
                 epsilon=1e-6,
                 exclude_from_weight_decay=DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
                 name="AdamWeightDecay",
                 jit_compile=False,
                 fused=True,
                 fused_grouping="auto",
                 clip_norm=None,
                 **kwargs):
        super().__init__(name, fused=fused, fused_grouping=fused_grouping,
                         clip_norm=clip_norm, **kwargs)
        self.jit_compile = bool(jit_compile)
        if isinstance(learning_rate, numbers.Real) and not isinstance(
                learning_rate, bool):
            _as_float(learning_rate, "learning_rate", low=0.0)
        self._set_hyper("learning_rate", kwargs.get("lr", learning_rate))
        self._set_hyper("decay", self._initial_decay)
        # The remaining coefficients are kept as Python floats: the TF1 code
        # combines them in double precision (e.g. 1.0 - beta_1) before they
        # become float32 constants, and we do the same to match it exactly.
        self.weight_decay_rate = _as_float(
            weight_decay_rate, "weight_decay_rate", low=0.0)
        self.beta_1 = _as_float(beta_1, "beta_1", low=0.0, high=1.0,
                                high_inclusive=False)
        self.beta_2 = _as_float(beta_2, "beta_2", low=0.0, high=1.0,
                                high_inclusive=False)
        self.epsilon = _as_float(epsilon, "epsilon", low=0.0)
        self.exclude_from_weight_decay = _as_pattern_list(
            exclude_from_weight_decay, "exclude_from_weight_decay")
        # "<variable name>/adam_m" -> slot variable, filled as slots are made.
        # (The slot variables' own names may carry the optimizer's name scope
        # as a prefix, so the TF1-style names are recorded here instead.)
        self._tf1_slot_index = {}

    # ---- decisions by variable name ---------------------------------------
    def _do_use_weight_decay(self, param_name):
        """True if the variable called ``param_name`` gets weight decay."""
        return _decays(param_name, self.weight_decay_rate, self.exclude_from_weight_decay)

    def uses_weight_decay(self, var):
        """Public helper: whether ``var`` (a variable or a name) is decayed."""
        name = var if isinstance(var, str) else _logical_variable(var).name
        return self._do_use_weight_decay(name)

    def _variable_flags(self, var):
        """The static choice of the fused update for ``var``: weight decay or not."""
        return self.uses_weight_decay(var)

    # ---- slots -------------------------------------------------------------
    def _create_slots(self, var_list):
        # All first moments, then all second moments (mirrors Adam's order).
        for slot_name in (_SLOT_M, _SLOT_V):
            for var in var_list:
                slot = self.add_slot(var, slot_name)
                base = _strip_output_index(_logical_variable(var).name)
                self._tf1_slot_index[f"{base}/{slot_name}"] = slot

    def slot_tf1_names(self, var_list=None):
        """Maps TF1-style slot names to this optimizer's slot variables.

        Returns a dict ``{"<var name>/adam_m": slot, "<var name>/adam_v": slot}``
        where ``<var name>`` is the model variable's name without the ":0"
        suffix (e.g. "my_model/bert/encoder/layer_0/attention/self/query/kernel").
        A checkpoint converter only has to strip or add the model prefix.
        (The slot variables' own ``.name`` may differ: tf_keras creates them
        under the optimizer's name scope, e.g. "AdamWeightDecay/<var>/adam_m:0".)

        Args:
          var_list: model variables whose slots to list.  If None, every slot
            created so far is listed.
        """
        if var_list is None:
            return dict(self._tf1_slot_index)
        result = {}
        for var in var_list:
            base = _strip_output_index(_logical_variable(var).name)
            for slot_name in (_SLOT_M, _SLOT_V):
                result[f"{base}/{slot_name}"] = self.get_slot(var, slot_name)
        return result

    # ---- per-step coefficients -------------------------------------------
    def _decayed_lr(self, var_dtype):
        # Feed the integer step counter to the schedule (the base class casts
        # it to the variable dtype first, which is lossy for float16).
        lr = self._get_hyper("learning_rate")
        if isinstance(lr, tf_keras.optimizers.schedules.LearningRateSchedule):
            lr = lr(self.iterations)
        lr = tf.cast(lr, var_dtype)
        if self._initial_decay > 0.0:
            step = tf.cast(self.iterations, var_dtype)
            lr = lr / (1.0 + tf.cast(self._initial_decay, var_dtype) * step)
        return lr

    def _constants(self, var_dtype):
        """The float32 constants of the update (Python doubles combined first)."""
        def const(value):
            """A float32 (var_dtype) constant of a Python double."""
            return tf.constant(value, dtype=var_dtype)

        return dict(
            beta_1=const(self.beta_1),
            one_minus_beta_1=const(1.0 - self.beta_1),
            beta_2=const(self.beta_2),
            one_minus_beta_2=const(1.0 - self.beta_2),
            epsilon=const(self.epsilon),
            weight_decay_rate=const(self.weight_decay_rate),
        )

    def _prepare_local(self, var_device, var_dtype, apply_state):
        super()._prepare_local(var_device, var_dtype, apply_state)
        apply_state[(var_device, var_dtype)].update(self._constants(var_dtype))

    def _fused_coefficients(self, var_dtype):
        """Learning rate and constants of this step, as tensors of ``var_dtype``."""
        coef = self._constants(var_dtype)
        coef["lr_t"] = tf.identity(self._decayed_lr(var_dtype))
        return coef

    # ---- the update ----------------------------------------------------------
    _update_rule = staticmethod(lambda *args: _adam_update(*args))

    def _resource_apply_dense(self, grad, var, apply_state=None):
        coef = self._coefficients(var, apply_state)
        m = self.get_slot(var, _SLOT_M)
        v = self.get_slot(var, _SLOT_V)
        update = _adam_update_xla if self.jit_compile else _adam_update
        new_param, new_m, new_v = update(
            tf.convert_to_tensor(grad), tf.convert_to_tensor(var), tf.convert_to_tensor(m),
            tf.convert_to_tensor(v),
            {k: coef[k] for k in ("lr_t", "beta_1", "one_minus_beta_1", "beta_2",
                                  "one_minus_beta_2", "epsilon", "weight_decay_rate")},
            self._do_use_weight_decay(_logical_variable(var).name))
        return tf.group(
            var.assign(new_param, use_locking=self._use_locking),
            m.assign(new_m, use_locking=self._use_locking),
            v.assign(new_v, use_locking=self._use_locking),
        )

    # ---- serialisation -------------------------------------------------------
    def get_config(self):
        """The optimizer's settings, for Keras serialization."""
        config = super().get_config()
        config.update({
            "learning_rate": self._serialize_hyperparameter("learning_rate"),
            "decay": self._initial_decay,
            "weight_decay_rate": self.weight_decay_rate,
            "beta_1": self.beta_1,
            "beta_2": self.beta_2,
            "epsilon": self.epsilon,
            "exclude_from_weight_decay": list(self.exclude_from_weight_decay),
            "jit_compile": self.jit_compile,
        })
        config.update(self._fused_config())
        return config


def _adam_update(grad, param, m, v, coef, decay):
    """(new param, new m, new v) of one AdamWeightDecay step, in the TF1 op order."""
    new_m = coef["beta_1"] * m + coef["one_minus_beta_1"] * grad
    new_v = coef["beta_2"] * v + coef["one_minus_beta_2"] * tf.square(grad)
    direction = new_m / (tf.sqrt(new_v) + coef["epsilon"])
    if decay:
        direction += coef["weight_decay_rate"] * param
    return param - coef["lr_t"] * direction, new_m, new_v


# The same arithmetic as one XLA kernel per variable (AdamWeightDecay(jit_compile=True)).
_adam_update_xla = tf.function(_adam_update, jit_compile=True, reduce_retracing=True)


def per_variable_hlo(grad, var, stage="optimized_hlo"):
    """The compiled XLA text of AdamWeightDecay(jit_compile=True)'s update of one variable.

    (fused=False with --enable_xla: one such computation per variable; for kernel
    counts, benchmarks/optimizer.py --kernels.)
    """
    coef = {k: tf.constant(0.5) for k in ("lr_t", "beta_1", "one_minus_beta_1", "beta_2",
                                          "one_minus_beta_2", "epsilon", "weight_decay_rate")}
    return _adam_update_xla.experimental_get_compiler_ir(
        grad, var.value(), var.value(), var.value(), coef, True)(stage=stage)


# --------------------------------------------------------------------------- #
# LAMB
# --------------------------------------------------------------------------- #
@tf_keras.utils.register_keras_serializable(package="bert_tf2")
class LAMB(fused_update.FusedOptimizer):
    """LAMB (layer-wise adaptive moments), the rule of tf-models-official's LAMB.

    Per variable, with ``t`` = completed updates + 1::

        m <- beta_1 * m + (1 - beta_1) * g          (1 - beta_1 in float32)
        v <- beta_2 * v + (1 - beta_2) * g * g
        u  = (m / (1 - beta_1^t)) / (sqrt(v / (1 - beta_2^t)) + epsilon)
        u += weight_decay_rate * p                  (unless excluded by name)
        r  = ||p|| / ||u|| if both > 0 else 1       (unless excluded by name)
        p <- p - r * lr(t - 1) * u

    Same hyper-parameters, slot names ("m", "v") and checkpointed variables as
    ``official.modeling.optimization.lamb.LAMB`` (checkpoints of either load
    into the other), plus the fused update, ``clip_norm`` and ``build`` of
    ``fused_update.FusedOptimizer``.  IndexedSlices gradients are applied densely.

    Args:
      learning_rate: float or ``LearningRateSchedule`` (called with the float
        step, as tf-models' LAMB does).
      beta_1, beta_2, epsilon, weight_decay_rate: the rule's coefficients.
      exclude_from_weight_decay: regexes of variable names without weight decay.
      exclude_from_layer_adaptation: regexes of names without the trust ratio;
        None: the same as exclude_from_weight_decay.
      name, fused, fused_grouping, clip_norm: as for AdamWeightDecay.
      **kwargs: passed to the tf_keras base class.
    """

    _SLOT_NAMES = ("m", "v")

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                 weight_decay_rate=0.0, exclude_from_weight_decay=None,
                 exclude_from_layer_adaptation=None, name="LAMB", fused=True,
                 fused_grouping="auto", clip_norm=None, **kwargs):
        super().__init__(name, fused=fused, fused_grouping=fused_grouping,
                         clip_norm=clip_norm, **kwargs)
        self._set_hyper("weight_decay_rate", weight_decay_rate)
        self._set_hyper("learning_rate", kwargs.get("lr", learning_rate))
        self._set_hyper("decay", self._initial_decay)
        self._set_hyper("beta_1", beta_1)
        self._set_hyper("beta_2", beta_2)
        self.epsilon = epsilon or tf_keras.backend.epsilon()
        self.exclude_from_weight_decay = _as_pattern_list(
            exclude_from_weight_decay, "exclude_from_weight_decay")
        self.exclude_from_layer_adaptation = _as_pattern_list(
            exclude_from_layer_adaptation, "exclude_from_layer_adaptation"
        ) or list(self.exclude_from_weight_decay)

    def _create_slots(self, var_list):
        for slot_name in self._SLOT_NAMES:
            for var in var_list:
                self.add_slot(var, slot_name)

    def _variable_flags(self, var):
        """(weight decay, layer adaptation) for ``var``, decided by its name."""
        name = _strip_output_index(_logical_variable(var).name)

        def matches(patterns):
            """Whether one of the regexes occurs in the variable's name."""
            return any(re.search(p, name) is not None for p in patterns)

        return (not matches(self.exclude_from_weight_decay),
                not matches(self.exclude_from_layer_adaptation))

    def _fused_coefficients(self, var_dtype):
        """tf-models' LAMB coefficients of this step, as tensors of ``var_dtype``."""
        # The base class's _decayed_lr (float step), as tf-models' LAMB.
        beta_1 = tf.identity(self._get_hyper("beta_1", var_dtype))
        beta_2 = tf.identity(self._get_hyper("beta_2", var_dtype))
        step = tf.cast(self.iterations + 1, var_dtype)
        return dict(
            lr_t=tf.identity(self._decayed_lr(var_dtype)),
            weight_decay_rate=tf.identity(self._get_hyper("weight_decay_rate", var_dtype)),
            epsilon=tf.convert_to_tensor(self.epsilon, var_dtype),
            beta_1=beta_1, beta_1_power=tf.pow(beta_1, step), one_minus_beta_1=1 - beta_1,
            beta_2=beta_2, beta_2_power=tf.pow(beta_2, step), one_minus_beta_2=1 - beta_2)

    def _prepare_local(self, var_device, var_dtype, apply_state):
        super()._prepare_local(var_device, var_dtype, apply_state)
        apply_state[(var_device, var_dtype)].update(self._fused_coefficients(var_dtype))

    _update_rule = staticmethod(lambda *args: _lamb_update(*args))

    def _resource_apply_dense(self, grad, var, apply_state=None):
        coef = self._coefficients(var, apply_state)
        m = self.get_slot(var, "m")
        v = self.get_slot(var, "v")
        new_param, new_m, new_v = _lamb_update(
            tf.convert_to_tensor(grad), tf.convert_to_tensor(var), tf.convert_to_tensor(m),
            tf.convert_to_tensor(v), coef, self._variable_flags(var))
        return tf.group(m.assign(new_m, use_locking=self._use_locking),
                        v.assign(new_v, use_locking=self._use_locking),
                        var.assign(new_param, use_locking=self._use_locking))

    def get_config(self):
        """The optimizer's settings, for Keras serialization."""
        config = super().get_config()
        config.update({
            "learning_rate": self._serialize_hyperparameter("learning_rate"),
            "weight_decay_rate": self._serialize_hyperparameter("weight_decay_rate"),
            "decay": self._serialize_hyperparameter("decay"),
            "beta_1": self._serialize_hyperparameter("beta_1"),
            "beta_2": self._serialize_hyperparameter("beta_2"),
            "epsilon": self.epsilon,
            "exclude_from_weight_decay": list(self.exclude_from_weight_decay),
            "exclude_from_layer_adaptation": list(self.exclude_from_layer_adaptation),
        })
        config.update(self._fused_config())
        return config


def _lamb_update(grad, param, m, v, coef, flags):
    """(new param, new m, new v) of one LAMB step, in tf-models' op order."""
    decay, adapt = flags
    new_m = m * coef["beta_1"] + grad * coef["one_minus_beta_1"]
    new_v = v * coef["beta_2"] + (grad * grad) * coef["one_minus_beta_2"]
    m_hat = new_m / (1.0 - coef["beta_1_power"])
    v_hat = new_v / (1.0 - coef["beta_2_power"])
    direction = m_hat / (tf.sqrt(v_hat) + coef["epsilon"])
    if decay:
        direction += coef["weight_decay_rate"] * param
    ratio = 1.0
    if adapt:
        param_norm = tf.norm(param, ord=2)
        direction_norm = tf.norm(direction, ord=2)
        ratio = tf.where(param_norm > 0,
                         tf.where(direction_norm > 0, param_norm / direction_norm, 1.0),
                         1.0)
    return param - ratio * coef["lr_t"] * direction, new_m, new_v


# --------------------------------------------------------------------------- #
# Gradient clipping
# --------------------------------------------------------------------------- #
def clip_gradients(grads, clip_norm=1.0, return_norm=False):
    """Clips a list of gradients so that their global L2 norm is <= clip_norm.

    ``None`` entries are kept as ``None`` and ignored in the norm;
    ``tf.IndexedSlices`` are clipped without being densified.  This is the
    reference's ``tf.clip_by_global_norm(grads, 1.0)`` and belongs in the
    training step, between computing (and, with mixed precision, unscaling)
    the gradients and ``optimizer.apply_gradients``.

    Args:
      grads: sequence of gradients (tensors, IndexedSlices or None).
      clip_norm: the maximum global norm (> 0).
      return_norm: also return the global norm computed before clipping.

    Returns:
      The list of clipped gradients, or ``(clipped, global_norm)`` when
      ``return_norm`` is true.
    """
    clip_norm = _as_float(clip_norm, "clip_norm", low=0.0, low_inclusive=False)
    grads = list(grads)
    if all(g is None for g in grads):
        clipped, norm = grads, tf.constant(0.0, tf.float32)
    else:
        clipped, norm = tf.clip_by_global_norm(grads, clip_norm)
        clipped = list(clipped)
    if return_norm:
        return clipped, norm
    return clipped


# --------------------------------------------------------------------------- #
# Factory
# --------------------------------------------------------------------------- #
def _optimizer_kind(optimizer_type):
    """"adamw" or "lamb" from ``optimizer_type`` (any case); ValueError otherwise."""
    if not isinstance(optimizer_type, str):
        raise ValueError(
            f"optimizer_type must be one of {list(OPTIMIZER_TYPES)}, "
            f"got {optimizer_type!r}.")
    kind = optimizer_type.strip().lower()
    if kind not in OPTIMIZER_TYPES:
        raise ValueError(
            f"Unknown optimizer_type {optimizer_type!r}; allowed values are "
            f"{list(OPTIMIZER_TYPES)}.")
    return kind


def create_slots(optimizer, variables):
    """Creates ``optimizer``'s step counter and slots for ``variables`` now.

    Works for every optimizer ``create_optimizer`` returns (tf-models-official's
    LAMB has no ``build``) and for a LossScaleOptimizer around one.  A training
    loop calls it before restoring a checkpoint, so the saved slot values are
    restored into existing variables instead of being deferred.
    """
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    with tf.init_scope():
        inner._create_all_weights(list(variables))  # pylint: disable=protected-access


def keras_optimizer(init_lr,
                    num_train_steps,
                    num_warmup_steps,
                    optimizer_type="adamw",
                    weight_decay_rate=0.01,
                    beta_1=0.9,
                    beta_2=0.999,
                    epsilon=1e-6,
                    exclude_from_weight_decay=None,
                    jit_compile=False,
                    fused=True,
                    clip_norm=None,
                    fused_grouping="auto",
                    learning_rate_multipliers=None):
    """Builds the BERT optimizer (tf_keras) with its warm-up / linear-decay schedule.

    ``optimizer.apply_gradients(zip(grads, vars))`` performs one update with
    ``lr = WarmupPolynomialDecay(...)(optimizer.iterations)`` and then adds 1
    to ``optimizer.iterations``.  Without ``clip_norm`` no gradient clipping
    happens inside: the training step must call ``clip_gradients`` first.

    Args:
      init_lr: peak learning rate (>= 0).
      num_train_steps: number of updates after which the rate reaches 0 (> 0).
      num_warmup_steps: number of warm-up updates (>= 0; 0 = no warm-up).
      optimizer_type: "adamw" (the reference AdamWeightDecay) or "lamb"
        (tf-models-official's LAMB rule, for large-batch pre-training).
      weight_decay_rate: decoupled weight decay coefficient.
      beta_1, beta_2, epsilon: Adam/LAMB hyper-parameters.
      exclude_from_weight_decay: regexes of variable names without weight
        decay (and, for LAMB, without layer adaptation); None means the
        default ("LayerNorm", "layer_norm", "bias").
      jit_compile: with fused=False, "adamw" only: compile each variable's
        update with XLA (see AdamWeightDecay).
      fused: True (default): all variables of a device updated by XLA in a
        few fused computations, within a few ulp of the op-by-op update.
        False: the per-variable path -- for "adamw" the TF1 update op by op,
        bit for bit; for "lamb" tf-models-official's LAMB class itself.
      clip_norm: clip to this global norm inside ``apply_gradients`` (the
        reference's 1.0; with fused=True folded into the update).  None: the
        caller clips (``clip_gradients``).
      fused_grouping: "auto" (default), "device", "batched" or "variable": how
        the fused update is split into XLA computations (see AdamWeightDecay).
      learning_rate_multipliers: {regex: factor}: a variable whose name matches learns
        at the schedule's rate times the factor (fused_update.FusedOptimizer); not for
        fused=False "lamb".

    Returns:
      A tf_keras (classic ``OptimizerV2``) optimizer, wrappable in
      ``tf_keras.mixed_precision.LossScaleOptimizer``.
    """
    kind = _optimizer_kind(optimizer_type)
    schedule = WarmupPolynomialDecay(
        init_lr=init_lr,
        num_train_steps=num_train_steps,
        num_warmup_steps=num_warmup_steps)
    if exclude_from_weight_decay is None:
        exclude_from_weight_decay = DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY
    exclude = _as_pattern_list(exclude_from_weight_decay,
                               "exclude_from_weight_decay")
    hyper = dict(
        weight_decay_rate=_as_float(weight_decay_rate, "weight_decay_rate", low=0.0),
        beta_1=_as_float(beta_1, "beta_1", low=0.0, high=1.0, high_inclusive=False),
        beta_2=_as_float(beta_2, "beta_2", low=0.0, high=1.0, high_inclusive=False),
        epsilon=_as_float(epsilon, "epsilon", low=0.0))
    if clip_norm is not None:
        clip_norm = _as_float(clip_norm, "clip_norm", low=0.0, low_inclusive=False)
    if learning_rate_multipliers:
        hyper["learning_rate_multipliers"] = learning_rate_multipliers

    if kind == "adamw":
        return AdamWeightDecay(
            learning_rate=schedule, exclude_from_weight_decay=exclude,
            jit_compile=jit_compile, fused=fused, clip_norm=clip_norm,
            fused_grouping=fused_grouping, **hyper)
    if fused:
        return LAMB(learning_rate=schedule, exclude_from_weight_decay=list(exclude),
                    exclude_from_layer_adaptation=list(exclude), clip_norm=clip_norm,
                    fused_grouping=fused_grouping, **hyper)
    if learning_rate_multipliers:
        raise ValueError("learning_rate_multipliers: not with the unfused LAMB "
                         "(tf-models-official's class)")
    # Imported lazily: pulling in tf-models-official is slow and only needed
    # for this optimizer.
    from official.modeling.optimization import lamb  # pylint: disable=g-import-not-at-top
    return lamb.LAMB(learning_rate=schedule, exclude_from_weight_decay=list(exclude),
                     exclude_from_layer_adaptation=list(exclude),
                     global_clipnorm=clip_norm, **hyper)


def create_optimizer(*args, **kwargs):
    """The reference's create_optimizer and ours, told apart by the first argument.

    create_optimizer(loss, init_lr, num_train_steps, num_warmup_steps, use_tpu): the
      reference's TF1 form (graph mode): returns the train op (see create_train_op).
    create_optimizer(init_lr, num_train_steps, num_warmup_steps, optimizer_type=...,
      ...): a tf_keras optimizer for a TF2 training loop (see keras_optimizer).
    A loss is a tensor; a learning rate never is, so the two cannot be confused.
    """
    if "loss" in kwargs or (args and tf.is_tensor(args[0])):
        return create_train_op(*args, **kwargs)
    return keras_optimizer(*args, **kwargs)


def create_train_op(loss, init_lr, num_train_steps, num_warmup_steps, use_tpu):
    """The reference's training op for `loss` (tf.compat.v1 graph mode).

    Gradients of every trainable variable, clipped to global norm 1.0, applied by
    AdamWeightDecayOptimizer (weight decay 0.01, none on LayerNorm and biases)
    at the warm-up / linear-decay rate of the global step, which the op then
    increments. use_tpu wraps the optimizer in CrossShardOptimizer.
    """
    global_step = tf.compat.v1.train.get_or_create_global_step()
    schedule = WarmupPolynomialDecay(init_lr, num_train_steps, num_warmup_steps)
    optimizer = AdamWeightDecayOptimizer(
        learning_rate=schedule(global_step), weight_decay_rate=0.01, beta_1=0.9,
        beta_2=0.999, epsilon=1e-6,
        exclude_from_weight_decay=list(DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY))
    if use_tpu:
        optimizer = tf.compat.v1.tpu.CrossShardOptimizer(optimizer)
    tvars = tf.compat.v1.trainable_variables()
    grads, _ = tf.clip_by_global_norm(tf.gradients(loss, tvars), clip_norm=1.0)
    train_op = optimizer.apply_gradients(zip(grads, tvars), global_step=global_step)
    # apply_gradients leaves the step alone (as the reference's does): count it here,
    # after the update. (The reference groups the two without an order, so a step
    # could read the already incremented count; here every update uses the count
    # of updates before it, as the TF2 optimizers do.)
    with tf.control_dependencies([train_op]):
        return tf.group(global_step.assign_add(1))


class AdamWeightDecayOptimizer(tf.compat.v1.train.Optimizer):
    """The reference's AdamWeightDecay as a tf.compat.v1 optimizer (graph mode).

    Same update as AdamWeightDecay (Adam without bias correction, decoupled
    weight decay except on names matching exclude_from_weight_decay); moments
    in `<variable>/adam_m` and `<variable>/adam_v` from the TF1 variable store.
    apply_gradients does not touch global_step (create_train_op increments it).
    """

    def __init__(self, learning_rate, weight_decay_rate=0.0, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-6, exclude_from_weight_decay=None,
                 name="AdamWeightDecayOptimizer"):
        super().__init__(False, name)
        self.learning_rate = learning_rate
        self.weight_decay_rate = weight_decay_rate
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.exclude_from_weight_decay = exclude_from_weight_decay

    def _coefficients(self):
        """The update's constants (Python doubles combined first) and rate, float32."""
        def const(value):
            return tf.constant(value, tf.float32)
        return dict(lr_t=tf.cast(self.learning_rate, tf.float32),
                    beta_1=const(self.beta_1), one_minus_beta_1=const(1.0 - self.beta_1),
                    beta_2=const(self.beta_2), one_minus_beta_2=const(1.0 - self.beta_2),
                    epsilon=const(self.epsilon),
                    weight_decay_rate=const(self.weight_decay_rate or 0.0))

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """One update of every (gradient, variable) pair; None gradients skipped.
        global_step is accepted for the reference's signature and not incremented."""
        coef = self._coefficients()
        assignments = []
        for grad, param in grads_and_vars:
            if grad is None or param is None:
                continue
            param_name = self._get_variable_name(param.name)
            m, v = (tf.compat.v1.get_variable(
                param_name + "/" + slot, shape=param.shape.as_list(), dtype=tf.float32,
                trainable=False, initializer=tf.compat.v1.zeros_initializer())
                for slot in (_SLOT_M, _SLOT_V))
            new_param, new_m, new_v = _adam_update(
                tf.convert_to_tensor(grad), param, m, v, coef,
                self._do_use_weight_decay(param_name))
            assignments.extend([param.assign(new_param), m.assign(new_m), v.assign(new_v)])
        return tf.group(*assignments, name=name)

    def _do_use_weight_decay(self, param_name):
        """True if the variable called `param_name` gets weight decay."""
        return _decays(param_name, self.weight_decay_rate, self.exclude_from_weight_decay)

    def _get_variable_name(self, param_name):
        """The variable's name without its ":0" output index (the reference's method)."""
        return _strip_output_index(param_name)


def _decays(param_name, weight_decay_rate, exclude_patterns):
    """Whether a variable of this name gets weight decay: a rate, and no pattern of
    exclude_patterns (regular expressions, re.search) matching the name."""
    if not weight_decay_rate:
        return False
    name = _strip_output_index(param_name)
    return not any(re.search(pattern, name) for pattern in exclude_patterns or ())
