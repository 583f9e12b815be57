"""ner_data.py and ner_metrics.py: CoNLL reading, labels, windows, the entity metric."""
import os
import random

import pytest

import tokenization
from bert_tf2.tasks import ner_data
from bert_tf2.tasks import ner_metrics

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "john", "smith", "lives", "in",
         "paris", "works", "for", "acme", "corp", "the", "city", "of", "london", "and",
         "mary", "visited", "berlin", ".", "a", "b", "c", "##x", "##y", "eu", "rejects",
         "german", "call"]

# The same sentences in the original four-column IOB1 layout with -DOCSTART- lines,
# and in the common two-column IOB2 layout without them.
IOB1 = """-DOCSTART- -X- -X- O

John NNP B-NP I-PER
Smith NNP I-NP I-PER
lives VBZ B-VP O
in IN B-PP O
Paris NNP B-NP I-LOC
. . O O

Acme NNP B-NP I-ORG
Corp NNP I-NP I-ORG
. . O O
-DOCSTART- -X- -X- O

Mary NNP B-NP I-PER
visited VBD B-VP O
Berlin NNP B-NP I-LOC
London NNP B-NP B-LOC
. . O O
"""
IOB2 = """John B-PER
Smith I-PER
lives O
in O
Paris B-LOC
. O

Acme B-ORG
Corp I-ORG
. O

Mary B-PER
visited O
Berlin B-LOC
London B-LOC
. O
"""


