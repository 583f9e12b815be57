"""Two replicas of one CPU (MirroredStrategy on two logical devices): run_pretraining's first
gradients (with --gradient_checkpointing) equal one device's, and trimmed batches
(--trim_padding) equal padded ones.

The logical devices must exist before TensorFlow starts, so the checks run in a child
process: one for the whole file (each start pays TensorFlow's import and a strategy),
whose findings the tests below read.
"""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import HANG_GUARD_SECONDS, REPO_ROOT, SHARED_DIR

CHILD = textwrap.dedent("""
    import json, pathlib, sys
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[1] + "/tests")
    tmp = pathlib.Path(sys.argv[2])
    pretraining_args = json.loads(sys.argv[3])
    found = {}


    def pretraining_slots(args):
        # run_pretraining.py on one device, and on two replicas with
        # --gradient_checkpointing: the first Adam moments of a few variables.
        import run_pretraining
        from bert_tf2 import flags_common
        from bert_tf2.trainer import checkpoints
        out = {}
        # One run on two replicas (each costs a strategy's traces and the fused update's
        # XLA compilation once per replica): the default flags plus the recomputing
        # encoder, whose gradients equal the stored ones only if the replicas' sum does.
        runs = (("one_device", "one_device", []),
                ("mirrored_recompute", "mirrored", ["--gradient_checkpointing"]))
        for name, strategy, extra in runs:
            argv = ["--%s=%s" % kv for kv in args.items()] + extra
            argv += ["--distribution_strategy=" + strategy,
                     "--output_dir=%s/%s" % (args["output_dir"], name)]
            fv = flags_common.parse_flags(run_pretraining.define_flags, argv)
            run_pretraining.run(fv)
            c = checkpoints.CheckpointContents(fv.output_dir)
            out[name] = {n: c.get(n).tolist() for n in c.names() if n.endswith("adam_m")
                         and ("layer_1" in n or "cls/" in n or "embeddings/LayerNorm" in n)}
        return out


    def trimmed_batches():
        # test_dynamic_padding's records and helpers, under two replicas.
        import test_dynamic_padding as t
        from bert_tf2 import input_pipeline
        from bert_tf2.trainer import training
        # Keys of its collective ops apart from the strategies run_pretraining made: each
        # strategy numbers them from the same start, and the process's collective executor
        # keeps an instance's shapes (a key used again with other shapes: an error).
        tf.distribute.MirroredStrategy._collective_key_base = 1000
        strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        report = {}

        # One encoder layer: each replica traces its own copy of every step.
        def classifier_fn():
            config = t.tiny_config()
            config.num_hidden_layers = 1
            model = t.heads.BertClassifier(config, 2)
            model.dropout.rate = 0.0
            return model
        # 5 per-replica batches of 2: a sixth, of padding rows only, completes the last
        # global batch (a distributed dataset would drop a group with an empty replica).
        path = t.write_classifier_records(tmp / "eval.tf_record", t.lengths_of(9, seed=11))
        # autograph=False, as the faces' runners (training.make_runner): the steps traced as
        # written, each replica's trace without AutoGraph's rewrite.
        config = training.RunConfig(output_dir=str(tmp / "eval"), autograph=False)
        runner = training.Runner(strategy, classifier_fn, config, for_training=False)
        padded, bucketed = t.predict_both(runner, path, t.CLASSIFIER_SPEC, 4,
                                          t.classifier_predict, 1)
        t.assert_same_batches(padded, bucketed)
        report["eval_sizes"] = [len(b["label_ids"]) for b in bucketed]
        report["eval_real"] = [int(b["is_real_example"].sum()) for b in padded]
        train_path = t.write_classifier_records(tmp / "train.tf_record",
                                                t.lengths_of(24, seed=12))
        runners = []
        for trim in (False, True):
            # Op-by-op updates: both runs take the same, and the fused one compiles with
            # XLA for each replica and each bucket's trace (test_fused_optimizer checks it
            # under two replicas).
            config = training.RunConfig(output_dir=str(tmp / ("train%d" % trim)),
                                        learning_rate=1e-2, num_train_steps=3,
                                        num_warmup_steps=0, iterations_per_loop=1,
                                        num_accumulation_steps=2, fused_optimizer=False,
                                        autograph=False)
            runners.append(training.Runner(strategy, classifier_fn, config))
            for a, b in zip(runners[-1].model.variables, runners[0].model.variables):
                a.assign(b)
        for trim, runner in zip((False, True), runners):
            runner.train(input_pipeline.dataset_fn_for(
                [train_path], t.CLASSIFIER_SPEC, 4, True, seed=3, trim_padding=trim,
                bucket_width=t.WIDTH), t.classifier_loss)
        report["max_diff"] = max(float(np.abs(a.numpy() - b.numpy()).max()) for a, b in zip(
            runners[0].model.trainable_variables, runners[1].model.trainable_variables))
        return report


    if pretraining_args:
        found["pretraining_slots"] = pretraining_slots(pretraining_args)
    found["trimmed"] = trimmed_batches()
    (tmp / "found.json").write_text(json.dumps(found))
""")


