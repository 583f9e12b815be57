r"""Fine-tunes BERT for token tagging (named entities, CoNLL-2003) and evaluates it.

The BERT paper's third fine-tuning shape, which the reference never shipped, built
with run_classifier.py's habits (flags, checkpoints, TF2 flags, outputs):

  CoNLL file (train.txt / dev.txt / test.txt in --data_dir, or --train_file,
  --eval_file, --predict_file) -> sentences (ner_data.read_conll)
    -> windows of --max_seq_length WordPieces, the first piece of each word labelled
       (ner_data.convert_file) -> train/eval/predict.tf_record in --output_dir
    -> BertTagger (a tag classifier on every token; or --feature_based: a BiLSTM over
       frozen encoder layers), mean cross-entropy over the labelled pieces (--crf: a
       linear-chain CRF over each window's words, mean negative log-likelihood per
       window, Viterbi-decoded tags)
    -> eval_results.txt (entity precision / recall / F1 overall and per type, as
       conlleval scores them; token accuracy; loss), eval_predictions.txt and
       test_predictions.txt (each input line + its predicted tag as the last column).

The label list comes from the training file ("O" first, the other tags sorted) or
--labels_file, and is written to output_dir/label_list.txt, so that --do_eval /
--do_predict alone work later, in that --output_dir or in a new one whose
--init_checkpoint is the training run's. The file to tag may hold words only; its tags, if
any, are not used. Every word gets a tag; a word with no WordPiece (a control
character) gets "O".

From Python: Settings(data_dir={"train": sentences, "dev": ..., "test": ...}) with each
sentence a list of (word, tag) pairs, and predict(model_folder, sentences) / Predictor
(model_folder) tagging sentences (lists of words, or str) of a trained folder in memory.

  python run_ner.py --data_dir=$CONLL_DIR --vocab_file=$BERT_DIR/vocab.txt \
    --bert_config_file=$BERT_DIR/bert_config.json --init_checkpoint=$BERT_DIR/bert_model.ckpt \
    --do_lower_case=False --do_train --do_eval --do_predict --max_seq_length=128 \
    --train_batch_size=32 --learning_rate=5e-5 --num_train_epochs=3 --output_dir=/tmp/ner
"""
from bert_tf2 import startup  # first, before tensorflow: a quiet C++ start-up (startup.py)
import os

from absl import flags

import modeling
from bert_tf2 import flags_common
from bert_tf2 import cli
from bert_tf2 import heads
from bert_tf2 import settings as settings_lib
from bert_tf2.tasks import ner_data
from bert_tf2.tasks import ner_task
from bert_tf2.trainer import class_weights
from bert_tf2.trainer import model_folder
from bert_tf2.trainer import runner_body
from bert_tf2.trainer import training
from bert_tf2.trainer import training_record

# The losses of the tagger, importable from here as before.
token_loss = ner_task.token_loss
crf_loss = ner_task.crf_loss


# ---------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------

