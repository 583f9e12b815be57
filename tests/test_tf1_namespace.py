"""`import bert_tf2.tf1 as tf` (bert_tf2/tf1.py) and the move_fork tool.

The namespace switches its process to TF1 graph mode, so it is checked in one subprocess
(tests/tf1_namespace_graph.py) and this process stays eager for the other tests.
"""
import json
import os
import subprocess
import sys

import pytest

from bert_tf2.compat import move_fork
from conftest import REPO_ROOT
from conftest import HANG_GUARD_SECONDS

SCRIPT = os.path.join(str(REPO_ROOT), "tests", "tf1_namespace_graph.py")


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    """The JSON tf1_namespace_graph.py writes, and its stderr."""
    out = str(tmp_path_factory.mktemp("tf1") / "found.json")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run([sys.executable, SCRIPT, str(REPO_ROOT), out], capture_output=True,
                          text=True, env=env, timeout=HANG_GUARD_SECONDS, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out, encoding="utf-8") as f:
        found = json.load(f)
    found["stderr"] = proc.stderr
    return found


@pytest.mark.slow
def test_the_import_runs_graph_mode_and_says_so_once(graph):
    assert graph["eager"] is False
    lines = [line for line in graph["stderr"].splitlines() if "bert_tf2.tf1:" in line]
    assert len(lines) == 1 and "graph mode" in lines[0]
    # TensorFlow's own three-line notice about disable_v2_behavior is not printed.
    assert "non-resource variables" not in graph["stderr"]
    # Nor tf_keras's "`tf.layers.dense` is deprecated" for every line that calls it.
    assert "`tf.layers." not in graph["stderr"]


@pytest.mark.slow
def test_every_name_the_reference_uses_is_there(graph):
    assert graph["unresolved"] == {}


@pytest.mark.slow
def test_tf_layers_and_rnn_cells_have_tf1_names(graph):
    assert graph["variables"] == [
        "dense/kernel:0", "dense/bias:0", "dense_1/kernel:0", "dense_1/bias:0",
        "head/output/kernel:0", "head/output/bias:0", "conv1d/kernel:0", "conv1d/bias:0",
        "rnn/multi_rnn_cell/cell_0/lstm_cell/kernel:0",
        "rnn/multi_rnn_cell/cell_0/lstm_cell/bias:0",
        "rnn/multi_rnn_cell/cell_1/gru_cell/gates/kernel:0",
        "rnn/multi_rnn_cell/cell_1/gru_cell/gates/bias:0",
        "rnn/multi_rnn_cell/cell_1/gru_cell/candidate/kernel:0",
        "rnn/multi_rnn_cell/cell_1/gru_cell/candidate/bias:0"]
    assert graph["rnn_output_shape"] == [2, 5, 3]


@pytest.mark.slow
def test_the_lazy_pieces_are_there_or_name_their_module(graph):
    # tf.estimator, tf.contrib.tpu and tf.contrib.crf come from modules of their own: a copy
    # without them says which module is missing, in one line.
    for name, module in (("estimator", "bert_tf2.compat.estimator"),
                         ("contrib.tpu", "bert_tf2.compat.tpu"),
                         ("contrib.crf", "bert_tf2.base.crf")):
        error = graph[name]
        if error is not None:
            assert error.startswith("RemovedSymbolError: tf.%s is not in bert_tf2.tf1" % name)
            assert module in error and "\n" not in error


@pytest.mark.slow
def test_what_tf2_removed_is_one_line_naming_the_replacement(graph):
    missing = graph["missing"]
    assert missing["contrib.slim"] == (
        "RemovedSymbolError: tf.contrib.slim is not in bert_tf2.tf1 (TensorFlow 2 removed "
        "it): use pip install tf-slim and `import tf_slim as slim`")
    assert "tf.layers.batch_normalization" in missing["contrib.layers.batch_norm"]
    assert "tf.global_variables" in missing["contrib.framework"]
    assert missing["foo"].startswith("RemovedSymbolError: tf.foo is not in bert_tf2.tf1")
    assert all("\n" not in m for m in missing.values())
    assert graph["hasattr_contrib_learn"] is False


