"""The in-graph tokenizer of exported SavedModels: FullTokenizer from core TF ops.

tensorflow_text's BertTokenizer / FastBertTokenizer differ
from the reference (see bert_tf2/text/fast_batch.py: ICU NFKC_Casefold lower-casing, controls
becoming spaces, a byte limit on words, newer Unicode punctuation), and their ops
are not in stock TensorFlow, so a SavedModel using them cannot be run by
saved_model_cli or a stock TF Serving. The reference's BasicTokenizer and
WordpieceTokenizer are therefore rebuilt from core TensorFlow ops over code points,
with character tables computed at export time from the exporting Python's
`unicodedata` (the reference's own source of truth):

  1. UTF-8 decode, invalid bytes dropped (as bytes.decode("utf-8", "ignore"));
  2. NUL, U+FFFD and Cc/Cf characters except tab/LF/CR deleted; whitespace -> space;
  3. CJK ideographs get a space on both sides;
  4. with do_lower_case: str.lower() per character from a table, with Python's
     context rule for capital sigma (final form when preceded by a cased letter and
     not followed by one, case-ignorable characters skipped) evaluated in the graph;
     the canonical decomposition (NFD) from a table, then the canonical reordering
     (stable sort of combining marks by combining class) in the graph; then the
     nonspacing marks (Mn) are deleted;
  5. split at whitespace and around every punctuation character;
  6. WordPiece, greedy longest match first over a lookup table (StaticHashTable from
     the vocabulary asset); words of more than 200 characters are [UNK].

The result equals FullTokenizer's on the golden tokenization set (both casings), on
randomized strings over all of Unicode and on targeted cases for each rule (tests).
Residual differences, both outside what a UTF-8 request can carry or change:
  * the Unicode version: the tables are those of the Python that exported the model
    (unicodedata 14.0.0 for Python 3.11); the reference run under another Python
    version uses that version's tables;
  * a Python str with lone surrogates (not encodable as UTF-8) cannot be sent as
    such; encoded with "surrogatepass" it is invalid UTF-8 and those bytes are
    dropped, exactly as the reference drops them from the same bytes.
tensorflow_text is not needed to export, load or serve a model using it.
"""
import functools
import hashlib
import itertools
import operator
import os
import unicodedata

import numpy as np
import tensorflow as tf
from bert_tf2.export import graph_ops

from bert import tokenization  # ours, whatever tokenization.py a user's folder holds
from bert_tf2.text import characters


# ---------------------------------------------------------------------------
# Character tables (from this Python's unicodedata, as the reference uses it)
# ---------------------------------------------------------------------------

# Property bits of a code point.
_DROP = 1             # deleted by the reference's _clean_text
_SPACE = 2            # str.isspace(): separates words
_CJK = 4              # CJK ideograph: a word of its own
_PUNCT = 8            # the reference's _is_punctuation: a word of its own
_MARK = 16            # category Mn: deleted after NFD when lower-casing
_CASE_IGNORABLE = 32  # skipped by the final-sigma rule of str.lower()
_CASED = 64           # cased and not case-ignorable: decides the final-sigma rule
_MAPPED = 128         # lower() then NFD changes the character
_CCC_SHIFT = 8        # bits 8-15: canonical combining class

_CAPITAL_SIGMA = 0x3A3
_FINAL_SIGMA = 0x3C2
_MAX_MAPPING = 4      # longest NFD(lower(c)) (checked when the tables are built)
_MAX_CODE_POINT = 0x110000

# The reference's character classes, as tokenization.py implements them.
_IS_CHINESE_CHAR = tokenization.is_chinese_char
_IS_PUNCTUATION = tokenization.is_punctuation
_IS_CONTROL = tokenization.is_control


def _sigma_class(char):
    """_CASE_IGNORABLE, _CASED or 0, read off str.lower()'s final-sigma behaviour.

    Python does not expose the Cased / Case_Ignorable properties, but its lower()
    decides the form of a capital sigma from them, so three probes recover what the
    rule needs: whether `char` is skipped, and if not whether it counts as cased.
    """
    after_cased = ("A" + char + "\u03a3").lower()[-1] == "\u03c2"
    alone = (char + "\u03a3").lower()[-1] == "\u03c2"
    before_end = ("A\u03a3" + char).lower()[1] == "\u03c2"
    if after_cased and not alone and before_end:
        return _CASE_IGNORABLE
    if after_cased and alone and not before_end:
        return _CASED
    if not after_cased and not alone and before_end:
        return 0
    raise RuntimeError("unexpected final-sigma behaviour of U+%04X" % ord(char))


