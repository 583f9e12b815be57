"""Dropout whose random draws come from one small XLA computation.

TensorFlow's CPU kernel for a float uniform (Philox, op RandomUniform) costs about
3 ms per million numbers on this class of machine; XLA's ThreeFry-2x32 stream
draws the same float32 uniforms and compares them with the rate in well under
1 ms. The rest is tf.nn.dropout's own rule and ops: a unit is kept when its
uniform is >= rate, kept units are x * (1 / (1 - rate)) and the others 0 (one
select, whose gradient is the same select; for static shapes the select and
the multiply are one XLA pass each way, fused_elementwise.keep_and_scale), so a
kept value is bit for bit tf.nn.dropout's and the keep probability is the same;
only the random stream is another one.

XLA compiles a program per mask size, and sizes change from batch to batch
(trimmed batches, the encoder on the real tokens only), so the mask is drawn
for the size rounded up to a power of two (at least 65,536) and cut: a run
compiles a handful of small programs, and the extra draws cost less than the
kernel they replace (the backward pass keeps the bool mask: at most two bytes
per unit). A given size and seed always give the same mask, so a recomputed
layer (gradient checkpointing) given the seed of its forward pass drops the
same units.

Without a seed a call draws one from a stateful op (two int32s), so successive
steps drop different units and tf.random.set_seed makes a run repeat, as with
tf.nn.dropout.
"""
import numpy as np
import tensorflow as tf

from bert_tf2.base import fused_elementwise

_SMALLEST_CLASS = 1 << 16


def size_class(count):
    """The number of uniforms drawn for `count` units: a power of two >= count, at
    least 65,536 (an int for an int; an int64 tensor for an int32 tensor). Both
    forms take 2 ** (1 + the float32 exponent of count - 1), so they agree."""
    if isinstance(count, int):
        exponent = int(np.frexp(np.float32(max(count - 1, 1)))[1])
        return max(_SMALLEST_CLASS, 1 << exponent)
    below = tf.cast(tf.maximum(count - 1, 1), tf.float32)
    exponent = tf.bitwise.right_shift(tf.bitcast(below, tf.int32), 23) - 126
    size = tf.bitwise.left_shift(tf.constant(1, tf.int64), tf.cast(exponent, tf.int64))
    return tf.maximum(size, _SMALLEST_CLASS)


@tf.function(jit_compile=True)
def _draw_keep(size, seed, rate):
    """[size] bool: a ThreeFry float32 uniform >= rate."""
    return tf.random.stateless_uniform(tf.reshape(size, [1]), seed, alg="threefry") >= rate


@tf.function(input_signature=[tf.TensorSpec([], tf.int64)])
def _draw_in_a_graph(size):
    """One mask of `size` drawn inside a graph, as a training step draws it."""
    return tf.reduce_any(_draw_keep(size, tf.zeros([2], tf.int32), tf.constant(0.5)))


_COMPILED_UP_TO = {}


def compile_size_classes(device, largest=1 << 22):
    """Compiles, on `device`, the mask programs of every size class up to `largest`.

    Each size class is one XLA program, compiled the first time a step needs it
    (50-130 ms on 2 cores). With shapes that change from batch to batch, those
    compilations would fall on the first few dozen steps; training.Runner does
    them all before its first step instead (on CPUs: 0.5-0.9 s once per process).
    """
    if _COMPILED_UP_TO.get(device, 0) >= largest:
        return
    with tf.device(device):
        size = _SMALLEST_CLASS
        while size <= largest:
            _draw_in_a_graph(tf.constant(size, tf.int64))
            size *= 2
    _COMPILED_UP_TO[device] = largest


def keep_scale(rate, dtype):
    """1 / (1 - rate) in `dtype`, computed as tf.nn.dropout computes it."""
    return tf.constant(1 / (1 - rate), dtype)


def new_seed():
    """[2] int32 from a stateful op: a fresh seed per call, repeatable under tf.random.set_seed."""
    return tf.random.uniform([2], minval=-(1 << 31), maxval=(1 << 31) - 1, dtype=tf.int32)


def dropout(inputs, rate, seed=None):
    """`inputs` with units zeroed with probability `rate` and the rest scaled.

    rate: a Python float in [0, 1) (0: the input itself). seed: None (a fresh seed
    per call) or a [2] int32/int64 tensor (the same seed, the same mask).
    """
    if not 0 <= rate < 1:
        raise ValueError("dropout rate must be in [0, 1), got %r" % (rate,))
    inputs = tf.convert_to_tensor(inputs)
    if rate == 0:
        return inputs
    if seed is None:
        seed = new_seed()
    static = inputs.shape.num_elements()
    count = static if static is not None else tf.size(inputs)
    size = tf.constant(size_class(count), tf.int64) if static is not None else size_class(count)
    keep = _draw_keep(size, tf.cast(seed, tf.int32), tf.constant(rate, tf.float32))
    keep = tf.reshape(keep[:count], tf.shape(inputs))
    return fused_elementwise.keep_and_scale(keep, inputs, keep_scale(rate, inputs.dtype))
