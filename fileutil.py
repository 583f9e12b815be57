"""Files in and out, the same way for every script.

- `atomic_open`: outputs appear under their name only once complete;
- `write_eval_results`: eval_results.txt in the reference's `key = value` form;
- `prepare_output_dir`: an --output_dir that can be written, checked up front;
- `expand_input_files`: comma-separated globs, as the reference's --input_file;
- `read_text`: a UTF-8 data file whose errors name the file (and line).

Local paths and every filesystem tf.io.gfile knows (gs://, ...) alike.
"""
import contextlib
import os
import uuid

from absl import logging
import tensorflow as tf


def temp_name(path):
    """A unique temporary name beside `path` (same folder, so a rename is atomic)."""
    return "%s.tmp-%s" % (path, uuid.uuid4().hex[:8])


@contextlib.contextmanager
def atomic_open(path, mode="w"):
    """Opens `path` for writing; the file appears under its name only on success.

    The data goes to a temporary file beside `path`, which is renamed over `path`
    when the block ends without an exception and deleted otherwise, so a reader
    never sees a half-written output file.
    """
    if tf.io.gfile.isdir(path):
        raise ValueError("%s is a directory, not a file: it cannot be written" % path)
    temp = temp_name(path)
    try:
        with tf.io.gfile.GFile(temp, mode) as f:
            yield f
        if not tf.io.gfile.exists(temp):
            # GFile creates its file on the first write: an empty output is still an output.
            with tf.io.gfile.GFile(temp, mode) as empty:
                empty.write(b"" if "b" in mode else "")
        tf.io.gfile.rename(temp, path, overwrite=True)
    except BaseException:
        if tf.io.gfile.exists(temp):
            tf.io.gfile.remove(temp)
        raise


def write_eval_results(path, results):
    """eval_results.txt as the reference writes it: `key = value` lines sorted by key."""
    logging.info("***** Eval results *****")
    with atomic_open(path, "w") as f:
        for key in sorted(results):
            logging.info("  %s = %s", key, str(results[key]))
            f.write("%s = %s\n" % (key, str(results[key])))


def prepare_output_dir(path, flag="--output_dir"):
    """Creates the output directory and checks it is writable: a clear error up front.

    A path that exists as a file is an error naming `flag`; it is never replaced.
    """
    if tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path):
        raise ValueError("%s=%s is a file, not a directory" % (flag, path))
    try:
        tf.io.gfile.makedirs(path)
        # A name of its own: the workers of a multi-worker run probe the same folder.
        probe = os.path.join(path, ".write_test_%s" % uuid.uuid4().hex)
        with tf.io.gfile.GFile(probe, "w") as f:
            f.write("ok")
        tf.io.gfile.remove(probe)
    except (tf.errors.OpError, OSError) as e:
        raise ValueError("%s=%s is not writable: %s" % (flag, path, e)) from None


def check_output_file(path, flag):
    """An output file path must not name a directory (which is never replaced)."""
    if tf.io.gfile.isdir(path):
        raise ValueError("%s=%s is a directory, not a file" % (flag, path))


def expand_input_files(patterns):
    """Comma-separated globs (or a list of them) -> the matching files, each glob sorted."""
    if isinstance(patterns, str):
        patterns = patterns.split(",")
    files = []
    for pattern in patterns:
        pattern = pattern.strip()
        if not pattern:
            continue
        matched = tf.io.gfile.glob(pattern)
        if not matched:
            raise ValueError("input file pattern %r matches no file" % pattern)
        files.extend(sorted(matched))
    if not files:
        raise ValueError("no input files given")
    return files


def read_text(path):
    """The text of a UTF-8 file (a BOM dropped); ValueError naming the file, and the line
    of the first bad byte, when it is missing, unreadable or not UTF-8."""
    try:
        with tf.io.gfile.GFile(path, "rb") as f:
            data = f.read()
    except tf.errors.NotFoundError:
        raise ValueError("%s: no such file" % path) from None
    except tf.errors.OpError as e:
        raise ValueError("%s: cannot be read (%s)" % (path, e.message)) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ValueError("%s, line %d: not valid UTF-8"
                         % (path, data[:e.start].count(b"\n") + 1)) from None
