"""run_ranker's task (a FineTuningTask, task.py): a cross-encoder re-ranker, its data files,
losses and ranking metrics, resolved once.

The model is heads.BertClassifier with one label: [CLS] query [SEP] passage [SEP] -> the
pooled output -> one logit, the pair's score (output_weights [1, H], output_bias [1]: the
layout of a one-label classifier, and of transformers' BertForSequenceClassification with
num_labels=1, which sentence-transformers' CrossEncoder opens).

The files (tab-separated, UTF-8, no header line, one row a line; blank lines skipped):
- pointwise rows, `query<TAB>passage<TAB>label`: the label a number >= 0 (a relevance
  grade; > 0 is relevant). --loss=pointwise trains on them with the binary cross-entropy of
  the logit against "relevant" (sigmoid(score): the probability that the passage answers);
- pairwise triples, `query<TAB>positive<TAB>negative`: --loss=pairwise trains on them with
  RankNet's loss, -log sigmoid(score(q, positive) - score(q, negative)) =
  softplus(s_neg - s_pos). It is also the cross-entropy of the softmax over the pair with
  the positive as the answer (the two are one formula), the usual pairwise loss of
  cross-encoders; the scores are then a ranking, not probabilities.
The evaluation file (dev.tsv) may be either kind, told by its rows (a number in the third
column: labelled rows); triples become labelled rows (the positive 1, the negative 0; a
passage repeated under one query counted once). The test file (test.tsv) holds
`query<TAB>passage` rows (a third column is read and not used).

Evaluation groups the rows by query (the rows sharing a query's text are its candidates),
ranks each group by score (ties: in file order) and reports the mean over the queries with
a relevant candidate of MRR@10 (1 / the rank of the first relevant within the top 10, else
0) and NDCG@10 (gains 2^label - 1, discount log2(rank + 1), over the ideal order's); with
--loss=pointwise also eval_accuracy (sigmoid >= 0.5 against label > 0), eval_auc (every row
against every row) and eval_loss (the mean cross-entropy).
"""
import collections
import dataclasses
import math
import os

from absl import logging
import numpy as np
import tensorflow as tf

from bert_tf2 import fileutil
from bert_tf2 import heads
from bert_tf2 import input_pipeline
from bert_tf2 import loaders
from bert_tf2.trainer import training

