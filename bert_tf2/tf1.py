"""TensorFlow 1 for a fork of the reference: `import bert_tf2.tf1 as tf`, nothing else changed.

Importing it puts the process in TF1 graph mode (tf.compat.v1.disable_v2_behavior, once,
with one warning line saying so), and `tf.X` is then:
  tf.compat.v1.X for every X it has (tf.flags, tf.app, tf.logging, tf.gfile, tf.train,
    tf.metrics, tf.get_variable, tf.data, ...);
  tf.layers (dense, dropout, conv1d, ...) and tf.nn.rnn_cell: tf_keras's TF1 layers and
    cells, with TF1's variable names (`dense/kernel`, `rnn/lstm_cell/kernel`); TF 2.20's
    own route them to Keras 3, which has none, unless TF_USE_LEGACY_KERAS is set;
  tf.keras: tf_keras's TF1 API (what tf.compat.v1.keras is under TF_USE_LEGACY_KERAS);
  tf.contrib: bert_tf2.compat.contrib (data, layers, rnn, metrics, tpu, crf, ...);
  tf.estimator: bert_tf2.compat.estimator, imported on first use.
A name TF 2 removed and bert-tf2 does not give raises an AttributeError whose one line names
what to use instead. Graph mode is process-wide: import this only in a fork's own process,
never beside TF2 code (bert-tf2's runners) in one.
Every name below starts with "_" (or is one of the overrides): a module-level name here is
an attribute of `tf` in the fork.

Contracts with the other modules (bert_tf2/tf1.py and bert_tf2/compat/ (`import bert_tf2.tf1
as tf` for forks)):
tf1.py is the module a fork imports as `tf`: importing it runs `disable_v2_behavior()` once
(skipped when the process already runs TF1; one warning line when it did), and its module
`__getattr__` answers `tf.X` from `_OVERRIDES` (layers, keras, nn with rnn_cell: tf_keras's
TF1 API at `contrib.KERAS_V1`; estimator: bert_tf2.compat.estimator on first use) or
tf.compat.v1, keeping each answer in the module's globals. Every other top-level name of
tf1.py starts with "_": a module-level name there is an attribute of the fork's `tf`.
`tf.contrib` is compat/contrib.py: `Namespace` objects (data, layers, rnn, metrics,
cluster_resolver, compiler) whose members are contrib_ops' functions or TensorFlow's own, a
`fallback` module for names that moved there (contrib.data -> tf.data.experimental), and a
module `__getattr__` for tpu / crf (bert_tf2.compat.tpu, bert_tf2.base.crf, imported on
first use through `import_piece`). contrib_ops keeps TF 1.15's signatures, variable names
and arithmetic (layer_norm's default begin_norm_axis=1, epsilon 1e-12). Tests: graph mode is
process-wide, so bert_tf2.tf1 is imported only in subprocesses
(tests/tf1_namespace_graph.py, tests/reference_fork_graph.py) and test_layout's in-process
import skips it; contrib_ops runs in-process inside `tf.Graph().as_default()`. `python -m
bert_tf2.compat.move_fork DIR [--dry_run]` rewrites `import tensorflow as tf` and `from
tensorflow.contrib import ...` statements (found by tokenize: never inside a string; bytes,
line endings and modes kept), names every other TensorFlow import (compat.v1,
tensorflow.python.* with the public name) and every removed contrib module or
`tf.contrib.x.y` use, skips with a line venvs (pyvenv.cfg), site-/dist-packages, vendored
tensorflow/bert_tf2, build/, dist/, symlinks, hard links, non-regular files (never opened)
and read-only files; writes every new file to a `fileutil.temp_name` first and `os.replace`s
them only when all were written (any write failing: temporaries removed, nothing changed),
`changed` said after. tf1's `app.run` keeps the "tensorflow" logger from passing records to
absl's root handler (one line per tf.logging call). `startup.keeps_process_settings` refuses
a runner in a graph-mode process in one line before it makes anything.
"""
import importlib as _importlib
import logging as _logging
import warnings as _warnings

# The quiet start of our own scripts (no C++ INFO lines, no no-GPU cuInit error line), set
# before TensorFlow is imported.
from bert_tf2 import startup as _startup

_startup.quiet()

import tensorflow as _tensorflow  # pylint: disable=wrong-import-position

