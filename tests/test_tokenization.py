"""Tests for tokenization.py: exact behaviour, golden outputs, batch path == exact path."""

import copy
import gzip
import json
import os
import pickle
import random
import subprocess
import sys
import unicodedata

import pytest

import tokenization
from bert_tf2.text import characters
from bert_tf2.text import exact_shortcuts
from bert_tf2.text import fast_batch

TINY_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un",
              "runn", "##ing", ",", ".", "!", "?", "hello", "how", "are", "you", "a", "##a",
              "##b", "b", "c", "##c", "e", "##e", "i", "\u03c3\u03b1\u03c2", "\u535a", "\u63a8"]


def write_vocab(directory, tokens, name="vocab.txt"):
    path = directory / name
    path.write_text("".join(token + "\n" for token in tokens), encoding="utf-8")
    return str(path)


@pytest.fixture
def tiny_vocab(tmp_path):
    return write_vocab(tmp_path, TINY_VOCAB)


# ---------------------------------------------------------------------------
# Text helpers and the vocabulary.
# ---------------------------------------------------------------------------


def test_convert_to_unicode():
    assert tokenization.convert_to_unicode("h\u00e9") == "h\u00e9"
    assert tokenization.convert_to_unicode("h\u00e9".encode("utf-8")) == "h\u00e9"
    assert tokenization.convert_to_unicode(b"a\xffb") == "ab"  # invalid bytes dropped
    assert tokenization.printable_text(b"caf\xc3\xa9") == "caf\u00e9"
    for bad in (3, None, ["a"]):
        with pytest.raises(ValueError):
            tokenization.convert_to_unicode(bad)
        with pytest.raises(ValueError):
            tokenization.printable_text(bad)


def test_whitespace_tokenize():
    assert tokenization.whitespace_tokenize("") == []
    assert tokenization.whitespace_tokenize(" \t\n ") == []
    assert tokenization.whitespace_tokenize("  a  b\nc\u3000d ") == ["a", "b", "c", "d"]


def test_load_vocab(tmp_path):
    path = tmp_path / "v.txt"
    path.write_bytes("[UNK]\r\n  padded \nwith\u2028sep\n\nx\nx\nlast".encode("utf-8"))
    vocab = tokenization.load_vocab(str(path))
    assert list(vocab.items()) == [("[UNK]", 0), ("padded", 1), ("with\u2028sep", 2),
                                   ("", 3), ("x", 5), ("last", 6)]
    assert isinstance(vocab, tokenization.collections.OrderedDict)


def test_missing_vocab_is_a_clear_error(tmp_path):
    missing = str(tmp_path / "nope" / "vocab.txt")
    with pytest.raises(ValueError, match="nope"):
        tokenization.load_vocab(missing)
    with pytest.raises(ValueError, match="vocab"):
        tokenization.FullTokenizer(missing)


def test_convert_ids(tiny_vocab):
    vocab = tokenization.load_vocab(tiny_vocab)
    inv = {index: token for token, index in vocab.items()}
    tokens = ["un", "##want", "##ed", "runn", "##ing"]
    assert tokenization.convert_tokens_to_ids(vocab, tokens) == [8, 5, 6, 9, 10]
    assert tokenization.convert_ids_to_tokens(inv, [8, 5, 6, 9, 10]) == tokens
    assert tokenization.convert_by_vocab(vocab, []) == []
    with pytest.raises(KeyError):
        tokenization.convert_tokens_to_ids(vocab, ["nope"])
    tokenizer = tokenization.FullTokenizer(tiny_vocab)
    assert tokenizer.convert_tokens_to_ids(tokens) == [8, 5, 6, 9, 10]
    assert tokenizer.convert_ids_to_tokens([8, 5, 6, 9, 10]) == tokens
    assert tokenizer.inv_vocab[1] == "[UNK]"


def test_module_does_not_import_tensorflow():
    code = ("import sys, tokenization; "
            "tokenization.FullTokenizer; "
            "sys.exit(1 if any(m.split('.')[0] in ('tensorflow', 'tensorflow_text') "
            "for m in sys.modules) else 0)")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    assert subprocess.run([sys.executable, "-c", code], cwd=root).returncode == 0


# ---------------------------------------------------------------------------
# Checkpoint casing check.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("checkpoint, lower", [
    ("/m/uncased_L-12_H-768_A-12/bert_model.ckpt", False),
    ("gs://b/uncased_L-24_H-1024_A-16/bert_model.ckpt", False),
    ("multilingual_L-12_H-768_A-12/bert_model.ckpt", False),
    ("x/chinese_L-12_H-768_A-12/bert_model.ckpt", False),
    ("x/cased_L-12_H-768_A-12/bert_model.ckpt", True),
    ("x/cased_L-24_H-1024_A-16/bert_model.ckpt", True),
    ("x/multi_cased_L-12_H-768_A-12/bert_model.ckpt-1000", True),
])
def test_validate_case_rejects_mismatch(checkpoint, lower):
    with pytest.raises(ValueError, match="do_lower_case=%s" % lower):
        tokenization.validate_case_matches_checkpoint(lower, checkpoint)


@pytest.mark.parametrize("checkpoint, lower", [
    ("/m/uncased_L-12_H-768_A-12/bert_model.ckpt", True),
    ("x/cased_L-12_H-768_A-12/bert_model.ckpt", False),
    ("x/my_model/bert_model.ckpt", True),
    ("x/my_model/bert_model.ckpt", False),
    ("x/uncased_L-12_H-768_A-12/model.ckpt", False),  # not named bert_model.ckpt
    ("", False),
    (None, True),
])
def test_validate_case_accepts(checkpoint, lower):
    tokenization.validate_case_matches_checkpoint(lower, checkpoint)


# ---------------------------------------------------------------------------
# The exact tokenizers.
# ---------------------------------------------------------------------------


def test_full_tokenizer(tiny_vocab):
    tokenizer = tokenization.FullTokenizer(tiny_vocab)
    tokens = tokenizer.tokenize("UNwant\u00e9d,running")
    assert tokens == ["un", "##want", "##ed", ",", "runn", "##ing"]
    assert tokenizer.convert_tokens_to_ids(tokens) == [8, 5, 6, 11, 9, 10]
    assert tokenizer.tokenize(b"HeLLo!") == ["hello", "!"]
    assert tokenizer.tokenize("") == []


