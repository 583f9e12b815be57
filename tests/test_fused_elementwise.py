"""bert_tf2/base/fused_elementwise.py (GELU and LayerNorm of training steps as XLA
programs with their own gradients) and heads' masked-LM cross-entropy from one softmax:
the values and gradients of the ops they replace."""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras

import modeling
from bert_tf2.base import fused_elementwise
from bert_tf2 import heads
from conftest import FP32_ATOL


def _value_and_grads(fn, args, weights):
    """fn(*args) and the gradients of sum(fn(*args) * weights) for every arg."""
    with tf.GradientTape() as tape:
        tape.watch(args)
        y = fn(*args)
        total = tf.reduce_sum(tf.cast(y, tf.float32) * weights)
    return y, tape.gradient(total, args)


def _close(a, b, rtol):
    a, b = np.asarray(tf.cast(a, tf.float32)), np.asarray(tf.cast(b, tf.float32))
    scale = max(np.abs(b).max(), 1e-30)
    assert np.abs(a - b).max() <= rtol * scale, (np.abs(a - b).max(), scale)


def _ops_gelu(x):
    return tf.nn.gelu(x, approximate=True)


def _ops_layer_norm(x, gamma, beta):
    # modeling.LayerNorm's formula before this module, written out op by op.
    x32 = tf.cast(x, tf.float32)
    mean, variance = tf.nn.moments(x32, axes=[-1], keepdims=True)
    scale = tf.math.rsqrt(variance + 1e-12) * gamma
    return tf.cast(x32 * scale + (beta - mean * scale), x.dtype)


@pytest.mark.parametrize("shape", [[512, 256], [4, 128, 192]])
def test_gelu_training_path_equals_the_ops_within_float32_rounding(shape):
    x = tf.random.stateless_normal(shape, [1, 2]) * 3.0
    weights = tf.random.stateless_normal(shape, [3, 4])
    assert fused_elementwise.applies(x, True)
    fused = tf.function(lambda x: _value_and_grads(
        lambda t: fused_elementwise.gelu(t, training=True), [x], weights))(x)
    plain = tf.function(lambda x: _value_and_grads(_ops_gelu, [x], weights))(x)
    _close(fused[0], plain[0], 1e-6)
    _close(fused[1][0], plain[1][0], 1e-5)
    # A second formula for the slope: central differences of the ops path in float64.
    x64 = tf.cast(x, tf.float64)
    step = 1e-4
    slope = (_ops_gelu(x64 + step) - _ops_gelu(x64 - step)) / (2 * step)
    _close(fused[1][0], slope * tf.cast(weights, tf.float64), 1e-5)


def _erf_gelu(x):
    # modeling.gelu_exact's formula before its training gradient, written out op by op.
    return 0.5 * x * (1.0 + tf.math.erf(x / tf.cast(np.sqrt(2.0), x.dtype)))


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
@pytest.mark.parametrize("shape", [[300, 96], [None, 96]], ids=["static", "trimmed"])
def test_exact_gelu_trains_with_the_same_values_and_the_analytic_gradient(shape, dtype):
    """gelu_exact in a training step (any shape: trimmed batches too) keeps the ops'
    forward values to the bit and takes the analytic derivative Phi(x) + x phi(x);
    outside training it is the ops themselves."""
    x = tf.cast(tf.random.stateless_normal([300, 96], [1, 3]) * 3.0, dtype)
    weights = tf.random.stateless_normal([300, 96], [2, 5])
    spec = [tf.TensorSpec(shape, dtype)]
    trained = tf.function(lambda x: _value_and_grads(
        lambda t: modeling.apply_activation(modeling.gelu_exact, t, True), [x], weights),
        input_signature=spec)(x)
    plain = tf.function(lambda x: _value_and_grads(_erf_gelu, [x], weights),
                        input_signature=spec)(x)
    np.testing.assert_array_equal(np.asarray(tf.cast(trained[0], tf.float32)),
                                  np.asarray(tf.cast(plain[0], tf.float32)))
    _close(trained[1][0], plain[1][0], 1e-6 if dtype == tf.float32 else 2e-2)
    x64 = tf.cast(x, tf.float64)
    slope = (_erf_gelu(x64 + 1e-4) - _erf_gelu(x64 - 1e-4)) / 2e-4
    _close(trained[1][0], slope * tf.cast(weights, tf.float64),
           1e-6 if dtype == tf.float32 else 2e-2)
    inference = tf.function(lambda x: modeling.apply_activation(modeling.gelu_exact, x, False),
                            input_signature=spec)
    graph = inference.get_concrete_function().graph
    assert not [op for op in graph.get_operations() if op.type == "IdentityN"]  # no custom gradient
    np.testing.assert_array_equal(np.asarray(tf.cast(inference(x), tf.float32)),
                                  np.asarray(tf.cast(plain[0], tf.float32)))
    dense, activation = modeling.dense_and_activation(8, modeling.BertConfig(10), "d",
                                                      modeling.gelu_exact)
    assert activation is modeling.gelu_exact and dense.activation is tf_keras.activations.linear


