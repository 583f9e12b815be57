"""The BERT encoder and its task heads in TF2 (tf_keras), with TF1-compatible names.

The arithmetic is that of Google's original BERT: truncated-normal initialisers,
word + token-type + position embeddings, LayerNorm with epsilon 1e-12, an additive
attention mask of -10000, the tanh approximation of GELU, and a tanh pooler over
the first token. Every variable's name, with the top-level model's name removed,
is the TF1 variable name (e.g. `bert/encoder/layer_0/attention/self/query/kernel`),
which is what lets checkpoints.py load Google's checkpoints without a rename table.

Shapes in docstrings: B = batch size, S = sequence length, H = hidden size,
N = attention heads, P = masked positions per sequence, V = vocabulary size.
"""
import copy
import json
import math

import numpy as np
from absl import logging
import tensorflow as tf
import tf_keras


# ---------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------

class BertConfig:
    """Hyper-parameters of a BERT model, as stored in bert_config.json."""

    def __init__(self,
                 vocab_size,
                 hidden_size=768,
                 num_hidden_layers=12,
                 num_attention_heads=12,
                 intermediate_size=3072,
                 hidden_act="gelu",
                 hidden_dropout_prob=0.1,
                 attention_probs_dropout_prob=0.1,
                 max_position_embeddings=512,
                 type_vocab_size=16,
                 initializer_range=0.02):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.hidden_act = hidden_act
        self.intermediate_size = intermediate_size
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range

    @classmethod
    def from_dict(cls, json_object):
        """Defaults overwritten by every key of `json_object`; unknown keys are kept."""
        config = cls(vocab_size=None)
        for key, value in json_object.items():
            config.__dict__[key] = value
        return config

    @classmethod
    def from_json_file(cls, json_file):
        """Reads bert_config.json (clear errors for a missing or malformed file)."""
        try:
            with tf.io.gfile.GFile(json_file, "r") as reader:
                text = reader.read()
        except (tf.errors.NotFoundError, OSError) as e:
            raise ValueError("cannot read BERT config file %s: %s" % (json_file, e)) from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError("BERT config file %s is not valid JSON: %s" % (json_file, e)) from None
        if not isinstance(data, dict):
            raise ValueError("BERT config file %s must hold a JSON object" % json_file)
        config = cls.from_dict(data)
        # The reference fills missing keys with its defaults; say so, and say it
        # again in any error a defaulted value causes (see validate).
        defaulted = sorted(key for key in cls(vocab_size=None).__dict__ if key not in data)
        setattr(config, "_source", json_file)
        setattr(config, "_defaulted", defaulted)
        if defaulted:
            logging.warning("BERT config file %s does not set %s: using the defaults %s",
                            json_file, ", ".join(defaulted),
                            ", ".join("%s=%r" % (k, getattr(config, k)) for k in defaulted))
        return config

    def to_dict(self):
        """The hyper-parameters as a dict (what bert_config.json holds)."""
        return {key: copy.deepcopy(value) for key, value in self.__dict__.items()
                if not key.startswith("_")}

    def _describe(self, key):
        """`key (value)`, noting when the value is a default the config file did not set."""
        text = "%s (%r)" % (key, getattr(self, key, None))
        if key in getattr(self, "_defaulted", ()):
            text += " [not in %s: the default]" % self._source
        return text

    def to_json_string(self):
        """The hyper-parameters as sorted, indented JSON."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def validate(self):
        """Raises ValueError for settings no model can be built from."""
        for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                    "intermediate_size", "max_position_embeddings", "type_vocab_size"):
            value = getattr(self, key, None)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError("BERT config: %s must be a positive integer"
                                 % self._describe(key))
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                "BERT config: %s is not a multiple of %s"
                % (self._describe("hidden_size"), self._describe("num_attention_heads")))
        get_activation(self.hidden_act)


# ---------------------------------------------------------------------------
# Small pieces
# ---------------------------------------------------------------------------

def gelu(x):
    """GELU in the tanh approximation the reference uses (its "gelu")."""
    cdf = 0.5 * (1.0 + tf.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * tf.pow(x, 3))))
    return x * cdf


def gelu_exact(x):
    """GELU with the exact erf form (HuggingFace's "gelu"); config value "gelu_exact"."""
    return 0.5 * x * (1.0 + tf.math.erf(x / tf.cast(math.sqrt(2.0), x.dtype)))


_ACTIVATIONS = {
    "linear": None,
    "relu": tf.nn.relu,
    "gelu": gelu,
    "gelu_exact": gelu_exact,
    "tanh": tf.tanh,
}


def get_activation(activation):
    """Maps a config's hidden_act string to a function; callables pass through."""
    if activation is None or callable(activation):
        return activation
    if not isinstance(activation, str):
        raise ValueError("unsupported activation: %r" % (activation,))
    if not activation:
        return None
    name = activation.lower()
    if name not in _ACTIVATIONS:
        raise ValueError("unsupported activation: %s (known: %s)"
                         % (activation, ", ".join(sorted(_ACTIVATIONS))))
    return _ACTIVATIONS[name]


def create_initializer(initializer_range=0.02):
    """The reference's weight initializer: normal truncated at 2 std, std `initializer_range`."""
    return tf_keras.initializers.TruncatedNormal(stddev=initializer_range)


def create_attention_mask(input_mask, dtype=tf.float32, instance_ids=None):
    """[B, S] 0/1 mask of keys -> additive mask [B, 1, 1, S]: 0 keep, -10000 drop.

    The reference builds a [B, S, S] mask in which every query row is the same;
    broadcasting one row gives identical scores for less memory.

    With instance_ids [B, S] (packed rows: k on the tokens of the row's k-th
    instance, 0 on padding) the mask is [B, 1, S, S]: query i may attend to key j
    iff instance_ids[i] == instance_ids[j] > 0 (and input_mask[j] is 1). Padding
    queries attend to nothing: their rows are all -10000, a uniform softmax
    that no loss reads.
    """
    if instance_ids is not None:
        return _packed_attention_mask(input_mask, instance_ids, dtype)
    mask = tf.cast(input_mask, dtype)[:, tf.newaxis, tf.newaxis, :]
    return (1.0 - mask) * -10000.0


def _packed_attention_mask(input_mask, instance_ids, dtype):
    """The [B, 1, S, S] additive mask of packed rows (see create_attention_mask)."""
    instance_ids = tf.cast(instance_ids, tf.int32)
    keys = instance_ids[:, tf.newaxis, :]
    allowed = tf.logical_and(tf.equal(instance_ids[:, :, tf.newaxis], keys),
                             tf.greater(keys, 0))
    allowed = tf.logical_and(allowed, tf.not_equal(input_mask, 0)[:, tf.newaxis, :])
    mask = tf.cast(allowed, dtype)[:, tf.newaxis, :, :]
    return (1.0 - mask) * -10000.0


def gather_indexes(sequence_tensor, positions):
    """Picks [B, P] positions out of a [B, S, H] tensor -> [B * P, H]."""
    shape = tf.shape(sequence_tensor)
    batch_size, seq_length, width = shape[0], shape[1], sequence_tensor.shape[-1]
    offsets = tf.reshape(tf.range(batch_size) * seq_length, [-1, 1])
    flat_positions = tf.reshape(tf.cast(positions, tf.int32) + offsets, [-1])
    flat_sequence = tf.reshape(sequence_tensor, [-1, width])
    return tf.gather(flat_sequence, flat_positions)


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

    def call(self, x):
        """Applies the layer (shapes in the class docstring)."""
        out_dtype = x.dtype
        x = tf.cast(x, tf.float32)
        mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
        scale = tf.math.rsqrt(variance + self.epsilon) * self.gamma
        return tf.cast(x * scale + (self.beta - mean * scale), out_dtype)


def _dense(units, config, name, activation=None):
    return tf_keras.layers.Dense(units, activation=activation, name=name,
                                 kernel_initializer=create_initializer(config.initializer_range))


def _layer_norm_eps(config):
    return getattr(config, "layer_norm_eps", 1e-12)


# ---------------------------------------------------------------------------
# Encoder
# ---------------------------------------------------------------------------

class Embeddings(tf_keras.layers.Layer):
    """Word + token-type + position embeddings, then LayerNorm and dropout."""

    def __init__(self, config, use_one_hot_embeddings=False, name="embeddings", **kwargs):
        super().__init__(name=name, **kwargs)
        self.config = config
        self.use_one_hot_embeddings = use_one_hot_embeddings
        self.layer_norm = LayerNorm(_layer_norm_eps(config))
        self.dropout = tf_keras.layers.Dropout(config.hidden_dropout_prob)

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

    def _lookup(self, table, ids, one_hot):
        if one_hot:
            return tf.matmul(tf.one_hot(ids, table.shape[0], dtype=table.dtype), table)
        return tf.gather(table, ids)

    def call(self, input_ids, token_type_ids, training=False, position_ids=None):
        """Applies the layer; position_ids [B, S] (packed rows) replace 0..S-1."""
        seq_length = tf.shape(input_ids)[1]
        words = self._lookup(self.word_embeddings, input_ids, self.use_one_hot_embeddings)
        types = self._lookup(self.token_type_embeddings, token_type_ids, True)
        if position_ids is None:
            positions = self.position_embeddings[tf.newaxis, :seq_length, :]
        else:
            positions = tf.gather(self.position_embeddings, position_ids)
        x = tf.cast(words + types + positions, self.compute_dtype)
        return self.dropout(self.layer_norm(x), training=training)


class Dropout(tf_keras.layers.Dropout):
    """Keras dropout that can take its mask from a seed.

    call(x, training, seed=None): without a seed, exactly tf_keras' Dropout (its
    random stream, so plain training is unchanged). With a seed [2] int32 tensor
    and training=True, a stateless mask that a second call with the same seed
    reproduces: a recomputed layer (gradient checkpointing) then drops the same
    units in its backward pass as in its forward pass.
    """

    def call(self, inputs, training=None, seed=None):  # pylint: disable=arguments-differ
        """Applies the layer (shapes in the class docstring)."""
        if seed is None or not training or self.rate == 0:
            return super().call(inputs, training=training)
        return tf.nn.experimental.stateless_dropout(inputs, rate=self.rate, seed=seed)


class DenseBlock(tf_keras.layers.Layer):
    """A scope holding one `dense` layer (`intermediate`, `pooler`)."""

    def __init__(self, units, config, name, activation=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.dense = _dense(units, config, "dense", activation=activation)

    def call(self, x):
        """Applies the layer (shapes in the class docstring)."""
        return self.dense(x)


class DenseResidualNorm(tf_keras.layers.Layer):
    """`output` scope: dense, dropout, add the residual, LayerNorm."""

    def __init__(self, config, name="output", **kwargs):
        super().__init__(name=name, **kwargs)
        self.dense = _dense(config.hidden_size, config, "dense")
        self.dropout = Dropout(config.hidden_dropout_prob)
        self.layer_norm = LayerNorm(_layer_norm_eps(config))

    def call(self, x, residual, training=False, seed=None):
        """Applies the layer (shapes in the class docstring)."""
        dropped = self.dropout(self.dense(x), training=training, seed=seed)
        return self.layer_norm(dropped + residual)


def _shape_list(x):
    """The dimensions of `x`: Python ints where static, scalar tensors elsewhere."""
    dynamic = tf.shape(x)
    return [dim if dim is not None else dynamic[i] for i, dim in enumerate(x.shape.as_list())]


class SelfAttention(tf_keras.layers.Layer):
    """`attention/self`: multi-head scaled dot-product attention over the sequence.

    The query, key and value projections keep their own TF1 variables
    (`query/kernel`, `key/bias`, ...) but are applied as one matmul with the
    three kernels side by side: one larger matmul is faster than three, and
    one transpose splits all three into heads.
    """

    def __init__(self, config, name="self", **kwargs):
        super().__init__(name=name, **kwargs)
        h = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_size = h // self.num_heads
        self.query = _dense(h, config, "query")
        self.key = _dense(h, config, "key")
        self.value = _dense(h, config, "value")
        self.dropout = Dropout(config.attention_probs_dropout_prob)

    def build(self, input_shape):
        # call() reads the projections' variables without calling the layers,
        # so they are built here, each under its own name scope.
        """Creates the layer's variables (names as in the reference)."""
        for projection in (self.query, self.key, self.value):
            with tf.name_scope(projection.name):
                projection.build(input_shape)
        super().build(input_shape)

    def call(self, x, attention_mask, batch_size, seq_length, training=False, seed=None):
        """x [B * S, H], attention_mask [B, 1, 1, S] (or [B, 1, S, S] for packed rows)
        additive -> context [B * S, H]."""
        projections = (self.query, self.key, self.value)
        kernel = tf.concat([tf.cast(p.kernel, x.dtype) for p in projections], axis=1)
        bias = tf.concat([tf.cast(p.bias, x.dtype) for p in projections], axis=0)
        qkv = tf.nn.bias_add(tf.matmul(x, kernel), bias)
        qkv = tf.reshape(qkv, [batch_size, seq_length, 3, self.num_heads, self.head_size])
        q, k, v = tf.unstack(tf.transpose(qkv, [2, 0, 3, 1, 4]))  # each [B, N, S, H/N]
        # Scaling q rather than the [B, N, S, S] scores is less work; with the usual
        # head size 64 the scale is 1/8, a power of two, so the scores are the same.
        q = q * tf.cast(1.0 / math.sqrt(self.head_size), q.dtype)
        scores = tf.matmul(q, k, transpose_b=True)
        # The mask and softmax run in float32 whatever the compute dtype: -10000
        # and large scores are not safe in float16.
        scores = tf.cast(scores, tf.float32) + attention_mask
        probs = tf.cast(tf.nn.softmax(scores, axis=-1), x.dtype)
        probs = self.dropout(probs, training=training, seed=seed)
        context = tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3])  # [B, S, N, H/N]
        return tf.reshape(context, [-1, self.num_heads * self.head_size])


