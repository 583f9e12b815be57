"""A tool's output folder, built beside it and put in its place whole (the converters, the export).

`write_outputs_aside` (`check_outputs`, `record_outputs`): it replaces only files the tool
wrote itself (OUTPUTS_RECORD), carries the folder's other files into the new one, and
leaves none of its earlier files behind.

Contracts with the other modules (bert_tf2/base/output_folder.py):
A tool writing into a folder the user names (the converters):
write_outputs_aside(folder, tool, patterns, build) (globs inside the folder: what it writes
and the settings files it may write) refuses a matching file the tool did not record writing
(OUTPUTS_RECORD = bert_tf2_outputs.json, {tool: {"files": [...]}}) before anything is
written, has build(temp) write the new folder beside it, carries the folder's other files in
(hard links) and replaces it whole (swap_in): the earlier one survives any stop (a mount
point: filled in place, its files pending in OUTPUTS_RECORD until all are in; the folder's
permissions and owner kept). check_outputs(folder, tool, patterns, flag) (the check alone),
record_outputs(folder, tool, patterns).
The one folder swap, for a tool with rules of its own on what it replaces (the export):
build_place(target) -> (temp, in_place), same_access(earlier, new), swap_in(temp, target,
in_place, tool, patterns, ours, record), pending_in(folder, tool), remove_builds_inside(target).
"""
import errno
import json
import os
import re
import shutil
import stat

from bert_tf2 import fileutil
from bert_tf2.base import path_match

tf = fileutil.tensorflow

# Beside the outputs of a tool that writes into a folder the user names (the converters):
# which files each tool wrote there, so that a rerun replaces those and nothing else.
OUTPUTS_RECORD = "bert_tf2_outputs.json"


def _read_record(folder):
    path = os.path.join(folder, OUTPUTS_RECORD)
    if not tf.io.gfile.exists(path):
        return {}
    try:
        record = json.loads(fileutil.read_text(path))
    except json.JSONDecodeError as e:
        raise ValueError("%s is not valid JSON: %s (remove it, or choose another folder)"
                         % (path, e)) from None
    if not (isinstance(record, dict) and all(
            isinstance(entry, dict) and all(_names_list(entry.get(key, []))
                                            for key in ("files", "pending"))
            for entry in record.values())):
        raise ValueError("%s is not a record of the files bert-tf2's tools wrote ({tool: "
                         "{\"files\": [names]}}): remove it, or choose another folder"
                         % path)
    return record


def _names_list(value):
    return isinstance(value, list) and all(isinstance(name, str) for name in value)


def _write_record(folder, record):
    with fileutil.atomic_open(os.path.join(folder, OUTPUTS_RECORD), "w") as f:
        f.write(json.dumps(record, indent=2, sort_keys=True) + "\n")


def _matches(folder, patterns):
    """{name relative to folder: full path} of the files matching `patterns`."""
    found = {}
    for pattern in patterns:
        for path in path_match.matching(folder + "/", pattern):
            if not tf.io.gfile.isdir(path):
                found[os.path.relpath(path, folder).replace(os.sep, "/")] = path
    return found


def check_outputs(folder, tool, patterns, flag="--output_dir"):
    """write_outputs_aside's check alone, nothing written or removed: a file in `folder`
    matching `patterns` that `tool` did not write is a ValueError naming `flag`."""
    if tf.io.gfile.isdir(folder):
        _claim(folder, tool, patterns, flag)


def _claim(folder, tool, patterns, flag):
    """(the folder's record, `tool`'s entry, {name: path} of its files there); a
    ValueError when a file matching `patterns` is not the tool's."""
    record = _read_record(folder)
    entry = record.get(tool) or {}
    ours = {name: os.path.join(folder, name) for name in entry.get("files", [])}
    ours.update(_matches(folder, entry.get("pending", [])))
    foreign = sorted(set(_matches(folder, patterns)) - set(ours))
    if foreign:
        raise ValueError("%s=%s holds %s, which %s did not write: choose another folder "
                         "(nothing there is replaced)"
                         % (flag, folder, ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3
                                                                     else ""), tool))
    return record, entry, ours


def record_outputs(folder, tool, patterns):
    """Records the files matching `patterns` as `tool`'s, once it wrote them all."""
    record = _read_record(folder)
    record[tool] = {"files": sorted(_matches(folder, patterns))}
    _write_record(folder, record)


