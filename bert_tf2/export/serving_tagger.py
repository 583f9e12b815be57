"""The exported tagger's graph: run_ner's words, windows and tags of raw texts.

export_saved_model.py --model_type=tagger serves `serving_default(text)`; each text is
one sentence (its own document), tagged as run_ner --do_predict tags it, in core
TensorFlow ops (no tensorflow_text):

  1. words: ner_data's word rule (split_words): the runs of characters other than
     ner_data.WORD_BLANKS, with their character ranges in the text;
  2. pieces: every word on its own through the in-graph FullTokenizer (a word may give
     several pieces, or none);
  3. windows: ner_data.sentence_features' for a one-sentence document: a text of more than
     max_seq_length - 2 pieces is cut into windows doc_stride pieces apart
     (input_pipeline.doc_spans), each piece owned by the window where it has the most
     context (input_pipeline.check_is_max_context, its float64 score included);
  4. tags: the model on every window; a word's tag is the prediction at its first piece
     in the window that owns that piece; a --crf tagger decodes each window's owned words
     with Viterbi (heads.crf_predictions), the start penalty on a text's first window
     only; a word without pieces is "O".

ServingModule (serving.py) packs the windows and runs the model between the steps.
"""
import tensorflow as tf
from bert_tf2.export import graph_ops

from bert_tf2 import heads
from bert_tf2.tasks import ner_data

_BLANK_CODES = tuple(sorted(ord(c) for c in ner_data.WORD_BLANKS))


def check_doc_stride(doc_stride):
    """run_ner's --doc_stride of a tagger (None: run_ner's default); ValueError below 1
    (ner_data.doc_stride_of, the windows' one check)."""
    return ner_data.doc_stride_of(doc_stride)


def _before(values, first):
    """values shifted one to the right, `first` in front (same length; 1-D)."""
    return tf.concat([tf.reshape(tf.cast(first, values.dtype), [1]), values], 0)[:-1]


def _after(values, last):
    """values shifted one to the left, `last` at the end (same length; 1-D)."""
    return tf.concat([values, tf.reshape(tf.cast(last, values.dtype), [1])], 0)[1:]


def split_words(texts):
    """The words of every text by ner_data.split_words' rule.

    Returns:
      dict: "strings" [W] string, every word of every text in order (valid UTF-8);
      "word_start", "word_limit": RaggedTensors [B, (words)] int64, each word's range of
      code points in its text (after dropping invalid UTF-8 bytes).
    """
    texts = tf.convert_to_tensor(texts, tf.string)
    decoded = tf.strings.unicode_decode(texts, "UTF-8", errors="ignore")
    cps = decoded.flat_values
    rows = graph_ops.value_rowids(decoded)
    blank = tf.reduce_any(tf.equal(cps[:, tf.newaxis], tf.constant(_BLANK_CODES, tf.int32)),
                          axis=1)
    in_word = tf.logical_not(blank)
    new_row = tf.not_equal(rows, _before(rows, -1))
    last_of_row = tf.not_equal(rows, _after(rows, -1))
    starts = in_word & (_before(blank, True) | new_row)
    ends = in_word & (_after(blank, True) | last_of_row)
    word_of_char = tf.cumsum(tf.cast(starts, tf.int64)) - 1
    num_words = tf.reduce_sum(tf.cast(starts, tf.int64))
    chars = tf.RaggedTensor.from_value_rowids(
        graph_ops.boolean_mask(cps, in_word), graph_ops.boolean_mask(word_of_char, in_word),
        nrows=num_words, validate=False)
    position = tf.range(tf.size(cps, out_type=tf.int64)) - tf.gather(decoded.row_starts(),
                                                                      rows)
    word_rows = graph_ops.boolean_mask(rows, starts)

    def by_text(values):
        return tf.RaggedTensor.from_value_rowids(values, word_rows, nrows=decoded.nrows(),
                                                 validate=False)
    return {"strings": tf.strings.unicode_encode(chars, "UTF-8"),
            "word_start": by_text(graph_ops.boolean_mask(position, starts)),
            "word_limit": by_text(graph_ops.boolean_mask(position, ends) + 1)}


