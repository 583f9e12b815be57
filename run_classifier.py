"""Fine-tunes BERT on a sentence (pair) classification task and evaluates it.

Command-line compatible with the original `run_classifier.py`: the same flags,
the same task names (cola, mnli, mrpc, xnli) and the same outputs in
--output_dir (train/eval/predict .tf_record files, eval_results.txt,
test_results.tsv). Added here: the other GLUE tasks (sst-2, qqp, qnli, rte,
wnli and the regression task sts-b), --xnli_language, extra GLUE metrics in
eval_results.txt, the TF2 distribution/precision flags of flags_common,
--task_name=multilabel (several labels per text; multilabel_data.py), your own data
files (--task_name=csv, tsv, jsonl; file_data.py) and your own DataProcessor
(--processor=FILE.py:CLASS); a training run leaves label_list.txt and
classifier_task.json for later runs and the export (classifier_tasks.py); --do_predict
also writes test_predictions.jsonl beside test_results.tsv (prediction_files.py).

From Python: Settings(data_dir=...) also takes, for --task_name=csv/tsv/jsonl, a dict of
tables {"train": t, "dev": t, "test": t} (DataFrame, list of dicts or dict of columns;
data_tables.py); predict(model_folder, texts, texts_b=None) and Predictor(model_folder)
return do_predict's predictions of texts in memory, from a trained output folder.

Eval and predict see every example: the last partial batch is padded with
rows flagged is_real_example = 0, which never reach a metric or an output line.
"""
from bert_tf2 import startup  # first, before tensorflow: a quiet C++ start-up (startup.py)
import os

from absl import flags
import numpy as np

from bert_tf2 import flags_common
from bert_tf2 import cli
from bert_tf2 import settings as settings_lib
# The task data lives in glue_data; the reference's names stay importable from here.
from bert_tf2.tasks.glue_data import (  # noqa: F401  pylint: disable=unused-import
    PROCESSORS, ColaProcessor, DataProcessor, InputExample, InputFeatures, MnliProcessor,
    MrpcProcessor, PaddingInputExample, QnliProcessor, QqpProcessor, RteProcessor,
    Sst2Processor, StsbProcessor, TsvRow, WnliProcessor, XnliProcessor,
    convert_examples_to_features, convert_single_example, eval_metrics,
    file_based_convert_examples_to_features, get_processor, record_spec)
import modeling
import tokenization
from bert_tf2.base import tf1_variables
from bert_tf2 import heads
from bert_tf2 import input_pipeline
from bert_tf2.tasks import classifier_run
from bert_tf2.tasks import classifier_task
from bert_tf2.tasks import classifier_tasks
from bert_tf2.tasks import data_tables
from bert_tf2.tasks import file_data
from bert_tf2.tasks import long_text
from bert_tf2.tasks import predict_inputs
from bert_tf2.tasks import prediction_files
from bert_tf2.trainer import class_weights
from bert_tf2.trainer import model_folder
from bert_tf2.trainer import periodic_eval
from bert_tf2.trainer import runner_body
from bert_tf2.trainer import training
from bert_tf2.trainer import training_record

# The reference's name, for code that imported it from run_classifier.
_truncate_seq_pair = input_pipeline.truncate_seq_pair


# ---------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------

def define_flags(fv):
    """Registers the classifier runner's flags on the FlagValues `fv`."""
    flags.DEFINE_string(
        "data_dir", None,
        "Directory holding the task's data files (.tsv for the GLUE tasks). From Python "
        "(Settings), --task_name=csv/tsv/jsonl also takes a dict of tables {'train': t, "
        "'dev': t, 'test': t} (data_tables.py).",
        flag_values=fv)
    flags.DEFINE_string("task_name", None, "Name of the task to fine-tune on (case-insensitive): "
                        "a GLUE task, csv / tsv / jsonl (your files), multilabel, or any name "
                        "with --processor.", flag_values=fv)
    flags.DEFINE_string(
        "output_dir", None,
        "Where checkpoints, feature files and result files are written.",
        flag_values=fv)
    flags_common.define_model_flags(fv)
    flags_common.define_fine_tuning_flags(fv)
    flags.DEFINE_string(
        "xnli_language", "zh",
        "Language of the XNLI data used by --task_name=xnli (the original code always "
        "used zh).", flag_values=fv)
    classifier_tasks.define_flags(fv)  # --processor, --labels_file, columns, --task_type, ...
    long_text.define_flags(fv)
    class_weights.define_flags(fv)
    flags_common.define_training_flags(fv)


