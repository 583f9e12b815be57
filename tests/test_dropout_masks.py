"""bert_tf2/base/dropout_masks.py: tf.nn.dropout's rule from XLA's ThreeFry stream."""
import numpy as np
import pytest
import tensorflow as tf

import modeling
from bert_tf2.base import dropout_masks


@pytest.mark.slow
def test_size_classes_are_powers_of_two_that_cover_the_count():
    counts = [0, 1, 7, 65535, 65536, 65537, 131073, 1 << 20, (1 << 20) + 1, 3_000_001,
              (1 << 24) + 1, (1 << 25) - 1, 50_331_649, (1 << 30) - 3, (1 << 30) + 1]
    edges = set(counts)
    counts += list(range(100_000, 4_000_000, 7919))
    graph = tf.function(dropout_masks.size_class)
    # Compiled by XLA, inside a step of --enable_xla: the same sizes, and a constant.
    # (XLA compiles once per value: the edges, and the first and last count of each
    # size class of the range, not all 493.)
    compiled = tf.function(lambda c: tf.zeros(dropout_masks.size_class(c) // 65536),
                           jit_compile=True)
    first_and_last = {}
    for count in counts[len(edges):]:
        first_and_last.setdefault(dropout_masks.size_class(count), []).append(count)
    edges |= {c for cs in first_and_last.values() for c in (cs[0], cs[-1])}
    for count in counts:
        size = dropout_masks.size_class(count)
        assert size >= count and size >= 65536 and size & (size - 1) == 0, count
        assert size < 2 * count or size == 65536 or count > 1 << 24, count
        # The graph version (dynamic shapes) picks the very same size.
        assert int(graph(tf.constant(count))) == size, count
        if count < 1 << 26 and count in edges:
            assert compiled(tf.constant(count)).shape == [size // 65536], count
    # About 500 different batch sizes up to 4M units: six programs.
    assert len({dropout_masks.size_class(c) for c in range(100_000, 4_000_000, 7919)}) == 6


def test_the_rule_of_tf_nn_dropout_kept_values_bit_for_bit():
    x = tf.random.stateless_normal([1000, 1000], [3, 4])
    for rate in (0.1, 0.3, 0.5):
        y = dropout_masks.dropout(x, rate, tf.constant([1, 2]))
        kept = y.numpy() != 0
        # Kept units are x times tf.nn.dropout's scale, exactly.
        scale = tf.constant(1 / (1 - rate), tf.float32).numpy()
        np.testing.assert_array_equal(y.numpy()[kept], x.numpy()[kept] * scale)
        # Each unit is kept with probability 1 - rate: 1M draws, within 5 sigma.
        sigma = np.sqrt(rate * (1 - rate) / kept.size)
        assert abs(kept.mean() - (1 - rate)) < 5 * sigma, (rate, kept.mean())
    np.testing.assert_array_equal(dropout_masks.dropout(x, 0.0).numpy(), x.numpy())
    with pytest.raises(ValueError, match=r"dropout rate must be in \[0, 1\), got 1.0"):
        dropout_masks.dropout(x, 1.0)


def test_a_seed_fixes_the_mask_and_no_seed_draws_a_fresh_one():
    x = tf.ones([300, 700])
    a = dropout_masks.dropout(x, 0.2, tf.constant([5, 6])).numpy()
    np.testing.assert_array_equal(a, dropout_masks.dropout(x, 0.2, tf.constant([5, 6])).numpy())
    assert (a != dropout_masks.dropout(x, 0.2, tf.constant([5, 7])).numpy()).any()
    # Without a seed: every call its own mask, and tf.random.set_seed repeats a run.
    step = tf.function(lambda t: dropout_masks.dropout(t, 0.2))
    tf.random.set_seed(11)
    first = [step(x).numpy() for _ in range(3)]
    assert (first[0] != first[1]).any() and (first[1] != first[2]).any()
    tf.random.set_seed(11)
    step = tf.function(lambda t: dropout_masks.dropout(t, 0.2))
    again = [step(x).numpy() for _ in range(3)]
    for one, two in zip(first, again):
        np.testing.assert_array_equal(one, two)


def test_dynamic_shapes_and_xla_draw_the_masks_of_static_shapes():
    x = tf.random.stateless_normal([7, 3, 50, 50], [1, 1])
    seed = tf.constant([9, 10])
    static = dropout_masks.dropout(x, 0.1, seed).numpy()
    dynamic = tf.function(lambda t, s: dropout_masks.dropout(t, 0.1, s),
                          input_signature=[tf.TensorSpec([None, None, None, None]),
                                           tf.TensorSpec([2], tf.int32)])
    np.testing.assert_array_equal(dynamic(x, seed).numpy(), static)
    compiled = tf.function(lambda t, s: dropout_masks.dropout(t, 0.1, s), jit_compile=True)
    np.testing.assert_array_equal(compiled(x, seed).numpy(), static)


def test_the_gradient_is_the_mask_and_bf16_keeps_its_dtype():
    x = tf.random.stateless_normal([64, 513], [2, 2])
    seed = tf.constant([3, 3])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = dropout_masks.dropout(x, 0.25, seed)
        loss = tf.reduce_sum(y * 2.0)
    grad = tape.gradient(loss, x).numpy()
    scale = np.float32(1 / 0.75)
    np.testing.assert_array_equal(grad, np.where(y.numpy() != 0, 2.0 * scale, 0.0))
    half = dropout_masks.dropout(tf.cast(x, tf.bfloat16), 0.25, seed)
    assert half.dtype == tf.bfloat16
    # Same seed and size, same units dropped whatever the dtype.
    np.testing.assert_array_equal(half.numpy() != 0, y.numpy() != 0)


def test_the_keras_layer_drops_only_while_training():
    layer = modeling.Dropout(0.5)
    x = tf.ones([40, 40])
    np.testing.assert_array_equal(layer(x).numpy(), x.numpy())
    np.testing.assert_array_equal(layer(x, training=False).numpy(), x.numpy())
    dropped = layer(x, training=True).numpy()
    assert set(np.unique(dropped)) == {0.0, 2.0}
    np.testing.assert_array_equal(layer(x, training=tf.constant(False)).numpy(), x.numpy())
    assert (layer(x, training=tf.constant(True)).numpy() == 0).any()


def test_compiling_the_size_classes_first_changes_no_mask():
    x = tf.ones([300, 500])
    step = tf.function(lambda t, s: dropout_masks.dropout(t, 0.3, s),
                       input_signature=[tf.TensorSpec([None, None]), tf.TensorSpec([2], tf.int32)])
    before = step(x, tf.constant([4, 2])).numpy()
    dropout_masks.compile_size_classes("/cpu:0", largest=1 << 18)
    dropout_masks.compile_size_classes("/cpu:0", largest=1 << 17)  # already done: nothing
    np.testing.assert_array_equal(step(x, tf.constant([4, 2])).numpy(), before)
    np.testing.assert_array_equal(dropout_masks.dropout(x, 0.3, tf.constant([4, 2])).numpy(),
                                  before)


@tf.function(jit_compile=True)
def _whole_class(size, seed, rate):
    """The whole size class's mask, as dropout drew it before issue 55."""
    return tf.random.stateless_uniform(tf.reshape(size, [1]), seed, alg="threefry") >= rate


def test_the_shaped_draw_is_the_size_class_draw_cut():
    # Static shapes draw inside one program only the units they keep: same bits as
    # drawing the whole size class and cutting it.
    seed, rate = tf.constant([5, 6]), tf.constant(0.1)
    for shape in ((4, 12, 128, 128), (512, 768), (3, 5), (65536,)):
        count = int(np.prod(shape))
        size = tf.constant(dropout_masks.size_class(count), tf.int64)
        shaped = dropout_masks.draw_keep_shaped(size, seed, rate, shape).numpy()
        whole = _whole_class(size, seed, rate).numpy()
        assert shaped.shape == shape
        np.testing.assert_array_equal(shaped.reshape(-1), whole[:count])
