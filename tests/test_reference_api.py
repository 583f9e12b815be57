"""The reference's library API (modeling.py, optimization.py and the runners' graph
functions) as code written against google-research/bert uses it.

Graph-mode code runs in one subprocess (tests/reference_api_graph.py; TF1 behaviour
is process-wide) and its results are checked here against the golden outputs of
the reference itself, against the TF2 path on the same weights, and against a
numpy statement of the reference's optimizer.
"""
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import create_pretraining_data
import extract_features
import modeling
import optimization
import run_classifier
import run_pretraining
import run_squad
import tokenization
from bert_tf2 import heads
from bert_tf2 import input_pipeline
from bert_tf2.trainer import checkpoints
from conftest import FP32_ATOL
from conftest import HANG_GUARD_SECONDS

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRAPH_SCRIPT = os.path.join(REPO_ROOT, "tests", "reference_api_graph.py")


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    """The results of reference_api_graph.py (the checkpoint parts when ../shared exists)."""
    from conftest import SHARED_DIR  # pylint: disable=import-outside-toplevel
    golden = os.path.join(str(SHARED_DIR), "golden", "tf1_tiny") if SHARED_DIR else "-"
    if golden != "-" and not os.path.isdir(golden):
        golden = "-"
    out = str(tmp_path_factory.mktemp("graph") / "results.npz")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run([sys.executable, GRAPH_SCRIPT, REPO_ROOT, golden, out],
                          capture_output=True, text=True, env=env,
                          timeout=HANG_GUARD_SECONDS, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = dict(np.load(out, allow_pickle=True))
    results["golden_dir"] = golden
    return results


def _golden(graph):
    if graph["golden_dir"] == "-":
        pytest.skip("../shared/golden/tf1_tiny not found (set BERT_TF2_SHARED)")
    return graph["golden_dir"], np.load(os.path.join(graph["golden_dir"], "expected_outputs.npz"))


def _reference_variable_names(num_layers):
    names = ["bert/embeddings/%s" % n for n in (
        "word_embeddings", "token_type_embeddings", "position_embeddings",
        "LayerNorm/gamma", "LayerNorm/beta")]
    for i in range(num_layers):
        for part in ("attention/self/query", "attention/self/key", "attention/self/value",
                     "attention/output/dense", "intermediate/dense", "output/dense"):
            names += ["bert/encoder/layer_%d/%s/kernel" % (i, part),
                      "bert/encoder/layer_%d/%s/bias" % (i, part)]
        for part in ("attention/output/LayerNorm", "output/LayerNorm"):
            names += ["bert/encoder/layer_%d/%s/gamma" % (i, part),
                      "bert/encoder/layer_%d/%s/beta" % (i, part)]
    return sorted(names + ["bert/pooler/dense/kernel", "bert/pooler/dense/bias"])


@pytest.mark.slow
def test_graph_model_has_the_reference_variables_and_outputs(graph):
    names = sorted(n[:-2] for n in graph["variable_names"])
    assert names == _reference_variable_names(3)
    assert [list(s) for s in graph["shapes"]] == [[5, 7, 32], [5, 7, 32], [5, 32]]


@pytest.mark.slow
def test_every_op_of_the_graph_model_is_reachable(graph):
    # The reference's modeling_test check: no op hangs off the outputs' data path
    # except the asserts it excludes by name.
    assert list(graph["unreachable"]) == []


@pytest.mark.slow
def test_graph_outputs_equal_the_reference_golden(graph):
    _, golden = _golden(graph)
    assert len(graph["restored"]) == 46  # 39 encoder + 7 pretraining head variables
    for key in ("embedding_output", "encoder_layer_0", "sequence_output", "pooled_output",
                "next_sentence_log_probs", "next_sentence_example_loss"):
        np.testing.assert_allclose(graph["graph_" + key], golden[key], atol=1e-5, err_msg=key)
    np.testing.assert_allclose(graph["graph_masked_lm_log_probs"].reshape(4, 5, -1),
                               golden["masked_lm_log_probs"], atol=1e-5)
    np.testing.assert_allclose(graph["graph_masked_lm_example_loss"].reshape(4, 5),
                               golden["masked_lm_example_loss"], atol=1e-5)
    for key in ("masked_lm_loss", "next_sentence_loss"):
        np.testing.assert_allclose(graph["graph_" + key], golden[key], atol=1e-5)
    # The body of BertModel written with the module's functions gives the same.
    np.testing.assert_allclose(graph["graph_functions_sequence_output"],
                               golden["sequence_output"], atol=1e-5)


@pytest.mark.slow
def test_graph_outputs_equal_the_tf2_path(graph):
    golden_dir, golden = _golden(graph)
    ckpt = os.path.join(golden_dir, "bert_model.ckpt")
    config = modeling.BertConfig.from_json_file(os.path.join(golden_dir, "bert_config.json"))
    features = {"input_ids": golden["input_ids"], "input_mask": golden["input_mask"],
                "segment_ids": golden["segment_ids"]}
    # extract_features' encoder (what a user of our command line gets).
    extractor = extract_features.FeatureExtractor(config, ckpt, [0, 1], 24)
    rows = [extract_features.InputFeatures(i, [], golden["input_ids"][i],
                                           golden["input_mask"][i], golden["segment_ids"][i])
            for i in range(4)]
    layer_0, layer_1 = extractor(rows)
    # The reference's TF1 graph vs our eager model: other kernels, float32's bound.
    np.testing.assert_allclose(graph["graph_encoder_layer_0"], layer_0, atol=FP32_ATOL)
    np.testing.assert_allclose(graph["graph_sequence_output"], layer_1, atol=FP32_ATOL)
    restored = list(graph["heads_restored"])
    assert len(restored) == 2 * 39 + 4
    assert {"cls/squad/output_bias", "cls/squad/output_weights", "output_bias",
            "output_weights"} <= set(restored)
    squad = heads.BertSquad(config)
    squad(heads.dummy_features())
    checkpoints.load_checkpoint(squad, ckpt, log=False)
    out = squad(features)
    # Logits up to ~8 in size: float32 rounding of graph vs eager kernels is ~1e-6 of that.
    for key in ("start_logits", "end_logits"):
        scale = np.abs(out[key]).max()
        np.testing.assert_allclose(graph["graph_" + key], out[key], atol=1e-6 * scale)
    classifier = run_classifier.create_model(config, 2)
    classifier(heads.dummy_features())
    checkpoints.load_checkpoint(classifier, ckpt, log=False)
    logits = classifier(features)["logits"]
    np.testing.assert_allclose(graph["graph_classifier_logits"], logits, atol=FP32_ATOL,
                               rtol=1e-5)
    loss, _, probs = run_classifier.compute_loss(logits, golden["next_sentence_labels"], 2)
    np.testing.assert_allclose(graph["graph_classifier_probs"], probs, atol=FP32_ATOL)
    np.testing.assert_allclose(graph["graph_classifier_loss"], loss, atol=FP32_ATOL)


@pytest.mark.slow
def test_bert_as_service_graph_reads_the_output_attributes(graph):
    golden_dir, golden = _golden(graph)
    # The attributes are the getters' tensors.
    assert graph["service_same_tensors"].tolist() == [True] * 5
    config = modeling.BertConfig.from_json_file(os.path.join(golden_dir, "bert_config.json"))
    model = modeling.BertModel(config)
    model(golden["input_ids"][:1])
    checkpoints.load_checkpoint(model, os.path.join(golden_dir, "bert_model.ckpt"), log=False)
    out = model(golden["input_ids"], golden["input_mask"], golden["segment_ids"])
    layer = out["all_encoder_layers"][-2].numpy()
    # The TF1 graph vs eager: other kernels, float32's bound.
    np.testing.assert_allclose(graph["service_layer"], layer, atol=FP32_ATOL)
    np.testing.assert_allclose(graph["service_layer"], golden["encoder_layer_0"], atol=1e-5)
    np.testing.assert_allclose(graph["service_pooled"], out["pooled_output"], atol=FP32_ATOL)
    np.testing.assert_allclose(graph["service_pooled"], golden["pooled_output"], atol=1e-5)
    mask = golden["input_mask"][..., None].astype(np.float32)
    np.testing.assert_allclose(graph["service_mean"], (layer * mask).sum(1) / mask.sum(1),
                               atol=FP32_ATOL)
    # The TF2 layer has no graph outputs: no attribute (hasattr is False), no change.
    assert not hasattr(model, "pooled_output") and not hasattr(model, "all_encoder_layers")
    assert model.embedding_table is model.embeddings.word_embeddings


def _eager_features(texts, tokenizer):
    """extract_features' and run_classifier's features of `texts`, as the graph script's rows."""
    examples = [extract_features.InputExample(i, a, b) for i, (a, b) in enumerate(texts)]
    rows = [f.input_ids + f.input_mask + f.input_type_ids for f in
            extract_features.convert_examples_to_features(examples, 12, tokenizer)]
    examples = [run_classifier.InputExample("g-%d" % i, a, b, str(i % 2))
                for i, (a, b) in enumerate(texts)]
    features = run_classifier.convert_examples_to_features(examples, ["0", "1"], 12, tokenizer)
    return rows, [f.input_ids + f.input_mask + f.segment_ids + [f.label_id] for f in features]


@pytest.mark.slow
def test_graph_mode_features_equal_eager_ones(graph, caplog):
    texts = [tuple(pair) for pair in graph["feature_texts"]]
    vocab_file = str(graph["vocab_file"])
    # "The cat sat on the mat." in the script's vocabulary, by hand.
    assert graph["graph_extract_features"][1][:12].tolist() == [2, 5, 6, 7, 8, 5, 9, 24, 3,
                                                                0, 0, 0]
    tokenizer = tokenization.FullTokenizer(vocab_file)
    rows, classifier_rows = _eager_features(texts, tokenizer)
    assert "falls back" not in caplog.text  # eager: the batch path
    np.testing.assert_array_equal(graph["graph_extract_features"], rows)
    np.testing.assert_array_equal(graph["graph_classifier_features"][:-1], classifier_rows)
    np.testing.assert_array_equal(graph["graph_classifier_features"][-1], classifier_rows[0])
    # A graph being built in TF2 (the notebook's tf.Graph().as_default() blocks).
    with tf.Graph().as_default():
        assert _eager_features(texts, tokenizer) == (rows, classifier_rows)
    assert "falls back" in caplog.text
    # tf.function: the batch path runs eagerly (under tf.init_scope) while tracing.
    caplog.clear()
    traced = []
    tf.function(lambda: traced.append(_eager_features(texts, tokenization.FullTokenizer(
        vocab_file))) or tf.constant(0)).get_concrete_function()
    assert traced == [(rows, classifier_rows)] and "falls back" not in caplog.text


def _records(path, rows):
    """Writes `rows` (dicts of name -> list of ints or floats) as tf.train.Examples."""
    with input_pipeline.RecordWriter(path) as writer:
        for row in rows:
            writer.write({k: input_pipeline.float_feature(v) if isinstance(v[0], float)
                          else input_pipeline.int_feature(v) for k, v in row.items()})


def test_input_fn_builders_of_squad_pretraining_and_extract_features(tmp_path):
    squad = str(tmp_path / "squad.tf_record")
    _records(squad, [{"unique_ids": [1000 + i], "input_ids": [i, 1, 2, 3],
                      "input_mask": [1, 1, 1, 0], "segment_ids": [0, 0, 1, 0],
                      "start_positions": [i], "end_positions": [i + 1]} for i in range(3)])
    batches = list(run_squad.input_fn_builder(squad, 4, False, False)({"batch_size": 2}))
    assert [b["unique_ids"].numpy().tolist() for b in batches] == [[1000, 1001], [1002]]
    assert batches[0]["input_ids"].dtype == tf.int32 and "start_positions" not in batches[0]
    assert batches[1]["segment_ids"].numpy().tolist() == [[0, 0, 1, 0]]
    assert len(list(run_squad.input_fn_builder(squad, 4, False, True)({"batch_size": 2}))) == 1
    train = next(iter(run_squad.input_fn_builder(squad, 4, True, True)({"batch_size": 5})))
    assert sorted(train["end_positions"].numpy() - train["start_positions"].numpy()) == [1] * 5

    pretraining = str(tmp_path / "pretraining.tf_record")
    _records(pretraining, [{
        "input_ids": [i, 7, 8], "input_mask": [1, 1, 0], "segment_ids": [0, 1, 0],
        "masked_lm_positions": [1, 0], "masked_lm_ids": [7, 0],
        "masked_lm_weights": [1.0, 0.0], "next_sentence_labels": [i % 2]} for i in range(3)])
    eval_fn = run_pretraining.input_fn_builder([pretraining], 3, 2, False)
    firsts = [b["input_ids"].numpy()[:, 0].tolist()
              for b in eval_fn({"batch_size": 2}).take(3)]
    assert firsts == [[0, 1], [2, 0], [1, 2]]  # in order, repeated, full batches
    batch = next(iter(run_pretraining.input_fn_builder([pretraining], 3, 2, True)(
        {"batch_size": 4})))
    assert batch["masked_lm_weights"].dtype == tf.float32
    assert batch["next_sentence_labels"].shape == (4, 1)
    assert batch["next_sentence_labels"].dtype == tf.int32
    decoded = run_pretraining._decode_record(
        next(iter(tf.data.TFRecordDataset(pretraining))),
        name_to_features=input_pipeline.pretraining_features(3, 2))
    assert decoded["masked_lm_ids"].numpy().tolist() == [7, 0]

    features = [extract_features.InputFeatures(5 + i, [], [i, 2, 3], [1, 1, 0], [0, 1, 0])
                for i in range(3)]
    batches = list(extract_features.input_fn_builder(features, 3)({"batch_size": 2}))
    assert [b["unique_ids"].numpy().tolist() for b in batches] == [[5, 6], [7]]
    assert batches[1]["input_type_ids"].numpy().tolist() == [[0, 1, 0]]
    assert batches[0]["input_ids"].dtype == tf.int32


def _numpy_train_steps(steps=6):
    """The reference's create_optimizer on loss = |K - T|^2 + 3 * sum(gamma)."""
    kernel = np.array([[0.5, -0.3], [0.2, 0.1]])
    gamma = np.array([1.2, 0.8])
    target = np.array([[0.1, 0.2], [0.3, -0.4]])
    moments = {"k": [0.0, 0.0], "g": [0.0, 0.0]}
    for t in range(steps):
        lr = 0.1 * t / 2 if t < 2 else 0.1 * (1 - min(t, 5) / 5)
        grads = {"k": 2 * (kernel - target), "g": np.full(2, 3.0)}
        norm = np.sqrt(sum(np.sum(g * g) for g in grads.values()))
        grads = {k: g / max(norm, 1.0) for k, g in grads.items()}
        for key, param, decay in (("k", kernel, True), ("g", gamma, False)):
            m, v = moments[key]
            m = 0.9 * m + 0.1 * grads[key]
            v = 0.999 * v + 0.001 * grads[key] ** 2
            update = m / (np.sqrt(v) + 1e-6) + (0.01 * param if decay else 0.0)
            param -= lr * update
            moments[key] = [m, v]
    return kernel, gamma, moments["k"][0]


@pytest.mark.slow
def test_create_optimizer_train_op_takes_the_reference_steps(graph):
    assert list(graph["train_names"]) == [
        "global_step:0", "layer/LayerNorm/gamma/adam_m:0", "layer/LayerNorm/gamma/adam_v:0",
        "layer/LayerNorm/gamma:0", "layer/kernel/adam_m:0", "layer/kernel/adam_v:0",
        "layer/kernel:0"]
    assert int(graph["train_step"]) == 6
    kernel, gamma, kernel_m = _numpy_train_steps()
    # A TF1 graph's training steps vs numpy's float64 oracle: float32's bound.
    np.testing.assert_allclose(graph["train_kernel"], kernel, atol=FP32_ATOL)
    np.testing.assert_allclose(graph["train_gamma"], gamma, atol=FP32_ATOL)
    np.testing.assert_allclose(graph["train_kernel_m"], kernel_m, atol=FP32_ATOL)


def test_create_optimizer_keeps_the_tf2_form():
    opt = optimization.create_optimizer(1e-3, 10, 1)
    assert isinstance(opt, optimization.AdamWeightDecay)
    assert isinstance(optimization.create_optimizer(init_lr=1e-3, num_train_steps=10,
                                                    num_warmup_steps=0, optimizer_type="lamb"),
                      optimization.LAMB)


def test_bert_model_reference_constructor_eagerly_equals_the_layer_call():
    config = modeling.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                                 num_attention_heads=2, intermediate_size=24)
    ids = tf.constant([[3, 7, 9, 0], [4, 5, 0, 0]])
    mask = tf.constant([[1, 1, 1, 0], [1, 1, 0, 0]])
    model = modeling.BertModel(config, is_training=False, input_ids=ids, input_mask=mask)
    again = model(ids, mask, training=False)
    # Both eager calls of one model on the same inputs: the same shapes and kernels.
    np.testing.assert_allclose(model.get_pooled_output(), again["pooled_output"], atol=1e-6)
    np.testing.assert_allclose(model.get_sequence_output(), again["sequence_output"], atol=1e-6)
    assert len(model.get_all_encoder_layers()) == 2
    assert model.get_embedding_output().shape == (2, 4, 16)
    assert model.get_embedding_table().shape == (50, 16)
    # Eval model: dropout off in the config it keeps.
    assert model.config.hidden_dropout_prob == 0.0
    with pytest.raises(TypeError, match="is_training"):
        modeling.BertModel(config, input_ids=ids)
    with pytest.raises(ValueError, match="without input_ids"):
        modeling.BertModel(config).get_pooled_output()


