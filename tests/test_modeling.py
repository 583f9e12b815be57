"""modeling.py: config, math, variable names, and the golden TF1 outputs."""
import contextlib
import json
import math

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

import modeling
from bert_tf2.encoder import transformer
from bert_tf2 import heads
from bert_tf2.trainer import checkpoints
from conftest import FP32_ATOL


def tiny_config(**overrides):
    values = dict(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=32, max_position_embeddings=32, type_vocab_size=2,
                  initializer_range=0.2)
    values.update(overrides)
    return modeling.BertConfig(**values)


def random_inputs(batch=3, seq=10, vocab=50, seed=0):
    rng = np.random.RandomState(seed)
    ids = rng.randint(0, vocab, size=[batch, seq]).astype(np.int32)
    mask = np.ones([batch, seq], np.int32)
    mask[1, 6:] = 0
    types = np.zeros([batch, seq], np.int32)
    types[:, 5:] = 1
    return ids, mask, types


# ---------------------------------------------------------------------------
# BertConfig
# ---------------------------------------------------------------------------

def test_config_defaults_are_the_references():
    c = modeling.BertConfig(vocab_size=30522)
    assert (c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.intermediate_size) == \
        (768, 12, 12, 3072)
    assert c.hidden_act == "gelu"
    assert (c.hidden_dropout_prob, c.attention_probs_dropout_prob) == (0.1, 0.1)
    assert (c.max_position_embeddings, c.type_vocab_size, c.initializer_range) == (512, 16, 0.02)


def test_config_json_round_trip_keeps_unknown_keys(tmp_path):
    data = tiny_config().to_dict()
    data.update(directionality="bidi", pooler_fc_size=16)
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(data))
    c = modeling.BertConfig.from_json_file(str(path))
    assert c.directionality == "bidi" and c.pooler_fc_size == 16
    assert json.loads(c.to_json_string()) == data
    assert c.to_json_string().endswith("\n")
    modeling.BertModel(c)  # unknown keys do not stop a model from being built


def test_config_errors_name_the_problem(tmp_path):
    with pytest.raises(ValueError, match="missing.json"):
        modeling.BertConfig.from_json_file(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="bad.json"):
        modeling.BertConfig.from_json_file(str(bad))
    with pytest.raises(ValueError, match="multiple of num_attention_heads"):
        modeling.BertModel(tiny_config(hidden_size=15))
    with pytest.raises(ValueError, match="unsupported activation"):
        modeling.BertModel(tiny_config(hidden_act="swishy"))


# ---------------------------------------------------------------------------
# Pieces of math
# ---------------------------------------------------------------------------

def test_gelu_is_the_tanh_form_and_gelu_exact_the_erf_form():
    x = np.linspace(-5, 5, 101).astype(np.float32)
    tanh_form = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    erf_form = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x])
    # TF's tanh / erf kernels vs numpy's and math's: float32's bound.
    np.testing.assert_allclose(modeling.gelu(tf.constant(x)), tanh_form, atol=FP32_ATOL)
    np.testing.assert_allclose(modeling.gelu_exact(tf.constant(x)), erf_form, atol=FP32_ATOL)
    assert np.max(np.abs(tanh_form - erf_form)) > 1e-4  # the two are not interchangeable
    assert modeling.get_activation("gelu") is modeling.gelu
    assert modeling.get_activation("linear") is None
    assert modeling.get_activation("") is None


def test_layer_norm_matches_numpy_with_epsilon_1e12():
    x = np.random.RandomState(1).randn(4, 8).astype(np.float32) * 3 + 1
    ln = modeling.LayerNorm()
    ln(x)
    ln.gamma.assign(np.linspace(0.5, 1.5, 8))
    ln.beta.assign(np.linspace(-1, 1, 8))
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    want = (x - mean) / np.sqrt(var + 1e-12) * np.linspace(0.5, 1.5, 8) + np.linspace(-1, 1, 8)
    np.testing.assert_allclose(ln(x), want, atol=1e-5)
    assert ln.epsilon == 1e-12


