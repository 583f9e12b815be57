"""BERT's multi-head self-attention (`attention/self`, `attention/output`) and the
additive attention masks, as tf_keras layers with TF1 variable names.

Shapes in docstrings: B = batch size, S = sequence length, H = hidden size,
N = attention heads, D = H / N, F and T = query and key lengths.
"""
import contextlib
import math

import tensorflow as tf
import tf_keras

from bert_tf2.base import fused_elementwise
from bert_tf2.encoder import layers


def create_attention_mask(input_mask, dtype=tf.float32, instance_ids=None):
    """[B, S] 0/1 mask of keys -> additive mask [B, 1, 1, S]: 0 keep, -10000 drop.

    The reference builds a [B, S, S] mask in which every query row is the same;
    broadcasting one row gives identical scores for less memory.

    With instance_ids [B, S] (packed rows: k on the tokens of the row's k-th
    instance, 0 on padding) the mask is [B, 1, S, S]: query i may attend to key j
    iff instance_ids[i] == instance_ids[j] > 0 (and input_mask[j] is 1). Padding
    queries attend to nothing: their rows are all -10000, a uniform softmax
    that no loss reads.
    """
    # The name scope lets profiles (benchmarks/profile_ops.py) tell the mask's ops apart.
    with tf.name_scope("attention_mask"):
        if instance_ids is not None:
            return _packed_attention_mask(input_mask, instance_ids, dtype)
        mask = tf.cast(input_mask, dtype)[:, tf.newaxis, tf.newaxis, :]
        return (1.0 - mask) * -10000.0


def _packed_attention_mask(input_mask, instance_ids, dtype):
    """The [B, 1, S, S] additive mask of packed rows (see create_attention_mask)."""
    instance_ids = tf.cast(instance_ids, tf.int32)
    keys = instance_ids[:, tf.newaxis, :]
    allowed = tf.logical_and(tf.equal(instance_ids[:, :, tf.newaxis], keys),
                             tf.greater(keys, 0))
    allowed = tf.logical_and(allowed, tf.not_equal(input_mask, 0)[:, tf.newaxis, :])
    mask = tf.cast(allowed, dtype)[:, tf.newaxis, :, :]
    return (1.0 - mask) * -10000.0


def attend(q, k, v, attention_mask, dropout=None):
    """Scaled dot-product attention of every head.

    q [B, N, F, D], k and v [B, N, T, D], attention_mask additive (0 keep, -10000
    drop) broadcastable to [B, N, F, T] -> context [B, F, N, D]. `dropout` (a
    function, or None) is applied to the attention probabilities.
    """
    # The name scopes (scores, softmax, context) let profiles tell the steps apart.
    with tf.name_scope("scores"):
        # Scaling q rather than the [B, N, F, T] scores is less work; with the usual
        # head size 64 the scale is 1/8, a power of two, so the scores are the same.
        q = q * tf.cast(1.0 / math.sqrt(q.shape[-1]), q.dtype)
        scores = tf.matmul(q, k, transpose_b=True)
        # The mask and softmax run in float32 whatever the compute dtype: -10000
        # and large scores are not safe in float16.
        if attention_mask is not None:
            scores = tf.cast(scores, tf.float32) + attention_mask
    with tf.name_scope("softmax"):
        probs = tf.cast(tf.nn.softmax(tf.cast(scores, tf.float32), axis=-1), v.dtype)
    if dropout is not None:
        probs = dropout(probs)
    with tf.name_scope("context"):
        return tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3])


# Keys at least this long take attend_by_example outside training, when it is on.
BY_EXAMPLE_MIN_LENGTH = 128
# Off by default: inference attends to the whole batch at once. Measured in wall time
# on a 2-core AMD EPYC (benchmarks/README.md, "Attention in wall time"), the row loop was
# slower at 128 keys (32 x 12 heads x 128: 16.8 against 11.6 ms), even at 256, and
# within 12% either way at 384; a whole SQuAD pass ran 6% faster without it. An opt-in
# to measure on other CPUs (set_attention_by_example).
_BY_EXAMPLE = {"enabled": False}