def windows(words, pieces, seq_length, doc_stride):
    """run_ner's windows of every text (one sentence each) and who owns each piece.

    Args:
      words: split_words' dict.
      pieces: RaggedTensor [W, (pieces)] int32, the WordPiece ids of every word.
      seq_length: max_seq_length; doc_stride: run_ner's --doc_stride.

    Returns:
      dict: "ids" RaggedTensor [R, (pieces)] int32, the pieces of every window (rows:
      the texts' windows in order, at least one per text, [] for a text without pieces);
      "starts_sentence" [R] int32 (1: a text's first window); "owned" [O, 3] int64: of
      every word with pieces, (window row, packed position of its first piece there,
      [CLS] being 0, the word's index among all words), in the window owning that piece.
    """
    room = seq_length - 2
    step = max(1, min(room, doc_stride))
    piece_word = graph_ops.value_rowids(pieces)  # [P] the word of each piece
    word_rows = graph_ops.value_rowids(words["word_start"])
    num_texts = words["word_start"].nrows()
    piece_text = tf.gather(word_rows, piece_word)
    num_pieces = tf.math.bincount(piece_text, minlength=num_texts, maxlength=num_texts,
                                  dtype=tf.int64)
    text_first_piece = tf.cumsum(num_pieces, exclusive=True)
    # Windows of a text: 1 + ceil((N - room) / step) when N > room (doc_spans' loop).
    extra = tf.maximum(num_pieces - room, 0)
    count = 1 + (extra + step - 1) // step
    window_text = graph_ops.repeat(tf.range(num_texts), count)
    window_start = tf.ragged.range(count).flat_values * step
    window_length = tf.maximum(tf.minimum(tf.gather(num_pieces, window_text) - window_start,
                                          room), 0)
    offset = tf.ragged.range(window_length)  # [R, (pieces)] position in the window
    row = graph_ops.value_rowids(offset)
    j = offset.flat_values
    length = tf.gather(window_length, row)
    piece = tf.gather(tf.gather(text_first_piece, window_text) + window_start, row) + j
    # check_is_max_context: min(left, right context) + 0.01 x the window's length, in
    # float64 as Python scores it; the first window of the best score owns the piece.
    score = (tf.cast(tf.minimum(j, length - 1 - j), tf.float64)
             + 0.01 * tf.cast(length, tf.float64))
    num_all = tf.size(piece_word, out_type=tf.int64)
    best = tf.math.unsorted_segment_max(score, piece, num_all)
    is_best = tf.equal(score, tf.gather(best, piece))
    first_best = tf.math.unsorted_segment_min(
        tf.where(is_best, row, tf.reduce_max(tf.concat([row, [0]], 0)) + 1), piece, num_all)
    word_of = tf.gather(piece_word, piece)
    first_piece = tf.equal(tf.gather(pieces.row_starts(), word_of), piece)
    owns = tf.equal(tf.gather(first_best, piece), row) & first_piece
    owned = tf.stack([graph_ops.boolean_mask(row, owns), graph_ops.boolean_mask(j, owns) + 1,
                      graph_ops.boolean_mask(word_of, owns)], axis=1)
    return {"ids": offset.with_flat_values(tf.gather(pieces.flat_values, piece)),
            "starts_sentence": tf.cast(tf.equal(window_start, 0), tf.int32),
            "owned": owned}


def word_tag_ids(logits, windowed, num_words, crf=None):
    """The label id of every word: the prediction at its first piece in the window owning
    it (softmax: the argmax; crf: the Viterbi tags of each window's owned words, the
    start penalty on a text's first window); -1 for a word without pieces.

    Args:
      logits: [R, L, N] the model's logits of the packed windows.
      windowed: windows()' dict; num_words: W (int64).
      crf: a --crf tagger's CRF layer (its transitions and start_penalty), or None.

    Returns:
      [W] int32.
    """
    owned = windowed["owned"]
    at = owned[:, :2]
    if crf is None:
        predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
    else:
        weights = tf.scatter_nd(at, tf.ones(tf.shape(at)[:1], tf.float32),
                                tf.shape(logits, out_type=tf.int64)[:2])
        predicted = heads.crf_predictions(logits, crf(logits), weights, crf.start_penalty,
                                          windowed["starts_sentence"])
    return tf.tensor_scatter_nd_update(tf.fill([num_words], -1), owned[:, 2:],
                                       tf.gather_nd(predicted, at))


