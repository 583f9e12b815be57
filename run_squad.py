"""Fine-tunes BERT for extractive question answering on SQuAD 1.1 / 2.0.

The run, top to bottom (see `run`):

  SQuAD json -> SquadExample (whitespace words, answer word span)
             -> InputFeatures (WordPiece windows of max_seq_length, doc_stride apart)
             -> train.tf_record / eval.tf_record in --output_dir
             -> BertSquad (start and end logits per token), trained with the mean of the
                start and end cross-entropies
             -> best answer spans mapped back to the original text
             -> predictions.json, nbest_predictions.json, null_odds.json (SQuAD 2.0),
                eval_results.txt (when the predict file carries answers).

Feature conversion and post-processing follow the original BERT release exactly, so
the files it writes are the ones the original code writes for the same logits.

From Python: train_file / predict_file also take a SQuAD json's parsed object, and
predict(model_folder, questions, contexts) / Predictor(model_folder) answer questions
in memory from a trained folder (text, probability, n-best as do_predict's files).
"""
from bert_tf2 import startup  # first, before tensorflow: a quiet C++ start-up (startup.py)
import dataclasses
import os
import random

from absl import flags
from absl import logging

import modeling
from bert_tf2 import flags_common
from bert_tf2 import cli
from bert_tf2 import heads
from bert_tf2 import loaders
from bert_tf2 import input_pipeline
from bert_tf2 import settings as settings_lib
from bert_tf2.tasks import squad_data
from bert_tf2.tasks import squad_results
from bert_tf2.tasks import squad_run
from bert_tf2.tasks import squad_task
from bert_tf2.trainer import model_folder
from bert_tf2.trainer import periodic_eval
from bert_tf2.trainer import runner_body
# The task data and post-processing live in squad_data / squad_results; every name
# the reference's run_squad.py has stays importable from here.
from bert_tf2.input_pipeline import (  # noqa: F401  pylint: disable=unused-import
    DocSpan, check_is_max_context)
from bert_tf2.tasks.squad_data import (  # noqa: F401  pylint: disable=unused-import
    FIRST_UNIQUE_ID, FeatureWriter, InputFeatures, SquadExample,
    convert_examples_to_features, examples_from_articles, improve_answer_span,
    load_squad_json, read_squad_examples)
from bert_tf2.tasks.squad_results import (  # noqa: F401  pylint: disable=unused-import
    RawResult, SquadPredictions, apply_null_threshold, compact_batch, compact_result,
    compute_predictions, compute_softmax, effective_best_threshold, evaluate_predictions,
    get_best_indexes, get_final_text, has_gold_answers, summarize_feature, write_json,
    write_predictions)
import tokenization
from bert_tf2.base import tf1_variables
from bert_tf2.trainer import training
from bert_tf2.trainer import training_record

# The reference's names of four helpers.
_improve_answer_span = improve_answer_span
_check_is_max_context = check_is_max_context
_get_best_indexes = get_best_indexes
_compute_softmax = compute_softmax

# Seed of the shuffle applied to the training examples before their features are written.
_TRAIN_SHUFFLE_SEED = 12345

_TRIM_PADDING_HELP = (
    "Predict in batches of windows of similar length, each cut to its longest window "
    "rounded up to 16, ranking the n-best start and end positions among the real "
    "positions only. The reference ranks the padding positions too (dropping them "
    "afterwards), and they can push real positions out of the n-best, so a few "
    "answers can differ (see the README); off by default, which keeps the "
    "reference's files byte for byte. Training always runs at --max_seq_length (the "
    "reference's loss spreads its softmax over padding positions too).")


# ---------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------

