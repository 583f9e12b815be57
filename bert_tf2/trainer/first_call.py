"""What a run pays once, before its steps, made cheaper without changing a number.

- `compile_dropout_masks(strategy, model, element_spec, trimmed)`: training.Runner's
  dropout mask programs compiled before the first step, for the size classes its steps
  can meet (up to `largest_dropout(model, element_spec)`), not all seven up to 2^22
  (a tiny model's first run in a process: 7 programs -> 1, ~0.5 CPU s less).
- `lean_rewrites(enabled)`: within it, a step function called for the first time is
  optimized by Grappler without the passes that change nothing on a CPU's graph (LEAN).
"""
import contextlib

import tensorflow as tf
import tf_keras

from bert import modeling
from bert_tf2.base import dropout_masks
from bert_tf2.encoder import transformer

try:  # the per-thread options of function calls: where Grappler's passes are chosen
    from tensorflow.core.protobuf import config_pb2
    from tensorflow.core.protobuf import rewriter_config_pb2
    from tensorflow.python.eager import context as _context
except ImportError:  # another TensorFlow: every pass runs
    _context = None

# Grappler's passes a training or prediction step on CPUs does without: each rewrites
# what a CPU graph does not have or does not need (GPU layouts, host pinning, swapping
# to host memory, shape arithmetic and loop bookkeeping the kernels do anyway, device-
# specific implementations), and none changes a kernel's numbers. The passes that do
# (constant folding, arithmetic, remapping, dependency and common-subgraph, pruning,
# the second iteration) all still run. The first call of a tiny classifier's training
# loop: Grappler 1.87 -> 1.59 CPU s; weights, losses and predictions bit for bit the same.
LEAN = {"layout_optimizer": "OFF", "shape_optimization": "OFF", "loop_optimization": "OFF",
        "memory_optimization": "NO_MEM_OPT", "implementation_selector": "OFF",
        "pin_to_host_optimization": "OFF"}


def largest_dropout(model, element_spec, default=dropout_masks.LARGEST_CLASS):
    """The most units one dropout of `model`'s BERT encoders draws in a step on batches of
    `element_spec` (their input_ids' static leading axes: examples, choices), at most
    `default`: each layer's attention probabilities [rows, heads, S, S] and hidden states
    [rows, S, hidden], S at most max_position_embeddings. `default` when a model has no
    BertModel or the batch's rows are not static; a step meeting a bigger size (a head's
    own dropout) compiles its program then, with the same mask."""
    features = element_spec if isinstance(element_spec, dict) else {}
    shape = getattr(features.get("input_ids"), "shape", tf.TensorShape(None))
    encoders = transformer.layers_of(model, modeling.BertModel)
    if shape.rank is None or shape.rank < 2 or not encoders:
        return default
    rows = shape[:-1].num_elements()
    if rows is None:
        return default
    most = 0
    for encoder in encoders:
        config = encoder.config
        length = shape[-1] if shape[-1] is not None else config.max_position_embeddings
        most = max(most, rows * length * max(config.hidden_size,
                                             config.num_attention_heads * length))
    return min(default, most)


def compile_dropout_masks(strategy, model, element_spec, trimmed):
    """Trimmed batches (`trimmed`: and no XLA: the step is one program) on CPUs: the
    dropout mask programs of every size class up to largest_dropout compiled before the
    first step (dropout_masks.compile_size_classes), not in the first steps that meet
    each size. The masks are the same either way."""
    if not trimmed or not any(isinstance(layer, tf_keras.layers.Dropout) and layer.rate > 0
                              for layer in model.submodules):
        return
    if on_cpus(strategy):
        try:
            devices = strategy.extended.worker_devices
        except RuntimeError:  # the default strategy
            devices = ("/cpu:0",)
        largest = largest_dropout(model, element_spec)
        for device in devices:
            dropout_masks.compile_size_classes(device, largest)


def _lean_options(options):
    """FunctionCallOptions like `options`, with the LEAN passes off."""
    config = config_pb2.ConfigProto()
    config.ParseFromString(options.config_proto_serialized)
    rewrites = config.graph_options.rewrite_options
    for name, value in LEAN.items():
        setattr(rewrites, name, getattr(rewriter_config_pb2.RewriterConfig, value))
    return _context.FunctionCallOptions(executor_type=options.executor_type,
                                        config_proto=config)


@contextlib.contextmanager
def lean_rewrites(enabled=True):
    """Within (this thread, `enabled`): tf.functions traced and first called get the LEAN
    Grappler passes off (a concrete function is optimized once, at its first call, with
    the options of that call; so are the functions it calls, with those of its trace).
    For steps on CPUs only: on GPUs the layout, host pinning and memory passes pay."""
    if not enabled or _context is None:
        yield
        return
    ctx = _context.context()
    before = ctx.function_call_options
    ctx.function_call_options = _lean_options(before)
    try:
        yield
    finally:
        ctx.function_call_options = before


def on_cpus(strategy):
    """Whether every device of `strategy` is a CPU (the default strategy: no GPU)."""
    try:
        devices = strategy.extended.worker_devices
    except RuntimeError:  # the default strategy: the process's default device
        return not tf.config.list_logical_devices("GPU")
    return bool(devices) and all(
        tf.DeviceSpec.from_string(d).device_type == "CPU" for d in devices)
