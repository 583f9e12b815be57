"""The TF1 name of a variable, and the TF1 names a checkpoint stores its tensors under.

One naming rule (`tf1_name`): drop the `:0` suffix and the top-level model's name, then
apply SCOPE_TABLE; a TF2 checkpoint of ours (object-based) keeps every variable's full
name in its object graph (`tf2_name_table`). trainer/checkpoints.py loads and converts by
these names; modeling.get_assignment_map_from_checkpoint (a fork's graph on our
checkpoints) reads `stored_names`. Imports TensorFlow and fileutil only.
"""
import collections
import re

import tensorflow as tf

from bert_tf2 import fileutil

# First path components that TF1 BERT checkpoints use at the top level, and those of
# the task heads the reference never had (run_ner's tagger, its feature-based
# BiLSTM and --crf transitions, run_multiple_choice's scorer).
TF1_ROOTS = ("bert", "cls", "output_weights", "output_bias", "global_step",
             "tagger", "bilstm_0", "bilstm_1", "crf", "multiple_choice")

# Scopes our models have and TF1 does not (prefix in our name -> TF1 prefix).
SCOPE_TABLE = (
    ("classifier/", ""),  # run_classifier's output_weights/output_bias are top-level in TF1
)

# TF1 slot suffixes of the reference's AdamWeightDecayOptimizer.
TF1_SLOT_NAMES = ("adam_m", "adam_v")

OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


def tf1_name(name):
    """TF1 variable name for one of our variable names (or for a tf.Variable)."""
    if not isinstance(name, str):
        name = name.name
    name = re.sub(r":\d+$", "", name)
    parts = name.split("/")
    if len(parts) > 1 and parts[0] not in TF1_ROOTS:
        name = "/".join(parts[1:])
    for ours, theirs in SCOPE_TABLE:
        if name.startswith(ours):
            name = theirs + name[len(ours):]
    return name


def _object_graph(reader):
    from tensorflow.core.protobuf import trackable_object_graph_pb2
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor(OBJECT_GRAPH_KEY))
    return graph


def tf2_name_table(reader):
    """TF1 name -> checkpoint key for the variables (and Adam slots) of a TF2 checkpoint."""
    graph = _object_graph(reader)
    full_names = {}
    table = collections.OrderedDict()
    for node_id, node in enumerate(graph.nodes):
        for attr in node.attributes:
            if attr.name == "VARIABLE_VALUE" and attr.full_name:
                full_names[node_id] = attr.full_name
    for node_id, node in enumerate(graph.nodes):
        for attr in node.attributes:
            if attr.name != "VARIABLE_VALUE" or not attr.full_name:
                continue
            name = tf1_name(attr.full_name)
            if name.split("/")[0] not in TF1_ROOTS:
                continue  # optimizer counters, hyper-parameters, data iterators
            table.setdefault(name, attr.checkpoint_key)
        for slot in node.slot_variables:
            original = full_names.get(slot.original_variable_node_id)
            slot_node = graph.nodes[slot.slot_variable_node_id]
            keys = [a.checkpoint_key for a in slot_node.attributes if a.name == "VARIABLE_VALUE"]
            if original and keys:
                table.setdefault("%s/%s" % (tf1_name(original), slot.slot_name), keys[0])
    step_key = find_step_key(reader)
    if step_key:
        table["global_step"] = step_key
    return table


def find_step_key(reader):
    shapes = reader.get_variable_to_shape_map()
    for key in ("step/.ATTRIBUTES/VARIABLE_VALUE", "optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE",
                "optimizer/iterations/.ATTRIBUTES/VARIABLE_VALUE"):
        if key in shapes:
            return key
    return None


def stored_names(path):
    """[(TF1 name, the key the checkpoint stores it under)], sorted by name: the name
    itself in a TF1 checkpoint, the object-based key (.../.ATTRIBUTES/VARIABLE_VALUE) in
    one of ours. tf.compat.v1.train.init_from_checkpoint reads the keys."""
    reader = tf.train.load_checkpoint(fileutil.readable_checkpoint(path))
    if reader.has_tensor(OBJECT_GRAPH_KEY):
        return sorted(tf2_name_table(reader).items())
    return [(name, name) for name in sorted(reader.get_variable_to_shape_map())]
