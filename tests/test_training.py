"""training.py: strategy and precision from flags, accumulation, XLA, fp16, predict order."""
import logging
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

import modeling
from bert_tf2 import flags_common
from bert_tf2 import heads
from bert_tf2.trainer import checkpoints
from bert_tf2.trainer import training
from conftest import FP32_ATOL
from conftest import HANG_GUARD_SECONDS


def tiny_config():
    return modeling.BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
                               num_attention_heads=2, intermediate_size=16,
                               max_position_embeddings=16, type_vocab_size=2,
                               hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def features(n=8, seq=6, seed=0):
    rng = np.random.RandomState(seed)
    return {"input_ids": rng.randint(0, 30, [n, seq]).astype(np.int32),
            "input_mask": np.ones([n, seq], np.int32),
            "segment_ids": np.zeros([n, seq], np.int32),
            "label_ids": rng.randint(0, 2, [n]).astype(np.int32)}


def dataset_fn_of(data, batch_size):
    def dataset_fn(ctx=None):
        per_replica = ctx.get_per_replica_batch_size(batch_size) if ctx else batch_size
        return tf.data.Dataset.from_tensor_slices(data).batch(per_replica,
                                                               drop_remainder=True).repeat()
    return dataset_fn


def classifier_loss(model, feats, is_training):
    # training=False: no dropout, so runs that differ only in batching agree exactly.
    logits = model(feats, training=False)["logits"]
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=feats["label_ids"], logits=logits))
    return loss, {}


def make_runner(tmp_path, name, init_from=None, **cfg):
    config = training.RunConfig(output_dir=str(tmp_path / name), learning_rate=1e-2,
                                num_train_steps=cfg.pop("num_train_steps", 1),
                                num_warmup_steps=0, **cfg)
    runner = training.Runner(tf.distribute.get_strategy(),
                             lambda: heads.BertClassifier(tiny_config(), 2), config)
    if init_from is not None:
        for a, b in zip(runner.model.variables, init_from.model.variables):
            a.assign(b)
    return runner


def first_moments(runner):
    opt = getattr(runner.optimizer, "inner_optimizer", runner.optimizer)
    return [opt.get_slot(v, "adam_m").numpy() for v in runner.model.trainable_variables]


def test_default_strategy_on_cpu_is_one_device():
    fv = flags_common.parse_flags(flags_common.define_training_flags, [])
    assert isinstance(training.get_strategy(fv), tf.distribute.OneDeviceStrategy)


def test_strategy_flag_errors():
    fv = flags_common.parse_flags(flags_common.define_training_flags,
                                  ["--use_tpu", "--distribution_strategy=mirrored"])
    with pytest.raises(ValueError, match="use_tpu"):
        training.get_strategy(fv)
    fv = flags_common.parse_flags(flags_common.define_training_flags, ["--num_gpus=4"])
    with pytest.raises(ValueError, match="num_gpus"):
        training.get_strategy(fv)
    with pytest.raises(ValueError, match="dtype"):
        training.configure_precision("fp8")


@pytest.mark.parametrize("optimizer_type", ["lamb"])
def test_fused_optimizer_steps_like_the_op_by_op_one_and_resumes(tmp_path, optimizer_type):
    # The runner clips inside the optimizer: fused (default) and --nofused_optimizer
    # (the op-by-op update; tf-models-official's own LAMB class for lamb) take the same
    # steps, and both reload their slots from output_dir. adamw (the default):
    # test_xla_checkpointing_accumulation_and_autograph_off_take_the_plain_steps.
    data = features(8, seed=5)
    kw = dict(num_train_steps=3, optimizer_type=optimizer_type)
    fused = make_runner(tmp_path, "fused", **kw)
    plain = make_runner(tmp_path, "plain", init_from=fused, fused_optimizer=False, **kw)
    assert fused.optimizer.fused and getattr(plain.optimizer, "fused", False) is False
    fused.train(dataset_fn_of(data, 4), classifier_loss)
    plain.train(dataset_fn_of(data, 4), classifier_loss)
    for a, b in zip(fused.model.trainable_variables, plain.model.trainable_variables):
        # Fused vs op-by-op update: other kernels, float32's bound.
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=FP32_ATOL, err_msg=a.name)
    for name, runner in (("fused", fused), ("plain", plain)):
        again = make_runner(tmp_path, name, fused_optimizer=name == "fused", **kw)
        assert again.global_step == 3
        slot = "adam_m" if optimizer_type == "adamw" else "m"
        for v, w in zip(runner.model.trainable_variables, again.model.trainable_variables):
            np.testing.assert_array_equal(
                runner.optimizer.get_slot(v, slot).numpy(),
                again.optimizer.get_slot(w, slot).numpy())


