"""Which task run_classifier runs, and the labels a run leaves for later runs and exports.

The processor of the settings (processor_of):
- --processor=FILE.py:CLASS or MODULE:CLASS: your DataProcessor (user_processor.py);
  --task_name is then only a name for the logs;
- --task_name=csv / tsv / jsonl: your data files (file_data.py), with --task_type;
- --task_name=multilabel: the headerless TSV files of multilabel_data.py;
- else a built-in task of glue_data.PROCESSORS.

What a training run leaves in --output_dir (save_task), beside its checkpoints:
label_list.txt (the label names in output order; none for regression) and
classifier_task.json ({"task_name", "task_type"}). The label order belongs to the head:
every run (one that trains on from a model folder too) takes a file task's labels and
type from the folder it starts from (the restored --output_dir, else beside
--init_checkpoint), refuses a --labels_file in another order, and checks a built-in or
plugged-in processor's labels against them (check_labels; both label_order's one check);
export_saved_model takes the labels and the kind of head from there (export_task), so a
model exports with --init_checkpoint alone. Output dirs written before these files
existed still work with a built-in --task_name.

Contracts with the other modules (bert_tf2/tasks/classifier_tasks.py, file_data.py,
user_processor.py (run_classifier: your own task)):
run_classifier calls four functions: `classifier_tasks.define_flags(fv)` (--processor,
--labels_file, file_data's --text_a_column / --text_b_column / --label_column / --task_type,
multilabel's --threshold), `processor_of(part)` (the DataProcessor; every task flag checked;
a file or multilabel task that does not train gets --labels_file or the saved list) and,
once the data files are read, `check_labels(fv, processor)`, then `save_task(fv, processor)`
in a training run.
- `task_type(processor)`: classification, regression (`is_regression`, get_labels() ==
  [None]) or multilabel (`is_multilabel`); `label_names(processor)`: the labels as distinct
  text, None for regression.
- A training run writes output_dir/label_list.txt (not for regression) and
  classifier_task.json (`{"task_name", "task_type"}`, + "processor"); every run reads
  those of the head it starts from (`saved_file`: training_record.head_file). Output dirs
  without them still work with a built-in --task_name.
- `export_task(task) -> (labels, multilabel)` (`task`: the export's
  `settings.part(*SETTINGS)`): export_saved_model's classifier head; labels [None] for
  regression. The conversions' classifier (head_classes.Classifier's methods call them):
  `hf_task` (labels, config.json's problem_type / num_labels), `keras_hub_task` (labels,
  BertTextClassifier's arguments, FOLDER_FILES beside the checkpoint), `preset_files`.
- file_data: one reader per format, `read_csv` / `read_tsv` / `read_jsonl(path, wanted,
  optional=()) -> [Row]` (Row.fields by column name, Row.where() "file, line N");
  `FileProcessor( file_format, Columns(text_a, text_b, label), task_type, labels=None,
  threshold)` takes its label list from train (sorted) unless given;
  DataProcessor._checked_label checks single labels. An example's guid is its row's `id`
  column (else `guid`; `ID_COLUMNS`, no flag) as written (a JSON number stays a number),
  else "<split>-<index>" (an empty cell, null or list too).
- user_processor: `load_processor(spec)` imports the file (its folder appended to sys.path,
  never replacing a loaded module) or module, checks the class is a glue_data.DataProcessor
  subclass, makes it with no arguments; `error_line(error, own_file)` is "file, line N:
  Type: message" at the user's own frame. `load_checked(spec, asked)` (from
  `classifier_tasks.processor_of`) is the one place a run gets its processor: loaded,
  checked to define every get_* method its do_* settings (`asked`) will call, and its
  get_labels() called once, in that order.
"""
import json
import os
import types

from absl import flags
from absl import logging
import tensorflow as tf

