"""bert_tf2.compat.move_fork: what it leaves alone, how it writes, what it names."""
import os
import signal
import stat

import pytest

from bert_tf2 import fileutil
from bert_tf2.compat import move_fork

IMPORT = b"import tensorflow as tf\n"
MOVED = b"import bert_tf2.tf1 as tf\n"


def _write(path, data=IMPORT):
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(str(path), "wb") as f:
        f.write(data)
    return str(path)


def _run(folder, dry_run=False):
    lines = []
    changed = move_fork.move_fork(str(folder), dry_run=dry_run, report=lines.append)
    return changed, lines


def test_what_is_not_the_forks_is_skipped_and_named(tmp_path):
    fork = tmp_path / "fork"
    own = _write(fork / "model.py")
    others = {name: _write(fork / name / "x.py") for name in (
        "venv/lib/python3.11/site-packages/pkg", "build/lib", "dist", "tensorflow",
        "vendor/bert_tf2", "deps/site-packages")}
    _write(fork / "venv" / "pyvenv.cfg", b"home = /usr\n")
    changed, lines = _run(fork)
    assert changed == [own] and open(own, "rb").read() == MOVED
    for path in others.values():
        assert open(path, "rb").read() == IMPORT, path
    assert sorted(line for line in lines if line.startswith("skipped")) == sorted([
        "skipped %s: a virtual environment" % (fork / "venv"),
        "skipped %s: a build folder" % (fork / "build"),
        "skipped %s: a build folder" % (fork / "dist"),
        "skipped %s: a vendored copy of tensorflow" % (fork / "tensorflow"),
        "skipped %s: a vendored copy of bert_tf2" % (fork / "vendor" / "bert_tf2"),
        "skipped %s: installed packages" % (fork / "deps" / "site-packages")])


def test_links_fifos_and_read_only_files_are_left_alone(tmp_path):
    fork = tmp_path / "fork"
    own = _write(fork / "a.py")
    target = _write(tmp_path / "elsewhere" / "shared.py")
    os.symlink(target, str(fork / "link.py"))
    os.symlink(str(tmp_path / "gone.py"), str(fork / "dangling.py"))
    hard = _write(fork / "hard.py")
    os.link(hard, str(tmp_path / "second_name.py"))
    os.mkfifo(str(fork / "pipe.py"))
    read_only = _write(fork / "ro.py")
    os.chmod(read_only, 0o444)
    # Opening the FIFO would block: the alarm fails the test instead of hanging it.
    def hung(signum, frame):
        raise AssertionError("move_fork opened the FIFO")
    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(30)
    try:
        changed, lines = _run(fork)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert changed == [own]
    assert open(own, "rb").read() == MOVED
    assert open(target, "rb").read() == IMPORT and os.path.islink(str(fork / "link.py"))
    assert os.path.islink(str(fork / "dangling.py"))
    assert open(hard, "rb").read() == IMPORT and os.stat(hard).st_nlink == 2
    assert open(read_only, "rb").read() == IMPORT
    assert lines == [
        "skipped %s: a symlink (change the file it points to, %s)"
        % (fork / "dangling.py", tmp_path / "gone.py"),
        "skipped %s: a hard link (2 names for one file: changing it would change the "
        "others)" % hard,
        "skipped %s: a symlink (change the file it points to, %s)" % (fork / "link.py", target),
        "skipped %s: not a regular file" % (fork / "pipe.py"),
        "skipped %s: read-only" % read_only,
        "changed %s" % own]


def test_writes_are_atomic_keep_the_mode_and_a_failure_changes_nothing(tmp_path, monkeypatch):
    fork = tmp_path / "fork"
    first, second = _write(fork / "a.py"), _write(fork / "b.py")
    os.chmod(first, 0o750)
    # A full disk: the second temporary file cannot be written.
    names = iter([os.path.join(str(fork), "a.py.tmp-1"),
                  os.path.join(str(tmp_path), "no", "such", "b.py.tmp-2")])
    monkeypatch.setattr(fileutil, "temp_name", lambda path: next(names))
    with pytest.raises(OSError, match=r"^move_fork: writing \S+b\.py\.tmp-2 failed .*: no file "
                       r"was changed$"):
        _run(fork)
    assert open(first, "rb").read() == IMPORT and open(second, "rb").read() == IMPORT
    assert sorted(os.listdir(str(fork))) == ["a.py", "b.py"]
    monkeypatch.undo()
    seen = []
    move_fork.move_fork(str(fork), report=lambda line: seen.append(
        (line, open(line.split(" ", 1)[1], "rb").read())))
    # `changed` is said once the file holds the new text.
    assert seen == [("changed %s" % first, MOVED), ("changed %s" % second, MOVED)]
    assert stat.S_IMODE(os.stat(first).st_mode) == 0o750


