"""Optimizer, learning-rate schedule and gradient clipping for BERT training.

The reference's API, in its order: ``create_optimizer(loss, init_lr, num_train_steps,
num_warmup_steps, use_tpu)`` returns the reference's train op (tf.compat.v1 graph mode) built
on ``AdamWeightDecayOptimizer``, the same update rule as a tf.compat.v1 optimizer.

Called without a loss, ``create_optimizer(init_lr, num_train_steps, num_warmup_steps,
optimizer_type=...)`` returns a tf_keras optimizer for a TF2 training loop instead (the
package's bert_tf2/optim/, re-exported here):

* ``WarmupPolynomialDecay`` -- the rate rises linearly from 0 over ``num_warmup_steps``
  updates, then falls linearly to 0 at ``num_train_steps`` (bert_tf2/optim/schedule.py).
* ``AdamWeightDecay`` -- Adam without bias correction plus decoupled weight decay, none for
  names matching ("LayerNorm", "layer_norm", "bias"); slots "adam_m" / "adam_v"
  (bert_tf2/optim/adamw.py).
* ``LAMB`` -- tf-models-official's layer-wise adaptive rule, same slots and checkpoints, for
  large-batch pre-training (bert_tf2/optim/lamb.py).
* ``clip_gradients`` -- the reference's clipping to global norm 1.0, for the training step
  (or ``clip_norm=1.0`` inside ``apply_gradients``); ``keras_optimizer``, ``create_slots``
  (bert_tf2/optim/keras_bridge.py).

Two ways to run the same update (``create_optimizer(..., fused=...)``): ``fused=True``
(default; bert_tf2/base/fused_update.py) updates the variables of each device in a few XLA
computations, within a few ulp of the op-by-op update (XLA contracts multiply-adds; the bound
is checked over 100 steps in tests/test_optimization.py); ``fused=False`` runs the TF1 update
op by op, per variable, bit for bit.

Only ``tf_keras`` (Keras 2) is used, never ``tf.keras``.

Contracts with the other modules (optimization.py / bert_tf2/optim/ /
bert_tf2/base/fused_update.py):
- optimization.py holds the reference's API in its order: create_optimizer(loss, init_lr,
  num_train_steps, num_warmup_steps, use_tpu) -> the reference's train op (=
  create_train_op; graph mode) and AdamWeightDecayOptimizer (tf.compat.v1);
  create_optimizer(init_lr, num_train_steps, num_warmup_steps, optimizer_type="adamw", ...)
  -> tf_keras optimizer (= keras_optimizer). It re-exports the TF2 half from
  bert_tf2/optim/: schedule.py (WarmupPolynomialDecay), adamw.py (AdamWeightDecay,
  adam_update, per_variable_hlo), lamb.py (LAMB), keras_bridge.py (keras_optimizer,
  clip_gradients, create_slots, OPTIMIZER_TYPES), args.py (argument checks,
  DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY, the name rules). Class names, Keras registered names
  ("bert_tf2>AdamWeightDecay", ...), optimizer names and slot names are those of before.
- AdamWeightDecay and LAMB derive from fused_update.FusedOptimizer (the XLA update of a
  device's variables, clip folded in); their per-variable rules stay beside them
  (adam_update, lamb_update). fused_step assigns the two moment slots inside the XLA
  computation (resource handles, shapes static) and returns the new parameters, which the
  caller assigns: values within a few ulp of the per-variable path's, bit for bit those of
  the earlier return-everything form.
- learning_rate_multipliers={regex: factor} (FusedOptimizer, so AdamWeightDecay and the
  fused LAMB; keras_optimizer passes it): a variable whose name (":0" removed) matches the
  first regex updates with lr_t x factor, fused and per-variable paths alike
  (`scaled_rate`); the rules' arithmetic is untouched, so every other variable's values are
  bit for bit those without it.
"""

import tensorflow as tf

from bert_tf2.base.fused_update import FUSED_GROUPINGS
from bert_tf2.optim.adamw import SLOT_M, SLOT_V, AdamWeightDecay, adam_update, per_variable_hlo
from bert_tf2.optim.args import DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY, decays, strip_output_index
from bert_tf2.optim.keras_bridge import (OPTIMIZER_TYPES, clip_gradients, create_slots,
                                         keras_optimizer)
from bert_tf2.optim.lamb import LAMB
from bert_tf2.optim.schedule import WarmupPolynomialDecay

__all__ = [
    "DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY",
    "OPTIMIZER_TYPES",
    "WarmupPolynomialDecay",
    "AdamWeightDecay",
    "LAMB",
    "FUSED_GROUPINGS",
    "clip_gradients",
    "create_optimizer",
    "create_slots",
    "keras_optimizer",
    "per_variable_hlo",
    "create_train_op",
    "AdamWeightDecayOptimizer",
]


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
                for slot in (SLOT_M, SLOT_V))
            new_param, new_m, new_v = adam_update(
                tf.convert_to_tensor(grad), param, m, v, coef,
                self._do_use_weight_decay(param_name))
            assignments.extend([param.assign(new_param), m.assign(new_m), v.assign(new_v)])
        return tf.group(*assignments, name=name)

    def _do_use_weight_decay(self, param_name):
        """True if the variable called `param_name` gets weight decay."""
        return decays(param_name, self.weight_decay_rate, self.exclude_from_weight_decay)

    def _get_variable_name(self, param_name):
        """The variable's name without its ":0" output index (the reference's method)."""
        return strip_output_index(param_name)

