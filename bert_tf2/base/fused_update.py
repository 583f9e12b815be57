"""The fused optimizer update: every variable of a device updated by XLA in a few
computations, the global-norm clip folded in.

AdamWeightDecay and LAMB (bert_tf2/optim/) derive from FusedOptimizer and
give it their per-variable rule; with fused=False (and under strategies it does not
cover) the update runs variable by variable, op by op, as the TF1 code did. The
new values are assigned to the same variables and slots either way, so checkpoints
do not depend on the path.

learning_rate_multipliers ({regex: factor}) gives the variables whose names match a
learning rate of their own, the schedule's times the factor (run_ner --crf_learning_rate:
the CRF transitions); every other variable's update is computed as before.
"""
import re

import tensorflow as tf
import tf_keras

def _unwrap_autocast(var):
    """The variable that a mixed-precision AutoCastVariable wraps (others as given).

    AutoCastVariable (tf_keras layers under a mixed policy) keeps the real
    variable in ``_variable``; it is the only variable type with ``true_dtype``.
    """
    if hasattr(var, "true_dtype"):
        inner = vars(var).get("_variable")
        if inner is not None:
            return inner
    return var


def _dense_gradient(grad, var):
    """``grad`` as a dense tensor: IndexedSlices rows (duplicates too) are summed."""
    if isinstance(grad, tf.IndexedSlices):
        num_rows = tf.shape(var, out_type=grad.indices.dtype)[0]
        return tf.math.unsorted_segment_sum(grad.values, grad.indices, num_rows)
    return tf.convert_to_tensor(grad)


def _clip_scale(norm, clip_norm):
    """The factor ``tf.clip_by_global_norm`` multiplies every gradient by.

    Same ops in the same order, so ``g * scale`` is bit for bit its clipped
    gradient: ``clip_norm * min(1 / norm, 1 / clip_norm)``, NaN when the norm is
    not finite.
    """
    scale = clip_norm * tf.minimum(1.0 / norm, tf.constant(1.0, norm.dtype) / clip_norm)
    return scale + (norm - norm)


def fused_step_body(rule, coef, flags, factors, shapes, clip_norm, scale, grads, params,
                    firsts, seconds, slots_in_place=True):
    """One group's update: per variable, (new param,) with ``slots_in_place`` (the
    moment slots written in place), (new param, new first, new second) without it.

    ``rule`` is the per-variable update (``_adam_update`` or ``_lamb_update``),
    ``flags`` its static per-variable choices, ``factors`` each variable's
    learning-rate factor (None: the schedule's rate itself); ``params`` are values,
    ``firsts`` and ``seconds`` the resource handles of the slot variables
    (handles rather than variable objects: a traced computation then holds
    on to no variable of an earlier optimizer), and ``shapes`` their shapes as
    tuples: a handle's trace does not tell one shape from another, the
    static argument keeps variables of other shapes on traces of their own.  With
    ``clip_norm`` the global norm of ``grads`` is computed here (inside the
    compiled cluster); otherwise a ``scale`` computed outside (or None)
    multiplies the gradients.

    With ``slots_in_place`` (GPU, TPU) the slots are assigned inside the
    computation, so XLA writes their new values over the old ones and the
    parameters come back as fresh tensors, assigned by the caller; without it
    (CPU) each variable's (param, first, second) come back, all three assigned
    by the caller.  On CPU a loop that writes over its own input runs
    unvectorised (the vector loop is guarded by a runtime check that the output
    and input buffers do not overlap, which fails when they are the same): the
    parameter pass, which divides and takes square roots, 10.4 against 6.2 ms
    into a buffer of its own on 7.8M elements, and the whole update of
    BERT-Base 267 against 221 ms (benchmarks/README.md, issue 94).  Values are
    bit for bit the same either way.
    """
    if clip_norm is not None:
        scale = _clip_scale(tf.linalg.global_norm(grads), clip_norm)
    new_params = []
    for grad, param, first, second, flag, factor in zip(grads, params, firsts, seconds,
                                                        flags, factors):
        if scale is not None:
            grad = grad * tf.cast(scale, grad.dtype)
        dtype = param.dtype
        new_param, new_first, new_second = rule(
            grad, param, tf.raw_ops.ReadVariableOp(resource=first, dtype=dtype),
            tf.raw_ops.ReadVariableOp(resource=second, dtype=dtype),
            scaled_rate(coef, factor), flag)
        if slots_in_place:
            tf.raw_ops.AssignVariableOp(resource=first, value=new_first)
            tf.raw_ops.AssignVariableOp(resource=second, value=new_second)
            new_params.append((new_param,))
        else:
            new_params.append((new_param, new_first, new_second))
    return new_params