from bert_tf2 import fileutil
from bert_tf2.tasks import data_tables
from bert_tf2.tasks import file_data
from bert_tf2.tasks import glue_data
from bert_tf2.tasks import label_order
from bert_tf2.tasks import long_text
from bert_tf2.tasks import multilabel_data
from bert_tf2.tasks import user_processor
from bert_tf2.trainer import checkpoints
from bert_tf2.trainer import training_record

LABELS_FILE = fileutil.LABEL_LIST_FILE
TASK_FILE = "classifier_task.json"
_COLUMN_FLAGS = ("text_a_column", "text_b_column", "label_column")
_LABELS_TASKS = "--task_name=csv, tsv, jsonl and multilabel"

# The settings of a run this module reads (a part of run_classifier's or
# export_saved_model's settings: settings_lib.Settings.part).
SETTINGS = ("task_name", "processor", "labels_file", "task_type", "threshold", "positive_label",
            "xnli_language", "long_text", "do_train", "do_eval", "do_predict", "output_dir",
            "init_checkpoint", "existing_checkpoint") + _COLUMN_FLAGS


def define_flags(fv):
    """--processor, --labels_file, file_data's column flags and --task_type, --threshold."""
    flags.DEFINE_string(
        "processor", None,
        "Your own DataProcessor subclass, as path/to/file.py:ClassName or "
        "package.module:ClassName (the reference's processors dict without editing "
        "run_classifier); --task_name is then any name, used in the logs.", flag_values=fv)
    flags.DEFINE_string(
        "labels_file", None,
        "%s: the label list, one per line, in output order (default: every label of "
        "the training file, sorted; without --do_train the label_list.txt of --output_dir "
        "or beside --init_checkpoint); a model folder's label_list.txt fixes the order."
        % _LABELS_TASKS, flag_values=fv)
    file_data.define_flags(fv)
    multilabel_data.define_flags(fv)
    flags.DEFINE_string(
        "positive_label", None,
        "Classification tasks of 2 labels: the label whose eval_precision, eval_recall and "
        "eval_f1 the evaluation reports (default: the second label in label order, e.g. "
        "1 of MRPC / QQP, whose GLUE F1 eval_f1 is).", flag_values=fv)


def task_type_of_hf(problem_type, rows):
    """Our --task_type of a HuggingFace BertForSequenceClassification: its config.json's
    problem_type (None: a one-output head is a regression, as transformers reads it) and
    its number of outputs `rows`."""
    if problem_type == "regression" or (problem_type is None and rows == 1):
        return "regression"
    return "multilabel" if problem_type == "multi_label_classification" else "classification"


def has_labels(kind):
    """Whether a head of --task_type `kind` has a label list: a regression has none (None:
    a head without task types, a tagger)."""
    return kind != "regression"


def task_type(processor):
    """"classification", "regression" or "multilabel": the head `processor` needs."""
    if processor.is_multilabel:
        return "multilabel"
    return "regression" if processor.is_regression else "classification"


def processor_of(task):
    """The DataProcessor of run_classifier's task settings (SETTINGS), every one checked.

    A file or multilabel task that does not train gets its label list now
    (--labels_file, else the saved one); the others have theirs.
    """
    name = task.task_name
    files = file_data.is_file_task(name) and not task.processor
    multilabel = multilabel_data.is_multilabel(name) and not task.processor
    owner = _owner(task)
    for flag in _COLUMN_FLAGS:
        if task.given(flag) and not files:
            raise ValueError("--%s is read by --task_name=csv, tsv and jsonl only, not %s"
                             % (flag, owner))
    if task.labels_file and not (files or multilabel):
        raise ValueError("--labels_file is read by %s only (the labels of %s are its own)"
                         % (_LABELS_TASKS, owner))
    if task.processor:
        processor = user_processor.load_checked(task.processor, [
            flag for flag in ("do_train", "do_eval", "do_predict") if getattr(task, flag)])
    elif files or multilabel:
        processor = _data_file_processor(task, name.lower() if files else None)
    elif name.lower() in glue_data.PROCESSORS:
        processor = glue_data.get_processor(name, task.xnli_language)
    else:
        raise ValueError("unknown --task_name %r; known tasks: %s; your data files: csv, "
                         "tsv, jsonl, multilabel; your DataProcessor: --processor=FILE.py:CLASS"
                         % (name, ", ".join(sorted(glue_data.PROCESSORS))))
    if task.given("task_type") and task.task_type != task_type(processor):
        raise ValueError("--task_type=%s, but %s is a %s task"
                         % (task.task_type, owner, task_type(processor)))
    if task.given("threshold") and not processor.is_multilabel:
        raise ValueError("--threshold is read by multi-label tasks only, not %s" % owner)
    if processor.is_multilabel:
        multilabel_data.check_threshold(task.threshold)
        if getattr(task, "long_text", "truncate") != "truncate":
            raise ValueError("--long_text=%s is not available with multi-label tasks"
                             % task.long_text)
        if not hasattr(processor, "threshold"):
            processor.threshold = task.threshold
    return processor


