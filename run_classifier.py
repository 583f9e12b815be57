"""Fine-tunes BERT on a sentence (pair) classification task and evaluates it.

Command-line compatible with the original `run_classifier.py`: the same flags,
the same task names (cola, mnli, mrpc, xnli) and the same outputs in
--output_dir (train/eval/predict .tf_record files, eval_results.txt,
test_results.tsv). Added here: the other GLUE tasks (sst-2, qqp, qnli, rte,
wnli and the regression task sts-b), --xnli_language, extra GLUE metrics in
eval_results.txt, and the TF2 distribution/precision flags of flags_common.

Eval and predict see every example: the last partial batch is padded with
rows flagged is_real_example = 0, which never reach a metric or an output line.
"""
import csv
import os

from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf

import flags_common
import input_pipeline
import modeling
import tokenization
import training


# ---------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------

_REQUIRED_FLAGS = ("data_dir", "task_name", "vocab_file", "bert_config_file", "output_dir")


def define_flags(fv):
    """Registers the classifier runner's flags on the FlagValues `fv`."""
    flags.DEFINE_string(
        "data_dir", None,
        "Directory holding the task's data files (.tsv for the GLUE tasks).",
        flag_values=fv)
    flags.DEFINE_string(
        "bert_config_file", None,
        "bert_config.json of the pre-trained model; it fixes the architecture.",
        flag_values=fv)
    flags.DEFINE_string("task_name", None, "Name of the task to fine-tune on (case-insensitive).",
                        flag_values=fv)
    flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary the model was trained with.",
                        flag_values=fv)
    flags.DEFINE_string(
        "output_dir", None,
        "Where checkpoints, feature files and result files are written.",
        flag_values=fv)
    flags.DEFINE_string(
        "init_checkpoint", None,
        "Checkpoint to start from, usually a pre-trained BERT (TF1 or TF2 format).",
        flag_values=fv)
    flags.DEFINE_bool(
        "do_lower_case", True,
        "Lower-case (and strip accents from) the input: True for uncased models, "
        "False for cased ones.", flag_values=fv)
    flags.DEFINE_integer(
        "max_seq_length", 128,
        "Length of every input after WordPiece tokenization: longer inputs are "
        "truncated, shorter ones zero-padded.", flag_values=fv)
    flags.DEFINE_bool("do_train", False, "Fine-tune on the training set.", flag_values=fv)
    flags.DEFINE_bool("do_eval", False, "Evaluate on the dev set.", flag_values=fv)
    flags.DEFINE_bool("do_predict", False,
                      "Write class probabilities for the test set.", flag_values=fv)
    flags.DEFINE_integer("train_batch_size", 32, "Global training batch size.", flag_values=fv)
    flags.DEFINE_integer("eval_batch_size", 8, "Global evaluation batch size.", flag_values=fv)
    flags.DEFINE_integer("predict_batch_size", 8, "Global prediction batch size.",
                         flag_values=fv)
    flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate of the optimizer.",
                       flag_values=fv)
    flags.DEFINE_float("num_train_epochs", 3.0, "Number of passes over the training set.",
                       flag_values=fv)
    flags.DEFINE_float(
        "warmup_proportion", 0.1,
        "Fraction of the training steps over which the learning rate rises linearly "
        "from 0 (0.1 = the first 10%).", flag_values=fv)
    flags.DEFINE_string(
        "xnli_language", "zh",
        "Language of the XNLI data used by --task_name=xnli (the original code always "
        "used zh).", flag_values=fv)
    flags_common.define_training_flags(fv)


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
        return "%s, line %d" % (self.source, self.line_number)


def _where(row):
    return row.where() if isinstance(row, TsvRow) else "TSV row %r" % (row,)


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
                float(label)
            except ValueError:
                raise ValueError("%s: label %r is not a number" % (_where(row), label)) from None
            return label
        if label not in self.get_labels():
            raise ValueError("%s: label %r is not one of the task's labels %s"
                             % (_where(row), label, self.get_labels()))
        return label

    def _placeholder_label(self):
        """Label given to test examples: the first class (0 for regression)."""
        return "0" if self.is_regression else self.get_labels()[0]


