"""The output folder is the model: what a training run leaves there, and the one reader
that turns a model folder into the settings a command line left out.

Every training run writes into its --output_dir (write):
- bert_config.json: a copy of --bert_config_file;
- vocab.txt: a copy of --vocab_file (runs that have one);
- model_settings.json: {"runner": ..., "do_lower_case", "max_seq_length", and the
  runner's task settings (TASK_SETTINGS)}.
periodic_eval copies them into best/ with the other settings files
(fileutil.SETTINGS_FILES), so best/ is a whole model folder too.

Every later run and the export read them through defaults(): from where the weights
come from (checkpoints.settings_file: --output_dir when it holds checkpoints, else beside
--init_checkpoint, which may be an output folder, its best/, a checkpoint prefix in one,
or a converted model folder with bert_config.json + vocab.txt), as {setting: value} for
`settings.with_defaults(...)`: a setting given on the command line wins, with one
warning line when it contradicts the folder. Folders without these files give nothing
(the flags as before).
"""
import functools
import hashlib
import json
import numbers
import os
import tempfile

from absl import logging
import tensorflow as tf

from bert_tf2 import fileutil
from bert_tf2 import input_pipeline
from bert_tf2 import startup
from bert_tf2.base import doors
from bert_tf2.trainer import checkpoints
from bert_tf2.trainer import written_files

CONFIG_FILE = fileutil.CONFIG_FILE
VOCAB_FILE = fileutil.VOCAB_FILE
SETTINGS_FILE = fileutil.MODEL_SETTINGS_FILE
# A converted model's settings (pooling.SETTINGS_FILE): its length and casing.
_EMBEDDING_FILE = "sentence_embedding.json"

# The task settings each runner saves (beside do_lower_case and max_seq_length).
TASK_SETTINGS = {
    "run_classifier": ("task_name", "processor", "task_type", "text_a_column",
                       "text_b_column", "label_column", "threshold", "xnli_language"),
    "run_ner": ("doc_stride", "document_context", "feature_based", "layers", "lstm_units",
                "crf", "crf_tag_scheme"),
    "run_multiple_choice": ("task_name",),
    "run_squad": ("doc_stride", "max_query_length", "version_2_with_negative"),
    "run_pretraining": ("max_predictions_per_seq",),
}

# The type of every value model_settings.json / sentence_embedding.json may hold (None:
# the setting was not given); read() refuses another type, naming the file.
_BOOL, _INT, _NUMBER, _TEXT = (bool,), (int,), (int, float), (str,)
VALUE_TYPES = {
    "runner": _TEXT, "do_lower_case": _BOOL, "max_seq_length": _INT,
    "task_name": _TEXT, "processor": _TEXT, "task_type": _TEXT, "text_a_column": _TEXT,
    "text_b_column": _TEXT, "label_column": _TEXT, "threshold": _NUMBER,
    "xnli_language": _TEXT, "doc_stride": _INT, "document_context": _BOOL,
    "feature_based": _BOOL, "layers": _TEXT, "lstm_units": _INT, "crf": _BOOL,
    "crf_tag_scheme": _TEXT, "max_query_length": _INT, "version_2_with_negative": _BOOL,
    "max_predictions_per_seq": _INT,
}
# The folder's files whose content decides what a prediction means (the ids of the words,
# the name of each output): their size and sha256 are recorded at training time under
# this key of model_settings.json, and a changed file is refused when the folder is read.
CHECKSUMS_KEY = "files"
CHECKED_FILES = (VOCAB_FILE, fileutil.LABEL_LIST_FILE)

# The settings defaults() reads (a part of a face's settings: the fields it has).
SETTINGS = tuple(sorted({"init_checkpoint", "output_dir", "do_train", "model_type",
                         "bert_config_file", "vocab_file", "do_lower_case", "max_seq_length"}
                        | {name for names in TASK_SETTINGS.values() for name in names}))


# ---------------------------------------------------------------------------
# Writing (every training run)
# ---------------------------------------------------------------------------