def test_basic_lower_and_accents():
    basic = tokenization.BasicTokenizer(do_lower_case=True)
    assert basic.tokenize(" \tHeLLo!how  \n Are yoU?  ") == ["hello", "!", "how", "are", "you", "?"]
    assert basic.tokenize("H\u00e9llo") == ["hello"]
    assert basic.tokenize("Cre\u0300me Br\u00fbl\u00e9e na\u00efve") == ["creme", "brulee", "naive"]
    assert basic.tokenize("\u0130stanbul") == ["istanbul"]  # lower() gives i + U+0307, stripped
    assert basic.tokenize("\u03a3\u0391\u03a3 \u03a3") == ["\u03c3\u03b1\u03c2", "\u03c3"]
    assert basic.tokenize("\u00df \ufb01 \u00bd") == ["\u00df", "\ufb01", "\u00bd"]  # no NFKC
    assert basic.tokenize("\u0301\u0300") == []  # a word of marks only vanishes


def test_basic_no_lower():
    basic = tokenization.BasicTokenizer(do_lower_case=False)
    assert basic.tokenize(" \tHeLLo!how  \n Are yoU?  ") == ["HeLLo", "!", "how", "Are", "yoU", "?"]
    assert basic.tokenize("H\u00e9llo e\u0301") == ["H\u00e9llo", "e\u0301"]


def test_basic_chinese_chars():
    basic = tokenization.BasicTokenizer()
    assert basic.tokenize("ah\u535a\u63a8zz") == ["ah", "\u535a", "\u63a8", "zz"]
    # Extension blocks and compatibility ideographs count; kana, Hangul and
    # Extension G (U+30000) do not.
    assert basic.tokenize("a\U00020000b\U0002b820c\uf900d") == [
        "a", "\U00020000", "b", "\U0002b820", "c", "\u8c48", "d"]
    assert basic.tokenize("\u3042\u3044\ud55c\uae00\U00030000") == [
        "\u3042\u3044\u1112\u1161\u11ab\u1100\u1173\u11af\U00030000"]


def test_basic_punctuation():
    basic = tokenization.BasicTokenizer(do_lower_case=False)
    assert basic.tokenize("a$b^c`d~e") == ["a", "$", "b", "^", "c", "`", "d", "~", "e"]
    assert basic.tokenize("\u00bfQu\u00e9?\u2014\u00abx\u00bb") == [
        "\u00bf", "Qu\u00e9", "?", "\u2014", "\u00ab", "x", "\u00bb"]
    assert basic.tokenize("...") == [".", ".", "."]
    assert basic.tokenize("a+b=c") == ["a", "+", "b", "=", "c"]  # ASCII symbols split too
    assert basic.tokenize("a\u00b1b") == ["a\u00b1b"]  # non-ASCII symbols (Sm) do not


def test_basic_cleanup():
    basic = tokenization.BasicTokenizer(do_lower_case=False)
    # NUL, U+FFFD, controls and format characters vanish inside words.
    assert basic.tokenize("a\x00b\ufffdc\x01d\u200be\u00adf\ufeffg\x7fh\x0bi\x85j") == [
        "abcdefghij"]
    # Tab/newline/CR and Zs are spaces; U+2028/U+2029 also separate words.
    assert basic.tokenize("a\tb\nc\rd\u00a0e\u3000f\u2028g\u2029h") == list("abcdefgh")
    assert basic.tokenize("\x00\ufffd") == []


def test_wordpiece(tiny_vocab):
    vocab = tokenization.load_vocab(tiny_vocab)
    wordpiece = tokenization.WordpieceTokenizer(vocab=vocab)
    assert wordpiece.tokenize("") == []
    assert wordpiece.tokenize("unwanted running") == ["un", "##want", "##ed", "runn", "##ing"]
    assert wordpiece.tokenize("unwantedX running") == ["[UNK]", "runn", "##ing"]
    assert wordpiece.tokenize("aab") == ["a", "##a", "##b"]  # greedy, longest first
    assert wordpiece.tokenize("ba") == ["b", "##a"]
    assert wordpiece.tokenize("x") == ["[UNK]"]


def test_wordpiece_length_limit(tiny_vocab):
    vocab = tokenization.load_vocab(tiny_vocab)
    wordpiece = tokenization.WordpieceTokenizer(vocab=vocab)
    assert wordpiece.tokenize("a" * 200) == ["a"] + ["##a"] * 199
    assert wordpiece.tokenize("a" * 201) == ["[UNK]"]
    short = tokenization.WordpieceTokenizer(vocab, unk_token="<?>", max_input_chars_per_word=3)
    assert short.tokenize("aaa aaaa") == ["a", "##a", "##a", "<?>"]


def test_reference_character_classes():
    assert all(tokenization._is_whitespace(c) for c in " \t\r\n\u00a0\u3000")
    assert not any(tokenization._is_whitespace(c) for c in "A-\x0b\u2028")
    assert tokenization._is_control("\u0005") and tokenization._is_control("\u200b")
    assert not any(tokenization._is_control(c) for c in "A \t\r\n\U0001F4A9")
    assert all(tokenization._is_punctuation(c) for c in "-$`.\u00bf\u3002")
    assert not any(tokenization._is_punctuation(c) for c in "A \u00b1")


# ---------------------------------------------------------------------------
# The exact path against a plain re-implementation of the reference.
# ---------------------------------------------------------------------------
#
# tokenization.py takes shortcuts on the exact path (str.translate tables, regexes
# for ASCII text, caches in FullTokenizer). The oracle below walks the reference's
# steps one character at a time and shares nothing with the module but unicodedata,
# so a shortcut that changes a single token shows up here.


def _oracle_is_whitespace(char):
    return char in (" ", "\t", "\n", "\r") or unicodedata.category(char) == "Zs"


def _oracle_is_control(char):
    if char in ("\t", "\n", "\r"):
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def _oracle_is_punctuation(char):
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _oracle_is_chinese_char(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F
            or 0x2B820 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF
            or 0x2F800 <= cp <= 0x2FA1F)


def _oracle_clean(text):
    kept = []
    for char in text:
        if ord(char) == 0 or ord(char) == 0xFFFD or _oracle_is_control(char):
            continue
        kept.append(" " if _oracle_is_whitespace(char) else char)
    return "".join(kept)


