"""fileutil.py: atomic outputs, eval_results.txt, output dir check, input globs."""
import numpy as np
import pytest

from bert_tf2 import fileutil


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
