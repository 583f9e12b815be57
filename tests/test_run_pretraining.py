"""run_pretraining.py: training, evaluation, resume, and the golden TF1 checkpoint."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import run_pretraining
from bert_tf2 import flags_common
from bert_tf2 import input_pipeline
from bert_tf2.trainer import checkpoints
from conftest import REPO_ROOT, StderrLines


def run_flags(**values):
    argv = []
    for k, v in values.items():
        argv.append("--%s=%s" % (k, v))
    return flags_common.parse_flags(run_pretraining.define_flags, argv)


def no_dropout_config(shared_dir, tmp_path):
    cfg = json.loads((shared_dir / "golden" / "tf1_tiny" / "bert_config.json").read_text())
    cfg["hidden_dropout_prob"] = 0.0
    cfg["attention_probs_dropout_prob"] = 0.0
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def read_results(path):
    out = {}
    for line in open(path):
        key, value = line.strip().split(" = ")
        out[key] = float(value)
    return out


def base_flags(shared_dir, tmp_path, name, **extra):
    values = dict(
        bert_config_file=shared_dir / "golden" / "tf1_tiny" / "bert_config.json",
        input_file=shared_dir / "golden" / "pretraining_data" / "sample.tfrecord",
        output_dir=tmp_path / name, train_batch_size=4, eval_batch_size=4,
        max_seq_length=128, max_predictions_per_seq=20, learning_rate=1e-3,
        num_warmup_steps=0, iterations_per_loop=5, save_checkpoints_steps=5, seed=7)
    values.update(extra)
    return values


def test_flags_keep_the_reference_defaults():
    fv = run_flags()
    assert (fv.max_seq_length, fv.max_predictions_per_seq, fv.train_batch_size,
            fv.eval_batch_size) == (128, 20, 32, 8)
    assert (fv.learning_rate, fv.num_train_steps, fv.num_warmup_steps) == (5e-5, 100000, 10000)
    assert (fv.save_checkpoints_steps, fv.iterations_per_loop, fv.max_eval_steps) == (1000, 1000,
                                                                                      100)
    assert (fv.use_tpu, fv.num_tpu_cores, fv.do_train, fv.do_eval) == (False, 8, False, False)


def test_requires_train_or_eval(tmp_path):
    with pytest.raises(ValueError, match="do_train"):
        run_pretraining.run(run_flags(output_dir=tmp_path))


def _check_result(result, steps, trained):
    """A Result names what the run wrote, and its metrics are eval_results.txt's values."""
    assert result.global_step == steps and result.steps_trained == trained
    assert result.eval_history == []
    assert sorted(result.outputs) == ["checkpoint", "eval_results"]
    assert result.outputs["checkpoint"].endswith("model.ckpt-%d" % steps)
    assert os.path.exists(result.outputs["checkpoint"] + ".index")
    on_disk = read_results(result.outputs["eval_results"])
    assert sorted(on_disk) == ["global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
                               "next_sentence_accuracy", "next_sentence_loss"]
    assert sorted(result.metrics) == sorted(on_disk)
    for key, value in on_disk.items():
        # The same numbers, in memory and as eval_results.txt's text.
        assert np.isclose(float(result.metrics[key]), value, rtol=1e-6), key
    assert on_disk["global_step"] == steps
    return on_disk


@pytest.mark.slow
def test_train_then_eval_writes_reference_keys_and_loss_decreases(shared_dir, tmp_path):
    """Evaluation at step 0, 30 steps from the command line's flags, then 2 more from
    run(Settings(...)) in the same process (no flag parsing: the Settings runs, the first
    and the last, and the flags run between them share the process)."""
    # The golden tiny config with one layer (every path here is per layer, not per depth).
    cfg = json.loads((shared_dir / "golden" / "tf1_tiny" / "bert_config.json").read_text())
    (tmp_path / "one_layer.json").write_text(json.dumps(dict(cfg, num_hidden_layers=1)))
    common = dict(num_train_steps=30, max_eval_steps=6, iterations_per_loop=10,
                  save_checkpoints_steps=10, learning_rate=1e-2,
                  bert_config_file=tmp_path / "one_layer.json")
    values = {k: str(v) if k.endswith(("_file", "_dir")) else v
              for k, v in base_flags(shared_dir, tmp_path, "out", **common).items()}
    before = run_pretraining.run(run_pretraining.Settings(do_eval=True, **values))
    assert before.metrics["global_step"] == 0 and before.global_step == 0
    fv = run_flags(**base_flags(shared_dir, tmp_path, "out", do_train=True, do_eval=True,
                                **common))
    results = run_pretraining.run(fv)
    on_disk = _check_result(results, 30, 30)
    # Memorisation of 23 records: the eval MLM loss (same records) falls clearly.
    assert on_disk["masked_lm_loss"] < before.metrics["masked_lm_loss"] - 1.0
    names = sorted(os.listdir(tmp_path / "out"))
    assert "model.ckpt-30.index" in names and "model.ckpt-20.index" in names
    assert "train" in names  # TensorBoard events
    # Another num_train_steps: from Python, continued only when told so.
    settings = run_pretraining.Settings(**dict(values, num_train_steps=32, do_train=True,
                                               do_eval=True))
    with pytest.raises(ValueError, match=r"trained with other settings: "
                                         r"num_train_steps 30 -> 32; use a new"):
        run_pretraining.run(settings)
    settings = settings.replace(existing_checkpoint="continue")
    result = run_pretraining.run(settings)
    assert settings.num_train_steps == 32  # the caller's settings are not changed
    assert result.output_dir == values["output_dir"]
    _check_result(result, 32, 2)