def _plain(chars):
    """For each of `chars` (none punctuation, a control, a format character, a Mn mark,
    ASCII or U+FFFD), whether _code would find no bit but _CJK and no mapping: neither a
    space nor combining, unchanged by lower() and by NFD, and to the final-sigma rule
    neither cased nor case-ignorable (_sigma_class's three probes). A bool array, from
    calls over the whole list (no Python code per character)."""
    sigma, final, count = "\u03a3", "\u03c2", len(chars)

    def each(function, *iterables):
        return np.fromiter(map(function, *iterables), bool, count=count)

    def probe(texts, position):  # whether lower() of each text has a final sigma there
        return each(final.__eq__, map(operator.itemgetter(position), map(str.lower, texts)))

    def joined(prefix, suffix):  # prefix + c + suffix for each c
        return map(operator.add, map(operator.add, itertools.repeat(prefix), chars),
                   itertools.repeat(suffix))

    plain = each(str.__eq__, map(str.lower, chars), chars)
    plain &= each(functools.partial(unicodedata.is_normalized, "NFD"), chars)
    plain &= ~each(str.isspace, chars)
    plain &= ~each(unicodedata.combining, chars)
    plain &= ~probe(joined("A", sigma), -1)  # not after_cased
    plain &= ~probe(joined("", sigma), -1)  # not alone
    plain &= probe(joined("A" + sigma, ""), 1)  # before_end
    return plain


class CharacterTables(object):
    """Per-code-point properties and the lower-case + NFD mapping, as numpy arrays.

    Attributes:
      range_starts, range_codes: int32; code point c has the property code
        range_codes[i] for the last i with range_starts[i] <= c.
      map_keys: int32, sorted code points with _MAPPED set.
      map_values: int32 [len(map_keys), _MAX_MAPPING], NFD(lower(c)) padded with -1
        (each character of lower(c) decomposed on its own; the reordering is done
        afterwards over the whole text).
    """

    def __init__(self):
        # Only some 20,000 of the 1,112,064 code points are looked at one by one (_code).
        # An unassigned one (category Cn) has no case, decomposition, combining class,
        # space or punctuation (all of ASCII is assigned): its code is _CJK inside the
        # reference's ideograph blocks, else 0, set for whole ranges. Of the assigned
        # ones, those _plain finds (by calls over the whole list) to have the code 0 and
        # no mapping are skipped too. tests/test_export_fixed_cost.py checks the tables
        # equal those of _code asked for every code point.
        cps = np.arange(_MAX_CODE_POINT, dtype=np.int64)
        cps = cps[(cps < 0xD800) | (cps > 0xDFFF)]  # lone surrogates never come out of UTF-8
        chars = cps.astype("<u4").tobytes().decode("utf-32-le")
        codes = np.zeros(_MAX_CODE_POINT, np.int32)
        for low, high in characters.CJK_RANGES:
            codes[low:high + 1] = _CJK
        codes[0xD800:0xE000] = 0
        # Candidates for code 0 (or _CJK in a CJK block): assigned, not ASCII or U+FFFD
        # (deleted), and of no category that always sets a bit (punctuation, controls,
        # format characters, Mn); _plain tells which of them need not be asked.
        categories = list(map(unicodedata.category, chars))
        names = sorted(set(categories))
        number = {name: index for index, name in enumerate(names)}
        category_ids = np.fromiter(map(number.__getitem__, categories), np.int16,
                                   count=len(categories))
        always = [number[n] for n in names if n[0] == "P" or n in ("Cc", "Cf", "Mn")]
        assigned = category_ids != number.get("Cn", -1)
        asked = assigned & (np.isin(category_ids, always) | (cps < 0x80) | (cps == 0xFFFD))
        # Private-use characters (Co, 137,468 of them) have Unicode's default properties:
        # no case, decomposition, combining class or spacing, none in an ideograph block.
        private = category_ids == number.get("Co", -1)
        maybe = np.flatnonzero(assigned & ~asked & ~private)
        plain = _plain(list(cps[maybe].astype("<u4").tobytes().decode("utf-32-le")))
        asked[maybe[~plain]] = True
        keys, values = [], []
        code_of = self._code
        for index in np.flatnonzero(asked).tolist():
            codes[cps[index]] = code_of(chars[index], categories[index], keys, values)
        starts = np.concatenate([[0], np.flatnonzero(np.diff(codes)) + 1])
        self.range_starts = starts.astype(np.int32)
        self.range_codes = codes[starts]
        self.map_keys = np.array(keys, np.int32)
        self.map_values = np.array(values, np.int32).reshape(-1, _MAX_MAPPING)

    @staticmethod
    def _code(char, cat, keys, values):
        cp = ord(char)
        code = 0
        if _IS_CHINESE_CHAR(cp):
            code |= _CJK
        if _IS_PUNCTUATION(char):
            code |= _PUNCT
        if cat == "Cn":  # unassigned: no case, no decomposition, no class
            return code
        if cp == 0 or cp == 0xFFFD or _IS_CONTROL(char):
            code |= _DROP
        if char.isspace():
            code |= _SPACE
        if cat == "Mn":
            code |= _MARK
        code |= _sigma_class(char)
        code |= unicodedata.combining(char) << _CCC_SHIFT
        mapped = "".join(unicodedata.normalize("NFD", c) for c in char.lower())
        if mapped != char:
            if len(mapped) > _MAX_MAPPING:
                raise RuntimeError("NFD(lower(U+%04X)) has %d characters" % (cp, len(mapped)))
            code |= _MAPPED
            keys.append(cp)
            values.extend([ord(c) for c in mapped] + [-1] * (_MAX_MAPPING - len(mapped)))
        if code & (_SPACE | _CJK) and code & (_CASED | _CASE_IGNORABLE):
            # The sigma rule is evaluated on the text before words are split; that is
            # only right if separators are neither cased nor case-ignorable.
            raise RuntimeError("separator U+%04X takes part in casing" % cp)
        return code


