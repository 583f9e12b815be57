"""The fused update of optimization.py against the op-by-op one (and the TF1 graph).

The bound, stated once (eps = 2**-23, float32's machine epsilon): after 10, 50 and
100 clipped steps on every variable of a 4-layer pretrainer (BERT-Mini's layers and
heads, at H 128 and a 2048-piece vocabulary: random gradients, warm-up + linear decay),
for every parameter and every adam_m / adam_v slot x,

    max|x_fused - x_op_by_op|      <= 16 eps * max|x_op_by_op|
    ||x_fused - x_op_by_op||_2     <=  8 eps * ||x_op_by_op||_2

(measured: at most 8.2 eps and 4.2 eps, reached by adam_v whose rounding
differences add up like a random walk; the parameters stay at 3.6 eps from step 50
to step 100, no drift).  The differences come from XLA contracting a*b + c into one
fused multiply-add: the formula and its op order are the same.
"""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

import modeling
import optimization
from bert_tf2 import heads
from bert_tf2.base import fused_update
import two_cpu_checks

EPS = float(np.finfo(np.float32).eps)
MAX_BOUND, NORM_BOUND = 16.0, 8.0

NAMES = ("clf/bert/encoder/layer_0/attention/output/dense/kernel",
         "clf/bert/encoder/layer_0/attention/output/LayerNorm/gamma",
         "clf/bert/encoder/layer_0/attention/output/dense/bias")


def _small_problem(num_steps, seed=7):
    """(initial values, [gradients per step]) of three small variables."""
    rng = np.random.RandomState(seed)
    init = [rng.uniform(-1, 1, (5, 3)), rng.uniform(0.5, 1.5, (3,)), rng.uniform(-1, 1, (3,))]
    init = [x.astype(np.float32) for x in init]
    grads = [[(rng.normal(size=x.shape) * (3.0 if step % 2 else 0.01)).astype(np.float32)
              for x in init] for step in range(num_steps)]
    return init, grads


def _run_ours(init, grads, clip_in_optimizer=False, **kwargs):
    """Parameters and slots after applying `grads` with create_optimizer(0.1, 6, 2, **kwargs)."""
    variables = [tf.Variable(x, name=n) for x, n in zip(init, NAMES)]
    opt = optimization.create_optimizer(0.1, 6, 2, clip_norm=1.0 if clip_in_optimizer else None,
                                        **kwargs)

    @tf.function
    def step(*g):
        """One clipped update."""
        g = list(g) if clip_in_optimizer else optimization.clip_gradients(list(g), 1.0)
        opt.apply_gradients(zip(g, variables))

    for g in grads:
        step(*[tf.constant(x) for x in g])
    slots = [opt.get_slot(v, s).numpy() for s in opt.get_slot_names() for v in variables]
    return [v.numpy() for v in variables] + slots


def _tf1_reference(init, grads, init_lr=0.1, num_train=6, num_warmup=2):
    """The reference's TF1 training update, as a tf.compat.v1 graph run in a Session.

    Warm-up blend and polynomial decay of the learning rate, clip_by_global_norm(1.0),
    then per variable: m, v, m / (sqrt(v) + eps) (+ 0.01 * p unless LayerNorm/bias),
    p - lr * update; global_step + 1.  Float32 constants from Python doubles.
    """
    graph = tf.Graph()
    with graph.as_default():
        step = tf.compat.v1.train.get_or_create_global_step()
        lr = tf.compat.v1.train.polynomial_decay(init_lr, step, num_train, end_learning_rate=0.0,
                                                 power=1.0, cycle=False)
        step_int = tf.cast(step, tf.int32)
        warmup_int = tf.constant(num_warmup, tf.int32)
        warmup_lr = init_lr * (tf.cast(step_int, tf.float32) / tf.cast(warmup_int, tf.float32))
        is_warmup = tf.cast(step_int < warmup_int, tf.float32)
        lr = (1.0 - is_warmup) * lr + is_warmup * warmup_lr
        feeds = [tf.compat.v1.placeholder(tf.float32, x.shape) for x in init]
        clipped, _ = tf.clip_by_global_norm(feeds, clip_norm=1.0)
        params, ops = [], []
        for x, g, name in zip(init, clipped, NAMES):
            p = tf.compat.v1.get_variable(name, initializer=tf.constant(x))
            m = tf.compat.v1.get_variable(name + "/adam_m", initializer=tf.zeros_like(x))
            v = tf.compat.v1.get_variable(name + "/adam_v", initializer=tf.zeros_like(x))
            next_m = tf.multiply(0.9, m) + tf.multiply(1.0 - 0.9, g)
            next_v = tf.multiply(0.999, v) + tf.multiply(1.0 - 0.999, tf.square(g))
            update = next_m / (tf.sqrt(next_v) + 1e-6)
            if "LayerNorm" not in name and "bias" not in name:
                update += 0.01 * p
            ops += [p.assign(p - lr * update), m.assign(next_m), v.assign(next_v)]
            params.append((p, m, v))
        with tf.control_dependencies(ops):  # the step moves after the update has read it
            train = step.assign(step + 1)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            for g in grads:
                session.run(train, dict(zip(feeds, g)))
            values = session.run(params)
    return [p for p, _, _ in values] + [m for _, m, _ in values] + [v for _, _, v in values]