class _Columns(object):
    """Where one split's fields sit in its TSV file (column indexes; None = absent)."""

    def __init__(self, file_name, text_a, text_b=None, label=None, header=True):
        self.file_name = file_name
        self.text_a = text_a
        self.text_b = text_b
        self.label = label
        self.header = header


class _TsvTaskProcessor(DataProcessor):
    """A data set stored as train/dev/test TSV files with fixed column positions.

    Subclasses set LABELS and the TRAIN / DEV / TEST layouts, and may override
    `_guid` and the set names that go into the guids.
    """

    LABELS = ("0", "1")
    TRAIN = DEV = TEST = None
    SET_NAMES = ("train", "dev", "test")

    def get_labels(self):
        return list(self.LABELS)

    def get_train_examples(self, data_dir):
        return self._examples(data_dir, self.TRAIN, self.SET_NAMES[0], False)

    def get_dev_examples(self, data_dir):
        return self._examples(data_dir, self.DEV, self.SET_NAMES[1], False)

    def get_test_examples(self, data_dir):
        return self._examples(data_dir, self.TEST, self.SET_NAMES[2], True)

    def _guid(self, set_name, index, row):
        return "%s-%s" % (set_name, index)

    def _examples(self, data_dir, columns, set_name, is_test):
        rows = self._read_tsv(os.path.join(data_dir, columns.file_name))
        examples = []
        for index, row in enumerate(rows):
            if columns.header and index == 0:
                continue
            text_a = _cell(row, columns.text_a)
            text_b = None if columns.text_b is None else _cell(row, columns.text_b)
            if is_test:
                label = self._placeholder_label()
            else:
                label = self._checked_label(_cell(row, columns.label), row)
            examples.append(InputExample(self._guid(set_name, index, row), text_a, text_b, label))
        return examples


class XnliProcessor(DataProcessor):
    """XNLI: MultiNLI machine-translated training data + the XNLI dev set, one language."""

    def __init__(self, language="zh"):
        self.language = language

    def get_labels(self):
        return ["contradiction", "entailment", "neutral"]

    def get_train_examples(self, data_dir):
        path = os.path.join(data_dir, "multinli", "multinli.train.%s.tsv" % self.language)
        examples = []
        for index, row in enumerate(self._read_tsv(path)):
            if index == 0:
                continue
            label = _cell(row, 2)
            # The translated training files spell this class differently.
            if label == "contradictory":
                label = "contradiction"
            examples.append(InputExample("train-%d" % index, _cell(row, 0), _cell(row, 1),
                                         self._checked_label(label, row)))
        return examples

    def get_dev_examples(self, data_dir):
        examples = []
        for index, row in enumerate(self._read_tsv(os.path.join(data_dir, "xnli.dev.tsv"))):
            if index == 0 or _cell(row, 0) != self.language:
                continue
            examples.append(InputExample("dev-%d" % index, _cell(row, 6), _cell(row, 7),
                                         self._checked_label(_cell(row, 1), row)))
        return examples

    def get_test_examples(self, data_dir):
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


# The reference's name, for code that imported it from run_classifier.
_truncate_seq_pair = input_pipeline.truncate_seq_pair


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
    if ex_index < 5:
        logging.info("*** Example ***")
        logging.info("guid: %s", example.guid)
        logging.info("tokens: %s", " ".join(tokenization.printable_text(t) for t in tokens))
        logging.info("input_ids: %s", " ".join(str(x) for x in input_ids))
        logging.info("input_mask: %s", " ".join(str(x) for x in input_mask))
        logging.info("segment_ids: %s", " ".join(str(x) for x in segment_ids))
        if _is_regression(label_list):
            logging.info("label: %s (value = %s)", example.label, label_id)
        else:
            logging.info("label: %s (id = %d)", example.label, label_id)
    return InputFeatures(input_ids, input_mask, segment_ids, label_id, is_real_example=True)


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
    tokens_a = tokenizer.tokenize(example.text_a)
    tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else None
    return _assemble(ex_index, example, tokens_a, tokens_b, label_list, _label_map(label_list),
                     max_seq_length, tokenizer)


