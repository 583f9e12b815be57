"""run_squad's task (a FineTuningTask, task.py), its data resolved once, and its
prediction pass over eval.tf_record.

resolve(settings, bert_config) reads the vocabulary and both SQuAD files before anything
long runs (bad input fails early), then makes the output folder: a SquadRun (frozen)
that run_squad's train / predict steps read, holding the SquadTask: the BertSquad model,
squad_loss (the mean of the start and end cross-entropies), the features, the
predictions and the official EM/F1. write_features / write_eval write the feature
files; predict runs a model over eval.tf_record into CompactResults (full logits, or
--trim_padding's n-best real positions: top_positions_fn).

The task's passes are trainer/runner_body.py's (task.py's hooks) over SquadQuestions (the
SquadExamples of --predict_file and its articles, whose gold answers the official EM/F1
reads): predictions() gives the SquadPredictions of the n-best (compute_predictions),
write_result_files writes predictions.json, nbest_predictions.json and (SQuAD 2.0)
null_odds.json, metrics() scores them.
"""
import dataclasses
import os
import time

from absl import logging
import numpy as np
import tensorflow as tf

from bert_tf2 import fileutil
from bert_tf2 import heads
from bert_tf2 import loaders
from bert_tf2 import input_pipeline
from bert_tf2.tasks import squad_data
from bert_tf2.tasks import squad_results
from bert_tf2.trainer import runner_body

# Seconds between two progress lines while predicting.
PROGRESS_EVERY_S = 10.0


@dataclasses.dataclass(frozen=True)
class SquadQuestions:
    """The questions a pass answers: what SquadTask's passes read as their `examples`."""
    examples: list  # SquadExamples (examples_from_articles, is_training=False)
    articles: list  # the articles they come from (the gold answers EM/F1 reads)


@dataclasses.dataclass(frozen=True)
class SquadRun:
    """A run_squad run's data, resolved once before any work (resolve)."""
    bert_config: object
    tokenizer: object
    train_examples: object = None  # SquadExamples of --train_file (None without do_train)
    evaluation: SquadQuestions = None  # --predict_file's (None without do_predict)
    task: object = None  # the SquadTask of the run's settings and tokenizer


def resolve(settings, bert_config):
    """Reads the vocabulary and the files of the do_* steps (both before anything long
    runs, so bad input fails early), then makes the output folder (bad data leaves no
    empty folder). Returns a SquadRun."""
    tokenizer = loaders.load_tokenizer(settings.vocab_file, settings.do_lower_case)
    train_examples = evaluation = None
    if settings.do_train:
        train_examples = squad_data.examples_from_articles(
            squad_data.load_squad(settings.train_file, "train_file"), is_training=True,
            version_2_with_negative=settings.version_2_with_negative,
            source=squad_data.source_name(settings.train_file, "train_file"))
    if settings.do_predict:
        articles = squad_data.load_squad(settings.predict_file, "predict_file")
        evaluation = SquadQuestions(squad_data.examples_from_articles(
            articles, is_training=False,
            version_2_with_negative=settings.version_2_with_negative,
            source=predict_source(settings)), articles)
    fileutil.prepare_output_dir(settings.output_dir, lock=settings.do_train)
    return SquadRun(bert_config, tokenizer, train_examples, evaluation,
                    SquadTask(settings, tokenizer))


def squad_model(bert_config, use_one_hot_embeddings=False):
    """The tf_keras SQuAD model: start and end logits per token (heads.BertSquad)."""
    return heads.BertSquad(bert_config, use_one_hot_embeddings=use_one_hot_embeddings)


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


