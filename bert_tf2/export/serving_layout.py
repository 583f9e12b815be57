"""TF Serving's layout: where an export goes when --export_base is given.

`tensorflow_model_server --model_base_path=BASE` serves the numbered folders inside BASE
(BASE/1, BASE/2, ...; the highest by default) and watches it for new ones. An export
with --export_base writes BASE/<--version> (default: one more than the highest number
there, 1 in a new BASE), never into a number that exists (a server may be loading it):
the new version is built in a temporary folder beside it (BASE/<n>.tmp-..., a name TF
Serving skips, not being a number) and renamed to its number once complete
(saved_model_dir.write_saved_model), so a server never sees half a version.
"""
import os
import re

import tensorflow as tf

# A version folder's name: what TF Serving reads as a version number (and its ids-in
# folders beside it, <n>.litert, <n>.openvino, <n>.onnx, which count as taken too). TF
# Serving reads the number as a 64-bit integer: leading zeros read alike ("007" is version
# 7), a larger one is no version at all.
SIDE_ENDINGS = (".litert", ".openvino", ".onnx")  # saved_model_dir.SIDE_SUFFIXES' values
_VERSION_NAME = re.compile(r"^([0-9]+)(\.litert|\.openvino|\.onnx)?$")
MAX_VERSION = 2 ** 63 - 1

# (kind, name, default, help), as settings_lib.define_flag_table reads them.
FLAGS = (
    ("string", "export_base", None,
     "TF Serving's --model_base_path: write the export into the numbered folder "
     "<export_base>/<--version> (a new version; an existing number is never touched) instead "
     "of --export_dir. Give one of the two."),
    ("integer", "version", None,
     "--export_base: the version number to write (1 to 2^63-1, TF Serving's 64-bit "
     "numbers; refused when that folder exists, or one TF Serving reads as the same number, "
     "such as 007 for 7). "
     "Default: one more than the highest number in --export_base, 1 in a new one."),
)


def versions(base):
    """The version numbers of the folders in `base` (sorted; none when it is missing)."""
    return sorted(_version_folders(base))


def _version_folders(base):
    """{version number: [folder names TF Serving reads as it, and their side folders]} of
    `base` (empty when it is missing)."""
    found = {}
    if not tf.io.gfile.isdir(base):
        return found
    for name in sorted(n.rstrip("/") for n in tf.io.gfile.listdir(base)):
        match = _VERSION_NAME.match(name)
        if match and int(match.group(1)) <= MAX_VERSION and tf.io.gfile.isdir(
                os.path.join(base, name)):
            found.setdefault(int(match.group(1)), []).append(name)
    return found


def check(settings):
    """One of --export_dir / --export_base, and a valid --version; ValueError else."""
    if settings.export_dir and settings.export_base:
        raise ValueError("give --export_dir or --export_base, not both (--export_base "
                         "writes <export_base>/<version>)")
    if not settings.export_base:
        settings.require("export_dir")
    if settings.version is not None:
        if not settings.export_base:
            raise ValueError("--version=%d has no effect without --export_base"
                             % settings.version)
        if settings.version < 1:
            raise ValueError("--version must be >= 1, got %d" % settings.version)
        if settings.version > MAX_VERSION:
            raise ValueError("--version=%d: past %d, the largest version number TF Serving "
                             "reads (a 64-bit integer)" % (settings.version, MAX_VERSION))


def target(settings):
    """The folder the export writes: --export_dir, or <--export_base>/<version> (a new
    version number; ValueError naming it when --version names an existing folder)."""
    if not settings.export_base:
        return settings.export_dir
    base = settings.export_base.rstrip("/") or "/"
    if tf.io.gfile.exists(base) and not tf.io.gfile.isdir(base):
        raise ValueError("--export_base=%s is a file, not a directory" % base)
    taken = _version_folders(base)
    if settings.version is None:
        number = max(taken, default=0) + 1
        if number > MAX_VERSION:
            raise ValueError("--export_base=%s: its highest version is %d, the largest TF "
                             "Serving reads: export into a new --export_base"
                             % (base, MAX_VERSION))
        return os.path.join(base, str(number))
    path = os.path.join(base, str(settings.version))
    others = [n for n in taken.get(settings.version, ())
              if n not in [str(settings.version)] + [str(settings.version) + e
                                                     for e in SIDE_ENDINGS]]
    if others:  # "007" beside a new "7": two folders TF Serving reads as the same version
        raise ValueError("--version=%d: %s exists, which TF Serving reads as version %d too "
                         "(a server may be loading it; versions are never replaced): leave "
                         "--version out for the next free number"
                         % (settings.version, os.path.join(base, others[0]), settings.version))
    if any(tf.io.gfile.exists(path + e) for e in ("",) + SIDE_ENDINGS):
        raise ValueError("--version=%d: %s exists (a server may be loading it; versions are "
                         "never replaced): leave --version out for the next free number"
                         % (settings.version, path))
    return path


def model_name(export_dir, settings):
    """The model's name in the warm-up requests: --export_base's last part (the
    --model_name TF Serving is usually given), else --export_dir's."""
    return os.path.basename((settings.export_base or export_dir).rstrip("/")) or "model"
