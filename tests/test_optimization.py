"""Tests for optimization.py (schedule, AdamWeightDecay, clipping, factory).

Tests of the update run on both paths: fused=False (the TF1 update op by op) and
fused=True (the default).  tests/test_fused_optimizer.py compares the two.
"""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

import optimization
from conftest import FP32_ATOL
import two_cpu_checks


KERNEL_NAME = "clf_model/bert/encoder/layer_0/attention/output/dense/kernel"
GAMMA_NAME = "clf_model/bert/encoder/layer_0/attention/output/LayerNorm/gamma"
BIAS_NAME = "clf_model/bert/encoder/layer_0/attention/output/dense/bias"

INIT_LR = 0.1
NUM_TRAIN = 5
NUM_WARMUP = 2
NUM_STEPS = 6  # one update past num_train_steps, where lr is 0


# --------------------------------------------------------------------------- #
# Plain numpy restatement of the TF1 BERT update, used as the oracle.
# --------------------------------------------------------------------------- #
def expected_lr(t, init_lr, num_train, num_warmup):
    if num_warmup and t < num_warmup:
        return init_lr * t / num_warmup
    return init_lr * (1.0 - min(t, num_train) / num_train)


class NumpyBertAdam:
    def __init__(self, init_lr, num_train, num_warmup, decay=0.01, b1=0.9,
                 b2=0.999, eps=1e-6):
        self.args = (init_lr, num_train, num_warmup)
        self.decay, self.b1, self.b2, self.eps = decay, b1, b2, eps
        self.t = 0

    def step(self, params, grads, decayed, moments):
        lr = expected_lr(self.t, *self.args)
        for name in params:
            m, v = moments.setdefault(
                name, (np.zeros_like(params[name]), np.zeros_like(params[name])))
            g = grads[name]
            m = self.b1 * m + (1 - self.b1) * g
            v = self.b2 * v + (1 - self.b2) * g * g
            update = m / (np.sqrt(v) + self.eps)
            if decayed[name]:
                update = update + self.decay * params[name]
            params[name] = params[name] - lr * update
            moments[name] = (m, v)
        self.t += 1


def _initial_values():
    rng = np.random.RandomState(1234)
    return {
        KERNEL_NAME: rng.uniform(-1, 1, size=(3, 2)),
        GAMMA_NAME: rng.uniform(0.5, 1.5, size=(2,)),
        BIAS_NAME: rng.uniform(-1, 1, size=(2,)),
    }


def _gradient_sequence(num_steps=NUM_STEPS):
    rng = np.random.RandomState(99)
    init = _initial_values()
    return [{name: rng.normal(size=val.shape) for name, val in init.items()}
            for _ in range(num_steps)]


def _make_vars(prefix=""):
    return {name: tf.Variable(val.astype(np.float32), name=prefix + name)
            for name, val in _initial_values().items()}


def _numpy_trajectory():
    """Params and (m, v) after each of the NUM_STEPS updates."""
    params = {k: v.astype(np.float64) for k, v in _initial_values().items()}
    decayed = {KERNEL_NAME: True, GAMMA_NAME: False, BIAS_NAME: False}
    oracle = NumpyBertAdam(INIT_LR, NUM_TRAIN, NUM_WARMUP)
    moments, history = {}, []
    for grads in _gradient_sequence():
        oracle.step(params, grads, decayed, moments)
        history.append(({k: v.copy() for k, v in params.items()},
                        {k: (m.copy(), v.copy()) for k, (m, v) in moments.items()}))
    return history


@pytest.fixture(params=[False, True], ids=["op_by_op", "fused"])
def fused(request):
    """Runs a test on the op-by-op path and on the fused path."""
    return request.param


def _apply(opt, variables, grads):
    opt.apply_gradients(
        [(tf.constant(grads[name], tf.float32), var)
         for name, var in variables.items()])


