"""tf.contrib for forks of the reference on TF 2.20: `tf.contrib` of `import bert_tf2.tf1 as tf`.

The namespaces forks of run_classifier.py and the BERT-NER / BiLSTM-CRF taggers use:
  data: map_and_batch, parallel_interleave (bert_tf2.compat.contrib_ops); the rest of
    contrib.data moved to tf.data.experimental, which answers for it.
  layers: layer_norm, fully_connected, xavier_initializer(_conv2d),
    variance_scaling_initializer, l1_regularizer, l2_regularizer.
  rnn: the TF1 cells (LSTMCell, GRUCell, BasicLSTMCell, BasicRNNCell, MultiRNNCell,
    DropoutWrapper, LSTMStateTuple, ...) from tf_keras's TF1 API, and static_rnn & co.
  metrics: f1_score.  cluster_resolver: TensorFlow's own (TPUClusterResolver).
  compiler.jit.experimental_jit_scope: tf.xla.experimental.jit_scope.
  tpu and crf: bert_tf2.compat.tpu and bert_tf2.base.crf, imported on first use.
Anything else is a RemovedSymbolError (an AttributeError, so hasattr() answers False)
whose one line names the symbol and what to use instead (REPLACEMENTS).
`from bert_tf2.compat.contrib import rnn, crf` works as `from tensorflow.contrib import ...`.
"""
import importlib

import tensorflow as tf

from bert_tf2.compat import contrib_ops

# tf_keras's TF1 API (what tf.compat.v1.keras is under TF_USE_LEGACY_KERAS=1): its
# tf.layers and tf.nn.rnn_cell, which TF 2.20's own tf.compat.v1 routes to Keras 3, where
# they are gone.
KERAS_V1 = "tf_keras.api._v1.keras"
LEGACY_LAYERS = KERAS_V1 + ".__internal__.legacy.layers"
LEGACY_RNN_CELLS = KERAS_V1 + ".__internal__.legacy.rnn_cell"

