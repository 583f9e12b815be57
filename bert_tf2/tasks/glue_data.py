"""GLUE-style classification data: examples, task processors, features, metrics.

What run_classifier.py reads and writes, importable without the runner (the
SavedModel exporter takes its label lists from here):
- `InputExample` and one processor per task (the reference's cola, mnli, mrpc,
  xnli, and sst-2, qqp, qnli, rte, wnli, sts-b), reading the task's TSV files
  with file and line named in every error; `get_processor(task_name)`;
- `convert_single_example` / `file_based_convert_examples_to_features`: the
  reference's [CLS] A [SEP] B [SEP] features and their TFRecord file;
- `eval_metrics`: the eval_results.txt values (accuracy, loss, and the task's
  GLUE metric: F1, Matthews correlation, Pearson/Spearman), plus for every
  classification task the precision / recall / F1 of a binary task's positive class,
  or a multi-class task's macro, weighted and per-class F1.

Contracts with the other modules (bert_tf2/tasks/glue_data.py (run_classifier's tasks)):
Processors as the reference's: get_*_examples(data_dir) =
`self._create_examples(self._read_tsv(path), set_type)`, so subclasses overriding either, or
calling them on their own files, work. _TsvTaskProcessor subclasses declare LABELS, TRAIN /
DEV / TEST column layouts (_Columns) and SET_NAMES; `_create_examples` picks the layout from
set_type (SET_NAMES[2] = "test": placeholder labels) and checks labels against get_labels(),
errors naming file and line (TsvRow). XnliProcessor._create_examples: "train" the multinli
layout, otherwise xnli.dev's rows of its language. Metrics: `eval_metrics(processor, ...,
positive=1)`; `binary_metrics(labels, predictions, positive)`, `multiclass_metrics(labels,
predictions, label_list)`, `ratio(n, d)` (0/0 = 0: the one zero-division rule,
multilabel_data's too), `metric_key(label)` / `class_f1_names(labels)`.
"""
import collections
import csv
import math
import os
import re

from absl import logging
import numpy as np
import tensorflow as tf

from bert import tokenization  # ours, whatever tokenization.py a user's folder holds
from bert_tf2 import input_pipeline
from bert_tf2 import logs
from bert_tf2.text import fast_batch


# ---------------------------------------------------------------------------
# Examples and features
# ---------------------------------------------------------------------------

class InputExample(object):
    """One example: an id, one or two untokenized texts and its label.

    `label` is a string (a class name, or a number for regression); test
    examples carry a placeholder.
    """

    def __init__(self, guid, text_a, text_b=None, label=None):
        self.guid = guid
        self.text_a = text_a
        self.text_b = text_b
        self.label = label


class PaddingInputExample(object):
    """Stand-in example that becomes an all-zero feature with is_real_example=False.

    Used to fill the last batch up to a fixed size; such rows are ignored by
    every metric and output.
    """


class InputFeatures(object):
    """Model inputs of one example."""

    def __init__(self, input_ids, input_mask, segment_ids, label_id, is_real_example=True):
        self.input_ids = input_ids
        self.input_mask = input_mask
        self.segment_ids = segment_ids
        self.label_id = label_id
        self.is_real_example = is_real_example


class TsvRow(list):
    """The cells of one TSV row, remembering which file and line it came from."""

    def __init__(self, cells, source, line_number):
        super().__init__(cells)
        self.source = source
        self.line_number = line_number

    def where(self):
        """The "file, line N" of this row, for error messages."""
        return "%s, line %d" % (self.source, self.line_number)


def _where(row):
    """The "file, line N" of a row that knows it (TsvRow, file_data.Row), else the row."""
    return row.where() if hasattr(row, "where") else "TSV row %r" % (row,)


def _cell(row, index):
    """row[index] as text; a row that is too short is a ValueError naming its line."""
    needed = index + 1 if index >= 0 else -index
    if len(row) < needed:
        where = _where(row)
        raise ValueError("%s: expected at least %d tab-separated columns, found %d"
                         % (where, needed, len(row)))
    return tokenization.convert_to_unicode(row[index])


