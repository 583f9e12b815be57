"""The batch path's shortcuts under stress: ids equal to the exact path and the reference's.

The batch path (bert_tf2/text/fast_batch.py) prepares the ASCII texts of a part in one
go (joined by U+0080), hands parts to two worker threads, and puts exact-path rows back
in place inside a part. These tests aim texts at each of those: ASCII next to U+0080 and
controls, mixed parts, empty strings, words at the 200-character limit, CJK, accents
in both casings, whitespace variants; with parts small enough that every test runs
many of them on the worker threads. Then the reference's own tokenization.py
(google-research/bert, from ../shared) is compared on the same texts and on the
benchmark's CJK / accented corpus.
"""

import os
import random
import sys

import pytest

import tokenization
from bert_tf2.text import fast_batch
from test_tokenization import ADVERSARIAL, assert_batch_matches_exact

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "benchmarks"))
import bench_tokenization  # noqa: E402  pylint: disable=wrong-import-position

FAST_PATH_TEXTS = [
    "", "", "plain ascii text.", "", "CamelCase ASCII, with PUNCTUATION!?",
    "tabs\tand\nnew lines\r\nand\x0bvertical\x0cfeeds\x1c\x1d\x1e\x1fseparators",
    "ascii \x00nul \x7fdel \x1besc \x08bs \x01soh", "\x80 the first Latin-1 control",
    "u\x80v and \x85next-line \x9f", "\x80", "\x80\x80 \x80", "a\x80", "\u0080\u00a0\u00ad",
    "caf\u00e9 CAF\u00c9 na\u00efve \u00c5ngstr\u00f6m Beyonc\u00e9 S\u00e3o Paulo",
    "\u00c9COLE \u00e9cole e\u0301cole E\u0301COLE \u00df STRASSE Stra\u00dfe",
    "ASCII then \u4e2d\u6587 then ASCII", "\u4e2d\u6587\u3002\uff0c\u201c\u5f15\u53f7\u201d",
    "x" * 199, "y" * 200, "z" * 201, "\u00e9" * 200, "\u00c9" * 201, "w" * 100 + "\u00e9" * 101,
    "\u4e2d" * 250, "ab" * 150, "   ", "\t\n\r", "\u3000\u00a0 \u2003\u2028\u2029",
    "!" * 300, "a-b_c.d,e;f:g/h\\i|j~k`l^m$n", "\u0130stanbul \u03a3\u03a3\u03a3 \u1e9e",
    "soft\u00adhyphen zero\u200bwidth \ufeffbom \ufffdreplacement",
    "mixed \U0001f600 emoji and \ud55c\uad6d\uc5b4 Hangul",
]

# What random texts are drawn from: weighted toward ASCII words, with every class the
# batch path treats apart (deleted, whitespace, punctuation, CJK, combining, cased).
_PIECES = (["the", "The", "THE", "running", "unwanted", "Hello", "x", "42", "3.14"] * 6 +
           [" ", " ", " ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2003",
            ",", ".", "!", "?", "'", "\"", "(", ")", "-", "$", "^", "`", "\u00bf", "\u2014",
            "\x00", "\x7f", "\x80", "\x85", "\x1b", "\u00ad", "\u200b", "\ufeff", "\ufffd",
            "\u00e9", "\u00c9", "e\u0301", "\u00df", "\u03a3", "\u03c2", "\u0130", "\u1e9e",
            "\u4e2d", "\u6587", "\u3002", "\ud55c", "\u30ab", "\U00020000", "\U0001f600",
            "\u00bd", "\u2026", "\ufb01", "\u0915\u094d\u0937", "\u0645\u0631"])


def stress_texts(count, seed):
    """`count` random texts of 0 to ~60 pieces, some with a word past 200 characters."""
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        text = "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 60)))
        if rng.random() < 0.03:
            text += " " + rng.choice("ab\u00e9\u4e2d") * rng.randint(195, 205)
        texts.append(text)
    return texts


@pytest.fixture(scope="module")
def batch_support():
    pytest.importorskip("tensorflow_text", reason="the batch path needs tensorflow_text")
    return True


