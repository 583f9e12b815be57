"""file_data: --task_name=csv / tsv / jsonl read by column name, labels as written."""
import json
import logging
import re

import pytest

from bert_tf2.tasks import file_data
from conftest import write_text

_COLUMNS = file_data.Columns("text", None, "label")


def _fields(examples):
    return [(e.guid, e.text_a, e.text_b, e.label) for e in examples]


def test_csv_quoted_commas_quotes_and_newlines(tmp_path):
    write_text(tmp_path / "train.csv",
               'id,text,label\n'
               '1,"Great screen, long battery.",positive\n'
               '2,"It broke.\nTwice, in fact.",negative\r\n'
               '\n'
               '3,"He said ""fine"".", neutral \n')
    write_text(tmp_path / "test.csv", "text,id\nno label column here,7\n")
    p = file_data.FileProcessor("csv", _COLUMNS)
    # The "id" column is each example's id (guid), as written.
    assert _fields(p.get_train_examples(str(tmp_path))) == [
        ("1", "Great screen, long battery.", None, "positive"),
        ("2", "It broke.\nTwice, in fact.", None, "negative"),
        ("3", 'He said "fine".', None, "neutral")]
    assert p.get_labels() == ["negative", "neutral", "positive"]  # sorted
    # Test files may lack the label column: the first label is the placeholder.
    assert _fields(p.get_test_examples(str(tmp_path))) == [
        ("7", "no label column here", None, "negative")]


def test_id_or_guid_column_is_the_example_id(tmp_path):
    # "id" first, else "guid"; a JSON number kept as a number; an empty cell, null or a
    # list gives the default "<split>-<index>".
    write_text(tmp_path / "test.tsv", "guid\ttext\nq-1\tone\n\ttwo\n")
    p = file_data.FileProcessor("tsv", _COLUMNS, labels=["a"])
    assert [e.guid for e in p.get_test_examples(str(tmp_path))] == ["q-1", "test-1"]
    lines = [{"id": 17, "guid": "g", "text": "a"}, {"guid": "g2", "text": "b"},
             {"id": None, "text": "c"}, {"id": [1], "text": "d"}, {"id": "é\t\"x", "text": "e"}]
    write_text(tmp_path / "test.jsonl", "\n".join(json.dumps(r) for r in lines) + "\n")
    p = file_data.FileProcessor("jsonl", _COLUMNS, labels=["a"])
    assert [e.guid for e in p.get_test_examples(str(tmp_path))] == [
        17, "g2", "test-2", "test-3", "é\t\"x"]


@pytest.mark.parametrize("file_format", ["tsv", "csv"])
def test_a_blank_line_of_a_one_column_test_file_is_an_empty_text(tmp_path, caplog, file_format):
    # A one-column test file (texts alone): an empty text is a blank line. Before the fix it
    # was skipped: one row fewer, every later prediction beside the wrong input.
    write_text(tmp_path / ("test." + file_format), "text\nfirst\n\nthird\nfourth\n\n")
    p = file_data.FileProcessor(file_format, _COLUMNS, labels=["a"])
    with caplog.at_level(logging.WARNING):
        examples = p.get_test_examples(str(tmp_path))
    assert [(e.guid, e.text_a) for e in examples] == [
        ("test-0", "first"), ("test-1", ""), ("test-2", "third"), ("test-3", "fourth"),
        ("test-4", "")]
    assert re.search(r"test.%s: 2 blank lines \(first: line 3\) after the header of this "
                     r"one-column file, each read as an empty text" % file_format, caplog.text)
    # With more columns a blank line is no row (its fields could not be told apart).
    write_text(tmp_path / "test.tsv", "\ntext\tid\nfirst\t1\n\nthird\t3\n")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert [e.text_a for e in file_data.FileProcessor("tsv", _COLUMNS, labels=["a"])
                .get_test_examples(str(tmp_path))] == ["first", "third"]
    # ... said in one line (before: dropped without a word; test_results.tsv then had fewer
    # rows than the file lines).
    assert re.search(r"test.tsv: 1 blank line \(first: line 4\) skipped, no rows of this "
                     r"2-column file", caplog.text)


def test_tsv_takes_quotes_literally_and_reads_pairs(tmp_path):
    write_text(tmp_path / "dev.tsv", 'q\tlabel\tp\n"a" b\t1\tc, d\n')
    p = file_data.FileProcessor("tsv", file_data.Columns("q", "p", "label"), labels=["0", "1"])
    assert _fields(p.get_dev_examples(str(tmp_path))) == [("dev-0", '"a" b', "c, d", "1")]


