"""AdamWeightDecay: the reference's update rule (Adam without bias correction, decoupled
weight decay except on names matching a list of regexes) as a tf_keras optimizer.

Update rule for a parameter ``p`` with gradient ``g`` at the update that follows ``t``
completed updates (``t = optimizer.iterations``)::

    m <- beta_1 * m + (1 - beta_1) * g
    v <- beta_2 * v + (1 - beta_2) * g * g
    u  = m / (sqrt(v) + epsilon)
    u += weight_decay_rate * p          (only if p is not excluded by name)
    p <- p - lr(t) * u

Slot variables are called ``"adam_m"`` and ``"adam_v"`` (tf_keras slot mechanism, tracked per
variable for checkpoints); their TF1 names, ``"<variable name>/adam_m"`` and
``"<variable name>/adam_v"``, are given by ``optimizer.slot_tf1_names()``.
"""

import numbers

import tensorflow as tf
import tf_keras

from bert_tf2.base import fused_update
from bert_tf2.optim.args import (DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY, as_float, as_pattern_list,
                                 decays, logical_variable, strip_output_index)

# Names of the two moment slots, as in the TF1 checkpoints.
SLOT_M = "adam_m"
SLOT_V = "adam_v"


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

    _SLOT_NAMES = (SLOT_M, SLOT_V)

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
            as_float(learning_rate, "learning_rate", low=0.0)
        self._set_hyper("learning_rate", kwargs.get("lr", learning_rate))
        self._set_hyper("decay", self._initial_decay)
        # The remaining coefficients are kept as Python floats: the TF1 code
        # combines them in double precision (e.g. 1.0 - beta_1) before they
        # become float32 constants, and we do the same to match it exactly.
        self.weight_decay_rate = as_float(
            weight_decay_rate, "weight_decay_rate", low=0.0)
        self.beta_1 = as_float(beta_1, "beta_1", low=0.0, high=1.0,
                                high_inclusive=False)
        self.beta_2 = as_float(beta_2, "beta_2", low=0.0, high=1.0,
                                high_inclusive=False)
        self.epsilon = as_float(epsilon, "epsilon", low=0.0)
        self.exclude_from_weight_decay = as_pattern_list(
            exclude_from_weight_decay, "exclude_from_weight_decay")
        # "<variable name>/adam_m" -> slot variable, filled as slots are made.
        # (The slot variables' own names may carry the optimizer's name scope
        # as a prefix, so the TF1-style names are recorded here instead.)
        self._tf1_slot_index = {}

    # ---- decisions by variable name ---------------------------------------
    def _do_use_weight_decay(self, param_name):
        """True if the variable called ``param_name`` gets weight decay."""
        return decays(param_name, self.weight_decay_rate, self.exclude_from_weight_decay)

    def uses_weight_decay(self, var):
        """Public helper: whether ``var`` (a variable or a name) is decayed."""
        name = var if isinstance(var, str) else logical_variable(var).name
        return self._do_use_weight_decay(name)

    def _variable_flags(self, var):
        """The static choice of the fused update for ``var``: weight decay or not."""
        return self.uses_weight_decay(var)

    # ---- slots -------------------------------------------------------------
    def _create_slots(self, var_list):
        # All first moments, then all second moments (mirrors Adam's order).
        for slot_name in (SLOT_M, SLOT_V):
            for var in var_list:
                slot = self.add_slot(var, slot_name)
                base = strip_output_index(logical_variable(var).name)
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
            base = strip_output_index(logical_variable(var).name)
            for slot_name in (SLOT_M, SLOT_V):
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
    _update_rule = staticmethod(lambda *args: adam_update(*args))

    def _resource_apply_dense(self, grad, var, apply_state=None):
        coef = self._coefficients(var, apply_state)
        m = self.get_slot(var, SLOT_M)
        v = self.get_slot(var, SLOT_V)
        update = adam_update_xla if self.jit_compile else adam_update
        new_param, new_m, new_v = update(
            tf.convert_to_tensor(grad), tf.convert_to_tensor(var), tf.convert_to_tensor(m),
            tf.convert_to_tensor(v),
            {k: coef[k] for k in ("lr_t", "beta_1", "one_minus_beta_1", "beta_2",
                                  "one_minus_beta_2", "epsilon", "weight_decay_rate")},
            self._do_use_weight_decay(logical_variable(var).name))
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


def adam_update(grad, param, m, v, coef, decay):
    """(new param, new m, new v) of one AdamWeightDecay step, in the TF1 op order."""
    new_m = coef["beta_1"] * m + coef["one_minus_beta_1"] * grad
    new_v = coef["beta_2"] * v + coef["one_minus_beta_2"] * tf.square(grad)
    direction = new_m / (tf.sqrt(new_v) + coef["epsilon"])
    if decay:
        direction += coef["weight_decay_rate"] * param
    return param - coef["lr_t"] * direction, new_m, new_v


# The same arithmetic as one XLA kernel per variable (AdamWeightDecay(jit_compile=True)).
adam_update_xla = tf.function(adam_update, jit_compile=True, reduce_retracing=True)


def per_variable_hlo(grad, var, stage="optimized_hlo"):
    """The compiled XLA text of AdamWeightDecay(jit_compile=True)'s update of one variable.

    (fused=False with --enable_xla: one such computation per variable; for kernel
    counts, benchmarks/optimizer.py --kernels.)
    """
    coef = {k: tf.constant(0.5) for k in ("lr_t", "beta_1", "one_minus_beta_1", "beta_2",
                                          "one_minus_beta_2", "epsilon", "weight_decay_rate")}
    return adam_update_xla.experimental_get_compiler_ir(
        grad, var.value(), var.value(), var.value(), coef, True)(stage=stage)
