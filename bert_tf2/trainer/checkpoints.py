"""TF1 <-> TF2 checkpoints: one naming rule, loading by name, conversion.

Our model variables are named so that their TF1 name follows from `tf1_name`:
drop the `:0` suffix and the top-level model's name, then apply `SCOPE_TABLE`
(bert_tf2/base/checkpoint_names.py, below modeling.py, which reads it too).
Google's TF1 checkpoints are read by variable name. Our TF2 checkpoints
(tf.train.Checkpoint, object-based) store every variable's full name in their
object graph, so both kinds are loaded the same way: by TF1 name.
"""
import collections
import os
import re

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf2 import fileutil
from bert_tf2.base import checkpoint_names
from bert_tf2.base import path_match
# The naming rule (bert_tf2/base/checkpoint_names.py), by its names here as before.
from bert_tf2.base.checkpoint_names import (  # noqa: F401  pylint: disable=unused-import
    TF1_ROOTS, TF1_SLOT_NAMES, tf1_name)
from bert_tf2.trainer import written_files

# The file prefix of the checkpoints a run writes: output_dir/model.ckpt-<step>.
CHECKPOINT_NAME = "model.ckpt"


def tf1_variable_map(model_or_variables):
    """OrderedDict TF1 name -> variable for a model (or a list of variables)."""
    variables = getattr(model_or_variables, "variables", model_or_variables)
    mapping = collections.OrderedDict()
    for var in variables:
        name = tf1_name(var)
        if name in mapping and mapping[name] is not var:
            raise ValueError("two model variables map to the TF1 name %r: %s and %s"
                             % (name, mapping[name].name, var.name))
        mapping[name] = var
    return mapping


# ---------------------------------------------------------------------------
# Reading checkpoints of either kind
# ---------------------------------------------------------------------------

# The file a folder's latest checkpoint is named in (tf.train.CheckpointManager's).
STATE_FILE = "checkpoint"

# What reading a damaged checkpoint raises: a cut or overwritten .index "not an sstable
# (bad magic number)" (an OpError), a cut .data "Read less bytes than requested" and a
# scrambled one "Parsed past limit." (IndexError), a bad record (DataLossError).
READ_ERRORS = (IndexError, tf.errors.OpError)


def unreadable(prefix, error, advice):
    """The one-line ValueError of a checkpoint whose files cannot be read whole."""
    detail = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return ValueError("checkpoint %s cannot be read (%s): its .index or .data file is cut "
                      "short or corrupt; %s" % (prefix, detail, advice))


def _step_order(prefix):
    match = re.search(r"-(\d+)$", prefix)
    return int(match.group(1)) if match else -1


def step_in_name(prefix):
    """The step a checkpoint's name ends with (model.ckpt-N: N), 0 when it names none."""
    return max(_step_order(str(prefix)), 0)


def _own_checkpoints(directory):
    """The prefixes of the model.ckpt-N checkpoints in `directory` (an .index present),
    oldest first."""
    found = path_match.matching(os.path.join(str(directory), CHECKPOINT_NAME + "-"), "*.index")
    return sorted((p[:-len(".index")] for p in found), key=_step_order)


def _state_checkpoint(directory, flag):
    """The prefix the state file of `directory` names (None without a state file); a
    ValueError naming `flag` when its files are gone."""
    state = tf.train.get_checkpoint_state(str(directory))
    if state is None:
        return None
    prefix = state.model_checkpoint_path
    if tf.io.gfile.exists(prefix + ".index"):
        return prefix
    raise ValueError("%s=%s: its state file names the checkpoint %s, whose files are gone; %s"
                     % (flag, directory, os.path.basename(prefix),
                        state_file_advice(directory, prefix)))


def state_file_advice(directory, prefix):
    """What to do when `prefix`, the latest checkpoint of `directory`, is gone or damaged:
    name an older one (never taken silently) or start in a new folder."""
    state = os.path.join(str(directory), STATE_FILE)
    left = [p for p in _own_checkpoints(directory) if not same_checkpoint(p, prefix)]
    if not left:
        return "remove %s, or use a new --output_dir" % state
    return ("make %s name %s (the newest one left; a run that does not train can take "
            "--init_checkpoint=%s), or use a new --output_dir"
            % (state, os.path.basename(left[-1]), left[-1]))


