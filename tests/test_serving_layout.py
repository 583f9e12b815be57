"""export_saved_model --export_base: the version folder an export takes, by TF Serving's
reading of folder names (a 64-bit integer; leading zeros read alike)."""
import os

import pytest

import export_saved_model as esm
from bert_tf2.export import serving_layout


def _target(base, version=None):
    settings = esm.Settings(model_type="classifier", export_base=str(base), version=version)
    serving_layout.check(settings)
    return serving_layout.target(settings)


def test_a_version_tf_serving_reads_as_an_existing_one_is_refused(tmp_path):
    """Issue 91: --version=7 was written beside an existing 007, two folders TF Serving
    reads as version 7 (which one it serves is not said). Refused in one line naming the
    folder, as an existing 7 is (docs/serving.md: an existing number is never written);
    the default next number already read 007 as 7."""
    (tmp_path / "007").mkdir()
    with pytest.raises(ValueError) as raised:
        _target(tmp_path, 7)
    assert str(raised.value) == (
        "--version=7: %s exists, which TF Serving reads as version 7 too (a server may be "
        "loading it; versions are never replaced): leave --version out for the next free "
        "number" % (tmp_path / "007"))
    (tmp_path / "0008.litert").mkdir()
    with pytest.raises(ValueError, match=r"0008.litert exists, which TF Serving reads as "
                                         r"version 8 too"):
        _target(tmp_path, 8)
    assert _target(tmp_path) == str(tmp_path / "9")
    assert _target(tmp_path, 70) == str(tmp_path / "70")
    assert sorted(os.listdir(str(tmp_path))) == ["0008.litert", "007"]


def test_versions_past_int64_are_refused_and_not_counted(tmp_path):
    """Issue 91: TF Serving reads a version as a 64-bit integer: --version past it was
    written (a folder no server serves); a folder named past it is no version (the next
    number is not counted from it), and after the largest there is no next one."""
    largest = 2 ** 63 - 1
    with pytest.raises(ValueError) as raised:
        _target(tmp_path, largest + 1)
    assert str(raised.value) == (
        "--version=%d: past %d, the largest version number TF Serving reads (a 64-bit "
        "integer)" % (largest + 1, largest))
    assert _target(tmp_path, largest) == str(tmp_path / str(largest))
    (tmp_path / str(largest + 5)).mkdir()
    (tmp_path / "3").mkdir()
    assert _target(tmp_path) == str(tmp_path / "4")
    (tmp_path / str(largest)).mkdir()
    with pytest.raises(ValueError, match=r"its highest version is %d, the largest TF Serving "
                                         r"reads: export into a new" % largest):
        _target(tmp_path)