def write(path, text):
    """Writes `text` to `path` (creating its folder); returns the path as a str."""
    path = str(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


@pytest.fixture
def tokenizer(tmp_path):
    """A FullTokenizer over VOCAB."""
    return tokenization.FullTokenizer(write(tmp_path / "vocab.txt", "\n".join(VOCAB) + "\n"))


# ---------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------

def test_both_layouts_read_alike_and_score_alike(tmp_path):
    iob1 = ner_data.read_conll(write(tmp_path / "a.txt", IOB1))
    iob2 = ner_data.read_conll(write(tmp_path / "b.txt", IOB2))
    assert [s.words for s in iob1.sentences] == [s.words for s in iob2.sentences]
    assert iob1.sentences[0].words == ["John", "Smith", "lives", "in", "Paris", "."]
    assert iob1.sentences[0].tags[:2] == ["I-PER", "I-PER"]  # kept as written
    assert [s.document for s in iob1.sentences] == [1, 1, 2]  # -DOCSTART- breaks documents
    assert [s.document for s in iob2.sentences] == [0, 0, 0]  # none: one document
    assert iob1.sentences[2].line_indexes == [14, 15, 16, 17, 18]
    gold1 = [s.tags for s in iob1.sentences]
    gold2 = [s.tags for s in iob2.sentences]
    assert [ner_metrics.entities(t) for t in gold1] == [ner_metrics.entities(t) for t in gold2]
    # "Berlin London": two entities; IOB1 needs a B- only between adjacent ones of a type.
    assert ner_metrics.entities(gold1[2]) == {("PER", 0, 0), ("LOC", 2, 2), ("LOC", 3, 3)}
    # One prediction scored against either scheme: the same entity scores.
    guess = [["B-PER", "I-PER", "O", "O", "B-ORG", "O"], ["B-ORG", "O", "O"],
             ["B-PER", "O", "B-LOC", "I-LOC", "O"]]
    one, two = ner_metrics.score(gold1, guess), ner_metrics.score(gold2, guess)
    # Found: John Smith, Mary (2 of 5 predicted, 2 of 6 gold).
    assert one["precision"] == two["precision"] == pytest.approx(2 / 5)
    assert one["recall"] == two["recall"] == pytest.approx(2 / 6)
    assert one["per_type"] == two["per_type"]
    assert one["per_type"]["PER"] == (1.0, 1.0, 1.0, 2)


def test_real_conll_2003_reads(shared_dir, tmp_path):
    lines = (shared_dir / "data" / "conll2003" / "train.txt").read_text(
        encoding="utf-8").splitlines()
    cut = [i for i, line in enumerate(lines) if not line.strip()][199]
    conll = ner_data.read_conll(write(tmp_path / "train.txt", "\n".join(lines[:cut]) + "\n"))
    assert len(conll.sentences) == 200 and conll.has_tags
    assert conll.sentences[0].words == ["EU", "rejects", "German", "call", "to", "boycott",
                                        "British", "lamb", "."]
    assert conll.sentences[0].tags == ["B-ORG", "O", "B-MISC", "O", "O", "O", "B-MISC", "O",
                                       "O"]
    assert sum(len(s.words) for s in conll.sentences) == sum(
        1 for line in lines[:cut] if line.strip())
    labels = ner_data.labels_from(conll)
    assert labels == ["O", "B-LOC", "B-MISC", "B-ORG", "B-PER", "I-LOC", "I-MISC", "I-ORG",
                      "I-PER"]


def test_bad_files_name_file_and_line(tmp_path):
    with pytest.raises(ValueError, match=r"one\.txt, line 3: 'Smith' has one column"):
        ner_data.read_conll(write(tmp_path / "one.txt", "-DOCSTART- O\nJohn B-PER\nSmith\n"))
    with pytest.raises(ValueError, match=r"mixed\.txt, line 2: some lines have a tag"):
        ner_data.read_conll(write(tmp_path / "mixed.txt", "John B-PER\nSmith\n"),
                            require_tags=False)
    for text in ("", "\n\n", "-DOCSTART- -X- -X- O\n\n"):
        with pytest.raises(ValueError, match=r"empty\.txt: no sentences"):
            ner_data.read_conll(write(tmp_path / "empty.txt", text))
    with pytest.raises(ValueError, match=r"absent\.txt: no such file"):
        ner_data.read_conll(str(tmp_path / "absent.txt"))
    with pytest.raises(ValueError, match=r"latin\.txt, line 2: not valid UTF-8"):
        (tmp_path / "latin.txt").write_bytes(b"John B-PER\nJos\xe9 I-PER\n")
        ner_data.read_conll(str(tmp_path / "latin.txt"))
    dev = ner_data.read_conll(write(tmp_path / "dev.txt", "John B-PER\n\nParis B-GPE\n"))
    with pytest.raises(ValueError, match=r"dev\.txt, line 3: tag 'B-GPE' was not seen"):
        ner_data.check_tags(dev, ["O", "B-PER", "I-PER"])


def test_words_only_and_dropped_tags(tmp_path):
    words = ner_data.read_conll(write(tmp_path / "w.txt", "John\nSmith\n\nX\n"),
                                require_tags=False)
    assert not words.has_tags and [s.tags for s in words.sentences] == [None, None]
    assert [s.words for s in words.sentences] == [["John", "Smith"], ["X"]]
    tagged = ner_data.read_conll(write(tmp_path / "t.txt", IOB1), require_tags=False)
    assert tagged.has_tags
    dropped = ner_data.drop_tags(tagged)
    assert not dropped.has_tags and all(s.tags is None for s in dropped.sentences)
    assert [s.words for s in dropped.sentences] == [s.words for s in tagged.sentences]


def test_only_newlines_end_lines_and_only_ascii_blanks_split_columns(tmp_path):
    # U+2028 and U+0085 end a line for str.splitlines, U+00A0 splits for str.split:
    # inside a word they are part of it. "\r\n" line ends read as "\n".
    text = "a\u2028b B-PER\r\nc\x85d I-PER\r\n\r\ne\u00a0f\tO\r\n"
    conll = ner_data.read_conll(write(tmp_path / "u.txt", text))
    assert [s.words for s in conll.sentences] == [["a\u2028b", "c\x85d"], ["e\u00a0f"]]
    assert [s.tags for s in conll.sentences] == [["B-PER", "I-PER"], ["O"]]
    path = str(tmp_path / "out.txt")
    ner_data.write_predictions(path, conll, [["O", "O"], ["B-LOC"]])
    with open(path, encoding="utf-8", newline="") as f:
        assert f.read().split("\n") == [
            "a\u2028b B-PER O", "c\x85d I-PER O", "", "e\u00a0f O B-LOC", ""]


def test_labels_round_trip(tmp_path):
    conll = ner_data.read_conll(write(tmp_path / "a.txt", IOB2))
    labels = ner_data.labels_from(conll)
    assert labels == ["O", "B-LOC", "B-ORG", "B-PER", "I-ORG", "I-PER"]
    path = str(tmp_path / "label_list.txt")
    ner_data.write_labels(path, labels)
    assert ner_data.read_labels(path) == labels
    with pytest.raises(ValueError, match=r"twice\.txt, line 3: label 'O' is listed twice.*"
                                         r"expected distinct labels"):
        ner_data.read_labels(write(tmp_path / "twice.txt", "O\nB-PER\nO\n"))
    with pytest.raises(ValueError, match=r"nolabels\.txt: no such labels file"):
        ner_data.read_labels(str(tmp_path / "nolabels.txt"))


# ---------------------------------------------------------------------------
# Features and windows
# ---------------------------------------------------------------------------

def test_first_piece_carries_the_label(tmp_path, tokenizer):
    conll = ner_data.read_conll(write(tmp_path / "t.txt", "Ax B-PER\n\x07 O\nParis B-LOC\n"))
    labels = ["O", "B-LOC", "B-PER"]
    (feature,) = ner_data.convert_file(conll, labels, 8, 4, tokenizer)
    # "Ax" is two pieces, the control character "\x07" none.
    assert tokenizer.convert_ids_to_tokens(feature.input_ids[:5]) == [
        "[CLS]", "a", "##x", "paris", "[SEP]"]
    assert feature.input_ids[5:] == [0, 0, 0] and feature.input_mask == [1] * 5 + [0] * 3
    assert feature.label_weights == [0, 1, 0, 1, 0, 0, 0, 0]
    assert feature.label_ids[:4] == [0, 2, 0, 1]
    assert feature.word_at == {1: 0, 3: 2}
    tags = ner_data.sentence_predictions(conll, [feature], [[0, 2, 0, 1, 0, 0, 0, 0]], labels)
    assert tags == [["B-PER", "O", "B-LOC"]]  # the word without pieces is tagged "O"


def test_long_sentence_every_word_once_from_its_best_window(tmp_path, tokenizer):
    rng = random.Random(0)
    words = [rng.choice(["a", "b", "c", "Ax", "Byy", "paris", "\x07"]) for _ in range(300)]
    tags = [rng.choice(["O", "B-LOC"]) for _ in words]
    conll = ner_data.read_conll(write(tmp_path / "long.txt", "".join(
        "%s %s\n" % (w, t) for w, t in zip(words, tags))))
    stride = 16
    features = ner_data.convert_file(conll, ["O", "B-LOC"], 64, stride, tokenizer)
    # Brute force: where each word's first piece is, and every window's span of pieces.
    firsts, total = [], 0
    for word in words:
        pieces = tokenizer.tokenize(word)
        firsts.append(total if pieces else None)
        total += len(pieces)
    spans = []
    while not spans or spans[-1][0] + spans[-1][1] < total:
        start = len(spans) * stride
        spans.append((start, min(62, total - start)))
    assert len(features) == len(spans) > 10
    chosen = {}
    for index, feature in enumerate(features):
        start, length = spans[index]
        assert sum(feature.input_mask) == length + 2
        for position, word in feature.word_at.items():
            assert word not in chosen, "word %d predicted twice" % word
            chosen[word] = index
            assert position - 1 + start == firsts[word]
            assert feature.label_ids[position] == (tags[word] == "B-LOC")
        assert sum(feature.label_weights) == len(feature.word_at)
        # Only the first window's chain starts the sentence (run_ner --crf's constraint).
        assert feature.starts_sentence == (index == 0)
    assert sorted(chosen) == [i for i, p in enumerate(firsts) if p is not None]
    for word, index in chosen.items():
        p = firsts[word]
        scores = [(min(p - s, s + n - 1 - p) + 0.01 * n, -i) for i, (s, n) in enumerate(spans)
                  if s <= p < s + n]
        assert -max(scores)[1] == index  # best score; of equals, the first window
    predicted = ner_data.sentence_predictions(
        conll, features, [[1] * 64 for _ in features], ["O", "B-LOC"])
    assert predicted == [["O" if p is None else "B-LOC" for p in firsts]]


def test_document_context_fills_the_window_labels_only_on_the_sentence(tmp_path, tokenizer):
    labels = ["O", "B-LOC", "B-ORG", "B-PER", "I-LOC", "I-ORG", "I-PER"]
    conll = ner_data.read_conll(write(tmp_path / "d.txt", IOB2))
    plain = ner_data.convert_file(conll, labels, 32, 8, tokenizer)
    wide = ner_data.convert_file(conll, labels, 32, 8, tokenizer, document_context=True)
    # No -DOCSTART-: one document; the middle sentence gets both neighbours.
    assert sum(plain[1].input_mask) == 2 + 3
    assert sum(wide[1].input_mask) == 2 + 6 + 3 + 5
    assert sum(wide[1].label_weights) == sum(plain[1].label_weights) == 3
    tokens = tokenizer.convert_ids_to_tokens(wide[1].input_ids[:16])
    assert tokens[:7] == ["[CLS]", "john", "smith", "lives", "in", "paris", "."]
    assert [tokens[p] for p in sorted(wide[1].word_at)] == ["acme", "corp", "."]
    assert [wide[1].label_ids[p] for p in sorted(wide[1].word_at)] == [2, 5, 0]
    assert tokens[10:16] == ["mary", "visited", "berlin", "london", ".", "[SEP]"]
    # With -DOCSTART- lines the context stops at the document's edge.
    docs = ner_data.read_conll(write(tmp_path / "docs.txt", IOB1))
    wide = ner_data.convert_file(docs, labels, 32, 8, tokenizer, document_context=True)
    assert [sum(f.input_mask) for f in wide] == [2 + 6 + 3, 2 + 6 + 3, 2 + 5]


def test_document_context_shares_a_small_window_between_both_sides(tmp_path, tokenizer):
    text = "".join("a O\nb O\nc O\n\n" for _ in range(3))
    conll = ner_data.read_conll(write(tmp_path / "abc.txt", text))
    # 8 positions: [CLS] + 3 words + [SEP] leave 3, split 1 before and 2 after.
    features = ner_data.convert_file(conll, ["O"], 8, 8, tokenizer, document_context=True)
    middle = tokenizer.convert_ids_to_tokens(features[1].input_ids)
    assert middle == ["[CLS]", "c", "a", "b", "c", "a", "b", "[SEP]"]
    assert sorted(features[1].word_at) == [2, 3, 4]
    first = tokenizer.convert_ids_to_tokens(features[0].input_ids)
    assert first == ["[CLS]", "a", "b", "c", "a", "b", "c", "[SEP]"]  # nothing before it


def test_feature_errors_name_the_flag(tmp_path, tokenizer):
    conll = ner_data.read_conll(write(tmp_path / "a.txt", IOB2))
    with pytest.raises(ValueError, match="--max_seq_length=2 is too short"):
        ner_data.convert_file(conll, ["O"], 2, 8, tokenizer)
    with pytest.raises(ValueError, match="--doc_stride=0 must be >= 1"):
        ner_data.convert_file(conll, ["O"], 16, 0, tokenizer)


def test_predictions_file_keeps_every_line_and_adds_a_column(tmp_path):
    conll = ner_data.read_conll(write(tmp_path / "a.txt", IOB1))
    tags = [["B-PER", "I-PER", "O", "O", "B-LOC", "O"], ["B-ORG", "I-ORG", "O"],
            ["B-PER", "O", "B-LOC", "B-LOC", "O"]]
    path = str(tmp_path / "out.txt")
    ner_data.write_predictions(path, conll, tags)
    lines = open(path, encoding="utf-8").read().splitlines()
    source = IOB1.splitlines()
    assert len(lines) == len(source)
    flat = [t for sentence in tags for t in sentence]
    for line, original in zip(lines, source):
        if not original.strip():
            assert line == original
        elif original.startswith("-DOCSTART-"):
            assert line == original + " O"
        else:
            assert line == "%s %s" % (original, flat.pop(0))
    assert not flat
    # Read back, the last column is the prediction: conlleval's layout.
    assert [s.tags for s in ner_data.read_conll(path).sentences] == tags


# ---------------------------------------------------------------------------
# The metric
# ---------------------------------------------------------------------------

def test_hand_computed_scores():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "I-ORG", "I-ORG", "O"]]
    guess = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "I-ORG", "O", "O"]]
    s = ner_metrics.score(gold, guess)
    # gold: PER(0-1), LOC(3), ORG(0-2); predicted: PER(0-1), ORG(3), ORG(0-1): 1 of 3 each.
    assert s["precision"] == pytest.approx(1 / 3) and s["recall"] == pytest.approx(1 / 3)
    assert s["f1"] == pytest.approx(1 / 3)
    assert s["accuracy"] == pytest.approx(6 / 8)
    assert s["per_type"] == {"PER": (1.0, 1.0, 1.0, 1), "LOC": (0.0, 0.0, 0.0, 1),
                             "ORG": (0.0, 0.0, 0.0, 1)}
    # A wrong boundary or a wrong type is a miss; both right is a hit.
    assert ner_metrics.score([["B-PER", "I-PER"]], [["B-PER", "O"]])["f1"] == 0.0
    assert ner_metrics.score([["B-PER", "I-PER"]], [["B-LOC", "I-LOC"]])["f1"] == 0.0
    assert ner_metrics.score([["I-PER", "I-PER"]], [["B-PER", "I-PER"]])["f1"] == 1.0
    # Nothing predicted, nothing gold: zeros, not a division by zero.
    assert ner_metrics.score([["O"]], [["O"]])["f1"] == 0.0


