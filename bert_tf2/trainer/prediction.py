"""The prediction loop of training.Runner, and the tf.function wrappers both its loops use.

`PredictionLoop.predict` runs a model over a finite dataset under the Runner's strategy
and yields its outputs per global batch in input order (length-sorted batches regrouped,
replicas joined: predict_outputs.py), counted on the progress display, stopped by a
SIGTERM that came during training. `trim_padding` / `skip_padding` say how the Runner's
input pipelines and encoder treat padding. training.Runner inherits it; what the loop reads
of the Runner: strategy, model, config, is_chief, global_step, _distribute, _termination.
"""
import collections
import functools
import itertools
import os
import tempfile
import threading

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf2 import heads
from bert_tf2 import input_pipeline
from bert_tf2.trainer import first_call
from bert_tf2.trainer import memory_batches
from bert_tf2.trainer import predict_outputs
from bert_tf2.trainer import progress


def run_function(python_function, **options):
    """tf.function(python_function, **options) for a function made anew by every run.

    TensorFlow counts the traces of a tf.function by its Python code, so the same
    inner function made by run after run in one process (a notebook, a search over
    hyper-parameters) reads as one function retraced in a loop: "5 out of the last 5
    calls ... triggered tf.function retracing" from the fifth run. Wrapped in a
    functools.partial, each run's function is counted on its own (the warning still
    says when one run's function traces again and again); the graph is the same.
    """
    return tf.function(functools.partial(python_function), **options)


def step_function(python_function, autograph):
    """`python_function` as the training or prediction loop calls it: unchanged when
    `autograph` (AutoGraph then rewrites it and what it calls, as tf.function does),
    else marked so that AutoGraph leaves it and everything it calls as written.

    AutoGraph reads the source of every Python function a step reaches (the model's
    layers, the losses, the optimizer: some ninety functions for run_pretraining) to
    turn `if` and `for` over tensors into graph control flow. The models of the
    faces use tf.cond / tf.while_loop where they need them, so their graph is the
    same either way; a Python caller's own model or loss may rely on the rewrite,
    hence RunConfig.autograph defaults to True.
    """
    if autograph:
        return python_function
    return tf.autograph.experimental.do_not_convert(python_function)


