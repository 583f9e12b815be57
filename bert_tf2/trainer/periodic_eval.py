"""Evaluation during training: a history, the best checkpoint, early stopping.

--eval_every_n_steps=N makes training.Runner.train stop every N optimizer steps (and
at its last step), write a checkpoint there and call the runner's `evaluate(runner)`,
which returns the metrics of that runner's eval_results.txt computed by the same
code. Each evaluation becomes one JSON line of output_dir/eval_history.jsonl
({"global_step": N, <metric>: value, ...}) and TensorBoard scalars under
output_dir/eval. --best_metric keeps the checkpoint that scored best in output_dir/best/
(model weights, named model.ckpt-<step>, with the run's settings files and best.json:
metric, value, step); --early_stopping_patience=K ends training after K evaluations in
a row without an improvement. A resumed run reads the history and best.json back: no
step is written twice, the best's score and the evaluations since it are known, and
an evaluation a kill interrupted (checkpoint written, line not) is run again first.

Contracts with the other modules (bert_tf2/trainer/periodic_eval.py (evaluation during
training)):
define_flags(fv) (--eval_every_n_steps, --best_metric, --early_stopping_patience; added by
flags_common.define_fine_tuning_flags, and by run_squad itself), check_settings(part,
dev_data), from_settings(part, evaluate, metric_names=None) -> PeriodicEval or None (no
flag: None, the loop unchanged). A runner hands `training.fine_tune(..., evaluate,
metric_names)` (run_squad: `runner.train(...,
evaluation=periodic_eval.from_settings(...))`):
- `evaluate(runner) -> {metric: value}`: the metrics of its eval_results.txt, computed by
  the same function as its final --do_eval (classifier `_eval_metrics`, ner `_scores`,
  multiple choice `_metrics`, squad `compute_predictions` + `evaluate_predictions`), over
  the dev records written once before training, through `runner.predict` with the task's
  bound `predict_fn` (so Runner's cached predict step: traced once for the run); nothing
  written;
- `metric_names`: the names it reports, when known before training (else None).
  Runner.train(..., evaluation=e): `e.start(runner, last_step)` reads eval_history.jsonl
  (records after the restored step dropped) and output_dir/best/best.json (the best's
  metric, value, step; another metric is an error), counts the evaluations since the best,
  evaluates the current step if it is due and not in the history (a kill between checkpoint
  and history line), and returns True when patience already ran out (nothing trained). The
  loop's calls end at e's steps (multiples of N and the last step); at each, a checkpoint is
  saved first, then `e.run(step)`: evaluate, history rewritten whole (atomic), TensorBoard
  scalars in output_dir/eval, on an improvement the model's weights
  (tf.train.Checkpoint(model=...), model.ckpt-<step>, one kept) with fileutil.SETTINGS_FILES
  and best.json in output_dir/best; True stops training. Every worker evaluates and saves
  (non-chief into its scratch folder); only the chief writes files. History values: floats,
  numpy floats as their str() (eval_results.txt's text).
"""
import json
import math
import os
import re
import time

from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf

from bert_tf2 import fileutil
from bert_tf2.base import path_match
from bert_tf2.trainer import checkpoints
from bert_tf2.trainer import written_files
from bert_tf2.trainer import summaries

HISTORY_FILE = "eval_history.jsonl"
BEST_DIR = "best"
BEST_FILE = "best.json"
SUMMARY_DIR = "eval"


