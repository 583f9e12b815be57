"""tokenization.FullTokenizer's batch path: many texts at a time on tensorflow_text.

`FullTokenizer.tokenize_batch` / `convert_batch_to_ids` hand chunks of texts
(`unicode_chunks`) to the tokenizer's `BatchPath`, which passes them to a
`FastBatchTokenizer` (made by `build`), whose output equals `FullTokenizer.tokenize`
on every text, or else tokenizes them one by one on the exact path. TensorFlow,
tensorflow_text and numpy are imported on first use.

Why not tensorflow_text's FastBertTokenizer as it is? Measured on SQuAD v1.1 dev
(contexts and questions, uncased vocab), it gives 462,759 tokens where the reference
gives 462,739, in 18 texts, all with do_lower_case=True (cased output is identical
there). The cause is its normalizer: it lower-cases with ICU's NFKC_Casefold instead of
str.lower(), so it also applies compatibility decompositions and full case folding.
Word by word, the difference is:
  U+00BD (1/2 fraction) -> "1" U+2044 "2":  6 words, +6 tokens (2 vs 3 pieces)
  U+2153 (1/3 fraction) -> "1" U+2044 "3":  3 words, +6
  U+2026 (ellipsis)     -> "...":           2 words, +4
  U+00B2 (superscript 2) -> "2":            2 words, +2 ("km\\u00b2" is in the vocab)
  U+2033 (double prime) -> U+2032 U+2032:   1 word,  +1
  U+03C2 (final sigma)  -> U+03C3 sigma:    8 Greek words, +5
  U+00DF (sharp s)      -> "ss":            4 German words, -4
which sums to the +20. Reading its sources and probing every code point shows more
differences, which SQuAD happens not to contain:
  * Cc/Cf characters (soft hyphen, ZWJ, BOM, \\x01...) become spaces, so they split
    words; the reference deletes them. U+FFFD is kept; the reference deletes it.
  * normalization is a per-character table, so context is lost (str.lower() turns
    a word-final capital sigma into U+03C2).
  * the word length limit counts UTF-8 bytes (default 100); the reference counts
    200 characters, so long non-ASCII words differ.
  * punctuation is ICU's u_ispunct, from a newer Unicode (16.0) than Python's
    unicodedata (14.0 for 3.11): ~36 code points unassigned for Python (U+1B4E,
    U+11B00..., U+1E5FF...) split words in TensorFlow only.
  * a vocabulary entry containing a space can match across the space.

What this path does instead: it never uses the TensorFlow normalizer. The reference's
per-word steps are replayed in Python with whole-string C routines (a regex deletes
NUL/U+FFFD/Cc/Cf, str.lower(), unicodedata.normalize("NFD"), a regex deletes Mn), on all
the non-ASCII texts of a part at once, joined by a private-use character. That equals the
per-word version because words are separated by whitespace and texts by the joiner,
neither of which is cased, case-ignorable nor combining, so neither the final-sigma rule
of str.lower() nor NFD reordering can look across them, and the deletions happen first
in both. Most of those steps are table lookups (_Fold): after one str.lower() of the
joined texts, what each character becomes under NFD and the Mn deletion comes from a
table over every code point (numpy gathers, which leave Python's lock to the worker
threads); parts with a character no table can say take the whole-string routines.
FastWordpieceTokenizer then splits on whitespace, punctuation and CJK ideographs and runs
WordPiece; its character classes are probed once per process against Python's. Texts
that still could differ are handed to the exact path: texts with a character the two
classify differently (or that normalizes to one, or a CJK ideograph that NFD moves out of
the CJK blocks), texts with lone surrogates (not encodable as UTF-8), and texts where a
word of more than 200 characters came out as pieces (found afterwards from the ids).
"""

import bisect
import collections
import concurrent.futures
import contextlib
import gc
import itertools
import logging
import operator
import re
import sys
import threading
import unicodedata

from bert_tf2.text import characters

_WORD, _SPACE, _SPLIT = 0, 1, 2  # how a character behaves when words are cut
_TABLES = None
# Batch calls that fall back to the exact path say so under tokenization's name.
_LOG = logging.getLogger("tokenization")

# How the batch path cuts its work (FastBatchTokenizer.rows): parts of about this
# many characters of text (tests lower it to run many parts on the worker threads),
# and at most this many parts waiting.
PART_CHARS = 1 << 18
_IN_FLIGHT = 4
# What FastBatchTokenizer._prepare_joined puts between texts (U+E000, private use).
_JOINER = "\ue000"