class Attention(tf_keras.layers.Layer):
    """`attention`: self-attention, then its output projection + residual + LayerNorm."""

    def __init__(self, config, name="attention", **kwargs):
        super().__init__(name=name, **kwargs)
        self.self_attention = SelfAttention(config)
        self.output_block = DenseResidualNorm(config)

    def call(self, x, attention_mask, batch_size, seq_length, training=False, seeds=None):
        """seeds: None, or [2, 2] int32, the dropout seeds of the probabilities and output."""
        context = self.self_attention(x, attention_mask, batch_size, seq_length,
                                      training=training, seed=_seed(seeds, 0))
        return self.output_block(context, x, training=training, seed=_seed(seeds, 1))


class TransformerLayer(tf_keras.layers.Layer):
    """`layer_<i>`: attention, then the feed-forward block (`intermediate`, `output`)."""

    def __init__(self, config, name, **kwargs):
        super().__init__(name=name, **kwargs)
        self.attention = Attention(config)
        self.intermediate = DenseBlock(config.intermediate_size, config, "intermediate",
                                       activation=get_activation(config.hidden_act))
        self.output_block = DenseResidualNorm(config)

    def call(self, x, attention_mask, batch_size, seq_length, training=False, seeds=None):
        """x [B * S, H] -> [B * S, H]. seeds: None (keras dropout) or [3, 2] int32 (the
        seeds of the layer's three dropouts, see `Dropout`)."""
        attention_output = self.attention(
            x, attention_mask, batch_size, seq_length, training=training,
            seeds=None if seeds is None else seeds[:2])
        hidden = self.intermediate(attention_output)
        return self.output_block(hidden, attention_output, training=training,
                                 seed=_seed(seeds, 2))


