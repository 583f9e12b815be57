"""WordPiece tokenization for BERT, bit-for-bit compatible with the original release.

Two ways to tokenize live here:

* The exact path, in pure Python: `FullTokenizer.tokenize` runs `BasicTokenizer`
  (cleanup, CJK splitting, optional lower-casing with accent stripping, punctuation
  splitting) and then `WordpieceTokenizer` (greedy longest-match-first). It defines
  correct output. It remembers the tokens of every whitespace-separated piece of text
  it has seen, so repeated words cost a dict lookup, and takes shortcuts for ASCII.
  Importing this module never imports TensorFlow.

* The batch path, `FullTokenizer.tokenize_batch` / `FullTokenizer.convert_batch_to_ids`:
  many texts at a time through tensorflow_text's C++ FastWordpieceTokenizer, with the
  same output as the exact path. TensorFlow is imported on first use.

tensorflow_text's ready-made FastBertTokenizer is not exact: on SQuAD dev it yields 20
more tokens than the reference (462,759 vs 462,739, uncased), because its normalizer
lower-cases with ICU NFKC_Casefold (U+00BD "1/2" -> "1" U+2044 "2", U+2026 -> "...",
U+00B2 -> "2", U+2033 -> two U+2032, final sigma U+03C2 -> U+03C3, sharp s U+00DF ->
"ss"), and it has further differences on controls, long words and new punctuation.
The batch path therefore normalizes in Python and only lets TensorFlow split and run
WordPiece; the comment block "The batch path" further down gives the details.
"""

import collections
import contextlib
import gc
import itertools
import logging
import os
import re
import sys
import unicodedata

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

# Code point blocks treated as "Chinese characters": each one becomes a word of
# its own. (Hangul, kana and other CJK-adjacent scripts are not in the list.)
_CJK_RANGES = (
    (0x4E00, 0x9FFF),    # CJK Unified Ideographs
    (0x3400, 0x4DBF),    # Extension A
    (0x20000, 0x2A6DF),  # Extension B
    (0x2A700, 0x2B73F),  # Extension C
    (0x2B740, 0x2B81F),  # Extension D
    (0x2B820, 0x2CEAF),  # Extension E
    (0xF900, 0xFAFF),    # Compatibility Ideographs
    (0x2F800, 0x2FA1F),  # Compatibility Ideographs Supplement
)

# Every printable ASCII character that is neither a letter, a digit nor a space
# counts as punctuation, even "$", "^" or "`" which Unicode files elsewhere.
_ASCII_PUNCTUATION_RANGES = ((33, 47), (58, 64), (91, 96), (123, 126))


_ASCII_PUNCTUATION = frozenset(
    chr(cp) for low, high in _ASCII_PUNCTUATION_RANGES for cp in range(low, high + 1))
_ASCII_SPACES = frozenset(" \t\n\r")


def is_chinese_char(cp):
    """True when code point `cp` lies in one of the CJK ideograph blocks above."""
    if cp < 0x3400:  # below every block; the common case
        return False
    for low, high in _CJK_RANGES:
        if low <= cp <= high:
            return True
    return False


def is_whitespace(char):
    """True for space, tab, newline, carriage return and Unicode category Zs."""
    if char in _ASCII_SPACES:
        return True
    return unicodedata.category(char) == "Zs"


def is_control(char):
    """True for categories Cc and Cf, except tab/newline/CR (those are whitespace)."""
    if char in _ASCII_SPACES:  # the space itself is not Cc/Cf anyway
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def is_punctuation(char):
    """True for non-alphanumeric printable ASCII and for Unicode categories P*."""
    if char in _ASCII_PUNCTUATION:
        return True
    return unicodedata.category(char).startswith("P")


# The reference's module-level names of the character classes.
_is_whitespace = is_whitespace
_is_control = is_control
_is_punctuation = is_punctuation


# ---------------------------------------------------------------------------
# Per-character tables for the exact path.
# ---------------------------------------------------------------------------


