"""Every runner's task has the one shape of tasks/task.py, and no face defines a task."""
import ast
import importlib
import inspect

import pytest

import registry_lists
from conftest import REPO_ROOT

import run_classifier
import run_ner
import run_squad
from bert_tf2.tasks import classifier_task
from bert_tf2.tasks import long_text
from bert_tf2.tasks import multilabel_data
from bert_tf2.tasks import multiple_choice_task
from bert_tf2.tasks import ner_task
from bert_tf2.tasks import squad_task
from bert_tf2.tasks import task as task_lib

# The runners of the registry's heads (entry.runner: run_pretraining's folders too).
FACES = tuple(runner + ".py" for runner in registry_lists.head_runners())


def _long_texts():
    return long_text.from_settings(run_classifier.Settings(), 16)


# One constructed task of each kind, made as its runner makes it (no model, no data).
TASKS = {
    "classifier": lambda: classifier_task.ClassifierTask(
        run_classifier.get_processor("mrpc"), None, 16, _long_texts()),
    "regression": lambda: classifier_task.ClassifierTask(
        run_classifier.get_processor("sts-b"), None, 16, _long_texts()),
    "multilabel": lambda: classifier_task.MultiLabelTask(
        multilabel_data.MultiLabelProcessor(["a", "b"]), None, 16, _long_texts()),
    "ner": lambda: ner_task.NerTask(
        run_ner.Settings(output_dir="unused").part(*ner_task.TASK_SETTINGS),
        ["O", "B-PER", "I-PER"], None),
    "squad": lambda: squad_task.SquadTask(run_squad.Settings(), None),
    "multiple_choice": lambda: multiple_choice_task.MultipleChoiceTask("unused", 16, None, 4),
}


def _protocol_methods():
    return sorted(name for name, value in vars(task_lib.FineTuningTask).items()
                  if inspect.isfunction(value) and not name.startswith("_"))


def task_classes():
    """{name: class} of every task class in bert_tf2/tasks/ (found: a class defining every
    protocol method), a new head's task with no edit here."""
    found = {}
    for path in sorted((REPO_ROOT / "bert_tf2" / "tasks").glob("*.py")):
        module = importlib.import_module("bert_tf2.tasks." + path.stem)
        for name, value in vars(module).items():
            if inspect.isclass(value) and value.__module__ == module.__name__ and \
                    value is not task_lib.FineTuningTask and all(
                    inspect.isfunction(getattr(value, m, None)) for m in _protocol_methods()):
                found["%s.%s" % (path.stem, name)] = value
    return found


def _protocol_mismatches(kind, owner):
    """Where `owner` (a task or its class) differs from the protocol's methods: parameters
    first by name and in order, any more with defaults."""
    wrong = []
    for name in _protocol_methods():
        wanted = list(inspect.signature(getattr(task_lib.FineTuningTask, name)).parameters)[1:]
        given = list(inspect.signature(getattr(owner, name)).parameters.values())
        if inspect.isclass(owner) and inspect.isfunction(inspect.getattr_static(owner, name)):
            given = given[1:]  # self (a staticmethod has none)
        if [p.name for p in given[:len(wanted)]] != wanted or any(
                p.default is inspect.Parameter.empty for p in given[len(wanted):]):
            wrong.append((kind, name))
    return wrong


def test_the_protocol_names_what_the_trainer_and_the_faces_call():
    assert _protocol_methods() == ["loss_fn", "metric_names", "metrics", "model",
                                   "predict_fn", "write_features"]


@pytest.mark.parametrize("kind", sorted(TASKS))
def test_each_task_is_a_fine_tuning_task(kind):
    task = TASKS[kind]()
    assert isinstance(task, task_lib.FineTuningTask)
    assert isinstance(task.spec, dict) and "input_ids" in task.spec
    # The protocol's parameters first, by name and in order; any more have defaults.
    assert not _protocol_mismatches(kind, task)


def test_every_task_class_keeps_the_protocols_parameters():
    # Every task class of tasks/ (found), those without a made task in TASKS too.
    found = task_classes()
    assert {type(make()) for make in TASKS.values()} <= set(found.values()), sorted(found)
    wrong = [w for name, cls in found.items() for w in _protocol_mismatches(name, cls)]
    assert not wrong, wrong


def test_a_task_missing_a_method_is_not_one():
    class NoMetrics(object):  # pylint: disable=too-few-public-methods
        spec = {}

        def model(self, bert_config):
            return bert_config

    assert not isinstance(NoMetrics(), task_lib.FineTuningTask)


def test_the_classifier_metric_names_are_the_reports():
    # metric_names runs metrics on made-up rows: the names a real evaluation reports.
    assert "eval_f1" in TASKS["classifier"]().metric_names()
    assert "eval_pearson" in TASKS["regression"]().metric_names()
    assert "eval_micro_f1" in TASKS["multilabel"]().metric_names()
    assert TASKS["multiple_choice"]().metric_names() == ["eval_accuracy", "eval_loss"]


@pytest.mark.parametrize("face", FACES)
def test_the_faces_define_no_task_class(face):
    tree = ast.parse((REPO_ROOT / face).read_text(encoding="utf-8"))
    classes = [node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    assert set(classes) <= {"Predictor"}, (face, classes)
