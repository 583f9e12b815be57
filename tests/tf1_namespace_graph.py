"""What `import bert_tf2.tf1 as tf` gives a fork, checked in a process of its own.

Run by tests/test_tf1_namespace.py in a subprocess (the import switches the whole process
to TF1 graph mode): `python tf1_namespace_graph.py REPO_ROOT OUT.json`. Writes what it
found as JSON; the test asserts on it.
"""
import os
import importlib
import json
import sys
os.environ.pop("TF_USE_LEGACY_KERAS", None)  # as a user runs it: see tests/conftest.py

import numpy as np

sys.path.insert(0, sys.argv[1])

import bert_tf2.tf1 as tf  # noqa: E402
import bert_tf2.tf1 as tf_again  # noqa: E402

assert tf_again is tf
importlib.reload(tf)  # a second run of the module body: still no second warning line

# Every tf.X the reference's own .py files use (grep -o 'tf\.[A-Za-z_.]*' in them), but
# tf.estimator.* and tf.contrib.tpu.*, which come from modules of their own.
REFERENCE_NAMES = """
logging.info logging.set_verbosity logging.INFO logging.warning reshape int64 int32
FixedLenFeature float32 get_variable constant variable_scope gfile.GFile gfile.MakeDirs
gfile.Open gfile.Glob flags.DEFINE_string flags.DEFINE_bool flags.DEFINE_integer
flags.DEFINE_float flags.FLAGS app.run matmul train.init_from_checkpoint one_hot
layers.dense zeros_initializer reduce_sum cast trainable_variables reduce_mean
nn.log_softmax nn.bias_add multiply truncated_normal_initializer transpose train.Scaffold
train.Feature nn.dropout metrics.mean metrics.accuracy group data.TFRecordDataset
contrib.cluster_resolver.TPUClusterResolver argmax train.Int64List train.Features
train.Example to_int32 test.main test.TestCase tanh python_io.TFRecordWriter
parse_single_example ones nn.softmax gather data.Dataset.from_tensor_slices
contrib.data.map_and_batch contrib.data.parallel_interleave contrib.layers.layer_norm
Tensor train.get_or_create_global_step square shape py_func nn.relu
local_variables_initializer gradients global_variables_initializer expand_dims zeros
unstack train.polynomial_decay train.list_variables train.Optimizer train.FloatList squeeze
sqrt slice range pow nn.embedding_lookup get_variable_scope control_dependencies
constant_initializer concat clip_by_global_norm assert_less_equal Session Graph
""".split()


def resolve(dotted):
    """getattr along `dotted` from tf; the error's type and message when it fails."""
    value = tf
    try:
        for part in dotted.split("."):
            value = getattr(value, part)
    except AttributeError as error:
        return "%s: %s" % (type(error).__name__, error)
    return None


def layer_names():
    """Variables of tf.layers.dense / conv1d / an LSTM, as TF1 named them."""
    x = tf.placeholder(tf.float32, [2, 5, 3])
    first = tf.layers.dense(x, 4)
    tf.layers.dense(x, 4)
    with tf.variable_scope("head"):
        tf.layers.dense(x, 2, name="output", kernel_initializer=tf.truncated_normal_initializer(
            stddev=0.02))
    tf.layers.dropout(first, rate=0.5, training=True)
    tf.layers.conv1d(x, 2, 3)
    cells = tf.nn.rnn_cell.MultiRNNCell([tf.nn.rnn_cell.LSTMCell(4),
                                         tf.contrib.rnn.GRUCell(3)])
    outputs, _ = tf.nn.dynamic_rnn(cells, x, dtype=tf.float32)
    with tf.Session() as session:
        session.run(tf.global_variables_initializer())
        shape = session.run(outputs, {x: np.ones([2, 5, 3], np.float32)}).shape
    return [v.name for v in tf.global_variables()], list(shape)


def main():
    found = {"eager": tf.executing_eagerly(), "version": tf.__version__,
             "unresolved": {n: e for n in REFERENCE_NAMES for e in [resolve(n)] if e}}
    for lazy in ("estimator", "contrib.tpu", "contrib.crf"):
        found[lazy] = resolve(lazy)
    found["missing"] = {n: resolve(n) for n in ("foo", "contrib.slim", "contrib.framework",
                                               "contrib.layers.batch_norm")}
    found["removed_cells"] = {n: resolve(n) for n in (
        "contrib.crf.CrfForwardRnnCell", "contrib.rnn.LayerNormBasicLSTMCell",
        "nn.rnn_cell.LayerNormBasicLSTMCell")}
    found["crf_decode"] = resolve("contrib.crf.crf_decode")
    found["hasattr_contrib_learn"] = hasattr(tf.contrib, "learn")
    # A runner called in this (graph-mode) process: one line, no folder made.
    import os  # pylint: disable=import-outside-toplevel
    import run_classifier  # pylint: disable=import-outside-toplevel
    out = os.path.join(os.path.dirname(sys.argv[2]), "runner_out")
    try:
        run_classifier.run(run_classifier.Settings(
            task_name="cola", do_train=True, data_dir=out, output_dir=out))
        found["runner_error"] = None
    except Exception as error:  # pylint: disable=broad-except
        found["runner_error"] = "%s: %s" % (type(error).__name__, error)
    found["runner_folder_made"] = os.path.exists(out)
    found["variables"], found["rnn_output_shape"] = layer_names()
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(found, f)


main()
# tf.app.run (absl's, which gives the root logger a handler too): one line per tf.logging call.
tf.app.run(lambda argv: tf.logging.info("logged once under tf.app.run"))