def define_flags(fv):
    """--eval_every_n_steps, --best_metric, --early_stopping_patience (all off by default)."""
    flags.DEFINE_integer(
        "eval_every_n_steps", None,
        "Evaluate on the dev set every N training steps (and at the last step), with the "
        "metrics of eval_results.txt: one JSON line per evaluation in "
        "output_dir/%s, TensorBoard scalars in output_dir/%s. Needs --do_train and the "
        "dev data. Default: evaluate only after training, as the reference."
        % (HISTORY_FILE, SUMMARY_DIR), flag_values=fv)
    flags.DEFINE_string(
        "best_metric", None,
        "With --eval_every_n_steps: keep the checkpoint with the best value of this "
        "metric (any the run reports, e.g. eval_accuracy; the losses eval_loss and loss "
        "lower is better, the others higher) in output_dir/%s, a checkpoint folder --init_checkpoint "
        "and export_saved_model take. Default: eval_loss with "
        "--early_stopping_patience, else none." % BEST_DIR, flag_values=fv)
    flags.DEFINE_integer(
        "early_stopping_patience", None,
        "With --eval_every_n_steps: stop training after this many evaluations in a row "
        "without an improvement of --best_metric.", flag_values=fv)
    flags.DEFINE_bool(
        "keep_best_only", False,
        "With --best_metric (or --early_stopping_patience): once training has ended, "
        "delete the checkpoints model.ckpt-N this run wrote in output_dir (weights and "
        "optimizer slots), so that output_dir/%s (weights only) is the run's one "
        "checkpoint: the disk of a hyper-parameter search's trial. Evaluation and "
        "prediction in the same run use the trained model; later runs take "
        "--init_checkpoint=output_dir/%s. A run stopped before its end (Ctrl-C, SIGTERM) "
        "or that kept no best keeps its checkpoints." % (BEST_DIR, BEST_DIR), flag_values=fv)


# The settings this module reads (a part of a runner's settings: settings_lib.Settings.part);
# check_settings also reads do_train and the setting that gives the dev data.
SETTINGS = ("eval_every_n_steps", "best_metric", "early_stopping_patience", "keep_best_only",
            "do_train", "do_eval")


def check_settings(evaluation, dev_data="--do_eval"):
    """Raises ValueError for values of these settings no run can honour.

    `evaluation`: a part of the runner's settings holding SETTINGS (and `dev_data`'s field).
    `dev_data` names what gives the run its dev set (run_squad: --do_predict), which
    must be set along with --do_train.
    """
    if "eval_every_n_steps" not in evaluation:  # a program without these settings
        return
    every = evaluation.eval_every_n_steps
    if every is None:
        # Unset: None (keep_best_only: False); a patience of 0 is set, and refused here.
        unset = {"best_metric": None, "early_stopping_patience": None, "keep_best_only": False}
        for name, default in unset.items():
            if getattr(evaluation, name, default) is not default:
                raise ValueError("--%s needs --eval_every_n_steps (the evaluations it "
                                 "compares)" % name)
        return
    if getattr(evaluation, "keep_best_only", False) and evaluation.best_metric is None and \
            evaluation.early_stopping_patience is None:
        raise ValueError("--keep_best_only needs --best_metric (or --early_stopping_patience): "
                         "without one no %s/ checkpoint is kept" % BEST_DIR)
    if every < 1:
        raise ValueError("--eval_every_n_steps=%d must be >= 1" % every)
    if not evaluation.do_train:
        raise ValueError("--eval_every_n_steps evaluates during training: it needs "
                         "--do_train")
    if not getattr(evaluation, dev_data.lstrip("-")):
        raise ValueError("--eval_every_n_steps needs %s: the dev data it evaluates on"
                         % dev_data)
    patience = evaluation.early_stopping_patience
    if patience is not None and patience < 1:
        raise ValueError("--early_stopping_patience=%d must be >= 1" % patience)
    if evaluation.best_metric is not None and not evaluation.best_metric.strip():
        raise ValueError("--best_metric is empty: name a metric, e.g. eval_accuracy")


def best_checkpoint(output_dir):
    """The checkpoint prefix kept in `output_dir`/best/, or None when there is none."""
    return path_match.latest_checkpoint(os.path.join(str(output_dir), BEST_DIR))


def best_record(output_dir):
    """{"metric", "value", "global_step"} of `output_dir`/best/best.json, None without."""
    path = os.path.join(str(output_dir), BEST_DIR, BEST_FILE)
    if not tf.io.gfile.exists(path):
        return None
    best = fileutil.read_json(path)
    try:
        return {"metric": str(best["metric"]), "value": float(best["value"]),
                "global_step": int(best["global_step"])}
    except (KeyError, TypeError, ValueError):
        raise ValueError("%s is not a best.json of this program" % path) from None