def check_data_dir(task, processor, data_dir):
    """data_dir is a folder path or, for --task_name=csv / tsv / jsonl from Python, a dict
    of tables holding the splits the do_* settings read (data_tables); ValueError else."""
    needed = {split: "--%s" % flag for split, flag in (
        ("train", "do_train"), ("dev", "do_eval"), ("test", "do_predict"))
        if getattr(task, flag)}
    data_tables.check_splits(data_dir, needed)
    if data_tables.is_tables(data_dir) and not isinstance(processor, file_data.FileProcessor):
        raise ValueError("data_dir as a dict of tables is read by --task_name=csv, tsv and "
                         "jsonl only, not %s (give it a folder)" % _owner(task))


# The names of a positive label (case-insensitive), in the order they are looked for.
POSITIVE_NAMES = ("1", "true", "yes", "positive")


def positive_index(task, processor):
    """The index of --positive_label in the processor's labels, for a classification task
    of 2 labels; None for the others, which refuse the flag.

    Default: the second label (1 of MRPC / QQP) of a GLUE or --processor task; for your
    own data (csv / tsv / jsonl) default_positive's. Needs the label list: call it once
    the training data is read.
    """
    names = None if processor.is_multilabel else label_names(processor)
    binary = names is not None and len(names) == 2
    if task.positive_label is None:
        return default_positive(task, processor, names) if binary else None
    if not binary:
        raise ValueError("--positive_label=%s is read by classification tasks of 2 labels "
                         "only, not %s (%s)" % (task.positive_label, _owner(task), (
                             "%s task" % task_type(processor) if names is None else
                             "labels: %s" % ", ".join(names))))
    if task.positive_label not in names:
        raise ValueError("--positive_label=%s is not a label of %s; its labels: %s"
                         % (task.positive_label, _owner(task), ", ".join(names)))
    return names.index(task.positive_label)


def default_positive(task, processor, names):
    """The index in `names` (2 labels) of the positive label the metrics of own data
    (file_data.FileProcessor) report when --positive_label is not given.

    The label named as in POSITIVE_NAMES (1, true, yes, positive; any case) when there is
    one, else the second label in file order: --labels_file's, or the order in which the
    training file first names them (the label ids stay label_list.txt's, sorted). A run
    that does not train reads the choice its training run saved in classifier_task.json;
    a folder saved before it was kept: the name, else the second of label_list.txt.
    Other tasks: 1 (the second label).
    """
    if not isinstance(processor, file_data.FileProcessor):
        return 1
    saved = read_task_file(saved_file(task, TASK_FILE)).get("positive_label")
    if saved in names and not task.labels_file:
        return names.index(saved)
    order = (list(names) if task.labels_file else processor.train_label_order) or list(names)
    lowered = [str(name).lower() for name in order]
    for wanted in POSITIVE_NAMES:
        if wanted in lowered:
            return names.index(order[lowered.index(wanted)])
    return names.index(order[1])