def test_attention_mask_is_additive_minus_10000():
    mask = modeling.create_attention_mask(np.array([[1, 1, 0]]))
    np.testing.assert_array_equal(np.asarray(mask).reshape(-1), [0.0, 0.0, -10000.0])


# ---------------------------------------------------------------------------
# BertModel
# ---------------------------------------------------------------------------

def test_output_shapes_and_defaults():
    model = modeling.BertModel(tiny_config())
    ids, _, _ = random_inputs()
    out = model(ids)
    assert out["sequence_output"].shape == (3, 10, 16)
    assert out["pooled_output"].shape == (3, 16)
    assert out["embedding_output"].shape == (3, 10, 16)
    assert len(out["all_encoder_layers"]) == 2
    np.testing.assert_array_equal(out["sequence_output"], out["all_encoder_layers"][-1])
    # Defaults: mask of ones and token types of zeros.
    explicit = model(ids, np.ones_like(ids), np.zeros_like(ids))
    # The same shapes and kernels: only the defaults' source differs.
    np.testing.assert_allclose(out["pooled_output"], explicit["pooled_output"], atol=1e-6)
    assert model.embedding_table.shape == (50, 16)


def test_dropout_only_when_training():
    model = modeling.BertModel(tiny_config(hidden_dropout_prob=0.5))
    ids, mask, types = random_inputs()
    a = model(ids, mask, types, training=False)["sequence_output"]
    b = model(ids, mask, types, training=False)["sequence_output"]
    c = model(ids, mask, types, training=True)["sequence_output"]
    np.testing.assert_array_equal(a, b)
    assert np.max(np.abs(np.asarray(a) - np.asarray(c))) > 1e-3


def _gradients(fn, variables):
    with tf.GradientTape() as tape:
        loss = fn()
    return loss, [tf.convert_to_tensor(g) for g in tape.gradient(loss, variables)]


@pytest.mark.parametrize("in_graph", [False, True])
def test_gradient_checkpointing_without_dropout_gives_the_same_gradients(in_graph):
    model = heads.BertClassifier(tiny_config(hidden_dropout_prob=0.0,
                                                attention_probs_dropout_prob=0.0), 3)
    model(heads.dummy_features())
    model.dropout.rate = 0.0
    ids, mask, types = random_inputs()
    feats = {"input_ids": ids, "input_mask": mask, "segment_ids": types}

    def step():
        return _gradients(lambda: tf.reduce_sum(model(feats, training=True)["logits"] ** 2),
                          model.trainable_variables)
    step = tf.function(step) if in_graph else step
    loss_plain, plain = step()
    assert modeling.set_gradient_checkpointing(model) == 1
    step = tf.function(step.python_function) if in_graph else step
    loss_ckpt, ckpt = step()
    # The recomputed forward runs the same shapes and kernels: rounding only.
    assert float(loss_plain) == pytest.approx(float(loss_ckpt), rel=1e-6)
    for a, b, v in zip(plain, ckpt, model.trainable_variables):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=1e-5, err_msg=v.name)
    modeling.set_gradient_checkpointing(model, False)
    assert not model.bert.encoder.gradient_checkpointing


def test_recomputed_layer_drops_the_same_units_in_its_backward_pass():
    """With dropout on, a recomputed layer's gradients equal those of the same seeded
    layer run once: the recomputation reproduced the forward pass's masks."""
    config = tiny_config(hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.3)
    encoder = modeling.Encoder(config)
    rng = np.random.RandomState(1)
    x = tf.constant(rng.randn(2, 7, 16).astype(np.float32))
    mask = modeling.create_attention_mask(tf.ones([2, 7], tf.int32))
    encoder(x, mask)
    layer = encoder.transformer_layers[0]
    seeds = tf.constant([[1, 2], [3, 4], [5, 6]], tf.int32)
    flat = tf.reshape(x, [14, 16])

    def once():
        return tf.reduce_sum(tf.sin(layer(flat, mask, 2, 7, training=True, seeds=seeds)))

    def recomputed():
        return tf.reduce_sum(tf.sin(transformer.recomputed(layer, flat, mask, 2, 7, seeds)))

    loss_a, grads_a = _gradients(once, layer.trainable_variables)
    loss_b, grads_b = _gradients(recomputed, layer.trainable_variables)
    assert float(loss_a) == pytest.approx(float(loss_b), rel=1e-6)
    for a, b in zip(grads_a, grads_b):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5)
    # The seeds matter (dropout is on): other seeds, other output.
    other = layer(flat, mask, 2, 7, training=True, seeds=seeds + 1)
    same = layer(flat, mask, 2, 7, training=True, seeds=seeds)
    assert np.max(np.abs(np.asarray(other) - np.asarray(same))) > 1e-3
    np.testing.assert_array_equal(
        same, layer(flat, mask, 2, 7, training=True, seeds=seeds))


