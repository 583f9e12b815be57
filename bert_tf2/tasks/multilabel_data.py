"""Multi-label classification (--task_name=multilabel): data, records, loss, metrics, serving.

Each example carries a set of labels, possibly empty. The files in --data_dir:
- train.tsv, dev.tsv: `text<TAB>label1,label2` per line, no header; an empty second
  column (the tab still there) means no label; spaces around a label are dropped;
- test.tsv: `text` per line (a second column, if there, is ignored).
A line without text is an error naming file and line, as is a dev (or, with
--labels_file, a train) label outside the label list.

The label list (the model's output order) is --labels_file (one per line), else every
label of train.tsv sorted. A training run saves it as output_dir/label_list.txt; runs
that do not train read it from there, else from beside --init_checkpoint, and so does
export_saved_model (classifier_tasks.py). The same sets of labels in CSV / TSV with a
header / JSON lines: --task_name=csv|tsv|jsonl --task_type=multilabel (file_data.py).

The model is run_classifier's (heads.BertClassifier, one logit per label); each label is
a separate yes/no: probability = sigmoid(logit), loss = binary cross-entropy averaged
over the labels, then over the batch; a label is predicted when its probability is at
least --threshold. The records store the label set as a multi-hot vector shaped
[1, num_labels]: never [max_seq_length], so trimmed batches never cut it as a
per-token feature.

Contracts with the other modules (bert_tf2/tasks/multilabel_data.py (run_classifier
--task_name=multilabel)):
`processor.is_multilabel` (a DataProcessor attribute, False elsewhere) makes run_classifier
use classifier_task.MultiLabelTask (records, loss and metrics of this module) in place of
its ClassifierTask, so _evaluate / _predict run unchanged (test_results.tsv: one sigmoid
probability per label, tab-separated; test_predictions.jsonl:
prediction_files.multilabel_record). The processor (MultiLabelProcessor for the headerless
TSV files, file_data.FileProcessor for --task_type=multilabel) carries `threshold`.
- An example's label is a sorted tuple of names (maybe empty); records hold it as a
  multi-hot `label_ids` [1, L] (`record_spec(S, L)`): never shaped like input_mask, so
  trim_batch never cuts it.
- `compute_loss(logits, label_ids) -> (loss, per-example BCE averaged over labels,
  probabilities)`; `label_set_metrics(true, predicted, labels)`: eval_micro_/eval_macro_
  precision/recall/f1, eval_subset_accuracy, eval_f1_label_<name>; every 0/0 = 0 (sklearn's
  zero_division=0); eval_loss / loss from `glue_data.loss_metrics`.
- The label list: --labels_file, else train's labels sorted; saved and read back as every
  classifier's (classifier_tasks); labels hold no "," (`read_labels`).
- Serving: `ServingModule(..., threshold=t)` (set only for multilabel) returns
  `serving_outputs(logits, labels, t)`: probabilities, logits, labels, predicted [B, L]
  bool, predicted_labels [B] (names joined by ",").
"""
import os

from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf

from bert import tokenization  # ours, whatever tokenization.py a user's folder holds
from bert_tf2 import fileutil
from bert_tf2 import input_pipeline
from bert_tf2 import logs
from bert_tf2.tasks import glue_data
from bert_tf2.text import fast_batch

TASK_NAME = "multilabel"
LABEL_SEPARATOR = ","
_TOKENIZE_CHUNK = 2048


# ---------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------

def define_flags(fv):
    """--threshold (multi-label tasks; --labels_file is classifier_tasks')."""
    flags.DEFINE_float(
        "threshold", 0.5,
        "Multi-label tasks: a label is predicted when its probability is at least this "
        "(between 0 and 1, exclusive).", flag_values=fv)


def is_multilabel(task_name):
    """True for --task_name=multilabel (case-insensitive)."""
    return bool(task_name) and task_name.lower() == TASK_NAME


def check_threshold(threshold):
    """--threshold must lie strictly between 0 and 1."""
    if not 0.0 < threshold < 1.0:  # also refuses nan
        raise ValueError("--threshold=%s must be between 0 and 1 (exclusive)" % threshold)


# ---------------------------------------------------------------------------
# The label list
# ---------------------------------------------------------------------------