def test_settings_name_a_missing_setting_by_its_flag(tmp_path):
    with pytest.raises(ValueError, match="^input_file is required"):
        run_pretraining.run(run_pretraining.Settings(bert_config_file="c", do_eval=True,
                                                     output_dir=str(tmp_path)))


def write_golden_records(shared_dir, path):
    exp = dict(np.load(shared_dir / "golden" / "tf1_tiny" / "expected_outputs.npz"))
    with input_pipeline.RecordWriter(str(path)) as w:
        for i in range(4):
            w.write({
                "input_ids": input_pipeline.int_feature(exp["input_ids"][i]),
                "input_mask": input_pipeline.int_feature(exp["input_mask"][i]),
                "segment_ids": input_pipeline.int_feature(exp["segment_ids"][i]),
                "masked_lm_positions": input_pipeline.int_feature(exp["masked_lm_positions"][i]),
                "masked_lm_ids": input_pipeline.int_feature(exp["masked_lm_ids"][i]),
                "masked_lm_weights": input_pipeline.float_feature(exp["masked_lm_weights"][i]),
                "next_sentence_labels": input_pipeline.int_feature(
                    [exp["next_sentence_labels"][i]]),
            })
    return exp


@pytest.mark.parametrize("trim_padding", [True, False])
def test_eval_of_the_golden_tf1_checkpoint(shared_dir, tmp_path, trim_padding):
    # --trim_padding (the default) and --notrim_padding: the reference's values.
    exp = write_golden_records(shared_dir, tmp_path / "golden.tfrecord")
    g = shared_dir / "golden" / "tf1_tiny"
    fv = run_flags(bert_config_file=g / "bert_config.json",
                   input_file=tmp_path / "golden.tfrecord", output_dir=tmp_path / "eval",
                   init_checkpoint=g / "bert_model.ckpt", do_eval=True, eval_batch_size=4,
                   max_seq_length=24, max_predictions_per_seq=5, max_eval_steps=1,
                   trim_padding=trim_padding)
    run_pretraining.run(fv)
    got = read_results(tmp_path / "eval" / "eval_results.txt")
    w = exp["masked_lm_weights"]
    mlm_loss = (exp["masked_lm_example_loss"] * w).sum() / w.sum()
    mlm_acc = ((exp["masked_lm_log_probs"].argmax(-1) == exp["masked_lm_ids"]) * w).sum() / w.sum()
    nsp_acc = np.mean(exp["next_sentence_log_probs"].argmax(-1) == exp["next_sentence_labels"])
    assert got["global_step"] == 0
    assert np.isclose(got["masked_lm_loss"], mlm_loss, atol=1e-5)
    assert np.isclose(got["masked_lm_accuracy"], mlm_acc, atol=1e-6)
    assert np.isclose(got["next_sentence_loss"], exp["next_sentence_loss"], atol=1e-5)
    assert np.isclose(got["next_sentence_accuracy"], nsp_acc, atol=1e-6)
    assert np.isclose(got["loss"], exp["masked_lm_loss"] + exp["next_sentence_loss"], atol=1e-5)