def define_flags(fv):
    """Registers run_ner's flags on the FlagValues `fv`."""
    def string(name, default, help_text):
        """A string flag on fv."""
        flags.DEFINE_string(name, default, help_text, flag_values=fv)

    string("data_dir", None, "Folder with train.txt, dev.txt and test.txt (CoNLL layout). "
           "From Python (Settings) also a dict {'train': sentences, 'dev': ..., 'test': ...}, "
           "each sentence a list of (word, tag) pairs.")
    string("train_file", None, "Training file (default: data_dir/train.txt).")
    string("eval_file", None, "Evaluation file (default: data_dir/dev.txt).")
    string("predict_file", None, "File to tag (default: data_dir/test.txt); may be "
                                 "words only.")
    string("labels_file", None, "Tag list, one per line (default: the training file's "
                                "tags, saved as output_dir/label_list.txt); a model "
                                "folder's label_list.txt fixes the order.")
    string("output_dir", None, "Where checkpoints, feature files and results are written.")
    flags_common.define_model_flags(fv)
    flags.DEFINE_integer("doc_stride", ner_data.DEFAULT_DOC_STRIDE, "A sentence longer than one sequence "
                         "(--max_seq_length WordPieces with [CLS] and [SEP]) is cut into "
                         "windows whose starts are this many WordPieces apart; each word is "
                         "predicted from the window where it has the most context.",
                         flag_values=fv)
    flags.DEFINE_bool("document_context", False, "Fill each window with the neighbouring "
                      "sentences of the same document (the BERT paper's CoNLL setting); "
                      "labels stay on the sentence itself. Documents end at -DOCSTART- "
                      "lines; a file without them is one document.", flag_values=fv)
    flags.DEFINE_bool("feature_based", False, "The paper's feature-based ablation: the "
                      "encoder frozen, --layers concatenated into a two-layer BiLSTM.",
                      flag_values=fv)
    string("layers", "-1,-2,-3,-4", "--feature_based: the encoder layers to concatenate.")
    flags.DEFINE_integer("lstm_units", 768, "--feature_based: LSTM units per direction.",
                         flag_values=fv)
    flags.DEFINE_bool("crf", False, "A linear-chain CRF over the first piece of each word "
                      "(a window's words form one chain): training minimizes the mean "
                      "negative log-likelihood per window, evaluation and prediction take "
                      "the Viterbi tags. Its transitions (crf/transitions) are saved with "
                      "the checkpoints; they start at zero, also when a softmax tagger's "
                      "checkpoint (which has none) is resumed or evaluated (a warning says "
                      "so): Viterbi then gives the softmax's tags. Recorded in "
                      "model_settings.json, so later runs and the export decode alike. "
                      "Off: the paper's softmax.", flag_values=fv)
    flags.DEFINE_enum("crf_tag_scheme", "auto", heads.TAG_SCHEMES, "--crf: the tag "
                      "scheme whose invalid sequences the CRF never scores nor decodes. "
                      "iob2: I-X only after B-X or I-X, and not at a sentence's start (a "
                      "window cut from the middle of a long sentence may start with it); "
                      "tags without a B-/I- prefix are left free. none: no constraint. "
                      "auto: iob2 when every tag is O, B-X or I-X and the training file "
                      "keeps IOB2, or breaks it at a few entities only (at most %d%%: "
                      "slips, trained as B-X with a warning; CoNLL-2003's original IOB1 "
                      "files start entities with I-: none), without --do_train the model "
                      "folder's; the choice is "
                      "logged and recorded in model_settings.json (a folder without it: "
                      "none), so later runs and the export decode alike."
                      % round(100 * ner_data.IOB2_SLIPS), flag_values=fv)
    flags.DEFINE_float("crf_learning_rate", None, "--crf: the peak learning rate of the "
                       "transitions (crf/transitions), on --learning_rate's warm-up and "
                       "decay; default %g x --learning_rate (at the encoder's rate the "
                       "transitions, starting at zero, barely move in a fine-tuning run)."
                       % ner_task.CRF_RATE_FACTOR, flag_values=fv)
    flags_common.define_fine_tuning_flags(fv, unit="windows")
    class_weights.define_flags(fv)
    flags_common.define_training_flags(fv)


# One field per flag above: run(Settings(data_dir=..., do_train=True, ...)) from Python.
Settings = settings_lib.settings_class(define_flags, __name__)
Settings.PYTHON_VALUES = {"data_dir": "a dict of splits {'train', 'dev', 'test'} of sentences, "
                                      "each a list of (word, tag) pairs"}
# The task settings this runner's model folders keep beside do_lower_case and
# max_seq_length (model_folder.task_settings reads them from this file).
FOLDER_SETTINGS = ("doc_stride", "document_context", "feature_based", "layers", "lstm_units",
                   "crf", "crf_tag_scheme")


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------