def _seed(seeds, index):
    return None if seeds is None else seeds[index]


class Encoder(tf_keras.layers.Layer):
    """`encoder`: the stack of transformer layers; returns every layer's output.

    With `gradient_checkpointing` set (see `set_gradient_checkpointing`), training
    keeps only each layer's input for the backward pass and recomputes the layer's
    activations there (tf.recompute_grad): activation memory of one layer instead
    of all, for about one more forward pass of compute. The dropout masks then come
    from seeds drawn once per step, so the recomputation drops the same units.
    """

    def __init__(self, config, name="encoder", **kwargs):
        super().__init__(name=name, **kwargs)
        self.transformer_layers = [TransformerLayer(config, "layer_%d" % i)
                                   for i in range(config.num_hidden_layers)]
        self.gradient_checkpointing = False

    def call(self, x, attention_mask, training=False):
        """x [B, S, H] -> list of [B, S, H], one per layer."""
        batch_size, seq_length, width = _shape_list(x)
        # The layers work on [B * S, H]: every dense layer is then a plain 2-D
        # matmul that TensorFlow fuses with its bias add.
        hidden = tf.reshape(x, [-1, width])
        # Variables must exist before a layer runs under tf.recompute_grad.
        recompute = (self.gradient_checkpointing and training
                     and all(layer.built for layer in self.transformer_layers))
        if recompute:
            seeds = tf.random.uniform([len(self.transformer_layers), 3, 2],
                                      maxval=tf.int32.max, dtype=tf.int32)
        outputs = []
        for i, layer in enumerate(self.transformer_layers):
            if recompute:
                hidden = _recomputed(layer, hidden, attention_mask, batch_size, seq_length,
                                     seeds[i])
            else:
                hidden = layer(hidden, attention_mask, batch_size, seq_length,
                               training=training)
            outputs.append(tf.reshape(hidden, [batch_size, seq_length, width]))
        return outputs


