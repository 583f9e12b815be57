"""trainer/runner_body.py: the evaluation and prediction passes the faces share, on a toy
task (no model): what each pass asks of the task, the files it writes, the outputs named."""
import inspect
import json

import numpy as np
import pytest

import run_squad
from bert_tf2.tasks import classifier_task
from bert_tf2.tasks import multiple_choice_task
from bert_tf2.tasks import ner_task
from bert_tf2.tasks import ranker_task
from bert_tf2.tasks import squad_results
from bert_tf2.tasks import squad_task
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


def test_predict_of_another_stage_returns_the_predictions(tmp_path):
    # run_squad's: --predict_file is the dev data (eval records), its answers scored after.
    task, outputs = _Task(), {}
    assert runner_body.predict(task, _Runner(), [1, 5], tmp_path, 2, outputs, "eval") == [2, 10]
    assert task.calls == [("predictions", "eval", 2, None)]
    assert outputs == {"test_results": str(tmp_path / "test_results.tsv"),
                       "eval_records": str(tmp_path / "eval.tf_record")}


def test_the_records_may_go_unnamed(tmp_path):
    # run_classifier's Result never named its records.
    outputs = {}
    runner_body.evaluate(_Task(), _Runner(), [1], tmp_path, 4, outputs, name_records=False)
    runner_body.predict(_Task(), _Runner(), [1], tmp_path, 4, outputs, name_records=False)
    assert sorted(outputs) == ["eval_results", "test_results"]


@pytest.mark.parametrize("cls", [ranker_task.RankerTask, multiple_choice_task.MultipleChoiceTask,
                                 ner_task.NerTask, classifier_task.ClassifierTask,
                                 classifier_task.MultiLabelTask, squad_task.SquadTask])
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


def test_classifier_output_rows_are_the_real_examples_in_float32():
    rows = classifier_task.ClassifierTask.output_rows(
        {"is_real_example": np.array([1, 0, 1]),
         "outputs": np.array([[0.25, 0.75], [9.0, 9.0], [0.5, 0.5]], np.float64)})
    assert rows.dtype == np.float32 and rows.tolist() == [[0.25, 0.75], [0.5, 0.5]]


@pytest.mark.parametrize("version_2", [False, True])
def test_squad_result_files_are_the_answer_files(tmp_path, version_2):
    task = squad_task.SquadTask(run_squad.Settings(version_2_with_negative=version_2), None)
    found = squad_results.SquadPredictions({"q1": "Ann"}, {"q1": [{"text": "Ann"}]},
                                           {"q1": -1.5}, {"q1": "Ann"})
    outputs = task.write_result_files(str(tmp_path), None, found)
    names = sorted(["nbest_predictions", "predictions"] + (["null_odds"] if version_2 else []))
    assert sorted(outputs) == names
    assert sorted(p.name for p in tmp_path.iterdir()) == [n + ".json" for n in names]
    assert json.loads((tmp_path / "predictions.json").read_text()) == {"q1": "Ann"}
    if version_2:
        assert json.loads((tmp_path / "null_odds.json").read_text()) == {"q1": -1.5}