def read_labels(path):
    """The label list of a --labels_file or label_list.txt (fileutil.read_label_list);
    a label may not hold the "," that separates labels in the data files."""
    return fileutil.read_label_list(path, forbidden=LABEL_SEPARATOR)


def parse_label_cell(cell):
    """The label set of a train/dev cell: comma-separated, blanks dropped, sorted."""
    return tuple(sorted({part.strip() for part in cell.split(LABEL_SEPARATOR)} - {""}))


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------

class MultiLabelProcessor(glue_data.DataProcessor):
    """train.tsv / dev.tsv / test.tsv of --task_name=multilabel (see the module docstring).

    An example's label is a tuple of label names (sorted, maybe empty); test examples
    carry the empty tuple.
    """

    is_multilabel = True

    def __init__(self, labels=None, threshold=0.5):
        self._labels = None if labels is None else list(labels)
        self.threshold = threshold

    def get_labels(self):
        """The label list; known once train.tsv is read unless it was given."""
        if self._labels is None:
            raise ValueError("the %s label list is not known before train.tsv is read"
                             % TASK_NAME)
        return list(self._labels)

    def get_train_examples(self, data_dir):
        """The examples of train.tsv; without a given list, its labels become the list."""
        path = os.path.join(data_dir, "train.tsv")
        examples = self._read(path, "train", with_labels=True)
        if self._labels is None:
            labels = sorted({label for example in examples for label in example.label})
            if not labels:
                raise ValueError("%s: no example has a label, so the label list is empty "
                                 "(give it with --labels_file)" % path)
            self._labels = labels
        return examples

    def get_dev_examples(self, data_dir):
        """The examples of dev.tsv (every label must be in the label list)."""
        return self._read(os.path.join(data_dir, "dev.tsv"), "dev", with_labels=True)

    def get_test_examples(self, data_dir):
        """The examples of test.tsv (first column; no labels)."""
        return self._read(os.path.join(data_dir, "test.tsv"), "test", with_labels=False)

    def _read(self, path, set_name, with_labels):
        known = None if self._labels is None else set(self._labels)
        examples = []
        for index, row in enumerate(self._read_tsv(path)):
            text = tokenization.convert_to_unicode(row[0]) if row else ""
            if not text.strip():
                raise ValueError("%s: the line has no text" % row.where())
            labels = ()
            if with_labels:
                if len(row) != 2:
                    raise ValueError("%s: expected 2 tab-separated columns (text, then the "
                                     "labels separated by %r), found %d"
                                     % (row.where(), LABEL_SEPARATOR, len(row)))
                labels = parse_label_cell(tokenization.convert_to_unicode(row[1]))
                unknown = [label for label in labels if known is not None and label not in known]
                if unknown:
                    raise ValueError("%s: label %r is not in the label list (%s)"
                                     % (row.where(), unknown[0], ",".join(self._labels)))
            examples.append(glue_data.InputExample("%s-%d" % (set_name, index), text,
                                                   label=labels))
        return examples


# ---------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------

def multi_hot(label_names, label_list):
    """[num_labels] 0/1 list: 1 at the index of every name in `label_names`."""
    index = {label: i for i, label in enumerate(label_list)}
    vector = [0] * len(label_list)
    for name in label_names:
        if name not in index:
            raise ValueError("label %r is not in the label list (%s)"
                             % (name, ",".join(label_list)))
        vector[index[name]] = 1
    return vector


def record_spec(seq_length, num_labels):
    """Feature spec of write_records' files: run_classifier's, label_ids [1, num_labels]."""
    spec = input_pipeline.classifier_features(seq_length)
    spec["label_ids"] = tf.io.FixedLenFeature([1, num_labels], tf.int64)
    return spec


def _token_chunks(texts, tokenizer):
    """The WordPieces of `texts`, a chunk at a time (the tokenizer's batch path if any)."""
    for start in range(0, len(texts), _TOKENIZE_CHUNK):
        yield from fast_batch.tokenize_texts(tokenizer, texts[start:start + _TOKENIZE_CHUNK])