def _recomputed(layer, hidden, attention_mask, batch_size, seq_length, seeds):
    """layer(hidden) in training mode, its activations recomputed in the backward pass."""
    def forward(x):
        return layer(x, attention_mask, batch_size, seq_length, training=True, seeds=seeds)
    return tf.recompute_grad(forward)(hidden)


def set_gradient_checkpointing(model, enabled=True):
    """Turns gradient checkpointing on (or off) in every BERT encoder of `model`;
    returns how many encoders it found."""
    encoders = [m for m in model.submodules if isinstance(m, Encoder)]
    if isinstance(model, Encoder):
        encoders.append(model)
    for encoder in encoders:
        encoder.gradient_checkpointing = bool(enabled)
    return len(encoders)


class BertModel(tf_keras.layers.Layer):
    """The BERT encoder: embeddings, transformer layers and pooler.

    call(input_ids [B, S], input_mask [B, S] = all ones, token_type_ids [B, S] =
    all zeros, training=False, position_ids [B, S] = None, instance_ids [B, S] = None)
    returns a dict:
      pooled_output [B, H]: tanh(dense(first token of the last layer));
      sequence_output [B, S, H]: the last layer;
      all_encoder_layers: list of the num_hidden_layers outputs, each [B, S, H];
      embedding_output [B, S, H]: the input to the first layer.
    Dropout is active only with training=True (the reference's is_training).
    Packed rows (several instances per row) pass position_ids (each instance's
    positions from 0) and instance_ids (1..k per instance, 0 on padding: attention
    stays within each instance, see create_attention_mask); without them the
    outputs are the reference's.
    """

    def __init__(self, config, use_one_hot_embeddings=False, name="bert", **kwargs):
        super().__init__(name=name, **kwargs)
        config = copy.deepcopy(config)
        config.validate()
        self.config = config
        self.embeddings = Embeddings(config, use_one_hot_embeddings)
        self.encoder = Encoder(config)
        self.pooler = DenseBlock(config.hidden_size, config, "pooler", activation=tf.tanh)

    @property
    def embedding_table(self):
        """The word embedding matrix [V, H] (tied to the masked-LM output layer)."""
        return self.embeddings.word_embeddings

    def _check_inputs(self, input_ids, token_type_ids, position_ids=None):
        c = self.config
        seq_length = input_ids.shape[1]
        if seq_length is not None and seq_length > c.max_position_embeddings:
            raise ValueError(
                "sequence length %d is longer than max_position_embeddings %d of the BERT "
                "config (lower --max_seq_length)" % (seq_length, c.max_position_embeddings))
        checks = [
            tf.debugging.assert_less(
                input_ids, tf.constant(c.vocab_size, input_ids.dtype),
                message="input_ids contain a token id >= vocab_size=%d of the BERT config "
                        "(do the vocab file and bert_config.json match?)" % c.vocab_size),
            tf.debugging.assert_less(
                token_type_ids, tf.constant(c.type_vocab_size, token_type_ids.dtype),
                message="token_type_ids contain a value >= type_vocab_size=%d"
                        % c.type_vocab_size),
        ]
        if seq_length is None:
            checks.append(tf.debugging.assert_less_equal(
                tf.shape(input_ids)[1], c.max_position_embeddings,
                message="sequence length exceeds max_position_embeddings=%d"
                        % c.max_position_embeddings))
        if position_ids is not None:
            checks.append(tf.debugging.assert_less(
                position_ids, tf.constant(c.max_position_embeddings, position_ids.dtype),
                message="position_ids contain a value >= max_position_embeddings=%d"
                        % c.max_position_embeddings))
        return checks

    def call(self, input_ids, input_mask=None, token_type_ids=None, training=False,
             position_ids=None, instance_ids=None):
        """Applies the layer (shapes in the class docstring)."""
        input_ids = tf.convert_to_tensor(input_ids)
        if input_mask is None:
            input_mask = tf.ones_like(input_ids)
        if token_type_ids is None:
            token_type_ids = tf.zeros_like(input_ids)
        token_type_ids = tf.convert_to_tensor(token_type_ids)
        if position_ids is not None:
            position_ids = tf.convert_to_tensor(position_ids)
        with tf.control_dependencies(self._check_inputs(input_ids, token_type_ids,
                                                        position_ids)):
            embedding_output = self.embeddings(input_ids, token_type_ids, training=training,
                                               position_ids=position_ids)
        attention_mask = create_attention_mask(input_mask, instance_ids=instance_ids)
        all_layers = self.encoder(embedding_output, attention_mask, training=training)
        sequence_output = all_layers[-1]
        return {
            "pooled_output": self.pooler(sequence_output[:, 0, :]),
            "sequence_output": sequence_output,
            "all_encoder_layers": all_layers,
            "embedding_output": embedding_output,
        }