def test_shape_helpers_and_masks():
    x = tf.zeros([2, 3, 4])
    assert modeling.get_shape_list(x, expected_rank=3) == [2, 3, 4]
    with pytest.raises(ValueError, match="rank 3, expected \\[2\\]"):
        modeling.assert_rank(x, 2, name="x")
    matrix = modeling.reshape_to_matrix(x)
    assert matrix.shape == (6, 4)
    assert modeling.reshape_from_matrix(matrix, [2, 3, 4]).shape == (2, 3, 4)
    mask = modeling.create_attention_mask_from_input_mask(
        tf.zeros([2, 3], tf.int32), tf.constant([[1, 1, 0, 0], [1, 0, 0, 0]]))
    np.testing.assert_array_equal(mask[1], [[1, 0, 0, 0]] * 3)
    assert modeling.dropout(x, None) is x
    assert modeling.get_activation("linear") is None
    assert modeling.get_activation(activation_string="gelu") is modeling.gelu
    assert modeling.get_activation(activation_string="ReLU") is tf.nn.relu


def test_attention_layer_eagerly_equals_hand_computation():
    rng = np.random.RandomState(3)
    from_tensor = rng.normal(size=(2, 3, 8)).astype(np.float32)
    to_tensor = rng.normal(size=(2, 5, 8)).astype(np.float32)
    to_mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    mask = modeling.create_attention_mask_from_input_mask(tf.constant(from_tensor), to_mask)
    created = {}

    def record(next_creator, **kwargs):
        var = next_creator(**kwargs)
        created[var.name.split(":")[0]] = var
        return var
    with tf.variable_creator_scope(record):
        out = modeling.attention_layer(tf.constant(from_tensor), tf.constant(to_tensor), mask,
                                       num_attention_heads=2, size_per_head=4,
                                       query_act=tf.tanh)
    w = {name.split("/")[-2] + "/" + name.split("/")[-1]: v.numpy()
         for name, v in created.items()}
    assert sorted(w) == ["key/bias", "key/kernel", "query/bias", "query/kernel",
                         "value/bias", "value/kernel"]

    def heads_of(x, part, act=lambda y: y):
        y = act(x @ w[part + "/kernel"] + w[part + "/bias"])
        return y.reshape(2, -1, 2, 4).transpose(0, 2, 1, 3)
    q, k, v = heads_of(from_tensor, "query", np.tanh), heads_of(to_tensor, "key"), \
        heads_of(to_tensor, "value")
    scores = q @ k.transpose(0, 1, 3, 2) / 2.0 + (1.0 - to_mask[:, None, None, :]) * -10000.0
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    expected = (probs @ v).transpose(0, 2, 1, 3).reshape(2, 3, 8)
    np.testing.assert_allclose(out, expected, atol=1e-5)
    flat = modeling.attention_layer(tf.constant(from_tensor.reshape(6, 8)),
                                    tf.constant(to_tensor.reshape(10, 8)), mask,
                                    num_attention_heads=2, size_per_head=4,
                                    do_return_2d_tensor=True, batch_size=2,
                                    from_seq_length=3, to_seq_length=5)
    assert flat.shape == (6, 8)


def test_the_reference_helper_names():
    assert optimization.AdamWeightDecayOptimizer(0.1)._get_variable_name(
        "bert/pooler/dense/kernel:0") == "bert/pooler/dense/kernel"
    tokens_a, tokens_b = ["a", "b", "c"], ["d", "e"]
    extract_features._truncate_seq_pair(tokens_a, tokens_b, 3)
    assert (tokens_a, tokens_b) == (["a", "b"], ["d"])


def test_create_pretraining_data_feature_helpers():
    feature = create_pretraining_data.create_int_feature([1, 2, 3])
    assert list(feature.int64_list.value) == [1, 2, 3]
    feature = create_pretraining_data.create_float_feature([0.5])
    assert list(feature.float_list.value) == [0.5]
