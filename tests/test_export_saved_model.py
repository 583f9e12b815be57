"""Tests of export_saved_model: in-graph tokenization, packing, answers, exports."""
import functools
import gzip
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import unicodedata

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

import export_saved_model as esm
import extract_features
import modeling
import run_classifier
import run_squad
import tokenization
from bert_tf2.export import exporter
from bert_tf2.export import serving
from bert_tf2.export import tokenization_graph
from bert_tf2 import flags_common
from bert_tf2 import heads
from bert_tf2 import input_pipeline
from bert_tf2.tasks import long_text
from bert_tf2.tasks import squad_results
from bert_tf2.trainer import checkpoints
from conftest import write_text
from conftest import FP32_ATOL
from conftest import REPO_ROOT
from conftest import StderrLines

# Reference-port helpers the tests compare against.
_TRUNCATE_SEQ_PAIR = run_classifier._truncate_seq_pair
_AS_COMPACT = squad_results.as_compact
_SPAN_CANDIDATES = squad_results.span_candidates

_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "sat", "on", "mat", "a", "dog",
          "ran", "##s", "fast", ".", ",", "un", "##aff", "##able", "##a", "b", "##b", "é",
          "##é", "中", "!", "?", "σ", "ς"]


def _tokenizer(vocab_file, do_lower_case, tmp_path_factory):
    return tokenization_graph.InGraphTokenizer(vocab_file, do_lower_case,
                                str(tmp_path_factory.mktemp("asset")))


def _encoded(texts):
    return tf.constant([t if isinstance(t, bytes) else t.encode("utf-8") for t in texts])


def _assert_ids_equal(in_graph, full, texts):
    got = in_graph.tokenize(_encoded(texts)).to_list()
    for text, ids in zip(texts, got):
        expected = full.convert_tokens_to_ids(full.tokenize(text))
        assert ids == expected, (text, full.convert_ids_to_tokens(expected),
                                 full.convert_ids_to_tokens(ids))


def _assert_words_equal(in_graph, basic, texts):
    got = in_graph.basic_tokenize(_encoded(texts)).to_list()
    for text, words in zip(texts, got):
        assert [w.decode("utf-8") for w in words] == basic.tokenize(text), text


# Strings aimed at each rule of the reference's BasicTokenizer / WordpieceTokenizer.
_ADVERSARIAL = [
    # str.lower()'s final sigma: preceded by a cased letter, not followed by one,
    # case-ignorable characters (apostrophe, period, soft hyphen, marks) skipped.
    "ΟΔΟΣ ΟΔΟΣ. ΣΑΣ Σ aΣ Σa aΣ'b aΣ' a'Σ ΑΣ\u00adΑ ΑΣ\u00ad Α\u0301Σ\u0301 ΑΣ中 中Σ ΑΣ1 ΑΣΣ",
    # NFD canonical reordering among non-Mn combining characters (Mc with a class).
    "\U0001D16D\U0001D165 x\u302e\u1b44y \u1b44\u0300\U0001D16D\u0301\U0001D165",
    # Multi-character and compatibility cases ICU's casefold would change.
    "İstanbul ǅ ß ﬁ Ⅻ ㈱ ½ … ² ″ ς Straße Ǆ ǆ ΐ Ϊ́",
    # Word length limit (characters, not bytes) and [UNK] for whole words.
    "a" * 200, "a" * 201, "é" * 200, "é" * 201, "中" * 300, "x\u0301" * 150,
    "ab" + "\u0301" * 250,
    # Empty, blank, deleted characters, whitespace of every kind.
    "", " ", "\x00\x01\u200b\ufeff\ufffd", "\u2028a\u2029b\x85c\x0bd\x1ce\x0cf",
    "hello\u00a0world\u3000again\u202fend\tx\ny\rz",
    # Hangul, CJK blocks and compatibility ideographs, astral and private use.
    "한국어 텍스트 ᄒᆞᆫ", "豈 更 \U0002F800 \u3400 \U00020000x", "\U0010FFFF\U000E0001x\ue000",
    # Punctuation, and vocabulary-looking input.
    "[UNK] [CLS] ## ### a##b", "U.S.A. e-mail don't $5^2 `x` ~!@#", "unaffable cats.",
    # Invalid UTF-8 (dropped as bytes.decode("utf-8", "ignore") does).
    b"a\xffb \xc3( caf\xc3\xa9 \xed\xa0\x80x \xf0\x9f\x98 ok\xf0\x9f\x98\x80",
]


@functools.lru_cache(maxsize=None)
def _assigned_code_points():
    """(every assigned code point but surrogates, the combining marks among them): a pass
    over all of Unicode (about a second), made once for the module's three callers."""
    assigned = tuple(cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF
                     and unicodedata.category(chr(cp)) != "Cn")
    return assigned, tuple(cp for cp in assigned if unicodedata.combining(chr(cp)))


def _random_texts(count, seed):
    """Random strings over all of Unicode, over combining marks, and over casing."""
    rng = random.Random(seed)
    assigned, marks = _assigned_code_points()
    casing = [0x3A3] * 8 + [0x41, 0x61, 0x27, 0x2E, 0x3A, 0xAD, 0x200D, 0x345, 0x2B0, 0x20,
                            0x300, 0x1D165, 0x130, 0xDF, 0x10400, 0x2160, 0x24B6, 0x4E00]
    texts = []
    for i in range(count):
        n = rng.randint(0, 30)
        kind = i % 4
        if kind == 0:
            text = "".join(chr(rng.choice(assigned)) for _ in range(n))
        elif kind == 1:
            text = "".join(chr(rng.choice(marks if rng.random() < 0.6 else assigned))
                           for _ in range(n))
        elif kind == 2:
            text = "".join(chr(rng.choice(casing)) for _ in range(n))
        else:  # any code point, as (possibly invalid) UTF-8 bytes
            text = "".join(chr(rng.randrange(0x110000)) for _ in range(n)).encode(
                "utf-8", "surrogatepass")
        texts.append(text)
    return texts


# ---------------------------------------------------------------------------
# Tokenization (self-contained, tiny vocabulary)
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_vocab(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    return write_text(path, "".join(t + "\n" for t in _VOCAB))


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_adversarial_and_random_strings(tiny_vocab, tmp_path_factory, do_lower_case):
    in_graph = _tokenizer(tiny_vocab, do_lower_case, tmp_path_factory)
    full = tokenization.FullTokenizer(tiny_vocab, do_lower_case)
    texts = _ADVERSARIAL + _random_texts(800, seed=7 + do_lower_case)
    _assert_words_equal(in_graph, full.basic_tokenizer, texts)
    _assert_ids_equal(in_graph, full, texts)


def test_context_rules_are_exercised(tiny_vocab, tmp_path_factory):
    """The sigma rule and the canonical reordering change words in these strings."""
    in_graph = _tokenizer(tiny_vocab, True, tmp_path_factory)
    words = in_graph.basic_tokenize(_encoded(["aΣ aΣb", "\U0001D16D\U0001D165"])).to_list()
    assert words[0] == ["aς".encode(), "aσb".encode()]
    assert words[1] == ["\U0001D165\U0001D16D".encode()]


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_wordpiece_with_a_random_vocabulary(tmp_path, tmp_path_factory, do_lower_case):
    """Greedy longest-match-first splits (and [UNK]s) on many multi-piece words."""
    rng = random.Random(5)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "b", "##a", "abcabcabc"]
    for _ in range(60):
        piece = "".join(rng.choice("abcé") for _ in range(rng.randint(1, 4)))
        vocab.append(piece if rng.random() < 0.5 else "##" + piece)
    vocab_file = write_text(tmp_path / "vocab.txt", "\n".join(vocab) + "\n")
    texts = [" ".join("".join(rng.choice("abcéA") for _ in range(rng.randint(1, 12)))
                      for _ in range(rng.randint(0, 6))) for _ in range(600)]
    texts += ["a" * 200, "a" * 201, "ab" * 101, "é" * 201, "abcabcabc" * 22]
    in_graph = _tokenizer(vocab_file, do_lower_case, tmp_path_factory)
    full = tokenization.FullTokenizer(vocab_file, do_lower_case)
    _assert_ids_equal(in_graph, full, texts)
    words = [full.tokenize(w) for t in texts for w in full.basic_tokenizer.tokenize(t)]
    assert sum(len(w) > 2 for w in words) > 150  # many words of several pieces
    assert sum(w == ["[UNK]"] for w in words) > 100


def test_vocabulary_lines_as_load_vocab_reads_them(tmp_path, tmp_path_factory):
    """Duplicates (the last wins), blank lines, surrounding spaces, CRLF."""
    text = "[PAD]\r\n[UNK]\n[CLS]\n[SEP]\n  cat \ncat\n\ndog\n\n##s\na b\nx\x01\n"
    vocab_file = write_text(tmp_path / "vocab.txt", text)
    full = tokenization.FullTokenizer(vocab_file, True)
    in_graph = _tokenizer(vocab_file, True, tmp_path_factory)
    _assert_ids_equal(in_graph, full, ["cat dogs cats", "a b x", ""])
    lines = tokenization_graph.vocab_asset_lines(tokenization.load_vocab(vocab_file))
    assert lines[4] == " 4" and lines[5] == "cat" and lines[6] == " 6"
    assert len(lines) == len(text.split("\n")) - 1