@pytest.fixture
def small_parts(monkeypatch):
    """Parts of ~64 characters: every batch call runs many parts on the worker threads."""
    monkeypatch.setattr(fast_batch, "PART_CHARS", 64)


@pytest.fixture(scope="module")
def uncased_vocab(request):
    path = request.getfixturevalue("shared_dir") / "data" / "vocab" / "uncased_vocab.txt"
    if not path.is_file():
        pytest.skip("%s not found" % path)
    return str(path)


@pytest.mark.parametrize("lower", [True, False])
def test_fast_path_texts_on_worker_threads(batch_support, uncased_vocab, small_parts, lower):
    del batch_support, small_parts
    tokenizer = tokenization.FullTokenizer(uncased_vocab, do_lower_case=lower)
    texts = FAST_PATH_TEXTS + ADVERSARIAL + FAST_PATH_TEXTS[::-1]
    assert_batch_matches_exact(tokenizer, texts, chunk_size=37)
    assert_batch_matches_exact(tokenizer, texts)


@pytest.mark.parametrize("lower", [True, False])
def test_random_stress_texts(batch_support, uncased_vocab, small_parts, lower):
    del batch_support, small_parts
    tokenizer = tokenization.FullTokenizer(uncased_vocab, do_lower_case=lower)
    texts = stress_texts(3000, seed=55 + lower)
    assert sum(len(t) > 200 for t in texts) > 50  # some words past the limit
    assert_batch_matches_exact(tokenizer, texts, chunk_size=500)


def test_default_parts_start_the_worker_threads(batch_support, uncased_vocab, monkeypatch):
    """Without lowering PART_CHARS: a batch over 3 parts runs on the two workers."""
    del batch_support
    started = []
    real = fast_batch.concurrent.futures.ThreadPoolExecutor

    class Counting(real):
        def submit(self, *args, **kwargs):  # pylint: disable=arguments-differ
            started.append(1)
            return super().submit(*args, **kwargs)

    monkeypatch.setattr(fast_batch.concurrent.futures, "ThreadPoolExecutor", Counting)
    tokenizer = tokenization.FullTokenizer(uncased_vocab, do_lower_case=True)
    texts = stress_texts(4000, seed=7) + ["Plain ASCII text, repeated. " * 40] * 800
    assert sum(map(len, texts)) > 3 * fast_batch.PART_CHARS
    assert_batch_matches_exact(tokenizer, texts)
    assert len(started) >= 6  # 3+ parts for each of the two batch calls
    started.clear()
    assert tokenizer.convert_batch_to_ids(["one small call"]) == [
        tokenizer.convert_tokens_to_ids(tokenizer.tokenize("one small call"))]
    assert not started  # a lone small part runs on the calling thread


@pytest.fixture(scope="module")
def reference():
    module = bench_tokenization.reference_module(os.path.join(
        bench_tokenization.SHARED, "reference", "bert", "tokenization.py"))
    if module is None:
        pytest.skip("the reference's tokenization.py is not in ../shared/reference/bert")
    return module


@pytest.mark.parametrize("lower", [True, False])
def test_batch_equals_the_reference_module(batch_support, uncased_vocab, reference,
                                           small_parts, lower):
    """google-research/bert's FullTokenizer itself, on the stress texts."""
    del batch_support, small_parts
    texts = FAST_PATH_TEXTS + ADVERSARIAL + stress_texts(1500, seed=3)
    theirs = reference.FullTokenizer(uncased_vocab, do_lower_case=lower)
    ours = tokenization.FullTokenizer(uncased_vocab, do_lower_case=lower)
    expected = [theirs.convert_tokens_to_ids(theirs.tokenize(text)) for text in texts]
    assert ours.convert_batch_to_ids(texts) == expected
    assert ours.tokenize_batch(texts) == [theirs.convert_ids_to_tokens(ids) for ids in expected]


