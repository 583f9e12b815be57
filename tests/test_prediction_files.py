"""prediction_files: test_results.tsv (the reference's) and test_predictions.jsonl beside it."""
import json

import numpy as np
import pytest

from bert_tf2.tasks import glue_data
from bert_tf2.tasks import prediction_files as pf

# Label names a JSON line must carry back unchanged: separators, quotes, non-ASCII,
# a backslash, a number.
_LABELS = ["a\tb", 'say "hi"\n', "naïve/日本", "\\", "x\u2028y", 7]


def _examples(ids):
    return [glue_data.InputExample(guid, "text") for guid in ids]


def test_classification_lines_round_trip_any_label(tmp_path):
    rows = np.float32([[0.1, 0.2, 0.3, 0.1, 0.25, 0.05], [0.5, 0.1, 0.1, 0.1, 0.1, 0.1]])
    results, predictions = pf.write(str(tmp_path), _examples(["x", 3]), iter(rows),
                                    lambda guid, row: pf.classification_record(guid, row,
                                                                               _LABELS))
    assert results == str(tmp_path / "test_results.tsv")
    assert predictions == str(tmp_path / "test_predictions.jsonl")
    # test_results.tsv unchanged: str() of the float32 values, no ids.
    assert (tmp_path / "test_results.tsv").read_text() == "".join(
        "\t".join(str(v) for v in row) + "\n" for row in rows)
    lines = (tmp_path / "test_predictions.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2  # "\u2028" escaped: splitlines() keeps one line per example
    assert "naïve/日本" in lines[0]  # readable, not escaped
    records = [json.loads(line) for line in lines]
    assert [r["id"] for r in records] == ["x", 3]
    assert [r["label"] for r in records] == ["naïve/日本", "a\tb"]
    assert list(records[0]["probabilities"]) == [str(l) for l in _LABELS]
    assert records[1]["probabilities"]["a\tb"] == float(np.float32(0.5))
    for record, row in zip(records, rows):
        assert np.float32(list(record["probabilities"].values())).tolist() == row.tolist()


def test_a_line_utf8_cannot_hold_is_escaped():
    record = {"id": "\ud800", "label": "é"}
    line = pf.json_line(record)
    assert line == '{"id": "\\ud800", "label": "\\u00e9"}\n'
    assert json.loads(line) == record
    assert pf.json_line({"label": "é"}) == '{"label": "é"}\n'
    assert pf.json_line({"label": "a\x85b\u2029"}) == '{"label": "a\\u0085b\\u2029"}\n'


def test_multilabel_regression_and_choice_records():
    row = np.float32([0.5, 0.49999, 0.9])
    assert pf.multilabel_record("i", row, ["a", "b", "c"], 0.5) == {
        "id": "i", "label": ["a", "c"],
        "probabilities": {"a": 0.5, "b": float(np.float32(0.49999)),
                          "c": float(np.float32(0.9))}}
    assert pf.multilabel_record("i", row, ["a", "b", "c"], 0.95)["label"] == []
    assert pf.regression_record("r", np.float32(3.1)) == {
        "id": "r", "label": float(np.float32(3.1))}
    assert pf.choice_record("q", np.float32([0.2, 0.7, 0.1])) == {
        "id": "q", "label": 1, "probabilities": [float(np.float32(v)) for v in (0.2, 0.7, 0.1)]}


def test_an_id_json_cannot_hold_is_written_as_text(tmp_path):
    pf.write(str(tmp_path), _examples([("a", 1), None]), np.float32([[1.0], [2.0]]),
             pf.regression_record)
    assert [json.loads(line) for line in
            (tmp_path / "test_predictions.jsonl").read_text().splitlines()] == [
                {"id": "('a', 1)", "label": 1.0}, {"id": "None", "label": 2.0}]


@pytest.mark.parametrize("count", [1, 3])
def test_a_wrong_count_leaves_neither_file(tmp_path, count):
    rows = np.float32([[0.5, 0.5]] * count)
    with pytest.raises(RuntimeError, match="predicted %d examples, expected 2" % count):
        pf.write(str(tmp_path), _examples(["a", "b"]), rows,
                 lambda guid, row: pf.classification_record(guid, row, ["0", "1"]))
    assert list(tmp_path.iterdir()) == []


def test_every_line_is_valid_json_nan_as_null():
    line = pf.json_line(pf.classification_record(
        3, [float("nan"), 0.5], ["a", "b"]))
    assert json.loads(line) == {"id": 3, "label": "a", "probabilities": {"a": None, "b": 0.5}}
    assert "NaN" not in line
