"""A fork's checkpoint calls on one of our TF2 checkpoints, in a process of its own.

Run by tests/test_fork_checkpoints.py: `python fork_checkpoint_graph.py REPO_ROOT CKPT OUT.json`
(`import bert_tf2.tf1 as tf` switches the process to graph mode). Builds the graph a fork
builds (tf.get_variable under the TF1 names), maps it the way the reference's
modeling.get_assignment_map_from_checkpoint does, loads it with tf.train.init_from_checkpoint
and writes what the variables hold as JSON.
"""
import os
import json
import sys
os.environ.pop("TF_USE_LEGACY_KERAS", None)  # as a user runs it: see tests/conftest.py

sys.path.insert(0, sys.argv[1])

import bert_tf2.tf1 as tf  # noqa: E402
import modeling  # noqa: E402
import tensorflow  # noqa: E402
from bert import modeling as bert_modeling  # noqa: E402

CKPT, OUT = sys.argv[2], sys.argv[3]


def build(listed):
    """The fork's graph: one variable per model weight the checkpoint lists."""
    for name, shape in listed:
        if name == "global_step" or name.endswith(("/adam_m", "/adam_v")):
            continue
        tf.get_variable(name, shape, initializer=tf.zeros_initializer())


def values():
    with tf.Session() as session:
        session.run(tf.global_variables_initializer())
        return {v.op.name: float(abs(session.run(v)).sum()) for v in tf.global_variables()}


found = {}
listed = tf.train.list_variables(CKPT)
found["listed"] = [name for name, _ in listed]
with tf.Graph().as_default():
    build(listed)
    # The module's own function, both ways a fork imports it.
    mapping, initialized = modeling.get_assignment_map_from_checkpoint(
        tf.trainable_variables(), CKPT)
    assert (mapping, initialized) == bert_modeling.get_assignment_map_from_checkpoint(
        tf.trainable_variables(), CKPT)
    found["mapped"] = len(mapping)
    found["initialized"] = sorted(initialized)
    found["graph"] = len(tf.global_variables())
    tf.train.init_from_checkpoint(CKPT, mapping)
    found["by_name"] = values()
with tf.Graph().as_default():  # TensorFlow's own init_from_checkpoint takes the map too
    build(listed)
    own, _ = modeling.get_assignment_map_from_checkpoint(tf.trainable_variables(), CKPT)
    tensorflow.compat.v1.train.init_from_checkpoint(CKPT, own)
    found["by_tensorflow"] = values()
with tf.Graph().as_default():  # a scope entry, as forks write {"bert/": "bert/"}
    build([(n, s) for n, s in listed if n.startswith("bert/")])
    tf.train.init_from_checkpoint(CKPT, {"bert/": "bert/"})
    found["by_scope"] = values()
found["load_variable"] = float(abs(tf.train.load_variable(CKPT, "output_weights")).sum())
try:
    tf.train.init_from_checkpoint(CKPT, {"bert/no/such/kernel": "x"})
except ValueError as e:
    found["error"] = str(e)
with open(OUT, "w", encoding="utf-8") as f:
    json.dump(found, f)
