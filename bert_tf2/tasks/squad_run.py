"""run_squad's steps around the trainer: the dev evaluation of --eval_every_n_steps and
--do_predict's answer files, EM/F1 and re-thresholded predictions.

Contracts with the other modules: run_squad.run calls `dev_evaluation(settings, task,
eval_examples, articles)` -> (evaluate(runner) or None, metric names or None) before
training, and `predict_and_score(settings, runner, articles, examples, task, result)`,
which writes the files and records them (and the metrics) in `result`
(settings_lib.Result). `settings` is run_squad's Settings; the task is squad_task's.
"""
import os

from absl import logging

from bert_tf2 import fileutil
from bert_tf2.tasks import squad_results
from bert_tf2.tasks import squad_task
from bert_tf2.trainer import periodic_eval


def dev_evaluation(settings, task, eval_examples, articles):
    """(evaluate, metric names) for --eval_every_n_steps, or (None, None) without it.

    evaluate(runner): the official EM/F1 of eval_results.txt on --predict_file
    (eval.tf_record written once, here; no file written). The metric names are those
    of the questions' gold answers: a wrong --best_metric stops the run before that.
    """
    if settings.eval_every_n_steps is None:
        return None, None
    if not eval_examples or not squad_results.has_gold_answers(articles, settings.version_2_with_negative):
        raise ValueError("--eval_every_n_steps needs questions with answers in "
                         "--predict_file=%s (the EM/F1 it evaluates)"
                         % squad_task.predict_source(settings))
    names = task.metric_names(articles)
    periodic_eval.check_names(settings.part(*periodic_eval.SETTINGS), names)
    written = squad_task.write_eval(settings, eval_examples, task.tokenizer)

    def evaluate(runner):
        summaries, results = task.predictions(runner, eval_examples, written)
        predictions = squad_results.compute_predictions(
            eval_examples, summaries, results, settings.n_best_size,
            settings.max_answer_length, settings.do_lower_case,
            settings.version_2_with_negative, settings.null_score_diff_threshold,
            settings.verbose_logging)
        return task.metrics(articles, predictions)
    return evaluate, names


def _evaluate(settings, task, articles, squad_predictions):
    """Official EM/F1 of the predictions into eval_results.txt, when gold answers exist."""
    if not squad_predictions.predictions:
        logging.warning("--predict_file=%s has no questions: EM/F1 not computed",
                        squad_task.predict_source(settings))
        return None
    if not squad_results.has_gold_answers(articles, settings.version_2_with_negative):
        logging.info("Not every question of %s has answers: EM/F1 not computed",
                     squad_task.predict_source(settings))
        return None
    results = task.metrics(articles, squad_predictions)
    fileutil.write_eval_results(os.path.join(settings.output_dir, "eval_results.txt"), results)
    return results


def predict_and_score(settings, runner, articles, examples, task, result):
    """--do_predict: the answer files, EM/F1 and the re-thresholded predictions, each
    recorded in `result` (a settings_lib.Result) as it is written."""
    result.outputs["eval_records"] = os.path.join(settings.output_dir, "eval.tf_record")
    files = _answer_files(settings)
    squad_predictions = _write_answers(settings, runner, examples, task, files)
    result.outputs.update(files)
    metrics = _evaluate(settings, task, articles, squad_predictions)
    if metrics is not None:
        result.metrics = dict(metrics)
        result.outputs["eval_results"] = os.path.join(settings.output_dir, "eval_results.txt")
    if settings.rethreshold_predictions:
        path = _rethreshold(settings, squad_predictions, metrics)
        if path is not None:
            result.outputs["predictions_best_thresh"] = path


def _answer_files(settings):
    """{name: path} of the answer files of --do_predict (null_odds.json: SQuAD 2.0 only)."""
    names = ("predictions", "nbest_predictions") + (
        ("null_odds",) if settings.version_2_with_negative else ())
    return {name: os.path.join(settings.output_dir, name + ".json") for name in names}


def _write_answers(settings, runner, eval_examples, task, files):
    """Predicts the eval features and writes the answer files `files` (_answer_files)."""
    summaries, results = task.predictions(runner, eval_examples)
    return squad_results.write_predictions(
        eval_examples, summaries, results, settings.n_best_size, settings.max_answer_length,
        settings.do_lower_case, files["predictions"], files["nbest_predictions"],
        os.path.join(settings.output_dir, "null_odds.json"),
        version_2_with_negative=settings.version_2_with_negative,
        null_score_diff_threshold=settings.null_score_diff_threshold,
        verbose_logging=settings.verbose_logging)


def _rethreshold(settings, squad_predictions, metrics):
    """Writes predictions_best_thresh.json under the null threshold with the best F1;
    returns its path (None when nothing was written)."""
    if not settings.version_2_with_negative or metrics is None:
        logging.warning("--rethreshold_predictions needs --version_2_with_negative and "
                        "answers in --predict_file; nothing re-thresholded")
        return None
    threshold = squad_results.effective_best_threshold(metrics)
    path = os.path.join(settings.output_dir, "predictions_best_thresh.json")
    logging.info("Writing predictions with null threshold %s (best F1 %s) to %s",
                 threshold, metrics["best_f1"], path)
    squad_results.write_json(squad_results.apply_null_threshold(squad_predictions.best_non_null,
                                     squad_predictions.null_odds, threshold), path)
    return path
