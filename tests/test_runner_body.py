"""trainer/runner_body.py: the evaluation and prediction passes the faces share, on a toy
task (no model): what each pass asks of the task, the files it writes, the outputs named."""
import inspect

import pytest

from bert_tf2.tasks import multiple_choice_task
from bert_tf2.tasks import ner_task
from bert_tf2.tasks import ranker_task
from bert_tf2.trainer import runner_body


class _Runner:
    global_step = 7


class _Task:
    """Records the calls; predictions are the examples doubled."""

    def __init__(self, eval_files=False):
        self.calls = []
        if eval_files:
            self.write_eval_files = self._write_eval_files

    def write(self, examples, stage):
        self.calls.append(("write", stage))
        return "written-" + stage

    def predictions(self, runner, examples, stage, batch_size, written=None):
        self.calls.append(("predictions", stage, batch_size, written))
        return [2 * x for x in examples]

    @staticmethod
    def metrics(examples, predictions):
        return {"eval_sum": sum(predictions) - sum(examples)}

    @staticmethod
    def metric_names(examples=None):
        del examples
        return ["eval_sum"]

    @staticmethod
    def _write_eval_files(output_dir, examples, predictions):
        path = output_dir / "eval_predictions.txt"
        path.write_text(" ".join(map(str, predictions)))
        return {"eval_predictions": str(path)}

    @staticmethod
    def write_result_files(output_dir, examples, predictions):
        path = output_dir / "test_results.tsv"
        path.write_text("\n".join(map(str, predictions)) + "\n")
        return {"test_results": str(path)}


@pytest.mark.parametrize("eval_files", [False, True])
def test_evaluate_writes_eval_results_with_the_step_and_the_tasks_files(tmp_path, eval_files):
    task, outputs = _Task(eval_files), {}
    result = runner_body.evaluate(task, _Runner(), [1, 2, 3], tmp_path, 4, outputs)
    assert result == {"eval_sum": 6, "global_step": 7}
    assert (tmp_path / "eval_results.txt").read_text() == "eval_sum = 6\nglobal_step = 7\n"
    assert task.calls == [("predictions", "eval", 4, None)]
    want = {"eval_records": str(tmp_path / "eval.tf_record"),
            "eval_results": str(tmp_path / "eval_results.txt")}
    if eval_files:
        want["eval_predictions"] = str(tmp_path / "eval_predictions.txt")
        assert (tmp_path / "eval_predictions.txt").read_text() == "2 4 6"
    assert outputs == want


def test_dev_evaluation_writes_the_records_once_and_no_file(tmp_path):
    task = _Task()
    assert runner_body.dev_evaluation(task, [1, 2], 3, None) == (None, None)
    assert task.calls == []
    evaluate, names = runner_body.dev_evaluation(task, [1, 2], 3, 100)
    assert names == ["eval_sum"] and task.calls == [("write", "eval")]
    assert evaluate(_Runner()) == evaluate(_Runner()) == {"eval_sum": 3}
    assert task.calls[1:] == [("predictions", "eval", 3, "written-eval")] * 2
    assert runner_body.dev_evaluation(task, [1], 3, 100, ["given"])[1] == ["given"]
    assert not list(tmp_path.iterdir())


def test_predict_writes_the_tasks_result_files(tmp_path):
    task, outputs = _Task(), {"train_records": "t"}
    runner_body.predict(task, _Runner(), [1, 5], tmp_path, 2, outputs)
    assert task.calls == [("predictions", "predict", 2, None)]
    assert (tmp_path / "test_results.tsv").read_text() == "2\n10\n"
    assert outputs == {"train_records": "t", "test_results": str(tmp_path / "test_results.tsv"),
                       "predict_records": str(tmp_path / "predict.tf_record")}


@pytest.mark.parametrize("cls", [ranker_task.RankerTask, multiple_choice_task.MultipleChoiceTask,
                                 ner_task.NerTask])
def test_the_tasks_of_the_shared_body_have_its_hooks(cls):
    for name in ("predictions", "write", "metrics", "metric_names", "write_result_files"):
        assert callable(getattr(cls, name, None)), (cls, name)
    parameters = list(inspect.signature(cls.predictions).parameters)
    assert parameters[-4:] == ["examples", "stage", "batch_size", "written"] or \
        parameters[-4:] == ["rows", "stage", "batch_size", "written"] or \
        parameters[-4:] == ["conll_file", "stage", "batch_size", "written"], parameters
    assert list(inspect.signature(cls.write_result_files).parameters)[-3:][0] == "output_dir"


def test_ranker_result_file_is_one_score_a_line(tmp_path):
    outputs = ranker_task.RankerTask.write_result_files(
        str(tmp_path), ["a", "b"], {"scores": [0.5, -1.25]})
    assert outputs == {"test_results": str(tmp_path / "test_results.tsv")}
    assert (tmp_path / "test_results.tsv").read_text() == "0.5\n-1.25\n"
