"""run_classifier's task (a FineTuningTask, task.py): records, model, loss, metrics, rows.

ClassifierTask serves the single-label tasks (classification, and regression when the
processor's get_labels() is [None]), with --long_text and --class_weights;
MultiLabelTask, the multi-label ones (a sigmoid per label, multilabel_data.py). task_of
picks one for a resolved run (classifier_run.ClassifierRun).

The model is heads.BertClassifier; the loss the reference's softmax cross-entropy
(compute_loss; regression: the squared error of the single output), weighed by
--class_weights when given. Its passes are trainer/runner_body.py's (evaluate,
dev_evaluation, predict) through the hooks of task.py: predictions() writes
output_dir/<stage>.tf_record and gives the columns metrics() reads (evaluated_columns):
per_example_loss, outputs (probabilities, the regression score, or the per-label
probabilities), label_ids, is_real_example and batch_ids, one real row per example
(--long_text=windows: the windows pooled back into their example); write_result_files
writes each example's output row (output_rows) to test_results.tsv and
test_predictions.jsonl.
"""
import numpy as np
import tensorflow as tf

from bert_tf2 import heads
from bert_tf2 import input_pipeline
from bert_tf2.tasks import glue_data
from bert_tf2.tasks import long_text
from bert_tf2.tasks import multilabel_data
from bert_tf2.tasks import prediction_files
from bert_tf2.trainer import class_weights
from bert_tf2.trainer import runner_body
from bert_tf2.trainer import training


def compute_loss(logits, label_ids, num_labels, regression=False):
    """Returns (mean loss, per-example loss, probabilities or predictions).

    Classification: cross-entropy of the softmax; regression: squared error of
    the single output, whose value is returned as the prediction.
    """
    logits = tf.cast(logits, tf.float32)
    if regression:
        predictions = logits[:, 0]
        per_example = tf.square(predictions - tf.cast(label_ids, tf.float32))
        return tf.reduce_mean(per_example), per_example, predictions
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    one_hot = tf.one_hot(label_ids, depth=num_labels, dtype=tf.float32)
    per_example = -tf.reduce_sum(one_hot * log_probs, axis=-1)
    return tf.reduce_mean(per_example), per_example, tf.nn.softmax(logits, axis=-1)


def classifier_model(bert_config, num_labels, use_one_hot_embeddings=False):
    """The tf_keras classifier: BERT, dropout 0.1 on the pooled output, a linear layer
    (num_labels == 1: a regression score)."""
    return heads.BertClassifier(bert_config, num_labels,
                                use_one_hot_embeddings=use_one_hot_embeddings)


def task_of(plan, max_seq_length, use_one_hot_embeddings=False, output_dir=None):
    """The task of a resolved run (classifier_run.ClassifierRun `plan`): a MultiLabelTask
    for a multi-label processor, else a ClassifierTask; `output_dir`: where its passes
    write their records."""
    if plan.processor.is_multilabel:
        return MultiLabelTask(plan.processor, plan.tokenizer, max_seq_length, plan.long_texts,
                              use_one_hot_embeddings=use_one_hot_embeddings,
                              output_dir=output_dir)
    return ClassifierTask(plan.processor, plan.tokenizer, max_seq_length, plan.long_texts,
                          plan.class_weights, plan.positive, use_one_hot_embeddings,
                          output_dir)


