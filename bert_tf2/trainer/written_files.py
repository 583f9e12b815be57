"""What training wrote in its output folder, file by file: the proof a removal needs.

A training run records every file it writes in --output_dir (checkpoints, the state file,
training_record.json, eval_history.jsonl, best/'s files, the copies of --vocab_file and
--bert_config_file it made, its TensorBoard events) in output_dir/training_files.json:

    {"files": {"model.ckpt-2.index": {"size": 123, "sha256": "..."}, ...,
               "train/events.out.tfevents....": {"size": 40, "sha256": "...", "grows": true}},
     "folders": ["best", "train"],       # the folders the run made
     "pending": ["model.ckpt-4.*", ...]} # names being written (a kill between the write
                                         # and its record leaves them here)

A removal (--existing_checkpoint=restart, --keep_best_only) removes a file only when
`proven` holds for it: the file is there with the size and sha256 recorded (an events
file, which TensorBoard appends to, with the recorded bytes at its start), or its name is
one the run declared it was writing. A file of the user's under one of these names (a
vocab.txt made with create_vocab.py, a Google release's bert_config.json) was never
recorded, so it is never removed; a folder is removed only when the run made it.

Contracts with the other modules (bert_tf2/trainer/written_files.py):
writing(folder, names) (a context: `names`, globs relative to folder, pending during the
block, recorded after it), note(folder, names), note_folder(folder, name), forget(folder,
names), settle(folder, pattern) (a pending write a kill cut, known complete: recorded),
proven(folder, name), made(folder, name), ours_events(folder, sub, since) (the
events files this process created in folder/sub since the time `since`); Run(folder)
(a training run: .saving(name, step), a context around each checkpoint's save).
"""
import contextlib
import hashlib
import json
import os
import socket
import time

import tensorflow as tf

from bert_tf2 import fileutil
from bert_tf2.base import path_match

FILE = "training_files.json"
# Files up to this size are hashed whole; a larger one by its size, first and last MB.
_WHOLE_BYTES = 1 << 24
_BLOCK = 1 << 20


def _path(folder):
    return os.path.join(str(folder), FILE)


def _read(folder):
    path = _path(folder)
    if not tf.io.gfile.exists(path):
        return {"files": {}, "folders": [], "pending": []}
    record = fileutil.read_json(path)
    if not (isinstance(record, dict) and isinstance(record.get("files"), dict) and all(
            isinstance(record.get(key, []), list) and
            all(isinstance(name, str) for name in record.get(key, []))
            for key in ("folders", "pending"))):
        raise ValueError("%s is not a record of this program's training files: remove it "
                         "(a restart then removes nothing it cannot prove it wrote)" % path)
    record.setdefault("folders", [])
    record.setdefault("pending", [])
    return record


def _write(folder, record):
    with fileutil.atomic_open(_path(folder), "w") as f:
        f.write(json.dumps(record, indent=1, sort_keys=True) + "\n")


def fingerprint(path, size=None):
    """{"size", "sha256"} of the file's first `size` bytes (None: all of them); over
    16 MB the digest covers the size, the first and the last MB."""
    with tf.io.gfile.GFile(path, "rb") as f:
        total = tf.io.gfile.stat(path).length if size is None else size
        digest = hashlib.sha256(b"%d\0" % total)
        if total <= _WHOLE_BYTES:
            data = f.read(total)
            if len(data) != total:
                raise ValueError("%s is shorter than %d bytes" % (path, total))
            digest.update(data)
        else:
            digest.update(f.read(_BLOCK))
            f.seek(total - _BLOCK)
            digest.update(f.read(_BLOCK))
    return {"size": total, "sha256": digest.hexdigest()}


def _names(folder, patterns):
    """The files (relative names, "/"-separated) in `folder` matching `patterns`."""
    found = set()
    for pattern in patterns:
        for path in path_match.matching(str(folder) + "/", pattern):
            if not tf.io.gfile.isdir(path) and not fileutil.links_in([path]):
                found.add(os.path.relpath(path, str(folder)).replace(os.sep, "/"))
    return sorted(found)


@contextlib.contextmanager
def writing(folder, patterns):
    """The block writes the files `patterns` (globs relative to `folder`): pending while
    it runs, recorded with their fingerprints when it ends without an exception (none
    given: nothing recorded, a worker that is not the chief)."""
    if not patterns:
        yield
        return
    record = _read(folder)
    record["pending"] = sorted(set(record["pending"]) | set(patterns))
    _write(folder, record)
    yield
    note(folder, _names(folder, patterns), done=patterns)


