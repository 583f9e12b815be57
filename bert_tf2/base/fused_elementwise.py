"""GELU (tanh form) and LayerNorm for training steps: one small XLA program each way
(and the masked-LM loss's gradient, softmax minus one-hot, and dropout's
select-and-scale, each in one pass).

Taken apart by TensorFlow's autodiff, the tanh GELU is about six element-wise kernels
forward and eight backward, and LayerNorm (moments, rsqrt, scale, shift) a dozen more,
each a pass over the activations. Here each is a function with its own gradient:
the forward pass is one XLA computation, the backward pass another that recomputes
what it needs from the saved input (GELU: x; LayerNorm: x, the row means and
1/sqrt(variance + epsilon)). On a 2-core CPU, GELU over [2048, 1024] forward and
backward: 6.4 ms of kernels -> 2.4 ms; LayerNorm over [2048, 256]: 2.1 -> 1.2 ms.

Same formulas: the forward values are those of the ops path to float32 rounding (the
tanh and the summation order are XLA's), the gradients are the analytic derivatives
of the same functions (within 1e-5 of autodiff's, relative to the largest).

Outside training, LayerNorm takes another form where TensorFlow runs on the CPU with
its oneDNN rewrite (x86-64, no GPU or TPU): the subgraph the rewrite turns into one
_MklLayerNorm kernel (`_layer_norm_onednn`, issue 45): one kernel instead of about ten
ops, each a pass over the activations (measured in benchmarks/README.md, "Per-op
profile"). `set_onednn_layer_norm(False)` keeps the ops.

Used only where it pays and never changes a trace's shapes:
- training (the backward pass is the point; inference keeps the ops path, which the
  CPU rewrite fuses into the matmul before it: matmul + bias + GELU in one kernel);
- float activations: 16-bit ones (mixed precision) are computed in float32 inside the
  program and rounded once at its end (XLA's CPU code for bfloat16 arithmetic was
  slower than TensorFlow's kernels; in float32 a bfloat16 GELU over [2048, 1024]
  forward and backward took 3.2 ms against 7.4 ms op by op, whose every step rounds
  to bfloat16: the values differ from the ops path by up to one bfloat16 unit);
- shapes fully known at trace time with at least MIN_ELEMENTS elements (XLA
  compiles a program per shape: the trimmed batches of fine-tuning, whose shapes
  change from batch to batch, stay on the ops path, and tiny tensors are not worth
  a program launch).
"""
import functools
import math
import os

import tensorflow as tf

from bert_tf2 import startup

MIN_ELEMENTS = 1 << 16

_GELU_C = math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715


def applies(x, training):
    """Whether the fused training path runs for activations `x` (module docstring).

    `training`: a Python or numpy bool, or a tensor; a tensor whose value is not known
    at trace time (a TF1 learning-phase placeholder) takes the ops path.
    """
    if isinstance(training, (tf.Tensor, tf.Variable)):
        training = tf.get_static_value(training)
    return (training is not None and bool(training)
            and x.dtype in (tf.float32, tf.bfloat16, tf.float16)
            and x.shape.is_fully_defined() and x.shape.num_elements() >= MIN_ELEMENTS)


@tf.function(jit_compile=True)
def _gelu_forward(x):
    return tf.cast(tf.nn.gelu(tf.cast(x, tf.float32), approximate=True), x.dtype)


@tf.function(jit_compile=True)
def _gelu_backward(x, dy):
    """dy * d/dx [0.5 x (1 + tanh(c (x + a x^3)))], computed in float32."""
    x32 = tf.cast(x, tf.float32)
    t = tf.tanh(_GELU_C * (x32 + _GELU_A * x32 * x32 * x32))
    slope = (0.5 * (1.0 + t)
             + 0.5 * x32 * (1.0 - t * t) * _GELU_C * (1.0 + 3.0 * _GELU_A * x32 * x32))
    return tf.cast(tf.cast(dy, tf.float32) * slope, dy.dtype)


@tf.custom_gradient
def _gelu_fused(x):
    def grad(dy):
        return _gelu_backward(x, dy)
    return _gelu_forward(x), grad


def gelu(x, training=False):
    """tf.nn.gelu(x, approximate=True), the reference's "gelu"; fused when `applies`."""
    if applies(x, training):
        return _gelu_fused(x)
    return tf.nn.gelu(x, approximate=True)


def _erf_half(x):
    """erf(x / sqrt(2)) in x's dtype, as gelu_exact's formula computes it."""
    return tf.math.erf(x / tf.cast(math.sqrt(2.0), x.dtype))


