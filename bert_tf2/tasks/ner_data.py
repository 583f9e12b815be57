"""Token tagging data in the CoNLL layout (NER): reading, labels, windowed features.

The files: one token per line, whitespace-separated columns, the word first and
its tag last (CoNLL-2003's `WORD POS CHUNK TAG` and the common `WORD TAG` read
alike), a blank line between sentences, `-DOCSTART-` lines between documents (a
file without them is one document). Tags may be IOB1 or IOB2 (or IOBES): they
are learned as they are, and the metric (ner_metrics.py) scores entities, which
reads the schemes alike. A file to tag may hold words only (one column).

The label list is the training file's tags, "O" first, the others sorted; it is
saved as output_dir/label_list.txt (LABELS_FILE_NAME) and read back by runs that
do not train.

A text to tag (run_ner.predict on a str, the exported tagger, LiteRT) is one sentence
whose words are split by the word rule of split_words: at the ASCII blanks a CoNLL file's
words cannot hold (WORD_BLANKS), and nowhere else.

Features follow BERT's recipe for tagging: every word is WordPiece-tokenized
with the reference's FullTokenizer, the first piece of a word carries the word's
label and the rest, [CLS], [SEP] and the padding carry none (weight 0). No word
is dropped: a sentence longer than one sequence is cut into windows
`doc_stride` pieces apart, and each word counts (loss, metric, prediction) in
the window where it has the most context, the rule run_squad uses for answers
(input_pipeline.check_is_max_context). A word that tokenizes to nothing (a
control character, say) has no piece and is predicted "O".

With document context (the BERT paper's CoNLL setting), a sentence that fits in
one window is surrounded by the pieces of the sentences before and after it in
the same document, as many as fit, labels only on the sentence itself; a
sentence cut into windows gets none.

Contracts with the other modules (bert_tf2/tasks/ner_data.py / ner_metrics.py (conlleval)):
write_predictions(path, conll_file, tags) writes conlleval.pl's layout: columns joined by
one space, the predicted tag last, every non-blank line (-DOCSTART- lines too, tagged O) as
wide as the token lines; read_predictions(path) -> (gold, predicted) per sentence,
ValueError naming the line of another width. ner_metrics.score(gold, predicted) counts as
conlleval.pl (no flags) does, word by word with a blank line after each sentence (bare tags:
chunk tags of no type, with a warning); it returns precision/recall/f1/accuracy, the counts
correct/predicted/gold and per_type. tests/test_ner_metrics.py runs the real conlleval.pl
when perl and the script ($CONLLEVAL, PATH or ../shared/conlleval.pl) are there; the script
itself is not in the repo (it carries no license). Feature.starts_sentence (records:
`starts_sentence` int64 []) is 1 for a sentence's first window, whose chain starts at its
first word. iob2_break(conll_file) names the first tag breaking IOB2 (FILE, line N: I-X
after Y / starts a sentence); to_iob2(conll_file, labels) -> (file, changed, left) makes
those B-X where B-X is a label; auto_tag_scheme(conll_file, labels) -> (scheme, why).
hf_task(contents, found, init_checkpoint, labels_file, notes) is the tagger in the
HuggingFace export (head_classes.Tagger.hf_task): its labels and a --crf tagger's
HF_CRF_FILE record.
"""
import collections
import re

import numpy as np
import tensorflow as tf

from bert_tf2 import fileutil
from bert_tf2 import input_pipeline
from bert_tf2.tasks import label_order
from bert_tf2.tasks import predict_inputs
from bert_tf2.text import fast_batch

DOCSTART = "-DOCSTART-"
OUTSIDE = "O"
LABELS_FILE_NAME = fileutil.LABEL_LIST_FILE
# run_ner's --doc_stride default: the windows of a model folder that does not say.
DEFAULT_DOC_STRIDE = 128

# Columns are split on ASCII blanks only, and lines on "\n" only (as conlleval does):
# Python's own split() and splitlines() also break on characters such as U+0085 or
# U+2028, which a word may contain.
_BLANKS = " \t\r\f\v"
_COLUMN_SPLIT = re.compile("[%s]+" % _BLANKS)

