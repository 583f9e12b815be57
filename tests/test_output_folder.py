"""A converter's output folder (bert_tf2/base/output_folder.py), issue 91: a folder that is
a mount point filled in place, a private folder kept private, a full disk and an unwritable
parent in one line naming the user's path, never our temporary's."""
import errno
import json
import os
import re
import stat

import pytest
import tensorflow as tf

import convert_tf1_checkpoint
from bert_tf2 import fileutil
from bert_tf2.base import output_folder
from bert_tf2.trainer import checkpoints
from test_path_match import _convert, _tf1_source

_TOOL = "test tool"
_PATTERNS = ("a.txt", "b.txt", "sub/*")


def _build(texts):
    """build(temp) writing {name: text} into the folder."""
    def build(temp):
        for name, text in texts.items():
            os.makedirs(os.path.dirname(os.path.join(temp, name)), exist_ok=True)
            with open(os.path.join(temp, name), "w") as f:
                f.write(text)
        return os.path.join(temp, "a.txt")
    return build


def _mounted(monkeypatch, folder):
    """`folder` as a mount point: os.path.ismount says so, and renaming it fails as over a
    mount (EBUSY), as docker -v and tmpfs make it."""
    real_ismount, real_rename = os.path.ismount, os.rename
    monkeypatch.setattr(os.path, "ismount",
                        lambda p: os.path.realpath(p) == str(folder) or real_ismount(p))

    def rename(source, target, *args, **kwargs):
        if str(folder) in (os.path.realpath(str(source)), os.path.realpath(str(target))):
            raise OSError(errno.EBUSY, "Device or resource busy", str(source))
        return real_rename(source, target, *args, **kwargs)
    monkeypatch.setattr(os, "rename", rename)
    real_gfile_rename = tf.io.gfile.rename

    def gfile_rename(source, target, *args, **kwargs):
        if str(folder) in (os.path.realpath(str(source)), os.path.realpath(str(target))):
            raise tf.errors.FailedPreconditionError(None, None,
                                                    "%s; Device or resource busy" % source)
        return real_gfile_rename(source, target, *args, **kwargs)
    monkeypatch.setattr(tf.io.gfile, "rename", gfile_rename)