def build(full_tokenizer):
    """The batch machinery for a stock tokenization.FullTokenizer.

    Returns:
      (FastBatchTokenizer, None), or (None, why the batch path must take the exact path):
      tensorflow_text missing, or a vocabulary TensorFlow cannot mirror.
    """
    try:
        fast = FastBatchTokenizer(full_tokenizer)
    except ImportError as error:
        return None, "tensorflow_text is not available (%s)" % error
    if fast.problem is not None:
        return None, fast.problem
    return fast, None


class BatchPath(object):
    """A FullTokenizer's batch calls: on a FastBatchTokenizer built on first use, or per text.

    Without tensorflow_text, with a vocabulary TensorFlow cannot mirror, or while
    TensorFlow builds a graph (building_graph), the rows come from the exact path (same
    output, slower), and a warning says so once. So do they for a tokenizer that is not
    `stock` (a subclass's tokenize, another basic or WordPiece tokenizer): the fast path
    only knows the stock rules.
    """

    def __init__(self):
        self.fast = None  # the FastBatchTokenizer; False once it could not be built
        self.graph_warned = False
        # Threads whose first batch call comes at once wait for one build (not one each).
        self._building = threading.Lock()

    def rows(self, full_tokenizer, chunks, as_tokens, stock):
        """The tokens (or ids) of every text of `chunks` (an iterable of lists of str)."""
        fast = self.fast_tokenizer(full_tokenizer) if stock else None
        if fast is not None:
            return fast.rows(chunks, as_tokens)
        result = []
        for chunk in chunks:
            for text in chunk:
                tokens = full_tokenizer.tokenize(text)
                result.append(tokens if as_tokens else full_tokenizer.convert_tokens_to_ids(tokens))
        return result

    def fast_tokenizer(self, full_tokenizer):
        """The FastBatchTokenizer of a stock `full_tokenizer`, or None if it can't be used."""
        if building_graph():
            if not self.graph_warned:
                self.graph_warned = True
                _LOG.warning(
                    "Batch tokenization falls back to the pure-Python path while TensorFlow "
                    "builds a graph (TF1 graph mode or tf.Graph().as_default()): its results "
                    "cannot be read there.")
            return None
        if self.fast is None:
            with self._building:
                if self.fast is None:
                    fast, reason = build(full_tokenizer)
                    if reason is not None:
                        _LOG.warning("Batch tokenization falls back to the pure-Python path: "
                                     "%s.", reason)
                    self.fast = fast or False  # False: tried, the exact path from now on
        return self.fast or None


# A list of texts of at most this many characters in all is tokenized one text at a time
# on the exact path (tokenize_texts): a batch call costs about 0.2-0.4 ms before its
# first character, the exact path about 2 us a character new to its cache and well under
# a microsecond for a repeated one (a Predictor's call of one sentence: 5-20x faster).
SMALL_BATCH_CHARS = 256


def tokenize_texts(tokenizer, texts):
    """The WordPiece tokens (lists) of each of `texts` (a list of str or bytes): on the
    tokenizer's batch path (tokenize_batch) when it has one and the texts hold more than
    SMALL_BATCH_CHARS characters, else tokenize() text by text. The batch path gives
    tokenize()'s tokens for every text, so the two give the same lists."""
    batch = getattr(tokenizer, "tokenize_batch", None)
    if batch is not None and sum(map(len, texts)) > SMALL_BATCH_CHARS:
        return [list(tokens) for tokens in batch(texts)]
    return [list(tokenizer.tokenize(text)) for text in texts]