# One field per flag above: run(Settings(task_name="mrpc", ...)) from Python.
Settings = settings_lib.settings_class(define_flags, __name__)
Settings.PYTHON_VALUES = {"data_dir": data_tables.PYTHON_VALUE}
# The task settings this runner's model folders keep beside do_lower_case and
# max_seq_length (model_folder.task_settings reads them from this file).
FOLDER_SETTINGS = ("task_name", "processor", "task_type", "text_a_column", "text_b_column",
                   "label_column", "threshold", "xnli_language")


# ---------------------------------------------------------------------------
# The reference's input functions (for code written against its Estimator API)
# ---------------------------------------------------------------------------

def file_based_input_fn_builder(input_file, seq_length, is_training, drop_remainder,
                                regression=False):
    """input_fn(params) -> dataset of the records in `input_file` (params["batch_size"]).

    Training data is repeated and shuffled; otherwise the file is read in order
    and, without drop_remainder, the last batch is padded with is_real_example=0.
    """
    def input_fn(params):
        return input_pipeline.make_dataset(
            [input_file], record_spec(seq_length, regression), params["batch_size"],
            is_training=is_training, pad_final_batch=not drop_remainder)
    return input_fn


def input_fn_builder(features, seq_length, is_training, drop_remainder):
    """input_fn(params) -> dataset built from in-memory `InputFeatures` (small sets only)."""
    columns = {
        "input_ids": np.array([f.input_ids for f in features], np.int32).reshape(-1, seq_length),
        "input_mask": np.array([f.input_mask for f in features], np.int32).reshape(-1, seq_length),
        "segment_ids": np.array([f.segment_ids for f in features],
                                np.int32).reshape(-1, seq_length),
        "label_ids": np.array([f.label_id for f in features]),
    }
    if columns["label_ids"].dtype.kind == "f":
        columns["label_ids"] = columns["label_ids"].astype(np.float32)
    else:
        columns["label_ids"] = columns["label_ids"].astype(np.int32)
    return input_pipeline.in_memory_input_fn(columns, is_training, drop_remainder)


# ---------------------------------------------------------------------------
# Model and loss
# ---------------------------------------------------------------------------

def create_model(bert_config, *args, **kwargs):
    """The classifier: BERT, dropout 0.1 on the pooled output, a linear layer.

    create_model(bert_config, num_labels, use_one_hot_embeddings=False): the
      tf_keras model the runner trains (num_labels == 1: a regression score).
    create_model(bert_config, is_training, input_ids, input_mask, segment_ids, labels,
      num_labels, use_one_hot_embeddings): the reference's graph-style form, told
      apart by its eight arguments: (loss, per_example_loss, logits, probabilities).
    """
    if len(args) + len(kwargs) == 7 or "input_ids" in kwargs:
        return _reference_model(bert_config, *args, **kwargs)
    return _keras_model(bert_config, *args, **kwargs)


# The tf_keras classifier and the loss, run_classifier's names as before.
_keras_model = classifier_task.classifier_model
compute_loss = classifier_task.compute_loss


def _reference_model(bert_config, is_training, input_ids, input_mask, segment_ids, labels,
                     num_labels, use_one_hot_embeddings):
    """The reference's create_model: variables `bert/...`, `output_weights`, `output_bias`."""
    model = modeling.BertModel(config=bert_config, is_training=is_training,
                               input_ids=input_ids, input_mask=input_mask,
                               token_type_ids=segment_ids,
                               use_one_hot_embeddings=use_one_hot_embeddings)
    pooled = model.get_pooled_output()
    if is_training:
        pooled = modeling.dropout(pooled, 0.1)
    logits = tf1_variables.run_in_tf1_scope(heads.OutputProjection(num_labels, 0.02, "output"),
                                            None, None, pooled)
    loss, per_example_loss, probabilities = compute_loss(logits, labels, num_labels)
    return loss, per_example_loss, logits, probabilities


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------