# ---------------------------------------------------------------------------
# Heads
# ---------------------------------------------------------------------------

class OutputProjection(tf_keras.layers.Layer):
    """`output_weights` [units, H] and `output_bias` [units]: x @ W^T + b in float32."""

    def __init__(self, units, initializer_range, name, **kwargs):
        super().__init__(name=name, **kwargs)
        self.units = units
        self.initializer_range = initializer_range

    def build(self, input_shape):
        """Creates the layer's variables (names as in the reference)."""
        self.output_weights = self.add_weight(
            "output_weights", shape=[self.units, input_shape[-1]],
            initializer=create_initializer(self.initializer_range))
        # Added to float32 logits: kept float32 under mixed precision.
        self.output_bias = self.add_weight("output_bias", shape=[self.units],
                                           initializer="zeros", experimental_autocast=False)
        super().build(input_shape)

    def call(self, x):
        """Applies the layer (shapes in the class docstring)."""
        logits = tf.matmul(tf.reshape(x, [-1, x.shape[-1]]),
                           tf.cast(self.output_weights, x.dtype), transpose_b=True)
        logits = tf.cast(logits, tf.float32) + self.output_bias
        return tf.reshape(logits, tf.concat([tf.shape(x)[:-1], [self.units]], axis=0))


class MaskedLMHead(tf_keras.layers.Layer):
    """`cls/predictions`: transform (dense + act + LayerNorm), tied output layer + bias."""

    def __init__(self, config, name="predictions", **kwargs):
        super().__init__(name=name, **kwargs)
        self.config = config
        self.transform = Transform(config)

    def build(self, input_shape):
        """Creates the layer's variables (names as in the reference)."""
        self.output_bias = self.add_weight("output_bias", shape=[self.config.vocab_size],
                                           initializer="zeros", experimental_autocast=False)
        super().build(input_shape)

    def call(self, x, embedding_table):
        """x [T, H], embedding_table [V, H] -> logits [T, V] (float32, bias added)."""
        x = self.transform(x)
        logits = tf.matmul(x, tf.cast(embedding_table, x.dtype), transpose_b=True)
        return tf.cast(logits, tf.float32) + self.output_bias


