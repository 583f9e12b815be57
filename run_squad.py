"""Fine-tunes BERT for extractive question answering on SQuAD 1.1 / 2.0.

The run, top to bottom (see `run`):

  SQuAD json -> SquadExample (whitespace words, answer word span)
             -> InputFeatures (WordPiece windows of max_seq_length, doc_stride apart)
             -> train.tf_record / eval.tf_record in --output_dir
             -> BertSquad (start and end logits per token), trained with the mean of the
                start and end cross-entropies
             -> best answer spans mapped back to the original text
             -> predictions.json, nbest_predictions.json, null_odds.json (SQuAD 2.0),
                eval_results.txt (when the predict file carries answers).

Feature conversion and post-processing follow the original BERT release exactly, so
the files it writes are the ones the original code writes for the same logits.
"""
import startup  # first, before tensorflow: a quiet C++ start-up (startup.py)
import collections
import json
import math
import os
import random
import time

from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf

import fileutil
import flags_common
import input_pipeline
import modeling
import tokenization
import training

# First unique id given to a feature (as in the original release, so ids match).
FIRST_UNIQUE_ID = 1000000000

# Examples (by index) whose features are written to the log in full.
_NUM_LOGGED_EXAMPLES = 20

# Seed of the shuffle applied to the training examples before their features are written.
_TRAIN_SHUFFLE_SEED = 12345

# Seconds between two progress lines while predicting.
_PROGRESS_EVERY_S = 10.0


# ---------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------

def define_flags(fv):
    """Registers run_squad's flags on `fv`."""
    def string(name, default, help_text):
        flags.DEFINE_string(name, default, help_text, flag_values=fv)

    def integer(name, default, help_text):
        flags.DEFINE_integer(name, default, help_text, flag_values=fv)

    def boolean(name, default, help_text):
        flags.DEFINE_bool(name, default, help_text, flag_values=fv)

    def number(name, default, help_text):
        flags.DEFINE_float(name, default, help_text, flag_values=fv)

    string("bert_config_file", None,
           "bert_config.json of the pre-trained model (its architecture).")
    string("vocab_file", None, "WordPiece vocabulary the model was pre-trained with.")
    string("output_dir", None,
           "Where checkpoints, feature files and predictions are written.")
    string("train_file", None, "SQuAD json to train on, e.g. train-v1.1.json.")
    string("predict_file", None, "SQuAD json to predict, e.g. dev-v1.1.json.")
    string("init_checkpoint", None,
           "Checkpoint to start from, usually a pre-trained BERT (TF1 or TF2).")
    boolean("do_lower_case", True,
            "Lower-case (and strip accents from) the text: True for uncased models, "
            "False for cased ones.")
    integer("max_seq_length", 384,
            "Length in WordPiece tokens of every input (question + document window); "
            "shorter inputs are padded.")
    integer("doc_stride", 128,
            "How far apart the windows over a document too long for one input start.")
    integer("max_query_length", 64,
            "Questions longer than this many WordPiece tokens are cut to this length.")
    boolean("do_train", False, "Fine-tune on --train_file.")
    boolean("do_predict", False, "Write predictions for --predict_file.")
    integer("train_batch_size", 32, "Global batch size for training.")
    integer("predict_batch_size", 8, "Global batch size for prediction.")
    number("learning_rate", 5e-5, "Peak learning rate of Adam.")
    number("num_train_epochs", 3.0, "Number of passes over the training examples.")
    number("warmup_proportion", 0.1,
           "Fraction of the training steps over which the learning rate rises linearly "
           "from 0 (0.1 = the first 10%).")
    integer("n_best_size", 20,
            "How many candidate answers per question go to nbest_predictions.json "
            "(also how many top start and end positions per window are considered).")
    integer("max_answer_length", 30,
            "Longest answer, in WordPiece tokens, that may be predicted (start and end "
            "are predicted independently, so this bounds their distance).")
    boolean("verbose_logging", False,
            "Log every failure to map a predicted span back onto the original text "
            "(a number of them are normal on SQuAD).")
    boolean("version_2_with_negative", False,
            "SQuAD 2.0: some questions have no answer in their paragraph.")
    number("null_score_diff_threshold", 0.0,
           "SQuAD 2.0: answer nothing when the null score minus the best span's score "
           "is above this value.")
    boolean("rethreshold_predictions", False,
            "SQuAD 2.0 with answers in --predict_file: also write "
            "predictions_best_thresh.json, the predictions under the null threshold that "
            "maximises F1 on that file.")
    flags_common.define_training_flags(fv)


def validate_flags_or_throw(fv, bert_config):
    """Raises ValueError for a combination of flags the run cannot work with."""
    tokenization.validate_case_matches_checkpoint(fv.do_lower_case, fv.init_checkpoint)

    if not fv.do_train and not fv.do_predict:
        raise ValueError("At least one of --do_train or --do_predict must be set.")
    if fv.do_train and not fv.train_file:
        raise ValueError("--do_train needs --train_file.")
    if fv.do_predict and not fv.predict_file:
        raise ValueError("--do_predict needs --predict_file.")

    if fv.max_seq_length > bert_config.max_position_embeddings:
        raise ValueError(
            "--max_seq_length=%d is longer than the model supports: it was trained with "
            "max_position_embeddings=%d." %
            (fv.max_seq_length, bert_config.max_position_embeddings))
    if fv.max_seq_length <= fv.max_query_length + 3:
        raise ValueError(
            "--max_seq_length (%d) must be greater than --max_query_length (%d) + 3, "
            "so that every input keeps room for the document." %
            (fv.max_seq_length, fv.max_query_length))

    # Not checked by the original code, where these values hang or silently
    # produce nothing.
    for name in ("doc_stride", "n_best_size", "max_answer_length"):
        if getattr(fv, name) < 1:
            raise ValueError("--%s must be at least 1, got %d" % (name, getattr(fv, name)))


