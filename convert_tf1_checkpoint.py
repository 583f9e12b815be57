r"""Converts checkpoints between Google's TF1 names and our TF2 (object-based) format.

TF1 -> TF2: builds the model the checkpoint holds (pretraining heads,
classifier, SQuAD or bare encoder), loads it by name and writes a
tf.train.Checkpoint, optionally with the Adam slots and global_step, so that a
run can resume from it. TF2 -> TF1: rewrites our checkpoint under TF1 names, so
tools written for Google's checkpoints can read it.

  python convert_tf1_checkpoint.py --input_checkpoint=uncased_L-12_H-768_A-12/bert_model.ckpt \
      --bert_config_file=uncased_L-12_H-768_A-12/bert_config.json --output_dir=tf2_ckpt
"""
from bert_tf2 import startup  # first, before tensorflow: a quiet C++ start-up (startup.py)
import os

import tensorflow as tf
from absl import flags
from absl import logging

from bert import modeling
from bert import optimization
from bert_tf2.base import output_folder
from bert_tf2.base import path_match
from bert_tf2 import cli
from bert_tf2 import settings as settings_lib
from bert_tf2.export import head_types
from bert_tf2.trainer import checkpoints

MODEL_TYPES = ("auto",) + head_types.TF1
_TOOL = "convert_tf1_checkpoint"


def define_flags(fv):
    """Registers the converter's flags on `fv`."""
    flags.DEFINE_string("input_checkpoint", None,
                        "Checkpoint to convert (file prefix or directory), TF1 or TF2.",
                        flag_values=fv)
    flags.DEFINE_string("bert_config_file", None,
                        "bert_config.json of the model (needed for TF1 -> TF2).", flag_values=fv)
    flags.DEFINE_string("output_dir", None, "Where to write the converted checkpoint.",
                        flag_values=fv)
    flags.DEFINE_string("output_name", "bert_model.ckpt",
                        "File prefix of the converted checkpoint inside output_dir.",
                        flag_values=fv)
    flags.DEFINE_enum("direction", "auto", ["auto", "tf1_to_tf2", "tf2_to_tf1"],
                      "auto: the other format than the input's.", flag_values=fv)
    flags.DEFINE_enum("model_type", "auto", list(MODEL_TYPES),
                      "TF1 -> TF2: which model to build; auto picks the heads the checkpoint "
                      "has (%s)." % " > ".join(head_types.TF1), flag_values=fv)
    flags.DEFINE_bool("include_optimizer", False,
                      "Also convert the Adam slots (adam_m, adam_v) and global_step.",
                      flag_values=fv)


Settings = settings_lib.settings_class(define_flags, __name__)


def detect_model_type(contents):
    """Which task model a checkpoint holds, from its variable names."""
    return head_types.detect_tf1(set(contents.model_names())).name


def build_model(model_type, bert_config, contents):
    """A built model of `model_type` whose heads fit the checkpoint's shapes."""
    head = head_types.find(model_type)
    if head is None or not head.tf1:
        raise ValueError("unknown --model_type=%s" % model_type)
    missing = [mark for mark in head.held_marks if mark not in contents.shapes]
    if missing:  # the variables that show a checkpoint holds the head (ModelType.holds)
        raise ValueError("--model_type=%s but the checkpoint has no %s"
                         % (model_type, missing[0]))
    # A head with label rows (the classifier's output_weights): as many labels as rows.
    num_labels = (contents.shapes[head.label_variable][0] if head.label_variable else None)
    return head.build(bert_config, num_labels=num_labels)


def load_optimizer_state(model, contents):
    """An AdamWeightDecay whose slots and step are the checkpoint's."""
    optimizer = optimization.create_optimizer(1e-4, 1, 0)
    variables = checkpoints.tf1_variable_map(model)
    optimizer.build(list(variables.values()))
    found = 0
    for name, var in variables.items():
        for slot in checkpoints.TF1_SLOT_NAMES:
            key = "%s/%s" % (name, slot)
            if key in contents.keys:
                optimizer.get_slot(var, slot).assign(contents.get(key))
                found += 1
    if "global_step" in contents.keys:
        optimizer.iterations.assign(int(contents.get("global_step")))
    logging.info("Converted %d optimizer slots, global_step %d", found,
                 int(optimizer.iterations.numpy()))
    return optimizer


