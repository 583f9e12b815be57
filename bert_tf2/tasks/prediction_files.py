"""The prediction files of run_classifier and run_multiple_choice: test_results.tsv and
test_predictions.jsonl beside it.

test_results.tsv is the reference's: one line per test example, its probabilities (or
regression score) tab-separated, str() of float32 values, no ids. test_predictions.jsonl
says the same for a person: one JSON object per test example, in test order,
  {"id": the example's id, "label": the predicted label, "probabilities": {label: p}}
(a multi-label task: "label" is the list of labels at or over --threshold; regression:
"label" is the score and there are no probabilities; multiple choice: "label" is the
choice index and "probabilities" a list, one per choice). Numbers are the float32 values
of test_results.tsv written by Python's json (repr of float(value)). Both files are
written atomically, and both or neither when the count of rows is not the count of
examples.

Contracts with the other modules (bert_tf2/tasks/prediction_files.py (run_classifier,
run_multiple_choice: --do_predict's files)):
`write(output_dir, examples, rows, record, what="examples") -> (test_results.tsv,
test_predictions.jsonl)`: both written in one pass, each through fileutil.atomic_open, and
neither when the rows are not one per example (RuntimeError "predicted N examples, expected
M").
- test_results.tsv: the reference's, unchanged: one line per example, `str()` of the float32
  values tab-separated (`results_line(row)`), no ids, no header.
- test_predictions.jsonl: one JSON object per example, in test order (`json_line`: UTF-8 as
  written, \\u escapes only for what UTF-8 cannot hold and for U+0085/2028/2029, so any label
  round-trips and str.splitlines() keeps one line per example). Numbers: float(float32 value),
  the values of test_results.tsv. One record function per task:
  - classification: `classification_record(guid, row, labels)` ->
    `{"id", "label": labels[argmax], "probabilities": {label: p}}`
  - multilabel: `multilabel_record(guid, row, labels, threshold)` ->
    `{"id", "label": [labels with p >= threshold], "probabilities": {label: p}}`
  - regression: `regression_record(guid, row)` -> `{"id", "label": score}`
  - multiple choice: `choice_record(guid, row)` ->
    `{"id", "label": argmax choice index, "probabilities": [p per choice]}`
  "id" is the example's guid: GLUE "test-N" (MNLI: "test-" + its index column), a
  csv/tsv/jsonl file's id/guid column, a multiple-choice file's id (SWAG's first column, a
  JSON line's "id"). An id or label that is not a string or a number (a --processor's own
  guid) is written as str(); JSON object keys are strings.
`result_files(output_dir, examples, rows, record, what="examples")` -> {"test_results",
"test_predictions": their paths}: write() and its "Wrote N predictions" log line, what the
tasks' write_result_files (trainer/runner_body.py's predict) return.
- run_classifier: the task object's `output_rows(predictions)` (one row per example,
  --long_text windows pooled) and `prediction_record(guid, row)`; the Result's
  outputs["test_results"] and outputs["test_predictions"]. run_multiple_choice: the same two
  outputs. run_ner writes its own readable test_predictions.txt (ner_data.write_predictions),
  no jsonl.
"""
import json
import math
import os

from absl import logging
import numpy as np

from bert_tf2 import fileutil

RESULTS_FILE = "test_results.tsv"
PREDICTIONS_FILE = "test_predictions.jsonl"


def results_line(row):
    """A test_results.tsv line: str() of the float32 values, tab-separated (the reference's)."""
    return "\t".join("%s" % v for v in np.atleast_1d(np.float32(row))) + "\n"