@tf.custom_gradient
def _gelu_exact_trained(x):
    """gelu_exact's forward ops (the same values, bit for bit) with the analytic gradient
    dy * (Phi(x) + x * phi(x)), from the erf the forward pass computed: TensorFlow's
    autodiff takes the formula apart into about ten element-wise kernels backward (an
    [2000, 1536] activation forward and backward: 9.1 -> 7.0 ms on 2 cores)."""
    erf = _erf_half(x)
    y = 0.5 * x * (1.0 + erf)

    def grad(dy):
        density = tf.exp(-0.5 * tf.square(x)) * tf.cast(1.0 / math.sqrt(2.0 * math.pi), x.dtype)
        return dy * (0.5 * (1.0 + erf) + x * density)
    return y, grad


def gelu_exact(x, training=False):
    """The exact erf GELU, 0.5 x (1 + erf(x / sqrt(2))) (HuggingFace's "gelu"; config value
    "gelu_exact"), in x's dtype. Where `training` is known true at trace time, the same
    forward values with a hand-written gradient (_gelu_exact_trained); any shape."""
    if isinstance(training, (tf.Tensor, tf.Variable)):
        training = tf.get_static_value(training)
    if training is not None and bool(training) and x.dtype.is_floating:
        return _gelu_exact_trained(x)
    return 0.5 * x * (1.0 + _erf_half(x))


def _layer_norm_ops(x, gamma, beta, epsilon):
    """The LayerNorm formula in float32 (moments over the last axis, then scale and
    shift); returns (output in x's dtype, mean, 1 / sqrt(variance + epsilon))."""
    out_dtype = x.dtype
    x = tf.cast(x, tf.float32)
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    inverse = tf.math.rsqrt(variance + epsilon)
    scale = inverse * gamma
    return tf.cast(x * scale + (beta - mean * scale), out_dtype), mean, inverse


@tf.function(jit_compile=True)
def _layer_norm_forward(x, gamma, beta, epsilon):
    return _layer_norm_ops(x, gamma, beta, epsilon)


@tf.function(jit_compile=True)
def _layer_norm_backward(x, gamma, mean, inverse, dy):
    """Gradients of x * scale + (beta - mean * scale) for x, gamma and beta (float32
    inside; the one for x in x's dtype)."""
    normalized = (tf.cast(x, tf.float32) - mean) * inverse
    dy = tf.cast(dy, tf.float32)
    rows = list(range(len(x.shape) - 1))
    d_gamma = tf.reduce_sum(dy * normalized, axis=rows)
    d_beta = tf.reduce_sum(dy, axis=rows)
    d_normalized = dy * gamma
    d_x = inverse * (d_normalized - tf.reduce_mean(d_normalized, -1, keepdims=True)
                     - normalized * tf.reduce_mean(d_normalized * normalized, -1,
                                                   keepdims=True))
    return tf.cast(d_x, x.dtype), d_gamma, d_beta


def _layer_norm_fused(x, gamma, beta, epsilon):
    epsilon = tf.constant(epsilon, tf.float32)

    @tf.custom_gradient
    def forward(x, gamma, beta):
        y, mean, inverse = _layer_norm_forward(x, gamma, beta, epsilon)

        def grad(dy):
            return _layer_norm_backward(x, gamma, mean, inverse, dy)
        return y, grad
    return forward(x, gamma, beta)


def layer_norm(x, gamma, beta, epsilon, training=False):
    """LayerNorm over the last axis of `x` with float32 `gamma`, `beta` [H] and
    `epsilon`, computed in float32 and returned in x's dtype; fused when `applies`,
    one oneDNN kernel outside training where `onednn_layer_norm_applies`."""
    if applies(x, training):
        return _layer_norm_fused(x, gamma, beta, epsilon)
    if onednn_layer_norm_applies(training):
        return _layer_norm_onednn(x, gamma, beta, epsilon)
    return _layer_norm_ops(x, gamma, beta, epsilon)[0]


# Off: every LayerNorm outside training takes the ops path (set_onednn_layer_norm).
_ONEDNN_LAYER_NORM = {"enabled": True}


def set_onednn_layer_norm(enabled=True):
    """Turns the oneDNN LayerNorm of inference on (default) or off for graphs traced after."""
    _ONEDNN_LAYER_NORM["enabled"] = bool(enabled)


def onednn_layer_norm_enabled():
    """Whether set_onednn_layer_norm left the oneDNN LayerNorm on."""
    return _ONEDNN_LAYER_NORM["enabled"]


def tensorflow_onednn_enabled():
    """Whether this process's TensorFlow runs its oneDNN rewrite: what TensorFlow decided
    when it was imported (TF_ENABLE_ONEDNN_OPTS then, else its default for the CPU; see
    bert_tf2.startup), not the variable now."""
    try:
        from tensorflow.python.util import (  # pylint: disable=import-outside-toplevel
            _pywrap_util_port as util_port)
    except ImportError:  # another TensorFlow layout: the variable, as TensorFlow reads it
        return os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1").strip().lower() not in ("0", "false")
    return bool(util_port.IsMklEnabled())