def set_attention_by_example(enabled=True):
    """Turns attend_by_example of inference on or off (the default) for graphs traced
    after; returns the previous setting."""
    was = _BY_EXAMPLE["enabled"]
    _BY_EXAMPLE["enabled"] = bool(enabled)
    return was


# How many portable_graphs blocks are open (nested ones count).
_PORTABLE = {"depth": 0}


@contextlib.contextmanager
def portable_graphs():
    """Within it, graphs are traced without the forms chosen for a CPU with oneDNN
    (attend_by_example, fused_elementwise's oneDNN LayerNorm) or for a host without a GPU
    (heads.host_lstm_kernels): a SavedModel is traced so, to run the same graph on
    whatever device loads it."""
    attention_was = _BY_EXAMPLE["enabled"]
    layer_norm_was = fused_elementwise.onednn_layer_norm_enabled()
    set_attention_by_example(False)
    fused_elementwise.set_onednn_layer_norm(False)
    _PORTABLE["depth"] += 1
    try:
        yield
    finally:
        _PORTABLE["depth"] -= 1
        set_attention_by_example(attention_was)
        fused_elementwise.set_onednn_layer_norm(layer_norm_was)


def tracing_portable_graphs():
    """True within portable_graphs (a SavedModel's trace)."""
    return _PORTABLE["depth"] > 0


def attend_by_example(q, k, v, attention_mask):
    """attend() without dropout, one batch row after the other (same shapes and values).

    A row's [N, F, T] scores (12 x 384 x 384 floats: 7 MB) stay in the CPU's cache between
    the scores' batch-matmul, the softmax and the context's batch-matmul, where the whole
    batch's (8 rows: 57 MB) go out to memory and back three times; each row's kernels are
    those of attend (oneDNN's batch-matmul with the scale and mask add as post-ops, its
    softmax). A while loop over the rows (tf.map_fn, one at a time), so the batch size may
    be unknown at trace time.
    """
    def one_row(row):
        q_row, k_row, v_row, mask_row = (t[tf.newaxis] for t in row)
        return attend(q_row, k_row, v_row, mask_row)[0]
    signature = tf.TensorSpec([None, q.shape[1], q.shape[-1]], v.dtype)
    return tf.map_fn(one_row, (q, k, v, attention_mask), fn_output_signature=signature,
                     parallel_iterations=1)


def inference_attend(q, k, v, attention_mask):
    """attend() outside training (no dropout): with set_attention_by_example(True), on a
    CPU with TensorFlow's oneDNN rewrite (fused_elementwise.onednn_cpu_only),
    attend_by_example for keys of BY_EXAMPLE_MIN_LENGTH or more; else attend. Shapes and
    values as attend's."""
    if (attention_mask is None or attention_mask.shape.rank != 4 or not _BY_EXAMPLE["enabled"]
            or not fused_elementwise.onednn_cpu_only()):
        return attend(q, k, v, attention_mask)
    length = k.shape[2]
    if length is not None:
        if length >= BY_EXAMPLE_MIN_LENGTH:
            return attend_by_example(q, k, v, attention_mask)
        return attend(q, k, v, attention_mask)
    return tf.cond(tf.shape(k)[2] >= BY_EXAMPLE_MIN_LENGTH,
                   lambda: attend_by_example(q, k, v, attention_mask),
                   lambda: attend(q, k, v, attention_mask))


# Inference on the real tokens only (Encoder's `tokens`) cuts a batch's rows, sorted by
# length, into this many groups, each attending over its own longest row: the attention
# then does about the work of length-sorted batches whatever order the rows came in.
# 0: the attention over the whole batch, the padding scattered back in (set_row_groups).
_ROW_GROUPS = {"count": 2}