def test_gradient_checkpointing_applies_dropout_when_training_only():
    model = modeling.BertModel(tiny_config(hidden_dropout_prob=0.5))
    ids, mask, types = random_inputs()
    plain = model(ids, mask, types, training=False)["sequence_output"]
    modeling.set_gradient_checkpointing(model)
    np.testing.assert_array_equal(plain, model(ids, mask, types, training=False)[
        "sequence_output"])
    trained = model(ids, mask, types, training=True)["sequence_output"]
    assert np.max(np.abs(np.asarray(plain) - np.asarray(trained))) > 1e-3


def test_masked_positions_do_not_change_real_tokens():
    model = modeling.BertModel(tiny_config())
    ids, mask, types = random_inputs()
    out1 = model(ids, mask, types)["sequence_output"]
    ids2 = ids.copy()
    ids2[1, 6:] = (ids2[1, 6:] + 7) % 50  # change only masked-out tokens of example 1
    out2 = model(ids2, mask, types)["sequence_output"]
    np.testing.assert_allclose(out1[1, :6], out2[1, :6], atol=1e-5)


def _ragged_inputs(batch=4, seq=12, seed=3):
    ids, _, types = random_inputs(batch, seq, seed=seed)
    lengths = np.array([12, 3, 7, 1])[:batch]
    mask = (np.arange(seq)[np.newaxis, :] < lengths[:, np.newaxis]).astype(np.int32)
    return ids * mask, mask, types * mask


@pytest.mark.parametrize("in_graph", [False, True], ids=["eager", "tf_function"])
def test_skip_padding_keeps_every_real_token_and_zeroes_the_padding(in_graph):
    model = modeling.BertModel(tiny_config())
    ids, mask, types = _ragged_inputs()
    call = tf.function(model) if in_graph else model
    full = call(ids, mask, types)
    assert modeling.set_skip_padding(model) == 1 and model.skip_padding
    call = tf.function(model.__call__) if in_graph else model
    skipped = call(ids, mask, types)
    real = mask.astype(bool)
    for a, b in zip(full["all_encoder_layers"], skipped["all_encoder_layers"]):
        np.testing.assert_allclose(b.numpy()[real], a.numpy()[real], atol=1e-5)
        assert not np.any(b.numpy()[~real])  # padding positions: zeros
    np.testing.assert_allclose(skipped["pooled_output"], full["pooled_output"], atol=1e-5)
    # The embeddings run before any padding is skipped: the same shapes and kernels.
    np.testing.assert_array_equal(skipped["embedding_output"], full["embedding_output"])
    # The call's own argument wins over the layer's setting.
    again = model(ids, mask, types, skip_padding=False)
    np.testing.assert_allclose(again["sequence_output"], full["sequence_output"], atol=1e-5)
    modeling.set_skip_padding(model, False)
    assert not model.skip_padding