class Transform(tf_keras.layers.Layer):
    """`cls/predictions/transform`: dense with the config's activation, then LayerNorm."""

    def __init__(self, config, name="transform", **kwargs):
        super().__init__(name=name, **kwargs)
        self.dense = _dense(config.hidden_size, config, "dense",
                            activation=get_activation(config.hidden_act))
        self.layer_norm = LayerNorm(_layer_norm_eps(config))

    def call(self, x):
        """Applies the layer (shapes in the class docstring)."""
        return self.layer_norm(self.dense(x))


class PretrainingHeads(tf_keras.layers.Layer):
    """Masked-LM and next-sentence heads of run_pretraining (`cls/...` variables)."""

    def __init__(self, config, name="cls", **kwargs):
        super().__init__(name=name, **kwargs)
        self.predictions = MaskedLMHead(config)
        self.seq_relationship = OutputProjection(2, config.initializer_range,
                                                 "seq_relationship")

    def call(self, sequence_output, pooled_output, masked_lm_positions, embedding_table):
        """Returns (masked_lm_logits [B, P, V], next_sentence_log_probs [B, 2]), float32.

        pooled_output may be [B, K, H] (packed rows: one per instance); the
        next-sentence log-probabilities are then [B, K, 2].
        """
        picked = gather_indexes(sequence_output, masked_lm_positions)
        mlm_logits = self.predictions(picked, embedding_table)
        mlm_logits = tf.reshape(
            mlm_logits, [tf.shape(masked_lm_positions)[0], tf.shape(masked_lm_positions)[1], -1])
        nsp_log_probs = tf.nn.log_softmax(self.seq_relationship(pooled_output), axis=-1)
        return mlm_logits, nsp_log_probs


class SquadHead(tf_keras.layers.Layer):
    """`cls/squad`: start and end logits for every token."""

    def __init__(self, name="cls", **kwargs):
        super().__init__(name=name, **kwargs)
        self.squad = OutputProjection(2, 0.02, "squad")

    def call(self, sequence_output):
        """[B, S, H] -> (start_logits [B, S], end_logits [B, S]), float32."""
        logits = self.squad(sequence_output)
        return logits[:, :, 0], logits[:, :, 1]


def masked_lm_loss(log_probs, label_ids, label_weights):
    """Weighted masked-LM loss as the reference computes it.

    Args:
      log_probs: [B, P, V] float32.
      label_ids: [B, P] int.
      label_weights: [B, P] float, 0 for padded prediction slots.
    Returns:
      (loss scalar = sum(w * nll) / (sum(w) + 1e-5), per-example nll [B, P]).
    """
    # The reference sums log_probs * one_hot(labels) over V: every term but the
    # label's is an exact zero, so picking the label's log-probability gives the
    # same value without building (and back-propagating through) a [B, P, V] one-hot.
    # (gather_nd's gradient is one ScatterNd, cheaper than batched gather's.)
    label_ids = tf.cast(label_ids, tf.int32)
    per_example = -tf.gather_nd(log_probs, label_ids[..., tf.newaxis],
                                batch_dims=label_ids.shape.rank)
    weights = tf.cast(label_weights, per_example.dtype)
    loss = tf.reduce_sum(weights * per_example) / (tf.reduce_sum(weights) + 1e-5)
    return loss, per_example