# ---------------------------------------------------------------------------
# Reading SQuAD json
# ---------------------------------------------------------------------------

class SquadExample(object):
    """One question with its paragraph, split into whitespace-separated words.

    start_position / end_position are indexes into doc_tokens (training only);
    they are -1 for an unanswerable SQuAD 2.0 question.
    """

    def __init__(self, qas_id, question_text, doc_tokens, orig_answer_text=None,
                 start_position=None, end_position=None, is_impossible=False):
        self.qas_id = qas_id
        self.question_text = question_text
        self.doc_tokens = doc_tokens
        self.orig_answer_text = orig_answer_text
        self.start_position = start_position
        self.end_position = end_position
        self.is_impossible = is_impossible

    def __repr__(self):
        parts = [
            "qas_id: %s" % tokenization.printable_text(self.qas_id),
            "question_text: %s" % tokenization.printable_text(self.question_text),
            "doc_tokens: [%s]" % " ".join(self.doc_tokens),
        ]
        # As in the original, the answer fields are shown only for a non-zero start.
        if self.start_position:
            parts.append("start_position: %d" % self.start_position)
            parts.append("end_position: %d" % self.end_position)
            parts.append("is_impossible: %r" % self.is_impossible)
        return ", ".join(parts)

    __str__ = __repr__


class InputFeatures(object):
    """One model input: the question and one window of the document.

    token_to_orig_map maps a position in `tokens` to the index of the whitespace
    word of the example it came from; token_is_max_context tells, per document
    position, whether this window is the one where the token has the most context.
    """

    def __init__(self, unique_id, example_index, doc_span_index, tokens, token_to_orig_map,
                 token_is_max_context, input_ids, input_mask, segment_ids,
                 start_position=None, end_position=None, is_impossible=None):
        self.unique_id = unique_id
        self.example_index = example_index
        self.doc_span_index = doc_span_index
        self.tokens = tokens
        self.token_to_orig_map = token_to_orig_map
        self.token_is_max_context = token_is_max_context
        self.input_ids = input_ids
        self.input_mask = input_mask
        self.segment_ids = segment_ids
        self.start_position = start_position
        self.end_position = end_position
        self.is_impossible = is_impossible


def _is_squad_whitespace(char):
    # Narrow no-break space (U+202F) separates words in a few SQuAD paragraphs.
    return char in (" ", "\t", "\r", "\n") or ord(char) == 0x202F


def _split_paragraph(text):
    """Splits `text` into words at whitespace.

    Returns:
      (words, char_to_word): char_to_word[i] is the index of the word holding
      character i, or of the last word before it for a whitespace character
      (-1 before the first word).
    """
    words = []
    char_to_word = []
    in_word = False
    for char in text:
        if _is_squad_whitespace(char):
            in_word = False
        elif in_word:
            words[-1] += char
        else:
            words.append(char)
            in_word = True
        char_to_word.append(len(words) - 1)
    return words, char_to_word


def load_squad_json(input_file):
    """Returns the list of articles (the "data" field) of a SQuAD json file."""
    if not tf.io.gfile.exists(input_file):
        raise ValueError("SQuAD file not found: %s" % input_file)
    try:
        with tf.io.gfile.GFile(input_file, "r") as reader:
            document = json.load(reader)
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError
        raise ValueError("%s is not valid SQuAD json: %s" % (input_file, e)) from e
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        raise ValueError("%s is not SQuAD json: it has no \"data\" list at the top" %
                         input_file)
    return document["data"]


def _field(record, key, where, expected_type=None):
    """record[key], or a ValueError saying which key of which record is missing."""
    if not isinstance(record, dict) or key not in record:
        raise ValueError("%s: missing key %r" % (where, key))
    value = record[key]
    if expected_type is not None and not isinstance(value, expected_type):
        raise ValueError("%s: %r should be of type %s, got %s" %
                         (where, key, expected_type.__name__, type(value).__name__))
    return value


def _answer_word_span(qa_id, answer, context, char_to_word, where):
    """Word indexes of the first and last word of `answer`, checked against `context`."""
    text = _field(answer, "text", where, str)
    start_char = _field(answer, "answer_start", where, int)
    if not text:
        raise ValueError("%s: the answer of question %s is empty" % (where, qa_id))
    end_char = start_char + len(text) - 1
    if start_char < 0 or end_char >= len(context):
        raise ValueError(
            "%s: the answer of question %s (characters %d to %d) lies outside its context "
            "of %d characters" % (where, qa_id, start_char, end_char, len(context)))
    return text, char_to_word[start_char], char_to_word[end_char]


def examples_from_articles(articles, is_training, version_2_with_negative=False,
                           source="SQuAD data"):
    """Turns SQuAD articles (the json "data" list) into SquadExamples.

    For training, answers whose text cannot be found in the words their offset
    points at are skipped with a warning (odd Unicode in a handful of SQuAD
    paragraphs), so not every question yields an example.
    """
    examples = []
    for article_index, article in enumerate(articles):
        where = "%s, article %d" % (source, article_index)
        for paragraph in _field(article, "paragraphs", where, list):
            context = _field(paragraph, "context", where, str)
            doc_tokens, char_to_word = _split_paragraph(context)
            for qa in _field(paragraph, "qas", where, list):
                qa_id = _field(qa, "id", where)
                q_where = "%s, question %s" % (source, qa_id)
                question = _field(qa, "question", q_where, str)
                example = SquadExample(qas_id=qa_id, question_text=question,
                                       doc_tokens=doc_tokens)
                if is_training and not _add_training_answer(
                        example, qa, context, char_to_word, version_2_with_negative,
                        q_where):
                    continue
                examples.append(example)
    return examples