class SquadTask(object):
    """What run_squad's train / predict steps share (a FineTuningTask): the settings of
    the run (max_seq_length, doc_stride, max_query_length, n_best_size, ...) and the
    tokenizer."""

    def __init__(self, settings, tokenizer):
        self.settings = settings
        self.tokenizer = tokenizer
        self.spec = input_pipeline.squad_features(settings.max_seq_length, is_training=True)

    def model(self, bert_config):
        """A BertSquad (--use_tpu: one-hot embeddings)."""
        return squad_model(bert_config, self.settings.use_tpu)

    def write_features(self, examples, path, is_training=True, keep=None):
        """Writes the windows of `examples` to `path` (training records: with their
        answer positions; `keep`: a list the eval windows' summaries are appended to);
        returns the number written."""
        return write_features(path, examples, self.tokenizer, self.settings, is_training,
                              keep)

    @staticmethod
    def loss_fn(model, features, is_training):
        """squad_loss of one replica's batch (see training.Runner.train)."""
        outputs = model(features, training=is_training)
        loss = squad_loss(outputs["start_logits"], outputs["end_logits"],
                          features["start_positions"], features["end_positions"])
        return loss, {}

    @staticmethod
    def predict_fn(model, features):
        """The start and end logits of a batch's windows (module predict_fn)."""
        return predict_fn(model, features)

    def write(self, examples, stage):
        """Writes output_dir/`stage`.tf_record, the windows of the SquadQuestions
        `examples` (write_eval); returns the `written` handle predictions() takes."""
        return write_eval(self.settings, examples.examples, self.tokenizer,
                          self.settings.predict_batch_size, stage)

    def predictions(self, runner, examples, stage, batch_size, written=None):
        """The SquadPredictions (squad_results.compute_predictions: answers, n-best, null
        odds) of the SquadQuestions `examples`, through output_dir/`stage`.tf_record
        (module predict; `written`: write()'s result)."""
        settings = self.settings
        summaries, results = predict(settings, runner, examples.examples, self.tokenizer,
                                     batch_size, stage, written)
        return squad_results.compute_predictions(
            examples.examples, summaries, results, settings.n_best_size,
            settings.max_answer_length, settings.do_lower_case,
            settings.version_2_with_negative, settings.null_score_diff_threshold,
            settings.verbose_logging)

    def write_result_files(self, output_dir, examples, predictions):
        """predictions.json, nbest_predictions.json and (SQuAD 2.0) null_odds.json of the
        SquadPredictions `predictions`; {Result.outputs name: path}."""
        del examples  # the predictions are by question id
        names = ("predictions", "nbest_predictions") + (
            ("null_odds",) if self.settings.version_2_with_negative else ())
        files = {name: os.path.join(output_dir, name + ".json") for name in names}
        squad_results.write_answer_files(predictions, files["predictions"],
                                         files["nbest_predictions"], files.get("null_odds"))
        return files

    def metrics(self, examples, predictions):
        """The official EM / F1 (squad_results.evaluate_predictions) of the
        SquadPredictions `predictions` against the gold answers of the SquadQuestions
        `examples` (their articles)."""
        return squad_results.evaluate_predictions(examples.articles, predictions,
                                                  self.settings.version_2_with_negative)

    def metric_names(self, examples=None):
        """The names metrics() reports for the SquadQuestions `examples`."""
        return squad_results.metric_names(examples.articles,
                                          self.settings.version_2_with_negative)


def predict_source(settings):
    """--predict_file's name in messages (its path, or "--predict_file (a dict)")."""
    return squad_data.source_name(settings.predict_file, "predict_file")


def write_features(path, examples, tokenizer, settings, is_training, keep=None):
    """Converts `examples` into a TFRecord file; returns the number of features."""
    with squad_data.FeatureWriter(path, is_training=is_training) as writer:
        def output(feature):
            writer.process_feature(feature)
            if keep is not None:
                keep.append(squad_results.summarize_feature(feature))

        squad_data.convert_examples_to_features(
            examples=examples, tokenizer=tokenizer, max_seq_length=settings.max_seq_length,
            doc_stride=settings.doc_stride, max_query_length=settings.max_query_length,
            is_training=is_training, output_fn=output)
    return writer.num_features


