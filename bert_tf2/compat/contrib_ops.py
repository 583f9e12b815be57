"""The tf.contrib functions forks of the reference call, written for TF 2.20's tf.compat.v1.

Each keeps TF 1.15's signature, variable names and arithmetic, so a fork's graph builds
the variables its checkpoints hold and computes the same numbers:
  layer_norm: `<scope or LayerNorm>/beta`, `/gamma`; moments over the axes from
    begin_norm_axis (default 1, as TF 1.15: every axis but the batch), variance epsilon 1e-12.
  fully_connected: `<scope or fully_connected>/weights`, `/biases`.
  xavier_initializer / variance_scaling_initializer: contrib's fans and its truncated
    normal of stddev sqrt(1.3 * factor / n).
  l1_regularizer / l2_regularizer: scale * sum|w|, scale * sum(w^2) / 2.
  map_and_batch / parallel_interleave: the dataset transformations, as map then batch
    and interleave (the same elements in the same order).
  f1_score: the best F1 over num_thresholds thresholds, a (value, update_op) metric.
They run under graph mode (bert_tf2.tf1) and inside any `tf.Graph().as_default()`.
"""
import math
import numbers

import tensorflow as tf

_V1 = tf.compat.v1


def _collections_for(variables_collections, name):
    """The extra collections of variable `name` (a list, or a dict by variable name)."""
    if isinstance(variables_collections, dict):
        found = variables_collections.get(name)
    else:
        found = variables_collections
    if found is None:
        return []
    return [found] if isinstance(found, str) else list(found)


def _model_variable(name, shape, dtype, initializer, variables_collections, trainable,
                    regularizer=None):
    """A variable in the global and model-variable collections (contrib's model_variable)."""
    collections = [_V1.GraphKeys.GLOBAL_VARIABLES, _V1.GraphKeys.MODEL_VARIABLES]
    collections += _collections_for(variables_collections, name)
    return _V1.get_variable(name, shape=shape, dtype=dtype, initializer=initializer,
                            regularizer=regularizer, trainable=trainable,
                            collections=list(dict.fromkeys(collections)))


def _collect_outputs(outputs_collections, outputs):
    """Adds `outputs` to the named collections (contrib's outputs_collections)."""
    if outputs_collections:
        names = [outputs_collections] if isinstance(outputs_collections, str) \
            else outputs_collections
        _V1.add_to_collections(names, outputs)
    return outputs


def _axis(axis, rank, argument):
    """A non-negative axis of a tensor of `rank`; ValueError naming `argument` when outside."""
    resolved = axis + rank if axis < 0 else axis
    if not 0 <= resolved < rank:
        raise ValueError("layer_norm: %s=%d is outside an input of rank %d" % (
            argument, axis, rank))
    return resolved


def layer_norm(inputs, center=True, scale=True, activation_fn=None, reuse=None,
               variables_collections=None, outputs_collections=None, trainable=True,
               begin_norm_axis=1, begin_params_axis=-1, scope=None):
    """tf.contrib.layers.layer_norm: normalizes over the axes from begin_norm_axis on.

    Args:
      inputs: a tensor of known rank; the axes from begin_params_axis on must be known.
      center / scale: add beta [params shape] (zeros) / multiply by gamma (ones).
      begin_norm_axis: first axis of the moments (negative counts from the end).
      begin_params_axis: first axis of beta's and gamma's shape.
      scope: variable scope (default "LayerNorm", made unique as TF1 does).
    Returns:
      (inputs - mean) / sqrt(variance + 1e-12) * gamma + beta, then activation_fn.
    """
    inputs = tf.convert_to_tensor(inputs)
    rank = inputs.shape.rank
    if rank is None:
        raise ValueError("layer_norm: the rank of %s is unknown" % inputs.name)
    norm_axis = _axis(begin_norm_axis, rank, "begin_norm_axis")
    params_shape = inputs.shape[_axis(begin_params_axis, rank, "begin_params_axis"):]
    if not params_shape.is_fully_defined():
        raise ValueError("layer_norm: %s has dimensions %s unknown from begin_params_axis on"
                         % (inputs.name, inputs.shape))
    dtype = inputs.dtype.base_dtype
    with _V1.variable_scope(scope, "LayerNorm", [inputs], reuse=reuse):
        beta = gamma = None
        if center:
            beta = _model_variable("beta", params_shape, dtype, _V1.zeros_initializer(),
                                   variables_collections, trainable)
        if scale:
            gamma = _model_variable("gamma", params_shape, dtype, _V1.ones_initializer(),
                                    variables_collections, trainable)
        mean, variance = tf.nn.moments(inputs, list(range(norm_axis, rank)), keepdims=True)
        outputs = tf.nn.batch_normalization(inputs, mean, variance, offset=beta, scale=gamma,
                                            variance_epsilon=1e-12)
        outputs.set_shape(inputs.shape)
        if activation_fn is not None:
            outputs = activation_fn(outputs)
        return _collect_outputs(outputs_collections, outputs)