def test_cjk_accented_corpus_equals_the_reference(batch_support, shared_dir, reference):
    """The benchmark's CJK / accented corpus (a slice), Chinese vocabulary, lower-cased."""
    del batch_support
    vocab = shared_dir / "data" / "vocab" / "chinese_vocab.txt"
    squad = shared_dir / "data" / "squad" / "dev-v1.1.json"
    if not (vocab.is_file() and squad.is_file()):
        pytest.skip("the Chinese vocabulary or SQuAD dev is not in ../shared")
    texts = bench_tokenization.cjk_accented_texts(str(squad), str(vocab), count=800)
    assert len({t for t in texts}) == 800 and all(not t.isascii() for t in texts)
    theirs = reference.FullTokenizer(str(vocab), do_lower_case=True)
    ours = tokenization.FullTokenizer(str(vocab), do_lower_case=True)
    expected = [theirs.convert_tokens_to_ids(theirs.tokenize(text)) for text in texts]
    assert ours.convert_batch_to_ids(texts, chunk_size=300) == expected
    assert sum(map(len, expected)) > 50000


# Non-ASCII texts of a part are prepared joined by U+E000 (FastBatchTokenizer's
# _prepare_joined): texts whose result depends on what lies at their ends if the ends
# were not a boundary (a final capital sigma, a capital sigma next to a cased letter
# of the next text, marks at a text's start), texts that must be prepared alone
# (deleted characters, lone surrogates), and texts holding the joiner itself.
JOIN_BOUNDARY_TEXTS = [
    "\u039f\u0394\u039f\u03a3", "\u0391\u0392\u0393 \u00e9",  # final sigma, then a cased start
    "\u00e9\u03a3", "\u0301\u0301\u03c3\u03a3\u0301", "\u0300x\u0399\u03a3",
    "\u03a3\u00c9", "\u00c9\u03a3", "\u0130\u03a3\u0307", "\u00df\u03a3",
    "private \ue000 joiner \u00e9", "\ue000", "\u03a3\ue000\u03a3", "\u00e9",
    "zero\u200bwidth \u00c9\u03a3", "\u03a3 lone \ud800 surrogate", "\u4e2d\u03a3",
    "\u03a3", "", "\u00e9\u00e9", "\u0345\u03a3\u0345", "\u1f88\u03a3",
]


@pytest.mark.parametrize("lower", [True, False])
def test_joined_preparation_keeps_each_text_apart(batch_support, uncased_vocab, reference,
                                                 lower):
    del batch_support
    # Every pair, in both orders, side by side in one part: each text's ends are next
    # to every other kind of end.
    texts = [text for first in JOIN_BOUNDARY_TEXTS for second in JOIN_BOUNDARY_TEXTS
             for text in (first, second)]
    ours = tokenization.FullTokenizer(uncased_vocab, do_lower_case=lower)
    assert_batch_matches_exact(ours, texts)
    theirs = reference.FullTokenizer(uncased_vocab, do_lower_case=lower)
    checked = [text for text in texts if "\ud800" not in text]  # theirs fails on it
    assert ours.convert_batch_to_ids(checked) == [
        theirs.convert_tokens_to_ids(theirs.tokenize(text)) for text in checked]
    # The same pairs without the texts that must be prepared alone: all joined.
    joined = [t for t in texts if not any(c in t for c in "\ue000\u200b\ud800")]
    assert_batch_matches_exact(ours, joined)