def test_the_faces_runners_trace_without_autograph(tmp_path):
    import run_classifier  # pylint: disable=import-outside-toplevel
    fv = flags_common.parse_flags(run_classifier.define_flags,
                                  ["--output_dir=%s" % (tmp_path / "out")])
    runner = training.make_runner(fv, lambda: heads.BertClassifier(tiny_config(), 2))
    assert runner.config.autograph is False
    assert training.RunConfig(output_dir="x").autograph is True  # a Python caller's Runner
    with pytest.raises(ValueError, match="RunConfig.autograph must be True or False, got 'no'"):
        training.RunConfig(output_dir="x", autograph="no").validate()


def test_xla_checkpointing_accumulation_and_autograph_off_take_the_plain_steps(tmp_path):
    # One plain run (batches of 4) and, from its initial weights on the same data: XLA
    # with gradient checkpointing, 2 accumulated micro-batches of 2, a trace without
    # AutoGraph, and the op-by-op adamw update (--nofused_optimizer) (one plain run for
    # all, not one each). Each alone is held to the plain step elsewhere: XLA alone by
    # test_xla_step_with_dropout_on_trimmed_batches_is_the_plain_step (loss and Adam
    # moments; its resume bit for bit); gradient checkpointing without XLA by
    # test_dynamic_padding's test_trimmed_training_steps_equal_padded
    # [recompute_accumulation2] (weights after 3 steps to 1e-5).
    data = features(8, seed=5)
    plain = make_runner(tmp_path, "plain", num_train_steps=2)
    others = {name: make_runner(tmp_path, name, init_from=plain, num_train_steps=2, **cfg)
              for name, cfg in (("ckpt_xla", dict(gradient_checkpointing=True,
                                                  enable_xla=True)),
                                ("acc", dict(num_accumulation_steps=2)),
                                ("as_written", dict(autograph=False)),
                                ("op_by_op", dict(fused_optimizer=False)))}
    assert plain.optimizer.fused
    assert getattr(others["op_by_op"].optimizer, "fused", False) is False
    assert not plain.model.bert.encoder.gradient_checkpointing
    assert others["ckpt_xla"].model.bert.encoder.gradient_checkpointing
    for runner in [plain] + list(others.values()):
        runner.model.dropout.rate = 0.0  # the classifier's own 0.1; the config has none

    def loss_fn(model, feats, is_training):
        # training=True runs the recomputed path; the config has no dropout.
        logits = model(feats, training=True)["logits"]
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=feats["label_ids"], logits=logits)), {}

    def branching_loss(model, feats, is_training):
        loss, metrics = loss_fn(model, feats, is_training)
        if loss > 100.0:  # a Python `if` on a tensor: AutoGraph makes it a tf.cond
            loss = loss / 2.0
        return loss, metrics

    m1 = plain.train(dataset_fn_of(data, 4), loss_fn)
    losses = {}
    for name, runner in others.items():
        # The faces' runners trace without AutoGraph (RunConfig.autograph=False); a
        # Python caller's loss that branches in Python on a tensor needs AutoGraph, a
        # Runner's default (the XLA run's loss branches so).
        losses[name] = runner.train(dataset_fn_of(data, 2 if name == "acc" else 4),
                                    branching_loss if name == "ckpt_xla" else loss_fn)["loss"]
        assert runner.global_step == 2, name
        assert np.isclose(m1["loss"], losses[name], atol=FP32_ATOL), name  # XLA's kernels
    # Without AutoGraph: the same trace, bit for bit.
    assert losses["as_written"] == m1["loss"]
    for a, b in zip(first_moments(plain), first_moments(others["as_written"])):
        np.testing.assert_array_equal(a, b)
    # The Adam moments sum the steps' gradients: summed micro-batches instead of their
    # mean, or a missed one, would move them by their own size (~1e-2 here).
    for name in ("ckpt_xla", "acc"):
        for a, b in zip(first_moments(plain), first_moments(others[name])):
            np.testing.assert_allclose(a, b, atol=FP32_ATOL, err_msg=name)
    # Weights after 2 Adam steps: m / sqrt(v) scales float32 rounding of the
    # recomputed (and, with XLA, fused) forward, or of two batches of 2 instead of one
    # of 4, up to ~1e-6; a dropout or recompute mismatch moves them by about the
    # learning rate (1e-2 here).
    for name in ("ckpt_xla", "acc"):
        for a, b in zip(plain.model.trainable_variables,
                        others[name].model.trainable_variables):
            np.testing.assert_allclose(a.numpy(), b.numpy(), atol=5e-6, err_msg=name)
    # Fused vs op-by-op update: other kernels, float32's bound. Both reload their slots
    # from output_dir.
    for a, b in zip(plain.model.trainable_variables,
                    others["op_by_op"].model.trainable_variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=FP32_ATOL, err_msg=a.name)
    for name, runner in (("plain", plain), ("op_by_op", others["op_by_op"])):
        again = make_runner(tmp_path, name, num_train_steps=2,
                            fused_optimizer=name == "plain")
        assert again.global_step == 2
        for v, w in zip(runner.model.trainable_variables, again.model.trainable_variables):
            np.testing.assert_array_equal(runner.optimizer.get_slot(v, "adam_m").numpy(),
                                          again.optimizer.get_slot(w, "adam_m").numpy())
    as_written = make_runner(tmp_path, "branching_off", num_train_steps=1, autograph=False)
    with pytest.raises(Exception, match="(?i)python bool|autograph"):
        as_written.train(dataset_fn_of(data, 4), branching_loss)