class _CharacterMap(dict):
    """A str.translate table that works out each code point's replacement on first sight.

    str.translate looks every code point of the text up in its table. Holding all
    1.1M code points up front would cost seconds and memory; as a dict subclass with
    __missing__, the table asks `replacement(cp)` once and remembers the answer, so
    text in a few scripts only ever fills a few hundred entries. Past `limit` entries
    (text walking the whole code space) answers are still computed, just not kept.
    """

    def __init__(self, replacement, limit=1 << 16):
        super().__init__()
        self._replacement = replacement
        self._limit = limit

    def __missing__(self, cp):
        value = self._replacement(cp)
        if len(self) < self._limit:
            self[cp] = value
        return value


def _cleaned(cp):
    """What _clean_text makes of code point `cp`: None (deleted), " " or itself."""
    char = chr(cp)
    if cp == 0 or cp == 0xFFFD or is_control(char):
        return None
    if is_whitespace(char):
        return " "
    return cp  # an int maps to that code point, i.e. the character is kept


def _spaced_if_chinese(cp):
    """What _tokenize_chinese_chars makes of `cp`: " c " for a CJK ideograph, else itself."""
    return " %s " % chr(cp) if is_chinese_char(cp) else cp


_CLEAN_MAP = _CharacterMap(_cleaned)
_CHINESE_MAP = _CharacterMap(_spaced_if_chinese)

# The ASCII characters _clean_text deletes: C0 controls and DEL, but not tab,
# newline and CR (which become spaces).
_ASCII_DELETED = "".join(char for char in map(chr, range(128)) if _cleaned(ord(char)) is None)
_ASCII_DELETED_RE = re.compile("[%s]" % re.escape(_ASCII_DELETED))
_ASCII_PUNCTUATION_CLASS = "".join(sorted(_ASCII_PUNCTUATION))
# A punctuation character alone, or a run of anything else: on ASCII text without
# whitespace this is exactly what _run_split_on_punc cuts.
_ASCII_SPLIT_RE = re.compile("[%s]|[^%s]+" % ((re.escape(_ASCII_PUNCTUATION_CLASS),) * 2))
# The same, where runs also stop at whitespace: on cleaned ASCII text (whose only
# whitespace left is space, tab, newline and CR) this gives BasicTokenizer's words.
_ASCII_WORDS_RE = re.compile("[%s]|[^%s \t\n\r]+" % (
    (re.escape(_ASCII_PUNCTUATION_CLASS),) * 2))

# The whitespace characters _clean_text deletes instead of turning into spaces:
# \x0b, \x0c, \x1c-\x1f and \x85, all Cc. Category Cc lies within Latin-1 and is
# closed to new characters, and no Cf character is whitespace to str.split (a test
# checks every code point), so scanning Latin-1 finds them all.
_DELETED_SPACES = "".join(
    char for char in map(chr, range(256)) if char.isspace() and _cleaned(ord(char)) is None)
_DELETED_SPACES_RE = re.compile("[%s]" % re.escape(_DELETED_SPACES))


def _is_plain(tokenizer, cls):
    """True when `tokenizer` is a `cls` itself, with no method replaced on the instance.

    Only then may the exact path take its shortcuts, which know the stock steps alone.
    """
    return type(tokenizer) is cls and vars(tokenizer).keys().isdisjoint(_CLASS_NAMES[cls])