@functools.lru_cache(maxsize=None)
def onednn_cpu_only():
    """True when TensorFlow's oneDNN rewrite is on in this process (x86-64,
    tensorflow_onednn_enabled) and no GPU or TPU is visible: the graph then runs on the CPU
    with oneDNN. A TensorFlow imported before bert_tf2.startup on a CPU where its default
    is off (AVX2 only) runs without it, whatever TF_ENABLE_ONEDNN_OPTS says by now."""
    if not startup.is_x86_64():
        return False
    if not tensorflow_onednn_enabled():
        return False
    return not any(tf.config.list_physical_devices(kind) for kind in ("GPU", "TPU"))


def onednn_layer_norm_applies(training):
    """Whether a LayerNorm outside training takes `_layer_norm_onednn`: `training` known
    false at trace time, the switch on and `onednn_cpu_only`."""
    if isinstance(training, (tf.Tensor, tf.Variable)):
        training = tf.get_static_value(training)
    return (training is not None and not bool(training) and _ONEDNN_LAYER_NORM["enabled"]
            and onednn_cpu_only())


def _layer_norm_onednn(x, gamma, beta, epsilon):
    """LayerNorm written as the subgraph TensorFlow's oneDNN rewrite (grappler's remapper)
    replaces by one _MklLayerNorm kernel: a training-mode FusedBatchNormV3 of unit scale
    and zero offset over x reshaped to [1, rows, H, 1] (NCHW: each row one channel, so
    its mean and biased variance are the row's), reshaped back, times gamma, plus beta.
    The raw op keeps epsilon as given (tf.nn.fused_batch_norm raises it to 1.001e-5).
    Op by op (no rewrite) it is the same formula; outputs within float32 rounding of
    `_layer_norm_ops` (tests/test_onednn_paths.py)."""
    out_dtype = x.dtype
    x = tf.cast(x, tf.float32)
    shape = tf.shape(x)
    rows = tf.reduce_prod(shape[:-1], keepdims=True)
    normalized = tf.raw_ops.FusedBatchNormV3(
        x=tf.reshape(x, tf.concat([[1], rows, shape[-1:], [1]], 0)),
        scale=tf.fill(rows, 1.0), offset=tf.fill(rows, 0.0),
        mean=tf.constant([], tf.float32), variance=tf.constant([], tf.float32),
        epsilon=epsilon, data_format="NCHW", is_training=True)[0]
    out = tf.reshape(normalized, shape) * gamma + beta
    out.set_shape(x.shape)
    return tf.cast(out, out_dtype)


@tf.function(jit_compile=True)
def _label_softmax_backward(probs, labels, d_loss):
    hot = tf.equal(tf.range(tf.shape(probs)[-1], dtype=labels.dtype)[tf.newaxis, :],
                   labels[:, tf.newaxis])
    return (probs - tf.cast(hot, probs.dtype)) * d_loss[:, tf.newaxis]


def label_softmax_gradient(probs, labels, d_loss):
    """(probs - one_hot(labels)) * d_loss[:, None]: the gradient for the logits of
    -log softmax(logits)[label], given probs [N, V] = softmax(logits), labels [N] and
    the loss's gradient d_loss [N] -- the formula of TensorFlow's sparse cross-entropy
    kernel times d_loss. One XLA pass when `applies` (static shapes: 2.0 ms on
    [320, 30522], against 4.0 ms for a multiply and a scatter), else the ops."""
    if applies(probs, True):
        return _label_softmax_backward(probs, labels, d_loss)
    hot = tf.one_hot(labels, tf.shape(probs)[-1], dtype=probs.dtype)
    return (probs - hot) * d_loss[:, tf.newaxis]


def _keep_and_scale_ops(keep, x, scale):
    return tf.where(keep, x * scale, tf.zeros([], x.dtype))


_keep_and_scale = tf.function(_keep_and_scale_ops, jit_compile=True)


def keep_and_scale(keep, x, scale):
    """where(keep, x * scale, 0): dropout's kept units scaled and the others 0, given
    the bool mask `keep` (x's shape) and `scale` (a scalar in x's dtype).

    For static shapes of at least MIN_ELEMENTS one XLA pass each way (the gradient is
    the same select of dy * scale), else the multiply and select ops. Bit for bit
    either way, values and gradients: a 16-bit product of two 16-bit numbers is exact
    in float32 before its one rounding, as in TensorFlow's kernels. [16, 4, 128, 128]
    in bfloat16, forward and backward: 1.8 -> 0.6 ms on 2 cores (float32: 0.8 -> 0.5).
    """
    if not applies(x, True):
        return _keep_and_scale_ops(keep, x, scale)

    @tf.custom_gradient
    def forward(x):
        def grad(dy):
            return _keep_and_scale(keep, dy, scale)
        return _keep_and_scale(keep, x, scale), grad
    return forward(x)
