"""Tests for pretraining_beam.py: create_pretraining_data --runner (Apache Beam, DirectRunner).

The Beam output must be the multiset of records of --num_workers=2 (default, whole
word masking, packed rows), the same whatever the DirectRunner's workers, readable by
run_pretraining.py; bad input stops the run with one line and leaves no file.
"""
import collections
import contextlib
import glob
import json
import os
import pathlib
import random
import signal
import subprocess
import sys
import threading

import pytest
import tensorflow as tf

pytest.importorskip("apache_beam")

import create_pretraining_data as cpd  # pylint: disable=wrong-import-position
import modeling  # pylint: disable=wrong-import-position
import run_pretraining  # pylint: disable=wrong-import-position
import bert_tf2.pretraining  # pylint: disable=wrong-import-position
from bert_tf2 import flags_common  # pylint: disable=wrong-import-position
from bert_tf2.pretraining import pretraining_beam  # pylint: disable=wrong-import-position
from conftest import HANG_GUARD_SECONDS, wait_until  # pylint: disable=wrong-import-position

SEQ, PREDS = 32, 5
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "dog", "sat", "on",
         "mat", "a", "big", "red", "house", "run", "jump", "quick", ".", "un", "##break",
         "##able", "play", "##ing", "##ed"]
WORDS = ["the", "cat", "dog", "sat", "on", "mat", "a", "big", "red", "house", "unbreakable",
         "playing", "played", "run", "jump", "quick"]
NUM_FILES = 8
IN_MEMORY = ["--direct_num_workers=1", "--direct_running_mode=in_memory"]
THREADS = ["--direct_num_workers=2", "--direct_running_mode=multi_threading"]
PROCESSES = ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]
# One worker process (each pays TensorFlow's import): the command-line tests of what a worker
# process's failure or death shows; test_same_records_... runs two.
ONE_PROCESS = ["--direct_num_workers=1", "--direct_running_mode=multi_processing"]