def _deviation(want, got):
    """(max|d| / max|want|, ||d|| / ||want||) in units of eps, worst over the tensors."""
    worst_max = worst_norm = 0.0
    for a, b in zip(want, got):
        scale_max, scale_norm = np.max(np.abs(a)), np.linalg.norm(a)
        if scale_max > 0:
            worst_max = max(worst_max, float(np.max(np.abs(a - b)) / scale_max / EPS))
            worst_norm = max(worst_norm, float(np.linalg.norm(a - b) / scale_norm / EPS))
    return worst_max, worst_norm


def test_op_by_op_is_the_tf1_graph_bit_for_bit_and_fused_is_within_the_bound():
    init, grads = _small_problem(7)
    want = _tf1_reference(init, grads)
    for got in (_run_ours(init, grads, fused=False),
                _run_ours(init, grads, fused=False, clip_in_optimizer=True)):
        for a, b in zip(want, got):
            np.testing.assert_array_equal(b, a)
    for kwargs in (dict(), dict(clip_in_optimizer=True), dict(fused_grouping="device"),
                   dict(fused_grouping="device", clip_in_optimizer=True)):
        worst_max, worst_norm = _deviation(want, _run_ours(init, grads, **kwargs))
        assert worst_max <= MAX_BOUND and worst_norm <= NORM_BOUND, (kwargs, worst_max)


def _mini_pretrainer_variables():
    """Name and initial value of every trainable variable of a pretrainer of BERT-Mini's
    4 layers, at H 128 and a 2048-piece vocabulary (BERT-Mini's own 11M took 40 s a run;
    the same variables, kinds and groupings at a tenth of the size)."""
    from bert_tf2 import heads
    import modeling
    config = modeling.BertConfig(vocab_size=2048, hidden_size=128, num_hidden_layers=4,
                                 num_attention_heads=2, intermediate_size=512)
    model = heads.BertPretrainer(config)
    model(heads.dummy_features())
    named = [(v.name.split(":")[0], v.numpy()) for v in model.trainable_variables]
    tf_keras.backend.clear_session()
    return named


@pytest.mark.slow
def test_fused_stays_within_the_bound_over_100_mini_pretrainer_steps():
    named = _mini_pretrainer_variables()
    assert sum(x.size for _, x in named) > 1_000_000 and len(named) > 60
    runs = {}
    for key, kwargs in (("op", dict(fused=False)), ("fused", dict())):
        variables = [tf.Variable(x, name=n) for n, x in named]
        opt = optimization.create_optimizer(1e-3, 100, 10, **kwargs)
        opt.build(variables)
        runs[key] = (variables, opt)

    @tf.function
    def step(i):
        """Update i of both optimizers with the same random gradients."""
        # Every third step small gradients (norm < 1, no clipping), else clipped.
        stddev = tf.where(i % 3 == 0, 1e-6, 0.05)
        grads = [tf.random.stateless_normal(v.shape, seed=tf.stack([i, k])) * stddev
                 for k, v in enumerate(runs["op"][0])]
        grads = optimization.clip_gradients(grads, 1.0)
        for variables, opt in runs.values():
            opt.apply_gradients(zip(grads, variables))

    def state(key):
        """Parameters, then adam_m, then adam_v slots, as numpy arrays."""
        variables, opt = runs[key]
        return [v.numpy() for v in variables] + [
            opt.get_slot(v, s).numpy() for s in ("adam_m", "adam_v") for v in variables]

    for i in range(100):
        step(tf.constant(i, tf.int32))
        if i + 1 in (10, 50, 100):
            worst_max, worst_norm = _deviation(state("op"), state("fused"))
            assert worst_max <= MAX_BOUND and worst_norm <= NORM_BOUND, (i + 1, worst_max,
                                                                          worst_norm)
    assert int(runs["fused"][1].iterations.numpy()) == 100


