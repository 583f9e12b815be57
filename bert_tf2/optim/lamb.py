"""LAMB (layer-wise adaptive moments) for large-batch pre-training: tf-models-official's rule,
slots and checkpoints, plus the fused update of fused_update.FusedOptimizer."""

import re

import tensorflow as tf
import tf_keras

from bert_tf2.base import fused_update
from bert_tf2.optim.args import as_pattern_list, logical_variable, strip_output_index


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
        self.exclude_from_weight_decay = as_pattern_list(
            exclude_from_weight_decay, "exclude_from_weight_decay")
        self.exclude_from_layer_adaptation = as_pattern_list(
            exclude_from_layer_adaptation, "exclude_from_layer_adaptation"
        ) or list(self.exclude_from_weight_decay)

    def _create_slots(self, var_list):
        for slot_name in self._SLOT_NAMES:
            for var in var_list:
                self.add_slot(var, slot_name)

    def _variable_flags(self, var):
        """(weight decay, layer adaptation) for ``var``, decided by its name."""
        name = strip_output_index(logical_variable(var).name)

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

    _update_rule = staticmethod(lambda *args: lamb_update(*args))

    def _resource_apply_dense(self, grad, var, apply_state=None):
        coef = self._coefficients(var, apply_state)
        m = self.get_slot(var, "m")
        v = self.get_slot(var, "v")
        new_param, new_m, new_v = lamb_update(
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


def lamb_update(grad, param, m, v, coef, flags):
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