class DataProcessor(object):
    """Reads the train/dev/test examples of one data set and knows its labels."""

    # True for tasks whose label is a real number (one model output, MSE loss).
    is_regression = False
    # True for tasks whose label is a set of names (multilabel_data.py).
    is_multilabel = False

    def get_train_examples(self, data_dir):
        """The `InputExample`s of the training set."""
        raise NotImplementedError()

    def get_dev_examples(self, data_dir):
        """The `InputExample`s of the dev (evaluation) set."""
        raise NotImplementedError()

    def get_test_examples(self, data_dir):
        """The `InputExample`s to predict; their labels are placeholders."""
        raise NotImplementedError()

    def get_labels(self):
        """The class names, in output order ([None] for a regression task)."""
        raise NotImplementedError()

    @classmethod
    def _read_tsv(cls, input_file, quotechar=None):
        """All rows of a tab-separated file, quotes taken literally.

        Each row is a list of cells (a TsvRow, which also knows its file and
        1-based line number for error messages).
        """
        if not tf.io.gfile.exists(input_file):
            raise ValueError("data file %s not found (check --data_dir and --task_name)"
                             % input_file)
        quoting = csv.QUOTE_NONE if quotechar is None else csv.QUOTE_MINIMAL
        rows = []
        with tf.io.gfile.GFile(input_file, "r") as f:
            reader = csv.reader(f, delimiter="\t", quotechar=quotechar, quoting=quoting)
            for cells in reader:
                rows.append(TsvRow(cells, input_file, reader.line_num))
        return rows

    def _checked_label(self, label, row):
        """Returns `label` if the task knows it; else a ValueError naming file and line."""
        if self.is_regression:
            try:
                value = float(label)
            except ValueError:
                raise ValueError("%s: label %r is not a number" % (_where(row), label)) from None
            if not math.isfinite(value):
                # nan / inf would turn the loss and every metric into nan.
                raise ValueError("%s: label %r is not a finite number" % (_where(row), label))
            return label
        if not label.strip():
            raise ValueError("%s: the label is empty; each row needs one of the task's labels "
                             "%s" % (_where(row), self.get_labels()))
        if label not in self.get_labels():
            raise ValueError("%s: label %r is not one of the task's labels %s"
                             % (_where(row), label, self.get_labels()))
        return label

    def _placeholder_label(self):
        """Label given to test examples: the first class (0 for regression)."""
        return "0" if self.is_regression else self.get_labels()[0]


# Where one split's fields sit in its TSV file (column indexes; None = absent) and
# whether the file starts with a header line.
_Columns = collections.namedtuple("_Columns", "file_name text_a text_b label header",
                                  defaults=(None, None, True))


class _TsvTaskProcessor(DataProcessor):
    """A data set stored as train/dev/test TSV files with fixed column positions.

    Subclasses set LABELS and the TRAIN / DEV / TEST layouts, and may override
    `_guid` and the set names that go into the guids. As in the reference, each
    get_*_examples is `self._create_examples(self._read_tsv(path), set_type)`, so a
    subclass that overrides either (or calls them itself) works as it did there.
    """

    LABELS = ("0", "1")
    TRAIN = DEV = TEST = None
    SET_NAMES = ("train", "dev", "test")

    def get_labels(self):
        """The task's labels, in output order ([None] for regression)."""
        return list(self.LABELS)

    def get_train_examples(self, data_dir):
        """The InputExamples of the training set in `data_dir`."""
        return self._examples_of(data_dir, self.TRAIN, self.SET_NAMES[0])

    def get_dev_examples(self, data_dir):
        """The InputExamples of the dev set in `data_dir`."""
        return self._examples_of(data_dir, self.DEV, self.SET_NAMES[1])

    def get_test_examples(self, data_dir):
        """The InputExamples of the test set in `data_dir` (placeholder labels)."""
        return self._examples_of(data_dir, self.TEST, self.SET_NAMES[2])

    def _examples_of(self, data_dir, columns, set_type):
        return self._create_examples(
            self._read_tsv(os.path.join(data_dir, columns.file_name)), set_type)

    def _guid(self, set_name, index, row):
        return "%s-%s" % (set_name, index)

    def _create_examples(self, lines, set_type):
        """InputExamples of the rows `lines` of one split (the reference's method).

        set_type: "test" reads the test layout (placeholder labels); the set's dev
        name reads the dev layout; any other value the training layout (the
        reference tells only "test" apart, and its train and dev layouts agree).
        It goes into each example's guid. Labels are checked against get_labels().
        """
        if set_type == self.SET_NAMES[2]:
            columns = self.TEST
        else:
            columns = self.DEV if set_type == self.SET_NAMES[1] else self.TRAIN
        examples = []
        for index, row in enumerate(lines):
            if columns.header and index == 0:
                continue
            text_a = _cell(row, columns.text_a)
            text_b = None if columns.text_b is None else _cell(row, columns.text_b)
            if columns is self.TEST:
                label = self._placeholder_label()
            else:
                label = self._checked_label(_cell(row, columns.label), row)
            examples.append(InputExample(self._guid(set_type, index, row), text_a, text_b, label))
        return examples