def _add_training_answer(example, qa, context, char_to_word, version_2_with_negative,
                         where):
    """Sets the answer fields of a training example; False when it must be skipped."""
    if version_2_with_negative:
        example.is_impossible = _field(qa, "is_impossible", where, bool)
    if example.is_impossible:
        example.start_position = -1
        example.end_position = -1
        example.orig_answer_text = ""
        return True

    answers = _field(qa, "answers", where, list)
    if len(answers) != 1:
        raise ValueError("%s: for training, each question needs exactly 1 answer, got %d" %
                         (where, len(answers)))
    text, first_word, last_word = _answer_word_span(
        example.qas_id, answers[0], context, char_to_word, where)

    # The answer must be recoverable from the words; when it is not (odd
    # Unicode), the example is dropped rather than trained on a wrong span.
    found = " ".join(example.doc_tokens[first_word:last_word + 1])
    wanted = " ".join(tokenization.whitespace_tokenize(text))
    if wanted not in found:
        logging.warning("Could not find answer of question %s: '%s' vs. '%s'",
                        example.qas_id, found, wanted)
        return False
    example.orig_answer_text = text
    example.start_position = first_word
    example.end_position = last_word
    return True


def read_squad_examples(input_file, is_training, version_2_with_negative=False):
    """Reads a SQuAD json file into a list of SquadExample."""
    return examples_from_articles(load_squad_json(input_file), is_training,
                                  version_2_with_negative, source=input_file)


# ---------------------------------------------------------------------------
# Examples -> features
# ---------------------------------------------------------------------------

DocSpan = collections.namedtuple("DocSpan", ["start", "length"])


def _improve_answer_span(doc_tokens, input_start, input_end, tokenizer, orig_answer_text):
    """Narrows a WordPiece answer span to the tokens of the answer text, if possible.

    The annotated answer is a character span; projected on whitespace words it may
    include extra characters ("(1895-1943)." for the answer "1895"). After WordPiece
    the answer often is a sub-span of its own, which is then used instead. A
    sub-word answer ("Japan" in "Japanese") keeps the whole-word span.
    """
    wanted = " ".join(tokenizer.tokenize(orig_answer_text))
    for start in range(input_start, input_end + 1):
        # Longest candidate first for each start.
        for end in range(input_end, start - 1, -1):
            if " ".join(doc_tokens[start:end + 1]) == wanted:
                return start, end
    return input_start, input_end


def _check_is_max_context(doc_spans, cur_span_index, position):
    """Whether span `cur_span_index` gives the token at `position` its best context.

    A token covered by several windows is scored in each by the smaller of its
    left and right context, plus 1% of the window length as tie-breaker; the first
    window with the best score wins.
    """
    best_index = None
    best_score = None
    for index, span in enumerate(doc_spans):
        last = span.start + span.length - 1
        if not span.start <= position <= last:
            continue
        score = min(position - span.start, last - position) + 0.01 * span.length
        if best_score is None or score > best_score:
            best_index, best_score = index, score
    return best_index == cur_span_index


def _doc_spans(num_tokens, max_tokens_for_doc, doc_stride):
    """Windows of at most max_tokens_for_doc tokens, doc_stride apart, covering the doc."""
    spans = []
    start = 0
    while start < num_tokens:
        length = min(num_tokens - start, max_tokens_for_doc)
        spans.append(DocSpan(start=start, length=length))
        if start + length == num_tokens:
            break
        start += min(length, doc_stride)
    return spans


class _DocTokenizer(object):
    """WordPiece-tokenizes the words of a paragraph, reusing the result for the
    next question when it asks about the same paragraph (same word list)."""

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer
        self._words = None
        self._result = None

    def __call__(self, words):
        if words is not self._words:
            tok_to_orig, orig_to_tok, pieces = [], [], []
            for word_index, word in enumerate(words):
                orig_to_tok.append(len(pieces))
                for piece in self._tokenizer.tokenize(word):
                    tok_to_orig.append(word_index)
                    pieces.append(piece)
            self._words = words
            self._result = (tok_to_orig, orig_to_tok, pieces)
        return self._result


def _answer_token_span(example, orig_to_tok, doc_pieces, tokenizer):
    """First and last WordPiece index of a training example's answer (-1 if none)."""
    if example.is_impossible:
        return -1, -1
    start = orig_to_tok[example.start_position]
    if example.end_position + 1 < len(example.doc_tokens):
        end = orig_to_tok[example.end_position + 1] - 1
    else:
        end = len(doc_pieces) - 1
    return _improve_answer_span(doc_pieces, start, end, tokenizer, example.orig_answer_text)


def _log_feature(feature, is_training, is_impossible):
    logging.info("*** Example ***")
    logging.info("unique_id: %s", feature.unique_id)
    logging.info("example_index: %s", feature.example_index)
    logging.info("doc_span_index: %s", feature.doc_span_index)
    logging.info("tokens: %s", " ".join(tokenization.printable_text(t) for t in feature.tokens))
    logging.info("token_to_orig_map: %s", " ".join(
        "%d:%d" % item for item in feature.token_to_orig_map.items()))
    logging.info("token_is_max_context: %s", " ".join(
        "%d:%s" % item for item in feature.token_is_max_context.items()))
    logging.info("input_ids: %s", " ".join(str(x) for x in feature.input_ids))
    logging.info("input_mask: %s", " ".join(str(x) for x in feature.input_mask))
    logging.info("segment_ids: %s", " ".join(str(x) for x in feature.segment_ids))
    if not is_training:
        return
    if is_impossible:
        logging.info("impossible example")
    else:
        answer = " ".join(feature.tokens[feature.start_position:feature.end_position + 1])
        logging.info("start_position: %d", feature.start_position)
        logging.info("end_position: %d", feature.end_position)
        logging.info("answer: %s", tokenization.printable_text(answer))


def convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride,
                                 max_query_length, is_training, output_fn):
    """Builds the model inputs of every example and hands each to `output_fn`.

    Every input is [CLS] question [SEP] window of the document [SEP], padded to
    max_seq_length; a document longer than the room left by the question is cut
    into overlapping windows starting doc_stride tokens apart. For training, the
    answer position is the one inside the window, or 0 ([CLS]) when the window
    does not hold the whole answer or the question has none.

    Returns:
      The number of features produced.
    """
    unique_id = FIRST_UNIQUE_ID
    doc_tokenizer = _DocTokenizer(tokenizer)
    for example_index, example in enumerate(examples):
        query = tokenizer.tokenize(example.question_text)[:max_query_length]
        tok_to_orig, orig_to_tok, doc_pieces = doc_tokenizer(example.doc_tokens)

        answer_start = answer_end = None
        if is_training:
            answer_start, answer_end = _answer_token_span(
                example, orig_to_tok, doc_pieces, tokenizer)

        # Room for the document beside [CLS] question [SEP] ... [SEP].
        max_tokens_for_doc = max_seq_length - len(query) - 3
        if max_tokens_for_doc < 1:
            raise ValueError(
                "question %s leaves no room for its document: %d question tokens with "
                "max_seq_length=%d (lower max_query_length or raise max_seq_length)" %
                (example.qas_id, len(query), max_seq_length))

        spans = _doc_spans(len(doc_pieces), max_tokens_for_doc, doc_stride)
        for span_index, span in enumerate(spans):
            tokens = ["[CLS]"] + query + ["[SEP]"]
            segment_ids = [0] * len(tokens)
            token_to_orig_map = {}
            token_is_max_context = {}
            for piece_index in range(span.start, span.start + span.length):
                position = len(tokens)
                token_to_orig_map[position] = tok_to_orig[piece_index]
                token_is_max_context[position] = _check_is_max_context(
                    spans, span_index, piece_index)
                tokens.append(doc_pieces[piece_index])
            tokens.append("[SEP]")
            segment_ids += [1] * (span.length + 1)

            input_ids = tokenizer.convert_tokens_to_ids(tokens)
            input_mask = [1] * len(input_ids)
            padding = max_seq_length - len(input_ids)
            input_ids += [0] * padding
            input_mask += [0] * padding
            segment_ids += [0] * padding

            start_position = end_position = None
            if is_training:
                start_position = end_position = 0
                span_last = span.start + span.length - 1
                if (not example.is_impossible and answer_start >= span.start
                        and answer_end <= span_last):
                    shift = len(query) + 2 - span.start
                    start_position = answer_start + shift
                    end_position = answer_end + shift

            feature = InputFeatures(
                unique_id=unique_id, example_index=example_index,
                doc_span_index=span_index, tokens=tokens,
                token_to_orig_map=token_to_orig_map,
                token_is_max_context=token_is_max_context,
                input_ids=input_ids, input_mask=input_mask, segment_ids=segment_ids,
                start_position=start_position, end_position=end_position,
                is_impossible=example.is_impossible)
            if example_index < _NUM_LOGGED_EXAMPLES:
                _log_feature(feature, is_training, example.is_impossible)
            output_fn(feature)
            unique_id += 1
    return unique_id - FIRST_UNIQUE_ID


class FeatureWriter(object):
    """Writes InputFeatures as tf.train.Examples to one TFRecord file.

    The file appears under its name only when `close` is called; after an error
    (`abort`, or leaving a `with` block by an exception) nothing is left behind.
    """

    def __init__(self, filename, is_training):
        self.filename = filename
        self.is_training = is_training
        self.num_features = 0
        self._writer = input_pipeline.RecordWriter(filename)
        self._writer.__enter__()
        self._open = True

    def process_feature(self, feature):
        ints = input_pipeline.int_feature
        record = collections.OrderedDict()
        record["unique_ids"] = ints([feature.unique_id])
        record["input_ids"] = ints(feature.input_ids)
        record["input_mask"] = ints(feature.input_mask)
        record["segment_ids"] = ints(feature.segment_ids)
        if self.is_training:
            record["start_positions"] = ints([feature.start_position])
            record["end_positions"] = ints([feature.end_position])
            record["is_impossible"] = ints([1 if feature.is_impossible else 0])
        self._writer.write(record)
        self.num_features += 1

    def close(self):
        if self._open:
            self._open = False
            self._writer.__exit__(None, None, None)

    def abort(self):
        if self._open:
            self._open = False
            error = RuntimeError("aborted")
            self._writer.__exit__(type(error), error, None)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()
        return False


# ---------------------------------------------------------------------------
# Model outputs -> answers
# ---------------------------------------------------------------------------

RawResult = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])

# What post-processing keeps of one window's logits: the n-best (index, logit)
# pairs for start and end, best first, and the logits at [CLS] (the null answer).
CompactResult = collections.namedtuple(
    "CompactResult",
    ["unique_id", "start_candidates", "end_candidates", "null_start_logit", "null_end_logit"])

# What post-processing keeps of one feature.
FeatureSummary = collections.namedtuple(
    "FeatureSummary",
    ["unique_id", "example_index", "tokens", "token_to_orig_map", "token_is_max_context"])


def summarize_feature(feature):
    return FeatureSummary(feature.unique_id, feature.example_index, feature.tokens,
                          feature.token_to_orig_map, feature.token_is_max_context)


def _get_best_indexes(logits, n_best_size):
    """Indexes of the n_best_size largest logits, largest first (ties: lower index first)."""
    ranked = sorted(range(len(logits)), key=lambda i: logits[i], reverse=True)
    return ranked[:n_best_size]


def _compute_softmax(scores):
    """Softmax of a list of floats (empty list -> empty list)."""
    if not scores:
        return []
    top = max(scores)
    exps = [math.exp(score - top) for score in scores]
    total = 0.0
    for value in exps:  # summed in order, as the original does
        total += value
    return [value / total for value in exps]


def compact_result(unique_id, start_logits, end_logits, n_best_size):
    """Keeps the top n_best_size start/end candidates of one window's logits."""
    return compact_batch([unique_id], np.asarray(start_logits)[None],
                         np.asarray(end_logits)[None], n_best_size)[0]


