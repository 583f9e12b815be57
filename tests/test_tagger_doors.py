"""A run_ner model folder tags alike through every door (issue 62): run_ner --do_predict's
test_predictions.txt, run_ner.predict, the exported SavedModel's serving_default and
LiteRT fp32 (LiteRTPredictor) give the same words and the same tags, word by word.

One word rule (ner_data.split_words: words end at ASCII blanks only) and run_ner's windows
(--doc_stride apart, each word from the window where it has the most context; --crf:
Viterbi per window, the start penalty on a sentence's first window only), on the run's
trained taggers (tests/trained.py: trained_tagger, trained_tagger_crf, max_seq_length 32
and doc_stride 15, exported with LiteRT fp32 once per run; only read here): the long
sentences need 2 and 3 windows. The entities the export finds are checked on hand-made
tags too (multi-word entities of several types), without a model. Both exports served in a
fresh process (tags and entities as run_ner's): tests/test_export_tasks.py.
"""
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

import modeling
import parity_helpers as ph
import run_ner
import tokenization
from bert_tf2 import flags_common
from bert_tf2.export import litert_data
from bert_tf2.export import serving_tagger
from bert_tf2 import heads
from bert_tf2.tasks import ner_data
from conftest import SHARED_DIR, write_text

# The graph-windows test's own tiny model (random weights, no training).
_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "john", "smith", "mary", "lives",
          "in", "paris", "berlin", "works", "for", "acme", "corp", "and", "visited", "the",
          "cat", "sat", "on", "mat", "then", "it", "saw", "dog", "bird", ".", ",", "(", ")",
          "-", "all", "round", "##er", "reuters", "u", "s", "west", "indian", "phil",
          "simmons", "took", "four", "wickets", "muller", "zurich", "new", "york", "cafe",
          "北", "京", "欢", "迎", "##s"]
_CONFIG = {"vocab_size": len(_VOCAB), "hidden_size": 32, "num_hidden_layers": 2,
           "num_attention_heads": 2, "intermediate_size": 64, "hidden_act": "gelu",
           "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
           "max_position_embeddings": 64, "type_vocab_size": 2, "initializer_range": 0.02}
_GRAPH_WORDS = [s.split(" ") for s in [
    "John Smith lives in Paris .",
    "the cat sat on the mat and the dog saw the bird then John Smith visited Paris .",
    "the cat sat on the mat then it saw the dog and the bird in Paris and John Smith saw "
    "Mary in Berlin .",
    "West Indian all-rounder Phil Simmons took four wickets (Reuters) in the U.S. , "
    "Acme-Corp and Berlin .",
    "Müller lives in Zürich , the café in Paris .",
    "北京 欢迎 John 北京欢迎 Mary",
    "John \U0001F600 visited Ber\u200blin \u200b and New\u00a0York\u2028Paris .",
]]
_SEQ, _STRIDE = ph.SEQ, ph.DOC_STRIDE  # the trained taggers': windows of 30 pieces
# The sentences to tag (words of a CoNLL file): short, 2 and 3 windows (of words that are
# one WordPiece each, names past the first window), punctuation glued to words, accents,
# CJK, emoji, zero-width characters, U+00A0 and U+2028 inside words.
_WORDS = [s.split(" ") for s in [
    "John lives in Paris .",
    "the old man went to the store and bought milk , then the woman went to the river by "
    "the big tree at night and it was a very good day , so john saw mary in london .",
    "the old man went to the store and bought milk , then the woman went to the river by "
    "the big tree at night and it was a very good day , so john saw mary in london and "
    "paris on a small blue day , then mary went to the city and john was in the house .",
    "West Indian all-rounder Phil Simmons took four wickets (Reuters) in the U.S. , "
    "Acme-Corp and London .",
    "Müller lives in Zürich , the café in Paris .",
    "北京 欢迎 John 北京欢迎 Mary",
    "John \U0001F600 visited Lon\u200bdon \u200b and New\u00a0York\u2028Paris .",
]]

