r"""Fine-tunes BERT on multiple-choice questions (SWAG) and evaluates it.

The BERT paper's fourth fine-tuning shape, which the reference never shipped, built
with run_classifier.py's habits:

  SWAG CSV (--task_name=swag: train.csv / val.csv / test.csv in --data_dir) or JSON
  lines (--task_name=jsonl: train.jsonl / dev.jsonl / test.jsonl)
    -> per choice [CLS] context [SEP] (question +) ending [SEP] (multiple_choice_data)
    -> train/eval/predict.tf_record of [num_choices, max_seq_length] per example
    -> BertMultipleChoice: the B x C sequences through BERT as one batch, a score per
       choice from the pooled output, softmax over the C choices, cross-entropy
    -> eval_results.txt (eval_accuracy, eval_loss, global_step), test_results.tsv
       (the C probabilities of each test example, like run_classifier's) and
       test_predictions.jsonl ({"id", "label": the likeliest choice, "probabilities"}).

From Python: Settings(task_name="jsonl", data_dir={"train": rows, ...}) with rows as the
jsonl lines' objects (a list of dicts, a dict of columns, a DataFrame), and
predict(model_folder, questions) / Predictor(model_folder) choosing endings in memory.

  python run_multiple_choice.py --task_name=swag --data_dir=$SWAG_DIR \
    --vocab_file=$BERT_DIR/vocab.txt --bert_config_file=$BERT_DIR/bert_config.json \
    --init_checkpoint=$BERT_DIR/bert_model.ckpt --do_train --do_eval --max_seq_length=128 \
    --train_batch_size=16 --learning_rate=2e-5 --num_train_epochs=3 --output_dir=/tmp/swag
"""
from bert_tf2 import startup  # first, before tensorflow: a quiet C++ start-up (startup.py)

from absl import flags
import numpy as np

import modeling
from bert_tf2 import flags_common
from bert_tf2 import cli
from bert_tf2 import loaders
from bert_tf2 import settings as settings_lib
from bert_tf2.tasks import data_tables
from bert_tf2.tasks import multiple_choice_data
from bert_tf2.tasks import multiple_choice_task
from bert_tf2.tasks import predict_inputs
from bert_tf2.tasks import prediction_files
from bert_tf2.trainer import model_folder
from bert_tf2.trainer import periodic_eval
from bert_tf2.trainer import runner_body
from bert_tf2.trainer import training
from bert_tf2.trainer import training_record

_REQUIRED_FLAGS = ("data_dir", "task_name", "vocab_file", "bert_config_file", "output_dir")


def define_flags(fv):
    """Registers run_multiple_choice's flags on the FlagValues `fv`."""
    flags.DEFINE_string("data_dir", None, "Folder with the task's files (see the module "
                        "docstring). From Python (Settings), --task_name=jsonl also takes a "
                        "dict of tables {'train': t, 'dev': t, 'test': t} of its lines' "
                        "fields.", flag_values=fv)
    flags.DEFINE_string("task_name", None, "swag (SWAG's CSV) or jsonl (JSON lines).",
                        flag_values=fv)
    flags.DEFINE_string("output_dir", None, "Where checkpoints, feature files and results "
                        "are written.", flag_values=fv)
    flags_common.define_model_flags(fv)
    flags_common.define_fine_tuning_flags(fv, unit="questions")
    flags_common.define_training_flags(fv)


# One field per flag above: run(Settings(task_name="swag", ...)) from Python.
Settings = settings_lib.settings_class(define_flags, __name__)
Settings.PYTHON_VALUES = {"data_dir": data_tables.PYTHON_VALUE + ", rows as jsonl lines"}
# The task settings this runner's model folders keep beside do_lower_case and
# max_seq_length (model_folder.task_settings reads them from this file).
FOLDER_SETTINGS = ("task_name",)


@startup.keeps_process_settings
def run(settings):
    """Trains on, evaluates on and/or answers the questions of --data_dir as the do_*
    settings ask; returns a settings_lib.Result: eval_results.txt's metrics, the paths of
    the files written (records, eval_results.txt, test_results.tsv), the global step.

    `settings`: a Settings, or the parsed flags of define_flags.
    """
    settings = Settings.of(settings)
    # The model folder's config, vocab and task settings fill what the user left out.
    settings = settings.with_defaults(model_folder.defaults(
        settings.part(*model_folder.SETTINGS), "run_multiple_choice"))
    bert_config = _check_settings(settings)
    # The splits, the output folder and the vocabulary: read and checked once.
    plan = multiple_choice_task.resolve(settings)
    splits, task = plan.splits, plan.task
    trainer = settings.part(*training.SETTINGS)
    num_train_steps, num_warmup_steps = (training.epoch_steps(
        len(splits["train"]), trainer, "training questions in %s" % plan.source)
        if settings.do_train else (0, 0))

    # Restores the latest checkpoint of output_dir, else loads init_checkpoint.
    runner = training.make_runner(
        trainer, lambda: task.model(bert_config),
        num_train_steps, num_warmup_steps,
        record=training_record.of(settings.part(*training_record.SETTINGS), splits["train"])
        if settings.do_train else None)
    result = settings_lib.Result(output_dir=settings.output_dir)
    if settings.do_train:
        model_folder.write(settings.output_dir, "run_multiple_choice", settings.bert_config_file,
                           settings.vocab_file, settings.part(*model_folder.SETTINGS).values())
        result.outputs["train_records"] = task.write(splits["train"], "train")
        training.fine_tune(trainer, runner, result.outputs["train_records"], task.spec,
                           task.loss_fn, ["Num questions = %d (%d choices)"
                                          % (len(splits["train"]), task.num_choices)],
                           len(splits["train"]), *runner_body.dev_evaluation(
                               task, splits.get("dev"), settings.eval_batch_size,
                               settings.eval_every_n_steps))
    if settings.do_eval:  # eval_results.txt
        result.metrics = runner_body.evaluate(task, runner, splits["dev"], settings.output_dir,
                                              settings.eval_batch_size, result.outputs)
    if settings.do_predict:  # test_results.tsv and test_predictions.jsonl
        runner_body.predict(task, runner, splits["test"], settings.output_dir,
                            settings.predict_batch_size, result.outputs)
    result.update(training.outcome(runner))  # global step, steps trained, history, best
    return result