LOWER, HIGHER = "lower", "higher"

# Which way is better, for every metric a runner reports (eval_results.txt, the Result's
# metrics): the one table. Counts and thresholds (SQuAD 2.0's total, best_f1_thresh) have
# no better way; they are listed (as higher) so that every reported name is known.
METRICS = dict(
    [(name, LOWER) for name in (
        "loss", "eval_loss",                              # every fine-tuning runner
        "masked_lm_loss", "next_sentence_loss")] +        # run_pretraining
    [(name, HIGHER) for name in (
        "eval_accuracy", "eval_precision", "eval_recall", "eval_f1",  # classifier, run_ner
        "eval_mcc", "eval_pearson", "eval_spearman",      # run_classifier's GLUE metrics
        "eval_macro_f1", "eval_weighted_f1",              # multi-class (and multi-label)
        "eval_micro_precision", "eval_micro_recall", "eval_micro_f1",  # multi-label
        "eval_macro_precision", "eval_macro_recall", "eval_subset_accuracy",
        "masked_lm_accuracy", "next_sentence_accuracy",   # run_pretraining
        "exact_match", "f1", "total",                     # run_squad, SQuAD 1.1
        "exact", "HasAns_exact", "HasAns_f1", "HasAns_total",  # SQuAD 2.0
        "NoAns_exact", "NoAns_f1", "NoAns_total",
        "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh")])

# Families of metrics named after a label, class or entity type, by their prefix: their
# direction is the family's whatever the name that follows (eval_f1_label_weight_loss is
# an F1). The longest prefix first.
METRIC_FAMILIES = (
    ("eval_f1_label_", HIGHER),   # multi-label: per-label F1
    ("eval_f1_", HIGHER),         # multi-class: per-class F1; run_ner: per-type F1
)


def direction(metric):
    """LOWER or HIGHER: which values of `metric` are better (METRICS, METRIC_FAMILIES;
    a name in neither, higher)."""
    if metric in METRICS:
        return METRICS[metric]
    for prefix, way in METRIC_FAMILIES:
        if metric.startswith(prefix):
            return way
    return HIGHER


def known_metric(metric):
    """Whether `metric` is in METRICS or one of METRIC_FAMILIES (tests keep them whole)."""
    return metric in METRICS or any(metric.startswith(p) for p, _ in METRIC_FAMILIES)


def lower_is_better(metric):
    """Whether smaller values of `metric` are better: the losses (direction)."""
    return direction(metric) == LOWER


def watched_metric(evaluation):
    """The metric --best_metric names (eval_loss for --early_stopping_patience without
    it), or None."""
    metric = evaluation.best_metric
    if metric is None and evaluation.early_stopping_patience is not None:
        return "eval_loss"
    return metric and metric.strip()


def check_names(evaluation, names):
    """Before any work: ValueError unless the watched metric is one of `names`.

    `evaluation`: a part of the runner's settings holding SETTINGS; `names`: the metrics
    the run will report, which every runner with --eval_every_n_steps knows before its
    model loads or a file is written.
    """
    if getattr(evaluation, "eval_every_n_steps", None) is None:
        return
    check_metric(watched_metric(evaluation), set(names), "checked before training",
                 evaluation.best_metric is None)


def from_settings(evaluation, evaluate, metric_names=None):
    """The PeriodicEval of the settings (SETTINGS), or None without --eval_every_n_steps."""
    if getattr(evaluation, "eval_every_n_steps", None) is None:
        return None
    if evaluate is None:
        raise ValueError("--eval_every_n_steps is not supported by this program")
    metric = watched_metric(evaluation)
    if evaluation.best_metric is None and metric is not None:
        logging.info("--early_stopping_patience without --best_metric: watching eval_loss")
    return PeriodicEval(evaluate, evaluation.eval_every_n_steps, metric,
                        evaluation.early_stopping_patience, metric_names)