def latest_checkpoint(directory, flag="--output_dir", strict=True):
    """The latest checkpoint of a run's folder, or None when it holds none of ours.

    Unlike tf.train.latest_checkpoint, a folder whose state file names a checkpoint
    whose files are gone, or which holds model.ckpt-N files but no readable state
    file, is a ValueError naming `flag` (None with strict=False): never None, which
    would start a run over them from step 0 (or predict with a random model).
    """
    try:
        prefix = _state_checkpoint(directory, flag)
        own = _own_checkpoints(directory)
        if prefix is None and own:
            raise ValueError(
                "%s=%s holds %s but no readable state file %s naming its latest: write one "
                "(a line model_checkpoint_path: \"%s\"), or use a new --output_dir" % (
                    flag, directory, ", ".join(os.path.basename(p) for p in own),
                    os.path.join(str(directory), STATE_FILE), os.path.basename(own[-1])))
    except ValueError:
        if strict:
            raise
        return None
    return prefix


def refuse_orphans(directory, names, flag="--output_dir"):
    """ValueError when `directory` holds any of `names` (a run's evaluation history, its
    best/), which a run starting from no checkpoint would replace."""
    found = [name for name in names if tf.io.gfile.exists(os.path.join(str(directory), name))]
    if found:
        raise ValueError(
            "%s=%s holds %s but no checkpoint to restore: they belong to a run whose "
            "checkpoints are gone%s; use a new %s (or move them away to start again)"
            % (flag, directory, " and ".join(found), best_hint(directory, "; "), flag))


# The folder periodic_eval keeps the best checkpoint in (periodic_eval.BEST_DIR).
_BEST_DIR = "best"


def best_hint(directory, lead=": "):
    """For a message about a folder without a checkpoint of its own: where its best/
    checkpoint is (a run with --keep_best_only leaves only that), "" when it has none."""
    best = os.path.join(str(directory), _BEST_DIR)
    try:
        prefix = path_match.latest_checkpoint(best) if tf.io.gfile.isdir(best) else None
    except (ValueError, tf.errors.OpError):
        prefix = None
    if not prefix:
        return ""
    return ("%sits model is %s, the best checkpoint a --keep_best_only run keeps (it removes "
            "the others once training ends): use %s" % (lead, prefix, best))


def resolve_checkpoint(path, flag=None):
    """A checkpoint prefix from a prefix or a directory (its latest checkpoint).

    A directory's state file naming files that are gone is a ValueError (never an
    older checkpoint); `flag` ("--init_checkpoint") is named in the errors.
    """
    if path is None or not str(path):
        raise ValueError("no checkpoint path given" + (" (%s)" % flag if flag else ""))
    path = str(path)
    named = "%s=%s" % (flag, path) if flag else path
    if tf.io.gfile.isdir(path):
        latest = _state_checkpoint(path, flag or "checkpoint directory")
        if latest is None:
            candidates = sorted(path_match.matching(path + "/", "*.index"))
            if len(candidates) == 1:
                latest = candidates[0][:-len(".index")]
        if latest is None:
            raise ValueError("no checkpoint found in directory %s%s" % (named, best_hint(path)))
        return latest
    if tf.io.gfile.exists(path + ".index"):
        return path
    raise ValueError("checkpoint %s not found (expected %s.index)" % (named, path))


def same_checkpoint(a, b):
    """True when two checkpoint prefixes name the same files."""
    return os.path.realpath(str(a)) == os.path.realpath(str(b))


def names_checkpoint(path, prefix):
    """True when `path` (a prefix, or a folder: its latest) resolves to `prefix`; False
    when it resolves elsewhere or to nothing."""
    try:
        return same_checkpoint(resolve_checkpoint(path), prefix)
    except ValueError:
        return False


def open_reader(prefix, advice="use a whole copy"):
    """tf.train.load_checkpoint(prefix); a damaged checkpoint is a one-line ValueError."""
    try:
        return tf.train.load_checkpoint(fileutil.readable_checkpoint(prefix))
    except READ_ERRORS as e:
        raise unreadable(prefix, e, advice) from None


def is_tf2_checkpoint(path):
    """True for an object-based (TF2) checkpoint, False for a name-based TF1 one."""
    return open_reader(resolve_checkpoint(path)).has_tensor(checkpoint_names.OBJECT_GRAPH_KEY)