def _ascii_words(text, do_lower_case):
    """BasicTokenizer's words of ASCII `text`, in one pass of C code.

    ASCII has no ideographs and nothing for NFD to decompose or strip, and lower()
    works character by character, so the steps reduce to deleting controls,
    lower-casing the whole text and cutting at whitespace and punctuation.
    """
    if _ASCII_DELETED_RE.search(text) is not None:
        text = _ASCII_DELETED_RE.sub("", text)
    if do_lower_case:
        text = text.lower()
    return _ASCII_WORDS_RE.findall(text)


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
        if text.isascii() and _is_plain(self, BasicTokenizer):
            # Most text. (A subclass may override a step: it takes the route below.)
            return _ascii_words(text, self.do_lower_case)
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
        return text.translate(_CLEAN_MAP)

    def _tokenize_chinese_chars(self, text):
        """Puts a space on both sides of every CJK ideograph (per _is_chinese_char)."""
        if type(self)._is_chinese_char is not BasicTokenizer._is_chinese_char:
            # A subclass's own rule, asked about every character as in the reference.
            is_cjk = self._is_chinese_char
            return "".join(" %s " % char if is_cjk(ord(char)) else char for char in text)
        if text.isascii():  # every ideograph lies above U+3400
            return text
        return text.translate(_CHINESE_MAP)

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
            return _ASCII_SPLIT_RE.findall(text)
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

    # Entries a cache of tokenize() holds before it is emptied and starts over: this
    # bounds its memory on an endless stream of new words, and is far more than the
    # distinct pieces of SQuAD dev (47k).
    _CACHE_LIMIT = 200000

    def tokenize(self, text):
        """Returns the WordPiece tokens of one text (str or bytes)."""
        basic = self.basic_tokenizer
        wordpiece = self.wordpiece_tokenizer
        if not (_is_plain(basic, BasicTokenizer) and _is_plain(wordpiece, WordpieceTokenizer)):
            # Replaced or customized parts: run them as they are, without caches.
            tokens = []
            for word in basic.tokenize(text):
                tokens.extend(wordpiece.tokenize(word))
            return tokens

        # The tokens of a text are those of its whitespace-separated pieces, one after
        # the other: every step before the split (deleting characters, turning
        # whitespace into spaces, isolating CJK ideographs) acts on one character at a
        # time and never joins two pieces, and every step after it (including the
        # final re-split on whitespace) acts within a piece. Only the whitespace
        # characters that _clean_text deletes would join pieces, so they go first. The
        # tokens of a piece then depend on the piece and the settings alone, and
        # repeated pieces (most of any text) cost one dict lookup.
        pieces_cache, words_cache = self._caches(basic, wordpiece)
        text = convert_to_unicode(text)
        if _DELETED_SPACES_RE.search(text) is not None:
            text = _DELETED_SPACES_RE.sub("", text)
        tokens = []
        cached = pieces_cache.get
        for piece in text.split():
            found = cached(piece)
            if found is None:
                found = self._tokenize_piece(piece, basic, wordpiece, pieces_cache, words_cache)
            tokens += found
        return tokens

    def _caches(self, basic, wordpiece):
        """The (pieces, words) caches of tokenize(), new ones if a setting changed.

        The cached tokens hold for one lower-casing, vocabulary, unknown token and word
        length limit. A vocabulary is recognized by its identity and size: a new dict,
        or entries added to or deleted from the old one, start fresh caches. (An edit
        that keeps the size, deleting one entry and adding another, goes unnoticed;
        assign a new dict for that.) The ids do not matter here, only which entries exist.
        """
        vocab = wordpiece.vocab
        settings = (bool(basic.do_lower_case), len(vocab), wordpiece.unk_token,
                    wordpiece.max_input_chars_per_word)
        state = getattr(self, "_cache_state", None)
        if state is None or state[0] is not vocab or state[1] != settings:
            state = (vocab, settings, {}, {})
            self._cache_state = state
        return state[2], state[3]

    def _tokenize_piece(self, piece, basic, wordpiece, pieces_cache, words_cache):
        """Tokens of one whitespace-free piece of text (a tuple), remembered in the caches.

        Different pieces share words ("word", "word," and "(word"), so the WordPiece
        split of each word is remembered too.
        """
        found = []
        if piece.isascii():
            words = _ascii_words(piece, basic.do_lower_case)
        else:
            words = basic.tokenize(piece)
        for word in words:
            word_pieces = words_cache.get(word)
            if word_pieces is None:
                # A word holds no whitespace, so this is wordpiece.tokenize(word).
                word_pieces = tuple(wordpiece._split_word(word))
                if len(words_cache) >= self._CACHE_LIMIT:
                    words_cache.clear()
                words_cache[word] = word_pieces
            found += word_pieces
        found = tuple(found)
        if len(pieces_cache) >= self._CACHE_LIMIT:
            pieces_cache.clear()
        pieces_cache[piece] = found
        return found

    def __getstate__(self):
        # Pickles and copies (e.g. for worker processes) leave the caches behind.
        state = self.__dict__.copy()
        state.pop("_cache_state", None)
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

    def _batch(self, texts, chunk_size, as_tokens):
        if chunk_size < 1:
            raise ValueError("chunk_size must be positive, got %r" % (chunk_size,))
        fast = self._fast_path()
        result = []
        texts = iter(texts)
        while True:
            chunk = [text if isinstance(text, str) else convert_to_unicode(text)
                     for text in itertools.islice(texts, chunk_size)]
            if not chunk:
                return result
            if fast is not None:
                result.extend(fast.rows(chunk, as_tokens))
            else:
                for text in chunk:
                    tokens = self.tokenize(text)
                    result.append(tokens if as_tokens else self.convert_tokens_to_ids(tokens))

    def _fast_path(self):
        """The tensorflow_text machinery, built on first use; None if it can't be used.

        Without tensorflow_text, with a vocabulary TensorFlow cannot mirror, or while
        TensorFlow builds a graph (_building_graph), the batch methods fall back to
        the exact path (same output, slower) and say so once. A tokenizer whose parts
        were replaced or overridden (a subclass's tokenize, another basic or WordPiece
        tokenizer) takes the exact path too: the fast path only knows the stock rules.
        """
        if self._customized():
            return None
        if _building_graph():
            if not getattr(self, "_graph_warned", False):
                self._graph_warned = True
                logging.getLogger(__name__).warning(
                    "Batch tokenization falls back to the pure-Python path while TensorFlow "
                    "builds a graph (TF1 graph mode or tf.Graph().as_default()): its results "
                    "cannot be read there.")
            return None
        if getattr(self, "_fast", None) is None:
            try:
                fast = _FastBatchTokenizer(self)
                reason = fast.problem
            except ImportError as error:
                fast, reason = None, "tensorflow_text is not available (%s)" % error
            if reason is not None:
                logging.getLogger(__name__).warning(
                    "Batch tokenization falls back to the pure-Python path: %s.", reason)
                fast = False
            self._fast = fast
        return self._fast or None

    def _customized(self):
        """True when tokenize() is not this class's stock pipeline on self.vocab."""
        return (type(self).tokenize is not FullTokenizer.tokenize
                or type(self.basic_tokenizer) is not BasicTokenizer
                or type(self.wordpiece_tokenizer) is not WordpieceTokenizer
                or self.wordpiece_tokenizer.vocab is not self.vocab)