# What to use instead, by the symbol's longest matching prefix.
REPLACEMENTS = {
    "tf.contrib.slim": "pip install tf-slim and `import tf_slim as slim`",
    "tf.contrib.learn": "tf.estimator (bert_tf2.tf1 has Estimator and TPUEstimator) or "
                        "bert-tf2's runners",
    "tf.contrib.seq2seq.sequence_loss": "tf.losses.sparse_softmax_cross_entropy(labels, "
                                        "logits, weights=mask)",
    "tf.contrib.seq2seq": "a decoder of your own on tf.nn.raw_rnn / tf.while_loop (TF 2 "
                          "kept no seq2seq; tensorflow-addons' is unmaintained)",
    "tf.contrib.lookup": "tf.lookup (StaticHashTable, TextFileInitializer, "
                         "index_table_from_file in tf.compat.v1.lookup)",
    "tf.contrib.summary": "tf.summary (tf.compat.v1.summary in graph mode)",
    "tf.contrib.framework": "tf.compat.v1's own names (get_variables -> tf.global_variables, "
                            "get_model_variables -> tf.model_variables) or tf_slim",
    "tf.contrib.distribute": "tf.distribute (MirroredStrategy, MultiWorkerMirroredStrategy, "
                             "TPUStrategy)",
    "tf.contrib.distribution_strategy_context": "tf.distribute.get_replica_context / "
                                                "get_strategy",
    "tf.contrib.training.HParams": "a dict or a dataclass",
    "tf.contrib.training": "tf.data (bucket_by_sequence_length: "
                           "tf.data.Dataset.bucket_by_sequence_length)",
    "tf.contrib.opt": "tf.train's optimizers or optimization.AdamWeightDecayOptimizer",
    "tf.contrib.predictor": "tf.saved_model.load(export_dir).signatures['serving_default']",
    "tf.contrib.estimator": "tf.estimator (bert_tf2.tf1); its early-stopping hooks are "
                            "in tf.contrib.estimator and tf.estimator.experimental",
    "tf.contrib.keras": "tf_keras",
    "tf.contrib.cudnn_rnn": "tf_keras.layers.LSTM / GRU (cuDNN kernels on a GPU)",
    "tf.contrib.image": "tf.image",
    "tf.contrib.signal": "tf.signal",
    "tf.contrib.distributions": "tensorflow_probability.distributions",
    "tf.contrib.bayesflow": "tensorflow_probability",
    "tf.contrib.losses": "tf.losses (tf.compat.v1.losses)",
    "tf.contrib.stateless": "tf.random.stateless_uniform / stateless_normal",
    "tf.contrib.checkpoint": "tf.train.Checkpoint",
    "tf.contrib.eager": "TensorFlow 2 itself (eager by default: import tensorflow, not "
                        "bert_tf2.tf1)",
    "tf.contrib.quantize": "the TensorFlow Model Optimization Toolkit",
    "tf.contrib.util": "tf.make_tensor_proto / tf.make_ndarray",
    "tf.contrib.layers.batch_norm": "tf.layers.batch_normalization",
    "tf.contrib.layers": "tf.layers (bert_tf2.tf1) or tf_slim's layers",
    "tf.contrib.rnn": "tf_keras.layers' RNN cells (bert_tf2.tf1 has the TF1 cells of "
                      "tf.nn.rnn_cell)",
    "tf.contrib.data": "tf.data.experimental or a tf.data.Dataset method",
    "tf.contrib.metrics": "tf.metrics (tf.compat.v1.metrics)",
    "tf.contrib.tpu": "bert_tf2.compat.tpu, which this copy of bert-tf2 lacks; on a TPU, "
                      "bert-tf2's runners (run_classifier.py ... --use_tpu)",
    "tf.contrib.crf.CrfForwardRnnCell": "crf_log_norm (tf.contrib.crf), which runs the "
                                        "forward algorithm itself",
    "tf.contrib.crf.CrfDecodeForwardRnnCell": "crf_decode (tf.contrib.crf), which runs "
                                              "Viterbi itself",
    "tf.contrib.crf.CrfDecodeBackwardRnnCell": "crf_decode (tf.contrib.crf), which runs "
                                               "Viterbi itself",
    "tf.contrib.crf": "bert_tf2.base.crf's functions (crf_log_likelihood, crf_log_norm, "
                      "crf_sequence_score, crf_unary_score, crf_binary_score, crf_decode, "
                      "viterbi_decode)",
    "tf.nn.rnn_cell": "the TF1 cells tf.nn.rnn_cell has (LSTMCell, GRUCell, BasicLSTMCell, "
                      "BasicRNNCell, MultiRNNCell, DropoutWrapper, ...) or tf_keras.layers' "
                      "RNN cells",
    "tf.estimator": "bert_tf2.compat.estimator, which this copy of bert-tf2 lacks",
}


class RemovedSymbolError(AttributeError):
    """A TF1 symbol bert_tf2.tf1 does not give; its message names what to use instead."""


def explain(symbol):
    """The one-line message for a missing `symbol` ("tf.contrib.x.y"), with its replacement."""
    parts = symbol.split(".")
    for end in range(len(parts), 1, -1):
        advice = REPLACEMENTS.get(".".join(parts[:end]))
        if advice:
            return "%s is not in bert_tf2.tf1 (TensorFlow 2 removed it): use %s" % (
                symbol, advice)
    return ("%s is not in bert_tf2.tf1 (TensorFlow 2 removed it): look for it in "
            "tf.compat.v1 or tf.experimental, or see bert-tf2's README, 'Your fork of the "
            "reference'" % symbol)


def missing_names(message):
    """A module-level __getattr__ for a compat module: a RemovedSymbolError of
    `message % name` for any public name the module lacks."""
    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise RemovedSymbolError(message % name)
    return __getattr__