class XnliProcessor(DataProcessor):
    """XNLI: MultiNLI machine-translated training data + the XNLI dev set, one language."""

    def __init__(self, language="zh"):
        self.language = language

    def get_labels(self):
        """The task's labels, in output order ([None] for regression)."""
        return ["contradiction", "entailment", "neutral"]

    def get_train_examples(self, data_dir):
        """The InputExamples of the training set in `data_dir`."""
        path = os.path.join(data_dir, "multinli", "multinli.train.%s.tsv" % self.language)
        return self._create_examples(self._read_tsv(path), "train")

    def get_dev_examples(self, data_dir):
        """The InputExamples of the dev set in `data_dir`."""
        return self._create_examples(
            self._read_tsv(os.path.join(data_dir, "xnli.dev.tsv")), "dev")

    def _create_examples(self, lines, set_type):
        """InputExamples of the rows of multinli.train.<language>.tsv (set_type "train")
        or of xnli.dev.tsv (any other set_type: this language's rows only)."""
        examples = []
        for index, row in enumerate(lines):
            if index == 0:
                continue
            if set_type == "train":
                text_a, text_b, label = _cell(row, 0), _cell(row, 1), _cell(row, 2)
                # The translated training files spell this class differently.
                label = "contradiction" if label == "contradictory" else label
            elif _cell(row, 0) != self.language:
                continue
            else:
                text_a, text_b, label = _cell(row, 6), _cell(row, 7), _cell(row, 1)
            examples.append(InputExample("%s-%d" % (set_type, index), text_a, text_b,
                                         self._checked_label(label, row)))
        return examples

    def get_test_examples(self, data_dir):
        """The InputExamples of the test set in `data_dir` (placeholder labels)."""
        raise ValueError("the xnli task has no test set (use --do_predict with another task)")


class MnliProcessor(_TsvTaskProcessor):
    """MultiNLI (GLUE): the matched dev and test sets."""

    LABELS = ("contradiction", "entailment", "neutral")
    TRAIN = _Columns("train.tsv", 8, 9, -1)
    DEV = _Columns("dev_matched.tsv", 8, 9, -1)
    TEST = _Columns("test_matched.tsv", 8, 9)
    SET_NAMES = ("train", "dev_matched", "test")

    def _guid(self, set_name, index, row):
        return "%s-%s" % (set_name, _cell(row, 0))


class MrpcProcessor(_TsvTaskProcessor):
    """Microsoft Research Paraphrase Corpus (GLUE): quality, ids, string 1, string 2."""

    TRAIN = _Columns("train.tsv", 3, 4, 0)
    DEV = _Columns("dev.tsv", 3, 4, 0)
    TEST = _Columns("test.tsv", 3, 4)


class ColaProcessor(_TsvTaskProcessor):
    """Corpus of Linguistic Acceptability (GLUE). Only test.tsv has a header."""

    TRAIN = _Columns("train.tsv", 3, label=1, header=False)
    DEV = _Columns("dev.tsv", 3, label=1, header=False)
    TEST = _Columns("test.tsv", 1)


class Sst2Processor(_TsvTaskProcessor):
    """Stanford Sentiment Treebank, binary (GLUE): sentence, label."""

    TRAIN = _Columns("train.tsv", 0, label=1)
    DEV = _Columns("dev.tsv", 0, label=1)
    TEST = _Columns("test.tsv", 1)


class QqpProcessor(_TsvTaskProcessor):
    """Quora Question Pairs (GLUE): id, qid1, qid2, question1, question2, is_duplicate."""

    TRAIN = _Columns("train.tsv", 3, 4, 5)
    DEV = _Columns("dev.tsv", 3, 4, 5)
    TEST = _Columns("test.tsv", 1, 2)