def test_vocabulary_needs_the_special_tokens(tmp_path, tmp_path_factory):
    vocab_file = write_text(tmp_path / "vocab.txt", "[CLS]\n[SEP]\ncat\n")
    with pytest.raises(ValueError, match=r"^--vocab_file=\S*vocab\.txt has no \[UNK\] token"):
        _tokenizer(vocab_file, True, tmp_path_factory)
    vocab_file = write_text(tmp_path / "vocab2.txt", "[UNK]\n[SEP]\ncat\n")
    with pytest.raises(ValueError, match=r"^--vocab_file=\S*vocab2\.txt has no \[CLS\] token"):
        _tokenizer(vocab_file, True, tmp_path_factory)


# ---------------------------------------------------------------------------
# Tokenization on the golden set (the reference's own outputs)
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("do_lower_case", [True, False])
def test_golden_tokenization(shared_dir, tmp_path_factory, do_lower_case):
    path = shared_dir / "golden" / "tokenization" / "tokenization_public.jsonl.gz"
    with gzip.open(str(path), "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    rows = [r for r in rows if r["do_lower_case"] == do_lower_case]
    assert len(rows) == 1105
    vocab_file = str(shared_dir / "data" / "vocab" / "uncased_vocab.txt")
    full = tokenization.FullTokenizer(vocab_file, do_lower_case)
    in_graph = _tokenizer(vocab_file, do_lower_case, tmp_path_factory)
    got = in_graph.tokenize(tf.constant(
        [r["text"].encode("utf-8", "surrogatepass") for r in rows])).to_list()
    for row, ids in zip(rows, got):
        assert ids == full.convert_tokens_to_ids(row["tokens"]), row["text"]


def test_random_strings_with_the_real_vocabulary(shared_dir, tmp_path_factory):
    vocab_file = str(shared_dir / "data" / "vocab" / "uncased_vocab.txt")
    texts = _ADVERSARIAL + _random_texts(300, seed=11)
    for do_lower_case in (True, False):
        full = tokenization.FullTokenizer(vocab_file, do_lower_case)
        _assert_ids_equal(_tokenizer(vocab_file, do_lower_case, tmp_path_factory), full,
                          texts)


# ---------------------------------------------------------------------------
# Packing and answer selection
# ---------------------------------------------------------------------------

def test_truncation_closed_form_is_truncate_seq_pair():
    cases = [(m, a, b) for m in range(13) for a in range(14) for b in range(14)]
    expected = []
    for max_length, len_a, len_b in cases:
        tokens_a, tokens_b = list(range(len_a)), list(range(len_b))
        _TRUNCATE_SEQ_PAIR(tokens_a, tokens_b, max_length)
        expected.append((len(tokens_a), len(tokens_b)))
        assert input_pipeline.truncated_pair_lengths(len_a, len_b, max_length) == expected[-1]
    for max_length in range(13):
        rows = [i for i, case in enumerate(cases) if case[0] == max_length]
        got = input_pipeline.truncated_pair_lengths(
            tf.constant([cases[i][1] for i in rows], tf.int64),
            tf.constant([cases[i][2] for i in rows], tf.int64), max_length)
        assert list(zip(got[0].numpy().tolist(), got[1].numpy().tolist())) == [
            expected[i] for i in rows]


def test_packing_equals_convert_single_example(tiny_vocab, tmp_path_factory):
    full = tokenization.FullTokenizer(tiny_vocab, True)
    in_graph = _tokenizer(tiny_vocab, True, tmp_path_factory)
    rng = random.Random(3)
    words = ["the", "cat", "sat", "on", "a", "mat", "dogs", "unaffable", ".", "zzz"]
    pairs = [(" ".join(rng.choice(words) for _ in range(rng.randint(0, 9))),
              " ".join(rng.choice(words) for _ in range(rng.randint(0, 9))))
             for _ in range(150)]
    pairs += [("the cat", ""), ("the cat", "\x00\u200b"), ("", "dogs"), ("", "")]
    for seq_length in (3, 4, 5, 8, 13):
        packed = serving.pack_inputs(in_graph.tokenize(_encoded([a for a, _ in pairs])),
                                 in_graph.tokenize(_encoded([b for _, b in pairs])),
                                 seq_length, in_graph.cls_id, in_graph.sep_id)
        for i, (a, b) in enumerate(pairs):
            example = run_classifier.InputExample("x-%d" % i, a, b, "0")
            feature = run_classifier.convert_single_example(i + 5, example, ["0", "1"],
                                                            seq_length, full)
            for key in ("input_ids", "input_mask", "segment_ids"):
                assert packed[key][i].numpy().tolist() == getattr(feature, key), (a, b, key)


class _Window(object):
    """The parts of a run_squad feature that its span rules read."""

    def __init__(self, len_a, len_b):
        first = len_a + 2
        self.tokens = ["t"] * (first + len_b + 1)
        self.token_to_orig_map = {p: 0 for p in range(first, first + len_b)}
        self.token_is_max_context = {p: True for p in range(first, first + len_b)}


def test_best_spans_follow_run_squad():
    rng = np.random.RandomState(0)
    seq_length, n_best, max_answer = 24, 5, 4
    cases = []
    for i in range(300):
        len_a = rng.randint(0, 8)
        len_b = rng.randint(0, seq_length - len_a - 2)
        # Small integer logits: many ties, which must break as the reference's do.
        scale = 3 if i % 2 else 1000
        start = rng.randint(-scale, scale, size=seq_length).astype(np.float32)
        end = rng.randint(-scale, scale, size=seq_length).astype(np.float32)
        cases.append((len_a, len_b, start, end))
    len_a = tf.constant([c[0] for c in cases], tf.int64)
    len_b = tf.constant([c[1] for c in cases], tf.int64)
    start, end, score, found = serving.best_spans(
        tf.constant(np.stack([c[2] for c in cases])), tf.constant(np.stack([c[3] for c in cases])),
        len_a, len_b, n_best, max_answer)
    for i, (a, b, start_logits, end_logits) in enumerate(cases):
        result = _AS_COMPACT(run_squad.RawResult(0, start_logits.tolist(),
                                                 end_logits.tolist()), n_best)
        candidates = _SPAN_CANDIDATES(0, _Window(a, b), result, max_answer)
        candidates = sorted(candidates, key=lambda c: c.start_logit + c.end_logit,
                            reverse=True)
        if not candidates:
            assert not found[i] and start[i] == -1 and end[i] == -1
            continue
        best = candidates[0]
        assert (int(start[i]), int(end[i])) == (best.start_index, best.end_index), i
        assert float(score[i]) == best.start_logit + best.end_logit


# ---------------------------------------------------------------------------
# A self-contained export (tiny random model, tiny vocabulary)
# ---------------------------------------------------------------------------

_TINY_CONFIG = dict(vocab_size=len(_VOCAB), hidden_size=8, num_hidden_layers=1,
                    num_attention_heads=2, intermediate_size=16, max_position_embeddings=32,
                    type_vocab_size=2, hidden_act="gelu", initializer_range=0.5)


def _export_argv(kind, config, checkpoint, vocab, export_dir, seq_length, extra=()):
    return ["--model_type=%s" % kind, "--bert_config_file=%s" % config,
            "--init_checkpoint=%s" % checkpoint, "--vocab_file=%s" % vocab,
            "--max_seq_length=%d" % seq_length, "--export_dir=%s" % export_dir] + list(extra)


def _export(argv):
    return esm.run(flags_common.parse_flags(esm.define_flags, argv))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, tiny_vocab):
    """A random 2-label classifier as a TF1 checkpoint, its encoder alone, one export."""
    root = tmp_path_factory.mktemp("tiny")
    config_file = write_text(root / "bert_config.json", json.dumps(_TINY_CONFIG))
    config = modeling.BertConfig.from_dict(_TINY_CONFIG)
    model = heads.BertClassifier(config, 2)
    model(heads.dummy_features())
    tensors = {n: v.numpy() for n, v in checkpoints.tf1_variable_map(model).items()}
    checkpoints.write_tf1_checkpoint(tensors, str(root / "classifier" / "model.ckpt"))
    checkpoints.write_tf1_checkpoint({n: t for n, t in tensors.items() if n.startswith("bert/")},
                                     str(root / "encoder" / "model.ckpt"))
    export_dir = root / "export" / "classifier"
    _export(_export_argv("classifier", config_file, root / "classifier", tiny_vocab,
                         export_dir, 16, ["--task_name=SST-2"]))
    return {"root": root, "config_file": config_file, "config": config, "model": model,
            "vocab": tiny_vocab, "export_dir": export_dir}


_ENCODER_FLAGS = ["--pooling=mean", "--layers=-1", "--normalize"]


