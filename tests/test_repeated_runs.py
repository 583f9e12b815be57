"""Runs called again and again from Python: the same numbers, memory given back, each
log line once, no retracing warning, no cuInit line (startup.py, training.py)."""
import json
import logging
import os
import pathlib
import subprocess
import sys

import tensorflow as tf

from bert_tf2 import startup
from bert_tf2.trainer import training
from conftest import REPO_ROOT
from conftest import HANG_GUARD_SECONDS
from test_training import classifier_loss, dataset_fn_of, features, make_runner

# One fresh Python process: first thing, predict() on a trained folder (as a notebook or a
# server starts), then two runs of the same Settings (benchmarks/bench_memory.py's task and
# tiny model, with one layer), then one TensorFlow warning; the label predicted, and the
# metrics, predictions and the classifier models still alive go to stdout as JSON.
_TWO_RUNS = """
import gc, json, os, sys
import run_classifier
print("@@ label " + run_classifier.predict(sys.argv[2], ["a fine film"])[0]["label"], flush=True)
sys.path.insert(0, os.path.join(%(root)r, "benchmarks"))
import bench_memory  # (not bench_util: the process starts as a notebook's would)
import tensorflow as tf
from bert_tf2 import heads
work = sys.argv[1]
bench_memory.write_reviews(os.path.join(work, "data"))
files = bench_memory.tiny_model(os.path.join(work, "model"))
with open(files[1], "w") as f:  # one encoder layer: what is checked does not need two
    json.dump(dict(bench_memory.TINY_CONFIG, num_hidden_layers=1), f)
out = {"metrics": [], "predictions": []}
for k in (1, 2):
    result = run_classifier.run(bench_memory.settings_for(work, files, k))
    out["metrics"].append({key: float(v) for key, v in result.metrics.items()})
    with open(result.outputs["test_results"]) as f:
        out["predictions"].append(f.read())
gc.collect()
out["models_alive"] = sum(isinstance(o, heads.BertClassifier) for o in gc.get_objects())
tf.get_logger().warning("a warning after two runs")
print("@@ runs " + json.dumps(out))
"""


def test_two_runs_in_one_process_same_numbers_memory_freed_quiet(tmp_path, trained_classifier):
    env = dict(os.environ)
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    # bench_memory imports bench_util, which starts quietly itself: load it without.
    code = _TWO_RUNS % {"root": str(REPO_ROOT)}
    code = code.replace("import bench_memory  #", "sys.modules['bench_util'] = type(sys)("
                        "'bench_util'); import bench_memory  #")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path),
                           str(trained_classifier.folder)], cwd=str(REPO_ROOT),
                          capture_output=True, text=True, env=env,
                          timeout=HANG_GUARD_SECONDS, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = dict(line[3:].split(" ", 1) for line in proc.stdout.splitlines()
                if line.startswith("@@ "))
    # predict() first thing in the process: a label of the folder's.
    labels = (pathlib.Path(trained_classifier.folder) / "label_list.txt").read_text().split()
    assert said["label"] in labels, said
    out = json.loads(said["runs"])
    # The second run computes exactly what the first did.
    assert out["metrics"][0] == out["metrics"][1]
    assert out["metrics"][0]["global_step"] == 4.0  # 16 examples x 2 epochs / batch 8
    assert out["predictions"][0] == out["predictions"][1]
    assert len(out["predictions"][0].splitlines()) == 8
    # Neither run's model (nor the predictor's, closed) is still in memory (a py_function
    # once held the Runner).
    assert out["models_alive"] == 0
    # Each line once, though absl's first record gave the root logger a handler.
    assert proc.stderr.count("a warning after two runs") == 1, proc.stderr
    assert "retracing" not in proc.stderr
    # No cuInit line: not from predict() as the process's first call, nor from the runs.
    if not startup._has_nvidia_driver():  # pylint: disable=protected-access
        assert "cuInit" not in proc.stderr, proc.stderr


def test_a_function_made_by_every_run_is_not_a_retracing_loop(caplog):
    def make(scale):
        def double(x):
            return x * scale
        return double

    results = []
    with caplog.at_level(logging.WARNING, logger="tensorflow"):
        for k in range(7):  # TensorFlow warns from the fifth trace of one function
            results.append(float(training.run_function(make(float(k)))(tf.constant(2.0))))
    assert results == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0]
    assert not [r for r in caplog.records if "retracing" in r.getMessage()]
    # The same function traced again and again still warns.
    step = training.run_function(lambda x: x + 1)
    with caplog.at_level(logging.WARNING, logger="tensorflow"):
        for n in range(1, 8):
            step(tf.zeros([n]))
    assert [r for r in caplog.records if "retracing" in r.getMessage()]


def test_single_line_filter_drops_only_what_the_root_logger_prints():
    line_filter = startup.SingleLineFilter()
    record = logging.LogRecord("tensorflow", logging.WARNING, __file__, 1, "m", None, None)
    root = logging.getLogger()
    saved = root.handlers[:]
    try:
        root.handlers = []
        assert line_filter.filter(record)  # TensorFlow's handler is the only one
        root.handlers = [logging.NullHandler(logging.ERROR)]
        assert line_filter.filter(record)  # the root's handler would not print a warning
        root.handlers.append(logging.NullHandler(logging.WARNING))
        assert not line_filter.filter(record)
    finally:
        root.handlers = saved


def test_a_second_xla_training_run_in_a_process_warns_once(tmp_path, monkeypatch, caplog):
    # TensorFlow's XLA cache keeps every run's compiled step (no eviction): 49 MiB a run for
    # the 2-layer H 32 model of bench_memory. A process's second --enable_xla training loop
    # says so, once; the first, and a run without XLA between them, say nothing.
    monkeypatch.setitem(training.XLA_TRAINING_LOOPS, "made", 0)
    said = []
    with caplog.at_level(logging.WARNING):
        for k, xla in enumerate((True, False, True, True)):
            runner = make_runner(tmp_path, "run%d" % k, num_train_steps=1, enable_xla=xla,
                                 autograph=False)  # traced as written, as the faces trace
            runner.train(dataset_fn_of(features(4), 4), classifier_loss)
            said.append(sum("--enable_xla: a second training run" in r.getMessage()
                            for r in caplog.records))
    assert said == [0, 0, 1, 1], said