_TOKENIZE_CHUNK = 2048


def _iter_features(examples, label_list, max_seq_length, tokenizer):
    """Yields the features of `examples` in order (tokenizing a chunk at a time).

    Uses the tokenizer's batch path when it has one; it returns exactly what
    `tokenize` returns, only faster.
    """
    label_map = _label_map(label_list)
    batch_tokenize = getattr(tokenizer, "tokenize_batch", None)
    total = len(examples)
    for start in range(0, total, _TOKENIZE_CHUNK):
        chunk = examples[start:start + _TOKENIZE_CHUNK]
        real = [ex for ex in chunk if not isinstance(ex, PaddingInputExample)]
        texts = [ex.text_a for ex in real] + [ex.text_b for ex in real if ex.text_b]
        if batch_tokenize is not None and texts:
            tokenized = iter(batch_tokenize(texts))
            tokens_a = {id(ex): list(next(tokenized)) for ex in real}
            tokens_b = {id(ex): list(next(tokenized)) for ex in real if ex.text_b}
        else:
            tokens_a = {id(ex): tokenizer.tokenize(ex.text_a) for ex in real}
            tokens_b = {id(ex): tokenizer.tokenize(ex.text_b) for ex in real if ex.text_b}
        for offset, example in enumerate(chunk):
            ex_index = start + offset
            if ex_index % 10000 == 0:
                logging.info("Writing example %d of %d", ex_index, total)
            if isinstance(example, PaddingInputExample):
                yield _padding_features(max_seq_length)
                continue
            yield _assemble(ex_index, example, tokens_a[id(example)],
                            tokens_b.get(id(example)), label_list, label_map,
                            max_seq_length, tokenizer)


def convert_examples_to_features(examples, label_list, max_seq_length, tokenizer):
    """All examples as a list of `InputFeatures` (in memory; for small sets)."""
    return list(_iter_features(examples, label_list, max_seq_length, tokenizer))


def file_based_convert_examples_to_features(examples, label_list, max_seq_length, tokenizer,
                                            output_file):
    """Writes the features of `examples` to the TFRecord file `output_file` (atomically).

    Record features: input_ids, input_mask, segment_ids, label_ids (int64, or
    float32 for regression) and is_real_example.
    """
    regression = _is_regression(label_list)
    with input_pipeline.RecordWriter(output_file) as writer:
        for feature in _iter_features(examples, label_list, max_seq_length, tokenizer):
            if regression:
                label = input_pipeline.float_feature([feature.label_id])
            else:
                label = input_pipeline.int_feature([feature.label_id])
            writer.write({
                "input_ids": input_pipeline.int_feature(feature.input_ids),
                "input_mask": input_pipeline.int_feature(feature.input_mask),
                "segment_ids": input_pipeline.int_feature(feature.segment_ids),
                "label_ids": label,
                "is_real_example": input_pipeline.int_feature([int(feature.is_real_example)]),
            })
    return writer.num_written


def record_spec(seq_length, regression=False):
    """Feature spec of the files written by file_based_convert_examples_to_features."""
    return input_pipeline.classifier_features(
        seq_length, label_dtype=tf.float32 if regression else tf.int64)


def file_based_input_fn_builder(input_file, seq_length, is_training, drop_remainder,
                                regression=False):
    """input_fn(params) -> dataset of the records in `input_file` (params["batch_size"]).

    Training data is repeated and shuffled; otherwise the file is read in order
    and, without drop_remainder, the last batch is padded with is_real_example=0.
    """
    def input_fn(params):
        return input_pipeline.make_dataset(
            [input_file], record_spec(seq_length, regression), params["batch_size"],
            is_training=is_training, pad_final_batch=not drop_remainder)
    return input_fn


