"""One meaning per output folder: what its checkpoints were trained with.

A training run leaves output_dir/training_record.json beside its checkpoints when it
starts training: the settings that define the trained model (SETTINGS, those of them the
runner has), the content fingerprints of --bert_config_file and --vocab_file, and a
fingerprint of the training data (its examples, or the bytes of its files). A later
training run into the same folder compares its own with the record's last run
(`Decision`, from restore_plan.plan):

- the same settings: it resumes silently (an interrupted run goes on); in a folder a
  --keep_best_only run finished (`finish` marked its last run, best/ alone left:
  `finished_best` proves it) it trains nothing and uses best/'s model (restore_plan.BEST);
- other settings: --existing_checkpoint says what happens.
    continue  resume the checkpoint anyway, as the reference's Estimator did (it trains 0
              steps when the folder is already at its last step); one WARNING line names
              the settings that differ (old -> new) and the steps left; the record
              appends this run's settings;
    refuse    a ValueError naming them and the two ways out;
    restart   remove what training wrote there and recorded writing (written_files:
              checkpoints, the state file, the record, eval_history.jsonl, best/, its
              TensorBoard events, its copies of the config and vocab) and train from step
              0; nothing else is touched, and only in a folder whose record says this tool
              trained it. Planned whole first (plan_restart): a symbolic link or a mount
              point among those files or folders, a file training did not record writing
              under one of their names, a folder under such a name, or an
              --init_checkpoint among them is a ValueError, and nothing is removed.
  Unset, it is `continue` on the command line (the reference's behaviour; cli.run_cli and
  flags_common.parse_flags fill it) and `refuse` for a Settings a Python caller passes,
  so that a search over settings never reads an old folder's numbers as its own.
- a folder without a record (an earlier version's): it resumes, with one line saying so.
"""
import hashlib
import json
import os
import re

from absl import flags
from absl import logging
import tensorflow as tf

from bert_tf2 import fileutil
from bert_tf2.base import path_match
from bert_tf2.trainer import checkpoints
from bert_tf2.trainer import written_files

RECORD_FILE = "training_record.json"
FLAG = "existing_checkpoint"
CONTINUE, REFUSE, RESTART = "continue", "refuse", "restart"
MODES = (CONTINUE, REFUSE, RESTART)
COMMAND_LINE_MODE = CONTINUE   # the reference's way
PYTHON_MODE = REFUSE           # a Settings from Python that leaves the field unset

# The settings that define a trained model, compared between runs: the one list. A
# runner records those of them it has (settings_lib.Settings.part keeps those).
SETTINGS = (
    # the optimisation
    "learning_rate", "num_train_epochs", "num_train_steps", "num_warmup_steps",
    "train_batch_size", "warmup_proportion", "num_accumulation_steps", "optimizer_type",
    "seed", "class_weights", "crf_learning_rate", "group_by_length",
    # the model and its inputs
    "init_checkpoint", "bert_config_file", "vocab_file", "do_lower_case", "max_seq_length",
    "max_predictions_per_seq", "doc_stride", "max_query_length", "version_2_with_negative",
    "long_text", "head_tokens", "window_pooling",
    # the task
    "task_name", "processor", "task_type", "labels_file", "text_a_column", "text_b_column",
    "label_column", "xnli_language", "crf", "crf_tag_scheme", "lstm_units", "layers",
    "feature_based", "document_context", "input_file", "train_file", "data_dir")