# --------------------------------------------------------------------------- #
# Learning-rate schedule
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("num_warmup", [0, 1, 2, 4])
def test_schedule_values(num_warmup):
    schedule = optimization.WarmupPolynomialDecay(2.0, 6, num_warmup)
    for t in range(10):
        want = expected_lr(t, 2.0, 6, num_warmup)
        assert float(schedule(t)) == pytest.approx(want, abs=1e-6), t
        assert float(schedule(tf.constant(t, tf.int64))) == pytest.approx(
            want, abs=1e-6)
        assert float(schedule(float(t))) == pytest.approx(want, abs=1e-6)


def test_schedule_corner_points():
    schedule = optimization.WarmupPolynomialDecay(1.0, NUM_TRAIN, NUM_WARMUP)
    got = [float(schedule(t)) for t in range(8)]
    # A few scalar float32 operations (no reduction): within an ulp of the hand values.
    # Warm-up 0, 0.5; then decay evaluated at t itself: 1 - 2/5 = 0.6 ...
    np.testing.assert_allclose(got, [0.0, 0.5, 0.6, 0.4, 0.2, 0.0, 0.0, 0.0],
                               atol=1e-7)
    no_warmup = optimization.WarmupPolynomialDecay(1.0, NUM_TRAIN, 0)
    np.testing.assert_allclose([float(no_warmup(t)) for t in range(7)],
                               [1.0, 0.8, 0.6, 0.4, 0.2, 0.0, 0.0], atol=1e-7)


def test_schedule_config_round_trip():
    schedule = optimization.WarmupPolynomialDecay(3e-5, 1000, 100)
    clone = optimization.WarmupPolynomialDecay.from_config(schedule.get_config())
    assert clone.get_config() == schedule.get_config()
    revived = tf_keras.optimizers.schedules.deserialize(
        tf_keras.optimizers.schedules.serialize(schedule))
    assert isinstance(revived, optimization.WarmupPolynomialDecay)
    assert float(revived(150)) == pytest.approx(float(schedule(150)))


@pytest.mark.parametrize("kwargs", [
    dict(init_lr=1e-3, num_train_steps=0, num_warmup_steps=0),
    dict(init_lr=1e-3, num_train_steps=-3, num_warmup_steps=0),
    dict(init_lr=1e-3, num_train_steps=10, num_warmup_steps=-1),
    dict(init_lr=-1e-3, num_train_steps=10, num_warmup_steps=1),
    dict(init_lr=1e-3, num_train_steps=10.5, num_warmup_steps=1),
    dict(init_lr=1e-3, num_train_steps="10", num_warmup_steps=1),
    dict(init_lr=float("nan"), num_train_steps=10, num_warmup_steps=1),
])
def test_bad_arguments_raise(kwargs):
    with pytest.raises(ValueError):
        optimization.create_optimizer(**kwargs)


# --------------------------------------------------------------------------- #
# The update rule
# --------------------------------------------------------------------------- #
def _check_against_oracle(opt, variables, step_fn):
    history = _numpy_trajectory()
    for step, grads in enumerate(_gradient_sequence()):
        step_fn(grads)
        want_params, want_moments = history[step]
        for name, var in variables.items():
            # Elementwise float32 updates (no reduction, no shape change) vs numpy's float64.
            np.testing.assert_allclose(var.numpy(), want_params[name], atol=1e-6,
                                       err_msg=f"{name} step {step}")
            m, v = want_moments[name]
            np.testing.assert_allclose(opt.get_slot(var, "adam_m").numpy(), m,
                                       atol=1e-6)
            np.testing.assert_allclose(opt.get_slot(var, "adam_v").numpy(), v,
                                       atol=1e-6)
        assert int(opt.iterations.numpy()) == step + 1