def test_xla_step_with_dropout_on_trimmed_batches_is_the_plain_step(tmp_path):
    # Batches of other lengths (as --trim_padding makes them) through a model with
    # dropout: the compiled step draws its masks with a length XLA must know while
    # compiling. With the step seeds of --deterministic_data both runs drop the same
    # units, so the losses and the update agree to float32's bound. The XLA run resumed
    # from its step-1 checkpoint ends with its weights bit for bit (the same data and
    # masks; without XLA: test_deterministic_data_resume_ends_with_the_uninterrupted_weights).
    rows = []
    for length in (6, 6, 6, 6, 3, 3, 3, 3):
        row = features(1, seq=length, seed=length)
        rows.append({k: v[0] for k, v in row.items()})

    def dataset_fn(ctx=None):
        d = tf.data.Dataset.from_generator(
            lambda: iter(rows), output_signature={
                k: tf.TensorSpec([None] if k != "label_ids" else [], tf.int32)
                for k in rows[0]})
        return d.padded_batch(4, drop_remainder=True).repeat()

    def dropout_loss(model, feats, is_training):
        logits = model(feats, training=True)["logits"]
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=feats["label_ids"], logits=logits)), {}

    config_with_dropout = tiny_config()
    config_with_dropout.hidden_dropout_prob = 0.3
    config_with_dropout.attention_probs_dropout_prob = 0.3

    def runner(name, xla):
        run_config = training.RunConfig(
            output_dir=str(tmp_path / name), learning_rate=1e-2, num_warmup_steps=0,
            enable_xla=xla, num_train_steps=2, deterministic_data=True, seed=3,
            iterations_per_loop=1, save_checkpoints_steps=1 if xla else 1000)
        return training.Runner(tf.distribute.get_strategy(),
                               lambda: heads.BertClassifier(config_with_dropout, 2), run_config)
    plain, xla = runner("plain", False), runner("xla", True)
    for a, b in zip(xla.model.variables, plain.model.variables):
        a.assign(b)
    losses = [r.train(dataset_fn, dropout_loss)["loss"] for r in (plain, xla)]
    assert np.isclose(losses[0], losses[1], atol=1e-5), losses
    for a, b in zip(first_moments(plain), first_moments(xla)):
        np.testing.assert_allclose(a, b, atol=FP32_ATOL)
    _stopped_at(tmp_path / "xla", tmp_path / "xla_cut", 1)
    resumed = runner("xla_cut", True)
    assert resumed.global_step == 1
    resumed.train(dataset_fn, dropout_loss)
    assert resumed.global_step == xla.global_step == 2
    for a, b in zip(resumed.model.variables, xla.model.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.name)