class ClassifierTask(object):
    """What run_classifier's train / evaluate / predict steps share: data, features and
    the loss (a FineTuningTask)."""

    def __init__(self, processor, tokenizer, max_seq_length, long_texts, weights=None,
                 positive=1, use_one_hot_embeddings=False, output_dir=None):
        self.processor = processor
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.label_list = processor.get_labels()
        self.regression = processor.is_regression
        self.long_text = long_texts  # long_text.LongText: --long_text and its flags
        self.spec = long_texts.record_spec(glue_data.record_spec(max_seq_length,
                                                                 self.regression))
        self.class_weights = weights  # --class_weights (None: the reference's loss)
        self.positive = positive  # --positive_label's index (tasks of 2 labels)
        self.use_one_hot_embeddings = use_one_hot_embeddings  # --use_tpu
        self.output_dir = output_dir  # where write() puts the records of a pass

    def model(self, bert_config):
        """A BertClassifier of this task's labels (one output for regression)."""
        return classifier_model(bert_config, len(self.label_list), self.use_one_hot_embeddings)

    def write_features(self, examples, path):
        """Writes the TFRecord file of `examples` to `path`; returns the records written."""
        windows = self.long_text.windows
        return glue_data.file_based_convert_examples_to_features(
            examples, self.label_list, self.max_seq_length, self.tokenizer, path,
            split=self.long_text.split, index_feature=long_text.DOCUMENT_INDEX if windows else None)

    def loss_fn(self, model, features, is_training):
        """The training loss of one replica's batch (see training.Runner.train)."""
        logits = model(features, training=is_training)["logits"]
        loss, per_example, _ = compute_loss(logits, features["label_ids"],
                                            len(self.label_list), self.regression)
        if self.class_weights is not None:
            loss = class_weights.weighted_mean(per_example, features["label_ids"],
                                               self.class_weights)
        return loss, {}

    def predict_fn(self, model, features):
        """Per-example loss and outputs (probabilities, or the regression score)."""
        logits = model(features, training=False)["logits"]
        _, per_example, outputs = compute_loss(logits, features["label_ids"],
                                               len(self.label_list), self.regression)
        out = {"per_example_loss": per_example, "outputs": outputs,
               "label_ids": features["label_ids"],
               "is_real_example": features["is_real_example"]}
        if self.long_text.windows:  # pooled per example afterwards (pooled_columns)
            out.update(logits=tf.cast(logits, tf.float32),
                       **{long_text.DOCUMENT_INDEX: features[long_text.DOCUMENT_INDEX]})
        return out

    def pooled_columns(self, columns):
        """--long_text=windows: window rows -> one real row per example (outputs, loss)."""
        if not self.long_text.windows:
            return columns
        logits, pooled = self.long_text.pool_columns(columns)
        _, per_example, outputs = compute_loss(logits, pooled["label_ids"],
                                               len(self.label_list), self.regression)
        return dict(pooled, per_example_loss=per_example.numpy(), outputs=outputs.numpy())

    @staticmethod
    def output_rows(predictions):
        """The outputs (float32) of the real examples of predictions()' columns, in order:
        one row per example (--long_text=windows: pooled)."""
        real = np.asarray(predictions["is_real_example"]) > 0
        return np.asarray(predictions["outputs"], np.float32)[real]

    def prediction_record(self, guid, row):
        """The test_predictions.jsonl object of one example's output row."""
        if self.regression:
            return prediction_files.regression_record(guid, row)
        return prediction_files.classification_record(guid, row, self.label_list)

    def metrics(self, examples, predictions):
        """The eval_results.txt values (glue_data.eval_metrics) of evaluated_columns'
        `predictions` (the labels are theirs: `examples` is not read)."""
        del examples  # the columns hold the labels
        return glue_data.eval_metrics(
            self.processor, predictions["per_example_loss"], predictions["label_ids"],
            predictions["outputs"], predictions["is_real_example"], predictions["batch_ids"],
            positive=self.positive)

    def metric_names(self, examples=None):
        """The names metrics() reports (of two made-up rows), known before the model loads
        or a file is written."""
        rows = np.array([0, 1])
        labels, outputs = self._made_up_rows(rows)
        return sorted(self.metrics(examples, {
            "per_example_loss": np.zeros(2), "label_ids": labels, "outputs": outputs,
            "is_real_example": np.ones(2), "batch_ids": rows}))

    def _made_up_rows(self, rows):
        """(label_ids, outputs) of metric_names' two rows."""
        if self.regression:
            return rows.astype(np.float32), rows.astype(np.float32)
        labels = rows % len(self.label_list)  # (a task of one label: that label twice)
        return labels, np.eye(len(self.label_list))[labels]

    def ordered_dataset(self, path, batch_size, trim_padding=False):
        """dataset_fn reading `path` once, the last batch padded (not dropped).

        With trim_padding the batches are grouped by length and trimmed;
        Runner.predict gives their outputs back in input order.
        """
        return input_pipeline.dataset_fn_for([path], self.spec, batch_size, is_training=False,
                                             trim_padding=trim_padding)

    def batches(self, num_examples, batch_size):
        """The batches a pass over `num_examples` examples runs (None with
        --long_text=windows: an example makes one record per window)."""
        return None if self.long_text.windows else -(-num_examples // batch_size)

    def write(self, examples, stage):
        """Writes output_dir/`stage`.tf_record of `examples`; returns its path."""
        path = runner_body.records_path(self.output_dir, stage)
        self.write_features(examples, path)
        return path

    def predictions(self, runner, examples, stage, batch_size, written=None):
        """evaluated_columns of `examples` through output_dir/`stage`.tf_record, written
        now under the stage's banner (or `written`: its path, written before: no banner,
        as dev_evaluation's passes and Predictor calls)."""
        path = written
        if path is None:
            path = self.write(examples, stage)
            training.log_stage(stage, ["Num examples = %d" % len(examples),
                                       "Batch size = %d" % batch_size])
        return self.evaluated_columns(runner, path, len(examples), batch_size, stage)

    def write_result_files(self, output_dir, examples, predictions):
        """test_results.tsv and test_predictions.jsonl of predictions()' output rows
        (prediction_files.result_files: {Result.outputs name: path})."""
        return prediction_files.result_files(output_dir, examples,
                                             self.output_rows(predictions),
                                             self.prediction_record)

    def _pass(self, runner, path, num_examples, batch_size, stage):
        """Runner.predict's batches of predict_fn over the records of `path`, in order."""
        return runner.predict(self.ordered_dataset(path, batch_size, runner.trim_padding),
                              self.predict_fn, stage=stage,
                              total_steps=self.batches(num_examples, batch_size))

    def evaluated_columns(self, runner, path, num_examples, batch_size, stage="eval"):
        """The columns metrics() reads of the model run over the `num_examples` examples
        whose records `path` holds (`stage`: Runner.predict's, for its progress): one real
        row per example, with its batch's index."""
        keys = ("per_example_loss", "outputs", "label_ids", "is_real_example") + (
            ("logits", long_text.DOCUMENT_INDEX) if self.long_text.windows else ())
        columns = {key: [] for key in keys + ("batch_ids",)}
        for batch_index, out in enumerate(self._pass(runner, path, num_examples, batch_size,
                                                     stage)):
            for key in keys:
                columns[key].append(np.asarray(out[key]))
            columns["batch_ids"].append(np.full(len(out["is_real_example"]), batch_index))
        merged = self.pooled_columns({key: np.concatenate(parts) if parts else np.zeros([0])
                                      for key, parts in columns.items()})
        num_real = int(np.sum(merged["is_real_example"] > 0))
        if num_real != num_examples:
            raise RuntimeError("evaluated %d examples, expected %d" % (num_real, num_examples))
        return merged


class MultiLabelTask(ClassifierTask):
    """ClassifierTask for --task_name=multilabel (and --task_type=multilabel): a yes / no
    per label (multilabel_data: records, loss, metrics); no --long_text, no weights."""

    regression = False

    def __init__(self, processor, tokenizer, max_seq_length, long_texts,
                 use_one_hot_embeddings=False, output_dir=None):
        super().__init__(processor, tokenizer, max_seq_length, long_texts,
                         use_one_hot_embeddings=use_one_hot_embeddings, output_dir=output_dir)
        self.spec = multilabel_data.record_spec(max_seq_length, len(self.label_list))

    def write_features(self, examples, path):
        """Writes the TFRecord file of `examples` to `path`; returns the records written."""
        return multilabel_data.write_records(examples, self.label_list, self.max_seq_length,
                                             self.tokenizer, path)

    def loss_fn(self, model, features, is_training):
        """The training loss of one replica's batch (see training.Runner.train)."""
        loss, _, _ = multilabel_data.compute_loss(
            model(features, training=is_training)["logits"], features["label_ids"])
        return loss, {}

    def predict_fn(self, model, features):
        """Per-example loss, per-label probabilities and the multi-hot labels [B, L]."""
        logits = model(features, training=False)["logits"]
        _, per_example, probabilities = multilabel_data.compute_loss(logits,
                                                                     features["label_ids"])
        return {"per_example_loss": per_example, "outputs": probabilities,
                "label_ids": tf.reshape(features["label_ids"], tf.shape(probabilities)),
                "is_real_example": features["is_real_example"]}

    def prediction_record(self, guid, row):
        """The test_predictions.jsonl object of one example's probabilities."""
        return prediction_files.multilabel_record(guid, row, self.label_list,
                                                  self.processor.threshold)

    def metrics(self, examples, predictions):
        """eval_results.txt: run_classifier's eval_loss / loss and label_set_metrics."""
        del examples  # the columns hold the label sets
        result = glue_data.loss_metrics(predictions["per_example_loss"],
                                        predictions["is_real_example"], predictions["batch_ids"])
        real = np.asarray(predictions["is_real_example"]) > 0
        result.update(multilabel_data.label_set_metrics(
            np.asarray(predictions["label_ids"])[real],
            np.asarray(predictions["outputs"])[real] >= self.processor.threshold,
            self.label_list))
        return result

    def _made_up_rows(self, rows):
        labels = np.repeat(rows[:, None], len(self.label_list), 1)
        return labels, labels