def unicode_chunks(texts, chunk_size, to_unicode):
    """Yields lists of at most `chunk_size` texts of the iterable `texts`, as str.

    to_unicode: what makes a str of a text that is not one (tokenization's
    convert_to_unicode: this module never imports tokenization).
    """
    texts = iter(texts)
    while True:
        chunk = list(itertools.islice(texts, chunk_size))
        if not chunk:
            return
        if set(map(type, chunk)) != {str}:  # else no per-text Python call at all
            chunk = [text if isinstance(text, str) else to_unicode(text) for text in chunk]
        yield chunk


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

    def positions(self, text):
        """The index in `text` of every member, in order."""
        return [match.start() for match in self._candidates.finditer(text)
                if self._is_member(match.group())]

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
        for low, high in characters.CJK_RANGES + characters.ASCII_PUNCTUATION_RANGES:
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
        changed = []  # the characters lower() or NFD change (what _Fold looks up)
        for cp in cps[~in_categories("Cn", "Co") & ~dropped].tolist():
            char = chr(cp)
            if char.lower() == char and unicodedata.is_normalized("NFD", char):
                continue
            changed.append(cp)
            seen = _strip_marks(char.lower())
            if any(ord(c) in mismatched_if_created for c in seen):
                risky_when_lowered.add(cp)
            # The reference isolates CJK ideographs before normalizing, TensorFlow
            # after: both must see the same ideographs (all of which lie above U+3400).
            was_cjk = characters.is_chinese_char(cp)
            if not was_cjk and all(c < "\u3400" for c in seen):
                continue
            seen_cjk = [characters.is_chinese_char(ord(c)) for c in seen]
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
        # Characters that take part in NFD's reordering and survive the accent removal.
        apart = cps[~in_categories("Mn") & np.fromiter(
            map(unicodedata.combining, chars), dtype=bool, count=len(chars))]
        self.fold_cased = _Fold(np, unsafe_cased.union(dropped_cps))
        self.fold_lower = _Fold(np, unsafe_lower.union(dropped_cps), changed,
                                cps[in_categories("Mn")], apart)


# What _Fold.flags says of a code point: the tables say what it becomes (_FOLDED); its
# text is prepared alone (_ALONE: FastBatchTokenizer._prepare_unicode); the tables can't
# say, so the whole part is prepared by whole-string calls (_WHOLE_PART).
_FOLDED, _ALONE, _WHOLE_PART = 0, 1, 2
_DELETED = 0xFFFFFFFF  # _Fold.single of a character the accent removal deletes


class _Fold(object):
    """The reference's character-level steps in one casing, applied to a whole part with
    table lookups (numpy gathers, which run without Python's lock: a worker thread's
    TensorFlow call is not kept waiting as it is by a long str method).

    Cased, a character stays itself. Lower-casing, str.lower() runs on the whole part
    (its final-sigma rule looks at neighbours), then each character x of its result
    becomes _strip_marks(x) (`single`), whatever lies around it. That holds for all but
    characters that become more than one (Hangul syllables into jamo) or that NFD's
    reordering could move past a character that stays (a non-zero combining class
    outside Mn, in x or in what it becomes: Mn characters are all deleted, so no other
    reordering shows); a text character that lower-cases to one of those is
    _WHOLE_PART. `attention` (unsafe or deleted characters) are _ALONE.
    """

    def __init__(self, np, attention, changed=None, marks=(), apart=()):
        self._np = np
        flags = np.zeros(0x110000, dtype=np.uint8)
        self.single = None  # what each character of the lower-cased text becomes
        if changed is not None:
            single = np.arange(0x110000, dtype=np.uint32)
            single[np.asarray(marks, dtype=np.int64)] = _DELETED
            whole = set(apart)
            for cp in changed:
                char = chr(cp)
                if unicodedata.is_normalized("NFD", char):
                    continue
                kept = _strip_marks(char)
                if len(kept) > 1 or any(
                        unicodedata.combining(c) and unicodedata.category(c) != "Mn"
                        for c in unicodedata.normalize("NFD", char)):
                    whole.add(cp)
                else:
                    single[cp] = ord(kept) if kept else _DELETED
            whole.update(cp for cp in changed if any(ord(c) in whole for c in chr(cp).lower()))
            flags[np.asarray(sorted(whole), dtype=np.int64)] = _WHOLE_PART
            self.single = single
        flags[np.asarray(sorted(attention), dtype=np.int64)] = _ALONE
        flags[0xD800:0xE000] = _ALONE
        self.flags = flags

    def prepare(self, joined):
        """(the UTF-8 bytes of each text of `joined`, its texts joined by _JOINER, after
        the steps; the indexes of the texts to prepare alone instead), or None where
        the tables cannot say (a _WHOLE_PART character, or a lone surrogate)."""
        np = self._np
        try:
            cps = np.frombuffer(joined.encode("utf-32-le"), dtype="<u4")
        except UnicodeEncodeError:
            return None
        flags = self.flags[cps]
        if self.single is not None and np.any(flags == _WHOLE_PART):
            return None
        alone = []
        hits = np.flatnonzero(flags)
        if hits.size:
            joins = np.flatnonzero(cps == ord(_JOINER))
            alone = sorted(set(np.searchsorted(joins, hits).tolist()))
        if self.single is not None:
            mapped = self.single[np.frombuffer(joined.lower().encode("utf-32-le"), dtype="<u4")]
            joined = mapped[mapped != _DELETED].tobytes().decode("utf-32-le")
        return joined.encode("utf-8").split(_JOINER.encode("utf-8")), alone


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