@pytest.mark.parametrize("in_graph", [False, True], ids=["eager", "tf_function"])
def test_a_mostly_real_batch_runs_every_position_at_inference_only(in_graph):
    model = modeling.BertModel(tiny_config(hidden_dropout_prob=0.0,
                                           attention_probs_dropout_prob=0.0))
    ids, _, types = random_inputs(4, 12, seed=5)
    for lengths, dense in (([12, 12, 12, 11], True),    # 47 of 48 real
                           ([12, 12, 12, 6], True),     # 42 of 48: exactly 7/8
                           ([12, 12, 11, 6], False)):   # 41 of 48
        mask = (np.arange(12)[np.newaxis, :] < np.array(lengths)[:, np.newaxis])
        mask = mask.astype(np.int32)
        full = model(ids, mask, types, skip_padding=False)["sequence_output"].numpy()
        call = tf.function(model.__call__) if in_graph else model
        for training in (False, True):
            got = call(ids, mask, types, training=training, skip_padding=True)
            got = got["sequence_output"].numpy()
            real = mask.astype(bool)
            np.testing.assert_allclose(got[real], full[real], atol=1e-5)
            if dense and not training:
                # The padding positions carry the full computation's values.
                np.testing.assert_allclose(got[~real], full[~real], atol=1e-5)
            else:
                assert not np.any(got[~real]), (lengths, training)
    assert modeling.DENSE_REAL_FRACTION == 0.875


@pytest.mark.parametrize("recompute", [False, True], ids=["plain", "recompute"])
def test_skip_padding_gives_the_same_gradients(recompute):
    model = heads.BertClassifier(tiny_config(hidden_dropout_prob=0.0,
                                             attention_probs_dropout_prob=0.0), 3)
    model(heads.dummy_features())
    model.dropout.rate = 0.0
    modeling.set_gradient_checkpointing(model, recompute)
    ids, mask, types = _ragged_inputs()
    feats = {"input_ids": ids, "input_mask": mask, "segment_ids": types}

    @tf.function
    def step():
        return _gradients(lambda: tf.reduce_sum(model(feats, training=True)["logits"] ** 2),
                          model.trainable_variables)
    loss_full, full = step()
    assert heads.reads_padding(model) is False
    modeling.set_skip_padding(model)
    loss_skip, skipped = tf.function(step.python_function)()
    assert float(loss_skip) == pytest.approx(float(loss_full), rel=1e-5)
    for a, b, v in zip(full, skipped, model.trainable_variables):
        # Keys' biases get a gradient of 0 up to rounding (softmax ignores a constant).
        np.testing.assert_allclose(b, a, atol=1e-5 * max(1.0, np.abs(a).max()), err_msg=v.name)


@pytest.mark.parametrize("portable", [False, True])
def test_spread_tokens_is_scatter_nd_to_the_bit_values_and_gradients(portable):
    """The real tokens' rows put at their positions by one gather (attention.spread_tokens)
    give scatter_nd's values and, where a gradient can be asked for, its gradient."""
    from bert_tf2.encoder import attention  # pylint: disable=import-outside-toplevel
    rng = np.random.RandomState(4)
    mask = rng.rand(6 * 9) < 0.6
    tokens = tf.constant(np.flatnonzero(mask)[:, None], tf.int32)
    values = tf.constant(rng.randn(int(mask.sum()), 5), tf.float32)
    weights = tf.constant(rng.randn(6 * 9, 5), tf.float32)

    def both(spread):
        with tf.GradientTape() as tape:
            tape.watch(values)
            out = spread(values)
            total = tf.reduce_sum(out * weights)
        return out, tape.gradient(total, values)
    want = tf.function(lambda: both(lambda v: tf.scatter_nd(tokens, v, [6 * 9, 5])))()
    spread = tf.function(lambda: both(lambda v: attention.spread_tokens(v, tokens, 6 * 9)))
    with attention.portable_graphs() if portable else contextlib.nullcontext():
        graph = spread.get_concrete_function().graph
    assert any(op.type == "ScatterNd" and op.outputs[0].dtype == tf.float32
               for op in graph.get_operations()) == portable
    got = spread()
    np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())