@functools.lru_cache(maxsize=None)
def character_tables():
    """The CharacterTables of this process (built once, in about half a CPU second)."""
    return CharacterTables()


# ---------------------------------------------------------------------------
# Vocabulary asset
# ---------------------------------------------------------------------------

class _VocabLinesInitializer(tf.lookup.TextFileInitializer):
    """A vocabulary asset's lines as line -> line number (to_ids) or line number -> line,
    under a table name made of the lines' digest.

    TensorFlow names a file's table after str(filename), for an Asset its repr: the object's
    memory address. A table made by a process after an earlier tokenizer's Asset was freed
    (its table kept alive by a traced function), or a SavedModel exported at the same address
    by another process and loaded beside it, could then be given the other vocabulary's
    table under that name, silently. The digest names the same contents the same and other
    contents apart, in every process."""

    def __init__(self, asset, digest, to_ids):
        line, number = tf.lookup.TextFileIndex.WHOLE_LINE, tf.lookup.TextFileIndex.LINE_NUMBER
        self._bert_tf2_name = "bert_tf2_vocab_%s_%s" % (digest, "ids" if to_ids else "tokens")
        if to_ids:
            super().__init__(asset, tf.string, line, tf.int64, number)
        else:
            super().__init__(asset, tf.int64, number, tf.string, line)

    @property
    def _shared_name(self):
        return self._bert_tf2_name


def placeholder(index):
    """The asset line of id `index` when it names no token a word can give: " <id>" (its
    leading space: no word equals it)."""
    return " %d" % index


def vocab_asset_lines(vocab, unk_token="[UNK]"):
    """One line per id for the vocabulary asset, with the reference's lookup semantics.

    tokenization.load_vocab strips every line and lets the last of duplicate lines
    win; a lookup table built from the raw file would do neither (and fails on
    duplicate keys). So line i holds the token whose id is i. Ids no token maps to
    (earlier duplicates), and tokens that no word can ever produce (blank, or holding
    whitespace or a deleted character), get a placeholder " <id>": a leading space,
    so no word can equal it.
    """
    if not vocab:
        raise ValueError("the vocabulary is empty")
    tables = character_tables()
    lines = [placeholder(index) for index in range(max(vocab.values()) + 1)]
    # The code points of all tokens looked up at once: the separators and deleted
    # characters each token holds, counted.
    cps = np.array([ord(c) for token in vocab for c in token], np.int64)
    owner = np.repeat(np.arange(len(vocab)), [len(token) for token in vocab])
    codes = tables.range_codes[np.searchsorted(tables.range_starts, cps, side="right") - 1]
    unusable = np.bincount(owner, weights=(codes & (_SPACE | _DROP)) != 0,
                           minlength=len(vocab))
    for (token, index), bad in zip(vocab.items(), unusable.tolist()):
        if token and not bad:
            lines[index] = token
    if unk_token not in vocab:
        raise ValueError("the unknown token %r is not in the vocabulary" % unk_token)
    return lines


