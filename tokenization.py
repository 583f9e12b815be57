"""WordPiece tokenization for BERT, bit-for-bit compatible with the original release.

Two ways to tokenize live here:

* The exact path, in pure Python: `FullTokenizer.tokenize` runs `BasicTokenizer`
  (cleanup, CJK splitting, optional lower-casing with accent stripping, punctuation
  splitting) and then `WordpieceTokenizer` (greedy longest-match-first). It defines
  correct output. It remembers the tokens of every whitespace-separated piece of text
  it has seen, so repeated words cost a dict lookup, and takes shortcuts for ASCII
  (both in bert_tf2/text/exact_shortcuts.py). Importing this module never imports
  TensorFlow.

* The batch path, `FullTokenizer.tokenize_batch` / `FullTokenizer.convert_batch_to_ids`:
  many texts at a time through tensorflow_text's C++ FastWordpieceTokenizer, with the
  same output as the exact path. TensorFlow is imported on first use. Its machinery is
  in bert_tf2/text/fast_batch.py, which also tells why tensorflow_text's ready-made
  FastBertTokenizer is not exact (20 more tokens than the reference on SQuAD dev).

Contracts with the other modules (tokenization.py (+ bert_tf2/text/characters.py,
exact_shortcuts.py, fast_batch.py)):
Imports no TensorFlow at module level (nor do bert_tf2/text's modules, which never import
tokenization: characters holds the CJK blocks, ASCII punctuation, the whitespace / control /
punctuation classes and the self-filling translate table; exact_shortcuts the exact path's
translate tables, ASCII regexes, `is_plain` and `TokenCache`; fast_batch the batch path on
FastWordpieceTokenizer). The batch path (tokenize_batch / convert_batch_to_ids) equals
tokenize() on every text; `fast_batch.BatchPath` (the tokenizer's `_fast`, made on first
use) decides when it may use tensorflow_text (`fast_batch.build`) and otherwise runs
tokenize() per text: a FullTokenizer subclass overriding tokenize, another basic / WordPiece
tokenizer class, or TensorFlow building a graph (TF1 mode, tf.Graph().as_default()) take the
exact path; its TF ops run under tf.init_scope (eager while a tf.function traces).
`FastBatchTokenizer.rows(chunks, as_tokens)` cuts a batch call's texts into parts of about
`fast_batch.PART_CHARS` characters and runs FastWordpieceTokenizer on two worker threads it
starts and joins within the call (none for a lone small part), at most 4 parts in flight;
the cyclic GC is paused for the call; results come back in input order, ids as Python ints.
Its ids equal the reference's own tokenization.py on the stress texts and the bench's
corpora (tests/test_tokenization_batch_stress.py, benchmarks/bench_tokenization.py).
FullTokenizer.tokenize caches the tokens of each whitespace-separated piece (and each word's
WordPiece split) in an `exact_shortcuts.TokenCache` (its `_cache_state`), at most 200k
entries each (`exact_shortcuts.CACHE_LIMIT`), for a stock BasicTokenizer and
WordpieceTokenizer with no method replaced on the instance (`exact_shortcuts.is_plain`); the
caches restart when do_lower_case, the vocab (its identity or size), unk_token or
max_input_chars_per_word change, and are not pickled. Its ids equal a plain
re-implementation of the reference's steps (tests/test_tokenization.py).
"""
import collections
import os
import re
import threading
import unicodedata

from bert_tf2.text import characters
from bert_tf2.text import exact_shortcuts
from bert_tf2.text import fast_batch

# Held while a FullTokenizer makes its BatchPath (threads calling at once share one).
_BATCH_PATH_LOCK = threading.Lock()

# ---------------------------------------------------------------------------
# Text helpers.
# ---------------------------------------------------------------------------


def convert_to_unicode(text):
    """Returns `text` as `str`; bytes are decoded as UTF-8, dropping invalid bytes."""
    if isinstance(text, str):
        return text
    if isinstance(text, bytes):
        return text.decode("utf-8", "ignore")
    raise ValueError("Unsupported string type: %s" % type(text))


def printable_text(text):
    """Returns `text` as a `str` fit for printing or logging (same rules as above)."""
    return convert_to_unicode(text)


def whitespace_tokenize(text):
    """Splits `text` on runs of whitespace; empty or blank text gives []."""
    return text.split()


# ---------------------------------------------------------------------------
# Vocabulary.
# ---------------------------------------------------------------------------