# Characters str.splitlines() breaks a line at that json.dumps leaves unescaped.
_LINE_BREAKS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _valid(value):
    """`value` with every NaN or infinity (a model gone wrong) as null: JSON has none."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _valid(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_valid(v) for v in value]
    return value


def json_line(record):
    """One JSON line (valid JSON: a NaN or infinity is null); characters kept as they are
    unless UTF-8 cannot hold them (escaped)."""
    record = _valid(record)
    line = json.dumps(record, ensure_ascii=False, allow_nan=False)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate in a label or id: \u escapes round-trip
        line = json.dumps(record, allow_nan=False)
    for char, escape in _LINE_BREAKS.items():  # only inside strings: escaping keeps the JSON
        line = line.replace(char, escape)
    return line + "\n"


def _name(label):
    """A label or id as JSON holds it: strings and numbers as they are, anything else str()."""
    if isinstance(label, (str, int, float)) and not isinstance(label, bool):
        return label
    return str(label)


def _key(label):
    """A label as a JSON object key (json makes numbers strings; so do we, first)."""
    name = _name(label)
    return name if isinstance(name, str) else json.dumps(name)


def _floats(row):
    """The float32 values of `row` as Python floats (what test_results.tsv prints)."""
    return [float(v) for v in np.atleast_1d(np.float32(row))]


def classification_record(guid, row, label_list):
    """{"id", "label" (argmax of the softmax), "probabilities" {label: p}} of one example."""
    values = _floats(row)
    return {"id": guid, "label": _name(label_list[int(np.argmax(np.float32(values)))]),
            "probabilities": {_key(l): p for l, p in zip(label_list, values)}}


def multilabel_record(guid, row, label_list, threshold):
    """{"id", "label" [labels with probability >= threshold], "probabilities"}."""
    values = np.atleast_1d(np.float32(row))
    chosen = values >= threshold  # the rule of multilabel_data's metrics
    return {"id": guid, "label": [_name(l) for l, on in zip(label_list, chosen) if on],
            "probabilities": {_key(l): p for l, p in zip(label_list, _floats(values))}}


def regression_record(guid, row):
    """{"id", "label": the predicted score}."""
    return {"id": guid, "label": _floats(row)[0]}


def choice_record(guid, row):
    """{"id", "label" (the index of the likeliest choice), "probabilities" [per choice]}."""
    values = _floats(row)
    return {"id": guid, "label": int(np.argmax(np.float32(values))), "probabilities": values}


def result(record):
    """What a predict() from Python returns for one input: its test_predictions.jsonl
    record without the "id"; a regression score as {"prediction": x}."""
    found = {key: value for key, value in record.items() if key != "id"}
    if "probabilities" not in found:
        return {"prediction": found["label"]}
    return found


def write(output_dir, examples, rows, record, what="examples"):
    """Writes test_results.tsv and test_predictions.jsonl in `output_dir`.

    Args:
      examples: the test examples, in order (each has a .guid: the "id"; a guid that is
        not a string or number is written as its str()).
      rows: their model outputs, in the same order (an iterable of float arrays).
      record: record(guid, row) -> the JSON object of one example.
      what: the word for the examples in the count error.
    Returns:
      (path of test_results.tsv, path of test_predictions.jsonl).
    """
    results_path = os.path.join(output_dir, RESULTS_FILE)
    predictions_path = os.path.join(output_dir, PREDICTIONS_FILE)
    count = 0
    with fileutil.atomic_open(results_path, "w") as results, \
            fileutil.atomic_open(predictions_path, "w") as predictions:
        for row in rows:
            results.write(results_line(row))
            if count < len(examples):
                predictions.write(json_line(record(_name(examples[count].guid), row)))
            count += 1
        if count != len(examples):
            raise RuntimeError("predicted %d %s, expected %d" % (count, what, len(examples)))
    return results_path, predictions_path


def result_files(output_dir, examples, rows, record, what="examples"):
    """write() (the same arguments), logged; returns {"test_results", "test_predictions":
    their paths}: the Result.outputs of a task's write_result_files."""
    results, predictions = write(output_dir, examples, rows, record, what)
    logging.info("Wrote %d predictions to %s and %s", len(examples), results, predictions)
    return {"test_results": results, "test_predictions": predictions}
