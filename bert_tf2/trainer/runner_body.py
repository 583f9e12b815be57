"""The evaluation and prediction passes of a fine-tuning runner, written once for every task.

A run_<x>.py face reads its flags, resolves its data and builds its task; what it then does
with a trained runner is the same for every task that has the prediction-pass hooks of
tasks/task.py (`predictions`, `metrics`, `write`, `write_result_files`):

- evaluate(): the dev split through the model ("eval" records), its metrics and the
  global step into eval_results.txt (the reference's `key = value` lines), and the task's
  own evaluation files (`write_eval_files`, when it has one: run_ner's
  eval_predictions.txt);
- dev_evaluation(): the same metrics during training (--eval_every_n_steps), the dev
  records written once;
- predict(): the test split through the model ("predict" records) and the task's result
  files (`write_result_files`: test_results.tsv, test_predictions.jsonl / .txt; run_squad's
  predictions.json, nbest_predictions.json, null_odds.json); it returns the predictions,
  which run_squad also scores (its --predict_file is its dev data: "eval" records).

Every path written goes into the run's Result.outputs under the names the faces have
always used (eval_records, eval_results, predict_records and the task's; run_classifier's
Result never named its records: name_records=False). Plain values only: the faces hand
over their settings' output_dir and batch sizes (flags end there).
"""
import os

from bert_tf2 import fileutil

EVAL_RESULTS_FILE = "eval_results.txt"


def records_path(output_dir, stage):
    """output_dir/`stage`.tf_record: the records a task's predictions() wrote for `stage`."""
    return os.path.join(output_dir, stage + ".tf_record")


def evaluate(task, runner, examples, output_dir, batch_size, outputs, name_records=True):
    """Runs `task`'s dev `examples` through `runner`'s model; writes eval_results.txt (the
    metrics and global_step) and the task's evaluation files; their paths and (with
    name_records) the eval records' go into `outputs`. Returns eval_results.txt's values."""
    predictions = task.predictions(runner, examples, "eval", batch_size)
    result = task.metrics(examples, predictions)
    if name_records:
        outputs["eval_records"] = records_path(output_dir, "eval")
    write_eval_files = getattr(task, "write_eval_files", None)
    if write_eval_files is not None:
        outputs.update(write_eval_files(output_dir, examples, predictions))
    result["global_step"] = runner.global_step
    outputs["eval_results"] = os.path.join(output_dir, EVAL_RESULTS_FILE)
    fileutil.write_eval_results(outputs["eval_results"], result)
    return result


def dev_evaluation(task, examples, batch_size, every_n_steps, metric_names=None):
    """(evaluate, metric names) for training.fine_tune's --eval_every_n_steps, or (None,
    None) without it (`every_n_steps` None). evaluate(runner) gives the metrics evaluate()
    writes, of the dev records written once, here; it writes no file. `metric_names`:
    the names known before the model is built (default: task.metric_names())."""
    if every_n_steps is None:
        return None, None
    written = task.write(examples, "eval")
    return (lambda runner: task.metrics(examples, task.predictions(
        runner, examples, "eval", batch_size, written)),
            task.metric_names() if metric_names is None else metric_names)


def predict(task, runner, examples, output_dir, batch_size, outputs, stage="predict",
            name_records=True):
    """Runs `task`'s test `examples` through `runner`'s model (the records of `stage`:
    output_dir/predict.tf_record, run_squad's eval.tf_record) and writes the task's result
    files (write_result_files); their paths and (with name_records) the records' ("<stage>_
    records") go into `outputs`. Returns the predictions (run_squad scores them)."""
    predictions = task.predictions(runner, examples, stage, batch_size)
    outputs.update(task.write_result_files(output_dir, examples, predictions))
    if name_records:
        outputs[stage + "_records"] = records_path(output_dir, stage)
    return predictions
