"""Examples of a LiteRT export: calibration / agreement files and raw texts turned into the
model's id features, and model outputs turned back into labels, vectors, tags and answers.

The featurization is the runners' own (glue_data, ner_data, squad_data), so a LiteRT model
sees exactly the ids FullTokenizer and the reference's packing give. Nothing here imports
LiteRT: it works on numpy arrays.
"""
import collections
import os

import numpy as np

from bert_tf2.base import crf as crf_lib
from bert_tf2.export import head_types
from bert_tf2.export import masked_lm
from bert_tf2.export import serving_squad
from bert_tf2.tasks import file_data
from bert_tf2.tasks import glue_data
from bert_tf2.tasks import ner_data
from bert_tf2.tasks import squad_data
from bert_tf2.tasks import squad_results

MODEL_TYPES = head_types.LITERT
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


def read_file(model_type, flag, path, tokenizer, max_seq_length, limit, labels=None,
              columns=("text", None, "label"), doc_stride=None, squad_rules=None):
    """The first `limit` examples of a data file as a Batch.

    Args:
      model_type: one of MODEL_TYPES; the file is what its runner reads: a TSV / CSV /
        JSONL of texts (classifier, encoder; `columns` = text_a, text_b or None, label),
        CoNLL (tagger), SQuAD JSON (squad), texts with [MASK]s one per line (masked_lm,
        masked_lm.read_texts: extract_features --fill_mask_top_k's input).
      flag: the flag naming the file, for messages ("--calibration_file", without its
        value: the messages name the path once).
      tokenizer: a tokenization.FullTokenizer.
      labels: classifier / tagger: the model's label list ([None]: regression).
      doc_stride: tagger: run_ner's --doc_stride, its windows (None: run_ner's default).
      squad_rules: squad: the export's serving_squad.SquadRules (None: run_squad's
        defaults).

    Returns:
      a Batch; ValueError (one line naming the file and line) on a bad file.
    """
    check_file(flag, path)
    head = head_types.find(model_type)
    try:
        if head.word_tags:
            conll = ner_data.read_conll(path, require_tags=False)
            conll = conll._replace(sentences=conll.sentences[:limit])
            if conll.has_tags:
                ner_data.check_tags(conll, labels)
            return _tagger_batch(conll, tokenizer, max_seq_length, labels, doc_stride)
        if head.fill_mask:
            texts = masked_lm.read_texts(path)[:limit]
            if not texts:
                raise ValueError("%s: no texts" % path)
            features, counts = masked_lm.litert_batch(texts, tokenizer, max_seq_length)
            return Batch(features, None, counts)
        if head.answer_spans:
            articles = squad_data.load_squad_json(path)
            examples = squad_data.examples_from_articles(articles, False)[:limit]
            if not examples:
                raise ValueError("%s: no questions" % path)
            return squad_batch(examples, tokenizer, max_seq_length,
                               squad_rules or serving_squad.SquadRules(),
                               _kept_articles(articles, examples))
        rows = _text_rows(path, columns)[:limit]
        if not rows:
            raise ValueError("%s: no examples" % path)
        texts_a = [_row_text(row, columns[0]) for row in rows]
        texts_b = [_row_text(row, columns[1]) for row in rows] if columns[1] else None
        gold = None
        if head.class_labels and all(columns[2] in row.fields for row in rows):
            gold = [_gold_label(row, columns[2], labels) for row in rows]
    except (ValueError, KeyError, TypeError) as e:
        # Each message names the file (and line) once; a KeyError's is its key's repr.
        text = e.args[0] if isinstance(e, KeyError) and e.args else e
        raise ValueError("%s: %s" % (flag, text)) from None
    return text_batch(texts_a, texts_b, tokenizer, max_seq_length, labels, gold)


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


def decode(model_type, outputs, batch, labels=None, do_lower_case=True, crf=None):
    """Per-example predictions of model outputs ({name: array}) on `batch`.

    crf: a --crf tagger's (transitions, start_penalty): its tags are Viterbi's
    (crf_tag_ids), not the argmax of the logits; outputs with "tag_ids" [N, S] (decoded
    elsewhere) give those.

    Returns: classifier: class indexes (regression: floats); encoder: the vectors [N, D];
    tagger: per sentence its words' tags; squad: the answer texts, by question id
    (run_squad's n-best rules over every window); masked_lm: per text, per [MASK], the
    top-k token ids.
    """
    head = head_types.find(model_type)
    if head.fill_mask:
        return masked_lm.litert_token_ids(outputs, batch.extra)
    if head.class_labels:
        if "predictions" in outputs:
            return [float(x) for x in outputs["predictions"]]
        return [int(x) for x in np.argmax(outputs["probabilities"], axis=-1)]
    if head.sentence_embedding:
        return np.asarray(outputs["sentence_embedding"])
    if head.word_tags:
        conll, features = batch.extra
        if "tag_ids" in outputs:
            tag_ids = outputs["tag_ids"]
        elif crf is not None:
            tag_ids = crf_tag_ids(outputs["logits"], features, *crf)
        else:
            tag_ids = np.argmax(outputs["logits"], axis=-1)
        return ner_data.sentence_predictions(conll, features, tag_ids, labels)
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
