"""The folder of an exported SavedModel: what an export writes there, and nothing else.

export_saved_model.py builds the whole export (the SavedModel, export_info.json, --litert's
models and report) in a temporary folder beside --export_dir, checks it, and only then
renames it into place: an earlier export is replaced only by a complete one, and stays
as it was after any failure (a converter error, a full disk, SIGTERM). An existing folder
that is not one of our exports is never touched; files added to an earlier export (TF
Serving's assets.extra/tf_serving_warmup_requests, a user's notes at its top) are carried
into the new one, while files of someone else inside assets/ or variables/ (which an
export replaces whole) make it refuse, naming them. An --export_dir that is a symlink
has its target replaced (the link kept), never anything deleted through the link. The swap
is the converters' (output_folder.swap_in): an --export_dir that is a mount point is built
inside and filled in place (pending in output_folder.OUTPUTS_RECORD until all is in,
export_info.json last), and the folder keeps its permissions and owner.
"""
import json
import os

from absl import logging
import tensorflow as tf

from bert_tf2 import fileutil
from bert_tf2.base import output_folder
from bert_tf2.base import path_match
from bert_tf2 import startup
from bert_tf2.encoder import attention
from bert_tf2.export import ids_predictor
from bert_tf2.export import litert_predictor
from bert_tf2.export import onnx_predictor
from bert_tf2.export import openvino_predictor


# What an export writes in --export_dir: these entries at its top, and INFO_FILE.
# Anything else in an earlier export (TF Serving's assets.extra/tf_serving_warmup_requests,
# notes of the user's) was added by someone else, and is carried into the new export.
# The LiteRT models and report of --litert are an export's too: an export without them
# drops an earlier export's (they would describe another model).
# So are --openvino's and --onnx's (their folders openvino/ and onnx/, their reports).
_DOORS = {"litert": litert_predictor, "openvino": openvino_predictor, "onnx": onnx_predictor}
_EXPORT_ENTRIES = ("saved_model.pb", "saved_model.pbtxt", "fingerprint.pb", "variables",
                   "assets") + tuple(dict.fromkeys(
                       name for door in _DOORS.values() for name in door.export_files()))
INFO_FILE = ids_predictor.INFO_FILE  # assets.extra/export_info.json
VOCAB_FILE = ids_predictor.VOCAB_FILE  # assets/vocab.txt: the in-graph tokenizer's asset
# What an export writes inside the folders it replaces whole (assets/, variables/); any
# other file there is a user's, which a re-export would lose: refused (check_export_dir).
# A TF Serving version's LiteRT files (--export_base): in this folder beside the version
# (<base>/<n>.litert, a name TF Serving skips), with a copy of the vocabulary and
# export_info.json, so that LiteRTPredictor reads it as an export and a server copies only
# the SavedModel. --openvino's and --onnx's alike, in <base>/<n>.openvino and <n>.onnx
# (SIDE_SUFFIXES, by the setting that writes them).
LITERT_SUFFIX = litert_predictor.LiteRTPredictor.side_suffix
SIDE_SUFFIXES = {"litert": LITERT_SUFFIX,
                 "openvino": openvino_predictor.OpenVINOPredictor.side_suffix,
                 "onnx": onnx_predictor.ONNXPredictor.side_suffix}
_WHOLE_FOLDERS = {"assets": ("vocab.txt",),
                  "variables": ("variables.index", "variables.data-?????-of-?????")}


def resolve_export_dir(export_dir):
    """The folder an export writes: `export_dir`, or the target of a symlink `export_dir`
    (replaced there, the link kept; a dangling link is one ValueError)."""
    return fileutil.folder_behind_link(export_dir, "--export_dir",
                                       "an export (or a missing folder's parent)")