def compact_batch(unique_ids, start_logits, end_logits, n_best_size):
    """compact_result for a batch: logits are [batch, seq_length] arrays."""
    start_logits = np.asarray(start_logits)
    end_logits = np.asarray(end_logits)

    def candidates(logits):
        # A stable sort of the negated logits ranks ties by position, as sorting
        # the logits in descending order with Python's stable sort does.
        order = np.argsort(-logits, axis=1, kind="stable")[:, :n_best_size]
        values = np.take_along_axis(logits, order, axis=1)
        return [list(zip(row_order.tolist(), [float(v) for v in row_values]))
                for row_order, row_values in zip(order, values)]

    starts = candidates(start_logits)
    ends = candidates(end_logits)
    return [CompactResult(int(uid), s, e, float(start_logits[i, 0]), float(end_logits[i, 0]))
            for i, (uid, s, e) in enumerate(zip(unique_ids, starts, ends))]


def _as_compact(result, n_best_size):
    if isinstance(result, CompactResult):
        return result
    return CompactResult(
        int(result.unique_id),
        [(i, float(result.start_logits[i]))
         for i in _get_best_indexes(result.start_logits, n_best_size)],
        [(i, float(result.end_logits[i]))
         for i in _get_best_indexes(result.end_logits, n_best_size)],
        float(result.start_logits[0]), float(result.end_logits[0]))


def _drop_spaces(text):
    """Returns (text without " ", position in `text` of each kept character)."""
    positions = [i for i, char in enumerate(text) if char != " "]
    return "".join(text[i] for i in positions), positions


def get_final_text(pred_text, orig_text, do_lower_case, verbose_logging=False):
    """Finds the part of `orig_text` that the normalized prediction `pred_text` covers.

    `orig_text` is the run of original words the predicted tokens came from, e.g.
    "Steve Smith's" for the prediction "steve smith". The original words are run
    through the basic tokenizer (the normalization the prediction went through);
    when that leaves as many non-space characters as the original, the two are
    aligned character by character and the prediction's extent is cut out of the
    original ("Steve Smith"). When the alignment fails, `orig_text` is returned.
    """
    def give_up(message, *args):
        if verbose_logging:
            logging.info(message, *args)
        return orig_text

    basic = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
    tok_text = " ".join(basic.tokenize(orig_text))

    first = tok_text.find(pred_text)
    if first == -1:
        return give_up("Unable to find text: '%s' in '%s'", pred_text, orig_text)
    last = first + len(pred_text) - 1

    orig_chars, orig_positions = _drop_spaces(orig_text)
    tok_chars, tok_positions = _drop_spaces(tok_text)
    if len(orig_chars) != len(tok_chars):
        return give_up("Length not equal after stripping spaces: '%s' vs '%s'",
                       orig_chars, tok_chars)

    # Character k without spaces is at tok_positions[k] in tok_text and at
    # orig_positions[k] in orig_text.
    tok_position_to_char = {position: k for k, position in enumerate(tok_positions)}
    if first not in tok_position_to_char:
        return give_up("Couldn't map start position")
    if last not in tok_position_to_char:
        return give_up("Couldn't map end position")
    orig_first = orig_positions[tok_position_to_char[first]]
    orig_last = orig_positions[tok_position_to_char[last]]
    return orig_text[orig_first:orig_last + 1]


_Candidate = collections.namedtuple(
    "_Candidate", ["feature_index", "start_index", "end_index", "start_logit", "end_logit"])

_NbestEntry = collections.namedtuple("_NbestEntry", ["text", "start_logit", "end_logit"])

SquadPredictions = collections.namedtuple(
    "SquadPredictions", ["predictions", "nbest", "null_odds", "best_non_null"])
SquadPredictions.__doc__ = """Post-processed answers, each an OrderedDict keyed by question id.

predictions: the answer text ("" = no answer, SQuAD 2.0).
nbest: list of OrderedDicts (text, probability, start_logit, end_logit), best first.
null_odds: SQuAD 2.0 only, null score minus the best non-null span's score.
best_non_null: SQuAD 2.0 only, the best non-empty answer ("" when there is none).
"""


def _span_candidates(feature_index, feature, result, max_answer_length):
    """Valid (start, end) pairs among a window's n-best starts and ends, in that order."""
    found = []
    num_tokens = len(feature.tokens)
    for start, start_logit in result.start_candidates:
        # Only starts inside the document part, in the window where they have
        # the most context.
        if (start >= num_tokens or start not in feature.token_to_orig_map
                or not feature.token_is_max_context.get(start, False)):
            continue
        for end, end_logit in result.end_candidates:
            if end >= num_tokens or end not in feature.token_to_orig_map:
                continue
            if end < start or end - start + 1 > max_answer_length:
                continue
            found.append(_Candidate(feature_index, start, end, start_logit, end_logit))
    return found


def _candidate_text(candidate, feature, example, do_lower_case, verbose_logging):
    """The original-text answer of a non-null candidate span."""
    pieces = feature.tokens[candidate.start_index:candidate.end_index + 1]
    # Glue WordPieces back into words, then normalize whitespace.
    joined = " ".join(pieces).replace(" ##", "").replace("##", "")
    pred_text = " ".join(joined.strip().split())
    first_word = feature.token_to_orig_map[candidate.start_index]
    last_word = feature.token_to_orig_map[candidate.end_index]
    orig_text = " ".join(example.doc_tokens[first_word:last_word + 1])
    return get_final_text(pred_text, orig_text, do_lower_case, verbose_logging)


