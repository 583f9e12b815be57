"""SQuAD examples and features: the json read, words mapped to answers, windows made.

What run_squad.py feeds the model, importable without the runner:
- `load_squad_json` / `examples_from_articles` / `read_squad_examples`: SquadExample
  objects (whitespace words, the answer's word span), with file and question named
  in every error;
- `convert_examples_to_features`: WordPiece windows of max_seq_length, doc_stride
  apart, each token marked with whether this window gives it the most context
  (input_pipeline.check_is_max_context, the rule every windowed task uses);
- `FeatureWriter`: the features' TFRecord file.
Conversion follows the reference exactly, so the features are the reference's.
"""
import collections
import collections.abc
import json

from absl import logging
import tensorflow as tf

from bert import tokenization  # ours, whatever tokenization.py a user's folder holds
from bert_tf2 import input_pipeline
from bert_tf2 import logs
from bert_tf2.tasks import data_tables
from bert_tf2.tasks import predict_inputs

# First unique id given to a feature (as in the original release, so ids match).
FIRST_UNIQUE_ID = 1000000000

# Examples (by index) whose features are written to the log in full.
_NUM_LOGGED_EXAMPLES = 20


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


def split_paragraph(text):
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


def source_name(source, flag):
    """How messages name a SQuAD source: its path, or "--predict_file (a dict)" for the
    parsed json object given from Python."""
    if isinstance(source, collections.abc.Mapping):
        return "--%s (a dict)" % flag
    return str(source)


def load_squad(source, flag):
    """The articles of a SQuAD source: a json file's path, or (from Python) its parsed
    object {"data": [articles]}; ValueError naming `flag` for another type or shape."""
    if isinstance(source, collections.abc.Mapping):
        if not isinstance(source.get("data"), list):
            raise ValueError("--%s (a dict) is not SQuAD json: it has no \"data\" list at the "
                             "top (keys: %s)" % (flag, ", ".join(repr(k) for k in source)))
        return source["data"]
    if not isinstance(source, (str, bytes)) and not hasattr(source, "__fspath__"):
        raise ValueError("--%s is a %s; expected a SQuAD json file or (from Python) its "
                         "parsed object {\"data\": [...]}" % (flag, type(source).__name__))
    return load_squad_json(str(source))


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
            doc_tokens, char_to_word = split_paragraph(context)
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


def predict_pairs(questions, contexts):
    """(questions, contexts), lists of str as long as each other, of what a squad model's
    predict() is given (run_squad.Predictor and LiteRTPredictor read it alike): a str is
    one of each; lists or tuples of str, pandas Series or numpy arrays of str; or a pandas
    DataFrame of the columns "question" and "context" as `questions` (contexts then None)
    (predict_inputs). One ValueError naming the argument for anything else."""
    names = ("questions", "contexts")
    questions, contexts = data_tables.texts_of(*predict_inputs.text_pairs(
        questions, contexts, names, [("question", "context")]), names=names)
    if contexts is None:
        raise ValueError("contexts is missing: one context per question (or a DataFrame "
                         "of the columns question and context)")
    return questions, contexts


def pair_examples(questions, contexts):
    """Prediction SquadExamples of (question, context) pairs given from Python: one SQuAD
    paragraph each, question ids "0", "1", ... in order."""
    articles = [{"paragraphs": [{"context": c, "qas": [{"id": str(i), "question": q}]}]}
                for i, (q, c) in enumerate(zip(questions, contexts))]
    return examples_from_articles(articles, is_training=False, source="questions")


def read_squad_examples(input_file, is_training, version_2_with_negative=False):
    """Reads a SQuAD json file into a list of SquadExample."""
    return examples_from_articles(load_squad_json(input_file), is_training,
                                  version_2_with_negative, source=input_file)


# ---------------------------------------------------------------------------
# Examples -> features
# ---------------------------------------------------------------------------



def improve_answer_span(doc_tokens, input_start, input_end, tokenizer, orig_answer_text):
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
    return improve_answer_span(doc_pieces, start, end, tokenizer, example.orig_answer_text)


def _log_feature(feature, is_training, is_impossible):
    if not logs.details_shown():  # the reference's dump: a log the user chose
        return
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

        spans = input_pipeline.doc_spans(len(doc_pieces), max_tokens_for_doc, doc_stride)
        for span_index, span in enumerate(spans):
            tokens = ["[CLS]"] + query + ["[SEP]"]
            segment_ids = [0] * len(tokens)
            token_to_orig_map = {}
            token_is_max_context = {}
            for piece_index in range(span.start, span.start + span.length):
                position = len(tokens)
                token_to_orig_map[position] = tok_to_orig[piece_index]
                token_is_max_context[position] = input_pipeline.check_is_max_context(
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
        """Writes one InputFeatures as a record."""
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
        """Closes the file (it appears under its name now)."""
        if self._open:
            self._open = False
            self._writer.__exit__(None, None, None)

    def abort(self):
        """Drops the partial file."""
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