@startup.keeps_process_settings
def run(settings):
    """Trains, evaluates and/or predicts as the do_* settings ask; returns a
    settings_lib.Result (the eval metrics, the files written, the best checkpoint).

    `settings`: a Settings, or the parsed flags of define_flags.
    """
    settings = Settings.of(settings)
    # The model folder's config, vocab and task settings fill what the user left out.
    settings = settings.with_defaults(model_folder.defaults(
        settings.part(*model_folder.SETTINGS), "run_classifier"))
    # The model, the task, its data and labels: checked and read once, before any work.
    plan = classifier_run.resolve(settings)
    train_examples, long_texts = plan.train_examples, plan.long_texts
    task = _make_task(settings, plan)
    # The names the evaluations will report: a wrong --best_metric stops the run here.
    metric_names = task.metric_names()
    periodic_eval.check_names(settings.part(*periodic_eval.SETTINGS), metric_names)
    trainer = settings.part(*training.SETTINGS)
    train_file = os.path.join(settings.output_dir, "train.tf_record")
    num_train = len(train_examples) if settings.do_train else 0
    num_train_steps, num_warmup_steps = (
        training.epoch_steps(num_train, trainer, "training examples (%s)" % plan.source)
        if settings.do_train else (0, 0))
    if settings.do_train and long_texts.windows:  # an epoch: every window of every example
        num_train = task.write_features(train_examples, train_file)
        num_train_steps, num_warmup_steps = training.epoch_steps(num_train, trainer)

    # Restores the latest checkpoint of output_dir, else loads init_checkpoint.
    runner = training.make_runner(
        trainer, lambda: task.model(plan.bert_config), num_train_steps, num_warmup_steps,
        record=training_record.of(settings.part(*training_record.SETTINGS), train_examples)
        if settings.do_train else None)
    result = settings_lib.Result(output_dir=settings.output_dir)
    if settings.do_train:
        if not long_texts.windows:
            task.write_features(train_examples, train_file)
        # For the later runs and the export (not for truncate in a new folder).
        long_text.write_settings(settings.output_dir, long_texts)
        classifier_tasks.save_task(settings.part(*classifier_tasks.SETTINGS), plan.processor,
                                   plan.positive)  # label_list.txt, classifier_task.json
        model_folder.write(settings.output_dir, "run_classifier", settings.bert_config_file,
                           settings.vocab_file, dict(
                               settings.part(*model_folder.SETTINGS).values(),
                               task_type=plan.task_type))
        training.fine_tune(trainer, runner, train_file, task.spec, task.loss_fn,
                           ["Num examples = %d" % len(train_examples)] + (
                               ["Num windows = %d" % num_train] if long_texts.windows else []),
                           num_train, *runner_body.dev_evaluation(
                               task, plan.eval_examples, settings.eval_batch_size,
                               settings.eval_every_n_steps, metric_names))
        result.outputs["train_records"] = train_file
    # The passes of trainer/runner_body; this runner's Result never named its records.
    if settings.do_eval:  # eval.tf_record, eval_results.txt
        result.metrics = runner_body.evaluate(task, runner, plan.eval_examples,
                                              settings.output_dir, settings.eval_batch_size,
                                              result.outputs, name_records=False)
    if settings.do_predict:  # predict.tf_record, test_results.tsv, test_predictions.jsonl
        runner_body.predict(task, runner, plan.predict_examples, settings.output_dir,
                            settings.predict_batch_size, result.outputs, name_records=False)
    result.update(training.outcome(runner))  # global step, steps trained, history, best
    return result


def _make_task(settings, plan):
    """The task of run and Predictor (classifier_task.task_of); `plan`: the run's
    classifier_run.ClassifierRun."""
    return classifier_task.task_of(plan, settings.max_seq_length, settings.use_tpu,
                                   settings.output_dir)


# ---------------------------------------------------------------------------
# From Python: predictions of a trained folder, no data file
# ---------------------------------------------------------------------------

