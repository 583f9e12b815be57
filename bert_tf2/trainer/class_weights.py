"""--class_weights: a weight per class in the training loss (class imbalance).

`balanced` weighs class c by n_samples / (n_classes * count_c) over the training
labels, scikit-learn's compute_class_weight("balanced"); a comma list gives the
weights in label order. The weighted loss is the mean over the same examples (or
labelled tokens) as the plain one, each example's loss times its class's weight, as
Keras' class_weight does: with balanced weights the weights of a training set sum to
its size, so the loss keeps its scale. Only the training loss is weighted;
eval_results.txt's losses and metrics stay unweighted. Without the flag the losses
are computed exactly as before (no multiplication at all).

Contracts with the other modules (bert_tf2/trainer/class_weights.py):
define_flags(fv) (--class_weights: run_classifier, run_ner), balanced(labels, train_labels),
parse(value, labels), from_settings(value, do_train, labels, train_labels, unsupported=None)
-> float32 [num_labels] or None (off; also without --do_train, with a warning), logged;
of_labels(weights, label_ids) (gather), weighted_mean(per_example_loss, label_ids, weights).
The weighted training loss keeps the unweighted denominator (examples; run_ner: labelled
pieces, so padding and a word's later pieces, weight 0, stay out); eval losses and metrics
stay unweighted; off = the old expression, untouched.
"""
import collections
import math

from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf

BALANCED = "balanced"


def define_flags(fv):
    """--class_weights (run_classifier single-label tasks, run_ner)."""
    flags.DEFINE_string(
        "class_weights", None,
        "Weigh each class's examples in the training loss: 'balanced' (n_samples / "
        "(n_classes * count) over the training labels, as scikit-learn's "
        "compute_class_weight) or one positive number per label, comma-separated, in "
        "label order. Evaluation metrics and losses stay unweighted. Default: no "
        "weights (the reference's loss).", flag_values=fv)


def balanced(labels, train_labels):
    """n_samples / (n_classes * count) per label of `labels`, as float64 numbers.

    Raises ValueError for a label that never occurs in `train_labels` (its weight
    would be infinite; scikit-learn refuses it too).
    """
    counts = collections.Counter(train_labels)
    n_samples = sum(counts[label] for label in labels)
    missing = [label for label in labels if not counts[label]]
    if missing:
        raise ValueError("--class_weights=balanced: label %r never occurs in the training "
                         "data, so it has no balanced weight; give the weights as a list"
                         % missing[0])
    return [n_samples / (len(labels) * counts[label]) for label in labels]


def parse(value, labels):
    """The comma list of --class_weights as floats, one positive number per label."""
    parts = [p.strip() for p in value.split(",")]
    if len(parts) != len(labels):
        raise ValueError("--class_weights=%s has %d weights for %d labels (%s)"
                         % (value, len(parts), len(labels), ", ".join(labels)))
    weights = []
    for part, label in zip(parts, labels):
        try:
            weight = float(part)
        except ValueError:
            raise ValueError("--class_weights=%s: %r (label %s) is not a number"
                             % (value, part, label)) from None
        if not (math.isfinite(weight) and weight > 0):
            raise ValueError("--class_weights=%s: %r (label %s) must be a positive number"
                             % (value, part, label))
        weights.append(weight)
    return weights


def from_settings(value, do_train, labels, train_labels, unsupported=None):
    """The float32 weights [num_labels] of --class_weights, or None without the flag.

    Args:
      value: the --class_weights setting (None: the reference's loss).
      do_train: whether the run trains (the weights weigh the training loss only).
      labels: the label list (weights are in its order).
      train_labels: the label of each training example (or token), for balanced.
      unsupported: why this run's task cannot take class weights (regression,
        multi-label), or None.
    """
    if value is None:
        return None
    value = value.strip()
    if unsupported:
        raise ValueError("--class_weights is not supported for %s (only single-label "
                         "classification and tagging)" % unsupported)
    if not do_train:
        logging.warning("--class_weights weighs the training loss only: without "
                        "--do_train it has no effect")
        return None
    weights = balanced(labels, train_labels) if value == BALANCED else parse(value, labels)
    logging.info("Class weights (--class_weights=%s): %s", value,
                 ", ".join("%s %.4g" % pair for pair in zip(labels, weights)))
    return np.asarray(weights, np.float32)


def of_labels(weights, label_ids):
    """The weight of each label id (any shape) as a float32 tensor of that shape."""
    return tf.gather(tf.constant(weights, tf.float32), label_ids)


def weighted_mean(per_example_loss, label_ids, weights):
    """The mean over examples of each example's loss times its class's weight."""
    per_example_loss = tf.cast(per_example_loss, tf.float32)
    return tf.reduce_mean(per_example_loss * of_labels(weights, label_ids))