def _stopped_at(whole, cut, step):
    """Makes `cut` the folder of a run stopped at `step`: the checkpoint of that step of
    the run in `whole` alone, as the latest."""
    cut.mkdir()
    for path in whole.glob("model.ckpt-%d.*" % step):
        shutil.copy(str(path), str(cut / path.name))
    checkpoints.write_state_file(str(cut / ("model.ckpt-%d" % step)))


def test_fp16_trains_with_loss_scaling_and_fp32_variables(tmp_path):
    training.configure_precision("fp16")
    try:
        runner = make_runner(tmp_path, "fp16", num_train_steps=3, dtype="fp16")
        metrics = runner.train(dataset_fn_of(features(8), 4), classifier_loss)
        assert isinstance(runner.optimizer, tf_keras.mixed_precision.LossScaleOptimizer)
        assert all(v.dtype == tf.float32 for v in runner.model.variables)
        assert np.isfinite(metrics["loss"])
        assert runner.global_step == 3
    finally:
        training.configure_precision("fp32")


def test_prediction_on_the_host_cpu_reads_its_input_untuned(tmp_path):
    # run_classifier's strategy without GPUs: one device, the host's CPU. Prediction
    # reads its dataset there with tf.data autotuning off (see Runner._distribute),
    # training keeps it; the outputs are those of the default strategy's pipeline.
    data = features(5)

    def dataset_fn(ctx=None):
        return tf.data.Dataset.from_tensor_slices(data).batch(2).prefetch(tf.data.AUTOTUNE)

    def predict_fn(model, feats):
        return {"logits": model(feats)["logits"]}

    default = make_runner(tmp_path, "default")
    config = training.RunConfig(output_dir=str(tmp_path / "cpu"))
    cpu = training.Runner(tf.distribute.OneDeviceStrategy("/cpu:0"),
                          lambda: heads.BertClassifier(tiny_config(), 2), config)
    for a, b in zip(cpu.model.variables, default.model.variables):
        a.assign(b)
    assert not cpu._distribute(dataset_fn, autotune=False).options().autotune.enabled
    assert cpu._distribute(dataset_fn).options().autotune.enabled is not False
    got = np.concatenate([o["logits"] for o in cpu.predict(dataset_fn, predict_fn)])
    want = np.concatenate([o["logits"] for o in default.predict(dataset_fn, predict_fn)])
    np.testing.assert_array_equal(got, want)


