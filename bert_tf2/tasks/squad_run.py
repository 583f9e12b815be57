"""run_squad's steps around the shared passes: the checks of --eval_every_n_steps' dev
evaluation, and the scoring of --do_predict's answers (EM/F1, re-thresholded predictions).

The passes themselves are trainer/runner_body.py's over squad_task.SquadTask and the
SquadQuestions of --predict_file (its dev data: eval.tf_record). Contracts with the other
modules: run_squad.run calls `dev_evaluation(settings, task, questions)` -> (evaluate(runner)
or None, metric names or None) before training, and, after runner_body.predict wrote the
answer files, `score(settings, task, questions, squad_predictions, result)`, which writes
eval_results.txt (when the questions have answers) and predictions_best_thresh.json
(--rethreshold_predictions) and records them and the metrics in `result`
(settings_lib.Result). `settings` is run_squad's Settings.
"""
import os

from absl import logging

from bert_tf2 import fileutil
from bert_tf2.tasks import squad_results
from bert_tf2.tasks import squad_task
from bert_tf2.trainer import periodic_eval
from bert_tf2.trainer import runner_body


def dev_evaluation(settings, task, questions):
    """(evaluate, metric names) for --eval_every_n_steps, or (None, None) without it.

    evaluate(runner): the official EM/F1 of eval_results.txt on --predict_file's
    SquadQuestions `questions` (runner_body.dev_evaluation: eval.tf_record written once,
    here; no file written). The metric names are those of the questions' gold answers: a
    wrong --best_metric stops the run before that.
    """
    if settings.eval_every_n_steps is None:
        return None, None
    if not questions.examples or not squad_results.has_gold_answers(
            questions.articles, settings.version_2_with_negative):
        raise ValueError("--eval_every_n_steps needs questions with answers in "
                         "--predict_file=%s (the EM/F1 it evaluates)"
                         % squad_task.predict_source(settings))
    names = task.metric_names(questions)
    periodic_eval.check_names(settings.part(*periodic_eval.SETTINGS), names)
    return runner_body.dev_evaluation(task, questions, settings.predict_batch_size,
                                      settings.eval_every_n_steps, names)


def _evaluate(settings, task, questions, squad_predictions):
    """Official EM/F1 of the predictions into eval_results.txt, when gold answers exist."""
    if not squad_predictions.predictions:
        logging.warning("--predict_file=%s has no questions: EM/F1 not computed",
                        squad_task.predict_source(settings))
        return None
    if not squad_results.has_gold_answers(questions.articles,
                                          settings.version_2_with_negative):
        logging.info("Not every question of %s has answers: EM/F1 not computed",
                     squad_task.predict_source(settings))
        return None
    results = task.metrics(questions, squad_predictions)
    fileutil.write_eval_results(
        os.path.join(settings.output_dir, runner_body.EVAL_RESULTS_FILE), results)
    return results


def score(settings, task, questions, squad_predictions, result):
    """--do_predict's EM/F1 and re-thresholded predictions of the SquadPredictions of the
    SquadQuestions `questions`, each recorded in `result` (a settings_lib.Result) as it is
    written."""
    metrics = _evaluate(settings, task, questions, squad_predictions)
    if metrics is not None:
        result.metrics = dict(metrics)
        result.outputs["eval_results"] = os.path.join(settings.output_dir,
                                                      runner_body.EVAL_RESULTS_FILE)
    if settings.rethreshold_predictions:
        path = _rethreshold(settings, squad_predictions, metrics)
        if path is not None:
            result.outputs["predictions_best_thresh"] = path


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
