"""Line ends read alike everywhere: text files are split at "\\n" only (fileutil.split_lines),
so a JSON string, word or field may hold U+2028, U+0085, ...; a label may not hold any
line break, since label_list.txt is one label per line (fileutil.check_label)."""
import json
import re
import os

import pytest

import run_classifier
from bert_tf2 import fileutil
from bert_tf2 import flags_common
from bert_tf2.tasks import classifier_tasks
from bert_tf2.tasks import file_data
from bert_tf2.tasks import multiple_choice_data
from bert_tf2.tasks import ner_data
from conftest import write_text

# Every character str.splitlines breaks a line at (tab excluded: not a line break).
_BREAKS = [c for c in map(chr, range(0x3000)) if len(("a%sb" % c).splitlines()) > 1]


def test_line_breaks_are_those_of_splitlines():
    assert sorted(_BREAKS) == sorted(fileutil.LINE_BREAKS)


def test_split_lines_splits_at_newline_only():
    text = "a\u2028b\x85c\r\nd\re\n\nf\n"
    assert fileutil.split_lines(text) == ["a\u2028b\x85c", "d\re", "", "f"]
    assert fileutil.split_lines(text, keepends=True) == ["a\u2028b\x85c\r\n", "d\re\n", "\n",
                                                         "f\n"]
    assert fileutil.split_lines("") == [] and fileutil.split_lines("x") == ["x"]


@pytest.mark.parametrize("char", _BREAKS, ids=lambda c: "U+%04X" % ord(c))
def test_a_label_holding_a_line_break_is_refused_and_named(tmp_path, char):
    label = "pos%sitive" % char
    path = str(tmp_path / fileutil.LABEL_LIST_FILE)
    message = r"label %s holds a line break \(U\+%04X\)" % (re.escape(repr(label)), ord(char))
    with pytest.raises(ValueError, match=message):
        fileutil.write_label_list(path, ["negative", label])
    assert not os.listdir(str(tmp_path))  # nothing written

    class Processor(file_data.FileProcessor):
        def get_labels(self):
            return ["negative", label]
    with pytest.raises(ValueError, match="get_labels\\(\\): " + message):
        classifier_tasks.label_names(Processor("tsv", file_data.Columns("t", None, "l")))
    if char not in "\n\r":  # a labels file: that label on one line
        write_text(path, "negative\n%s\n" % label)
        with pytest.raises(ValueError, match=r"label_list.txt, line 2: " + message):
            fileutil.read_label_list(path)


def test_label_list_round_trip_and_windows_line_ends(tmp_path):
    path = str(tmp_path / "labels.txt")
    labels = ["B-PER", "caf\u00e9", "x\ty", "z"]
    fileutil.write_label_list(path, labels)
    assert fileutil.read_label_list(path) == labels
    write_text(path, "a\r\nb\r\n")
    assert fileutil.read_label_list(path) == ["a", "b"]


def test_a_data_label_with_a_line_break_is_refused_before_the_run(tmp_path):
    vocab = write_text(tmp_path / "vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\n")
    rows = [{"text": "a", "label": "pos\u2028itive"}, {"text": "a", "label": "neg"}]
    write_text(tmp_path / "data" / "train.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n"
                                                          for r in rows))
    config = write_text(tmp_path / "bert_config.json", json.dumps(
        {"vocab_size": 6, "hidden_size": 16, "num_hidden_layers": 1,
         "num_attention_heads": 2, "intermediate_size": 32, "max_position_embeddings": 32,
         "type_vocab_size": 2}))
    with pytest.raises(ValueError, match=r"label 'pos\\u2028itive' holds a line break"):
        run_classifier.run(flags_common.parse_flags(run_classifier.define_flags, [
            "--task_name=jsonl", "--data_dir=%s" % (tmp_path / "data"), "--do_train",
            "--vocab_file=" + vocab, "--bert_config_file=" + config,
            "--output_dir=%s" % (tmp_path / "out"), "--max_seq_length=8"]))
    assert not os.path.exists(str(tmp_path / "out" / fileutil.LABEL_LIST_FILE))


_TEXTS = ["one\u2028two", "three\x85four", "five\u2029six\x0bseven\x1cend"]


def test_jsonl_strings_holding_raw_line_breaks_are_read_as_written(tmp_path):
    rows = [{"text": t, "label": "x"} for t in _TEXTS]
    # ensure_ascii=False: the characters raw in the file, which is valid JSON.
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    assert "\u2028" in text and "\x85" in text
    write_text(tmp_path / "train.jsonl", text.replace("\n", "\r\n", 1))
    p = file_data.FileProcessor("jsonl", file_data.Columns("text", None, "label"))
    examples = p.get_train_examples(str(tmp_path))
    assert [e.text_a for e in examples] == _TEXTS


def test_multiple_choice_files_holding_raw_line_breaks(tmp_path):
    record = {"context": _TEXTS[0], "endings": [_TEXTS[1], _TEXTS[2]], "label": 1}
    write_text(tmp_path / "train.jsonl", json.dumps(record, ensure_ascii=False) + "\n")
    example, = multiple_choice_data.read_jsonl(str(tmp_path / "train.jsonl"))
    assert example.context == _TEXTS[0] and len(example.choices) == 2
    write_text(tmp_path / "train.csv",
               ",sent1,sent2,ending0,ending1,ending2,ending3,label\r\n"
               "7,%s,b,c,d,e\u2028f,g,2\r\n" % _TEXTS[0])
    example, = multiple_choice_data.read_swag(str(tmp_path / "train.csv"))
    assert (example.context, example.choices[2], example.label) == (_TEXTS[0], "b e\u2028f", 2)


def test_conll_words_keep_their_line_breaks(tmp_path):
    write_text(tmp_path / "train.txt", "a\u2028b O\r\nc\x85 B-X\n\n")
    conll = ner_data.read_conll(str(tmp_path / "train.txt"))
    assert conll.sentences[0].words == ["a\u2028b", "c\x85"]