def input_fn_builder(features, seq_length, is_training, drop_remainder):
    """input_fn(params) -> dataset built from in-memory `InputFeatures` (small sets only)."""
    columns = {
        "input_ids": np.array([f.input_ids for f in features], np.int32).reshape(-1, seq_length),
        "input_mask": np.array([f.input_mask for f in features], np.int32).reshape(-1, seq_length),
        "segment_ids": np.array([f.segment_ids for f in features],
                                np.int32).reshape(-1, seq_length),
        "label_ids": np.array([f.label_id for f in features]),
    }
    if columns["label_ids"].dtype.kind == "f":
        columns["label_ids"] = columns["label_ids"].astype(np.float32)
    else:
        columns["label_ids"] = columns["label_ids"].astype(np.int32)

    def input_fn(params):
        d = tf.data.Dataset.from_tensor_slices(columns)
        if is_training:
            d = d.repeat().shuffle(100)
        return d.batch(params["batch_size"], drop_remainder=drop_remainder)
    return input_fn


# ---------------------------------------------------------------------------
# Model, loss and metrics
# ---------------------------------------------------------------------------

def create_model(bert_config, num_labels, use_one_hot_embeddings=False):
    """The classifier: BERT, dropout 0.1 on the pooled output, a linear layer.

    With num_labels == 1 the single output is a regression score.
    """
    return modeling.BertClassifier(bert_config, num_labels,
                                   use_one_hot_embeddings=use_one_hot_embeddings)


def compute_loss(logits, label_ids, num_labels, regression=False):
    """Returns (mean loss, per-example loss, probabilities or predictions).

    Classification: cross-entropy of the softmax; regression: squared error of
    the single output, whose value is returned as the prediction.
    """
    logits = tf.cast(logits, tf.float32)
    if regression:
        predictions = logits[:, 0]
        per_example = tf.square(predictions - tf.cast(label_ids, tf.float32))
        return tf.reduce_mean(per_example), per_example, predictions
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    one_hot = tf.one_hot(label_ids, depth=num_labels, dtype=tf.float32)
    per_example = -tf.reduce_sum(one_hot * log_probs, axis=-1)
    return tf.reduce_mean(per_example), per_example, tf.nn.softmax(logits, axis=-1)


def _f1(labels, predictions, positive=1):
    tp = np.sum((predictions == positive) & (labels == positive))
    fp = np.sum((predictions == positive) & (labels != positive))
    fn = np.sum((predictions != positive) & (labels == positive))
    if tp == 0:
        return 0.0
    precision = tp / (tp + fp)
    recall = tp / (tp + fn)
    return 2 * precision * recall / (precision + recall)


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


# Extra GLUE metric(s) reported per task, on top of accuracy and loss.
_TASK_METRICS = {
    MrpcProcessor: ("f1",),
    QqpProcessor: ("f1",),
    ColaProcessor: ("mcc",),
    StsbProcessor: ("pearson", "spearman"),
}


def eval_metrics(processor, per_example_loss, label_ids, outputs, is_real_example,
                 batch_ids):
    """The eval_results.txt values, computed the way the original Estimator did.

    eval_loss: mean per-example loss over the real examples; loss: the mean
    over batches of each batch's mean loss (real rows only); eval_accuracy for
    classification; plus the task's GLUE metric (eval_f1 / eval_mcc /
    eval_pearson and eval_spearman). Float values are numpy float32.
    """
    real = np.asarray(is_real_example) > 0
    losses = np.asarray(per_example_loss, np.float64)[real]
    labels = np.asarray(label_ids)[real]
    outputs = np.asarray(outputs)[real]
    batch_ids = np.asarray(batch_ids, np.int64)[real]
    batch_sums = np.bincount(batch_ids, weights=losses)
    batch_sizes = np.bincount(batch_ids)
    batch_means = batch_sums[batch_sizes > 0] / batch_sizes[batch_sizes > 0]
    result = {
        "eval_loss": np.float32(losses.mean() if losses.size else 0.0),
        "loss": np.float32(batch_means.mean() if batch_means.size else 0.0),
    }
    wanted = _TASK_METRICS.get(type(processor), ())
    if processor.is_regression:
        if "pearson" in wanted:
            pearson, spearman = _correlations(labels.astype(np.float64),
                                              outputs.astype(np.float64))
            result["eval_pearson"] = np.float32(pearson)
            result["eval_spearman"] = np.float32(spearman)
        return result
    predictions = np.argmax(outputs, axis=-1)
    result["eval_accuracy"] = np.float32(np.mean(predictions == labels) if labels.size else 0.0)
    if "f1" in wanted:
        result["eval_f1"] = np.float32(_f1(labels, predictions))
    if "mcc" in wanted:
        result["eval_mcc"] = np.float32(_matthews(labels, predictions))
    return result