def check_metric(metric, names, when, default=False):
    """ValueError unless `metric` is one of `names` (the metrics a run reports);
    `default`: the metric is --early_stopping_patience's, no --best_metric given."""
    if metric is not None and metric not in names:
        what = ("--early_stopping_patience watches %s without --best_metric, but %s is "
                "not a metric this run reports" % (metric, metric) if default else
                "--best_metric=%s is not a metric this run reports" % metric)
        raise ValueError("%s (%s); it reports: %s" % (what, when, ", ".join(sorted(names))))


def read_history(path):
    """The evaluations of an eval_history.jsonl, in file order ([] when absent).

    A last line cut short (a kill while writing) is dropped with a warning; any other
    line that is not a JSON object with an integer global_step is an error naming it.
    """
    if not tf.io.gfile.exists(path):
        return []
    with tf.io.gfile.GFile(path, "r") as f:
        lines = f.read().split("\n")
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            int(record["global_step"])
        except (ValueError, KeyError, TypeError):
            if number == len(lines):
                logging.warning("%s, line %d: incomplete, dropped", path, number)
                continue
            raise ValueError("%s, line %d: not an evaluation record (a JSON object with "
                             "global_step)" % (path, number)) from None
        records.append({name: float(value) if value in _NOT_FINITE else value
                        for name, value in record.items()})
    return records


# A metric that is not a finite number (a Pearson correlation on a constant dev set is
# NaN) is written as its Python text: strict JSON has no NaN or Infinity.
_NOT_FINITE = ("nan", "inf", "-inf")


def write_history(path, records):
    """Writes the evaluation records, one JSON object per line (complete or absent);
    NaN and the infinities as the strings "nan", "inf", "-inf"."""
    with fileutil.atomic_open(path, "w") as f:
        for record in records:
            record = {name: str(value) if isinstance(value, float)
                      and not math.isfinite(value) else value
                      for name, value in record.items()}
            f.write(json.dumps(record, allow_nan=False) + "\n")