class CheckpointContents:
    """The tensors of a TF1 or TF2 checkpoint, addressed by TF1 name."""

    def __init__(self, path, flag=None):
        self.path = resolve_checkpoint(path, flag)
        self.advice = ("point %s at a whole copy of it" % flag) if flag else "use a whole copy"
        self.reader = open_reader(self.path, self.advice)
        try:
            self.is_tf2 = self.reader.has_tensor(checkpoint_names.OBJECT_GRAPH_KEY)
            shapes = self.reader.get_variable_to_shape_map()
            if self.is_tf2:
                self.keys = checkpoint_names.tf2_name_table(self.reader)
            else:
                self.keys = collections.OrderedDict((name, name) for name in sorted(shapes))
        except READ_ERRORS as e:
            raise unreadable(self.path, e, self.advice) from None
        self.shapes = {name: list(shapes[key]) for name, key in self.keys.items()}

    def names(self):
        """Every TF1 name the checkpoint holds (model variables, slots, global_step)."""
        return list(self.keys)

    def get(self, name):
        """The value (numpy array) stored under TF1 name `name`."""
        try:
            return self.reader.get_tensor(self.keys[name])
        except READ_ERRORS as e:
            raise unreadable(self.path, e, self.advice) from None

    def model_names(self):
        """Names of model weights: no optimizer slots, no global_step."""
        return [n for n in self.keys if n != "global_step"
                and n.rsplit("/", 1)[-1] not in TF1_SLOT_NAMES]


def checkpoint_step(path):
    """The global step a checkpoint was written at (0 when it records none).

    TF1 checkpoints keep it as `global_step`, ours as the optimizer's iteration
    count; a checkpoint written without an optimizer falls back on the number
    its name ends with (model.ckpt-N).
    """
    contents = CheckpointContents(path)
    if "global_step" in contents.keys:
        return int(contents.get("global_step"))
    return step_in_name(contents.path)


def file_beside(checkpoint, name):
    """Path of the file `name` in the folder of `checkpoint`, or None when absent.

    `checkpoint` is a directory or a file prefix, as --init_checkpoint takes.
    """
    if not checkpoint:
        return None
    checkpoint = str(checkpoint)
    folder = checkpoint if tf.io.gfile.isdir(checkpoint) else os.path.dirname(checkpoint)
    path = os.path.join(folder, name)
    return path if tf.io.gfile.exists(path) else None


def settings_file(name, init_checkpoint=None, output_dir=None):
    """Path of the settings file `name` of the model a run uses, or None: the one reader
    of what a training run leaves beside its checkpoints (label_list.txt, long_text.json,
    sentence_embedding.json), for every later tool.

    The settings come from where the weights come from. A runner restores the latest
    checkpoint of its output_dir before --init_checkpoint, so output_dir is asked first:
    its file, or none at all when it holds checkpoints but not the file (they were
    trained without that setting); else the file beside `init_checkpoint` (a directory
    or a file prefix). Tools without an output_dir (export, extract_features) read the
    one beside --init_checkpoint.
    """
    if output_dir:
        path = os.path.join(str(output_dir), name)
        if tf.io.gfile.exists(path):
            return path
        if tf.io.gfile.isdir(output_dir) and path_match.latest_checkpoint(output_dir):
            return None
    return file_beside(init_checkpoint, name)


def missing_variables(model_or_variables, path, flag=None):
    """TF1 names of the model's variables that the checkpoint at `path` lacks (a
    pre-trained checkpoint: the task head's); `flag` is named in the errors."""
    keys = CheckpointContents(path, flag).keys
    return [name for name in tf1_variable_map(model_or_variables) if name not in keys]


# Checkpoint variables the model lacks that say it is another model (refused by a run that
# does not train): encoder weights (deeper layers, another config), a --crf tagger's
# transitions, a feature-based tagger's BiLSTM. Other spare variables (the pre-training
# heads, another task's head beside the right one) are left unused, as the reference's
# assignment map left them.
_OTHER_MODEL_PREFIXES = ("bert/", "crf/", "bilstm_")