class PredictionLoop:
    """Runner's prediction half (see the module's docstring)."""

    @property
    def trim_padding(self):
        """Whether input pipelines should trim padding: config.trim_padding, never on TPUs.

        A TPU compiles one program per input shape and wants static shapes, so under
        a TPUStrategy every batch keeps the full --max_seq_length.
        """
        tpu = (tf.distribute.TPUStrategy, tf.distribute.experimental.TPUStrategy)
        return bool(self.config.trim_padding) and not isinstance(self.strategy, tpu)

    @property
    def skip_padding(self):
        """Whether the encoder runs on the real tokens only (modeling.set_skip_padding).

        With trimmed batches, for models that never read the outputs at padding
        positions (heads.reads_padding is False: classifier, tagger, multiple
        choice), and without XLA (the number of real tokens is a data-dependent
        shape). The real tokens' outputs stay the padded computation's.
        """
        return (self.trim_padding and not self.config.enable_xla
                and not heads.reads_padding(self.model))

    @property
    def trims_keys(self):
        """Whether the encoder's attention at inference stops at each batch's last real
        key (modeling.set_key_trimming): without XLA and off TPUs (a data-dependent
        shape). Every position's outputs stay those of attending over every key."""
        tpu = (tf.distribute.TPUStrategy, tf.distribute.experimental.TPUStrategy)
        return not self.config.enable_xla and not isinstance(self.strategy, tpu)

    def predict(self, dataset_fn, predict_fn, max_steps=None, sequence_outputs=None,
                stage="predict", total_steps=None):
        """Yields dicts of numpy arrays, one per global batch, in input order.

        Batches of make_dataset(buckets=True) (examples sorted by length, numbered by
        input_pipeline.EXAMPLE_INDEX) run as they come, and their outputs are
        regrouped into the batches the same data read in order gives: the same
        sizes, the same examples in the same rows, the padding rows at the end
        (every output zero there, so is_real_example = 0). This needs per-example
        outputs: row i of each output computed from example i alone. Outputs wait
        only until their batch is complete (at most about one window of them).

        A dataset_fn of input_pipeline.dataset_fn_for whose records are kept in memory
        (the Predictors') or whose files are small (memory_batches.file_columns) runs
        as numpy batches of the same examples, rows and sizes, without building its
        tf.data pipeline (predicts_in_memory: one replica, no TPU).

        Args:
          dataset_fn: input_context -> finite tf.data.Dataset of per-replica
            batches (use make_dataset(pad_final_batch=True) to keep every example).
          predict_fn: (model, features) -> dict of [B, ...] tensors.
          max_steps: stop after this many batches.
          sequence_outputs: {output name: length} of outputs with a sequence axis
            (axis 1, e.g. per-token predictions), padded with zeros to `length`
            (max_seq_length), so that trimmed batches give untrimmed shapes.
          stage, total_steps: the progress display's name of the pass ("eval" or
            "predict") and its number of batches (None: not known).
        """
        source = getattr(dataset_fn, "source", None)
        records = (input_pipeline.memory_records(source.files) if source is not None
                   else None)
        found, on_disk = self._in_memory(source, records)
        if found is not None:
            spec = memory_batches.element_spec(found, source, whole_batches=on_disk)
            dataset = memory_batches.batches(found, source, whole_batches=on_disk)
            step = self._predict_step(predict_fn, spec, numpy_batches=True)
        else:
            if records is not None:  # several replicas: tf.distribute's input, from a file
                dataset_fn = self._written(records, source)
            dataset = self._distribute(predict_outputs.whole_input(dataset_fn), autotune=False)
            spec = dataset.element_spec
            step = self._predict_step(predict_fn, spec)
        lean = first_call.on_cpus(self.strategy)

        def outputs(batch):
            with first_call.lean_rewrites(lean):
                return step(batch)
        batches = (predict_outputs.join_replicas(self.strategy, outputs(batch), sequence_outputs)
                   for batch in self._until_sigterm(dataset))
        if isinstance(spec, dict) and input_pipeline.EXAMPLE_INDEX in spec:
            batches = predict_outputs.in_input_order(batches)
        # islice stops before running the batch after the last one asked for.
        yield from self._shown(itertools.islice(batches, max_steps), stage, total_steps)

    def _in_memory(self, source, records):
        """(the columns predict() runs as numpy batches, whether they were read from disk),
        or (None, False) for the tf.data pipeline: records kept in memory, or small files
        (memory_batches.file_columns), where predicts_in_memory."""
        if source is None or not self.predicts_in_memory:
            return None, False
        if records is not None:
            return memory_batches.columns(records, source.spec), False
        found = memory_batches.file_columns(source.files, source.spec)
        return found, found is not None

    @property
    def predicts_in_memory(self):
        """Whether predict() runs records kept in memory (input_pipeline.records_in_memory,
        the Python Predictors') as numpy batches (memory_batches.py): one replica, no TPU.
        Several replicas read them from a file through tf.distribute's input."""
        return self.strategy.num_replicas_in_sync == 1 and not isinstance(
            self.strategy, (tf.distribute.TPUStrategy, tf.distribute.experimental.TPUStrategy))

    def _written(self, records, source):
        """dataset_fn_for over a file of its own holding `records` (a temporary file in
        the run's output folder, removed when the process ends or the folder is)."""
        handle, path = tempfile.mkstemp(prefix="predict_", suffix=".tf_record",
                                        dir=self.config.output_dir)
        os.close(handle)
        with input_pipeline.RecordWriter(path, to_disk=True) as writer:
            for record in records:
                writer.write(record)
        return input_pipeline.dataset_fn_for(
            [path], source.spec, source.batch_size, is_training=False,
            trim_padding=source.trim, bucket_width=source.bucket_width)

    def _shown(self, batches, stage, total_steps):
        """`batches` (dicts of outputs), counted on the progress display of `stage`."""
        display = progress.Stage(stage, total_steps, self.config.progress,
                                 self.config.log_every_seconds, shown=self.is_chief)
        examples = 0
        try:
            for number, batch in enumerate(batches, 1):
                real = batch.get("is_real_example")
                examples += int(np.sum(np.asarray(real) > 0)) if real is not None else len(
                    next(iter(batch.values()), ()))
                display.update(number, examples)
                yield batch
        finally:
            display.close()

    def _until_sigterm(self, batches):
        """`batches`, stopped by a SIGTERM during training (an evaluation's predictions):
        the step's checkpoint is written before an evaluation, so the run exits as a
        SIGTERM between training loops does (143), and a rerun evaluates it again."""
        for batch in batches:
            watch = getattr(self, "_termination", None)
            if watch is not None and watch.requested:
                logging.warning("SIGTERM received: stopping the evaluation at step %d "
                                "(its checkpoint is written; a rerun evaluates it again)",
                                self.global_step)
                raise SystemExit(143)
            yield batch

    def _predict_step(self, predict_fn, element_spec, numpy_batches=False):
        """step(global batch) -> per-replica outputs, traced once whatever the lengths.

        The signature is the dataset's element_spec, in which trimmed sequence axes
        are None: batches of every length share one graph (under XLA, one compiled
        program per distinct shape, a handful with bucket lengths). The last dozen
        steps are kept, so that evaluating again (or predicting with the same
        predict_fn and features) neither traces nor compiles again. numpy_batches:
        the step of memory_batches' dicts of numpy arrays (FlatStep: the traced graph
        called without tf.function's per-call binding of its inputs).
        """
        element_spec = self._any_batch_size(element_spec)
        cache = self.__dict__.setdefault("_predict_steps", collections.OrderedDict())
        lock = self.__dict__.setdefault("_predict_steps_lock", threading.Lock())
        key = (predict_fn, repr(element_spec), numpy_batches)
        try:
            hash(key)
        except TypeError:   # an unhashable callable: a step of its own
            return self._new_predict_step(predict_fn, element_spec, numpy_batches)
        with lock:  # calls from several threads (a Predictor's) share the cache
            if key not in cache:
                cache[key] = self._new_predict_step(predict_fn, element_spec, numpy_batches)
                while len(cache) > 12:  # a Predictor's batch shapes: 1, 2, 4, ... batch size
                    cache.popitem(last=False)
            cache.move_to_end(key)
            return cache[key]

    def _any_batch_size(self, element_spec):
        """`element_spec` with None for the batch axis of every feature where that is safe:
        one replica (a dict of TensorSpecs), no XLA, no TPU (which want static shapes).

        Then an evaluation and the predictions after it (--eval_batch_size and
        --predict_batch_size differ), or a Predictor's batches of 1, 2, 4, ... examples,
        share one traced step instead of one each. The kernels see the same tensors
        either way, so the outputs are the same bits (tests/test_run_fixed_cost.py).
        """
        tpu = (tf.distribute.TPUStrategy, tf.distribute.experimental.TPUStrategy)
        if (self.config.enable_xla or isinstance(self.strategy, tpu)
                or self.strategy.num_replicas_in_sync != 1 or not isinstance(element_spec, dict)
                or not all(isinstance(s, tf.TensorSpec) and s.shape.rank
                           for s in element_spec.values())):
            return element_spec
        return {name: tf.TensorSpec([None] + spec.shape.as_list()[1:], spec.dtype, spec.name)
                for name, spec in element_spec.items()}

    def _new_predict_step(self, predict_fn, element_spec, numpy_batches=False):
        strategy, model = self.strategy, self.model

        def replica_predict(features):
            index = None
            if isinstance(features, dict) and input_pipeline.EXAMPLE_INDEX in features:
                features = dict(features)
                index = features.pop(input_pipeline.EXAMPLE_INDEX)
            out = dict(predict_fn(model, features))
            if index is not None:
                out[input_pipeline.EXAMPLE_INDEX] = tf.identity(index)
            return out

        replica_predict = run_function(replica_predict, jit_compile=self.config.enable_xla or None,
                                       autograph=self.config.autograph)

        def step(features):
            return strategy.run(replica_predict, args=(features,))

        step = step_function(step, self.config.autograph)
        step = run_function(step, input_signature=[element_spec])
        return FlatStep(step, element_spec) if numpy_batches else step


