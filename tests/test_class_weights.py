"""class_weights.py: --class_weights for run_classifier and run_ner, against hand computations."""
import numpy as np
import pytest
import tensorflow as tf
from sklearn.utils.class_weight import compute_class_weight

import run_classifier
import run_ner
from bert_tf2 import flags_common
from bert_tf2 import heads
from bert_tf2.tasks import classifier_task
from bert_tf2.tasks import long_text
from bert_tf2.trainer import class_weights
from test_training import features, tiny_config


def _log_softmax(logits):
    logits = np.asarray(logits, np.float64)
    return logits - np.log(np.exp(logits).sum(-1, keepdims=True))


def test_balanced_is_scikit_learns_formula():
    labels = ["neg", "pos", "mid"]
    train = ["neg"] * 9 + ["pos"] + ["mid"] * 2
    want = compute_class_weight("balanced", classes=np.array(labels), y=np.array(train))
    assert class_weights.balanced(labels, train) == pytest.approx(list(want), rel=1e-12)
    # By hand: 12 / (3 * 9), 12 / (3 * 1), 12 / (3 * 2).
    assert class_weights.balanced(labels, train) == pytest.approx([4 / 9, 4.0, 2.0])
    with pytest.raises(ValueError, match=r"--class_weights=balanced: label 'mid' never occurs"):
        class_weights.balanced(labels, ["neg", "pos"])


def test_from_settings_reads_a_list_and_needs_training():
    fv = flags_common.parse_flags(run_classifier.define_flags,
                                  ["--do_train", "--class_weights= 0.5, 2"])
    np.testing.assert_array_equal(class_weights.from_settings(fv.class_weights, fv.do_train, ["0", "1"], []),
                                  np.float32([0.5, 2]))
    fv = flags_common.parse_flags(run_classifier.define_flags, ["--do_train"])
    assert class_weights.from_settings(fv.class_weights, fv.do_train, ["0", "1"], ["0"]) is None  # off by default
    fv = flags_common.parse_flags(run_classifier.define_flags,
                                  ["--do_eval", "--class_weights=balanced"])
    assert class_weights.from_settings(fv.class_weights, fv.do_train, ["0", "1"], []) is None  # weighs training only


def _classifier_task(weights):
    fv = flags_common.parse_flags(run_classifier.define_flags, [])
    return classifier_task.ClassifierTask(
        run_classifier.get_processor("sst-2"), None, 6, long_text.from_settings(run_classifier.Settings.of(fv), 6), weights)


def test_classifier_loss_weighs_each_example_by_its_class():
    model = heads.BertClassifier(tiny_config(), 2)
    feats = features(8)
    logits = model(feats)["logits"].numpy()
    labels = feats["label_ids"]
    per_example = -_log_softmax(logits)[np.arange(8), labels]
    weights = np.float32([0.25, 3.0])
    loss, _ = _classifier_task(weights).loss_fn(model, feats, False)
    # The mean over the 8 examples of weight x cross-entropy (Keras' class_weight).
    assert float(loss) == pytest.approx(np.mean(weights[labels] * per_example), rel=1e-6)
    plain, _ = _classifier_task(None).loss_fn(model, feats, False)
    assert float(plain) == pytest.approx(per_example.mean(), rel=1e-6)
    # Off: the reference's loss as it was; weights of 1: bit for bit the same number.
    ones, _ = _classifier_task(np.float32([1, 1])).loss_fn(model, feats, False)
    reference, _, _ = run_classifier.compute_loss(tf.constant(logits), labels, 2)
    assert float(plain) == float(reference) == float(ones)


def test_ner_loss_weighs_labelled_pieces_by_their_tag():
    rng = np.random.RandomState(0)
    logits = rng.normal(size=(2, 5, 3)).astype(np.float32)
    labels = np.array([[0, 2, 1, 0, 0], [0, 1, 1, 2, 0]], np.int32)
    # Weight 0: [CLS], a word's later pieces, [SEP] and padding.
    mask = np.float32([[0, 1, 1, 0, 0], [0, 1, 0, 1, 0]])
    weights = np.float32([0.5, 2.0, 4.0])
    per_token = -np.take_along_axis(_log_softmax(logits), labels[..., None], -1)[..., 0]
    got = run_ner.token_loss(tf.constant(logits), tf.constant(labels), tf.constant(mask),
                             weights)
    # Still divided by the 4 labelled pieces (+ the loss's 1e-5), not by their weights.
    want = (weights[labels] * mask * per_token).sum() / (mask.sum() + 1e-5)
    assert float(got) == pytest.approx(want, rel=1e-6)
    plain = run_ner.token_loss(tf.constant(logits), tf.constant(labels), tf.constant(mask))
    assert float(plain) == pytest.approx((mask * per_token).sum() / (4 + 1e-5), rel=1e-6)