def _tiny_export(tiny, kind, export_dir, serving_dtype):
    """The tiny classifier (--task_name=SST-2) or encoder (_ENCODER_FLAGS) exported into
    `export_dir` from the command line's flags with --serving_dtype; the export leaves the
    global Keras policy float32 (asserted). Returns export_dir."""
    extra = ["--task_name=SST-2"] if kind == "classifier" else _ENCODER_FLAGS
    _export(_export_argv(kind, tiny["config_file"], tiny["root"] / kind, tiny["vocab"],
                         export_dir, 16, extra + ["--serving_dtype=%s" % serving_dtype]))
    assert tf_keras.mixed_precision.global_policy().name == "float32"
    return export_dir


@pytest.fixture(scope="module")
def tiny_exports(tiny):
    """_tiny_export of (kind, serving_dtype), made once per module on first use (the tests
    only read them): export(kind, serving_dtype) -> its folder."""
    made = {}

    def export(kind, serving_dtype):
        if (kind, serving_dtype) not in made:
            made[kind, serving_dtype] = _tiny_export(
                tiny, kind, tiny["root"] / "export" / ("%s_%s" % (kind, serving_dtype)),
                serving_dtype)
        return made[kind, serving_dtype]
    return export


@pytest.fixture(scope="module")
def encoder_export(tiny_exports):
    """The tiny encoder exported once from the command line's flags (_ENCODER_FLAGS, and
    --serving_dtype=fp32): what run(Settings) and a bf16 export are compared with."""
    return tiny_exports("encoder", "fp32")


@pytest.fixture(scope="module")
def loaded():
    """tf.saved_model.load of a folder, once per module (the tests only call it)."""
    made = {}

    def load(export_dir):
        if str(export_dir) not in made:
            made[str(export_dir)] = tf.saved_model.load(str(export_dir))
        return made[str(export_dir)]
    return load


def test_tiny_classifier_export(tiny, loaded):
    export_dir = tiny["export_dir"]
    assert sorted(os.listdir(str(export_dir))) == [
        "assets", "assets.extra", "fingerprint.pb", "saved_model.pb", "variables"]
    assert not [n for n in os.listdir(str(export_dir.parent)) if ".tmp-" in n or ".old-" in n]
    with open(str(export_dir / "assets" / "vocab.txt"), encoding="utf-8") as f:
        assert f.read().split("\n")[:-1] == _VOCAB
    with open(str(export_dir / "assets.extra" / "export_info.json")) as f:
        info = json.load(f)
    assert info["labels"] == ["0", "1"] and info["max_seq_length"] == 16
    assert info["unicode_version"] == unicodedata.unidata_version
    # No --warmup_file: no warm-up requests (test_export_base_writes_new_versions_...: one).
    assert os.listdir(str(export_dir / "assets.extra")) == ["export_info.json"]

    loaded = loaded(export_dir)
    assert set(loaded.signatures) == {"serving_default", "serving_text_a", "serving_ids",
                                      "tokenize"}
    full = tokenization.FullTokenizer(tiny["vocab"], True)
    pairs = [("The cat sat on the mat.", "A dog ran fast!"), ("unaffable cats", ""),
             ("", "the dogs"), ("é " * 20, "the " * 20), ("Σ中, ?", "\x00")]
    features = [run_classifier.convert_single_example(
        i, run_classifier.InputExample(str(i), a, b, "0"), ["0", "1"], 16, full)
        for i, (a, b) in enumerate(pairs)]
    ids = {key: tf.constant([getattr(f, key) for f in features], tf.int32)
           for key in ("input_ids", "input_mask", "segment_ids")}
    logits = tiny["model"](ids)["logits"].numpy()
    expected = tf.nn.softmax(logits).numpy()

    out = loaded.signatures["serving_default"](text_a=_encoded([a for a, _ in pairs]),
                                               text_b=_encoded([b for _, b in pairs]))
    # The SavedModel's graph vs the eager model: other kernels, float32's bound.
    np.testing.assert_allclose(out["probabilities"].numpy(), expected, atol=FP32_ATOL)
    np.testing.assert_allclose(out["logits"].numpy(), logits, atol=1e-5)
    assert out["labels"].numpy().tolist() == [[b"0", b"1"]] * len(pairs)
    assert out["predicted_label"].numpy().tolist() == [
        str(k).encode() for k in expected.argmax(-1)]
    by_ids = loaded.signatures["serving_ids"](**ids)
    np.testing.assert_allclose(by_ids["probabilities"].numpy(), expected, atol=FP32_ATOL)
    # One text: the serving_text_a signature and method, and an empty text_b agree.
    single = loaded.signatures["serving_text_a"](text_a=_encoded(["the cat", "a dog"]))
    called = loaded.serving_text_a(_encoded(["the cat", "a dog"]))
    paired = loaded.serving_default(_encoded(["the cat", "a dog"]), _encoded(["", ""]))
    for other in (called, paired):  # the same packed ids through the same graph
        np.testing.assert_allclose(other["probabilities"].numpy(),
                                   single["probabilities"].numpy(), atol=1e-7)
    tokens = loaded.signatures["tokenize"](text=_encoded(["the cats sat", "", "un"]))
    assert tokens["num_tokens"].numpy().tolist() == [4, 0, 1]
    assert tokens["token_ids"].numpy().tolist() == [[4, 5, 12, 6], [-1] * 4, [16, -1, -1, -1]]


def test_run_with_settings_twice_in_one_process_equals_the_command_line_export(
        tiny, encoder_export, loaded, tmp_path):
    """run(Settings(...)) from Python, no absl parsing: twice into one folder (the second
    replaces the first export), each the same model, files and export_info as the parsed
    flags': the classifier, then the encoder (its Settings: pooling, layers, normalize). The
    second run follows a --dtype=bf16 run's global policy (mixed_bfloat16), as a run and an
    export in one process do: it still serves the float32 model and leaves the policy as it
    was."""
    export_dir = str(tmp_path / "from_python")
    texts = _encoded(["the cat sat on the mat", "a dog ran fast", "unaffable cats", ""])
    runs = [("float32", esm.Settings(
        model_type="classifier", task_name="SST-2", bert_config_file=tiny["config_file"],
        init_checkpoint=str(tiny["root"] / "classifier"), vocab_file=tiny["vocab"],
        max_seq_length=16, export_dir=export_dir), tiny["export_dir"], "serving_text_a",
             {"text_a": texts}),
            ("mixed_bfloat16", esm.Settings(
                model_type="encoder", bert_config_file=tiny["config_file"],
                init_checkpoint=str(tiny["root"] / "encoder"), vocab_file=tiny["vocab"],
                max_seq_length=16, pooling="mean", layers="-1", normalize=True,
                export_dir=export_dir), encoder_export, "embed", {"text": texts})]
    for policy, settings, command_line, signature, inputs in runs:
        want = loaded(command_line).signatures[signature](**inputs)
        with open(str(command_line / "assets.extra" / "export_info.json")) as f:
            want_info = json.load(f)
        tf_keras.mixed_precision.set_global_policy(policy)
        try:
            result = esm.run(settings)
            assert tf_keras.mixed_precision.global_policy().name == policy
        finally:
            tf_keras.mixed_precision.set_global_policy("float32")
        assert result.output_dir == export_dir
        assert sorted(result.outputs) == ["export_info", "saved_model", "vocab"]
        for path in result.outputs.values():
            assert os.path.isfile(path), path
        with open(result.outputs["export_info"]) as f:
            assert json.load(f) == want_info
        served = tf.saved_model.load(result.output_dir)
        assert sorted(served.signatures) == sorted(loaded(command_line).signatures)
        got = served.signatures[signature](**inputs)
        assert sorted(got) == sorted(want)
        for key in want:  # the same export, shapes and kernels
            if want[key].dtype == tf.string:
                assert got[key].numpy().tolist() == want[key].numpy().tolist(), key
            else:
                assert got[key].dtype == want[key].dtype == tf.float32 or (
                    want[key].dtype.is_integer), key
                np.testing.assert_allclose(got[key].numpy(), want[key].numpy(), atol=1e-6,
                                           rtol=0)
    assert os.listdir(str(tmp_path)) == ["from_python"]
    assert settings.given("max_seq_length") and not settings.given("do_lower_case")


def test_settings_from_python_are_checked_as_the_flags_are(tiny, tmp_path):
    base = dict(model_type="classifier", task_name="SST-2", bert_config_file=tiny["config_file"],
                init_checkpoint=str(tiny["root"] / "classifier"), vocab_file=tiny["vocab"],
                max_seq_length=16, export_dir=str(tmp_path / "out"))
    for change, message in (({"model_type": "bogus"}, "^model_type='bogus': expected one of encoder, "),
                            ({"serving_dtype": "int8"}, "^serving_dtype='int8': expected one of "
                                                        "fp32, bf16, fp16$"),
                            ({"export_dir": None}, "^export_dir is required$"),
                            ({"pooling": "cls"}, "^pooling=cls has no effect with "
                                                 "model_type=classifier$")):
        with pytest.raises(ValueError, match=message):
            esm.run(esm.Settings(**dict(base, **change)))
    assert not os.path.exists(str(tmp_path / "out"))


def _functions(export_dir):
    """The FunctionDefs of a SavedModel's graph (its signatures and what they call)."""
    from tensorflow.core.protobuf import saved_model_pb2  # pylint: disable=import-outside-toplevel
    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((export_dir / "saved_model.pb").read_bytes())
    return saved.meta_graphs[0].graph_def.library.function