def write_records(examples, label_list, max_seq_length, tokenizer, path):
    """Writes the records of `examples` ([CLS] text [SEP], cut to fit) to `path`."""
    with input_pipeline.RecordWriter(path) as writer:
        pieces = _token_chunks([example.text_a for example in examples], tokenizer)
        for number, (example, tokens) in enumerate(zip(examples, pieces)):
            tokens, input_ids, input_mask, segment_ids = input_pipeline.pack_pair(
                tokens, None, max_seq_length, tokenizer)
            if number < 3 and logs.details_shown():
                logging.info("*** Example *** guid: %s labels: %s tokens: %s", example.guid,
                             LABEL_SEPARATOR.join(example.label),
                             " ".join(tokenization.printable_text(t) for t in tokens))
            writer.write({
                "input_ids": input_pipeline.int_feature(input_ids),
                "input_mask": input_pipeline.int_feature(input_mask),
                "segment_ids": input_pipeline.int_feature(segment_ids),
                "label_ids": input_pipeline.int_feature(multi_hot(example.label, label_list)),
                "is_real_example": input_pipeline.int_feature([1]),
            })
    return writer.num_written


# ---------------------------------------------------------------------------
# Loss and metrics
# ---------------------------------------------------------------------------

def compute_loss(logits, label_ids):
    """(mean loss, per-example loss, probabilities [B, L]) of sigmoid outputs.

    label_ids: the multi-hot labels, [B, L] or the records' [B, 1, L]. The
    per-example loss is the binary cross-entropy averaged over the labels.
    """
    logits = tf.cast(logits, tf.float32)
    labels = tf.cast(tf.reshape(label_ids, tf.shape(logits)), tf.float32)
    per_label = tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
    per_example = tf.reduce_mean(per_label, axis=-1)
    return tf.reduce_mean(per_example), per_example, tf.sigmoid(logits)


def label_set_metrics(true, predicted, label_list):
    """Micro / macro precision, recall, F1, subset accuracy and per-label F1.

    true, predicted: [N, L] 0/1 (or bool) arrays. Every 0/0 is 0, as scikit-learn's
    zero_division=0: a label never predicted has precision 0, one never true recall
    0, and one neither true nor predicted F1 0 (it still counts in the macro means).
    Keys as in eval_results.txt; values numpy float32.
    """
    ratio = glue_data.ratio
    true = np.asarray(true).astype(bool).reshape(-1, len(label_list))
    predicted = np.asarray(predicted).astype(bool).reshape(-1, len(label_list))
    tp = np.sum(true & predicted, axis=0)
    fp = np.sum(~true & predicted, axis=0)
    fn = np.sum(true & ~predicted, axis=0)
    f1 = ratio(2 * tp, 2 * tp + fp + fn)
    result = {
        "eval_micro_precision": ratio(tp.sum(), tp.sum() + fp.sum()),
        "eval_micro_recall": ratio(tp.sum(), tp.sum() + fn.sum()),
        "eval_micro_f1": ratio(2 * tp.sum(), 2 * tp.sum() + fp.sum() + fn.sum()),
        "eval_macro_precision": np.mean(ratio(tp, tp + fp)) if len(label_list) else 0.0,
        "eval_macro_recall": np.mean(ratio(tp, tp + fn)) if len(label_list) else 0.0,
        "eval_macro_f1": np.mean(f1) if len(label_list) else 0.0,
        "eval_subset_accuracy": np.mean(np.all(true == predicted, axis=1)) if len(true) else 0.0,
    }
    for label, value in zip(label_list, f1):
        result["eval_f1_label_%s" % label] = value
    return {key: np.float32(value) for key, value in result.items()}


# ---------------------------------------------------------------------------
# Serving (export_saved_model --model_type=classifier --task_name=multilabel)
# ---------------------------------------------------------------------------

def serving_outputs(logits, labels, threshold):
    """The served outputs of a multi-label classifier's float32 logits [B, L].

    probabilities [B, L] (sigmoid: run_classifier's test_results.tsv values), logits,
    labels [B, L] (names in output order), predicted [B, L] bool (probability >=
    threshold) and predicted_labels [B] (the predicted names joined by ",", in label
    order; "" for none).
    """
    probabilities = tf.sigmoid(logits)
    predicted = probabilities >= threshold
    names = tf.tile(tf.constant(list(labels))[tf.newaxis, :], [tf.shape(logits)[0], 1])
    chosen = tf.ragged.boolean_mask(names, predicted)
    return {
        "probabilities": probabilities,
        "logits": logits,
        "labels": names,
        "predicted": predicted,
        "predicted_labels": tf.strings.reduce_join(chosen, axis=1,
                                                   separator=LABEL_SEPARATOR),
    }
