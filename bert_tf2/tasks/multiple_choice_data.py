"""Multiple-choice data (SWAG, and any JSON-lines set): examples, features, files.

Two readers:
- SWAG's CSV as distributed (train.csv, val.csv, test.csv):
  `,video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,...,ending3,label`
  (the test split has no label). The context is sent1; each choice is
  sent2 + " " + ending_i, the way the BERT paper builds SWAG's second segment
  (the start of the continuation followed by one ending).
- JSON lines (train.jsonl, dev.jsonl, test.jsonl): {"id": ... (optional: a string or
  number, kept as the example's id; default the line's index among the examples),
  "context": ..., "question": ... (optional), "endings": [...], "label": int
  (optional in test)}; any number of
  choices, the same on every line of a file. The second segment is
  question + " " + ending (or the ending alone).

Each choice becomes [CLS] context [SEP] second segment [SEP], truncated with the
reference's pair truncation; an example's features are [num_choices, max_seq_length].
"""
import collections
import csv
import json
import math
import os

import tensorflow as tf

from bert_tf2 import fileutil
from bert_tf2 import input_pipeline
from bert_tf2.tasks import data_tables

# One question: its id, context, the second segment of every choice and the label.
Example = collections.namedtuple("Example", "guid context choices label")

_SWAG_FILES = {"train": "train.csv", "dev": "val.csv", "test": "test.csv"}
_JSONL_FILES = {"train": "train.jsonl", "dev": "dev.jsonl", "test": "test.jsonl"}
TASKS = ("swag", "jsonl")


def _label(value, num_choices, where):
    """A label cell or JSON value as a choice index; ValueError naming `where` if not one
    (True / False too: a label is a choice's index, not a yes / no)."""
    if isinstance(value, bool):
        raise ValueError("%s: label %r is a bool, not a choice index (an integer in [0, %d))"
                         % (where, value, num_choices))
    try:
        label = int(value)
    except (TypeError, ValueError):
        raise ValueError("%s: label %r is not an integer" % (where, value)) from None
    if label != value and str(label) != str(value).strip():
        raise ValueError("%s: label %r is not an integer" % (where, value))
    if not 0 <= label < num_choices:
        raise ValueError("%s: label %r is not a choice index in [0, %d)"
                         % (where, value, num_choices))
    return label


def _id(value, index):
    """A JSON line's "id" as written (a string or number), else str() of it or the index
    (missing: None, NaN, NA)."""
    if data_tables.is_missing(value) or isinstance(value, float) and not math.isfinite(value):
        return str(index)
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return value
    return str(value)


def read_swag(path, is_test=False):
    """SWAG CSV rows -> Examples (four choices)."""
    reader = csv.reader(fileutil.split_lines(fileutil.read_text(path), keepends=True))
    header = next(reader, None)
    if not header:
        raise ValueError("%s: empty file" % path)
    column = {name: i for i, name in enumerate(header)}
    needed = ["sent1", "sent2"] + ["ending%d" % i for i in range(4)] + (
        [] if is_test else ["label"])
    missing = [name for name in needed if name not in column]
    if missing:
        raise ValueError("%s, line 1: no %s column (is this SWAG's CSV?)"
                         % (path, ", ".join(missing)))
    examples = []
    for row in reader:
        where = "%s, line %d" % (path, reader.line_num)
        if len(row) < len(header):
            raise ValueError("%s: %d columns, the header has %d" % (where, len(row),
                                                                     len(header)))
        endings = [row[column["ending%d" % i]].strip() for i in range(4)]
        if not all(endings):
            raise ValueError("%s: ending%d is empty" % (where, endings.index("")))
        label = None if is_test else _label(row[column["label"]], 4, where)
        stem = row[column["sent2"]].strip()
        examples.append(Example(row[column.get("", 0)] or str(len(examples)),
                                row[column["sent1"]],
                                [("%s %s" % (stem, e)).strip() for e in endings], label))
    return examples


def read_jsonl(path, is_test=False):
    """JSON-lines multiple-choice examples (a fixed number of choices per file)."""
    def records():
        for number, line in enumerate(fileutil.split_lines(fileutil.read_text(path)), 1):
            if not line.strip():
                continue
            where = "%s, line %d" % (path, number)
            try:
                yield where, json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError("%s: not valid JSON (%s)" % (where, e.msg)) from None
    return _examples(records(), path, is_test)