def _graph_op_dtypes(export_dir, op_types):
    """The dtypes (attr T) of the ops of `op_types` in a SavedModel's functions."""
    return {tf.dtypes.as_dtype(node.attr["T"].type).name
            for function in _functions(export_dir) for node in function.node_def
            if node.op in op_types}


def _graph_nodes(export_dir):
    """(function/node name, op type) of every node of the export's functions."""
    return [("%s/%s" % (function.signature.name, node.name), node.op)
            for function in _functions(export_dir) for node in function.node_def]


def _casts_of_variables(export_dir):
    """The Cast nodes of the export's functions that convert a variable as read, but for
    the embeddings' and a classifier's output layer's (a few rows each: the token-type
    table, [num_labels, H])."""
    casts = []
    for function in _functions(export_dir):
        reads = {node.name for node in function.node_def if node.op == "ReadVariableOp"}
        casts += ["%s/%s" % (function.signature.name, node.name)
                  for node in function.node_def
                  if node.op == "Cast" and node.input[0].split(":")[0] in reads
                  and "/embeddings/" not in node.name
                  and "bert_classifier/classifier/" not in node.name]
    return casts


def _attention_concats(export_dir):
    """The ConcatV2 nodes of the attention layers in a SavedModel's graph (the query, key
    and value kernels put side by side at each call; not the length groups' contexts
    joined, attention/self/row_groups)."""
    return [name for name, op in _graph_nodes(export_dir)
            if op == "ConcatV2" and "/attention/self/" in name and "/row_groups/" not in name]


@pytest.mark.parametrize("serving_dtype", ["bf16", "fp32"])
def test_serving_dtype_weights_stored_converted_give_the_same_outputs(
        tiny, tiny_exports, loaded, tmp_path, monkeypatch, serving_dtype):
    """An export stores its query / key / value kernels side by side and, bf16, its Dense
    weights converted (exporter.weights_as_served); it answers exactly as when
    every call joined and converted the float32 variables: the matmuls get the same
    values. (The stored one: the module's export of that dtype, as the tests below read.)"""
    stored = tiny_exports("encoder", serving_dtype)
    monkeypatch.setattr(exporter, "weights_as_served", lambda model: None)
    converted = _tiny_export(tiny, "encoder", tmp_path / "converted", serving_dtype)
    joins = [_attention_concats(d) for d in (stored, converted)]
    assert joins[0] == [] and joins[1] != []
    if serving_dtype == "bf16":
        assert _casts_of_variables(stored) == [] and _casts_of_variables(converted) != []
    texts = _encoded(["the cat sat on the mat", "a dog", "unaffable cats sat", ""])
    a, b = loaded(stored), tf.saved_model.load(str(converted))
    for signature, kwargs in (("embed", dict(text=texts)),
                              ("serving_text_a", dict(text_a=texts))):
        got, want = a.signatures[signature](**kwargs), b.signatures[signature](**kwargs)
        for key in want:
            assert np.array_equal(got[key].numpy(), want[key].numpy()), (signature, key)


@pytest.mark.parametrize("kind, serving_dtype", [("classifier", "fp16"), ("encoder", "bf16")])
def test_serving_dtype_computes_the_matmuls_in_it_and_keeps_the_signatures(
        tiny, encoder_export, tiny_exports, loaded, kind, serving_dtype):
    """A --serving_dtype export (fp16: a classifier, bf16: an encoder; the same Keras
    policy for every model type) has its matmuls in that dtype, the fp32 export's
    signatures (inputs, outputs and their dtypes), float32 outputs near the fp32 export's:
    a classifier's probabilities, an encoder's sentence vectors. (The export leaves the
    global policy float32: _tiny_export asserts it.)"""
    export_dir = tiny_exports(kind, serving_dtype)
    fp32_dir = tiny["export_dir"] if kind == "classifier" else encoder_export
    with open(str(export_dir / "assets.extra" / "export_info.json")) as f:
        assert json.load(f)["serving_dtype"] == serving_dtype
    name = {"bf16": "bfloat16", "fp16": "float16"}[serving_dtype]
    matmuls = ("MatMul", "BatchMatMulV2", "_FusedMatMul")
    assert name in _graph_op_dtypes(export_dir, matmuls)
    assert _graph_op_dtypes(fp32_dir, matmuls) == {"float32"}
    # The Dense layers' weights are stored in that dtype: no call converts them again, nor
    # puts the query, key and value kernels side by side.
    assert _casts_of_variables(export_dir) == []
    assert _attention_concats(export_dir) == [] and _attention_concats(fp32_dir) == []
    low = loaded(export_dir)
    kernels = {v.dtype.name for v in low.model_variables if v.name.endswith("/kernel:0")}
    assert kernels == {name}

    full = loaded(fp32_dir)
    for signature in full.signatures:  # same inputs and outputs, outputs' dtypes too
        assert (low.signatures[signature].structured_input_signature
                == full.signatures[signature].structured_input_signature)
        assert (low.signatures[signature].structured_outputs
                == full.signatures[signature].structured_outputs)
    if kind == "encoder":
        texts = _encoded(["the cat sat on the mat", "a dog", "unaffable cats sat"])
        got = low.signatures["embed"](text=texts)["sentence_embedding"]
        want = full.signatures["embed"](text=texts)["sentence_embedding"].numpy()
        assert got.dtype == tf.float32
        cosine = np.sum(got.numpy() * want, axis=-1)
        assert np.all(cosine > 0.99) and not np.array_equal(got.numpy(), want)
        return
    texts = _encoded(["the cat sat on the mat", "a dog ran fast", "unaffable cats", ""])
    got = low.signatures["serving_text_a"](text_a=texts)
    want = full.signatures["serving_text_a"](text_a=texts)
    assert got["probabilities"].dtype == tf.float32
    # fp16 keeps 11 bits of mantissa: the tiny random model's probabilities move by
    # well under 0.05 (bf16: 8 bits, also), and not by nothing.
    difference = np.abs(got["probabilities"].numpy() - want["probabilities"].numpy())
    assert 0 < difference.max() < 0.05


def test_bad_serving_dtype_is_refused_before_anything_is_written(tiny, tmp_path):
    from absl import flags  # pylint: disable=import-outside-toplevel
    argv = _export_argv("classifier", tiny["config_file"], tiny["root"] / "classifier",
                        tiny["vocab"], tmp_path / "out", 16,
                        ["--task_name=SST-2", "--serving_dtype=int8"])
    with pytest.raises(flags.IllegalFlagValueError,
                       match=r"--serving_dtype=int8: value should be one of <fp32\|bf16\|fp16>"):
        _export(argv)
    with pytest.raises(ValueError, match="--serving_dtype must be one of fp32, bf16, fp16, "
                                         "got 'int8'"):
        esm.export("classifier", tiny["config"], str(tiny["root"] / "classifier"),
                   tiny["vocab"], True, 16, str(tmp_path / "out"), labels=["0", "1"],
                   serving_dtype="int8")
    assert not os.path.exists(str(tmp_path / "out"))


class _SmallModule(tf.Module):
    """Stands in for ServingModule in the tests of write_saved_model (fast to save)."""

    def __init__(self, value):
        super().__init__()
        self.value = tf.Variable(value)
        self.serve = tf.function(lambda x: {"y": x * self.value},
                                 input_signature=[tf.TensorSpec([None], tf.float32)])

    def signatures(self):
        return {"serving_default": self.serve.get_concrete_function()}


def test_export_replaces_only_when_complete_and_only_what_it_wrote(tmp_path, monkeypatch):
    export_dir = str(tmp_path / "model")
    os.makedirs(os.path.join(export_dir, "assets.extra"))
    write_text(os.path.join(export_dir, "assets.extra", "export_info.json"), "{}")
    write_text(os.path.join(export_dir, "variables", "variables.index"), "previous export")
    # Added by the user after the export: TF Serving's warm-up requests, a note.
    warmup = os.path.join("assets.extra", "tf_serving_warmup_requests")
    write_text(os.path.join(export_dir, warmup), "warm-up records")
    write_text(os.path.join(export_dir, "notes", "README.txt"), "how we serve it")
    before = sorted(os.listdir(export_dir))

    def broken_save(*args, **kwargs):
        raise RuntimeError("disk full")

    with monkeypatch.context() as patch:
        patch.setattr(tf.saved_model, "save", broken_save)
        with pytest.raises(RuntimeError, match="disk full"):
            esm.write_saved_model(_SmallModule(2.0), export_dir, {"a": 1})
    assert os.listdir(str(tmp_path)) == ["model"]
    assert sorted(os.listdir(export_dir)) == before

    esm.write_saved_model(_SmallModule(3.0), export_dir + "/", {"a": 1})
    assert os.listdir(str(tmp_path)) == ["model"]
    loaded = tf.saved_model.load(export_dir)
    assert loaded.signatures["serving_default"](x=tf.constant([2.0]))["y"].numpy() == [6.0]
    with open(os.path.join(export_dir, "assets.extra", "export_info.json")) as f:
        assert json.load(f) == {"a": 1}
    # What an export writes is replaced; what was added to it is kept.
    with open(os.path.join(export_dir, "variables", "variables.index"), "rb") as f:
        assert f.read() != b"previous export"
    with open(os.path.join(export_dir, warmup)) as f:
        assert f.read() == "warm-up records"
    with open(os.path.join(export_dir, "notes", "README.txt")) as f:
        assert f.read() == "how we serve it"