def _data_file_processor(task, file_format):
    """A file_data.FileProcessor (file_format set) or a MultiLabelProcessor."""
    kind = "multilabel" if file_format is None else task.task_type
    if file_format and not task.given("task_type"):
        kind = read_task_file(saved_file(task, TASK_FILE)).get("task_type", kind)
    labels = None
    if kind == "regression" and task.labels_file:
        raise ValueError("--labels_file: a --task_type=regression task has no labels")
    if kind != "regression":
        # --labels_file in the order of the head's list (the folder the run starts from),
        # else that list; a training run from scratch makes it from train (sorted).
        labels = label_order.read_labels_file(task.labels_file, saved_file(task, LABELS_FILE),
                                              _reader(kind), _new_dir(task))
        if labels is None and not task.do_train:
            raise ValueError(
                "--task_name=%s without --do_train needs the label list: pass --labels_file, "
                "or an --output_dir or --init_checkpoint holding the %s of a training run"
                % (task.task_name, LABELS_FILE))
    if file_format is None:
        return multilabel_data.MultiLabelProcessor(labels, threshold=task.threshold)
    columns = file_data.Columns(task.text_a_column, task.text_b_column or None, task.label_column)
    return file_data.FileProcessor(file_format, columns, kind, labels, task.threshold)


def _owner(task):
    """What chose the task, for messages: --processor=... or --task_name=..."""
    if task.processor:
        return "--processor=%s" % task.processor
    return "--task_name=%s" % task.task_name


# ---------------------------------------------------------------------------
# The files a training run leaves
# ---------------------------------------------------------------------------

def saved_file(task, name):
    """The settings file `name` of the head this run starts from, or None
    (training_record.head_file: the restored --output_dir's, else the one beside
    --init_checkpoint; a restart's beside --init_checkpoint). A training run continuing
    from a model folder keeps that folder's label order: its output layer's."""
    return training_record.head_file(task, name)


def _reader(kind):
    """The reader of a label list of a head of --task_type `kind`."""
    return multilabel_data.read_labels if kind == "multilabel" else fileutil.read_label_list


def read_task_file(path):
    """The dict of a TASK_FILE ({} for None); ValueError naming a broken file."""
    if not path:
        return {}
    settings = fileutil.read_json(path)
    if not isinstance(settings, dict) or settings.get("task_type") not in file_data.TASK_TYPES:
        raise ValueError("%s: expected {\"task_name\": ..., \"task_type\": one of %s}"
                         % (path, ", ".join(file_data.TASK_TYPES)))
    return settings


def label_names(processor):
    """The processor's labels as text, checked; None for regression."""
    labels = list(processor.get_labels())
    if processor.is_regression:
        if labels != [None]:
            raise ValueError("a regression task's get_labels() must return [None], not %r"
                             % (labels,))
        return None
    names = [str(label) for label in labels]
    for name in names:  # before any work: label_list.txt could not hold it
        fileutil.check_label(name, "get_labels()")
    bad = [n for n in names if not n.strip() or n != n.strip()]
    if not names or bad or len(set(names)) != len(names) or None in labels:
        raise ValueError("get_labels() must return distinct labels, none empty, None or "
                         "with spaces at its ends; got %r" % (labels,))
    return names


def check_labels(task, processor):
    """The labels and type of this run agree with those of the head it starts from
    (saved_file: the restored --output_dir's, else beside --init_checkpoint)."""
    names = label_names(processor)
    kind = task_type(processor)
    path = saved_file(task, TASK_FILE)
    saved_kind = read_task_file(path).get("task_type", kind)
    if saved_kind != kind:
        raise ValueError("%s is of a %s model; %s is a %s task%s"
                         % (path, saved_kind, _owner(task), kind, _new_dir(task)))
    if names is not None:
        label_order.check(names, "--labels_file=%s" % task.labels_file if task.labels_file
                          else _owner(task), saved_file(task, LABELS_FILE), _reader(kind),
                          _new_dir(task))


def _new_dir(task):
    """The way out of a run whose labels are not its head's."""
    return training_record.way_out(task, saved_file(task, LABELS_FILE))