def test_update_matches_reference_formulas_eager(fused):
    variables = _make_vars()
    opt = optimization.create_optimizer(INIT_LR, NUM_TRAIN, NUM_WARMUP, fused=fused)
    assert isinstance(opt, optimization.AdamWeightDecay)
    _check_against_oracle(opt, variables, lambda g: _apply(opt, variables, g))
    # Sanity of the scenario itself: the first update (lr(0) = 0) and the one
    # at t = num_train_steps (lr = 0) leave the parameters unchanged, while
    # moments still move.
    history = _numpy_trajectory()
    for name, initial in _initial_values().items():
        np.testing.assert_allclose(history[0][0][name], initial)
        np.testing.assert_allclose(history[5][0][name], history[4][0][name])
        assert not np.allclose(history[5][1][name][0], history[4][1][name][0])


def test_weight_decay_exclusion_by_name():
    opt = optimization.AdamWeightDecay(learning_rate=0.1)
    for name in (KERNEL_NAME, KERNEL_NAME + ":0",
                 "bert/encoder/layer_3/intermediate/dense/kernel:0",
                 "bert/embeddings/word_embeddings"):
        assert opt.uses_weight_decay(name), name
    for name in (GAMMA_NAME + ":0", GAMMA_NAME, BIAS_NAME + ":0",
                 "bert/embeddings/LayerNorm/beta:0", "cls/predictions/output_bias",
                 "encoder/layer_norm/gamma:0", "dense/bias"):
        assert not opt.uses_weight_decay(name), name
    assert not optimization.AdamWeightDecay(
        0.1, weight_decay_rate=0.0).uses_weight_decay(KERNEL_NAME)
    everything = optimization.AdamWeightDecay(0.1, exclude_from_weight_decay=None)
    assert everything.uses_weight_decay(BIAS_NAME)


def test_update_without_model_prefix_and_with_custom_exclusions(fused):
    # Same rule when the variables carry no model prefix.
    variables = {name: tf.Variable(val.astype(np.float32),
                                   name=name.split("/", 1)[1])
                 for name, val in _initial_values().items()}
    assert not variables[GAMMA_NAME].name.startswith("clf_model")
    opt = optimization.create_optimizer(INIT_LR, NUM_TRAIN, NUM_WARMUP, fused=fused)
    _check_against_oracle(opt, variables, lambda g: _apply(opt, variables, g))


def test_under_tf_function_and_xla(fused):
    eager_vars, graph_vars, xla_vars = _make_vars(), _make_vars(), _make_vars()
    eager_opt = optimization.create_optimizer(INIT_LR, NUM_TRAIN, NUM_WARMUP, fused=fused)
    graph_opt = optimization.create_optimizer(INIT_LR, NUM_TRAIN, NUM_WARMUP, fused=fused)
    xla_opt = optimization.create_optimizer(INIT_LR, NUM_TRAIN, NUM_WARMUP, fused=fused)
    names = list(eager_vars)

    def make_step(opt, variables, jit):
        @tf.function(jit_compile=jit)
        def step(*grads):
            grads = optimization.clip_gradients(list(grads), 1.0)
            opt.apply_gradients(zip(grads, [variables[n] for n in names]))
        return step

    graph_step = make_step(graph_opt, graph_vars, False)
    xla_step = make_step(xla_opt, xla_vars, True)
    for grads in _gradient_sequence():
        tensors = [tf.constant(grads[n], tf.float32) for n in names]
        clipped = optimization.clip_gradients(tensors, 1.0)
        eager_opt.apply_gradients(zip(clipped, [eager_vars[n] for n in names]))
        graph_step(*tensors)
        xla_step(*tensors)
    for n in names:
        # A graph of the same elementwise kernels and shapes as eager: rounding only.
        np.testing.assert_allclose(graph_vars[n].numpy(), eager_vars[n].numpy(),
                                   atol=1e-7)
        # XLA's own kernels (it may contract to FMA): float32's bounds.
        np.testing.assert_allclose(xla_vars[n].numpy(), eager_vars[n].numpy(),
                                   atol=FP32_ATOL)
        np.testing.assert_allclose(
            xla_opt.get_slot(xla_vars[n], "adam_v").numpy(),
            eager_opt.get_slot(eager_vars[n], "adam_v").numpy(), rtol=1e-5, atol=1e-12)
    assert int(xla_opt.iterations.numpy()) == NUM_STEPS