def building_graph():
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


def tokenize_kernel(model):
    """(the FastWordpieceTokenizer op tokenize() runs, `model`'s buffer), or (None, None)
    on a tensorflow_text whose module or tokenizer has them under other names.

    tokenize() of a 1-D string tensor is that op's ids (cast to token_out_type) and row
    splits wrapped in a RaggedTensor; building those costs about 0.13 ms a call, more
    than the op itself on a short batch."""
    from tensorflow_text.python.ops import (  # pylint: disable=import-outside-toplevel
        fast_wordpiece_tokenizer)
    ops = getattr(fast_wordpiece_tokenizer, "gen_fast_wordpiece_tokenizer", None)
    op = getattr(ops, "fast_wordpiece_tokenize_with_offsets", None)
    buffer = getattr(model, "_model", None)
    if op is None or buffer is None:
        return None, None
    return op, buffer


# Held while the tables are built: threads asking at once wait for the one build (each
# building its own cost 16 threads 10 s a call and 1.4 GiB; issue 91).
_TABLES_LOCK = threading.Lock()


def _character_tables():
    """The _CharacterTables of this process, built once, on first use (about a second)."""
    global _TABLES  # pylint: disable=global-statement
    if _TABLES is None:
        with _TABLES_LOCK:
            if _TABLES is None:
                _TABLES = _CharacterTables(_probe_tf_classes)
    return _TABLES


# The vocabulary models of this process (_vocabulary_model), the last few used first.
# A run builds a new FullTokenizer (and so a new FastBatchTokenizer) every time; its
# FastWordpieceTokenizer and id tables depend only on the vocabulary's entries and ids,
# the unknown token and the word length limit, and cost about half a second on a
# 30,522-entry vocabulary. Keyed on those values themselves (not on a file's name or
# time), a vocabulary that changed in any entry gets a model of its own.
MODELS = collections.OrderedDict()
MODELS_KEPT = 4
_MODELS_LOCK = threading.Lock()


class _VocabularyModel(object):
    """What FastBatchTokenizer reads of one vocabulary: the FastWordpieceTokenizer and the
    entries / ids / piece lengths as numpy arrays (never changed once made); `problem`
    says why TensorFlow cannot mirror the vocabulary (then there is no model)."""

    def __init__(self, vocab, unk_token, max_chars, tables):
        import numpy as np  # pylint: disable=import-outside-toplevel
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        import tensorflow_text as tf_text  # pylint: disable=import-outside-toplevel

        tf_vocab, self.problem = _vocab_for_tf(vocab, unk_token, tables)
        if self.problem:
            return
        # Generous byte limit: it never cuts a word of max_chars characters, and a
        # word longer than it has more than max_chars characters anyway.
        try:
            with tf.init_scope():
                self.model = tf_text.FastWordpieceTokenizer(
                    vocab=tf_vocab, suffix_indicator="##",
                    max_bytes_per_word=4 * max_chars + 4,
                    unknown_token=unk_token, token_out_type=tf.int64)
        except RuntimeError as error:  # raised by its C++ model builder
            self.problem = str(error)
            return
        self.token_array = np.array(tf_vocab, dtype=object)
        self.id_array = np.array(list(range(len(tf_vocab))), dtype=object)
        self.is_suffix = np.array([t.startswith("##") for t in tf_vocab])
        self.piece_chars = np.array([len(t) - 2 * t.startswith("##") for t in tf_vocab])
        for array in (self.token_array, self.id_array, self.is_suffix, self.piece_chars):
            array.flags.writeable = False  # shared by every tokenizer of this vocabulary
        # The fewest pieces a word over max_chars characters can have.
        self.pieces_to_be_long = max_chars // max(1, self.piece_chars.max()) + 1


def _vocabulary_model(vocab, unk_token, max_chars, tables):
    """The _VocabularyModel of `vocab` (token -> id), made once per process for the same
    entries, ids, unknown token and word length limit (see MODELS)."""
    key = (unk_token, max_chars, tuple(vocab.items()))
    with _MODELS_LOCK:
        made = MODELS.get(key)
        if made is None:
            made = MODELS[key] = _VocabularyModel(vocab, unk_token, max_chars, tables)
            while len(MODELS) > MODELS_KEPT:
                MODELS.popitem(last=False)
        MODELS.move_to_end(key)
    return made


