"""run_multiple_choice's task (a FineTuningTask, task.py) and its data, resolved once.

resolve(settings) reads every split the do_* steps need (multiple_choice_data), then
makes the output folder and reads the vocabulary: a MultipleChoiceRun holding the
MultipleChoiceTask. The model is heads.BertMultipleChoice (a score per choice from the
pooled output of each [CLS] context [SEP] choice [SEP]); the loss the cross-entropy of
the softmax over the choices; the metrics eval_accuracy and eval_loss.
"""
import dataclasses
import os

import numpy as np
import tensorflow as tf

from bert_tf2 import fileutil
from bert_tf2 import heads
from bert_tf2 import input_pipeline
from bert_tf2 import loaders
from bert_tf2.tasks import data_tables
from bert_tf2.tasks import multiple_choice_data
from bert_tf2.tasks import prediction_files
from bert_tf2.trainer import training


def choice_model(bert_config, use_one_hot_embeddings=False):
    """The tf_keras multiple-choice model (heads.BertMultipleChoice)."""
    return heads.BertMultipleChoice(bert_config, use_one_hot_embeddings)


def choice_metrics(columns):
    """eval_results.txt's eval_accuracy and eval_loss of a prediction pass's columns
    (probabilities, label_ids, per_example_loss of the real questions)."""
    predictions = np.argmax(columns["probabilities"], axis=-1)
    return {"eval_accuracy": np.float32(np.mean(predictions == columns["label_ids"])),
            "eval_loss": np.float32(np.mean(columns["per_example_loss"]))}


def metric_names():
    """The names choice_metrics reports (of two made-up questions), known before any work."""
    return sorted(choice_metrics({"probabilities": np.eye(2), "label_ids": np.arange(2),
                                  "per_example_loss": np.zeros(2)}))


class MultipleChoiceTask(object):
    """What the train / evaluate / predict steps share: features, loss and outputs."""

    def __init__(self, output_dir, max_seq_length, tokenizer, num_choices,
                 use_one_hot_embeddings=False):
        self.output_dir = output_dir
        self.max_seq_length = max_seq_length
        self.tokenizer = tokenizer
        self.num_choices = num_choices
        self.spec = multiple_choice_data.record_spec(num_choices, max_seq_length)
        self.use_one_hot_embeddings = use_one_hot_embeddings  # --use_tpu

    def model(self, bert_config):
        """A BertMultipleChoice (any number of choices)."""
        return choice_model(bert_config, self.use_one_hot_embeddings)

    def write_features(self, examples, path):
        """Writes the [num_choices, max_seq_length] records of `examples` to `path`;
        returns how many."""
        return multiple_choice_data.write_features(examples, path, self.max_seq_length,
                                                   self.tokenizer)

    def write(self, examples, name):
        """Writes output_dir/`name`.tf_record; returns its path."""
        path = os.path.join(self.output_dir, name + ".tf_record")
        self.write_features(examples, path)
        return path

    @staticmethod
    def loss_fn(model, features, is_training):
        """Mean cross-entropy over this replica's questions (see training.Runner.train)."""
        logits = model(features, training=is_training)["logits"]
        per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=features["label_ids"], logits=logits)
        return tf.reduce_mean(per_example), {}

    @staticmethod
    def predict_fn(model, features):
        """Choice probabilities and the per-question loss."""
        logits = model(features, training=False)["logits"]
        return {"probabilities": tf.nn.softmax(logits, axis=-1),
                "per_example_loss": tf.nn.sparse_softmax_cross_entropy_with_logits(
                    labels=features["label_ids"], logits=logits),
                "label_ids": features["label_ids"],
                "is_real_example": features["is_real_example"]}

    def predictions(self, runner, examples, stage, batch_size, written=None):
        """Writes `stage`.tf_record (unless `written`, its path written before, is
        given); the predict_fn outputs of its real rows, in order."""
        path = written or self.write(examples, stage)
        training.log_stage(stage, ["Num questions = %d" % len(examples)])
        count = len(examples)
        parts = {}
        batches = runner.predict(input_pipeline.dataset_fn_for(
            [path], self.spec, batch_size, is_training=False,
            trim_padding=runner.trim_padding), self.predict_fn, stage=stage,
            total_steps=-(-count // batch_size))
        for out in batches:
            real = np.asarray(out["is_real_example"]) > 0
            for key in ("probabilities", "per_example_loss", "label_ids"):
                parts.setdefault(key, []).append(np.asarray(out[key])[real])
        merged = {key: np.concatenate(value) for key, value in parts.items()}
        if len(merged.get("label_ids", ())) != count:
            raise RuntimeError("predicted %d questions, expected %d"
                               % (len(merged.get("label_ids", ())), count))
        return merged

    @staticmethod
    def metrics(examples, predictions):
        """choice_metrics of predictions()' columns (the labels are theirs: `examples`
        is not read)."""
        del examples
        return choice_metrics(predictions)

    @staticmethod
    def metric_names(examples=None):
        """The names metrics() reports (module metric_names)."""
        del examples
        return metric_names()

    @staticmethod
    def write_result_files(output_dir, examples, predictions):
        """test_results.tsv (the choice probabilities of each test question) and
        test_predictions.jsonl (prediction_files) of predictions(); {"test_results",
        "test_predictions": their paths}."""
        return prediction_files.result_files(
            output_dir, examples, np.asarray(predictions["probabilities"], np.float32),
            prediction_files.choice_record, "questions")


@dataclasses.dataclass(frozen=True)
class MultipleChoiceRun:
    """A run_multiple_choice run's data, resolved once before any work (resolve)."""
    splits: dict  # {"train" / "dev" / "test": Examples} of the do_* steps
    task: MultipleChoiceTask  # features, loss and outputs (the tokenizer, the choices)
    source: str  # the data in messages (data_tables.describe)


def resolve(settings):
    """Reads every split the do_* steps need (and so checks it) before any work, and
    before the output folder is made; then makes it and reads the vocabulary."""
    data_dir = settings.data_dir
    wanted = {name: "--do_%s" % flag for name, flag in (
        ("train", "train"), ("dev", "eval"), ("test", "predict"))
        if getattr(settings, "do_" + flag)}
    data_tables.check_splits(data_dir, wanted)
    splits = {name: multiple_choice_data.read_examples(settings.task_name, data_dir, name)
              for name in wanted}
    num_choices = {len(examples[0].choices) for examples in splits.values()}
    if len(num_choices) != 1:
        raise ValueError("the splits of %s have different numbers of choices: %s"
                         % (data_tables.describe(data_dir), sorted(num_choices)))
    fileutil.prepare_output_dir(settings.output_dir, lock=settings.do_train)
    tokenizer = loaders.load_tokenizer(settings.vocab_file, settings.do_lower_case)
    return MultipleChoiceRun(splits, MultipleChoiceTask(
        settings.output_dir, settings.max_seq_length, tokenizer, num_choices.pop(),
        settings.use_tpu), data_tables.describe(data_dir))