def test_export_never_replaces_what_it_did_not_write(tmp_path):
    home = tmp_path / "models"
    (home / "mine").mkdir(parents=True)
    (home / "mine" / "weights.bin").write_text("keep")
    a_file = tmp_path / "a_file"
    a_file.write_text("keep")
    for target, message in ((home, "is not a SavedModel exported by this script"),
                            (a_file, "is a file, not a directory")):
        with pytest.raises(ValueError, match="--export_dir=.*" + message):
            esm.write_saved_model(_SmallModule(2.0), str(target), {"a": 1})
    assert (home / "mine" / "weights.bin").read_text() == "keep"
    assert a_file.read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "models"]
    empty = tmp_path / "empty"
    empty.mkdir()
    esm.write_saved_model(_SmallModule(2.0), str(empty), {"a": 1})  # an empty folder is fine


@pytest.mark.parametrize("argv_change, message", [
    ({"model_type": None}, "--model_type is required"),
    ({"export_dir": None}, "--export_dir is required"),
    ({"init_checkpoint": None}, "--init_checkpoint is required"),
    ({"task_name": None}, "--model_type=classifier needs the model's labels, and "
                          "--init_checkpoint=.* has no classifier_task.json"),
    ({"task_name": "nope"}, "unknown --task_name"),
    ({"max_seq_length": "33"}, "longer than the 32 positions"),
    ({"task_name": "mnli"}, "output_weights has shape \\[2, 8\\]"),
    ({"model_type": "squad", "task_name": None, "max_query_length": "13"},
     "must be greater than max_query_length \\(13\\) \\+ 3"),
    ({"model_type": "squad", "task_name": None, "max_query_length": "4",
      "init_checkpoint": "encoder"},
     "has no head of a squad model \\(it lacks cls/squad/output_weights, cls/squad/output_bias"
     "\\): a squad model is made by run_squad$"),
    ({"vocab_file": "missing.txt"}, "does not exist"),
    # A flag this export would not read is refused, never dropped.
    ({"pooling": "cls"}, "^--pooling=cls has no effect with --model_type=classifier$"),
    ({"threshold": "0.3"}, "^--threshold=0.3 has no effect without a multi-label classifier$"),
    ({"model_type": "squad"}, "^--task_name=sst-2 has no effect with --model_type=squad$"),
    ({"model_type": "encoder", "task_name": None, "n_best_size": "5"},
     "^--n_best_size=5 has no effect with --model_type=encoder$"),
    ({"model_type": "encoder", "task_name": None, "labels_file": "labels.txt"},
     "--labels_file=.* has no effect with --model_type=encoder"),
    ({"export_dir": "a_file/model"}, "--export_dir=.*a_file/model is not writable"),
])
def test_bad_flags(tiny, tmp_path, argv_change, message):
    flag_values = {"model_type": "classifier", "task_name": "sst-2",
                   "bert_config_file": tiny["config_file"],
                   "init_checkpoint": str(tiny["root"] / "classifier"),
                   "vocab_file": tiny["vocab"], "max_seq_length": "16",
                   "export_dir": str(tmp_path / "out")}
    for key, value in argv_change.items():
        if key == "init_checkpoint" and value:
            value = str(tiny["root"] / value)
        if key in ("vocab_file", "labels_file", "export_dir") and value:
            value = str(tmp_path / value)
        flag_values[key] = value
    write_text(tmp_path / "a_file", "keep")
    argv = ["--%s=%s" % (k, v) for k, v in flag_values.items() if v is not None]
    with pytest.raises(ValueError, match=message):
        _export(argv)
    assert not os.path.exists(str(tmp_path / "out"))
    assert sorted(os.listdir(str(tmp_path))) == ["a_file"]


def test_saved_long_text_settings_are_read_and_their_errors_name_the_file(tiny, tmp_path):
    """A classifier's long_text.json beside --init_checkpoint is the export's default; a
    value that does not fit --max_seq_length is reported against the file, not a flag."""
    trained = tmp_path / "trained"
    shutil.copytree(str(tiny["root"] / "classifier"), str(trained))
    write_text(trained / "long_text.json", json.dumps(
        {"mode": "windows", "head_tokens": 4, "doc_stride": 40, "pooling": "mean"}))
    argv = _export_argv("classifier", tiny["config_file"], trained, tiny["vocab"],
                        tmp_path / "out", 16, ["--task_name=sst-2"])
    with pytest.raises(ValueError, match=r"^\S*trained/long_text\.json: doc_stride=40 must be "
                                         r"between 1 and max_seq_length - 2 = 14 .*pass "
                                         r"--doc_stride"):
        _export(argv)
    fv = flags_common.parse_flags(esm.define_flags, argv + ["--doc_stride=6"])
    assert esm._long_text(esm.Settings.of(fv)) == long_text.LongText("windows", 4, 6, "mean")
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------
# Golden checkpoint: encoder, SQuAD and an end-to-end classifier
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def golden(shared_dir):
    path = shared_dir / "golden" / "tf1_tiny"
    with open(str(path / "inputs.json"), encoding="utf-8") as f:
        inputs = json.load(f)
    return {"dir": path, "lines": inputs["lines"], "config": str(path / "bert_config.json"),
            "checkpoint": str(path / "bert_model.ckpt"), "vocab": str(path / "vocab.txt"),
            "expected": np.load(str(path / "expected_outputs.npz"))}


@pytest.mark.slow
def test_encoder_equals_reference_and_extract_features(golden, tmp_path):
    export_dir = tmp_path / "encoder"
    _export(_export_argv("encoder", golden["config"], golden["checkpoint"], golden["vocab"],
                         export_dir, 24))
    examples = [extract_features.parse_line(line, i) for i, line in enumerate(golden["lines"])]
    loaded = tf.saved_model.load(str(export_dir))
    out = loaded.signatures["serving_default"](
        text_a=_encoded([e.text_a for e in examples]),
        text_b=_encoded([e.text_b or "" for e in examples]))
    expected = golden["expected"]
    for key in ("input_ids", "input_mask", "segment_ids"):
        np.testing.assert_array_equal(out[key].numpy(), expected[key])
    for key in ("pooled_output", "sequence_output"):
        np.testing.assert_allclose(out[key].numpy(), expected[key], atol=1e-5)
    layers = out["encoder_layers"].numpy()
    for layer in range(2):
        np.testing.assert_allclose(layers[:, layer], expected["encoder_layer_%d" % layer],
                                   atol=1e-5)

    input_file = write_text(tmp_path / "input.txt", "".join(l + "\n" for l in golden["lines"]))
    output_file = str(tmp_path / "features.jsonl")
    extract_features.run(flags_common.parse_flags(extract_features.define_flags, [
        "--input_file=%s" % input_file, "--output_file=%s" % output_file,
        "--vocab_file=%s" % golden["vocab"], "--bert_config_file=%s" % golden["config"],
        "--init_checkpoint=%s" % golden["checkpoint"], "--layers=-1,-2",
        "--max_seq_length=24", "--batch_size=4"]))
    with open(output_file) as f:
        lines = [json.loads(line) for line in f]
    for row, line in enumerate(lines):
        for position, token in enumerate(line["features"]):
            for layer in token["layers"]:
                np.testing.assert_allclose(layer["values"],
                                           layers[row, 2 + layer["index"], position],
                                           atol=1e-5)


def _short_squad_articles(path, tokenizer, max_tokens, limit):
    """The first paragraphs of at most `max_tokens` tokens, whole, until they hold `limit`
    questions (the first article's alone held 233: each is run through the export, the
    eager model and run_squad's predictions)."""
    with open(str(path), encoding="utf-8") as f:
        data = json.load(f)["data"]
    articles, count = [], 0
    for article in data:
        paragraphs = []
        for paragraph in article["paragraphs"]:
            if count >= limit:
                break
            if len(tokenizer.tokenize(paragraph["context"])) <= max_tokens:
                paragraphs.append(paragraph)
                count += len(paragraph["qas"])
        if paragraphs:
            articles.append({"title": article["title"], "paragraphs": paragraphs})
        if count >= limit:
            return articles
    return articles