def define_flags(fv):
    """Registers run_squad's flags on `fv`."""
    def string(name, default, help_text):
        flags.DEFINE_string(name, default, help_text, flag_values=fv)

    def integer(name, default, help_text):
        flags.DEFINE_integer(name, default, help_text, flag_values=fv)

    def boolean(name, default, help_text):
        flags.DEFINE_bool(name, default, help_text, flag_values=fv)

    def number(name, default, help_text):
        flags.DEFINE_float(name, default, help_text, flag_values=fv)

    flags_common.define_model_flags(fv, max_seq_length=384, help_overrides={
        "max_seq_length": "Length in WordPiece tokens of every input (question + document "
                          "window); shorter inputs are padded."})
    string("output_dir", None,
           "Where checkpoints, feature files and predictions are written.")
    string("train_file", None, "SQuAD json to train on, e.g. train-v1.1.json (from Python "
           "also its parsed object, {'data': [...]}).")
    string("predict_file", None, "SQuAD json to predict, e.g. dev-v1.1.json (from Python "
           "also its parsed object, {'data': [...]}).")
    integer("doc_stride", 128,
            "How far apart the windows over a document too long for one input start.")
    integer("max_query_length", 64,
            "Questions longer than this many WordPiece tokens are cut to this length.")
    boolean("do_train", False, "Fine-tune on --train_file.")
    boolean("do_predict", False, "Write predictions for --predict_file.")
    integer("train_batch_size", 32, "Global batch size for training.")
    integer("predict_batch_size", 8, "Global batch size for prediction.")
    number("learning_rate", 5e-5, "Peak learning rate of Adam.")
    number("num_train_epochs", 3.0, "Number of passes over the training examples.")
    number("warmup_proportion", 0.1,
           "Fraction of the training steps over which the learning rate rises linearly "
           "from 0 (0.1 = the first 10%).")
    integer("n_best_size", 20,
            "How many candidate answers per question go to nbest_predictions.json "
            "(also how many top start and end positions per window are considered).")
    integer("max_answer_length", 30,
            "Longest answer, in WordPiece tokens, that may be predicted (start and end "
            "are predicted independently, so this bounds their distance).")
    boolean("verbose_logging", False,
            "Log every failure to map a predicted span back onto the original text "
            "(a number of them are normal on SQuAD).")
    boolean("version_2_with_negative", False,
            "SQuAD 2.0: some questions have no answer in their paragraph.")
    number("null_score_diff_threshold", 0.0,
           "SQuAD 2.0: answer nothing when the null score minus the best span's score "
           "is above this value.")
    boolean("rethreshold_predictions", False,
            "SQuAD 2.0 with answers in --predict_file: also write "
            "predictions_best_thresh.json, the predictions under the null threshold that "
            "maximises F1 on that file.")
    periodic_eval.define_flags(fv)  # dev data: --predict_file (with answers)
    flags_common.define_training_flags(fv, trim_padding=False,
                                       trim_padding_help=_TRIM_PADDING_HELP)


# One field per flag above: run(Settings(vocab_file=..., do_predict=True, ...)) from Python.
Settings = settings_lib.settings_class(define_flags, __name__)
Settings.PYTHON_VALUES = {name: "a SQuAD json's parsed object {'data': [articles]}"
                          for name in ("train_file", "predict_file")}
# The task settings this runner's model folders keep beside do_lower_case and
# max_seq_length (model_folder.task_settings reads them from this file).
FOLDER_SETTINGS = ("doc_stride", "max_query_length", "version_2_with_negative")


def validate_flags_or_throw(settings, bert_config):
    """Raises ValueError for a combination of settings the run cannot work with.

    Args:
      settings: the run's Settings (the reference read the global FLAGS).
      bert_config: the modeling.BertConfig of --bert_config_file.
    """
    tokenization.validate_case_matches_checkpoint(settings.do_lower_case,
                                                  settings.init_checkpoint)

    if not settings.do_train and not settings.do_predict:
        raise ValueError("At least one of --do_train or --do_predict must be set.")
    if settings.do_train and not settings.train_file:
        raise ValueError("--do_train needs --train_file.")
    if settings.do_predict and not settings.predict_file:
        raise ValueError("--do_predict needs --predict_file.")

    if settings.max_seq_length > bert_config.max_position_embeddings:
        raise ValueError(
            "--max_seq_length=%d is longer than the model supports: it was trained with "
            "max_position_embeddings=%d." %
            (settings.max_seq_length, bert_config.max_position_embeddings))
    if settings.max_seq_length <= settings.max_query_length + 3:
        raise ValueError(
            "--max_seq_length (%d) must be greater than --max_query_length (%d) + 3, "
            "so that every input keeps room for the document." %
            (settings.max_seq_length, settings.max_query_length))

    # The reference's flags it ignored in these combinations: warned here.
    unused = (("train_file", "without --do_train", settings.do_train),
              ("predict_file", "without --do_predict", settings.do_predict),
              ("null_score_diff_threshold", "without --version_2_with_negative",
               settings.version_2_with_negative))
    settings.refuse_unused([(name, why) for name, why, used in unused if not used],
                           warn_only=True)

    # Not checked by the original code, where these values hang or silently
    # produce nothing.
    for name in ("doc_stride", "n_best_size", "max_answer_length"):
        if getattr(settings, name) < 1:
            raise ValueError("--%s must be at least 1, got %d" % (name, getattr(settings, name)))