# ---------------------------------------------------------------------------
# The in-graph tokenizer
# ---------------------------------------------------------------------------

def checked_utf8(texts, name):
    """`texts` (a string tensor of any shape), run only when every element is valid UTF-8:
    else the request fails with one line naming the input `name` and the rows.

    The tokenizer drops invalid bytes (as the reference's convert_to_unicode); a
    signature refuses them instead, since an answer's character offsets (a tagger's
    word_start / word_end, entity ranges) would index a string the client never sent,
    and the runners refuse such bytes in their files too."""
    flat = tf.reshape(texts, [-1])
    decoded = tf.strings.unicode_decode(flat, "UTF-8", errors="ignore")
    valid = tf.equal(tf.strings.unicode_encode(decoded, "UTF-8"), flat)
    bad = tf.reshape(tf.where(tf.logical_not(valid)), [-1])
    check = tf.debugging.Assert(
        tf.reduce_all(valid),
        ["input %s holds bytes that are not UTF-8 (refused, not dropped: the answer's "
         "offsets would not index the text sent); element(s), in row order:" % name,
         bad], summarize=10)
    with tf.control_dependencies([check]):
        return tf.identity(texts)


class Untracked(object):
    """Attributes kept out of a SavedModel's object graph (tf.Module tracks its own).

    Used for the Keras model, whose variables are tracked as a plain list (tf_keras'
    own SavedModel tracing of the model is not needed), and for helper functions.
    """

    def __init__(self, **attributes):
        self.__dict__.update(attributes)


def _shifted_right(values, first):
    """[first, values[0], ..., values[n-2]] for a 1-D tensor."""
    return tf.concat([tf.reshape(tf.cast(first, values.dtype), [1]), values[:-1]], axis=0)


def _walk_matches(best, width, searched_lengths):
    """Walks all searched words along their longest matches at once (one step per piece).

    Returns (failed [num_searched] bool: a position with no match was reached, marks
    [num_searched, width] bool: where the pieces start).
    """
    num_searched = tf.size(searched_lengths, out_type=tf.int64)
    rows = tf.range(num_searched)

    def step(position, active, failed, marks):
        here = tf.stack([rows, tf.minimum(position, width - 1)], axis=1)
        length = tf.where(active, tf.gather_nd(best, here), tf.zeros_like(position))
        matched = active & (length > 0)
        marks = tf.tensor_scatter_nd_update(
            marks, graph_ops.boolean_mask(here, matched),
            tf.ones([tf.reduce_sum(tf.cast(matched, tf.int32))], tf.bool))
        position = position + length
        return (position, matched & (position < searched_lengths),
                failed | (active & tf.logical_not(matched)), marks)

    _, _, failed, marks = tf.while_loop(
        lambda position, active, failed, marks: tf.reduce_any(active), step,
        (tf.zeros_like(searched_lengths), searched_lengths > 0,
         tf.zeros_like(searched_lengths, tf.bool),
         tf.zeros(tf.stack([num_searched, width]), tf.bool)))
    return failed, marks