def check_export_dir(export_dir):
    """An existing --export_dir may only be one of our exports (or empty).

    Anything else there (a file, a folder of other things such as $HOME/models) is an
    error: an export never deletes what it did not write. An earlier export has what
    an export writes replaced, and keeps what was added to it (write_saved_model), but
    for files inside assets/ or variables/ that an export does not write: those are an
    error naming them (moved elsewhere, they are kept). A symlink is checked at its
    target (resolve_export_dir).
    """
    named = str(export_dir).rstrip("/")
    export_dir = resolve_export_dir(named)
    if not tf.io.gfile.exists(export_dir):
        return
    if not tf.io.gfile.isdir(export_dir):
        raise ValueError("--export_dir=%s is a file, not a directory" % named)
    marker = os.path.join(export_dir, INFO_FILE)
    # A killed training's lock file (fileutil.LOCK_FILE) is not an output of anyone's.
    entries = [n for n in tf.io.gfile.listdir(export_dir) if n != fileutil.LOCK_FILE]
    # A fill in place a kill stopped (a mount point: output_folder.swap_in) is ours.
    if entries and not tf.io.gfile.exists(marker) and not output_folder.pending_in(
            export_dir, _TOOL):
        raise ValueError("--export_dir=%s exists and is not a SavedModel exported by this "
                         "script (no assets.extra/export_info.json): choose another "
                         "directory; nothing there is replaced" % named)
    foreign = foreign_files(export_dir)
    if foreign:
        raise ValueError("--export_dir=%s: an export replaces assets/ and variables/ whole, "
                         "and they hold %d file(s) it did not write: %s; move them out (e.g. "
                         "into assets.extra/, which is kept) or choose another directory; "
                         "nothing was replaced" % (named, len(foreign), ", ".join(
                             foreign[:5]) + (", ..." if len(foreign) > 5 else "")))


def foreign_files(export_dir):
    """The files (relative paths) inside an export's assets/ and variables/ that an
    export does not write, sorted."""
    found = []
    for top, ours in sorted(_WHOLE_FOLDERS.items()):
        root = os.path.join(export_dir, top)
        if not tf.io.gfile.isdir(root):
            continue
        for folder, _, files in tf.io.gfile.walk(root):
            relative = os.path.relpath(folder, export_dir)
            for name in sorted(files):
                if relative != top or not any(path_match.name_matches(name, p) for p in ours):
                    found.append(os.path.join(relative, name))
    return found