def test_jit_compiled_update_matches_reference_formulas():
    # jit_compile=True on the per-variable path compiles each variable's update.
    variables = _make_vars()
    opt = optimization.create_optimizer(INIT_LR, NUM_TRAIN, NUM_WARMUP, jit_compile=True,
                                        fused=False)
    assert opt.jit_compile and opt.get_config()["jit_compile"]
    _check_against_oracle(opt, variables, lambda g: _apply(opt, variables, g))


def test_indexed_slices_gradient_matches_dense(fused):
    rng = np.random.RandomState(3)
    table = rng.normal(size=(6, 4)).astype(np.float32)
    indices = tf.constant([4, 0, 4, 2], tf.int32)  # duplicate row 4
    values = tf.constant(rng.normal(size=(4, 4)), tf.float32)
    sparse = tf.IndexedSlices(values, indices, tf.constant([6, 4]))
    dense = tf.convert_to_tensor(sparse)

    sparse_var = tf.Variable(table, name="bert/embeddings/word_embeddings")
    dense_var = tf.Variable(table, name="bert/embeddings/word_embeddings")
    sparse_opt = optimization.create_optimizer(0.5, 10, 0, fused=fused)
    dense_opt = optimization.create_optimizer(0.5, 10, 0, fused=fused)

    @tf.function(jit_compile=True)
    def sparse_step_xla(grad_values):
        g = tf.IndexedSlices(grad_values, indices, tf.constant([6, 4]))
        sparse_opt.apply_gradients([(g, sparse_var)])

    for step in range(3):
        if step == 2:
            sparse_step_xla(values)
        else:
            sparse_opt.apply_gradients([(sparse, sparse_var)])
        dense_opt.apply_gradients([(dense, dense_var)])
        # Sparse (and at step 2 XLA's) kernels vs dense ones: float32's bound.
        np.testing.assert_allclose(sparse_var.numpy(), dense_var.numpy(),
                                   atol=FP32_ATOL)
    # Rows without a gradient still get weight decay (dense semantics).
    assert not np.allclose(sparse_var.numpy()[5], table[5])


def test_clip_gradients():
    a = tf.constant([3.0, 0.0])
    b = tf.constant([[0.0, 4.0]])
    clipped, norm = optimization.clip_gradients([a, None, b], 1.0,
                                                return_norm=True)
    assert clipped[1] is None
    assert float(norm) == pytest.approx(5.0)
    # Hand values of one norm of 2 numbers and one scaling: float32 rounding only.
    np.testing.assert_allclose(clipped[0].numpy(), [0.6, 0.0], atol=1e-6)
    np.testing.assert_allclose(clipped[2].numpy(), [[0.0, 0.8]], atol=1e-6)
    # Below the threshold nothing changes.
    small = optimization.clip_gradients([tf.constant([0.3, 0.4])])
    np.testing.assert_allclose(small[0].numpy(), [0.3, 0.4], atol=1e-7)
    # IndexedSlices stay sparse and are scaled.
    sl = tf.IndexedSlices(tf.constant([[6.0, 8.0]]), tf.constant([1]),
                          tf.constant([3, 2]))
    out = optimization.clip_gradients([sl, None])
    assert isinstance(out[0], tf.IndexedSlices)
    np.testing.assert_allclose(out[0].values.numpy(), [[0.6, 0.8]], atol=1e-6)
    assert optimization.clip_gradients([None, None]) == [None, None]
    with pytest.raises(ValueError):
        optimization.clip_gradients([a], clip_norm=0.0)


