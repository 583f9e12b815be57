"""Your own data files, no code: run_classifier --task_name=csv, tsv or jsonl.

--data_dir holds train.<ext>, dev.<ext> and test.<ext> (ext = the task name):
- csv: Python's csv rules (a field in double quotes may hold commas, newlines and
  doubled quotes); the first row names the columns;
- tsv: one row per line, cells separated by tabs, quotes taken literally (as the
  GLUE files are read); the first row names the columns;
- jsonl: one JSON object per line (blank lines skipped).
In a csv / tsv file of one column (a test file of single texts) a blank line is an empty
text, a row as any other (one prediction per line, in order; warned).
Columns are found by name: --text_a_column (default text), --text_b_column (none:
single texts) and --label_column (default label); a column named "id" (else "guid")
gives each example its id (test_predictions.jsonl's "id"; default "test-<index>");
other columns are ignored, and a test file may lack the label column. Labels are kept
as written (a JSON number as its text); the label list is --labels_file, else every
label of train sorted. With --task_type=regression the label is a real number (STS-B's
model, loss and metrics); with --task_type=multilabel a set of names: "a,b" in a cell,
or a JSON list.

Every error names the file and line (and, for a missing column, the columns there are).
"""
import collections
import contextlib
import csv
import io
import json
import os
import math
import sys

from absl import flags
from absl import logging

from bert_tf2 import fileutil
from bert_tf2.tasks import data_tables
from bert_tf2.tasks import glue_data
from bert_tf2.tasks import multilabel_data

FORMATS = ("csv", "tsv", "jsonl")
TASK_TYPES = ("classification", "regression", "multilabel")
SPLITS = ("train", "dev", "test")
# Columns whose value becomes an example's id (its guid), the first found: no flag.
ID_COLUMNS = ("id", "guid")


def define_flags(fv):
    """--text_a_column, --text_b_column, --label_column and --task_type."""
    flags.DEFINE_string("text_a_column", "text", "--task_name=csv/tsv/jsonl: the column "
                        "(header name or JSON key) holding the text.", flag_values=fv)
    flags.DEFINE_string("text_b_column", None, "--task_name=csv/tsv/jsonl: the column of "
                        "the second text of a sentence pair (default: single texts).",
                        flag_values=fv)
    flags.DEFINE_string("label_column", "label", "--task_name=csv/tsv/jsonl: the column "
                        "of the label (test files may lack it).", flag_values=fv)
    flags.DEFINE_enum("task_type", "classification", list(TASK_TYPES),
                      "--task_name=csv/tsv/jsonl: classification (one label per text, "
                      "softmax), regression (a real number: one output, squared error, "
                      "Pearson/Spearman) or multilabel (a set of labels per text).",
                      flag_values=fv)


def is_file_task(task_name):
    """True for --task_name=csv, tsv or jsonl (case-insensitive)."""
    return bool(task_name) and task_name.lower() in FORMATS


Columns = collections.namedtuple("Columns", "text_a text_b label")


class Row(object):
    """One record of a data file: its fields by column name, and where it starts."""

    def __init__(self, fields, path, line, last_line=None, unit="line"):
        self.fields = fields
        self.path = path
        self.line = line
        self.last_line = line if last_line is None else last_line
        self.unit = unit  # "row" for a table in memory (data_tables): its row index

    def where(self):
        """"file, line N" (or "lines N-M" for a CSV record spanning lines); a table in
        memory: "data_dir['train'] row N"."""
        if self.unit != "line":
            return data_tables.row_name(self.path, self.line)
        if self.last_line != self.line:
            return "%s, lines %d-%d" % (self.path, self.line, self.last_line)
        return "%s, line %d" % (self.path, self.line)


# ---------------------------------------------------------------------------
# One reader per format: path -> Rows, the wanted columns checked
# ---------------------------------------------------------------------------

@contextlib.contextmanager
def _large_fields():
    """Lets the csv module read fields longer than its 128 KB default (long documents)."""
    old = csv.field_size_limit()
    csv.field_size_limit(min(sys.maxsize, 2 ** 31 - 1))
    try:
        yield
    finally:
        csv.field_size_limit(old)


_COLUMN_FLAGS = "--text_a_column, --text_b_column, --label_column"