def test_jsonl_numbers_as_written_and_empty_text_b(tmp_path):
    lines = [{"text": "one", "pair": "", "label": 1}, {"text": "two", "pair": "x", "label": 0}]
    write_text(tmp_path / "train.jsonl", "\n".join(json.dumps(r) for r in lines) + "\n\n")
    p = file_data.FileProcessor("jsonl", file_data.Columns("text", "pair", "label"))
    assert _fields(p.get_train_examples(str(tmp_path))) == [
        ("train-0", "one", None, "1"), ("train-1", "two", "x", "0")]
    assert p.get_labels() == ["0", "1"]


def test_regression_and_multilabel(tmp_path):
    write_text(tmp_path / "train.csv", "text,label\na,0.5\nb,4\n")
    p = file_data.FileProcessor("csv", _COLUMNS, task_type="regression")
    assert [e.label for e in p.get_train_examples(str(tmp_path))] == ["0.5", "4"]
    assert p.get_labels() == [None] and p.is_regression and not p.is_multilabel
    write_text(tmp_path / "train.jsonl", '{"text": "a", "label": ["z", "x", "z"]}\n'
                                         '{"text": "b", "label": "x, y"}\n'
                                         '{"text": "c", "label": []}\n')
    p = file_data.FileProcessor("jsonl", _COLUMNS, task_type="multilabel")
    assert [e.label for e in p.get_train_examples(str(tmp_path))] == [
        ("x", "z"), ("x", "y"), ()]
    assert p.get_labels() == ["x", "y", "z"] and p.is_multilabel


@pytest.mark.parametrize("name,text,kind,message", [
    ("train.csv", "id,text,sentiment\n1,a,b\n", "classification",
     r"train.csv, line 1: no column 'label' \(--text_a_column, --text_b_column, "
     r"--label_column\); the header's columns are 'id', 'text', 'sentiment'"),
    ("train.csv", "great movie,positive\nawful,negative\n", "classification",
     r"train.csv, line 1: expected a header row naming the columns text, label .*"
     r"the first row holds 'great movie', 'positive'"),
    ("train.csv", "text,label\na,x\n\"b\nc\"\n", "classification",
     r"train.csv, lines 3-4: 1 field, the header has 2"),
    ("train.tsv", "text\tlabel\na\tx\tb\n", "classification",
     r"train.tsv, line 2: 3 fields, the header has 2"),
    ("train.jsonl", '{"text": "a", "label": "x"}\n{"text": "b"}\n', "classification",
     r"train.jsonl, line 2: no key 'label' .*the object's keys are 'text'"),
    ("train.jsonl", '{"text": "a", "label": "x"}\n[1]\n', "classification",
     r"train.jsonl, line 2: expected a JSON object"),
    ("train.jsonl", '{"text": 3, "label": "x"}\n', "classification",
     r"train.jsonl, line 1: 'text' is 3, not a text"),
    ("train.csv", "text,label\na,x\nb, \n", "classification",
     r"train.csv, line 3: the label \(column 'label'\) is empty"),
    ("train.csv", "text,label\na,1.5\nb,high\n", "regression",
     r"train.csv, line 3: label 'high' is not a number"),
    ("train.csv", "text,label\na,nan\n", "regression",
     r"train.csv, line 2: label 'nan' is not a finite number"),
    ("train.csv", "text,label\n", "classification", r"train.csv: no examples"),
    ("train.csv", "", "classification", r"train.csv: the file is empty"),
    ("train.csv", "text,label\n,\n", "multilabel",
     r"train.csv: no example has a label, so the label list is empty"),
    ("train.csv", "text,text,label\na,b,c\n", "classification",
     r"train.csv, line 1: column 'text' appears 2 times"),
    # Blank lines before the header: the header's own line is named.
    ("train.csv", "\n\ntext,text,label\na,b,c\n", "classification",
     r"train.csv, line 3: column 'text' appears 2 times"),
    ("train.tsv", "\n\ntext\tlbl\na\tx\n", "classification",
     r"train.tsv, line 3: no column 'label'"),
    ("train.csv", "\n\ntext,label\na,x,y\n", "classification",
     r"train.csv, line 4: 3 fields, the header has 2"),
    ("train.jsonl", '{"text": "a", "label": ["x,y"]}\n', "multilabel",
     r"train.jsonl, line 1: label 'x,y' holds ','"),
])
def test_bad_train_files_name_file_and_line(tmp_path, name, text, kind, message):
    write_text(tmp_path / name, text)
    p = file_data.FileProcessor(name.split(".")[1], _COLUMNS, task_type=kind)
    with pytest.raises(ValueError, match=message):
        p.get_train_examples(str(tmp_path))


