"""bert_tf2/trainer/first_call.py: the dropout mask programs a run compiles before its steps."""
import pytest
import tensorflow as tf
import tf_keras

from bert import modeling
from bert_tf2 import heads
from bert_tf2.base import dropout_masks
from bert_tf2.trainer import first_call


def _classifier(max_positions=64, hidden=32, heads_count=2):
    config = modeling.BertConfig(vocab_size=30, hidden_size=hidden, num_hidden_layers=1,
                                 num_attention_heads=heads_count, intermediate_size=16,
                                 max_position_embeddings=max_positions)
    model = heads.BertClassifier(config, 2)
    model(heads.dummy_features())
    return model


def _spec(*shape):
    return {"input_ids": tf.TensorSpec(shape, tf.int32), "label_ids": tf.TensorSpec([8], tf.int32)}


def test_largest_dropout_is_the_attention_or_hidden_size_of_the_batches():
    model = _classifier()
    # Trimmed batches of 8: S up to max_position_embeddings 64; the attention's
    # 8 x 2 heads x 64 x 64 = 65,536 units beat the hidden states' 8 x 64 x 32 = 16,384.
    assert first_call.largest_dropout(model, _spec(8, None)) == 8 * 2 * 64 * 64
    # A static length: 8 x 2 x 16 x 16 = 4,096 against 8 x 16 x 32 = 4,096.
    assert first_call.largest_dropout(model, _spec(8, 16)) == 4096
    # Multiple choice's [B, C, S]: B x C rows; hidden states the larger at 48 > 2 x 16.
    wide = _classifier(hidden=48)
    assert first_call.largest_dropout(wide, _spec(4, 3, 16)) == 12 * 16 * 48
    # Unknown rows, no spec, no BertModel: the default bound.
    assert first_call.largest_dropout(model, _spec(None, 16)) == dropout_masks.LARGEST_CLASS
    assert first_call.largest_dropout(model, None) == dropout_masks.LARGEST_CLASS
    plain = tf_keras.Sequential([tf_keras.layers.Dropout(0.1)])
    assert first_call.largest_dropout(plain, _spec(8, 16)) == dropout_masks.LARGEST_CLASS
    # Never above the default: BERT-base's 32 x 12 x 512 x 512.
    big = _classifier(max_positions=512, hidden=24, heads_count=12)
    assert first_call.largest_dropout(big, _spec(32, None)) == dropout_masks.LARGEST_CLASS


def test_only_the_size_classes_up_to_the_bound_are_compiled(monkeypatch):
    drawn = []
    monkeypatch.setattr(dropout_masks, "_COMPILED_UP_TO", {})
    monkeypatch.setattr(dropout_masks, "_draw_in_a_graph", lambda size: drawn.append(int(size)))
    dropout_masks.compile_size_classes("/cpu:0", 65536)
    assert drawn == [1 << 16]
    dropout_masks.compile_size_classes("/cpu:0", 100000)  # its class 2^17: one more program
    assert drawn == [1 << 16, 1 << 16, 1 << 17]
    dropout_masks.compile_size_classes("/cpu:0", 1 << 17)  # already done: nothing
    assert drawn == [1 << 16, 1 << 16, 1 << 17]


def test_lean_rewrites_turn_off_only_the_lean_passes_for_the_calls_within():
    from tensorflow.core.protobuf import config_pb2  # pylint: disable=import-outside-toplevel
    from tensorflow.python.eager import context  # pylint: disable=import-outside-toplevel

    def rewrites():
        config = config_pb2.ConfigProto()
        config.ParseFromString(context.context().function_call_options.config_proto_serialized)
        return config.graph_options.rewrite_options

    before = rewrites().SerializeToString()
    step = tf.function(lambda x: tf.reduce_sum(tf.nn.relu(tf.matmul(x, x) + 1.0)))
    x = tf.reshape(tf.range(9, dtype=tf.float32) / 7.0, [3, 3])
    with first_call.lean_rewrites():
        inside = rewrites()
        lean = float(step(x))
    assert inside.layout_optimizer == inside.OFF and inside.shape_optimization == inside.OFF
    assert inside.loop_optimization == inside.OFF and inside.memory_optimization == inside.NO_MEM_OPT
    assert inside.pin_to_host_optimization == inside.OFF
    assert inside.implementation_selector == inside.OFF
    # The passes that may change numbers keep their defaults.
    assert inside.constant_folding == inside.DEFAULT and inside.remapping == inside.DEFAULT
    assert inside.arithmetic_optimization == inside.DEFAULT
    assert inside.dependency_optimization == inside.DEFAULT
    assert rewrites().SerializeToString() == before  # put back
    assert lean == float(tf.function(step.python_function)(x))
    with first_call.lean_rewrites(enabled=False):
        assert rewrites().SerializeToString() == before


@pytest.mark.slow  # trains / exports: make test, not the quick lane
def test_a_run_with_the_lean_passes_equals_one_with_every_pass(tmp_path, monkeypatch):
    # The same tiny classifier trained (dropout on, its masks from --seed) and then
    # predicting, once as on a CPU (the LEAN passes off) and once with every Grappler
    # pass (as on a GPU): the weights and the logits are equal bit for bit.
    import numpy as np  # pylint: disable=import-outside-toplevel
    from bert_tf2.trainer import training  # pylint: disable=import-outside-toplevel
    rng = np.random.RandomState(4)
    data = {"input_ids": rng.randint(0, 30, [16, 8]).astype(np.int32),
            "input_mask": np.ones([16, 8], np.int32), "segment_ids": np.zeros([16, 8], np.int32),
            "label_ids": rng.randint(0, 2, [16]).astype(np.int32)}

    def train_dataset(ctx=None):
        return tf.data.Dataset.from_tensor_slices(data).batch(4, drop_remainder=True).repeat()

    def loss_fn(model, feats, is_training):
        logits = model(feats, training=is_training)["logits"]
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=feats["label_ids"], logits=logits)), {}

    def run(name, every_pass):
        with monkeypatch.context() as patch:
            if every_pass:
                patch.setattr(first_call, "on_cpus", lambda strategy: False)
            tf_keras.utils.set_random_seed(5)
            config = modeling.BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=2,
                                         num_attention_heads=2, intermediate_size=32,
                                         max_position_embeddings=16)
            runner = training.Runner(
                tf.distribute.get_strategy(), lambda: heads.BertClassifier(config, 2),
                training.RunConfig(output_dir=str(tmp_path / name), learning_rate=1e-2,
                                   num_train_steps=6, num_warmup_steps=0, iterations_per_loop=3,
                                   deterministic_data=True, seed=3))
            start = [v.numpy() for v in runner.model.trainable_variables]
            runner.train(train_dataset, loss_fn)
            assert any(not np.array_equal(a, b.numpy()) for a, b in zip(
                start, runner.model.trainable_variables))  # it trained
            logits = np.concatenate([o["logits"] for o in runner.predict(
                lambda ctx=None: tf.data.Dataset.from_tensor_slices(data).batch(4),
                lambda m, f: {"logits": m(f)["logits"]})])
            return [v.numpy() for v in runner.model.variables], logits

    lean_weights, lean_logits = run("lean", every_pass=False)
    full_weights, full_logits = run("full", every_pass=True)
    for a, b in zip(lean_weights, full_weights):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(lean_logits, full_logits)