# The files of --data_dir, by split.
FILES = {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"}
LOSSES = ("pointwise", "pairwise")
# The ranking metrics' cut: the top 10 of each query's candidates.
TOP_K = 10

# A labelled (query, passage) row, and a training triple.
Row = collections.namedtuple("Row", "query passage label")
Triple = collections.namedtuple("Triple", "query positive negative")


# ---------------------------------------------------------------------------
# The files
# ---------------------------------------------------------------------------

def _number(text):
    """The float of a label column, or None when it is not a finite number."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def read_lines(path):
    """[(line number, columns)] of a TSV file's non-blank lines."""
    if not tf.io.gfile.exists(path):
        raise ValueError("%s: no such file" % path)
    with tf.io.gfile.GFile(path, "rb") as f:
        text = f.read().decode("utf-8-sig")
    return [(number, line.split("\t"))
            for number, line in enumerate(text.splitlines(), 1) if line.strip()]


def _columns(path, lines, count, what):
    """ValueError naming the first line of `lines` whose column count is not `count`."""
    for number, fields in lines:
        if len(fields) not in count:
            raise ValueError("%s:%d: %d tab-separated column(s), expected %s (%s)"
                             % (path, number, len(fields), " or ".join(map(str, count)), what))


def labelled_rows(path, lines):
    """The Rows of pointwise lines (query, passage, label >= 0)."""
    what = "query<TAB>passage<TAB>label"
    _columns(path, lines, (3,), what)
    rows = []
    for number, (query, passage, label) in lines:
        value = _number(label)
        if value is None or value < 0:
            raise ValueError("%s:%d: label %r is not a number >= 0 (%s; (query, positive, "
                             "negative) triples train with --loss=pairwise)"
                             % (path, number, label, what))
        rows.append(Row(query, passage, value))
    return rows


def triples(path, lines):
    """The Triples of pairwise lines (query, positive, negative)."""
    _columns(path, lines, (3,), "query<TAB>positive<TAB>negative")
    if lines and all(_number(fields[2]) is not None for _, fields in lines):
        raise ValueError("%s:%d: every third column is a number: these are (query, passage, "
                         "label) rows; train on them with --loss=pointwise"
                         % (path, lines[0][0]))
    return [Triple(*fields) for _, fields in lines]


def rows_of_triples(found):
    """Labelled Rows of Triples: each query's positives (1) and negatives (0), each
    passage once per query (its first label), in file order."""
    rows, seen = [], set()
    for triple in found:
        for passage, label in ((triple.positive, 1.0), (triple.negative, 0.0)):
            if (triple.query, passage) not in seen:
                seen.add((triple.query, passage))
                rows.append(Row(triple.query, passage, label))
    return rows


def read_split(data_dir, split, loss):
    """The examples of --data_dir's `split`: training Rows or Triples (by --loss),
    evaluation Rows (either kind of file, told by its first line), test Rows (label 0)."""
    path = os.path.join(str(data_dir), FILES[split])
    lines = read_lines(path)
    if not lines:
        raise ValueError("%s: no rows" % path)
    if split == "train":
        return triples(path, lines) if loss == "pairwise" else labelled_rows(path, lines)
    if split == "dev":
        if len(lines[0][1]) == 3 and _number(lines[0][1][2]) is None:
            return rows_of_triples(triples(path, lines))
        return labelled_rows(path, lines)
    _columns(path, lines, (2, 3), "query<TAB>passage")
    return [Row(fields[0], fields[1], 0.0) for _, fields in lines]


def pair_rows(queries, passages):
    """Rows (label 0) of a predict() call's queries and passages (as many of each)."""
    if len(queries) != len(passages):
        raise ValueError("%d queries but %d passages: give one query per passage"
                         % (len(queries), len(passages)))
    return [Row(q, p, 0.0) for q, p in zip(queries, passages)]


# ---------------------------------------------------------------------------
# Ranking metrics (plain numpy)
# ---------------------------------------------------------------------------

def groups(queries):
    """{query: [row indices]} in the order the queries first appear."""
    found = collections.OrderedDict()
    for index, query in enumerate(queries):
        found.setdefault(query, []).append(index)
    return found


def order(scores):
    """Indices of `scores` from the highest (ties: in input order)."""
    return sorted(range(len(scores)), key=lambda i: (-float(scores[i]), i))


def ranking_metrics(queries, labels, scores, k=TOP_K):
    """{"mrr", "ndcg", "queries", "queries_without_relevant"}: MRR@k and NDCG@k averaged
    over the queries with a relevant candidate (label > 0); the other queries counted."""
    labels, scores = np.asarray(labels, np.float64), np.asarray(scores, np.float64)
    reciprocal, ndcg, without = [], [], 0
    for rows in groups(queries).values():
        grades = labels[rows]
        if not np.any(grades > 0):
            without += 1
            continue
        ranked = grades[order(scores[rows])][:k]
        hits = np.flatnonzero(ranked > 0)
        reciprocal.append(1.0 / (hits[0] + 1) if hits.size else 0.0)
        discounts = 1.0 / np.log2(np.arange(2, k + 2))
        ideal = np.sort(grades)[::-1][:k]
        dcg = np.sum((2.0 ** ranked - 1) * discounts[:ranked.size])
        ndcg.append(dcg / np.sum((2.0 ** ideal - 1) * discounts[:ideal.size]))
    return {"mrr": float(np.mean(reciprocal)) if reciprocal else 0.0,
            "ndcg": float(np.mean(ndcg)) if ndcg else 0.0,
            "queries": len(reciprocal), "queries_without_relevant": without}


def auc(labels, scores):
    """The area under the ROC curve of scores against label > 0 (ties count a half); None
    when the rows are all of one kind."""
    from scipy import stats  # pylint: disable=import-outside-toplevel
    relevant = np.asarray(labels) > 0
    count, other = int(relevant.sum()), int((~relevant).sum())
    if not count or not other:
        return None
    ranks = stats.rankdata(np.asarray(scores, np.float64))
    return float((ranks[relevant].sum() - count * (count + 1) / 2.0) / (count * other))


def metrics_of(rows, scores, loss, per_example_loss=None):
    """eval_results.txt's values (but global_step) of `rows`' scores."""
    found = ranking_metrics([r.query for r in rows], [r.label for r in rows], scores)
    result = {"eval_mrr_at_%d" % TOP_K: np.float32(found["mrr"]),
              "eval_ndcg_at_%d" % TOP_K: np.float32(found["ndcg"]),
              "eval_queries": found["queries"],
              "eval_queries_without_relevant": found["queries_without_relevant"]}
    if loss == "pointwise":
        relevant = np.asarray([r.label for r in rows]) > 0
        result["eval_accuracy"] = np.float32(np.mean((np.asarray(scores) >= 0) == relevant))
        area = auc(relevant, scores)
        result["eval_auc"] = np.float32(area if area is not None else float("nan"))
        if per_example_loss is not None:
            result["eval_loss"] = np.float32(np.mean(per_example_loss))
    return result


def metric_names(loss):
    """The names metrics_of reports with `loss`, known before any work."""
    rows = [Row("q", "a", 1.0), Row("q", "b", 0.0)]
    return sorted(metrics_of(rows, [1.0, 0.0], loss, [0.0, 0.0]))


# ---------------------------------------------------------------------------
# Features and the task
# ---------------------------------------------------------------------------

def pair_features(query, passage, max_seq_length, tokenizer):
    """(input_ids, input_mask, segment_ids) of [CLS] query [SEP] passage [SEP] (the
    reference's packing: an empty passage gives [CLS] query [SEP])."""
    _, ids, mask, segments = input_pipeline.pack_pair(
        tokenizer.tokenize(query), tokenizer.tokenize(passage), max_seq_length, tokenizer)
    return ids, mask, segments


def row_spec(seq_length):
    """Feature spec of the files of Rows (a pair each, a float label)."""
    return input_pipeline.classifier_features(seq_length, tf.float32)


def triple_spec(seq_length):
    """Feature spec of the files of Triples ([2, S]: the positive's pair, the negative's)."""
    seq = tf.io.FixedLenFeature([2, seq_length], tf.int64)
    return {"input_ids": seq, "input_mask": seq, "segment_ids": seq,
            "label_ids": tf.io.FixedLenFeature([], tf.int64)}


def scorer_model(bert_config, use_one_hot_embeddings=False):
    """The tf_keras ranker: heads.BertClassifier with one label."""
    return heads.BertClassifier(bert_config, 1, use_one_hot_embeddings)


def _scores(model, features, is_training):
    """[N] scores of features [N, S] or, for triples, [N, 2] of [N, 2, S]."""
    shape = tf.shape(features["input_ids"])
    flat = {key: tf.reshape(features[key], [-1, shape[-1]])
            for key in ("input_ids", "input_mask", "segment_ids")}
    logits = tf.cast(model(flat, training=is_training)["logits"], tf.float32)[:, 0]
    return tf.reshape(logits, shape[:-1])


class RankerTask(object):
    """What the train / evaluate / predict steps share: features, losses and outputs."""

    def __init__(self, output_dir, max_seq_length, tokenizer, loss="pointwise",
                 use_one_hot_embeddings=False):
        if loss not in LOSSES:
            raise ValueError("--loss=%s: expected one of %s" % (loss, ", ".join(LOSSES)))
        self.output_dir = output_dir
        self.max_seq_length = max_seq_length
        self.tokenizer = tokenizer
        self.loss = loss
        self.spec = (triple_spec if loss == "pairwise" else row_spec)(max_seq_length)
        self.use_one_hot_embeddings = use_one_hot_embeddings  # --use_tpu

    def model(self, bert_config):
        """A BertClassifier with one label."""
        return scorer_model(bert_config, self.use_one_hot_embeddings)

    def write_features(self, examples, path):
        """Writes the records of Rows ([S] and the label) or Triples ([2, S]) to `path`;
        returns how many."""
        with input_pipeline.RecordWriter(path) as writer:
            for example in examples:
                if isinstance(example, Triple):
                    pairs = [pair_features(example.query, passage, self.max_seq_length,
                                           self.tokenizer)
                             for passage in (example.positive, example.negative)]
                    features = {key: input_pipeline.int_feature(
                        [v for pair in pairs for v in pair[n]])
                        for n, key in enumerate(("input_ids", "input_mask", "segment_ids"))}
                    features["label_ids"] = input_pipeline.int_feature([0])
                else:
                    ids, mask, segments = pair_features(example.query, example.passage,
                                                        self.max_seq_length, self.tokenizer)
                    features = {"input_ids": input_pipeline.int_feature(ids),
                                "input_mask": input_pipeline.int_feature(mask),
                                "segment_ids": input_pipeline.int_feature(segments),
                                "label_ids": input_pipeline.float_feature([example.label]),
                                "is_real_example": input_pipeline.int_feature([1])}
                writer.write(features)
        return writer.num_written

    def write(self, examples, name):
        """Writes output_dir/`name`.tf_record; returns its path."""
        path = os.path.join(self.output_dir, name + ".tf_record")
        self.write_features(examples, path)
        return path

    def loss_fn(self, model, features, is_training):
        """The mean loss of this replica's batch: pointwise, the binary cross-entropy of
        each row's score against label > 0; pairwise, softplus(s_neg - s_pos) per triple."""
        scores = _scores(model, features, is_training)
        if self.loss == "pairwise":
            return tf.reduce_mean(tf.nn.softplus(scores[:, 1] - scores[:, 0])), {}
        return tf.reduce_mean(_cross_entropy(features["label_ids"], scores)), {}

    @staticmethod
    def predict_fn(model, features):
        """Each row's score and cross-entropy (rows: the evaluation and test files)."""
        scores = _scores(model, features, False)
        return {"scores": scores,
                "per_example_loss": _cross_entropy(features["label_ids"], scores),
                "is_real_example": features["is_real_example"]}

    def predictions(self, runner, rows, stage, batch_size, written=None):
        """Writes `stage`.tf_record of `rows` (unless `written`, its path, is given); the
        real rows' {"scores", "per_example_loss"}, in order."""
        path = written or self.write(rows, stage)
        training.log_stage(stage, ["Num rows = %d" % len(rows)])
        parts = {"scores": [], "per_example_loss": []}
        batches = runner.predict(input_pipeline.dataset_fn_for(
            [path], row_spec(self.max_seq_length), batch_size, is_training=False,
            trim_padding=runner.trim_padding), self.predict_fn, stage=stage,
            total_steps=-(-len(rows) // batch_size))
        for out in batches:
            real = np.asarray(out["is_real_example"]) > 0
            for key in parts:
                parts[key].append(np.asarray(out[key])[real])
        merged = {key: np.concatenate(value) if value else np.zeros([0], np.float32)
                  for key, value in parts.items()}
        if len(merged["scores"]) != len(rows):
            raise RuntimeError("predicted %d rows, expected %d"
                               % (len(merged["scores"]), len(rows)))
        return merged

    def metrics(self, examples, predictions):
        """metrics_of the evaluation Rows `examples` and predictions()' columns."""
        return metrics_of(examples, predictions["scores"], self.loss,
                          predictions["per_example_loss"])

    def metric_names(self, examples=None):
        """The names metrics() reports (module metric_names)."""
        del examples
        return metric_names(self.loss)

    @staticmethod
    def write_result_files(output_dir, rows, predictions):
        """test_results.tsv of the test `rows`' predictions() (one score a line);
        {"test_results": its path}."""
        path = os.path.join(output_dir, "test_results.tsv")
        write_scores(path, predictions["scores"])
        logging.info("Wrote %d scores to %s", len(rows), path)
        return {"test_results": path}


def _cross_entropy(labels, scores):
    """The binary cross-entropy of sigmoid(scores) against labels > 0."""
    targets = tf.cast(tf.cast(labels, tf.float32) > 0, tf.float32)
    return tf.nn.sigmoid_cross_entropy_with_logits(labels=targets, logits=scores)


@dataclasses.dataclass(frozen=True)
class RankerRun:
    """A run_ranker run's data, resolved once before any work (resolve)."""
    splits: dict  # {"train": Rows or Triples, "dev" / "test": Rows} of the do_* steps
    task: RankerTask  # features, losses and outputs (the tokenizer, the loss)


def resolve(settings):
    """Reads every split the do_* steps need (and so checks it) before any work and before
    the output folder is made; then makes it and reads the vocabulary."""
    wanted = [name for name, flag in (("train", "train"), ("dev", "eval"), ("test", "predict"))
              if getattr(settings, "do_" + flag)]
    splits = {name: read_split(settings.data_dir, name, settings.loss) for name in wanted}
    fileutil.prepare_output_dir(settings.output_dir, lock=settings.do_train)
    tokenizer = loaders.load_tokenizer(settings.vocab_file, settings.do_lower_case)
    return RankerRun(splits, RankerTask(settings.output_dir, settings.max_seq_length,
                                        tokenizer, settings.loss, settings.use_tpu))


def write_scores(path, scores):
    """test_results.tsv: one score a line, in the test file's order."""
    with fileutil.atomic_open(path, "w") as f:
        for score in scores:
            f.write("%r\n" % float(score))


def ranked(passages, scores):
    """rank()'s answer: [{"index", "passage", "score"}] from the highest score (ties: in
    the passages' order)."""
    return [{"index": i, "passage": passages[i], "score": float(scores[i])}
            for i in order(scores)]