# What _is_plain looks for on an instance: the names its class defines.
_CLASS_NAMES = {cls: frozenset(vars(cls)) for cls in (BasicTokenizer, WordpieceTokenizer)}


# ---------------------------------------------------------------------------
# The batch path.
# ---------------------------------------------------------------------------
#
# Why not FastBertTokenizer as it is? Measured on SQuAD v1.1 dev (contexts and
# questions, uncased vocab), tensorflow_text's FastBertTokenizer gives 462,759
# tokens where the reference gives 462,739, in 18 texts, all with do_lower_case=True
# (cased output is identical there). The cause is its normalizer: it lower-cases
# with ICU's NFKC_Casefold instead of str.lower(), so it also applies compatibility
# decompositions and full case folding. Word by word, the difference is:
#   U+00BD (1/2 fraction) -> "1" U+2044 "2":  6 words, +6 tokens (2 vs 3 pieces)
#   U+2153 (1/3 fraction) -> "1" U+2044 "3":  3 words, +6
#   U+2026 (ellipsis)     -> "...":           2 words, +4
#   U+00B2 (superscript 2) -> "2":            2 words, +2 ("km\u00b2" is in the vocab)
#   U+2033 (double prime) -> U+2032 U+2032:   1 word,  +1
#   U+03C2 (final sigma)  -> U+03C3 sigma:    8 Greek words, +5
#   U+00DF (sharp s)      -> "ss":            4 German words, -4
# which sums to the +20. Reading its sources and probing every code point shows
# more differences, which SQuAD happens not to contain:
#   * Cc/Cf characters (soft hyphen, ZWJ, BOM, \x01...) become spaces, so they split
#     words; the reference deletes them. U+FFFD is kept; the reference deletes it.
#   * normalization is a per-character table, so context is lost (str.lower() turns
#     a word-final capital sigma into U+03C2).
#   * the word length limit counts UTF-8 bytes (default 100); the reference counts
#     200 characters, so long non-ASCII words differ.
#   * punctuation is ICU's u_ispunct, from a newer Unicode (16.0) than Python's
#     unicodedata (14.0 for 3.11): ~36 code points unassigned for Python (U+1B4E,
#     U+11B00..., U+1E5FF...) split words in TensorFlow only.
#   * a vocabulary entry containing a space can match across the space.
#
# What this path does instead: it never uses the TensorFlow normalizer. The
# reference's per-word steps are replayed in Python with whole-string C routines
# (a regex deletes NUL/U+FFFD/Cc/Cf, str.lower(), unicodedata.normalize("NFD"), a
# regex deletes Mn). That equals the per-word version because words are separated by
# whitespace, which is neither cased, case-ignorable nor combining, so neither the
# final-sigma rule of str.lower() nor NFD reordering can look across it, and the
# deletions happen first in both. FastWordpieceTokenizer then splits on whitespace,
# punctuation and CJK ideographs and runs WordPiece; its character classes are
# probed once per process against Python's. Texts that still could differ are
# handed to the exact path: texts with a character the two classify differently (or
# that normalizes to one, or a CJK ideograph that NFD moves out of the CJK blocks),
# texts with lone surrogates (not encodable as UTF-8), and texts where a word of
# more than 200 characters came out as pieces (found afterwards from the ids).