def test_trimmed_eval_batches_give_the_full_length_metrics(shared_dir, tmp_path):
    # Batches of 2: the second (5 and 15 real tokens) is cut to 16 of 24 positions.
    write_golden_records(shared_dir, tmp_path / "golden.tfrecord")
    g = shared_dir / "golden" / "tf1_tiny"
    results = []
    for trim in (True, False):
        out = tmp_path / ("eval_%s" % trim)
        run_pretraining.run(run_flags(
            bert_config_file=g / "bert_config.json", input_file=tmp_path / "golden.tfrecord",
            output_dir=out, init_checkpoint=g / "bert_model.ckpt", do_eval=True,
            eval_batch_size=2, max_seq_length=24, max_predictions_per_seq=5,
            max_eval_steps=2, trim_padding=trim))
        results.append(read_results(out / "eval_results.txt"))
    assert sorted(results[0]) == sorted(results[1])
    for key, value in results[1].items():
        assert np.isclose(results[0][key], value, atol=1e-5), key


def _cli_values(shared_dir, tmp_path, name, **extra):
    return base_flags(shared_dir, tmp_path, name, do_train=True,
                      bert_config_file=no_dropout_config(shared_dir, tmp_path), **extra)


def _cli(shared_dir, tmp_path, name, **extra):
    return [sys.executable, str(REPO_ROOT / "run_pretraining.py")] + [
        "--%s=%s" % kv for kv in _cli_values(shared_dir, tmp_path, name, **extra).items()]


@pytest.mark.slow
def test_sigkill_then_restart_equals_an_uninterrupted_run(shared_dir, tmp_path):
    import random
    import re
    import signal
    args = dict(num_train_steps=10, save_checkpoints_steps=2, iterations_per_loop=1,
                deterministic_data=True, progress="lines", log_every_seconds=1e-3)
    # The uninterrupted run and the restart in this process (what is tested across a process
    # boundary is the kill; each script start costs a TensorFlow import).
    run_pretraining.run(run_flags(**_cli_values(shared_dir, tmp_path, "straight", **args)))
    # Killed as soon as a random step's progress line is written (read as it comes, no
    # polling): the kill lands within the next step or checkpoint save, never after the
    # run's last two steps, whatever the CPU's speed. (Should the run still have ended,
    # a fresh folder tries an earlier step.)
    for attempt in range(3):
        name = "killed%d" % attempt
        proc = subprocess.Popen(_cli(shared_dir, tmp_path, name, **args),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        line = re.compile(r"^train  step %d/10  " % random.randint(4, 8 - 2 * attempt))
        for text in proc.stderr:
            if line.search(text):
                break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stderr.close()
        interrupted_at = checkpoints.CheckpointContents(str(tmp_path / name)).path
        if not interrupted_at.endswith("-10"):
            break
    assert not interrupted_at.endswith("-10"), "every run finished before the kill"
    run_pretraining.run(run_flags(**_cli_values(shared_dir, tmp_path, name, **args)))
    a = checkpoints.CheckpointContents(str(tmp_path / "straight"))
    b = checkpoints.CheckpointContents(str(tmp_path / name))
    assert a.path.endswith("model.ckpt-10") and b.path.endswith("model.ckpt-10")
    assert int(b.get("global_step")) == 10
    # The same batches, shapes and kernels, resumed from a checkpoint: rounding at most.
    for variable in a.model_names():
        np.testing.assert_allclose(b.get(variable), a.get(variable), atol=1e-6,
                                   err_msg=variable)
    # Nothing left to do: a rerun with the same target trains no step and writes nothing.
    again = run_pretraining.run(run_flags(**_cli_values(shared_dir, tmp_path, name, **args)))
    assert again.steps_trained == 0 and again.global_step == 10
    assert checkpoints.CheckpointContents(str(tmp_path / name)).path.endswith("model.ckpt-10")


@pytest.mark.slow
def test_sigterm_writes_a_checkpoint_and_stops(shared_dir, tmp_path):
    import signal
    # A progress line per step: the signal goes once a step has ended, however slow the CPU
    # (a fixed 2 s after the start left a loaded AVX2 machine still tracing the first step).
    proc = subprocess.Popen(
        _cli(shared_dir, tmp_path, "term", num_train_steps=100000, save_checkpoints_steps=1000,
             iterations_per_loop=1, progress="lines", log_every_seconds=1e-3),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stderr = StderrLines(proc)
    stderr.wait_for(r"^train  step [1-9]\d*/100000  ")
    proc.send_signal(signal.SIGTERM)
    err = stderr.text()
    assert proc.returncode == 143, err[-3000:]
    contents = checkpoints.CheckpointContents(str(tmp_path / "term"))
    step = int(contents.get("global_step"))
    assert 0 < step < 1000 and contents.path.endswith("model.ckpt-%d" % step)