# ---------------------------------------------------------------------------
# Model: loss and prediction
# ---------------------------------------------------------------------------

def create_model(bert_config, is_training, input_ids, input_mask, segment_ids,
                 use_one_hot_embeddings):
    """The reference's graph-style SQuAD model: (start_logits [B, S], end_logits [B, S]),
    variables `bert/...` and `cls/squad/output_weights|output_bias`."""
    model = modeling.BertModel(config=bert_config, is_training=is_training,
                               input_ids=input_ids, input_mask=input_mask,
                               token_type_ids=segment_ids,
                               use_one_hot_embeddings=use_one_hot_embeddings)
    with tf1_variables.tf1_variable_scope():
        return heads.SquadHead()(model.get_sequence_output())


def input_fn_builder(input_file, seq_length, is_training, drop_remainder):
    """The reference's input_fn(params) over a feature file of FeatureWriter.

    Batches of params["batch_size"] of unique_ids, input_ids, input_mask and
    segment_ids (int32; training adds start_positions and end_positions): for
    training the records repeated and shuffled, otherwise one pass in file order
    whose last partial batch is kept unless drop_remainder.
    """
    def input_fn(params):
        return input_pipeline.make_dataset(
            [input_file], input_pipeline.squad_features(seq_length, is_training),
            params["batch_size"], is_training, drop_remainder=drop_remainder)
    return input_fn


# The loss, importable from here as before (the task: squad_task.SquadTask).
squad_loss = squad_task.squad_loss


# The predict_fn of trimmed batches (squad_task), importable from here as before.
top_positions_fn = squad_task.top_positions_fn


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------

def _train(settings, bert_config, task, train_examples, dev=(None, None)):
    """Writes train.tf_record and fine-tunes on it; returns the Runner.

    `dev`: (evaluate, metric names) of --eval_every_n_steps (squad_run.dev_evaluation).
    """
    num_train_steps, num_warmup_steps = training.epoch_steps(
        len(train_examples), settings.part(*training.SETTINGS),
        "training examples in --train_file=%s"
        % squad_data.source_name(settings.train_file, "train_file"))

    # Shuffled once here so that the small shuffle buffer of the input pipeline suffices.
    random.Random(_TRAIN_SHUFFLE_SEED).shuffle(train_examples)
    train_file = os.path.join(settings.output_dir, "train.tf_record")
    num_features = task.write_features(train_examples, train_file, is_training=True)

    logging.info("***** Running training *****")
    logging.info("  Num orig examples = %d", len(train_examples))
    logging.info("  Num split examples = %d", num_features)
    logging.info("  Batch size = %d", settings.train_batch_size)
    logging.info("  Num steps = %d", num_train_steps)

    dataset_fn = input_pipeline.dataset_fn_for([train_file], task.spec,
                                               settings.train_batch_size, is_training=True,
                                               seed=settings.seed)

    runner = _make_runner(settings, bert_config, num_train_steps, num_warmup_steps,
                          training_record.of(settings.part(*training_record.SETTINGS),
                                             train_examples))
    runner.train(dataset_fn, task.loss_fn, global_batch_size=settings.train_batch_size,
                 evaluation=periodic_eval.from_settings(
                     settings.part(*periodic_eval.SETTINGS), *dev))
    return runner


def _make_runner(settings, bert_config, num_train_steps=0, num_warmup_steps=0, record=None):
    """The Runner of a BertSquad (restoring output_dir's checkpoint or init_checkpoint);
    `record`: a training run's training_record.of values."""
    return training.make_runner(
        settings.part(*training.SETTINGS),
        lambda: squad_task.squad_model(bert_config, settings.use_tpu),
        num_train_steps, num_warmup_steps, record=record)