def write_eval(settings, eval_examples, tokenizer, batch_size, stage="eval"):
    """Writes output_dir/`stage`.tf_record (SQuAD's: eval); returns (feature summaries,
    number of features)."""
    eval_file = runner_body.records_path(settings.output_dir, stage)
    summaries = []
    num_features = write_features(eval_file, eval_examples, tokenizer, settings,
                                   is_training=False, keep=summaries)

    logging.info("***** Running predictions *****")
    logging.info("  Num orig examples = %d", len(eval_examples))
    logging.info("  Num split examples = %d", num_features)
    logging.info("  Batch size = %d", batch_size)
    return summaries, num_features


def predict(settings, runner, eval_examples, tokenizer, batch_size, stage="eval",
            written=None):
    """Runs the model over the features of output_dir/`stage`.tf_record (written now, or
    `written`: write_eval's result) in batches of `batch_size`; returns (summaries,
    compact results)."""
    summaries, num_features = written or write_eval(settings, eval_examples, tokenizer,
                                                    batch_size, stage)
    eval_file = runner_body.records_path(settings.output_dir, stage)
    trimmed = runner.trim_padding
    if trimmed:
        logging.info("  Trimmed batches (--trim_padding): n-best among real positions")
    spec = input_pipeline.squad_features(settings.max_seq_length, is_training=False)

    dataset_fn = input_pipeline.dataset_fn_for(
        [eval_file], spec, batch_size, is_training=False,
        trim_padding=trimmed,
        bucket_width=None if settings.enable_xla else input_pipeline.SQUAD_PREDICT_BUCKET_WIDTH)
    batch_fn = (top_positions_fn(settings.n_best_size, skip_padding=not settings.enable_xla)
                if trimmed else predict_fn)

    results = []
    started = last_report = time.time()
    for batch in runner.predict(dataset_fn, batch_fn):
        results.extend(compact_results(batch, settings.n_best_size, trimmed))
        now = time.time()
        if now - last_report >= PROGRESS_EVERY_S or len(results) == num_features:
            last_report = now
            done = summaries[len(results) - 1].example_index + 1 if results else 0
            logging.info("Predicted %d/%d features, %d/%d examples, %.1f examples/s",
                         len(results), num_features, done, len(eval_examples),
                         done / max(now - started, 1e-9))
    if len(results) != num_features:
        raise ValueError("the model returned %d results for %d features" %
                         (len(results), num_features))
    return summaries, results


def predict_fn(model, features):
    """The start and end logits (float32) of a batch's windows, with their ids."""
    outputs = model(features, training=False)
    return {
        "unique_ids": features["unique_ids"],
        "is_real_example": features["is_real_example"],
        "start_logits": tf.cast(outputs["start_logits"], tf.float32),
        "end_logits": tf.cast(outputs["end_logits"], tf.float32),
    }


def top_positions_fn(n_best_size, skip_padding=True):
    """predict_fn of trimmed batches: each window's n-best real positions, in the graph.

    Fixed-size outputs ([B, n_best_size] and the [CLS] logits), so that batches cut
    to different lengths join without padding their logits back. No padding position
    is read, so the encoder may run on the real tokens only (skip_padding: BertSquad's,
    not under XLA, whose shapes must be static).
    """
    def predict_fn(model, features):
        outputs = model(features, training=False, skip_padding=skip_padding)
        result = {"unique_ids": features["unique_ids"],
                  "is_real_example": features["is_real_example"]}
        for side in ("start", "end"):
            logits = tf.cast(outputs[side + "_logits"], tf.float32)
            result[side + "_index"], result[side + "_values"] = (
                squad_results.top_real_positions(logits, features["input_mask"],
                                                 n_best_size))
            result[side + "_null"] = logits[:, 0]
        return result
    return predict_fn


def compact_results(batch, n_best_size, trimmed):
    """The CompactResults of one predicted batch's real windows."""
    real = np.asarray(batch["is_real_example"]).astype(bool)
    column = {name: np.asarray(value)[real] for name, value in batch.items()}
    if not trimmed:
        return squad_results.compact_batch(column["unique_ids"], column["start_logits"],
                                           column["end_logits"], n_best_size)
    return squad_results.compact_top(
        column["unique_ids"], column["start_index"], column["start_values"],
        column["end_index"], column["end_values"], column["start_null"], column["end_null"])
