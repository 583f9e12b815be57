"""The inference forward's forms for a CPU with oneDNN (issue 45): the oneDNN LayerNorm
(fused_elementwise, on by default) and attention one batch row at a time
(attention.attend_by_example, an opt-in) give the outputs of the plain forward within 1e-5,
on a tiny and a MiniLM-shaped model, with the same variables and checkpoints; a SavedModel
is traced without them."""
import numpy as np
import pytest
import tensorflow as tf

import modeling
from bert_tf2.base import fused_elementwise
from bert_tf2.encoder import attention
from bert_tf2.trainer import checkpoints
from conftest import FP32_ATOL

CONFIGS = {
    "tiny": dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=64, hidden_act="gelu"),
    # all-MiniLM-L6-v2's widths (12 heads of 32, exact-erf gelu), two of its six layers.
    "minilm": dict(hidden_size=384, num_hidden_layers=2, num_attention_heads=12,
                   intermediate_size=1536, hidden_act="gelu_exact"),
}


def _inputs(batch=3, length=136, vocab=128):
    # Longer than attention.BY_EXAMPLE_MIN_LENGTH: the rows are attended one at a time.
    rng = np.random.RandomState(0)
    ids = rng.randint(1, vocab, size=[batch, length]).astype(np.int32)
    lengths = np.array([length, length - 40, 9])[:batch]
    mask = (np.arange(length)[None, :] < lengths[:, None]).astype(np.int32)
    return tf.constant(ids * mask), tf.constant(mask), tf.constant(mask * 0)


def _forward(model, cpu_forms):
    """A traced forward (all layers, pooled output) with the CPU forms on or off."""
    layer_norm_was = fused_elementwise.onednn_layer_norm_enabled()
    fused_elementwise.set_onednn_layer_norm(cpu_forms)
    by_row_was = attention.set_attention_by_example(cpu_forms)
    try:
        spec = tf.TensorSpec([None, None], tf.int32)

        def forward(a, b, c):
            outputs = model(a, b, c, training=False)
            return outputs["all_encoder_layers"] + [outputs["pooled_output"]]
        forward = tf.function(forward, input_signature=[spec] * 3)
        forward.get_concrete_function()
    finally:
        fused_elementwise.set_onednn_layer_norm(layer_norm_was)
        attention.set_attention_by_example(by_row_was)
    return forward


@pytest.mark.parametrize("size", sorted(CONFIGS))
def test_cpu_forms_keep_the_outputs_variables_and_checkpoints(size, tmp_path):
    config = modeling.BertConfig(vocab_size=128, **CONFIGS[size])
    inputs = _inputs()
    before = modeling.BertModel(config)
    want = [x.numpy() for x in _forward(before, cpu_forms=False)(*inputs)]
    prefix = str(tmp_path / "model.ckpt")
    checkpoints.write_tf1_checkpoint(checkpoints.tf1_variable_map(before), prefix)

    after = modeling.BertModel(config)
    after(*inputs, training=False)
    checkpoints.load_checkpoint(after, prefix, log=False)
    assert list(checkpoints.tf1_variable_map(after)) == list(
        checkpoints.tf1_variable_map(before))
    got = [x.numpy() for x in _forward(after, cpu_forms=True)(*inputs)]
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
        # oneDNN's LayerNorm vs the ops: other kernels, float32's bound.
        np.testing.assert_allclose(got, want, atol=FP32_ATOL)


def _has_loop(function, *args):
    graph = tf.function(function).get_concrete_function(*args).graph
    return bool({"While", "StatelessWhile"} & {op.type for op in graph.get_operations()})


def test_attention_by_example_equals_the_batch_and_saved_models_trace_without_it():
    rng = np.random.RandomState(3)
    q, k, v = (tf.constant(rng.randn(3, 4, 130, 8).astype(np.float32)) for _ in range(3))
    keep = (np.arange(130)[None, :] < np.array([130, 70, 5])[:, None]).astype(np.int32)
    ids = np.where(keep, 1 + (np.arange(130)[None, :] >= 40), 0)  # two packed instances
    mask = attention.create_attention_mask(tf.constant(keep))
    # Off by default: the whole batch at once.
    assert not _has_loop(attention.inference_attend, q, k, v, mask)
    was = attention.set_attention_by_example(True)
    try:
        assert was is False
        if fused_elementwise.onednn_cpu_only():
            assert _has_loop(attention.inference_attend, q, k, v, mask)
        for mask in (mask, attention.create_attention_mask(tf.constant(keep),
                                                           instance_ids=ids)):
            want = attention.attend(q, k, v, mask)
            # One example at a time (other shapes), unknown shapes, XLA: float32's bound.
            np.testing.assert_allclose(attention.attend_by_example(q, k, v, mask), want,
                                       atol=FP32_ATOL)
            spec = tf.TensorSpec([None, 4, None, 8])
            unknown = tf.function(attention.inference_attend,
                                  input_signature=[spec] * 3 + [tf.TensorSpec(None)])
            np.testing.assert_allclose(unknown(q, k, v, mask), want, atol=FP32_ATOL)
        # Under --enable_xla (static shapes) the row loop compiles too.
        compiled = tf.function(attention.inference_attend, jit_compile=True)
        np.testing.assert_allclose(compiled(q, k, v, mask), want, atol=FP32_ATOL)
        with attention.portable_graphs():
            assert not fused_elementwise.onednn_layer_norm_applies(False)
            assert not _has_loop(attention.inference_attend, q, k, v, mask)
        assert fused_elementwise.onednn_layer_norm_enabled()
    finally:
        attention.set_attention_by_example(was)