# How each text joins its words: every blank of the word rule, runs of them, ends.
_JOINS = [" ", "\t", "  ", "\n", "\r\n", "\x0b", "\x0c \t"]
_EMPTY = ["", " \t\n\r\x0b\x0c "]
_GLUED = "West Indian all-rounder (Reuters) U.S. Lon\u200bdon \u200b"


def _text(words, join):
    return join.join(words)


def _texts():
    return [_text(w, _JOINS[i % len(_JOINS)]) for i, w in enumerate(_WORDS)]


def _conll(sentences):
    return "\n".join("".join("%s\n" % " ".join(t) if isinstance(t, tuple) else "%s\n" % t
                             for t in s) for s in sentences)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("tagger_doors")
    return {"root": root,
            "vocab": write_text(root / "vocab.txt", "\n".join(_VOCAB) + "\n")}


@pytest.fixture(scope="module", params=["softmax", "crf"])
def doors(request):
    """The run's trained tagger (softmax, or --crf), its folder do_predict'ed on _WORDS
    (into this module's own folder) and its export (SavedModel + LiteRT fp32)."""
    return _doors(request.getfixturevalue(
        "trained_tagger" if request.param == "softmax" else "trained_tagger_crf"),
        request.param, request.getfixturevalue("tmp_path_factory"))


def _conll2003_sentences():
    """The 24 longest of the first 400 sentences of CoNLL-2003's test set (most of several
    windows at max_seq_length 32), or [] without ../shared's copy."""
    path = None if SHARED_DIR is None else SHARED_DIR / "data" / "conll2003" / "test.txt"
    if path is None or not path.is_file():
        return []
    return sorted(ner_data.read_conll(str(path)).sentences[:400],
                  key=lambda s: -len(s.words))[:24]


def _doors(trained, head, tmp_path_factory):
    """One do_predict run tags _WORDS and the CoNLL-2003 sentences (a sentence is tagged on
    its own: the file's other sentences change nothing of it)."""
    root = tmp_path_factory.mktemp("tagger_doors_" + head)
    saved = trained.saved_model()  # exported once per run (tests/trained.py)
    out = root / "predict"
    conll2003 = _conll2003_sentences()
    run_ner.run(flags_common.parse_flags(run_ner.define_flags, [
        "--init_checkpoint=%s" % trained.folder,
        "--predict_file=%s" % write_text(root / "test.txt", _conll(
            _WORDS + [s.words for s in conll2003])),
        "--output_dir=%s" % out, "--do_predict"]))
    tagged = _file_predictions(str(out / "test_predictions.txt"))
    assert len(tagged) == len(_WORDS) + len(conll2003)
    return {"head": head, "folder": trained.folder, "export": trained.export_dir,
            "litert": trained.litert and _has_litert(), "saved": saved,
            "predictions": tagged[:len(_WORDS)],
            "conll2003": (conll2003, tagged[len(_WORDS):]),
            "vocab": trained.files["vocab_file"]}


def _has_litert():
    try:
        import ai_edge_litert  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    except ImportError:
        return False
    return True


def _served(saved, texts):
    """[(word, tag)] per text from the SavedModel: its words are the texts' characters
    word_start:word_end."""
    out = {k: v.numpy() for k, v in saved.signatures["serving_default"](
        text=tf.constant(texts, tf.string)).items()}
    found = []
    for i, text in enumerate(texts):
        n = int(out["num_words"][i])
        found.append([(text[int(s):int(e)], t.decode()) for s, e, t in zip(
            out["word_start"][i][:n], out["word_end"][i][:n], out["word_tags"][i][:n])])
    return found


def _litert(doors, texts):
    if not doors["litert"]:
        return None
    from bert_tf2.export import litert_predictor  # pylint: disable=import-outside-toplevel
    return litert_predictor.LiteRTPredictor(doors["export"], "fp32").predict(texts)