def test_entities_follow_conlleval_rules():
    assert ner_metrics.entities(["I-PER", "I-PER", "I-LOC"]) == {("PER", 0, 1), ("LOC", 2, 2)}
    assert ner_metrics.entities(["I-PER", "B-PER", "O", "I-PER"]) == {
        ("PER", 0, 0), ("PER", 1, 1), ("PER", 3, 3)}
    assert ner_metrics.entities(["B-PER", "I-LOC"]) == {("PER", 0, 0), ("LOC", 1, 1)}
    assert ner_metrics.entities(["S-PER", "B-LOC", "E-LOC", "I-LOC"]) == {
        ("PER", 0, 0), ("LOC", 1, 2), ("LOC", 3, 3)}
    with pytest.raises(ValueError, match="2 gold tags and 1 predicted"):
        ner_metrics.score([["O", "O"]], [["O"]])


def test_metric_agrees_with_seqeval_on_random_iob1_and_iob2():
    seqeval_metrics = pytest.importorskip("seqeval.metrics")
    rng = random.Random(3)
    tags = ["O", "O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "I-MISC"]
    for _ in range(40):
        gold = [[rng.choice(tags) for _ in range(rng.randint(1, 12))] for _ in range(8)]
        guess = [[rng.choice(tags) for _ in s] for s in gold]
        ours = ner_metrics.score(gold, guess)
        assert ours["f1"] == pytest.approx(seqeval_metrics.f1_score(gold, guess), abs=1e-12)
        assert ours["precision"] == pytest.approx(
            seqeval_metrics.precision_score(gold, guess), abs=1e-12)
        assert ours["recall"] == pytest.approx(
            seqeval_metrics.recall_score(gold, guess), abs=1e-12)
        assert ours["accuracy"] == pytest.approx(
            seqeval_metrics.accuracy_score(gold, guess), abs=1e-12)
        report = seqeval_metrics.classification_report(gold, guess, output_dict=True,
                                                       zero_division=0)
        for kind, (precision, recall, f1, support) in ours["per_type"].items():
            if support:
                assert (precision, recall, f1) == pytest.approx(
                    (report[kind]["precision"], report[kind]["recall"],
                     report[kind]["f1-score"]), abs=1e-12)
                assert report[kind]["support"] == support


def test_auto_tag_scheme_is_iob2_only_for_iob2_files_of_iob2_labels(tmp_path):
    iob2 = ner_data.read_conll(write(tmp_path / "iob2.txt", IOB2))
    labels = ner_data.labels_from(iob2)
    scheme, why = ner_data.auto_tag_scheme(iob2, labels)
    assert scheme == "iob2" and "iob2.txt keeps IOB2" in why
    # CoNLL-2003's original IOB1: an entity starts with I- (here the first word).
    iob1 = ner_data.read_conll(write(tmp_path / "iob1.txt", IOB1))
    assert ner_data.auto_tag_scheme(iob1, ner_data.labels_from(iob1)) == (
        "none", "%s, line 3: I-PER starts a sentence, which IOB2 never holds (IOB1 starts "
                "entities with I-)" % iob1.path)
    inside = ner_data.read_conll(write(tmp_path / "inside.txt", "a O\nb I-LOC\n"))
    assert ner_data.iob2_break(inside) == "%s, line 2: I-LOC after O" % inside.path
    assert ner_data.auto_tag_scheme(iob2, labels + ["MISC"]) == (
        "none", "tags MISC are not O, B-X or I-X")


def test_auto_tag_scheme_takes_an_iob2_file_with_a_few_slips_as_iob2(tmp_path):
    # 20 entities of which 1 starts with a stray I- (5%): IOB2 with a slip.
    good = "".join("w%d B-LOC\nx I-LOC\ny O\n\n" % i for i in range(19))
    slips = ner_data.read_conll(write(tmp_path / "slips.txt", good + "the O\nIranian I-MISC\n"))
    labels = ["O", "B-LOC", "B-MISC", "I-LOC", "I-MISC"]
    assert ner_data.iob2_counts(slips) == (1, 20)
    scheme, why = ner_data.auto_tag_scheme(slips, labels)
    assert scheme == "iob2" and "breaks IOB2 at 1 of its 20 entities" in why
    assert "line 78: I-MISC after O" in why
    # Its B- label missing: to_iob2 could not make it B-, so none.
    assert ner_data.auto_tag_scheme(slips, [t for t in labels if t != "B-MISC"])[0] == "none"
    # Two slips in 20 entities (10%): past the bound, none.
    two = ner_data.read_conll(write(tmp_path / "two.txt", good + "the O\nIranian I-MISC\n\n"
                                    "a O\nb I-MISC\n"))
    assert ner_data.iob2_counts(two) == (2, 21)
    assert ner_data.auto_tag_scheme(two, labels)[0] == "none"


def test_to_iob2_makes_breaking_tags_b_keeping_the_entities(tmp_path):
    # An IOB2 file with a stray I- (CoNLL-2003's own "the O Iranian I-MISC"): made B-.
    text = "the O\nIranian I-MISC\nResistance I-ORG\nsaid O\n\nBonn I-LOC\n"
    conll = ner_data.read_conll(write(tmp_path / "noisy.txt", text))
    labels = ["O", "B-LOC", "B-MISC", "B-ORG", "I-LOC", "I-MISC", "I-ORG"]
    converted, changed, left = ner_data.to_iob2(conll, labels)
    assert [s.tags for s in converted.sentences] == [["O", "B-MISC", "B-ORG", "O"],
                                                     ["B-LOC"]]
    assert changed == 3 and left is None
    gold = [s.tags for s in conll.sentences]
    assert ner_metrics.score(gold, [s.tags for s in converted.sentences])["f1"] == 1.0
    # Without B-LOC among the labels, Bonn's I-LOC stays, and is named.
    _, changed, left = ner_data.to_iob2(conll, [t for t in labels if t != "B-LOC"])
    assert changed == 2 and left == "%s, line 6: I-LOC starts a sentence" % conll.path