def _read_lines(vocab_file):
    """Returns the lines of a UTF-8 file, splitting on "\\n" only.

    vocab_file: a str, bytes (what sess.run of a TF-Hub module's vocab_file gives,
    and what the reference's tf.gfile.GFile took) or os.PathLike path.
    """
    path = os.fsdecode(vocab_file)
    if "://" in path:
        # Remote file systems (gs://, hdfs://, ...) need TensorFlow's file layer;
        # it is imported only for them.
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        if not tf.io.gfile.exists(path):
            raise ValueError("Vocabulary file not found: %s" % path)
        with tf.io.gfile.GFile(path, "rb") as reader:
            data = reader.read()
        return _split_on_newline(data.decode("utf-8"))
    if not os.path.isfile(path):
        raise ValueError("Vocabulary file not found: %s" % path)
    with open(path, "r", encoding="utf-8", newline="\n") as reader:
        return reader.readlines()


def _split_on_newline(text):
    """Splits `text` after every "\\n", like repeated readline() calls would."""
    pieces = text.split("\n")
    lines = [piece + "\n" for piece in pieces[:-1]]
    if pieces[-1]:
        lines.append(pieces[-1])
    return lines


def load_vocab(vocab_file):
    """Reads a vocabulary file (one token per line) into an OrderedDict token -> id.

    The id of a token is its line number (from 0). Surrounding whitespace is stripped
    from every line; a blank line still takes an id (as the empty token). When a token
    appears twice, the later line number wins, and the earlier number stays unused.

    Raises:
      ValueError: if `vocab_file` does not exist.
    """
    vocab = collections.OrderedDict()
    for index, line in enumerate(_read_lines(vocab_file)):
        vocab[line.strip()] = index
    return vocab


def convert_by_vocab(vocab, items):
    """Maps every item through `vocab` (a dict or any mapping); unknown items raise KeyError."""
    return [vocab[item] for item in items]


def convert_tokens_to_ids(vocab, tokens):
    """Vocabulary ids of `tokens` (KeyError for a token not in the vocabulary)."""
    return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab, ids):
    """Tokens of vocabulary ids."""
    return convert_by_vocab(inv_vocab, ids)


# ---------------------------------------------------------------------------
# Checkpoint casing check.
# ---------------------------------------------------------------------------

# Google's released checkpoints, by the directory name they unpack to.
_UNCASED_CHECKPOINTS = (
    "uncased_L-24_H-1024_A-16",
    "uncased_L-12_H-768_A-12",
    "multilingual_L-12_H-768_A-12",
    "chinese_L-12_H-768_A-12",
)
_CASED_CHECKPOINTS = (
    "cased_L-12_H-768_A-12",
    "cased_L-24_H-1024_A-16",
    "multi_cased_L-12_H-768_A-12",
)
_CHECKPOINT_DIR_RE = re.compile(r"^.*?([A-Za-z0-9_-]+)/bert_model.ckpt")


def validate_case_matches_checkpoint(do_lower_case, init_checkpoint):
    """Raises ValueError when `do_lower_case` contradicts a known Google checkpoint.

    The casing of a checkpoint is not recorded in bert_config.json, so it is guessed
    from the name of the directory that holds `bert_model.ckpt`. Unknown names (and an
    empty `init_checkpoint`) are accepted silently.
    """
    if not init_checkpoint:
        return
    match = _CHECKPOINT_DIR_RE.match(os.fsdecode(init_checkpoint))
    if match is None:
        return
    model_name = match.group(1)

    if model_name in _UNCASED_CHECKPOINTS and not do_lower_case:
        given, kind, wanted = "False", "an uncased (lower-cased)", "True"
    elif model_name in _CASED_CHECKPOINTS and do_lower_case:
        given, kind, wanted = "True", "a cased", "False"
    else:
        return
    raise ValueError(
        "--do_lower_case=%s does not fit --init_checkpoint=%s: judging by its directory "
        "name `%s`, it is %s model, pre-trained with --do_lower_case=%s. Fine-tune it with "
        "the same setting (or rename the directory if the name misleads this check)."
        % (given, init_checkpoint, model_name, kind, wanted))


# ---------------------------------------------------------------------------
# Character classes used by the basic tokenizer.
# ---------------------------------------------------------------------------

# The character classes, in bert_tf2/text/characters.py (shared with the batch path):
# which code points are CJK ideographs (each a word of its own); whitespace (space, tab,
# newline, CR, category Zs); control (Cc, Cf, but not tab/newline/CR); punctuation
# (non-alphanumeric printable ASCII, categories P*).
is_chinese_char = characters.is_chinese_char
is_whitespace = characters.is_whitespace
is_control = characters.is_control
is_punctuation = characters.is_punctuation

