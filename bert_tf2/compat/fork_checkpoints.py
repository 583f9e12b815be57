"""tf.train's checkpoint readers for a fork (`import bert_tf2.tf1 as tf`), on our checkpoints too.

A fork initialises its model the reference's way: modeling.get_assignment_map_from_checkpoint
lists the checkpoint's variables (tf.train.list_variables) and keeps those named like a
graph variable, then tf.train.init_from_checkpoint(path, assignment_map) loads them. On a
TF1 (name-based) checkpoint these are TensorFlow's own. On one of our TF2 checkpoints
(object-based: keys like model/bert/.../.ATTRIBUTES/VARIABLE_VALUE) TensorFlow's would list
no TF1 name, and the fork would train from random weights without a word; here:
  list_variables(path): the TF1 names (checkpoints.tf1_name) with their shapes, optimizer
    slots (…/adam_m, …/adam_v) and global_step included, as a TF1 checkpoint lists them;
  load_variable(path, name): the value stored under a TF1 name;
  init_from_checkpoint(path, assignment_map): the map's TF1 names (and scopes "a/": "b/")
    turned into the checkpoint's keys, then TensorFlow's own; a name the checkpoint does
    not hold is one ValueError line naming convert_tf1_checkpoint.py.
"""
import tensorflow as tf

from bert_tf2.trainer import checkpoints

_V1 = tf.compat.v1
_CONVERT = ("or convert the checkpoint to a TF1 one first: python convert_tf1_checkpoint.py "
            "--direction=tf2_to_tf1")


def _ours(path):
    """CheckpointContents of `path` when it is one of our TF2 checkpoints, else None."""
    if not isinstance(path, str) or not path:
        return None
    try:
        contents = checkpoints.CheckpointContents(path)
    except ValueError:
        return None  # TensorFlow's own call names what is wrong with it
    return contents if contents.is_tf2 else None


def list_variables(ckpt_dir_or_file):
    """[(name, shape)] of a checkpoint: TF1 names for one of ours, sorted by name."""
    contents = _ours(ckpt_dir_or_file)
    if contents is None:
        return _V1.train.list_variables(ckpt_dir_or_file)
    return sorted((name, list(contents.shapes[name])) for name in contents.names())


def load_variable(ckpt_dir_or_file, name):
    """The value a checkpoint stores under `name` (a TF1 name for one of ours)."""
    contents = _ours(ckpt_dir_or_file)
    if contents is None or name not in contents.keys:
        return _V1.train.load_variable(ckpt_dir_or_file, name)
    return contents.get(name)


def _scope_of(name):
    return name if isinstance(name, str) and name.endswith("/") else None


def translate_assignment_map(contents, assignment_map):
    """The assignment map with the checkpoint's keys for its TF1 names; a scope entry
    ("bert/": "bert/", "/": "scope/") becomes one entry per variable under it."""
    translated = {}
    stored = set(contents.keys.values())
    items = assignment_map.items() if isinstance(assignment_map, dict) else [
        (name, name) for name in assignment_map]
    for source, target in items:
        scope = _scope_of(source)
        if scope is None and source in stored:  # a key as stored (modeling's maps: checkpoint_names.stored_names)
            translated[source] = target
            continue
        if scope is None:
            if source not in contents.keys:
                raise ValueError(
                    "tf.train.init_from_checkpoint: %s (a TF2 checkpoint of bert-tf2) holds no "
                    "variable %s; its variables are %s, ...; fix the assignment map, %s"
                    % (contents.path, source, ", ".join(contents.model_names()[:3]), _CONVERT))
            translated[contents.keys[source]] = target
            continue
        if not isinstance(target, str) or not target.endswith("/") and target:
            raise ValueError("tf.train.init_from_checkpoint: the scope %s of the assignment map "
                             "must map to a scope (\"name/\"), not %r" % (source, target))
        prefix = "" if scope == "/" else scope
        new_scope = "" if target == "/" else target
        # As TensorFlow's: every graph variable under the target scope, from the checkpoint.
        for var in _V1.global_variables():
            var_name = var.op.name
            if not var_name.startswith(new_scope):
                continue
            name = prefix + var_name[len(new_scope):]
            if name not in contents.keys:
                raise ValueError(
                    "tf.train.init_from_checkpoint: %s (a TF2 checkpoint of bert-tf2) holds no "
                    "%s for the graph variable %s (scope %s -> %s); %s"
                    % (contents.path, name, var_name, source, target, _CONVERT))
            translated[contents.keys[name]] = var_name
    return translated


def init_from_checkpoint(ckpt_dir_or_file, assignment_map):
    """tf.compat.v1.train.init_from_checkpoint, by TF1 name on our TF2 checkpoints too."""
    contents = _ours(ckpt_dir_or_file)
    if contents is None:
        return _V1.train.init_from_checkpoint(ckpt_dir_or_file, assignment_map)
    return _V1.train.init_from_checkpoint(contents.path,
                                          translate_assignment_map(contents, assignment_map))


# The tf.train functions a fork gets from here (bert_tf2.tf1's tf.train overlay).
OVERRIDES = {"list_variables": list_variables, "load_variable": load_variable,
             "init_from_checkpoint": init_from_checkpoint}