class QnliProcessor(_TsvTaskProcessor):
    """Question NLI (GLUE): index, question, sentence, label."""

    LABELS = ("entailment", "not_entailment")
    TRAIN = _Columns("train.tsv", 1, 2, 3)
    DEV = _Columns("dev.tsv", 1, 2, 3)
    TEST = _Columns("test.tsv", 1, 2)


class RteProcessor(QnliProcessor):
    """Recognizing Textual Entailment (GLUE): index, sentence1, sentence2, label."""


class WnliProcessor(_TsvTaskProcessor):
    """Winograd NLI (GLUE): index, sentence1, sentence2, label (0/1)."""

    TRAIN = _Columns("train.tsv", 1, 2, 3)
    DEV = _Columns("dev.tsv", 1, 2, 3)
    TEST = _Columns("test.tsv", 1, 2)


class StsbProcessor(_TsvTaskProcessor):
    """Semantic Textual Similarity Benchmark (GLUE): a similarity score from 0 to 5."""

    is_regression = True
    LABELS = (None,)
    TRAIN = _Columns("train.tsv", 7, 8, 9)
    DEV = _Columns("dev.tsv", 7, 8, 9)
    TEST = _Columns("test.tsv", 7, 8)


PROCESSORS = {
    "cola": ColaProcessor,
    "mnli": MnliProcessor,
    "mrpc": MrpcProcessor,
    "xnli": XnliProcessor,
    "sst-2": Sst2Processor,
    "sst2": Sst2Processor,
    "qqp": QqpProcessor,
    "qnli": QnliProcessor,
    "rte": RteProcessor,
    "wnli": WnliProcessor,
    "sts-b": StsbProcessor,
    "stsb": StsbProcessor,
}


def get_processor(task_name, xnli_language="zh"):
    """The processor of `task_name` (case-insensitive); ValueError listing known tasks."""
    key = task_name.lower()
    if key not in PROCESSORS:
        raise ValueError("unknown --task_name %r; known tasks: %s"
                         % (task_name, ", ".join(sorted(PROCESSORS))))
    if PROCESSORS[key] is XnliProcessor:
        return XnliProcessor(language=xnli_language)
    return PROCESSORS[key]()


def _is_regression(label_list):
    return label_list is None or list(label_list) == [None]


def _padding_features(max_seq_length):
    zeros = [0] * max_seq_length
    return InputFeatures(list(zeros), list(zeros), list(zeros), 0, is_real_example=False)


def _label_id(example, label_list, label_map):
    if _is_regression(label_list):
        return float(example.label)
    if example.label not in label_map:
        raise ValueError("example %s: label %r is not one of %s"
                         % (example.guid, example.label, list(label_list)))
    return label_map[example.label]


def _assemble(ex_index, example, tokens_a, tokens_b, label_list, label_map,
              max_seq_length, tokenizer):
    """[CLS] A [SEP] (B [SEP]) -> ids, mask and segment ids, zero-padded; logs the first 5."""
    tokens, input_ids, input_mask, segment_ids = input_pipeline.pack_pair(
        tokens_a, tokens_b, max_seq_length, tokenizer)

    label_id = _label_id(example, label_list, label_map)
    if ex_index < 5 and logs.details_shown():
        log_packed(("guid", example.guid), tokens, input_ids, input_mask,
                   ("segment_ids", segment_ids))
        if _is_regression(label_list):
            logging.info("label: %s (value = %s)", example.label, label_id)
        else:
            logging.info("label: %s (id = %d)", example.label, label_id)
    return InputFeatures(input_ids, input_mask, segment_ids, label_id, is_real_example=True)


def log_packed(name_id, tokens, input_ids, input_mask, name_types):
    """The reference's "*** Example ***" lines of one packed sequence.

    name_id: (its name, the example's id), e.g. ("guid", ...); name_types: (its name,
    the segment ids), e.g. ("segment_ids", ...): the names the reference's script logs.
    """
    logging.info("*** Example ***")
    logging.info("%s: %s", name_id[0], name_id[1])
    logging.info("tokens: %s", " ".join(tokenization.printable_text(t) for t in tokens))
    logging.info("input_ids: %s", " ".join(str(x) for x in input_ids))
    logging.info("input_mask: %s", " ".join(str(x) for x in input_mask))
    logging.info("%s: %s", name_types[0], " ".join(str(x) for x in name_types[1]))


