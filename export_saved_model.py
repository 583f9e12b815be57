"""Exports a BERT checkpoint as a SavedModel that serves raw text.

    python export_saved_model.py --model_type=classifier --task_name=MRPC \
      --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --init_checkpoint=/tmp/mrpc_output --vocab_file=$BERT_BASE_DIR/vocab.txt \
      --do_lower_case=True --max_seq_length=128 --export_dir=/tmp/mrpc_saved_model

The exported signatures take strings. Tokenization runs inside the graph and gives
exactly the ids of `tokenization.FullTokenizer` (see "In-graph tokenization" below);
packing is that of the reference's feature conversion. The vocabulary travels as the
SavedModel asset `assets/vocab.txt`, so the directory is self-contained.

Signatures (B = batch, S = --max_seq_length, H = hidden size, L = layers):

  every model type
    serving_ids(input_ids, input_mask, segment_ids: int32 [B, S]) -> the model outputs
        below, for features made elsewhere (the reference's input_fn format);
    tokenize(text: string [B]) -> token_ids int32 [B, T] (-1 after the end of a row),
        num_tokens int32 [B]: the WordPiece ids of FullTokenizer.tokenize(text).

  --model_type=encoder, classifier
    serving_default(text_a, text_b: string [B]): [CLS] A [SEP] B [SEP]; an empty text_b
        (or one that tokenizes to nothing) means a single text: [CLS] A [SEP], exactly
        as the reference's `if example.text_b` / `if tokens_b` do;
    serving_text_a(text_a: string [B]): single texts only, for callers (such as
        saved_model_cli) that cannot leave an input out. TensorFlow signatures have no
        optional inputs, hence two signatures.

  encoder outputs: pooled_output [B, H], sequence_output [B, S, H], encoder_layers
    [B, L, S, H] (batch first, so that TF Serving's row format accepts it; layer l is
    encoder_layers[:, l]), input_ids, input_mask, segment_ids [B, S].
  classifier outputs: probabilities [B, num_labels] (softmax of the logits, what
    run_classifier writes to test_results.tsv), logits, predicted_label [B] (the name
    of the most probable label) and labels [B, num_labels] (the task's label names, in
    output order, repeated for every row). A regression task (sts-b) outputs
    predictions [B] and logits instead.

  --model_type=squad (one window: the reference's first window only)
    serving_default(question, context: string [B]) -> start_logits, end_logits [B, S],
        input_ids, input_mask, segment_ids [B, S];
    answer(question, context: string [B]) -> answer [B] string, score [B]
        (start + end logit), start_position, end_position [B] (token positions in the
        input; -1 when there is no valid span), null_score [B] (logits of [CLS]).

From Python, the restored object has each signature as a method too:
`m = tf.saved_model.load(dir); m.serving_default(text_a, text_b)`,
`m.serving_text_a(text_a)`, `m.answer(question, context)`, ... (positional
arguments, no signature wrapper).

SQuAD in one window. The input is [CLS] question [SEP] context [SEP] with the
question cut to --max_query_length tokens and the context to the room left
(S - len(question) - 3 tokens), which is the reference's first document window.
Contexts longer than that need run_squad.py's sliding windows (--doc_stride); the
rest of such a context is not seen. `answer` applies the reference's n-best rules to
that window: the --n_best_size best start and end positions (ties: lower position
first), pairs with both ends inside the context, start <= end and at most
--max_answer_length tokens, the best sum of logits (ties: the reference's order).
The answer text is cut from the original context: from the first character of the
start piece to the character before the next one that survives normalization after
the end piece, runs of the reference's whitespace (space, tab, CR, LF, U+202F)
squeezed to one space and the ends stripped. This is run_squad's answer whenever its
get_final_text succeeds; where that fails (the original words do not align with
their normalized form) run_squad returns the whole original words, this the
covered characters only.

In-graph tokenization. tensorflow_text's BertTokenizer / FastBertTokenizer differ
from the reference (see tokenization.py: ICU NFKC_Casefold lower-casing, controls
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
tensorflow_text is not needed to export, load or serve the model.
"""
import startup  # first, before tensorflow: a quiet C++ start-up (startup.py)
import functools
import json
import os
import tempfile
import unicodedata

from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf

import checkpoints
import flags_common
import modeling
import tokenization

MODEL_TYPES = ("encoder", "classifier", "squad")

