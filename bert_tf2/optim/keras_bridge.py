"""The Keras optimizer bridge: BERT's optimizer with its schedule for a TF2 training loop,
gradient clipping by global norm, and slots made before a checkpoint is restored."""

import tensorflow as tf

from bert_tf2.optim.adamw import AdamWeightDecay
from bert_tf2.optim.args import DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY, as_float, as_pattern_list
from bert_tf2.optim.lamb import LAMB
from bert_tf2.optim.schedule import WarmupPolynomialDecay

# Accepted values of ``create_optimizer(optimizer_type=...)``.
OPTIMIZER_TYPES = ("adamw", "lamb")


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
    clip_norm = as_float(clip_norm, "clip_norm", low=0.0, low_inclusive=False)
    grads = list(grads)
    if all(g is None for g in grads):
        clipped, norm = grads, tf.constant(0.0, tf.float32)
    else:
        clipped, norm = tf.clip_by_global_norm(grads, clip_norm)
        clipped = list(clipped)
    if return_norm:
        return clipped, norm
    return clipped


def optimizer_kind(optimizer_type):
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
    kind = optimizer_kind(optimizer_type)
    schedule = WarmupPolynomialDecay(
        init_lr=init_lr,
        num_train_steps=num_train_steps,
        num_warmup_steps=num_warmup_steps)
    if exclude_from_weight_decay is None:
        exclude_from_weight_decay = DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY
    exclude = as_pattern_list(exclude_from_weight_decay, "exclude_from_weight_decay")
    hyper = _checked_hyper(weight_decay_rate, beta_1, beta_2, epsilon)
    if clip_norm is not None:
        clip_norm = as_float(clip_norm, "clip_norm", low=0.0, low_inclusive=False)
    if learning_rate_multipliers:
        hyper["learning_rate_multipliers"] = learning_rate_multipliers
    if kind == "adamw":
        return AdamWeightDecay(
            learning_rate=schedule, exclude_from_weight_decay=exclude,
            jit_compile=jit_compile, fused=fused, clip_norm=clip_norm,
            fused_grouping=fused_grouping, **hyper)
    return _lamb(schedule, exclude, fused, clip_norm, fused_grouping, hyper)


def _checked_hyper(weight_decay_rate, beta_1, beta_2, epsilon):
    """The rules' coefficients as Python floats, each range-checked (ValueError naming it)."""
    return dict(
        weight_decay_rate=as_float(weight_decay_rate, "weight_decay_rate", low=0.0),
        beta_1=as_float(beta_1, "beta_1", low=0.0, high=1.0, high_inclusive=False),
        beta_2=as_float(beta_2, "beta_2", low=0.0, high=1.0, high_inclusive=False),
        epsilon=as_float(epsilon, "epsilon", low=0.0))


def _lamb(schedule, exclude, fused, clip_norm, fused_grouping, hyper):
    """Our fused LAMB, or (fused=False) tf-models-official's LAMB class itself."""
    if fused:
        return LAMB(learning_rate=schedule, exclude_from_weight_decay=list(exclude),
                    exclude_from_layer_adaptation=list(exclude), clip_norm=clip_norm,
                    fused_grouping=fused_grouping, **hyper)
    if hyper.get("learning_rate_multipliers"):
        raise ValueError("learning_rate_multipliers: not with the unfused LAMB "
                         "(tf-models-official's class)")
    # Imported lazily: pulling in tf-models-official is slow and only needed
    # for this optimizer.
    from official.modeling.optimization import lamb  # pylint: disable=g-import-not-at-top
    return lamb.LAMB(learning_rate=schedule, exclude_from_weight_decay=list(exclude),
                     exclude_from_layer_adaptation=list(exclude),
                     global_clipnorm=clip_norm, **hyper)