def _label_map(label_list):
    if _is_regression(label_list):
        return {}
    return {label: i for i, label in enumerate(label_list)}


def convert_single_example(ex_index, example, label_list, max_seq_length, tokenizer):
    """Turns one `InputExample` into `InputFeatures` (ids, mask, segment ids, label id).

    A pair is truncated to max_seq_length - 3 WordPieces by dropping tokens from
    the end of the longer text; a single text is cut to max_seq_length - 2.
    For regression (label_list [None]) the label id is the float label.
    """
    if isinstance(example, PaddingInputExample):
        return _padding_features(max_seq_length)
    check_texts(example)
    tokens_a = tokenizer.tokenize(example.text_a)
    tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else None
    return _assemble(ex_index, example, tokens_a, tokens_b, label_list, _label_map(label_list),
                     max_seq_length, tokenizer)


def check_texts(example):
    """`example` itself, once its text_a is a string and its text_b a string or empty;
    else a ValueError naming its guid (a processor's example, not a traceback)."""
    texts = (("text_a", example.text_a, False), ("text_b", example.text_b, True))
    for name, text, optional in texts:
        if not isinstance(text, (str, bytes)) and not (optional and not text):
            raise ValueError("example %s: %s is %r, not a text%s"
                             % (example.guid, name, text,
                                "" if optional else " (every example needs a text_a)"))
    return example


_TOKENIZE_CHUNK = 2048


def _iter_features(examples, label_list, max_seq_length, tokenizer, split=None):
    """Yields the features of `examples` in order (tokenizing a chunk at a time).

    Uses the tokenizer's batch path when it has one and the chunk is not a few short
    texts (fast_batch.tokenize_texts); it returns exactly what `tokenize` returns. split(example, tokens_a, tokens_b,
    max_seq_length) -> [(tokens_a, tokens_b)] gives an example several features
    (long_text.LongText.split); each feature's example_index says whose it is.
    """
    label_map = _label_map(label_list)
    total = len(examples)
    for start in range(0, total, _TOKENIZE_CHUNK):
        chunk = examples[start:start + _TOKENIZE_CHUNK]
        real = [check_texts(ex) for ex in chunk if not isinstance(ex, PaddingInputExample)]
        texts = [ex.text_a for ex in real] + [ex.text_b for ex in real if ex.text_b]
        tokenized = iter(fast_batch.tokenize_texts(tokenizer, texts))
        tokens_a = {id(ex): next(tokenized) for ex in real}
        tokens_b = {id(ex): next(tokenized) for ex in real if ex.text_b}
        for offset, example in enumerate(chunk):
            ex_index = start + offset
            if ex_index % 10000 == 0:
                logging.info("Writing example %d of %d", ex_index, total)
            if isinstance(example, PaddingInputExample):
                padding = _padding_features(max_seq_length)
                padding.example_index = ex_index
                yield padding
                continue
            parts = [(tokens_a[id(example)], tokens_b.get(id(example)))]
            if split is not None:
                parts = split(example, parts[0][0], parts[0][1], max_seq_length)
            for part_a, part_b in parts:
                feature = _assemble(ex_index, example, part_a, part_b, label_list,
                                    label_map, max_seq_length, tokenizer)
                feature.example_index = ex_index
                yield feature


def convert_examples_to_features(examples, label_list, max_seq_length, tokenizer):
    """All examples as a list of `InputFeatures` (in memory; for small sets)."""
    return list(_iter_features(examples, label_list, max_seq_length, tokenizer))