def _file_predictions(path):
    """[(word, predicted tag)] per sentence of a test_predictions.txt."""
    conll = ner_data.read_conll(path)
    return [list(zip(s.words, s.tags)) for s in conll.sentences]


def _window_counts(vocab, words_per_sentence):
    """The number of run_ner windows of each sentence."""
    tokenizer = tokenization.FullTokenizer(vocab, True)
    conll = ner_data.conll_of_sentences(words_per_sentence, "sentences", require_tags=False)
    features = ner_data.convert_file(conll, ["O"], _SEQ, _STRIDE, tokenizer)
    return np.bincount([f.sentence_index for f in features]).tolist()


def test_every_door_tags_every_word_as_do_predict(doors):
    """do_predict == predict == SavedModel == LiteRT fp32, word by word, in one batch of
    mixed lengths with empty and blank texts."""
    with open(os.path.join(doors["export"], "assets.extra", "export_info.json")) as f:
        assert json.load(f)["doc_stride"] == _STRIDE  # the folder's, for LiteRT too
    counts = _window_counts(doors["vocab"], _WORDS)
    assert 2 in counts and 3 in counts, counts  # the long sentences need 2 and 3 windows
    want = doors["predictions"]
    assert [[w for w, _ in s] for s in want] == _WORDS
    texts = _texts() + _EMPTY + [_GLUED]
    found = run_ner.predict(doors["folder"], texts)
    assert found[:-1] == want + [[], []]
    assert [w for w, _ in found[-1]] == _GLUED.split(" ")  # one word, several pieces
    assert found[-1][-1][1] == "O"  # a word without WordPieces
    assert _served(doors["saved"], texts) == found
    litert = _litert(doors, texts)
    if litert is not None:
        assert litert == found
    # Past the first window: not all "O", so a door scoring one window would differ.
    past_first = [t for s in want[1:3] for _, t in s[_SEQ - 2:]]
    assert set(past_first) - {"O"}, want[1:3]
    # One text at a time, and texts alone in a batch, tag as in the mixed batch.
    assert _served(doors["saved"], texts[2:3]) == want[2:3]
    assert _served(doors["saved"], _EMPTY) == [[], []]


def expected_entities(words, tags):
    """(type, words joined by a space) of each entity of tagged words, by conlleval's
    rules for IOB2 tags: a B-X, or an I-X after a word of another type or O, starts one;
    the I-X words after it go on with it (also test_export_tasks.py's served taggers)."""
    expected, i = [], 0
    while i < len(tags):
        if tags[i] == "O":
            i += 1
            continue
        kind, j = tags[i][2:], i + 1
        while j < len(tags) and tags[j] == "I-" + kind:
            j += 1
        expected.append((kind, " ".join(words[i:j])))
        i = j
    return expected


def test_entities_of_hand_made_tags_follow_conlleval(data):
    """serving_tagger.tagged_outputs (the export's entity outputs) on tags given by hand
    and at random: multi-word entities of several types, I-X after O or another type, a
    word without pieces (-1, read as O), texts of no words; each entity's text is its
    words' characters (code points) in the text."""
    labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    texts = ["John  Smith visited New\u00a0York City and Ann Lee .",
             "\u00e9l\u00e8ve Zo\u00eb \U0001F600 Lon\u200bdon ,\tParis",
             "", " \t ", "a b c d e f g h i j k l m n o p"]
    given = [["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O", "B-PER", "I-PER", "O"],
             ["I-PER", "I-PER", "I-LOC", "B-LOC", "O", -1]]
    given += [[], [], [labels[i] if i >= 0 else -1
                        for i in np.random.RandomState(3).randint(-1, len(labels), 16)]]
    words = serving_tagger.split_words(tf.constant(texts))
    ids = [labels.index(t) if t != -1 else -1 for tags in given for t in tags]
    out = {k: v.numpy() for k, v in serving_tagger.tagged_outputs(
        tf.constant(texts), words, tf.constant(ids, tf.int32), labels).items()}
    assert out["num_words"].tolist() == [len(t) for t in given]
    for row, (text, tags) in enumerate(zip(texts, given)):
        tags = [t if t != -1 else "O" for t in tags]
        n = int(out["num_entities"][row])
        names = [t.decode("utf-8") for t in out["entity_text"][row][:n]]
        found = [(k.decode(), " ".join(ner_data.split_words(t)))
                 for k, t in zip(out["entity_type"][row][:n], names)]
        assert found == expected_entities(ner_data.split_words(text), tags), (row, found)
        for name, start, end in zip(names, out["entity_start"][row][:n],
                                    out["entity_end"][row][:n]):
            assert text[int(start):int(end)] == name
    assert [int(n) for n in out["num_entities"][:2]] == [3, 3]


