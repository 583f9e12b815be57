"""bert_tf2.compat.estimator / tpu: a fork's Estimator and TPUEstimator cycle on a tiny model_fn.

Eager execution stays on in this process (other tests need it): every Estimator call builds
its own tf.Graph. The same cycle with disable_v2_behavior(), as a fork that sets it runs
(predict, evaluate, train, evaluate, predict through TPUEstimator, an Estimator), is
test_reference_fork.py's test_a_tiny_fork_trains_evaluates_and_predicts, in its fork process.
"""
import logging
import os
import re
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

from bert_tf2.compat import estimator
from bert_tf2.compat import tpu

v1 = tf.compat.v1
ModeKeys = estimator.ModeKeys

# Ten examples of a linear target: y = x . TRUE_W.
X = (np.arange(30, dtype=np.float32).reshape(10, 3) % 7) / 7.0
TRUE_W = np.array([1.0, -2.0, 0.5], np.float32)
Y = X @ TRUE_W


def _dataset(batch_size, labels=True, repeat=False):
    data = ({"x": X}, Y) if labels else {"x": X}
    dataset = tf.data.Dataset.from_tensor_slices(data).batch(batch_size)
    return dataset.repeat() if repeat else dataset


def train_input_fn():
    """The same first batch every step: a resumed run sees what an uninterrupted one did."""
    return tf.data.Dataset.from_tensors(({"x": X[:4]}, Y[:4])).repeat()


def linear_model_fn(features, labels, mode, params):
    """y = x . w (w from a seeded random start), squared loss, plain SGD."""
    w = v1.get_variable("w", [3], initializer=v1.random_normal_initializer(stddev=0.5))
    pred = tf.reduce_sum(features["x"] * w, axis=-1)
    if mode == ModeKeys.PREDICT:
        return estimator.EstimatorSpec(mode, predictions={"y": pred, "x": features["x"]})
    loss = tf.reduce_mean(tf.square(pred - labels))
    if mode == ModeKeys.EVAL:
        return estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={
            "mae": v1.metrics.mean_absolute_error(labels, pred)})
    train_op = v1.train.GradientDescentOptimizer(params.get("lr", 0.3)).minimize(
        loss, global_step=v1.train.get_global_step())
    return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _estimator(model_dir, **config):
    config.setdefault("tf_random_seed", 7)
    config.setdefault("save_checkpoints_steps", 4)
    return estimator.Estimator(linear_model_fn, model_dir=str(model_dir),
                               config=estimator.RunConfig(**config), params={"lr": 0.3})