def check_serves(model_or_variables, path, flag=None, unused_too=True, may_lack=None):
    """ValueError (one line) unless the checkpoint at `path` holds every variable of the
    model: a run that does not train (eval, predict, export, features) would serve a
    missing one at its random initial value. With `unused_too`, a checkpoint holding
    variables that make it another model (_OTHER_MODEL_PREFIXES: crf/transitions, a
    BiLSTM, deeper encoder layers) is refused too. `may_lack`: names
    whose initial value is not random (default: the model's ZERO_START_VARIABLES)."""
    contents = CheckpointContents(path, flag)
    variables = tf1_variable_map(model_or_variables)
    if may_lack is None:
        may_lack = getattr(model_or_variables, "ZERO_START_VARIABLES", ())
    missing = [name for name in variables if name not in contents.keys
               and name not in may_lack]
    where = contents.path
    if flag:
        where = "%s=%s" % (flag, path) + (
            "" if same_checkpoint(path, contents.path) else " (%s)" % contents.path)
    if missing:
        raise ValueError(
            "checkpoint %s lacks %d of the model's %d variables (%s%s): they would be served "
            "at their random initial values; use a checkpoint of this task, head and "
            "bert_config (num_hidden_layers, ...)"
            % (where, len(missing), len(variables), ", ".join(missing[:3]),
               ", ..." if len(missing) > 3 else ""))
    extra = [name for name in contents.model_names() if name not in variables
             and name.startswith(_OTHER_MODEL_PREFIXES)] if unused_too else []
    if extra:
        from bert_tf2 import heads  # pylint: disable=import-outside-toplevel
        hint = ("a --crf tagger's transitions: pass --crf" if heads.holds_crf(extra)
                else "a model with another head or bert_config")
        raise ValueError(
            "checkpoint %s holds %d variable(s) the model lacks (%s%s: %s); the model would "
            "ignore what they compute"
            % (where, len(extra), ", ".join(extra[:3]), ", ..." if len(extra) > 3 else "",
               hint))
    return contents


LoadResult = collections.namedtuple("LoadResult", ["loaded", "not_in_checkpoint", "unused"])


def load_checkpoint(model_or_variables, path, log=True, flag=None):
    """Loads every model variable whose TF1 name is in the checkpoint at `path`.

    Works with Google's TF1 checkpoints and with ours (TF2); `path` may be a
    file prefix or a directory. Like the reference's assignment map, variables
    missing on either side are skipped and logged, not fatal; a variable with
    the wrong shape is a ValueError naming it.

    Returns:
      LoadResult(loaded, not_in_checkpoint, unused): TF1 names loaded, model
      variables the checkpoint lacks, checkpoint weights the model lacks
      (optimizer slots and global_step are not counted as unused).
      `flag` ("--init_checkpoint") is named in the errors.
    """
    contents = CheckpointContents(path, flag)
    variables = tf1_variable_map(model_or_variables)
    loaded, missing = [], []
    for name, var in variables.items():
        if name not in contents.keys:
            missing.append(name)
            continue
        want, have = var.shape.as_list(), contents.shapes[name]
        if want != have:
            if name.startswith("bert/"):
                cause = "does bert_config.json match the checkpoint?"
            else:
                cause = ("a task head: the checkpoint was fine-tuned for another task or "
                         "number of labels; start from the pre-trained checkpoint")
            raise ValueError("checkpoint %s: variable %s has shape %s but the model expects %s "
                             "(%s)" % (contents.path, name, have, want, cause))
        var.assign(contents.get(name).astype(var.dtype.as_numpy_dtype))
        loaded.append(name)
    unused = [n for n in contents.model_names() if n not in variables]
    if log:
        logging.info("Loaded %d variables from %s checkpoint %s", len(loaded),
                     "TF2" if contents.is_tf2 else "TF1", contents.path)
        for name in missing:
            logging.info("  not in checkpoint (keeps its initial value): %s", name)
        for name in unused:
            logging.info("  in checkpoint but not in the model: %s", name)
    return LoadResult(loaded, missing, unused)


# ---------------------------------------------------------------------------
# Writing TF1 (name-based) checkpoints
# ---------------------------------------------------------------------------

def write_tf1_checkpoint(tensors, prefix):
    """Writes a name-based checkpoint readable by TF1 code (tf.train.Saver).

    Args:
      tensors: mapping TF1 name -> array (or variable).
      prefix: output prefix, e.g. OUT/bert_model.ckpt (.index and .data are
        written under temporary names and renamed into place at the end).
    """
    if not tensors:
        raise ValueError("nothing to write to %s" % prefix)
    parent = os.path.dirname(prefix)
    if parent:
        tf.io.gfile.makedirs(parent)
    names = sorted(tensors)
    values = [tf.convert_to_tensor(np.asarray(tensors[n])) for n in names]
    temp = fileutil.temp_name(prefix)
    tf.raw_ops.SaveV2(prefix=temp, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=values)
    for data in path_match.matching(temp, ".data-*"):
        tf.io.gfile.rename(data, prefix + data[len(temp):], overwrite=True)
    tf.io.gfile.rename(temp + ".index", prefix + ".index", overwrite=True)
    write_state_file(prefix)
    return prefix