@pytest.mark.slow
def test_removed_cells_name_what_to_use_and_tf_app_run_logs_once(graph):
    cells = graph["removed_cells"]
    assert cells["contrib.crf.CrfForwardRnnCell"] == (
        "RemovedSymbolError: tf.contrib.crf.CrfForwardRnnCell is not in bert_tf2.tf1 "
        "(TensorFlow 2 removed it): use crf_log_norm (tf.contrib.crf), which runs the forward "
        "algorithm itself")
    assert cells["contrib.rnn.LayerNormBasicLSTMCell"].startswith(
        "RemovedSymbolError: tf.contrib.rnn.LayerNormBasicLSTMCell is not in bert_tf2.tf1 "
        "(TensorFlow 2 removed it): use tf_keras.layers' RNN cells")
    assert cells["nn.rnn_cell.LayerNormBasicLSTMCell"].startswith(
        "RemovedSymbolError: tf.nn.rnn_cell.LayerNormBasicLSTMCell is not in bert_tf2.tf1 "
        "(TensorFlow 2 removed it): use the TF1 cells tf.nn.rnn_cell has (LSTMCell, ")
    assert graph["crf_decode"] is None
    assert graph["stderr"].count("logged once under tf.app.run") == 1


@pytest.mark.slow
def test_a_runner_in_a_graph_mode_process_is_one_line_and_makes_nothing(graph):
    assert graph["runner_error"] == (
        "RuntimeError: run_classifier.run: this process runs TensorFlow 1 graph mode "
        "(bert_tf2.tf1 was imported, or tf.compat.v1.disable_v2_behavior / "
        "disable_eager_execution called), and bert-tf2's runners need TensorFlow 2's eager "
        "mode: run them in a process of their own (python run_classifier.py ...); nothing "
        "was done")
    assert graph["runner_folder_made"] is False


FORK = (b"import os\n"
        b"import tensorflow as tf\r\n"
        b"  import tensorflow as tf  # indented\n"
        b"from tensorflow.contrib import layers, rnn as r\n"
        b"from tensorflow.contrib.layers.python.layers import initializers\n"
        b"from tensorflow.contrib.rnn import LSTMCell\n"
        b"import tensorflow as tfx\n"
        b"from tensorflow.contrib import slim\n")


def _fork(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "model.py").write_bytes(FORK)
    (tmp_path / "sub" / "data.py").write_bytes(b"x = 1\n")
    (tmp_path / "notes.txt").write_bytes(b"import tensorflow as tf\n")
    return tmp_path


def test_move_fork_changes_the_import_lines_in_place(tmp_path):
    folder = _fork(tmp_path)
    lines = []
    assert move_fork.move_fork(str(folder), report=lines.append) == [str(folder / "model.py")]
    assert (folder / "model.py").read_bytes() == (
        b"import os\n"
        b"import bert_tf2.tf1 as tf\r\n"
        b"  import bert_tf2.tf1 as tf  # indented\n"
        b"from bert_tf2.compat.contrib import layers, rnn as r\n"
        b"from bert_tf2.compat.contrib import layers as initializers\n"
        b"from tensorflow.contrib.rnn import LSTMCell\n"
        b"import tensorflow as tfx\n"
        b"from bert_tf2.compat.contrib import slim\n")
    model = folder / "model.py"
    assert lines == [
        "%s:6: left as it was (change it by hand): from tensorflow.contrib.rnn import "
        "LSTMCell" % model,
        "%s:7: left as it was (change it by hand): import tensorflow as tfx" % model,
        "%s:8: tf.contrib.slim is not in bert_tf2.tf1 (TensorFlow 2 removed it): use pip "
        "install tf-slim and `import tf_slim as slim`" % model,
        "changed %s" % model]
    assert (folder / "notes.txt").read_bytes() == b"import tensorflow as tf\n"
    assert move_fork.move_fork(str(folder), report=lines.append) == []


def test_move_fork_dry_run_changes_nothing(tmp_path, capsys):
    folder = _fork(tmp_path)
    assert move_fork.main([str(folder), "--dry_run"]) == 0
    assert "would change %s" % (folder / "model.py") in capsys.readouterr().out
    assert (folder / "model.py").read_bytes() == FORK
    assert move_fork.main([str(folder / "nowhere")]) == 1
    assert capsys.readouterr().err.strip() == "move_fork: %s is not a folder" % (
        folder / "nowhere")