def _predict_example(example, features, results_by_id, n_best_size, max_answer_length,
                     do_lower_case, version_2_with_negative, verbose_logging):
    """Returns (nbest list of _NbestEntry, null score) for one question."""
    candidates = []
    # The null answer is scored in the window where it scores lowest.
    null_score = 1000000
    null_feature_index = 0
    null_start_logit = null_end_logit = 0
    for feature_index, feature in enumerate(features):
        if feature.unique_id not in results_by_id:
            raise ValueError("no model output for feature %d of question %s" %
                             (feature.unique_id, example.qas_id))
        result = results_by_id[feature.unique_id]
        if version_2_with_negative:
            window_null = result.null_start_logit + result.null_end_logit
            if window_null < null_score:
                null_score = window_null
                null_feature_index = feature_index
                null_start_logit = result.null_start_logit
                null_end_logit = result.null_end_logit
        candidates.extend(_span_candidates(feature_index, feature, result, max_answer_length))
    if version_2_with_negative:
        candidates.append(_Candidate(null_feature_index, 0, 0, null_start_logit,
                                     null_end_logit))
    # sorted() is stable: equal scores keep the order they were found in.
    candidates = sorted(candidates, key=lambda c: c.start_logit + c.end_logit, reverse=True)

    nbest = []
    seen = set()
    for candidate in candidates:
        if len(nbest) >= n_best_size:
            break
        if candidate.start_index > 0:
            text = _candidate_text(candidate, features[candidate.feature_index], example,
                                   do_lower_case, verbose_logging)
            if text in seen:
                continue
        else:
            text = ""
        seen.add(text)
        nbest.append(_NbestEntry(text, candidate.start_logit, candidate.end_logit))

    if version_2_with_negative and "" not in seen:
        nbest.append(_NbestEntry("", null_start_logit, null_end_logit))
    if not nbest:
        # No valid span at all (rare): a placeholder keeps the output complete.
        nbest.append(_NbestEntry("empty", 0.0, 0.0))
    return nbest, null_score


def _thresholded_answer(best_non_null_text, null_odds, threshold):
    """SQuAD 2.0 rule: no answer when the null odds exceed the threshold."""
    return "" if null_odds > threshold else best_non_null_text


def _apply_null_threshold(best_non_null, null_odds, threshold):
    """_thresholded_answer for every question."""
    return collections.OrderedDict(
        (qid, _thresholded_answer(text, null_odds[qid], threshold))
        for qid, text in best_non_null.items())


def compute_predictions(all_examples, all_features, all_results, n_best_size,
                        max_answer_length, do_lower_case, version_2_with_negative=False,
                        null_score_diff_threshold=0.0, verbose_logging=False):
    """Picks the answer of every example from its windows' logits.

    Args:
      all_examples: SquadExamples, in the order their features were made.
      all_features: InputFeatures (or FeatureSummary) of all examples.
      all_results: RawResult (full logits) or CompactResult per feature.

    Returns:
      SquadPredictions.
    """
    features_by_example = collections.defaultdict(list)
    for feature in all_features:
        features_by_example[feature.example_index].append(feature)
    results_by_id = {}
    for result in all_results:
        compact = _as_compact(result, n_best_size)
        results_by_id[compact.unique_id] = compact

    predictions = collections.OrderedDict()
    all_nbest = collections.OrderedDict()
    null_odds = collections.OrderedDict()
    best_non_null = collections.OrderedDict()
    for example_index, example in enumerate(all_examples):
        nbest, null_score = _predict_example(
            example, features_by_example[example_index], results_by_id, n_best_size,
            max_answer_length, do_lower_case, version_2_with_negative, verbose_logging)

        probabilities = _compute_softmax([e.start_logit + e.end_logit for e in nbest])
        all_nbest[example.qas_id] = [
            collections.OrderedDict([("text", entry.text), ("probability", probability),
                                     ("start_logit", entry.start_logit),
                                     ("end_logit", entry.end_logit)])
            for entry, probability in zip(nbest, probabilities)]

        if not version_2_with_negative:
            predictions[example.qas_id] = nbest[0].text
            continue
        best = next((entry for entry in nbest if entry.text), None)
        if best is None:
            # Only the null answer survived (the original code fails here).
            logging.warning("question %s has no non-null candidate answer", example.qas_id)
            best_non_null[example.qas_id] = ""
            null_odds[example.qas_id] = null_score
        else:
            best_non_null[example.qas_id] = best.text
            null_odds[example.qas_id] = null_score - best.start_logit - best.end_logit
        predictions[example.qas_id] = _thresholded_answer(
            best_non_null[example.qas_id], null_odds[example.qas_id],
            null_score_diff_threshold)
    return SquadPredictions(predictions, all_nbest, null_odds, best_non_null)


def write_json(obj, path):
    """Writes `obj` as the original does (indent=4, trailing newline), atomically."""
    text = json.dumps(obj, indent=4) + "\n"
    with fileutil.atomic_open(path, "w") as f:
        f.write(text)


def write_predictions(all_examples, all_features, all_results, n_best_size,
                      max_answer_length, do_lower_case, output_prediction_file,
                      output_nbest_file, output_null_log_odds_file,
                      version_2_with_negative=False, null_score_diff_threshold=0.0,
                      verbose_logging=False):
    """Computes the answers (see compute_predictions) and writes the json files.

    predictions.json maps question id -> answer, nbest_predictions.json question
    id -> n-best list, and for SQuAD 2.0 null_odds.json question id -> null score
    minus the best span's score. Each file is complete or absent.

    Returns:
      SquadPredictions.
    """
    logging.info("Writing predictions to: %s", output_prediction_file)
    logging.info("Writing nbest to: %s", output_nbest_file)
    result = compute_predictions(
        all_examples, all_features, all_results, n_best_size, max_answer_length,
        do_lower_case, version_2_with_negative, null_score_diff_threshold, verbose_logging)
    write_json(result.predictions, output_prediction_file)
    write_json(result.nbest, output_nbest_file)
    if version_2_with_negative:
        write_json(result.null_odds, output_null_log_odds_file)
    return result


# ---------------------------------------------------------------------------
# Official SQuAD metrics
# ---------------------------------------------------------------------------