def test_clip_norm_in_the_optimizer_is_clip_gradients_bit_for_bit():
    init, grads = _small_problem(6, seed=3)
    for kwargs in (dict(fused=False), dict(), dict(fused_grouping="variable")):
        before = _run_ours(init, grads, **kwargs)
        inside = _run_ours(init, grads, clip_in_optimizer=True, **kwargs)
        for a, b in zip(before, inside):
            np.testing.assert_array_equal(b, a, err_msg=str(kwargs))


def test_groupings_agree_and_sparse_gradients_are_dense():
    rng = np.random.RandomState(0)
    table = rng.normal(size=(6, 4)).astype(np.float32)
    values = tf.constant(rng.normal(size=(4, 4)), tf.float32)
    indices = tf.constant([4, 0, 4, 2])  # row 4 twice

    def run(sparse, **kwargs):
        """The table after 3 clipped updates with the same (sparse or dense) gradient."""
        var = tf.Variable(table, name="bert/embeddings/word_embeddings")
        opt = optimization.create_optimizer(0.5, 10, 0, clip_norm=1.0, **kwargs)
        for _ in range(3):
            grad = tf.IndexedSlices(values, indices, tf.constant([6, 4]))
            opt.apply_gradients([(grad if sparse else tf.convert_to_tensor(grad), var)])
        return var.numpy()

    for sparse in (True, False):
        # Clipping an IndexedSlices counts its rows one by one (duplicates apart), as
        # tf.clip_by_global_norm does: compare with the op-by-op path of the same input.
        want = run(sparse, fused=False)
        assert not np.allclose(want[5], table[5])  # rows without gradient decay too
        for grouping in ("device", "batched", "variable"):
            np.testing.assert_allclose(run(sparse, fused_grouping=grouping), want, rtol=0,
                                       atol=MAX_BOUND * EPS * np.abs(want).max(),
                                       err_msg=f"{grouping} sparse={sparse}")


def _bert_update(num_layers, grouping, steps=3):
    """(values of every parameter and slot, fused_step traces it made) after `steps`
    clipped updates of a BertClassifier's variables (H 32, random gradients)."""
    config = modeling.BertConfig(vocab_size=41, hidden_size=32, num_hidden_layers=num_layers,
                                 num_attention_heads=2, intermediate_size=64)
    model = heads.BertClassifier(config, num_labels=3)
    model(heads.dummy_features())
    rng = np.random.RandomState(num_layers)
    variables = model.trainable_variables
    for v in variables:
        v.assign(rng.normal(scale=0.05, size=v.shape).astype(np.float32))
    opt = optimization.create_optimizer(1e-2, 10, 1, clip_norm=1.0, fused_grouping=grouping)

    @tf.function
    def step(grads):
        """One update, traced in a function of its own as a run's training loop is."""
        opt.apply_gradients(zip(grads, variables))

    before = fused_update.fused_step.experimental_get_tracing_count()
    for k in range(steps):
        step([tf.constant(rng.normal(scale=3.0 if k % 2 else 0.01, size=v.shape)
                          .astype(np.float32)) for v in variables])
    traces = fused_update.fused_step.experimental_get_tracing_count() - before
    values = [v.numpy() for v in variables]
    values += [opt.get_slot(v, s).numpy() for s in opt.get_slot_names() for v in variables]
    return values, traces


