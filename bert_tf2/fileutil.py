"""Files in and out, the same way for every script.

- `atomic_open`: outputs appear under their name only once complete;
- `write_eval_results`: eval_results.txt in the reference's `key = value` form;
- `write_label_list` / `read_label_list`: a run's label_list.txt (or a --labels_file);
- `prepare_output_dir` / `prepare_output_file`: an output folder or file that can be
  written, checked and its folder made before any work (every writer);
- `lock_output_dir` (via `prepare_output_dir(lock=True)`): one training run per output
  folder at a time; `release_output_locks` ends a run's locks;
- `check_utf8`: a text input read through once, its first bad byte named by line;
- `expand_input_files`: comma-separated globs, as the reference's --input_file;
- `output_files`: a list of output files, or PREFIX-00000-of-0000N names;
  `check_distinct`: no output named twice or naming an input, however spelt;
- `read_text`: a UTF-8 data file whose errors name the file (and line);
- `temp_name` / `is_temporary`: the names of our temporaries (and leftovers);
- `remove`: the one way a file or folder is removed, never through a symlink;
  `links_in` / `mount_points_in`: the links and mount points a removal must refuse;
- `replace_folder` / `recover_folder`: a folder replaced whole by one built beside it;
- a tool's output folder built beside it and renamed into place (the converters):
  bert_tf2/base/output_folder.py.

Local paths and every filesystem tf.io.gfile knows (gs://, ...) alike.

Contracts with the other modules (bert_tf2/fileutil.py):
atomic_open(path, mode), write_eval_results(path, results), write_label_list(path, labels) /
read_label_list(path, forbidden="") (LABEL_LIST_FILE), prepare_output_dir(path, flag),
check_output_file(path, flag) (kind only, no side effect), prepare_output_file(path, flag,
inputs=()) (kind, not one of the (flag, path) inputs, folder made and probed: call it last
in a writer's checks, before the work), make_parent_folder(path, flag) (--export_dir),
same_file(a, b), check_utf8(path, flag), read_text(path), expand_input_files(patterns) (our
temporaries skipped). output_files(value, num_shards, flag), check_distinct(outputs, flag,
inputs=(), input_flag). Temporaries: temp_name(path, kind) -> PATH.KIND-<8 hex> (kind tmp:
atomic_open; shards: pretraining_shards; beam-tmp: pretraining_beam), is_temporary(path) ->
the output it stands for or None, without_temp_names(message) (also TF's checkpoint
PREFIX_temp/part-... names), without_op_names(line) (TF's {{function_node ...}},
[Op:X]); readable_checkpoint(prefix) (the prefix TensorFlow's
checkpoint readers find it under: links in a folder of ours when it holds `[`, which they
glob); load_saved_model(folder) (tf.saved_model.load, through such a link);
remove_link_folders() (theirs, at exit);
save_checkpoint(manager, number) (a failed save leaves nothing).
remove(path): the one removal of the package (every deleting site calls it): a
file, a link (as a link) or a folder, never anything through a symlink (tf.io.gfile.rmtree
empties a linked folder's target); replace_folder(temp, target) / recover_folder(target): a
folder replaced whole by one built beside it, a kill between its two renames undone by the
next run.
"""
import atexit
import contextlib
import importlib
import json
import os
import posixpath
import re
import shutil
import socket
import stat
import tempfile
import time
import uuid

from absl import logging

from bert_tf2.base import path_match