def test_dev_labels_must_be_in_the_train_list(tmp_path):
    write_text(tmp_path / "train.csv", "text,label\na,negative\nb,positive\n")
    write_text(tmp_path / "dev.csv", "text,label\nc,positive\nd,Positive\n")
    p = file_data.FileProcessor("csv", _COLUMNS)
    p.get_train_examples(str(tmp_path))
    with pytest.raises(ValueError, match=r"dev.csv, line 3: label 'Positive' is not one of "
                                         r"the task's labels \['negative', 'positive'\]"):
        p.get_dev_examples(str(tmp_path))
    with pytest.raises(ValueError, match=r"test.csv: no such file"):
        p.get_test_examples(str(tmp_path))


def test_same_column_twice_and_numeric_twin_labels_are_warned(tmp_path, caplog):
    write_text(tmp_path / "train.csv", "text,label\na,1\nb,1.0\nc, 1\nd,2\ne,x\n")
    with caplog.at_level(logging.WARNING):
        p = file_data.FileProcessor("csv", file_data.Columns("text", "text", "label"))
        examples = p.get_train_examples(str(tmp_path))
    # " 1" is "1" (labels are stripped); "1" and "1.0" stay two labels, warned.
    assert p.get_labels() == ["1", "1.0", "2", "x"]
    assert examples[0].text_a == examples[0].text_b == "a"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "--text_b_column=text is also --text_a_column: every example's pair is the same "
        "text twice",
        "%s: the labels '1' and '1.0' are the same number written differently; they are 2 "
        "different labels (write each one way if they are one)" % (tmp_path / "train.csv")]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        write_text(tmp_path / "train.csv", "text,label\na,1\nb,2\nc,1.0\n")
        file_data.FileProcessor("csv", _COLUMNS, task_type="regression").get_train_examples(
            str(tmp_path))
        write_text(tmp_path / "train.csv", "text,label\na,1\nb,2\nc,one\n")
        file_data.FileProcessor("csv", _COLUMNS).get_train_examples(str(tmp_path))
    assert not caplog.records


@pytest.mark.parametrize("kind,test_text,expected", [
    ("classification", "text,label\na,pos\nb,neg\nc,Neg\nd,\ne,maybe\n",
     r"test.csv, line 4: label 'Neg' is not in the label list \(2 such labels\)"),
    ("multilabel", "text,label\na,\"neg,pos\"\nb,\"pos,odd\"\n",
     r"test.csv, line 3: label 'odd' is not in the label list \(1 such label\)"),
    ("classification", "text\na\n", None),
    ("classification", "text,label\na,pos\n", None),
])
def test_test_labels_outside_the_list_are_warned(tmp_path, caplog, kind, test_text, expected):
    write_text(tmp_path / "train.csv", "text,label\na,pos\nb,neg\n")
    write_text(tmp_path / "test.csv", test_text)
    p = file_data.FileProcessor("csv", _COLUMNS, task_type=kind)
    p.get_train_examples(str(tmp_path))
    with caplog.at_level(logging.WARNING):
        examples = p.get_test_examples(str(tmp_path))
    # Predictions are made for every example all the same (the label is a placeholder).
    assert len(examples) == len(test_text.splitlines()) - 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    if expected is None:
        assert not warnings
    else:
        assert len(warnings) == 1 and re.search(expected, warnings[0]), warnings


# ---------------------------------------------------------------------------
# A missing label is never a class; ids stay ints; a table's columns are distinct
# ---------------------------------------------------------------------------

def _missing_cells():
    """(name, a DataFrame label column of 3 rows whose second is missing) of each kind."""
    pd = pytest.importorskip("pandas")
    np = pytest.importorskip("numpy")
    return [("nan", ["positive", np.nan, "negative"]),
            ("none", pd.Series(["positive", None, "negative"], dtype=object)),
            ("pd.NA", pd.array(["positive", pd.NA, "negative"], dtype="string")),
            ("int with nan", [1, np.nan, 0]),
            ("Int64 NA", pd.array([1, None, 0], dtype="Int64"))]


_NO_LABEL = (r"^data_dir\['%s'\] row 2 \(from 1\): column 'label' holds no label "
             r"\(None / NaN / NA / null\); every train and dev row needs one$")