# A face's own flags that define its model (run_ranker's --loss) are its RECORDED_SETTINGS,
# declared beside them: it records settings.part(*SETTINGS + RECORDED_SETTINGS) (of() records
# every field of the part it is given), so a new head lists nothing here.
# Every other flag of a training runner, with why it does not define the trained model:
# a new shared flag goes in SETTINGS or here, a face's own in its RECORDED_SETTINGS or here
# (tests/test_setting_lists.py holds them to the runners' flags).
_OUTPUT = "output location"
_RUN = "run control: what this run does, not what a step trains"
_COMPUTE = "how the same steps are computed (device, precision, kernels, memory)"
_EVAL = "evaluation or prediction only"
_PERIODIC = "evaluation during training: when to stop and which checkpoint best/ keeps"
NOT_RECORDED = {
    "output_dir": _OUTPUT,
    "do_train": _RUN, "do_eval": _RUN, "do_predict": _RUN, FLAG: _RUN,
    "save_checkpoints_steps": _RUN, "iterations_per_loop": _RUN,
    "keep_checkpoint_max": _RUN, "keep_best_only": _RUN,
    "log_every_seconds": _RUN, "progress": _RUN,
    "use_tpu": _COMPUTE, "tpu_name": _COMPUTE, "tpu_zone": _COMPUTE, "gcp_project": _COMPUTE,
    "master": _COMPUTE, "num_tpu_cores": _COMPUTE, "distribution_strategy": _COMPUTE,
    "num_gpus": _COMPUTE, "dtype": _COMPUTE, "enable_xla": _COMPUTE,
    "fused_optimizer": _COMPUTE, "trim_padding": _COMPUTE, "gradient_checkpointing": _COMPUTE,
    "deterministic_data": "reproducibility: input order and dropout masks drawn from --seed, "
                          "so an interrupted run resumes where it stopped",
    "packed_sequences": "follows the data: checked against the records (check_packing), "
                        "whose content is recorded",
    "eval_batch_size": _EVAL, "predict_batch_size": _EVAL, "eval_file": _EVAL,
    "predict_file": _EVAL, "max_eval_steps": _EVAL, "positive_label": _EVAL,
    "threshold": _EVAL, "max_answer_length": _EVAL, "n_best_size": _EVAL,
    "null_score_diff_threshold": _EVAL, "rethreshold_predictions": _EVAL,
    "verbose_logging": _EVAL,
    "eval_every_n_steps": _PERIODIC, "best_metric": _PERIODIC,
    "early_stopping_patience": _PERIODIC,
}
# Settings recorded by the content of the file they name, not by the name.
_FILE_SETTINGS = ("bert_config_file", "vocab_file", "labels_file")
# Where the data come from: a path whose data are fingerprinted as "train_data".
_DATA_SETTINGS = ("input_file", "train_file", "data_dir")

# What training writes in output_dir, all that --existing_checkpoint=restart removes.
RESTART_FILES = (
    re.compile(r"%s-\d+\.(index|data-\d+-of-\d+)$" % re.escape(checkpoints.CHECKPOINT_NAME)),
    re.compile(r"checkpoint$"),
    re.compile(re.escape(RECORD_FILE) + "$"),
    re.compile(r"eval_history\.jsonl$"),
)
_BEST_DIR = "best"  # periodic_eval.BEST_DIR
_RESTART_FOLDERS = (_BEST_DIR, "train", "eval")  # best/, TensorBoard's train/ and eval/

# Data files up to this size are hashed whole; larger ones (pre-training shards, read
# at every start) by their size, first and last MB.
_WHOLE_FILE_BYTES = 1 << 24
_BLOCK = 1 << 20


def define_flags(fv):
    """--existing_checkpoint (every training runner, via flags_common.define_training_flags)."""
    flags.DEFINE_enum(
        FLAG, None, list(MODES),
        "A training run into an --output_dir whose checkpoint was trained with other "
        "settings (%s there: learning rate, epochs, batch size, data, model, task...): "
        "continue = go on from its checkpoint as the reference did, with one warning line "
        "naming the differences (a finished folder trains 0 steps); refuse = stop with "
        "that line; restart = remove the files training wrote there (checkpoints, %s, "
        "eval history, best/, TensorBoard events) and train from step 0. The same "
        "settings always resume (an interrupted run). Default: continue on the command "
        "line; refuse for a Settings passed from Python." % (RECORD_FILE, RECORD_FILE),
        flag_values=fv)


def mode_of(value):
    """The mode a setting's value means: None (a Python caller's unset field) is refuse."""
    return PYTHON_MODE if value is None else value


def starts_over(settings):
    """Whether `settings` (a face's, or a part of them) are a training run with
    --existing_checkpoint=restart: the labels an earlier run left in the folder are not
    compared with this run's (the restart removes its checkpoints first, and a refused
    restart leaves the folder as it was, its labels included)."""
    return bool(getattr(settings, "do_train", False)) and \
        getattr(settings, FLAG, None) == RESTART