def write_saved_model(module, export_dir, info, before_rename=None, new_only=False):
    """Saves `module` in a temporary folder beside `export_dir`, then renames it into place.

    An earlier export in export_dir is replaced only once the new export is complete
    and checked (see check_export_dir for what may be replaced), and only what an export
    writes: the files added to it are copied into the new one. After any error
    (SIGTERM included: run_cli raises it in the main thread) nothing is left behind and
    the earlier export is untouched. An export_dir that is a mount point (it cannot be
    renamed) is built inside and filled in place (output_folder.swap_in: a kill leaves it
    pending, never a complete-looking export); the new folder gets the earlier one's
    permissions and owner.
    INFO_FILE (assets.extra/export_info.json) records how the model was exported.

    Args:
      before_rename: called as before_rename(folder) with the temporary folder once the
        SavedModel and INFO_FILE are there (--litert writes its models into it); returns
        the names (relative to the folder) of the files it wrote, which are checked too.
      new_only: export_dir must not exist (a TF Serving version folder: a server may be
        loading an existing one); checked again just before the rename. --litert's files
        then go into export_dir + LITERT_SUFFIX, beside it (renamed just before it).

    Returns:
      export_dir (a symlink's target is replaced, the link kept).
    """
    named = str(export_dir).rstrip("/")
    fileutil.recover_folder(resolve_export_dir(named))
    if new_only:
        for suffix in SIDE_SUFFIXES.values():  # a killed export's side folder being written
            fileutil.recover_folder(named + suffix)
    _refuse_existing(named, new_only)
    export_dir = resolve_export_dir(named)
    # Names of this export's own, so that nothing already there is ever removed: beside
    # export_dir, or inside it when it is a mount point (filled in place).
    temp, in_place = output_folder.build_place(export_dir)
    if in_place:
        output_folder.remove_builds_inside(export_dir)
    check_export_dir(named)
    if export_dir != named:
        logging.info("--export_dir=%s is a symlink: the export replaces its target %s (the "
                     "link is kept)", named, export_dir)
    parent = os.path.dirname(export_dir)
    if parent:
        tf.io.gfile.makedirs(parent)
    sides = []  # [(side folder, its temporary)] of a TF Serving version's ids-in files
    try:
        # Traced here (serving.py): the graph any device runs, not the CPU's forms.
        with attention.portable_graphs():
            tf.saved_model.save(module, temp, signatures=module.signatures())
        output_folder.same_access(export_dir, temp)
        tf.io.gfile.makedirs(os.path.join(temp, os.path.dirname(INFO_FILE)))
        with tf.io.gfile.GFile(os.path.join(temp, INFO_FILE), "w") as f:
            f.write(json.dumps(info, indent=2, sort_keys=True) + "\n")
        startup.check_not_stopped()
        extra = list(before_rename(temp) or ()) if before_rename is not None else []
        check_complete(temp, extra)
        _refuse_existing(named, new_only)
        # A SIGTERM whose exception a library swallowed (the LiteRT converter's C++ code)
        # still stops the export here, before anything looks complete.
        startup.check_not_stopped()
        if new_only:
            sides = _move_beside(temp, export_dir, extra)
        if tf.io.gfile.exists(export_dir) and not in_place:
            kept = _carry_over(export_dir, temp)
            if kept:
                logging.info("Kept %d file(s) added to the earlier export: %s", len(kept),
                             ", ".join(kept))
        for side, side_temp in sides:  # new: _move_beside refuses an existing one
            output_folder.swap_in(side_temp, side)
        # What an export writes is its own (by name); anything else stays (see _carry_over).
        output_folder.swap_in(temp, export_dir, in_place, _TOOL, _own_names(),
                              _earlier_outputs(export_dir) if in_place else {})
    except BaseException:
        for side, side_temp in sides:
            for path in (side_temp, side if not tf.io.gfile.exists(export_dir) else None):
                if path and tf.io.gfile.exists(path):
                    fileutil.remove(path)
        if tf.io.gfile.exists(temp):
            fileutil.remove(temp)
        raise
    return named


# The tool an export's fill in place names in OUTPUTS_RECORD while it moves its files into a
# --export_dir that is a mount point (output_folder.swap_in); removed once all are in.
_TOOL = "export_saved_model.py"


def _own_names():
    """The names (globs inside an export) of what an export writes."""
    return sorted(_EXPORT_ENTRIES + (INFO_FILE,) + tuple(
        "%s/%s" % (top, name) for top, names in _WHOLE_FOLDERS.items() for name in names))


def _earlier_outputs(export_dir):
    """{name: path} of the files of the earlier export in `export_dir` that an export
    writes (what a fill in place removes first)."""
    found = {}
    for top in _EXPORT_ENTRIES + (INFO_FILE,):
        path = os.path.join(export_dir, top)
        if os.path.isdir(path) and not os.path.islink(path):
            for folder, _, files in os.walk(path):
                for name in files:
                    found[os.path.relpath(os.path.join(folder, name), export_dir)] = \
                        os.path.join(folder, name)
        elif os.path.lexists(path):
            found[top] = path
    return found


