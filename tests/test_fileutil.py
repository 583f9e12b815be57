"""fileutil.py: atomic outputs, eval_results.txt, output dir check, input globs, outputs
named twice, our temporaries, the files a tool wrote."""
import json
import os
import re
import subprocess

import numpy as np
import pytest

from bert_tf2 import fileutil
from bert_tf2.base import output_folder


def test_atomic_open_leaves_nothing_on_failure(tmp_path):
    path = tmp_path / "out.txt"
    with pytest.raises(RuntimeError):
        with fileutil.atomic_open(str(path)) as f:
            f.write("partial")
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []
    with fileutil.atomic_open(str(path)) as f:
        f.write("done")
    assert path.read_text() == "done"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_expand_input_files(tmp_path):
    for name in ("b.tfrecord", "a.tfrecord"):
        (tmp_path / name).write_bytes(b"")
    files = fileutil.expand_input_files("%s/*.tfrecord" % tmp_path)
    assert [f.rsplit("/", 1)[-1] for f in files] == ["a.tfrecord", "b.tfrecord"]
    with pytest.raises(ValueError, match="matches no file"):
        fileutil.expand_input_files(str(tmp_path / "none*.tfrecord"))


def test_write_eval_results_format(tmp_path):
    path = tmp_path / "eval_results.txt"
    fileutil.write_eval_results(str(path), {"loss": np.float32(0.5), "global_step": 3,
                                            "eval_accuracy": np.float32(0.25)})
    assert path.read_text() == "eval_accuracy = 0.25\nglobal_step = 3\nloss = 0.5\n"


def test_unwritable_output_dir_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ValueError, match="not writable"):
        fileutil.prepare_output_dir(str(blocker / "sub"))


def test_atomic_open_writes_an_empty_file_when_nothing_is_written(tmp_path):
    path = tmp_path / "empty.tsv"
    with fileutil.atomic_open(str(path)) as f:
        del f
    assert path.read_text() == ""
    assert [p.name for p in tmp_path.iterdir()] == ["empty.tsv"]


def test_output_paths_of_the_wrong_kind_are_errors_and_stay_untouched(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("keep me")
    a_dir = tmp_path / "a_dir"
    a_dir.mkdir()
    (a_dir / "inside").write_text("keep me too")
    with pytest.raises(ValueError, match=r"--output_dir=.*a_file is a file, not a directory"):
        fileutil.prepare_output_dir(str(a_file))
    with pytest.raises(ValueError, match=r"--output_file=.*a_dir is a directory"):
        fileutil.check_output_file(str(a_dir), "--output_file")
    with pytest.raises(ValueError, match="is a directory"):
        with fileutil.atomic_open(str(a_dir)) as f:
            f.write("x")
    assert a_file.read_text() == "keep me"
    assert (a_dir / "inside").read_text() == "keep me too"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_dir", "a_file"]
    # A pipe or a device (through a symbolic link too) would be renamed over: refused.
    os.mkfifo(str(tmp_path / "pipe"))
    os.symlink(os.devnull, str(tmp_path / "null"))
    for name, kind in (("pipe", "pipe"), ("null", "device")):
        with pytest.raises(ValueError, match=r"--output_file=.*%s is a %s: .* %ss are not "
                                             r"supported" % (name, kind, kind)):
            fileutil.prepare_output_file(str(tmp_path / name), "--output_file")
    assert fileutil.special_file_kind(str(tmp_path / "a_file")) is None
    assert fileutil.special_file_kind(str(tmp_path / "missing")) is None
    assert fileutil.special_file_kind("gs://bucket/x") is None


def test_read_text_names_the_file_and_line(tmp_path):
    good = tmp_path / "good.txt"
    good.write_bytes(b"\xef\xbb\xbfa\nb\n")
    assert fileutil.read_text(str(good)) == "a\nb\n"
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"a\nb\n\xff\n")
    with pytest.raises(ValueError, match=r"bad\.txt, line 3: not valid UTF-8"):
        fileutil.read_text(str(bad))
    with pytest.raises(ValueError, match=r"missing\.txt: no such file"):
        fileutil.read_text(str(tmp_path / "missing.txt"))


# ---------------------------------------------------------------------------
# Outputs named twice, our temporaries, files a tool did not write
# ---------------------------------------------------------------------------