_REQUIRED_FLAGS = ("model_type", "bert_config_file", "init_checkpoint", "vocab_file",
                   "export_dir")


# ---------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------

def define_flags(fv):
    """Registers the exporter's flags on the FlagValues `fv`."""
    flags.DEFINE_enum("model_type", None, list(MODEL_TYPES),
                      "What to export: the bare encoder, a run_classifier model or a "
                      "run_squad model.", flag_values=fv)
    flags.DEFINE_string("bert_config_file", None,
                        "bert_config.json of the model (its architecture).", flag_values=fv)
    flags.DEFINE_string(
        "init_checkpoint", None,
        "Checkpoint to export (TF1 or TF2; a file prefix or a directory such as a "
        "run_classifier --output_dir, whose latest checkpoint is used).", flag_values=fv)
    flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary of the model.",
                        flag_values=fv)
    flags.DEFINE_bool(
        "do_lower_case", True,
        "Lower-case (and strip accents from) the input: True for uncased models, "
        "False for cased ones.", flag_values=fv)
    flags.DEFINE_integer("max_seq_length", 128,
                         "Length of every model input in WordPiece tokens (longer inputs "
                         "are truncated, shorter ones zero-padded).", flag_values=fv)
    flags.DEFINE_string("export_dir", None,
                        "Directory the SavedModel is written to (replaced if it exists).",
                        flag_values=fv)
    flags.DEFINE_string("task_name", None,
                        "--model_type=classifier: the run_classifier task, which fixes the "
                        "number of labels and their names.", flag_values=fv)
    flags.DEFINE_string("xnli_language", "zh", "Language of --task_name=xnli.",
                        flag_values=fv)
    flags.DEFINE_integer("max_query_length", 64,
                         "--model_type=squad: questions are cut to this many tokens.",
                         flag_values=fv)
    flags.DEFINE_integer("max_answer_length", 30,
                         "--model_type=squad: longest answer, in tokens.", flag_values=fv)
    flags.DEFINE_integer("n_best_size", 20,
                         "--model_type=squad: how many best start and end positions the "
                         "answer is chosen from.", flag_values=fv)


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
_IS_CHINESE_CHAR = tokenization._is_chinese_char  # pylint: disable=protected-access
_IS_PUNCTUATION = tokenization._is_punctuation  # pylint: disable=protected-access
_IS_CONTROL = tokenization._is_control  # pylint: disable=protected-access


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
        category = unicodedata.category
        starts, codes = [], []
        keys, values = [], []
        previous = None
        for cp in range(_MAX_CODE_POINT):
            code = 0
            if not 0xD800 <= cp <= 0xDFFF:  # lone surrogates never come out of UTF-8
                code = self._code(chr(cp), category(chr(cp)), keys, values)
            if code != previous:
                starts.append(cp)
                codes.append(code)
                previous = code
        self.range_starts = np.array(starts, np.int32)
        self.range_codes = np.array(codes, np.int32)
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
    """The CharacterTables of this process (about two seconds to build)."""
    return CharacterTables()


# ---------------------------------------------------------------------------
# Vocabulary asset
# ---------------------------------------------------------------------------

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
    lines = [" %d" % index for index in range(max(vocab.values()) + 1)]
    for token, index in vocab.items():
        codes = tables.range_codes[np.searchsorted(
            tables.range_starts, [ord(c) for c in token], side="right") - 1]
        if token and not np.any(codes & (_SPACE | _DROP)):
            lines[index] = token
    if unk_token not in vocab:
        raise ValueError("the unknown token %r is not in the vocabulary" % unk_token)
    return lines


# ---------------------------------------------------------------------------
# The in-graph tokenizer
# ---------------------------------------------------------------------------

class _Hidden(object):
    """Attributes kept out of the SavedModel's object graph (tf.Module tracks its own).

    Used for the Keras model, whose variables are tracked as a plain list (tf_keras'
    own SavedModel tracing of the model is not needed), and for helper functions.
    """

    def __init__(self, **attributes):
        self.__dict__.update(attributes)