def test_skip_padding_on_packed_rows():
    model = modeling.BertModel(tiny_config())
    ids = np.array([[5, 6, 7, 8, 9, 10, 0, 0], [11, 12, 13, 0, 0, 0, 0, 0]], np.int32)
    mask = (ids > 0).astype(np.int32)
    instance = np.array([[1, 1, 1, 2, 2, 2, 0, 0], [1, 1, 1, 0, 0, 0, 0, 0]], np.int32)
    positions = np.array([[0, 1, 2, 0, 1, 2, 0, 0], [0, 1, 2, 0, 0, 0, 0, 0]], np.int32)
    full = model(ids, mask, position_ids=positions, instance_ids=instance)
    skipped = model(ids, mask, position_ids=positions, instance_ids=instance,
                    skip_padding=True)
    real = mask.astype(bool)
    np.testing.assert_allclose(skipped["sequence_output"].numpy()[real],
                               full["sequence_output"].numpy()[real], atol=1e-5)
    assert heads.reads_padding(heads.BertSquad(tiny_config()))  # its logits rank padding


@pytest.mark.parametrize("batch, seq", [(7, 12), (3, 9), (1, 5)], ids=["b7", "b3", "b1"])
@pytest.mark.parametrize("count", [0, 1, 2, 4], ids=lambda c: "groups%d" % c)
def test_inference_on_real_tokens_in_length_groups_keeps_every_real_token(batch, seq, count):
    """attention.row_groups: each group of rows (sorted by length) attends over its rows'
    own tokens; the real tokens' values are the full computation's, whatever the rows'
    order, a mask with a hole, a row without any real token, or fewer rows than groups."""
    from bert_tf2.encoder import attention
    model = modeling.BertModel(tiny_config(hidden_dropout_prob=0.0,
                                           attention_probs_dropout_prob=0.0))
    rng = np.random.RandomState(batch * 10 + seq)
    ids = rng.randint(1, 50, size=[batch, seq]).astype(np.int32)
    lengths = rng.randint(1, seq // 2 + 1, size=batch)  # under 7/8 real: the skipping path
    mask = (np.arange(seq)[np.newaxis, :] < lengths[:, np.newaxis]).astype(np.int32)
    if batch > 2:
        mask[1, :] = 0                  # a row without real tokens
        mask[2, :4] = [1, 0, 1, 1]      # a hole: the keys are the real tokens, in order
    types = np.zeros_like(ids)
    full = model(ids, mask, types, skip_padding=False)["all_encoder_layers"]
    was = attention.set_row_groups(count)
    try:
        assert attention.row_group_count() == count
        got = tf.function(model.__call__)(ids, mask, types, training=False, skip_padding=True)
    finally:
        attention.set_row_groups(was)
    real = mask.astype(bool)
    for a, b in zip(full, got["all_encoder_layers"]):
        np.testing.assert_allclose(b.numpy()[real], a.numpy()[real], atol=1e-5)
        assert not np.any(b.numpy()[~real])


def test_length_groups_place_each_token_and_mask_past_each_rows_length():
    from bert_tf2.encoder import attention
    # Rows of 3, 0, 5 and 1 real tokens in a batch of 4 x 6: sorted 0, 1, 3, 5.
    lengths = [3, 0, 5, 1]
    tokens = [r * 6 + j for r, n in enumerate(lengths) for j in range(n)]
    groups = attention.row_groups(tf.constant(tokens, tf.int64), 4, 6, 2)
    gathers = [g.numpy().tolist() for g in groups.gathers]
    # Group 1: rows 1 (none; its first token would be index 3, the next row's) and 3
    # (token 8) at length 1; group 2: rows 0 (tokens 0-2) and 2 (tokens 3-7) at length 5.
    assert gathers == [[[3], [8]], [[0, 1, 2, 0, 0], [3, 4, 5, 6, 7]]]
    masks = [m.numpy()[:, 0, 0, :].tolist() for m in groups.masks]
    assert masks == [[[-10000.0], [0.0]], [[0.0, 0.0, 0.0, -10000.0, -10000.0], [0.0] * 5]]
    assert all(m.dtype == tf.float32 for m in groups.masks)
    # Contexts are concatenated group after group: [2 x 1] then [2 x 5] rows.
    assert groups.places.numpy().tolist() == [2, 3, 4, 7, 8, 9, 10, 11, 1]


def test_key_span_ends_at_the_batchs_last_real_key():
    from bert_tf2.encoder import attention

    def span(mask, seq=None):
        additive = attention.create_attention_mask(tf.constant(mask, tf.int32))
        return int(attention.key_span(additive, seq or len(mask[0])))
    assert span([[1, 1, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0]]) == 3
    assert span([[1, 0, 0, 0, 1, 0], [1, 0, 0, 0, 0, 0]]) == 5   # a hole: up to the last
    assert span([[1, 1, 1, 1, 1, 1], [1, 0, 0, 0, 0, 0]]) == 6
    # A row that keeps no key spreads its softmax over all of them: every key stays.
    assert span([[1, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]]) == 6
    assert span([[1, 0, 0, 0, 0, 0]]) == 1
    assert span(np.zeros([0, 6], np.int32), 6) in range(1, 7)  # an empty batch
    # Only -10000 counts as masked: a mask value of 2 (+10000) is a key that weighs.
    assert span([[1, 0, 2, 0, 0, 0]]) == 3


@pytest.mark.parametrize("in_graph", [False, True], ids=["eager", "tf_function"])
def test_key_trimming_gives_every_position_the_full_attentions_values(in_graph):
    """set_key_trimming: at inference the attention stops at the batch's last real key;
    every position, padding included, keeps the values of attending over every key."""
    from bert_tf2.encoder import attention
    model = modeling.BertModel(tiny_config(hidden_dropout_prob=0.0,
                                           attention_probs_dropout_prob=0.0))
    ids, _, types = random_inputs(4, 16, seed=7)
    cases = {"short": [5, 3, 7, 1], "hole": [5, 3, 7, 1], "no_key": [5, 0, 7, 2],
             "full": [16, 3, 7, 1]}
    full = {}
    for name, lengths in cases.items():
        mask = (np.arange(16)[np.newaxis, :] < np.array(lengths)[:, np.newaxis]).astype(np.int32)
        if name == "hole":
            mask[2, 1:3] = 0
        full[name] = (mask, model(ids, mask, types)["all_encoder_layers"])
    assert modeling.set_key_trimming(model) == 1 and model.trim_keys
    call = tf.function(model.__call__) if in_graph else model
    try:
        for name, (mask, expected) in full.items():
            got = call(ids, mask, types, training=False)["all_encoder_layers"]
            for a, b in zip(expected, got):
                np.testing.assert_allclose(b.numpy(), a.numpy(), atol=1e-6, err_msg=name)
    finally:
        modeling.set_key_trimming(model, False)
    assert not model.trim_keys


def _traced_op_names(model, training, **kwargs):
    ids, mask, types = random_inputs(2, 8)
    spec = tf.TensorSpec([None, None], tf.int32)
    fn = tf.function(lambda i, m, t: model(i, m, t, training=training, **kwargs),
                     input_signature=[spec] * 3)
    return [op.name for op in fn.get_concrete_function().graph.get_operations()]


def test_key_trimming_only_at_inference_and_never_in_portable_graphs():
    from bert_tf2.encoder import attention
    model = modeling.BertModel(tiny_config())
    model(*random_inputs())
    modeling.set_key_trimming(model)

    def trims(names):
        return any("key_span" in name for name in names)
    assert trims(_traced_op_names(model, False))
    assert not trims(_traced_op_names(model, True))
    with attention.portable_graphs():
        assert not trims(_traced_op_names(model, False))
    modeling.set_key_trimming(model, False)
    assert not trims(_traced_op_names(model, False))


def test_one_hot_embeddings_equal_gather():
    cfg = tiny_config()
    a = modeling.BertModel(cfg)
    b = modeling.BertModel(cfg, use_one_hot_embeddings=True)
    ids, mask, types = random_inputs()
    a(ids)
    b(ids)
    for va, vb in zip(a.variables, b.variables):
        vb.assign(va)
    np.testing.assert_allclose(a(ids, mask, types)["pooled_output"],
                               b(ids, mask, types)["pooled_output"], atol=1e-5)


def test_bad_inputs_raise_clear_errors():
    model = modeling.BertModel(tiny_config(max_position_embeddings=8))
    with pytest.raises(ValueError, match="max_position_embeddings"):
        model(np.zeros([1, 9], np.int32))
    with pytest.raises(tf.errors.InvalidArgumentError, match="vocab_size=50"):
        model(np.full([1, 4], 50, np.int32))
    with pytest.raises(tf.errors.InvalidArgumentError, match="type_vocab_size=2"):
        model(np.zeros([1, 4], np.int32), token_type_ids=np.full([1, 4], 2, np.int32))


def test_bad_ids_also_raise_inside_tf_function():
    model = modeling.BertModel(tiny_config())
    fn = tf.function(lambda ids: model(ids)["pooled_output"])
    fn(np.zeros([1, 4], np.int32))
    with pytest.raises(tf.errors.InvalidArgumentError, match="vocab_size"):
        fn(np.full([1, 4], 99, np.int32))


def expected_tf1_names(num_layers, heads=("pretraining",)):
    names = ["bert/embeddings/%s" % n for n in (
        "word_embeddings", "token_type_embeddings", "position_embeddings",
        "LayerNorm/gamma", "LayerNorm/beta")]
    for i in range(num_layers):
        p = "bert/encoder/layer_%d/" % i
        for d in ("attention/self/query", "attention/self/key", "attention/self/value",
                  "attention/output/dense", "intermediate/dense", "output/dense"):
            names += [p + d + "/kernel", p + d + "/bias"]
        names += [p + "attention/output/LayerNorm/gamma", p + "attention/output/LayerNorm/beta",
                  p + "output/LayerNorm/gamma", p + "output/LayerNorm/beta"]
    names += ["bert/pooler/dense/kernel", "bert/pooler/dense/bias"]
    if "pretraining" in heads:
        names += ["cls/predictions/transform/dense/kernel", "cls/predictions/transform/dense/bias",
                  "cls/predictions/transform/LayerNorm/gamma",
                  "cls/predictions/transform/LayerNorm/beta", "cls/predictions/output_bias",
                  "cls/seq_relationship/output_weights", "cls/seq_relationship/output_bias"]
    if "classifier" in heads:
        names += ["output_weights", "output_bias"]
    if "squad" in heads:
        names += ["cls/squad/output_weights", "cls/squad/output_bias"]
    return sorted(names)


@pytest.mark.parametrize("kind", ["pretraining", "classifier", "squad"])
def test_every_variable_has_its_tf1_name(kind):
    cfg = tiny_config()
    model = {"pretraining": lambda: heads.BertPretrainer(cfg),
             "classifier": lambda: heads.BertClassifier(cfg, 3),
             "squad": lambda: heads.BertSquad(cfg)}[kind]()
    model(heads.dummy_features())
    names = sorted(checkpoints.tf1_variable_map(model))
    assert names == expected_tf1_names(2, (kind,))
    assert len(names) == len(model.variables)


def test_fresh_tables_are_not_copies_of_each_other():
    model = modeling.BertModel(tiny_config(type_vocab_size=32))
    model(np.zeros([1, 2], np.int32))
    e = model.embeddings
    assert not np.allclose(e.token_type_embeddings.numpy(), e.position_embeddings.numpy())
    assert np.max(np.abs(e.word_embeddings.numpy())) <= 2 * 0.2 + 1e-6  # truncated at 2 std


def test_mixed_precision_bf16_close_to_fp32():
    cfg = tiny_config()
    ids, mask, types = random_inputs()
    fp32 = heads.BertPretrainer(cfg)
    feats = {"input_ids": ids, "input_mask": mask, "segment_ids": types,
             "masked_lm_positions": np.array([[1, 2]] * 3, np.int32)}
    want = fp32(feats)
    tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        bf16 = heads.BertPretrainer(cfg)
        bf16(feats)
        for a, b in zip(fp32.variables, bf16.variables):
            b.assign(a)
        got = bf16(feats)
        assert all(v.dtype == tf.float32 for v in bf16.variables)
    finally:
        tf_keras.mixed_precision.set_global_policy("float32")
    assert got["masked_lm_log_probs"].dtype == tf.float32
    np.testing.assert_allclose(got["masked_lm_log_probs"], want["masked_lm_log_probs"], atol=0.1)
    np.testing.assert_allclose(got["pooled_output"], want["pooled_output"], atol=0.05)


def test_losses_match_hand_computation():
    log_probs = np.log(np.array([[[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]]], np.float32))
    loss, per = heads.masked_lm_loss(log_probs, np.array([[0, 2]]), np.array([[1.0, 0.0]]))
    np.testing.assert_allclose(per, [[-np.log(0.7), -np.log(0.8)]], rtol=1e-5)
    np.testing.assert_allclose(loss, -np.log(0.7) / (1 + 1e-5), rtol=1e-5)
    nsp = np.log(np.array([[0.9, 0.1], [0.3, 0.7]], np.float32))
    loss, per = heads.next_sentence_loss(nsp, np.array([[0], [1]]))
    np.testing.assert_allclose(loss, -(np.log(0.9) + np.log(0.7)) / 2, rtol=1e-5)


# ---------------------------------------------------------------------------
# Golden outputs of the reference (../shared/golden/tf1_tiny)
# ---------------------------------------------------------------------------

def test_golden_tf1_tiny_outputs(shared_dir):
    g = shared_dir / "golden" / "tf1_tiny"
    cfg = modeling.BertConfig.from_json_file(str(g / "bert_config.json"))
    exp = dict(np.load(g / "expected_outputs.npz"))
    model = heads.BertPretrainer(cfg)
    model(heads.dummy_features())
    result = checkpoints.load_checkpoint(model, str(g / "bert_model.ckpt"))
    assert result.not_in_checkpoint == []
    feats = {k: exp[k] for k in ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")}
    out = model(feats, training=False)
    pairs = {"embedding_output": out["embedding_output"],
             "encoder_layer_0": out["all_encoder_layers"][0],
             "encoder_layer_1": out["all_encoder_layers"][1],
             "sequence_output": out["sequence_output"],
             "pooled_output": out["pooled_output"],
             "masked_lm_log_probs": out["masked_lm_log_probs"],
             "next_sentence_log_probs": out["next_sentence_log_probs"]}
    for name, got in pairs.items():
        np.testing.assert_allclose(got, exp[name], atol=1e-5, err_msg=name)
    mlm, mlm_per = heads.masked_lm_loss(out["masked_lm_log_probs"], exp["masked_lm_ids"],
                                           exp["masked_lm_weights"])
    nsp, nsp_per = heads.next_sentence_loss(out["next_sentence_log_probs"],
                                               exp["next_sentence_labels"])
    np.testing.assert_allclose(mlm, exp["masked_lm_loss"], atol=1e-5)
    np.testing.assert_allclose(mlm_per, exp["masked_lm_example_loss"], atol=1e-4)
    np.testing.assert_allclose(nsp, exp["next_sentence_loss"], atol=1e-5)
    np.testing.assert_allclose(nsp_per, exp["next_sentence_example_loss"], atol=1e-5)


def test_every_task_model_says_whether_it_reads_padding():
    # Each tf_keras.Model of bert_tf2/heads.py states READS_PADDING in its own body, so a
    # new one is never silently left off (before: a hand-kept list of classes).
    import inspect  # pylint: disable=import-outside-toplevel
    models = [cls for _, cls in inspect.getmembers(heads, inspect.isclass)
              if issubclass(cls, tf_keras.Model) and cls.__module__ == heads.__name__]
    assert models
    silent = [cls.__name__ for cls in models if "READS_PADDING" not in vars(cls)]
    assert not silent, silent
    skipping = {cls.__name__ for cls in models if not cls.READS_PADDING}
    # Today's models as before (a new one says its own).
    assert {"BertClassifier", "BertTagger", "BertMultipleChoice"} <= skipping
    assert not {"BertSquad", "BertPretrainer", "BertMaskedLM"} & skipping
    assert heads.reads_padding(modeling.BertModel(tiny_config()))  # the bare encoder