class PeriodicEval:
    """The evaluations of one training run: when, the history, the best, the stop."""

    def __init__(self, evaluate, every_n_steps, best_metric=None, patience=None,
                 metric_names=None):
        self.evaluate = evaluate
        self.every = every_n_steps
        self.metric = best_metric
        self.patience = patience
        if metric_names is not None:
            check_metric(best_metric, set(metric_names), "checked before training")
        self.history = []
        self.best = None             # {"metric", "value", "global_step"}
        self.since_best = 0          # evaluations after the best one
        self._runner = None
        self._last_step = None
        self._writer = None
        self._warned_not_finite = False

    # -- schedule ------------------------------------------------------------

    def steps_to_next(self, step, last_step):
        """Training steps from `step` to the next evaluation."""
        return min(self.every - step % self.every, last_step - step)

    def due(self, step, last_step):
        """Whether the loop evaluates at `step` (a multiple of N, or the last step)."""
        return step > 0 and (step % self.every == 0 or step == last_step)

    @property
    def stopped(self):
        """True once --early_stopping_patience evaluations passed without improving."""
        return self.patience is not None and self.since_best >= self.patience

    # -- state ---------------------------------------------------------------

    def start(self, runner, last_step):
        """Reads the history and the best back, catches up an interrupted evaluation.

        Returns True when training must not go on (it stopped early before).
        """
        self._runner = runner
        self._last_step = last_step
        output_dir = runner.config.output_dir
        step = runner.global_step
        if self.metric is not None:
            self._recover_best()
        self.history = self._history_up_to(step)
        self.best = self._read_best(step)
        self.since_best = 0 if self.best is None else sum(
            1 for r in self.history if r["global_step"] > self.best["global_step"])
        if runner.is_chief:
            self._writer = tf.summary.create_file_writer(os.path.join(output_dir, SUMMARY_DIR))
        if self.history:
            logging.info("Evaluation history: %d evaluations up to step %d%s",
                         len(self.history), self.history[-1]["global_step"],
                         self._best_text())
        if self.due(step, last_step) and step not in self._steps():
            self.run(step)
        if self.stopped:
            logging.info("Early stopping: %s has not improved for %d evaluations%s; not "
                         "training further", self.metric, self.since_best, self._best_text())
            return True
        return False

    def _steps(self):
        return {r["global_step"] for r in self.history}

    def _path(self, *names):
        return os.path.join(self._runner.config.output_dir, *names)

    def _history_up_to(self, step):
        """The history's records up to `step`; later ones (weights lost) are dropped."""
        records = read_history(self._path(HISTORY_FILE))
        kept = {}
        for record in records:
            if record["global_step"] <= step:
                kept[record["global_step"]] = record
        if len(kept) != len(records):
            logging.warning("%s: %d records after the restored step %d or repeated; "
                            "dropped", self._path(HISTORY_FILE), len(records) - len(kept), step)
            if self._runner.is_chief:
                with written_files.writing(self._path(), [HISTORY_FILE]):
                    write_history(self._path(HISTORY_FILE), list(kept.values()))
        return [kept[s] for s in sorted(kept)]

    def _read_best(self, step):
        """best.json of output_dir/best, if it belongs to this run and metric."""
        if self.metric is None:
            return None
        path = self._path(BEST_DIR, BEST_FILE)
        if not tf.io.gfile.exists(path):
            return None
        with tf.io.gfile.GFile(path, "r") as f:
            try:
                best = json.load(f)
                name, value, at = best["metric"], float(best["value"]), int(best["global_step"])
            except (ValueError, KeyError, TypeError):
                raise ValueError("%s is not a best.json of this program" % path) from None
        kept = path_match.latest_checkpoint(self._path(BEST_DIR))
        kept_step = re.search(r"-(\d+)$", kept) if kept else None
        kept_step = kept_step and int(kept_step.group(1))
        if kept_step != at:
            raise ValueError("%s holds the checkpoint of step %s but its %s names step %d: "
                             "remove %s (the run then keeps a new best) or use a new "
                             "--output_dir" % (self._path(BEST_DIR), kept_step, BEST_FILE,
                                               at, self._path(BEST_DIR)))
        if name != self.metric:
            raise ValueError("--best_metric=%s, but %s holds the best by %s: keep "
                             "--best_metric=%s or use a new --output_dir"
                             % (self.metric, self._path(BEST_DIR), name, name))
        if at > step:
            logging.warning("%s is from step %d, after the restored step %d: this run's "
                            "best will replace it", self._path(BEST_DIR), at, step)
            return None
        return {"metric": name, "value": value, "global_step": at}

    def _best_text(self):
        if self.best is None:
            return ""
        return " (best %s %.6g at step %d)" % (self.best["metric"], self.best["value"],
                                               self.best["global_step"])

    # -- one evaluation ------------------------------------------------------

    def run(self, step):
        """Evaluates at `step`: history line, scalars, best; returns True to stop."""
        started = time.time()
        metrics = self.evaluate(self._runner)
        seconds = time.time() - started
        values = _numbers(metrics)
        check_metric(self.metric, set(values), "at step %d" % step)
        if self.metric is not None:
            self._judge(step, values[self.metric])
        record = dict(global_step=step, **values)
        self.history.append(record)
        if self._runner.is_chief:
            with written_files.writing(self._path(), [HISTORY_FILE]):
                write_history(self._path(HISTORY_FILE), self.history)
            summaries.write_scalars(self._writer, step, values)
            self._writer.flush()
        logging.info("Evaluation at step %d (%.1f s): %s%s", step, seconds,
                     ", ".join("%s %.6g" % kv for kv in sorted(values.items())),
                     self._best_text() if self.metric else "")
        if self.stopped and step < self._last_step:
            logging.info("Early stopping at step %d: %s has not improved for %d "
                         "evaluations%s", step, self.metric, self.since_best,
                         self._best_text())
        return self.stopped

    def _judge(self, step, value):
        """Keeps `value` at `step` as the best, or counts one more evaluation without.

        NaN is never an improvement; before the first finite value there is no best
        and nothing counts against the patience (a metric NaN at every evaluation
        never stops the run, with a warning). The best already kept at `step` (a kill
        cut the evaluation after best/, before its history line) is this evaluation's.
        """
        if self.best is not None and self.best["global_step"] == step:
            self.since_best = 0
        elif self._improves(value):
            self._save_best(step, value)
            self.since_best = 0
        elif self.best is not None:
            self.since_best += 1
        elif not self._warned_not_finite:
            self._warned_not_finite = True
            logging.warning("--best_metric=%s is %s at step %d: no best yet, and early "
                            "stopping cannot judge it (it does not count against the "
                            "patience until a value is a number)", self.metric, value, step)

    def _improves(self, value):
        if not math.isfinite(value):
            return False
        if self.best is None:
            return True
        if lower_is_better(self.metric):
            return value < self.best["value"]
        return value > self.best["value"]

    def _save_best(self, step, value):
        """The model's weights to best/ (the one checkpoint there), with best.json.

        The new best/ is written whole in a temporary folder beside it (weights,
        settings files, best.json) and then takes best/'s place by two renames, so
        best/ and its best.json always name the same step; a kill between the renames
        leaves the old best/ under a temporary name, which `start` puts back.
        """
        runner = self._runner
        # Every worker saves (a multi-worker save is collective); only the chief's
        # copy is output_dir/best, the others go to their scratch folders.
        folder = self._best_folder()
        staging = fileutil.temp_name(folder)
        path = checkpoints.Manager(
            tf.train.Checkpoint(model=runner.model), staging, max_to_keep=1,
            checkpoint_name=checkpoints.CHECKPOINT_NAME).save(checkpoint_number=step)
        best = {"metric": self.metric, "value": value, "global_step": step}
        if runner.is_chief:
            for name in fileutil.SETTINGS_FILES:
                source = self._path(name)
                if tf.io.gfile.exists(source):
                    tf.io.gfile.copy(source, os.path.join(staging, name), overwrite=True)
            with fileutil.atomic_open(os.path.join(staging, BEST_FILE), "w") as f:
                f.write(json.dumps(best) + "\n")
        replaced = fileutil.temp_name(folder, "old")
        with written_files.writing(self._path(), [BEST_DIR + "/*"] if runner.is_chief else []):
            if tf.io.gfile.exists(folder):
                tf.io.gfile.rename(folder, replaced)
            tf.io.gfile.rename(staging, folder)
        if runner.is_chief:
            written_files.note_folder(self._path(), BEST_DIR)
        # A best/ that was a symlink went aside as the link: removed as one, its target kept.
        fileutil.remove(replaced)
        self.best = best
        logging.info("New best %s %.6g at step %d: %s", self.metric, value, step,
                     os.path.join(folder, os.path.basename(path)))

    def _best_folder(self):
        """best/ of this worker: output_dir's on the chief, its scratch folder's elsewhere."""
        return os.path.join(self._runner.manager.directory, BEST_DIR)

    def _recover_best(self):
        """Puts back a best/ a kill left under its temporary name in the middle of a
        swap (_save_best), and removes the unfinished new ones."""
        fileutil.recover_folder(self._best_folder())
        if self._runner.is_chief and tf.io.gfile.isdir(self._best_folder()) and \
                written_files.settle(self._path(), BEST_DIR + "/*"):
            # A kill after the new best/ took its place, before its files were recorded:
            # a best/ in place is whole (renamed in complete), so it is recorded now.
            written_files.note_folder(self._path(), BEST_DIR)


def _numbers(metrics):
    """The metrics as {name: float}, global_step and non-numbers left out.

    A numpy float is taken as str() prints it (eval_results.txt's text: float32
    0.6671585, not 0.6671584844589233), which names the same float32.
    """
    values = {}
    for name, value in metrics.items():
        if name == "global_step":
            continue
        try:
            values[name] = float(str(value) if isinstance(value, np.floating) else value)
        except (TypeError, ValueError):
            continue
    return dict(sorted(values.items()))