def _oracle_space_chinese(text, is_chinese_char=_oracle_is_chinese_char):
    out = []
    for char in text:
        if is_chinese_char(ord(char)):
            out.extend((" ", char, " "))
        else:
            out.append(char)
    return "".join(out)


def _oracle_strip_accents(text):
    return "".join(char for char in unicodedata.normalize("NFD", text)
                   if unicodedata.category(char) != "Mn")


def _oracle_split_on_punctuation(text):
    words = []
    start_new_word = True
    for char in text:
        if _oracle_is_punctuation(char):
            words.append([char])
            start_new_word = True
        else:
            if start_new_word:
                words.append([])
            start_new_word = False
            words[-1].append(char)
    return ["".join(word) for word in words]


def oracle_basic(text, do_lower_case, is_chinese_char=_oracle_is_chinese_char):
    """The reference BasicTokenizer.tokenize, step by step."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "ignore")
    text = _oracle_space_chinese(_oracle_clean(text), is_chinese_char)
    words = []
    for piece in text.strip().split():
        if do_lower_case:
            piece = _oracle_strip_accents(piece.lower())
        words.extend(_oracle_split_on_punctuation(piece))
    return " ".join(words).strip().split()


def oracle_wordpiece(word, vocab, unk_token="[UNK]", max_input_chars_per_word=200):
    """The reference WordpieceTokenizer on one word: greedy longest match first."""
    chars = list(word)
    if len(chars) > max_input_chars_per_word:
        return [unk_token]
    pieces = []
    start = 0
    while start < len(chars):
        end = len(chars)
        found = None
        while start < end:
            candidate = "".join(chars[start:end])
            if start > 0:
                candidate = "##" + candidate
            if candidate in vocab:
                found = candidate
                break
            end -= 1
        if found is None:
            return [unk_token]
        pieces.append(found)
        start = end
    return pieces


def oracle_full(text, do_lower_case, vocab, unk_token="[UNK]", max_input_chars_per_word=200,
                is_chinese_char=_oracle_is_chinese_char):
    """The reference FullTokenizer.tokenize."""
    return [piece for word in oracle_basic(text, do_lower_case, is_chinese_char)
            for piece in oracle_wordpiece(word, vocab, unk_token, max_input_chars_per_word)]


# Texts for the oracle: every case above where a shortcut could slip.
TRICKY = [
    "", " ", "\t\n\r ", b"", b"HeLLo, W\xc3\xb6rld!", b"a\xffb\xc3 \xe5\x8d\x9a", b"\xc3",
    "Cr\u00e8me br\u00fbl\u00e9e", "Cre\u0300me", "e\u0301\u0301", "\u0301", "\u0301 \u0308a",
    "x \u0301\u0302 y", "\u0344\u0344", "\u1e0c\u0307", "\u212b \u2126 \u212a",
    "\u0130stanbul \u0130 I\u0307 \u0131", "Stra\u00dfe STRASSE \u1e9e",
    "\u03a3\u0391\u03a3 \u03a3",
    "\u039f\u0394\u039f\u03a3\u200b \u039f\u03a3\x00\u0391", "\u01c5\u01c4 \u1f88",
    "a\x00b\x01c\x7fd\x80e\x9ff\ufffdg\u200bh\u200di\u00adj\ufeffk\u2060l",
    "a\x0bb\x0cc\x1cd\x1de\x1ff\x85g \x0b \x85", "\x00\x0b\x85",
    "a\u00a0b\u2028c\u2029d\u3000e\u1680f\u202fg\u205fh\u2000i\u200aj",
    "\u535a\u63a8 ab\u535acd \u4e2d\u6587\u3002",
    "\u3400\U00020000\U0002ceaf\U0002ceb0\uf900\U0002f800",
    "\ud55c\uad6d\uc5b4 \u3072\u3089\u304c\u306a \u30ab\u30bf\u30ab\u30ca \u1112\u1161\u11ab",
    "\uff01\uff1f\uff0c\uff0e\uff08\uff09 \uff21\uff22 \uff41\uff42\uff01",
    "\u00bfQu\u00e9?\u2014\u00abx\u00bb \u2018a\u2019 \u201cb\u201d \u2026",
    "a$b^c`d~e|f\\g @#%&*()_+-=[]{};':\",./<>?", "a\u00b1b \u00d7 \u20ac5",
    "\U0001f600\U0001f468\u200d\U0001f469\u200d\U0001f467 \U0001f44d\U0001f3fd \u2764\ufe0f",
    "\U0001f1fa\U0001f1f8 1\ufe0f\u20e3 \U000e0041", "a\ud800b \udfff",
    "\u00bd \u2153 km\u00b2 \ufb01ne \u2160",
    "a" * 200, "a" * 201, "A" * 201, "\u00e9" * 200, "\u00c9" * 201, "e\u0301" * 150,
    "\u0130" * 150, "\U0001f600" * 201, "\u535a" * 250, "ab" * 100 + "," + "ab" * 101,
    "want" * 60 + " unwanted",
]

# Vocabulary for the oracle tests: TINY_VOCAB plus pieces the tricky texts can hit,
# in both casings, so WordPiece takes many routes (whole words, pieces, [UNK]).
ORACLE_VOCAB = TINY_VOCAB + [
    "A", "##A", "B", "##B", "z", "##z", "Z", "0", "##9", "x", "##y", "\u00e9", "##\u00e9",
    "\u00c9", "e\u0301", "##\u0301", "\u03c3", "##\u03c2", "\u00df", "##\u00df", "stra",
    "istanbul", "\u0130stanbul", "\uff01", "\U0001f600", "##\U0001f600", "\ud55c", "##\uad6d",
    "creme", "##me", "cr", "##\u00e8", "\u535a\u63a8", "\u2764", "##\u2060", "ab", "##ab",
]

# What random texts are drawn from: letters that make vocabulary words, and every
# kind of character a step treats specially (several entries are multi-character).
RANDOM_ALPHABET = (
    list("aabbceeiwzAABZ09") + ["want", "un", "##", "ing"]
    + list(" ,.!?-$`~_'") + ["\t", "\n", "\r", "  "]
    + ["\x00", "\x01", "\x0b", "\x0c", "\x1c", "\x1f", "\x7f", "\x85", "\x9f", "\ufffd"]
    + ["\u00a0", "\u1680", "\u2009", "\u2028", "\u2029", "\u3000", "\u180e"]
    + ["\u200b", "\u200c", "\u200d", "\u00ad", "\ufeff", "\u2060", "\u202e", "\U000e0041"]
    + ["\u00e9", "\u00c9", "\u00e8", "\u0301", "\u0308", "\u0327", "\u0344", "\u20dd", "\u0903"]
    + ["\u0130", "\u0131", "I", "\u00df", "\u1e9e", "\u03a3", "\u03c3", "\u03c2", "\u01c5"]
    + ["\u212b", "\u2126", "\u212a", "\ufb01", "\u00bd", "\u00b2", "\u2160"]
    + ["\u535a", "\u63a8", "\u4e2d", "\u3400", "\U00020000", "\uf900", "\U0002f800", "\u3005"]
    + ["\uff01", "\uff0c", "\u3002", "\u3001", "\u00bf", "\u2014", "\u2026", "\u00ab", "\u00b1"]
    + ["\U0001f600", "\U0001f3fd", "\ufe0f", "\u2764", "\ud55c", "\u1112", "\u3042", "\u30ab"]
    + ["\u0915", "\u094d", "\u0645", "\u05e9", "\u05c1", "\ud800", "\ue000", "\u0378"]
)


def random_texts(count, seed):
    """`count` random strings over RANDOM_ALPHABET (fixed seed), some with long words."""
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        parts = [rng.choice(RANDOM_ALPHABET) for _ in range(rng.randint(0, 30))]
        if rng.random() < 0.03:  # a word near the 200 character limit
            parts.append("".join(rng.choice(("a", "b", "\u00e9", "e\u0301", "A", "\u0130"))
                                 for _ in range(rng.randint(150, 260))))
            rng.shuffle(parts)
        texts.append("".join(parts))
    return texts


def _encodable(text):
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates
        return None


def assert_exact_path_matches_oracle(tokenizer, texts, do_lower_case):
    """FullTokenizer, BasicTokenizer and WordpieceTokenizer all agree with the oracle."""
    vocab = tokenizer.vocab
    basic = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
    wordpiece = tokenization.WordpieceTokenizer(vocab)
    for text in texts:
        words = oracle_basic(text, do_lower_case)
        expected = [p for word in words for p in oracle_wordpiece(word, vocab)]
        assert tokenizer.tokenize(text) == expected, text
        assert tokenizer.tokenize(text) == expected, text  # again, from the caches
        assert basic.tokenize(text) == words, text
        assert wordpiece.tokenize(" ".join(words)) == expected, text
        if isinstance(text, str) and _encodable(text) is not None:
            assert tokenizer.tokenize(text.encode("utf-8")) == expected, text


@pytest.fixture
def oracle_vocab(tmp_path):
    return write_vocab(tmp_path, ORACLE_VOCAB)


@pytest.mark.parametrize("lower", [True, False])
def test_exact_path_matches_oracle_on_tricky_text(oracle_vocab, lower):
    tokenizer = tokenization.FullTokenizer(oracle_vocab, do_lower_case=lower)
    texts = TRICKY + ADVERSARIAL
    assert_exact_path_matches_oracle(tokenizer, texts, lower)
    # The same pieces again, now in other company.
    as_str = [tokenization.convert_to_unicode(text) for text in texts]
    assert_exact_path_matches_oracle(tokenizer, [" ".join(as_str[::-1])], lower)


@pytest.mark.parametrize("lower", [True, False])
def test_exact_path_matches_oracle_on_random_text(oracle_vocab, lower):
    tokenizer = tokenization.FullTokenizer(oracle_vocab, do_lower_case=lower)
    texts = random_texts(3000, seed=1234 + lower)
    assert_exact_path_matches_oracle(tokenizer, texts, lower)
    joined = ["".join(texts[i:i + 7]) for i in range(0, len(texts), 7)]
    assert_exact_path_matches_oracle(tokenizer, joined, lower)


def test_basic_steps_match_oracle():
    """The step methods, which subclasses may call or replace, on their own."""
    basic = tokenization.BasicTokenizer()
    texts = [t for t in TRICKY if isinstance(t, str)] + random_texts(1000, seed=99)
    for text in texts:
        assert basic._clean_text(text) == _oracle_clean(text), text
        assert tokenization.BasicTokenizer._clean_text(text) == _oracle_clean(text), text
        assert basic._tokenize_chinese_chars(text) == _oracle_space_chinese(text), text
        assert basic._run_strip_accents(text) == _oracle_strip_accents(text), text
        assert basic._run_strip_accents(text.lower()) == _oracle_strip_accents(text.lower())
        assert basic._run_split_on_punc(text) == _oracle_split_on_punctuation(text), text


def test_character_maps_stop_growing():
    """Past its limit a CharacterMap still answers, it just stops remembering."""
    table = characters.CharacterMap(lambda cp: cp + 1, limit=3)
    assert "abcdef".translate(table) == "bcdefg"
    assert len(table) == 3
    assert "fedcba".translate(table) == "gfedcb"


def test_subclass_overrides_reach_the_exact_path(oracle_vocab):
    """A subclass's own steps are used by tokenize(), also for ASCII text."""
    class WithHangul(tokenization.BasicTokenizer):
        def _is_chinese_char(self, cp):
            return 0xAC00 <= cp <= 0xD7A3 or super()._is_chinese_char(cp)

    def with_hangul(cp):
        return 0xAC00 <= cp <= 0xD7A3 or _oracle_is_chinese_char(cp)

    tokenizer = tokenization.FullTokenizer(oracle_vocab, do_lower_case=False)
    tokenizer.basic_tokenizer = WithHangul(do_lower_case=False)
    for text in ["\ud55c\uad6d\u535a", "a\ud55cb", "abc", ""] + random_texts(300, seed=5):
        assert tokenizer.basic_tokenizer.tokenize(text) == oracle_basic(
            text, False, with_hangul), text
        assert tokenizer.tokenize(text) == oracle_full(
            text, False, tokenizer.vocab, is_chinese_char=with_hangul), text

    class KeepsControls(tokenization.BasicTokenizer):
        @staticmethod
        def _clean_text(text):
            return text.replace("\t", " ")

    class NoPunctuation(tokenization.BasicTokenizer):
        @staticmethod
        def _run_split_on_punc(text):
            return [text]

    assert KeepsControls().tokenize("a\x01b\tc") == ["a\x01b", "c"]
    assert NoPunctuation().tokenize("A,b. c") == ["a,b.", "c"]
    tokenizer.basic_tokenizer = NoPunctuation(do_lower_case=True)
    assert tokenizer.tokenize("WA,want") == ["[UNK]"]
    assert tokenizer.tokenize("WA want") == ["wa", "want"]