# --------------------------------------------------------------------------- #
# Slots, checkpoints, serialization
# --------------------------------------------------------------------------- #
def test_slot_names_and_tf1_mapping():
    variables = _make_vars()
    opt = optimization.create_optimizer(INIT_LR, NUM_TRAIN, NUM_WARMUP)
    _apply(opt, variables, _gradient_sequence()[0])
    assert set(opt.get_slot_names()) == {"adam_m", "adam_v"}
    mapping = opt.slot_tf1_names()
    assert set(mapping) == {f"{n}/{s}" for n in variables for s in ("adam_m", "adam_v")}
    for name, var in variables.items():
        assert mapping[name + "/adam_m"] is opt.get_slot(var, "adam_m")
        assert mapping[name + "/adam_v"] is opt.get_slot(var, "adam_v")
        assert opt.get_slot(var, "adam_m").name.endswith(name + "/adam_m:0")
    subset = opt.slot_tf1_names([variables[KERNEL_NAME]])
    assert set(subset) == {KERNEL_NAME + "/adam_m", KERNEL_NAME + "/adam_v"}


def test_checkpoint_round_trip(tmp_path, fused):
    grads = _gradient_sequence()
    source_vars = _make_vars()
    source = optimization.create_optimizer(INIT_LR, NUM_TRAIN, NUM_WARMUP, fused=fused)
    for g in grads[:3]:
        _apply(source, source_vars, g)
    ckpt = tf.train.Checkpoint(optimizer=source, params=list(source_vars.values()))
    path = ckpt.save(str(tmp_path / "ckpt"))

    target_vars = _make_vars()
    # The other path reads the same checkpoint into the same slots.
    other_vars = _make_vars()
    other = optimization.create_optimizer(INIT_LR, NUM_TRAIN, NUM_WARMUP, fused=not fused)
    tf.train.Checkpoint(optimizer=other, params=list(other_vars.values())).restore(
        path).assert_existing_objects_matched()
    other.build(list(other_vars.values()))
    for name in source_vars:
        np.testing.assert_array_equal(other.get_slot(other_vars[name], "adam_v").numpy(),
                                      source.get_slot(source_vars[name], "adam_v").numpy())

    target = optimization.create_optimizer(INIT_LR, NUM_TRAIN, NUM_WARMUP, fused=fused)
    status = tf.train.Checkpoint(
        optimizer=target, params=list(target_vars.values())).restore(path)
    target.build(list(target_vars.values()))  # slots take the restored values
    status.assert_existing_objects_matched()
    assert int(target.iterations.numpy()) == 3
    for name in source_vars:
        for slot in ("adam_m", "adam_v"):
            np.testing.assert_array_equal(
                target.get_slot(target_vars[name], slot).numpy(),
                source.get_slot(source_vars[name], slot).numpy())
        np.testing.assert_array_equal(target_vars[name].numpy(),
                                      source_vars[name].numpy())
    # Training continues identically (same step counter -> same lr).
    for g in grads[3:]:
        _apply(source, source_vars, g)
        _apply(target, target_vars, g)
    for name in source_vars:
        np.testing.assert_array_equal(target_vars[name].numpy(),
                                      source_vars[name].numpy())

    # Restoring before any slot exists: slots are filled on first creation.
    lazy_vars = _make_vars()
    lazy = optimization.create_optimizer(INIT_LR, NUM_TRAIN, NUM_WARMUP, fused=fused)
    tf.train.Checkpoint(optimizer=lazy,
                        params=list(lazy_vars.values())).restore(path)
    _apply(lazy, lazy_vars, {n: np.zeros_like(v) for n, v in grads[0].items()})
    m = lazy.get_slot(lazy_vars[KERNEL_NAME], "adam_m").numpy()
    assert np.abs(m).max() > 0  # restored moments (decayed by a zero gradient)


