"""The inference forward's oneDNN LayerNorm (fused_elementwise._layer_norm_onednn, issue 45)
gives the outputs of the op-by-op LayerNorm within 1e-5, on a tiny and a MiniLM-shaped
model, with the same variables and checkpoints."""
import numpy as np
import pytest
import tensorflow as tf

import modeling
from bert_tf2.base import fused_elementwise
from bert_tf2.trainer import checkpoints

CONFIGS = {
    "tiny": dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=64, hidden_act="gelu"),
    # all-MiniLM-L6-v2's widths (12 heads of 32, exact-erf gelu), two of its six layers.
    "minilm": dict(hidden_size=384, num_hidden_layers=2, num_attention_heads=12,
                   intermediate_size=1536, hidden_act="gelu_exact"),
}


def _inputs(batch=3, length=24, vocab=128):
    rng = np.random.RandomState(0)
    ids = rng.randint(1, vocab, size=[batch, length]).astype(np.int32)
    mask = (np.arange(length)[None, :] < np.array([length, 17, 9])[:, None]).astype(np.int32)
    return tf.constant(ids * mask), tf.constant(mask), tf.constant(mask * 0)


def _forward(model, onednn):
    """A traced forward (all layers) with the oneDNN LayerNorm on or off."""
    fused_elementwise.set_onednn_layer_norm(onednn)
    try:
        spec = tf.TensorSpec([None, None], tf.int32)
        forward = tf.function(lambda a, b, c: model(a, b, c, training=False)[
            "all_encoder_layers"] + [model(a, b, c, training=False)["pooled_output"]],
            input_signature=[spec] * 3)
        forward.get_concrete_function()
    finally:
        fused_elementwise.set_onednn_layer_norm(True)
    return forward


@pytest.mark.parametrize("size", sorted(CONFIGS))
def test_onednn_layer_norm_keeps_the_outputs_variables_and_checkpoints(size, tmp_path):
    config = modeling.BertConfig(vocab_size=128, **CONFIGS[size])
    inputs = _inputs()
    before = modeling.BertModel(config)
    want = [x.numpy() for x in _forward(before, onednn=False)(*inputs)]
    prefix = str(tmp_path / "model.ckpt")
    checkpoints.write_tf1_checkpoint(checkpoints.tf1_variable_map(before), prefix)

    after = modeling.BertModel(config)
    after(*inputs, training=False)
    checkpoints.load_checkpoint(after, prefix, log=False)
    assert list(checkpoints.tf1_variable_map(after)) == list(
        checkpoints.tf1_variable_map(before))
    got = [x.numpy() for x in _forward(after, onednn=True)(*inputs)]
    for a, b in zip(got, want):
        assert np.abs(a - b).max() <= 1e-5, np.abs(a - b).max()


def test_onednn_layer_norm_is_the_graph_the_rewrite_fuses_and_only_outside_training():
    x = tf.random.stateless_normal([6, 16], seed=[1, 2]) * 3.0 + 1.0
    gamma = tf.random.stateless_uniform([16], seed=[3, 4]) + 0.5
    beta = tf.random.stateless_uniform([16], seed=[5, 6])
    graph = tf.function(lambda x: fused_elementwise.layer_norm(
        x, gamma, beta, 1e-12, training=False)).get_concrete_function(x).graph
    ops = {op.type for op in graph.get_operations()}
    assert ("FusedBatchNormV3" in ops) == fused_elementwise.onednn_layer_norm_applies(False)
    assert not fused_elementwise.onednn_layer_norm_applies(True)
    assert not fused_elementwise.onednn_layer_norm_applies(None)
    for shape in ([6, 16], [2, 3, 16]):
        values = tf.reshape(x, shape)
        fused_elementwise.set_onednn_layer_norm(False)
        try:
            want = fused_elementwise.layer_norm(values, gamma, beta, 1e-12, training=False)
        finally:
            fused_elementwise.set_onednn_layer_norm(True)
        got = fused_elementwise.layer_norm(values, gamma, beta, 1e-12, training=False)
        assert got.shape == values.shape
        np.testing.assert_allclose(got, want, atol=2e-6)