def _pretraining_args(folder):
    """run_pretraining's flags on the golden tiny checkpoint (no dropout), one step of a
    global batch of 8; {} without the shared folder."""
    if SHARED_DIR is None:
        return {}
    golden = SHARED_DIR / "golden" / "tf1_tiny"
    cfg = json.loads((golden / "bert_config.json").read_text())
    cfg.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (folder / "bert_config.json").write_text(json.dumps(cfg))
    return {"bert_config_file": str(folder / "bert_config.json"),
            "input_file": str(SHARED_DIR / "golden" / "pretraining_data" / "sample.tfrecord"),
            "output_dir": str(folder / "pretraining"), "train_batch_size": "8",
            "eval_batch_size": "4", "max_seq_length": "128", "max_predictions_per_seq": "20",
            "learning_rate": "0.001", "num_warmup_steps": "0", "iterations_per_loop": "5",
            "save_checkpoints_steps": "5", "seed": "7", "do_train": "true",
            "num_train_steps": "1", "init_checkpoint": str(golden / "bert_model.ckpt")}


@pytest.fixture(scope="module")
def two_replicas(tmp_path_factory):
    """What the child process found: {"pretraining_slots" (with the shared folder),
    "trimmed"}."""
    folder = tmp_path_factory.mktemp("two_replicas")
    script = folder / "two_replicas.py"
    script.write_text(CHILD)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run([sys.executable, str(script), str(REPO_ROOT), str(folder),
                           json.dumps(_pretraining_args(folder))],
                          capture_output=True, text=True, timeout=HANG_GUARD_SECONDS, env=env,
                          check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads((folder / "found.json").read_text())


@pytest.mark.slow
def test_run_pretraining_on_two_replicas_equals_one_device(shared_dir, two_replicas):  # pylint: disable=unused-argument
    """Same global batch on 1 device and on 2 replicas with --gradient_checkpointing (no
    dropout here; the fused update on both): the same first gradients. (Recomputing on one
    device: test_training and test_modeling; the fused update alone under two replicas:
    test_fused_optimizer.)"""
    slots = two_replicas["pretraining_slots"]
    for run in ("mirrored_recompute",):
        assert slots["one_device"].keys() == slots[run].keys() and slots["one_device"]
        for name, one in slots["one_device"].items():
            # adam_m after the first step is 0.1 * the clipped gradient.
            np.testing.assert_allclose(slots[run][name], one, atol=1e-7, rtol=1e-4,
                                       err_msg="%s %s" % (run, name))


@pytest.mark.slow
def test_trimmed_batches_on_two_replicas(two_replicas):
    """Bucketed eval batches on two replicas come back in input order with the padded run's
    rows (the last global batch completed by padding rows), and trimmed training steps
    (2 accumulated mini-batches) end with the padded run's weights."""
    report = two_replicas["trimmed"]
    assert report["eval_sizes"] == [4, 4, 4] and report["eval_real"] == [4, 4, 1]
    assert report["max_diff"] < 1e-5