def _corpus(seed):
    rng = random.Random(seed)
    documents = []
    for _ in range(rng.randint(3, 12)):
        sentences = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 12))) + " ."
                     for _ in range(rng.randint(1, 6))]
        documents.append("\n".join(sentences))
    return "\n\n".join(documents) + "\n"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A vocabulary and NUM_FILES small corpus files (of different sizes)."""
    d = tmp_path_factory.mktemp("beam")
    (d / "vocab.txt").write_text("".join(t + "\n" for t in VOCAB))
    (d / "text").mkdir()
    for i in range(NUM_FILES):
        (d / "text" / ("part-%02d.txt" % i)).write_text(_corpus(i))
    return d


def _flags(corpus, output, *extra):
    return flags_common.parse_flags(cpd.define_flags, [
        "--input_file=%s" % (corpus / "text" / "part-*.txt"), "--output_file=%s" % output,
        "--vocab_file=%s" % (corpus / "vocab.txt"), "--max_seq_length=%d" % SEQ,
        "--max_predictions_per_seq=%d" % PREDS, "--dupe_factor=2", "--random_seed=3"]
        + list(extra))


def _records(pattern):
    return [r.numpy() for path in sorted(glob.glob(pattern))
            for r in tf.data.TFRecordDataset(path)]


def _files_in(folder):
    return sorted(os.listdir(folder))


_LOCAL = {}


def _local(corpus, extra):
    """The records of --num_workers=2 for these extra flags (made once per module)."""
    key = tuple(extra)
    if key not in _LOCAL:
        out = corpus / ("local-%d.tfrecord" % len(_LOCAL))
        cpd.run(_flags(corpus, out, "--num_workers=2", *extra))
        _LOCAL[key] = _records(str(out))
    return _LOCAL[key]


def _beam(corpus, name, extra, beam_args, shards=3):
    prefix = corpus / name
    fv = _flags(corpus, prefix, "--runner=DirectRunner", "--num_output_shards=%d" % shards,
                *extra)
    count = cpd.run(fv, beam_args=beam_args).metrics["records"]
    files = sorted(glob.glob("%s-*-of-%05d" % (prefix, shards)))
    assert len(files) == shards
    assert not [f for f in _files_in(corpus) if "tmp" in f]
    return count, files


def test_same_records_as_num_workers_whatever_the_beam_workers(corpus):
    """Default flags: in-memory and 2 worker processes give the --num_workers=2 multiset;
    the record -> shard deal is seeded, so even the shard files are identical."""
    local = _local(corpus, ())
    count_1, files_1 = _beam(corpus, "one", (), IN_MEMORY)
    count_2, files_2 = _beam(corpus, "two", (), PROCESSES)
    assert count_1 == count_2 == len(local) > 100
    records_1 = [r for f in files_1 for r in _records(f)]
    assert collections.Counter(records_1) == collections.Counter(local)
    for a, b in zip(files_1, files_2):
        assert _records(a) == _records(b)
    assert all(_records(f) for f in files_1)  # every shard gets records


@pytest.mark.parametrize("extra", [["--do_whole_word_mask"],
                                   ["--pack_sequences", "--max_instances_per_row=3"]],
                         ids=["whole_word_mask", "packed"])
def test_same_records_as_num_workers_with_options(corpus, extra):
    local = _local(corpus, extra)
    assert local != _local(corpus, ())
    count, files = _beam(corpus, "opt-" + extra[0].strip("-"), extra, THREADS, shards=2)
    records = [r for f in files for r in _records(f)]
    assert count == len(records) == len(local)
    assert collections.Counter(records) == collections.Counter(local)


def test_run_pretraining_reads_the_beam_output(corpus):
    # What a run killed with SIGKILL leaves: the next run removes it and proceeds.
    leftover = corpus / "train-00000-of-00002.beam-tmp-0123abcd"
    leftover.mkdir()
    (leftover / "file-000000-0123").write_bytes(b"piece")
    _, files = _beam(corpus, "train", (), IN_MEMORY, shards=2)
    assert not leftover.exists()
    # ... and the input glob of run_pretraining never reads one.
    leftover.mkdir()
    (corpus / "train-00001-of-00002.tmp-89abcdef").write_bytes(b"half a record")
    config = corpus / "bert_config.json"
    config.write_text(json.dumps(modeling.BertConfig(
        vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=SEQ).to_dict()))
    values = dict(bert_config_file=config, input_file="%s/train-*" % corpus,
                  output_dir=corpus / "model", train_batch_size=4, eval_batch_size=4,
                  max_seq_length=SEQ, max_predictions_per_seq=PREDS, num_train_steps=2,
                  num_warmup_steps=0, iterations_per_loop=2, save_checkpoints_steps=2,
                  do_train=True)
    fv = flags_common.parse_flags(run_pretraining.define_flags,
                                  ["--%s=%s" % kv for kv in values.items()])
    run_pretraining.run(fv)
    assert len(files) == 2
    assert tf.train.latest_checkpoint(str(corpus / "model")).endswith("-2")


def test_beam_options_pass_through():
    ours, theirs = pretraining_beam.split_args(
        ["prog", "--input_file=a.txt", "--project", "p1", "--do_whole_word_mask",
         "--runner=DataflowRunner", "--region=europe-west4", "--nodo_lower_case",
         "--dupe_factor", "5", "--save_main_session", "--random_seed", "-3",
         "--verbosity=1", "--experiments", "a", "--experiments=b"], cpd.define_flags)
    assert ours == ["prog", "--input_file=a.txt", "--do_whole_word_mask",
                    "--runner=DataflowRunner", "--nodo_lower_case", "--dupe_factor", "5",
                    "--random_seed", "-3", "--verbosity=1"]
    assert theirs == ["--project", "p1", "--region=europe-west4", "--save_main_session",
                      "--experiments", "a", "--experiments=b"]


def _typo(name):
    return name[:-2] + name[-1] + name[-2]  # the last two letters swapped


def test_every_misspelt_flag_is_refused_under_the_runner():
    """Beam only logs that it discards an argument it does not know: a misspelt flag of
    this script would run with its default. Every flag, and Beam's own options."""
    fv = flags_common.parse_flags(cpd.define_flags, [])
    names = [n for n in fv if _typo(n) not in fv] + ["direct_num_workers", "temp_location"]
    for name in names:
        for arg in ("--%s=1" % _typo(name), "--%s" % _typo(name)):
            with pytest.raises(ValueError, match=r"^unknown flag --%s: not a flag of "
                               r"create_pretraining_data\.py, nor an option of Apache Beam; "
                               r"did you mean --%s\?$" % (_typo(name), name)):
                pretraining_beam.split_args(["create_pretraining_data.py", "--runner=x", arg],
                                            cpd.define_flags)
    with pytest.raises(ValueError, match=r"unknown flag --noproject"):  # not a boolean
        pretraining_beam.split_args(["p", "--noproject"], cpd.define_flags)