def _label_tables(labels):
    """Per label id: conlleval's prefix code (0 O, 1 B, 2 I, 3 E, 4 S) and type name."""
    prefixes, types = [], []
    for label in labels:
        prefix, dash, kind = label.partition("-")
        if label == "O":
            prefixes.append(0)
            types.append("")
        elif not dash:
            prefixes.append(2)
            types.append(label)
        else:
            prefixes.append({"B": 1, "I": 2, "E": 3, "S": 4}.get(prefix, 2))
            types.append(kind)
    return prefixes + [0], types + [""]  # id -1 (a word without pieces) reads as "O"


def tagged_outputs(text, words, tag_ids, labels):
    """Dense outputs of the tagger: word tags and spans, entities and their text.

    Args:
      text: [B] the texts; words: split_words' dict; tag_ids: [W] word_tag_ids'.

    Entities follow conlleval's chunk rules (ner_metrics.py): a word starts one when
    its tag is B-/S-, or follows O, E- or S-, or changes the type; it goes on over
    the words that do not.
    """
    tag_ids = words["word_start"].with_flat_values(tag_ids)
    prefixes, types = _label_tables(labels)
    flat = tag_ids.flat_values
    lookup = tf.where(flat < 0, len(labels), flat)
    prefix = tf.gather(tf.constant(prefixes), lookup)
    kind = tf.gather(tf.constant(types), lookup)
    first_of_text = tf.equal(tf.ragged.range(tag_ids.row_lengths()).flat_values, 0)
    previous_prefix = tf.where(first_of_text, 0, _before(prefix, 0))
    previous_kind = tf.where(first_of_text, "", _before(kind, ""))
    inside = prefix > 0
    starts = inside & ((prefix == 1) | (prefix == 4) | (previous_prefix == 0) |
                       (previous_prefix >= 3) | tf.not_equal(kind, previous_kind))
    entity_of_word = tf.cumsum(tf.cast(starts, tf.int64)) - 1
    word_ids = tf.range(tf.size(flat, out_type=tf.int64))
    start_word = graph_ops.boolean_mask(word_ids, starts)
    num_entities = tf.size(start_word, out_type=tf.int64)
    end_word = tf.math.unsorted_segment_max(graph_ops.boolean_mask(word_ids, inside),
                                            graph_ops.boolean_mask(entity_of_word, inside),
                                            num_entities)
    entity_start = tf.gather(words["word_start"].flat_values, start_word)
    entity_limit = tf.gather(words["word_limit"].flat_values, end_word)
    entity_text_row = tf.gather(graph_ops.value_rowids(tag_ids), start_word)
    decoded = tf.strings.unicode_decode(text, "UTF-8", errors="ignore")
    row_start = tf.gather(decoded.row_starts(), entity_text_row)
    chars = tf.gather(decoded.flat_values, tf.ragged.range(row_start + entity_start,
                                                           row_start + entity_limit))
    num_texts = tag_ids.nrows()

    def by_text(values, default):
        return tf.RaggedTensor.from_value_rowids(values, entity_text_row, nrows=num_texts,
                                                 validate=False).to_tensor(default)
    tag_names = tf.gather(tf.constant(list(labels) + ["O"]), lookup)
    return {
        "word_tags": tag_ids.with_flat_values(tag_names).to_tensor(""),
        "word_start": words["word_start"].to_tensor(-1),
        "word_end": words["word_limit"].to_tensor(-1),
        "num_words": tf.cast(tag_ids.row_lengths(), tf.int32),
        "entity_type": by_text(tf.gather(kind, start_word), ""),
        "entity_text": by_text(tf.strings.unicode_encode(chars, "UTF-8"), ""),
        "entity_start": by_text(entity_start, tf.constant(-1, tf.int64)),
        "entity_end": by_text(entity_limit, tf.constant(-1, tf.int64)),
        "num_entities": tf.cast(tf.math.bincount(tf.cast(entity_text_row, tf.int32),
                                                 minlength=tf.cast(num_texts, tf.int32),
                                                 maxlength=tf.cast(num_texts, tf.int32)),
                                tf.int32),
    }