def set_row_groups(count):
    """How many length groups inference's attention on real tokens uses (0: none, the
    whole batch at its longest row) for graphs traced after; returns the previous."""
    was = _ROW_GROUPS["count"]
    _ROW_GROUPS["count"] = int(count)
    return was


def row_group_count():
    """The number of length groups graphs traced now use (0: none)."""
    return _ROW_GROUPS["count"]


class RowGroups(object):
    """How the attention of one batch's real tokens runs in length groups (row_groups).

    gathers: per group, [rows, L] indexes into the T real tokens' rows (a position past
    its row's length repeats the row's first token: a masked key, whose values never
    count, and the row's own, so that not even a NaN crosses rows); masks: per group,
    the additive float32 [rows, 1, 1, L] key mask (-10000 past each row's length, as
    create_attention_mask); places: [T], where each token's context row lands in the
    groups' contexts, concatenated.
    """

    def __init__(self, gathers, masks, places):
        self.gathers, self.masks, self.places = gathers, masks, places


def row_groups(tokens, batch_size, seq_length, num_groups):
    """The RowGroups of a batch whose real tokens are `tokens` ([T] int indexes into the
    B * S positions, in increasing order: each row's real tokens, row after row).

    A row's keys are its real tokens in their order; every other key of the full
    computation is masked there (-10000 before the softmax: a weight of exactly 0 in
    float32), so attending over the row's own tokens gives each real token the same
    context up to summation order. Rows are sorted by length (stable) and split into
    `num_groups` groups of B / num_groups rows (some empty when B is smaller).
    """
    with tf.name_scope("row_groups"):
        tokens = tf.cast(tokens, tf.int32)
        total = tf.size(tokens)
        row = tokens // seq_length
        lengths = tf.math.unsorted_segment_sum(tf.ones_like(row), row, batch_size)
        starts = tf.cumsum(lengths, exclusive=True)
        rank = tf.range(total) - tf.gather(starts, row)
        order = tf.argsort(lengths, stable=True)
        sorted_lengths = tf.gather(lengths, order)
        gathers, masks, bases = [], [], []
        offset = tf.constant(0)
        for g in range(num_groups):
            low = (g * batch_size) // num_groups
            high = ((g + 1) * batch_size) // num_groups
            members = order[low:high]
            longest = tf.maximum(tf.reduce_max(sorted_lengths[low:high]), 0)
            positions = tf.range(longest)[tf.newaxis, :]
            member_lengths = tf.gather(lengths, members)[:, tf.newaxis]
            valid = positions < member_lengths
            first = tf.gather(starts, members)[:, tf.newaxis]
            gathers.append(tf.where(valid, first + positions, tf.minimum(first, total - 1)))
            masks.append(((1.0 - tf.cast(valid, tf.float32)) * -10000.0)[:, tf.newaxis,
                                                                       tf.newaxis, :])
            bases.append(offset + tf.range(high - low) * longest)
            offset += (high - low) * longest
        # bases: per sorted row, where its context rows start; back to input row order.
        row_base = tf.gather(tf.concat(bases, 0), tf.math.invert_permutation(order))
        return RowGroups(gathers, masks, tf.gather(row_base, row) + rank)


def known_false(training):
    """True when `training` (a bool, None or a tensor) is false at trace time."""
    if isinstance(training, (tf.Tensor, tf.Variable)):
        training = tf.get_static_value(training)
    return training is not None and not bool(training)