def test_deleted_whitespace_is_all_in_latin1():
    """Every character str.split() splits on but _clean_text deletes is known in advance.

    tokenize() must delete them before it splits a text into pieces.
    """
    found = "".join(chr(cp) for cp in range(0x110000)
                    if chr(cp).isspace() and _oracle_clean(chr(cp)) == "")
    assert found == "\x0b\x0c\x1c\x1d\x1e\x1f\x85"
    assert exact_shortcuts.DELETED_SPACES == found


def test_exact_path_caches_follow_the_settings(oracle_vocab):
    tokenizer = tokenization.FullTokenizer(oracle_vocab, do_lower_case=True)
    text = "q H\u00e9llo WANT \u00c9 xyz Want,x\u00e9 " + "a" * 30

    def check(**settings):
        vocab = tokenizer.wordpiece_tokenizer.vocab
        expected = oracle_full(text, tokenizer.basic_tokenizer.do_lower_case, vocab, **settings)
        assert tokenizer.tokenize(text) == expected
        assert tokenizer.tokenize(text) == expected
        return expected

    assert check()[:11] == ["[UNK]", "hello", "want", "e", "x", "##y", "##z", "want", ",", "x",
                            "##e"]
    tokenizer.basic_tokenizer.do_lower_case = False  # flipped after construction
    assert check()[:11] == ["[UNK]", "[UNK]", "[UNK]", "\u00c9", "x", "##y", "##z", "[UNK]", ",",
                            "x", "##\u00e9"]
    tokenizer.basic_tokenizer = tokenization.BasicTokenizer(do_lower_case=True)
    check()
    tokenizer.vocab["xyz"] = len(tokenizer.vocab)  # a new entry, same dict
    tokenizer.vocab["want"] = 0  # a new id only: the tokens stay
    assert check()[4] == "xyz"
    tokenizer.wordpiece_tokenizer.unk_token = "<?>"
    assert check(unk_token="<?>")[0] == "<?>"
    tokenizer.wordpiece_tokenizer.max_input_chars_per_word = 20
    assert check(unk_token="<?>", max_input_chars_per_word=20)[-1] == "<?>"
    tokenizer.wordpiece_tokenizer.vocab = {"[UNK]": 0, "<?>": 1, "x": 2, "##yz": 3}
    assert check(unk_token="<?>", max_input_chars_per_word=20)[4:6] == ["x", "##yz"]
    tokenizer.wordpiece_tokenizer = tokenization.WordpieceTokenizer(tokenizer.vocab)
    check()


