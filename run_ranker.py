r"""Fine-tunes BERT as a cross-encoder re-ranker: a query and a passage in, one score out.

Not in the reference; built with run_classifier.py's habits (tasks/ranker_task.py says
the files, losses and metrics):

  --data_dir with train.tsv / dev.tsv / test.tsv (tab-separated, no header)
    train: query<TAB>passage<TAB>label rows (--loss=pointwise: binary cross-entropy of
      the one logit) or query<TAB>positive<TAB>negative triples (--loss=pairwise:
      RankNet's -log sigmoid(s_pos - s_neg))
    dev: either kind (told by its rows); test: query<TAB>passage rows
    -> [CLS] query [SEP] passage [SEP] -> BertClassifier with one label: the score
    -> eval_results.txt (eval_mrr_at_10, eval_ndcg_at_10 over each query's candidates, the
       rows sharing its text; pointwise: eval_accuracy, eval_auc, eval_loss; global_step)
       and test_results.tsv (one score a line, in test.tsv's order).

From Python: Predictor(model_folder).predict(queries, passages) scores pairs and
.rank(query, passages) orders one query's candidates; predict() / rank() for one call.

  python run_ranker.py --data_dir=$DATA --loss=pairwise \
    --vocab_file=$BERT_DIR/vocab.txt --bert_config_file=$BERT_DIR/bert_config.json \
    --init_checkpoint=$BERT_DIR/bert_model.ckpt --do_train --do_eval --max_seq_length=256 \
    --train_batch_size=16 --learning_rate=2e-5 --num_train_epochs=1 --output_dir=/tmp/ranker
"""
from bert_tf2 import startup  # first, before tensorflow: a quiet C++ start-up (startup.py)

from absl import flags

from bert_tf2 import cli
from bert_tf2 import flags_common
from bert_tf2 import loaders
from bert_tf2 import settings as settings_lib
from bert_tf2.tasks import predict_inputs
from bert_tf2.tasks import ranker_task
from bert_tf2.trainer import model_folder
from bert_tf2.trainer import periodic_eval
from bert_tf2.trainer import runner_body
from bert_tf2.trainer import training
from bert_tf2.trainer import training_record

_REQUIRED_FLAGS = ("data_dir", "vocab_file", "bert_config_file", "output_dir")
# The task settings this runner's model folders keep (model_folder.task_settings reads it
# from this file): none beyond do_lower_case and max_seq_length (a score is one logit).
FOLDER_SETTINGS = ()
# This runner's own flags that define the trained model (its training record compares them
# with training_record.SETTINGS when a run resumes the folder).
RECORDED_SETTINGS = ("loss",)


def define_flags(fv):
    """Registers run_ranker's flags on the FlagValues `fv`."""
    flags.DEFINE_string("data_dir", None, "Folder with train.tsv, dev.tsv and test.tsv (see "
                        "the module docstring).", flag_values=fv)
    flags.DEFINE_enum("loss", "pointwise", list(ranker_task.LOSSES),
                      "pointwise: train.tsv holds query<TAB>passage<TAB>label rows, trained "
                      "with the binary cross-entropy of the score; pairwise: it holds "
                      "query<TAB>positive<TAB>negative triples, trained with RankNet's "
                      "-log sigmoid(s_pos - s_neg).", flag_values=fv)
    flags.DEFINE_string("output_dir", None, "Where checkpoints, feature files and results "
                        "are written.", flag_values=fv)
    flags_common.define_model_flags(fv)
    flags_common.define_fine_tuning_flags(fv, unit="rows (pointwise) or triples (pairwise)")
    flags_common.define_training_flags(fv)


# One field per flag above: run(Settings(data_dir=..., loss="pairwise", ...)) from Python.
Settings = settings_lib.settings_class(define_flags, __name__)


@startup.keeps_process_settings
def run(settings):
    """Trains on, evaluates on and/or scores the rows of --data_dir as the do_* settings ask;
    returns a settings_lib.Result: eval_results.txt's metrics, the paths of the files written
    (records, eval_results.txt, test_results.tsv), the global step.

    `settings`: a Settings, or the parsed flags of define_flags.
    """
    settings = Settings.of(settings)
    # The model folder's config, vocab and length fill what the user left out.
    settings = settings.with_defaults(model_folder.defaults(
        settings.part(*model_folder.SETTINGS), "run_ranker"))
    bert_config = _check_settings(settings)
    # The splits, the output folder and the vocabulary: read and checked once.
    plan = ranker_task.resolve(settings)
    splits, task = plan.splits, plan.task
    trainer = settings.part(*training.SETTINGS)
    num_train_steps, num_warmup_steps = (training.epoch_steps(
        len(splits["train"]), trainer, "training %s in %s" % (
            "triples" if settings.loss == "pairwise" else "rows", settings.data_dir))
        if settings.do_train else (0, 0))

    # Restores the latest checkpoint of output_dir, else loads init_checkpoint.
    runner = training.make_runner(
        trainer, lambda: task.model(bert_config), num_train_steps, num_warmup_steps,
        record=training_record.of(settings.part(*training_record.SETTINGS + RECORDED_SETTINGS),
                                  splits["train"])
        if settings.do_train else None)
    result = settings_lib.Result(output_dir=settings.output_dir)
    if settings.do_train:
        model_folder.write(settings.output_dir, "run_ranker", settings.bert_config_file,
                           settings.vocab_file, settings.part(*model_folder.SETTINGS).values())
        result.outputs["train_records"] = task.write(splits["train"], "train")
        training.fine_tune(trainer, runner, result.outputs["train_records"], task.spec,
                           task.loss_fn, ["Num %s = %d (--loss=%s)" % (
                               "triples" if settings.loss == "pairwise" else "rows",
                               len(splits["train"]), settings.loss)],
                           len(splits["train"]), *runner_body.dev_evaluation(
                               task, splits.get("dev"), settings.eval_batch_size,
                               settings.eval_every_n_steps))
    if settings.do_eval:  # eval_results.txt
        result.metrics = runner_body.evaluate(task, runner, splits["dev"], settings.output_dir,
                                              settings.eval_batch_size, result.outputs)
    if settings.do_predict:  # test_results.tsv: one score a test row
        runner_body.predict(task, runner, splits["test"], settings.output_dir,
                            settings.predict_batch_size, result.outputs)
    result.update(training.outcome(runner))  # global step, steps trained, history, best
    return result


