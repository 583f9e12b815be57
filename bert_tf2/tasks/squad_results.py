"""SQuAD answers from model outputs, and the official scores.

- `compact_result` / `compact_batch`: what post-processing keeps of a window's logits;
  `top_real_positions` + `compact_top`: the same from trimmed batches
  (run_squad --trim_padding), where only real positions rank;
- `compute_predictions` / `write_predictions`: the n-best answer spans mapped back to
  the original text (predictions.json, nbest_predictions.json, null_odds.json),
  exactly as the reference writes them for the same logits;
- `has_gold_answers` / `evaluate_predictions`: the official SQuAD 1.1 / 2.0 EM and F1
  and the best null threshold (`metric_names`: their names, before any work); `effective_best_threshold` / `apply_null_threshold`
  re-threshold SQuAD 2.0 predictions.
"""
import collections
import json
import math

from absl import logging
import numpy as np
import tensorflow as tf

from bert import tokenization  # ours, whatever tokenization.py a user's folder holds
from bert_tf2 import fileutil


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
    """What post-processing keeps of one InputFeatures (a FeatureSummary)."""
    return FeatureSummary(feature.unique_id, feature.example_index, feature.tokens,
                          feature.token_to_orig_map, feature.token_is_max_context)


def get_best_indexes(logits, n_best_size):
    """Indexes of the n_best_size largest logits, largest first (ties: lower index first)."""
    ranked = sorted(range(len(logits)), key=lambda i: logits[i], reverse=True)
    return ranked[:n_best_size]


def compute_softmax(scores):
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


def real_position_logits(logits, input_mask):
    """logits [B, S] with -inf at padding (input_mask 0): positions that never rank.

    The reference's n-best ranks every position of the window, padding included
    (its candidates there are dropped only afterwards); with batches trimmed to
    their longest row that padding would depend on the batch, so trimmed runs rank
    the real positions alone (run_squad --trim_padding, trimmed SQuAD serving).
    """
    return tf.where(tf.not_equal(input_mask, 0), logits, tf.constant(-np.inf, logits.dtype))


def top_real_positions(logits, input_mask, k):
    """(index int32 [B, k], value [B, k]): the k best real positions of each row, in the
    graph; ties to the lower position (as compact_batch's stable sort); rows of fewer
    than k positions are filled with -inf (compact_top drops those)."""
    masked = real_position_logits(logits, input_mask)
    missing = tf.maximum(k - tf.shape(masked)[1], 0)
    masked = tf.pad(masked, [[0, 0], [0, missing]], constant_values=-np.inf)
    values, index = tf.math.top_k(masked, k=k)
    return index, values


def compact_top(unique_ids, start_index, start_values, end_index, end_values,
                null_start, null_end):
    """CompactResults from top_real_positions' arrays (one row per window), -inf dropped."""
    def candidates(index, values):
        return [[(int(i), float(v)) for i, v in zip(row_index, row_values) if v > -np.inf]
                for row_index, row_values in zip(np.asarray(index), np.asarray(values))]
    starts = candidates(start_index, start_values)
    ends = candidates(end_index, end_values)
    return [CompactResult(int(uid), s, e, float(ns), float(ne))
            for uid, s, e, ns, ne in zip(unique_ids, starts, ends, null_start, null_end)]


def as_compact(result, n_best_size):
    """A RawResult or CompactResult as a CompactResult of n_best_size candidates."""
    if isinstance(result, CompactResult):
        return result
    return CompactResult(
        int(result.unique_id),
        [(i, float(result.start_logits[i]))
         for i in get_best_indexes(result.start_logits, n_best_size)],
        [(i, float(result.end_logits[i]))
         for i in get_best_indexes(result.end_logits, n_best_size)],
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


def span_candidates(feature_index, feature, result, max_answer_length):
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
        candidates.extend(span_candidates(feature_index, feature, result, max_answer_length))
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


def apply_null_threshold(best_non_null, null_odds, threshold):
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
        compact = as_compact(result, n_best_size)
        results_by_id[compact.unique_id] = compact

    predictions = collections.OrderedDict()
    all_nbest = collections.OrderedDict()
    null_odds = collections.OrderedDict()
    best_non_null = collections.OrderedDict()
    for example_index, example in enumerate(all_examples):
        nbest, null_score = _predict_example(
            example, features_by_example[example_index], results_by_id, n_best_size,
            max_answer_length, do_lower_case, version_2_with_negative, verbose_logging)

        probabilities = compute_softmax([e.start_logit + e.end_logit for e in nbest])
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


def answer_of(predictions, qas_id):
    """run_squad.predict()'s result of one question of SquadPredictions: {"text": its
    predictions.json answer, "probability": that text's in its n-best (None when absent),
    "nbest": its nbest_predictions.json list}."""
    text = predictions.predictions[qas_id]
    nbest = [dict(entry) for entry in predictions.nbest[qas_id]]
    probability = next((e["probability"] for e in nbest if e["text"] == text), None)
    return {"text": text, "probability": probability, "nbest": nbest}


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
    result = compute_predictions(
        all_examples, all_features, all_results, n_best_size, max_answer_length,
        do_lower_case, version_2_with_negative, null_score_diff_threshold, verbose_logging)
    write_answer_files(result, output_prediction_file, output_nbest_file,
                       output_null_log_odds_file if version_2_with_negative else None)
    return result


def write_answer_files(squad_predictions, prediction_file, nbest_file, null_odds_file=None):
    """Writes the SquadPredictions' predictions.json and nbest_predictions.json (and
    null_odds.json when `null_odds_file`: SQuAD 2.0), each complete or absent."""
    logging.info("Writing predictions to: %s", prediction_file)
    logging.info("Writing nbest to: %s", nbest_file)
    write_json(squad_predictions.predictions, prediction_file)
    write_json(squad_predictions.nbest, nbest_file)
    if null_odds_file is not None:
        write_json(squad_predictions.null_odds, null_odds_file)


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


def metric_names(articles, version_2_with_negative):
    """The names evaluate_predictions reports for the questions of `articles` (known
    before any work: those of their gold answers taken as the predictions)."""
    answers = collections.OrderedDict()
    for article in articles:
        for paragraph in article.get("paragraphs", []):
            for qa in paragraph.get("qas", []):
                gold = qa.get("answers") or [{"text": ""}]
                answers[qa["id"]] = gold[0]["text"]
    odds = collections.OrderedDict((qid, 0.0) for qid in answers)
    return sorted(evaluate_predictions(
        articles, SquadPredictions(answers, collections.OrderedDict(), odds, answers),
        version_2_with_negative))


def effective_best_threshold(metrics):
    """The null threshold whose predictions score metrics["best_f1"].

    The official search starts from "every question unanswered" with threshold 0.0
    and reports 0.0 when no threshold does better; that state is reached by a
    threshold below every null odds instead.
    """
    all_null = 100.0 * metrics.get("NoAns_total", 0) / metrics["total"]
    if metrics["best_f1"] == all_null:
        return float("-inf")
    return metrics["best_f1_thresh"]