def save_task(task, processor, positive=None):
    """A training run's label_list.txt (not for regression) and classifier_task.json
    (with "positive_label", the name of the label index `positive`, for own data of 2
    labels: the runs that do not train report the same label's metrics)."""
    names, kind = label_names(processor), task_type(processor)
    folder = str(task.output_dir).rstrip("/")
    if names is not None:
        fileutil.write_label_list("%s/%s" % (folder, LABELS_FILE), names)
    with fileutil.atomic_open("%s/%s" % (folder, TASK_FILE), "w") as f:
        settings = {"task_name": task.task_name, "task_type": kind}
        if task.processor:
            settings["processor"] = task.processor
        if positive is not None and isinstance(processor, file_data.FileProcessor):
            settings["positive_label"] = names[positive]
        f.write(json.dumps(settings, indent=2, sort_keys=True, allow_nan=False) + "\n")


# ---------------------------------------------------------------------------
# export_saved_model --model_type=classifier
# ---------------------------------------------------------------------------

def export_task(task):
    """(labels, multilabel) of the classifier to export; labels [None] for regression.

    From --task_name when it is built-in (or multilabel), checked against what the
    training run left beside --init_checkpoint; else from those files (or
    --labels_file), so any trained task exports with --init_checkpoint alone.
    """
    saved_kind = read_task_file(checkpoints.file_beside(task.init_checkpoint, TASK_FILE)).get(
        "task_type")
    name = (task.task_name or "").lower()
    builtin = glue_data.get_processor(name, task.xnli_language) if (
        name in glue_data.PROCESSORS) else None
    kind = task_type(builtin) if builtin else (
        "multilabel" if multilabel_data.is_multilabel(name) else saved_kind)
    if saved_kind and kind != saved_kind:
        raise ValueError("--task_name=%s is a %s task, but --init_checkpoint=%s holds a %s "
                         "model (%s)" % (task.task_name, kind, task.init_checkpoint, saved_kind,
                                         TASK_FILE))
    if kind == "multilabel":
        multilabel_data.check_threshold(task.threshold)
    if kind == "regression":
        if task.labels_file:
            raise ValueError("--labels_file: a regression model has no labels")
        return [None], False
    beside = checkpoints.file_beside(task.init_checkpoint, LABELS_FILE)
    labels = label_order.read_labels_file(task.labels_file, beside, _reader(kind))
    if builtin:
        return label_order.check(label_names(builtin), "--task_name=%s" % task.task_name,
                                 task.labels_file or beside, _reader(kind)), False
    if labels is None or not (kind or task.labels_file):
        raise ValueError(_export_help(task, kind))
    return labels, kind == "multilabel"


def _export_help(task, kind):
    """Why the export does not know the classifier's labels, and what to pass."""
    if kind == "multilabel":
        return ("--task_name=multilabel needs the label list: pass --labels_file (no %s "
                "beside --init_checkpoint)" % LABELS_FILE)
    if kind:
        return ("--init_checkpoint=%s has no %s beside it: pass --labels_file"
                % (task.init_checkpoint, LABELS_FILE))
    what = ("unknown --task_name %r (not a built-in task)" % task.task_name if task.task_name
            else "--model_type=classifier needs the model's labels")
    return ("%s, and --init_checkpoint=%s has no %s of a training run beside it: pass a "
            "built-in --task_name (%s), --task_name=multilabel, or --labels_file"
            % (what, task.init_checkpoint, TASK_FILE, ", ".join(sorted(glue_data.PROCESSORS))))


# -- The classifier in the conversions (HuggingFace, keras-hub; head_classes.Classifier) ---

# The files of a classifier's folder a keras-hub preset carries (both ways).
FOLDER_FILES = (fileutil.LABEL_LIST_FILE, TASK_FILE)