def test_exact_path_honours_methods_replaced_on_instances(oracle_vocab):
    tokenizer = tokenization.FullTokenizer(oracle_vocab, do_lower_case=True)
    assert tokenizer.tokenize("a,b c") == ["a", ",", "b", "c"]
    tokenizer.basic_tokenizer._run_split_on_punc = lambda text: [text]
    assert tokenizer.basic_tokenizer.tokenize("a,b c") == ["a,b", "c"]
    assert tokenizer.tokenize("a,b c") == ["[UNK]", "c"]
    del tokenizer.basic_tokenizer._run_split_on_punc
    tokenizer.wordpiece_tokenizer._split_word = lambda word: [word.upper()]
    assert tokenizer.tokenize("a,b c") == ["A", ",", "B", "C"]
    del tokenizer.wordpiece_tokenizer._split_word
    assert tokenizer.tokenize("a,b c") == ["a", ",", "b", "c"]


def test_exact_path_caches_are_bounded(oracle_vocab, monkeypatch):
    monkeypatch.setattr(exact_shortcuts, "CACHE_LIMIT", 5)
    made = []

    class Recorded(exact_shortcuts.TokenCache):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(exact_shortcuts, "TokenCache", Recorded)
    tokenizer = tokenization.FullTokenizer(oracle_vocab, do_lower_case=True)
    texts = random_texts(300, seed=7)
    assert [tokenizer.tokenize(t) for t in texts] == [
        oracle_full(t, True, tokenizer.vocab) for t in texts]
    assert len(made) == 1 and made[0].limit == 5
    assert 0 < len(made[0].pieces) <= 5 and 0 < len(made[0].words) <= 5


def test_tokenizer_pickles_without_its_caches(oracle_vocab):
    tokenizer = tokenization.FullTokenizer(oracle_vocab, do_lower_case=True)
    texts = TRICKY[3:20]
    expected = [tokenizer.tokenize(t) for t in texts]
    assert "_cache_state" not in tokenizer.__getstate__()
    copied = pickle.loads(pickle.dumps(tokenizer))
    assert not hasattr(copied, "_cache_state")
    assert [copied.tokenize(t) for t in texts] == expected
    assert [copy.deepcopy(tokenizer).tokenize(t) for t in texts] == expected


def test_tokenizer_pickles_after_its_batch_path_ran(oracle_vocab):
    # The batch path holds TensorFlow objects, which do not pickle: a copy builds its own.
    tokenizer = tokenization.FullTokenizer(oracle_vocab, do_lower_case=True)
    texts = TRICKY[3:20]
    expected = tokenizer.convert_batch_to_ids(texts)
    assert expected == [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(t)) for t in texts]
    for copied in (pickle.loads(pickle.dumps(tokenizer)), copy.deepcopy(tokenizer)):
        assert copied.convert_batch_to_ids(texts) == expected
    assert tokenizer.convert_batch_to_ids(texts) == expected  # the original's path is kept


# ---------------------------------------------------------------------------
# The batch path: identical to the exact path.
# ---------------------------------------------------------------------------

