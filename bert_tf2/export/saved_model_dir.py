"""The folder of an exported SavedModel: what an export writes there, and nothing else.

export_saved_model.py saves beside --export_dir and renames into place, so an earlier
export is replaced only by a complete one; an existing folder that is not one of our
exports is never touched, and files added to an earlier export (TF Serving's
assets.extra/tf_serving_warmup_requests, a user's notes) are carried into the new one.
"""
import json
import os
import uuid

from absl import logging
import tensorflow as tf

from bert_tf2 import fileutil
from bert_tf2.encoder import attention
from bert_tf2.export import litert_predictor


# What an export writes in --export_dir: these entries at its top, and INFO_FILE.
# Anything else in an earlier export (TF Serving's assets.extra/tf_serving_warmup_requests,
# notes of the user's) was added by someone else, and is carried into the new export.
# The LiteRT models and report of --litert are an export's too: an export without them
# drops an earlier export's (they would describe another model).
_EXPORT_ENTRIES = ("saved_model.pb", "saved_model.pbtxt", "fingerprint.pb", "variables",
                   "assets") + litert_predictor.export_files()
INFO_FILE = "assets.extra/export_info.json"


def check_export_dir(export_dir):
    """An existing --export_dir may only be one of our exports (or empty).

    Anything else there (a file, a folder of other things such as $HOME/models) is an
    error: an export never deletes what it did not write. An earlier export has what
    an export writes replaced, and keeps what was added to it (write_saved_model).
    """
    if not tf.io.gfile.exists(export_dir):
        return
    if not tf.io.gfile.isdir(export_dir):
        raise ValueError("--export_dir=%s is a file, not a directory" % export_dir)
    marker = os.path.join(export_dir, INFO_FILE)
    # A killed training's lock file (fileutil.LOCK_FILE) is not an output of anyone's.
    entries = [n for n in tf.io.gfile.listdir(export_dir) if n != fileutil.LOCK_FILE]
    if entries and not tf.io.gfile.exists(marker):
        raise ValueError("--export_dir=%s exists and is not a SavedModel exported by this "
                         "script (no assets.extra/export_info.json): choose another "
                         "directory; nothing there is replaced" % export_dir)


def write_saved_model(module, export_dir, info):
    """Saves `module` beside `export_dir`, then renames it into place.

    An earlier export in export_dir is replaced only once the new SavedModel is
    complete (see check_export_dir for what may be replaced), and only what an export
    writes: the files added to it are copied into the new one. After an error nothing
    is left behind and the earlier export is untouched.
    INFO_FILE (assets.extra/export_info.json) records how the model was exported.
    """
    export_dir = export_dir.rstrip("/")
    check_export_dir(export_dir)
    parent = os.path.dirname(export_dir)
    if parent:
        tf.io.gfile.makedirs(parent)
    # Names of this export's own, so that nothing already there is ever removed.
    tag = uuid.uuid4().hex[:8]
    temp, old = "%s.tmp-%s" % (export_dir, tag), "%s.old-%s" % (export_dir, tag)
    try:
        # Traced here (serving.py): the graph any device runs, not the CPU's forms.
        with attention.portable_graphs():
            tf.saved_model.save(module, temp, signatures=module.signatures())
        tf.io.gfile.makedirs(os.path.join(temp, os.path.dirname(INFO_FILE)))
        with tf.io.gfile.GFile(os.path.join(temp, INFO_FILE), "w") as f:
            f.write(json.dumps(info, indent=2, sort_keys=True) + "\n")
        if tf.io.gfile.exists(export_dir):
            kept = _carry_over(export_dir, temp)
            tf.io.gfile.rename(export_dir, old)
            if kept:
                logging.info("Kept %d file(s) added to the earlier export: %s", len(kept),
                             ", ".join(kept))
        tf.io.gfile.rename(temp, export_dir)
    except BaseException:
        if tf.io.gfile.exists(temp):
            tf.io.gfile.rmtree(temp)
        if tf.io.gfile.exists(old) and not tf.io.gfile.exists(export_dir):
            tf.io.gfile.rename(old, export_dir)
        raise
    if tf.io.gfile.exists(old):
        tf.io.gfile.rmtree(old)
    return export_dir


def _carry_over(earlier, new):
    """Copies what an export does not write from the `earlier` export into `new`;
    returns the files copied (paths relative to the export)."""
    kept = []
    for folder, _, files in tf.io.gfile.walk(earlier):
        relative = os.path.relpath(folder, earlier)
        top = relative.split(os.sep)[0]
        if top in _EXPORT_ENTRIES:
            continue
        if relative != ".":
            tf.io.gfile.makedirs(os.path.join(new, relative))
        for name in sorted(files):
            path = os.path.normpath(os.path.join(relative, name))
            if path in _EXPORT_ENTRIES or path == os.path.normpath(INFO_FILE):
                continue
            tf.io.gfile.copy(os.path.join(folder, name), os.path.join(new, path))
            kept.append(path)
    return kept