# The word rule of every door of a tagger (run_ner's files, predict() on a str, the
# SavedModel's serving_default, LiteRT): a text's words are its runs of characters other
# than these six ASCII blanks, the characters a CoNLL file's word can never hold (its
# columns end at _BLANKS, its lines at "\n"). Everything else, punctuation, U+00A0 or
# U+2028 included, stays inside its word; FullTokenizer may then cut a word into several
# WordPieces, whose first carries the word's tag.
WORD_BLANKS = _BLANKS + "\n"
_WORD_SPLIT = re.compile("[%s]+" % WORD_BLANKS)

# One sentence of a file: its words and tags (tags None without a tag column),
# the 0-based indexes of its lines in the file, and its document number.
Sentence = collections.namedtuple("Sentence", "words tags line_indexes document")

# A read file: its lines (without line ends), its sentences and whether tags are given.
ConllFile = collections.namedtuple("ConllFile", "path lines sentences has_tags")

# One model input: ids/mask/segments/labels/weights of max_seq_length, the sentence it
# belongs to, for every weighted position the index of the word it stands for, and
# starts_sentence: 1 when its first weighted word is the sentence's first (its first
# window), 0 for a window cut from further on (run_ner --crf's start constraint).
Feature = collections.namedtuple(
    "Feature", "input_ids input_mask segment_ids label_ids label_weights sentence_index "
               "word_at starts_sentence")


# ---------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------

def _read_lines(path):
    """The lines of a UTF-8 file, without their ends; errors name the file (and line)."""
    text = fileutil.read_text(path)
    return fileutil.split_lines(text)


def read_conll(path, require_tags=True):
    """Reads a CoNLL-layout file into a ConllFile.

    Args:
      path: the file.
      require_tags: every token line must carry a tag (training, evaluation); when
        False, a file of words only (one column) is read too, with tags None.

    Raises:
      ValueError naming file and line: a line with one column where tags are
      needed, a file mixing tagged and untagged lines, or a file without words.
    """
    lines = _read_lines(path)
    sentences, current, document = [], [], 0
    columns_seen = set()
    for index, line in enumerate(lines):
        cells = _cells(line)
        if not cells or cells[0] == DOCSTART:
            if current:
                sentences.append(_sentence(current, document))
                current = []
            document += 1 if cells else 0
            continue
        if len(cells) == 1 and require_tags:
            raise ValueError("%s, line %d: %r has one column; expected the word first and its "
                             "tag last" % (path, index + 1, line))
        columns_seen.add(len(cells) > 1)
        if len(columns_seen) > 1:
            raise ValueError("%s, line %d: some lines have a tag column and others do not"
                             % (path, index + 1))
        current.append((index, cells[0], cells[-1] if len(cells) > 1 else None))
    if current:
        sentences.append(_sentence(current, document))
    if not sentences:
        raise ValueError("%s: no sentences (only blank or -DOCSTART- lines)" % path)
    has_tags = columns_seen == {True}
    if not has_tags:
        sentences = [s._replace(tags=None) for s in sentences]
    return ConllFile(path, lines, sentences, has_tags)