ADVERSARIAL = [
    "", "   ", "\x00", "\ufffd", "Hello, World!", "UNwant\u00e9d,running",
    # Final sigma: str.lower() looks at neighbours; deleted characters do not count.
    "\u039f\u0394\u039f\u03a3 \u039f\u0394\u039f\u03a3. \u03a3", "\u0391\u03a3\x00\u0392",
    "\u0391\u03a3\u200b\u0392 \u0391\u03a3\u00ad", "\u03c3\u03b1\u03c2 \u03a3\u0391\u03a3!",
    # Compatibility characters that NFKC would change (tensorflow_text's own normalizer).
    "\u00bd \u2153 km\u00b2 28\u2033 wait\u2026 Stra\u00dfe "
    "\u03bb\u03cc\u03b3\u03bf\u03c2 \ufb01ne",
    "\u2160\u216b \u2460 \uff21\uff42\uff43\uff11 \u3231 \u00aa\u00ba \u2122",
    # Case mappings with extra characters, title case, Turkish dotted I.
    "\u0130STANBUL \u01c5 \u1e9e \u0149 \u1f88 \u0390",
    # Combining marks: stacked, alone, after spaces, non-Mn combining.
    "e\u0301\u0327 a\u0308\u0304 \u0301 x\u20dd y\u0903z "
    "\U0001d16d\x00\U0001d165 \U0001d165\U0001d16d",
    "\u0915\u094d\u0937 \u0e01\u0e33 \u05e9\u05c1\u05b8",
    # Hangul (NFD expands), kana, CJK blocks and their neighbours.
    "\ud55c\uad6d\uc5b4 \u1112\u1161\u11ab \u3072\u3089\u304c\u306a \u30ab\u30bf\u30ab\u30ca",
    "\u4e2d\u6587abc\u3400\U00020000\U0002a700\U0002b740\U0002b820\U0002ceaf\U0002ceb0",
    "\uf900\ufa0e\ufaff\U0002f800\U0002fa1d\U0002fa20\U00030000\u2f00\u3007\u3005",
    # Characters Python 3.11 leaves unassigned but newer ICU calls punctuation.
    "ab\u1b4ecd \U00011b00x \U0001e5ffy z\u1b7f",
    # Lone surrogates (cannot even be encoded as UTF-8).
    "a\ud800b \udfff",
    # Controls and format characters, C0, C1 and others.
    "a\x01b\x02c\x7fd\x80e\x85f\x9fg\x1ch\x1di\x1ej\x1fk\x0bl\x0cm",
    "soft\u00adhyphen zero\u200bwidth join\u200dner \ufeffbom \u2060wj \U000e0001\U000e0041tag",
    "rtl\u200fmark \u202aembed\u202c \u061c \u180e mongolian",
    # Whitespace of every kind.
    "a\u00a0b\u1680c\u2000d\u200ae\u2028f\u2029g\u202fh\u205fi\u3000j\tk\nl\rm",
    # Punctuation runs, ASCII symbols, Unicode punctuation and symbols.
    "!!!???... $^`~|\\ @#%&*()_+-=[]{};':\",./<>?",
    "\u00bf\u00a1\u00ab\u00bb\u2014\u2013\u2018\u2019\u201c\u201d\u201e"
    "\u2020\u2022\u203b\u3001\u3002\uff01",
    "\u00b1\u00d7\u00f7\u2211\u221e\u2248 \u00a9\u00ae\u00b0 \u20ac\u00a3\u00a5\u20b9",
    "http://example.com/a_b-c?q=1&r=%20#frag user@host.org C++ C# 3.14e-10",
    # Emoji with ZWJ sequences, skin tones, variation selectors, flags, keycaps.
    "\U0001f600\U0001f468\u200d\U0001f469\u200d\U0001f467 \U0001f44d\U0001f3fd \u2764\ufe0f "
    "\U0001f1fa\U0001f1f8 1\ufe0f\u20e3",
    # Private use and unassigned code points, noncharacters.
    "\ue000\uf8ff\U000f0000\U0010fffd \u0378\u0379 \U0003ffff \ufffe\uffff \U0010ffff",
    # Scripts.
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0645\u0631\u062d\u0628\u0627 \u05e9\u05dc\u05d5\u05dd "
    "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35 \u10d2\u10d0\u10db\u10d0\u10e0\u10ef\u10dd\u10d1\u10d0 "
    "\u0532\u0561\u0580\u0565\u0582 \u1230\u120b\u121d",
    # Words at and past the 200 character limit, ASCII and not.
    "a" * 200, "a" * 201, "ab" * 100 + " " + "ab" * 100 + "c", "the" * 67,
    "\u00e9" * 200, "\u00c9" * 201, "e\u0301" * 150, "\ud55c" * 66, "\ud55c" * 67, "\ud55c" * 201,
    "\U0001f600" * 200, "\U0001f600" * 201, "\U00020000" * 300, "x" * 5000,
    "\u00e9t\u00e9" * 67 + "!" + "b" * 201,
]


@pytest.fixture(scope="module")
def batch_support():
    pytest.importorskip("tensorflow_text", reason="the batch path needs tensorflow_text")
    return True


def assert_batch_matches_exact(tokenizer, texts, chunk_size=4096):
    expected = [tokenizer.tokenize(text) for text in texts]
    got = tokenizer.tokenize_batch(texts, chunk_size=chunk_size)
    mismatches = [(t, e, g) for t, e, g in zip(texts, expected, got) if e != g]
    assert not mismatches, "first of %d mismatches: %r" % (len(mismatches), mismatches[0])
    assert len(got) == len(texts)
    ids = tokenizer.convert_batch_to_ids(texts, chunk_size=chunk_size)
    assert ids == [tokenizer.convert_tokens_to_ids(tokens) for tokens in expected]
    assert all(type(i) is int for row in ids for i in row)  # pylint: disable=unidiomatic-typecheck


@pytest.mark.parametrize("lower", [True, False])
def test_batch_tiny_vocab(batch_support, tmp_path, lower):
    del batch_support
    vocab = write_vocab(tmp_path, TINY_VOCAB)
    tokenizer = tokenization.FullTokenizer(vocab, do_lower_case=lower)
    texts = ADVERSARIAL + ["UNwanted running, wa want!", "aab ba BA", "\u03a3\u0391\u03a3",
                           b"a\xffb"]
    assert_batch_matches_exact(tokenizer, texts, chunk_size=7)
    assert tokenizer.tokenize_batch([]) == []
    assert tokenizer.convert_batch_to_ids(iter(["a b"])) == [[19, 22]]


