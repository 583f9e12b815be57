"""ner_metrics.py against conlleval.pl: bare tags, and the prediction files run_ner writes.

The tests that run conlleval.pl itself need perl and the script: $CONLLEVAL (its path),
else conlleval.pl or conlleval on PATH, else ../shared/conlleval.pl; they skip without.
"""
import logging
import os
import random
import re
import shutil
import subprocess

import pytest

from bert_tf2.tasks import ner_data
from bert_tf2.tasks import ner_metrics
from conftest import SHARED_DIR
from test_ner_data import IOB1, IOB2, write

# Tags of every kind conlleval.pl reads: typed, bare (no type), "." and its one-word
# "[" / "]", a type with a '-' in it, an empty prefix.
ODD_TAGS = ["O", "O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "I-MISC", "PER", "LOC",
            "B", "I", ".", "[", "]", "-PER", "I-B-X"]


def find_conlleval():
    """[perl, conlleval.pl], or None when either is missing."""
    perl = shutil.which("perl")
    candidates = [os.environ.get("CONLLEVAL"), shutil.which("conlleval.pl"),
                  shutil.which("conlleval")]
    if SHARED_DIR is not None:
        candidates.append(str(SHARED_DIR / "conlleval.pl"))
    script = next((c for c in candidates if c and os.path.isfile(c)), None)
    return None if perl is None or script is None else [perl, script]


def conlleval_command():
    """[perl, conlleval.pl], or a skip when either is missing."""
    command = find_conlleval()
    if command is None:
        pytest.skip("conlleval.pl and perl are needed (set CONLLEVAL to the script's path)")
    return command


def conlleval(text):
    """conlleval.pl's counts for a file's text: {"tokens", "gold", "predicted",
    "correct", "f1" (percent), "per_type": {type: (precision, recall, f1) in percent}}."""
    run = subprocess.run(conlleval_command(), input=text.encode("utf-8"),
                         capture_output=True, check=False)
    out = run.stdout.decode("utf-8")
    assert run.returncode == 0, run.stderr.decode("utf-8")
    head = re.search(r"processed (\d+) tokens with (\d+) phrases; found: (\d+) phrases; "
                     r"correct: (\d+)", out)
    assert head, out
    found = dict(zip(("tokens", "gold", "predicted", "correct"), map(int, head.groups())))
    overall = re.search(r"FB1: +([\d.]+)", out)
    found["f1"] = float(overall.group(1)) if overall else 0.0
    found["per_type"] = {
        m.group(1): tuple(float(x) for x in m.group(2, 3, 4)) for m in re.finditer(
            r"^ *(\S*): precision: +([\d.]+)%; recall: +([\d.]+)%; FB1: +([\d.]+)", out,
            re.M)}
    return found


def assert_same_scores(ours, theirs):
    """ner_metrics' scores equal conlleval.pl's counts (and its rounded percentages)."""
    assert (ours["gold"], ours["predicted"], ours["correct"]) == (
        theirs["gold"], theirs["predicted"], theirs["correct"])
    assert 100 * ours["f1"] == pytest.approx(theirs["f1"], abs=0.006)
    assert sorted(ours["per_type"]) == sorted(theirs["per_type"])
    for kind, (precision, recall, f1, _) in ours["per_type"].items():
        assert [100 * precision, 100 * recall, 100 * f1] == pytest.approx(
            list(theirs["per_type"][kind]), abs=0.006), kind


def as_file(gold, guess):
    """conlleval's input for tag sequences: `word gold guess`, a blank line after each."""
    return "".join("".join("w %s %s\n" % pair for pair in zip(g, p)) + "\n"
                   for g, p in zip(gold, guess))


# ---------------------------------------------------------------------------
# Bare tags, as conlleval.pl reads them without -r (checked by hand with it)
# ---------------------------------------------------------------------------

def test_bare_tags_open_no_entity_after_o(caplog):
    tags = [["PER", "PER", "O", "LOC"], ["LOC"]]
    with caplog.at_level(logging.WARNING):
        s = ner_metrics.score(tags, tags)
    assert (s["gold"], s["predicted"], s["correct"], s["f1"]) == (0, 0, 0, 0.0)
    assert s["accuracy"] == 1.0 and s["per_type"] == {}
    assert "without a B-/I- prefix (LOC PER)" in caplog.text
    assert ner_metrics.entities(["PER", "PER"]) == set()
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        ner_metrics.score([["B-PER", "O"]], [["B-PER", "O"]])
    assert "prefix" not in caplog.text


def test_a_bare_tag_after_a_typed_one_opens_an_entity_of_no_type():
    # The untyped chunk at "PER" is not closed by "O": the next B-LOC takes over the
    # match, so conlleval.pl counts it found in both files but never correct.
    tags = [["B-LOC", "PER", "O", "B-LOC"]]
    s = ner_metrics.score(tags, tags)
    assert (s["gold"], s["predicted"], s["correct"]) == (3, 3, 2)
    assert s["per_type"][""] == (0.0, 0.0, 0.0, 1)
    assert s["per_type"]["LOC"] == (1.0, 1.0, 1.0, 2)
    assert ner_metrics.entities(tags[0]) == {("LOC", 0, 0), ("", 1, 2), ("LOC", 3, 3)}
    # A bare "B" (no type) opens one after "O", not after another bare tag.
    assert ner_metrics.score([["B", "B"]], [["B", "O"]])["gold"] == 2
    assert ner_metrics.score([["B-X", "PER", "B"]], [["O", "O", "O"]])["gold"] == 2