def file_based_convert_examples_to_features(examples, label_list, max_seq_length, tokenizer,
                                            output_file, split=None, index_feature=None):
    """Writes the features of `examples` to the TFRecord file `output_file` (atomically).

    Record features: input_ids, input_mask, segment_ids, label_ids (int64, or
    float32 for regression) and is_real_example; with index_feature also that
    feature: the index of the feature's example (see _iter_features for split).
    Returns the number of records written.
    """
    regression = _is_regression(label_list)
    with input_pipeline.RecordWriter(output_file) as writer:
        for feature in _iter_features(examples, label_list, max_seq_length, tokenizer, split):
            if regression:
                label = input_pipeline.float_feature([feature.label_id])
            else:
                label = input_pipeline.int_feature([feature.label_id])
            extra = {} if index_feature is None else {
                index_feature: input_pipeline.int_feature([feature.example_index])}
            writer.write(dict(extra, **{
                "input_ids": input_pipeline.int_feature(feature.input_ids),
                "input_mask": input_pipeline.int_feature(feature.input_mask),
                "segment_ids": input_pipeline.int_feature(feature.segment_ids),
                "label_ids": label,
                "is_real_example": input_pipeline.int_feature([int(feature.is_real_example)]),
            }))
    return writer.num_written


def record_spec(seq_length, regression=False):
    """Feature spec of the files written by file_based_convert_examples_to_features."""
    return input_pipeline.classifier_features(
        seq_length, label_dtype=tf.float32 if regression else tf.int64)


# ---------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------

def ratio(numerator, denominator):
    """numerator / denominator, 0 where the denominator is 0 (scikit-learn's zero_division=0)."""
    numerator = np.asarray(numerator, np.float64)
    denominator = np.asarray(denominator, np.float64)
    return np.where(denominator > 0, numerator / np.where(denominator > 0, denominator, 1), 0.0)


def _f1(labels, predictions, positive=1):
    tp = np.sum((predictions == positive) & (labels == positive))
    fp = np.sum((predictions == positive) & (labels != positive))
    fn = np.sum((predictions != positive) & (labels == positive))
    if tp == 0:
        return 0.0
    precision = tp / (tp + fp)
    recall = tp / (tp + fn)
    return 2 * precision * recall / (precision + recall)


def binary_metrics(labels, predictions, positive=1):
    """eval_precision, eval_recall, eval_f1 of the class `positive` (a label index).

    Every 0/0 is 0, as scikit-learn's zero_division=0: a class never predicted has
    precision 0, one absent from the labels recall 0. eval_f1 is MRPC's / QQP's GLUE
    F1 (positive=1), computed as it always was. Values numpy float32.
    """
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    tp = np.sum((predictions == positive) & (labels == positive))
    fp = np.sum((predictions == positive) & (labels != positive))
    fn = np.sum((predictions != positive) & (labels == positive))
    return {"eval_precision": np.float32(ratio(tp, tp + fp)),
            "eval_recall": np.float32(ratio(tp, tp + fn)),
            "eval_f1": np.float32(_f1(labels, predictions, positive))}


CLASS_F1_PREFIX = "eval_f1_"


def metric_key(label):
    """A label's text as it stands in a metric name (eval_f1_<label>): every character
    but a letter, a digit (of any script), "_", "." and "-" becomes "_"."""
    return re.sub(r"[^\w.-]", "_", str(label))


def class_f1_names(label_list):
    """The eval_f1_<label> names of a multi-class task's labels, in label order.

    Labels whose metric_key is the same (`a b` and `a/b`) each get their position in
    the label list appended: eval_f1_a_b_0, eval_f1_a_b_1.
    """
    keys = [CLASS_F1_PREFIX + metric_key(label) for label in label_list]
    counts = collections.Counter(keys)
    keys = [key if counts[key] == 1 else "%s_%d" % (key, index)
            for index, key in enumerate(keys)]
    if len(set(keys)) != len(keys):
        raise ValueError("the labels %s make the same metric name twice (%s)"
                         % (", ".join(map(str, label_list)), ", ".join(keys)))
    return keys


def multiclass_metrics(labels, predictions, label_list):
    """eval_macro_f1, eval_weighted_f1 and eval_f1_<label> of each label (class_f1_names).

    labels, predictions: label indexes. Each class's F1 is 2tp / (2tp + fp + fn), 0
    when that is 0/0 (scikit-learn's zero_division=0): a class absent from the dev set
    and never predicted scores 0 and still counts in the macro mean (every class of the
    label list does); the weighted mean weighs each class by its dev examples.
    """
    n = len(label_list)
    labels = np.asarray(labels, np.int64).reshape(-1)
    predictions = np.asarray(predictions, np.int64).reshape(-1)
    confusion = np.bincount(labels * n + predictions, minlength=n * n).reshape(n, n)
    tp = np.diag(confusion)
    support = confusion.sum(axis=1)
    f1 = ratio(2 * tp, support + confusion.sum(axis=0))  # 2tp + fn + fp
    result = {"eval_macro_f1": np.mean(f1),
              "eval_weighted_f1": ratio(np.sum(f1 * support), np.sum(support))}
    result.update(zip(class_f1_names(label_list), f1))
    return {key: np.float32(value) for key, value in result.items()}