def write_state_file(prefix, kept=None):
    """Points the directory's `checkpoint` file at `prefix` (for latest_checkpoint);
    `kept`: the checkpoints it lists, oldest first (default: `prefix` alone)."""
    directory, basename = os.path.split(prefix)
    names = [os.path.basename(str(p)) for p in (kept or [prefix])]
    with tf.io.gfile.GFile(os.path.join(directory or ".", STATE_FILE), "w") as f:
        f.write('model_checkpoint_path: "%s"\n' % basename + "".join(
            'all_model_checkpoint_paths: "%s"\n' % name for name in names))


def checkpoint_files(prefix):
    """The files of the checkpoint `prefix`: its .index and .data-* files that exist."""
    directory, basename = os.path.split(str(prefix))
    directory = directory or "."
    if not tf.io.gfile.isdir(directory):
        return []
    return [os.path.join(directory, name) for name in sorted(tf.io.gfile.listdir(directory))
            if name == basename + ".index" or name.startswith(basename + ".data-")]


class Manager(tf.train.CheckpointManager):
    """tf.train.CheckpointManager whose removal of the checkpoints past max_to_keep lists
    their folder (checkpoint_files) instead of globbing its path: in a folder named
    `exp[1]` TensorFlow's removed nothing, in one named `a*b` it removed `axb`'s files."""

    def _sweep(self):
        while self._max_to_keep and len(self._maybe_delete) > self._max_to_keep:
            prefix, made_at = self._maybe_delete.popitem(last=False)
            hours = self._keep_checkpoint_every_n_hours
            if hours and made_at - hours * 3600.0 >= self._last_preserved_timestamp:
                self._last_preserved_timestamp = made_at  # kept, as the base class keeps it
                continue
            for path in checkpoint_files(prefix):
                fileutil.remove(path)


def remove_checkpoints(directory, prefixes):
    """Removes the checkpoints `prefixes` of `directory` (their files, through
    fileutil.remove) and rewrites its state file: it names the newest checkpoint left
    in its list, or is removed when none is left. Returns the number of files removed."""
    gone = {os.path.basename(str(p)) for p in prefixes}
    removed = 0
    for prefix in prefixes:
        for path in checkpoint_files(prefix):
            fileutil.remove(path)
            removed += 1
    state = tf.train.get_checkpoint_state(str(directory))
    if state is not None:
        left = [p for p in state.all_model_checkpoint_paths
                if os.path.basename(p) not in gone and tf.io.gfile.exists(p + ".index")]
        if left:
            write_state_file(os.path.join(str(directory), os.path.basename(left[-1])), left)
        else:
            fileutil.remove(os.path.join(str(directory), STATE_FILE))
    return removed


def remove_written_checkpoints(directory):
    """Removes the model.ckpt-N checkpoints of `directory` whose every file training
    recorded writing (written_files.proven), through remove_checkpoints (the state file
    rewritten, or removed with the last); another's checkpoint stays, with a warning.
    Returns the number of checkpoints removed."""
    record = written_files.read(directory)
    ours, others = [], []
    for prefix in _own_checkpoints(directory):
        names = [os.path.basename(p) for p in checkpoint_files(prefix)]
        proven = record is not None and all(
            written_files.proven(directory, n, record) for n in names)
        (ours if proven else others).append(prefix)
    if others:
        logging.warning("%s: %s not recorded as written by this training (%s): kept",
                        directory, ", ".join(os.path.basename(p) for p in others),
                        written_files.FILE)
    if ours:
        removed = [os.path.basename(p) for prefix in ours for p in checkpoint_files(prefix)]
        remove_checkpoints(directory, ours)
        written_files.forget(directory, removed)
        written_files.note(directory, [STATE_FILE] if tf.io.gfile.exists(
            os.path.join(str(directory), STATE_FILE)) else [])
    return len(ours)


def tf2_to_tf1(tf2_path, tf1_prefix, include_optimizer=False):
    """Rewrites one of our TF2 checkpoints under TF1 names; returns the names written."""
    contents = CheckpointContents(tf2_path)
    if not contents.is_tf2:
        raise ValueError("%s is already a TF1 (name-based) checkpoint" % contents.path)
    names = contents.names() if include_optimizer else contents.model_names()
    tensors = {n: contents.get(n) for n in names}
    if include_optimizer and "global_step" in tensors:
        tensors["global_step"] = np.asarray(tensors["global_step"], np.int64)
    write_tf1_checkpoint(tensors, tf1_prefix)
    return sorted(tensors)