def scaled_rate(coef, factor):
    """``coef`` with its learning rate ``lr_t`` times ``factor`` (None: ``coef`` itself)."""
    return coef if factor is None else dict(coef, lr_t=coef["lr_t"] * factor)


def checked_multipliers(value):
    """{regex: factor} checked (each a valid regex, each factor a number > 0); None: {}."""
    checked = {}
    for pattern, factor in dict(value or {}).items():
        try:
            re.compile(pattern)
        except (re.error, TypeError) as e:
            raise ValueError(f"learning_rate_multipliers: {pattern!r} is not a regular "
                             f"expression ({e})") from None
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not factor > 0:
            raise ValueError(f"learning_rate_multipliers: the factor of {pattern!r} must be "
                             f"a number > 0, got {factor!r}")
        checked[pattern] = float(factor)
    return checked


def _shapes(variables):
    """fused_step's ``shapes``: each (var, first, second)'s shape, as a tuple."""
    return tuple(tuple(parts[0].shape.as_list()) for parts in variables)


# One XLA computation per call: all variables of a device group, or one variable.
fused_step = tf.function(fused_step_body, jit_compile=True, reduce_retracing=True)

# On CPU ("auto"), variables are updated in batches of at least this many
# elements: one XLA call per large variable, the small ones together.
_CPU_BATCH_ELEMENTS = 1 << 20


def _on_cpu(device):
    """Whether variables on ``device`` (a device string; "" or None: the default) live on a
    CPU."""
    return tf.DeviceSpec.from_string(device or "").device_type in (None, "CPU")


def _owner(variable):
    """The name of the layer that holds ``variable``: its name without the last part
    (``.../attention/self/query`` for ``.../query/kernel:0``; a mirrored copy's
    ``/replica_N`` suffix dropped)."""
    name = re.sub(r"(/replica_\d+)?(:\d+)?$", "", variable.name)
    return name.rpartition("/")[0]


def _batches(members, grouping):
    """Splits a device's (grad, variables, flags) members into fused calls.

    "device": one call; "variable": one per variable; "batched": the variables of
    one layer (a dense layer's kernel and bias, a LayerNorm's gamma and beta, the
    embedding tables), a batch closed early once it holds _CPU_BATCH_ELEMENTS
    elements. Each encoder layer then makes the same batches as the one before it
    (same shapes, same flags), which share one traced and compiled program:
    TensorFlow keeps a copy of the graph of every distinct XLA program a training
    function calls for as long as the process lives (its size grows with the
    program's; one copy per run of a notebook or a search), so a program per kind
    of layer rather than one per stretch of the model keeps that copy small. Every variable's values
    are those of any other split (each variable's update is its own loop).
    """
    if grouping == "device":
        return [members]
    if grouping == "variable":
        return [[member] for member in members]
    batches, current, size = [], [], 0
    for member in members:
        if current and _owner(member[1][0]) != _owner(current[-1][1][0]):
            batches.append(current)
            current, size = [], 0
        current.append(member)
        size += member[1][0].shape.num_elements() or 0
        if size >= _CPU_BATCH_ELEMENTS:
            batches.append(current)
            current, size = [], 0
    return batches + ([current] if current else [])

# Accepted values of ``fused_grouping``.
FUSED_GROUPINGS = ("auto", "device", "batched", "variable")