def head_file(settings, name):
    """Path of the settings file `name` (label_list.txt, classifier_task.json) of the head
    a run starts from, or None. The label order belongs to the output layer: a training run
    that starts over (--existing_checkpoint=restart) starts from --init_checkpoint, so its
    files beside it; every other run (a training run continuing from a model folder
    included) from what it restores (checkpoints.settings_file: output_dir's, else the
    file beside --init_checkpoint)."""
    if starts_over(settings):
        return checkpoints.file_beside(getattr(settings, "init_checkpoint", None), name)
    return checkpoints.settings_file(name, getattr(settings, "init_checkpoint", None),
                                     settings.output_dir)


def way_out(settings, path):
    """The end of the error of a training run whose labels are not those of its head's
    settings file `path` (head_file): what to do instead ("" for a run that does not train)."""
    if not getattr(settings, "do_train", False):
        return ""
    if path and path == checkpoints.file_beside(getattr(settings, "init_checkpoint", None),
                                                os.path.basename(path)):
        return (": the output layer of --init_checkpoint is in that order (leave out "
                "--labels_file to keep it, or start from a checkpoint without this head)")
    return ": use a new --output_dir"


# ---------------------------------------------------------------------------
# The values
# ---------------------------------------------------------------------------

def of(part, examples=None, files=None):
    """{setting: value} a training run records: `part`'s fields (settings.part(*SETTINGS),
    plus the face's RECORDED_SETTINGS), files by their content, and "train_data", the
    fingerprint of `examples` (the training examples the run read) or else of the `files`
    it reads."""
    values = {}
    for name, value in part.values().items():
        if name in _FILE_SETTINGS and value:
            value = file_fingerprint([os.fspath(value)])
        elif name in _DATA_SETTINGS:
            continue  # the data's content below, not where it is
        values[name] = _plain(value)
    if examples is not None:
        values["train_data"] = examples_fingerprint(examples)
    elif files:
        values["train_data"] = file_fingerprint(files)
    return values