_WORD, _SPACE, _SPLIT = 0, 1, 2  # how a character behaves when words are cut
_TABLES = None


class _CharSet(object):
    """A set of code points that can be searched for, or deleted, in a str quickly.

    Python's regex engine tests a character class in constant time for the Basic
    Multilingual Plane but walks a list for every range above U+FFFF, which made a
    single class of all Mn characters cost ~1 us per character. So the regex holds
    the BMP members plus one catch-all astral range, and astral hits are confirmed
    against a Python set.
    """

    def __init__(self, code_points):
        members = sorted(set(code_points))
        self._astral = frozenset(cp for cp in members if cp > 0xFFFF)
        ranges = []
        for cp in members:
            if cp > 0xFFFF:
                break
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1][1] = cp
            else:
                ranges.append([cp, cp])
        if self._astral:
            ranges.append([0x10000, 0x10FFFF])
        body = "".join("\\U%08x-\\U%08x" % (low, high) for low, high in ranges)
        self._candidates = re.compile("[%s]" % body) if body else re.compile("(?!)")

    def _is_member(self, char):
        return char <= "\uffff" or ord(char) in self._astral

    def search(self, text):
        """True when `text` contains a member."""
        for match in self._candidates.finditer(text):
            if self._is_member(match.group()):
                return True
        return False

    def delete(self, text):
        """Returns `text` without its members."""
        if not self._astral:
            return self._candidates.sub("", text)
        return self._candidates.sub(lambda m: "" if self._is_member(m.group()) else m.group(), text)


def _strip_marks(text):
    """NFD-decomposes `text` and drops Mn characters (the reference's accent removal)."""
    return "".join(c for c in unicodedata.normalize("NFD", text)
                   if unicodedata.category(c) != "Mn")