def test_batched_update_is_one_program_per_kind_of_layer_with_the_same_values():
    # "batched" (CPU's default) cuts the update at every layer's variables, so the
    # encoder layers share their programs: a second and third layer trace nothing new
    # (TensorFlow keeps a copy of each distinct program's graph per run's training
    # function: issue 63's memory per run). Each variable's update is its own loop:
    # bit for bit the values of one program per variable.
    batched, traces = _bert_update(1, "batched")
    assert traces > 0  # its word embeddings' shape (41 rows) is this test's own
    assert _bert_update(3, "batched")[1] == 0  # the 3-layer model: every program reused
    by_variable, _ = _bert_update(1, "variable")
    for a, b in zip(batched, by_variable):
        np.testing.assert_array_equal(a, b)


def test_moments_returned_or_written_in_place_are_the_same_bits(monkeypatch):
    # CPU's fused computation returns the moments for the caller to assign (XLA's CPU
    # loops that write over their input run unvectorised); GPU / TPU write them in
    # place. Either way every parameter and slot gets the same bits.
    cpu = fused_update.FusedOptimizer.slots_in_place
    assert not cpu(None, "/job:localhost/replica:0/task:0/device:CPU:0") and not cpu(None, "")
    assert cpu(None, "/device:GPU:0") and cpu(None, "/device:TPU:1")
    returned, _ = _bert_update(1, "batched")
    monkeypatch.setattr(fused_update.FusedOptimizer, "slots_in_place", lambda self, d: True)
    in_place, _ = _bert_update(1, "batched")
    assert len(returned) == len(in_place)
    for a, b in zip(returned, in_place):
        np.testing.assert_array_equal(a, b)


def test_settings_are_checked_and_serialized():
    with pytest.raises(ValueError, match="fused_grouping"):
        optimization.create_optimizer(1e-3, 10, 1, fused_grouping="layer")
    with pytest.raises(ValueError, match="clip_norm"):
        optimization.create_optimizer(1e-3, 10, 1, clip_norm=0.0)
    opt = optimization.create_optimizer(1e-3, 10, 1, clip_norm=1.0, fused_grouping="device")
    config = opt.get_config()
    assert (config["fused"], config["fused_grouping"], config["clip_norm"]) == (
        True, "device", 1.0)
    revived = tf_keras.optimizers.deserialize(tf_keras.optimizers.serialize(opt))
    assert revived.get_config() == config
    assert optimization.create_optimizer(1e-3, 10, 1).fused
    assert not optimization.create_optimizer(1e-3, 10, 1, fused=False).fused


# --------------------------------------------------------------------------- #
# LAMB
# --------------------------------------------------------------------------- #
def _lamb_trajectory(opt, init, grads):
    variables = [tf.Variable(x, name=n) for x, n in zip(init, NAMES)]
    for g in grads:
        opt.apply_gradients(zip([tf.constant(x) for x in g], variables))
    return variables, [v.numpy() for v in variables] + [
        opt.get_slot(v, s).numpy() for s in ("m", "v") for v in variables]