class _ImportedOnUse(object):
    """Stands for a module that is imported at the first use of one of its names."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        return getattr(importlib.import_module(self._name), attr)


# TensorFlow, imported by the first function that needs it: a worker process of
# create_pretraining_data that reads and writes local files only (and tokenizes in
# Python) never pays its import. Modules of that path use it as `tf = fileutil.tensorflow`.
tensorflow = _ImportedOnUse("tensorflow")
tf = tensorflow


# The kinds of temporaries beside an output: atomic_open's file, the folders of the
# per-file modes (pretraining_shards, pretraining_beam), the replaced folder of a
# swap (periodic_eval's best/); PATH.KIND-<8 hex digits>.
TEMP_KINDS = ("tmp", "shards", "beam-tmp", "old")
_TEMP_PART = r"\.(?:%s)-[0-9a-f]{8}" % "|".join(re.escape(k) for k in TEMP_KINDS)
_TEMP_SUFFIX = re.compile(_TEMP_PART + "$")


def temp_name(path, kind="tmp"):
    """A unique temporary name beside `path` (same folder, so a rename is atomic)."""
    if kind not in TEMP_KINDS:
        raise ValueError("unknown kind of temporary %r" % kind)
    return "%s.%s-%s" % (path, kind, uuid.uuid4().hex[:8])


def is_temporary(path):
    """The output `path` a temporary of temp_name belongs to, or None for other names."""
    path = path.rstrip("/")
    match = _TEMP_SUFFIX.search(path)
    return path[:match.start()] if match else None


# TensorFlow's temporary of a checkpoint being saved: PREFIX_temp/part-... (a folder).
_CHECKPOINT_TEMP = r"_temp/part-\d+-of-\d+[^\s;:,]*"


def without_temp_names(text):
    """`text` (a message) with our temporaries' names (and those of a checkpoint
    TensorFlow was saving) replaced by their outputs' names."""
    text = re.sub(r"(?<=\S)" + _CHECKPOINT_TEMP, "", text)
    return re.sub(r"(?<=\S)" + _TEMP_PART, "", text)


def without_op_names(line):
    """An eager op's error line without TensorFlow's names of the op: the leading
    "{{function_node __wrapped__SaveV2_...}} " and the trailing " [Op:SaveV2]"."""
    line = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", line)
    return re.sub(r"\s*\[Op:[^\]]*\](?: name: \S*)?$", "", line) or line


def save_checkpoint(manager, number):
    """manager.save(checkpoint_number=number) -> its path; a save that fails (a full
    disk) leaves none of its files behind (TensorFlow keeps its PREFIX_temp folder)."""
    folder = manager.directory
    before = set(tf.io.gfile.listdir(folder)) if tf.io.gfile.isdir(folder) else set()
    try:
        return manager.save(checkpoint_number=number)
    except BaseException:
        mine = re.compile(r"-%d(?:_temp|\.)" % number)
        after = set(tf.io.gfile.listdir(folder)) if tf.io.gfile.isdir(folder) else set()
        for name in sorted(n for n in after - before if mine.search(n)):
            try:
                remove(os.path.join(folder, name))
            except (OSError, tf.errors.OpError):
                pass  # the save's own error is the one to report
        raise


def remove(path):
    """Removes `path`: a file, a symbolic link, or a folder with all it holds; nothing
    when nothing is there. Never anything through a link: a link (`path` itself, or
    one inside the folder) is removed as a link and its target is left as it is
    (tf.io.gfile.rmtree follows a local link to a folder and empties the target).
    Every removal of the project goes through here. Other file systems (gs://, ...)
    have no links: tf.io.gfile removes there."""
    path = str(path)
    if "://" in path:
        if tf.io.gfile.isdir(path):
            tf.io.gfile.rmtree(path)
        elif tf.io.gfile.exists(path):
            tf.io.gfile.remove(path)
    elif os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


def links_in(paths):
    """The local paths among `paths` that are symbolic links (a removal never goes
    through one: see remove), in order."""
    return [str(p) for p in paths if "://" not in str(p) and os.path.islink(str(p))]