def test_gelu_in_bfloat16_is_computed_in_float32_and_rounded_once():
    x = tf.cast(tf.random.stateless_normal([512, 256], [5, 6]) * 3.0, tf.bfloat16)
    weights = tf.random.stateless_normal([512, 256], [7, 8])
    y, (dx,) = tf.function(lambda x: _value_and_grads(
        lambda t: fused_elementwise.gelu(t, training=True), [x], weights))(x)
    assert y.dtype == tf.bfloat16 and dx.dtype == tf.bfloat16
    exact = _ops_gelu(tf.cast(x, tf.float32)).numpy()
    # One rounding to bfloat16 of the float32 value: within half a bfloat16 unit of it
    # (and, in GELU's negative tail, float32's own cancellation in 1 + tanh: two tanh
    # implementations give values ~1e-6 apart there, on either path).
    error = np.abs(tf.cast(y, tf.float32).numpy() - exact)
    assert (error <= np.maximum(2 ** -8 * np.abs(exact), 4e-6)).all(), error.max()
    ops_y, (ops_dx,) = _value_and_grads(_ops_gelu, [x], weights)
    _close(y, ops_y, 2 ** -7)
    _close(dx, ops_dx, 2 ** -6)


@pytest.mark.parametrize("shape,dtype", [([512, 256], tf.float32), ([4, 64, 384], tf.float32),
                                         ([512, 256], tf.bfloat16)])
def test_layer_norm_training_path_equals_the_ops(shape, dtype):
    width = shape[-1]
    x = tf.cast(tf.random.stateless_normal(shape, [1, 2]) * 3.0 + 1.0, dtype)
    gamma = tf.random.stateless_normal([width], [3, 4])
    beta = tf.random.stateless_normal([width], [5, 6])
    weights = tf.random.stateless_normal(shape, [7, 8])
    fused = tf.function(lambda *a: _value_and_grads(
        lambda x, g, b: fused_elementwise.layer_norm(x, g, b, 1e-12, training=True),
        list(a), weights))(x, gamma, beta)
    plain = tf.function(lambda *a: _value_and_grads(_ops_layer_norm, list(a), weights))(
        x, gamma, beta)
    assert fused[0].dtype == dtype and fused[1][0].dtype == dtype
    rtol = 1e-5 if dtype == tf.float32 else 2 ** -7
    _close(fused[0], plain[0], rtol)
    for got, want in zip(fused[1], plain[1]):
        _close(got, want, rtol)


def test_layer_norm_of_constant_rows_stays_finite():
    # variance 0: 1/sqrt(epsilon) = 1e6 scales exact zeros, as on the ops path.
    x = tf.concat([tf.fill([256, 256], 2.5), tf.random.stateless_normal([256, 256], [1, 1])], 0)
    gamma, beta = tf.ones([256]), tf.fill([256], 0.5)
    y, grads = _value_and_grads(
        lambda x, g, b: fused_elementwise.layer_norm(x, g, b, 1e-12, training=True),
        [x, gamma, beta], tf.random.stateless_normal([512, 256], [2, 2]))
    assert np.isfinite(y.numpy()).all() and all(np.isfinite(g.numpy()).all() for g in grads)
    np.testing.assert_allclose(y.numpy()[:256], 0.5)