def test_an_output_named_twice_is_refused_in_every_mode(corpus, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for mode in ([], ["--num_workers=2"], ["--runner=DirectRunner"]):
        fv = _flags(corpus, "x.tfrecord,%s/x.tfrecord" % tmp_path, *mode)
        with pytest.raises(ValueError, match=r"^--output_file names one file twice"):
            cpd.run(fv, beam_args=IN_MEMORY)
    text = str(corpus / "text" / "part-00.txt")
    for mode in ([], ["--runner=DirectRunner"]):  # an input is never overwritten
        fv = _flags(corpus, "x.tfrecord,%s" % text, *mode)
        with pytest.raises(ValueError, match=r"^--output_file=\S*part-00\.txt is also an "
                                             r"input \(--input_file="):
            cpd.run(fv, beam_args=IN_MEMORY)
    fv = _flags(corpus, "x.tfrecord", "--runner=DirectRunner", "--num_workers=2")
    with pytest.raises(ValueError, match=r"^--num_workers=2 counts local processes and does "
                                         r"not apply with --runner=DirectRunner"):
        cpd.run(fv, beam_args=IN_MEMORY)
    assert os.listdir(tmp_path) == []


def test_a_glob_without_a_folder_matches_here(corpus, monkeypatch):
    monkeypatch.chdir(corpus / "text")
    files = pretraining_beam.match_input_files(["part-0*.txt"], 1)
    assert [os.path.basename(p) for p, _ in files] == ["part-%02d.txt" % i
                                                       for i in range(NUM_FILES)]


def test_worker_errors_reach_the_entry_point_as_one_line():
    def unreadable(path):
        raise tf.errors.PermissionDeniedError(None, None, "%s; Permission denied\nmore" % path)
    with pytest.raises(ValueError) as marked:
        pretraining_beam._one_line_errors(unreadable, "gs://b/x.txt")
    # As a worker process reports it: the text of a remote traceback.
    remote = RuntimeError("Traceback (most recent call last):\n  File ...\nValueError: %s "
                          "[while running 'MakeRecords/ParDo(_MakePieces)']\n" % marked.value)
    assert str(pretraining_beam._input_error(remote)) == "gs://b/x.txt; Permission denied"
    assert pretraining_beam._input_error(RuntimeError("a bug")) is None


# ---------------------------------------------------------------------------
# Bad input: one line, no output, no temporary folder
# ---------------------------------------------------------------------------

def _assert_fails(folder, message, fv, beam_args=IN_MEMORY):
    before = _files_in(folder)
    with pytest.raises(ValueError, match=message):
        cpd.run(fv, beam_args=beam_args)
    assert _files_in(folder) == before


def _bad_corpus(tmp_path, corpus, *texts):
    for i, text in enumerate(texts):
        (tmp_path / ("bad-%d.txt" % i)).write_bytes(text)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text((corpus / "vocab.txt").read_text())
    return flags_common.parse_flags(cpd.define_flags, [
        "--input_file=%s/bad-*.txt" % tmp_path, "--output_file=%s/out" % tmp_path,
        "--vocab_file=%s" % vocab, "--runner=DirectRunner", "--num_output_shards=2",
        "--max_seq_length=%d" % SEQ, "--max_predictions_per_seq=%d" % PREDS])


def test_input_glob_matching_nothing(tmp_path, corpus):
    fv = _bad_corpus(tmp_path, corpus)
    _assert_fails(tmp_path, "matches no file", fv)


def test_empty_input(tmp_path, corpus):
    fv = _bad_corpus(tmp_path, corpus, b"\n \n\n", b"")
    _assert_fails(tmp_path, "no documents in the input files .*bad-0.txt", fv)


def test_not_utf8_names_file_and_line(tmp_path, corpus):
    fv = _bad_corpus(tmp_path, corpus, _corpus(1).encode(),
                     "the cat\n\nsat on\nthe mat caf\xe9\n".encode("latin-1"))
    _assert_fails(tmp_path, r"^\S*bad-1\.txt, line 4: not valid UTF-8", fv)


def test_file_too_large_for_a_worker(tmp_path, corpus):
    fv = _bad_corpus(tmp_path, corpus, b"the cat sat on the mat .\n" * 60000)
    fv.max_input_file_mb = 1
    _assert_fails(tmp_path, r"bad-0\.txt holds \d+ MB, more than --max_input_file_mb=1 .*split "
                  "it into smaller files", fv)


def test_vocab_without_mask(tmp_path, corpus):
    fv = _bad_corpus(tmp_path, corpus, _corpus(1).encode())
    (tmp_path / "vocab.txt").write_text("".join(t + "\n" for t in VOCAB if t != "[MASK]"))
    _assert_fails(tmp_path, r"^--vocab_file=\S*vocab\.txt has no \[MASK\] token$", fv)


def test_output_prefix_holding_other_shards(tmp_path, corpus):
    fv = _bad_corpus(tmp_path, corpus, _corpus(1).encode())
    (tmp_path / "out-00000-of-00005").write_bytes(b"not ours")
    _assert_fails(tmp_path, r"out already holds files of another run \(\S*out-00000-of-00005",
                  fv)
    fv.output_file = str(tmp_path)
    _assert_fails(tmp_path, "is a directory", fv)


def test_without_beam_one_line_names_the_extra(tmp_path, corpus, monkeypatch):
    monkeypatch.setitem(sys.modules, "bert_tf2.pretraining.pretraining_beam", None)
    # An earlier import left the module as an attribute of its package, where
    # `from bert_tf2.pretraining import pretraining_beam` would find it first.
    monkeypatch.delattr(bert_tf2.pretraining, "pretraining_beam", raising=False)
    fv = _bad_corpus(tmp_path, corpus, _corpus(1).encode())
    _assert_fails(tmp_path, r"--runner needs Apache Beam.*pip install 'bert-tf2\[beam\]'", fv)
    # The command line stops before absl sees the Beam flags: sys.exit's one line on
    # stderr and exit code 1.
    monkeypatch.setattr(sys, "argv", ["create_pretraining_data.py", "--runner=DirectRunner",
                                      "--project=p", "--input_file=x", "--output_file=y"])
    with pytest.raises(SystemExit) as e:
        cpd.main()
    assert e.value.code == ("error: --runner needs Apache Beam, an optional extra: pip "
                            "install 'bert-tf2[beam]' (import of "
                            "bert_tf2.pretraining.pretraining_beam halted; None in sys.modules)")


# ---------------------------------------------------------------------------
# The command line: one line on a bad input, clean-up on SIGTERM
# ---------------------------------------------------------------------------

def _command(corpus, tmp_path, pattern, *extra):
    repo = pathlib.Path(__file__).resolve().parents[1]
    return [sys.executable, str(repo / "create_pretraining_data.py"),
            "--input_file=%s" % pattern, "--output_file=%s/out" % tmp_path,
            "--num_output_shards=2", "--vocab_file=%s" % (corpus / "vocab.txt"),
            "--max_seq_length=%d" % SEQ, "--max_predictions_per_seq=%d" % PREDS,
            "--runner=DirectRunner"] + list(extra)


def test_bad_input_in_worker_processes_is_one_line(corpus, tmp_path):
    """Beam's worker process prints and logs the traceback of the failed bundle (7 of them
    with 2 worker processes): only run_cli's line reaches the terminal."""
    (tmp_path / "a.txt").write_text(_corpus(1))
    (tmp_path / "b.txt").write_bytes("the cat\n\nsat on\nthe mat caf\xe9\n".encode("latin-1"))
    proc = subprocess.run(_command(corpus, tmp_path, "%s/*.txt" % tmp_path, *ONE_PROCESS),
                          capture_output=True, text=True, timeout=HANG_GUARD_SECONDS)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and "bad input" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines()
              if line.startswith(("error", "E1", "ERROR"))]
    assert errors == ["error: %s/b.txt, line 4: not valid UTF-8 text (invalid continuation "
                      "byte)" % tmp_path]
    assert sorted(os.listdir(tmp_path)) == ["a.txt", "b.txt"]


