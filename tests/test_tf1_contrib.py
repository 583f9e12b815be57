"""tf.contrib's pieces (bert_tf2/compat/contrib.py, contrib_ops.py) against TF 1.15's arithmetic.

They run in this process inside `tf.Graph().as_default()` (graph code, TF2's defaults
otherwise), which builds the same ops and variables as under bert_tf2.tf1's graph mode;
bert_tf2.tf1 itself is tested in a subprocess (test_tf1_namespace.py).
"""
import numpy as np
import pytest
import tensorflow as tf

from bert_tf2.compat import contrib
from conftest import FP32_ATOL

V1 = tf.compat.v1


def _run(build, feed_value=None):
    """Builds `build(graph)` in a fresh graph, initializes, returns (fetched, variable names)."""
    with tf.Graph().as_default() as graph:
        fetch = build(graph)
        with V1.Session(graph=graph) as session:
            session.run([V1.global_variables_initializer(), V1.local_variables_initializer()])
            got = session.run(fetch) if feed_value is None else feed_value(session, fetch)
        return got, [v.name for v in V1.global_variables()]


def _reference_layer_norm(x, gamma, beta, axes):
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * gamma + beta


def test_layer_norm_is_the_references_formula_with_its_variable_names():
    x = np.random.RandomState(0).normal(2.0, 3.0, size=(2, 5, 8)).astype(np.float32)
    gamma = np.linspace(0.5, 1.5, 8).astype(np.float32)
    beta = np.linspace(-1.0, 1.0, 8).astype(np.float32)

    def build(_):
        with V1.variable_scope("bert/embeddings"):
            out = contrib.layers.layer_norm(x, begin_norm_axis=-1, begin_params_axis=-1,
                                            scope="LayerNorm")
        assigns = [V1.assign(v, value) for v, value in zip(V1.global_variables(),
                                                           (beta, gamma))]
        return out, assigns

    def assign_then_run(session, fetch):
        # Two runs: within one, nothing orders the layer's reads after the assigns.
        out, assigns = fetch
        session.run(assigns)
        return session.run(out)
    got, names = _run(build, assign_then_run)
    assert names == ["bert/embeddings/LayerNorm/beta:0", "bert/embeddings/LayerNorm/gamma:0"]
    # Our LayerNorm vs numpy's formula: other kernels, float32's bound.
    np.testing.assert_allclose(got, _reference_layer_norm(x, gamma, beta, -1), atol=FP32_ATOL)


def test_layer_norm_defaults_are_tf115s():
    # begin_norm_axis=1 by default: the moments over every axis but the batch; default scope
    # LayerNorm, made unique; model variables; trainable=False keeps them out of training.
    x = np.random.RandomState(1).normal(size=(3, 4, 6)).astype(np.float32)

    def build(_):
        first = contrib.layers.layer_norm(x)
        contrib.layers.layer_norm(x, center=False, trainable=False, activation_fn=tf.nn.relu)
        return {"out": first, "model": [v.name for v in V1.model_variables()],
                "trainable": [v.name for v in V1.trainable_variables()]}
    got, names = _run(lambda g: build(g)["out"])
    np.testing.assert_allclose(got, _reference_layer_norm(x, 1.0, 0.0, (1, 2)), atol=FP32_ATOL)
    with tf.Graph().as_default():
        listed = build(None)
    assert listed["model"] == ["LayerNorm/beta:0", "LayerNorm/gamma:0", "LayerNorm_1/gamma:0"]
    assert listed["trainable"] == ["LayerNorm/beta:0", "LayerNorm/gamma:0"]
    assert names == listed["model"]
    with pytest.raises(ValueError, match="begin_norm_axis=3 is outside an input of rank 3"):
        with tf.Graph().as_default():
            contrib.layers.layer_norm(x, begin_norm_axis=3)


def test_map_and_batch_gives_map_then_batch():
    data = tf.data.Dataset.range(11)

    def square(v):
        return v * v
    for drop in (False, True):
        for kwargs in ({}, {"num_parallel_batches": 2}, {"num_parallel_calls": 3}):
            got = data.apply(contrib.data.map_and_batch(square, 4, drop_remainder=drop, **kwargs))
            want = data.map(square).batch(4, drop_remainder=drop)
            assert [b.tolist() for b in got.as_numpy_iterator()] == \
                [b.tolist() for b in want.as_numpy_iterator()]
    assert [b.shape[0] for b in data.apply(contrib.data.map_and_batch(
        square, 4, drop_remainder=True)).as_numpy_iterator()] == [4, 4]


def test_parallel_interleave_keeps_interleaves_order():
    data = tf.data.Dataset.range(5)

    def repeat(v):
        return tf.data.Dataset.from_tensors(v).repeat(v + 1)
    got = data.apply(contrib.data.parallel_interleave(repeat, cycle_length=2, block_length=2))
    want = data.interleave(repeat, cycle_length=2, block_length=2)
    assert list(got.as_numpy_iterator()) == list(want.as_numpy_iterator())
    assert sorted(data.apply(contrib.data.parallel_interleave(
        repeat, cycle_length=3, sloppy=True)).as_numpy_iterator()) == sorted(
            want.as_numpy_iterator())
    # Names contrib.data had that tf.data.experimental holds now.
    assert contrib.data.shuffle_and_repeat is tf.data.experimental.shuffle_and_repeat


