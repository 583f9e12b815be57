"""The inference forward's forms for a CPU with oneDNN (issue 45): the oneDNN LayerNorm
(fused_elementwise, on by default) and attention one batch row at a time
(attention.attend_by_example, an opt-in) give the outputs of the plain forward within 1e-5,
on a tiny and a MiniLM-shaped model, with the same variables and checkpoints; a SavedModel
is traced without them. And TensorFlow's oneDNN rewrite, which startup turns on for every
x86-64 CPU (issue 74: TensorFlow's own default leaves it off on AVX2-only ones), gives the
forward and the gradients of the rewrite off."""
import json
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import modeling
from bert_tf2 import startup
from bert_tf2.base import fused_elementwise
from bert_tf2.encoder import attention
from bert_tf2.trainer import checkpoints
from conftest import FP32_ATOL, HANG_GUARD_SECONDS, user_environ

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


# A child process: the rewrite is chosen once, when TensorFlow is imported. It builds the
# MiniLM-shaped model with the same random weights and inputs in every process, and saves
# its traced forward (every layer, pooled) and the gradients of a weighted sum of the last
# layer plus the pooled output (dropout off) to argv[1]; it prints the setting it ran with,
# and whether our oneDNN-only forms would be chosen once the variable says "1" (as it does in
# a process that imported TensorFlow before bert_tf2.startup set it).
_REWRITE_CHILD = """
import json, os, sys
from bert_tf2 import startup
import numpy as np
import tensorflow as tf
from tensorflow.python.framework import test_util
import modeling
from bert_tf2.base import fused_elementwise
setting = os.environ.get("TF_ENABLE_ONEDNN_OPTS")
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "1"
config = modeling.BertConfig(vocab_size=128, **json.loads(sys.argv[2]))
rng = np.random.RandomState(0)
ids = rng.randint(1, 128, size=[3, 136]).astype(np.int32)
mask = (np.arange(136)[None, :] < np.array([136, 96, 9])[:, None]).astype(np.int32)
inputs = [tf.constant(ids * mask), tf.constant(mask), tf.constant(mask * 0)]
model = modeling.BertModel(config)
model(*inputs, training=False)
model.set_weights([rng.normal(0.0, 0.1, w.shape).astype(np.float32)
                   for w in model.get_weights()])
weight = tf.constant(rng.normal(size=[3, 136, config.hidden_size]).astype(np.float32))

@tf.function
def forward_and_gradients():
    with tf.GradientTape() as tape:
        outputs = model(*inputs, training=False)
        loss = (tf.reduce_sum(outputs["sequence_output"] * weight)
                + tf.reduce_sum(outputs["pooled_output"]))
    gradients = tape.gradient(loss, model.trainable_variables)
    return (outputs["all_encoder_layers"] + [outputs["pooled_output"]],
            [tf.convert_to_tensor(g) for g in gradients])

forward, gradients = forward_and_gradients()
np.savez(sys.argv[1], *[x.numpy() for x in forward + gradients])
print(json.dumps({"setting": setting, "onednn": bool(test_util.IsMklEnabled()),
                  "forms": fused_elementwise.onednn_cpu_only(), "forward": len(forward)}))
"""


def _rewrite_child(tmp_path, name, setting):
    env = user_environ()
    env.pop("TF_ENABLE_ONEDNN_OPTS", None)
    if setting is not None:
        env["TF_ENABLE_ONEDNN_OPTS"] = setting
    out = tmp_path / (name + ".npz")
    result = subprocess.run(
        [sys.executable, "-c", _REWRITE_CHILD, str(out), json.dumps(CONFIGS["minilm"])],
        capture_output=True, text=True, env=env, timeout=HANG_GUARD_SECONDS, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    with np.load(out) as arrays:
        values = [arrays["arr_%d" % i] for i in range(len(arrays.files))]
    return report, values[:report["forward"]], values[report["forward"]:]


@pytest.mark.slow
def test_startups_onednn_rewrite_gives_the_forward_and_gradients_of_the_rewrite_off(tmp_path):
    assert startup.onednn_default("x86_64") == "1"
    assert startup.onednn_default("AMD64") == "1"
    assert startup.onednn_default("aarch64") is None
    default, forward, gradients = _rewrite_child(tmp_path, "default", None)
    off, want_forward, want_gradients = _rewrite_child(tmp_path, "off", "0")
    assert off == dict(default, setting="0", onednn=False, forms=False)
    # The CPU forms follow what TensorFlow runs, not what the variable says by now.
    assert default["forms"] == default["onednn"]
    # Where the user set nothing, the rewrite is on on every x86-64 CPU (TensorFlow's own
    # default elsewhere).
    assert default["setting"] == startup.onednn_default()
    assert default["onednn"] == (startup.onednn_default() == "1")
    for got, want in zip(forward, want_forward):
        np.testing.assert_allclose(got, want, atol=FP32_ATOL)
    # The gradients sum over 408 positions: each within 1e-4 of its own largest value (they
    # range from 1e-3 to 120; measured: 6e-5 at most), and the key biases', zero but for
    # rounding (a softmax ignores what is added to all of a row's scores), within 1e-6.
    assert len(gradients) == len(want_gradients) > 0
    for got, want in zip(gradients, want_gradients):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max() + 1e-6)