def conll_of_sentences(sentences, where, require_tags=True):
    """A ConllFile of sentences in memory (run_ner's data_dir as a dict, its predict()).

    Args:
      sentences: a list of sentences, each a list of (word, tag) pairs, or (where tags
        are not required) of words; a str sentence is split by the word rule
        (split_words; words only, none in an empty or blank str: no line, no tag).
      where: how messages name them ("data_dir['train']").
      require_tags: every word must carry its tag (training, evaluation).

    The file's lines are those a CoNLL file of the same sentences has ("word tag", a blank
    line between sentences; one document), so what is written of them (predictions) is
    that file's. ValueError naming `where`, the sentence and the word (0-based) for a
    word that is not one non-blank str without blanks (WORD_BLANKS), a tag neither, or a
    mix of tagged and untagged words.
    """
    if isinstance(sentences, (str, bytes)) or not isinstance(sentences, (list, tuple)):
        raise ValueError("%s is a %s; expected a list of sentences (each a list of (word, "
                         "tag) pairs)" % (where, type(sentences).__name__))
    lines, parsed, tagged = [], [], set()
    for number, sentence in enumerate(sentences):
        at = "%s sentence %d" % (where, number)
        text = isinstance(sentence, str) and not require_tags
        if text:  # a text to tag: its words by the word rule, none for a blank one
            sentence = split_words(sentence)
        if not isinstance(sentence, (list, tuple)) or not (sentence or text):
            raise ValueError("%s is %s; expected a non-empty list of %s" % (
                at, repr(sentence) if isinstance(sentence, (str, list, tuple)) else
                "a %s" % type(sentence).__name__,
                "(word, tag) pairs" if require_tags else "words or (word, tag) pairs"))
        words, tags, indexes = [], [], []
        for index, token in enumerate(sentence):
            cells = [token] if isinstance(token, str) else token
            if not isinstance(cells, (list, tuple)) or len(cells) not in (1, 2) or (
                    require_tags and len(cells) != 2):
                raise ValueError("%s word %d is %r; expected a (word, tag) pair%s"
                                 % (at, index, token, "" if require_tags else " or a word"))
            for cell, what in zip(cells, ("word", "tag")):
                if text:  # the word rule's words are words (a text's "-DOCSTART-" too)
                    break
                if not isinstance(cell, str) or split_words(cell) != [cell] or (
                        cell == DOCSTART):
                    raise ValueError("%s word %d: the %s %r is not one word (a non-empty "
                                     "str without blanks, not %s)"
                                     % (at, index, what, cell, DOCSTART))
            tagged.add(len(cells) == 2)
            if len(tagged) > 1:
                raise ValueError("%s word %d: some words have a tag and others do not"
                                 % (at, index))
            indexes.append(len(lines))
            lines.append(" ".join(cells))
            words.append(cells[0])
            tags.append(cells[1] if len(cells) == 2 else None)
        lines.append("")
        parsed.append(Sentence(words, tags, indexes, 0))
    if not parsed:
        raise ValueError("%s has no sentences" % where)
    has_tags = tagged == {True}
    if not has_tags:
        parsed = [s._replace(tags=None) for s in parsed]
    return ConllFile(where, lines[:-1], parsed, has_tags)


def predict_sentences(sentences):
    """The ConllFile of what a tagger's predict() is given (run_ner.Predictor and
    LiteRTPredictor read it alike): a list or tuple, a pandas Series or a numpy array of
    sentences, or a pandas DataFrame of one column of them (or a "tokens" column)
    (predict_inputs), each sentence a str (its words by the word rule) or a list (numpy
    array) of words. No sentences: a ConllFile of none. One ValueError naming
    `sentences` for anything else (one str, None, a set, (word, tag) pairs)."""
    if isinstance(sentences, str):
        raise ValueError("sentences is a str; expected a list of sentences (each a str "
                         "or a list of words): [%r]" % sentences[:40])
    if predict_inputs.is_frame(sentences):
        sentences, = predict_inputs.frame_columns(sentences, "sentences", [("tokens",)])
    sentences = predict_inputs.items(sentences, "sentences", "sentences")
    if not sentences:
        return ConllFile("sentences", [], [], False)
    conll = conll_of_sentences(sentences, "sentences", require_tags=False)
    if conll.has_tags:
        raise ValueError("sentences: give words, not (word, tag) pairs")
    return conll


def split_words(text):
    """The words of a text by the word rule (WORD_BLANKS): [] for an empty or blank one."""
    stripped = text.strip(WORD_BLANKS)
    return _WORD_SPLIT.split(stripped) if stripped else []


def _cells(line):
    """The columns of a line ([] for a blank one)."""
    stripped = line.strip(_BLANKS)
    return _COLUMN_SPLIT.split(stripped) if stripped else []


def _sentence(token_lines, document):
    """A Sentence from (line index, word, tag) triples."""
    return Sentence([w for _, w, _ in token_lines], [t for _, _, t in token_lines],
                    [i for i, _, _ in token_lines], document)


