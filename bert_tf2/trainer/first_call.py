"""What a run pays once, before its steps, made cheaper without changing a number.

- `compile_dropout_masks(strategy, model, element_spec, trimmed)`: training.Runner's
  dropout mask programs compiled before the first step, for the size classes its steps
  can meet (up to `largest_dropout(model, element_spec)`), not all seven up to 2^22
  (a tiny model's first run in a process: 7 programs -> 1, ~0.5 CPU s less).
"""
import tensorflow as tf
import tf_keras

from bert import modeling
from bert_tf2.base import dropout_masks
from bert_tf2.encoder import transformer


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


def on_cpus(strategy):
    """Whether every device of `strategy` is a CPU (the default strategy: no GPU)."""
    try:
        devices = strategy.extended.worker_devices
    except RuntimeError:  # the default strategy: the process's default device
        return not tf.config.list_logical_devices("GPU")
    return bool(devices) and all(
        tf.DeviceSpec.from_string(d).device_type == "CPU" for d in devices)