@pytest.mark.slow
def test_squad_equals_run_squad(golden, shared_dir, tmp_path):
    seq_length = 128
    export_dir = tmp_path / "squad"
    _export(_export_argv("squad", golden["config"], golden["checkpoint"], golden["vocab"],
                         export_dir, seq_length, ["--max_query_length=32"]))
    loaded = tf.saved_model.load(str(export_dir))
    tokenizer = tokenization.FullTokenizer(golden["vocab"], True)
    dev = shared_dir / "data" / "squad" / "dev-v1.1.json"
    # Contexts that fit one window: the answers must be run_squad's.
    articles = _short_squad_articles(dev, tokenizer, 80, limit=60)
    examples = run_squad.examples_from_articles(articles, is_training=False)
    contexts = [p["context"] for a in articles for p in a["paragraphs"] for _ in p["qas"]]
    features = []
    run_squad.convert_examples_to_features(examples, tokenizer, seq_length, 128, 32, False,
                                           features.append)
    assert len(features) == len(examples) >= 60
    questions = _encoded([e.question_text for e in examples])
    out = loaded.signatures["serving_default"](question=questions, context=_encoded(contexts))
    for key in ("input_ids", "input_mask", "segment_ids"):
        np.testing.assert_array_equal(out[key].numpy(), [getattr(f, key) for f in features])
    model = heads.BertSquad(modeling.BertConfig.from_json_file(golden["config"]))
    model(heads.dummy_features())
    checkpoints.load_checkpoint(model, golden["checkpoint"])
    reference = model({k: np.array([getattr(f, k) for f in features], np.int32)
                       for k in ("input_ids", "input_mask", "segment_ids")})
    for key in ("start_logits", "end_logits"):
        np.testing.assert_allclose(out[key].numpy(), reference[key].numpy(), atol=1e-5)
    results = [run_squad.RawResult(f.unique_id, s.tolist(), e.tolist()) for f, s, e in zip(
        features, out["start_logits"].numpy(), out["end_logits"].numpy())]
    predictions = run_squad.compute_predictions(examples, features, results, 20, 30, True)
    answers = loaded.signatures["answer"](question=questions, context=_encoded(contexts))
    for i, example in enumerate(examples):
        assert answers["answer"][i].numpy().decode("utf-8") == \
            predictions.predictions[example.qas_id], example.qas_id
        best = predictions.nbest[example.qas_id][0]
        assert float(answers["score"][i]) == pytest.approx(
            best["start_logit"] + best["end_logit"], abs=1e-4)

    # A long context: the signature sees run_squad's first window.
    with open(str(dev), encoding="utf-8") as f:
        paragraph = json.load(f)["data"][0]["paragraphs"][0]
    long_examples = run_squad.examples_from_articles(
        [{"title": "x", "paragraphs": [paragraph]}], is_training=False)[:3]
    windows = []
    run_squad.convert_examples_to_features(long_examples, tokenizer, seq_length, 128, 32,
                                           False, windows.append)
    first = [w for w in windows if w.doc_span_index == 0]
    assert len(windows) > len(first) == 3
    out = loaded.serving_default(_encoded([e.question_text for e in long_examples]),
                                 _encoded([paragraph["context"]] * 3))
    np.testing.assert_array_equal(out["input_ids"].numpy(), [w.input_ids for w in first])


def _snapshot(folder):
    """{relative path: (inode, mtime, bytes)} of every file under `folder`, and its inode:
    equal snapshots mean nothing there was replaced, rewritten or removed."""
    files = {}
    for root, _, names in os.walk(str(folder)):
        for name in names:
            path = os.path.join(root, name)
            stat = os.stat(path)
            with open(path, "rb") as f:
                files[os.path.relpath(path, str(folder))] = (stat.st_ino, stat.st_mtime_ns,
                                                             f.read())
    return os.stat(str(folder)).st_ino, files


def _earlier_export(folder):
    """An earlier export (y = 2x) with a note of the user's at its top."""
    esm.write_saved_model(_SmallModule(2.0), str(folder), {"a": 1})
    write_text(os.path.join(str(folder), "notes.txt"), "how we serve it")
    return _snapshot(folder)


def test_a_symlinked_export_dir_has_its_target_replaced_and_the_link_kept(tmp_path):
    target, link = tmp_path / "exports" / "v1", tmp_path / "current"
    _earlier_export(target)
    # A link of the user's inside the export, to a folder of theirs: carried over as a link,
    # the replaced export removed without following it.
    write_text(tmp_path / "exports" / "warmup" / "requests", "warm-up records")
    os.symlink(str(tmp_path / "exports" / "warmup"), str(target / "assets.extra" / "warmup"))
    os.symlink(str(target), str(link))
    assert esm.write_saved_model(_SmallModule(3.0), str(link) + "/", {"a": 2}) == str(link)
    assert os.path.islink(str(link)) and os.readlink(str(link)) == str(target)
    assert os.path.islink(str(target / "assets.extra" / "warmup"))
    assert (tmp_path / "exports" / "warmup" / "requests").read_text() == "warm-up records"
    loaded = tf.saved_model.load(str(target))
    assert loaded.signatures["serving_default"](x=tf.constant([2.0]))["y"].numpy() == [6.0]
    assert (target / "notes.txt").read_text() == "how we serve it"
    assert sorted(os.listdir(str(tmp_path))) == ["current", "exports"]
    assert sorted(os.listdir(str(tmp_path / "exports"))) == ["v1", "warmup"]
    dangling = tmp_path / "dangling"
    os.symlink(str(tmp_path / "nowhere"), str(dangling))
    with pytest.raises(ValueError, match=r"^--export_dir=.*dangling is a symlink to "
                                         r".*nowhere, which is not a folder"):
        esm.write_saved_model(_SmallModule(3.0), str(dangling), {"a": 2})
    assert not os.path.exists(str(tmp_path / "nowhere"))


def test_files_of_a_users_in_assets_or_variables_are_named_and_nothing_replaced(tmp_path):
    export_dir = tmp_path / "model"
    _earlier_export(export_dir)
    for extra in ("assets/my_labels.txt", "variables/backup/variables.index"):
        write_text(export_dir / extra, "mine")
    before = _snapshot(export_dir)
    with pytest.raises(ValueError) as e:
        esm.write_saved_model(_SmallModule(3.0), str(export_dir), {"a": 2})
    message = str(e.value)
    assert "\n" not in message and ("2 file(s) it did not write: assets/my_labels.txt, "
                                    "variables/backup/variables.index; move them out"
                                    in message), message
    assert _snapshot(export_dir) == before and os.listdir(str(tmp_path)) == ["model"]


@pytest.mark.parametrize("failure", ["converter", "disk full", "missing file"])
def test_a_failed_reexport_leaves_the_earlier_one_untouched(tmp_path, failure):
    """The stage after the SavedModel (--litert's conversion) fails: a converter error, a
    full disk, a file it says it wrote but did not; the earlier export is as it was."""
    export_dir = tmp_path / "model"
    before = _earlier_export(export_dir)

    def before_rename(folder):
        write_text(os.path.join(folder, "model_fp32.tflite"), "half a model")
        if failure == "converter":
            raise RuntimeError("converter error: op not supported")
        if failure == "disk full":
            raise OSError(28, "No space left on device")
        return ["model_fp32.tflite", "litert_report.json"]

    with pytest.raises((RuntimeError, OSError, ValueError)) as e:
        esm.write_saved_model(_SmallModule(3.0), str(export_dir), {"a": 2},
                              before_rename=before_rename)
    if failure == "missing file":
        assert "litert_report.json is missing or empty: nothing was replaced" in str(e.value)
    assert _snapshot(export_dir) == before and os.listdir(str(tmp_path)) == ["model"]


# The exported module of the stopped-export script below: one variable, one signature.
_SMALL_MODULE = r'''

class Small(tf.Module):
    def __init__(self):
        super().__init__()
        self.value = tf.Variable(3.0)
        self.serve = tf.function(lambda x: {"y": x * self.value},
                                 input_signature=[tf.TensorSpec([None], tf.float32)])

    def signatures(self):
        return {"serving_default": self.serve.get_concrete_function()}
'''


# Both kinds of stopped export run in one process (one TensorFlow start-up): "stop:<stage>"
# sends itself a SIGTERM at <stage>; "hold:<stage>" waits at <stage> on a named pipe nobody
# writes until the test's SIGTERM, whose exception it prints and drops, as TensorFlow's C++
# code calling back into Python (the LiteRT converter's calibration) does.
_STOPPED_EXPORT = r'''
import os, signal, sys, time
sys.path.insert(0, sys.argv[1])
from bert_tf2 import startup  # noqa: F401
import tensorflow as tf
from bert_tf2 import cli
from bert_tf2.export import saved_model_dir

EXPORT_DIRS = {"stop": sys.argv[2], "hold": sys.argv[3]}
FIFO = sys.argv[4]
MODE = STAGE = None
''' + _SMALL_MODULE + r'''

def stop_at(stage):
    if MODE == "stop" and stage == STAGE:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(60)  # run_cli's handler raises in here
        sys.exit("not stopped")


def hold(stage):
    if MODE != "hold" or stage != STAGE:
        return
    print("holding " + stage, file=sys.stderr, flush=True)
    try:
        with open(FIFO) as f:
            f.read()
    except BaseException as e:  # pylint: disable=broad-except
        print("hold:%s: swallowed %s" % (stage, type(e).__name__), flush=True)


def at(stage):
    stop_at(stage)
    hold(stage)


real_save, real_rename = tf.saved_model.save, tf.io.gfile.rename
tf.saved_model.save = lambda *a, **k: (real_save(*a, **k), at("save"))
tf.io.gfile.rename = lambda src, dst, overwrite=False: (
    real_rename(src, dst, overwrite), at("rename" if ".old-" in dst else None))


def before_rename(folder):
    with open(os.path.join(folder, "model_fp32.tflite"), "w") as f:
        f.write("converted")
    at("convert")
    return ["model_fp32.tflite"]


def run(unused_settings):
    saved_model_dir.write_saved_model(Small(), EXPORT_DIRS[MODE], {"a": 2}, before_rename)
    print("%s:%s: complete" % (MODE, STAGE), flush=True)


# run_cli installs its handler again at each run.
for step in sys.argv[5:]:
    MODE, STAGE = step.split(":")
    print("== " + step, file=sys.stderr, flush=True)
    try:
        cli.run_cli(lambda fv: None, run, ["stopped_export"])
    except SystemExit as e:
        print("%s: exit %s" % (step, e.code), flush=True)
'''