def test_an_output_dir_that_is_a_mount_point_is_filled_in_place(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("the user's")
    _mounted(monkeypatch, out)
    result = output_folder.write_outputs_aside(
        str(out), _TOOL, _PATTERNS, _build({"a.txt": "1", "sub/c.txt": "1"}))
    assert result == str(out / "a.txt")
    # Again: the earlier outputs replaced (b.txt new, sub/c.txt gone), the user's kept.
    output_folder.write_outputs_aside(str(out), _TOOL, _PATTERNS,
                                      _build({"a.txt": "2", "b.txt": "2"}))
    assert sorted(os.listdir(out)) == ["a.txt", "b.txt", output_folder.OUTPUTS_RECORD,
                                       "notes.txt"]
    assert (out / "a.txt").read_text() == "2" and (out / "notes.txt").read_text() == "the user's"
    record = json.loads((out / output_folder.OUTPUTS_RECORD).read_text())
    assert record[_TOOL] == {"files": ["a.txt", "b.txt"]}


def test_a_kill_while_filling_a_mount_point_leaves_the_set_pending(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    _mounted(monkeypatch, out)
    output_folder.write_outputs_aside(str(out), _TOOL, _PATTERNS, _build({"a.txt": "1"}))
    real = os.replace

    def killed(source, target):
        if target.endswith("b.txt"):
            raise KeyboardInterrupt()
        return real(source, target)
    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", killed)
        patch.setattr(fileutil, "remove", lambda path: None)  # a kill: no clean-up
        with pytest.raises(KeyboardInterrupt):
            output_folder.write_outputs_aside(str(out), _TOOL, _PATTERNS,
                                              _build({"a.txt": "2", "b.txt": "2"}))
    record = json.loads((out / output_folder.OUTPUTS_RECORD).read_text())
    assert record[_TOOL]["pending"]  # not recorded complete
    output_folder.write_outputs_aside(str(out), _TOOL, _PATTERNS,
                                      _build({"a.txt": "3", "b.txt": "3"}))
    assert sorted(os.listdir(out)) == ["a.txt", "b.txt", output_folder.OUTPUTS_RECORD]
    assert json.loads((out / output_folder.OUTPUTS_RECORD).read_text())[_TOOL] == {
        "files": ["a.txt", "b.txt"]}


@pytest.mark.parametrize("direction", ["tf1_to_tf2", "tf2_to_tf1"])
def test_a_conversion_into_a_mount_point(tmp_path, monkeypatch, direction):
    source, cfg, cfg_path = _tf1_source(tmp_path)
    if direction == "tf2_to_tf1":
        source, _ = convert_tf1_checkpoint.tf1_to_tf2(
            source, cfg, str(tmp_path / "t" / "bert_model.ckpt"))
    out = tmp_path / "out"
    out.mkdir()
    _mounted(monkeypatch, out)
    for _ in range(2):
        result = _convert(source, cfg_path, out)
    assert checkpoints.CheckpointContents(result.outputs["checkpoint"]).model_names()
    assert not [n for n in os.listdir(out) if n.startswith(".")]


def test_a_private_output_dir_stays_private(tmp_path):
    out = tmp_path / "out"
    out.mkdir(mode=0o700)
    os.chmod(out, 0o700)
    source, _, cfg_path = _tf1_source(tmp_path)
    for _ in range(2):
        _convert(source, cfg_path, out)
        assert stat.S_IMODE(os.stat(out).st_mode) == 0o700
    os.chmod(out, 0o750)
    output_folder.write_outputs_aside(str(out), _TOOL, _PATTERNS, _build({"a.txt": "1"}))
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o750


@pytest.mark.parametrize("raised", [
    OSError(errno.ENOSPC, "No space left on device"),
    tf.errors.ResourceExhaustedError(None, None, "No space left on device")])
def test_a_full_disk_is_one_line_naming_the_output(tmp_path, raised):
    out = tmp_path / "out"
    output_folder.write_outputs_aside(str(out), _TOOL, _PATTERNS, _build({"a.txt": "1"}))

    def full(temp):
        with open(os.path.join(temp, "a.txt"), "w") as f:
            f.write("partial")
        if isinstance(raised, OSError):
            raise OSError(raised.errno, raised.strerror, os.path.join(temp, "a.txt"))
        raise tf.errors.ResourceExhaustedError(
            None, None, "%s/a.txt; No space left on device" % temp)
    with pytest.raises(ValueError) as error:
        output_folder.write_outputs_aside(str(out), _TOOL, _PATTERNS, full)
    text = str(error.value)
    assert text.startswith("--output_dir=%s: no space left on the device" % out)
    assert "\n" not in text and ".tmp-" not in text and "nothing was replaced" in text
    assert sorted(os.listdir(tmp_path)) == ["out"]
    assert (out / "a.txt").read_text() == "1"


def test_an_unwritable_parent_is_named_by_the_users_path(tmp_path, monkeypatch):
    out = tmp_path / "parent" / "out"

    def denied(path):
        raise tf.errors.PermissionDeniedError(None, None, "%s; Permission denied" % path)
    monkeypatch.setattr(tf.io.gfile, "makedirs", denied)
    with pytest.raises(ValueError) as error:
        output_folder.write_outputs_aside(str(out), _TOOL, _PATTERNS, _build({"a.txt": "1"}))
    assert str(error.value) == "--output_dir=%s is not writable: %s; Permission denied" % (
        out, out)


@pytest.mark.parametrize("value", [[1], 3, "text", None, {"files": {}, "pending": 5},
                                   {"files": {}, "folders": {"a": 1}},
                                   {"files": {}, "pending": [1]}, {"files": {}, "folders": 7}])
def test_a_training_files_record_of_another_type_is_one_line(tmp_path, value):
    """Issue 91 (low): training_files.json holding a list, a number or fields of other
    types gave raw TypeErrors; every reader now refuses it in one line naming the file."""
    from bert_tf2.trainer import written_files  # pylint: disable=import-outside-toplevel
    (tmp_path / "x.txt").write_text("x")
    (tmp_path / written_files.FILE).write_text(json.dumps(value))
    for call in (lambda: written_files.proven(str(tmp_path), "x.txt"),
                 lambda: written_files.note(str(tmp_path), ["x.txt"]),
                 lambda: written_files.note_folder(str(tmp_path), "sub"),
                 lambda: written_files.forget(str(tmp_path), ["y"]),
                 lambda: written_files.settle(str(tmp_path), "x*")):
        with pytest.raises(ValueError, match=r"^%s is not a record of this program's "
                                             r"training files" % re.escape(
                                                 str(tmp_path / written_files.FILE))):
            call()
    assert json.loads((tmp_path / written_files.FILE).read_text()) == value


@pytest.mark.parametrize("value", [[1], 3, {"test tool": [1]}, {"test tool": {"files": 3}},
                                   {"test tool": {"files": [1]}}])
def test_an_outputs_record_of_another_type_is_one_line_and_kept(tmp_path, value):
    """bert_tf2_outputs.json of another type was read as empty and replaced (a list), or
    a raw AttributeError / TypeError; now one line naming it, nothing changed."""
    out = tmp_path / "out"
    out.mkdir()
    (out / output_folder.OUTPUTS_RECORD).write_text(json.dumps(value))
    with pytest.raises(ValueError, match=r"^%s is not a record of the files bert-tf2's "
                                         % (out / output_folder.OUTPUTS_RECORD)):
        output_folder.write_outputs_aside(str(out), _TOOL, _PATTERNS, _build({"a.txt": "1"}))
    assert os.listdir(out) == [output_folder.OUTPUTS_RECORD]
    assert json.loads((out / output_folder.OUTPUTS_RECORD).read_text()) == value


@pytest.mark.parametrize("mount", [False, True])
def test_a_full_disk_under_tensorflow_is_one_plain_line(tmp_path, monkeypatch, mount):
    # TensorFlow's own error line as a converter's save met it on a full tmpfs: the op's
    # names around it ({{function_node ...}}, [Op:SaveV2]) and, on a mount point, the build
    # folder inside it (.bert_tf2_build) were in the one line before.
    out = tmp_path / "out"
    output_folder.write_outputs_aside(str(out), _TOOL, _PATTERNS, _build({"a.txt": "1"}))
    if mount:
        _mounted(monkeypatch, out)

    def full(temp):
        raise tf.errors.ResourceExhaustedError(
            None, None, "{{function_node __wrapped__SaveV2_dtypes_47_device_/job:localhost/"
                        "replica:0/task:0/device:CPU:0}} %s/a.txt; No space left on device "
                        "[Op:SaveV2]" % temp)
    with pytest.raises(ValueError) as error:
        output_folder.write_outputs_aside(str(out), _TOOL, _PATTERNS, full)
    assert str(error.value) == ("--output_dir=%s: no space left on the device (%s/a.txt; No "
                                "space left on device); nothing was replaced" % (out, out))
    assert (out / "a.txt").read_text() == "1"


def test_a_full_disk_while_a_mount_point_fills_says_what_it_left(tmp_path, monkeypatch):
    # A mount point is filled in place: once its earlier outputs are gone, a full disk (the
    # last record write, seen on a 16k tmpfs) leaves the new files pending. The line said
    # "nothing was replaced" while the earlier outputs were gone.
    out = tmp_path / "out"
    output_folder.write_outputs_aside(str(out), _TOOL, _PATTERNS, _build({"a.txt": "1"}))
    _mounted(monkeypatch, out)
    real, records = fileutil.atomic_open, []

    def full_at_the_last_record(path, *args, **kwargs):
        if os.path.basename(path) == output_folder.OUTPUTS_RECORD:
            records.append(path)
            if len(records) == 2:  # the pending record written, the files moved in
                raise OSError(errno.ENOSPC, "No space left on device", path)
        return real(path, *args, **kwargs)
    monkeypatch.setattr(fileutil, "atomic_open", full_at_the_last_record)
    with pytest.raises(ValueError) as error:
        output_folder.write_outputs_aside(str(out), _TOOL, _PATTERNS, _build({"a.txt": "2"}))
    text = str(error.value)
    assert "nothing was replaced" not in text and "\n" not in text
    assert text.startswith("--output_dir=%s: no space left on the device" % out)
    assert "outputs are incomplete" in text and output_folder.OUTPUTS_RECORD in text
    assert json.loads((out / output_folder.OUTPUTS_RECORD).read_text())[_TOOL]["pending"]


def test_a_full_disk_a_library_reports_its_own_way_is_the_same_line(tmp_path):
    # keras-hub's save_to_preset on a full tmpfs: h5py's RuntimeError (errno = 28 in its
    # text, several lines naming our temporary) ended the export in a raw traceback.
    out = tmp_path / "out"
    output_folder.write_outputs_aside(str(out), _TOOL, _PATTERNS, _build({"a.txt": "1"}))

    def full(temp):
        raise RuntimeError("Disable slist on flush dest failure failed (file write failed: "
                           "time = Sat Nov 28 15:56:42 2026\n, filename = '%s/task.weights.h5',"
                           " file descriptor = 3, errno = 28, error message = 'No space left "
                           "on device', buf = 0x555fb7215bc8)" % temp)
    with pytest.raises(ValueError) as error:
        output_folder.write_outputs_aside(str(out), _TOOL, _PATTERNS, full)
    text = str(error.value)
    assert text.startswith("--output_dir=%s: no space left on the device" % out)
    assert "\n" not in text and ".tmp-" not in text and text.endswith("nothing was replaced")
    assert sorted(os.listdir(tmp_path)) == ["out"]

    def other(temp):
        raise RuntimeError("a library's own failure in %s" % temp)
    with pytest.raises(RuntimeError, match="own failure"):
        output_folder.write_outputs_aside(str(out), _TOOL, _PATTERNS, other)
    assert sorted(os.listdir(tmp_path)) == ["out"]