def masked_lm_loss_from_logits(logits, label_ids, label_weights):
    """masked_lm_loss computed from the logits ([B, P, V] float32): same value, less work.

    -log_softmax(logits)[label] in one fused kernel (sparse softmax cross-entropy)
    whose gradient comes with it, instead of a log-softmax over V, a pick and the
    log-softmax gradient; the two agree to float32 rounding (~1e-7 relative).
    """
    per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.cast(label_ids, tf.int32), logits=logits)
    weights = tf.cast(label_weights, per_example.dtype)
    loss = tf.reduce_sum(weights * per_example) / (tf.reduce_sum(weights) + 1e-5)
    return loss, per_example


def next_sentence_loss(log_probs, labels):
    """Mean NSP cross-entropy; returns (loss, per-example loss [B])."""
    labels = tf.reshape(labels, [-1])
    one_hot = tf.one_hot(labels, 2, dtype=log_probs.dtype)
    per_example = -tf.reduce_sum(one_hot * log_probs, axis=-1)
    return tf.reduce_mean(per_example), per_example


def weighted_next_sentence_loss(log_probs, labels, weights):
    """NSP cross-entropy of packed rows: log_probs [B, K, 2], labels and weights [B, K].

    Returns (sum(w * nll) / sum(w), per-instance nll [B, K]): the mean over the
    real instances (weight 1), which is next_sentence_loss's value for the same
    instances unpacked.
    """
    labels = tf.cast(labels, tf.int32)
    one_hot = tf.one_hot(labels, 2, dtype=log_probs.dtype)
    per_instance = -tf.reduce_sum(one_hot * log_probs, axis=-1)
    weights = tf.cast(weights, per_instance.dtype)
    loss = tf.reduce_sum(weights * per_instance) / tf.maximum(tf.reduce_sum(weights), 1e-5)
    return loss, per_instance


# ---------------------------------------------------------------------------
# Task models (each owns a `bert` encoder and one head)
# ---------------------------------------------------------------------------

def _encode(bert, features, training):
    # position_ids / instance_ids: only packed pretraining rows have them.
    return bert(features["input_ids"], features.get("input_mask"),
                features.get("segment_ids"), training=training,
                position_ids=features.get("position_ids"),
                instance_ids=features.get("instance_ids"))


def _packed_pooled_output(bert, sequence_output, positions):
    """The pooler (dense + tanh) at each [CLS] of `positions` [B, K] -> [B, K, H]."""
    picked = gather_indexes(sequence_output, positions)
    pooled = bert.pooler(picked)
    return tf.reshape(pooled, [tf.shape(positions)[0], tf.shape(positions)[1],
                               pooled.shape[-1]])


class BertPretrainer(tf_keras.Model):
    """BERT with the masked-LM and next-sentence heads (run_pretraining's model)."""

    def __init__(self, config, use_one_hot_embeddings=False, name="bert_pretrainer", **kwargs):
        super().__init__(name=name, **kwargs)
        self.bert = BertModel(config, use_one_hot_embeddings)
        self.cls = PretrainingHeads(config)

    def call(self, features, training=False):
        """Applies the layer (shapes in the class docstring).

        Packed rows (features next_sentence_positions [B, K], with position_ids
        and instance_ids) get one pooled output per instance, at its [CLS]:
        next_sentence_log_probs [B, K, 2].
        """
        outputs = dict(_encode(self.bert, features, training))
        pooled = outputs["pooled_output"]
        if "next_sentence_positions" in features:
            pooled = _packed_pooled_output(self.bert, outputs["sequence_output"],
                                           features["next_sentence_positions"])
        mlm_logits, nsp = self.cls(outputs["sequence_output"], pooled,
                                   features["masked_lm_positions"], self.bert.embedding_table)
        # Training reads the logits (masked_lm_loss_from_logits); inside a
        # tf.function the unused log-softmax is then pruned away.
        outputs["masked_lm_logits"] = mlm_logits
        outputs["masked_lm_log_probs"] = tf.nn.log_softmax(mlm_logits, axis=-1)
        outputs["next_sentence_log_probs"] = nsp
        return outputs


class BertClassifier(tf_keras.Model):
    """BERT + dropout + linear layer on the pooled output (run_classifier's model).

    Variables `output_weights` [num_labels, H] and `output_bias` [num_labels]
    carry the reference's names. With num_labels == 1 the single logit is a
    regression output.
    """

    def __init__(self, config, num_labels, use_one_hot_embeddings=False,
                 name="bert_classifier", **kwargs):
        super().__init__(name=name, **kwargs)
        self.num_labels = num_labels
        self.bert = BertModel(config, use_one_hot_embeddings)
        self.dropout = tf_keras.layers.Dropout(0.1)
        # A nameless projection: its variables sit at the top level, as in TF1.
        self.classifier = OutputProjection(num_labels, 0.02, name="classifier")

    def call(self, features, training=False):
        """Applies the layer (shapes in the class docstring)."""
        pooled = _encode(self.bert, features, training)["pooled_output"]
        pooled = self.dropout(pooled, training=training)
        return {"logits": self.classifier(pooled), "pooled_output": pooled}