_STOPS = ("stop:save", "stop:convert", "stop:rename")
_HOLDS = ("hold:save", "hold:convert")


@pytest.fixture(scope="module")
def stopped_exports(tmp_path_factory):
    """_STOPPED_EXPORT run once over _STOPS then _HOLDS (the test sending each hold its
    SIGTERM), each mode re-exporting over an earlier export of its own folder:
    {"stdout": lines, "stderr": {step: its stderr}, mode: (folder, snapshot before)}."""
    root = tmp_path_factory.mktemp("stopped_exports")
    made = {}
    for mode in ("stop", "hold"):
        export_dir = root / mode / "model"
        made[mode] = (export_dir.parent, _earlier_export(export_dir))
    fifo = root / "hold" / "never_written"
    os.mkfifo(str(fifo))
    script = write_text(root / "stopped_export.py", _STOPPED_EXPORT)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(REPO_ROOT), str(root / "stop" / "model"),
         str(root / "hold" / "model"), str(fifo)] + list(_STOPS + _HOLDS),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = StderrLines(proc)
    for step in _HOLDS:
        lines.wait_for("^holding %s$" % step.split(":")[1])
        proc.send_signal(signal.SIGTERM)
    stderr = lines.text()
    made["stdout"] = proc.stdout.read().splitlines()
    made["stderr"] = dict(part.split("\n", 1) for part in stderr.split("== ")[1:])
    made["all_stderr"] = stderr
    return made


def test_sigterm_at_each_stage_of_a_reexport_leaves_the_earlier_one_untouched(
        stopped_exports):
    """A real SIGTERM (run_cli's handler) while the SavedModel is saved, while the LiteRT
    files are written, and between the two renames: exit 143, the earlier export as it
    was, no temporary left."""
    folder, before = stopped_exports["stop"]
    assert stopped_exports["stdout"][:len(_STOPS)] == [
        "%s: exit 143" % s for s in _STOPS], stopped_exports["all_stderr"][-3000:]
    for step in _STOPS:
        assert stopped_exports["stderr"][step].count("error: stopped by SIGTERM") == 1, step
    assert _snapshot(folder / "model") == before
    assert os.listdir(str(folder)) == ["model"]


def test_a_sigterm_a_library_swallowed_still_stops_the_export(stopped_exports):
    """Issue 72: a SIGTERM during --litert was printed as a SystemError and lost (the
    export completed, exit 0). A real SIGTERM sent while the export is held (a named pipe)
    in the save and in the conversion step, its exception dropped there: exit 143, the
    earlier export untouched, no temporary left."""
    folder, before = stopped_exports["hold"]
    assert stopped_exports["stdout"][len(_STOPS):] == [
        line for s in _HOLDS for line in ("%s: swallowed _Terminated" % s, "%s: exit 143" % s)
    ], stopped_exports["all_stderr"][-3000:]
    for step in _HOLDS:
        assert stopped_exports["stderr"][step].count("error: stopped by SIGTERM") == 1, step
    assert _snapshot(folder / "model") == before
    assert sorted(os.listdir(str(folder))) == ["model", "never_written"]


def test_what_a_killed_export_left_is_put_back_or_removed(tmp_path):
    """SIGKILL between the two renames leaves the earlier export under its .old- name and
    the new one under .tmp-: the next export puts the earlier one back (its user files
    carried over) and removes the temporary; another folder's names are not touched."""
    export_dir = tmp_path / "model"
    _earlier_export(export_dir)
    os.rename(str(export_dir), str(tmp_path / "model.old-0123abcd"))
    write_text(tmp_path / "model.tmp-89abcdef" / "saved_model.pb", "half")
    write_text(tmp_path / "model2.tmp-89abcdef" / "keep", "another export's")
    esm.write_saved_model(_SmallModule(3.0), str(export_dir), {"a": 2})
    assert sorted(os.listdir(str(tmp_path))) == ["model", "model2.tmp-89abcdef"]
    assert (export_dir / "notes.txt").read_text() == "how we serve it"


# -- TF Serving's layout (--export_base / --version) and warm-up file -----------------------

def _serving_proto_classes():
    """PredictionLog and its parts built from the field numbers tensorflow/serving's
    prediction_log.proto, predict.proto and model.proto document (not warmup.py's
    constants), parsed by protobuf itself: the cross-check of warmup.read_requests."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from tensorflow.core.framework import tensor_pb2
    pool = descriptor_pool.Default()  # holds TensorFlow's tensor.proto already
    f = descriptor_pb2.FileDescriptorProto(name="serving_check.proto", package="tfs",
                                           dependency=[tensor_pb2.DESCRIPTOR.name],
                                           syntax="proto3")
    label, msg, string = (descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
                          descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                          descriptor_pb2.FieldDescriptorProto.TYPE_STRING)

    def add(name, fields, map_entry=False):
        m = f.message_type.add(name=name)
        if map_entry:
            m.options.map_entry = True
        for field_name, number, kind, type_name, repeated in fields:
            m.field.add(name=field_name, number=number, type=kind, type_name=type_name,
                        label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
                        if repeated else label)
        return m

    add("ModelSpec", [("name", 1, string, None, False), ("signature_name", 3, string, None,
                                                          False)])
    request = add("PredictRequest", [("model_spec", 1, msg, ".tfs.ModelSpec", False),
                                     ("inputs", 2, msg, ".tfs.PredictRequest.InputsEntry",
                                      True)])
    entry = request.nested_type.add(name="InputsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=string, label=label)
    entry.field.add(name="value", number=2, type=msg, type_name=".tensorflow.TensorProto",
                    label=label)
    add("PredictLog", [("request", 1, msg, ".tfs.PredictRequest", False)])
    add("PredictionLog", [("predict_log", 6, msg, ".tfs.PredictLog", False)])
    try:
        pool.FindFileByName(f.name)
    except KeyError:
        pool.AddSerializedFile(f.SerializeToString())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tfs.PredictionLog"))


def _parsed_warmup(path):
    """[(model name, signature, {input: array})] parsed by protobuf with the documented
    field numbers."""
    log_class = _serving_proto_classes()
    found = []
    for record in tf.data.TFRecordDataset(str(path)).as_numpy_iterator():
        log = log_class.FromString(record)
        request = log.predict_log.request
        found.append((request.model_spec.name, request.model_spec.signature_name,
                      {k: tf.make_ndarray(v) for k, v in request.inputs.items()}))
    return found


def _tiny_flags(tiny, *extra):
    return ["--model_type=classifier", "--task_name=SST-2",
            "--bert_config_file=%s" % tiny["config_file"],
            "--init_checkpoint=%s" % (tiny["root"] / "classifier"),
            "--vocab_file=%s" % tiny["vocab"], "--max_seq_length=16"] + list(extra)


_WARMUP_LINES = ["the cat sat\ta dog ran", "unaffable cats", "Σ中, ?\tthe", "é é é"]


def _doc_commands(text, program):
    """The command lines of `program` in a page's bash blocks (continuations joined)."""
    found, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(program + " "):
            command = line
            while command.endswith("\\"):
                i += 1
                command = command[:-1] + " " + lines[i].strip()
            found.append(command.split())
    return found


def _the_docs_tf_serving_export(tiny, tmp_path):
    """docs/serving.md's export command line (its flags, paths moved under tmp_path, the tiny
    model's flags added: the binary is absent here) writes <base>/1/saved_model.pb and the
    warm-up file its printf makes; the tensorflow_model_server line points at that base
    under the name the REST URLs use. Returns the base."""
    from bert_tf2.export import warmup
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "docs", "serving.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## TF Serving"):]
    (export,) = _doc_commands(section, "python export_saved_model.py")
    (server,) = _doc_commands(section, "tensorflow_model_server")
    given = dict(arg[2:].split("=", 1) for arg in export[2:])
    assert sorted(given) == ["export_base", "init_checkpoint", "warmup_file"]
    served = dict(arg[2:].split("=", 1) for arg in server[1:])
    assert served["model_base_path"] == given["export_base"]
    urls = re.findall(r"http://localhost:%s/v1/models/(\w+):predict" % served["rest_api_port"],
                      section)
    assert len(urls) == 6 and urls[0] == served["model_name"] == os.path.basename(
        given["export_base"])
    (printf,) = [line for line in section.splitlines() if line.startswith("printf ")]
    lines = re.match(r"printf '(.*)' > (\S+)$", printf).group(1).split("\\n")[:-1]
    assert printf.endswith("> " + given["warmup_file"])
    warmup_file = write_text(tmp_path / given["warmup_file"].lstrip("/"),
                             "\n".join(line.replace("\\t", "\t") for line in lines) + "\n")
    base = tmp_path / given["export_base"].lstrip("/")
    flags = [a for a in _tiny_flags(tiny) if not a.startswith("--init_checkpoint")]
    _export(flags + ["--init_checkpoint=%s" % (tiny["root"] / "classifier"),
                     "--export_base=%s" % base, "--warmup_file=%s" % warmup_file])
    assert os.listdir(str(base)) == ["1"]
    assert os.path.isfile(str(base / "1" / "saved_model.pb"))
    requests = warmup.read_requests(str(base / "1" / warmup.WARMUP_FILE))
    assert [(name, sig, {k: v.tolist() for k, v in inputs.items()})
            for name, sig, inputs in requests] == [
        ("mrpc", "serving_default", {"text_a": [b"The cat sat on the mat."],
                                     "text_b": [b"A cat was sitting on the mat."]}),
        ("mrpc", "serving_text_a", {"text_a": [b"The cat sat on the mat."]}),
        ("mrpc", "serving_default", {"text_a": [b"It rained all day."], "text_b": [b""]}),
        ("mrpc", "serving_text_a", {"text_a": [b"It rained all day."]})]
    return base