@startup.keeps_process_settings
def run(settings):
    """The whole run: optional training, then optional prediction and scoring.

    Args:
      settings: a Settings, or the parsed flags of define_flags.

    Returns:
      A settings_lib.Result: the EM/F1 of eval_results.txt ({} when not scored), the
      files written, the best checkpoint of --eval_every_n_steps and the model's step.
    """
    settings = Settings.of(settings)
    # The model folder's config, vocab and task settings fill what the user left out.
    settings = settings.with_defaults(model_folder.defaults(
        settings.part(*model_folder.SETTINGS), "run_squad"))
    bert_config = _check_settings(settings)
    # The vocabulary and both files, read once before any work.
    plan = squad_task.resolve(settings, bert_config)
    result = settings_lib.Result(output_dir=settings.output_dir)
    runner = None
    if settings.do_train:
        # Checks --best_metric against the metric names before any file is written.
        dev = squad_run.dev_evaluation(settings, plan.task, plan.evaluation)
        model_folder.write(settings.output_dir, "run_squad", settings.bert_config_file,
                           settings.vocab_file, settings.part(*model_folder.SETTINGS).values())
        runner = _train(settings, plan.bert_config, plan.task, plan.train_examples, dev)
        plan = dataclasses.replace(plan, train_examples=None)  # their memory back
        result.outputs["train_records"] = os.path.join(settings.output_dir, "train.tf_record")
    if settings.do_predict:
        if runner is None:
            runner = _make_runner(settings, plan.bert_config)
        # trainer/runner_body's pass: --predict_file is the dev data (eval.tf_record);
        # predictions.json, nbest_predictions.json, null_odds.json, then EM/F1.
        answers = runner_body.predict(plan.task, runner, plan.evaluation, settings.output_dir,
                                      settings.predict_batch_size, result.outputs, "eval")
        squad_run.score(settings, plan.task, plan.evaluation, answers, result)
    result.update(training.outcome(runner))  # global step, steps trained, history, best
    return result


def _check_settings(settings):
    """Checks the settings before any work; returns the BertConfig."""
    settings.require("vocab_file", "bert_config_file", "output_dir")
    bert_config = modeling.BertConfig.from_json_file(settings.bert_config_file)
    validate_flags_or_throw(settings, bert_config)
    periodic_eval.check_settings(settings.part(*periodic_eval.SETTINGS, "do_predict"),
                                 dev_data="--do_predict")
    return bert_config


# ---------------------------------------------------------------------------
# From Python: answers of a trained folder, no SQuAD file
# ---------------------------------------------------------------------------

class Predictor(model_folder.FolderPredictor):
    """A trained run_squad folder loaded once, answering questions in memory.

        reader = run_squad.Predictor("/tmp/squad_base")
        reader.predict(["Who wrote it?"], ["It was written by Ann Lee in 1990."])
        # -> [{"text": "Ann Lee", "probability": 0.93, "nbest": [...]}]

    Args:
      model_folder: a run_squad training run's --output_dir (or its best/).
      batch_size: the predict batch size (--predict_batch_size).
      **settings: other Settings fields (n_best_size, max_answer_length,
        null_score_diff_threshold, ...); the folder's doc_stride, max_query_length and
        version_2_with_negative are its own.

    predict(questions, contexts): one question per context (a str: one of each); per
    question {"text": predictions.json's answer ("" = no answer, SQuAD 2.0),
    "probability": that text's in the n-best, "nbest": nbest_predictions.json's list}, as
    do_predict computes them for a SQuAD json of those paragraphs and questions.
    questions and contexts may be lists or tuples of str, pandas Series or numpy arrays of
    str; questions may be a pandas DataFrame of the columns "question" and "context"
    (a SQuAD table's; contexts then None). One predictor may serve any number of threads
    at once, each call with its own answers.
    """

    def __init__(self, model_folder, batch_size=8, **settings):
        super().__init__(Settings, "run_squad", model_folder, batch_size, settings,
                         data="predict_file")
        bert_config = _check_settings(self.settings)
        self.task = squad_task.SquadTask(self.settings, loaders.load_tokenizer(
            self.settings.vocab_file, self.settings.do_lower_case))
        self.runner = _make_runner(self.settings, bert_config)
        self.ready_tokenizer(self.task.tokenizer)

    @model_folder.predict_call
    def predict(self, questions, contexts=None):
        """An answer per (question, context) pair; [] for []."""
        questions, contexts = squad_data.predict_pairs(questions, contexts)
        if not questions:
            return []
        settings = self.settings
        articles = [{"paragraphs": [{"context": c, "qas": [{"id": str(i), "question": q}]}]}
                    for i, (q, c) in enumerate(zip(questions, contexts))]
        examples = examples_from_articles(articles, is_training=False,
                                          version_2_with_negative=settings.version_2_with_negative,
                                          source="questions")
        found = self.task.predictions(self.runner, squad_task.SquadQuestions(examples, articles),
                                      "eval", settings.predict_batch_size)
        return [squad_results.answer_of(found, e.qas_id) for e in examples]


def predict(model_folder, questions, contexts=None, batch_size=8, **settings):
    """Predictor(model_folder, batch_size, **settings).predict(questions, contexts)."""
    return Predictor.once(model_folder, batch_size, settings, questions, contexts)


def main():
    """Console entry point."""
    cli.run_cli(define_flags, run)


if __name__ == "__main__":
    main()
