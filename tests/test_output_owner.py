"""One training run per output folder (fileutil.lock_output_dir): a second run into the
folder refuses in one line naming the other run; a killed run leaves no stale lock."""
import json
import os
import signal
import subprocess
import sys

import pytest

import run_classifier
from bert_tf2 import fileutil
from bert_tf2 import flags_common
from conftest import wait_until, write_text

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "a", "dog", "."]
_CONFIG = {"vocab_size": len(_VOCAB), "hidden_size": 16, "num_hidden_layers": 1,
           "num_attention_heads": 2, "intermediate_size": 32, "hidden_act": "gelu",
           "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
           "max_position_embeddings": 32, "type_vocab_size": 2, "initializer_range": 0.02}


def _classifier_argv(tmp_path, out, *extra):
    vocab = write_text(tmp_path / "vocab.txt", "\n".join(_VOCAB) + "\n")
    config = write_text(tmp_path / "bert_config.json", json.dumps(_CONFIG))
    rows = "".join("the cat sat .\t%d\n" % (i % 2) for i in range(8))
    for name in ("train", "dev"):
        write_text(tmp_path / "sst" / (name + ".tsv"), "sentence\tlabel\n" + rows)
    return ["--task_name=sst-2", "--data_dir=%s" % (tmp_path / "sst"), "--vocab_file=" + vocab,
            "--bert_config_file=" + config, "--output_dir=%s" % out, "--max_seq_length=16",
            "--do_train", "--train_batch_size=8"] + list(extra)


def _run(argv):
    return run_classifier.run(flags_common.parse_flags(run_classifier.define_flags, argv))


def _wait_for_lock(proc, lock_file):
    wait_until(lambda: os.path.exists(lock_file) and "pid" in open(lock_file).read(), proc,
               what="the lock file")


@pytest.mark.slow
def test_second_training_refused_and_a_killed_run_leaves_no_stale_lock(tmp_path):
    out = tmp_path / "out"
    lock_file = str(out / fileutil.LOCK_FILE)
    held = fileutil.held_output_locks()  # earlier tests' Runners may hold theirs
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    first = subprocess.Popen(
        [sys.executable, os.path.join(REPO_ROOT, "run_classifier.py")] + _classifier_argv(
            tmp_path, out, "--num_train_epochs=100000", "--save_checkpoints_steps=10000000"),
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_lock(first, lock_file)
        with pytest.raises(ValueError) as refused:  # run_cli: this line on stderr, exit 1
            _run(_classifier_argv(tmp_path, out, "--num_train_epochs=1"))
        assert "\n" not in str(refused.value)
        assert str(refused.value).startswith("--output_dir=%s is in use by another training "
                                             "run (pid %d on host " % (out, first.pid))
        # An eval-only run takes no lock: it reads the checkpoints as they come.
        fileutil.prepare_output_dir(str(out))
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate()
    assert os.path.exists(lock_file)  # the killed run's file, its lock gone with it
    result = _run(_classifier_argv(tmp_path, out, "--num_train_epochs=1"))
    assert result.global_step == 1
    assert not os.path.exists(lock_file)  # removed when the run ended
    assert fileutil.held_output_locks() == held


def test_lock_is_reentrant_in_a_process_and_skipped_where_it_cannot_apply(tmp_path,
                                                                          monkeypatch):
    folder = str(tmp_path / "o")
    held = fileutil.held_output_locks()  # earlier tests' Runners may hold theirs
    fileutil.prepare_output_dir(folder, lock=True)
    fileutil.prepare_output_dir(folder + "/", lock=True)  # the same folder, same process
    assert fileutil.held_output_locks() == held | {os.path.realpath(folder)}
    fileutil.release_output_locks(keep=held)
    assert os.listdir(folder) == []
    fileutil.lock_output_dir("gs://bucket/out")  # no OS lock there: skipped, no error
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["a:1", "b:2"]},
                                                "task": {"type": "worker", "index": 1}}))
    fileutil.lock_output_dir(folder)  # a non-chief worker writes no output there
    assert fileutil.held_output_locks() == held


def test_a_killed_runs_lock_file_is_no_output(tmp_path):
    from bert_tf2.export import saved_model_dir
    folder = tmp_path / "out"
    write_text(folder / fileutil.LOCK_FILE, "pid 1 on host h, since then")
    saved_model_dir.check_export_dir(str(folder))  # as empty: an export may go there