def write_eval_results(path, result):
    """`key = value` lines sorted by key, as the original eval_results.txt."""
    with input_pipeline.atomic_open(path, "w") as f:
        logging.info("***** Eval results *****")
        for key in sorted(result):
            logging.info("  %s = %s", key, str(result[key]))
            f.write("%s = %s\n" % (key, str(result[key])))


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------

def run(fv):
    """Trains, evaluates and/or predicts as the do_* flags ask."""
    flags_common.require(fv, _REQUIRED_FLAGS)
    tokenization.validate_case_matches_checkpoint(fv.do_lower_case, fv.init_checkpoint)
    if not (fv.do_train or fv.do_eval or fv.do_predict):
        raise ValueError("nothing to do: pass at least one of --do_train, --do_eval and "
                         "--do_predict")

    bert_config = modeling.BertConfig.from_json_file(fv.bert_config_file)
    if fv.max_seq_length > bert_config.max_position_embeddings:
        raise ValueError(
            "--max_seq_length=%d is longer than the %d positions the BERT model has "
            "(max_position_embeddings in --bert_config_file)"
            % (fv.max_seq_length, bert_config.max_position_embeddings))

    tf.io.gfile.makedirs(fv.output_dir)
    processor = get_processor(fv.task_name, fv.xnli_language)
    label_list = processor.get_labels()
    regression = processor.is_regression
    num_labels = len(label_list)
    tokenizer = tokenization.FullTokenizer(vocab_file=fv.vocab_file,
                                           do_lower_case=fv.do_lower_case)
    spec = record_spec(fv.max_seq_length, regression)

    train_examples = None
    num_train_steps = 0
    num_warmup_steps = 0
    if fv.do_train:
        train_examples = processor.get_train_examples(fv.data_dir)
        num_train_steps = int(len(train_examples) / fv.train_batch_size * fv.num_train_epochs)
        num_warmup_steps = int(num_train_steps * fv.warmup_proportion)
    # Read (and so check) every data file the run needs before any work starts.
    eval_examples = processor.get_dev_examples(fv.data_dir) if fv.do_eval else None
    predict_examples = processor.get_test_examples(fv.data_dir) if fv.do_predict else None

    training.set_seed(fv.seed)
    strategy = training.get_strategy(fv)
    training.configure_precision(fv)
    cfg = training.RunConfig.from_flags(
        fv, output_dir=fv.output_dir, learning_rate=fv.learning_rate,
        num_train_steps=num_train_steps, num_warmup_steps=num_warmup_steps,
        init_checkpoint=fv.init_checkpoint)

    def model_fn():
        return create_model(bert_config, num_labels, use_one_hot_embeddings=fv.use_tpu)

    # Restores the latest checkpoint of output_dir, else loads init_checkpoint.
    runner = training.Runner(strategy, model_fn, cfg, for_training=fv.do_train)

    def loss_fn(model, features, is_training):
        logits = model(features, training=is_training)["logits"]
        loss, _, _ = compute_loss(logits, features["label_ids"], num_labels, regression)
        return loss, {}

    def predict_fn(model, features):
        logits = model(features, training=False)["logits"]
        _, per_example, outputs = compute_loss(logits, features["label_ids"], num_labels,
                                               regression)
        return {"per_example_loss": per_example, "outputs": outputs,
                "label_ids": features["label_ids"],
                "is_real_example": features["is_real_example"]}

    if fv.do_train:
        train_file = os.path.join(fv.output_dir, "train.tf_record")
        file_based_convert_examples_to_features(train_examples, label_list, fv.max_seq_length,
                                                tokenizer, train_file)
        logging.info("***** Running training *****")
        logging.info("  Num examples = %d", len(train_examples))
        logging.info("  Batch size = %d", fv.train_batch_size)
        logging.info("  Num steps = %d", num_train_steps)

        def train_dataset(input_context=None):
            return input_pipeline.make_dataset(
                [train_file], spec, fv.train_batch_size, is_training=True,
                input_context=input_context, seed=fv.seed)
        runner.train(train_dataset, loss_fn, global_batch_size=fv.train_batch_size)

    if fv.do_eval:
        _evaluate(fv, runner, processor, eval_examples, tokenizer, spec, predict_fn)
    if fv.do_predict:
        _predict(fv, runner, processor, predict_examples, tokenizer, spec, predict_fn)


