"""SQuAD's answer() in the graph: run_squad's windows, n-best rules and answer text.

What run_squad.py --do_predict does for one question and its context, as core TensorFlow
ops over a batch (no tensorflow_text, no Python at serving time):

1. the context is split into SQuAD's whitespace words (space, tab, CR, LF, U+202F:
   squad_data.split_paragraph) and WordPiece-tokenized (the in-graph tokenizer; the
   pieces of the whole context are those of its words one by one, since those
   separators are whitespace to BasicTokenizer too);
2. the question is cut to max_query_length pieces; the context's pieces are cut into
   windows of the room left (max_seq_length - question - 3), doc_stride apart
   (input_pipeline.doc_spans), each packed [CLS] question [SEP] window [SEP];
3. all windows of the request go through the model in one batch;
4. per window the n_best_size best start and end positions (ties: the lower position,
   padding positions ranking as run_squad's full-length logits do), pairs with both
   ends in the window's context, the start in the window where it has the most context
   (input_pipeline.check_is_max_context), start <= end and at most max_answer_length
   pieces; over all windows of a question the best sum of logits (float64, as Python
   adds them) wins, ties to the first in run_squad's order (window, start rank, end
   rank);
5. SQuAD 2.0 (version_2_with_negative): the null score is the lowest [CLS] start + end
   over the windows; no answer ("") when the null score minus the best span's score is
   above null_score_diff_threshold (squad_results' rule, its corner cases included);
6. the text: squad_results.get_final_text's rule on the span: its pieces joined and
   "##" removed, found first in the BasicTokenizer form of the original words it
   covers, and cut out of those words (joined by one space) character by character;
   when the alignment fails, the whole words.

A question with no valid span answers as run_squad does: "empty" (SQuAD 1.1) or ""
(SQuAD 2.0); a context of no pieces (empty or whitespace) has no window, so the same.
"""
import dataclasses

import numpy as np
import tensorflow as tf
from bert_tf2.export import graph_ops

from bert_tf2.tasks import squad_results

# run_squad's starting null score (a window's null score replaces it only when lower).
INITIAL_NULL_SCORE = 1000000.0
# Its placeholder answer when a SQuAD 1.1 question has no valid span.
NO_SPAN_TEXT = "empty"
# The reference's whitespace between SQuAD words (squad_data.split_paragraph).
_SQUAD_SPACES = (32, 9, 13, 10, 0x202F)
_SQUAD_SPACE_RUNS = "[ \t\r\n\\x{202F}]+"


