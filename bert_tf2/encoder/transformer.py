"""BERT's transformer stack (`encoder/layer_<i>`) as tf_keras layers, with gradient
checkpointing and the option of running on the real tokens only.

Shapes in docstrings: B = batch size, S = sequence length, H = hidden size,
T = real tokens in the batch.
"""
import tensorflow as tf
import tf_keras

from bert_tf2.base import dropout_masks
from bert_tf2.encoder import attention
from bert_tf2.encoder import layers


class TransformerLayer(tf_keras.layers.Layer):
    """`layer_<i>`: attention, then the feed-forward block (`intermediate`, `output`)."""

    def __init__(self, config, name, **kwargs):
        super().__init__(name=name, **kwargs)
        self.attention = attention.Attention(config)
        self.intermediate = layers.DenseBlock(
            config.intermediate_size, config, "intermediate",
            activation=layers.get_activation(config.hidden_act))
        self.output_block = layers.DenseResidualNorm(config)

    def call(self, x, attention_mask, batch_size, seq_length, training=False, seeds=None,
             tokens=None, groups=None, keys=None):
        """x [B * S, H] -> [B * S, H]. seeds: None (keras dropout) or [3, 2] int32 (the
        seeds of the layer's three dropouts, see `layers.Dropout`). tokens: None, or [T, 1]
        indexes of the positions x holds ([T, H]; see Encoder); groups: None or their
        attention.RowGroups (inference); keys: None or the batch's attention.key_span
        (inference on every position)."""
        attention_output = self.attention(
            x, attention_mask, batch_size, seq_length, training=training,
            seeds=None if seeds is None else seeds[:2], tokens=tokens, groups=groups,
            keys=keys)
        hidden = self.intermediate(attention_output, training=training)
        return self.output_block(hidden, attention_output, training=training,
                                 seed=layers.dropout_seed(seeds, 2))


class Encoder(tf_keras.layers.Layer):
    """`encoder`: the stack of transformer layers; returns every layer's output.

    With `gradient_checkpointing` set (see `set_gradient_checkpointing`), training
    keeps only each layer's input for the backward pass and recomputes the layer's
    activations there (tf.recompute_grad): activation memory of one layer instead
    of all, for about one more forward pass of compute. The dropout masks then come
    from seeds drawn once per step, so the recomputation drops the same units.

    With `tokens` ([T] indexes into the B * S positions, those of input_mask 1; see
    `modeling.set_skip_padding`), every dense layer, LayerNorm and dropout runs on those T
    rows only and the attention alone sees [B, S] (zeros elsewhere, which the
    additive mask already hides: a masked key's weight is exp(-10000) = 0 in float32
    either way). The rows of real tokens are then those of the full computation (up
    to the matmul's summation order); the outputs at the other positions are zeros
    instead of the values the reference computes for padding.
    """

    def __init__(self, config, name="encoder", **kwargs):
        super().__init__(name=name, **kwargs)
        self.transformer_layers = [TransformerLayer(config, "layer_%d" % i)
                                   for i in range(config.num_hidden_layers)]
        self.gradient_checkpointing = False

    def call(self, x, attention_mask, training=False, tokens=None, group_rows=False,
             trim_keys=False):
        """x [B, S, H] -> list of [B, S, H], one per layer; tokens: None or [T] int64.

        group_rows (with tokens, outside training, attention_mask the keys' mask of
        input_mask, [B, 1, 1, S]): the attention runs in groups of rows of like length,
        each over its rows' own tokens (attention.row_groups).
        trim_keys (without tokens, outside training, attention_mask [B, 1, 1, S], not
        while a portable graph is traced): every position attends over the keys up to
        the batch's last unmasked one only (attention.key_span; a data-dependent shape:
        not under XLA or on TPUs), which gives every position the values of attending
        over all of them, up to the order of the sums."""
        batch_size, seq_length, width = layers.get_shape_list(x)
        groups = keys = None
        count = attention.row_group_count()
        if group_rows and count and tokens is not None and attention.known_false(training):
            groups = attention.row_groups(tokens, batch_size, seq_length, count)
        if (trim_keys and tokens is None and attention.known_false(training)
                and not attention.tracing_portable_graphs()
                and attention_mask is not None and attention_mask.shape.rank == 4
                and attention_mask.shape[2] == 1):
            keys = attention.key_span(attention_mask, seq_length)
        # The layers work on [B * S, H]: every dense layer is then a plain 2-D
        # matmul that TensorFlow fuses with its bias add.
        hidden = tf.reshape(x, [-1, width])
        if tokens is not None:
            # gather_nd / attention.spread_tokens: both gradients are dense tensors.
            tokens = tokens[:, tf.newaxis]
            hidden = tf.gather_nd(hidden, tokens)
        # Variables must exist before a layer runs under tf.recompute_grad.
        recompute = (self.gradient_checkpointing and training
                     and all(layer.built for layer in self.transformer_layers))
        if recompute:
            seeds = dropout_masks.new_seeds([len(self.transformer_layers), 3], minval=0)
        outputs = []
        for i, layer in enumerate(self.transformer_layers):
            if recompute:
                hidden = recomputed(layer, hidden, attention_mask, batch_size, seq_length,
                                     seeds[i], tokens)
            else:
                hidden = layer(hidden, attention_mask, batch_size, seq_length,
                               training=training, tokens=tokens, groups=groups, keys=keys)
            full = hidden if tokens is None else attention.spread_tokens(
                hidden, tokens, batch_size * seq_length)
            outputs.append(tf.reshape(full, [batch_size, seq_length, width]))
        return outputs


def recomputed(layer, hidden, attention_mask, batch_size, seq_length, seeds, tokens=None):
    """layer(hidden) in training mode, its activations recomputed in the backward pass."""
    def forward(x):
        return layer(x, attention_mask, batch_size, seq_length, training=True, seeds=seeds,
                     tokens=tokens)
    return tf.recompute_grad(forward)(hidden)


def layers_of(model, layer_class):
    """`model` and its submodules that are instances of `layer_class`."""
    found = [m for m in model.submodules if isinstance(m, layer_class)]
    return found + [model] if isinstance(model, layer_class) else found


def set_gradient_checkpointing(model, enabled=True):
    """Turns gradient checkpointing on (or off) in every BERT encoder of `model`;
    returns how many encoders it found."""
    encoders = layers_of(model, Encoder)
    for encoder in encoders:
        encoder.gradient_checkpointing = bool(enabled)
    return len(encoders)