def test_an_output_named_twice_is_refused_however_spelt(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a").mkdir()
    absolute = str(tmp_path / "x.tfrecord")
    for spelling in ("x.tfrecord", "./x.tfrecord", "a/../x.tfrecord", absolute,
                     "./a/./../x.tfrecord"):
        with pytest.raises(ValueError, match=r"^--output_file names one file twice "
                                             r"\(x\.tfrecord and %s\)" % re.escape(spelling)):
            fileutil.output_files("x.tfrecord, %s" % spelling, 0, "--output_file")
    assert fileutil.output_files("x.tfrecord,a/x.tfrecord", 0, "--output_file") == [
        "x.tfrecord", "a/x.tfrecord"]
    assert fileutil.check_distinct(["gs://b/r/x", "gs://b/r/y"], "--output_file") is None
    with pytest.raises(ValueError, match="names one file twice"):
        fileutil.check_distinct(["gs://b/r/x", "gs://b/q/../r/x"], "--output_file")
    with pytest.raises(ValueError, match=r"^--output_file=x\.tfrecord is also an input "
                                         r"\(--input_file=%s\)" % re.escape(absolute)):
        fileutil.check_distinct(["x.tfrecord"], "--output_file", [absolute])
    assert os.listdir(tmp_path) == ["a"]


def test_temporary_names_are_recognised_and_mapped_back():
    name = fileutil.temp_name("out/x-00001-of-00003", "beam-tmp")
    assert re.match(r"^out/x-00001-of-00003\.beam-tmp-[0-9a-f]{8}$", name)
    assert fileutil.is_temporary(name + "/") == "out/x-00001-of-00003"
    assert fileutil.is_temporary("out/x.tfrecord") is None
    assert fileutil.is_temporary("out/x.tmp-notahex") is None
    assert fileutil.without_temp_names("a/x.tfrecord.tmp-259a13ee; Not a directory") == \
        "a/x.tfrecord; Not a directory"


def test_leftovers_of_an_interrupted_run_are_removed_others_refused(tmp_path):
    prefix = str(tmp_path / "pre")
    leftovers = ["pre-00000-of-00003.beam-tmp-0123abcd", "pre-00001-of-00005.shards-89abcdef",
                 "pre-00002-of-00003.tmp-00ff00ff"]
    (tmp_path / leftovers[0]).mkdir()
    (tmp_path / leftovers[0] / "file-000001-abc").write_bytes(b"piece")
    for name in leftovers[1:]:
        (tmp_path / name).write_bytes(b"partial")
    (tmp_path / "x.tfrecord.tmp-deadbeef").write_bytes(b"partial")
    (tmp_path / "x.tfrecord.notes").write_bytes(b"the user's")
    names = fileutil.output_files(prefix, 3, "--output_file")
    assert names == ["%s-%05d-of-00003" % (prefix, i) for i in range(3)]
    fileutil.output_files(str(tmp_path / "x.tfrecord"), 0, "--output_file")
    assert sorted(os.listdir(tmp_path)) == ["x.tfrecord.notes"]
    # A shard of another run (not a temporary) is never removed.
    (tmp_path / "pre-00000-of-00005").write_bytes(b"records")
    with pytest.raises(ValueError, match="already holds files of another run"):
        fileutil.output_files(prefix, 3, "--output_file")
    assert sorted(os.listdir(tmp_path)) == ["pre-00000-of-00005", "x.tfrecord.notes"]


def test_input_globs_skip_our_temporaries(tmp_path):
    for name in ("p-00000-of-00002", "p-00001-of-00002", "p-00000-of-00002.tmp-0a1b2c3d"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "p-00001-of-00002.beam-tmp-0a1b2c3d").mkdir()
    files = fileutil.expand_input_files(str(tmp_path / "p-*"))
    assert [os.path.basename(f) for f in files] == ["p-00000-of-00002", "p-00001-of-00002"]
    named = str(tmp_path / "p-00000-of-00002.tmp-0a1b2c3d")
    assert fileutil.expand_input_files(named) == [named]  # named on purpose: read


def _tool_writes(folder, names, patterns=("model.*", "settings.json", "sub/*")):
    def build(temp):
        for name in names:
            os.makedirs(os.path.dirname(os.path.join(temp, name)), exist_ok=True)
            with open(os.path.join(temp, name), "w") as f:
                f.write("new " + name)
    output_folder.write_outputs_aside(str(folder), "tool", patterns, build)


def test_a_tool_replaces_only_the_files_it_wrote(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "model.index").write_text("someone else's")
    (folder / "notes.txt").write_text("the user's")
    with pytest.raises(ValueError, match=r"^--output_dir=\S*out holds model\.index, which "
                                         r"tool did not write: choose another folder"):
        _tool_writes(folder, ["model.index"])
    assert sorted(os.listdir(folder)) == ["model.index", "notes.txt"]
    (folder / "model.index").unlink()
    inode = os.stat(folder / "notes.txt").st_ino
    _tool_writes(folder, ["model.index", "model.data", "settings.json", "sub/a"])
    record = json.loads((folder / output_folder.OUTPUTS_RECORD).read_text())
    assert record == {"tool": {"files": ["model.data", "model.index", "settings.json",
                                         "sub/a"]}}
    # Again, for a model without settings: none of the earlier files is left; the user's
    # file is carried over as it is (the same file: a hard link).
    _tool_writes(folder, ["model.index"])
    assert sorted(os.listdir(folder)) == [output_folder.OUTPUTS_RECORD, "model.index", "notes.txt"]
    assert (folder / "model.index").read_text() == "new model.index"
    assert os.stat(folder / "notes.txt").st_ino == inode
    # Another tool's files are not this tool's.
    with pytest.raises(ValueError, match="which other did not write"):
        output_folder.write_outputs_aside(str(folder), "other", ["model.*"], lambda temp: None)
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_a_run_that_fails_half_way_leaves_nothing(tmp_path):
    folder = tmp_path / "out"

    def half(temp):
        with open(os.path.join(temp, "settings.json"), "w") as f:
            f.write("half")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        output_folder.write_outputs_aside(str(folder), "tool", ["model.*", "settings.json"], half)
    assert os.listdir(tmp_path) == []
    _tool_writes(folder, ["model.index"])
    assert sorted(os.listdir(folder)) == [output_folder.OUTPUTS_RECORD, "model.index"]


def test_a_folder_a_training_run_holds_is_not_replaced(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    held = fileutil.held_output_locks()
    fileutil.lock_output_dir(str(folder))
    try:
        with pytest.raises(ValueError, match=r"out is in use by a training run: wait for it"):
            _tool_writes(folder, ["model.index"])
        assert os.listdir(folder) == [fileutil.LOCK_FILE]
    finally:
        fileutil.release_output_locks(keep=held)
    _tool_writes(folder, ["model.index"])  # a killed run's lock file is nobody's output
    assert sorted(os.listdir(folder)) == [output_folder.OUTPUTS_RECORD, "model.index"]


def test_the_current_folder_is_not_replaced(tmp_path, monkeypatch):
    folder = tmp_path / "out"
    (folder / "sub").mkdir(parents=True)
    for where, named in ((folder, "."), (folder / "sub", str(folder))):
        monkeypatch.chdir(where)
        with pytest.raises(ValueError, match=r"is \(or holds\) the current folder"):
            _tool_writes(named, ["model.index"])
    assert sorted(os.listdir(folder)) == ["sub"] and sorted(os.listdir(tmp_path)) == ["out"]


def test_a_folder_holding_a_bind_mount_is_not_replaced(tmp_path):
    """A converter's output folder with a bind mount inside (as docker -v makes, within one
    file system, where os.path.ismount says False): refused before anything is written, so
    the mounted files are never moved with the folder."""
    folder, shared = tmp_path / "out", tmp_path / "shared"
    (folder / "logs").mkdir(parents=True)
    shared.mkdir()
    (shared / "theirs.txt").write_text("another run's")
    if subprocess.run(["mount", "--bind", str(shared), str(folder / "logs")],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot bind-mount here (not root?)")
    try:
        assert not os.path.ismount(str(folder / "logs"))  # what the check must not rely on
        with pytest.raises(ValueError, match=r"out holds the mount point logs: its files would "
                                             r"be moved; .*\(nothing was written\)$"):
            _tool_writes(folder, ["model.index"])
        assert sorted(os.listdir(folder)) == ["logs"]
        assert sorted(os.listdir(tmp_path)) == ["out", "shared"]
    finally:
        subprocess.run(["umount", str(folder / "logs")], check=True)
    assert (shared / "theirs.txt").read_text() == "another run's"


@pytest.fixture
def full_disk(tmp_path):
    """A 64 KB tmpfs folder (needs root); the test is skipped where it cannot be mounted."""
    folder = tmp_path / "full"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root?)")
    yield folder
    subprocess.run(["umount", str(folder)], capture_output=True)


def test_a_full_disk_leaves_no_partial_output(full_disk):
    import tensorflow as tf
    from bert_tf2 import cli
    with pytest.raises(tf.errors.OpError) as raised:
        with fileutil.atomic_open(str(full_disk / "a.txt")) as f:
            for _ in range(20):
                f.write("x" * 10000)
    assert cli.error_line(raised.value) == (
        "error: %s; No space left on device" % (full_disk / "a.txt"), 1)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable(tf.zeros([50000]))),
                                         str(full_disk / "out"), max_to_keep=1,
                                         checkpoint_name="model.ckpt")
    with pytest.raises(tf.errors.OpError) as raised:
        fileutil.save_checkpoint(manager, 7)
    assert cli.error_line(raised.value) == (
        "error: %s; No space left on device" % (full_disk / "out" / "model.ckpt-7"), 1)
    assert os.listdir(full_disk) == ["out"] and os.listdir(full_disk / "out") == []