@pytest.mark.parametrize("split", ["train", "dev"])
def test_a_missing_label_in_a_table_is_one_error_not_a_class(split):
    pd = pytest.importorskip("pandas")
    good = pd.DataFrame({"text": ["a", "b"], "label": ["positive", "negative"]})
    for kind, labels in _missing_cells():
        frame = pd.DataFrame({"text": ["a", "b", "c"], "label": labels})
        processor = file_data.FileProcessor("csv", _COLUMNS, labels=(
            ["0", "1", "negative", "positive"] if split == "dev" else None))
        with pytest.raises(ValueError, match=_NO_LABEL % split):
            getattr(processor, "get_%s_examples" % split)({"train": good, split: frame})
        # a list of dicts says the same
        rows = [{"text": "a", "label": "positive"}, {"text": "b", "label": frame["label"][1]}]
        with pytest.raises(ValueError, match=_NO_LABEL % split):
            getattr(processor, "get_%s_examples" % split)({split: rows})
        assert kind


def test_a_missing_label_in_a_multilabel_list_or_a_jsonl_file_is_refused(tmp_path):
    nan = float("nan")
    multilabel = file_data.FileProcessor("jsonl", _COLUMNS, "multilabel")
    for cell in (["a", nan], ["a", None], nan, None):
        with pytest.raises(ValueError, match=_NO_LABEL % "train"):
            multilabel.get_train_examples({"train": [{"text": "x", "label": ["b"]},
                                                     {"text": "y", "label": cell}]})
    for label in ("NaN", "null", '["a", NaN]'):
        write_text(tmp_path / "train.jsonl", '{"text": "x", "label": "a"}\n'
                   '{"text": "y", "label": %s}\n' % label)
        kind = "multilabel" if label.startswith("[") else "classification"
        with pytest.raises(ValueError, match=r"train.jsonl, line 2: column 'label' holds no "
                                             r"label \(None / NaN / NA / null\)"):
            file_data.FileProcessor("jsonl", _COLUMNS, kind).get_train_examples(str(tmp_path))


def test_a_test_tables_missing_labels_and_ids_are_its_defaults(tmp_path, caplog):
    pd = pytest.importorskip("pandas")
    np = pytest.importorskip("numpy")
    frame = pd.DataFrame({"id": [7, np.nan, 9], "text": ["a", "b", "c"],
                          "label": [np.nan, np.nan, np.nan]})
    processor = file_data.FileProcessor("jsonl", _COLUMNS, labels=["neg", "pos"])
    with caplog.at_level(logging.WARNING):
        got = processor.get_test_examples({"test": frame})
    assert [e.guid for e in got] == [7, "test-1", 9]
    assert [type(e.guid) for e in got] == [int, str, int]  # not 7.0 / NaN
    assert "not in the label list" not in caplog.text  # no label: not a label "NaN"
    write_text(tmp_path / "test.jsonl", '{"id": NaN, "text": "a"}\n{"id": 3, "text": "b"}\n')
    assert [e.guid for e in processor.get_test_examples(str(tmp_path))] == ["test-0", 3]


def test_an_int_label_column_stays_ints(caplog):
    """pandas makes a column of ints with a missing cell floats: the labels are still 1
    and 0 (test labels are only checked against the list: no 1.0 / 0.0 warned)."""
    pd = pytest.importorskip("pandas")
    np = pytest.importorskip("numpy")
    processor = file_data.FileProcessor("jsonl", _COLUMNS, labels=["0", "1"])
    frame = pd.DataFrame({"text": ["a", "b", "c"], "label": [1, np.nan, 0]})
    assert frame["label"].dtype.kind == "f"
    with caplog.at_level(logging.WARNING):
        processor.get_test_examples({"test": frame})
    assert "not in the label list" not in caplog.text


def test_a_table_with_a_repeated_column_name_is_refused():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame([["a", "x", "y"], ["b", "y", "y"]], columns=["text", "label", "label"])
    with pytest.raises(ValueError, match=r"^data_dir\['train'\]: the column 'label' appears "
                                         r"2 times"):
        file_data.FileProcessor("jsonl", _COLUMNS).get_train_examples({"train": frame})


def test_one_label_class_is_warned_and_read(caplog):
    processor = file_data.FileProcessor("jsonl", _COLUMNS)
    with caplog.at_level(logging.WARNING):
        got = processor.get_train_examples({"train": [{"text": "a", "label": "x"},
                                                      {"text": "b", "label": "x"}]})
    assert len(got) == 2 and processor.get_labels() == ["x"]
    assert "every example has the label 'x': the model learns one class" in caplog.text