def test_optimizer_config_round_trip():
    opt = optimization.create_optimizer(2e-5, 100, 10)
    revived = tf_keras.optimizers.deserialize(tf_keras.optimizers.serialize(opt))
    assert isinstance(revived, optimization.AdamWeightDecay)
    cfg, revived_cfg = opt.get_config(), revived.get_config()
    assert cfg == revived_cfg
    assert cfg["weight_decay_rate"] == 0.01
    assert cfg["epsilon"] == 1e-6
    assert cfg["exclude_from_weight_decay"] == ["LayerNorm", "layer_norm", "bias"]
    assert isinstance(revived.learning_rate, optimization.WarmupPolynomialDecay)


# --------------------------------------------------------------------------- #
# Mixed precision
# --------------------------------------------------------------------------- #
def test_loss_scale_optimizer_gives_unscaled_update(fused):
    x = tf.constant([[0.5, -1.0, 2.0]])
    plain_w = tf.Variable([[0.1], [0.2], [-0.3]], name="head/dense/kernel")
    plain_b = tf.Variable([0.05], name="head/dense/bias")
    scaled_w = tf.Variable(plain_w.numpy(), name="head/dense/kernel")
    scaled_b = tf.Variable(plain_b.numpy(), name="head/dense/bias")
    plain = optimization.create_optimizer(0.1, 10, 2, fused=fused)
    wrapped = tf_keras.mixed_precision.LossScaleOptimizer(
        optimization.create_optimizer(0.1, 10, 2, fused=fused))

    def loss_fn(w, b):
        return tf.reduce_sum(tf.square(tf.matmul(x, w) + b - 1.0)) * 7.0

    @tf.function
    def scaled_step():
        with tf.GradientTape() as tape:
            scaled_loss = wrapped.get_scaled_loss(loss_fn(scaled_w, scaled_b))
        grads = wrapped.get_unscaled_gradients(
            tape.gradient(scaled_loss, [scaled_w, scaled_b]))
        grads = optimization.clip_gradients(grads)
        wrapped.apply_gradients(zip(grads, [scaled_w, scaled_b]))

    for _ in range(4):
        with tf.GradientTape() as tape:
            loss = loss_fn(plain_w, plain_b)
        grads = optimization.clip_gradients(
            tape.gradient(loss, [plain_w, plain_b]))
        plain.apply_gradients(zip(grads, [plain_w, plain_b]))
        scaled_step()
    assert float(wrapped.loss_scale) > 1.0
    # A tf.function step vs eager ones (grappler may fuse): float32's bound.
    np.testing.assert_allclose(scaled_w.numpy(), plain_w.numpy(), atol=FP32_ATOL)
    np.testing.assert_allclose(scaled_b.numpy(), plain_b.numpy(), atol=FP32_ATOL)
    np.testing.assert_allclose(
        wrapped.get_slot(scaled_w, "adam_m").numpy(),
        plain.get_slot(plain_w, "adam_m").numpy(), rtol=1e-5, atol=1e-9)
    assert int(wrapped.iterations.numpy()) == 4