class FastBatchTokenizer(object):
    """Batch tokenization on FastWordpieceTokenizer (the module docstring tells how).

    `problem` is None when it is ready, else why it cannot mirror `full_tokenizer`.
    """

    def __init__(self, full_tokenizer):
        import numpy as np  # pylint: disable=import-outside-toplevel
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

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
        self._joinable = not self._attention.search(_JOINER)
        self._fold = tables.fold_lower if self._lower else tables.fold_cased

        made = _vocabulary_model(full_tokenizer.vocab, wordpiece.unk_token, self._max_chars,
                                 tables)
        self.problem = made.problem
        if self.problem:
            return
        self._model = made.model
        self._op, self._model_buffer = tokenize_kernel(self._model)
        self._token_array, self._id_array = made.token_array, made.id_array
        self._is_suffix, self._piece_chars = made.is_suffix, made.piece_chars
        self._pieces_to_be_long = made.pieces_to_be_long

    def rows(self, chunks, as_tokens):
        """The list of tokens (or of ids) of every text of `chunks` (an iterable of
        lists of str), in order.

        The texts are cut into parts of about PART_CHARS characters. TensorFlow's work
        on a part runs on one of two worker threads (its kernel runs without Python's
        lock, and so do the numpy steps next to it) while this thread prepares the next
        parts and turns finished ones into lists: the Python and the C++ halves of the
        work overlap, and two cores share the C++ half. At most _IN_FLIGHT parts wait,
        so the memory in flight stays bounded by the chunk size. A lone small part runs
        here, on this thread, without starting any.
        """
        result, pending, workers = [], collections.deque(), None
        try:
            with _garbage_collection_paused():
                for part in _parts(chunks, PART_CHARS):
                    prepared = self._prepare_part(part)
                    if workers is None and (pending or sum(map(len, part)) >= PART_CHARS):
                        workers = concurrent.futures.ThreadPoolExecutor(
                            2, thread_name_prefix="fast_batch")
                    pending.append((part, prepared, self._submit(workers, prepared)))
                    while len(pending) > _IN_FLIGHT or (pending and pending[0][2][1].done()):
                        result += self._finish(*pending.popleft(), as_tokens)
                while pending:
                    result += self._finish(*pending.popleft(), as_tokens)
        finally:
            if workers is not None:
                workers.shutdown(wait=True, cancel_futures=True)
        return result

    def _submit(self, workers, prepared):
        """Starts tokenizing `prepared` (None for exact-path rows) on `workers`, or at once.

        Returns (the bytes handed over, a future of _tokenize's result).
        """
        payload = prepared
        if None in prepared:
            payload = [b"" if ready is None else ready for ready in prepared]
        if workers is None:
            done = concurrent.futures.Future()
            done.set_result(self._tokenize(payload))
            return payload, done
        return payload, workers.submit(self._tokenize, payload)

    def _tokenize(self, payload):
        """(flat ids, row splits, rows with too long words) for a list of UTF-8 bytes;
        the first two as numpy arrays."""
        tf = self._tf
        with tf.init_scope():  # eager inside a graph being built (see building_graph)
            texts = tf.constant(payload, dtype=tf.string)
            if self._op is not None:  # the kernel tokenize() runs, without its RaggedTensors
                _, ids, splits, _, _ = self._op(input_values=texts, wp_model=self._model_buffer)
                flat, splits = ids.numpy(), splits.numpy()
            else:
                ragged = self._model.tokenize(texts)
                flat, splits = ragged.flat_values.numpy(), ragged.row_splits.numpy()
        return flat, splits, self._rows_with_long_words(flat, splits)

    def _finish(self, texts, prepared, submitted, as_tokens):
        """The rows of one part, once its TensorFlow work is done.

        A part no worker has started yet is tokenized here rather than waited for:
        this thread would only sit idle until a worker got to it.
        """
        payload, future = submitted
        if future.cancel():
            flat, splits, exact_rows = self._tokenize(payload)
        else:
            flat, splits, exact_rows = future.result()
        if None in prepared:
            exact_rows = set(exact_rows).union(
                row for row, ready in enumerate(prepared) if ready is None)
        # Taking from an array of ready Python objects (the tokens, or the ids as ints)
        # shares them instead of making a new int per id: half the time of tolist().
        values = self._np.take(self._token_array if as_tokens else self._id_array,
                               flat).tolist()
        bounds = splits.tolist()
        result = list(map(values.__getitem__, map(slice, bounds, bounds[1:])))
        for row in exact_rows:
            tokens = self._exact.tokenize(texts[row])
            result[row] = tokens if as_tokens else self._exact.convert_tokens_to_ids(tokens)
        return result

    def _prepare_part(self, texts):
        """The bytes FastWordpieceTokenizer should split for each of `texts` (see
        _prepare_unicode), or None for a text that must take the exact path: the ASCII
        texts in one go, the others in another (_prepare_joined)."""
        others = list(itertools.compress(range(len(texts)),
                                         map(operator.not_, map(str.isascii, texts))))
        if not others:
            return self._prepare_ascii(texts)
        # The others join the ASCII batch as empty strings, then get their own result.
        ascii_only = list(texts)
        for row in others:
            ascii_only[row] = ""
        prepared = self._prepare_ascii(ascii_only)
        for row, ready in zip(others, self._prepare_joined([texts[row] for row in others])):
            prepared[row] = ready
        return prepared

    def _prepare_ascii(self, texts):
        """What the reference's character-level steps make of ASCII texts, in three C
        calls for all of them: controls deleted (and lower-cased).

        Joined by U+0080, which Latin-1 encodes as the single byte 0x80: no ASCII text
        contains it and the translation table keeps it, so splitting there gives back
        each text's bytes.
        """
        if not texts:
            return []
        joined = "\x80".join(texts).encode("latin-1")
        return joined.translate(self._ascii_table, self._ascii_dropped).split(b"\x80")

    def _prepare_joined(self, texts):
        """_prepare_unicode of each of `texts` (none all ASCII), for all of them at once.

        The texts are joined by _JOINER, a private-use character: every step keeps it
        and nothing turns into it, and like whitespace it is neither cased,
        case-ignorable nor combining, so str.lower()'s final-sigma rule and NFD's
        reordering stop at it as they stop at the ends of a text. The steps run on the
        joined texts as table lookups (_Fold), or where the tables cannot say, as a few
        whole-string calls (_prepare_whole_strings). Texts that hold a character of the
        attention set (deletions first, or the exact path) are prepared one by one; so
        are all of them if a text holds the joiner itself, or if this process's
        TensorFlow classifies the joiner unlike the reference.
        """
        joined = _JOINER.join(texts)
        if (len(texts) < 2 or not self._joinable
                or joined.count(_JOINER) != len(texts) - 1):
            return list(map(self._prepare_unicode, texts))
        folded = self._fold.prepare(joined)
        prepared, alone = folded or self._prepare_whole_strings(texts, joined)
        for row in alone:
            prepared[row] = self._prepare_unicode(texts[row])
        return prepared

    def _prepare_whole_strings(self, texts, joined):
        """(_prepare_joined's bytes of each text, the texts to prepare alone instead) by
        regular expressions, str.lower() and NFD on `joined` (the texts, joined)."""
        alone = ()
        hits = self._attention.positions(joined)
        if hits:
            starts = list(itertools.accumulate((len(text) + 1 for text in texts[:-1]),
                                               initial=0))
            alone = sorted({bisect.bisect_right(starts, hit) - 1 for hit in hits})
            kept = list(texts)
            for row in alone:
                kept[row] = ""
            joined = _JOINER.join(kept)
        if self._lower:
            joined = self._marks.delete(unicodedata.normalize("NFD", joined.lower()))
        return joined.encode("utf-8").split(_JOINER.encode("utf-8")), alone

    def _prepare_unicode(self, text):
        """Applies the reference's character-level steps to `text` (not all ASCII).

        Returns:
          The UTF-8 bytes FastWordpieceTokenizer should split, or None when the text
          must take the exact path.
        """
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


def _parts(chunks, part_chars):
    """Cuts the lists of str in `chunks` into runs of texts of about `part_chars`
    characters each (a text longer than that is a part of its own)."""
    for chunk in chunks:
        ends = list(itertools.accumulate(map(len, chunk)))
        start = 0
        while start < len(chunk):
            reached = ends[start - 1] if start else 0
            stop = max(bisect.bisect_left(ends, reached + part_chars, lo=start) + 1, start + 1)
            yield chunk[start:stop]
            start = stop


@contextlib.contextmanager
def _garbage_collection_paused():
    """Pauses the cyclic garbage collector while many acyclic lists are allocated.

    Every few hundred new lists Python runs a collection, and some of them walk the
    whole heap, which is large once TensorFlow is loaded: this halved the time to
    build the output lists. Lists of ints or strs form no cycles, so nothing is lost.
    It covers a whole batch call: paused and resumed once per part, the collections
    that follow each resume cost a quarter of the batch path's time on SQuAD dev.
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