def write(output_dir, runner, bert_config_file, vocab_file, values):
    """Leaves the model folder's files in `output_dir` (a training run, before it trains).

    Args:
      output_dir: the run's --output_dir (made already).
      runner: the runner's name, a key of TASK_SETTINGS.
      bert_config_file, vocab_file: the files the run uses (vocab_file None: none).
      values: {setting: value}: do_lower_case, max_seq_length and the task settings.

    A resumed run finds the config and vocab there: the same content is kept, another is
    a ValueError naming both files (the checkpoints there were trained with the first).
    model_settings.json is rewritten: it describes the folder's latest training run.
    """
    folder = str(output_dir)
    tf.io.gfile.makedirs(folder)
    for source, name, flag in ((bert_config_file, CONFIG_FILE, "--bert_config_file"),
                               (vocab_file, VOCAB_FILE, "--vocab_file")):
        if source:
            _copy_once(source, os.path.join(folder, name), flag)
    saved = {"runner": runner}
    saved.update({name: value for name, value in values.items()
                  if name in ("do_lower_case", "max_seq_length") + TASK_SETTINGS[runner]})
    saved[CHECKSUMS_KEY] = {name: file_checksum(os.path.join(folder, name))
                            for name in CHECKED_FILES
                            if tf.io.gfile.exists(os.path.join(folder, name))}
    with fileutil.atomic_open(os.path.join(folder, SETTINGS_FILE), "w") as f:
        f.write(json.dumps(saved, indent=2, sort_keys=True) + "\n")


def file_checksum(path):
    """{"size": bytes, "sha256": hex digest} of the file at `path`."""
    with tf.io.gfile.GFile(path, "rb") as f:
        data = f.read()
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def check_files(settings_path, saved):
    """ValueError (one line naming the file) when a file CHECKED_FILES names beside
    `settings_path` is not the one the model was trained with (model_settings.json's
    CHECKSUMS_KEY); a folder written before checksums were recorded is not checked."""
    recorded = saved.get(CHECKSUMS_KEY)
    if recorded is None:
        return
    folder = os.path.dirname(settings_path)
    if not isinstance(recorded, dict):
        raise ValueError("%s: %r must map file names to {\"size\", \"sha256\"}, not %s"
                         % (settings_path, CHECKSUMS_KEY, json.dumps(recorded)))
    for name, want in sorted(recorded.items()):
        path = os.path.join(folder, name)
        if name not in CHECKED_FILES or not tf.io.gfile.exists(path):
            continue  # a missing file is named by the code that needs it
        if not (isinstance(want, dict) and set(want) == {"size", "sha256"}):
            raise ValueError("%s: %r entry of %s must be {\"size\", \"sha256\"}, not %s"
                             % (settings_path, CHECKSUMS_KEY, name, json.dumps(want)))
        have = file_checksum(path)
        if have != want:
            raise ValueError(
                "%s is not the file the model in %s was trained with (%d bytes, sha256 %s..., "
                "recorded in %s: %s bytes, sha256 %s...): another %s gives other ids or names; "
                "put the training run's file back" % (
                    path, folder, have["size"], have["sha256"][:12],
                    os.path.basename(settings_path), want["size"], str(want["sha256"])[:12],
                    "vocabulary" if name == VOCAB_FILE else "label order"))


def check_values(path, saved):
    """ValueError (one line naming the file and the setting) when a value of a model
    folder's settings file has another type than the setting (VALUE_TYPES) or contradicts
    the others (a setting of another runner, an unknown runner)."""
    for key, value in sorted(saved.items()):
        types = VALUE_TYPES.get(key)
        if types is None or value is None:
            continue
        if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
            raise ValueError("%s: %r is %s, expected %s" % (
                path, key, json.dumps(value),
                " or ".join({bool: "true/false", int: "an integer", float: "a number",
                             str: "a string"}[t] for t in types)))
    runner = saved.get("runner")
    if runner is None:
        return
    if runner not in TASK_SETTINGS:
        raise ValueError("%s: \"runner\" is %s, expected one of %s"
                         % (path, json.dumps(runner), ", ".join(sorted(TASK_SETTINGS))))
    theirs = sorted(key for key in saved if key in VALUE_TYPES and key not in (
        ("runner", "do_lower_case", "max_seq_length") + TASK_SETTINGS[runner]))
    if theirs:
        raise ValueError("%s: %s %s of another runner than its \"runner\" %s: the file "
                         "contradicts itself" % (path, ", ".join(theirs),
                                                 "is a setting" if len(theirs) == 1 else
                                                 "are settings", runner))


def _copy_once(source, target, flag):
    """Copies `source` to `target` unless it holds the same already; another content
    there is a ValueError naming both."""
    with tf.io.gfile.GFile(source, "rb") as f:
        data = f.read()
    if tf.io.gfile.exists(target):
        if _same_content(source, target):
            return
        raise ValueError("%s=%s differs from %s, which the model in that folder was trained "
                         "with: use a new --output_dir, or that file" % (flag, source, target))
    folder, name = os.path.split(target)
    with written_files.writing(folder, [name]), fileutil.atomic_open(target, "wb") as f:
        f.write(data)


def _same_content(a, b):
    """Whether two files hold the same: JSON files the same value, others the same bytes."""
    with tf.io.gfile.GFile(a, "rb") as f:
        first = f.read()
    with tf.io.gfile.GFile(b, "rb") as f:
        second = f.read()
    if first == second:
        return True
    if a.endswith(".json") and b.endswith(".json"):
        try:
            return json.loads(first) == json.loads(second)
        except ValueError:
            return False
    return False