class Predictor(model_folder.FolderPredictor):
    """A trained model folder loaded once, predicting texts in memory.

        predictor = run_classifier.Predictor("/tmp/sst2_output")
        predictor.predict(["a great film", "dull"])
        # -> [{"label": "1", "probabilities": {"0": 0.03, "1": 0.97}}, ...]

    Args:
      model_folder: a training run's --output_dir (or its best/): its checkpoint and
        what the run left there (model_folder.py: config, vocab, length, task, labels,
        long_text.json).
      batch_size: the predict batch size (--predict_batch_size).
      **settings: other Settings fields (e.g. enable_xla, dtype); those of the folder are
        its own.

    predict() gives what do_predict writes to test_predictions.jsonl for the same
    texts, without the "id" (prediction_files.result): {"label", "probabilities"};
    multi-label: "label" the list of labels at or over the threshold; regression:
    {"prediction": x}. The features stay in memory and run in do_predict's batches
    through the model's step, traced once (docs/python.md: what a call costs). One
    predictor may serve any number of threads at once, each call with its own answers;
    close() ends it.
    """

    def __init__(self, model_folder, batch_size=32, **settings):
        super().__init__(Settings, "run_classifier", model_folder, batch_size, settings,
                         data="data_dir")
        settings = self.settings
        plan = classifier_run.resolve_folder(settings)
        self.processor = processor = plan.processor
        self.task = _make_task(settings, plan)
        self.runner = training.make_runner(settings.part(*training.SETTINGS),
                                           lambda: self.task.model(plan.bert_config))
        labels = processor.get_labels()
        self._placeholder = (() if processor.is_multilabel else
                             "0" if processor.is_regression else labels[0])
        self.ready_tokenizer(plan.tokenizer)

    @model_folder.predict_call
    def predict(self, texts, texts_b=None):
        """One result per text (or pair: texts_b, as many); a str is one text.

        texts (and texts_b) may be a list or tuple of str, a pandas Series or a numpy
        array of str; texts may be a pandas DataFrame (texts_b then None) whose columns
        are those the model was trained on (text_a_column, text_b_column), or text_a
        and text_b, or a frame of one column (predict_inputs).
        """
        self._check_frame(texts)
        texts, texts_b = data_tables.texts_of(*predict_inputs.text_pairs(
            texts, texts_b, ("texts", "texts_b"), self._frame_columns()))
        self._check_pairs(texts_b is not None)
        if not texts:
            return []
        examples = [InputExample("predict-%d" % i, a, (texts_b[i] if texts_b else None) or None,
                                 self._placeholder) for i, a in enumerate(texts)]
        # The records written here: predictions() logs no banner (a call never did).
        rows = self.task.output_rows(self.task.predictions(
            self.runner, examples, "predict", self.settings.predict_batch_size,
            self.task.write(examples, "predict")))
        return [prediction_files.result(self.task.prediction_record(e.guid, row))
                for e, row in zip(examples, rows)]

    def _frame_columns(self):
        """The columns predict() reads of a DataFrame, tried in order: the folder's
        (a file task: text_a_column, text_b_column), then text_a, text_b."""
        names = [("text_a", "text_b")]
        if isinstance(self.processor, file_data.FileProcessor):
            names.insert(0, (self.processor.columns.text_a, self.processor.columns.text_b))
        return names

    def _check_frame(self, texts):
        """A DataFrame with a "text_b" column given to a model of single texts (a file
        task without --text_b_column) is refused: its column would go unread."""
        if not (predict_inputs.is_frame(texts) and isinstance(
                self.processor, file_data.FileProcessor) and not self.processor.columns.text_b):
            return
        if "text_b" in [str(c) for c in texts.columns]:
            raise ValueError("texts is a DataFrame with a text_b column, but the model of %s "
                             "was trained on single texts (no --text_b_column): drop the "
                             "column" % self.settings.init_checkpoint)

    def _check_pairs(self, has_pairs):
        """A file task's model read pairs (text_b_column) or single texts: texts_b must
        be given for the one and not for the other (the built-in tasks are not checked)."""
        if not isinstance(self.processor, file_data.FileProcessor):
            return
        column = self.processor.columns.text_b
        if has_pairs and not column:
            raise ValueError("texts_b: the model of %s was trained on single texts (no "
                             "--text_b_column)" % self.settings.init_checkpoint)
        if column and not has_pairs:
            raise ValueError("the model of %s was trained on pairs (--text_b_column=%s): "
                             "pass texts_b" % (self.settings.init_checkpoint, column))


def predict(model_folder, texts, texts_b=None, batch_size=32, **settings):
    """Predictor(model_folder, batch_size, **settings).predict(texts, texts_b): one call."""
    return Predictor.once(model_folder, batch_size, settings, texts, texts_b)


def main():
    """Console entry point."""
    cli.run_cli(define_flags, run)


if __name__ == "__main__":
    main()