def _matthews(labels, predictions):
    """Matthews correlation of two binary 0/1 arrays (0 when undefined)."""
    tp = float(np.sum((predictions == 1) & (labels == 1)))
    tn = float(np.sum((predictions == 0) & (labels == 0)))
    fp = float(np.sum((predictions == 1) & (labels == 0)))
    fn = float(np.sum((predictions == 0) & (labels == 1)))
    denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    if denominator == 0:
        return 0.0
    return (tp * tn - fp * fn) / denominator


def _correlations(labels, predictions):
    import scipy.stats  # pylint: disable=import-outside-toplevel
    import warnings  # pylint: disable=import-outside-toplevel
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pearson = scipy.stats.pearsonr(predictions, labels)[0]
        spearman = scipy.stats.spearmanr(predictions, labels)[0]
    return float(pearson), float(spearman)


# Extra GLUE metric(s) reported per task, on top of accuracy and loss (MRPC's and QQP's
# F1 is every binary task's eval_f1).
_TASK_METRICS = {
    ColaProcessor: ("mcc",),
}


def loss_metrics(per_example_loss, is_real_example, batch_ids):
    """eval_loss (mean per-example loss of the real rows) and loss (the mean over
    batches of each batch's mean over its real rows), numpy float32."""
    real = np.asarray(is_real_example) > 0
    losses = np.asarray(per_example_loss, np.float64)[real]
    batch_ids = np.asarray(batch_ids, np.int64)[real]
    batch_sums = np.bincount(batch_ids, weights=losses)
    batch_sizes = np.bincount(batch_ids)
    batch_means = batch_sums[batch_sizes > 0] / batch_sizes[batch_sizes > 0]
    return {
        "eval_loss": np.float32(losses.mean() if losses.size else 0.0),
        "loss": np.float32(batch_means.mean() if batch_means.size else 0.0),
    }


def eval_metrics(processor, per_example_loss, label_ids, outputs, is_real_example,
                 batch_ids, positive=1):
    """The eval_results.txt values, computed the way the original Estimator did.

    eval_loss: mean per-example loss over the real examples; loss: the mean
    over batches of each batch's mean loss (real rows only); eval_accuracy for
    classification; plus the task's GLUE metric (eval_f1 / eval_mcc), and
    eval_pearson and eval_spearman for every regression task (STS-B's).
    Added for classification: a task of 2 labels has binary_metrics of the label
    index `positive` (--positive_label), one of more multiclass_metrics.
    Float values are numpy float32.
    """
    real = np.asarray(is_real_example) > 0
    labels = np.asarray(label_ids)[real]
    outputs = np.asarray(outputs)[real]
    result = loss_metrics(per_example_loss, is_real_example, batch_ids)
    # The GLUE task's, else what the processor asks for (own data: MCC of 2 labels).
    wanted = _TASK_METRICS.get(type(processor)) or tuple(getattr(processor, "task_metrics", ()))
    if processor.is_regression:  # STS-B's metrics, for every regression task
        pearson, spearman = _correlations(labels.astype(np.float64),
                                          outputs.astype(np.float64))
        result["eval_pearson"] = np.float32(pearson)
        result["eval_spearman"] = np.float32(spearman)
        return result
    predictions = np.argmax(outputs, axis=-1)
    result["eval_accuracy"] = np.float32(np.mean(predictions == labels) if labels.size else 0.0)
    if "mcc" in wanted:
        result["eval_mcc"] = np.float32(_matthews(labels, predictions))
    label_list = processor.get_labels()
    if len(label_list) == 2:  # eval_f1: MRPC's / QQP's GLUE F1 at positive=1
        result.update(binary_metrics(labels, predictions, positive))
    elif len(label_list) > 2:
        result.update(multiclass_metrics(labels, predictions, label_list))
    return result