def test_export_base_writes_new_versions_with_warmup_requests_tf_serving_replays(tiny, tmp_path):
    """--export_base: <base>/1 by docs/serving.md's TF Serving commands (what they write and
    name: _the_docs_tf_serving_export), then --version=1 refused (nothing touched), then
    --version=7 with --warmup_file, then the next free number 8 (serving_layout.target, the
    rule the export takes its folder from: two exports here, not three); the warm-up file parsed
    by protobuf with the documented field numbers (and warmup.read_requests) and every
    request replayed through the loaded version's signature, as TF Serving does, equal to
    the batched call and to the eager model."""
    from bert_tf2.export import serving_layout, warmup
    base = _the_docs_tf_serving_export(tiny, tmp_path)
    warmup_file = write_text(tmp_path / "warmup_7.txt", "\n".join(_WARMUP_LINES) + "\n\n")
    before = _snapshot(base / "1")
    with pytest.raises(ValueError, match=r"^--version=1: %s exists \(a server"
                                         % re.escape(str(base / "1"))):
        _export(_tiny_flags(tiny, "--export_base=%s" % base, "--version=1"))
    result = _export(_tiny_flags(tiny, "--export_base=%s" % base, "--version=7",
                                 "--warmup_file=%s" % warmup_file))
    assert result.output_dir == str(base / "7")
    assert result.outputs["warmup_requests"] == str(base / "7" / warmup.WARMUP_FILE)
    assert serving_layout.target(esm.Settings.of(flags_common.parse_flags(
        esm.define_flags, _tiny_flags(tiny, "--export_base=%s" % base)))) == str(base / "8")
    assert sorted(os.listdir(str(base))) == ["1", "7"]
    assert _snapshot(base / "1") == before
    for version in ("1", "7"):
        assert os.path.isfile(str(base / version / "saved_model.pb"))
        with open(str(base / version / "assets.extra" / "export_info.json")) as f:
            assert json.load(f)["init_checkpoint"] == "classifier"  # no machine path

    path = base / "7" / warmup.WARMUP_FILE
    parsed = _parsed_warmup(path)
    ours = warmup.read_requests(str(path))
    rows = [line.split("\t") for line in _WARMUP_LINES]
    # Every signature docs/serving.md shows for a classifier (issue 91: serving_text_a, for
    # single texts, was left cold), each row once per signature.
    assert len(parsed) == len(ours) == 2 * len(rows) == 8
    for number, ((name, signature, inputs), theirs) in enumerate(zip(parsed, ours)):
        row = rows[number // 2]
        want = {"text_a": [row[0].encode()], "text_b": [(row[1:] or [""])[0].encode()]}
        if number % 2:
            want = {"text_a": want["text_a"]}
        assert (name, signature) == (base.name, ("serving_default", "serving_text_a")[
            number % 2]) == theirs[:2]
        assert {k: v.tolist() for k, v in inputs.items()} == {
            k: v.tolist() for k, v in theirs[2].items()} == want
    loaded = tf.saved_model.load(str(base / "7"))
    batched = loaded.signatures["serving_default"](
        text_a=_encoded([r[0] for r in rows]), text_b=_encoded([(r[1:] or [""])[0] for r in rows]))
    full = tokenization.FullTokenizer(tiny["vocab"], True)
    features = [run_classifier.convert_single_example(
        i, run_classifier.InputExample(str(i), r[0], (r[1:] or [None])[0], "0"), ["0", "1"], 16,
        full) for i, r in enumerate(rows)]
    eager = tf.nn.softmax(tiny["model"]({key: tf.constant([getattr(f, key) for f in features])
                                         for key in ("input_ids", "input_mask", "segment_ids")})
                          ["logits"]).numpy()
    for number, (_, signature, inputs) in enumerate(parsed):
        if signature != "serving_default":
            continue
        i = number // 2
        out = loaded.signatures[signature](**{k: tf.constant(v) for k, v in inputs.items()})
        np.testing.assert_allclose(out["probabilities"].numpy()[0],
                                   batched["probabilities"].numpy()[i], atol=1e-6)
        np.testing.assert_allclose(out["probabilities"].numpy()[0], eager[i], atol=FP32_ATOL)


@pytest.mark.parametrize("extra, message", [
    (["--export_base=B", "--export_dir=D"], r"^give --export_dir or --export_base, not both"),
    (["--export_dir=D", "--version=3"], r"^--version=3 has no effect without --export_base$"),
    (["--export_base=B", "--version=0"], r"^--version must be >= 1, got 0$"),
    (["--export_dir=D", "--warmup_examples=0"], r"^--warmup_examples must be >= 1, got 0$"),
    (["--export_dir=D", "--warmup_examples=3"], r"^--warmup_examples needs --warmup_file"),
    (["--export_dir=D", "--warmup_file=W.txt"], r"^--warmup_file=.*W.txt does not exist"),
    ([], r"^--export_dir is required$"),
])
def test_bad_layout_and_warmup_flags_are_refused_before_anything_is_written(
        tiny, tmp_path, extra, message):
    extra = [e.replace("=B", "=%s" % (tmp_path / "B")).replace("=D", "=%s" % (tmp_path / "D"))
             .replace("=W", "=%s" % (tmp_path / "W")) for e in extra]
    with pytest.raises(ValueError, match=message):
        _export(_tiny_flags(tiny, *extra))
    assert os.listdir(str(tmp_path)) == []


def test_warmup_examples_of_the_wrong_shape_are_refused_naming_the_example(tmp_path):
    from bert_tf2.export import warmup
    path = write_text(tmp_path / "w.txt", "a\tb\none\ttwo\tthree\n")
    for kind, message in (("classifier", r"example 2 has 3 tab-separated field\(s\), a request "
                                         r"of this model is text_a\[<TAB>text_b\]$"),
                          ("squad", r"example 2 has 3 tab-separated field\(s\), a request of this "
                                    r"model is question<TAB>context$")):
        with pytest.raises(ValueError, match=r"^--warmup_file=.*w.txt: " + message):
            warmup.read_rows(esm.Settings(model_type=kind, warmup_file=str(path)),
                             ("text", None, None))
    assert warmup.read_rows(esm.Settings(model_type="classifier", warmup_file=str(path),
                                         warmup_examples=1), ("text", None, None)) == [("a", "b")]
    with pytest.raises(ValueError, match=r"example 1 has 1 tab-separated field\(s\), a request of "
                                         r"this model is context<TAB>ending"):
        warmup.read_rows(esm.Settings(model_type="multiple_choice", warmup_file=str(
            write_text(tmp_path / "one.txt", "just a context\n"))), ("text", None, None))


def test_two_vocabularies_never_share_a_table_even_when_their_assets_print_alike(
        tmp_path, tmp_path_factory, monkeypatch):
    """TensorFlow names a file's table after str(filename), for an Asset a memory address
    that a later Asset can reuse (a suite run gave a tokenizer another one's vocabulary
    that way). With every Asset printing alike, the second vocabulary still gives its ids."""
    monkeypatch.setattr(tf.saved_model.Asset, "__repr__", lambda self: "<Asset>")
    first = write_text(tmp_path / "a.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\ncat\ndog\n")
    second = write_text(tmp_path / "b.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\ndog\ncat\n")
    kept = _tokenizer(first, True, tmp_path_factory)
    again = _tokenizer(first, True, tmp_path_factory)
    other = _tokenizer(second, True, tmp_path_factory)
    texts = _encoded(["cat dog"])
    assert kept.tokenize(texts).to_list() == again.tokenize(texts).to_list() == [[4, 5]]
    assert other.tokenize(texts).to_list() == [[5, 4]]
    # The id -> piece tables (SQuAD's answer text, fill-mask's tokens) likewise.
    ids = tf.constant([4, 5], tf.int64)
    assert kept.token_table().lookup(ids).numpy().tolist() == [b"cat", b"dog"]
    assert other.token_table().lookup(ids).numpy().tolist() == [b"dog", b"cat"]