from bert_tf2.compat import contrib

__version__ = _tensorflow.__version__
_V1 = _tensorflow.compat.v1
_ESTIMATOR = "bert_tf2.compat.estimator"
_FORK_CHECKPOINTS = "bert_tf2.compat.fork_checkpoints"

# tf_keras's TF1 layers and cells warn once per calling line that they are deprecated; a
# fork calls them from many lines, and the warning line below already says what runs.
_warnings.filterwarnings("ignore", message=r"`tf\.(layers|nn\.rnn_cell)\.",
                         category=UserWarning)


def _enter_tf1_behaviour():
    """disable_v2_behavior(), unless the process already runs TF1; one line when it did."""
    if not (_V1.executing_eagerly_outside_functions() or _V1.resource_variables_enabled()):
        return
    logger = _logging.getLogger("tensorflow")
    level = logger.level
    # TensorFlow's own deprecation notice for it ("non-resource variables are not
    # supported in the long term") is three lines about what this module chose.
    logger.setLevel(_logging.ERROR)
    try:
        _V1.disable_v2_behavior()
    finally:
        logger.setLevel(level)
    logger.warning("bert_tf2.tf1: this process now runs TensorFlow 1 graph mode "
                   "(tf.compat.v1.disable_v2_behavior), with tf.estimator, tf.contrib and "
                   "tf.layers from bert-tf2")


_enter_tf1_behaviour()


class _Overlay:
    """A module of tf.compat.v1 with some of its attributes replaced (tf.nn's rnn_cell)."""

    def __init__(self, base, overrides):
        self._base = base
        self._overrides = overrides

    def __getattr__(self, name):
        if name in self._overrides:
            return self._overrides[name]()
        return getattr(self._base, name)

    def __dir__(self):
        return sorted(set(dir(self._base)) | set(self._overrides))

    def __repr__(self):
        return "<bert_tf2.tf1 %r with %s>" % (self._base, ", ".join(sorted(self._overrides)))


def _app_run(main=None, argv=None):
    """tf.app.run: absl's app.run, each tf.logging line printed once. absl gives the root
    logger its handler, and the "tensorflow" logger, which has its own since TensorFlow
    was imported, passed every record on to it too: two lines."""
    import sys
    main = main or sys.modules["__main__"].main

    def main_logging_once(args):
        logger = _logging.getLogger("tensorflow")
        if logger.handlers and _logging.getLogger().handlers:
            logger.propagate = False
        return main(args)
    return _V1.app.run(main_logging_once, argv)


def _module(name):
    return lambda: _importlib.import_module(name)


# The attributes of `tf` that are not tf.compat.v1's own (contrib is imported above).
_OVERRIDES = {
    "layers": _module(contrib.LEGACY_LAYERS),
    "keras": _module(contrib.KERAS_V1),
    # tf.nn.rnn_cell: tf_keras's TF1 cells; a cell it lacks names what to use instead.
    "nn": lambda: _Overlay(_V1.nn, {"rnn_cell": lambda: contrib.Namespace(
        "tf.nn.rnn_cell", {}, fallback=_module(contrib.LEGACY_RNN_CELLS))}),
    "app": lambda: _Overlay(_V1.app, {"run": lambda: _app_run}),
    "estimator": lambda: contrib.import_piece(_ESTIMATOR, "tf.estimator"),
    # list_variables / load_variable / init_from_checkpoint by TF1 name on our TF2
    # checkpoints too (bert_tf2.compat.fork_checkpoints).
    "train": lambda: _Overlay(_V1.train, {
        name: (lambda function=function: function)
        for name, function in _importlib.import_module(_FORK_CHECKPOINTS).OVERRIDES.items()}),
}


def __getattr__(name):
    """tf.X: an override, else tf.compat.v1.X; kept for the next access."""
    if name in _OVERRIDES:
        value = _OVERRIDES[name]()
    elif name.startswith("__"):
        raise AttributeError("module 'bert_tf2.tf1' has no attribute %r" % name)
    else:
        try:
            value = getattr(_V1, name)
        except AttributeError:
            raise contrib.RemovedSymbolError(contrib.explain("tf." + name)) from None
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(dir(_V1)) | set(_OVERRIDES) | {"contrib", "__version__"})