SOURCE = b'''"""A fork's module.

    import tensorflow as tf
"""
import tensorflow as tf
import tensorflow.compat.v1 as tf1
from tensorflow.compat import v1
from tensorflow import keras
from tensorflow.python.framework import graph_util
from tensorflow.python.ops import gen_math_ops
EXAMPLE = """
from tensorflow.contrib import slim
"""
cell = tf.contrib.rnn.LSTMCell(4)
norm = tf.contrib.layers.layer_norm
scope = tf.contrib.slim.arg_scope
decoder = tf.contrib.seq2seq.dynamic_decode(x)
batch = tf.contrib.layers.batch_norm(x)
'''


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry_run", "write"])
def test_only_code_is_changed_and_every_other_spelling_is_named(tmp_path, dry_run):
    path = _write(tmp_path / "fork" / "m.py", SOURCE)
    changed, lines = _run(tmp_path / "fork", dry_run)
    assert changed == [path]
    after = open(path, "rb").read()
    if dry_run:
        assert after == SOURCE
    else:  # line 5 only: the docstring and the string keep their text
        assert after == SOURCE.replace(b'"""\nimport tensorflow as tf\n',
                                       b'"""\nimport bert_tf2.tf1 as tf\n', 1)
    assert lines == [
        "%s:6: left as it was: import tensorflow.compat.v1 as tf1 (change it to `import "
        "bert_tf2.tf1 as tf`: tf.compat.v1 with tf.contrib, tf.estimator and tf.layers)" % path,
        "%s:7: left as it was: from tensorflow.compat import v1 (change it to `import "
        "bert_tf2.tf1 as tf`: tf.compat.v1 with tf.contrib, tf.estimator and tf.layers)" % path,
        "%s:8: left as it was (change it by hand): from tensorflow import keras" % path,
        "%s:9: left as it was: from tensorflow.python.framework import graph_util "
        "(tensorflow.python is TensorFlow's private code; use tf.graph_util "
        "(tf.compat.v1.graph_util: convert_variables_to_constants, extract_sub_graph, "
        "remove_training_nodes))" % path,
        "%s:10: left as it was: from tensorflow.python.ops import gen_math_ops (tensorflow."
        "python is TensorFlow's private code; use its public name in tf (tf.compat.v1))" % path,
        "%s:16: tf.contrib.slim is not in bert_tf2.tf1 (TensorFlow 2 removed it): use pip "
        "install tf-slim and `import tf_slim as slim`" % path,
        "%s:17: tf.contrib.seq2seq is not in bert_tf2.tf1 (TensorFlow 2 removed it): use a "
        "decoder of your own on tf.nn.raw_rnn / tf.while_loop (TF 2 kept no seq2seq; "
        "tensorflow-addons' is unmaintained)" % path,
        "%s:18: tf.contrib.layers.batch_norm is not in bert_tf2.tf1 (TensorFlow 2 removed it): "
        "use tf.layers.batch_normalization" % path,
        "%s %s" % ("would change" if dry_run else "changed", path)]


def test_a_file_tokenize_cannot_read_is_named_and_left(tmp_path):
    path = _write(tmp_path / "fork" / "bad.py", b"import tensorflow as tf\ns = '''open\n")
    changed, lines = _run(tmp_path / "fork")
    assert changed == [] and open(path, "rb").read() == b"import tensorflow as tf\ns = '''open\n"
    assert len(lines) == 1 and lines[0].startswith(
        "%s: not Python that tokenize reads (" % path) and lines[0].endswith("left as it was")