def drop_tags(conll_file):
    """The same file with its tags forgotten: a file to tag, whatever its last column."""
    return conll_file._replace(sentences=[s._replace(tags=None) for s in conll_file.sentences],
                               has_tags=False)


# ---------------------------------------------------------------------------
# Labels
# ---------------------------------------------------------------------------

def labels_from(conll_file):
    """The label list of a training file: "O" first (when present), then the rest sorted."""
    tags = {t for s in conll_file.sentences for t in s.tags}
    return ([OUTSIDE] if OUTSIDE in tags else []) + sorted(tags - {OUTSIDE})


def iob2_break(conll_file):
    """The first tag that breaks IOB2 in a tagged file, as "FILE, line N: I-X after Y"
    (an I-X whose previous tag in the sentence, O at its start, is neither B-X nor
    I-X: an IOB1 file's entity start); None when every tag keeps IOB2."""
    for sentence in conll_file.sentences:
        previous = None
        for tag, index in zip(sentence.tags or (), sentence.line_indexes):
            if tag.startswith("I-") and previous not in ("B-" + tag[2:], tag):
                return "%s, line %d: %s %s" % (
                    conll_file.path, index + 1, tag,
                    "after " + previous if previous else "starts a sentence")
            previous = tag
    return None


def to_iob2(conll_file, labels):
    """The file with each tag that breaks IOB2 made B-X (when B-X is one of `labels`):
    the same entities, as conlleval reads them (an I-X after O or another type starts
    one). Returns (the ConllFile, the number of tags changed, the first tag that stays
    breaking as iob2_break names it, or None)."""
    sentences, changed = [], 0
    for sentence in conll_file.sentences:
        tags, previous = list(sentence.tags or ()), None
        for i, tag in enumerate(tags):
            if tag.startswith("I-") and previous not in ("B-" + tag[2:], tag) and (
                    "B-" + tag[2:] in labels):
                tags[i] = "B-" + tag[2:]
                changed += 1
            previous = tags[i]
        sentences.append(sentence._replace(tags=tags) if sentence.tags is not None
                         else sentence)
    converted = conll_file._replace(sentences=sentences)
    return converted, changed, iob2_break(converted)


# --crf_tag_scheme=auto's bound on the entities of a training file whose first tag breaks
# IOB2 (an I-X after O or another type) for the file to still count as IOB2 with slips:
# the common two-column copy of CoNLL-2003's train.txt has 267 among 23,501 (1.1%); an
# IOB1 file starts almost every entity so.
IOB2_SLIPS = 0.05


def iob2_counts(conll_file):
    """(tags that break IOB2, entities) of a tagged file: the I-X whose previous tag in
    the sentence is neither B-X nor I-X, and those plus the B-X tags."""
    breaks, begins = 0, 0
    for sentence in conll_file.sentences:
        previous = None
        for tag in sentence.tags or ():
            if tag.startswith("I-") and previous not in ("B-" + tag[2:], tag):
                breaks += 1
            elif tag.startswith("B-"):
                begins += 1
            previous = tag
    return breaks, breaks + begins


def auto_tag_scheme(conll_file, labels):
    """run_ner --crf_tag_scheme=auto of a training file: ("iob2" | "none", why).

    iob2 when every label is O, B-X or I-X and the file keeps IOB2, or breaks it at no
    more than IOB2_SLIPS of its entities, each of those having its B-X among the labels
    (to_iob2 makes them B-X); otherwise none, `why` naming the labels outside the scheme
    or the first break.
    """
    outside = [label for label in labels if label != OUTSIDE and not (
        len(label) > 2 and label[:2] in ("B-", "I-"))]
    if outside:
        return "none", "tags %s are not O, B-X or I-X" % " ".join(outside)
    broken = iob2_break(conll_file)
    if not broken:
        return "iob2", "every tag is O, B-X or I-X and %s keeps IOB2" % conll_file.path
    breaks, entities = iob2_counts(conll_file)
    if breaks <= IOB2_SLIPS * entities and to_iob2(conll_file, labels)[2] is None:
        return "iob2", ("%s breaks IOB2 at %d of its %d entities (first: %s): an IOB2 file's "
                        "slips, trained as B-X" % (conll_file.path, breaks, entities,
                                                   broken))
    return "none", "%s, which IOB2 never holds (IOB1 starts entities with I-)" % broken