def _move_beside(temp, export_dir, names):
    """Moves the ids-in files among `names` (and a runtime's model repository) out of the
    export being written (`temp`) into a temporary folder per runtime beside export_dir (export_dir + SIDE_SUFFIXES[...]),
    each with copies of VOCAB_FILE and INFO_FILE (and of the CRF_FILE two runtimes share);
    returns [(side folder, its temporary)] (none when there are no such files)."""
    tops = {name.split("/")[0] for name in names}
    wanted = []
    for runtime, door in _DOORS.items():
        own = [t for t in door.export_files() if t != ids_predictor.CRF_FILE and (
            t in tops or tf.io.gfile.exists(os.path.join(temp, t)))]  # and its repository
        if any(t in tops for t in own):
            wanted.append((export_dir + SIDE_SUFFIXES[runtime], own))
    for side, _ in wanted:
        if tf.io.gfile.exists(side):
            raise ValueError("%s exists: a version's ids-in folder is never replaced; nothing "
                             "was written" % side)
    made = []
    try:
        for side, own in wanted:
            side_temp = fileutil.temp_name(side)
            made.append((side, side_temp))
            shared = [VOCAB_FILE, INFO_FILE] + (
                [ids_predictor.CRF_FILE] if ids_predictor.CRF_FILE in tops else [])
            for name in shared:
                tf.io.gfile.makedirs(os.path.join(side_temp, os.path.dirname(name)))
                tf.io.gfile.copy(os.path.join(temp, name), os.path.join(side_temp, name))
            for top in own:
                tf.io.gfile.rename(os.path.join(temp, top), os.path.join(side_temp, top))
    except BaseException:
        for _, side_temp in made:
            if tf.io.gfile.exists(side_temp):
                fileutil.remove(side_temp)
        raise
    if ids_predictor.CRF_FILE in tops and made:
        fileutil.remove(os.path.join(temp, ids_predictor.CRF_FILE))
    return made


def _refuse_existing(export_dir, new_only):
    """new_only: ValueError when the version folder `export_dir` exists (made meanwhile by
    another export, or a server's)."""
    if new_only and (tf.io.gfile.exists(export_dir) or os.path.islink(export_dir)):
        raise ValueError("%s exists: a TF Serving version folder is never replaced (a server "
                         "may be loading it); nothing was written" % export_dir)


def check_complete(folder, extra=()):
    """ValueError naming the first file of an export in `folder` that is missing or empty:
    saved_model.pb, variables/variables.index, INFO_FILE (valid JSON) and the `extra`
    names (the exporter's: VOCAB_FILE, --litert's files)."""
    for name in ("saved_model.pb", "variables/variables.index", INFO_FILE) + tuple(extra):
        path = os.path.join(folder, name)
        if not tf.io.gfile.exists(path) or tf.io.gfile.stat(path).length == 0:
            raise ValueError("the export's %s is missing or empty: nothing was replaced"
                             % name)
    with tf.io.gfile.GFile(os.path.join(folder, INFO_FILE)) as f:
        json.loads(f.read())


def _carry_over(earlier, new):
    """Copies what an export does not write from the `earlier` export into `new`;
    returns the files copied (paths relative to the export). A symlink (local folders)
    is copied as a link, never followed."""
    kept = []
    local = "://" not in earlier
    walk = os.walk(earlier) if local else tf.io.gfile.walk(earlier)
    for folder, folders, files in walk:
        relative = os.path.relpath(folder, earlier)
        top = relative.split(os.sep)[0]
        if top in _EXPORT_ENTRIES:
            continue
        if relative != ".":
            tf.io.gfile.makedirs(os.path.join(new, relative))
        links = [n for n in folders if local and os.path.islink(os.path.join(folder, n))]
        for name in sorted(files + links):
            path = os.path.normpath(os.path.join(relative, name))
            if (path in _EXPORT_ENTRIES or path == os.path.normpath(INFO_FILE)
                    or tf.io.gfile.exists(os.path.join(new, path))):
                continue  # the new export's own (its warm-up requests, ...)
            source = os.path.join(folder, name)
            if local and os.path.islink(source):
                os.symlink(os.readlink(source), os.path.join(new, path))
            else:
                tf.io.gfile.copy(source, os.path.join(new, path))
            kept.append(path)
    return kept