class FlatStep:
    """A prediction step (a tf.function of one dict of tensors, `input_signature`
    [element_spec]) called with memory_batches' dicts of numpy arrays, cheaply.

    Calling a tf.function binds its inputs to the signature anew on every call (about
    a millisecond for six features, the most of a small model's one-text call besides
    its forward pass). Here the step's graph (its concrete function, traced on the first
    call) runs on the batch's arrays as tensors in the signature's order. A batch that
    does not fit the signature (other names, dtypes, rank or fixed sizes) goes through
    the tf.function as before, which checks it; so does everything on a TensorFlow whose
    concrete functions lack the flat call.
    """

    def __init__(self, step, element_spec):
        self.step = step
        self._names = tf.nest.flatten({name: name for name in element_spec})
        self._expected = [(element_spec[n].dtype.as_numpy_dtype, element_spec[n].shape.as_list())
                          for n in self._names]
        self._concrete = None
        self._lock = threading.Lock()

    def __call__(self, batch):
        call = self._flat_call()
        if call is None or not self._fits(batch):
            return self.step(batch)
        concrete = self._concrete
        return call([tf.constant(batch[name]) for name in self._names],
                    concrete.captured_inputs)

    def _fits(self, batch):
        """Whether `batch` is a dict of numpy arrays of the signature's names, dtypes
        and shapes (None: any size)."""
        if not isinstance(batch, dict) or len(batch) != len(self._names):
            return False
        for name, (dtype, shape) in zip(self._names, self._expected):
            value = batch.get(name)
            if (not isinstance(value, np.ndarray) or value.dtype != dtype
                    or value.ndim != len(shape)
                    or any(s is not None and s != v for s, v in zip(shape, value.shape))):
                return False
        return True

    def _flat_call(self):
        """The concrete function's flat call (traced once, shared by threads), or None."""
        if self._concrete is None:
            with self._lock:
                if self._concrete is None:
                    self._concrete = self.step.get_concrete_function()
        return getattr(self._concrete, "_call_flat", None)