def _fans(shape):
    """(fan_in, fan_out) of a weight shape as contrib counted them (receptive field included)."""
    if not shape:
        return 1.0, 1.0
    fan_in = float(shape[-2]) if len(shape) > 1 else float(shape[-1])
    fan_out = float(shape[-1])
    for dim in shape[:-2]:
        fan_in *= float(dim)
        fan_out *= float(dim)
    return fan_in, fan_out


class VarianceScaling:
    """contrib's variance_scaling_initializer: n from the fans by `mode`, variance factor / n."""

    def __init__(self, factor=2.0, mode="FAN_IN", uniform=False, seed=None, dtype=tf.float32):
        if mode not in ("FAN_IN", "FAN_OUT", "FAN_AVG"):
            raise TypeError("variance_scaling_initializer: mode %r is not FAN_IN, FAN_OUT "
                            "or FAN_AVG" % (mode,))
        if not tf.as_dtype(dtype).is_floating:
            raise TypeError("variance_scaling_initializer: dtype %s is not a float type"
                            % tf.as_dtype(dtype).name)
        self.factor, self.mode, self.uniform = float(factor), mode, uniform
        self.seed, self.dtype = seed, tf.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        """A tensor of `shape`; a partitioned variable's fans come from its full shape."""
        dtype = tf.as_dtype(dtype or self.dtype)
        full = partition_info.full_shape if partition_info is not None else shape
        fan_in, fan_out = _fans([int(d) for d in full])
        n = {"FAN_IN": fan_in, "FAN_OUT": fan_out, "FAN_AVG": (fan_in + fan_out) / 2.0}[
            self.mode]
        if self.uniform:
            limit = math.sqrt(3.0 * self.factor / n)
            return tf.random.uniform(shape, -limit, limit, dtype, seed=self.seed)
        # contrib's constant: 1.3 makes up (roughly) for the variance the truncation removes.
        stddev = math.sqrt(1.3 * self.factor / n)
        return tf.random.truncated_normal(shape, 0.0, stddev, dtype, seed=self.seed)

    def get_config(self):
        """The constructor's arguments."""
        return {"factor": self.factor, "mode": self.mode, "uniform": self.uniform,
                "seed": self.seed, "dtype": self.dtype.name}


def variance_scaling_initializer(factor=2.0, mode="FAN_IN", uniform=False, seed=None,
                                 dtype=tf.float32):
    """tf.contrib.layers.variance_scaling_initializer (He's initialization by default)."""
    return VarianceScaling(factor, mode, uniform, seed, dtype)


def xavier_initializer(uniform=True, seed=None, dtype=tf.float32):
    """tf.contrib.layers.xavier_initializer: Glorot's, variance 1 / mean(fan_in, fan_out)."""
    return VarianceScaling(1.0, "FAN_AVG", uniform, seed, dtype)


def _checked_scale(scale, name):
    """`scale` as a float; ValueError for a negative or non-number scale."""
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise ValueError("%s: scale %r is not a number" % (name, scale))
    if scale < 0.0:
        raise ValueError("%s: scale %s is negative" % (name, scale))
    return float(scale)


def l2_regularizer(scale, scope=None):
    """tf.contrib.layers.l2_regularizer: weights -> scale * sum(weights ** 2) / 2."""
    return _regularizer(scale, scope, "l2_regularizer", tf.nn.l2_loss)


def l1_regularizer(scale, scope=None):
    """tf.contrib.layers.l1_regularizer: weights -> scale * sum(|weights|)."""
    return _regularizer(scale, scope, "l1_regularizer",
                        lambda weights: tf.reduce_sum(tf.abs(weights)))


def _regularizer(scale, scope, name, penalty):
    """weights -> scale * penalty(weights) under the name scope `scope` (else `name`);
    None for every weight when scale is 0."""
    scale = _checked_scale(scale, name)
    if scale == 0.0:
        return lambda _: None

    def regularize(weights):
        with tf.name_scope(scope or name):
            return tf.multiply(tf.cast(scale, weights.dtype.base_dtype), penalty(weights))
    return regularize