class InGraphTokenizer(tf.Module):
    """FullTokenizer as TensorFlow ops: raw UTF-8 strings -> WordPiece ids.

    `tokenize(texts)` returns int32 ids as a RaggedTensor [B, (tokens)], equal to
    `FullTokenizer(vocab_file, do_lower_case).convert_tokens_to_ids(tokenize(t))`
    for every text t. `tokenize_with_spans` adds, for every token, the range of
    characters of its text that it came from. See the module docstring for how.

    The vocabulary is written to `asset_dir/vocab.txt` (see vocab_asset_lines) and
    held as a tf.saved_model.Asset, so a SavedModel holding this module carries it.
    """

    def __init__(self, vocab_file, do_lower_case, asset_dir, unk_token="[UNK]",
                 max_input_chars_per_word=200, name=None):
        super().__init__(name=name)
        vocab = tokenization.load_vocab(vocab_file)
        missing = [t for t in (unk_token, "[CLS]", "[SEP]") if t not in vocab]
        if missing:
            raise ValueError("--vocab_file=%s has no %s token" % (vocab_file,
                                                                " / ".join(missing)))
        lines = vocab_asset_lines(vocab, unk_token)
        self.do_lower_case = bool(do_lower_case)
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word
        self.vocab_size = len(lines)
        self.cls_id = vocab["[CLS]"]
        self.sep_id = vocab["[SEP]"]
        # The ids of the asset's lines that no token has (earlier lines of a duplicated
        # token): a fill-mask answer of one has no token (masked_lm.unnamed_ids).
        named = np.zeros([len(lines)], bool)
        named[list(vocab.values())] = True
        # The tokens no word can give (blank, or holding whitespace or a deleted
        # character): a placeholder in the asset, their own names in fill-mask answers.
        renamed = {index: token for token, index in vocab.items()
                   if lines[index] == placeholder(index)}
        self._ids = Untracked(unnamed=np.flatnonzero(~named).astype(np.int32),
                              renamed=renamed)

        path = os.path.join(asset_dir, "vocab.txt")
        text = "".join(line + "\n" for line in lines)
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        self.vocab_file = tf.saved_model.Asset(path)
        self._vocab_digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        self.vocab_table = tf.lookup.StaticHashTable(
            _VocabLinesInitializer(self.vocab_file, self._vocab_digest, to_ids=True),
            default_value=-1)
        self.unk_id = vocab[unk_token]
        # No vocabulary entry is longer than this (characters, without "##").
        self.max_piece_chars = max(1, max(len(t[2:] if t.startswith("##") else t)
                                          for t in lines))

        # Each traced once (on first use); every signature calls them, so the
        # SavedModel holds one copy of each. Not tracked: only what is used is saved.
        spec = [tf.TensorSpec([None], tf.string)]
        self._functions = Untracked(
            tokenize=tf.function(self._tokenize_flat, input_signature=spec, autograph=False),
            spans=tf.function(self._spans_flat, input_signature=spec, autograph=False))

        # Saved once as variables (constants would be copied into every signature).
        tables = character_tables()
        self.range_starts = tf.Variable(tables.range_starts, trainable=False,
                                        name="range_starts")
        self.range_codes = tf.Variable(tables.range_codes, trainable=False, name="range_codes")
        self.map_keys = tf.Variable(tables.map_keys, trainable=False, name="map_keys")
        self.map_values = tf.Variable(tables.map_values, trainable=False, name="map_values")

    def token_table(self):
        """A new table of id -> the vocabulary asset's line of that id (its WordPiece
        string; "" past the end), named by the vocabulary's digest as vocab_table is."""
        return tf.lookup.StaticHashTable(
            _VocabLinesInitializer(self.vocab_file, self._vocab_digest, to_ids=False),
            default_value="")

    def unnamed_ids(self):
        """int32 ids below vocab_size that no vocabulary entry has (sorted)."""
        return self._ids.unnamed

    def renamed_tokens(self):
        """{id: token} of the vocabulary's tokens whose asset line is a placeholder (no
        word can give them), by id."""
        return dict(sorted(self._ids.renamed.items()))

    # -- character level ----------------------------------------------------

    def _codes(self, cps):
        index = tf.searchsorted(self.range_starts.read_value(), cps, side="right") - 1
        return tf.gather(self.range_codes, index)

    @staticmethod
    def _has(codes, bit):
        return tf.not_equal(tf.bitwise.bitwise_and(codes, bit), 0)

    def _final_sigma(self, cps, rows, codes):
        """True where a capital sigma is lower-cased to the final form (U+03C2).

        Python's rule: the nearest character before it that is not case-ignorable
        exists and is cased, and the nearest such character after it, if any, is not
        cased. Rows (texts) are kept apart; separators are neither cased nor
        case-ignorable, so they end the search as word boundaries do in the reference.
        """
        n = tf.size(cps)
        anchors = tf.logical_not(self._has(codes, _CASE_IGNORABLE))
        cased = self._has(codes, _CASED)
        anchor_positions = tf.cast(tf.where(anchors)[:, 0], tf.int32)
        # With sentinels -1 before and n after, entry k + 1 is the k-th anchor.
        padded = tf.concat([[-1], anchor_positions, [n]], axis=0)
        inclusive = tf.cumsum(tf.cast(anchors, tf.int32))
        exclusive = inclusive - tf.cast(anchors, tf.int32)
        before = tf.gather(padded, exclusive)
        after = tf.gather(padded, inclusive + 1)
        safe_before = tf.clip_by_value(before, 0, tf.maximum(n - 1, 0))
        safe_after = tf.clip_by_value(after, 0, tf.maximum(n - 1, 0))
        cased_before = ((before >= 0) & tf.equal(tf.gather(rows, safe_before), rows)
                        & tf.gather(cased, safe_before))
        cased_after = ((after < n) & tf.equal(tf.gather(rows, safe_after), rows)
                       & tf.gather(cased, safe_after))
        return tf.equal(cps, _CAPITAL_SIGMA) & cased_before & tf.logical_not(cased_after)

    def _normalize(self, texts):
        """BasicTokenizer's character steps on a batch of texts.

        Returns:
          (decoded, cps, rows, sources, codes): the decoded input (RaggedTensor of
          code points [B, (n)]), then flat 1-D tensors over the normalized characters
          of all texts, in order: code point, text index (int64), index in
          decoded.flat_values of the character it came from, property code.
          Separators are all U+0020 and still present.
        """
        decoded = tf.strings.unicode_decode(texts, "UTF-8", errors="ignore")
        cps = decoded.flat_values
        rows = graph_ops.value_rowids(decoded)
        sources = tf.range(tf.size(cps, out_type=tf.int64))
        codes = self._codes(cps)
        keep = tf.logical_not(self._has(codes, _DROP))
        cps, rows, sources, codes = [graph_ops.boolean_mask(x, keep)
                                     for x in (cps, rows, sources, codes)]

        is_space = self._has(codes, _SPACE)
        single = tf.where(is_space, tf.constant(32, tf.int32), cps)[:, tf.newaxis]
        if self.do_lower_case:
            padding = tf.fill([tf.size(cps), _MAX_MAPPING - 1], -1)
            unchanged = tf.concat([single, padding], axis=1)
            index = tf.searchsorted(self.map_keys.read_value(), cps, side="left")
            index = tf.minimum(index, tf.shape(self.map_keys)[0] - 1)
            mapped = tf.gather(self.map_values, index)
            is_mapped = self._has(codes, _MAPPED) & tf.logical_not(is_space)
            replacement = tf.where(is_mapped[:, tf.newaxis], mapped, unchanged)
            final = tf.concat([tf.fill([tf.size(cps), 1], _FINAL_SIGMA), padding], axis=1)
            replacement = tf.where(self._final_sigma(cps, rows, codes)[:, tf.newaxis],
                                   final, replacement)
        else:
            replacement = single
        cjk_space = tf.where(self._has(codes, _CJK), 32, -1)[:, tf.newaxis]
        expanded = tf.concat([cjk_space, replacement, cjk_space], axis=1)
        positions = tf.where(expanded >= 0)
        origin = positions[:, 0]
        cps = tf.gather_nd(expanded, positions)
        rows = tf.gather(rows, origin)
        sources = tf.gather(sources, origin)
        codes = self._codes(cps)

        if self.do_lower_case:
            # Canonical reordering of NFD: within each run of characters with a
            # non-zero combining class, a stable sort by that class. A character of
            # class 0 (or the start of a text) starts a new group; groups stay in order.
            ccc = tf.bitwise.right_shift(codes, _CCC_SHIFT)
            starts_group = tf.equal(ccc, 0) | tf.not_equal(rows, _shifted_right(rows, -1))
            group = tf.cumsum(tf.cast(starts_group, tf.int64))
            order = tf.argsort(group * 256 + tf.cast(ccc, tf.int64), stable=True)
            cps, rows, sources, codes = [tf.gather(x, order)
                                         for x in (cps, rows, sources, codes)]
            keep = tf.logical_not(self._has(codes, _MARK))
            cps, rows, sources, codes = [graph_ops.boolean_mask(x, keep)
                                         for x in (cps, rows, sources, codes)]
        return decoded, cps, rows, sources, codes

    # -- words and pieces ---------------------------------------------------

    def _words(self, texts):
        """BasicTokenizer on a batch: the words and where their characters came from."""
        texts = tf.convert_to_tensor(texts, tf.string)
        num_texts = tf.shape(texts, out_type=tf.int64)[0]
        decoded, cps, rows, sources, codes = self._normalize(texts)
        is_space = self._has(codes, _SPACE)
        is_punct = self._has(codes, _PUNCT)
        breaks = is_space | is_punct
        new_row = tf.not_equal(rows, _shifted_right(rows, -1))
        starts_word = tf.logical_not(is_space) & (
            is_punct | _shifted_right(breaks, True) | new_row)
        word_of_char = tf.cumsum(tf.cast(starts_word, tf.int64)) - 1
        in_word = tf.logical_not(is_space)
        # Where each word character sits in the normalized stream (for spans).
        stream_index = tf.range(tf.size(cps, out_type=tf.int64))
        word_chars = graph_ops.boolean_mask(cps, in_word)
        word_char_stream = graph_ops.boolean_mask(stream_index, in_word)
        num_words = tf.reduce_sum(tf.cast(starts_word, tf.int64))
        words = tf.RaggedTensor.from_value_rowids(
            word_chars, graph_ops.boolean_mask(word_of_char, in_word), nrows=num_words,
            validate=False)
        return {
            "num_texts": num_texts, "decoded": decoded, "rows": rows, "sources": sources,
            "words": words, "word_rows": graph_ops.boolean_mask(rows, starts_word),
            "word_strings": tf.strings.unicode_encode(words, "UTF-8"),
            "word_char_stream": word_char_stream,
        }

    def basic_tokenize(self, texts):
        """BasicTokenizer(do_lower_case).tokenize of every text: RaggedTensor [B, (words)]."""
        w = self._words(texts)
        return tf.RaggedTensor.from_value_rowids(w["word_strings"], w["word_rows"],
                                                 nrows=w["num_texts"], validate=False)

    def _wordpiece(self, words, word_strings):
        """The reference's WordpieceTokenizer on every word, in core TensorFlow ops.

        Greedy longest match first: from position 0, the longest vocabulary entry
        that matches (looked up with a "##" prefix after position 0) is taken and the
        search goes on after it; a word with a position where nothing matches, or of
        more than max_input_chars_per_word characters, is one unknown token. Words
        found whole in the vocabulary (most of them) take one lookup; the others look
        up every substring of at most `max_piece_chars` characters once, then a loop
        walks all words along their longest matches together (one step per piece).

        Args:
          words: RaggedTensor [W, (characters)] of code points.
          word_strings: [W] the same words as UTF-8.

        Returns:
          (ids int32, word int64, start int64, length int64), each [P]: every piece in
          order, with its word and the characters of the word it covers.
        """
        lengths = words.row_lengths()
        num_words = tf.size(lengths, out_type=tf.int64)
        whole_ids = self.vocab_table.lookup(word_strings)
        too_long = lengths > self.max_input_chars_per_word
        whole = (whole_ids >= 0) & tf.logical_not(too_long)
        searched = tf.where(tf.logical_not(whole | too_long))[:, 0]
        searched_lengths = tf.gather(lengths, searched)

        best, width = self._longest_matches(word_strings, searched, searched_lengths)
        failed, marks = _walk_matches(best, width, searched_lengths)

        split_pieces = tf.where(marks & tf.logical_not(failed)[:, tf.newaxis])
        split_word = tf.gather(searched, split_pieces[:, 0])
        split_start = split_pieces[:, 1]
        split_length = tf.gather_nd(best, split_pieces)
        split_ids = self.vocab_table.lookup(
            self._substrings(word_strings, split_word, split_start, split_length))
        # Words that are one piece: found whole, too long or failed ([UNK]).
        failed_words = tf.scatter_nd(searched[:, tf.newaxis], failed, [num_words])
        single = whole | too_long | failed_words
        single_word = tf.where(single)[:, 0]
        single_ids = tf.where(tf.gather(whole, single_word), tf.gather(whole_ids, single_word),
                              tf.constant(self.unk_id, tf.int64))

        word = tf.concat([single_word, split_word], axis=0)
        start = tf.concat([tf.zeros_like(single_word), split_start], axis=0)
        order = tf.argsort(word * (self.max_input_chars_per_word + 1) + start, stable=True)
        ids = tf.gather(tf.concat([single_ids, split_ids], axis=0), order)
        length = tf.concat([tf.gather(lengths, single_word), split_length], axis=0)
        return (tf.cast(ids, tf.int32), tf.gather(word, order), tf.gather(start, order),
                tf.gather(length, order))

    def _longest_matches(self, word_strings, searched, searched_lengths):
        """best[w, s]: the length of the longest vocabulary piece at character s of
        searched word w (0: none), and the width of that [num_searched, width] table."""
        num_searched = tf.size(searched, out_type=tf.int64)
        # Every (word, start) pair, then every (word, start, length) candidate.
        pair_word = graph_ops.repeat(tf.range(num_searched), searched_lengths)
        pair_start = tf.ragged.range(searched_lengths).flat_values
        longest = tf.minimum(tf.constant(self.max_piece_chars, tf.int64),
                             tf.gather(searched_lengths, pair_word) - pair_start)
        num_pairs = tf.size(pair_word, out_type=tf.int64)
        candidate_pair = graph_ops.repeat(tf.range(num_pairs), longest)
        candidate_length = tf.ragged.range(longest).flat_values + 1
        candidate_start = tf.gather(pair_start, candidate_pair)
        candidate_word = tf.gather(searched, tf.gather(pair_word, candidate_pair))
        found = self._in_vocab(word_strings, candidate_word, candidate_start,
                               candidate_length)
        best = tf.math.unsorted_segment_max(
            tf.where(found, candidate_length, tf.zeros_like(candidate_length)),
            candidate_pair, num_segments=num_pairs)
        width = tf.reduce_max(tf.concat([searched_lengths, [1]], axis=0))
        best = tf.scatter_nd(tf.stack([pair_word, pair_start], axis=1), best,
                             tf.stack([num_searched, width]))
        return best, width

    @staticmethod
    def _substrings(word_strings, word, start, length):
        """word_strings[word][start:start + length] (characters), "##" after position 0."""
        pieces = tf.strings.substr(tf.gather(word_strings, word), start, length,
                                   unit="UTF8_CHAR")
        prefix = tf.where(start > 0, tf.constant("##"), tf.constant(""))
        return tf.strings.join([prefix, pieces])

    def _in_vocab(self, word_strings, word, start, length):
        ids = self.vocab_table.lookup(self._substrings(word_strings, word, start, length))
        return ids >= 0

    def _pieces(self, texts):
        """Everything tokenize and tokenize_with_spans need, as a dict of tensors."""
        p = self._words(texts)
        piece_ids, piece_word, piece_start, piece_length = self._wordpiece(
            p["words"], p["word_strings"])
        p.update(
            ids=tf.RaggedTensor.from_value_rowids(
                piece_ids, tf.gather(p["word_rows"], piece_word), nrows=p["num_texts"],
                validate=False),
            piece_word=piece_word, piece_start=piece_start, piece_length=piece_length)
        return p

    def tokenize(self, texts):
        """int32 WordPiece ids of every text: RaggedTensor [B, (tokens)]."""
        values, splits = self._functions.tokenize(tf.convert_to_tensor(texts, tf.string))
        return tf.RaggedTensor.from_row_splits(values, splits, validate=False)

    def tokenize_with_spans(self, texts):
        """(ids, span_starts, span_limits), each a RaggedTensor [B, (tokens)].

        A token's span is the range of characters (code point indexes into its text,
        after dropping invalid UTF-8; int64) it was made from: from the character that
        produced its first letter to just before the next character that survives
        normalization after its last letter (so accents and deleted characters that
        follow stay with it). A word of several pieces is cut at the pieces'
        lengths; an [UNK] token covers its whole word.
        """
        values, splits, starts, limits = self._functions.spans(
            tf.convert_to_tensor(texts, tf.string))
        ids = tf.RaggedTensor.from_row_splits(values, splits, validate=False)
        return ids, ids.with_flat_values(starts), ids.with_flat_values(limits)

    def _tokenize_flat(self, texts):
        ids = self._pieces(texts)["ids"]
        return ids.flat_values, ids.row_splits

    def _spans_flat(self, texts):
        p = self._pieces(texts)
        first_char = tf.gather(p["words"].row_starts(), p["piece_word"]) + p["piece_start"]
        last_char = first_char + p["piece_length"] - 1
        stream = p["word_char_stream"]
        sources, rows = p["sources"], p["rows"]
        stream_first = tf.gather(stream, first_char)
        stream_last = tf.gather(stream, last_char)
        span_starts = tf.gather(sources, stream_first)
        # The next surviving character of the same text, else the end of the text.
        decoded = p["decoded"]
        text_of_piece = tf.gather(rows, stream_last)
        text_limit = tf.gather(decoded.row_limits(), text_of_piece)
        n = tf.size(sources, out_type=tf.int64)
        following = tf.minimum(stream_last + 1, tf.maximum(n - 1, 0))
        has_following = (stream_last + 1 < n) & tf.equal(tf.gather(rows, following),
                                                          text_of_piece)
        limits = tf.where(has_following, tf.gather(sources, following), text_limit)
        limits = tf.maximum(limits, tf.gather(sources, stream_last) + 1)
        row_starts = tf.gather(decoded.row_starts(), text_of_piece)
        ids = p["ids"]
        return ids.flat_values, ids.row_splits, span_starts - row_starts, limits - row_starts