def _header(path, line, cells, wanted, optional):
    """{column name: index} of a header row; ValueError naming what is missing."""
    names = [name.strip() for name in cells]
    missing = [name for name in wanted if name not in names]
    if missing and not set(wanted + optional) & set(names):
        raise ValueError("%s, line %d: expected a header row naming the columns %s (%s); "
                         "the first row holds %s"
                         % (path, line, ", ".join(wanted), _COLUMN_FLAGS,
                            ", ".join(repr(c) for c in cells)))
    if missing:
        raise ValueError("%s, line %d: no column %r (%s); the header's columns are %s"
                         % (path, line, missing[0], _COLUMN_FLAGS,
                            ", ".join(repr(c) for c in names)))
    for name in set(wanted + optional) & set(names):
        if names.count(name) > 1:
            raise ValueError("%s, line %d: column %r appears %d times in the header"
                             % (path, line, name, names.count(name)))
    return {name: names.index(name) for name in wanted + optional if name in names}


def _delimited_rows(path, wanted, optional, delimiter, quoting):
    """Rows of a CSV/TSV file with a header: each record as wide as the header."""
    text = fileutil.read_text(path)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, quoting=quoting)
    rows, columns, width, start, empty, blank = [], None, 0, 1, [], []
    with _large_fields():
        try:
            for cells in reader:
                first, start = start, reader.line_num + 1
                if not cells and width == 1:  # a one-column file's empty text: a row
                    cells = [""]
                    empty.append(first)
                if not cells:  # a blank line: no row of a file of several columns
                    if columns is not None:
                        blank.append(first)
                    continue
                if columns is None:
                    columns = _header(path, first, cells, wanted, optional)
                    width = len(cells)
                    continue
                row = Row(None, path, first, reader.line_num)
                if len(cells) != width:
                    raise ValueError("%s: %d field%s, the header has %d (a missing "
                                     "field, or a quote left open?)"
                                     % (row.where(), len(cells), "s"[len(cells) == 1:],
                                        width))
                row.fields = {name: cells[i] for name, i in columns.items()}
                rows.append(row)
        except csv.Error as e:
            raise ValueError("%s, line %d: %s" % (path, reader.line_num, e)) from None
    if columns is None:
        raise ValueError("%s: the file is empty (expected a header row naming the columns "
                         "%s)" % (path, ", ".join(wanted)))
    if empty:
        logging.warning("%s: %d blank line%s (first: line %d) after the header of this "
                        "one-column file, each read as an empty text (one row per line)",
                        path, len(empty), "s"[len(empty) == 1:], empty[0])
    if blank:
        logging.warning("%s: %d blank line%s (first: line %d) skipped, no rows of this "
                        "%d-column file (a row of empty fields keeps its separators)",
                        path, len(blank), "s"[len(blank) == 1:], blank[0], width)
    return rows


def read_csv(path, wanted, optional=()):
    """The records of a CSV file (Python's csv rules) with a header row."""
    return _delimited_rows(path, list(wanted), list(optional), ",", csv.QUOTE_MINIMAL)


def read_tsv(path, wanted, optional=()):
    """The records of a tab-separated file (quotes literal) with a header row."""
    return _delimited_rows(path, list(wanted), list(optional), "\t", csv.QUOTE_NONE)


def read_jsonl(path, wanted, optional=()):
    """The records of a JSON-lines file: one object per line holding the `wanted` keys."""
    rows = []
    for number, line in enumerate(fileutil.split_lines(fileutil.read_text(path)), 1):
        if not line.strip():
            continue
        row = Row(None, path, number)
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError("%s: not valid JSON (%s)" % (row.where(), e.msg)) from None
        if not isinstance(record, dict):
            raise ValueError("%s: expected a JSON object ({...}), found %s"
                             % (row.where(), type(record).__name__))
        rows.append(_with_fields(row, record, wanted, optional, "key", "object's keys"))
    return rows


_READERS = {"csv": read_csv, "tsv": read_tsv, "jsonl": read_jsonl}


def read_table(data_dir, split, wanted, optional=()):
    """The rows of the table data_dir[split] (data_tables), read as read_jsonl reads
    objects: the `wanted` columns in every row."""
    where = data_tables.name(split)
    rows = []
    for index, record in data_tables.records(data_dir, split):
        rows.append(_with_fields(Row(None, where, index, unit="row"), record, wanted,
                                 optional, "column", "row's columns"))
    return rows


def _with_fields(row, record, wanted, optional, kind, keys):
    """`row` with the fields of the dict `record`: every `wanted` one (else a ValueError
    naming the row and the first missing `kind`), and the `optional` ones it has."""
    missing = [name for name in wanted if name not in record]
    if missing:
        raise ValueError("%s: no %s %r (%s); the %s are %s"
                         % (row.where(), kind, missing[0], _COLUMN_FLAGS, keys,
                            ", ".join(repr(k) for k in record)))
    row.fields = {name: record[name] for name in list(wanted) + list(optional)
                  if name in record}
    return row


