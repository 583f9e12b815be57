"""Files in and out, the same way for every script.

- `atomic_open`: outputs appear under their name only once complete;
- `write_eval_results`: eval_results.txt in the reference's `key = value` form;
- `write_label_list` / `read_label_list`: a run's label_list.txt (or a --labels_file);
- `prepare_output_dir`: an --output_dir that can be written, checked up front;
- `expand_input_files`: comma-separated globs, as the reference's --input_file;
- `output_files`: a list of output files, or PREFIX-00000-of-0000N names.
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


# The label list a training run leaves beside its checkpoints (run_ner, multilabel).
LABEL_LIST_FILE = "label_list.txt"

# Every settings file a run may leave beside its checkpoints, which the programs that
# take the checkpoint read (checkpoints.file_beside): label_list.txt, long_text.json
# (long_text.SETTINGS_FILE), sentence_embedding.json (pooling.SETTINGS_FILE). A copy
# of a checkpoint (output_dir/best) takes them along; tests/test_periodic_eval.py
# checks that the tasks' names are here.
SETTINGS_FILES = (LABEL_LIST_FILE, "long_text.json", "sentence_embedding.json")


def write_label_list(path, labels):
    """Writes a label list, one label per line (read back by read_label_list)."""
    with atomic_open(path, "w") as f:
        f.write("".join(label + "\n" for label in labels))


def read_label_list(path, forbidden=""):
    """The labels of a file, one per line, in file order (blank lines skipped, labels
    stripped): distinct, at least one, none holding a character of `forbidden`.
    Errors name the file and the line."""
    try:
        with tf.io.gfile.GFile(path, "r") as f:
            lines = f.read().splitlines()
    except tf.errors.NotFoundError:
        raise ValueError("%s: no such labels file" % path) from None
    first_line = {}
    for number, line in enumerate(lines, 1):
        label = line.strip()
        if not label:
            continue
        bad = [c for c in forbidden if c in label]
        if bad:
            raise ValueError("%s, line %d: label %r contains %r, which a label may not hold"
                             % (path, number, label, bad[0]))
        if label in first_line:
            raise ValueError("%s, line %d: label %r is listed twice (first on line %d); "
                             "expected distinct labels, one per line"
                             % (path, number, label, first_line[label]))
        first_line[label] = number
    if not first_line:
        raise ValueError("%s: no labels (expected one label per line)" % path)
    return list(first_line)


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


def output_files(value, num_shards, flag):
    """The output files a flag names: a comma-separated list (num_shards 0), or with
    num_shards N > 0 a prefix for the names PREFIX-00000-of-0000N, ...

    Shards of another run under the same prefix would join these in a glob
    (PREFIX-*): they are refused, as is a name of a directory.
    """
    if num_shards < 0:
        raise ValueError("the number of output shards must be >= 0, got %d" % num_shards)
    if not num_shards:
        files = [p.strip() for p in value.split(",") if p.strip()]
        if not files:
            raise ValueError("%s is required" % flag)
        for path in files:
            check_output_file(path, flag)
        return files
    prefix = value.strip()
    check_output_file(prefix, flag)
    names = ["%s-%05d-of-%05d" % (prefix, i, num_shards) for i in range(num_shards)]
    others = sorted(set(tf.io.gfile.glob(prefix + "-*-of-*")) - set(names))
    if others:
        raise ValueError("%s=%s already holds files of another run (%s%s): remove them or "
                         "choose another prefix"
                         % (flag, prefix, others[0], ", ..." if len(others) > 1 else ""))
    return names


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