def test_ops_path_outside_training_for_dynamic_shapes_and_small_tensors():
    big = tf.random.stateless_normal([512, 256], [1, 2])
    assert fused_elementwise.applies(big, True)
    assert not fused_elementwise.applies(big, False)
    assert not fused_elementwise.applies(big[:10], True)  # 2,560 elements
    assert not fused_elementwise.applies(tf.cast(big, tf.int32), True)
    assert fused_elementwise.applies(big, tf.constant(True))
    assert not fused_elementwise.applies(big, tf.constant(False))
    graph = tf.Graph()
    with graph.as_default():
        # A TF1 learning-phase placeholder: unknown at trace time, the ops path.
        phase = tf.compat.v1.placeholder_with_default(True, [])
        assert not fused_elementwise.applies(tf.zeros([512, 256]), phase)

    seen = []

    @tf.function(input_signature=[tf.TensorSpec([None, 256], tf.float32)])
    def trimmed(x):
        seen.append(fused_elementwise.applies(x, True))
        return fused_elementwise.gelu(x, training=True)
    # Rows unknown at trace time (trimmed batches): the ops path, bit for bit.
    ops_graph = tf.function(_ops_gelu, input_signature=[tf.TensorSpec([None, 256], tf.float32)])
    np.testing.assert_array_equal(trimmed(big).numpy(), ops_graph(big).numpy())
    assert seen == [False]
    # Inference: the very ops the CPU rewrite fuses into the matmul.
    np.testing.assert_array_equal(fused_elementwise.gelu(big).numpy(), _ops_gelu(big).numpy())
    gamma, beta = tf.ones([256]), tf.zeros([256])
    # LayerNorm outside training: the ops with the oneDNN LayerNorm off, else the graph
    # oneDNN fuses into one kernel (tests/test_onednn_paths.py), within float32 rounding.
    fused_elementwise.set_onednn_layer_norm(False)
    try:
        np.testing.assert_array_equal(
            fused_elementwise.layer_norm(big, gamma, beta, 1e-12).numpy(),
            _ops_layer_norm(big, gamma, beta).numpy())
    finally:
        fused_elementwise.set_onednn_layer_norm(True)
    np.testing.assert_allclose(fused_elementwise.layer_norm(big, gamma, beta, 1e-12).numpy(),
                               _ops_layer_norm(big, gamma, beta).numpy(), atol=FP32_ATOL)


@pytest.mark.slow
def test_pretrainer_training_gradients_fused_or_not(monkeypatch):
    config = modeling.BertConfig(vocab_size=500, hidden_size=128, num_hidden_layers=2,
                                 num_attention_heads=4, intermediate_size=512,
                                 hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = heads.BertPretrainer(config)
    rng = np.random.RandomState(0)
    features = {"input_ids": tf.constant(rng.randint(0, 500, [4, 128]), tf.int32),
                "input_mask": tf.constant(np.arange(128)[None, :] < [[128], [100], [64], [9]],
                                          tf.int32),
                "segment_ids": tf.zeros([4, 128], tf.int32),
                "masked_lm_positions": tf.constant(rng.randint(0, 9, [4, 20]), tf.int32),
                "masked_lm_ids": tf.constant(rng.randint(0, 500, [4, 20]), tf.int32),
                "masked_lm_weights": tf.ones([4, 20])}
    model(features)

    def step():
        with tf.GradientTape() as tape:
            out = model(features, training=True)
            loss, _ = heads.masked_lm_loss_from_logits(
                out["masked_lm_logits"], features["masked_lm_ids"],
                features["masked_lm_weights"])
            loss += tf.reduce_sum(out["sequence_output"] * 0.01)
        return loss, tape.gradient(loss, model.trainable_variables)

    fused = tf.function(step)()
    monkeypatch.setattr(fused_elementwise, "MIN_ELEMENTS", 1 << 40)
    plain = tf.function(step)()
    np.testing.assert_allclose(fused[0].numpy(), plain[0].numpy(), rtol=1e-5)  # other kernels
    for variable, got, want in zip(model.trainable_variables, fused[1], plain[1]):
        if want is None:
            continue
        got, want = tf.convert_to_tensor(got).numpy(), tf.convert_to_tensor(want).numpy()
        # The key bias's gradient is 0 up to rounding (a softmax does not see it).
        scale = max(np.abs(want).max(), 1e-6)
        assert np.abs(got - want).max() <= 1e-5 * scale, variable.name


def test_masked_lm_cross_entropy_equals_the_fused_kernel():
    rng = np.random.RandomState(3)
    logits = rng.randn(6, 5, 3000).astype(np.float32) * 4
    labels = rng.randint(0, 3000, [6, 5]).astype(np.int32)
    # Far from the largest logit: a probability exp(-300) that underflows float32.
    logits[0, 0, :] = 0.0
    logits[0, 0, 7] = 300.0
    labels[0, 0] = 8
    logits[0, 1, :] = -50.0
    labels[0, 1] = 3  # a uniform row: log(3000)
    weights = rng.rand(6, 5).astype(np.float32)
    logits = tf.constant(logits)

    def ours(lg):
        return heads.masked_lm_loss_from_logits(lg, labels, weights)[1]

    def kernel(lg):
        return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=lg)

    for fn in (lambda f: f, tf.function):
        got, (d_got,) = fn(lambda lg: _value_and_grads(ours, [lg], weights))(logits)
        want, (d_want,) = _value_and_grads(kernel, [logits], weights)
        # Ours vs TF's fused kernel: other kernels, float32's bounds.
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=FP32_ATOL)
        np.testing.assert_allclose(d_got.numpy(), d_want.numpy(), atol=FP32_ATOL)
    assert abs(got.numpy()[0, 0] - 300.0) < 1e-4
    np.testing.assert_allclose(got.numpy()[0, 1], np.log(3000.0), rtol=1e-5)
    # The reference's formula: -sum(one_hot * log_softmax).
    reference = -tf.reduce_sum(tf.one_hot(labels, 3000) * tf.nn.log_softmax(logits), -1)
    np.testing.assert_allclose(got.numpy(), reference.numpy(), rtol=1e-5, atol=FP32_ATOL)
    with pytest.raises(tf.errors.InvalidArgumentError):
        heads.masked_lm_loss_from_logits(logits, np.full([6, 5], 3000, np.int32), weights)