def _ordered_dataset(path, spec, batch_size):
    """dataset_fn reading `path` once, in order, the last batch padded (not dropped)."""
    def dataset_fn(input_context=None):
        return input_pipeline.make_dataset(
            [path], spec, batch_size, is_training=False, input_context=input_context,
            pad_final_batch=True)
    return dataset_fn


def _evaluate(fv, runner, processor, examples, tokenizer, spec, predict_fn):
    """Writes eval.tf_record, runs the model over it and writes eval_results.txt."""
    eval_file = os.path.join(fv.output_dir, "eval.tf_record")
    file_based_convert_examples_to_features(examples, processor.get_labels(),
                                            fv.max_seq_length, tokenizer, eval_file)
    logging.info("***** Running evaluation *****")
    logging.info("  Num examples = %d", len(examples))
    logging.info("  Batch size = %d", fv.eval_batch_size)
    keys = ("per_example_loss", "outputs", "label_ids", "is_real_example")
    columns = {key: [] for key in keys + ("batch_ids",)}
    batches = runner.predict(_ordered_dataset(eval_file, spec, fv.eval_batch_size), predict_fn)
    for batch_index, out in enumerate(batches):
        for key in keys:
            columns[key].append(np.asarray(out[key]))
        columns["batch_ids"].append(np.full(len(out["is_real_example"]), batch_index))
    merged = {key: np.concatenate(parts) if parts else np.zeros([0])
              for key, parts in columns.items()}
    num_real = int(np.sum(merged["is_real_example"] > 0))
    if num_real != len(examples):
        raise RuntimeError("evaluated %d examples, expected %d" % (num_real, len(examples)))
    result = eval_metrics(processor, merged["per_example_loss"], merged["label_ids"],
                          merged["outputs"], merged["is_real_example"], merged["batch_ids"])
    result["global_step"] = runner.global_step
    write_eval_results(os.path.join(fv.output_dir, "eval_results.txt"), result)
    return result


def _predict(fv, runner, processor, examples, tokenizer, spec, predict_fn):
    """Writes predict.tf_record and test_results.tsv (one line per test example)."""
    predict_file = os.path.join(fv.output_dir, "predict.tf_record")
    file_based_convert_examples_to_features(examples, processor.get_labels(),
                                            fv.max_seq_length, tokenizer, predict_file)
    logging.info("***** Running prediction *****")
    logging.info("  Num examples = %d", len(examples))
    logging.info("  Batch size = %d", fv.predict_batch_size)
    output_path = os.path.join(fv.output_dir, "test_results.tsv")
    num_written = 0
    batches = runner.predict(_ordered_dataset(predict_file, spec, fv.predict_batch_size),
                             predict_fn)
    with input_pipeline.atomic_open(output_path, "w") as writer:
        for out in batches:
            values = np.asarray(out["outputs"], np.float32)
            for row, real in zip(values, np.asarray(out["is_real_example"])):
                if real:
                    # str() of float32 values: the original file's number format
                    writer.write("\t".join("%s" % v for v in np.atleast_1d(row)) + "\n")
                    num_written += 1
        if num_written != len(examples):
            raise RuntimeError("predicted %d examples, expected %d"
                               % (num_written, len(examples)))
    logging.info("Wrote %d predictions to %s", num_written, output_path)


def main():
    flags_common.run_cli(define_flags, run)


if __name__ == "__main__":
    main()