def _plain(value):
    """`value` as JSON keeps it: paths as str, tuples as lists, numpy scalars as numbers."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "__fspath__"):
        return os.fspath(value)
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def examples_fingerprint(examples):
    """"<N> examples, sha256 <16 hex digits>" of the examples' fields, in order."""
    digest = hashlib.sha256()
    count = 0
    for example in examples:
        fields = vars(example) if hasattr(example, "__dict__") else example
        if isinstance(fields, dict):
            fields = sorted(fields.items())
        digest.update(repr(fields).encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
        count += 1
    return "%d examples, sha256 %s" % (count, digest.hexdigest()[:16])


def file_fingerprint(paths):
    """"<bytes> bytes, sha256 <16 hex digits>" of the files' contents, in order (a file
    over 16 MB: its size, first and last MB)."""
    digest = hashlib.sha256()
    total = 0
    for path in map(os.fspath, paths):
        size = tf.io.gfile.stat(path).length
        total += size
        digest.update(b"%d\0" % size)
        with tf.io.gfile.GFile(path, "rb") as f:
            if size <= _WHOLE_FILE_BYTES:
                digest.update(f.read())
            else:
                digest.update(f.read(_BLOCK))
                f.seek(size - _BLOCK)
                digest.update(f.read(_BLOCK))
    return "%d bytes, sha256 %s" % (total, digest.hexdigest()[:16])


# ---------------------------------------------------------------------------
# The record file
# ---------------------------------------------------------------------------

def read(output_dir):
    """The record of `output_dir` ({"runs": [{"from_step", "settings"}, ...]}), None
    when there is none."""
    path = os.path.join(str(output_dir), RECORD_FILE)
    if not tf.io.gfile.exists(path):
        return None
    record = fileutil.read_json(path)
    runs = record.get("runs") if isinstance(record, dict) else None
    if not runs or not all(isinstance(r, dict) and isinstance(r.get("settings"), dict)
                           for r in runs):
        raise ValueError("%s is not a training record of this program: remove it (the "
                         "folder is then read as one trained by an earlier version)" % path)
    return record


def write(output_dir, values, step, record=None):
    """Writes the record: `record`'s runs (None: none) and this one, from `step`."""
    runs = list(record["runs"]) if record else []
    runs.append({"from_step": int(step), "settings": values})
    with written_files.writing(str(output_dir), [RECORD_FILE]), \
            fileutil.atomic_open(os.path.join(str(output_dir), RECORD_FILE), "w") as f:
        f.write(json.dumps({"runs": runs}, indent=2, sort_keys=True) + "\n")


def finish(output_dir, step, best_prefix):
    """Marks the record's last run finished at `step` with its model in best/ alone
    (--keep_best_only, written before training's checkpoints are removed): the proof
    `finished_best` reads that a rerun of the same command has nothing to train."""
    record = read(output_dir)
    if record is None:
        return
    runs = list(record["runs"])
    runs[-1] = dict(runs[-1], finished={"global_step": int(step), "best": "%s/%s" % (
        _BEST_DIR, os.path.basename(str(best_prefix)))})
    with written_files.writing(str(output_dir), [RECORD_FILE]), \
            fileutil.atomic_open(os.path.join(str(output_dir), RECORD_FILE), "w") as f:
        f.write(json.dumps({"runs": runs}, indent=2, sort_keys=True) + "\n")


def finished_best(output_dir, values):
    """(best/'s checkpoint prefix, the step training finished at) of a folder a
    --keep_best_only run finished with the settings `values` (no checkpoint left but
    best/'s), else None. Proven: the record's last run has these settings and was marked
    finished (`finish`) with this best/ checkpoint, and every file of best/ is one
    training recorded writing, unchanged (written_files)."""
    folder = str(output_dir)
    record = read(folder)
    last = record["runs"][-1] if record else {}
    end = last.get("finished")
    if not isinstance(end, dict) or differences(last["settings"], values) or \
            set(last["settings"]) != set(values):
        return None
    files = written_files.read(folder)
    best = os.path.join(folder, _BEST_DIR)
    try:
        prefix = path_match.latest_checkpoint(best) if tf.io.gfile.isdir(best) else None
        names = [n.rstrip("/") for n in tf.io.gfile.listdir(best)] if prefix else []
        step = int(end["global_step"])
    except (KeyError, TypeError, ValueError, tf.errors.OpError):
        return None
    if files is None or prefix is None or \
            "%s/%s" % (_BEST_DIR, os.path.basename(prefix)) != end.get("best"):
        return None
    for name in ("%s/%s" % (_BEST_DIR, n) for n in names):
        if name not in files["files"] or not written_files.proven(folder, name, files):
            return None
    return prefix, step


def differences(old, new):
    """[(name, old value, new value)] of the settings recorded in both that differ."""
    return [(name, old[name], new[name]) for name in sorted(set(old) & set(new))
            if old[name] != new[name]]


def _differences_text(diffs):
    return ", ".join("%s %s -> %s" % (name, json.dumps(a), json.dumps(b))
                     for name, a, b in diffs)


# ---------------------------------------------------------------------------
# The decision of a training run that finds a checkpoint
# ---------------------------------------------------------------------------

class Decision:
    """What a training run does with the checkpoint it found in output_dir.

    restart: True when the folder was emptied of training's files (train from 0).
    record: the folder's record, to which `written` appends this run (None: a new one).
    append: whether this run's settings become a new entry of the record.
    """

    def __init__(self, restart=False, record=None, append=True):
        self.restart = restart
        self.record = record
        self.append = append


def decide(output_dir, values, mode, step, last_step, remove=True, init_checkpoint=None):
    """The Decision of a training run whose settings are `values`, in a folder whose
    latest checkpoint is at `step`; `last_step`: the step the run trains to. remove=False
    (a worker that is not the chief): a restart leaves the removal to the chief (the
    checks are made on every worker). `init_checkpoint`: what the run would start from
    after a restart, never removed by it (plan_restart)."""
    folder = str(output_dir)
    record = read(folder)
    flag = "--%s" % FLAG
    if record is None:
        if mode == RESTART:
            raise ValueError("--output_dir=%s has a checkpoint but no %s, so which files "
                             "training wrote there is unknown: %s=restart removes none; "
                             "use a new --output_dir or remove its checkpoints yourself"
                             % (folder, RECORD_FILE, flag))
        logging.warning("--output_dir=%s has no %s (trained by an earlier version): "
                        "continuing from its checkpoint at step %d", folder, RECORD_FILE, step)
        return Decision(record=None, append=False)
    diffs = differences(record["runs"][-1]["settings"], values)
    if not diffs:
        return Decision(record=record, append=False)
    text = _differences_text(diffs)
    if mode == REFUSE:
        raise ValueError("--output_dir=%s holds a checkpoint (step %d) trained with other "
                         "settings: %s; use a new --output_dir, %s=restart to start over, "
                         "or %s=continue to go on from it" % (folder, step, text, flag, flag))
    if mode == RESTART:
        restart = plan_restart(folder, init_checkpoint, values)  # every check first
        removed = restart.remove() if remove else 0
        logging.warning("--output_dir=%s was trained with other settings (%s): %s=restart "
                        "removed its %d training files; training from step 0",
                        folder, text, flag, removed)
        return Decision(restart=True, record=None)
    logging.warning("--output_dir=%s was trained with other settings (%s): continuing from "
                    "its checkpoint at step %d, %d steps to train (%s=restart starts over)",
                    folder, text, step, max(last_step - step, 0), flag)
    return Decision(record=record)


class RestartPlan:
    """What --existing_checkpoint=restart removes from an output folder, checked whole
    before anything is removed (plan_restart): `files`, then the `folders` (best/,
    train/, eval/ the training made) that hold nothing else."""

    def __init__(self, folder, files, folders):
        self.folder = folder
        self.files = files
        self.folders = folders

    def remove(self):
        """Removes the plan's files, then its folders left empty; returns the number of
        files removed."""
        for path in self.files:
            fileutil.remove(path)
        gone = [os.path.relpath(p, self.folder).replace(os.sep, "/") for p in self.files]
        for path in self.folders:
            if tf.io.gfile.isdir(path) and not tf.io.gfile.listdir(path):
                fileutil.remove(path)
                gone.append(os.path.basename(path))
        written_files.forget(self.folder, gone, every_pending=True)
        return len(self.files)


# The copies of the run's files a training run leaves (model_folder.write), by the setting
# whose content fingerprint the record holds: a restart with another file replaces them.
_COPIED_FILES = {"bert_config_file": fileutil.CONFIG_FILE, "vocab_file": fileutil.VOCAB_FILE}
_RESTART = "--%s=restart" % FLAG
_NOTHING = "nothing was removed"


def _first(names):
    return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")


class _Survey:
    """plan_restart's findings, sorted: files to remove, folders to remove when empty,
    and what refuses the restart (links, mount points, folders of the user's, files
    training did not record writing, the user's files in best/)."""

    def __init__(self, folder):
        self.folder = folder
        self.record = written_files.read(folder)
        self.files, self.folders, self.links, self.mounts = [], [], [], []
        self.user_folders, self.unproven, self.foreign_best = [], [], []

    def proven(self, path):
        name = os.path.relpath(path, self.folder).replace(os.sep, "/")
        return self.record is not None and written_files.proven(self.folder, name, self.record)

    def blocked(self, path):
        """Files a restart never goes into: a link, a mount point (True: listed)."""
        if fileutil.links_in([path]):
            self.links.append(path)
        elif fileutil.mount_points_in([path]):
            self.mounts.append(path)
        else:
            return False
        return True

    def top(self, path):
        """A file of the folder's top that training writes: removed when proven, else a
        refusal (the new run would take it as its own, or it is the user's)."""
        if self.blocked(path):
            return
        if tf.io.gfile.isdir(path):
            self.user_folders.append(path)
        elif self.proven(path):
            self.files.append(path)
        else:
            self.unproven.append(path)

    def sub(self, sub):
        """best/, train/ or eval/: training's files in it removed, the folder too when
        training made it and nothing else is left."""
        path = os.path.join(self.folder, sub)
        if self.blocked(path) or not tf.io.gfile.isdir(path):
            return
        for name in sorted(n.rstrip("/") for n in tf.io.gfile.listdir(path)):
            inner = os.path.join(path, name)
            if self.blocked(inner):
                continue
            ours = not tf.io.gfile.isdir(inner) and self.proven(inner)
            if ours:
                self.files.append(inner)
            elif sub == _BEST_DIR:
                self.foreign_best.append(name)
        if self.record is not None and written_files.made(self.folder, sub, self.record):
            self.folders.append(path)

    def refusal(self):
        """The ValueError's text when anything refuses the restart, else None."""
        where = "%s: --output_dir=%s" % (_RESTART, self.folder)
        if self.links:
            return ("%s: %s is a symbolic link (to %s); a restart removes only files training "
                    "wrote, never a link or what it points to: remove the link (or its files) "
                    "yourself, or use a new --output_dir; %s"
                    % (where, self.links[0], os.path.realpath(self.links[0]), _NOTHING))
        if self.mounts:
            return ("%s: %s is a mount point; a restart removes only files training wrote, "
                    "never what is mounted there (another run's, a shared folder's): unmount "
                    "it or remove its files yourself, or use a new --output_dir; %s"
                    % (where, self.mounts[0], _NOTHING))
        if self.user_folders:
            return ("%s: %s is a folder, which training never makes under that name: a "
                    "restart never removes a folder it did not make; move it away, or use a "
                    "new --output_dir; %s" % (where, self.user_folders[0], _NOTHING))
        if self.unproven:
            why = ("it has no %s (trained by an earlier version), so which files training "
                   "wrote there is unknown" % written_files.FILE if self.record is None else
                   "%s does not record training writing %s (your file, or changed since)"
                   % (written_files.FILE, "it" if len(self.unproven) == 1 else "them"))
            return ("%s holds %s: %s; a restart removes only files training recorded "
                    "writing: move %s away, or use a new --output_dir; %s"
                    % (where, _first([os.path.basename(p) for p in self.unproven]), why,
                       "it" if len(self.unproven) == 1 else "them", _NOTHING))
        if self.foreign_best:
            return ("%s holds %s in best/, which training did not write; move it out of "
                    "best/ (a best/ left behind would stop the new run), or use a new "
                    "--output_dir; %s" % (where, _first(self.foreign_best), _NOTHING))
        return None


def plan_restart(folder, init_checkpoint=None, values=None):
    """The RestartPlan of `folder`: what training recorded writing there
    (written_files.proven: its checkpoints, the state file, the record, the history, its
    copies of --vocab_file / --bert_config_file, best/'s files, the TensorBoard events of
    its runs) and the folders it made, or a ValueError before anything is removed:

    - a symbolic link or a mount point among them (a file, or best/, train/, eval/): a
      restart goes into neither (another run's events, a shared folder's files);
    - a folder under a name training gives a file (checkpoint/, model.ckpt-3.index/);
    - a checkpoint-like file, state file or history training did not record writing (the
      new run would take it as its own), or a file in best/ training did not write;
    - the folder's vocab.txt / bert_config.json, which the new run's (`values`' content
      fingerprints) differ from, when training did not write it: it is the user's (a
      vocabulary made there, a release folder used as the output folder), never removed;
    - `init_checkpoint` (a prefix or a folder) naming a checkpoint the restart would
      remove (OUT/best, OUT/model.ckpt-N): a restart never removes what it starts from.
    Other files (the user's, another run's events in train/ or eval/) stay.
    """
    survey = _Survey(folder)
    for name in sorted(tf.io.gfile.listdir(folder)):
        name = name.rstrip("/")
        if any(p.match(name) for p in RESTART_FILES):
            survey.top(os.path.join(folder, name))
    for key, name in sorted(_COPIED_FILES.items()):
        path = os.path.join(folder, name)
        if (values or {}).get(key) and tf.io.gfile.exists(path) and \
                file_fingerprint([path]) != values[key]:
            survey.top(path)
    for sub in _RESTART_FOLDERS:
        survey.sub(sub)
    refusal = survey.refusal()
    if refusal:
        raise ValueError(refusal)
    if init_checkpoint:
        _keep_init_checkpoint(folder, init_checkpoint, survey.files)
    return RestartPlan(folder, survey.files, survey.folders)


def _keep_init_checkpoint(folder, init_checkpoint, files):
    """ValueError when the restart would remove the --init_checkpoint it starts from."""
    prefix = checkpoints.resolve_checkpoint(init_checkpoint, "--init_checkpoint")
    removed = {os.path.realpath(p) for p in files}
    if os.path.realpath(prefix + ".index") in removed:
        named = init_checkpoint if checkpoints.same_checkpoint(init_checkpoint, prefix) \
            else "%s (%s)" % (init_checkpoint, prefix)
        raise ValueError(
            "%s would remove --init_checkpoint=%s, the checkpoint the run starts from: "
            "copy it out of --output_dir=%s first (a model folder: with its "
            "bert_config.json and vocab.txt), or use a new --output_dir; %s"
            % (_RESTART, named, folder, _NOTHING))


def remove_training_files(folder, init_checkpoint=None, values=None):
    """Removes what training wrote in `folder` (plan_restart: checked whole first, a
    ValueError removing nothing); a folder left empty goes too. Returns the number of
    files removed."""
    return plan_restart(folder, init_checkpoint, values).remove()