def _bilstm_step(features):
    """(initial LSTM weights, logits, LSTM gradients, whether the step's graph holds a
    cuDNN kernel) of a fresh feature-based tagger's traced training step."""
    from bert_tf2 import heads  # pylint: disable=import-outside-toplevel
    from bert_tf2.trainer import training  # pylint: disable=import-outside-toplevel
    training.set_seed(3)
    config = modeling.BertConfig(vocab_size=32, hidden_size=16, num_hidden_layers=2,
                                 num_attention_heads=2, intermediate_size=16,
                                 max_position_embeddings=16)
    model = heads.BertTagger(config, 3, feature_layers=[-1, -2], lstm_units=4)
    model(features)  # eager: built, tf_keras's eager LSTM on the CPU
    lstm = [v for v in model.trainable_variables if "bilstm_" in v.name]
    assert len(lstm) == 12  # 2 layers x 2 directions x (kernel, recurrent kernel, bias)
    initial = [v.numpy() for v in lstm]
    weights = tf.cast(features["input_mask"], tf.float32)[:, :, None]

    @tf.function(autograph=False)
    def step():
        with tf.GradientTape() as tape:
            logits = model(features, training=True)["logits"]
            loss = tf.reduce_sum(tf.square(logits) * weights)
        return logits, tape.gradient(loss, lstm)
    logits, grads = step()
    library = step.get_concrete_function().graph.as_graph_def().library
    cudnn = any(node.op.startswith("CudnnRNN") for f in library.function for node in f.node_def)
    return initial, logits.numpy(), [g.numpy() for g in grads], cudnn


@pytest.mark.slow
def test_a_bilstm_tagger_traces_the_generic_lstm_alone_on_a_host_without_a_gpu(monkeypatch):
    # tf_keras traces an LSTM's cuDNN and generic kernels into a graph for Grappler to pick
    # one; on a host without a GPU heads.host_lstm_kernels keeps the generic one alone,
    # the one a CPU runs anyway: the same initial weights, logits and gradients, bit for
    # bit. A SavedModel's trace (portable_graphs) keeps both, for a GPU that loads it.
    if tf.config.list_logical_devices("GPU"):
        pytest.skip("a GPU is visible: tf_keras's own choice stands there")
    mask = (np.arange(12)[None, :] < np.array([12, 7, 2])[:, None]).astype(np.int32)
    ids = np.random.RandomState(1).randint(1, 32, size=mask.shape) * mask
    features = {"input_ids": tf.constant(ids), "input_mask": tf.constant(mask),
                "segment_ids": tf.constant(mask * 0)}
    generic = _bilstm_step(features)
    assert not attention.tracing_portable_graphs()
    with attention.portable_graphs():
        with attention.portable_graphs():
            assert attention.tracing_portable_graphs()
        assert attention.tracing_portable_graphs()
    assert not attention.tracing_portable_graphs()
    # As a SavedModel's trace (both kernels), everything else traced as outside
    # portable_graphs (its encoder's CPU forms are not what is compared here).
    monkeypatch.setattr(attention, "tracing_portable_graphs", lambda: True)
    both = _bilstm_step(features)
    assert not generic[3] and both[3]
    np.testing.assert_array_equal(generic[1], both[1])
    for a, b in zip(generic[0] + generic[2], both[0] + both[2]):
        np.testing.assert_array_equal(a, b)
    assert np.abs(generic[2][0]).max() > 0  # the LSTM is trained
