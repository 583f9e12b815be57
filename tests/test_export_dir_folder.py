"""The export's folder swap (saved_model_dir.write_saved_model) under the converters' rule
(output_folder.swap_in), issue 91 items 5 and 6: an --export_dir that is a mount point is
filled in place (a kill leaves nothing recorded complete), an --export_base that is one gets
its versions as before, and a private export folder stays private."""
import json
import os
import stat

import pytest
import tensorflow as tf

from bert_tf2 import fileutil
from bert_tf2.base import output_folder
from bert_tf2.export import saved_model_dir
from test_export_saved_model import _SmallModule, _earlier_export
from test_output_folder import _mounted

_INFO = saved_model_dir.INFO_FILE
_WARMUP = os.path.join("assets.extra", "tf_serving_warmup_requests")
# An export's top with the user's notes.txt (no --litert model, record or temporary).
_LISTING = ["assets", "assets.extra", "fingerprint.pb", "notes.txt", "saved_model.pb",
            "variables"]


def _litert(folder):
    """before_rename writing a --litert export's model (and the vocabulary it reads)."""
    for name, text in (("model_fp32.tflite", "converted"),
                       (saved_model_dir.VOCAB_FILE, "[PAD]\n")):
        with open(os.path.join(folder, name), "w") as f:
            f.write(text)
    return ["model_fp32.tflite", saved_model_dir.VOCAB_FILE]


def _served(folder):
    loaded = tf.saved_model.load(str(folder))
    return float(loaded.signatures["serving_default"](x=tf.constant([2.0]))["y"].numpy()[0])


def _mounted_export(tmp_path, monkeypatch):
    """An earlier --litert export (y = 2x) with a note and warm-up requests of the user's,
    in a folder then made a mount point."""
    export_dir = tmp_path / "model"
    saved_model_dir.write_saved_model(_SmallModule(2.0), str(export_dir), {"a": 1},
                                      before_rename=_litert)
    (export_dir / "notes.txt").write_text("how we serve it")
    (export_dir / _WARMUP).write_text("warm-up records")
    _mounted(monkeypatch, export_dir)
    return export_dir


def test_an_export_dir_that_is_a_mount_point_is_filled_in_place(tmp_path, monkeypatch):
    """Before: the re-export's rename over the mount failed with a raw 'Device or resource
    busy'. Now filled in place, twice: the new export whole, the earlier one's --litert
    model gone, what the user added kept, no record or temporary left."""
    export_dir = _mounted_export(tmp_path, monkeypatch)
    for value in (3.0, 4.0):
        assert saved_model_dir.write_saved_model(_SmallModule(value), str(export_dir),
                                                 {"a": value}) == str(export_dir)
        assert _served(export_dir) == 2 * value
        assert json.loads((export_dir / _INFO).read_text()) == {"a": value}
        assert sorted(os.listdir(export_dir)) == _LISTING
        assert (export_dir / "notes.txt").read_text() == "how we serve it"
        assert (export_dir / _WARMUP).read_text() == "warm-up records"
        assert os.listdir(tmp_path) == ["model"]
    # Its rules hold there too: a user's file in variables/ is refused, nothing replaced.
    (export_dir / "variables" / "mine.txt").write_text("mine")
    with pytest.raises(ValueError, match="1 file\\(s\\) it did not write: variables/mine.txt"):
        saved_model_dir.write_saved_model(_SmallModule(5.0), str(export_dir), {"a": 5})
    assert _served(export_dir) == 8.0 and sorted(os.listdir(export_dir)) == _LISTING


def test_a_kill_while_filling_an_export_dir_mount_point_leaves_nothing_complete(
        tmp_path, monkeypatch):
    """A kill at each file moved into the mount point: the folder never reads as a complete
    export (no export_info.json beside a half set; OUTPUTS_RECORD says pending), and the
    next export replaces what was there, the user's files kept."""
    export_dir = _mounted_export(tmp_path, monkeypatch)
    real_replace, real_remove = os.replace, fileutil.remove
    stopped = 0
    while True:
        moves, dead = [], []

        def killed(source, target, moves=moves, dead=dead):
            if len(moves) == stopped:
                dead.append(target)
                raise KeyboardInterrupt()
            moves.append(target)
            return real_replace(source, target)
        with monkeypatch.context() as patch:
            patch.setattr(os, "replace", killed)
            # A kill: no clean-up once it struck.
            patch.setattr(fileutil, "remove",
                          lambda path, dead=dead: None if dead else real_remove(path))
            try:
                saved_model_dir.write_saved_model(_SmallModule(3.0), str(export_dir), {"a": 3})
                break
            except KeyboardInterrupt:
                pass
        assert not (export_dir / _INFO).exists(), stopped
        assert output_folder.pending_in(str(export_dir), "export_saved_model.py"), stopped
        stopped += 1
    # The earlier export's files go first, export_info.json comes in last.
    assert stopped == 5 and moves[-1] == str(export_dir / _INFO)
    saved_model_dir.write_saved_model(_SmallModule(4.0), str(export_dir), {"a": 4})
    assert _served(export_dir) == 8.0
    assert sorted(os.listdir(export_dir)) == _LISTING
    assert (export_dir / _WARMUP).read_text() == "warm-up records"


def test_an_export_base_that_is_a_mount_point_gets_new_versions(tmp_path, monkeypatch):
    """--export_base's versions are built beside them inside it: a base that cannot be
    renamed itself takes new versions (and their LiteRT folders) whole."""
    base = tmp_path / "base"
    base.mkdir()
    _mounted(monkeypatch, base)
    for version in ("1", "2"):
        saved_model_dir.write_saved_model(_SmallModule(2.0), str(base / version), {"a": 1},
                                          before_rename=_litert, new_only=True)
    assert sorted(os.listdir(base)) == ["1", "1.litert", "2", "2.litert"]
    assert _served(base / "2") == 4.0 and (base / "2.litert" / "model_fp32.tflite").exists()


@pytest.mark.parametrize("mode", [0o700, 0o750])
def test_a_private_export_dir_stays_private(tmp_path, mode):
    """Before: a re-export made a 0700 export folder 0755 (the new folder's own mode)."""
    export_dir = tmp_path / "model"
    _earlier_export(export_dir)
    os.chmod(export_dir, mode)
    for value in (3.0, 4.0):
        saved_model_dir.write_saved_model(_SmallModule(value), str(export_dir), {"a": 2})
        assert stat.S_IMODE(os.stat(export_dir).st_mode) == mode
        assert os.stat(export_dir).st_uid == os.getuid()
    assert (export_dir / "notes.txt").read_text() == "how we serve it"


def test_a_reexport_keeps_the_folders_owner(tmp_path):
    """Where the owner can be given (root, as in a container): the export folder of
    another user stays theirs (before: it became the exporting user's)."""
    if os.getuid() != 0:
        pytest.skip("only root can give a folder to another user")
    export_dir = tmp_path / "model"
    _earlier_export(export_dir)
    os.chown(export_dir, 12345, 23456)
    saved_model_dir.write_saved_model(_SmallModule(3.0), str(export_dir), {"a": 2})
    info = os.stat(export_dir)
    assert (info.st_uid, info.st_gid) == (12345, 23456)