def fully_connected(inputs, num_outputs, activation_fn=tf.nn.relu, normalizer_fn=None,
                    normalizer_params=None, weights_initializer=xavier_initializer(),
                    weights_regularizer=None, biases_initializer=_V1.zeros_initializer(),
                    biases_regularizer=None, reuse=None, variables_collections=None,
                    outputs_collections=None, trainable=True, scope=None):
    """tf.contrib.layers.fully_connected: activation_fn(inputs @ weights + biases).

    Args:
      inputs: [..., in] (the last axis known); num_outputs: the width of the output.
      biases_initializer: None (or a normalizer_fn) for no biases.
    Returns:
      [..., num_outputs]; variables `<scope or fully_connected>/weights` and `/biases`.
    """
    inputs = tf.convert_to_tensor(inputs)
    width = inputs.shape[-1]
    if width is None:
        raise ValueError("fully_connected: the last dimension of %s is unknown" % inputs.name)
    with _V1.variable_scope(scope, "fully_connected", [inputs], reuse=reuse):
        weights = _model_variable("weights", [width, num_outputs], inputs.dtype.base_dtype,
                                  weights_initializer,
                                  variables_collections, trainable, weights_regularizer)
        if inputs.shape.rank == 2:
            outputs = tf.matmul(inputs, weights)
        else:
            outputs = tf.tensordot(inputs, weights, [[inputs.shape.rank - 1], [0]])
        if normalizer_fn is not None:
            outputs = normalizer_fn(outputs, **(normalizer_params or {}))
        elif biases_initializer is not None:
            biases = _model_variable("biases", [num_outputs], inputs.dtype.base_dtype,
                                     biases_initializer,
                                     variables_collections, trainable, biases_regularizer)
            outputs = tf.nn.bias_add(outputs, biases)
        if activation_fn is not None:
            outputs = activation_fn(outputs)
        return _collect_outputs(outputs_collections, outputs)


def _parallel_calls(num_parallel_batches, num_parallel_calls, batch_size):
    """map's num_parallel_calls for map_and_batch's two ways of saying it."""
    if num_parallel_batches is not None and num_parallel_calls is not None:
        raise ValueError("map_and_batch: give num_parallel_batches or num_parallel_calls, "
                         "not both")
    if num_parallel_calls is not None or num_parallel_batches is None:
        return num_parallel_calls
    if isinstance(batch_size, numbers.Integral):
        return int(num_parallel_batches) * int(batch_size)
    return tf.data.AUTOTUNE


def map_and_batch(map_func, batch_size, num_parallel_batches=None, drop_remainder=False,
                  num_parallel_calls=None):
    """tf.contrib.data.map_and_batch: a transformation for Dataset.apply, map then batch.

    Returns:
      dataset -> dataset.map(map_func).batch(batch_size, drop_remainder): the same batches
      in the same order (the parallel calls keep the order).
    """
    calls = _parallel_calls(num_parallel_batches, num_parallel_calls, batch_size)

    def apply(dataset):
        return dataset.map(map_func, num_parallel_calls=calls).batch(
            batch_size, drop_remainder=drop_remainder)
    return apply


def parallel_interleave(map_func, cycle_length, block_length=1, sloppy=False,
                        buffer_output_elements=None, prefetch_input_elements=None):
    """tf.contrib.data.parallel_interleave: a transformation for Dataset.apply.

    cycle_length input elements are open at once, block_length elements taken from each in
    turn, cycle_length of them read in parallel; sloppy=True lets a ready element go first.
    The two buffer sizes are left to tf.data's own prefetching.
    """
    del buffer_output_elements, prefetch_input_elements

    def apply(dataset):
        return dataset.interleave(map_func, cycle_length=cycle_length,
                                  block_length=block_length, num_parallel_calls=cycle_length,
                                  deterministic=not sloppy)
    return apply


def _best_f1(true_pos, false_pos, false_neg, epsilon):
    """The highest F1 over the thresholds of the three counts [thresholds]."""
    precision = true_pos / (epsilon + true_pos + false_pos)
    recall = true_pos / (epsilon + true_pos + false_neg)
    return tf.reduce_max(2.0 * precision * recall / (precision + recall + epsilon))


def f1_score(labels, predictions, weights=None, num_thresholds=200, metrics_collections=None,
             updates_collections=None, name=None):
    """tf.contrib.metrics.f1_score: the best F1 over thresholds, streamed (graph mode).

    Args:
      labels: castable to bool; predictions: scores (or 0/1 labels) in [0, 1].
      num_thresholds: thresholds evenly spaced over [0, 1], the ends just outside it.
    Returns:
      (f1, update_op) as every tf.metrics function.
    """
    epsilon = 1e-7
    thresholds = [-epsilon] + [(i + 1) / (num_thresholds - 1.0)
                               for i in range(num_thresholds - 2)] + [1.0 + epsilon]
    with _V1.variable_scope(name, "f1", (labels, predictions, weights)):
        counts = [count(labels, predictions, thresholds, weights)
                  for count in (_V1.metrics.true_positives_at_thresholds,
                                _V1.metrics.false_positives_at_thresholds,
                                _V1.metrics.false_negatives_at_thresholds)]
        value = _best_f1(*[c[0] for c in counts], epsilon)
        update = _best_f1(*[c[1] for c in counts], epsilon)
    if metrics_collections:
        _V1.add_to_collections(metrics_collections, value)
    if updates_collections:
        _V1.add_to_collections(updates_collections, update)
    return value, update