def test_checkpoints_every_save_steps_and_resume(tmp_path):
    runner = make_runner(tmp_path, "ck", num_train_steps=4, save_checkpoints_steps=2,
                         iterations_per_loop=3)
    runner.train(dataset_fn_of(features(8), 4), classifier_loss)
    names = sorted(n for n in os.listdir(tmp_path / "ck") if n.endswith(".index"))
    assert names == ["model.ckpt-2.index", "model.ckpt-4.index"]
    resumed = make_runner(tmp_path, "ck", num_train_steps=6, save_checkpoints_steps=2)
    assert resumed.global_step == 4
    for a, b in zip(resumed.model.variables, runner.model.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    # The schedule continues: lr at step 4 of 6 is 1e-2 * (1 - 4/6).
    assert np.isclose(float(resumed.optimizer_learning_rate()), 1e-2 / 3, rtol=1e-5)


def test_predict_returns_batches_in_order(tmp_path):
    runner = make_runner(tmp_path, "pred")
    data = features(5)

    def dataset_fn(ctx=None):
        return tf.data.Dataset.from_tensor_slices(data).batch(2)

    out = list(runner.predict(dataset_fn, lambda m, f: {"ids": f["input_ids"][:, 0],
                                                        "logits": m(f)["logits"]}))
    assert [len(o["ids"]) for o in out] == [2, 2, 1]
    np.testing.assert_array_equal(np.concatenate([o["ids"] for o in out]),
                                  data["input_ids"][:, 0])


def _free_ports(n):
    import socket
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


@pytest.mark.slow
def test_two_workers_end_identical_and_equal_to_one_process(tmp_path):
    """MultiWorkerMirroredStrategy over 2 local processes == 1 process, same global batch."""
    import json
    import subprocess
    import sys

    import multi_worker_job
    from bert_tf2.trainer import checkpoints
    from conftest import REPO_ROOT

    init = make_runner(tmp_path, "init")
    prefix = checkpoints.write_tf1_checkpoint(
        {n: v.numpy() for n, v in checkpoints.tf1_variable_map(init.model).items()},
        str(tmp_path / "init_ckpt" / "bert_model.ckpt"))
    job = str(REPO_ROOT / "tests" / "multi_worker_job.py")
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT / "tests"))
    env.pop("TF_CONFIG", None)
    workers = ["127.0.0.1:%d" % p for p in _free_ports(2)]
    procs = []
    for i in range(2):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": i}}
        procs.append(subprocess.Popen(
            [sys.executable, job, str(REPO_ROOT), str(tmp_path / "multi"), prefix,
             str(tmp_path / ("worker%d.npz" % i))],
            env=dict(env, TF_CONFIG=json.dumps(tf_config)), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True))
    # The one-process run here (the job's own code, on one device), while the two workers
    # import TensorFlow; only they need processes of their own.
    try:
        single = multi_worker_job.train(tf.distribute.OneDeviceStrategy("/cpu:0"),
                                        str(tmp_path / "single"), prefix)
    except BaseException:
        for p in procs:
            p.kill()
        raise
    assert single.global_step == 3 and single.is_chief
    ref = {"arr_%d" % i: v.numpy() for i, v in enumerate(single.model.trainable_variables)}
    outputs = [p.communicate(timeout=HANG_GUARD_SECONDS) for p in procs]
    failed = ["worker %d (exit %s):\n%s" % (i, p.returncode, err[-3000:])
              for i, (p, (_, err)) in enumerate(zip(procs, outputs)) if p.returncode != 0]
    assert not failed, "\n\n".join(failed)
    reports = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
    assert [r["chief"] for r in reports] == [True, False]
    assert all(r["step"] == 3 for r in reports)
    w0, w1 = np.load(tmp_path / "worker0.npz"), np.load(tmp_path / "worker1.npz")
    assert sorted(w0.files) == sorted(ref)
    for key in ref:
        np.testing.assert_array_equal(w0[key], w1[key])
        # Two workers' halves of the batch vs one process's whole: other shapes.
        np.testing.assert_allclose(w0[key], ref[key], atol=FP32_ATOL, err_msg=key)
    assert (tmp_path / "multi" / "model.ckpt-3.index").exists()


def _dropout_runner(tmp_path, name, **cfg):
    """A runner whose steps draw dropout masks, so a changed random stream would show."""
    tf_keras.utils.set_random_seed(7)
    config = tiny_config()
    config.hidden_dropout_prob = config.attention_probs_dropout_prob = 0.2
    cfg = dict(dict(learning_rate=1e-2, num_train_steps=20), **cfg)
    run_config = training.RunConfig(output_dir=str(tmp_path / name), num_warmup_steps=0,
                                    iterations_per_loop=1000, **cfg)
    return training.Runner(tf.distribute.get_strategy(),
                            lambda: heads.BertClassifier(config, 2), run_config)


def _dropout_loss(model, feats, is_training):
    logits = model(feats, training=is_training)["logits"]
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=feats["label_ids"], logits=logits)), {}