def write_outputs_aside(folder, tool, patterns, build, flag="--output_dir"):
    """Writes `tool`'s outputs (the globs `patterns` inside `folder`) all at once.

    `build(temp)` writes them into a new folder beside `folder` (fileutil.temp_name, the same file
    system); the files `folder` already holds that are not `tool`'s earlier outputs (a
    user's notes, another tool's files, OUTPUTS_RECORD's other entries) are carried into
    it (hard links where the file system allows, symlinks as links), and fileutil.replace_folder
    renames it into place. A stop at any moment (an error, a full disk, SIGTERM, a kill)
    leaves the earlier folder as it was, or the new one whole; a kill between the two
    renames is undone by the next run (fileutil.recover_folder, first). Refused before anything
    is written: a file matching `patterns` that `tool` did not write (by OUTPUTS_RECORD),
    `folder` being a file; a folder a training run holds (fileutil.LOCK_FILE), one with a mount
    point inside, the current folder or one above it. A symlink `folder` has its target
    replaced, the link kept. A `folder` that is a mount point (it cannot be renamed) is
    filled in place (swap_in). The new folder gets the earlier one's permissions
    and owner; a full disk (or a folder that cannot be replaced) is one ValueError naming
    `flag` and `folder`, never our temporary.
    Returns build's result, its paths inside the temporary folder named inside `folder`.
    """
    named = str(folder).rstrip("/") or "/"
    target = fileutil.folder_behind_link(named, flag)
    fileutil.recover_folder(target)
    if tf.io.gfile.exists(target) and not tf.io.gfile.isdir(target):
        raise ValueError("%s=%s is a file, not a directory" % (flag, named))
    ours = {}
    temp, in_place = build_place(target)
    if tf.io.gfile.isdir(target):
        remove_builds_inside(target)
        _, _, ours = _claim(target, tool, patterns, flag)
        _refuse_busy_folder(target, flag, named)
    try:
        try:
            tf.io.gfile.makedirs(temp)
            same_access(target, temp)
        except (tf.errors.OpError, OSError) as e:
            raise ValueError("%s=%s is not writable: %s" % (
                flag, named, fileutil.without_temp_names(_message(e)))) from None
        result = build(temp)
        record = _read_record(target) if tf.io.gfile.isdir(target) else {}
        record[tool] = {"files": sorted(_matches(temp, patterns))}
        if tf.io.gfile.isdir(target) and not in_place:
            skip = {os.path.normpath(p) for p in ours.values()}
            _carry_others(target, temp, skip | {os.path.join(target, OUTPUTS_RECORD),
                                                os.path.join(target, fileutil.LOCK_FILE)})
        swap_in(temp, target, in_place, tool, patterns, ours, record)
    except Exception as e:  # pylint: disable=broad-except
        fileutil.remove(temp)
        if not isinstance(e, (tf.errors.OpError, OSError)):
            if not _NO_SPACE.search(str(e)):
                raise
            # A library's own report of a full disk (h5py's RuntimeError, "errno = 28").
            e = OSError(errno.ENOSPC, "No space left on device")
        # Our build folder (beside the folder, or inside a mount point) named as the folder.
        text = fileutil.without_temp_names(fileutil.without_op_names(
            _message(e).replace(temp, target).replace(target, named)))
        if getattr(e, "errno", None) in (errno.ENOSPC, errno.EDQUOT) or isinstance(
                e, tf.errors.ResourceExhaustedError) or "No space left" in text:
            raise ValueError("%s=%s: no space left on the device (%s); %s" % (
                flag, named, text, _what_was_left(target, tool, in_place))) from None
        if getattr(e, "errno", None) in (errno.EBUSY, errno.EXDEV) or \
                "resource busy" in text or "cross-device" in text:
            raise ValueError("%s=%s cannot be replaced (%s): nothing was replaced; write into "
                             "a new folder inside it" % (flag, named, text)) from None
        raise
    except BaseException:
        fileutil.remove(temp)
        raise
    return _renamed(result, temp, named)


def _what_was_left(target, tool, in_place):
    """What a failed write left: nothing replaced, or (a mount point filled in place, its
    earlier outputs gone) the new outputs pending, for a rerun to replace."""
    if in_place and "pending" in _read_record(target).get(tool, {}):
        return ("its outputs are incomplete (%s names them pending): free space and run "
                "again" % OUTPUTS_RECORD)
    return "nothing was replaced"


# A full disk in the text of a library's own error (not an OSError).
_NO_SPACE = re.compile(r"No space left on device|\berrno = 28\b|\(os error 28\)")