def test_the_word_rule_splits_at_ascii_blanks_only():
    assert ner_data.split_words(" a\u00a0b\u2028c\x1cd\x85e\tf\n") == [
        "a\u00a0b\u2028c\x1cd\x85e", "f"]
    assert ner_data.split_words(" \t\r\n\x0b\x0c") == []
    conll = ner_data.conll_of_sentences(["all-rounder (Reuters)\nU.S.", " "], "s",
                                        require_tags=False)
    assert [s.words for s in conll.sentences] == [["all-rounder", "(Reuters)", "U.S."], []]


def test_a_wrong_doc_stride_in_export_info_is_one_line(tmp_path):
    from bert_tf2.export import litert_predictor  # pylint: disable=import-outside-toplevel
    info = {"model_type": "tagger", "max_seq_length": 16, "do_lower_case": True,
            "labels": ["O"], "doc_stride": 0}
    write_text(tmp_path / "assets.extra" / "export_info.json", json.dumps(info))
    with pytest.raises(ValueError, match=r"export_info.json: field 'doc_stride' must be an "
                                         r"integer >= 1, got 0"):
        litert_predictor.read_info(str(tmp_path))
    del info["doc_stride"]  # an export made before it was recorded: run_ner's default
    write_text(tmp_path / "assets.extra" / "export_info.json", json.dumps(info))
    assert "doc_stride" not in litert_predictor.read_info(str(tmp_path))


@pytest.mark.slow
def test_conll2003_sentences_tag_alike(shared_dir, doors):
    """CoNLL-2003 test sentences (the 24 longest of its first 400, most of several windows
    at max_seq_length 32): do_predict of a file of them (the doors fixture's run) ==
    predict == SavedModel == LiteRT fp32."""
    path = shared_dir / "data" / "conll2003" / "test.txt"
    if not path.is_file():
        pytest.skip("%s is missing" % path)
    sentences, want = doors["conll2003"]
    assert len(sentences) == 24 and [[w for w, _ in s] for s in want] == [
        s.words for s in sentences]
    texts = [" ".join(s.words) for s in sentences]
    assert run_ner.predict(doors["folder"], texts) == want
    assert _served(doors["saved"], texts) == want
    litert = _litert(doors, texts)
    if litert is not None:
        assert litert == want


@pytest.mark.slow
def test_a_document_context_folder_tags_one_sentence_as_served(doors, tmp_path):
    """A folder trained with --document_context: a served text is one sentence, its own
    document; predict() on that one sentence gives the same tags."""
    if doors["head"] == "crf":
        pytest.skip("the softmax folder's case says it (the same settings are read)")
    folder = str(tmp_path / "context")
    shutil.copytree(doors["folder"], folder)  # the run's shared folder: changed as a copy
    settings_file = os.path.join(folder, "model_settings.json")
    with open(settings_file) as f:
        saved = json.load(f)
    saved["document_context"] = True
    with open(settings_file, "w") as f:
        json.dump(saved, f)
    texts = _texts()[:3]  # 1, 2 and 3 windows
    served = _served(doors["saved"], texts)
    predictor = run_ner.Predictor(folder)
    try:
        assert [predictor.predict([t])[0] for t in texts] == served
    finally:
        predictor.close()