def _mount_points():
    """The local mount points (/proc/self/mountinfo's fifth field; os.path.ismount misses
    a bind mount of a folder of the same file system, as docker -v makes)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return set()
    return {re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4])
            for line in lines if len(line.split()) > 4}


def mount_points_in(paths):
    """The local paths among `paths` that are mount points (a removal never crosses into
    one: what is there belongs to whoever mounted it), in order."""
    local = [str(p) for p in paths if "://" not in str(p) and os.path.lexists(str(p))]
    if not local:
        return []
    points = _mount_points()
    return [p for p in local if os.path.ismount(p) or os.path.realpath(p) in points]


def folder_behind_link(path, flag, point_at="a folder"):
    """The folder an output that replaces `path` whole writes into: `path` itself, or, for a
    local symlink, the folder it points to (replaced there, the link kept). A link to
    anything but a folder is one ValueError naming `flag`, saying to point it at
    `point_at` or remove it."""
    path = str(path).rstrip("/") or "/"
    if "://" in path or not os.path.islink(path):
        return path
    target = os.path.realpath(path)
    if not os.path.isdir(target):
        raise ValueError("%s=%s is a symlink to %s, which is not a folder: point it at %s, "
                         "or remove the link" % (flag, path, target, point_at))
    return target


def replace_folder(temp, target):
    """Puts the complete folder `temp` in the place of `target` (a folder, or nothing
    there): `target` goes aside under temp_name(target, "old"), `temp` is renamed to
    `target`, and the earlier folder is removed (a symlink inside it as a link). An error
    before the new folder is in place puts the earlier one back and removes `temp`; a
    kill between the two renames leaves it under its .old name, which recover_folder
    puts back."""
    temp, target = str(temp).rstrip("/"), str(target).rstrip("/")
    old = temp_name(target, "old")
    try:
        if tf.io.gfile.exists(target) or os.path.lexists(target):
            tf.io.gfile.rename(target, old)
        tf.io.gfile.rename(temp, target)
    except BaseException:
        if tf.io.gfile.exists(old) and not tf.io.gfile.exists(target):
            tf.io.gfile.rename(old, target)
        remove(temp)
        raise
    remove(old)


def recover_folder(target):
    """Undoes what a kill left beside the folder `target` (replace_folder's temporaries):
    an earlier folder under its .old name is put back when `target` is missing; the
    other temporaries of `target` (an unfinished new folder, an .old one no longer
    needed) are removed."""
    target = str(target).rstrip("/")
    parent = os.path.dirname(target) or "."
    target = os.path.join(parent, os.path.basename(target))
    if not tf.io.gfile.isdir(parent):
        return
    # By listing, not glob: a folder's name may hold glob's special characters.
    for name in sorted(n.rstrip("/") for n in tf.io.gfile.listdir(parent)):
        path = os.path.join(parent, name)
        if is_temporary(path) != target:
            continue
        if path.startswith(target + ".old-") and not tf.io.gfile.exists(target):
            logging.warning("%s: the folder a kill left under the temporary name %s is put "
                            "back", target, path)
            tf.io.gfile.rename(path, target)
        else:
            logging.info("Removing %s, left by a killed run", path)
            remove(path)


@contextlib.contextmanager
def atomic_open(path, mode="w"):
    """Opens `path` for writing; the file appears under its name only on success.

    The data goes to a temporary file beside `path`, which is renamed over `path`
    when the block ends without an exception and deleted otherwise, so a reader
    never sees a half-written output file. A local file in binary mode is written by
    Python's own file layer (the same bytes and the same rename, without importing
    TensorFlow: a pretraining worker's shard files); text and remote files by GFile.
    """
    python_file = "b" in mode and "://" not in str(path)
    if os.path.isdir(path) if python_file else tf.io.gfile.isdir(path):
        raise ValueError("%s is a directory, not a file: it cannot be written" % path)
    temp = temp_name(path)
    try:
        if python_file:
            with open(temp, mode) as f:
                yield f
            os.replace(temp, path)
            return
        with tf.io.gfile.GFile(temp, mode) as f:
            yield f
        if not tf.io.gfile.exists(temp):
            # GFile creates its file on the first write: an empty output is still an output.
            with tf.io.gfile.GFile(temp, mode) as empty:
                empty.write(b"" if "b" in mode else "")
        tf.io.gfile.rename(temp, path, overwrite=True)
    except BaseException:
        remove(temp)
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

# What every training run leaves in its output folder for later runs and exports
# (bert_tf2/trainer/model_folder.py): the config and vocab it used, and its settings.
CONFIG_FILE = "bert_config.json"
VOCAB_FILE = "vocab.txt"
MODEL_SETTINGS_FILE = "model_settings.json"

# Every settings file a run may leave beside its checkpoints, which the programs that
# take the checkpoint read (checkpoints.file_beside): label_list.txt, long_text.json
# (long_text.SETTINGS_FILE), sentence_embedding.json (pooling.SETTINGS_FILE),
# classifier_task.json (classifier_tasks.TASK_FILE) and the model folder's files. A copy
# of a checkpoint (output_dir/best) takes them along, so it is a whole model folder;
# tests/test_periodic_eval.py checks that the tasks' names are here.
SETTINGS_FILES = (LABEL_LIST_FILE, "long_text.json", "sentence_embedding.json",
                  "classifier_task.json", CONFIG_FILE, VOCAB_FILE, MODEL_SETTINGS_FILE)


# Every character str.splitlines ends a line at. Our readers split text files on "\n"
# alone (split_lines), but a label list is one label per line for every reader, editor and
# tool: no label holds any of these.
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def split_lines(text, keepends=False):
    """The lines of a text file's `text`, split at "\n" only (a "\r" before it dropped
    unless `keepends`: files written on Windows), never at the other line breaks of
    str.splitlines (U+2028, U+0085, ...), which a JSON string, word or field may hold.
    A final "\n" ends the last line, as in splitlines."""
    lines = text.split("\n")
    if keepends:
        lines = [line + "\n" for line in lines[:-1]] + [lines[-1]]
    else:
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    return lines[:-1] if not lines[-1] else lines


def check_label(label, where):
    """A label must fit on one line of label_list.txt: ValueError naming `where` and the
    label when it holds a line break (LINE_BREAKS)."""
    breaks = [c for c in str(label) if c in LINE_BREAKS]
    if breaks:
        raise ValueError("%s: label %r holds a line break (U+%04X), which %s (one label per "
                         "line) cannot hold: rename the label"
                         % (where, label, ord(breaks[0]), LABEL_LIST_FILE))


def write_label_list(path, labels):
    """Writes a label list, one label per line (read back by read_label_list); a label
    holding a line break is refused (check_label), nothing written."""
    for label in labels:
        check_label(label, path)
    with atomic_open(path, "w") as f:
        f.write("".join(label + "\n" for label in labels))


def read_label_list(path, forbidden="", why=""):
    """The labels of a file, one per line, in file order (blank lines skipped, labels
    stripped): distinct, at least one, none holding a character of `forbidden` (`why`:
    the message's reason) or a line break. Errors name the file and the line. A UTF-8
    BOM (Notepad's) is no part of the first label (read_text)."""
    if not tf.io.gfile.exists(path):
        raise ValueError("%s: no such labels file" % path)
    first_line = {}
    for number, line in enumerate(split_lines(read_text(path)), 1):
        label = line.strip()
        if not label:
            continue
        check_label(label, "%s, line %d" % (path, number))
        bad = [c for c in forbidden if c in label]
        if bad:
            raise ValueError("%s, line %d: label %r contains %r, which a label may not hold%s"
                             % (path, number, label, bad[0], why))
        if label in first_line:
            raise ValueError("%s, line %d: label %r is listed twice (first on line %d); "
                             "expected distinct labels, one per line"
                             % (path, number, label, first_line[label]))
        first_line[label] = number
    if not first_line:
        raise ValueError("%s: no labels (expected one label per line)" % path)
    return list(first_line)


def prepare_output_dir(path, flag="--output_dir", lock=False):
    """Creates the output directory and checks it is writable: a clear error up front.

    A path that exists as a file is an error naming `flag`; it is never replaced.
    With `lock` (a training run) the folder is also this run's alone (lock_output_dir).
    """
    if tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path):
        raise ValueError("%s=%s is a file, not a directory" % (flag, path))
    _make_writable_folder(path, flag, path)
    if lock:
        lock_output_dir(path, flag)


# The lock file of a training run in its output folder (lock_output_dir): removed when the
# run ends; after a killed run it stays, unlocked, and is never read as an output.
LOCK_FILE = ".bert_tf2.lock"

# This process's output-folder locks: {real path of the folder: open lock file}.
_LOCKS = {}


def lock_output_dir(path, flag="--output_dir"):
    """Makes `path` this process's output folder until release_output_locks: a training
    run already writing there (another process) is a ValueError naming `flag`, the
    folder and that run's pid and host.

    An OS lock (fcntl.flock on LOCK_FILE, held open) ends with its process, so a killed
    run never leaves a stale lock. Taken again by the same process, it is kept as is.
    Skipped without an error where there is no such lock: gs://, hdfs:// and other
    tf.io.gfile folders, systems without fcntl, file systems refusing flock; and on the
    non-chief workers of a multi-worker run, which share the chief's folder.
    """
    try:
        import fcntl  # pylint: disable=import-outside-toplevel
    except ImportError:
        return
    if "://" in path or not _writes_shared_folder():
        return
    folder = os.path.realpath(path)
    if folder in _LOCKS:
        return
    lock_path = os.path.join(folder, LOCK_FILE)
    while True:
        f = open(lock_path, "a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "a run that is starting"
            f.close()
            raise ValueError("%s=%s is in use by another training run (%s): wait for it to "
                             "end, or choose another %s" % (flag, path, holder, flag)) from None
        except OSError as e:
            f.close()
            logging.warning("%s=%s: not locked (%s)", flag, path, e)
            return
        # The holder before us may have removed the file after we opened it: lock anew.
        if os.path.exists(lock_path) and os.path.samestat(os.fstat(f.fileno()),
                                                          os.stat(lock_path)):
            break
        f.close()
    f.seek(0)
    f.truncate()
    f.write("pid %d on host %s, since %s" % (os.getpid(), socket.gethostname(),
                                             time.strftime("%Y-%m-%d %H:%M:%S")))
    f.flush()
    _LOCKS[folder] = f


def _writes_shared_folder():
    """False on a non-chief worker of TF_CONFIG's cluster (training.is_chief's rule)."""
    try:
        tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    except ValueError:
        return True
    task, cluster = tf_config.get("task") or {}, tf_config.get("cluster") or {}
    task_type = task.get("type")
    if task_type in (None, "chief"):
        return True
    return task_type == "worker" and "chief" not in cluster and int(task.get("index", 0)) == 0


def held_output_locks():
    """The folders this process holds locks on (for release_output_locks(keep=))."""
    return set(_LOCKS)


def release_output_locks(keep=()):
    """Ends this process's output-folder locks but those of the folders in `keep`,
    removing their lock files."""
    for folder in sorted(set(_LOCKS) - set(keep)):
        f = _LOCKS.pop(folder)
        try:
            # Removed while still locked: a run that opened it meanwhile locks anew.
            remove(os.path.join(folder, LOCK_FILE))
        except OSError:
            pass
        f.close()


def _make_writable_folder(folder, flag, value):
    """Makes `folder` (and its parents) and writes a probe file there; ValueError naming
    `flag`=`value` when it cannot."""
    try:
        tf.io.gfile.makedirs(folder)
        # A name of its own: the workers of a multi-worker run probe the same folder.
        probe = os.path.join(folder, ".write_test_%s" % uuid.uuid4().hex)
        with tf.io.gfile.GFile(probe, "w") as f:
            f.write("ok")
        remove(probe)
    except (tf.errors.OpError, OSError) as e:
        raise ValueError("%s=%s is not writable: %s" % (flag, value, e)) from None


def check_output_file(path, flag):
    """An output file path must not name a directory (which is never replaced), nor a
    pipe or device (the finished file would be renamed over it, not written into it)."""
    if tf.io.gfile.isdir(path):
        raise ValueError("%s=%s is a directory, not a file" % (flag, path))
    kind = special_file_kind(path)
    if kind:
        raise ValueError("%s=%s is a %s: outputs are written to a file of their own (a "
                         "temporary renamed when complete), so %ss are not supported"
                         % (flag, path, kind, kind))


def special_file_kind(path):
    """"pipe", "device" or "socket" for such a local path (symbolic links followed),
    else None (a regular file, a folder, nothing there, or a remote path)."""
    if "://" in path:
        return None
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISFIFO(mode):
        return "pipe"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "socket" if stat.S_ISSOCK(mode) else None


def prepare_output_file(path, flag, inputs=()):
    """Checks an output file's path and makes its folder, before the work starts.

    Every writer's one rule: a directory at `path` is an error naming `flag` (never
    replaced), so is a path that is one of the run's inputs (`inputs`: (flag, path)
    pairs; the output would replace it); the missing folders are created and probed for
    writing, so that a bad path fails in one line before any model is loaded.
    """
    check_output_file(path, flag)
    for input_flag, input_path in inputs:
        if input_path and same_file(path, input_path):
            raise ValueError("%s=%s is also a file of %s: the output would replace its "
                             "input; choose another file" % (flag, path, input_flag))
    make_parent_folder(path, flag)


def make_parent_folder(path, flag):
    """Makes the folder an output `path` goes in (a file's, or an --export_dir's) and
    probes it for writing; ValueError naming `flag` when it cannot."""
    _make_writable_folder(os.path.dirname(path.rstrip("/")) or ".", flag, path)


def same_file(a, b):
    """Whether two paths name the same file (local paths resolved; others compared as text)."""
    if "://" in a or "://" in b:
        return a.rstrip("/") == b.rstrip("/")
    return os.path.realpath(a) == os.path.realpath(b)


def output_files(value, num_shards, flag):
    """The output files a flag names: a comma-separated list (num_shards 0), or with
    num_shards N > 0 a prefix for the names PREFIX-00000-of-0000N, ...

    A file named twice (however spelt: x, ./x, a/../x, /abs/x) is refused, as is a
    name of a directory. Shards of another run under the same prefix would join
    these in a glob (PREFIX-*): they are refused too. Temporaries an interrupted
    run of ours left beside these outputs (see is_temporary) are removed.
    """
    if num_shards < 0:
        raise ValueError("the number of output shards must be >= 0, got %d" % num_shards)
    if not num_shards:
        files = [p.strip() for p in value.split(",") if p.strip()]
        if not files:
            raise ValueError("%s is required" % flag)
        check_distinct(files, flag)
        for path in files:
            prepare_output_file(path, flag)
        _remove_leftovers(files, [match for path in files
                                  for match in path_match.matching(path, ".*")])
        return files
    prefix = value.strip()
    prepare_output_file(prefix, flag)
    names = ["%s-%05d-of-%05d" % (prefix, i, num_shards) for i in range(num_shards)]
    shard_name = re.compile(re.escape(prefix) + r"-\d{5}-of-\d{5}$")
    found = set(path_match.matching(prefix, "-*-of-*")) - set(names)
    leftovers = sorted(p for p in found if shard_name.match(is_temporary(p) or ""))
    _remove_leftovers(names, leftovers)
    others = sorted(found - set(leftovers))
    if others:
        raise ValueError("%s=%s already holds files of another run (%s%s): remove them or "
                         "choose another prefix"
                         % (flag, prefix, others[0], ", ..." if len(others) > 1 else ""))
    return names


def _remove_leftovers(outputs, candidates):
    """Removes the candidates that are temporaries of ours beside files like `outputs`."""
    for path in candidates:
        if is_temporary(path) is not None:
            logging.warning("Removing %s, left by an interrupted run that wrote %s", path,
                            is_temporary(path))
            remove(path)


def _canonical(path):
    """One spelling of a path: symlinks and ./.. resolved (URLs: ./.. only)."""
    if "://" in path:
        scheme, rest = path.split("://", 1)
        return "%s://%s" % (scheme, posixpath.normpath(rest))
    return os.path.realpath(path)


def check_distinct(outputs, flag, inputs=(), input_flag="--input_file"):
    """Refuses an output named twice, or naming an input, however the paths are spelt.

    Args:
      outputs: the output paths `flag` names.
      inputs: input paths (expanded) that must not be overwritten, named by input_flag.
    """
    seen = {}
    for path in outputs:
        key = _canonical(path)
        if key in seen:
            raise ValueError("%s names one file twice (%s and %s): every output must be "
                             "a file of its own" % (flag, seen[key], path))
        seen[key] = path
    for path in inputs:
        if _canonical(path) in seen:
            raise ValueError("%s=%s is also an input (%s=%s): it would be overwritten"
                             % (flag, seen[_canonical(path)], input_flag, path))


def expand_input_files(patterns):
    """Comma-separated globs (or a list of them) -> the matching files, each glob sorted; a
    glob that names an existing file as it is (`[`, `*`, `?` in its path) is that file."""
    if isinstance(patterns, str):
        patterns = patterns.split(",")
    files = []
    for pattern in patterns:
        pattern = pattern.strip()
        if not pattern:
            continue
        matched = path_match.user_pattern(pattern)
        if _READERS_GLOB.search(pattern) and tf.io.gfile.exists(pattern) and \
                not tf.io.gfile.isdir(pattern):
            # A file the text names as it is: that file (glob reads `exp[1]/x` as `exp1/x`).
            others = sorted(p for p in matched if p != pattern)
            if others:
                logging.warning("%s is a file: read as itself, not as the pattern matching %s",
                                pattern, ", ".join(others))
            matched = [pattern]
        for path in [p for p in matched if is_temporary(p) is not None and p != pattern]:
            # An interrupted run's half-written output: never an input.
            logging.warning("Skipping %s: a temporary of an unfinished run", path)
            matched.remove(path)
        if not matched:
            raise ValueError("input file pattern %r matches no file" % pattern)
        files.extend(sorted(matched))
    if not files:
        raise ValueError("no input files given")
    return files


def read_json(path):
    """The value of the JSON file at `path`; ValueError naming the file when it is not JSON."""
    with tf.io.gfile.GFile(path) as f:
        text = f.read()
    try:
        return json.loads(text)
    except ValueError as e:
        raise ValueError("%s is not valid JSON: %s" % (path, e)) from None


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


# Bytes read at a time by check_utf8.
_CHECK_BLOCK = 1 << 22


def check_utf8(path, flag):
    """Reads a text input through once, before any work: ValueError naming `flag`, the
    file and the line of its first byte that is not UTF-8, or a missing file."""
    if not tf.io.gfile.exists(path):
        raise ValueError("%s=%s: no such file" % (flag, path))
    lines_before = 0
    pending = b""
    try:
        with tf.io.gfile.GFile(path, "rb") as f:
            while True:
                block = f.read(_CHECK_BLOCK)
                data = pending + block
                # Whole lines only, so that a character split between blocks is not an error.
                cut = len(data) if not block else data.rfind(b"\n") + 1
                _decode_lines(data[:cut], path, flag, lines_before)
                lines_before += data.count(b"\n", 0, cut)
                pending = data[cut:]
                if not block:
                    return
    except tf.errors.OpError as e:
        raise ValueError("%s=%s cannot be read: %s" % (flag, path, e.message)) from None


def _decode_lines(data, path, flag, lines_before):
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError("%s=%s, line %d: not valid UTF-8 (byte 0x%02x)"
                         % (flag, path, lines_before + data.count(b"\n", 0, e.start) + 1,
                            data[e.start])) from None


# What a TensorFlow checkpoint reader may take for a pattern in a prefix.
_READERS_GLOB = re.compile(r"[*?\[\\]")
# The folders of links readable_checkpoint made, removed when the process ends.
_LINK_FOLDERS = []


def remove_link_folders():
    """Removes the folders of links this process made (at its exit; cli's os._exit calls it
    first, which skips the exit's own clean-up)."""
    while _LINK_FOLDERS:
        try:
            remove(_LINK_FOLDERS.pop())  # links removed as links: their targets stay
        except OSError:
            pass


def readable_checkpoint(prefix):
    """A prefix TensorFlow's checkpoint readers (tf.train.load_checkpoint,
    Checkpoint.restore) find the checkpoint `prefix` under: `prefix` itself, or, for a
    local one holding a character they glob, links to its files in a folder of our own
    (kept while the process runs: a reader opens its data files when first read)."""
    prefix = str(prefix)
    if "://" in prefix or not _READERS_GLOB.search(prefix):
        return prefix
    files = path_match.matching(prefix, ".index") + path_match.matching(prefix, ".data-*")
    if not files:
        return prefix
    folder = _link_folder()
    for path in files:
        os.symlink(os.path.abspath(path), os.path.join(folder, "ckpt" + path[len(prefix):]))
    return os.path.join(folder, "ckpt")


def _link_folder():
    """A new folder of our own for links, removed when the process ends."""
    if not _LINK_FOLDERS:
        atexit.register(remove_link_folders)
    folder = tempfile.mkdtemp(prefix="bert_tf2_checkpoint_")
    _LINK_FOLDERS.append(folder)
    return folder


def load_saved_model(folder):
    """tf.saved_model.load(folder), for a local folder holding a character TensorFlow's
    checkpoint reader globs too (it reads folder/variables/variables as a pattern): through
    a link to the folder in a folder of our own (kept while the process runs: the loaded
    model's assets are read through it)."""
    folder = str(folder)
    if "://" not in folder and _READERS_GLOB.search(folder):
        link = os.path.join(_link_folder(), "saved_model")
        os.symlink(os.path.abspath(folder), link)
        folder = link
    return tf.saved_model.load(folder)
