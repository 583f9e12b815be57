"""The pieces of BERT's encoder below attention: activations, initializer, LayerNorm,
dropout, dense blocks and the embeddings, as tf_keras layers with TF1 variable names.

gelu, get_activation, create_initializer, get_shape_list and assert_rank are the
reference's modeling.py functions of those names, written here because these layers
compute with them (DenseBlock knows the reference's "gelu" by identity); modeling.py
re-exports them, so `modeling.gelu is layers.gelu`.

Shapes in docstrings: B = batch size, S = sequence length, H = hidden size,
V = vocabulary size, E = embedding width.
"""

import tensorflow as tf
import tf_keras

from bert_tf2.base import dropout_masks
from bert_tf2.base import fused_elementwise


def gelu(x):
    """GELU in the tanh approximation the reference uses (its "gelu").

    The reference writes x * (0.5 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))));
    tf.nn.gelu(approximate=True) is the same formula with the 0.5 taken first (an
    exact scaling, so the same value) and is the graph TensorFlow's CPU rewrite fuses
    into the matmul before it (one oneDNN kernel for matmul + bias + gelu). Outside a
    training step fused_elementwise.gelu is exactly that op; DenseBlock and the
    masked-LM transform pass it `training` (apply_activation).
    """
    return fused_elementwise.gelu(x)


def gelu_exact(x):
    """GELU with the exact erf form (HuggingFace's "gelu"); config value "gelu_exact".
    DenseBlock and the masked-LM transform pass it `training` (apply_activation), where
    a training step takes fused_elementwise.gelu_exact's hand-written gradient."""
    return fused_elementwise.gelu_exact(x)


_ACTIVATIONS = {
    "linear": None,
    "relu": tf.nn.relu,
    "gelu": gelu,
    "gelu_exact": gelu_exact,
    "tanh": tf.tanh,
}


def get_activation(activation_string):
    """Maps a config's hidden_act string to a function; callables pass through.

    The argument keeps the reference's name, so get_activation(activation_string="gelu")
    works as it did there.
    """
    if activation_string is None or callable(activation_string):
        return activation_string
    if not isinstance(activation_string, str):
        raise ValueError("unsupported activation: %r" % (activation_string,))
    if not activation_string:
        return None
    name = activation_string.lower()
    if name not in _ACTIVATIONS:
        raise ValueError("unsupported activation: %s (known: %s)"
                         % (activation_string, ", ".join(sorted(_ACTIVATIONS))))
    return _ACTIVATIONS[name]


def create_initializer(initializer_range=0.02):
    """The reference's weight initializer: normal truncated at 2 std, std `initializer_range`."""
    return tf_keras.initializers.TruncatedNormal(stddev=initializer_range)


def get_shape_list(tensor, expected_rank=None, name=None):
    """The dimensions of `tensor`: Python ints where static, scalar tensors where not.

    expected_rank (int or list of ints): ValueError naming the tensor otherwise.
    """
    if expected_rank is not None:
        assert_rank(tensor, expected_rank, name)
    static = tensor.shape.as_list()
    if all(dim is not None for dim in static):
        return static
    dynamic = tf.shape(tensor)
    return [dim if dim is not None else dynamic[i] for i, dim in enumerate(static)]


def assert_rank(tensor, expected_rank, name=None):
    """ValueError unless tensor's rank is expected_rank (an int or a list of ints)."""
    expected = [expected_rank] if isinstance(expected_rank, int) else list(expected_rank)
    if tensor.shape.ndims not in expected:
        label = name or getattr(tensor, "name", "tensor")
        raise ValueError("tensor %s has rank %s, expected %s (shape %s)"
                         % (label, tensor.shape.ndims, expected, tensor.shape))


def dense_layer(units, config, name, activation=None):
    """A tf_keras Dense layer `name` with the config's truncated-normal kernel initializer."""
    return tf_keras.layers.Dense(units, activation=activation, name=name,
                                 kernel_initializer=create_initializer(config.initializer_range))


def dense_and_activation(units, config, name, activation):
    """(Dense layer `name`, activation to give apply_activation): the GELUs ("gelu",
    "gelu_exact") are left out of the layer and applied by apply_activation, which knows
    whether a training step runs (fused_elementwise); any other activation stays in the
    layer."""
    if activation is gelu or activation is gelu_exact:
        return dense_layer(units, config, name), activation
    return dense_layer(units, config, name, activation=activation), None


def apply_activation(activation, x, training):
    """x after `activation` from dense_and_activation (None: x itself)."""
    if activation is gelu:
        return fused_elementwise.gelu(x, training)
    if activation is gelu_exact:
        return fused_elementwise.gelu_exact(x, training)
    return x


def layer_norm_epsilon(config):
    """The config's LayerNorm epsilon: layer_norm_eps when set (HF configs), else 1e-12."""
    return getattr(config, "layer_norm_eps", 1e-12)


def lookup(table, ids, one_hot=False):
    """Rows of `table` [V, E] for `ids` [...] -> [..., E]: a gather, or a one-hot
    matmul (the reference's TPU choice, also its token-type lookup)."""
    if one_hot:
        return tf.matmul(tf.one_hot(ids, table.shape[0], dtype=table.dtype.base_dtype), table)
    return tf.gather(table, ids)