# The folder a tool's outputs are built in inside an --output_dir that is a mount point
# (a folder that cannot be renamed): <output_dir>/.bert_tf2_build.tmp-<8 hex>.
_BUILD = ".bert_tf2_build"
# The files readers open a set of outputs by, moved into a mount point last (swap_in): a TF1
# checkpoint's `checkpoint`, a HuggingFace / keras-hub config.json, a SavedModel's
# saved_model.pb and our export_info.json (with every .index file).
_READ_LAST = ("checkpoint", "config.json", "saved_model.pb", "export_info.json")


def _message(error):
    """The first line of an error's text (a TensorFlow error's message)."""
    text = error.message if isinstance(error, tf.errors.OpError) else str(error)
    return (text.strip().splitlines() or [type(error).__name__])[0]


def same_access(earlier, new):
    """Gives the folder `new` the permissions (and, where allowed, the owner) of the folder
    `earlier` it replaces: a private 0700 output stays private."""
    if "://" in earlier or not os.path.isdir(earlier) or not os.path.isdir(new):
        return
    info = os.stat(earlier)
    os.chmod(new, stat.S_IMODE(info.st_mode))
    try:
        os.chown(new, info.st_uid, info.st_gid)
    except OSError:
        pass  # not ours to give: the permissions alone


def remove_builds_inside(target):
    """Removes what a killed in-place fill (swap_in) left inside `target`."""
    if "://" in target:
        return
    build = os.path.join(target, _BUILD)
    for name in os.listdir(target):
        if fileutil.is_temporary(os.path.join(target, name)) == build:
            fileutil.remove(os.path.join(target, name))


def build_place(target):
    """(temp, in_place): the new folder that is to replace the folder `target` (which may
    not exist yet), and whether it is moved in file by file (swap_in). Beside `target`
    (fileutil.temp_name), or, when `target` is a mount point (a folder that cannot be
    renamed: docker -v, a tmpfs), inside it (<target>/.bert_tf2_build.tmp-<8 hex>, the same
    file system)."""
    in_place = tf.io.gfile.isdir(target) and bool(fileutil.mount_points_in([target]))
    return fileutil.temp_name(os.path.join(target, _BUILD) if in_place else target), in_place


def swap_in(temp, target, in_place=False, tool=None, patterns=(), ours=None, record=None,
            last=_READ_LAST):
    """Puts the complete folder `temp` (build_place's) in the place of the folder `target`:
    the one folder swap of every tool that replaces a folder whole (the converters'
    write_outputs_aside, the export's saved_model_dir.write_saved_model).

    Renamed into place (fileutil.replace_folder: the earlier folder survives any stop), with
    `record` (a dict) written as its OUTPUTS_RECORD first; or, `in_place` (`target` is a mount
    point), moved in file by file: while they move, OUTPUTS_RECORD names `patterns` pending
    for `tool` (a kill leaves them the tool's to replace, never a set recorded complete;
    pending_in tells), the earlier outputs `ours` ({name: path} inside `target`) go first
    (never a mix of two), the files readers open a set by (.index files, then the basenames
    `last` in their order) move last, then `record` replaces OUTPUTS_RECORD (None: `tool`'s
    entry dropped, the file removed when nothing is left in it). Give `temp` the earlier
    folder's permissions first (same_access)."""
    if not in_place:
        if record is not None:
            _write_record(temp, record)
        fileutil.replace_folder(temp, target)
        return
    pending = _read_record(target)
    pending[tool] = {"files": sorted(ours or {}), "pending": sorted(patterns)}
    _write_record(target, pending)
    for path in (ours or {}).values():
        fileutil.remove(path)
        parent = os.path.dirname(path)
        while parent != target and os.path.isdir(parent) and not os.listdir(parent):
            fileutil.remove(parent)  # a sub-folder only the earlier outputs filled
            parent = os.path.dirname(parent)
    moved = []
    for root, _, files in os.walk(temp):
        # Its folders too, empty ones included (a SavedModel's assets/).
        os.makedirs(os.path.join(target, os.path.relpath(root, temp)), exist_ok=True)
        moved += [os.path.relpath(os.path.join(root, n), temp) for n in files]
    order = {name: k for k, name in enumerate(last)}
    for name in sorted(moved, key=lambda n: (
            n.endswith(".index") or os.path.basename(n) in order,
            order.get(os.path.basename(n), -1), n)):
        os.makedirs(os.path.dirname(os.path.join(target, name)), exist_ok=True)
        os.replace(os.path.join(temp, name), os.path.join(target, name))
    if record is None:
        record = _read_record(target)
        record.pop(tool, None)
    if record:
        _write_record(target, record)
    else:
        fileutil.remove(os.path.join(target, OUTPUTS_RECORD))
    fileutil.remove(temp)