@dataclasses.dataclass(frozen=True)
class SquadRules:
    """run_squad's prediction settings that answer() applies (its flags' defaults)."""
    max_query_length: int = 64
    doc_stride: int = 128
    n_best_size: int = 20
    max_answer_length: int = 30
    version_2_with_negative: bool = False
    null_score_diff_threshold: float = 0.0

    def check(self, max_seq_length):
        """ValueError naming the flag when answer() could not work with these values."""
        for name in ("max_query_length", "doc_stride", "n_best_size", "max_answer_length"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise ValueError("--%s must be an integer >= 1, got %r" % (name, value))
        if max_seq_length <= self.max_query_length + 3:
            raise ValueError(
                "The max_seq_length (%d) must be greater than max_query_length (%d) + 3"
                % (max_seq_length, self.max_query_length))

    def to_dict(self):
        """The values, as export_info.json records them."""
        return {"max_query_length": int(self.max_query_length),
                "doc_stride": int(self.doc_stride), "n_best_size": int(self.n_best_size),
                "max_answer_length": int(self.max_answer_length),
                "version_2_with_negative": bool(self.version_2_with_negative),
                "null_score_diff_threshold": float(self.null_score_diff_threshold)}


# The settings a SquadRules is made of (rules_of reads a settings part of these fields).
SETTINGS = tuple(field.name for field in dataclasses.fields(SquadRules))
# run_squad's --doc_stride default: used when neither a flag nor the model folder gives one.
DEFAULT_DOC_STRIDE = 128


def rules_of(part):
    """SquadRules of a settings part with the SETTINGS fields (doc_stride None: run_squad's
    default)."""
    return SquadRules(
        max_query_length=part.max_query_length,
        doc_stride=DEFAULT_DOC_STRIDE if part.doc_stride is None else part.doc_stride,
        n_best_size=part.n_best_size, max_answer_length=part.max_answer_length,
        version_2_with_negative=bool(part.version_2_with_negative),
        null_score_diff_threshold=float(part.null_score_diff_threshold))


# ---------------------------------------------------------------------------
# Windows
# ---------------------------------------------------------------------------

def windows(num_pieces, question_length, max_seq_length, doc_stride):
    """input_pipeline.doc_spans of every row, flattened.

    Args:
      num_pieces, question_length: int64 [B], the context's pieces and the question's
        kept pieces.

    Returns:
      dict of int64 [W]: row (the question), index (the window's index in its row),
      start, length (pieces of the context); and count int64 [B], the windows of each row
      (0 for a context of no piece).
    """
    room = max_seq_length - 3 - question_length
    stride = tf.minimum(tf.constant(doc_stride, tf.int64), room)
    beyond = tf.maximum(num_pieces - room, 0)
    count = tf.where(num_pieces > 0, 1 + (beyond + stride - 1) // stride, 0)
    row = graph_ops.repeat(tf.range(tf.size(count, out_type=tf.int64)), count)
    index = tf.ragged.range(count).flat_values
    start = index * tf.gather(stride, row)
    length = tf.minimum(tf.gather(num_pieces, row) - start, tf.gather(room, row))
    return {"row": row, "index": index, "start": start, "length": length, "count": count}


def is_max_context(window, num_rows, piece):
    """input_pipeline.check_is_max_context of context pieces in their windows.

    Args:
      window: windows()'s dict.
      piece: int64 [W, K], context piece indexes, one row per window.

    Returns:
      bool [W, K]: the window of that row is the first one where the piece has its best
      score, min(left, right context) + 0.01 * window length (float64, as Python).
    """
    def by_row(values):
        return tf.RaggedTensor.from_value_rowids(values, window["row"], nrows=num_rows,
                                                 validate=False).to_tensor(0)
    starts = tf.gather(by_row(window["start"]), window["row"])[:, tf.newaxis, :]
    lengths = tf.gather(by_row(window["length"]), window["row"])[:, tf.newaxis, :]
    lasts = starts + lengths - 1
    position = piece[:, :, tf.newaxis]
    covered = (starts <= position) & (position <= lasts) & (lengths > 0)
    score = (tf.cast(tf.minimum(position - starts, lasts - position), tf.float64)
             + 0.01 * tf.cast(lengths, tf.float64))
    score = tf.where(covered, score, -np.inf)
    best = tf.reduce_max(score, axis=2, keepdims=True)
    num = tf.shape(score, out_type=tf.int64)[2]
    order = tf.range(num)[tf.newaxis, tf.newaxis, :]
    first = tf.reduce_min(tf.where(covered & tf.equal(score, best), order, num), axis=2)
    return tf.equal(first, window["index"][:, tf.newaxis])


# ---------------------------------------------------------------------------
# Spans over all windows of a question
# ---------------------------------------------------------------------------

def best_span(start_logits, end_logits, len_a, len_b, window, num_rows, rules):
    """The best valid span of every question over its windows (run_squad's order).

    Args:
      start_logits, end_logits: float32 [W, L] of the windows (-inf where a position
        must not rank).
      len_a, len_b: int64 [W], the question's and the window's context pieces.

    Returns:
      dict: found bool [B]; window int64 [B] (the window's flat index); start, end int32
      [B] (positions in that window); piece_start, piece_end int64 [B] (context piece
      indexes); start_logit, end_logit float64 [B].
    """
    k = tf.minimum(rules.n_best_size, tf.shape(start_logits)[1])
    start_values, start_index = tf.math.top_k(start_logits, k=k)
    end_values, end_index = tf.math.top_k(end_logits, k=k)
    first = len_a[:, tf.newaxis] + 2
    last = first + len_b[:, tf.newaxis] - 1
    start_index64 = tf.cast(start_index, tf.int64)
    end_index64 = tf.cast(end_index, tf.int64)

    def in_context(index):
        return (index >= first) & (index <= last)

    start_piece = window["start"][:, tf.newaxis] + start_index64 - first
    start_ok = in_context(start_index64) & is_max_context(window, num_rows, start_piece)
    starts = start_index64[:, :, tf.newaxis]
    ends = end_index64[:, tf.newaxis, :]
    valid = (start_ok[:, :, tf.newaxis] & in_context(end_index64)[:, tf.newaxis, :]
             & (ends >= starts) & (ends - starts + 1 <= rules.max_answer_length))
    scores = (tf.cast(start_values, tf.float64)[:, :, tf.newaxis]
              + tf.cast(end_values, tf.float64)[:, tf.newaxis, :])
    # Every candidate in run_squad's order: window, start rank, end rank.
    pairs = tf.maximum(tf.cast(k * k, tf.int64), 1)  # 0 only without any window
    flat_valid = tf.reshape(valid, [-1])
    flat_scores = tf.where(flat_valid, tf.reshape(scores, [-1]), -np.inf)
    candidate_row = graph_ops.repeat(window["row"], pairs)
    best = tf.math.unsorted_segment_max(flat_scores, candidate_row, num_rows)
    order = tf.range(tf.size(flat_scores, out_type=tf.int64))
    is_best = flat_valid & tf.equal(flat_scores, tf.gather(best, candidate_row))
    big = tf.size(flat_scores, out_type=tf.int64)
    choice = tf.math.unsorted_segment_min(tf.where(is_best, order, big), candidate_row,
                                          num_rows)
    found = choice < big
    chosen_window = tf.where(found, choice // pairs, 0)
    k64 = tf.maximum(tf.cast(k, tf.int64), 1)
    chosen = chosen_window * k64

    def pick(values, rank, default):
        return _gather_or(tf.reshape(values, [-1]), chosen + rank, found, default)

    rank_start = (choice % pairs) // k64
    rank_end = choice % k64
    start = pick(start_index, rank_start, -1)
    end = pick(end_index, rank_end, -1)
    offset = (_gather_or(window["start"], chosen_window, found, 0)
              - _gather_or(len_a, chosen_window, found, 0) - 2)
    return {
        "found": found, "window": chosen_window, "start": start, "end": end,
        "piece_start": tf.cast(start, tf.int64) + offset,
        "piece_end": tf.cast(end, tf.int64) + offset,
        "start_logit": tf.cast(pick(start_values, rank_start, 0.0), tf.float64),
        "end_logit": tf.cast(pick(end_values, rank_end, 0.0), tf.float64),
    }


def _gather_or(values, index, keep, default):
    """values[index] where `keep`, else `default` (also when values is empty)."""
    padded = tf.concat([values, tf.constant([default], values.dtype)], axis=0)
    return tf.gather(padded, tf.where(keep, index, tf.size(values, out_type=index.dtype)))


def null_scores(start_logits, end_logits, window, num_rows):
    """(null score, the null answer's own start + end) float64 [B], run_squad's SQuAD 2.0
    rule: the lowest [CLS] start + end over the windows, if below INITIAL_NULL_SCORE (the
    null answer then carries that window's logits; else 0 and 0)."""
    window_null = (tf.cast(start_logits[:, 0], tf.float64)
                   + tf.cast(end_logits[:, 0], tf.float64))
    lowest = tf.math.unsorted_segment_min(window_null, window["row"], num_rows)
    replaced = lowest < INITIAL_NULL_SCORE
    return (tf.where(replaced, lowest, INITIAL_NULL_SCORE),
            tf.where(replaced, lowest, tf.zeros_like(lowest)))


# ---------------------------------------------------------------------------
# Answer text (squad_results.get_final_text)
# ---------------------------------------------------------------------------

def squad_words(decoded):
    """SQuAD's whitespace words of texts decoded to code points (RaggedTensor [B, (chars)]).

    Returns:
      (word_of_char int64 [C]: the word (numbered over the whole batch) of each character,
      meaningful at non-space characters; word_start, word_limit int64 [N]: each word's
      first character and the one after its last, as indexes into decoded.flat_values).
    """
    cps = decoded.flat_values
    space = tf.reduce_any(tf.equal(cps[:, tf.newaxis], tf.constant(_SQUAD_SPACES, tf.int32)),
                          axis=1)
    position = tf.range(tf.size(cps, out_type=tf.int64))
    first_of_row = tf.equal(position, tf.gather(decoded.row_starts(),
                                                graph_ops.value_rowids(decoded)))
    previous_space = tf.concat([[True], space[:-1]], axis=0) | first_of_row
    starts = tf.logical_not(space) & previous_space
    word_of_char = tf.cumsum(tf.cast(starts, tf.int64)) - 1
    num_words = tf.reduce_sum(tf.cast(starts, tf.int64))
    inside = tf.logical_not(space)
    word_start = graph_ops.boolean_mask(position, starts)
    word_limit = tf.math.unsorted_segment_max(
        graph_ops.boolean_mask(position, inside), graph_ops.boolean_mask(word_of_char, inside),
        num_words) + 1
    return word_of_char, word_start, word_limit


def _final_text(texts):
    """get_final_text of one span: texts = [pred_text, orig_text, tok_text] (strings)."""
    pred, orig, tok = [tf.strings.unicode_decode(texts[i], "UTF-8") for i in range(3)]
    m = tf.size(pred)
    n = tf.size(tok)
    offsets = tf.range(tf.maximum(n - m + 1, 0))
    spans = offsets[:, tf.newaxis] + tf.range(m)[tf.newaxis, :]
    matches = tf.reduce_all(tf.equal(tf.gather(tok, spans), pred[tf.newaxis, :]), axis=1)
    first = tf.reduce_min(tf.concat([graph_ops.boolean_mask(offsets, matches), [n]], axis=0))
    last = first + m - 1
    orig_kept = tf.cast(tf.where(tf.not_equal(orig, 32))[:, 0], tf.int32)
    tok_kept = tf.cast(tf.where(tf.not_equal(tok, 32))[:, 0], tf.int32)
    num_kept = tf.size(tok_kept)

    def rank(position):  # k with tok_kept[k] == position, else num_kept
        index = tf.range(num_kept)
        return tf.reduce_min(tf.concat([
            graph_ops.boolean_mask(index, tf.equal(tok_kept, position)), [num_kept]], axis=0))

    first_rank, last_rank = rank(first), rank(last)
    aligned = ((m > 0) & (first < n) & tf.equal(tf.size(orig_kept), num_kept)
               & (first_rank < num_kept) & (last_rank < num_kept))
    padded = tf.concat([orig_kept, [0, 0]], axis=0)
    begin = tf.gather(padded, tf.where(aligned, first_rank, num_kept))
    limit = tf.gather(padded, tf.where(aligned, last_rank, num_kept)) + 1
    cut = tf.strings.unicode_encode(orig[begin:limit], "UTF-8")
    return tf.where(aligned, cut, texts[1])


def span_texts(tokenizer, tokens, context_ids, piece_word, decoded, word_start, word_limit,
               span):
    """The answer text of each row's span (get_final_text's rule); "" where not found.

    Args:
      tokens: tokenizer.token_table().
      context_ids: RaggedTensor [B, (pieces)] int32; piece_word int64 [P]: each piece's
        word (squad_words' numbering).
      decoded: the contexts' code points; span: best_span()'s dict.
    """
    found = span["found"]
    row_start = context_ids.row_starts()
    first = tf.where(found, row_start + span["piece_start"], 0)
    limit = tf.where(found, row_start + span["piece_end"] + 1, 0)
    pieces = tf.gather(context_ids.flat_values, tf.ragged.range(first, limit))
    strings = pieces.with_flat_values(tokens.lookup(tf.cast(pieces.flat_values, tf.int64)))
    joined = graph_ops.join_rows(strings, " ")
    joined = tf.strings.regex_replace(joined, " ##", "", replace_global=True)
    joined = tf.strings.regex_replace(joined, "##", "", replace_global=True)
    pred_text = tf.strings.regex_replace(
        tf.strings.regex_replace(joined, " +", " "), "^ | $", "")
    first_word = _gather_or(piece_word, first, found, 0)
    last_word = _gather_or(piece_word, limit - 1, found, 0)
    char_start = _gather_or(word_start, first_word, found, 0)
    char_limit = _gather_or(word_limit, last_word, found, 0)
    chars = tf.gather(decoded.flat_values, tf.ragged.range(char_start, char_limit))
    orig_text = tf.strings.regex_replace(tf.strings.unicode_encode(chars, "UTF-8"),
                                         _SQUAD_SPACE_RUNS, " ")
    tok_text = graph_ops.join_rows(tokenizer.basic_tokenize(orig_text), " ")
    text = tf.map_fn(_final_text, tf.stack([pred_text, orig_text, tok_text], axis=1),
                     fn_output_signature=tf.TensorSpec([], tf.string))
    return tf.where(found, text, "")


# ---------------------------------------------------------------------------
# answer()
# ---------------------------------------------------------------------------

def answer(question, context, tokenizer, tokens, rules, max_seq_length, pack, forward,
           trim_padding):
    """run_squad's answer of every (question, context) row.

    Args:
      question, context: string [B].
      tokenizer: the tokenization_graph.InGraphTokenizer; tokens: its token_table.
      rules: SquadRules.
      pack: (ids_a, ids_b, max_length_a) -> serving.pack_inputs' dict (the module's
        packing: max_seq_length, or the request's bucket with trim_padding).
      forward: packed features -> {"start_logits", "end_logits"}.
      trim_padding: rank real positions only (run_squad --trim_padding).

    Returns:
      the outputs of the answer signature (see export_saved_model.py).
    """
    num_rows, context_ids, span_starts, window, features = _question_windows(
        question, context, tokenizer, rules, max_seq_length, pack)
    outputs = forward(features)
    start_logits, end_logits = outputs["start_logits"], outputs["end_logits"]
    if trim_padding:
        start_logits, end_logits = [squad_results.real_position_logits(x, features["input_mask"])
                                    for x in (start_logits, end_logits)]
    span = best_span(start_logits, end_logits, features["len_a"], features["len_b"], window,
                     num_rows, rules)
    null_score, null_entry = null_scores(outputs["start_logits"], outputs["end_logits"],
                                         window, num_rows)
    span_score = span["start_logit"] + span["end_logit"]
    if rules.version_2_with_negative:
        # The best non-null answer is the best span, unless n_best_size 1 leaves room for
        # the null answer alone (ranked after spans of equal score).
        span = dict(span, found=span["found"] & tf.logical_not(
            (rules.n_best_size == 1) & (null_entry > span_score)))
    has_span = span["found"]
    null_odds = tf.where(has_span, null_score - span["start_logit"] - span["end_logit"],
                         null_score)
    text = _span_text(tokenizer, tokens, context, context_ids, span_starts, span)
    if rules.version_2_with_negative:
        answered = has_span & tf.logical_not(null_odds > rules.null_score_diff_threshold)
        text = tf.where(answered, text, "")
        score = tf.where(answered, span_score, null_entry)
    else:
        text = tf.where(has_span, text, NO_SPAN_TEXT)
        score = tf.where(has_span, span_score, 0.0)
    return _answer_outputs(span, text, score, window, null_score, null_odds)


def _question_windows(question, context, tokenizer, rules, max_seq_length, pack):
    """The request's windows, packed: (num_rows, the context's pieces [B, (n)], their
    character starts [B, (n)], windows' dict, the packed features of every window)."""
    num_rows = tf.shape(question, out_type=tf.int64)[0]
    with tf.control_dependencies([tf.debugging.assert_equal(
            tf.shape(context, out_type=tf.int64)[0], num_rows,
            message="question and context must have the same number of rows")]):
        question_ids = tokenizer.tokenize(question)
    context_ids, span_starts, _ = tokenizer.tokenize_with_spans(context)
    question_length = tf.minimum(question_ids.row_lengths(), rules.max_query_length)
    window = windows(context_ids.row_lengths(), question_length, max_seq_length,
                     rules.doc_stride)
    row_start = tf.gather(context_ids.row_starts(), window["row"])
    window_ids = tf.RaggedTensor.from_row_lengths(
        tf.gather(context_ids.flat_values,
                  tf.ragged.range(row_start + window["start"],
                                  row_start + window["start"] + window["length"]).flat_values),
        window["length"], validate=False)
    features = pack(tf.gather(question_ids, window["row"]), window_ids, rules.max_query_length)
    return num_rows, context_ids, span_starts, window, features


def _span_text(tokenizer, tokens, context, context_ids, span_starts, span):
    """Each row's answer text of `span` (span_texts over the context's SQuAD words)."""
    decoded = tf.strings.unicode_decode(context, "UTF-8", errors="ignore")
    word_of_char, word_start, word_limit = squad_words(decoded)
    piece_char = tf.gather(decoded.row_starts(), graph_ops.value_rowids(span_starts)) + \
        span_starts.flat_values
    piece_word = tf.gather(word_of_char, piece_char)
    return span_texts(tokenizer, tokens, context_ids, piece_word, decoded, word_start,
                      word_limit, span)


def _answer_outputs(span, text, score, window, null_score, null_odds):
    """The answer signature's outputs; a row without a span (span["found"] false) gets
    -1 positions and window, 0 logits."""
    has_span = span["found"]
    window_index = _gather_or(window["index"], span["window"], has_span, -1)
    return {
        "answer": text,
        "score": tf.cast(score, tf.float32),
        "start_logit": tf.cast(tf.where(has_span, span["start_logit"], 0.0), tf.float32),
        "end_logit": tf.cast(tf.where(has_span, span["end_logit"], 0.0), tf.float32),
        "start_position": tf.where(has_span, span["start"], -1),
        "end_position": tf.where(has_span, span["end"], -1),
        "window": tf.cast(window_index, tf.int32),
        "num_windows": tf.cast(window["count"], tf.int32),
        "null_score": tf.cast(null_score, tf.float32),
        "null_odds": tf.cast(null_odds, tf.float32),
    }