def test_fused_lamb_follows_tf_models_lamb():
    from official.modeling.optimization import lamb
    init, grads = _small_problem(20, seed=11)
    peer = optimization.create_optimizer(1e-2, 20, 3, optimizer_type="lamb", fused=False)
    assert isinstance(peer, lamb.LAMB)
    _, want = _lamb_trajectory(peer, init, grads)
    for grouping in ("auto", "device"):
        ours = optimization.create_optimizer(1e-2, 20, 3, optimizer_type="lamb",
                                             fused_grouping=grouping)
        assert isinstance(ours, optimization.LAMB)
        _, got = _lamb_trajectory(ours, init, grads)
        worst_max, worst_norm = _deviation(want, got)
        assert worst_max <= MAX_BOUND and worst_norm <= NORM_BOUND, (grouping, worst_max)
    # The per-variable path of our class (TPU, other strategies) is tf-models' op order.
    ours = optimization.LAMB(optimization.WarmupPolynomialDecay(1e-2, 20, 3),
                             weight_decay_rate=0.01, fused=False,
                             exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"])
    _, got = _lamb_trajectory(ours, init, grads)
    for a, b in zip(want, got):
        np.testing.assert_array_equal(b, a)


def test_lamb_checkpoints_load_both_ways(tmp_path):
    from official.modeling.optimization import lamb
    init, grads = _small_problem(3, seed=5)
    peer = optimization.create_optimizer(1e-2, 20, 3, optimizer_type="lamb", fused=False)
    ours = optimization.create_optimizer(1e-2, 20, 3, optimizer_type="lamb")
    for source, target in ((peer, ours), (ours, peer)):
        variables, _ = _lamb_trajectory(source, init, grads)
        path = tf.train.Checkpoint(optimizer=source, params=variables).write(
            str(tmp_path / type(source).__module__))
        fresh = [tf.Variable(x, name=n) for x, n in zip(init, NAMES)]
        clone = type(target).from_config(target.get_config()) if isinstance(
            target, optimization.LAMB) else lamb.LAMB.from_config(target.get_config())
        status = tf.train.Checkpoint(optimizer=clone, params=fresh).read(path)
        clone.apply_gradients(zip([tf.zeros_like(v) for v in fresh], fresh))
        status.assert_consumed()
        assert int(clone.iterations.numpy()) == 4
        for var, old in zip(fresh, variables):
            np.testing.assert_array_equal(
                clone.get_slot(var, "v").numpy(),
                0.999 * source.get_slot(old, "v").numpy().astype(np.float32))


# --------------------------------------------------------------------------- #
# Two replicas (own process: logical devices must be set before TF runs ops; the child
# of tests/two_cpu_checks.py, shared with test_optimization.py)
# --------------------------------------------------------------------------- #
@pytest.fixture(scope="module")
def mirrored_results(tmp_path_factory):
    """Both optimizers' checks in the one child process with two logical CPUs."""
    return two_cpu_checks.results(tmp_path_factory)["loss_scaling"]


@pytest.mark.parametrize("kind", ["adamw", "lamb"])
def test_fused_update_under_mirrored_strategy_with_loss_scaling(mirrored_results, kind):
    result = mirrored_results[kind]
    assert result["iterations"] == 3 and result["agree"]
    assert result["fused_calls"] >= 2  # the fused path ran, on both devices
    assert result["max_diff"] < 1e-6


def test_learning_rate_multipliers_scale_one_variable_and_leave_the_others():
    # run_ner --crf_learning_rate: the transitions learn at 100x, the rest as before.
    init, grads = _small_problem(6, seed=5)
    for fused in (True, False):
        plain = _run_ours(init, grads, clip_in_optimizer=True, fused=fused)
        scaled = _run_ours(init, grads, clip_in_optimizer=True, fused=fused,
                           learning_rate_multipliers={"dense/kernel$": 100.0})
        # Every slot and every other variable bit for bit; the kernel moved further.
        for i, (a, b) in enumerate(zip(plain, scaled)):
            if i != 0:
                np.testing.assert_array_equal(b, a, err_msg="fused=%s, %d" % (fused, i))
        assert np.abs(scaled[0] - init[0]).max() > 50 * np.abs(plain[0] - init[0]).max()
    # The kernel's update is the schedule's rate x 100 exactly as a 100x rate gives it:
    # one step from zero moments is lr * (g / (|g| + eps) + decay * p).
    var = tf.Variable(init[0], name=NAMES[0])
    opt = optimization.create_optimizer(0.1, 6, 0, learning_rate_multipliers={"kernel": 3.0})
    opt.apply_gradients([(tf.constant(grads[0][0]), var)])
    m, v = 0.1 * grads[0][0], 0.001 * grads[0][0] ** 2
    want = init[0] - 0.3 * (m / (np.sqrt(v) + 1e-6) + 0.01 * init[0])
    np.testing.assert_allclose(var.numpy(), want, rtol=1e-5, atol=1e-6)
    assert opt.get_config()["learning_rate_multipliers"] == {"kernel": 3.0}
    for bad, message in (({"(": 2.0}, "not a regular expression"),
                         ({"kernel": 0.0}, "must be a number > 0")):
        with pytest.raises(ValueError, match=message):
            optimization.create_optimizer(0.1, 6, 0, learning_rate_multipliers=bad)
    with pytest.raises(ValueError, match="unfused LAMB"):
        optimization.create_optimizer(0.1, 6, 0, optimizer_type="lamb", fused=False,
                                      learning_rate_multipliers={"kernel": 3.0})
