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
tf.nn.dropout. Inside `step_seeds(seed)` (training with --deterministic_data) a call
takes instead a seed made from `seed` and its place in the traced step, so the masks
of a step depend on its number only, not on where the process started.
"""
import contextlib
import threading

import numpy as np
import tensorflow as tf

from bert_tf2.base import fused_elementwise

_SMALLEST_CLASS = 1 << 16


def size_class(count):
    """The number of uniforms drawn for `count` units: a power of two >= count, at
    least 65,536 (an int for an int; an int64 tensor for an int32 tensor). Both
    take the smallest power of two above float32(count - 1), so they agree; the
    tensor form is compares and a sum, which XLA evaluates while compiling a step
    (the draw's length must be a constant of the program: --enable_xla on trimmed
    batches, whose lengths the trace does not know)."""
    if isinstance(count, int):
        exponent = int(np.frexp(np.float32(max(count - 1, 1)))[1])
        return max(_SMALLEST_CLASS, 1 << exponent)
    below = tf.cast(tf.maximum(count - 1, 1), tf.float32)
    bounds = tf.constant(_CLASS_BOUNDS, tf.float32)
    doublings = tf.reduce_sum(tf.cast(bounds <= below, tf.int64))
    return tf.bitwise.left_shift(tf.constant(_SMALLEST_CLASS, tf.int64), doublings)


# The float32 powers of two from the smallest class up: count c's class is
# _SMALLEST_CLASS * 2 ** (how many of them are <= float32(c - 1)).
_CLASS_BOUNDS = [2.0 ** k for k in range(16, 63)]


@tf.function(jit_compile=True)
def _draw_keep(size, seed, rate):
    """[size] bool: a ThreeFry float32 uniform >= rate."""
    return tf.random.stateless_uniform(tf.reshape(size, [1]), seed, alg="threefry") >= rate


@tf.function(jit_compile=True)
def draw_keep_shaped(size, seed, rate, shape):
    """_draw_keep(size, seed, rate)[:count] reshaped to `shape` (a tuple of ints whose
    product is count), in one program: the same bits, but XLA computes only the `count`
    draws it keeps (the slice goes through the elementwise ThreeFry) and writes no
    [size] mask. On 2 cores, [4, 12, 128, 128] (a 2^20 class): the draw and dropout's
    select 1.45 -> 1.14 ms; [512, 768]: 0.95 -> 0.80 ms (medians, load ~5)."""
    count = int(np.prod(shape, dtype=np.int64))
    return tf.reshape(_draw_keep(size, seed, rate)[:count], shape)


@tf.function(input_signature=[tf.TensorSpec([], tf.int64)])
def _draw_in_a_graph(size):
    """One mask of `size` drawn inside a graph, as a training step draws it."""
    return tf.reduce_any(_draw_keep(size, tf.zeros([2], tf.int32), tf.constant(0.5)))


_COMPILED_UP_TO = {}
# compile_size_classes' default: masks of up to 2^22 units (a BERT-base batch of 8 x 128).
LARGEST_CLASS = 1 << 22


def compile_size_classes(device, largest=LARGEST_CLASS):
    """Compiles, on `device`, the mask programs of every size class up to the class of
    `largest` (a number of units, e.g. training.largest_dropout's).

    Each size class is one XLA program, compiled the first time a step needs it
    (50-130 ms on 2 cores). With shapes that change from batch to batch, those
    compilations would fall on the first few dozen steps; training.Runner does
    them all before its first step instead (on CPUs: 0.5-0.9 s once per process for
    the seven classes up to 2^22; a tiny model's steps need only the first).
    """
    largest = size_class(int(max(largest, 1)))
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


# The step seeds of the traces in progress, per thread (a mirrored strategy traces
# each replica's step in a thread of its own): [[seed, draws so far], ...].
_STEP_SEEDS = threading.local()


@contextlib.contextmanager
def step_seeds(seed):
    """Within: the n-th seed drawn while tracing is stateless_fold_in(`seed`, n).

    `seed`: a [2] integer tensor of the step (e.g. from --seed and the step number).
    The draws of one traced step are numbered in the order the model makes them,
    the same in every trace of the same step function.
    """
    stack = _STEP_SEEDS.__dict__.setdefault("stack", [])
    stack.append([tf.cast(seed, tf.int64), 0])
    try:
        yield
    finally:
        stack.pop()


def new_seeds(shape, minval=-(1 << 31)):
    """`shape` + [2] int32 seeds: fresh ones from a stateful op (from `minval` up), or
    those of step_seeds."""
    count = int(np.prod(shape, dtype=np.int64))
    stack = getattr(_STEP_SEEDS, "stack", None)
    if not stack:
        return tf.random.uniform(list(shape) + [2], minval=minval, maxval=(1 << 31) - 1,
                                 dtype=tf.int32)
    entry = stack[-1]
    seeds = []
    for _ in range(count):
        entry[1] += 1
        seeds.append(tf.random.experimental.stateless_fold_in(entry[0], entry[1]))
    # The low 32 bits of each int64 half: the seed _draw_keep takes.
    seeds = tf.cast(tf.bitwise.bitwise_and(tf.stack(seeds), 0xFFFFFFFF), tf.uint32)
    return tf.reshape(tf.bitcast(seeds, tf.int32), list(shape) + [2])


def new_seed():
    """[2] int32: a fresh seed per call (from a stateful op, repeatable under
    tf.random.set_seed), or the next one of step_seeds."""
    return new_seeds([])


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
    seed, rate_t = tf.cast(seed, tf.int32), tf.constant(rate, tf.float32)
    if static is not None:
        keep = draw_keep_shaped(tf.constant(size_class(static), tf.int64), seed, rate_t,
                                 tuple(inputs.shape.as_list()))
    else:
        count = tf.size(inputs)
        keep = tf.reshape(_draw_keep(size_class(count), seed, rate_t)[:count],
                          tf.shape(inputs))
    return fused_elementwise.keep_and_scale(keep, inputs, keep_scale(rate, inputs.dtype))