class _CharacterTables(object):
    """Character sets the batch path needs; built once per process (about a second).

    Attributes:
      dropped: what the reference deletes (NUL, U+FFFD, Cc and Cf but not tab, newline or CR).
      ascii_dropped: the same, as bytes below 0x80.
      marks: category Mn (deleted after NFD when lower-casing).
      spaces: what separates words (str.isspace).
      punctuation: what the reference makes a word of its own (punctuation and CJK).
      mismatched: code points TensorFlow puts in another class (separator / word
        of its own / word character) than the reference does.
      unsafe_cased, unsafe_lower: characters after which TensorFlow's result can't be
        trusted in that casing (mismatched ones, lone surrogates, and when
        lower-casing, characters that normalize to a mismatched one or move in or
        out of the CJK blocks); texts with one take the exact path.
      attention_cased, attention_lower: unsafe plus dropped characters: texts with
        none of them need no more than lower-casing and accent stripping.
    """

    def __init__(self, tf_classes_of):
        import numpy as np  # pylint: disable=import-outside-toplevel

        cps = np.arange(0x110000, dtype=np.int64)
        cps = cps[(cps < 0xD800) | (cps > 0xDFFF)]  # lone surrogates are not text
        chars = cps.astype("<u4").tobytes().decode("utf-32-le")
        categories = list(map(unicodedata.category, chars))
        names = sorted(set(categories))
        number_of = {name: index for index, name in enumerate(names)}
        codes = np.fromiter(map(number_of.__getitem__, categories), dtype=np.int8,
                            count=len(categories))
        del categories

        def in_categories(*wanted):
            return np.isin(codes, [number_of[w] for w in wanted if w in number_of])

        is_space = np.fromiter(map(str.isspace, chars), dtype=bool, count=len(chars))
        dropped = (cps == 0) | (cps == 0xFFFD) | (
            in_categories("Cc", "Cf") & ~np.isin(cps, (9, 10, 13)))
        is_split = in_categories(*[name for name in names if name.startswith("P")])
        for low, high in _CJK_RANGES + _ASCII_PUNCTUATION_RANGES:
            is_split |= (cps >= low) & (cps <= high)
        python_classes = np.where(is_space, _SPACE, np.where(is_split, _SPLIT, _WORD))
        tf_classes = tf_classes_of(cps)
        differs = python_classes != tf_classes
        # Deleted characters never reach TensorFlow, unless normalization creates them.
        mismatched = set(cps[differs & ~dropped].tolist())
        mismatched_if_created = set(cps[differs].tolist())

        # When lower-casing, TensorFlow sees _strip_marks(c.lower()) of a character c;
        # only assigned characters can be changed by that.
        risky_when_lowered = set()
        for cp in cps[~in_categories("Cn", "Co") & ~dropped].tolist():
            char = chr(cp)
            if char.lower() == char and unicodedata.is_normalized("NFD", char):
                continue
            seen = _strip_marks(char.lower())
            if any(ord(c) in mismatched_if_created for c in seen):
                risky_when_lowered.add(cp)
            # The reference isolates CJK ideographs before normalizing, TensorFlow
            # after: both must see the same ideographs (all of which lie above U+3400).
            was_cjk = is_chinese_char(cp)
            if not was_cjk and all(c < "\u3400" for c in seen):
                continue
            seen_cjk = [is_chinese_char(ord(c)) for c in seen]
            if was_cjk:
                if len(seen) > 1 or not all(seen_cjk):
                    risky_when_lowered.add(cp)
            elif any(seen_cjk):
                risky_when_lowered.add(cp)

        dropped_cps = cps[dropped].tolist()
        unsafe_cased = mismatched | set(range(0xD800, 0xE000))
        unsafe_lower = unsafe_cased | risky_when_lowered
        self.dropped = _CharSet(dropped_cps)
        self.ascii_dropped = bytes(cp for cp in dropped_cps if cp < 0x80)
        self.marks = _CharSet(cps[in_categories("Mn")].tolist())
        self.spaces = _CharSet(cps[is_space].tolist())
        self.punctuation = _CharSet(cps[is_split & ~is_space].tolist())
        self.mismatched = frozenset(mismatched)
        self.unsafe_cased = _CharSet(unsafe_cased)
        self.unsafe_lower = _CharSet(unsafe_lower)
        self.attention_cased = _CharSet(unsafe_cased.union(dropped_cps))
        self.attention_lower = _CharSet(unsafe_lower.union(dropped_cps))