def _shifted_right(values, first):
    """[first, values[0], ..., values[n-2]] for a 1-D tensor."""
    return tf.concat([tf.reshape(tf.cast(first, values.dtype), [1]), values[:-1]], axis=0)


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
        lines = vocab_asset_lines(vocab, unk_token)
        for special in ("[CLS]", "[SEP]"):
            if special not in vocab:
                raise ValueError("the vocabulary %s has no %s token" % (vocab_file, special))
        self.do_lower_case = bool(do_lower_case)
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word
        self.vocab_size = len(lines)
        self.cls_id = vocab["[CLS]"]
        self.sep_id = vocab["[SEP]"]

        path = os.path.join(asset_dir, "vocab.txt")
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write("".join(line + "\n" for line in lines))
        self.vocab_file = tf.saved_model.Asset(path)
        initializer = tf.lookup.TextFileInitializer(
            self.vocab_file, tf.string, tf.lookup.TextFileIndex.WHOLE_LINE,
            tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER)
        self.vocab_table = tf.lookup.StaticHashTable(initializer, default_value=-1)
        self.unk_id = vocab[unk_token]
        # No vocabulary entry is longer than this (characters, without "##").
        self.max_piece_chars = max(1, max(len(t[2:] if t.startswith("##") else t)
                                          for t in lines))

        # Each traced once (on first use); every signature calls them, so the
        # SavedModel holds one copy of each. Not tracked: only what is used is saved.
        spec = [tf.TensorSpec([None], tf.string)]
        self._functions = _Hidden(
            tokenize=tf.function(self._tokenize_flat, input_signature=spec, autograph=False),
            spans=tf.function(self._spans_flat, input_signature=spec, autograph=False))

        # Saved once as variables (constants would be copied into every signature).
        tables = character_tables()
        self.range_starts = tf.Variable(tables.range_starts, trainable=False,
                                        name="range_starts")
        self.range_codes = tf.Variable(tables.range_codes, trainable=False, name="range_codes")
        self.map_keys = tf.Variable(tables.map_keys, trainable=False, name="map_keys")
        self.map_values = tf.Variable(tables.map_values, trainable=False, name="map_values")

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
        rows = decoded.value_rowids()
        sources = tf.range(tf.size(cps, out_type=tf.int64))
        codes = self._codes(cps)
        keep = tf.logical_not(self._has(codes, _DROP))
        cps, rows, sources, codes = [tf.boolean_mask(x, keep)
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
            cps, rows, sources, codes = [tf.boolean_mask(x, keep)
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
        word_chars = tf.boolean_mask(cps, in_word)
        word_char_stream = tf.boolean_mask(stream_index, in_word)
        num_words = tf.reduce_sum(tf.cast(starts_word, tf.int64))
        words = tf.RaggedTensor.from_value_rowids(
            word_chars, tf.boolean_mask(word_of_char, in_word), nrows=num_words,
            validate=False)
        return {
            "num_texts": num_texts, "decoded": decoded, "rows": rows, "sources": sources,
            "words": words, "word_rows": tf.boolean_mask(rows, starts_word),
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
        num_searched = tf.size(searched, out_type=tf.int64)

        # Every (word, start) pair, then every (word, start, length) candidate.
        pair_word = tf.repeat(tf.range(num_searched), searched_lengths)
        pair_start = tf.ragged.range(searched_lengths).flat_values
        longest = tf.minimum(tf.constant(self.max_piece_chars, tf.int64),
                             tf.gather(searched_lengths, pair_word) - pair_start)
        num_pairs = tf.size(pair_word, out_type=tf.int64)
        candidate_pair = tf.repeat(tf.range(num_pairs), longest)
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

        # Walk all searched words at once: one step per piece.
        rows = tf.range(num_searched)

        def step(position, active, failed, marks):
            here = tf.stack([rows, tf.minimum(position, width - 1)], axis=1)
            length = tf.where(active, tf.gather_nd(best, here), tf.zeros_like(position))
            matched = active & (length > 0)
            marks = tf.tensor_scatter_nd_update(
                marks, tf.boolean_mask(here, matched),
                tf.ones([tf.reduce_sum(tf.cast(matched, tf.int32))], tf.bool))
            position = position + length
            return (position, matched & (position < searched_lengths),
                    failed | (active & tf.logical_not(matched)), marks)

        _, _, failed, marks = tf.while_loop(
            lambda position, active, failed, marks: tf.reduce_any(active), step,
            (tf.zeros_like(searched_lengths), searched_lengths > 0,
             tf.zeros_like(searched_lengths, tf.bool),
             tf.zeros(tf.stack([num_searched, width]), tf.bool)))

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


# ---------------------------------------------------------------------------
# Packing (the reference's feature conversion, in the graph)
# ---------------------------------------------------------------------------

def truncated_pair_lengths(len_a, len_b, max_length):
    """Lengths after the reference's _truncate_seq_pair, in closed form.

    The reference pops from the end of the longer list (from B on ties) until the
    pair fits. B ends at min(len_b, max(max_length // 2, max_length - len_a)), then A
    at min(len_a, max_length - B's length); works on numbers and on tensors.
    """
    if isinstance(len_b, tf.Tensor) or isinstance(len_a, tf.Tensor):
        max_length = tf.cast(max_length, len_a.dtype)
        keep_b = tf.minimum(len_b, tf.maximum(max_length // 2, max_length - len_a))
        return tf.minimum(len_a, max_length - keep_b), keep_b
    keep_b = min(len_b, max(max_length // 2, max_length - len_a))
    return min(len_a, max_length - keep_b), keep_b


def pack_inputs(ids_a, ids_b, seq_length, cls_id, sep_id, max_length_a=None):
    """[CLS] A [SEP] (B [SEP]) -> input_ids, input_mask, segment_ids int32 [B, S].

    As the reference: a row whose B has no tokens is a single text, cut to S - 2
    tokens; a pair is cut to S - 3 tokens by _truncate_seq_pair's rule, and B's [SEP]
    is added only if B keeps a token. With max_length_a (SQuAD), A is first cut to
    max_length_a tokens and B to the room left (S - len(A) - 3), which is
    run_squad's first window; B's [SEP] is always there.

    Args:
      ids_a, ids_b: RaggedTensors [B, (tokens)] of int32 ids.

    Returns:
      dict of input_ids, input_mask, segment_ids (int32 [B, S]) and len_a, len_b
      (int64 [B], the tokens of A and B kept).
    """
    len_a = ids_a.row_lengths()
    len_b = ids_b.row_lengths()
    if max_length_a is not None:
        keep_a = tf.minimum(len_a, max_length_a)
        keep_b = tf.minimum(len_b, seq_length - 3 - keep_a)
        has_b = tf.ones_like(keep_b, tf.bool)
    else:
        pair_a, pair_b = truncated_pair_lengths(len_a, len_b, seq_length - 3)
        keep_a = tf.where(len_b > 0, pair_a, tf.minimum(len_a, seq_length - 2))
        keep_b = tf.where(len_b > 0, pair_b, 0)
        has_b = keep_b > 0
    # Every row: [CLS] at 0, A from 1, [SEP] after it, B after that, then B's [SEP].
    first_b = keep_a + 2
    total = first_b + keep_b + tf.cast(has_b, tf.int64)

    def scatter_values(ids, keep, first):
        rows = ids.value_rowids()
        position = (tf.range(tf.size(rows, out_type=tf.int64))
                    - tf.gather(ids.row_starts(), rows))
        kept = position < tf.gather(keep, rows)
        rows = tf.boolean_mask(rows, kept)
        columns = tf.boolean_mask(position, kept) + tf.gather(first, rows)
        return tf.stack([rows, columns], axis=1), tf.boolean_mask(ids.flat_values, kept)

    num_rows = tf.size(len_a, out_type=tf.int64)
    batch = tf.range(num_rows)
    index_a, values_a = scatter_values(ids_a, keep_a, tf.ones_like(keep_a))
    index_b, values_b = scatter_values(ids_b, keep_b, first_b)
    special_index = tf.concat([
        tf.stack([batch, tf.zeros_like(batch)], axis=1),
        tf.stack([batch, keep_a + 1], axis=1),
        tf.boolean_mask(tf.stack([batch, first_b + keep_b], axis=1), has_b)], axis=0)
    special_ids = tf.concat([
        tf.fill([num_rows], cls_id), tf.fill([num_rows], sep_id),
        tf.fill([tf.reduce_sum(tf.cast(has_b, tf.int64))], sep_id)], axis=0)
    input_ids = tf.scatter_nd(
        tf.concat([index_a, index_b, special_index], axis=0),
        tf.concat([values_a, values_b, special_ids], axis=0),
        tf.stack([num_rows, tf.constant(seq_length, tf.int64)]))
    columns = tf.range(seq_length, dtype=tf.int64)[tf.newaxis, :]
    input_mask = columns < total[:, tf.newaxis]
    segment_ids = input_mask & (columns >= first_b[:, tf.newaxis])
    shape = [None, seq_length]
    return {"input_ids": tf.ensure_shape(input_ids, shape),
            "input_mask": tf.ensure_shape(tf.cast(input_mask, tf.int32), shape),
            "segment_ids": tf.ensure_shape(tf.cast(segment_ids, tf.int32), shape),
            "len_a": keep_a, "len_b": keep_b}


# ---------------------------------------------------------------------------
# SQuAD answer selection
# ---------------------------------------------------------------------------

def best_spans(start_logits, end_logits, len_a, len_b, n_best_size, max_answer_length):
    """The reference's best span of one window per row, in the graph.

    Candidates: the n_best_size best start and end positions (over the whole window,
    ties to the lower position, as sorted() does), pairs with both positions in the
    context part (positions len_a + 2 ... len_a + 1 + len_b), start <= end and
    end - start + 1 <= max_answer_length. The best sum of logits wins; among equal
    sums, the first in the reference's order (by start rank, then end rank).

    Returns:
      (start, end, score, found): int32 positions (-1 when none), float32 score
      (-inf when none), bool found; each [B].
    """
    k = tf.minimum(n_best_size, tf.shape(start_logits)[1])
    start_values, start_index = tf.math.top_k(start_logits, k=k)
    end_values, end_index = tf.math.top_k(end_logits, k=k)
    first = tf.cast(len_a, tf.int32)[:, tf.newaxis] + 2
    last = first + tf.cast(len_b, tf.int32)[:, tf.newaxis] - 1

    def in_context(index):
        return (index >= first) & (index <= last)

    starts = start_index[:, :, tf.newaxis]
    ends = end_index[:, tf.newaxis, :]
    valid = (in_context(start_index)[:, :, tf.newaxis] & in_context(end_index)[:, tf.newaxis, :]
             & (ends >= starts) & (ends - starts + 1 <= max_answer_length))
    scores = start_values[:, :, tf.newaxis] + end_values[:, tf.newaxis, :]
    scores = tf.where(valid, scores, -np.inf)
    flat = tf.reshape(scores, [tf.shape(scores)[0], -1])
    flat_valid = tf.reshape(valid, tf.shape(flat))
    best = tf.reduce_max(flat, axis=1, keepdims=True)
    order = tf.range(tf.shape(flat)[1])[tf.newaxis, :]
    big = tf.shape(flat)[1]
    choice = tf.reduce_min(tf.where(flat_valid & tf.equal(flat, best), order, big), axis=1)
    found = choice < big
    choice = tf.minimum(choice, big - 1)
    start = tf.gather(start_index, choice // k, batch_dims=1)
    end = tf.gather(end_index, choice % k, batch_dims=1)
    score = tf.gather(flat, choice, axis=1, batch_dims=1)
    return (tf.where(found, start, -1), tf.where(found, end, -1),
            tf.where(found, score, -np.inf), found)


# ---------------------------------------------------------------------------
# The exported module
# ---------------------------------------------------------------------------

def build_model(model_type, bert_config, num_labels=None):
    """The Keras model of `model_type`, its variables created."""
    if model_type == "encoder":
        model = modeling.BertModel(bert_config)
        dummy = modeling.dummy_features()
        model(dummy["input_ids"], dummy["input_mask"], dummy["segment_ids"])
        return model
    if model_type == "classifier":
        model = modeling.BertClassifier(bert_config, num_labels)
    elif model_type == "squad":
        model = modeling.BertSquad(bert_config)
    else:
        raise ValueError("--model_type must be one of %s, got %r"
                         % (", ".join(MODEL_TYPES), model_type))
    model(modeling.dummy_features(), training=False)
    return model


class ServingModule(tf.Module):
    """What gets saved: the tokenizer, the model's variables and the signatures."""

    def __init__(self, model_type, model, tokenizer, max_seq_length, labels=None,
                 max_query_length=64, max_answer_length=30, n_best_size=20):
        super().__init__(name="bert_serving")
        self.model_type = model_type
        self.tokenizer = tokenizer
        self.model_variables = list(model.variables)
        self._holder = _Hidden(model=model)
        self.max_seq_length = max_seq_length
        self.labels = None if labels is None else tuple(str(label) for label in labels)
        self.regression = labels is not None and list(labels) == [None]
        self.max_query_length = max_query_length
        self.max_answer_length = max_answer_length
        self.n_best_size = n_best_size

        def text(name):
            return tf.TensorSpec([None], tf.string, name=name)

        ids = [tf.TensorSpec([None, max_seq_length], tf.int32, name=name)
               for name in ("input_ids", "input_mask", "segment_ids")]
        self.serving_ids = tf.function(self._serve_ids, input_signature=ids, autograph=False)
        self.tokenize = tf.function(self._tokenize, input_signature=[text("text")],
                                    autograph=False)
        # Given to tf.saved_model.save as tf.functions, not concrete functions: traced
        # once, inside the save (a trace made before it would be made again there).
        signatures = {"serving_ids": self.serving_ids, "tokenize": self.tokenize}
        if model_type == "squad":
            pair = [text("question"), text("context")]
            self.serving_default = tf.function(self._serve_squad, input_signature=pair,
                                               autograph=False)
            self.answer = tf.function(self._answer, input_signature=pair, autograph=False)
            signatures["answer"] = self.answer
        else:
            self.serving_default = tf.function(
                self._serve_pair, input_signature=[text("text_a"), text("text_b")],
                autograph=False)
            self.serving_text_a = tf.function(self._serve_single,
                                              input_signature=[text("text_a")],
                                              autograph=False)
            signatures["serving_text_a"] = self.serving_text_a
        signatures["serving_default"] = self.serving_default
        self._holder.signatures = signatures

    def signatures(self):
        """The signatures to save, by name (tf.functions with input signatures)."""
        return dict(self._holder.signatures)

    # -- model outputs ------------------------------------------------------

    def _model_outputs(self, features):
        model = self._holder.model
        if self.model_type == "encoder":
            out = model(features["input_ids"], features["input_mask"],
                        features["segment_ids"], training=False)
            return {
                "pooled_output": tf.cast(out["pooled_output"], tf.float32),
                "sequence_output": tf.cast(out["sequence_output"], tf.float32),
                "encoder_layers": tf.stack(
                    [tf.cast(x, tf.float32) for x in out["all_encoder_layers"]], axis=1),
                "input_ids": features["input_ids"],
                "input_mask": features["input_mask"],
                "segment_ids": features["segment_ids"],
            }
        out = model(features, training=False)
        if self.model_type == "squad":
            return {"start_logits": tf.cast(out["start_logits"], tf.float32),
                    "end_logits": tf.cast(out["end_logits"], tf.float32)}
        logits = tf.cast(out["logits"], tf.float32)
        if self.regression:
            return {"predictions": logits[:, 0], "logits": logits}
        probabilities = tf.nn.softmax(logits, axis=-1)
        names = tf.constant(self.labels)
        batch = tf.shape(logits)[0]
        return {
            "probabilities": probabilities,
            "logits": logits,
            "predicted_label": tf.gather(names, tf.argmax(probabilities, axis=-1)),
            "labels": tf.tile(names[tf.newaxis, :], [batch, 1]),
        }

    def _serve_ids(self, input_ids, input_mask, segment_ids):
        return self._model_outputs({"input_ids": input_ids, "input_mask": input_mask,
                                    "segment_ids": segment_ids})

    def _forward(self, features):
        """The model on packed features, through serving_ids (one copy of the model)."""
        return self.serving_ids(features["input_ids"], features["input_mask"],
                                features["segment_ids"])

    # -- text in ------------------------------------------------------------

    def _tokenize(self, text):
        ids = self.tokenizer.tokenize(text)
        return {"token_ids": ids.to_tensor(default_value=-1),
                "num_tokens": tf.cast(ids.row_lengths(), tf.int32)}

    def _pack(self, text_a, text_b):
        # One tokenizer call for both texts (half the per-call cost at small batches).
        num_rows = tf.shape(text_a)[0]
        with tf.control_dependencies([tf.debugging.assert_equal(
                tf.shape(text_b)[0], num_rows,
                message="text_a and text_b must have the same number of rows")]):
            ids = self.tokenizer.tokenize(tf.concat([text_a, text_b], axis=0))
        return pack_inputs(ids[:num_rows], ids[num_rows:], self.max_seq_length,
                           self.tokenizer.cls_id, self.tokenizer.sep_id)

    def _serve_pair(self, text_a, text_b):
        return self._forward(self._pack(text_a, text_b))

    def _serve_single(self, text_a):
        return self._serve_pair(text_a, tf.fill(tf.shape(text_a), ""))

    # -- SQuAD --------------------------------------------------------------

    def _squad_features(self, question, context):
        context_ids, span_starts, span_limits = self.tokenizer.tokenize_with_spans(context)
        features = pack_inputs(self.tokenizer.tokenize(question), context_ids,
                               self.max_seq_length, self.tokenizer.cls_id,
                               self.tokenizer.sep_id, max_length_a=self.max_query_length)
        return features, span_starts, span_limits

    def _serve_squad(self, question, context):
        features, _, _ = self._squad_features(question, context)
        outputs = self._forward(features)
        for key in ("input_ids", "input_mask", "segment_ids"):
            outputs[key] = features[key]
        return outputs

    def _answer(self, question, context):
        features, span_starts, span_limits = self._squad_features(question, context)
        outputs = self._forward(features)
        start, end, score, found = best_spans(
            outputs["start_logits"], outputs["end_logits"], features["len_a"],
            features["len_b"], self.n_best_size, self.max_answer_length)
        # Token positions -> indexes of context tokens -> character ranges.
        offset = tf.cast(features["len_a"], tf.int32) + 2
        token_starts = span_starts.row_starts()
        num_spans = tf.size(span_starts.flat_values, out_type=tf.int64)

        def char_at(spans, position):
            # Rows without an answer read the 0 appended at the end.
            index = token_starts + tf.cast(position - offset, tf.int64)
            index = tf.where(found, index, num_spans)
            return tf.gather(tf.concat([spans.flat_values, [0]], axis=0), index)

        char_start = char_at(span_starts, start)
        char_limit = char_at(span_limits, end)
        decoded = tf.strings.unicode_decode(context, "UTF-8", errors="ignore")
        chars = tf.gather(decoded.flat_values,
                          tf.ragged.range(decoded.row_starts() + char_start,
                                          decoded.row_starts() + char_limit))
        text = tf.strings.unicode_encode(chars, "UTF-8")
        text = tf.strings.regex_replace(text, "[ \t\r\n\\x{202F}]+", " ")
        text = tf.strings.regex_replace(text, "^ | $", "")
        return {
            "answer": text,
            "score": score,
            "start_position": start,
            "end_position": end,
            "null_score": outputs["start_logits"][:, 0] + outputs["end_logits"][:, 0],
        }


# ---------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------

def load_weights(model, init_checkpoint, model_type):
    """Loads `init_checkpoint` into `model`; every model variable must be found.

    A classifier or SQuAD export of a checkpoint without the task's head would serve
    random outputs, so missing variables are an error here (unlike in training).
    """
    result = checkpoints.load_checkpoint(model, init_checkpoint)
    if result.not_in_checkpoint:
        raise ValueError(
            "checkpoint %s lacks %d variable(s) of the %s model, e.g. %s (is it a "
            "checkpoint of a fine-tuned %s model?)"
            % (init_checkpoint, len(result.not_in_checkpoint), model_type,
               ", ".join(result.not_in_checkpoint[:3]), model_type))
    return result


def write_saved_model(module, export_dir, info):
    """Saves `module` beside `export_dir`, then renames it into place.

    An existing export_dir is replaced only once the new SavedModel is complete;
    after an error nothing is left behind. assets.extra/export_info.json records how
    the model was exported.
    """
    export_dir = export_dir.rstrip("/")
    parent = os.path.dirname(export_dir)
    if parent:
        tf.io.gfile.makedirs(parent)
    temp = "%s.tmp-%d" % (export_dir, os.getpid())
    old = "%s.old-%d" % (export_dir, os.getpid())
    for path in (temp, old):
        if tf.io.gfile.exists(path):
            tf.io.gfile.rmtree(path)
    try:
        tf.saved_model.save(module, temp, signatures=module.signatures())
        extra = os.path.join(temp, "assets.extra")
        tf.io.gfile.makedirs(extra)
        with tf.io.gfile.GFile(os.path.join(extra, "export_info.json"), "w") as f:
            f.write(json.dumps(info, indent=2, sort_keys=True) + "\n")
        if tf.io.gfile.exists(export_dir):
            tf.io.gfile.rename(export_dir, old)
        tf.io.gfile.rename(temp, export_dir)
    except BaseException:
        if tf.io.gfile.exists(temp):
            tf.io.gfile.rmtree(temp)
        if tf.io.gfile.exists(old) and not tf.io.gfile.exists(export_dir):
            tf.io.gfile.rename(old, export_dir)
        raise
    if tf.io.gfile.exists(old):
        tf.io.gfile.rmtree(old)
    return export_dir


def export(model_type, bert_config, init_checkpoint, vocab_file, do_lower_case,
           max_seq_length, export_dir, labels=None, max_query_length=64,
           max_answer_length=30, n_best_size=20):
    """Builds, loads and saves the serving model; returns export_dir.

    Args:
      bert_config: a modeling.BertConfig.
      labels: classifier only, the task's label list ([None] for regression).
    """
    num_labels = len(labels) if labels is not None else None
    model = build_model(model_type, bert_config, num_labels)
    load_weights(model, init_checkpoint, model_type)
    with tempfile.TemporaryDirectory() as asset_dir:
        tokenizer = InGraphTokenizer(vocab_file, do_lower_case, asset_dir)
        if tokenizer.vocab_size > bert_config.vocab_size:
            raise ValueError("the vocabulary %s has %d entries but the model only %d "
                             "(vocab_size in bert_config.json)"
                             % (vocab_file, tokenizer.vocab_size, bert_config.vocab_size))
        module = ServingModule(model_type, model, tokenizer, max_seq_length, labels=labels,
                               max_query_length=max_query_length,
                               max_answer_length=max_answer_length, n_best_size=n_best_size)
        info = {
            "model_type": model_type,
            "do_lower_case": bool(do_lower_case),
            "max_seq_length": max_seq_length,
            "bert_config": bert_config.to_dict(),
            "init_checkpoint": str(init_checkpoint),
            "signatures": sorted(module.signatures()),
            "unicode_version": unicodedata.unidata_version,
        }
        if labels is not None:
            info["labels"] = [None if label is None else str(label) for label in labels]
        if model_type == "squad":
            info.update(max_query_length=max_query_length, max_answer_length=max_answer_length,
                        n_best_size=n_best_size)
        write_saved_model(module, export_dir, info)
    logging.info("Exported the %s model to %s", model_type, export_dir)
    return export_dir


def run(fv):
    """Exports the model the flags describe; returns the export directory."""
    flags_common.require(fv, _REQUIRED_FLAGS)
    labels = None
    if fv.model_type == "classifier":
        if not fv.task_name:
            raise ValueError("--task_name is required with --model_type=classifier")
        labels = _task_labels(fv.task_name, fv.xnli_language)
    tokenization.validate_case_matches_checkpoint(fv.do_lower_case, fv.init_checkpoint)
    bert_config = modeling.BertConfig.from_json_file(fv.bert_config_file)
    bert_config.validate()
    if fv.max_seq_length > bert_config.max_position_embeddings:
        raise ValueError(
            "--max_seq_length=%d is longer than the %d positions the BERT model has "
            "(max_position_embeddings in --bert_config_file)"
            % (fv.max_seq_length, bert_config.max_position_embeddings))
    if fv.max_seq_length < 3:
        raise ValueError("--max_seq_length must be at least 3")
    if fv.model_type == "squad":
        for name in ("max_query_length", "max_answer_length", "n_best_size"):
            if getattr(fv, name) < 1:
                raise ValueError("--%s must be at least 1" % name)
        if fv.max_seq_length <= fv.max_query_length + 3:
            raise ValueError(
                "The max_seq_length (%d) must be greater than max_query_length (%d) + 3"
                % (fv.max_seq_length, fv.max_query_length))
    if not tf.io.gfile.exists(fv.vocab_file):
        raise ValueError("--vocab_file %s does not exist" % fv.vocab_file)
    return export(fv.model_type, bert_config, fv.init_checkpoint, fv.vocab_file,
                  fv.do_lower_case, fv.max_seq_length, fv.export_dir, labels=labels,
                  max_query_length=fv.max_query_length,
                  max_answer_length=fv.max_answer_length, n_best_size=fv.n_best_size)


def _task_labels(task_name, xnli_language):
    import run_classifier  # pylint: disable=import-outside-toplevel
    processor = run_classifier.get_processor(task_name, xnli_language)
    return list(processor.get_labels())


def main():
    flags_common.run_cli(define_flags, run)


if __name__ == "__main__":
    main()