def has_gold_answers(articles, version_2_with_negative):
    """Whether every question carries answers the official metric can score."""
    for article in articles:
        for paragraph in article.get("paragraphs", []):
            for qa in paragraph.get("qas", []):
                answers = qa.get("answers")
                if not isinstance(answers, list):
                    return False
                if not answers and not version_2_with_negative:
                    return False
                if not all(isinstance(a, dict) and isinstance(a.get("text"), str)
                           for a in answers):
                    return False
    return True


def evaluate_predictions(articles, squad_predictions, version_2_with_negative):
    """EM / F1 of the predictions with the official SQuAD evaluation (in percent).

    SQuAD 1.1: exact_match, f1. SQuAD 2.0: exact, f1, total, HasAns_* / NoAns_*, and
    the best null threshold search of the official 2.0 script: best_exact(_thresh),
    best_f1(_thresh). The search runs over the best non-null answers with the null
    odds as the no-answer scores, so it is exact for thresholds on both sides of the
    one the predictions were made with.
    """
    # Imported here so that tf-models-official is loaded only when scoring.
    from official.nlp.tools import squad_evaluate_v1_1, squad_evaluate_v2_0

    if not version_2_with_negative:
        scores = squad_evaluate_v1_1.evaluate(articles, squad_predictions.predictions)
        num_questions = sum(len(p["qas"]) for a in articles for p in a["paragraphs"])
        return collections.OrderedDict([
            ("exact_match", 100.0 * scores["exact_match"]),
            ("f1", 100.0 * scores["final_f1"]),
            ("total", num_questions),
        ])

    plain = squad_evaluate_v2_0.evaluate(articles, squad_predictions.predictions)
    results = collections.OrderedDict(
        (key, value) for key, value in plain.items()
        if not key.startswith(("final_", "pr_")))
    search = squad_evaluate_v2_0.evaluate(
        articles, squad_predictions.best_non_null, na_probs=squad_predictions.null_odds)
    for ours, theirs in (("best_exact", "final_exact"), ("best_exact_thresh", "final_exact_thresh"),
                         ("best_f1", "final_f1"), ("best_f1_thresh", "final_f1_thresh")):
        results[ours] = search[theirs]
    return results


# ---------------------------------------------------------------------------
# Model: loss and prediction
# ---------------------------------------------------------------------------

def squad_loss(start_logits, end_logits, start_positions, end_positions):
    """Mean of the start and end cross-entropies over the positions of the sequence."""
    def cross_entropy(logits, positions):
        logits = tf.cast(logits, tf.float32)
        one_hot = tf.one_hot(positions, depth=tf.shape(logits)[-1], dtype=tf.float32)
        log_probs = tf.nn.log_softmax(logits, axis=-1)
        return -tf.reduce_mean(tf.reduce_sum(one_hot * log_probs, axis=-1))

    start_loss = cross_entropy(start_logits, start_positions)
    end_loss = cross_entropy(end_logits, end_positions)
    return (start_loss + end_loss) / 2.0


def _loss_fn(model, features, training):
    outputs = model(features, training=training)
    loss = squad_loss(outputs["start_logits"], outputs["end_logits"],
                      features["start_positions"], features["end_positions"])
    return loss, {}


def _predict_fn(model, features):
    outputs = model(features, training=False)
    return {
        "unique_ids": features["unique_ids"],
        "is_real_example": features["is_real_example"],
        "start_logits": tf.cast(outputs["start_logits"], tf.float32),
        "end_logits": tf.cast(outputs["end_logits"], tf.float32),
    }


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------

def _write_features(path, examples, tokenizer, fv, is_training, keep=None):
    """Converts `examples` into a TFRecord file; returns the number of features."""
    with FeatureWriter(path, is_training=is_training) as writer:
        def output(feature):
            writer.process_feature(feature)
            if keep is not None:
                keep.append(summarize_feature(feature))

        convert_examples_to_features(
            examples=examples, tokenizer=tokenizer, max_seq_length=fv.max_seq_length,
            doc_stride=fv.doc_stride, max_query_length=fv.max_query_length,
            is_training=is_training, output_fn=output)
    return writer.num_features


def _train(fv, bert_config, tokenizer, train_examples, strategy):
    num_train_steps = int(len(train_examples) / fv.train_batch_size * fv.num_train_epochs)
    num_warmup_steps = int(num_train_steps * fv.warmup_proportion)
    if num_train_steps < 1:
        raise ValueError(
            "%d training examples at --train_batch_size=%d for %s epochs make no training "
            "step" % (len(train_examples), fv.train_batch_size, fv.num_train_epochs))

    # Shuffled once here so that the small shuffle buffer of the input pipeline suffices.
    random.Random(_TRAIN_SHUFFLE_SEED).shuffle(train_examples)
    train_file = os.path.join(fv.output_dir, "train.tf_record")
    num_features = _write_features(train_file, train_examples, tokenizer, fv,
                                   is_training=True)

    logging.info("***** Running training *****")
    logging.info("  Num orig examples = %d", len(train_examples))
    logging.info("  Num split examples = %d", num_features)
    logging.info("  Batch size = %d", fv.train_batch_size)
    logging.info("  Num steps = %d", num_train_steps)

    spec = input_pipeline.squad_features(fv.max_seq_length, is_training=True)

    def dataset_fn(input_context=None):
        return input_pipeline.make_dataset(
            train_file, spec, fv.train_batch_size, is_training=True,
            input_context=input_context, seed=fv.seed)

    runner = _make_runner(fv, bert_config, strategy, num_train_steps, num_warmup_steps)
    runner.train(dataset_fn, _loss_fn, global_batch_size=fv.train_batch_size)
    return runner