def pending_in(folder, tool):
    """True when a fill in place of `tool`'s outputs (swap_in) into `folder` was stopped
    before its set was complete (OUTPUTS_RECORD names them pending)."""
    return bool((_read_record(folder).get(tool) or {}).get("pending"))


def _renamed(value, temp, folder):
    """`value` (a path, or a dict / list / tuple of them) with `temp` read as `folder`."""
    if isinstance(value, str):
        return folder + value[len(temp):] if (value == temp or value.startswith(temp + "/")) \
            else value
    if isinstance(value, dict):
        return {key: _renamed(item, temp, folder) for key, item in value.items()}
    if type(value) in (list, tuple):  # pylint: disable=unidiomatic-typecheck
        return type(value)(_renamed(item, temp, folder) for item in value)
    return value


def _refuse_busy_folder(target, flag, named):
    """ValueError when `target` is or holds the current folder, a training run holds it
    (its fileutil.LOCK_FILE locked) or a mount point is inside it (a folder replaced whole would
    move another file system's files)."""
    if "://" in target:
        return
    real, here = os.path.realpath(target), os.path.realpath(os.getcwd())
    if here == real or here.startswith(real.rstrip(os.sep) + os.sep):
        raise ValueError("%s=%s is (or holds) the current folder, which the output replaces "
                         "whole: name a folder of its own (nothing was written)" % (flag, named))
    lock_path = os.path.join(target, fileutil.LOCK_FILE)
    if os.path.exists(lock_path):
        try:
            import fcntl  # pylint: disable=import-outside-toplevel
            with open(lock_path, "a+") as f:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    fcntl.flock(f, fcntl.LOCK_UN)
                except BlockingIOError:
                    raise ValueError("%s=%s is in use by a training run: wait for it to end, "
                                     "or choose another %s (nothing was written)"
                                     % (flag, named, flag)) from None
        except (ImportError, OSError):
            pass
    for root, folders, _ in os.walk(target):
        points = fileutil.mount_points_in(os.path.join(root, name) for name in folders)
        if points:
            raise ValueError("%s=%s holds the mount point %s: its files would be moved; "
                             "choose another %s (nothing was written)"
                             % (flag, named, os.path.relpath(points[0], target), flag))


def _carry_others(earlier, new, skip):
    """Puts every file and folder of `earlier` but the paths `skip` into `new` (which the
    tool wrote first: its own names win); hard links, else copies; symlinks as links."""
    local = "://" not in earlier
    walk = os.walk(earlier) if local else tf.io.gfile.walk(earlier)
    for root, folders, files in walk:
        relative = os.path.relpath(root, earlier)
        target_root = os.path.join(new, relative) if relative != "." else new
        if not tf.io.gfile.isdir(target_root):
            tf.io.gfile.makedirs(target_root)
        links = [n for n in folders if local and os.path.islink(os.path.join(root, n))]
        emptied = [n for n in folders if n not in links and _only_skipped(
            os.path.join(root, n), skip, local)]
        folders[:] = [n for n in folders if n not in links and n not in emptied]
        for name in sorted(files + links):
            source = os.path.join(root, name)
            destination = os.path.join(target_root, name)
            if os.path.normpath(source) in skip or tf.io.gfile.exists(destination) or \
                    (local and os.path.lexists(destination)):
                continue
            if local and os.path.islink(source):
                os.symlink(os.readlink(source), destination)
            elif local:
                try:
                    os.link(source, destination)
                except OSError:
                    shutil.copy2(source, destination)
            else:
                tf.io.gfile.copy(source, destination)


def _only_skipped(folder, skip, local):
    """True when the non-empty `folder` holds nothing but files of `skip` (a sub-folder
    only the tool's earlier outputs filled: not carried)."""
    walk = os.walk(folder) if local else tf.io.gfile.walk(folder)
    found = False
    for root, folders, files in walk:
        if not files and not folders:
            return False  # an empty folder: not the tool's
        if local and any(os.path.islink(os.path.join(root, n)) for n in folders):
            return False
        for name in files:
            if os.path.normpath(os.path.join(root, name)) not in skip:
                return False
            found = True
    return found
