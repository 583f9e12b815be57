"""The pieces of a LiteRT export's examples: calibration / agreement files and raw texts
turned into the model's id features (each head's litert_examples / litert_batch use
them), and the numpy pieces of decoding model outputs back into labels, vectors, tags and
answers (each head's litert_decode).

The featurization is the runners' own (glue_data, ner_data, squad_data), so a LiteRT model
sees exactly the ids FullTokenizer and the reference's packing give. Nothing here imports
LiteRT: it works on numpy arrays.
"""
import collections
import os

import numpy as np

from bert_tf2.base import crf as crf_lib
from bert_tf2.tasks import file_data
from bert_tf2.tasks import glue_data
from bert_tf2.tasks import ner_data
from bert_tf2.tasks import squad_data
from bert_tf2.tasks import squad_results

ID_KEYS = ("input_ids", "input_mask", "segment_ids")
_TEXT_FORMATS = {".tsv": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl"}

# features: {ID_KEYS: int32 [N, S]}; gold: per-example labels (None: the file has none);
# extra: what decoding needs (tagger: (ConllFile, features); squad: (examples, features,
# articles or None, serving_squad.SquadRules); masked_lm: each text's number of [MASK]s).
Batch = collections.namedtuple("Batch", "features gold extra")


def _stack(features):
    """{ID_KEYS: int32 [N, S]} of objects with input_ids / input_mask / segment_ids."""
    return {key: np.asarray([getattr(f, key) for f in features], np.int32) for key in ID_KEYS}


def check_file(flag, path):
    """A data file that exists and is not empty; else one ValueError naming `flag`."""
    if not path or not os.path.isfile(path):
        raise ValueError("%s=%s does not exist (or is not a file)" % (flag, path))
    if os.path.getsize(path) == 0:
        raise ValueError("%s=%s is empty" % (flag, path))


def _text_rows(path, columns):
    """The rows of a TSV / CSV / JSONL file (file_data's readers, by the file's ending)."""
    kind = _TEXT_FORMATS.get(os.path.splitext(path)[1].lower())
    if kind is None:
        raise ValueError("%s: not a .tsv, .csv or .jsonl file of texts" % path)
    reader = {"tsv": file_data.read_tsv, "csv": file_data.read_csv,
              "jsonl": file_data.read_jsonl}[kind]
    wanted = [c for c in columns[:2] if c]
    return reader(path, wanted, [columns[2]] if columns[2] else [])


def _row_text(row, column):
    """A row's text in `column`, one line naming the file and line when it is none."""
    value = row.fields.get(column)
    if not isinstance(value, str):
        raise ValueError("%s: %r is %r, not a text" % (row.where(), column, value))
    return value


def _gold_label(row, column, labels):
    """A row's label: its index in `labels`, or a float for regression ([None])."""
    value = str(row.fields[column]).strip()
    if labels == [None]:
        try:
            return float(value)
        except ValueError:
            raise ValueError("%s: label %r is not a number" % (row.where(), value)) from None
    if value not in labels:
        raise ValueError("%s: label %r is not one of the model's labels (%s)"
                         % (row.where(), value, ", ".join(labels)))
    return labels.index(value)


def text_batch(texts_a, texts_b, tokenizer, max_seq_length, labels=None, gold=None):
    """A Batch of texts (pairs when texts_b is given): [CLS] A [SEP] (B [SEP]), the
    reference's truncation (glue_data.convert_examples_to_features)."""
    label_list = list(labels) if labels else ["0"]
    placeholder = "0" if label_list == [None] else label_list[0]
    examples = [glue_data.InputExample(str(i), a, (texts_b[i] if texts_b else None) or None,
                                       placeholder) for i, a in enumerate(texts_a)]
    features = glue_data.convert_examples_to_features(examples, label_list, max_seq_length,
                                                      tokenizer)
    return Batch(_stack(features), gold, None)


def tagger_batch(sentences, tokenizer, max_seq_length, labels, doc_stride=None):
    """A Batch of the sentences a tagger's predict() is given (ner_data.predict_sentences:
    each a str, its words by the word rule of every door, or a list of words), featurized
    as run_ner does."""
    return _tagger_batch(ner_data.predict_sentences(sentences), tokenizer, max_seq_length,
                         labels, doc_stride)


def _tagger_batch(conll, tokenizer, max_seq_length, labels, doc_stride=None):
    """run_ner's features of a ConllFile: its windows, --doc_stride apart (None: run_ner's
    default), each sentence its own document (no --document_context)."""
    features = ner_data.convert_file(conll, labels, max_seq_length, doc_stride, tokenizer)
    gold = [list(s.tags) for s in conll.sentences] if conll.has_tags else None
    return Batch(_stack(features), gold, (conll, features))


def squad_examples(questions, contexts):
    """SquadExamples of raw (question, context) pairs, as run_squad.Predictor reads them."""
    return squad_data.pair_examples(questions, contexts)


def squad_batch(examples, tokenizer, max_seq_length, rules, articles=None):
    """A Batch of SquadExamples: run_squad's windows under `rules` (a
    serving_squad.SquadRules: doc_stride, max_query_length; decode() applies the rest)."""
    features = []
    squad_data.convert_examples_to_features(
        examples, tokenizer, max_seq_length, rules.doc_stride, rules.max_query_length, False,
        features.append)
    if features:
        stacked = _stack(features)
    else:  # contexts without a piece have no window: no model input at all
        stacked = {key: np.zeros([0, max_seq_length], np.int32) for key in ID_KEYS}
    return Batch(stacked, articles, (examples, features, rules))


def _kept_articles(articles, examples):
    """The articles with only the questions of `examples` (None: no gold answers)."""
    wanted = {e.qas_id for e in examples}
    kept = []
    for article in articles:
        paragraphs = []
        for paragraph in article.get("paragraphs", []):
            qas = [qa for qa in paragraph.get("qas", []) if qa.get("id") in wanted]
            if qas:
                paragraphs.append(dict(paragraph, qas=qas))
        if paragraphs:
            kept.append(dict(article, paragraphs=paragraphs))
    # Gold answers for every question (SQuAD 2.0: an unanswerable one has none, and says so).
    if not all(qa.get("answers") or qa.get("is_impossible") is True
               for a in kept for p in a["paragraphs"] for qa in p["qas"]):
        return None
    return kept


def crf_tag_ids(logits, features, transitions, start_penalty=None):
    """[N, S] tag ids of a --crf tagger's windows: Viterbi over each window's words (its
    weighted first pieces, in order) under `transitions` [T, T], `start_penalty` [T]
    added to the first word of a window that starts its sentence, as run_ner --crf and
    the SavedModel (heads.crf_predictions) decode; positions without a word: 0."""
    logits = np.asarray(logits, np.float32)
    transitions = np.asarray(transitions, np.float32)
    tag_ids = np.zeros(logits.shape[:2], np.int64)
    for row, feature in enumerate(features):
        positions = np.flatnonzero(np.asarray(feature.label_weights) > 0)
        if not len(positions):
            continue
        scores = logits[row, positions]
        if start_penalty is not None and feature.starts_sentence:
            scores[0] = scores[0] + np.asarray(start_penalty, np.float32)
        tag_ids[row, positions] = crf_lib.viterbi_decode(scores, transitions)[0]
    return tag_ids


def table_batch(path, tokenizer, max_seq_length, limit, labels, columns, gold):
    """The first `limit` rows of a TSV / CSV / JSONL file of texts (`columns`: text_a,
    text_b or None, label or None) as a Batch; `gold`: its label column, when every row
    has one, gives the gold labels (a classifier's)."""
    rows = _text_rows(path, columns)[:limit]
    if not rows:
        raise ValueError("%s: no examples" % path)
    texts_a = [_row_text(row, columns[0]) for row in rows]
    texts_b = [_row_text(row, columns[1]) for row in rows] if columns[1] else None
    found = None
    if gold and all(columns[2] in row.fields for row in rows):
        found = [_gold_label(row, columns[2], labels) for row in rows]
    return text_batch(texts_a, texts_b, tokenizer, max_seq_length, labels, found)


def conll_file_batch(path, tokenizer, max_seq_length, limit, labels, doc_stride):
    """The first `limit` sentences of a CoNLL file as a tagger's Batch (its tags, when
    it has them, checked against `labels` and the gold)."""
    conll = ner_data.read_conll(path, require_tags=False)
    conll = conll._replace(sentences=conll.sentences[:limit])
    if conll.has_tags:
        ner_data.check_tags(conll, labels)
    return _tagger_batch(conll, tokenizer, max_seq_length, labels, doc_stride)


def squad_file_batch(path, tokenizer, max_seq_length, limit, rules):
    """The first `limit` questions of a SQuAD JSON file as a Batch (gold: the articles
    of those questions, when they all have answers)."""
    articles = squad_data.load_squad_json(path)
    examples = squad_data.examples_from_articles(articles, False)[:limit]
    if not examples:
        raise ValueError("%s: no questions" % path)
    return squad_batch(examples, tokenizer, max_seq_length, rules,
                       _kept_articles(articles, examples))


def softmax(logits):
    """The softmax of numpy `logits` over the last axis."""
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def f1_score(found, gold):
    """F1 (%) of the second label (glue_data's positive label of a 2-label task)."""
    found, gold = np.asarray(found) == 1, np.asarray(gold) == 1
    hits = float(np.sum(found & gold))
    return 200.0 * hits / max(float(found.sum() + gold.sum()), 1.0)


def tag_ids(outputs, features, crf):
    """[N, S] tag ids of a tagger's outputs: the SavedModel's own Viterbi tags
    ("tag_ids"), else Viterbi under `crf` (a --crf tagger's (transitions, start_penalty)),
    else the argmax of the logits."""
    if "tag_ids" in outputs:
        return outputs["tag_ids"]
    if crf is not None:
        return crf_tag_ids(outputs["logits"], features, *crf)
    return np.argmax(outputs["logits"], axis=-1)


def squad_predictions(outputs, batch, do_lower_case):
    """squad_results.SquadPredictions of a squad Batch's outputs (run_squad's n-best rules
    over every window)."""
    examples, features, rules = batch.extra
    if features:
        results = squad_results.compact_batch(
            [f.unique_id for f in features], outputs["start_logits"], outputs["end_logits"],
            rules.n_best_size)
    else:
        results = []
    return squad_results.compute_predictions(
        examples, features, results, rules.n_best_size, rules.max_answer_length,
        do_lower_case, rules.version_2_with_negative, rules.null_score_diff_threshold)