def _door_task(found, init_checkpoint, labels_file, model_class, door_truncates, notes):
    """(labels ([None]: regression), multilabel, threshold) of a classifier's model folder a
    conversion writes as `model_class` (`found`: model_folder.read's); refuses
    --long_text=windows, notes head_tail (which `door_truncates` says)."""
    task = types.SimpleNamespace(task_name=found.get("task_name"), labels_file=labels_file,
                                 xnli_language=found.get("xnli_language") or "zh",
                                 init_checkpoint=init_checkpoint,
                                 threshold=found.get("threshold", 0.5))
    labels, multilabel = export_task(task)
    _, note = long_text.mode_for_door(init_checkpoint, model_class, door_truncates)
    if note:
        notes.append(note)
    return labels, multilabel, task.threshold


def hf_task(found, init_checkpoint, labels_file, notes):
    """The classifier's (labels or None, config.json fields, None) in its HuggingFace export
    (head_classes.ModelType.hf_task): problem_type, and num_labels 1 for a regression."""
    labels, multilabel, threshold = _door_task(
        found, init_checkpoint, labels_file, "BertForSequenceClassification",
        "HuggingFace's tokenizer truncates the end of a long text", notes)
    if multilabel:
        notes.append("multi-label: a label applies where its sigmoid is >= %s (transformers' "
                     "pipeline needs function_to_apply='sigmoid' and that threshold)" % threshold)
    if labels == [None]:
        return None, {"problem_type": "regression", "num_labels": 1}, None
    return labels, {"problem_type": "multi_label_classification" if multilabel
                    else "single_label_classification"}, None


def keras_hub_task(found, init_checkpoint, rows, notes):
    """The classifier's (labels or None, BertTextClassifier's num_classes and activation,
    {file: path} of FOLDER_FILES beside the checkpoint) in its keras-hub preset (a head of
    `rows` outputs)."""
    try:
        labels, multilabel, threshold = _door_task(
            found, init_checkpoint, None, "keras-hub's BertTextClassifier",
            "keras-hub's preprocessor cuts the end of a long text", notes)
    except ValueError as e:
        if "--labels_file" not in str(e):
            raise
        # export_task's advice names flags of the exporters that have them.
        raise ValueError("--init_checkpoint=%s: the classifier's labels are not known (no %s "
                         "of a training run beside it): write them into %s beside the "
                         "checkpoint, one label per line in the order of the head's outputs, "
                         "then convert again" % (init_checkpoint, TASK_FILE,
                                                 fileutil.LABEL_LIST_FILE)) from None
    activation = None
    if labels == [None]:
        labels = None
    else:
        activation = "sigmoid" if multilabel else "softmax"
        if multilabel:
            notes.append("multi-label: the preset gives sigmoid scores; a label applies where "
                         "its score is >= %s" % threshold)
    files = {name: checkpoints.file_beside(init_checkpoint, name) for name in FOLDER_FILES}
    if labels is not None:
        notes.append("the label names go in %s beside keras-hub's files: keras-hub's own "
                     "save_to_preset does not keep it, so copy it along when the preset is "
                     "saved anew (an import without it warns)" % fileutil.LABEL_LIST_FILE)
    return (labels, {"num_classes": int(rows), "activation": activation},
            {name: path for name, path in files.items() if path})


def preset_files(preset_dir, output_dir, rows):
    """{name: path} of FOLDER_FILES in a keras-hub classifier preset, which its import copies
    into the model folder; no label list: a warning (its `rows` outputs have no names)."""
    found = {name: os.path.join(preset_dir, name) for name in FOLDER_FILES}
    found = {name: path for name, path in found.items() if tf.io.gfile.exists(path)}
    if fileutil.LABEL_LIST_FILE not in found:
        logging.warning("%s has no %s (keras-hub's own save_to_preset does not keep it): the "
                        "classifier's %d outputs have no label names; put a %s (one label per "
                        "line, in output order) into %s before predicting", preset_dir,
                        fileutil.LABEL_LIST_FILE, int(rows), fileutil.LABEL_LIST_FILE,
                        output_dir)
    return found