@pytest.fixture
def absl_records(caplog):
    """caplog, also fed by absl's logger directly: an earlier in-process run may have
    raised its level or stopped its propagation to the root logger."""
    absl_logger = logging.getLogger("absl")
    caplog.set_level("INFO")
    caplog.set_level("INFO", logger="absl")
    propagate = absl_logger.propagate
    absl_logger.propagate = False
    absl_logger.addHandler(caplog.handler)
    try:
        yield caplog
    finally:
        absl_logger.removeHandler(caplog.handler)
        absl_logger.propagate = propagate


def test_progress_comes_before_the_end_with_the_same_weights(tmp_path, absl_records):
    caplog = absl_records
    whole = _dropout_runner(tmp_path, "whole", log_every_seconds=0)
    whole.train(dataset_fn_of(features(16), 4), _dropout_loss, global_batch_size=4)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("step ")]
    assert lines == [lines[-1]] and lines[-1].startswith("step 20/20")
    caplog.clear()
    # A 1 ms pace: nearly every step of the one 1000-step call logs a line.
    paced = _dropout_runner(tmp_path, "paced", log_every_seconds=1e-3)
    paced.train(dataset_fn_of(features(16), 4), _dropout_loss, global_batch_size=4)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("step ")]
    assert len(lines) >= 10 and lines[0].startswith("step 1/20")
    assert "examples/s" in lines[0] and "ETA" in lines[0] and "loss" in lines[0]
    assert paced.global_step == whole.global_step == 20
    for a, b in zip(paced.model.variables, whole.model.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert sorted(os.listdir(tmp_path / "paced")) == sorted(os.listdir(tmp_path / "whole"))
    assert sum(line.startswith("step 20/20") for line in lines) == 1


def test_ctrl_c_in_training_names_the_step_and_the_checkpoint_a_rerun_resumes(tmp_path,
                                                                               monkeypatch):
    for name, stop_at, message in (
            ("after", 3, r"^interrupted at step 3; rerun the same command to resume from "
                         r"\S*after/model\.ckpt-2$"),
            ("before", 1, r"^interrupted at step 1, before the first checkpoint "
                          r"\(--save_checkpoints_steps=2\); rerun the same command to start "
                          r"again$")):
        runner = make_runner(tmp_path, name, num_train_steps=6, save_checkpoints_steps=2,
                             iterations_per_loop=1)
        log_progress = runner._log_progress

        def ctrl_c(writer, step, *args, stop_at=stop_at, log_progress=log_progress):
            log_progress(writer, step, *args)
            if step == stop_at:
                raise KeyboardInterrupt
        monkeypatch.setattr(runner, "_log_progress", ctrl_c)
        with pytest.raises(training.Interrupted, match=message):
            runner.train(dataset_fn_of(features(8), 4), classifier_loss)
    assert make_runner(tmp_path, "after", num_train_steps=6).global_step == 2


@pytest.mark.parametrize("cfg, compiled", [
    (dict(trim_padding=True), True),
    (dict(trim_padding=False), False),
    (dict(trim_padding=True, enable_xla=True), False),
])
def test_trimmed_training_on_cpu_compiles_the_dropout_masks_first(tmp_path, monkeypatch,
                                                                   cfg, compiled):
    from bert_tf2.base import dropout_masks  # pylint: disable=import-outside-toplevel
    calls = []
    monkeypatch.setattr(dropout_masks, "compile_size_classes",
                        lambda device, largest=None: calls.append(device))

    # Nothing to see in the steps: the training stops where its loop would be traced,
    # after the compile (or its skip). Trimmed steps with dropout on CPU, after the real
    # compile, are every face's training (--trim_padding is their default).
    class Stopped(Exception):
        pass

    def stop(self, loss_fn):
        raise Stopped
    monkeypatch.setattr(training.Runner, "_make_train_loop", stop)
    for name, strategy in (("default", tf.distribute.get_strategy()),
                           ("one_device", tf.distribute.OneDeviceStrategy("/cpu:0"))):
        config = training.RunConfig(output_dir=str(tmp_path / name), learning_rate=1e-2,
                                    num_train_steps=1, num_warmup_steps=0, **cfg)
        runner = training.Runner(strategy, lambda: heads.BertClassifier(tiny_config(), 2),
                                 config)
        with pytest.raises(Stopped):
            runner.train(dataset_fn_of(features(8), 4), classifier_loss)
    # The classifier's own dropout (0.1 on the pooled output) is enough.
    assert [tf.DeviceSpec.from_string(d).device_type for d in calls] == (
        ["CPU", "CPU"] if compiled else [])


@pytest.mark.parametrize("cfg", [{}, dict(gradient_checkpointing=True,
                                             num_accumulation_steps=2)])
def test_deterministic_data_resume_ends_with_the_uninterrupted_weights(tmp_path, cfg):
    # Resumed from step 3 (not a loop boundary of --iterations_per_loop=2): the same data
    # and the same dropout masks (encoder 0.2, the classifier's 0.1) as the uninterrupted
    # run, so all weights are equal bit for bit. The step-3 checkpoint is the whole run's
    # own (a folder holding it alone, as a run stopped there leaves it; the stop itself:
    # test_ctrl_c_in_training_names_the_step_and_the_checkpoint_a_rerun_resumes): two
    # trainings per cfg, not three. With --enable_xla: the resume of
    # test_xla_step_with_dropout_on_trimmed_batches_is_the_plain_step (its XLA run's).
    def runner(name):
        tf_keras.utils.set_random_seed(3)
        config = tiny_config()
        config.hidden_dropout_prob = config.attention_probs_dropout_prob = 0.2
        run_config = training.RunConfig(
            output_dir=str(tmp_path / name), learning_rate=1e-2, num_train_steps=6,
            iterations_per_loop=2, deterministic_data=True, seed=3,
            save_checkpoints_steps=3, **cfg)
        return training.Runner(tf.distribute.get_strategy(),
                               lambda: heads.BertClassifier(config, 2), run_config)
    data = features(16, seed=5)
    whole = runner("whole")
    whole.train(dataset_fn_of(data, 4), _dropout_loss)
    _stopped_at(tmp_path / "whole", tmp_path / "cut", 3)
    resumed = runner("cut")
    assert resumed.global_step == 3
    resumed.train(dataset_fn_of(data, 4), _dropout_loss)
    assert resumed.global_step == whole.global_step == 6
    for a, b in zip(resumed.model.variables, whole.model.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.name)


def test_each_step_of_a_loop_call_draws_its_own_dropout_masks_and_is_traced_once(
        tmp_path, monkeypatch):
    # Learning rate 0 and the same batch at every step: a step's loss differs from
    # another's only by its dropout masks. Before, the loop's first step came from a call
    # of the step outside the tf.range loop, whose stateful seed op started from the same
    # state as the loop's own copy: steps 1 and 2 of a call drew the same masks. The
    # step is traced once (it was traced twice when the loop called it both before its
    # tf.range loop and in it; now the loop's one call makes every step).
    losses = {}
    traced = []
    log_line = training.Runner._log_line_in_loop
    replica_step = training.Runner._replica_step

    def recorded(self, names, step, last_line, now, *values):
        losses[int(step)] = float(values[list(names).index("loss")])
        return log_line(self, names, step, last_line, now, *values)

    def counted(self, *args, **kwargs):
        traced.append(1)
        return replica_step(self, *args, **kwargs)
    monkeypatch.setattr(training.Runner, "_log_line_in_loop", recorded)
    monkeypatch.setattr(training.Runner, "_replica_step", counted)
    runner = _dropout_runner(tmp_path, "masks", log_every_seconds=1e-9, learning_rate=0.0,
                             num_train_steps=4)
    runner.train(dataset_fn_of(features(4), 4), _dropout_loss, global_batch_size=4)
    assert runner.global_step == 4
    assert sorted(losses) == [1, 2, 3, 4]  # one call of the loop made the 4 steps
    assert len(set(losses.values())) == 4, losses
    assert len(traced) == 1