def examples_of_records(records, name, is_test=False):
    """The examples of in-memory records, each a dict as a JSON line of read_jsonl holds
    ({"context", "question" (optional), "endings", "label", "id" (optional)}); `name`
    ("data_dir['train']") and the row's index name a bad one."""
    return _examples(((data_tables.row_name(name, index), record) for index, record in records),
                     name, is_test)


def _examples(records, source, is_test):
    """Examples of (where, record) pairs: the rules of read_jsonl's lines."""
    examples, num_choices = [], None
    for where, record in records:
        endings = record.get("endings") if isinstance(record, dict) else None
        if isinstance(endings, tuple):
            endings = list(endings)
        if not isinstance(endings, list) or len(endings) < 2 or not all(
                isinstance(e, str) and e.strip() for e in endings):
            raise ValueError("%s: \"endings\" must be a list of two or more non-empty strings"
                             % where)
        if num_choices is None:
            num_choices = len(endings)
        elif len(endings) != num_choices:
            raise ValueError("%s: %d endings, earlier lines have %d" % (where, len(endings),
                                                                        num_choices))
        if not isinstance(record.get("context"), str):
            raise ValueError("%s: no \"context\" string" % where)
        question = record.get("question") or ""
        if record.get("label") is None:
            if not is_test:
                raise ValueError("%s: no \"label\"" % where)
            label = None
        else:
            label = _label(record["label"], num_choices, where)
        examples.append(Example(_id(record.get("id"), len(examples)), record["context"],
                                [("%s %s" % (question, e)).strip() for e in endings], label))
    if not examples:
        raise ValueError("%s: no examples" % source)
    return examples


def read_examples(task_name, data_dir, split):
    """The examples of `split` ("train", "dev", "test") of a task in data_dir."""
    task = task_name.lower()
    if task not in TASKS:
        raise ValueError("unknown --task_name %r; known: %s" % (task_name, ", ".join(TASKS)))
    if data_tables.is_tables(data_dir):  # from Python: {"train": records, ...}
        if task != "jsonl":
            raise ValueError("data_dir as a dict of tables is read by --task_name=jsonl "
                             "only, not --task_name=%s" % task_name)
        data_tables.check_splits(data_dir, {split: "its examples"})
        return examples_of_records(data_tables.records(data_dir, split),
                                   data_tables.name(split), is_test=split == "test")
    files, read = (_SWAG_FILES, read_swag) if task == "swag" else (_JSONL_FILES, read_jsonl)
    examples = read(os.path.join(data_dir, files[split]), is_test=split == "test")
    if not examples:
        raise ValueError("%s: no examples" % os.path.join(data_dir, files[split]))
    return examples


def example_features(example, max_seq_length, tokenizer):
    """(input_ids, input_mask, segment_ids), each [num_choices][max_seq_length]."""
    context = tokenizer.tokenize(example.context)
    rows = ([], [], [])
    for choice in example.choices:
        _, ids, mask, segments = input_pipeline.pack_pair(
            list(context), tokenizer.tokenize(choice), max_seq_length, tokenizer)
        for row, values in zip(rows, (ids, mask, segments)):
            row.append(values)
    return rows


def record_spec(num_choices, seq_length):
    """Feature spec of the files written by write_features."""
    seq = tf.io.FixedLenFeature([num_choices, seq_length], tf.int64)
    return {"input_ids": seq, "input_mask": seq, "segment_ids": seq,
            "label_ids": tf.io.FixedLenFeature([], tf.int64)}


def write_features(examples, path, max_seq_length, tokenizer):
    """Writes the examples' features to a TFRecord file; returns the count."""
    with input_pipeline.RecordWriter(path) as writer:
        for example in examples:
            ids, mask, segments = example_features(example, max_seq_length, tokenizer)
            writer.write({
                "input_ids": input_pipeline.int_feature([v for r in ids for v in r]),
                "input_mask": input_pipeline.int_feature([v for r in mask for v in r]),
                "segment_ids": input_pipeline.int_feature([v for r in segments for v in r]),
                "label_ids": input_pipeline.int_feature([example.label or 0]),
            })
    return writer.num_written

