"""Every flag of a runner that trains is a decision: recorded or not, and why.

training_record.SETTINGS are the settings compared when a run resumes an output folder;
training_record.NOT_RECORDED names every other flag of a training runner with its reason.
A flag in neither would silently resume a model trained with another value of it.
"""
import ast
import importlib

from absl import flags
import pytest

from conftest import REPO_ROOT
from bert_tf2.trainer import training_record


def _runners_that_train():
    """The root's runners that write a training record (call training_record.of)."""
    found = []
    for path in sorted(REPO_ROOT.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "of" and \
                    isinstance(node.value, ast.Name) and node.value.id == "training_record":
                found.append(path.stem)
                break
    return found


TRAINING_RUNNERS = _runners_that_train()


def _flags_of(name):
    fv = flags.FlagValues()
    importlib.import_module(name).define_flags(fv)
    return set(fv)


def test_the_training_runners_are_found():
    assert set(TRAINING_RUNNERS) >= {"run_classifier", "run_ner", "run_squad",
                                     "run_multiple_choice", "run_pretraining"}


def _own_recorded(name):
    """A runner's RECORDED_SETTINGS: its own flags that define the trained model."""
    return tuple(getattr(importlib.import_module(name), "RECORDED_SETTINGS", ()))


@pytest.mark.parametrize("runner", TRAINING_RUNNERS)
def test_every_flag_of_a_training_runner_is_recorded_or_listed_with_a_reason(runner):
    names = _flags_of(runner)
    own = _own_recorded(runner)
    assert set(own) <= names and not set(own) & set(training_record.SETTINGS), own
    undecided = sorted(names - set(training_record.SETTINGS) - set(own)
                       - set(training_record.NOT_RECORDED))
    assert not undecided, (
        "%s: flags neither in training_record.SETTINGS or the runner's RECORDED_SETTINGS "
        "(they define the trained model) nor in training_record.NOT_RECORDED (with a reason): "
        "%s" % (runner, ", ".join(undecided)))


def test_no_flag_is_both_recorded_and_not_and_every_entry_is_a_flag():
    own = set().union(*map(_own_recorded, TRAINING_RUNNERS))
    recorded = set(training_record.SETTINGS) | own
    not_recorded = set(training_record.NOT_RECORDED)
    assert not recorded & not_recorded
    assert len(training_record.SETTINGS) == len(set(training_record.SETTINGS))
    every_flag = set().union(*map(_flags_of, TRAINING_RUNNERS))
    assert sorted((recorded | not_recorded) - every_flag) == []
    reasons = training_record.NOT_RECORDED.values()
    assert all(isinstance(r, str) and r.strip() for r in reasons)


def test_the_batching_by_length_is_recorded():
    # --group_by_length changes which examples share a batch (and leaves out N mod batch
    # size of them per epoch): a resume with the other value trains another model.
    import run_classifier
    part = run_classifier.Settings(task_name="sst-2", group_by_length=True).part(
        *training_record.SETTINGS)
    assert training_record.of(part)["group_by_length"] is True


def test_a_runners_own_recorded_flag_is_in_its_record():
    # run_ranker's --loss (pointwise or pairwise) is its RECORDED_SETTINGS, not
    # training_record.SETTINGS: the record has it all the same, so a resume with the other
    # loss is told apart.
    import run_ranker
    part = run_ranker.Settings(data_dir="d", loss="pairwise").part(
        *training_record.SETTINGS + run_ranker.RECORDED_SETTINGS)
    assert training_record.of(part)["loss"] == "pairwise"
    assert "loss" not in training_record.SETTINGS
