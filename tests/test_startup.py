"""startup.py: entry points start without TensorFlow's C++ noise, real errors still show."""
import logging
import os
import re
import subprocess
import sys

import pytest

from bert_tf2 import startup
from conftest import HANG_GUARD_SECONDS, REPO_ROOT, SHARED_DIR, user_environ


def _run_script(args, env_extra=None):
    env = user_environ()  # the notices a user's process prints
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, str(REPO_ROOT / "convert_tf1_checkpoint.py")] + args,
                          capture_output=True, text=True, env=env,
                          timeout=HANG_GUARD_SECONDS, check=False)


def test_cuinit_line_is_noise_only_without_a_driver():
    line = ("2026-11-22 09:16:01.232746: E external/local_xla/xla/stream_executor/cuda/"
            "cuda_platform.cc:51] failed call to cuInit: INTERNAL: CUDA error: Failed call to "
            "cuInit: UNKNOWN ERROR (303)\n")
    assert startup.is_startup_noise(line, has_driver=False)
    assert not startup.is_startup_noise(line, has_driver=True)
    assert not startup.is_startup_noise("E some/real_error.cc:1] out of memory\n", False)


def test_a_runner_starts_quietly_and_ends_with_one_error_line(tmp_path):
    result = _run_script(["--input_checkpoint=%s" % (tmp_path / "none"),
                          "--output_dir=%s" % (tmp_path / "out")])
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    # Nothing but our one line: no C++ INFO notices, no cuInit error, no log record.
    assert lines == ["error: checkpoint %s not found (expected %s.index)"
                     % (tmp_path / "none", tmp_path / "none")], result.stderr


def test_the_users_log_level_wins(tmp_path):
    result = _run_script(["--input_checkpoint=%s" % (tmp_path / "none"),
                          "--output_dir=%s" % (tmp_path / "out")],
                         {"TF_CPP_MIN_LOG_LEVEL": "0"})
    assert result.returncode == 1
    # TensorFlow's own INFO start-up lines are back when the user asks for them.
    assert re.search(r": I \S+\.cc:\d+\]", result.stderr), result.stderr


_TINY_TRAINING = """
from bert_tf2 import startup; startup.quiet()
from absl import logging as absl_logging; absl_logging.set_verbosity(absl_logging.INFO)
import sys
import numpy as np, tensorflow as tf
import modeling
from bert_tf2 import heads
from bert_tf2.trainer import training
config = modeling.BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
                             num_attention_heads=2, intermediate_size=16,
                             max_position_embeddings=16)
data = {"input_ids": np.ones([8, 6], np.int32), "input_mask": np.ones([8, 6], np.int32),
        "segment_ids": np.zeros([8, 6], np.int32), "label_ids": np.zeros([8], np.int32)}
def dataset_fn(ctx):
    return tf.data.Dataset.from_tensor_slices(data).batch(4).repeat()
def loss_fn(model, features, is_training):
    logits = model(features, training=is_training)["logits"]
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=features["label_ids"], logits=logits)), {}
# autograph=False: the faces' runners trace their steps as written (training.make_runner).
runner = training.Runner(tf.distribute.OneDeviceStrategy("/cpu:0"),
                         lambda: heads.BertClassifier(config, 2),
                         training.RunConfig(output_dir=sys.argv[1], num_train_steps=3,
                                            save_checkpoints_steps=1, autograph=False))
runner.train(dataset_fn, loss_fn)
print(sum(1 for _ in runner.predict(lambda ctx: dataset_fn(ctx).take(2),
                                    lambda model, f: model(f))))
sys.stdout.flush()
if len(sys.argv) > 2:  # then export_saved_model's command line, in this process
    sys.stderr.write("@@ export\\n")
    sys.stderr.flush()
    sys.argv = ["export_saved_model.py"] + sys.argv[2:]
    import export_saved_model
    export_saved_model.main()
"""


@pytest.fixture(scope="module")
def training_then_export(tmp_path_factory):
    """One process (each start pays TensorFlow's import): a tiny training run and prediction
    at INFO, then (with ../shared) export_saved_model's command line on the golden tiny
    checkpoint, TF_CPP_MIN_LOG_LEVEL unset. (the CompletedProcess, its stderr up to the
    export, the export's stderr or None)."""
    folder = tmp_path_factory.mktemp("startup")
    argv = [sys.executable, "-c", _TINY_TRAINING, str(folder / "out")]
    if SHARED_DIR is not None:
        golden = SHARED_DIR / "golden" / "tf1_tiny"
        argv += ["--model_type=encoder", "--bert_config_file=%s" % (golden / "bert_config.json"),
                 "--init_checkpoint=%s" % (golden / "bert_model.ckpt"),
                 "--vocab_file=%s" % (golden / "vocab.txt"), "--max_seq_length=16",
                 "--export_dir=%s" % (folder / "export")]
    env = user_environ()  # the notices a user's process prints
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    result = subprocess.run(argv, capture_output=True, text=True, env=env,
                            timeout=HANG_GUARD_SECONDS, cwd=str(REPO_ROOT), check=False)
    training_err, _, export_err = result.stderr.partition("@@ export\n")
    return result, training_err, export_err if SHARED_DIR is not None else None


def test_training_prints_no_tensorflow_notices(training_then_export):
    result, stderr, _ = training_then_export
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["2"]
    # The fused optimizer compiles with XLA, the loops read a dataset: neither says so.
    # A checkpoint a step, the INFO log shown: no sharding time line with each.
    assert "Saved checkpoint" in stderr
    for noise in ("GeneratorDatasetOp", "absl::InitializeLog", "Compiled cluster using XLA",
                  "cuInit", "Sharding callback duration"):
        assert noise not in stderr, stderr


def test_saved_models_renamed_captures_line_is_dropped_and_others_kept():
    drop = startup.LogNoiseFilter().filter
    msg = "Function `%s` contains input name(s) %s with unsupported characters which will " \
          "be renamed to %s in the SavedModel."

    def record(names, logger="absl"):
        return logging.LogRecord(logger, logging.INFO, __file__, 1, msg,
                                 ("_tag", names, names.replace(" ", "_")), None)
    assert not drop(record("3552, 3554, 3556"))
    assert not drop(record("3267, input_10, input_11", logger="tensorflow"))
    assert drop(record("my input, 3554"))
    assert drop(logging.LogRecord("tensorflow", logging.WARNING, __file__, 1, "real %s",
                                  ("warning",), None))


def test_checkpoint_and_saved_model_notices_are_dropped_and_warnings_kept():
    keep = startup.LogNoiseFilter().filter
    for message in ("Sharding callback duration: %s microseconds",
                    "Assets written to: %s", "Writing fingerprint to %s"):
        assert not keep(logging.LogRecord("absl", logging.INFO, __file__, 1, message,
                                          ("x",), None))
        assert keep(logging.LogRecord("absl", logging.WARNING, __file__, 1, message,
                                      ("x",), None))
    assert keep(logging.LogRecord("absl", logging.INFO, __file__, 1, "Saved checkpoint %s",
                                  ("x",), None))


def test_a_tiny_exports_log_has_no_line_of_a_thousand_characters(
        shared_dir, training_then_export):  # pylint: disable=unused-argument
    # export_saved_model's command line, after a training run in the same process.
    result, _, stderr = training_then_export
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Exported the encoder model" in stderr
    lines = stderr.splitlines()
    assert max(len(line) for line in lines) < 1000, max(lines, key=len)[:300]
    assert ".tmp-" not in stderr and "Sharding callback" not in stderr