@startup.keeps_process_settings
def run(settings):
    """Trains a tagger, evaluates it and/or tags the test file as the do_* settings ask;
    returns a settings_lib.Result: the entity metrics of eval_results.txt, the paths of
    the files written (records, results, predicted tags), the best checkpoint.

    `settings`: a Settings, or the parsed flags of define_flags.
    """
    settings = Settings.of(settings)
    # The model folder's config, vocab and task settings fill what the user left out.
    folder = model_folder.defaults(settings.part(*model_folder.SETTINGS), "run_ner")
    # Settings, data files, label list, tag scheme, metric names: checked and read once.
    plan = ner_task.resolve(settings.with_defaults(folder), folder.get("crf_tag_scheme"))
    settings, task, train = plan.settings, plan.task, plan.train
    if train is not None:
        # Saved for the runs that evaluate or tag with this run's checkpoints later.
        ner_data.write_labels(os.path.join(settings.output_dir, ner_data.LABELS_FILE_NAME),
                              plan.labels)
    train_features = task.features(train) if train else None
    trainer = settings.part(*training.SETTINGS)
    num_train_steps, num_warmup_steps = (training.epoch_steps(
        len(train_features), trainer, "training windows in %s" % train.path)
        if train else (0, 0))

    # Restores the latest checkpoint of output_dir, else loads init_checkpoint.
    runner = training.make_runner(
        trainer, lambda: task.model(plan.bert_config),
        num_train_steps, num_warmup_steps, ner_task.crf_rates(settings),
        record=training_record.of(settings.part(*training_record.SETTINGS), train.sentences)
        if train else None)
    if settings.crf:
        ner_task.warn_without_transitions(runner.restored_from)
    result = settings_lib.Result(output_dir=settings.output_dir)
    if settings.do_train:
        model_folder.write(settings.output_dir, "run_ner", settings.bert_config_file,
                           settings.vocab_file, settings.part(*model_folder.SETTINGS).values())
        train_file = os.path.join(settings.output_dir, "train.tf_record")
        task.write_features(train, train_file, train_features)
        training.fine_tune(trainer, runner, train_file, task.spec, task.loss_fn,
                           ["Num windows = %d" % len(train_features)], len(train_features),
                           *runner_body.dev_evaluation(
                               task, plan.evaluation, settings.eval_batch_size,
                               settings.eval_every_n_steps, plan.eval_metric_names))
        result.outputs["train_records"] = train_file
    if settings.do_eval:  # eval_results.txt and eval_predictions.txt
        result.metrics = runner_body.evaluate(task, runner, plan.evaluation,
                                              settings.output_dir, settings.eval_batch_size,
                                              result.outputs)
    if settings.do_predict:  # test_predictions.txt
        runner_body.predict(task, runner, plan.prediction, settings.output_dir,
                            settings.predict_batch_size, result.outputs)
    result.update(training.outcome(runner))  # global step, steps trained, history, best
    return result


# ---------------------------------------------------------------------------
# From Python: tags of a trained folder, no data file
# ---------------------------------------------------------------------------

class Predictor(model_folder.FolderPredictor):
    """A trained run_ner folder loaded once, tagging sentences in memory.

        tagger = run_ner.Predictor("/tmp/ner")
        tagger.predict(["John lives in Berlin"])
        # -> [[("John", "B-PER"), ("lives", "O"), ("in", "O"), ("Berlin", "B-LOC")]]

    Args:
      model_folder: a run_ner training run's --output_dir (or its best/).
      batch_size: the predict batch size (--predict_batch_size).
      **settings: other Settings fields (e.g. enable_xla); the folder's task settings
        (--crf, its tag scheme, --doc_stride, ...) are its own.

    predict(sentences): each sentence a list of words, or a str split at blanks; returns
    per sentence [(word, tag), ...], the tags do_predict writes (test_predictions.txt's
    last column; --crf: Viterbi's), the sentences one document as a file's without
    -DOCSTART-. One predictor may serve any number of threads at once, each call with
    its own answers.
    """

    def __init__(self, model_folder, batch_size=32, **settings):
        super().__init__(Settings, "run_ner", model_folder, batch_size, settings)
        plan = ner_task.resolve_folder(self.folder.settings,
                                       self.folder.defaults.get("crf_tag_scheme"))
        self.settings, self.task = plan.settings, plan.task
        self.runner = training.make_runner(self.settings.part(*training.SETTINGS),
                                           lambda: self.task.model(plan.bert_config))
        self.ready_tokenizer(self.task.tokenizer)

    @model_folder.predict_call
    def predict(self, sentences):
        """[(word, tag), ...] per sentence (a list of words, or a str); [] for [].

        sentences: a list or tuple, a pandas Series or a numpy array of sentences, or a
        pandas DataFrame of one column of them (or a "tokens" column), each sentence a
        str or a list (numpy array) of words (predict_inputs).
        """
        conll = ner_data.predict_sentences(sentences)
        if not conll.sentences:
            return []
        tags, _, _ = self.task.predictions(self.runner, conll, "predict",
                                           self.settings.predict_batch_size)
        return [list(zip(s.words, t)) for s, t in zip(conll.sentences, tags)]


def predict(model_folder, sentences, batch_size=32, **settings):
    """Predictor(model_folder, batch_size, **settings).predict(sentences): one call."""
    return Predictor.once(model_folder, batch_size, settings, sentences)


def main():
    """Command-line entry point: flags from sys.argv, errors as one line and exit 1."""
    cli.run_cli(define_flags, run)


if __name__ == "__main__":
    main()