def _probe_tf_classes(cps):
    """Asks FastWordpieceTokenizer how it splits around each code point of `cps`.

    Every code point is put between two "x" in one long string; with a vocabulary
    that knows none of the words, each word comes back as one [UNK] with its byte
    span. A code point outside every span is a separator, one whose span is exactly
    itself is split off, and any other is part of a word.

    Args:
      cps: int numpy array of code points (no surrogates).

    Returns:
      int numpy array of _SPACE / _SPLIT / _WORD, one per code point.
    """
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    import tensorflow_text as tf_text  # pylint: disable=import-outside-toplevel

    interleaved = np.full(2 * len(cps) + 1, ord("x"), dtype="<u4")
    interleaved[1::2] = cps
    text = interleaved.tobytes().decode("utf-32-le").encode("utf-8")

    with tf.init_scope():  # eager, also when called while a graph is being built
        splitter = tf_text.FastWordpieceTokenizer(
            vocab=["[UNK]", "y"], max_bytes_per_word=16, token_out_type=tf.int32)
        _, starts, ends = splitter.tokenize_with_offsets(tf.constant([text]))
        starts = starts.flat_values.numpy()
        ends = ends.flat_values.numpy()

    widths = np.where(cps < 0x80, 1, np.where(cps < 0x800, 2, np.where(cps < 0x10000, 3, 4)))
    offsets = 1 + np.concatenate([[0], np.cumsum(widths + 1)[:-1]])
    span = np.maximum(np.searchsorted(starts, offsets, side="right") - 1, 0)
    inside = (starts[span] <= offsets) & (offsets < ends[span])
    alone = inside & (starts[span] == offsets) & (ends[span] == offsets + widths)
    return np.where(~inside, _SPACE, np.where(alone, _SPLIT, _WORD))


def _building_graph():
    """True when TensorFlow cannot run ops at once here (never if it is not imported).

    That is TF1 graph mode (tf.compat.v1.disable_v2_behavior) and any block under
    tf.Graph().as_default(); a tf.function being traced is not: tf.init_scope,
    which the batch path runs under, leaves it for the eager context outside.
    """
    tf = sys.modules.get("tensorflow")
    if tf is None or not hasattr(tf, "init_scope"):
        return False
    with tf.init_scope():
        return not tf.executing_eagerly()


def _character_tables():
    global _TABLES  # pylint: disable=global-statement
    if _TABLES is None:
        _TABLES = _CharacterTables(_probe_tf_classes)
    return _TABLES