# ---------------------------------------------------------------------------
# Reading (every later run, the export)
# ---------------------------------------------------------------------------

def read(init_checkpoint, output_dir=None):
    """({setting: value}, {setting: the file it came from}) of the model folder the
    weights come from; ({}, {}) when it has none of the files.

    Everything found: bert_config_file / vocab_file (the folder's files), and
    model_settings.json's values ("runner" among them); a folder without it (a converted
    model) gives sentence_embedding.json's do_lower_case and max_seq_length.
    """
    found, sources = {}, {}
    for name, key in ((CONFIG_FILE, "bert_config_file"), (VOCAB_FILE, "vocab_file")):
        path = checkpoints.settings_file(name, init_checkpoint, output_dir)
        if path:
            found[key] = sources[key] = path
    path = checkpoints.settings_file(SETTINGS_FILE, init_checkpoint, output_dir)
    keys = None
    if not path:
        path = checkpoints.settings_file(_EMBEDDING_FILE, init_checkpoint, output_dir)
        keys = ("do_lower_case", "max_seq_length")
    saved = fileutil.read_json(path) if path else {}
    if not isinstance(saved, dict):
        raise ValueError("%s: expected a JSON object of settings" % path)
    if path:  # sentence_embedding.json: only the two values read (its own are pooling's)
        check_values(path, saved if keys is None else {
            key: saved[key] for key in keys if key in saved})
        check_files(path, saved)
    for key in keys or saved:
        if key in saved and key != CHECKSUMS_KEY:
            found[key], sources[key] = saved[key], path
    return found, sources


def defaults(part, runner=None, type_of_runner=None):
    """{setting: value} the face's settings take where the user gave none
    (`settings.with_defaults(defaults(settings.part(*SETTINGS), runner))`).

    Args:
      part: the face's settings, part(*SETTINGS): init_checkpoint, output_dir and what
        the folder may fill.
      runner: the face's runner name; None for the export, whose --model_type picks it
        (and is the folder's when not given).
      type_of_runner: the export's: runner -> the --model_type its folders export as, or
        None (the head registry's, export/head_types.type_of_runner: this floor is below
        it and keeps no copy).

    A training run takes only the model's own settings (config, vocab, casing); the
    task's settings and max_seq_length come from a folder the same runner wrote. A
    setting given that contradicts the folder is used, with one warning line.
    """
    init_checkpoint = getattr(part, "init_checkpoint", None)
    output_dir = getattr(part, "output_dir", None)
    if not (init_checkpoint or output_dir):
        return {}
    found, sources = read(init_checkpoint, output_dir)
    saved_runner = found.pop("runner", None)
    if runner is None and "model_type" in part:  # the export: --model_type, else the folder's
        saved_type = (type_of_runner(saved_runner)
                      if saved_runner and type_of_runner else None)
        if not part.model_type and saved_type:
            found["model_type"] = saved_type
        model_type = part.model_type or found.get("model_type")
        runner = saved_runner if saved_type and saved_type == model_type else None
    keep = {"bert_config_file", "vocab_file", "do_lower_case", "model_type"}
    if not getattr(part, "do_train", False):
        keep.add("max_seq_length")
        if saved_runner and saved_runner == runner:
            keep.update(TASK_SETTINGS[runner])
    found = {key: value for key, value in found.items() if key in keep and key in part}
    for key, value in found.items():
        if part.given(key) and _contradicts(key, getattr(part, key), value):
            warn_given_wins(part.flag(key), value, sources[key])
    return found


def warn_given_wins(flag, value, source):
    """The one line of a setting given (`flag`: how it reads, `--x=1`) that contradicts the
    folder's `value`, read from `source` (a file of the folder when `source` is `value`):
    the given one is used. Every face that fills settings from a model folder (the
    runners, the export, the converters' casing) says it with this line."""
    is_file = source == value  # a file of the folder: another content
    logging.warning("%s is used, not %s (%sa setting given wins)", flag,
                    "the folder's %s" % value if is_file else
                    "the %s of %s" % (json.dumps(value), source),
                    "other content; " if is_file else "")


def _contradicts(key, given, saved):
    """Whether the value given differs from the folder's (files: by their content)."""
    if key in ("bert_config_file", "vocab_file"):
        try:
            return not _same_content(str(given), str(saved))
        except (OSError, tf.errors.OpError):
            return True  # the run's own check names a missing file
    return given != saved


# ---------------------------------------------------------------------------
# Predictions from Python (the runners' Predictor)
# ---------------------------------------------------------------------------

