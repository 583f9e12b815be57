"""Trimmed batches (--trim_padding): shapes, bucketed prediction in input order, and
training steps equal to the fully padded ones."""

import numpy as np
import pytest
import tensorflow as tf

import modeling
from bert_tf2 import heads
from bert_tf2 import input_pipeline
from bert_tf2.tasks import multiple_choice_task
from bert_tf2.trainer import training
from conftest import FP32_ATOL
from bert_tf2.tasks.glue_data import Sst2Processor, eval_metrics

MAX_LEN = 40
WIDTH = 16
VOCAB = 50


def tiny_config():
    return modeling.BertConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=2,
                               num_attention_heads=2, intermediate_size=32,
                               max_position_embeddings=64, type_vocab_size=2,
                               hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def lengths_of(n, seed=0, full_every=0):
    """Varied real lengths in [3, MAX_LEN]; every `full_every`-th example full length."""
    lengths = np.random.RandomState(seed).randint(3, MAX_LEN // 2, size=n)
    if full_every:
        lengths[::full_every] = MAX_LEN
    return lengths


def token_rows(length, rng, shape=()):
    ids = np.zeros(shape + (MAX_LEN,), np.int64)
    ids[..., :length] = rng.randint(1, VOCAB, size=shape + (length,))
    mask = (ids != 0).astype(np.int64)
    mask[..., :length] = 1
    segments = np.zeros_like(ids)
    segments[..., length // 2:length] = 1
    return ids, mask, segments


def write_classifier_records(path, lengths, seed=0):
    rng = np.random.RandomState(seed)
    with input_pipeline.RecordWriter(str(path)) as writer:
        for length in lengths:
            ids, mask, segments = token_rows(int(length), rng)
            writer.write({"input_ids": input_pipeline.int_feature(ids),
                          "input_mask": input_pipeline.int_feature(mask),
                          "segment_ids": input_pipeline.int_feature(segments),
                          "label_ids": input_pipeline.int_feature([rng.randint(2)]),
                          "is_real_example": input_pipeline.int_feature([1])})
    return str(path)


def write_tagger_records(path, lengths, seed=0):
    rng = np.random.RandomState(seed)
    with input_pipeline.RecordWriter(str(path)) as writer:
        for length in lengths:
            ids, mask, segments = token_rows(int(length), rng)
            labels = rng.randint(0, 3, size=MAX_LEN) * mask
            writer.write({"input_ids": input_pipeline.int_feature(ids),
                          "input_mask": input_pipeline.int_feature(mask),
                          "segment_ids": input_pipeline.int_feature(segments),
                          "label_ids": input_pipeline.int_feature(labels),
                          "label_weights": input_pipeline.float_feature(mask.astype(float))})
    return str(path)


def tagger_spec():
    seq = tf.io.FixedLenFeature([MAX_LEN], tf.int64)
    return {"input_ids": seq, "input_mask": seq, "segment_ids": seq, "label_ids": seq,
            "label_weights": tf.io.FixedLenFeature([MAX_LEN], tf.float32)}


CLASSIFIER_SPEC = input_pipeline.classifier_features(MAX_LEN)


def batches_of(dataset):
    return [{k: v.numpy() for k, v in b.items()} for b in dataset]


def runner_for(tmp_path, name, model_fn, init_from=None, for_training=False, **cfg):
    config = training.RunConfig(output_dir=str(tmp_path / name),
                                learning_rate=cfg.pop("learning_rate", 1e-2),
                                num_train_steps=cfg.pop("num_train_steps", 1),
                                num_warmup_steps=0, **cfg)
    runner = training.Runner(tf.distribute.get_strategy(), model_fn, config,
                             for_training=for_training)
    if init_from is not None:
        for a, b in zip(runner.model.variables, init_from.model.variables):
            a.assign(b)
    return runner


def classifier_fn():
    model = heads.BertClassifier(tiny_config(), 2)
    model.dropout.rate = 0.0
    return model


# ---------------------------------------------------------------------------
# Trimmed shapes
# ---------------------------------------------------------------------------

def test_bucket_length_and_feature_names():
    assert [input_pipeline.bucket_length(n, 40, 16) for n in (0, 1, 16, 17, 33, 40)] == \
        [16, 16, 16, 32, 40, 40]
    assert input_pipeline.bucket_length(5, 128) == 16  # the default width
    batches = input_pipeline.length_sorted_batches([3, 9, 9, 1, 12], 2)
    assert [list(b) for b in batches] == [[4, 1], [2, 0], [3]]
    assert input_pipeline.sequence_feature_names(CLASSIFIER_SPEC) == (
        "input_ids", "input_mask", "segment_ids")
    assert input_pipeline.sequence_feature_names(tagger_spec()) == (
        "input_ids", "input_mask", "segment_ids", "label_ids", "label_weights")
    # max_predictions_per_seq == max_seq_length: the masked-LM features are still kept.
    pretraining = input_pipeline.pretraining_features(20, 20)
    assert input_pipeline.sequence_feature_names(pretraining) == (
        "input_ids", "input_mask", "segment_ids")
    choices = {"input_ids": tf.io.FixedLenFeature([4, 20], tf.int64),
               "input_mask": tf.io.FixedLenFeature([4, 20], tf.int64),
               "label_ids": tf.io.FixedLenFeature([], tf.int64)}
    assert input_pipeline.sequence_feature_names(choices) == ("input_ids", "input_mask")
    with pytest.raises(ValueError, match="width"):
        input_pipeline.bucket_length(3, 40, 0)


def test_trimmed_batches_are_the_padded_ones_cut_to_bucket_lengths(tmp_path):
    lengths = lengths_of(23, full_every=9)   # examples 0, 9, 18 are full length
    path = write_tagger_records(tmp_path / "t.tf_record", lengths)
    padded = batches_of(input_pipeline.make_dataset(path, tagger_spec(), 4, False,
                                                    pad_final_batch=True))
    trimmed_ds = input_pipeline.make_dataset(path, tagger_spec(), 4, False,
                                             pad_final_batch=True, trim=True,
                                             bucket_width=WIDTH)
    assert trimmed_ds.element_spec["input_ids"].shape.as_list() == [4, None]
    assert trimmed_ds.element_spec["is_real_example"].shape.as_list() == [4]
    trimmed = batches_of(trimmed_ds)
    assert len(trimmed) == len(padded) == 6
    for k, (p, t) in enumerate(zip(padded, trimmed)):
        real = lengths[4 * k:4 * k + 4]
        want = min(MAX_LEN, -(-max(real) // WIDTH) * WIDTH)
        width = t["input_ids"].shape[1]
        assert width == want and (width % WIDTH == 0 or width == MAX_LEN)
        if MAX_LEN in real:
            assert width == MAX_LEN
        for name in ("input_ids", "input_mask", "segment_ids", "label_ids", "label_weights"):
            np.testing.assert_array_equal(t[name], p[name][:, :width])
            assert not p[name][:, width:].any()
        np.testing.assert_array_equal(t["is_real_example"], p["is_real_example"])
    assert sorted({b["input_ids"].shape[1] for b in trimmed}) == [16, 32, 40]


def test_positions_and_choices_keep_what_they_need():
    mask = np.zeros([2, 40], np.int32)
    mask[0, :5] = mask[1, :9] = 1
    batch = {"input_ids": mask * 7, "input_mask": mask, "segment_ids": mask * 0,
             "masked_lm_positions": np.array([[2, 0], [20, 0]], np.int32),
             "masked_lm_ids": np.ones([2, 2], np.int32)}
    names = ("input_ids", "input_mask", "segment_ids")
    out = input_pipeline.trim_batch(batch, names, width=8)
    # A position past the mask (20) keeps 21 positions: 24 with width 8.
    assert out["input_ids"].shape == (2, 24) and out["masked_lm_positions"].shape == (2, 2)
    del batch["masked_lm_positions"]
    assert input_pipeline.trim_batch(batch, names, width=8)["input_mask"].shape == (2, 16)
    choices = np.zeros([2, 3, 40], np.int32)
    choices[0, 1, :30] = choices[1, 2, :4] = 1
    out = input_pipeline.trim_batch({"input_mask": choices, "label_ids": np.zeros([2])},
                                    ("input_mask",), width=16)
    assert out["input_mask"].shape == (2, 3, 32)
    np.testing.assert_array_equal(
        input_pipeline.example_lengths({"input_mask": choices}), [30, 4])


def test_memory_batches_lengths_equal_the_pipelines():
    """The Predictor's numpy batches (memory_batches) sort and trim by the same lengths as
    the tf.data pipeline: masks that are not prefixes, [B, C, S] choices, position
    features past the mask, and an empty example."""
    from bert_tf2.trainer import memory_batches  # pylint: disable=import-outside-toplevel
    rng = np.random.RandomState(3)
    flat = (rng.rand(6, 40) < 0.3).astype(np.int32)
    flat[5] = 0
    choices = (rng.rand(4, 3, 24) < 0.2).astype(np.int32)
    positions = rng.randint(0, 40, size=(6, 5)).astype(np.int32)
    for batch in ({"input_mask": flat}, {"input_mask": choices},
                  {"input_mask": flat, "masked_lm_positions": positions,
                   "start_positions": positions[:, 0]}):
        np.testing.assert_array_equal(memory_batches.example_lengths(batch),
                                      input_pipeline.example_lengths(batch).numpy())


def test_training_batches_keep_the_reference_order(tmp_path):
    path = write_classifier_records(tmp_path / "c.tf_record", lengths_of(30, seed=1))
    make = lambda trim: input_pipeline.make_dataset(  # noqa: E731
        path, CLASSIFIER_SPEC, 4, True, seed=7, trim=trim, bucket_width=WIDTH).take(12)
    for p, t in zip(batches_of(make(False)), batches_of(make(True))):
        width = t["input_ids"].shape[1]
        assert width < MAX_LEN or p["input_mask"][:, -1].any()
        for name in ("input_ids", "input_mask", "segment_ids"):
            np.testing.assert_array_equal(t[name], p[name][:, :width])
        np.testing.assert_array_equal(t["label_ids"], p["label_ids"])


def test_buckets_group_by_length_and_number_the_examples(tmp_path):
    lengths = lengths_of(23, seed=2)
    path = write_classifier_records(tmp_path / "c.tf_record", lengths)
    with pytest.raises(ValueError, match="buckets"):
        input_pipeline.make_dataset(path, CLASSIFIER_SPEC, 4, False, buckets=True, trim=True)
    batches = batches_of(input_pipeline.make_dataset(
        path, CLASSIFIER_SPEC, 4, False, pad_final_batch=True, trim=True, buckets=True,
        bucket_width=8, bucket_window=2))
    assert [len(b["example_index"]) for b in batches] == [4] * 6
    index = np.concatenate([b["example_index"] for b in batches])
    assert sorted(index[index >= 0]) == list(range(23))
    assert list(index[index < 0]) == [-1]
    real = np.concatenate([b["is_real_example"] for b in batches])
    np.testing.assert_array_equal(real, index >= 0)
    # Windows of 2 batches (8 examples), each sorted longest first, stable.
    for w in range(3):
        window = index[8 * w:8 * w + 8]
        window = window[window >= 0]
        assert sorted(window) == list(range(8 * w, min(8 * w + 8, 23)))
        assert list(window) == sorted(window, key=lambda i: (-lengths[i], i))


# ---------------------------------------------------------------------------
# Prediction: bucketed == padded, in input order
# ---------------------------------------------------------------------------

# The probabilities, loss and labels of a softmax head's logits: the multiple-choice
# task's predict_fn serves a classifier's logits as well.
classifier_predict = multiple_choice_task.MultipleChoiceTask.predict_fn


def bucket_dataset_fn(path, spec, batch_size, trim, window):
    """dataset_fn of the records at `path` for prediction: fully padded, or trimmed and
    bucketed in windows of `window` batches."""
    def fn(ctx=None):
        return input_pipeline.make_dataset(path, spec, batch_size, False, ctx,
                                           pad_final_batch=True, trim=trim, buckets=trim,
                                           bucket_width=WIDTH, bucket_window=window)
    return fn


def predict_both(runner, path, spec, batch_size, predict_fn, window, **kwargs):
    padded = list(runner.predict(bucket_dataset_fn(path, spec, batch_size, False, window),
                                 predict_fn, **kwargs))
    bucketed = list(runner.predict(bucket_dataset_fn(path, spec, batch_size, True, window),
                                   predict_fn, **kwargs))
    return padded, bucketed


def counted_predict(traces):
    """classifier_predict that appends the input_ids shape of each of its traces to
    `traces` (Python runs only while tracing)."""
    def counted(model, features):
        traces.append(features["input_ids"].shape.as_list())
        return classifier_predict(model, features)
    return counted


def assert_same_batches(padded, bucketed, exact=("label_ids", "is_real_example")):
    assert [len(b["is_real_example"]) for b in bucketed] == \
        [len(b["is_real_example"]) for b in padded]
    for p, b in zip(padded, bucketed):
        assert sorted(p) == sorted(b)
        real = p["is_real_example"] > 0
        for name in p:
            assert p[name].shape == b[name].shape and p[name].dtype == b[name].dtype, name
            if name in exact:
                np.testing.assert_array_equal(b[name], p[name])
            else:
                np.testing.assert_allclose(b[name][real], p[name][real], atol=1e-5)


@pytest.fixture(scope="module")
def padded_predictions(tmp_path_factory):
    """The classifier records both windows' bucketed predictions are held to, and their
    fully padded prediction (it does not depend on the window): (records, the runner that
    made it, its batches, the shapes its step was traced with). Never changed by a test:
    each predicts with a runner of its own, of the same weights."""
    root = tmp_path_factory.mktemp("padded_predictions")
    path = write_classifier_records(root / "c.tf_record",
                                    lengths_of(23, seed=3, full_every=10))
    runner = runner_for(root, "run", classifier_fn)
    traces = []
    padded = list(runner.predict(bucket_dataset_fn(path, CLASSIFIER_SPEC, 4, False, 1),
                                 counted_predict(traces)))
    return path, runner, padded, traces


@pytest.mark.parametrize("window", [1, 64])
def test_bucketed_predict_equals_padded_in_input_order(tmp_path, padded_predictions, window):
    path, padded_runner, padded, padded_traces = padded_predictions
    runner = runner_for(tmp_path, "run", classifier_fn, init_from=padded_runner)
    traces = []
    counted = counted_predict(traces)
    bucketed = list(runner.predict(bucket_dataset_fn(path, CLASSIFIER_SPEC, 4, True, window),
                                   counted))
    assert len(padded) == 6 and list(padded[-1]["is_real_example"]) == [1, 1, 1, 0]
    assert_same_batches(padded, bucketed)
    # One trace per predict call: [None, 40] padded, [None, None] for every trimmed length
    # (16, 32 and 40 here; one replica without XLA leaves the batch axis open, so other
    # batch sizes share the step). Under XLA: test_predict_traces_once_for_every_length_under_xla.
    assert sorted({b["input_ids"].shape[1] for b in batches_of(input_pipeline.make_dataset(
        path, CLASSIFIER_SPEC, 4, False, trim=True, bucket_width=WIDTH))}) == [16, 32, 40]
    assert padded_traces + traces == [[None, MAX_LEN], [None, None]], (padded_traces, traces)

    def metrics(batches):
        cat = {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}
        ids = np.concatenate([np.full(len(b["label_ids"]), i) for i, b in enumerate(batches)])
        return eval_metrics(Sst2Processor(), cat["per_example_loss"], cat["label_ids"],
                            cat["probabilities"], cat["is_real_example"], ids)
    want, got = metrics(padded), metrics(bucketed)
    assert sorted(want) == sorted(got)
    for key in want:   # "loss" is the mean of batch means: the same batches give it
        assert abs(float(want[key]) - float(got[key])) < 1e-6, key
    limited = list(runner.predict(lambda ctx=None: input_pipeline.make_dataset(
        path, CLASSIFIER_SPEC, 4, False, ctx, pad_final_batch=True, trim=True, buckets=True,
        bucket_window=window), counted, max_steps=2))  # the bucketed call's step, kept
    assert_same_batches(padded[:2], limited)


@pytest.mark.parametrize("feature_layers", [None, [-1, -2]], ids=["fine_tuned", "bilstm"])
def test_bucketed_per_token_outputs_come_back_full_length(tmp_path, feature_layers):
    lengths = lengths_of(13, seed=4)
    path = write_tagger_records(tmp_path / "t.tf_record", lengths)
    runner = runner_for(tmp_path, "tag", lambda: heads.BertTagger(
        tiny_config(), 3, feature_layers=feature_layers, lstm_units=4))

    def tag_predict(model, features):
        logits = model(features, training=False)["logits"]
        return {"logits": logits, "weights": features["label_weights"],
                "is_real_example": features["is_real_example"]}

    full = {"logits": MAX_LEN, "weights": MAX_LEN}
    padded, bucketed = predict_both(runner, path, tagger_spec(), 4, tag_predict, 64,
                                    sequence_outputs=full)
    assert bucketed[0]["logits"].shape == (4, MAX_LEN, 3)
    for p, b in zip(padded, bucketed):
        np.testing.assert_array_equal(b["weights"], p["weights"])
        keep = p["weights"] > 0   # the real tokens (the padded path computes the rest too)
        np.testing.assert_allclose(b["logits"][keep], p["logits"][keep], atol=1e-5)
    # Bucketed per-token outputs without sequence_outputs: refused (the padded call
    # needs none, as every classifier call above shows).
    with pytest.raises(ValueError, match="sequence_outputs"):
        list(runner.predict(lambda ctx=None: input_pipeline.make_dataset(
            path, tagger_spec(), 4, False, ctx, pad_final_batch=True, trim=True,
            buckets=True, bucket_width=WIDTH, bucket_window=64), tag_predict))


def test_multiple_choice_features_trim_and_bucket(tmp_path):
    rng = np.random.RandomState(5)
    spec = {"input_ids": tf.io.FixedLenFeature([3, MAX_LEN], tf.int64),
            "input_mask": tf.io.FixedLenFeature([3, MAX_LEN], tf.int64),
            "segment_ids": tf.io.FixedLenFeature([3, MAX_LEN], tf.int64),
            "label_ids": tf.io.FixedLenFeature([], tf.int64)}
    path = str(tmp_path / "mc.tf_record")
    with input_pipeline.RecordWriter(path) as writer:
        for length in lengths_of(9, seed=5):
            ids, mask, segments = token_rows(int(length), rng, shape=(3,))
            writer.write({"input_ids": input_pipeline.int_feature(ids.ravel()),
                          "input_mask": input_pipeline.int_feature(mask.ravel()),
                          "segment_ids": input_pipeline.int_feature(segments.ravel()),
                          "label_ids": input_pipeline.int_feature([rng.randint(3)])})
    runner = runner_for(tmp_path, "mc", lambda: heads.BertMultipleChoice(tiny_config()))

    def mc_predict(model, features):
        return {"logits": model(features, training=False)["logits"],
                "label_ids": features["label_ids"],
                "is_real_example": features["is_real_example"]}

    padded, bucketed = predict_both(runner, path, spec, 2, mc_predict, 64)
    assert len(padded) == 5
    assert_same_batches(padded, bucketed)


def test_predict_traces_once_for_every_length_under_xla(tmp_path):
    # Without XLA: test_bucketed_predict_equals_padded_in_input_order.
    path = write_classifier_records(tmp_path / "c.tf_record", lengths_of(40, seed=6,
                                                                          full_every=13))
    runner = runner_for(tmp_path, "trace", classifier_fn, enable_xla=True)
    traces = []
    padded, bucketed = predict_both(runner, path, CLASSIFIER_SPEC, 4, counted_predict(traces),
                                    2)
    assert_same_batches(padded, bucketed)
    # One trace per predict call: [4, 40] padded, [4, None] for every trimmed length.
    assert traces == [[4, MAX_LEN], [4, None]], traces


# ---------------------------------------------------------------------------
# Training: a trimmed step is the padded step
# ---------------------------------------------------------------------------

def classifier_loss(model, features, is_training):
    logits = model(features, training=is_training)["logits"]   # no dropout in tiny_config
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=features["label_ids"], logits=logits)), {}


def test_eager_gradients_of_trimmed_batches(tmp_path):
    path = write_classifier_records(tmp_path / "c.tf_record", lengths_of(8, seed=7))
    batch = batches_of(input_pipeline.make_dataset(path, CLASSIFIER_SPEC, 8, False))[0]
    trimmed = {k: tf.constant(v) for k, v in input_pipeline.trim_batch(
        batch, input_pipeline.sequence_feature_names(CLASSIFIER_SPEC), WIDTH).items()}
    assert trimmed["input_ids"].shape[1] < MAX_LEN
    model = classifier_fn()
    model(heads.dummy_features())

    def gradients(features):
        with tf.GradientTape() as tape:
            loss, _ = classifier_loss(model, features, True)
        return loss, tape.gradient(loss, model.trainable_variables)

    loss_p, grads_p = gradients({k: tf.constant(v) for k, v in batch.items()})
    loss_t, grads_t = gradients(trimmed)
    # Trimmed vs padded: other shapes, so float32's bound.
    np.testing.assert_allclose(loss_t, loss_p, atol=FP32_ATOL)
    for gp, gt in zip(grads_p, grads_t):
        np.testing.assert_allclose(tf.convert_to_tensor(gt), tf.convert_to_tensor(gp),
                                   atol=FP32_ATOL)

    # Pretraining: masked-LM positions inside the real tokens, the loss needs no padding.
    pretrainer = heads.BertPretrainer(tiny_config())
    feats = dict(batch, masked_lm_positions=np.tile([[1, 2, 0]], [8, 1]).astype(np.int32))
    full = pretrainer(feats)["masked_lm_logits"]
    cut = pretrainer(dict(trimmed, masked_lm_positions=feats["masked_lm_positions"]))
    np.testing.assert_allclose(cut["masked_lm_logits"], full, atol=1e-5)


def train_counted(runner, path, batch_size, trim):
    """Trains `runner` on the records at `path`; the shapes its loss was traced with."""
    seen = []

    def loss_fn(model, features, is_training):
        seen.append(features["input_ids"].shape.as_list())
        return classifier_loss(model, features, is_training)

    runner.train(input_pipeline.dataset_fn_for([path], CLASSIFIER_SPEC, batch_size,
                                               is_training=True, seed=3,
                                               trim_padding=trim, bucket_width=WIDTH),
                 loss_fn)
    return seen


def train_both(tmp_path, lengths, batch_size=4, steps=3, **cfg):
    """(padded runner, trimmed runner, traces of each) after `steps` steps from equal weights."""
    path = write_classifier_records(tmp_path / "train.tf_record", lengths, seed=8)
    runners = []
    for trim in (False, True):
        runners.append(runner_for(tmp_path, "train%d" % trim, classifier_fn, for_training=True,
                                  init_from=runners[0] if runners else None,
                                  num_train_steps=steps, iterations_per_loop=1,
                                  trim_padding=trim, **cfg))
    traces = [train_counted(runner, path, batch_size, trim)
              for trim, runner in zip((False, True), runners)]
    return runners[0], runners[1], traces


# The learning rate of the trimmed-against-padded training steps. The reference's Adam
# (no bias correction) steps by m / (sqrt(v) + 1e-6), 3.16 lr * sign(gradient) at
# first, so a weight whose gradient is small turns the trimmed path's other summation
# order into a difference of its step, which scales with lr. Measured over processes (the
# initial weights differ between them): at 1e-2 the weights moved by ~0.075 in 3 steps and
# the two runs ended up to 3.3e-6 apart, 1.0-2.0e-5 (over the tolerance) in 3 of about 20
# processes; at 1e-3 they move by ~0.0075 and end up at most 1.2e-7 apart.
STEP_LEARNING_RATE = 1e-3


@pytest.fixture(scope="module")
def padded_steps(tmp_path_factory):
    """The fully padded plain training every fp32 trimmed one is held to: (its records,
    its initial weights, its runner after 3 steps on batches of 4, its traced shapes)."""
    root = tmp_path_factory.mktemp("padded_steps")
    path = write_classifier_records(root / "train.tf_record", lengths_of(24, seed=9), seed=8)
    runner = runner_for(root, "padded", classifier_fn, for_training=True, num_train_steps=3,
                        iterations_per_loop=1, trim_padding=False,
                        learning_rate=STEP_LEARNING_RATE)
    initial = [v.numpy() for v in runner.model.variables]
    return path, initial, runner, train_counted(runner, path, 4, False)


# Each trimmed training exercises what its cfg turns on, together, and is held to the one
# plain padded training (batches of 4): accumulation of 2 trimmed micro-batches of 2 with
# the recomputed (gradient checkpointing) encoder on trimmed shapes; XLA (padding not
# skipped, one program per length) with recompute. (Each of those equals the plain step
# when padded: test_training's test_xla_checkpointing_accumulation_and_autograph_off_*.)
@pytest.mark.parametrize("cfg", [
    {},
    {"gradient_checkpointing": True, "num_accumulation_steps": 2},
    {"gradient_checkpointing": True, "enable_xla": True},
], ids=["tf_function", "recompute_accumulation2", "recompute_xla"])
def test_trimmed_training_steps_equal_padded(tmp_path, padded_steps, cfg):
    path, initial, padded, padded_traces = padded_steps
    micro = cfg.get("num_accumulation_steps", 1)
    # The trimmed run is --trim_padding's: its encoder also skips the padding
    # (Runner.skip_padding) unless XLA is on.
    trimmed = runner_for(tmp_path, "trimmed", classifier_fn, for_training=True,
                         num_train_steps=3, iterations_per_loop=1, trim_padding=True,
                         learning_rate=STEP_LEARNING_RATE, **cfg)
    for variable, value in zip(trimmed.model.variables, initial):
        variable.assign(value)
    traces = train_counted(trimmed, path, 4 // micro, True)
    assert padded.global_step == trimmed.global_step == 3
    assert not padded.skip_padding
    assert trimmed.skip_padding == (not cfg.get("enable_xla"))
    moved = max(float(np.max(np.abs(v.numpy() - start)))
                for v, start in zip(padded.model.variables, initial))
    assert moved > 1e-3  # the steps moved the weights far beyond the tolerance below
    for a, b in zip(padded.model.trainable_variables, trimmed.model.trainable_variables):
        np.testing.assert_allclose(b.numpy(), a.numpy(), atol=1e-5, err_msg=a.name)
    # The loop is traced as often as the padded one (once per micro-batch of its step),
    # whatever lengths come: no retracing.
    assert len(traces) == micro * len(padded_traces) and all(s[1] is None for s in traces)


def first_moments(runner):
    opt = getattr(runner.optimizer, "inner_optimizer", runner.optimizer)
    return [opt.get_slot(v, "adam_m").numpy() for v in runner.model.trainable_variables]


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_trimmed_training_under_mixed_precision(tmp_path, dtype):
    training.configure_precision(dtype)
    try:
        padded, trimmed, traces = train_both(tmp_path, lengths_of(16, seed=10), steps=3,
                                             dtype=dtype, learning_rate=1e-6)
    finally:
        training.configure_precision("fp32")
    assert padded.global_step == trimmed.global_step == 3
    assert all(s[1] is None for s in traces[1])
    # The Adam moments sum the gradients of the 3 batches. The learning rate is tiny on
    # purpose: the reference's Adam (no bias correction) moves every weight by about
    # 3.16 * lr * sign(gradient) on its first step, so at 1e-2 a gradient that rounding
    # alone sets near zero flips sign between the two runs, and the runs part ways
    # (measured up to 19% of the norm after 3 steps on a CPU with bf16 units). At 1e-6
    # the weights stay put, and what is left is rounding of the low-precision
    # activations under another summation order: measured <= 0.15% (bf16) and <= 0.02%
    # (fp16, AVX512-FP16) over 8 random tiny models. Batches of other examples: 120%.
    # (The fp32 test above holds trimmed steps to 1e-5; this one checks that loss
    # scaling and bf16 casts keep working on trimmed shapes.)
    a = np.concatenate([m.ravel() for m in first_moments(padded)])
    b = np.concatenate([m.ravel() for m in first_moments(trimmed)])
    assert np.linalg.norm(a) > 0
    assert np.linalg.norm(b - a) < 2e-2 * np.linalg.norm(a)


def test_no_trimming_on_tpus(tmp_path):
    runner = runner_for(tmp_path, "cfg", classifier_fn, trim_padding=True)
    assert runner.trim_padding
    runner.strategy = object.__new__(tf.distribute.TPUStrategy)
    assert not runner.trim_padding


def test_padded_predictions_attend_up_to_each_batchs_last_real_key(tmp_path):
    """Runner.trims_keys (modeling.set_key_trimming): a padded batch's attention stops at
    its last real key; every position's output, padding included (BertSquad's logits
    rank padding positions), stays the model's over every key. Not under XLA or on
    TPUs (a data-dependent shape)."""
    def squad_fn():
        return heads.BertSquad(tiny_config())

    def logits(model, features):
        return {"start_logits": model(features, training=False)["start_logits"],
                "is_real_example": features["is_real_example"]}
    lengths = [5, 9, 3, 12, 4, 7, 6, 3]  # batches of 4: spans 12 and 7 of MAX_LEN
    path = write_classifier_records(tmp_path / "c.tf_record", lengths, seed=4)
    runner = runner_for(tmp_path, "run", squad_fn)
    bert = runner.model.bert
    assert runner.trims_keys and bert.trim_keys
    predicted = list(runner.predict(bucket_dataset_fn(path, CLASSIFIER_SPEC, 4, False, 1),
                                    logits))
    modeling.set_key_trimming(runner.model, False)
    expected = [logits(runner.model, batch)["start_logits"].numpy()
                for batch in bucket_dataset_fn(path, CLASSIFIER_SPEC, 4, False, 1)()]
    assert [b["start_logits"].shape for b in predicted] == [(4, MAX_LEN)] * 2
    for got, want in zip(predicted, expected):
        np.testing.assert_allclose(got["start_logits"], want, atol=1e-6)
    assert not runner_for(tmp_path, "xla", squad_fn, enable_xla=True).trims_keys
    runner.strategy = object.__new__(tf.distribute.TPUStrategy)
    assert not runner.trims_keys


# ---------------------------------------------------------------------------
# Prediction from small record files: numpy batches, the pipeline's answers
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("count", [23, 2], ids=["batches", "fewer_than_a_batch"])
@pytest.mark.parametrize("trim", [True, False], ids=["trimmed", "padded"])
def test_small_files_predict_from_memory_to_the_pipelines_bits(tmp_path, padded_predictions,
                                                               monkeypatch, trim, count):
    """A record file of dataset_fn_for (run_classifier's, run_squad's eval / predict file)
    small enough is read whole and batched in numpy (memory_batches.file_columns): no
    tf.data pipeline, the same batches, sizes and outputs to the bit as the pipeline's,
    a last partial batch padded to the batch size as the pipeline pads it."""
    from bert_tf2.trainer import memory_batches  # pylint: disable=import-outside-toplevel
    _, padded_runner, _, _ = padded_predictions
    path = write_classifier_records(tmp_path / "c.tf_record",
                                    lengths_of(count, seed=5, full_every=7))
    runner = runner_for(tmp_path, "run", classifier_fn, init_from=padded_runner,
                        trim_padding=trim)

    def predicted():
        return list(runner.predict(input_pipeline.dataset_fn_for(
            [path], CLASSIFIER_SPEC, 4, is_training=False, trim_padding=trim,
            bucket_width=WIDTH), classifier_predict))
    built = []
    real_make_dataset = input_pipeline.make_dataset
    monkeypatch.setattr(input_pipeline, "make_dataset",
                        lambda *a, **k: built.append(1) or real_make_dataset(*a, **k))
    from_memory = predicted()
    assert not built
    monkeypatch.setattr(memory_batches, "SMALL_FILES_BYTES", 0)
    from_pipeline = predicted()
    assert built
    assert [len(b["is_real_example"]) for b in from_memory] == [4] * (-(-count // 4))
    assert len(from_memory) == len(from_pipeline)
    for a, b in zip(from_memory, from_pipeline):
        assert sorted(a) == sorted(b)
        for name in a:
            assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape, name
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def test_file_columns_leave_what_they_cannot_read_to_the_pipeline(tmp_path):
    from bert_tf2.trainer import memory_batches  # pylint: disable=import-outside-toplevel
    path = write_classifier_records(tmp_path / "c.tf_record", lengths_of(5, seed=1))
    found = memory_batches.file_columns([path, path], CLASSIFIER_SPEC)
    want = batches_of(tf.data.TFRecordDataset([path, path]).map(
        lambda r: input_pipeline.decode_record(r, CLASSIFIER_SPEC)).batch(10))[0]
    assert sorted(found) == sorted(want)
    for name, value in want.items():
        assert found[name].dtype == value.dtype and value.dtype != np.int64
        np.testing.assert_array_equal(found[name], value)
    assert memory_batches.file_columns([path], CLASSIFIER_SPEC, max_bytes=10) is None
    assert memory_batches.file_columns([str(tmp_path / "absent")], CLASSIFIER_SPEC) is None
    ragged = dict(CLASSIFIER_SPEC, input_ids=tf.io.VarLenFeature(tf.int64))
    assert memory_batches.file_columns([path], ragged) is None
    empty = write_classifier_records(tmp_path / "empty.tf_record", [])
    assert memory_batches.file_columns([empty], CLASSIFIER_SPEC) is None