def _check_settings(settings):
    """Checks the settings before any work; returns the BertConfig."""
    def check_task():
        """--task_name is one of multiple_choice_data.TASKS."""
        if settings.task_name.lower() not in multiple_choice_data.TASKS:
            raise ValueError("unknown --task_name %r; known: %s"
                             % (settings.task_name, ", ".join(multiple_choice_data.TASKS)))

    bert_config = loaders.check_fine_tuning(
   settings.part(*loaders.FINE_TUNING_CHECKS + _REQUIRED_FLAGS), _REQUIRED_FLAGS,
   check_task)
    periodic_eval.check_names(settings.part(*periodic_eval.SETTINGS),
                              multiple_choice_task.metric_names())
    return bert_config


# ---------------------------------------------------------------------------
# From Python: answers of a trained folder, no data file
# ---------------------------------------------------------------------------

class Predictor(model_folder.FolderPredictor):
    """A trained run_multiple_choice folder loaded once, choosing endings in memory.

        chooser = run_multiple_choice.Predictor("/tmp/swag")
        chooser.predict([{"context": "She opened the door.",
                          "endings": ["She walked in.", "The door ate her."]}])
        # -> [{"label": 0, "ending": "She walked in.", "probabilities": [0.91, 0.09]}]

    Args:
      model_folder: a run_multiple_choice training run's --output_dir (or its best/).
      batch_size: the predict batch size (--predict_batch_size).
      **settings: other Settings fields.

    predict(questions): each question a dict as a line of --task_name=jsonl holds
    ({"context", "question" (optional), "endings"}; a "label" is not used); per question
    test_predictions.jsonl's record without its id ({"label": the likeliest choice's
    index, "probabilities": one per choice}) and "ending": that ending. Every question
    of one call has as many endings (as in one jsonl file). questions may also be a
    tuple, a pandas Series or a numpy array of such dicts, or a pandas DataFrame whose
    rows are (columns "context", "endings", optionally "question"). One predictor may
    serve any number of threads at once, each call with its own answers.
    """

    def __init__(self, model_folder, batch_size=8, **settings):
        super().__init__(Settings, "run_multiple_choice", model_folder, batch_size, settings,
                         data="data_dir")
        bert_config = _check_settings(self.settings)
        self.tokenizer = loaders.load_tokenizer(self.settings.vocab_file,
                                                self.settings.do_lower_case)
        self.runner = training.make_runner(
            self.settings.part(*training.SETTINGS),
            lambda: multiple_choice_task.choice_model(bert_config, self.settings.use_tpu))
        self.ready_tokenizer(self.tokenizer)

    @model_folder.predict_call
    def predict(self, questions):
        """A result per question (a dict, or a list of them); [] for []."""
        if isinstance(questions, dict):
            questions = [questions]
        elif predict_inputs.is_frame(questions):
            questions = predict_inputs.frame_records(questions, "questions")
        else:
            questions = predict_inputs.items(questions, "questions", "question dicts")
        questions = [dict(q, label=None) if isinstance(q, dict) else q for q in questions]
        if not questions:
            return []
        examples = multiple_choice_data.examples_of_records(
            enumerate(questions), "questions", is_test=True)
        task = multiple_choice_task.MultipleChoiceTask(
            self.settings.output_dir, self.settings.max_seq_length, self.tokenizer,
            len(examples[0].choices), self.settings.use_tpu)
        out = task.predictions(self.runner, examples, "predict",
                               self.settings.predict_batch_size)
        results = []
        for question, row in zip(questions, np.asarray(out["probabilities"], np.float32)):
            found = prediction_files.result(prediction_files.choice_record(None, row))
            found["ending"] = list(question["endings"])[found["label"]]
            results.append(found)
        return results


def predict(model_folder, questions, batch_size=8, **settings):
    """Predictor(model_folder, batch_size, **settings).predict(questions): one call."""
    return Predictor.once(model_folder, batch_size, settings, questions)


def main():
    """Console entry point."""
    cli.run_cli(define_flags, run)


if __name__ == "__main__":
    main()