# The exact path cuts pieces holding CJK ideographs into runs and ideographs and
# remembers those (exact_shortcuts.TokenCache.tokenize_ideographs): texts aimed at the
# edges of the parts (marks, sigma, controls, punctuation and long runs next to
# ideographs; compatibility and astral ideographs, which NFD may change).
IDEOGRAPH_TEXTS = [
    "\u4e2d\u6587", "\u4e2d\u0301\u6587", "\u039f\u03a3\u4e2d\u03a3", "\u4e2d\u03a3\u039f",
    "\u00c9\u4e2d\u00e9", "e\u4e2d\u0301e", "\u4e2d\u200b\u6587\u00ad\u5b57", "\u4e2d\x00\u6587",
    "\u4e2d,\u6587!", "\u3002\u4e2d\u3001", "\uf900\uf901\ufa0e\u8c48", "\U00020000\U0002a6df",
    "\U0002f800\u4e2d\U0002fa1d", "x" * 199 + "\u4e2d" + "y" * 201 + "\u6587" + "\u00e9" * 200,
    "\u4e2dunwanted\u6587running\u5b57", "\u4e2dABC\u00c5ngstr\u00f6m\u6587",
    "\u4e00\u9fff\u3400\u4dbf\u4dc0\u3000\u4e2d", "\u1100\u4e2d\uac00", "\u4e2d\ufffd\u6587",
    "\u0130\u4e2d\u0130", "\u4e2d\u1e9e\u6587\u00df", "\u4e2d\U0001f600\u6587",
]


@pytest.mark.parametrize("lower", [True, False])
def test_exact_path_on_ideographs_equals_the_reference(uncased_vocab, reference, lower):
    rng = random.Random(11 + lower)
    texts = IDEOGRAPH_TEXTS + [" ".join(rng.sample(IDEOGRAPH_TEXTS, 4)) for _ in range(60)] + [
        "".join(rng.sample(IDEOGRAPH_TEXTS, 3)) for _ in range(60)]
    theirs = reference.FullTokenizer(uncased_vocab, do_lower_case=lower)
    expected = [theirs.tokenize(text) for text in texts]
    ours = tokenization.FullTokenizer(uncased_vocab, do_lower_case=lower)
    for _ in range(2):  # remembered parts the second time
        assert [ours.tokenize(text) for text in texts] == expected


# The batch path looks up what each character of a part becomes in tables (_Fold in
# fast_batch.py) after str.lower() has run on the whole part: pieces aimed at what a
# character-by-character view could miss (capital sigma next to cased letters and
# case-ignorable marks, marks in any order, dotted capital I, compatibility characters NFD
# maps to another letter, a deleted character). FOLD_APART are characters the tables
# leave to the whole-string steps (Hangul syllables become jamo; non-Mn characters with
# a combining class), in a second set of texts, so both ways run beside each other.
FOLD_PIECES = [
    "\u03a3", "\u039f\u03a3", "\u03a3\u039f", "\u03c3", "\u03c2", "\u0301", "\u0323",
    "e\u0301", "\u00e9", "\u00c9", "\u0130", "I", "i\u0307", "\u1f88", "\u0345", "\u1e9e",
    "\u00df", "\u4e2d", "\uf900", "\u212b", "\u2126", "\u00c5", "\u0915\u094d\u0937",
    "\u00ad", "'", ".", "A", "b", "Cd", " ", " ", "\u3002", "\u0390", "\u1e14", "\u01c5",
    "\U0001d400", "\u0587", "\ufb03",
]
FOLD_APART = ["\ud55c", "\uac00\u11a8", "\U0001d165", "\U0001d16e\u0301", "\u0f73",
              "x\U0001d16d\U0001d165", "\U0001d16d\u0301\U0001d16e"]  # NFD swaps these


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("apart", [False, True])
def test_character_tables_keep_the_whole_string_result(batch_support, tmp_path, small_parts,
                                                       lower, apart):
    """Every word the exact path makes of the texts is in the vocabulary, so a word the
    batch path prepared otherwise (a letter lost, marks in another order) shows as another
    token or [UNK]."""
    del batch_support, small_parts
    rng = random.Random(23 + 2 * lower + apart)
    pieces = FOLD_PIECES + (FOLD_APART if apart else [])
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
             for _ in range(600)]
    basic = tokenization.BasicTokenizer(do_lower_case=lower)
    words = sorted({word for text in texts for word in basic.tokenize(text)})
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]"] + words) + "\n", encoding="utf-8")
    tokenizer = tokenization.FullTokenizer(str(vocab), do_lower_case=lower)
    assert_batch_matches_exact(tokenizer, texts)
    assert "[UNK]" not in {token for text in texts for token in tokenizer.tokenize(text)}