def test_a_few_short_texts_take_the_exact_path(batch_support, tmp_path, monkeypatch):
    """fast_batch.tokenize_texts: the exact path for texts of at most SMALL_BATCH_CHARS
    characters in all (a Predictor's call of one sentence), the batch path over it; the
    same tokens either way."""
    del batch_support
    tokenizer = tokenization.FullTokenizer(write_vocab(tmp_path, TINY_VOCAB), True)
    texts = ADVERSARIAL + ["UNwanted running, wa want!", "aab ba BA", b"a\xffb"]
    expected = [tokenizer.tokenize(text) for text in texts]
    batches = []
    batch = tokenizer.tokenize_batch
    monkeypatch.setattr(tokenizer, "tokenize_batch",
                        lambda chunk: batches.append(len(chunk)) or batch(chunk))
    assert fast_batch.tokenize_texts(tokenizer, texts[-3:]) == expected[-3:]
    assert fast_batch.tokenize_texts(tokenizer, []) == []
    assert batches == []
    monkeypatch.setattr(fast_batch, "SMALL_BATCH_CHARS", 0)
    assert fast_batch.tokenize_texts(tokenizer, texts) == expected
    assert batches == [len(texts)]


@pytest.mark.parametrize("lower", [True, False])
def test_batch_kernel_call_gives_the_ragged_calls_tokens(batch_support, tmp_path, monkeypatch,
                                                         lower):
    """The batch path calls FastWordpieceTokenizer's op itself (no RaggedTensors); without
    it (another tensorflow_text) it calls tokenize(): the same tokens."""
    del batch_support
    vocab = write_vocab(tmp_path, TINY_VOCAB)
    texts = ADVERSARIAL + ["UNwanted running, wa want!", "aab ba BA", "\u03a3\u0391\u03a3", ""]
    direct = tokenization.FullTokenizer(vocab, do_lower_case=lower)
    kernel, made = fast_batch.tokenize_kernel, []
    monkeypatch.setattr(fast_batch, "tokenize_kernel",
                        lambda model: made.append(kernel(model)) or made[-1])
    direct.tokenize_batch(texts[:1])
    assert len(made) == 1 and None not in made[0]  # this tensorflow_text's op is found
    monkeypatch.setattr(fast_batch, "tokenize_kernel", lambda model: (None, None))
    ragged = tokenization.FullTokenizer(vocab, do_lower_case=lower)
    assert direct.convert_batch_to_ids(texts) == ragged.convert_batch_to_ids(texts) == [
        direct.convert_tokens_to_ids(direct.tokenize(text)) for text in texts]


def test_batch_odd_vocabulary(batch_support, tmp_path):
    """Entries the reference can never produce must not be matched by the batch path."""
    del batch_support
    odd = TINY_VOCAB + ["a b", "", "##", "###", "a.", "##.", "\u3000x", "x\u00ady", "a", "##b",
                        "ab"]
    tokenizer = tokenization.FullTokenizer(write_vocab(tmp_path, odd), do_lower_case=True)
    assert tokenizer.vocab["a"] == len(odd) - 3  # the duplicate moved "a"
    texts = ["a b", "a.b", "a . b", "##", "###", "\u3000x", "xy x\u00ady", "ab", "aab", "a" * 201]
    assert_batch_matches_exact(tokenizer, texts)


def test_batch_without_unk_entry_falls_back(batch_support, tmp_path, caplog):
    del batch_support
    tokenizer = tokenization.FullTokenizer(write_vocab(tmp_path, ["a", "##b"]))
    assert tokenizer.tokenize_batch(["ab a", "x"]) == [["a", "##b", "a"], ["[UNK]"]]
    assert "falls back" in caplog.text and "[UNK]" in caplog.text
    with pytest.raises(KeyError):
        tokenizer.convert_batch_to_ids(["x"])


def test_vocab_path_as_bytes_or_path_like(tiny_vocab):
    # sess.run(tokenization_info["vocab_file"]) of a TF-Hub module gives bytes.
    import pathlib  # pylint: disable=import-outside-toplevel
    expected = tokenization.load_vocab(tiny_vocab)
    assert tokenization.load_vocab(tiny_vocab.encode("utf-8")) == expected
    assert tokenization.load_vocab(pathlib.Path(tiny_vocab)) == expected
    tokenizer = tokenization.FullTokenizer(vocab_file=tiny_vocab.encode("utf-8"),
                                           do_lower_case=True)
    assert tokenizer.tokenize("Unwanted, you!") == ["un", "##want", "##ed", ",", "you", "!"]
    with pytest.raises(ValueError, match="not found"):
        tokenization.FullTokenizer(vocab_file=b"/no/such/vocab.txt")
    tokenization.validate_case_matches_checkpoint(True, b"/m/uncased_L-12_H-768_A-12/bert_model.ckpt")
    with pytest.raises(ValueError, match="do_lower_case=False"):
        tokenization.validate_case_matches_checkpoint(
            False, b"/m/uncased_L-12_H-768_A-12/bert_model.ckpt")


def test_reference_method_is_chinese_char_and_overrides(tiny_vocab):
    basic = tokenization.BasicTokenizer()
    assert basic._is_chinese_char(0x535A) and not basic._is_chinese_char(ord("a"))

    class WithHangul(tokenization.BasicTokenizer):
        def _is_chinese_char(self, cp):
            return 0xAC00 <= cp <= 0xD7A3 or super()._is_chinese_char(cp)
    # As in the reference, _tokenize_chinese_chars asks the (overridden) method.
    # (Cased: lower-casing would decompose the Hangul syllables into jamo.)
    text = "\ud55c\uad6d\u535a"
    assert WithHangul(do_lower_case=False).tokenize(text) == ["\ud55c", "\uad6d", "\u535a"]
    assert tokenization.BasicTokenizer(False).tokenize(text) == ["\ud55c\uad6d", "\u535a"]


def test_batch_follows_a_customized_tokenizer(tiny_vocab):
    class Spaced(tokenization.FullTokenizer):
        def tokenize(self, text):
            return super().tokenize(text.replace("-", " "))
    tokenizer = Spaced(tiny_vocab)
    assert tokenizer.tokenize_batch(["un-want"]) == [["un", "want"]]

    class Joined(tokenization.BasicTokenizer):
        def tokenize(self, text):
            return super().tokenize(text.replace("-", ""))
    tokenizer = tokenization.FullTokenizer(tiny_vocab)
    tokenizer.basic_tokenizer = Joined()
    assert tokenizer.tokenize_batch(["un-want"]) == [["un", "##want"]]


