"""run_ner.py, ner_data.py, ner_metrics.py: CoNLL reading, windows, the entity metric, runs."""
import json
import os
import random

import numpy as np
import pytest

import checkpoints
import flags_common
import ner_data
import ner_metrics
import run_ner
import tokenization

_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "john", "smith", "lives", "in",
          "paris", "works", "for", "acme", "corp", "the", "city", "of", "london", "and",
          "mary", "visited", "berlin", ".", "a", "b", "c", "##x", "##y", "eu", "rejects",
          "german", "call"]

_TINY = {"vocab_size": len(_VOCAB), "hidden_size": 32, "num_hidden_layers": 2,
         "num_attention_heads": 2, "intermediate_size": 64, "hidden_act": "gelu",
         "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
         "max_position_embeddings": 64, "type_vocab_size": 2, "initializer_range": 0.02}

# The same two documents in the original four-column IOB1 layout and in two-column IOB2.
_IOB1 = """-DOCSTART- -X- -X- O

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
and CC O O
London NNP B-NP B-LOC
. . O O
"""
_IOB2 = """John B-PER
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
and O
London B-LOC
. O
"""


def _write(path, text):
    path = str(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


@pytest.fixture
def tokenizer(tmp_path):
    return tokenization.FullTokenizer(_write(tmp_path / "vocab.txt", "\n".join(_VOCAB) + "\n"))


# ---------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------

def test_both_layouts_read_alike_and_score_alike(tmp_path):
    iob1 = ner_data.read_conll(_write(tmp_path / "a.txt", _IOB1))
    iob2 = ner_data.read_conll(_write(tmp_path / "b.txt", _IOB2))
    assert [s.words for s in iob1.sentences] == [s.words for s in iob2.sentences]
    assert [s.words for s in iob1.sentences][0] == ["John", "Smith", "lives", "in", "Paris",
                                                   "."]
    assert [s.document for s in iob1.sentences] == [1, 1, 2]  # -DOCSTART- breaks documents
    gold1 = [s.tags for s in iob1.sentences]
    gold2 = [s.tags for s in iob2.sentences]
    assert [ner_metrics.entities(t) for t in gold1] == [ner_metrics.entities(t) for t in gold2]
    # "Berlin and London": IOB1 needs B- only between adjacent same-type entities.
    assert ner_metrics.entities(gold1[2]) == {("PER", 0, 0), ("LOC", 2, 2), ("LOC", 4, 4)}
    # A prediction scored against either scheme gets the same entity scores (token
    # accuracy compares tags as written, as conlleval's does).
    guess = [["B-PER", "I-PER", "O", "O", "B-ORG", "O"], ["B-ORG", "O", "O"],
             ["B-PER", "O", "B-LOC", "O", "O", "O"]]
    one, two = ner_metrics.score(gold1, guess), ner_metrics.score(gold2, guess)
    assert one["f1"] == two["f1"] == pytest.approx(2 * 0.6 * 0.5 / 1.1)  # 3 of 5 found, 3 of 6 gold
    for key in ("precision", "recall", "per_type"):
        assert one[key] == two[key]


def test_hand_computed_scores():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "I-ORG", "I-ORG", "O"]]
    guess = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "I-ORG", "O", "O"]]
    s = ner_metrics.score(gold, guess)
    # gold: PER, LOC, ORG(0-2); predicted: PER, ORG(3), ORG(0-1): one right of three each.
    assert s["precision"] == pytest.approx(1 / 3) and s["recall"] == pytest.approx(1 / 3)
    assert s["accuracy"] == pytest.approx(6 / 8)
    assert s["per_type"]["PER"] == (1.0, 1.0, 1.0, 1)
    assert s["per_type"]["ORG"][:3] == (0.0, 0.0, 0.0)