def test_mixed_float16_layer_steps(fused):
    layer = tf_keras.layers.Dense(
        2, dtype=tf_keras.mixed_precision.Policy("mixed_float16"), name="fp16_dense")
    x = tf.constant(np.random.RandomState(0).normal(size=(4, 3)), tf.float16)
    layer(x)
    opt = tf_keras.mixed_precision.LossScaleOptimizer(
        optimization.create_optimizer(0.01, 10, 0, fused=fused))
    before = [v.numpy().copy() for v in layer.trainable_variables]
    # A step whose fp16 gradients overflow at the current loss scale is skipped
    # (and the scale halved), so step until the weights move.
    for _ in range(10):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.cast(layer(x), tf.float32) ** 2)
            scaled = opt.get_scaled_loss(loss)
        grads = opt.get_unscaled_gradients(
            tape.gradient(scaled, layer.trainable_variables))
        opt.apply_gradients(zip(optimization.clip_gradients(grads),
                                layer.trainable_variables))
        if not np.allclose(layer.kernel.numpy(), before[0]):
            break
    for var, old in zip(layer.trainable_variables, before):
        assert var.dtype == tf.float32
        assert np.all(np.isfinite(var.numpy()))
        assert not np.allclose(var.numpy(), old)
    # Slots are looked up through the optimizer's weights: get_slot() on a layer's
    # AutoCastVariable keys on a per-process variable id that tf_keras does not
    # always compute the same way for the wrapper (flaky KeyError).
    slots = {w.name.split("/", 1)[1]: w for w in opt.inner_optimizer.weights if "/adam_" in w.name}
    assert sorted(slots) == sorted("fp16_dense/%s/adam_%s:0" % (v, s)
                                   for v in ("kernel", "bias") for s in "mv")
    assert all(w.dtype == tf.float32 for w in slots.values())
    assert not opt.inner_optimizer.uses_weight_decay(layer.bias)
    assert opt.inner_optimizer.uses_weight_decay(layer.kernel)


# --------------------------------------------------------------------------- #
# Distribution (own process: logical devices must be set before TF runs ops; the child
# of tests/two_cpu_checks.py, shared with test_fused_optimizer.py)
# --------------------------------------------------------------------------- #
@pytest.mark.slow
def test_mirrored_strategy_two_cpus(fused, tmp_path_factory):
    """3 steps on two replicas (dense and sparse gradients, other on each replica) equal
    one device's steps on their sum; the replicas and their adam_v slots stay equal."""
    result = two_cpu_checks.results(tmp_path_factory)["mirrored"]["fused" if fused else "op_by_op"]
    assert result["iterations"] == 3
    assert result["replicas_agree"]
    assert result["max_diff"] < 1e-6
    assert result["slot_names"] == sorted(
        f"m/bert/{n}/{s}" for n in ("dense/kernel", "LayerNorm/gamma",
                                    "word_embeddings")
        for s in ("adam_m", "adam_v"))


# --------------------------------------------------------------------------- #
# Factory: LAMB and bad types
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("fused_lamb", [True, False])
def test_lamb_creates_and_steps(fused_lamb):
    from official.modeling.optimization import lamb
    opt = optimization.create_optimizer(1e-2, 10, 2, optimizer_type="LAMB", fused=fused_lamb)
    # fused=False is tf-models-official's class; fused=True ours, with the same rule.
    assert isinstance(opt, lamb.LAMB if not fused_lamb else optimization.LAMB)
    assert opt.epsilon == 1e-6
    assert opt.exclude_from_weight_decay == ["LayerNorm", "layer_norm", "bias"]
    assert opt.exclude_from_layer_adaptation == ["LayerNorm", "layer_norm", "bias"]
    assert float(opt._get_hyper("weight_decay_rate")) == pytest.approx(0.01)
    assert isinstance(opt.learning_rate, optimization.WarmupPolynomialDecay)
    variables = _make_vars()
    before = {n: v.numpy().copy() for n, v in variables.items()}
    for g in _gradient_sequence()[:3]:
        _apply(opt, variables, g)
    assert int(opt.iterations.numpy()) == 3
    for name, var in variables.items():
        assert not np.allclose(var.numpy(), before[name])
    wrapped = tf_keras.mixed_precision.LossScaleOptimizer(
        optimization.create_optimizer(1e-2, 10, 2, optimizer_type="lamb", fused=fused_lamb))
    _apply(wrapped, variables, _gradient_sequence()[0])


@pytest.mark.parametrize("bad", ["adam", "sgd", "", None, 3])
def test_unknown_optimizer_type_raises(bad):
    with pytest.raises(ValueError, match="adamw") as info:
        optimization.create_optimizer(1e-3, 10, 1, optimizer_type=bad)
    assert "lamb" in str(info.value)