def key_span(attention_mask, seq_length):
    """How many leading key positions inference's attention needs for this batch
    (set_key_trimming): one past the last key that some row's additive mask
    ([B, 1, 1, S]) leaves other than -10000, or seq_length when a row masks every key
    (its softmax then spreads over all of them, as the reference's does). A scalar
    int32 tensor in [1, seq_length].

    The keys after it are masked in every row, and each row has a key that is not:
    a masked key's weight, exp(score - 10000 - max), is 0 in float32 (unless its score
    tops the row's best unmasked one by more than about 9,900), so attending over the
    keys before it gives every query, padding positions' included, the values of
    attending over all of them, up to the order of the sums."""
    with tf.name_scope("key_span"):
        kept = tf.not_equal(attention_mask[:, 0, 0, :], -10000.0)  # [B, S]
        ends = tf.reduce_max(tf.where(kept, tf.range(1, seq_length + 1)[tf.newaxis], 0),
                             axis=1)  # [B]: 0 for a row that keeps no key
        span = tf.where(tf.reduce_min(ends) > 0, tf.reduce_max(ends), seq_length)
        return tf.clip_by_value(span, 1, seq_length)  # an empty batch: any span will do


def spread_tokens(values, tokens, positions):
    """tf.scatter_nd(tokens, values, [positions, W]): the rows `values` [T, W] of the
    real tokens put at their positions `tokens` [T, 1] (distinct indexes) of [positions,
    W], zeros elsewhere. Made as one gather from `values` under a zero row (TensorFlow's
    CPU ScatterNd zeroes its output and then writes rows one by one: [1866, 1152] rows
    into [2560, 1152], 2.6 ms against 1.4 ms), with scatter_nd's gradient (the tokens'
    rows of the output's gradient): the same values and gradients, to the bit. A graph
    traced for export (portable_graphs) keeps scatter_nd, as the converters know it."""
    if tracing_portable_graphs():
        return tf.scatter_nd(tokens, values, tf.stack(
            [tf.cast(positions, tokens.dtype), tf.shape(values, out_type=tokens.dtype)[1]]))
    count = tf.shape(values, out_type=tokens.dtype)[0]
    # 1 + the row of `values` each position takes; 0 (the zero row) at the others.
    source = tf.scatter_nd(tokens, tf.range(1, count + 1), tf.reshape(
        tf.cast(positions, tokens.dtype), [1]))

    @tf.custom_gradient
    def spread(values):
        def grad(d_spread):
            return tf.gather(d_spread, tokens[:, 0])
        return tf.gather(tf.concat([tf.zeros_like(values[:1]), values], 0), source), grad
    return spread(values)


