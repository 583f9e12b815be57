"""A run_ner model folder tags alike through every door (issue 62): run_ner --do_predict's
test_predictions.txt, run_ner.predict, the exported SavedModel's serving_default and
LiteRT fp32 (LiteRTPredictor) give the same words and the same tags, word by word.

One word rule (ner_data.split_words: words end at ASCII blanks only) and run_ner's windows
(--doc_stride apart, each word from the window where it has the most context; --crf:
Viterbi per window, the start penalty on a sentence's first window only), on a tiny tagger
trained once per head (max_seq_length 16: the long sentences need 2 and 3 windows).
"""
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

import export_saved_model as esm
import modeling
import run_ner
import tokenization
from bert_tf2 import flags_common
from bert_tf2.export import litert_data
from bert_tf2.export import serving_tagger
from bert_tf2 import heads
from bert_tf2.tasks import ner_data
from conftest import write_text
from test_export_tasks import serve_in_fresh_process

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
_SEQ = 16  # 14 pieces a window
_STRIDE = 6


def _tagged(text):
    """[(word, tag)] of "word/TAG word ..." (tag O when left out)."""
    return [tuple(token.split("/")) if "/" in token else (token, "O")
            for token in text.split(" ")]


_TRAIN = [_tagged(s) for s in [
    "John/B-PER Smith/I-PER lives in Paris/B-LOC .",
    "Mary/B-PER works for Acme/B-ORG Corp/I-ORG .",
    "Mary/B-PER visited Berlin/B-LOC and Paris/B-LOC .",
    "the cat sat on the mat then it saw the dog and the bird in Paris/B-LOC and "
    "John/B-PER Smith/I-PER saw Mary/B-PER in Berlin/B-LOC .",
    "West/B-MISC Indian/I-MISC all-rounder Phil/B-PER Simmons/I-PER took four wickets for "
    "Acme/B-ORG Corp/I-ORG in Berlin/B-LOC .",
    "the dog saw John/B-PER in New\u00a0York/B-LOC , then Mary/B-PER .",
]]
# The sentences to tag (words of a CoNLL file): short, 2 and 3 windows, punctuation glued
# to words, accents, CJK, emoji, zero-width characters, U+00A0 and U+2028 inside words.
_WORDS = [s.split(" ") for s in [
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
# How each text joins its words: every blank of the word rule, runs of them, ends.
_JOINS = [" ", "\t", "  ", "\n", "\r\n", "\x0b", "\x0c \t"]
_EMPTY = ["", " \t\n\r\x0b\x0c "]
_GLUED = "West Indian all-rounder (Reuters) U.S. Ber\u200blin \u200b"


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
            "vocab": write_text(root / "vocab.txt", "\n".join(_VOCAB) + "\n"),
            "config": write_text(root / "bert_config.json", json.dumps(_CONFIG)),
            "train": write_text(root / "train.txt", _conll(_TRAIN)),
            "test": write_text(root / "test.txt", _conll(_WORDS))}


def _model_flags(data):
    return ["--vocab_file=%s" % data["vocab"], "--bert_config_file=%s" % data["config"]]


@pytest.fixture(scope="module", params=["softmax", "crf"])
def doors(request, data):
    """A tiny tagger trained and --do_predict'ed by run_ner, exported with --litert=fp32."""
    head = request.param
    root = data["root"]
    out = root / ("ner_" + head)
    run_ner.run(flags_common.parse_flags(run_ner.define_flags, _model_flags(data) + [
        "--train_file=%s" % data["train"], "--predict_file=%s" % data["test"],
        "--output_dir=%s" % out, "--do_train", "--do_predict", "--do_lower_case",
        "--max_seq_length=%d" % _SEQ, "--doc_stride=%d" % _STRIDE, "--train_batch_size=2",
        "--num_train_epochs=3", "--learning_rate=5e-3", "--seed=3"]
        + (["--crf", "--crf_learning_rate=0.1"] if head == "crf" else [])))
    export_dir = root / ("export_" + head)
    argv = ["--init_checkpoint=%s" % out, "--export_dir=%s" % export_dir]
    litert = _has_litert()
    esm.run(flags_common.parse_flags(esm.define_flags, argv + (["--litert=fp32"] if litert
                                                               else [])))
    return {"head": head, "folder": str(out), "export": str(export_dir), "litert": litert,
            "saved": tf.saved_model.load(str(export_dir))}


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


@pytest.mark.slow
def test_every_door_tags_every_word_as_do_predict(doors, data):
    """do_predict == predict == SavedModel == LiteRT fp32, word by word, in one batch of
    mixed lengths with empty and blank texts."""
    with open(os.path.join(doors["export"], "assets.extra", "export_info.json")) as f:
        assert json.load(f)["doc_stride"] == _STRIDE  # the folder's, for LiteRT too
    counts = _window_counts(data["vocab"], _WORDS)
    assert 2 in counts and 3 in counts, counts  # the long sentences need 2 and 3 windows
    want = _file_predictions(os.path.join(doors["folder"], "test_predictions.txt"))
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
    past_first = [t for s in want[1:3] for _, t in s[14:]]
    assert set(past_first) - {"O"}, want[1:3]
    # One text at a time, and texts alone in a batch, tag as in the mixed batch.
    assert _served(doors["saved"], texts[2:3]) == want[2:3]
    assert _served(doors["saved"], _EMPTY) == [[], []]


@pytest.mark.slow
def test_served_in_a_fresh_process_tags_and_finds_entities_as_run_ner(doors, tmp_path):
    """The export (no --crf flag: read from the folder's model_settings.json; an IOB2
    training file, so --crf_tag_scheme=auto took iob2) loaded in a fresh process that
    imports none of the project: do_predict's tags, and the entities read from them with
    conlleval's rules (B-X then I-X words), their text and code-point offsets."""
    with open(os.path.join(doors["export"], "assets.extra", "export_info.json")) as f:
        info = json.load(f)
    assert info["crf"] is (doors["head"] == "crf")
    assert info["crf_tag_scheme"] == ("iob2" if doors["head"] == "crf" else "none")
    want = _file_predictions(os.path.join(doors["folder"], "test_predictions.txt"))
    texts = [" ".join(w for w, _ in s) for s in want]
    served = serve_in_fresh_process(tmp_path, doors["export"], {"text": texts})
    got = [row[:n] for row, n in zip(served["word_tags"], served["num_words"])]
    assert got == [[t for _, t in s] for s in want]
    assert sum(served["num_entities"]) >= 3  # the model has learned some entities
    for text, tags, types, names, starts, ends, n in zip(
            texts, got, served["entity_type"], served["entity_text"], served["entity_start"],
            served["entity_end"], served["num_entities"]):
        words = text.split(" ")
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
        assert list(zip(types[:n], names[:n])) == expected
        for name, start, end in zip(names[:n], starts[:n], ends[:n]):
            assert text[start:end] == name


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
def test_conll2003_sentences_tag_alike(shared_dir, doors, tmp_path):
    """CoNLL-2003 test sentences (most of several windows at max_seq_length 16): do_predict
    of a file of them == predict == SavedModel == LiteRT fp32."""
    path = shared_dir / "data" / "conll2003" / "test.txt"
    if not path.is_file():
        pytest.skip("%s is missing" % path)
    sentences = ner_data.read_conll(str(path)).sentences[:24]
    subset = write_text(tmp_path / "test.txt", _conll([s.words for s in sentences]))
    out = tmp_path / "predict"
    run_ner.run(flags_common.parse_flags(run_ner.define_flags, [
        "--init_checkpoint=%s" % doors["folder"], "--predict_file=%s" % subset,
        "--output_dir=%s" % out, "--do_predict"]))
    want = _file_predictions(str(out / "test_predictions.txt"))
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
    folder = str(tmp_path / "context")
    shutil.copytree(doors["folder"], folder)
    settings_file = os.path.join(folder, "model_settings.json")
    with open(settings_file) as f:
        saved = json.load(f)
    saved["document_context"] = True
    with open(settings_file, "w") as f:
        json.dump(saved, f)
    if doors["head"] == "crf":
        pytest.skip("the softmax folder's case says it (the same settings are read)")
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
    vocabulary = [w for s in _WORDS for w in s]
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