# ---------------------------------------------------------------------------
# Cells -> texts and labels
# ---------------------------------------------------------------------------

def _shown(value):
    """A cell's value for a message: its JSON, else (a table in memory) its repr()."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _text(row, column):
    value = row.fields[column]
    if not isinstance(value, str):
        raise ValueError("%s: %r is %s, not a text" % (row.where(), column, _shown(value)))
    return value


def _missing_label(row, column, value):
    """ValueError for a label cell that holds none (None / NaN / NA): never a class "NaN"."""
    del value
    raise ValueError("%s: column %r holds no label (None / NaN / NA / null); every train "
                     "and dev row needs one" % (row.where(), column))


def _label_text(row, column):
    """A single label as written: a string, or the text of a JSON number."""
    value = row.fields[column]
    if data_tables.is_missing(value):
        _missing_label(row, column, value)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("%s: %r is %r, not a label (a string or a finite number)"
                         % (row.where(), column, value))
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError("%s: %r is %s, not a label (a string or a number)"
                         % (row.where(), column, _shown(value)))
    return value if isinstance(value, str) else json.dumps(value)


def _label_set(row, column):
    """A multi-label cell: "a,b" (blanks dropped), or a JSON list of names."""
    value = row.fields[column]
    if data_tables.is_missing(value):
        _missing_label(row, column, value)
    if isinstance(value, str):
        return multilabel_data.parse_label_cell(value)
    if not isinstance(value, (list, tuple)):
        raise ValueError("%s: %r is %s; expected a list of labels or a string \"a,b\""
                         % (row.where(), column, _shown(value)))
    names = set()
    for item in value:
        name = _label_text(Row({column: item}, row.path, row.line, row.last_line, row.unit),
                           column).strip()
        if multilabel_data.LABEL_SEPARATOR in name:
            raise ValueError("%s: label %r holds %r, which a label may not hold"
                             % (row.where(), name, multilabel_data.LABEL_SEPARATOR))
        names.add(name)
    return tuple(sorted(names - {""}))


def _example_id(row, split, index):
    """The row's id column (ID_COLUMNS, the first there) as written, else "<split>-<index>".

    A string or a JSON number is kept; an empty cell, null, NaN or a JSON list / object
    gives the default (files that worked before the id rule still do).
    """
    for column in ID_COLUMNS:
        value = row.fields.get(column)
        if isinstance(value, bool) or not isinstance(value, (str, int, float)) or (
                isinstance(value, float) and not math.isfinite(value)):
            continue
        if not isinstance(value, str) or value.strip():
            return value
    return "%s-%d" % (split, index)


def warn_numeric_twins(labels, path):
    """Warns (one line) when labels differ as text but are one number ("1" and "1.0").

    They stay two labels, as written: a warning, not an error, since a task may mean it.
    """
    by_value = collections.defaultdict(list)
    for label in labels:
        try:
            value = float(label)
        except ValueError:
            continue
        if not math.isnan(value):
            by_value[value].append(label)
    twins = sorted(sorted(names) for names in by_value.values() if len(names) > 1)
    if twins:
        logging.warning("%s: the labels %s are the same number written differently; they "
                        "are %d different labels (write each one way if they are one)",
                        path, " and ".join(repr(n) for n in twins[0]), len(twins[0]))


class FileProcessor(glue_data.DataProcessor):
    """The examples of train/dev/test.<format> in data_dir, columns found by name.

    Args:
      file_format: "csv", "tsv" or "jsonl".
      columns: a Columns(text_a, text_b or None, label).
      task_type: one of TASK_TYPES.
      labels: the label list, or None to take the sorted labels of train.
      threshold: multilabel: the probability from which a label is predicted.
    """

    def __init__(self, file_format, columns, task_type="classification", labels=None,
                 threshold=0.5):
        self.file_format = file_format
        self.columns = columns
        self.task_type = task_type
        self.is_regression = task_type == "regression"
        self.is_multilabel = task_type == "multilabel"
        self.threshold = threshold
        if self.is_regression:
            labels = [None]
        self._labels = None if labels is None else list(labels)
        # The labels in the order train.<format> first names them (once it is read).
        self.train_label_order = None
        if columns.text_b and columns.text_b == columns.text_a:
            logging.warning("--text_b_column=%s is also --text_a_column: every example's "
                            "pair is the same text twice", columns.text_b)

    def get_labels(self):
        """The label list ([None] for regression); known once train is read, if not given."""
        if self._labels is None:
            raise ValueError("the label list is not known before train.%s is read"
                             % self.file_format)
        return list(self._labels)

    def get_train_examples(self, data_dir):
        """The examples of train.<format>; without a given list, its labels become the list."""
        path = self.path(data_dir, "train")
        examples = self._examples(data_dir, "train")
        if not examples:
            raise ValueError("%s: no examples" % path)
        found = {l for e in examples for l in (e.label if self.is_multilabel else [e.label])}
        if not self.is_regression:
            warn_numeric_twins(found, path)
        if self._labels is None:
            if not found:
                raise ValueError("%s: no example has a label, so the label list is empty "
                                 "(give it with --labels_file)" % path)
            self._labels = sorted(found)
        if not self.is_regression and not self.is_multilabel and len(found) == 1:
            logging.warning("%s: every example has the label %r: the model learns one class "
                            "(it predicts %r for any text)", path, next(iter(found)),
                            next(iter(found)))
        if not self.is_regression and not self.is_multilabel:
            self.train_label_order = [label for label in dict.fromkeys(
                e.label for e in examples) if label in self._labels]
        return examples

    @property
    def task_metrics(self):
        """The extra metrics of eval_results.txt (glue_data.eval_metrics): eval_mcc for a
        classification task of 2 labels."""
        binary = not (self.is_regression or self.is_multilabel) and len(self._labels or ()) == 2
        return ("mcc",) if binary else ()

    def get_dev_examples(self, data_dir):
        """The examples of dev.<format> (every label must be in the label list)."""
        return self._examples(data_dir, "dev")

    def get_test_examples(self, data_dir):
        """The examples of test.<format>, placeholder labels (a label column is ignored)."""
        return self._examples(data_dir, "test")

    def path(self, data_dir, split):
        """data_dir/<split>.<format>; for a dict of tables (data_tables) data_dir['split']."""
        if data_tables.is_tables(data_dir):
            return data_tables.name(split)
        return os.path.join(data_dir, "%s.%s" % (split, self.file_format))

    def _examples(self, data_dir, split):
        c = self.columns
        texts = [c.text_a] + ([c.text_b] if c.text_b else [])
        wanted, optional = (texts, [c.label]) if split == "test" else (texts + [c.label], [])
        optional = optional + list(ID_COLUMNS)
        if data_tables.is_tables(data_dir):
            data_tables.check_splits(data_dir, {split: "its examples"})
            rows = read_table(data_dir, split, wanted, optional)
        else:
            rows = _READERS[self.file_format](self.path(data_dir, split), wanted, optional)
        examples, unknown = [], []
        for row in rows:
            text_b = _text(row, c.text_b) if c.text_b else None
            if split == "test":
                label = self._placeholder()
                unknown += self._unknown_test_labels(row)
            else:
                label = self._label(row)
            examples.append(glue_data.InputExample(_example_id(row, split, len(examples)),
                                                   _text(row, c.text_a), text_b or None, label))
        if unknown:
            logging.warning("%s: label %r is not in the label list (%d such label%s); test "
                            "labels are not read, so its predictions are still written",
                            unknown[0][0], unknown[0][1], len(unknown),
                            "s"[len(unknown) == 1:])
        return examples

    def _unknown_test_labels(self, row):
        """[(where, label)] of a test row's labels missing from the label list (a test
        file's label column is ignored: a label outside the list is warned, not refused)."""
        column = self.columns.label
        if self.is_regression or self._labels is None or column not in row.fields:
            return []
        try:
            names = (_label_set(row, column) if self.is_multilabel
                     else [_label_text(row, column).strip()])
        except ValueError:
            return []
        return [(row.where(), n) for n in names if n and n not in self._labels]

    def _placeholder(self):
        if self.is_multilabel:
            return ()
        return "0" if self.is_regression else self.get_labels()[0]

    def _label(self, row):
        """The row's label, checked against the label list once there is one."""
        column = self.columns.label
        if self.is_multilabel:
            names = _label_set(row, column)
            unknown = [n for n in names if self._labels is not None and n not in self._labels]
            if unknown:
                raise ValueError("%s: label %r is not in the label list (%s)"
                                 % (row.where(), unknown[0], ",".join(self._labels)))
            return names
        label = _label_text(row, column).strip()
        if self._labels is None:  # train, the list still to be made from its labels
            if not label:
                raise ValueError("%s: the label (column %r) is empty" % (row.where(), column))
            return label
        return self._checked_label(label, row)