def _make_runner(fv, bert_config, strategy, num_train_steps=0, num_warmup_steps=0):
    cfg = training.RunConfig.from_flags(
        fv, output_dir=fv.output_dir, learning_rate=fv.learning_rate,
        num_train_steps=num_train_steps, num_warmup_steps=num_warmup_steps,
        init_checkpoint=fv.init_checkpoint)
    return training.Runner(
        strategy, lambda: modeling.BertSquad(bert_config, use_one_hot_embeddings=fv.use_tpu),
        cfg, for_training=num_train_steps > 0)


def _predict(fv, runner, eval_examples, tokenizer):
    """Runs the model over the eval features; returns (summaries, compact results)."""
    eval_file = os.path.join(fv.output_dir, "eval.tf_record")
    summaries = []
    num_features = _write_features(eval_file, eval_examples, tokenizer, fv,
                                   is_training=False, keep=summaries)

    logging.info("***** Running predictions *****")
    logging.info("  Num orig examples = %d", len(eval_examples))
    logging.info("  Num split examples = %d", num_features)
    logging.info("  Batch size = %d", fv.predict_batch_size)

    spec = input_pipeline.squad_features(fv.max_seq_length, is_training=False)

    def dataset_fn(input_context=None):
        return input_pipeline.make_dataset(
            eval_file, spec, fv.predict_batch_size, is_training=False,
            input_context=input_context, pad_final_batch=True)

    results = []
    started = last_report = time.time()
    for batch in runner.predict(dataset_fn, _predict_fn):
        real = np.asarray(batch["is_real_example"]).astype(bool)
        results.extend(compact_batch(
            np.asarray(batch["unique_ids"])[real], np.asarray(batch["start_logits"])[real],
            np.asarray(batch["end_logits"])[real], fv.n_best_size))
        now = time.time()
        if now - last_report >= _PROGRESS_EVERY_S or len(results) == num_features:
            last_report = now
            done = summaries[len(results) - 1].example_index + 1 if results else 0
            logging.info("Predicted %d/%d features, %d/%d examples, %.1f examples/s",
                         len(results), num_features, done, len(eval_examples),
                         done / max(now - started, 1e-9))
    if len(results) != num_features:
        raise ValueError("the model returned %d results for %d features" %
                         (len(results), num_features))
    return summaries, results


def _evaluate(fv, articles, squad_predictions):
    if not has_gold_answers(articles, fv.version_2_with_negative):
        logging.info("Not every question of %s has answers: EM/F1 not computed",
                     fv.predict_file)
        return None
    results = evaluate_predictions(articles, squad_predictions, fv.version_2_with_negative)
    logging.info("***** Eval results *****")
    fileutil.write_eval_results(os.path.join(fv.output_dir, "eval_results.txt"), results)
    return results


def run(fv):
    """The whole run: optional training, then optional prediction and scoring."""
    flags_common.require(fv, ("vocab_file", "bert_config_file", "output_dir"))

    bert_config = modeling.BertConfig.from_json_file(fv.bert_config_file)
    validate_flags_or_throw(fv, bert_config)
    tf.io.gfile.makedirs(fv.output_dir)
    tokenizer = tokenization.FullTokenizer(vocab_file=fv.vocab_file,
                                           do_lower_case=fv.do_lower_case)

    # Both files are read before anything long runs, so bad input fails early.
    train_examples = eval_examples = eval_articles = None
    if fv.do_train:
        train_examples = read_squad_examples(fv.train_file, is_training=True,
                                             version_2_with_negative=fv.version_2_with_negative)
    if fv.do_predict:
        eval_articles = load_squad_json(fv.predict_file)
        eval_examples = examples_from_articles(
            eval_articles, is_training=False,
            version_2_with_negative=fv.version_2_with_negative, source=fv.predict_file)

    training.set_seed(fv.seed)
    training.configure_precision(fv)
    strategy = training.get_strategy(fv)

    runner = None
    if fv.do_train:
        runner = _train(fv, bert_config, tokenizer, train_examples, strategy)
        del train_examples
    if not fv.do_predict:
        return None

    if runner is None:
        runner = _make_runner(fv, bert_config, strategy)
    summaries, results = _predict(fv, runner, eval_examples, tokenizer)
    squad_predictions = write_predictions(
        eval_examples, summaries, results, fv.n_best_size, fv.max_answer_length,
        fv.do_lower_case,
        os.path.join(fv.output_dir, "predictions.json"),
        os.path.join(fv.output_dir, "nbest_predictions.json"),
        os.path.join(fv.output_dir, "null_odds.json"),
        version_2_with_negative=fv.version_2_with_negative,
        null_score_diff_threshold=fv.null_score_diff_threshold,
        verbose_logging=fv.verbose_logging)

    metrics = _evaluate(fv, eval_articles, squad_predictions)
    if fv.rethreshold_predictions:
        _rethreshold(fv, squad_predictions, metrics)
    return metrics


def _effective_best_threshold(metrics):
    """The null threshold whose predictions score metrics["best_f1"].

    The official search starts from "every question unanswered" with threshold 0.0
    and reports 0.0 when no threshold does better; that state is reached by a
    threshold below every null odds instead.
    """
    all_null = 100.0 * metrics.get("NoAns_total", 0) / metrics["total"]
    if metrics["best_f1"] == all_null:
        return float("-inf")
    return metrics["best_f1_thresh"]


def _rethreshold(fv, squad_predictions, metrics):
    if not fv.version_2_with_negative or metrics is None:
        logging.warning("--rethreshold_predictions needs --version_2_with_negative and "
                        "answers in --predict_file; nothing re-thresholded")
        return
    threshold = _effective_best_threshold(metrics)
    path = os.path.join(fv.output_dir, "predictions_best_thresh.json")
    logging.info("Writing predictions with null threshold %s (best F1 %s) to %s",
                 threshold, metrics["best_f1"], path)
    write_json(_apply_null_threshold(squad_predictions.best_non_null,
                                     squad_predictions.null_odds, threshold), path)


def main():
    flags_common.run_cli(define_flags, run)


if __name__ == "__main__":
    main()