class SelfAttention(tf_keras.layers.Layer):
    """`attention/self`: multi-head scaled dot-product attention over the sequence.

    The query, key and value projections keep their own TF1 variables
    (`query/kernel`, `key/bias`, ...) but are applied as one matmul with the
    three kernels side by side: one larger matmul is faster than three, and
    one transpose splits all three into heads.
    """

    def __init__(self, config, name="self", **kwargs):
        super().__init__(name=name, **kwargs)
        h = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_size = h // self.num_heads
        self.query = layers.dense_layer(h, config, "query")
        self.key = layers.dense_layer(h, config, "key")
        self.value = layers.dense_layer(h, config, "value")
        self.dropout = layers.Dropout(config.attention_probs_dropout_prob)
        # (kernel [H, 3H], bias [3H]) once store_joint_projection has run.
        self.joint_projection = None

    def build(self, input_shape):
        # call() reads the projections' variables without calling the layers,
        # so they are built here, each under its own name scope.
        """Creates the layer's variables (names as in the reference)."""
        for projection in (self.query, self.key, self.value):
            with tf.name_scope(projection.name):
                projection.build(input_shape)
        super().build(input_shape)

    def _side_by_side(self, dtype):
        """(kernel [H, 3H], bias [3H]): the query's, key's and value's in `dtype`."""
        projections = (self.query, self.key, self.value)
        return (tf.concat([tf.cast(p.kernel, dtype) for p in projections], axis=1),
                tf.concat([tf.cast(p.bias, dtype) for p in projections], axis=0))

    def store_joint_projection(self):
        """Keeps the three kernels (and biases) side by side, in the layer's compute dtype,
        in variables call() reads instead of concatenating them at every call: the same
        values. For a SavedModel whose weights never change (exporter.
        weights_as_served, every export); the projections' own variables stay."""
        prefix = self.query.kernel.name.split(":")[0].rsplit("/query/", 1)[0]
        self.joint_projection = tuple(
            tf.Variable(value, trainable=False, name="%s/query_key_value/%s" % (prefix, part))
            for value, part in zip(self._side_by_side(self.compute_dtype), ("kernel", "bias")))

    def call(self, x, attention_mask, batch_size, seq_length, training=False, seed=None,
             tokens=None, groups=None, keys=None):
        """x [B * S, H], attention_mask [B, 1, 1, S] (or [B, 1, S, S] for packed rows)
        additive -> context [B * S, H].

        tokens: None, or [T, 1] indexes into the B * S positions (see transformer.Encoder); x and
        the context are then [T, H], the rows of those positions only, and the
        attention itself runs on [B, S] with zeros at the other positions.
        groups: None, or (outside training, with tokens) the batch's RowGroups: the
        attention then runs group by group over each row's own tokens, and
        attention_mask is not read.
        keys: None, or (outside training, without tokens) the batch's key_span: every
        position attends over the keys before it only.
        """
        if self.joint_projection is not None and self.joint_projection[0].dtype == x.dtype:
            kernel, bias = self.joint_projection
        else:
            kernel, bias = self._side_by_side(x.dtype)
        qkv = tf.nn.bias_add(tf.matmul(x, kernel), bias)
        if groups is not None:
            return self._grouped(qkv, groups)
        if tokens is not None:
            qkv = spread_tokens(qkv, tokens, batch_size * seq_length)
        qkv = tf.reshape(qkv, [batch_size, seq_length, 3, self.num_heads, self.head_size])
        q, k, v = tf.unstack(tf.transpose(qkv, [2, 0, 3, 1, 4]))  # each [B, N, S, H/N]
        if keys is not None:
            k, v, attention_mask = k[:, :, :keys], v[:, :, :keys], attention_mask[..., :keys]
        if known_false(training):
            context = inference_attend(q, k, v, attention_mask)
        else:
            context = attend(q, k, v, attention_mask,
                             lambda probs: self.dropout(probs, training=training, seed=seed))
        context = tf.reshape(context, [-1, self.num_heads * self.head_size])
        return context if tokens is None else tf.gather_nd(context, tokens)


    def _grouped(self, qkv, groups):
        """The context [T, H] of the real tokens' qkv [T, 3H], group by group (RowGroups)."""
        width = self.num_heads * self.head_size
        contexts = []
        for gather, mask in zip(groups.gathers, groups.masks):
            part = tf.gather(qkv, gather)  # [rows, L, 3H]
            shape = tf.shape(gather)
            part = tf.reshape(part, [shape[0], shape[1], 3, self.num_heads, self.head_size])
            q, k, v = tf.unstack(tf.transpose(part, [2, 0, 3, 1, 4]))
            contexts.append(tf.reshape(inference_attend(q, k, v, mask), [-1, width]))
        with tf.name_scope("row_groups"):
            return tf.gather(tf.concat(contexts, 0), groups.places)


class Attention(tf_keras.layers.Layer):
    """`attention`: self-attention, then its output projection + residual + LayerNorm."""

    def __init__(self, config, name="attention", **kwargs):
        super().__init__(name=name, **kwargs)
        self.self_attention = SelfAttention(config)
        self.output_block = layers.DenseResidualNorm(config)

    def call(self, x, attention_mask, batch_size, seq_length, training=False, seeds=None,
             tokens=None, groups=None, keys=None):
        """seeds: None, or [2, 2] int32, the dropout seeds of the probabilities and output;
        tokens, groups, keys: as SelfAttention's."""
        context = self.self_attention(x, attention_mask, batch_size, seq_length,
                                      training=training, seed=layers.dropout_seed(seeds, 0),
                                      tokens=tokens, groups=groups, keys=keys)
        return self.output_block(context, x, training=training, seed=layers.dropout_seed(seeds, 1))