def test_train_checkpoints_resume_and_max_steps(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    est = _estimator(tmp_path / "a", keep_checkpoint_max=3, log_step_count_steps=5)
    est.train(train_input_fn, steps=10)
    files = set(os.listdir(est.model_dir))
    assert {"checkpoint", "graph.pbtxt", "model.ckpt-4.index", "model.ckpt-8.index",
            "model.ckpt-10.index"} <= files
    assert "model.ckpt-0.index" not in files    # saved at the start, gone with keep_checkpoint_max=3
    assert est.latest_checkpoint().endswith("model.ckpt-10")
    log = caplog.text
    # TF's LoggingTensorHook reads global_step in the same session.run as the train op that
    # increments it, so the 5th step's line may say 5 or 6 (TensorFlow's Estimator has the
    # same race); what is pinned is that a line comes every 5 steps, with the loss.
    assert "loss = " in log and "global_step/sec: " in log
    assert re.search(r"loss = [0-9.e-]+, step = [56] ", log), log

    est.train(train_input_fn, max_steps=15)      # resumes at 10
    whole = _estimator(tmp_path / "b")
    whole.train(train_input_fn, max_steps=15)
    assert estimator.checkpoint_step(est.latest_checkpoint()) == 15
    np.testing.assert_array_equal(est.get_variable_value("w"), whole.get_variable_value("w"))

    caplog.clear()
    est.train(train_input_fn, max_steps=12)      # already past: returns at once
    assert "Skipping training since max_steps has already saved." in caplog.text
    assert est.latest_checkpoint().endswith("model.ckpt-15")
    assert tf.executing_eagerly()


def test_train_stops_at_the_end_of_the_input(tmp_path):
    est = _estimator(tmp_path)
    est.train(lambda: _dataset(4))               # 10 examples: 3 batches, then the end
    assert est.latest_checkpoint().endswith("model.ckpt-3")


def test_train_writes_its_graph_files_where_protobuf_refuses_float_format(tmp_path, monkeypatch):
    # protobuf 7 removed MessageToString's float_format, which TF 2.20's graph.pbtxt writer
    # passes (issue 53): train() still writes graph.pbtxt and each checkpoint's .meta. A
    # TensorFlow whose writer passes none (the TF 2.21 recipe of docs/install.md, protobuf
    # 7.36) is never refused: the same files either way (issue 91); our own fallback is
    # test_write_graph_text_falls_back_when_the_writer_refuses_float_format's.
    original = text_format.MessageToString
    refused = []

    def protobuf_7(message, **kwargs):
        if "float_format" in kwargs:
            refused.append(type(message).__name__)
            raise TypeError("MessageToString() got an unexpected keyword argument "
                            "'float_format'")
        return original(message, **kwargs)

    plain = _estimator(tmp_path / "plain", keep_checkpoint_max=2)
    plain.train(train_input_fn, steps=4)
    monkeypatch.setattr(text_format, "MessageToString", protobuf_7)
    est = _estimator(tmp_path / "protobuf_7", keep_checkpoint_max=2)
    est.train(train_input_fn, steps=4)
    assert refused in ([], ["GraphDef"])  # TF's own writer was tried (refused if it passes one)
    files = set(os.listdir(est.model_dir))
    assert files - {f for f in files if f.startswith("events.")} == set(
        os.listdir(plain.model_dir)) - {f for f in os.listdir(plain.model_dir)
                                        if f.startswith("events.")}
    assert {"graph.pbtxt", "model.ckpt-0.meta", "model.ckpt-4.meta"} <= files
    graphs = []
    for folder in (plain.model_dir, est.model_dir):
        with open(os.path.join(folder, "graph.pbtxt"), encoding="utf-8") as f:
            graphs.append(text_format.Parse(f.read(), v1.GraphDef()))
    assert [n.name for n in graphs[1].node] == [n.name for n in graphs[0].node]
    assert "w" in {n.name for n in graphs[1].node}
    meta = v1.MetaGraphDef.FromString(
        open(os.path.join(est.model_dir, "model.ckpt-4.meta"), "rb").read())
    assert meta.saver_def.filename_tensor_name and len(meta.graph_def.node) == len(
        graphs[1].node)
    np.testing.assert_array_equal(est.get_variable_value("w"), plain.get_variable_value("w"))


def test_write_graph_text_falls_back_when_the_writer_refuses_float_format(tmp_path,
                                                                          monkeypatch):
    # Our contract whatever TensorFlow and protobuf are installed: a writer refused for its
    # float_format (TF 2.20 with protobuf 7) leaves the same graph as text, parsed back
    # whole; any other TypeError of the writer is not swallowed.
    with tf.Graph().as_default() as graph:
        tf.constant([0.1, 2.5], name="c")
        v1.placeholder(tf.float32, [None, 3], name="x")
    graph_def = graph.as_graph_def(add_shapes=True)

    def refusing(graph_or_def, logdir, name, as_text=True):
        del graph_or_def, logdir, name, as_text
        raise TypeError("MessageToString() got an unexpected keyword argument 'float_format'")

    monkeypatch.setattr(tf.io, "write_graph", refusing)
    path = estimator.write_graph_text(graph_def, str(tmp_path / "out"))
    assert path == str(tmp_path / "out" / "graph.pbtxt")
    assert os.listdir(tmp_path / "out") == ["graph.pbtxt"]  # no temporary left
    with open(path, encoding="utf-8") as f:
        parsed = text_format.Parse(f.read(), v1.GraphDef())
    assert [n.name for n in parsed.node] == ["c", "x"]
    np.testing.assert_array_equal(tf.make_ndarray(parsed.node[0].attr["value"].tensor),
                                  np.array([0.1, 2.5], np.float32))

    def broken(graph_or_def, logdir, name, as_text=True):
        del graph_or_def, logdir, name, as_text
        raise TypeError("something else")

    monkeypatch.setattr(tf.io, "write_graph", broken)
    with pytest.raises(TypeError, match="something else"):
        estimator.write_graph_text(graph_def, str(tmp_path / "other"))


class _CountingHook(v1.train.SessionRunHook):
    def __init__(self):
        self.runs = 0

    def after_run(self, run_context, run_values):
        self.runs += 1


def test_train_and_evaluate_hooks_and_warm_start(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    hook = _CountingHook()
    est = _estimator(tmp_path / "a", save_checkpoints_steps=3)
    result, exports = estimator.train_and_evaluate(
        est, estimator.TrainSpec(train_input_fn, max_steps=7, hooks=[hook]),
        estimator.EvalSpec(lambda: _dataset(4), steps=None, throttle_secs=0))
    assert hook.runs == 7 and exports == []
    assert result["global_step"] == 7 and set(result) == {"global_step", "loss", "mae"}
    # An evaluation after each save past the first (3, 6) and one of the last step (7).
    evaluated = re.findall(r"Saving dict for global step (\d+)", caplog.text)
    assert evaluated == ["3", "6", "7"]
    warm = estimator.Estimator(linear_model_fn, str(tmp_path / "b"), params={"lr": 0.0},
                               warm_start_from=est.latest_checkpoint())
    warm.train(train_input_fn, steps=1)      # lr 0: the warm-started values, unchanged
    np.testing.assert_array_equal(warm.get_variable_value("w"), est.get_variable_value("w"))
    assert "global_step" in warm.get_variable_names()


def test_evaluate_and_predict(tmp_path):
    est = _estimator(tmp_path)
    est.train(train_input_fn, steps=6)
    w = est.get_variable_value("w")
    pred = X @ w
    results = est.evaluate(lambda: _dataset(4))
    assert sorted(results) == ["global_step", "loss", "mae"]
    assert results["global_step"] == 6
    np.testing.assert_allclose(results["mae"], np.mean(np.abs(pred - Y)), rtol=1e-5)
    # The loss is the mean of the batches' losses (4, 4 and 2 examples), as TF 1.x's.
    batch_losses = [np.mean((pred[i:i + 4] - Y[i:i + 4]) ** 2) for i in (0, 4, 8)]
    np.testing.assert_allclose(results["loss"], np.mean(batch_losses), rtol=1e-5)
    assert os.listdir(os.path.join(est.model_dir, "eval"))    # summaries

    first = est.evaluate(lambda: _dataset(4), steps=1, name="one",
                         checkpoint_path=os.path.join(str(tmp_path), "model.ckpt-4"))
    assert first["global_step"] == 4 and os.path.isdir(os.path.join(est.model_dir, "eval_one"))

    items = list(est.predict(lambda: _dataset(4, labels=False)))
    assert len(items) == 10 and sorted(items[0]) == ["x", "y"]
    np.testing.assert_allclose([item["y"] for item in items], pred, rtol=1e-5)
    np.testing.assert_array_equal(items[9]["x"], X[9])
    batches = list(est.predict(lambda: _dataset(4), predict_keys=["y"],
                               yield_single_examples=False))
    assert [sorted(b) for b in batches] == [["y"]] * 3 and len(batches[2]["y"]) == 2
    assert tf.executing_eagerly()


def test_predict_of_one_tensor_and_input_fn_arguments(tmp_path):
    seen = []

    def input_fn(mode, config):
        seen.append((mode, config.model_dir))
        return _dataset(3, labels=False)

    def model_fn(features, mode):
        w = v1.get_variable("w", [3], initializer=v1.ones_initializer())
        return estimator.EstimatorSpec(mode, predictions=tf.reduce_sum(features["x"] * w, -1))

    est = estimator.Estimator(model_fn, model_dir=str(tmp_path))
    values = list(est.predict(input_fn))      # no checkpoint: initialized, as TF 1.x
    np.testing.assert_allclose(values, X.sum(axis=1), rtol=1e-6)  # sums of 3: no blocking
    assert seen == [(ModeKeys.PREDICT, str(tmp_path))]


def test_errors_are_one_line(tmp_path):
    est = _estimator(tmp_path)
    with pytest.raises(ValueError, match=r"checkpoint_path=.*nowhere: no checkpoint there"):
        est.evaluate(lambda: _dataset(4), checkpoint_path=str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match="no checkpoint in model_dir"):
        est.get_variable_value("w")
    with pytest.raises(ValueError, match="steps or max_steps, not both"):
        est.train(train_input_fn, steps=1, max_steps=2)
    with pytest.raises(ValueError, match="model_fn takes no labels argument"):
        estimator.Estimator(lambda features, mode: None, str(tmp_path)).train(
            train_input_fn, steps=1)
    with pytest.raises(ValueError, match=r"train_distribute=.*--distribution_strategy=mirrored"):
        estimator.Estimator(linear_model_fn, config=estimator.RunConfig(
            train_distribute=tf.distribute.OneDeviceStrategy("/cpu:0")))
    resolver = type("Resolver", (), {"master": lambda self: "grpc://10.0.0.2:8470"})()
    for config, named in ((tpu.RunConfig(cluster=resolver), "grpc://10.0.0.2:8470"),
                          (tpu.RunConfig(master="grpc://10.0.0.3:8470"), "grpc://10.0.0.3:8470"),
                          (tpu.RunConfig(), "TPUEstimator(use_tpu=True): ")):
        with pytest.raises(ValueError) as error:
            tpu.TPUEstimator(model_fn=linear_model_fn, config=config, use_tpu=True,
                             train_batch_size=4)
        message = str(error.value)
        assert "\n" not in message and named in message
        assert "run_classifier.py" in message and "tf.distribute" in message
    with pytest.raises(NotImplementedError, match="export_saved_model.py"):
        est.export_saved_model(str(tmp_path / "export"), lambda: None)
    with pytest.raises(AttributeError, match="tf.estimator.DNNClassifier is not in"):
        estimator.DNNClassifier
    with pytest.raises(AttributeError, match="tf.contrib.tpu.bfloat16_scope is not in"):
        tpu.bfloat16_scope


def _tpu_model_fn(calls, init_checkpoint=None):
    def model_fn(features, labels, mode, params):
        calls.append(("model_fn", mode, params["batch_size"], params["use_tpu"]))
        w = v1.get_variable("w", [3], initializer=v1.zeros_initializer())
        scaffold_fn = None
        if init_checkpoint:
            def scaffold_fn():
                v1.train.init_from_checkpoint(init_checkpoint, {"w": "w"})
                return v1.train.Scaffold()
        pred = tf.reduce_sum(features["x"] * w, axis=-1)
        if mode == ModeKeys.PREDICT:
            return tpu.TPUEstimatorSpec(mode, predictions={"y": pred}, scaffold_fn=scaffold_fn)
        per_example = tf.square(pred - labels)
        loss = tf.reduce_mean(per_example)
        if mode == ModeKeys.EVAL:
            def metric_fn(per_example_loss, label_values, predictions):
                return {"eval_loss": v1.metrics.mean(per_example_loss),
                        "eval_mae": v1.metrics.mean_absolute_error(label_values, predictions)}
            return tpu.TPUEstimatorSpec(mode, loss=loss, scaffold_fn=scaffold_fn,
                                        eval_metrics=(metric_fn, [per_example, labels, pred]))
        optimizer = tpu.CrossShardOptimizer(v1.train.GradientDescentOptimizer(0.1))
        train_op = optimizer.minimize(loss, global_step=v1.train.get_global_step())
        return tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op, scaffold_fn=scaffold_fn)
    return model_fn


def _tpu_input_fn(calls, labels=True):
    def input_fn(params):
        calls.append(("input_fn", params["batch_size"]))
        return _dataset(params["batch_size"], labels=labels)
    return input_fn


def test_tpu_estimator_batch_sizes_metric_fn_and_scaffold_fn(tmp_path):
    start = str(tmp_path / "start" / "model.ckpt")
    with tf.Graph().as_default():
        v1.get_variable("w", initializer=TRUE_W)
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            v1.train.Saver().save(session, start)
    calls = []
    config = tpu.RunConfig(
        cluster=None, master=None, model_dir=str(tmp_path / "out"), save_checkpoints_steps=2,
        tpu_config=tpu.TPUConfig(iterations_per_loop=2, num_shards=8,
                                 per_host_input_for_training=tpu.InputPipelineConfig.PER_HOST_V2))
    est = tpu.TPUEstimator(use_tpu=False, model_fn=_tpu_model_fn(calls, start), config=config,
                           train_batch_size=4, eval_batch_size=5, predict_batch_size=3)
    # No checkpoint in model_dir yet: prediction initializes, and scaffold_fn's
    # init_from_checkpoint loads TRUE_W.
    items = list(est.predict(_tpu_input_fn(calls, labels=False)))
    np.testing.assert_allclose([item["y"] for item in items], Y, rtol=1e-6)  # sums of 3
    results = est.evaluate(_tpu_input_fn(calls))
    assert results["eval_loss"] < 1e-10 and results["eval_mae"] < 1e-6
    assert results["global_step"] == 0
    est.train(_tpu_input_fn(calls), max_steps=2)
    assert est.latest_checkpoint().endswith("model.ckpt-2")
    np.testing.assert_allclose(est.get_variable_value("w"), TRUE_W, atol=1e-6)   # zero gradient
    assert calls == [("input_fn", 3), ("model_fn", ModeKeys.PREDICT, 3, False),
                     ("input_fn", 5), ("model_fn", ModeKeys.EVAL, 5, False),
                     ("input_fn", 4), ("model_fn", ModeKeys.TRAIN, 4, False)]
    assert est.params == {}


def _stops(hook):
    return hook._should_stop()  # the predicate TF 1.15's hook asks after a step


def test_early_stopping_rules_read_the_evaluations(tmp_path):
    est = _estimator(tmp_path)
    for step, acc in ((1, 0.5), (2, 0.625), (4, 0.625), (5, 0.5625)):
        estimator._write_summaries(est.eval_dir(), {"global_step": step, "acc": acc})
    exp = estimator.experimental
    assert list(estimator.read_eval_metrics(est.eval_dir())) == [1, 2, 4, 5]
    # Highest at step 2 (step 4 only ties it): 5 - 2 = 3 steps without an increase.
    assert _stops(exp.stop_if_no_increase_hook(est, "acc", 3)) is True
    assert _stops(exp.stop_if_no_increase_hook(est, "acc", 4)) is False
    # From min_steps=3 on the best is step 4: 1 step.
    assert _stops(exp.stop_if_no_increase_hook(est, "acc", 3, min_steps=3)) is False
    # Lowest at step 1: step 4 is 3 steps after it.
    assert _stops(exp.stop_if_no_decrease_hook(est, "acc", 3)) is True
    assert _stops(exp.stop_if_no_decrease_hook(est, "acc", 3, min_steps=2)) is False
    # Thresholds are strict (values a float32 summary holds exactly).
    assert _stops(exp.stop_if_higher_hook(est, "acc", 0.6)) is True
    assert _stops(exp.stop_if_higher_hook(est, "acc", 0.625)) is False
    assert _stops(exp.stop_if_higher_hook(est, "acc", 0.6, min_steps=5)) is False
    assert _stops(exp.stop_if_lower_hook(est, "acc", 0.5)) is False
    assert _stops(exp.stop_if_lower_hook(est, "acc", 0.51)) is True
    # tf.contrib.estimator's are the same functions.
    from bert_tf2.compat import contrib
    assert contrib.estimator.stop_if_no_decrease_hook is exp.stop_if_no_decrease_hook
    with pytest.raises(ValueError, match=r"has no metric 'f1' \(it has acc\)"):
        _stops(exp.stop_if_higher_hook(est, "f1", 0.5))
    with pytest.raises(ValueError, match="give exactly one of run_every_secs=60"):
        exp.stop_if_higher_hook(est, "acc", 0.5, run_every_steps=2)


def test_a_hook_that_sees_no_improvement_stops_train_and_evaluate(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    est = estimator.Estimator(linear_model_fn, model_dir=str(tmp_path), params={"lr": 0.0},
                              config=estimator.RunConfig(tf_random_seed=7,
                                                         save_checkpoints_steps=4))
    hook = estimator.experimental.stop_if_no_decrease_hook(
        est, "mae", 8, run_every_secs=None, run_every_steps=1)
    result, _ = estimator.train_and_evaluate(
        est, estimator.TrainSpec(train_input_fn, max_steps=100, hooks=[hook]),
        estimator.EvalSpec(lambda: _dataset(4), steps=None, throttle_secs=0))
    # lr 0: the same mae at steps 4, 8, 12; the hook runs after the step that saved 12 (it
    # fetched the step before it, 11, as TF's did) and stops there: 12 - 4 >= 8.
    assert re.findall(r"Saving dict for global step (\d+)", caplog.text) == ["4", "8", "12"]
    assert "No decrease in metric 'mae' for 8 steps (at least 8): early stopping" in caplog.text
    assert "Requesting early stopping at global step 11" in caplog.text
    assert result["global_step"] == 12



def _runs_before(first, op):
    """Whether graph op `first` is among `op`'s inputs or control inputs, transitively."""
    stack, visited = [op], set()
    while stack:
        current = stack.pop()
        if current is first:
            return True
        if current.name in visited:
            continue
        visited.add(current.name)
        stack.extend(t.op for t in current.inputs)
        stack.extend(current.control_inputs)
    return False


class _StepsSeen(estimator.GlobalStepHook):
    """Records the step each training run fetched, and the graph's step increments."""

    def __init__(self):
        self.seen = []
        self.increments = []
        self.read = None

    def begin(self):
        super().begin()
        step = v1.train.get_global_step()
        self.read = self._global_step   # the tensor each run fetches
        self.increments = [op for op in tf.compat.v1.get_default_graph().get_operations()
                           if op.type == "AssignAddVariableOp" and op.inputs[0] is step.handle]

    def after_run(self, run_context, run_values):
        self.seen.append(int(run_values.results))


def test_a_hook_sees_each_steps_value_before_its_update(tmp_path):
    # A bare read of the step variable in the training run races with the step's own
    # increment (a loaded CI machine saw a step twice, and an early-stopping hook missed
    # the evaluation it had to see): the graph orders the read first, as TF 1.x's did.
    est = estimator.Estimator(linear_model_fn, model_dir=str(tmp_path), params={"lr": 0.0},
                              config=estimator.RunConfig(tf_random_seed=7,
                                                         save_checkpoints_steps=None,
                                                         save_checkpoints_secs=None))
    seen = _StepsSeen()
    est.train(train_input_fn, max_steps=50, hooks=[seen])
    assert seen.seen == list(range(50))
    assert seen.increments   # the optimizer's global_step += 1
    # A variable fetched reads it wherever the run schedules the read: a tensor ordered first.
    assert isinstance(seen.read, tf.Tensor)
    assert all(_runs_before(seen.read.op, op) for op in seen.increments)