# ---------------------------------------------------------------------------
# The graph's windows against ner_data's, on random models (no training)
# ---------------------------------------------------------------------------

_LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def test_graph_windows_equal_ner_data_features(data):
    """serving_tagger's windows, owners and tags == ner_data's features decoded as run_ner
    decodes them, for strides from 1 to past the window and texts of 0 to 6 windows;
    softmax, and the CRF with IOB2's start penalty, which only a text's first window takes
    (eager ops on random logits: the graph's rules, without a model)."""
    tokenizer = tokenization.FullTokenizer(data["vocab"], True)
    config = modeling.BertConfig.from_dict(dict(_CONFIG, hidden_size=16, num_hidden_layers=1))
    crf = heads.BertTagger(config, len(_LABELS), crf=True, crf_penalties=heads.crf_constraints(
        _LABELS, "iob2"))
    crf(heads.dummy_features(), training=False)
    crf.crf.transitions.assign(np.random.RandomState(5).normal(
        0, 3, [len(_LABELS)] * 2).astype(np.float32))
    rng = np.random.RandomState(2)
    vocabulary = [w for s in _GRAPH_WORDS for w in s]
    texts = [" ".join(rng.choice(vocabulary, n)) for n in (0, 1, 5, 9, 13, 17, 23, 31, 40)]
    texts[3] = " \u200b " + texts[3] + " \u200b"  # words without pieces, first and last
    for seq_length, stride in ((8, 1), (8, 3), (11, 4), (11, 9), (16, 100)):
        words = serving_tagger.split_words(tf.constant(texts))
        pieces = tf.ragged.constant(
            [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(w.decode()))
             for w in words["strings"].numpy()], tf.int32, ragged_rank=1,
            row_splits_dtype=tf.int64) if words["strings"].shape[0] else None
        windowed = serving_tagger.windows(words, pieces, seq_length, stride)
        batch = litert_data.tagger_batch(texts, tokenizer, seq_length, _LABELS, stride)
        conll, features = batch.extra
        cls, sep = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
        assert [[cls] + row + [sep] for row in windowed["ids"].to_list()] == [
            [i for i in f.input_ids if i] for f in features]
        assert windowed["starts_sentence"].numpy().tolist() == [
            f.starts_sentence for f in features]
        first_word = np.cumsum([0] + [len(s.words) for s in conll.sentences])
        assert sorted(map(tuple, windowed["owned"].numpy().tolist())) == sorted(
            (row, position, first_word[f.sentence_index] + word)
            for row, f in enumerate(features) for position, word in f.word_at.items())
        logits = tf.constant(rng.normal(0, 2, [len(features), seq_length, len(_LABELS)]),
                             tf.float32)
        num_words = tf.size(words["strings"], out_type=tf.int64)
        weights = tf.constant([f.label_weights for f in features], tf.float32)
        starts = tf.constant([f.starts_sentence for f in features], tf.int32)
        for layer, predicted in (
                (None, np.argmax(logits.numpy(), axis=-1)),
                (crf.crf, heads.crf_predictions(logits, crf.crf(logits), weights,
                                                crf.crf.start_penalty, starts).numpy())):
            tag_ids = serving_tagger.word_tag_ids(logits, windowed, num_words, layer).numpy()
            got = [[_LABELS[i] if i >= 0 else "O" for i in tag_ids[a:b]]
                   for a, b in zip(first_word[:-1], first_word[1:])]
            want = ner_data.sentence_predictions(conll, features, predicted, _LABELS)
            assert got == want, (seq_length, stride, layer)
    assert len(features) > len(texts) + 5  # windows of the long texts