def test_label_softmax_gradient_one_pass_or_ops_the_kernels_formula():
    rng = np.random.RandomState(4)
    logits = tf.constant(rng.randn(40, 3000).astype(np.float32) * 4)
    labels = tf.constant(rng.randint(0, 3000, [40]).astype(np.int32))
    d_loss = tf.constant(rng.rand(40).astype(np.float32))
    probs = tf.nn.softmax(logits)
    assert fused_elementwise.applies(probs, True)
    fused = fused_elementwise.label_softmax_gradient(probs, labels, d_loss)
    dynamic = tf.function(fused_elementwise.label_softmax_gradient, input_signature=[
        tf.TensorSpec([None, 3000], tf.float32), tf.TensorSpec([None], tf.int32),
        tf.TensorSpec([None], tf.float32)])(probs, labels, d_loss)
    want = (probs.numpy() - np.eye(3000, dtype=np.float32)[labels.numpy()]) \
        * d_loss.numpy()[:, None]
    # Our kernel vs numpy's: float32's bound (a wrong gradient is off by ~1/3000 or more).
    np.testing.assert_allclose(fused.numpy(), want, atol=FP32_ATOL)
    np.testing.assert_allclose(dynamic.numpy(), want, atol=FP32_ATOL)
    with tf.GradientTape() as tape:
        tape.watch(logits)
        loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    kernel = tape.gradient(loss, logits, output_gradients=d_loss)
    np.testing.assert_allclose(fused.numpy(), kernel.numpy(), atol=FP32_ATOL)


def _bits(t):
    t = tf.convert_to_tensor(t)
    return np.asarray(tf.bitcast(t, tf.int32 if t.dtype == tf.float32 else tf.int16))


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16, tf.float16])
def test_keep_and_scale_is_the_select_and_multiply_bit_for_bit(dtype):
    rng = np.random.RandomState(5)
    shape = [8, 4, 64, 64]  # 131,072 units: one XLA pass each way
    values = rng.normal(0, 3, shape)
    values.flat[:4] = [np.inf, -np.inf, np.nan, 6e4]  # dropped or kept, as the ops do
    x = tf.constant(values, dtype)
    dy = tf.constant(rng.normal(0, 3, shape), dtype)
    keep = tf.constant(rng.uniform(size=shape) >= 0.1)
    scale = tf.constant(1 / 0.9, dtype)
    assert fused_elementwise.applies(x, True)

    def ops(k, v, s):
        return tf.where(k, v * s, tf.zeros([], v.dtype))

    def value_and_grad(fn):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(keep, x, scale)
        return y, tape.gradient(y, x, output_gradients=dy)

    want = tf.function(lambda: value_and_grad(ops))()
    for got in (tf.function(lambda: value_and_grad(fused_elementwise.keep_and_scale))(),
                value_and_grad(fused_elementwise.keep_and_scale)):
        for a, b in zip(got, want):
            np.testing.assert_array_equal(_bits(a), _bits(b))
    # Small or dynamic shapes: the same two ops.
    small = tf.constant(values[0, 0, :8], dtype)
    np.testing.assert_array_equal(
        _bits(fused_elementwise.keep_and_scale(keep[0, 0, :8], small, scale)),
        _bits(ops(keep[0, 0, :8], small, scale)))