def test_bare_tags_and_typed_ones_agree_with_conlleval_pl():
    conlleval_command()
    rng = random.Random(11)
    for _ in range(25):
        gold = [[rng.choice(ODD_TAGS) for _ in range(rng.randint(1, 9))]
                for _ in range(rng.randint(1, 12))]
        guess = [[rng.choice(ODD_TAGS) for _ in sentence] for sentence in gold]
        ours = ner_metrics.score(gold, guess)
        theirs = conlleval(as_file(gold, guess))
        assert_same_scores(ours, theirs)
        assert theirs["tokens"] == sum(len(g) for g in gold)


# ---------------------------------------------------------------------------
# The files run_ner writes, read back by ner_data and by conlleval.pl
# ---------------------------------------------------------------------------

TWO_COLUMNS = "-DOCSTART- O\n\n" + IOB2.replace("\n\nMary", "\n-DOCSTART- O\n\nMary")
BARE_DOCSTART = TWO_COLUMNS.replace("-DOCSTART- O", "-DOCSTART-")


def predictions(conll_file, seed):
    """Random predicted tags for every sentence of a file, bare ones among them."""
    rng = random.Random(seed)
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "PER"]
    return [[rng.choice(tags) for _ in s.words] for s in conll_file.sentences]


@pytest.mark.parametrize("text", [IOB1, TWO_COLUMNS, BARE_DOCSTART],
                         ids=["four_columns", "two_columns", "bare_docstart"])
def test_prediction_files_round_trip_in_conlleval_layout(tmp_path, text):
    conll_file = ner_data.read_conll(write(tmp_path / "dev.txt", text))
    tags = predictions(conll_file, len(text))
    path = str(tmp_path / "eval_predictions.txt")
    ner_data.write_predictions(path, conll_file, tags)
    with open(path, encoding="utf-8") as f:
        written = f.read()
    lines = written.split("\n")
    widths = {len(line.split(" ")) for line in lines if line}
    assert widths == {len(text.split("\n")[2].split()) + 1}, written
    assert sum(line.startswith("-DOCSTART- ") for line in lines) == text.count("-DOCSTART-")
    gold, guess = ner_data.read_predictions(path)
    assert gold == [s.tags for s in conll_file.sentences] and guess == tags
    assert ner_metrics.score(gold, guess) == ner_metrics.score(
        [s.tags for s in conll_file.sentences], tags)


@pytest.mark.parametrize("text", [IOB1, TWO_COLUMNS, BARE_DOCSTART],
                         ids=["four_columns", "two_columns", "bare_docstart"])
def test_conlleval_pl_reads_the_prediction_files(tmp_path, text):
    conlleval_command()
    conll_file = ner_data.read_conll(write(tmp_path / "dev.txt", text))
    tags = predictions(conll_file, 7)
    path = str(tmp_path / "eval_predictions.txt")
    ner_data.write_predictions(path, conll_file, tags)
    with open(path, encoding="utf-8") as f:
        theirs = conlleval(f.read())
    ours = ner_metrics.score([s.tags for s in conll_file.sentences], tags)
    assert_same_scores(ours, theirs)
    # conlleval.pl counts each -DOCSTART- line as a word (tagged O, predicted O).
    words = sum(len(s.words) for s in conll_file.sentences)
    assert theirs["tokens"] == words + text.count("-DOCSTART-")


def test_a_words_only_file_with_documents_keeps_one_width(tmp_path):
    text = "".join(line.split()[0] + "\n" if line else "\n" for line in IOB1.split("\n")[:-1])
    conll_file = ner_data.drop_tags(ner_data.read_conll(write(tmp_path / "test.txt", text),
                                                        require_tags=False))
    tags = predictions(conll_file, 3)
    path = str(tmp_path / "test_predictions.txt")
    ner_data.write_predictions(path, conll_file, tags)
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    assert lines[0] == "-DOCSTART- O"
    assert {len(line.split(" ")) for line in lines if line} == {2}
    assert [s.tags for s in ner_data.read_conll(path).sentences] == tags
    with pytest.raises(ValueError, match=r"test_predictions.txt, line 1: 2 columns; "
                                         r"expected the word first"):
        ner_data.read_predictions(path)


def test_real_conll_dev_file_round_trips_and_scores_as_conlleval_pl(tmp_path, shared_dir):
    dev = shared_dir / "data" / "conll2003" / "dev.txt"
    if not dev.exists():
        pytest.skip("%s is absent" % dev)
    conll_file = ner_data.read_conll(str(dev))
    rng = random.Random(5)
    labels = ner_data.labels_from(conll_file) + ["PER"]
    tags = [[t if rng.random() < 0.9 else rng.choice(labels) for t in s.tags]
            for s in conll_file.sentences]
    path = str(tmp_path / "eval_predictions.txt")
    ner_data.write_predictions(path, conll_file, tags)
    gold, guess = ner_data.read_predictions(path)
    assert gold == [s.tags for s in conll_file.sentences] and guess == tags
    ours = ner_metrics.score(gold, guess)
    assert 0.3 < ours["f1"] < 0.9  # a tenth of the tags drawn at random
    if find_conlleval() is not None:
        with open(path, encoding="utf-8") as f:
            theirs = conlleval(f.read())
        assert_same_scores(ours, theirs)
