"""A fork's get_assignment_map_from_checkpoint / tf.train.init_from_checkpoint on a TF2
checkpoint our trainer wrote (bert_tf2/compat/fork_checkpoints.py), in a subprocess."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from bert_tf2.trainer import checkpoints
from conftest import REPO_ROOT
from conftest import HANG_GUARD_SECONDS
from test_training import classifier_loss, dataset_fn_of, features, make_runner

SCRIPT = os.path.join(str(REPO_ROOT), "tests", "fork_checkpoint_graph.py")


@pytest.fixture(scope="module")
def fork_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fork")
    runner = make_runner(folder, "ck", num_train_steps=2)
    runner.train(dataset_fn_of(features(8), 4), classifier_loss)
    latest = checkpoints.latest_checkpoint(str(folder / "ck"))
    assert checkpoints.is_tf2_checkpoint(latest)
    out = str(folder / "found.json")
    proc = subprocess.run([sys.executable, SCRIPT, str(REPO_ROOT), latest, out],
                          capture_output=True, text=True, timeout=HANG_GUARD_SECONDS, check=False,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out, encoding="utf-8") as f:
        found = json.load(f)
    want = {name: float(np.abs(var.numpy()).sum())
            for name, var in checkpoints.tf1_variable_map(runner.model).items()}
    return found, want, latest


def test_every_variable_is_mapped_and_loaded_by_name(fork_run):
    found, want, _ = fork_run
    assert found["mapped"] == found["graph"] == len(want) == 25
    # Listed like a TF1 checkpoint: model weights, Adam slots and the step.
    assert "output_weights" in found["listed"] and "global_step" in found["listed"]
    assert "bert/pooler/dense/kernel/adam_m" in found["listed"]
    assert found["initialized"] == sorted(list(want) + [n + ":0" for n in want])
    for loaded in ("by_name", "by_tensorflow"):
        assert found[loaded].keys() == want.keys()
        for name, total in want.items():
            assert total > 0
            assert found[loaded][name] == pytest.approx(total, rel=1e-6), (loaded, name)
    assert found["load_variable"] == pytest.approx(want["output_weights"], rel=1e-6)


def test_a_scope_entry_maps_every_graph_variable_under_it(fork_run):
    found, want, _ = fork_run
    bert = {n: t for n, t in want.items() if n.startswith("bert/")}
    assert found["by_scope"].keys() == bert.keys() and len(bert) == 23
    for name, total in bert.items():
        assert found["by_scope"][name] == pytest.approx(total, rel=1e-6), name


def test_a_name_the_checkpoint_lacks_is_one_line_naming_the_converter(fork_run):
    found, _, latest = fork_run
    assert found["error"].startswith(
        "tf.train.init_from_checkpoint: %s (a TF2 checkpoint of bert-tf2) holds no variable "
        "bert/no/such/kernel; " % latest)
    assert "convert_tf1_checkpoint.py --direction=tf2_to_tf1" in found["error"]
    assert "\n" not in found["error"]