class LayerNorm(tf_keras.layers.Layer):
    """Layer normalisation over the last axis with `gamma`/`beta` as in TF1 BERT.

    Always computes in float32 (also under a mixed-precision policy) and returns
    the input's dtype.
    """

    def __init__(self, epsilon=1e-12, name="LayerNorm", **kwargs):
        kwargs.setdefault("dtype", "float32")
        kwargs.setdefault("autocast", False)
        super().__init__(name=name, **kwargs)
        self.epsilon = epsilon

    def build(self, input_shape):
        """Creates the layer's variables (names as in the reference)."""
        width = input_shape[-1]
        self.gamma = self.add_weight("gamma", shape=[width], initializer="ones")
        self.beta = self.add_weight("beta", shape=[width], initializer="zeros")
        super().build(input_shape)

    def call(self, x, training=None):
        """Applies the layer (shapes in the class docstring); in training, large
        static shapes take fused_elementwise's XLA forward and backward passes."""
        return fused_elementwise.layer_norm(x, tf.convert_to_tensor(self.gamma),
                                            tf.convert_to_tensor(self.beta), self.epsilon,
                                            training)


class Dropout(tf_keras.layers.Dropout):
    """Keras dropout whose masks come from bert_tf2.base.dropout_masks.

    call(x, training, seed=None): while training, units dropped with probability
    `rate` and the rest scaled by 1 / (1 - rate), as tf.nn.dropout does, from
    XLA's ThreeFry stream (a fraction of the CPU cost of TF's uniform kernel).
    Without a seed every call draws a fresh mask; with a seed [2] int32 tensor the
    mask is a function of it, so a recomputed layer (gradient checkpointing) drops
    the same units in its backward pass as in its forward pass.
    """

    def call(self, inputs, training=None, seed=None):  # pylint: disable=arguments-differ
        """Applies the layer (shapes in the class docstring)."""
        if training is None:
            training = tf_keras.backend.learning_phase()
        if self.rate == 0:
            return tf.identity(inputs)
        if tf.is_tensor(training):
            return tf.cond(tf.cast(training, tf.bool),
                           lambda: dropout_masks.dropout(inputs, self.rate, seed),
                           lambda: tf.identity(inputs))
        if not training:
            return tf.identity(inputs)
        return dropout_masks.dropout(inputs, self.rate, seed)


def dropout_seed(seeds, index):
    """seeds[index], the seed of one Dropout call; None without seeds (a fresh mask)."""
    return None if seeds is None else seeds[index]


class DenseBlock(tf_keras.layers.Layer):
    """A scope holding one `dense` layer (`intermediate`, `pooler`)."""

    def __init__(self, units, config, name, activation=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.dense, self.activation = dense_and_activation(units, config, "dense", activation)

    def call(self, x, training=None):
        """Applies the layer (shapes in the class docstring)."""
        return apply_activation(self.activation, self.dense(x), training)


class DenseResidualNorm(tf_keras.layers.Layer):
    """`output` scope: dense, dropout, add the residual, LayerNorm."""

    def __init__(self, config, name="output", **kwargs):
        super().__init__(name=name, **kwargs)
        self.dense = dense_layer(config.hidden_size, config, "dense")
        self.dropout = Dropout(config.hidden_dropout_prob)
        self.layer_norm = LayerNorm(layer_norm_epsilon(config))

    def call(self, x, residual, training=False, seed=None):
        """Applies the layer (shapes in the class docstring)."""
        dropped = self.dropout(self.dense(x), training=training, seed=seed)
        return self.layer_norm(dropped + residual, training=training)


class Embeddings(tf_keras.layers.Layer):
    """Word + token-type + position embeddings, then LayerNorm and dropout."""

    def __init__(self, config, use_one_hot_embeddings=False, name="embeddings", **kwargs):
        if tf_keras.mixed_precision.global_policy().name == "_infer":
            # TF1 graph mode infers a layer's dtype from its first input: int ids here.
            kwargs.setdefault("dtype", "float32")
        super().__init__(name=name, **kwargs)
        self.config = config
        self.use_one_hot_embeddings = use_one_hot_embeddings
        self.layer_norm = LayerNorm(layer_norm_epsilon(config))
        self.dropout = Dropout(config.hidden_dropout_prob)

    def build(self, input_shape):
        """Creates the layer's variables (names as in the reference)."""
        c = self.config
        # A fresh initializer per table: one unseeded instance reused would give
        # every table the same random values.
        self.word_embeddings = self.add_weight(
            "word_embeddings", shape=[c.vocab_size, c.hidden_size],
            initializer=create_initializer(c.initializer_range))
        self.token_type_embeddings = self.add_weight(
            "token_type_embeddings", shape=[c.type_vocab_size, c.hidden_size],
            initializer=create_initializer(c.initializer_range))
        self.position_embeddings = self.add_weight(
            "position_embeddings", shape=[c.max_position_embeddings, c.hidden_size],
            initializer=create_initializer(c.initializer_range))
        super().build(input_shape)

    def call(self, input_ids, token_type_ids, training=False, position_ids=None):
        """Applies the layer; position_ids [B, S] (packed rows) replace 0..S-1."""
        seq_length = tf.shape(input_ids)[1]
        words = lookup(self.word_embeddings, input_ids, self.use_one_hot_embeddings)
        types = lookup(self.token_type_embeddings, token_type_ids, True)
        if position_ids is None:
            positions = self.position_embeddings[tf.newaxis, :seq_length, :]
        else:
            positions = tf.gather(self.position_embeddings, position_ids)
        x = tf.cast(words + types + positions, self.compute_dtype)
        return self.dropout(self.layer_norm(x, training=training), training=training)