# Strategies under which the fused update runs (their variables are mirrored
# per device, or plain); under others (TPUStrategy, parameter servers) the
# per-variable path runs -- on TPU the whole step is one XLA program anyway.
_FUSABLE_STRATEGIES = (tf.distribute.OneDeviceStrategy, tf.distribute.MirroredStrategy,
                       tf.distribute.MultiWorkerMirroredStrategy)


class FusedOptimizer(tf_keras.optimizers.legacy.Optimizer):
    """Base of AdamWeightDecay and LAMB: optional clipping and the fused update.

    A subclass gives ``_SLOT_NAMES`` (two moment slots), ``_update_rule``
    (a function (grad, param, first, second, coef, flags) -> new values),
    ``_variable_flags(var)`` and ``_fused_coefficients(dtype)``.

    With ``fused=True`` (under no strategy, OneDevice, Mirrored or
    MultiWorkerMirrored, after the usual merge into cross-replica context)
    ``apply_gradients`` groups the variables of each device and computes their
    new values in XLA: ``fused_grouping="device"`` compiles the whole group into
    one computation (one launch, a handful of kernels on GPU); ``"variable"``
    one per variable; ``"batched"`` one per layer of the model (a dense
    layer's kernel and bias, a LayerNorm's two vectors; a variable of 2**20
    elements or more alone), which TF runs in parallel -- on CPU, where XLA
    runs the loops of one computation one after another, that measured faster
    -- and which every encoder layer shares, so that a run traces and keeps a
    program per kind of layer, not one per stretch of the model (see
    ``_batches``); ``"auto"`` (default) is "batched" on CPU devices and
    "device" elsewhere.  The computation gives back the new parameters (and on
    CPU the new moments too; on GPU / TPU it writes the moment slots in place,
    see ``slots_in_place``), which are then assigned to the variables, so what
    is saved is exactly what the per-variable path saves.
    Elsewhere (TPUStrategy, whose step is one XLA program anyway; parameter
    servers; XLA-compiled replica functions without merge call) the update runs
    per variable, with the same formula.
    """

    _HAS_AGGREGATE_GRAD = True
    _SLOT_NAMES = ()

    def __init__(self, name, fused=True, fused_grouping="auto", clip_norm=None,
                 learning_rate_multipliers=None, **kwargs):
        super().__init__(name, **kwargs)
        self.learning_rate_multipliers = checked_multipliers(learning_rate_multipliers)
        self.fused = bool(fused)
        if fused_grouping not in FUSED_GROUPINGS:
            raise ValueError(f"fused_grouping must be one of {list(FUSED_GROUPINGS)}, "
                             f"got {fused_grouping!r}.")
        self.fused_grouping = fused_grouping
        if clip_norm is not None and not float(clip_norm) > 0.0:
            raise ValueError(f"clip_norm must be > 0, got {clip_norm!r}.")
        self.clip_norm = None if clip_norm is None else float(clip_norm)

    def build(self, var_list):
        """Creates the step counter and slot variables for ``var_list`` now.

        Optional: ``apply_gradients`` creates them lazily.  Building ahead is
        handy to restore a checkpoint into existing slots, or to keep
        variable creation out of a ``jit_compile`` function.  Call it under
        the same distribution-strategy scope as the model variables.
        """
        with tf.init_scope():
            self._create_all_weights(list(var_list))

    def rate_factor(self, var):
        """The learning-rate factor of ``var`` (a variable or a name): the first of
        ``learning_rate_multipliers`` whose regex occurs in its name (":0" removed);
        None: none."""
        name = var if isinstance(var, str) else _unwrap_autocast(var).name
        name = re.sub(r":\d+$", "", name)
        for pattern, factor in self.learning_rate_multipliers.items():
            if re.search(pattern, name) is not None:
                return factor
        return None

    # ---- which path ----------------------------------------------------------
    def _fused_here(self, variables):
        """Whether this apply_gradients call takes the fused path.

        Depends only on the settings, the strategy and the graph, so the
        replica-context half (clipping) and the cross-replica half (update)
        of one call always agree.
        """
        if not self.fused:
            return False
        if any(getattr(v, "constraint", None) is not None for v in variables):
            return False
        if not tf.distribute.has_strategy():
            return True
        if not isinstance(tf.distribute.get_strategy(), _FUSABLE_STRATEGIES):
            return False
        # No merge call (XLA-compiled replica function on GPUs): the update
        # runs per replica inside that XLA program, per variable.
        return not tf.__internal__.distribute.strategy_supports_no_merge_call()

    def slots_in_place(self, device):
        """Whether the fused computation on ``device`` writes the moment slots over their
        old values (GPU, TPU: no second copy of the optimizer state) or returns them, to
        be assigned as the parameters are (CPU: XLA's CPU loops that write over their
        input run unvectorised; see fused_step_body). The same values either way."""
        return not _on_cpu(device)

    def _grouping_for(self, device):
        """"device", "batched" or "variable" for the variables on ``device``."""
        if self.fused_grouping != "auto":
            return self.fused_grouping
        return "batched" if _on_cpu(device) else "device"

    # ---- clipping (replica context, after aggregation) -----------------------
    def _transform_gradients(self, grads_and_vars):
        """Keras' transforms, then clip_norm unless the fused update clips."""
        grads_and_vars = list(super()._transform_gradients(grads_and_vars))
        if self.clip_norm is None or not grads_and_vars:
            return grads_and_vars
        variables = [v for _, v in grads_and_vars]
        if self._fused_here(variables):
            return grads_and_vars  # clipped inside the fused update
        grads, _ = tf.clip_by_global_norm([g for g, _ in grads_and_vars], self.clip_norm)
        return list(zip(grads, variables))

    # ---- the update (cross-replica context) ----------------------------------
    def _distributed_apply(self, distribution, grads_and_vars, apply_state, name):
        """The fused update when it applies here, else the per-variable one."""
        grads_and_vars = list(grads_and_vars)
        if not self._fused_here([v for _, v in grads_and_vars]):
            return super()._distributed_apply(distribution, grads_and_vars, apply_state,
                                              name)
        with tf.name_scope(name or self._name):
            updates = self._fused_apply(distribution, grads_and_vars)
            if tf.executing_eagerly():
                return self.iterations.assign_add(1)
            with tf.control_dependencies(updates):
                return self.iterations.assign_add(1, read_value=False)

    def _fused_apply(self, distribution, grads_and_vars):
        """Updates every variable, replica by replica, in a few fused calls."""
        replicas = {}
        for grad, var in grads_and_vars:
            flags = (self._variable_flags(var), self.rate_factor(var))
            slots = [self.get_slot(var, slot) for slot in self._SLOT_NAMES]
            local = [distribution.experimental_local_results(_unwrap_autocast(x))
                     for x in [var] + slots]
            grad_parts = distribution.experimental_local_results(grad)
            for i, parts in enumerate(zip(*local)):
                part = grad_parts[i] if len(grad_parts) > 1 else grad_parts[0]
                replicas.setdefault(i, []).append((part, parts, flags))
        updates = []
        for members in replicas.values():
            updates.extend(self._fused_replica(members))
        return updates

    def _fused_replica(self, members):
        """The (grad, (var, first, second), flags) of one replica, by device and dtype.

        The clipping norm is over all of the replica's gradients: computed by
        TF's own ops (the scale is tf.clip_by_global_norm's, bit for bit), or
        inside the XLA computation when that one computation holds them all.
        """
        groups = {}
        for member in members:
            variable = member[1][0]
            groups.setdefault((variable.device, variable.dtype.base_dtype), []).append(member)
        grads = [grad for grad, _, _ in members]
        sparse = any(isinstance(grad, tf.IndexedSlices) for grad in grads)
        device = members[0][1][0].device
        clip_inside = (self.clip_norm is not None and len(groups) == 1 and not sparse
                       and self._grouping_for(device) == "device")
        scale = None
        if self.clip_norm is not None and not clip_inside:
            with tf.device(device):
                scale = _clip_scale(tf.linalg.global_norm(grads), self.clip_norm)
        updates = []
        for (device, dtype), group in groups.items():
            with tf.device(device):
                updates.extend(self._fused_group(group, dtype, self._grouping_for(device),
                                                 scale, clip_inside))
        return updates

    def _fused_group(self, members, dtype, grouping, scale, clip_inside):
        """Fused update of the members living on one device, with one dtype."""
        coef = self._fused_coefficients(dtype)
        slots_in_place = self.slots_in_place(members[0][1][0].device)
        updates = []
        for batch in _batches(members, grouping):
            variables = [parts for _, parts, _ in batch]
            new_params = fused_step(
                self._update_rule, coef, tuple(flags for _, _, (flags, _) in batch),
                tuple(factor for _, _, (_, factor) in batch),
                _shapes(variables), self.clip_norm if clip_inside else None, scale,
                [_dense_gradient(grad, parts[0]) for grad, parts, _ in batch],
                [tf.convert_to_tensor(parts[0]) for parts in variables],
                *[[parts[k].handle for parts in variables] for k in (1, 2)], slots_in_place)
            # (var, first, second) against (param,) or (param, first, second): what came back.
            updates.extend(target.assign(value, use_locking=self._use_locking, read_value=False)
                           for parts, values in zip(variables, new_params)
                           for target, value in zip(parts, values))
        return updates

    # ---- per-variable path (fused=False, TPU, other strategies) --------------
    def _coefficients(self, var, apply_state):
        var_device, var_dtype = var.device, var.dtype.base_dtype
        found = (apply_state or {}).get((var_device, var_dtype))
        if found is None:
            found = self._fallback_apply_state(var_device, var_dtype)
        return scaled_rate(found, self.rate_factor(var))

    def _densify(self, values, var, indices):
        """Sums sparse rows (duplicates included) into a dense gradient."""
        num_rows = tf.shape(var, out_type=indices.dtype)[0]
        return tf.math.unsorted_segment_sum(values, indices, num_rows)

    def _resource_apply_sparse_duplicate_indices(self, grad, handle, indices,
                                                 **kwargs):
        # The update is dense (as the reference's, which turns the IndexedSlices
        # gradient of an embedding lookup into a dense tensor): every row's
        # moments decay and every row gets weight decay.
        return self._resource_apply_dense(
            self._densify(grad, handle, indices), handle, **kwargs)

    def _resource_apply_sparse(self, grad, var, indices, apply_state=None):
        return self._resource_apply_dense(
            self._densify(grad, var, indices), var, apply_state=apply_state)

    def fused_hlo(self, grads, variables, grouping=None, stage="optimized_hlo"):
        """The compiled XLA text of each computation the fused update launches.

        For `variables` (built, on this process's default device) and dense `grads`,
        split as apply_gradients splits them (`grouping`: default this optimizer's
        choice for a CPU device, "batched" under "auto"). For kernel counts
        (benchmarks/optimizer.py --kernels).
        """
        grouping = grouping or (self.fused_grouping if self.fused_grouping != "auto"
                                else "batched")
        members = [(grad, tuple([var] + [self.get_slot(var, n) for n in self._SLOT_NAMES]),
                    (self._variable_flags(var), self.rate_factor(var)))
                   for grad, var in zip(grads, variables)]
        clip_inside = self.clip_norm if grouping == "device" else None
        scale = tf.constant(1.0) if self.clip_norm and clip_inside is None else None
        coef = self._fused_coefficients(tf.float32)
        texts = []
        for batch in _batches(members, grouping):
            texts.append(fused_step.experimental_get_compiler_ir(
                self._update_rule, coef, tuple(f for _, _, (f, _) in batch),
                tuple(k for _, _, (_, k) in batch),
                _shapes([parts for _, parts, _ in batch]), clip_inside, scale,
                [g for g, _, _ in batch], [parts[0].value() for _, parts, _ in batch],
                *[[parts[k].handle for _, parts, _ in batch] for k in (1, 2)],
                self.slots_in_place(batch[0][1][0].device))(stage=stage))
        return texts

    def _fused_config(self):
        """The fused-update settings, for get_config."""
        return {"fused": self.fused, "fused_grouping": self.fused_grouping,
                "clip_norm": self.clip_norm,
                "learning_rate_multipliers": dict(self.learning_rate_multipliers)}