# The reference's module-level names of the character classes.
_is_whitespace = is_whitespace
_is_control = is_control
_is_punctuation = is_punctuation


# ---------------------------------------------------------------------------
# The exact tokenizers.
# ---------------------------------------------------------------------------


class BasicTokenizer(object):
    """Splits text into words and punctuation marks, optionally lower-cased.

    Steps, in order: drop NUL, U+FFFD and control characters and turn whitespace into
    spaces; surround CJK ideographs with spaces; split on whitespace; for each piece,
    if `do_lower_case`, lower-case it, decompose it (NFD) and drop nonspacing marks
    (category Mn); finally cut every piece around each punctuation character.
    """

    def __init__(self, do_lower_case=True):
        self.do_lower_case = do_lower_case

    def tokenize(self, text):
        """Returns the list of words and punctuation marks of `text` (str or bytes)."""
        text = convert_to_unicode(text)
        if text.isascii() and exact_shortcuts.is_plain(self, BasicTokenizer):
            # Most text. (A subclass may override a step: it takes the route below.)
            return exact_shortcuts.ascii_words(text, self.do_lower_case)
        text = self._clean_text(text)
        text = self._tokenize_chinese_chars(text)
        words = []
        for piece in whitespace_tokenize(text):
            if self.do_lower_case:
                piece = self._run_strip_accents(piece.lower())
            words.extend(self._run_split_on_punc(piece))
        # Accent stripping can empty a piece (one made only of marks); dropping the
        # empty strings here is what a re-split on whitespace would do.
        return whitespace_tokenize(" ".join(words))

    @staticmethod
    def _clean_text(text):
        """Removes invalid/control characters; maps every whitespace character to " "."""
        return text.translate(exact_shortcuts.CLEAN_MAP)

    def _tokenize_chinese_chars(self, text):
        """Puts a space on both sides of every CJK ideograph (per _is_chinese_char)."""
        if type(self)._is_chinese_char is not BasicTokenizer._is_chinese_char:
            # A subclass's own rule, asked about every character as in the reference.
            is_cjk = self._is_chinese_char
            return "".join(" %s " % char if is_cjk(ord(char)) else char for char in text)
        if text.isascii():  # every ideograph lies above U+3400
            return text
        return text.translate(exact_shortcuts.CHINESE_MAP)

    def _is_chinese_char(self, cp):
        """True when code point `cp` is a CJK ideograph (the reference's method)."""
        return is_chinese_char(cp)

    @staticmethod
    def _run_strip_accents(text):
        """NFD-decomposes `text` and removes its nonspacing marks (category Mn)."""
        if text.isascii():  # NFD leaves ASCII alone, and ASCII has no marks
            return text
        decomposed = unicodedata.normalize("NFD", text)
        if decomposed.isascii():
            return decomposed
        return "".join(char for char in decomposed if unicodedata.category(char) != "Mn")

    @staticmethod
    def _run_split_on_punc(text):
        """Cuts `text` before and after each punctuation character.

        Returns the pieces in order; every punctuation character is a piece of its own.
        """
        if text.isascii():
            return exact_shortcuts.ASCII_SPLIT_RE.findall(text)
        pieces = []
        current = []
        for char in text:
            if is_punctuation(char):
                if current:
                    pieces.append("".join(current))
                    current = []
                pieces.append(char)
            else:
                current.append(char)
        if current:
            pieces.append("".join(current))
        return pieces


class WordpieceTokenizer(object):
    """Splits words into sub-word units of a vocabulary, longest match first.

    A word is consumed left to right; at each position the longest vocabulary entry
    that matches is taken (entries after the first are looked up with a "##" prefix).
    If some position matches nothing, or the word is longer than
    `max_input_chars_per_word` characters, the whole word becomes `unk_token`.
    With "play", "##er", "##s" in the vocabulary, "players" -> ["play", "##er", "##s"].
    """

    def __init__(self, vocab, unk_token="[UNK]", max_input_chars_per_word=200):
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word

    def tokenize(self, text):
        """Returns the word pieces of every whitespace-separated word of `text`."""
        pieces = []
        for word in whitespace_tokenize(convert_to_unicode(text)):
            pieces.extend(self._split_word(word))
        return pieces

    def _split_word(self, word):
        if len(word) > self.max_input_chars_per_word:
            return [self.unk_token]
        vocab = self.vocab
        found = []
        start = 0
        while start < len(word):
            prefix = "##" if start else ""
            for end in range(len(word), start, -1):
                candidate = prefix + word[start:end]
                if candidate in vocab:
                    break
            else:
                return [self.unk_token]
            found.append(candidate)
            start = end
        return found