def test_xavier_and_variance_scaling_statistics():
    shape = [400, 600]
    n = (400 + 600) / 2.0
    values = {
        "xavier_uniform": contrib.layers.xavier_initializer(seed=1)(shape),
        "xavier_normal": contrib.layers.xavier_initializer(uniform=False, seed=2)(shape),
        "he_normal": contrib.layers.variance_scaling_initializer(seed=3)(shape),
    }
    uniform = values["xavier_uniform"].numpy()
    assert np.abs(uniform).max() <= np.sqrt(3.0 / n) and np.abs(uniform).max() > 0.99 * \
        np.sqrt(3.0 / n)
    assert abs(uniform.var() * n - 1.0) < 0.02
    normal = values["xavier_normal"].numpy()
    # stddev sqrt(1.3 / n), cut at two of them: a variance of 1.3 * 0.774 / n.
    assert np.abs(normal).max() <= 2 * np.sqrt(1.3 / n) + 1e-6
    assert abs(normal.var() * n / (1.3 * 0.7737) - 1.0) < 0.02
    assert abs(values["he_normal"].numpy().var() * 400 / (2 * 1.3 * 0.7737) - 1.0) < 0.02
    conv = contrib.layers.xavier_initializer(seed=4)([3, 3, 16, 32]).numpy()
    assert np.abs(conv).max() <= np.sqrt(6.0 / (9 * 16 + 9 * 32))
    with pytest.raises(TypeError, match="mode 'FAN_MAX' is not"):
        contrib.layers.variance_scaling_initializer(mode="FAN_MAX")


def test_fully_connected_and_regularizers():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)

    def build(_):
        out = contrib.layers.fully_connected(
            x, 2, weights_initializer=V1.ones_initializer(),
            weights_regularizer=contrib.layers.l2_regularizer(0.5))
        with V1.variable_scope("logits"):
            contrib.layers.fully_connected(x, 2, activation_fn=None, biases_initializer=None)
        return out, V1.losses.get_regularization_losses()
    (out, losses), names = _run(build)
    assert names == ["fully_connected/weights:0", "fully_connected/biases:0",
                     "logits/fully_connected/weights:0"]
    np.testing.assert_allclose(out, [[3, 3], [12, 12]])
    np.testing.assert_allclose(losses, [0.5 * 6 / 2])
    assert contrib.layers.l2_regularizer(0.0)(tf.ones([2])) is None
    assert float(contrib.layers.l1_regularizer(2.0)(tf.constant([-1.0, 3.0]))) == 8.0
    with pytest.raises(ValueError, match="l2_regularizer: scale -1 is negative"):
        contrib.layers.l2_regularizer(-1)


def test_f1_score_is_the_best_f1_over_thresholds():
    labels = np.array([1, 0, 1, 1, 0, 1, 0, 0], np.int64)
    scores = np.array([0.9, 0.8, 0.7, 0.3, 0.2, 0.6, 0.1, 0.4], np.float32)

    def build(_):
        return contrib.metrics.f1_score(labels, scores, num_thresholds=11)

    def fed(session, fetch):
        session.run(fetch[1])
        return session.run(fetch[0])
    got, _ = _run(build, fed)
    best = max(2 * tp / (2 * tp + fp + fn) for t in np.linspace(0, 1, 11)
               for tp, fp, fn in [(np.sum((scores > t) & (labels == 1)),
                                   np.sum((scores > t) & (labels == 0)),
                                   np.sum((scores <= t) & (labels == 1)))])
    assert abs(got - best) < 1e-5


def test_what_is_missing_is_one_line_naming_the_replacement():
    for path, symbol, replacement in (
            ((), "seq2seq", "tf.nn.raw_rnn"),
            (("data",), "no_such_thing", "tf.data.experimental"),
            (("layers",), "embed_sequence", "tf.layers"),
            (("metrics",), "streaming_accuracy", "tf.metrics"),
            ((), "predictor", "tf.saved_model.load"),
            ((), "lookup", "tf.lookup"),
            ((), "learn", "tf.estimator")):
        namespace = contrib
        for part in path:
            namespace = getattr(namespace, part)
        name = ".".join(("tf.contrib",) + path + (symbol,))
        with pytest.raises(AttributeError) as raised:
            getattr(namespace, symbol)
        assert isinstance(raised.value, contrib.RemovedSymbolError)
        message = str(raised.value)
        assert message.startswith(name + " is not in bert_tf2.tf1") and replacement in message
        assert "\n" not in message
        assert not hasattr(namespace, symbol)
    # tf.estimator and tf.contrib.tpu name what they lack the same way.
    from bert_tf2.compat import estimator, tpu  # pylint: disable=import-outside-toplevel
    for module, symbol, replacement in ((estimator, "Exporter", "export_saved_model.py"),
                                        (tpu, "TPUDistributionStrategy", "--use_tpu")):
        with pytest.raises(contrib.RemovedSymbolError) as raised:
            getattr(module, symbol)
        assert symbol in str(raised.value) and replacement in str(raised.value)
        assert "\n" not in str(raised.value) and not hasattr(module, symbol)
    assert contrib.cluster_resolver.TPUClusterResolver is \
        tf.distribute.cluster_resolver.TPUClusterResolver
    assert "layer_norm" in dir(contrib.layers)