@contextlib.contextmanager
def _started_on_a_held_pipe(corpus, tmp_path, *extra):
    """The command line started on big-0.txt (a small corpus) and big-1.txt, a named pipe
    that the test opens for writing and never writes to: the run cannot end before the
    test acts on it, whatever the machine's speed. Yields the Popen (stderr piped) once
    the run reads the pipe."""
    (tmp_path / "big-0.txt").write_text(_corpus(0) * 20)
    pipe = tmp_path / "big-1.txt"
    os.mkfifo(pipe)
    proc = subprocess.Popen(_command(corpus, tmp_path, "%s/big-*.txt" % tmp_path, *extra),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    writer = []
    opener = threading.Thread(target=lambda: writer.append(open(pipe, "w")), daemon=True)
    opener.start()
    try:
        wait_until(lambda: writer, proc, what="the run reading the named pipe")
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        if not writer:  # a reader of our own lets the opening thread go
            os.close(os.open(pipe, os.O_RDONLY | os.O_NONBLOCK))
            opener.join(HANG_GUARD_SECONDS)
        for f in writer:
            f.close()


def test_sigterm_removes_the_temporary_folder(corpus, tmp_path):
    with _started_on_a_held_pipe(corpus, tmp_path, *IN_MEMORY) as proc:
        assert [p for p in tmp_path.iterdir() if ".beam-tmp-" in p.name]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=HANG_GUARD_SECONDS)
    assert proc.returncode == 143, err[-3000:]
    assert err.splitlines()[-1] == "error: stopped by SIGTERM" and "Traceback" not in err
    assert sorted(os.listdir(tmp_path)) == ["big-0.txt", "big-1.txt"]