# The label list file: one per line, distinct (a user's --labels_file too).
write_labels = fileutil.write_label_list


def read_labels(path):
    """A tag list (label_list.txt, a --labels_file): fileutil.read_label_list's, no tag
    holding an ASCII blank. A CoNLL file's columns end at _BLANKS, so no word of one can
    carry such a tag, and the files we write (conlleval's layout) would read it as two:
    "B-PER<tab>I-PER" on one line is refused, naming file and line, not taken as one tag."""
    return fileutil.read_label_list(path, forbidden=_BLANKS, why=(
        " (a CoNLL tag holds no blank: one tag per line)"))


def check_tags(conll_file, labels):
    """Every tag of a tagged file must be one of `labels`; else file and line are named."""
    known = set(labels)
    for sentence in conll_file.sentences:
        for tag, index in zip(sentence.tags or (), sentence.line_indexes):
            if tag not in known:
                raise ValueError("%s, line %d: tag %r was not seen in training (labels: %s)"
                                 % (conll_file.path, index + 1, tag, " ".join(labels)))


# ---------------------------------------------------------------------------
# Features
# ---------------------------------------------------------------------------

def word_pieces(conll_file, tokenizer):
    """Per sentence, per word, its WordPiece tokens (in batches when the tokenizer can)."""
    words = [w for s in conll_file.sentences for w in s.words]
    flat = fast_batch.tokenize_texts(tokenizer, words)
    out, at = [], 0
    for sentence in conll_file.sentences:
        out.append(flat[at:at + len(sentence.words)])
        at += len(sentence.words)
    return out