class _FastBatchTokenizer(object):
    """Batch tokenization on FastWordpieceTokenizer (see "The batch path" above)."""

    def __init__(self, full_tokenizer):
        import numpy as np  # pylint: disable=import-outside-toplevel
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        import tensorflow_text as tf_text  # pylint: disable=import-outside-toplevel

        self._np = np
        self._tf = tf
        self._exact = full_tokenizer
        wordpiece = full_tokenizer.wordpiece_tokenizer
        self._lower = full_tokenizer.basic_tokenizer.do_lower_case
        self._max_chars = wordpiece.max_input_chars_per_word
        tables = _character_tables()
        self._ascii_dropped = tables.ascii_dropped
        ascii_bytes = bytes(range(128))
        self._ascii_table = (ascii_bytes.lower() if self._lower else ascii_bytes) + bytes(
            range(128, 256))
        self._dropped = tables.dropped
        self._marks = tables.marks
        self._unsafe = tables.unsafe_lower if self._lower else tables.unsafe_cased
        self._attention = tables.attention_lower if self._lower else tables.attention_cased

        tf_vocab, self.problem = _vocab_for_tf(full_tokenizer.vocab, wordpiece.unk_token, tables)
        if self.problem:
            return
        # Generous byte limit: it never cuts a word of max_chars characters, and a
        # word longer than it has more than max_chars characters anyway.
        try:
            with tf.init_scope():
                self._model = tf_text.FastWordpieceTokenizer(
                    vocab=tf_vocab, suffix_indicator="##",
                    max_bytes_per_word=4 * self._max_chars + 4,
                    unknown_token=wordpiece.unk_token, token_out_type=tf.int64)
        except RuntimeError as error:  # raised by its C++ model builder
            self.problem = str(error)
            return
        self._token_array = np.array(tf_vocab, dtype=object)
        self._is_suffix = np.array([t.startswith("##") for t in tf_vocab])
        self._piece_chars = np.array([len(t) - 2 * t.startswith("##") for t in tf_vocab])
        # The fewest pieces a word over max_chars characters can have.
        self._pieces_to_be_long = self._max_chars // max(1, self._piece_chars.max()) + 1

    def rows(self, texts, as_tokens):
        """Returns, for every str in `texts`, its list of tokens (or of ids)."""
        prepared = [self._prepare(text) for text in texts]
        exact_rows = {row for row, ready in enumerate(prepared) if ready is None}
        for row in exact_rows:
            prepared[row] = b""
        with self._tf.init_scope():  # eager inside a graph being built (see _runs_eagerly)
            ragged = self._model.tokenize(self._tf.constant(prepared, dtype=self._tf.string))
            flat = ragged.flat_values.numpy()
            splits = ragged.row_splits.numpy()
        exact_rows.update(self._rows_with_long_words(flat, splits))

        with _garbage_collection_paused():
            values = (self._token_array[flat] if as_tokens else flat).tolist()
            bounds = splits.tolist()
            result = [values[start:end] for start, end in zip(bounds, bounds[1:])]
        for row in exact_rows:
            tokens = self._exact.tokenize(texts[row])
            result[row] = tokens if as_tokens else self._exact.convert_tokens_to_ids(tokens)
        return result

    def _prepare(self, text):
        """Applies the reference's character-level steps to `text`.

        Returns:
          The UTF-8 bytes FastWordpieceTokenizer should split, or None when the text
          must take the exact path.
        """
        if text.isascii():
            return text.encode("ascii").translate(self._ascii_table, self._ascii_dropped)
        if self._attention.search(text):
            # Rare: deletions must come first (they can change what str.lower() and
            # NFD do next to them), or the text is unsafe altogether.
            if self._unsafe.search(text):
                return None
            text = self._dropped.delete(text)
        if self._lower:
            text = self._marks.delete(unicodedata.normalize("NFD", text.lower()))
        return text.encode("utf-8")

    def _rows_with_long_words(self, flat, splits):
        """Rows in which a word of more than max_chars characters came out as pieces.

        The reference turns such a word into one unk_token. A word is an id that is not
        a "##" piece plus the "##" ids after it; its length is the sum of its pieces'.
        Only words of many pieces can be that long, so only those are measured.
        """
        np = self._np
        word_starts = np.flatnonzero(~self._is_suffix[flat])
        pieces = np.diff(np.append(word_starts, flat.size))
        rows = []
        for word in np.flatnonzero(pieces >= self._pieces_to_be_long).tolist():
            start = word_starts[word]
            if self._piece_chars[flat[start:start + pieces[word]]].sum() > self._max_chars:
                rows.append(int(np.searchsorted(splits, start, side="right")) - 1)
        return rows


@contextlib.contextmanager
def _garbage_collection_paused():
    """Pauses the cyclic garbage collector while many acyclic lists are allocated.

    Every few hundred new lists Python runs a collection, and some of them walk the
    whole heap, which is large once TensorFlow is loaded: this halved the time to
    build the output lists. Lists of ints or strs form no cycles, so nothing is lost.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _vocab_for_tf(vocab, unk_token, tables):
    """Lays the vocabulary out as a list indexed by id for FastWordpieceTokenizer.

    Entries the reference can never output (blank, containing whitespace or a deleted
    character, several characters including punctuation, or "##" + punctuation) are
    replaced by unique placeholders that no cleaned text contains, since TensorFlow
    may still match some of them (it matches an entry "a b" across the space). Ids that
    duplicates left unused get placeholders too.

    Returns:
      (list of entries, None), or (None, why TensorFlow cannot mirror the vocabulary).
    """
    if unk_token not in vocab:
        return None, "the unknown token %r is not in the vocabulary" % unk_token
    tokens = ["\x01%d\x01" % index for index in range(max(vocab.values()) + 1)]
    for token, index in vocab.items():
        if token == unk_token:
            tokens[index] = token
            continue
        is_suffix = token.startswith("##")
        body = token[2:] if is_suffix else token
        if not body or tables.spaces.search(body) or tables.dropped.search(body):
            continue
        if tables.punctuation.search(body) and (is_suffix or len(body) > 1):
            continue
        if len(body.encode("utf-8")) > 256:
            return None, "entry %r is longer than TensorFlow's 256 bytes" % token
        tokens[index] = token
    if len(set(tokens)) != len(tokens):
        return None, "a placeholder id collides with a vocabulary entry"
    return tokens, None