def test_a_killed_worker_is_one_line():
    errors = []
    with pretraining_beam._thread_errors_kept(errors):
        def beam_thread():
            raise RuntimeError("Worker subprocess exited with return code 137")
        thread = threading.Thread(target=beam_thread, name="run_worker")
        thread.start()
        thread.join()
    assert [str(e) for e in errors] == ["Worker subprocess exited with return code 137"]
    lost = pretraining_beam._worker_lost(RuntimeError("Channel closed prematurely."), errors)
    assert str(lost) == ("a Beam worker process ended before the pipeline finished (return "
                         "code 137: stopped by SIGKILL); nothing was written (was it killed, "
                         "or out of memory?)")
    assert "ended before" in str(pretraining_beam._worker_lost(
        RuntimeError("Channel closed prematurely."), []))
    assert pretraining_beam._worker_lost(RuntimeError("a bug"), []) is None


def _worker_processes(pid):
    """The pids of Beam's worker processes under `pid` (the python of `sh -c python ...`)."""
    found = []
    children = []
    for task in glob.glob("/proc/%d/task/*/children" % pid):  # any thread's children
        try:
            with open(task) as f:
                children += f.read().split()
        except OSError:
            continue
    for child in children:
        try:
            with open("/proc/%s/cmdline" % child, "rb") as f:
                command = f.read()
        except OSError:
            continue
        if b"sdk_worker_main" in command:
            if not command.startswith(b"/bin/sh"):
                found.append(int(child))
            found += _worker_processes(int(child))
    return found


def _holders(pids, path):
    """The processes of `pids` with `path` open."""
    found = []
    for pid in pids:
        for fd in glob.glob("/proc/%d/fd/*" % pid):
            try:
                if os.readlink(fd) == str(path):
                    found.append(pid)
                    break
            except OSError:
                continue
    return found


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs Linux's /proc")
def test_a_worker_process_killed_is_one_line(corpus, tmp_path):
    # The worker reading the held pipe is at work (past its start-up, inside the
    # pipeline). One killed while it starts would instead leave Beam waiting for ever for
    # it to connect (Beam's runner; Ctrl-C or SIGTERM still end the run cleanly).
    pipe = tmp_path / "big-1.txt"
    with _started_on_a_held_pipe(corpus, tmp_path, *ONE_PROCESS) as proc:
        wait_until(lambda: _holders(_worker_processes(proc.pid), pipe), proc,
                   what="the worker that holds the named pipe")
        os.kill(_holders(_worker_processes(proc.pid), pipe)[0], signal.SIGKILL)
        try:
            _, err = proc.communicate(timeout=HANG_GUARD_SECONDS)
        except subprocess.TimeoutExpired:
            proc.terminate()  # its own clean-up
            pytest.fail("the run hung after its worker was killed: %s"
                        % proc.communicate(timeout=HANG_GUARD_SECONDS)[1][-3000:])
    assert proc.returncode == 1, err[-3000:]
    assert "Traceback" not in err and "Exception in thread" not in err, err[-3000:]
    assert err.splitlines()[-1].startswith(
        "error: a Beam worker process ended before the pipeline finished"), err[-3000:]
    assert sorted(os.listdir(tmp_path)) == ["big-0.txt", "big-1.txt"]


def test_the_python_tfrecord_writer_writes_tensorflows_bytes(tmp_path):
    """A Beam worker that has not imported TensorFlow writes its small local shards in
    Python: byte for byte what tf.io.TFRecordWriter writes."""
    # CRC-32C of "123456789" is 0xe3069283 (the standard check value); masked as TFRecord does.
    assert pretraining_beam.masked_crc32c(b"123456789") == 0xc78ab0e5
    records = [b"", b"x", bytes(range(256)) * 40, b"\xff" * 70000]
    with tf.io.TFRecordWriter(str(tmp_path / "tf.tfrecord")) as writer:
        for record in records:
            writer.write(record)
    count = pretraining_beam._write_records(str(tmp_path / "py.tfrecord"), iter(records), 1000)
    python_bytes = b"".join(pretraining_beam.tfrecord_frame(r) for r in records)
    assert count == 4 and python_bytes == (tmp_path / "tf.tfrecord").read_bytes()
    # TensorFlow is imported here (this test), so _write_records used its writer: same file.
    assert (tmp_path / "py.tfrecord").read_bytes() == python_bytes