def note(folder, names, grows=(), done=()):
    """Records the files `names` (relative to `folder`) as written by training, those in
    `grows` by their current start (a file written on, as TensorBoard's events); the
    pending patterns `done` are dropped, and so are records of files no longer there."""
    record = _read(folder)
    files = record["files"]
    for name in list(names) + list(grows):
        entry = fingerprint(os.path.join(str(folder), name))
        if name in grows:
            entry["grows"] = True
        files[name] = entry
    for name in [n for n in files if not tf.io.gfile.exists(os.path.join(str(folder), n))]:
        del files[name]
    record["pending"] = sorted(set(record["pending"]) - set(done))
    _write(folder, record)


def settle(folder, pattern):
    """Records the files matching `pattern` (relative to `folder`), a pending write a kill
    cut once it is known complete; True when `pattern` was pending."""
    if not tf.io.gfile.exists(_path(folder)) or pattern not in _read(folder)["pending"]:
        return False
    note(folder, _names(folder, [pattern]), done=[pattern])
    return True


def note_folder(folder, name):
    """Records that training made the folder `name` (relative to `folder`)."""
    record = _read(folder)
    if name not in record["folders"]:
        record["folders"] = sorted(record["folders"] + [name])
        _write(folder, record)


def forget(folder, names, every_pending=False):
    """Drops the records of `names` (removed files or folders), and the pending names
    that match one of them (a name declared by a write a kill cut, now removed; every one
    with every_pending, a restart's): a file of someone else's put there later under that
    name is not training's."""
    if not tf.io.gfile.exists(_path(folder)):
        return
    record = _read(folder)
    names = set(names)
    record["files"] = {n: e for n, e in record["files"].items() if n not in names}
    record["folders"] = [n for n in record["folders"] if n not in names]
    record["pending"] = [] if every_pending else [
        p for p in record["pending"] if not any(path_match.name_matches(n, p) for n in names)]
    _write(folder, record)


def proven(folder, name, record=None):
    """Whether the file `name` (relative to `folder`) is one training recorded writing:
    its size and sha256 as recorded (an events file: its recorded start), or a name it
    declared it was writing when a kill came."""
    record = _read(folder) if record is None else record
    path = os.path.join(str(folder), name)
    entry = record["files"].get(name)
    if isinstance(entry, dict) and tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path):
        try:
            size = tf.io.gfile.stat(path).length
            if entry.get("grows"):
                return size >= entry["size"] and fingerprint(path, entry["size"]) == {
                    "size": entry["size"], "sha256": entry["sha256"]}
            return fingerprint(path) == {"size": entry["size"], "sha256": entry["sha256"]}
        except (KeyError, TypeError, ValueError, tf.errors.OpError):
            return False
    return any(path_match.name_matches(name, p) for p in record["pending"])


def made(folder, name, record=None):
    """Whether training made the folder `name` (relative to `folder`)."""
    record = _read(folder) if record is None else record
    return name in record["folders"]


def read(folder):
    """The record of `folder` (None when it has none), for proven / made."""
    return _read(folder) if tf.io.gfile.exists(_path(folder)) else None


def ours_events(folder, sub, since):
    """The events files (names relative to `folder`) this process's summary writers made
    in folder/sub at or after the time `since`: TensorFlow names each
    events.out.tfevents.<seconds>.<host>.<pid>.<n>..., so no other run's file is among them."""
    where = os.path.join(str(folder), sub)
    if not tf.io.gfile.isdir(where):
        return []
    mine = ".%s.%d." % (socket.gethostname(), os.getpid())
    found = []
    for name in sorted(tf.io.gfile.listdir(where)):
        parts = name.split(".")
        if not name.startswith("events.out.tfevents.") or mine not in name + ".":
            continue
        try:
            created = int(parts[3])
        except (IndexError, ValueError):
            continue
        if created >= int(since):
            found.append("%s/%s" % (sub, name))
    return found



class Run:
    """One training run's writing into `folder` (None: a worker's scratch folder, not
    recorded): made before the run writes anything, it knows which of the TensorBoard
    folders the run will make and which events files are its own."""

    SUBFOLDERS = ("train", "eval")

    def __init__(self, folder):
        self.folder = None if folder is None else str(folder)
        self.since = time.time()
        self.absent = [] if folder is None else [
            sub for sub in self.SUBFOLDERS
            if not os.path.lexists(os.path.join(self.folder, sub))]

    @contextlib.contextmanager
    def saving(self, name, step):
        """The block saves checkpoint `name`-`step`: its files and the state file pending
        during the block, recorded after it with the run's events files and the folders
        it made."""
        if self.folder is None:
            yield
            return
        with writing(self.folder, ["%s-%d.index" % (name, step), "%s-%d.data-*" % (name, step),
                                   "checkpoint"]):
            yield
        for sub in self.absent:
            if tf.io.gfile.isdir(os.path.join(self.folder, sub)):
                note_folder(self.folder, sub)
        note(self.folder, (), grows=[n for sub in self.SUBFOLDERS
                                     for n in ours_events(self.folder, sub, self.since)])