def import_piece(module_name, symbol):
    """The module `module_name`, imported now; RemovedSymbolError when this copy lacks it."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name != module_name:  # a module it imports is missing: its own error
            raise
        raise RemovedSymbolError(explain(symbol)) from None


class Namespace:
    """One of tf.contrib's namespaces: its members, a module that answers for the rest
    (`fallback`, optional), and a RemovedSymbolError for what neither has."""

    def __init__(self, path, members, fallback=None):
        self._path = path
        self._members = dict(members)
        self._fallback = fallback

    def __getattr__(self, name):
        if name.startswith("_"):  # no member is private; copy/pickle probe before __init__
            raise AttributeError(name)
        if name in self._members:
            value = self._members[name]
            if callable(value) and getattr(value, "lazy_member", False):
                value = self._members[name] = value()
            return value
        fallback = self._fallback() if callable(self._fallback) else self._fallback
        if fallback is not None and hasattr(fallback, name):
            return getattr(fallback, name)
        raise RemovedSymbolError(explain("%s.%s" % (self._path, name)))

    def __dir__(self):
        return sorted(self._members)

    def __repr__(self):
        return "<bert_tf2.tf1 namespace %s>" % self._path


def lazy(load):
    """Marks `load` (no arguments) as a member to be loaded on first access."""
    load.lazy_member = True
    return load


def _rnn_cells():
    return importlib.import_module(LEGACY_RNN_CELLS)


data = Namespace("tf.contrib.data", {
    "map_and_batch": contrib_ops.map_and_batch,
    "parallel_interleave": contrib_ops.parallel_interleave,
    "TFRecordDataset": tf.data.TFRecordDataset,
    "TextLineDataset": tf.data.TextLineDataset,
    "AUTOTUNE": tf.data.AUTOTUNE,
}, fallback=tf.data.experimental)

layers = Namespace("tf.contrib.layers", {
    "layer_norm": contrib_ops.layer_norm,
    "fully_connected": contrib_ops.fully_connected,
    "xavier_initializer": contrib_ops.xavier_initializer,
    "xavier_initializer_conv2d": contrib_ops.xavier_initializer,
    "variance_scaling_initializer": contrib_ops.variance_scaling_initializer,
    "l1_regularizer": contrib_ops.l1_regularizer,
    "l2_regularizer": contrib_ops.l2_regularizer,
})

# tf_keras's TF1 cells (imported on first use: tf_keras's TF1 API is a second copy of its
# modules), and tf.nn's static RNN functions, which contrib.rnn also held.
_RNN_CELL_NAMES = ("RNNCell", "LSTMCell", "GRUCell", "BasicLSTMCell", "BasicRNNCell",
                   "MultiRNNCell", "DropoutWrapper", "ResidualWrapper", "DeviceWrapper",
                   "LSTMStateTuple")
rnn = Namespace("tf.contrib.rnn", dict(
    {name: lazy(lambda name=name: getattr(_rnn_cells(), name)) for name in _RNN_CELL_NAMES},
    static_rnn=tf.compat.v1.nn.static_rnn,
    static_bidirectional_rnn=tf.compat.v1.nn.static_bidirectional_rnn,
    static_state_saving_rnn=tf.compat.v1.nn.static_state_saving_rnn))

metrics = Namespace("tf.contrib.metrics", {"f1_score": contrib_ops.f1_score})

cluster_resolver = Namespace("tf.contrib.cluster_resolver", {},
                             fallback=tf.distribute.cluster_resolver)

compiler = Namespace("tf.contrib.compiler", {"jit": Namespace("tf.contrib.compiler.jit", {
    "experimental_jit_scope": tf.compat.v1.xla.experimental.jit_scope})})

# tf.contrib.estimator: the early-stopping hooks (bert_tf2.compat.estimator's); the rest
# of it answers with a line naming tf.estimator.
estimator = Namespace("tf.contrib.estimator", {
    name: lazy(lambda name=name: getattr(import_piece(
        "bert_tf2.compat.estimator", "tf.contrib.estimator"), name))
    for name in ("make_early_stopping_hook", "stop_if_higher_hook", "stop_if_lower_hook",
                 "stop_if_no_increase_hook", "stop_if_no_decrease_hook")})

# tf.contrib.crf: bert_tf2.base.crf (imported on first use); a name it lacks (the removed
# CRF RNN cells) answers with what to use instead, not a bare AttributeError.
crf = Namespace("tf.contrib.crf", {},
                fallback=lambda: import_piece("bert_tf2.base.crf", "tf.contrib.crf"))

# Imported on first use: their modules may be absent from a copy of the package.
_LAZY_MODULES = {"tpu": "bert_tf2.compat.tpu"}


def __getattr__(name):
    """tf.contrib.tpu / crf on first use; a RemovedSymbolError for the rest."""
    if name in _LAZY_MODULES:
        return import_piece(_LAZY_MODULES[name], "tf.contrib." + name)
    if name.startswith("__"):
        raise AttributeError(name)
    raise RemovedSymbolError(explain("tf.contrib." + name))