class FullTokenizer(object):
    """Basic tokenization followed by WordPiece: text in, vocabulary tokens out.

    `tokenize` is the exact, pure-Python path; it caches the tokens of each piece of
    text between whitespace. `tokenize_batch` and `convert_batch_to_ids` give identical
    results for many texts at a time using tensorflow_text (imported on first use).
    """

    def __init__(self, vocab_file, do_lower_case=True):
        self.vocab = load_vocab(vocab_file)
        self.inv_vocab = {index: token for token, index in self.vocab.items()}
        self.do_lower_case = do_lower_case
        self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
        self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)
        self._fast = None

    def tokenize(self, text):
        """Returns the WordPiece tokens of one text (str or bytes)."""
        basic = self.basic_tokenizer
        wordpiece = self.wordpiece_tokenizer
        if not (exact_shortcuts.is_plain(basic, BasicTokenizer)
                and exact_shortcuts.is_plain(wordpiece, WordpieceTokenizer)):
            # Replaced or customized parts: run them as they are, without caches.
            tokens = []
            for word in basic.tokenize(text):
                tokens.extend(wordpiece.tokenize(word))
            return tokens
        # The stock parts: tokens remembered by piece of text (exact_shortcuts.TokenCache).
        cache = getattr(self, "_cache_state", None)
        if cache is None or not cache.fits(basic, wordpiece):
            cache = self._cache_state = exact_shortcuts.TokenCache(basic, wordpiece)
        return cache.tokenize(convert_to_unicode(text), basic, wordpiece._split_word)

    def __getstate__(self):
        # Copies (worker processes) leave caches and the batch path's TF objects behind.
        state = self.__dict__.copy()
        state.pop("_cache_state", None)
        state["_fast"] = None
        return state

    def convert_tokens_to_ids(self, tokens):
        """Vocabulary ids of `tokens` (KeyError for a token not in the vocabulary)."""
        return convert_by_vocab(self.vocab, tokens)

    def convert_ids_to_tokens(self, ids):
        """Tokens of vocabulary ids."""
        return convert_by_vocab(self.inv_vocab, ids)

    # -- batch path ---------------------------------------------------------

    def tokenize_batch(self, texts, chunk_size=4096):
        """Tokenizes many texts with tensorflow_text; same output as `tokenize` on each.

        Args:
          texts: an iterable of str or bytes.
          chunk_size: how many texts go to TensorFlow at once (bounds memory).

        Returns:
          A list with, for every text, its list of WordPiece tokens.
        """
        return self._batch(texts, chunk_size, as_tokens=True)

    def convert_batch_to_ids(self, texts, chunk_size=4096):
        """Same as `convert_tokens_to_ids(tokenize(text))` for every text, but batched.

        Args:
          texts: an iterable of str or bytes.
          chunk_size: how many texts go to TensorFlow at once (bounds memory).

        Returns:
          A list with, for every text, its list of vocabulary ids (Python ints).
        """
        return self._batch(texts, chunk_size, as_tokens=False)

    def prepare_batch(self):
        """Builds the batch path now (its character tables, once per process, and the
        vocabulary's FastWordpieceTokenizer: about a second), so that no later
        tokenize_batch call pays for it; the Python Predictors call it when made."""
        if not self._customized():
            self._batch_path().fast_tokenizer(self)

    def _batch_path(self):
        """This tokenizer's fast_batch.BatchPath, made once (threads share it)."""
        with _BATCH_PATH_LOCK:
            if not isinstance(getattr(self, "_fast", None), fast_batch.BatchPath):  # first use
                self._fast = fast_batch.BatchPath()
            return self._fast

    def _batch(self, texts, chunk_size, as_tokens):
        if chunk_size < 1:
            raise ValueError("chunk_size must be positive, got %r" % (chunk_size,))
        chunks = fast_batch.unicode_chunks(texts, chunk_size, convert_to_unicode)
        return self._batch_path().rows(self, chunks, as_tokens, stock=not self._customized())

    def _customized(self):
        """True when tokenize() is not this class's stock pipeline on self.vocab."""
        return (type(self).tokenize is not FullTokenizer.tokenize
                or type(self.basic_tokenizer) is not BasicTokenizer
                or type(self.wordpiece_tokenizer) is not WordpieceTokenizer
                or self.wordpiece_tokenizer.vocab is not self.vocab)