def _context(sentences, pieces, index, room):
    """Pieces of the sentences before and after sentence `index` in its document, to
    fill `room` positions, as evenly on both sides as the document allows."""
    document = sentences[index].document
    before, after = [], []
    i = index - 1
    while i >= 0 and sentences[i].document == document and len(before) < room:
        before = [p for word in pieces[i] for p in word] + before
        i -= 1
    i = index + 1
    while i < len(sentences) and sentences[i].document == document and len(after) < room:
        after += [p for word in pieces[i] for p in word]
        i += 1
    left = min(len(before), max(room - len(after), room // 2))
    right = min(len(after), room - left)
    return before[len(before) - left:], after[:right]


def sentence_features(sentences, pieces, index, labels, max_seq_length, doc_stride,
                      tokenizer, document_context=False):
    """The Features of sentence `index` (one per window)."""
    sentence = sentences[index]
    tokens, first_piece = [], []
    for word_index, word in enumerate(pieces[index]):
        if word:
            first_piece.append((len(tokens), word_index))
        tokens.extend(word)
    first_of = dict(first_piece)
    room = max_seq_length - 2
    label_map = {label: i for i, label in enumerate(labels)}
    before, after = [], []
    if document_context and len(tokens) < room:
        before, after = _context(sentences, pieces, index, room - len(tokens))
    spans = input_pipeline.doc_spans(len(tokens), room, doc_stride) or [
        input_pipeline.DocSpan(0, 0)]
    features = []
    for span_index, span in enumerate(spans):
        window = ["[CLS]"] + before + tokens[span.start:span.start + span.length] + after + [
            "[SEP]"]
        offset = 1 + len(before) - span.start
        label_ids = [0] * max_seq_length
        weights = [0.0] * max_seq_length
        word_at = {}
        for position in range(span.start, span.start + span.length):
            word_index = first_of.get(position)
            if word_index is None or not input_pipeline.check_is_max_context(
                    spans, span_index, position):
                continue
            word_at[position + offset] = word_index
            weights[position + offset] = 1.0
            if sentence.tags is not None:
                label_ids[position + offset] = label_map[sentence.tags[word_index]]
        ids = tokenizer.convert_tokens_to_ids(window)
        pad = [0] * (max_seq_length - len(ids))
        features.append(Feature(ids + pad, [1] * len(ids) + pad, [0] * max_seq_length,
                                label_ids, weights, index, word_at, int(span_index == 0)))
    return features


def doc_stride_of(doc_stride):
    """The --doc_stride of a tagger's windows, the one check of it (run_ner, its
    predict(), the SavedModel, LiteRT): None gives run_ner's default; ValueError below 1."""
    if doc_stride is None:
        return DEFAULT_DOC_STRIDE
    if doc_stride < 1:
        raise ValueError("--doc_stride=%d must be >= 1" % doc_stride)
    return int(doc_stride)


def convert_file(conll_file, labels, max_seq_length, doc_stride, tokenizer,
                 document_context=False):
    """All Features of a file, sentence by sentence, window by window (doc_stride None:
    run_ner's default)."""
    if max_seq_length < 3:
        raise ValueError("--max_seq_length=%d is too short: [CLS] word [SEP] needs at least 3"
                         % max_seq_length)
    doc_stride = doc_stride_of(doc_stride)
    pieces = word_pieces(conll_file, tokenizer)
    features = []
    for index in range(len(conll_file.sentences)):
        features.extend(sentence_features(conll_file.sentences, pieces, index, labels,
                                          max_seq_length, doc_stride, tokenizer,
                                          document_context))
    return features


def record_spec(seq_length):
    """Feature spec of the TFRecord files written by write_features."""
    seq = tf.io.FixedLenFeature([seq_length], tf.int64)
    return {"input_ids": seq, "input_mask": seq, "segment_ids": seq, "label_ids": seq,
            "label_weights": tf.io.FixedLenFeature([seq_length], tf.float32),
            "starts_sentence": tf.io.FixedLenFeature([], tf.int64)}


def write_features(features, path):
    """Writes Features to a TFRecord file (atomically); returns the count."""
    with input_pipeline.RecordWriter(path) as writer:
        for f in features:
            writer.write({
                "input_ids": input_pipeline.int_feature(f.input_ids),
                "input_mask": input_pipeline.int_feature(f.input_mask),
                "segment_ids": input_pipeline.int_feature(f.segment_ids),
                "label_ids": input_pipeline.int_feature(f.label_ids),
                "label_weights": input_pipeline.float_feature(f.label_weights),
                "starts_sentence": input_pipeline.int_feature([f.starts_sentence]),
            })
    return writer.num_written


# ---------------------------------------------------------------------------
# Predictions back onto the file
# ---------------------------------------------------------------------------

def sentence_predictions(conll_file, features, predicted_ids, labels):
    """Per sentence, the predicted tag of every word ("O" for words with no piece).

    predicted_ids: one [max_seq_length] array of label ids per feature, in order.
    """
    out = [[OUTSIDE] * len(s.words) for s in conll_file.sentences]
    for feature, ids in zip(features, predicted_ids):
        for position, word_index in feature.word_at.items():
            out[feature.sentence_index][word_index] = labels[int(ids[position])]
    return out


def write_predictions(path, conll_file, predictions):
    """The input file with each token line's predicted tag appended as the last column.

    Written for conlleval.pl, which splits lines at single spaces and wants as many
    columns on every line: columns are joined by one space, blank lines stay blank,
    and each -DOCSTART- line gets the tag "O" and the token lines' number of columns
    (read_predictions reads the file back).
    """
    tag_of_line = {}
    for sentence, tags in zip(conll_file.sentences, predictions):
        for index, tag in zip(sentence.line_indexes, tags):
            tag_of_line[index] = tag
    width = _token_width(conll_file)
    with fileutil.atomic_open(path, "w") as f:
        for index, line in enumerate(conll_file.lines):
            cells = _cells(line)
            if index in tag_of_line:
                cells.append(tag_of_line[index])
            elif cells:
                cells = _docstart_cells(cells, width) + [OUTSIDE]
            f.write(" ".join(cells) + "\n")


def _token_width(conll_file):
    """The number of columns of the file's first token line."""
    return len(_cells(conll_file.lines[conll_file.sentences[0].line_indexes[0]]))


def _docstart_cells(cells, width):
    """A -DOCSTART- line's columns, made `width` long as CoNLL-2003 writes them
    (`-DOCSTART- -X- -X- O`): kept when already so, else -X- between and "O" last."""
    if len(cells) == width:
        return cells
    if width == 1:
        return [DOCSTART]
    return [DOCSTART] + ["-X-"] * (width - 2) + [OUTSIDE]


def read_predictions(path):
    """The gold and the predicted tags of a file in conlleval's layout (a tagged file
    as write_predictions writes it: the gold tag next to last, the prediction last).

    Returns:
      (gold, predicted): per sentence, its tags; ner_metrics.score's arguments.

    Raises:
      ValueError naming file and line: fewer than 3 columns, or lines (-DOCSTART-
      lines too) with other numbers of columns than the first, which conlleval.pl
      refuses.
    """
    conll_file = read_conll(path)
    first = None
    for index, line in enumerate(conll_file.lines):
        cells = _cells(line)
        if not cells:
            continue
        if first is None:
            first = (index, len(cells))
        elif len(cells) != first[1]:
            raise ValueError("%s, line %d: %d columns, but line %d has %d (conlleval.pl "
                             "reads one number of columns)" % (
                                 path, index + 1, len(cells), first[0] + 1, first[1]))
    if first[1] < 3:
        raise ValueError("%s, line %d: %d columns; expected the word first, then its tag and "
                         "the predicted tag last" % (path, first[0] + 1, first[1]))
    gold = [[_cells(conll_file.lines[i])[-2] for i in s.line_indexes]
            for s in conll_file.sentences]
    return gold, [s.tags for s in conll_file.sentences]


# -- The tagger in the HuggingFace export (head_classes.Tagger.hf_task) ------------------

# A --crf tagger's transitions beside its HuggingFace export.
HF_CRF_FILE = "crf_transitions.json"


def hf_task(contents, found, init_checkpoint, labels_file, notes):
    """The tagger's (labels, {}, crf_transitions.json's dict or None) in its HuggingFace
    export: --labels_file, else the folder's label list; a --crf tagger's transitions."""
    # pylint: disable=import-outside-toplevel
    from bert_tf2 import heads  # the tagger's model (a load of tf_keras: only here)
    from bert_tf2.trainer import checkpoints
    labels = label_order.read_labels_file(
        labels_file, checkpoints.file_beside(init_checkpoint, LABELS_FILE_NAME), read_labels)
    if labels is None:
        raise ValueError("--init_checkpoint=%s holds a tagger but no %s beside it: pass "
                         "--labels_file" % (init_checkpoint, LABELS_FILE_NAME))
    if not heads.holds_crf(contents.model_names()):
        return labels, {}, None
    scheme = found.get("crf_tag_scheme") or "none"
    if scheme not in heads.TAG_SCHEMES[1:]:
        scheme = "none"
    notes.append("--crf tagger: transformers decodes by argmax, which can differ from our "
                 "Viterbi; %s holds the transitions" % HF_CRF_FILE)
    return labels, {}, _crf_record(contents.get(heads.CRF_VARIABLE), labels, scheme,
                                   heads.crf_constraints(labels, scheme))


def _crf_record(transitions, labels, scheme, penalties):
    """crf_transitions.json: the learned transitions and what our Viterbi adds to them."""
    transitions = np.asarray(transitions, np.float32)
    record = {"labels": list(labels), "tag_scheme": scheme,
              "transitions": transitions.tolist(),
              "about": "transitions[i][j]: the score of tag labels[j] after labels[i]. Our "
                       "Viterbi decodes each sentence's first word pieces with "
                       "viterbi_transitions and start_scores (the tag scheme's forbidden "
                       "moves at -10000); argmax over the logits can differ."}
    if penalties is None:
        record["viterbi_transitions"] = transitions.tolist()
        record["start_scores"] = [0.0] * len(labels)
    else:
        record["viterbi_transitions"] = (transitions + penalties[0]).tolist()
        record["start_scores"] = penalties[1].tolist()
    return record