def test_metric_agrees_with_seqeval():
    seqeval_metrics = pytest.importorskip("seqeval.metrics")
    rng = random.Random(3)
    tags = ["O", "O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "I-MISC"]
    for _ in range(30):
        gold = [[rng.choice(tags) for _ in range(rng.randint(1, 12))] for _ in range(8)]
        guess = [[rng.choice(tags) for _ in s] for s in gold]
        ours = ner_metrics.score(gold, guess)
        assert ours["f1"] == pytest.approx(seqeval_metrics.f1_score(gold, guess), abs=1e-9)
        assert ours["precision"] == pytest.approx(
            seqeval_metrics.precision_score(gold, guess), abs=1e-9)


def test_bad_files_name_file_and_line(tmp_path):
    with pytest.raises(ValueError, match=r"one\.txt, line 2: 'Smith' has one column"):
        ner_data.read_conll(_write(tmp_path / "one.txt", "John B-PER\nSmith\n"))
    words_only = ner_data.read_conll(_write(tmp_path / "w.txt", "John\nSmith\n\nX\n"),
                                     require_tags=False)
    assert not words_only.has_tags and words_only.sentences[0].tags is None
    with pytest.raises(ValueError, match=r"mixed\.txt, line 2: some lines have a tag"):
        ner_data.read_conll(_write(tmp_path / "mixed.txt", "John B-PER\nSmith\n"),
                            require_tags=False)
    with pytest.raises(ValueError, match=r"empty\.txt: no sentences"):
        ner_data.read_conll(_write(tmp_path / "empty.txt", "-DOCSTART- O\n\n\n"))
    dev = ner_data.read_conll(_write(tmp_path / "dev.txt", "John B-PER\nParis B-GPE\n"))
    with pytest.raises(ValueError, match=r"dev\.txt, line 2: tag 'B-GPE' was not seen"):
        ner_data.check_tags(dev, ["O", "B-PER", "I-PER"])


def test_real_conll_2003_reads(shared_dir, tmp_path):
    lines = (shared_dir / "data" / "conll2003" / "train.txt").read_text().splitlines()
    cut = [i for i, line in enumerate(lines) if not line.strip()][199]
    path = _write(tmp_path / "train.txt", "\n".join(lines[:cut]) + "\n")
    conll = ner_data.read_conll(path)
    assert len(conll.sentences) == 200
    assert conll.sentences[0].words[:3] == ["EU", "rejects", "German"]
    assert conll.sentences[0].tags[:3] == ["B-ORG", "O", "B-MISC"]
    labels = ner_data.labels_from(conll)
    assert labels[0] == "O" and set(labels) <= {"O", "B-PER", "I-PER", "B-LOC", "I-LOC",
                                               "B-ORG", "I-ORG", "B-MISC", "I-MISC"}


# ---------------------------------------------------------------------------
# Features and windows
# ---------------------------------------------------------------------------

def test_first_piece_carries_the_label(tmp_path, tokenizer):
    conll = ner_data.read_conll(_write(tmp_path / "t.txt", "Ax B-PER\n\x07 O\nParis B-LOC\n"))
    labels = ["O", "B-LOC", "B-PER"]
    (feature,) = ner_data.convert_file(conll, labels, 8, 4, tokenizer)
    # [CLS] a ##x paris [SEP]: "\x07" has no piece, "Ax" two.
    assert tokenizer.convert_ids_to_tokens(feature.input_ids[:5]) == [
        "[CLS]", "a", "##x", "paris", "[SEP]"]
    assert feature.label_weights == [0, 1, 0, 1, 0, 0, 0, 0]
    assert feature.label_ids[:4] == [0, 2, 0, 1]
    assert feature.word_at == {1: 0, 3: 2}
    tags = ner_data.sentence_predictions(conll, [feature], [[0, 2, 0, 1, 0, 0, 0, 0]], labels)
    assert tags == [["B-PER", "O", "B-LOC"]]  # the empty word still gets a tag


def test_long_sentence_every_word_once_from_its_best_window(tmp_path, tokenizer):
    rng = random.Random(0)
    words = [rng.choice(["a", "b", "c", "Ax", "Byy", "paris"]) for _ in range(300)]
    conll = ner_data.read_conll(_write(tmp_path / "long.txt",
                                       "".join("%s O\n" % w for w in words)))
    features = ner_data.convert_file(conll, ["O"], 64, 16, tokenizer)
    assert len(features) > 10
    # Brute force: the piece positions of every word, and every window's span.
    firsts, position = [], 0
    for word in words:
        firsts.append(position)
        position += len(tokenizer.tokenize(word))
    spans = [(16 * i, min(62, position - 16 * i)) for i in range(len(features))]
    assert spans[-1][0] + spans[-1][1] == position
    seen = {}
    for index, feature in enumerate(features):
        for pos, word in feature.word_at.items():
            assert word not in seen
            seen[word] = index
            assert pos - 1 + spans[index][0] == firsts[word]
    assert sorted(seen) == list(range(300))
    for word, index in seen.items():
        p = firsts[word]
        scores = [(min(p - s, s + n - 1 - p) + 0.01 * n, -i) for i, (s, n) in enumerate(spans)
                  if s <= p < s + n]
        assert max(scores)[1] == -index


def test_document_context_fills_the_window_labels_only_on_the_sentence(tmp_path, tokenizer):
    conll = ner_data.read_conll(_write(tmp_path / "d.txt", _IOB2))
    plain = ner_data.convert_file(conll, ["O", "B-PER", "I-PER", "B-LOC", "B-ORG", "I-ORG"],
                                  32, 8, tokenizer)
    wide = ner_data.convert_file(conll, ["O", "B-PER", "I-PER", "B-LOC", "B-ORG", "I-ORG"],
                                 32, 8, tokenizer, document_context=True)
    # No -DOCSTART-: one document; the middle sentence gets both neighbours.
    assert sum(wide[1].input_mask) == 2 + 6 + 3 + 6
    assert sum(wide[1].label_weights) == sum(plain[1].label_weights) == 3
    tokens = tokenizer.convert_ids_to_tokens(wide[1].input_ids[:17])
    assert tokens[1:7] == ["john", "smith", "lives", "in", "paris", "."]
    assert [tokens[p] for p in sorted(wide[1].word_at)] == ["acme", "corp", "."]


# ---------------------------------------------------------------------------
# Runs
# ---------------------------------------------------------------------------

def _flags(tmp_path, data_dir, out, *extra):
    config = _write(tmp_path / "bert_config.json", json.dumps(_TINY))
    vocab = _write(tmp_path / "vocab.txt", "\n".join(_VOCAB) + "\n")
    return flags_common.parse_flags(run_ner.define_flags, [
        "--data_dir=%s" % data_dir, "--vocab_file=%s" % vocab, "--bert_config_file=%s" % config,
        "--output_dir=%s" % out, "--max_seq_length=16", "--doc_stride=8",
        "--train_batch_size=4", "--eval_batch_size=3", "--predict_batch_size=3",
        "--learning_rate=3e-3", "--seed=1", "--save_checkpoints_steps=1000"] + list(extra))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("ner")
    data = tmp_path / "data"
    _write(data / "train.txt", _IOB2)
    _write(data / "dev.txt", _IOB2)
    _write(data / "test.txt", "".join(line.split()[0] + "\n" if line.strip() else "\n"
                                      for line in _IOB2.splitlines()))
    out = tmp_path / "out"
    result = run_ner.run(_flags(tmp_path, data, out, "--do_train", "--do_eval", "--do_predict",
                                "--num_train_epochs=40"))
    return tmp_path, data, out, result


@pytest.mark.slow
def test_a_tiny_model_learns_the_tags_and_writes_conll_files(trained):
    _, _, out, result = trained
    assert result["eval_f1"] > 0.9 and result["eval_accuracy"] > 0.9
    assert result["eval_loss"] < 0.3
    results = (out / "eval_results.txt").read_text()
    for key in ("eval_f1 =", "eval_precision =", "eval_recall =", "eval_f1_PER =",
                "eval_f1_LOC =", "eval_loss =", "global_step = 30"):  # 3 x 40 / 4
        assert key in results
    lines = (out / "eval_predictions.txt").read_text().splitlines()
    assert len(lines) == len(_IOB2.splitlines())
    for line, source in zip(lines, _IOB2.splitlines()):
        assert line.startswith(source) and len(line.split()) == len(source.split()) + (
            1 if source.strip() else 0)
    test_lines = (out / "test_predictions.txt").read_text().splitlines()
    assert [line.split()[-1] for line in test_lines if line.strip()] == [
        line.split()[-1] for line in lines if line.strip()]
    assert (out / "label_list.txt").read_text().split() == [
        "O", "B-LOC", "B-ORG", "B-PER", "I-ORG", "I-PER"]


@pytest.mark.slow
def test_predict_alone_from_the_trained_output_dir(trained):
    tmp_path, data, out, _ = trained
    before = (out / "test_predictions.txt").read_text()
    (out / "test_predictions.txt").unlink()
    run_ner.run(_flags(tmp_path, data, out, "--do_predict"))
    assert (out / "test_predictions.txt").read_text() == before


@pytest.mark.slow
def test_feature_based_trains_the_lstm_and_leaves_the_encoder(tmp_path):
    data = tmp_path / "data"
    _write(data / "train.txt", _IOB2)
    out = tmp_path / "out"
    run_ner.run(_flags(tmp_path, data, out, "--do_train", "--num_train_epochs=4",
                       "--feature_based", "--layers=-1,-2", "--lstm_units=8",
                       "--save_checkpoints_steps=1"))
    first = checkpoints.CheckpointContents(str(out / "model.ckpt-1"))
    last = checkpoints.CheckpointContents(str(out))
    names = last.model_names()
    assert any("bilstm_1" in n for n in names) and "tagger/output_weights" in names
    encoder = [n for n in names if n.startswith("bert/")]
    assert encoder and all(np.array_equal(first.get(n), last.get(n)) for n in encoder)
    assert not np.array_equal(first.get("tagger/output_weights"),
                              last.get("tagger/output_weights"))


def test_flag_and_label_errors(tmp_path):
    data = tmp_path / "data"
    _write(data / "dev.txt", _IOB2)
    with pytest.raises(ValueError, match="no label list"):
        run_ner.run(_flags(tmp_path, data, tmp_path / "out", "--do_eval"))
    with pytest.raises(ValueError, match="--train_file or --data_dir is required"):
        run_ner.run(_flags(tmp_path, "", tmp_path / "out", "--do_train"))
    with pytest.raises(ValueError, match="--layers: 5 is not a layer"):
        run_ner.run(_flags(tmp_path, data, tmp_path / "out", "--do_train", "--feature_based",
                           "--layers=5"))