def tf1_to_tf2(input_checkpoint, bert_config, output_prefix, model_type="auto",
               include_optimizer=False):
    """Writes our TF2 checkpoint of a TF1 one; returns (prefix, LoadResult)."""
    contents = checkpoints.CheckpointContents(input_checkpoint)
    if contents.is_tf2:
        raise ValueError("%s is already a TF2 checkpoint" % contents.path)
    if model_type == "auto":
        model_type = detect_model_type(contents)
    logging.info("Building a %s model", model_type)
    model = build_model(model_type, bert_config, contents)
    result = checkpoints.load_checkpoint(model, contents.path)
    if result.not_in_checkpoint:
        raise ValueError("checkpoint %s lacks %d variables of the %s model, e.g. %s"
                         % (contents.path, len(result.not_in_checkpoint), model_type,
                            result.not_in_checkpoint[0]))
    objects = {"model": model}
    if include_optimizer:
        objects["optimizer"] = load_optimizer_state(model, contents)
    ckpt = tf.train.Checkpoint(**objects)
    parent = os.path.dirname(output_prefix)
    if parent:
        tf.io.gfile.makedirs(parent)
    path = ckpt.write(output_prefix)
    checkpoints.write_state_file(output_prefix)
    return path, result


@startup.keeps_process_settings
def run(settings):
    """Converts --input_checkpoint in the direction the settings (or its format) say.

    Args:
      settings: a Settings, or convert_tf1_checkpoint's parsed flags.
    Returns:
      a settings.Result: output_dir, and outputs {"checkpoint": the converted prefix,
      "checkpoint_index": its .index file, "checkpoint_state": the `checkpoint` file
      beside it}.
    """
    settings = Settings.of(settings)
    settings.require("input_checkpoint", "output_dir")
    name = _output_name(settings.output_name)
    output_prefix = os.path.join(settings.output_dir, name)
    # The checkpoint's files and the folder's `checkpoint` state file: replaced only
    # when an earlier conversion wrote them (the name itself is no pattern).
    outputs = (path_match.escape(name) + ".*",
               path_match.escape(os.path.join(os.path.dirname(name), "checkpoint")))
    direction = settings.direction
    if direction == "auto":
        direction = "tf2_to_tf1" if checkpoints.is_tf2_checkpoint(settings.input_checkpoint) \
            else "tf1_to_tf2"
    if direction == "tf2_to_tf1":
        names = output_folder.write_outputs_aside(
            settings.output_dir, _TOOL, outputs,
            lambda folder: checkpoints.tf2_to_tf1(
                settings.input_checkpoint, os.path.join(folder, name),
                include_optimizer=settings.include_optimizer))
        logging.info("Wrote %d TF1 variables to %s", len(names), output_prefix)
        return _result(settings.output_dir, output_prefix)
    if not settings.bert_config_file:
        raise ValueError("--bert_config_file is required to convert a TF1 checkpoint to TF2")
    bert_config = modeling.BertConfig.from_json_file(settings.bert_config_file)
    path, result = output_folder.write_outputs_aside(
        settings.output_dir, _TOOL, outputs,
        lambda folder: tf1_to_tf2(settings.input_checkpoint, bert_config,
                                  os.path.join(folder, name),
                                  settings.model_type, settings.include_optimizer))
    logging.info("Wrote TF2 checkpoint %s (%d variables; %d checkpoint weights unused)",
                 path, len(result.loaded), len(result.unused))
    return _result(settings.output_dir, path)


def _output_name(value):
    """--output_name as a relative path inside --output_dir; one line when it leaves it."""
    name = os.path.normpath(value or "")
    if not value or os.path.isabs(value) or "://" in value or name == "." or \
            name == ".." or name.startswith(".." + os.sep) or value.endswith("/"):
        raise ValueError("--output_name=%s must be a file prefix inside --output_dir (such as "
                         "bert_model.ckpt or sub/bert_model.ckpt): no absolute path, no .., no "
                         "trailing /" % value)
    return name


def _result(output_dir, prefix):
    """The Result of a conversion that wrote the checkpoint `prefix` in `output_dir`."""
    return settings_lib.Result(output_dir=output_dir, outputs={
        "checkpoint": prefix,
        "checkpoint_index": prefix + ".index",
        "checkpoint_state": os.path.join(os.path.dirname(prefix), "checkpoint")})


def main():
    """Console entry point."""
    cli.run_cli(define_flags, run)


if __name__ == "__main__":
    main()