def test_batch_without_tensorflow_text_falls_back(tiny_vocab, monkeypatch, caplog):
    def unavailable(_):
        raise ImportError("No module named 'tensorflow_text'")

    monkeypatch.setattr(fast_batch, "FastBatchTokenizer", unavailable)
    tokenizer = tokenization.FullTokenizer(tiny_vocab)
    assert tokenizer.convert_batch_to_ids(["Hello, you", b"runn"]) == [[15, 11, 18], [9]]
    assert "tensorflow_text" in caplog.text
    with pytest.raises(ValueError):
        tokenizer.tokenize_batch(["a"], chunk_size=0)


# ---------------------------------------------------------------------------
# Real vocabulary and data from ../shared.
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def uncased_tokenizers(request):
    shared = request.getfixturevalue("shared_dir")
    vocab = shared / "data" / "vocab" / "uncased_vocab.txt"
    if not vocab.is_file():
        pytest.skip("%s not found" % vocab)
    return {lower: tokenization.FullTokenizer(str(vocab), do_lower_case=lower)
            for lower in (True, False)}


def _golden_records(shared_dir):
    path = shared_dir / "golden" / "tokenization" / "tokenization_public.jsonl.gz"
    if not path.is_file():
        pytest.skip("%s not found" % path)
    with gzip.open(path, "rt", encoding="utf-8") as reader:
        return [json.loads(line) for line in reader]


def test_golden_exact_path(shared_dir, uncased_tokenizers):
    records = _golden_records(shared_dir)
    assert len(records) == 2210
    for record in records:
        tokenizer = uncased_tokenizers[record["do_lower_case"]]
        assert tokenizer.tokenize(record["text"]) == record["tokens"], record["text"]


def test_golden_batch_path(batch_support, shared_dir, uncased_tokenizers):
    del batch_support
    records = _golden_records(shared_dir)
    for lower in (True, False):
        chosen = [r for r in records if r["do_lower_case"] == lower]
        got = uncased_tokenizers[lower].tokenize_batch([r["text"] for r in chosen])
        for record, tokens in zip(chosen, got):
            assert tokens == record["tokens"], record["text"]
        # and through ids
        ids = uncased_tokenizers[lower].convert_batch_to_ids([r["text"] for r in chosen])
        assert ids == [uncased_tokenizers[lower].convert_tokens_to_ids(r["tokens"]) for r in chosen]


@pytest.mark.parametrize("lower", [True, False])
def test_batch_adversarial_real_vocab(batch_support, uncased_tokenizers, lower):
    del batch_support
    assert_batch_matches_exact(uncased_tokenizers[lower], ADVERSARIAL, chunk_size=5)


def _squad_texts(shared_dir):
    path = shared_dir / "data" / "squad" / "dev-v1.1.json"
    if not path.is_file():
        pytest.skip("%s not found" % path)
    with open(path, encoding="utf-8") as reader:
        articles = json.load(reader)["data"]
    contexts, questions = [], []
    for article in articles:
        for paragraph in article["paragraphs"]:
            contexts.append(paragraph["context"])
            questions.extend(qa["question"] for qa in paragraph["qas"])
    return contexts, questions


@pytest.mark.parametrize("lower", [True, False])
def test_batch_squad_sample(batch_support, shared_dir, uncased_tokenizers, lower):
    del batch_support
    contexts, questions = _squad_texts(shared_dir)
    # Every context with a character outside ASCII (they carry the hard cases: the
    # SQuAD texts where tensorflow_text's own normalizer differs are among them),
    # plus a stride of the rest.
    sample = [c for c in contexts if not c.isascii()] + contexts[::10] + questions[::20]
    assert_batch_matches_exact(uncased_tokenizers[lower], sample, chunk_size=256)


@pytest.mark.slow
@pytest.mark.parametrize("lower", [True, False])
def test_batch_full_squad(batch_support, shared_dir, uncased_tokenizers, lower):
    del batch_support
    contexts, questions = _squad_texts(shared_dir)
    texts = contexts + questions
    tokenizer = uncased_tokenizers[lower]
    ids = tokenizer.convert_batch_to_ids(texts)
    assert ids == [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(t)) for t in texts]
    assert sum(len(row) for row in ids) == (462739 if lower else 445760)


@pytest.mark.slow
@pytest.mark.parametrize("lower", [True, False])
def test_batch_every_code_point(batch_support, uncased_tokenizers, lower):
    """Each code point, between letters, gives the same tokens both ways.

    Planes 0-3 and 14 (everything assigned so far, and where a newer Unicode in ICU
    could differ) are taken whole; the never-assigned planes 4-13 and the private-use
    planes 15-16 are sampled.
    """
    del batch_support
    tokenizer = uncased_tokenizers[lower]
    code_points = [cp for cp in range(0x110000)
                   if cp < 0x40000 or 0xE0000 <= cp < 0xF0000 or cp % 257 == 0]
    texts = ["x%sX" % chr(cp) for cp in code_points]
    got = tokenizer.tokenize_batch(texts)
    bad = [hex(cp) for cp, text, tokens in zip(code_points, texts, got)
           if tokens != tokenizer.tokenize(text)]
    assert not bad, bad[:20]


@pytest.mark.parametrize("lower", [True, False])
def test_exact_path_matches_oracle_on_squad(shared_dir, uncased_tokenizers, lower):
    """All of SQuAD dev (contexts and questions): the exact path's ids are the oracle's."""
    contexts, questions = _squad_texts(shared_dir)
    texts = contexts + questions
    del uncased_tokenizers  # (it skips the test without the vocabulary)
    # A new tokenizer, so its caches start empty as in any first use.
    tokenizer = tokenization.FullTokenizer(
        str(shared_dir / "data" / "vocab" / "uncased_vocab.txt"), do_lower_case=lower)
    vocab = tokenizer.vocab
    got = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text)) for text in texts]
    oracle_words = {}  # WordPiece is the oracle's slowest step, and words repeat

    def oracle_ids(text):
        ids = []
        for word in oracle_basic(text, lower):
            if word not in oracle_words:
                oracle_words[word] = [vocab[p] for p in oracle_wordpiece(word, vocab)]
            ids.extend(oracle_words[word])
        return ids

    expected = [oracle_ids(text) for text in texts]
    mismatched = [text for text, mine, theirs in zip(texts, got, expected) if mine != theirs]
    assert not mismatched, "%d texts differ, first: %r" % (len(mismatched), mismatched[0])
    assert sum(len(ids) for ids in got) == (462739 if lower else 445760)