class PredictFolder(object):
    """The settings of predictions from a trained folder, and a private temporary folder
    of their own (0700: tempfile's; a file the runner writes goes there, never into the
    model's folder: with several replicas, the records a call reads).

    Args:
      settings_class: the face's Settings.
      runner: the face's runner name (a key of TASK_SETTINGS).
      folder: a training run's output folder (or its best/).
      values: other settings fields (do_predict, the batch size, ...); output_dir and
        init_checkpoint are the predictor's own (ValueError when given).

    `settings`: the face's Settings, init_checkpoint = folder, output_dir = the temporary
    folder, the folder's config, vocab, length and task settings filled in; `defaults`:
    those the folder gave (defaults()).
    """

    def __init__(self, settings_class, runner, folder, values):
        folder = os.path.expanduser(str(folder))
        for name in ("output_dir", "init_checkpoint"):
            if name in values:
                raise ValueError(
                    "%s=%r: a Predictor (and predict()) reads the model of its model_folder and "
                    "returns the answers, writing no files; leave %s out (the files of "
                    "do_predict: %s.run(Settings(do_predict=True, ...)))"
                    % (name, values[name], name, runner))
        found, _ = read(folder)
        if found.get("runner") != runner:
            raise ValueError("%s is not the output folder of a %s training run (its %s %s)"
                             % (folder, runner, SETTINGS_FILE,
                                "names %s" % found["runner"] if found.get("runner")
                                else "is missing"))
        self._tmp = tempfile.TemporaryDirectory(prefix="%s_predict_" % runner)
        try:
            settings = settings_class(init_checkpoint=folder, output_dir=self._tmp.name,
                                      **values)
            self.defaults = defaults(settings.part(*SETTINGS), runner)  # what the folder gave
            self.settings = settings.with_defaults(self.defaults)
        except BaseException:
            self._tmp.cleanup()  # a refused setting leaves no folder behind
            raise

    def close(self):
        """Removes the temporary folder (also removed when the predictor is collected or
        the interpreter ends; a predict() call keeps its records in memory, so the
        folder stays empty)."""
        self._tmp.cleanup()


class FolderPredictor(doors.Door):
    """What the faces' Predictor classes share: their PredictFolder (`folder`) and its
    settings (`settings`), close(), predict_call for their predict(), and once() for the
    faces' predict() functions.

    Args: settings_class, runner, folder: PredictFolder's; batch_size: the predict batch
    size (an integer >= 1, checked before anything is read or made); values: other
    settings fields (progress: "none" unless given: a call shows no progress display);
    data: the name of the data setting the face's checks require and predict() never
    reads (data_dir, predict_file; None: none), set to the folder.

    One predictor may be shared by threads (a web server's): its predict() calls take no
    lock, each keeps its features in memory of its own (input_pipeline.records_in_memory)
    and runs the model's traced step, traced once for all calls; each call gets the answers
    of its own inputs. A call may be made from inside another's input generator. Its
    lifecycle (built ready, refused after fork, no signal handler) is doors.Door's; a
    face's __init__ ends with ready_tokenizer(its tokenizer).
    """

    def __init__(self, settings_class, runner, folder, batch_size, values, data=None):
        check_batch_size(batch_size)
        self.open_door("%s.Predictor" % runner)
        startup.initialize_devices()  # as quiet as a run(): no no-GPU cuInit line
        values = dict(values, do_predict=True, predict_batch_size=batch_size,
                      **({data: str(folder)} if data else {}))
        values.setdefault("progress", "none")
        self.folder = PredictFolder(settings_class, runner, folder, values)
        self.settings = self.folder.settings

    def describe_door(self):
        """The refusals' name: the face's Predictor and its folder."""
        return "%s of %s" % (self._door_name, self.settings.init_checkpoint)

    def close(self):
        """Removes the temporary folder; a later predict() is refused (RuntimeError)."""
        super().close()
        self.folder.close()

    @classmethod
    def once(cls, model_folder, batch_size, settings, *inputs):
        """cls(model_folder, batch_size, **settings).predict(*inputs), closed after."""
        predictor = cls(model_folder, batch_size, **settings)
        try:
            return predictor.predict(*inputs)
        finally:
            predictor.close()


def predict_call(method):
    """A FolderPredictor's predict(): refused after close() or fork (check_usable); its
    record files kept in memory of the call's own (input_pipeline.records_in_memory), so
    that calls from several threads, or one from inside another's input generator, run
    side by side, each with its own answers."""
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        self.check_usable()
        with input_pipeline.records_in_memory():
            return method(self, *args, **kwargs)
    return call


def check_batch_size(batch_size):
    """ValueError (one line naming the argument) unless `batch_size` is an int >= 1."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or (
            batch_size < 1):
        raise ValueError("batch_size=%r: expected an integer >= 1" % (batch_size,))