class BertSquad(tf_keras.Model):
    """BERT + a linear start/end layer over every token (run_squad's model)."""

    def __init__(self, config, use_one_hot_embeddings=False, name="bert_squad", **kwargs):
        super().__init__(name=name, **kwargs)
        self.bert = BertModel(config, use_one_hot_embeddings)
        self.cls = SquadHead()

    def call(self, features, training=False):
        """Applies the layer (shapes in the class docstring)."""
        sequence = _encode(self.bert, features, training)["sequence_output"]
        start_logits, end_logits = self.cls(sequence)
        return {"start_logits": start_logits, "end_logits": end_logits}


class BertTagger(tf_keras.Model):
    """BERT + a per-token tag classifier (run_ner's model).

    Fine-tuned (default): dropout 0.1 on sequence_output, then `tagger/output_weights`
    [num_labels, H] and `tagger/output_bias`. Feature-based (the BERT paper's
    ablation): the encoder is frozen and run without dropout, the encoder layers
    `feature_layers` (e.g. [-1, -2, -3, -4]) are concatenated and fed to a two-layer
    bidirectional LSTM of `lstm_units` per direction, then to the same classifier.
    """

    def __init__(self, config, num_labels, use_one_hot_embeddings=False, feature_layers=None,
                 lstm_units=768, name="bert_tagger", **kwargs):
        super().__init__(name=name, **kwargs)
        self.num_labels = num_labels
        self.bert = BertModel(config, use_one_hot_embeddings)
        self.feature_layers = list(feature_layers) if feature_layers else None
        self.dropout = tf_keras.layers.Dropout(0.1)
        if self.feature_layers:
            self.bert.trainable = False
            self.lstm = [tf_keras.layers.Bidirectional(
                tf_keras.layers.LSTM(lstm_units, return_sequences=True), name="bilstm_%d" % i)
                for i in range(2)]
        self.tagger = OutputProjection(num_labels, config.initializer_range, name="tagger")

    def call(self, features, training=False):
        """features -> {"logits": [B, S, num_labels] float32}."""
        if not self.feature_layers:
            sequence = _encode(self.bert, features, training)["sequence_output"]
            return {"logits": self.tagger(self.dropout(sequence, training=training))}
        layers = _encode(self.bert, features, False)["all_encoder_layers"]
        x = tf.concat([layers[i] for i in self.feature_layers], axis=-1)
        mask = tf.cast(features["input_mask"], tf.bool)
        for lstm in self.lstm:
            x = lstm(x, mask=mask, training=training)
        return {"logits": self.tagger(x)}


class BertMultipleChoice(tf_keras.Model):
    """BERT + one score per choice from the pooled output (run_multiple_choice's model).

    Inputs are [B, C, S]; the B*C sequences run through BERT as one batch; dropout
    0.1 on the pooled output, then `multiple_choice/output_weights` [1, H] and
    `multiple_choice/output_bias` [1] give a logit per choice: logits [B, C].
    """

    def __init__(self, config, use_one_hot_embeddings=False, name="bert_multiple_choice",
                 **kwargs):
        super().__init__(name=name, **kwargs)
        self.bert = BertModel(config, use_one_hot_embeddings)
        self.dropout = tf_keras.layers.Dropout(0.1)
        self.scorer = OutputProjection(1, config.initializer_range, name="multiple_choice")

    def call(self, features, training=False):
        """features of [B, C, S] (or [B, S] while building) -> {"logits": [B, C]}."""
        input_ids = features["input_ids"]
        shape = tf.shape(input_ids)
        seq_length = input_ids.shape[-1] or shape[-1]
        flat = {name: tf.reshape(features[name], [-1, seq_length])
                for name in ("input_ids", "input_mask", "segment_ids") if name in features}
        pooled = _encode(self.bert, flat, training)["pooled_output"]
        logits = self.scorer(self.dropout(pooled, training=training))
        return {"logits": tf.reshape(logits, shape[:-1])}


def dummy_features(batch_size=1, seq_length=2, max_predictions_per_seq=1):
    """Zero features with every key the task models read; used to build variables."""
    seq = np.zeros([batch_size, seq_length], np.int32)
    return {
        "input_ids": seq, "input_mask": seq + 1, "segment_ids": seq,
        "masked_lm_positions": np.zeros([batch_size, max_predictions_per_seq], np.int32),
    }