def _check_settings(settings):
    """Checks the settings before any work; returns the BertConfig."""
    bert_config = loaders.check_fine_tuning(
        settings.part(*loaders.FINE_TUNING_CHECKS + _REQUIRED_FLAGS), _REQUIRED_FLAGS)
    periodic_eval.check_names(settings.part(*periodic_eval.SETTINGS),
                              ranker_task.metric_names(settings.loss))
    return bert_config


# ---------------------------------------------------------------------------
# From Python: scores of a trained folder, no data file
# ---------------------------------------------------------------------------

class Predictor(model_folder.FolderPredictor):
    """A trained run_ranker folder loaded once, scoring (query, passage) pairs in memory.

        ranker = run_ranker.Predictor("/tmp/ranker")
        ranker.predict(["what is bert", "what is bert"], ["a language model", "a puppet"])
        # -> [3.1, -2.4]: a score per pair (the logit; test_results.tsv's numbers)
        ranker.rank("what is bert", ["a puppet", "a language model"])
        # -> [{"index": 1, "passage": "a language model", "score": 3.1},
        #     {"index": 0, "passage": "a puppet", "score": -2.4}]

    Args:
      model_folder: a run_ranker training run's --output_dir (or its best/).
      batch_size: the predict batch size (--predict_batch_size).
      **settings: other Settings fields.

    predict(queries, passages): as many of each (a str is one; lists, tuples, pandas
    Series or numpy arrays of str; one query str scores every passage for it), a float
    score per pair. rank(query, passages): the
    passages from the highest score (ties: in their order), each with its index in
    `passages` and its score. One predictor may serve any number of threads at once.
    """

    def __init__(self, model_folder, batch_size=8, **settings):
        super().__init__(Settings, "run_ranker", model_folder, batch_size, settings,
                         data="data_dir")
        bert_config = _check_settings(self.settings)
        self.tokenizer = loaders.load_tokenizer(self.settings.vocab_file,
                                                self.settings.do_lower_case)
        self.runner = training.make_runner(
            self.settings.part(*training.SETTINGS),
            lambda: ranker_task.scorer_model(bert_config, self.settings.use_tpu))
        self.task = ranker_task.RankerTask(self.settings.output_dir,
                                           self.settings.max_seq_length, self.tokenizer)
        self.ready_tokenizer(self.tokenizer)

    @model_folder.predict_call
    def predict(self, queries, passages):
        """A score per (query, passage) pair (a float, or a list of them); [] for []."""
        one = isinstance(queries, str) and isinstance(passages, str)
        queries, passages = predict_inputs.text_pairs(queries, passages,
                                                      ("queries", "passages"), [])
        passages = [passages] if isinstance(passages, str) else list(passages)
        # One query for every passage when a str is given with several passages.
        queries = ([queries] * (1 if one else len(passages)) if isinstance(queries, str)
                   else list(queries))
        for name, values in (("queries", queries), ("passages", passages)):
            for i, value in enumerate(values):
                if not isinstance(value, str):
                    raise ValueError("%s[%d] is %s, expected a str" % (name, i,
                                                                       type(value).__name__))
        rows = ranker_task.pair_rows(queries, passages)
        if not rows:
            return []
        scores = [float(s) for s in self.task.predictions(
            self.runner, rows, "predict", self.settings.predict_batch_size)["scores"]]
        return scores[0] if one else scores

    def rank(self, query, passages):
        """`passages` ordered for `query`: [{"index", "passage", "score"}] best first."""
        self.check_usable()
        passages = [passages] if isinstance(passages, str) else list(passages)
        return ranker_task.ranked(passages, self.predict([query] * len(passages), passages))


def predict(model_folder, queries, passages, batch_size=8, **settings):
    """Predictor(model_folder, batch_size, **settings).predict(queries, passages): one call."""
    return Predictor.once(model_folder, batch_size, settings, queries, passages)


def rank(model_folder, query, passages, batch_size=8, **settings):
    """Predictor(model_folder, batch_size, **settings).rank(query, passages): one call."""
    predictor = Predictor(model_folder, batch_size, **settings)
    try:
        return predictor.rank(query, passages)
    finally:
        predictor.close()


def main():
    """Console entry point."""
    cli.run_cli(define_flags, run)


if __name__ == "__main__":
    main()
