"""The BERT encoder in TF2 (tf_keras), with TF1-compatible names (task models: bert_tf2/heads.py).

The arithmetic is that of Google's original BERT: truncated-normal initialisers,
word + token-type + position embeddings, LayerNorm with epsilon 1e-12, an additive
attention mask of -10000, the tanh approximation of GELU, and a tanh pooler over
the first token. Every variable's name, with the top-level model's name removed,
is the TF1 variable name (e.g. `bert/encoder/layer_0/attention/self/query/kernel`),
which is what lets checkpoints.py load Google's checkpoints without a rename table.
This module holds the reference's API (BertConfig, BertModel and its graph-style
functions); the tf_keras layers BertModel is built from are in bert_tf2/encoder/, and the
task models that put a head on it (classifier, SQuAD, tagger, ...) in bert_tf2/heads.py.

Shapes in docstrings: B = batch size, S = sequence length, H = hidden size,
N = attention heads, P = masked positions per sequence, V = vocabulary size.

Contracts with the other modules (modeling.py):
- modeling.py holds BertConfig, BertModel, set_skip_padding and the reference's graph-style
  functions; the tf_keras layers it is built from are in bert_tf2/encoder/ (layers.py: gelu,
  get_activation, create_initializer, get_shape_list, assert_rank, LayerNorm, Dropout, the
  dense blocks, Embeddings; attention.py: create_attention_mask, attend, SelfAttention,
  Attention; transformer.py: TransformerLayer, Encoder, set_gradient_checkpointing), which
  never imports modeling. modeling re-exports each of their public names: `modeling.X` is
  the same object.
- BertConfig(vocab_size, hidden_size=768, ...)
  .from_dict/.from_json_file/.to_dict/.to_json_string
- BertModel(config, use_one_hot_embeddings=False, name="bert"): tf_keras Layer;
  call(input_ids, input_mask=None, token_type_ids=None, training=False) -> dict with
  "pooled_output" [B,H], "sequence_output" [B,S,H], "all_encoder_layers" list of [B,S,H],
  "embedding_output" [B,S,H]; `.embedding_table` the word embedding variable [V,H].
- The reference's graph-style API on the same layers: BertModel(config, is_training,
  input_ids, input_mask=None, token_type_ids=None, use_one_hot_embeddings=False, scope=None)
  runs the layer at once (get_pooled_output / get_sequence_output / get_all_encoder_layers /
  get_embedding_output / get_embedding_table, and the same outputs as the properties
  pooled_output, sequence_output, all_encoder_layers, embedding_output: AttributeError on
  the TF2 layer, nothing assigned, so the layer's checkpoint is unchanged);
  get_activation(activation_string); embedding_lookup, embedding_postprocessor,
  attention_layer, transformer_model, layer_norm, dropout,
  create_attention_mask_from_input_mask, get_shape_list, reshape_*_matrix, assert_rank,
  get_assignment_map_from_checkpoint. In tf.compat.v1 graph mode, tf1_variables.py's
  tf1_variable_scope(scope, default_name) / run_in_tf1_scope(layer, scope, default_name, x,
  ...) make tf_keras layers create their variables through get_variable under the
  reference's names. attend(q, k, v, additive_mask, dropout) is the one attention formula
  (SelfAttention and attention_layer); lookup(table, ids, one_hot) the one embedding lookup.
- set_skip_padding(model, enabled=True) -> number of BertModels (the attribute
  `skip_padding`; a call's `skip_padding=` argument overrides it): the encoder's dense
  layers, LayerNorms and dropouts run on the real tokens (input_mask 1) only, the attention
  on [B, S] with zeros elsewhere; real tokens' outputs equal the padded computation's within
  1e-5 (values and gradients), every output but the embeddings is zero at padding positions.
  At inference (training False) a batch whose real tokens fill at least
  modeling.DENSE_REAL_FRACTION (7/8) of its positions runs every position instead (tf.cond
  per batch): its padding positions carry the padded computation's values; below it the
  attention runs in length groups of rows, each over its rows' own tokens
  (attention.row_groups, attention.set_row_groups; not with instance_ids). Data-dependent
  shapes: not under XLA or on TPUs. Off by default; heads.reads_padding(model) says which
  task models may use it (not BertSquad's logits, not BertPretrainer).
- set_key_trimming(model, enabled=True) -> number of BertModels (the attribute
  `trim_keys`): at inference on every position (training false at trace time, no
  skip_padding tokens, no instance_ids, not while portable_graphs traces an export), each
  layer's attention runs over the keys up to the batch's last real one
  (attention.key_span; every key when a row has none), which gives every position, padding
  included, the values of attending over all of them within 1e-6 (a masked key's weight is
  exp(-10000) = 0 in float32). Data-dependent shapes: not under XLA or on TPUs; off by
  default, training.Runner turns it on for its models elsewhere and extract_features for
  its extractor.
- GELU and LayerNorm of training steps (bert_tf2/base/fused_elementwise.py): the reference's
  "gelu" (modeling.gelu, tanh form) is applied by DenseBlock / heads.Transform through
  modeling.dense_and_activation + apply_activation (the Dense layer itself has no
  activation), and modeling.LayerNorm calls fused_elementwise.layer_norm (float32 inside,
  the input's dtype out). With training true and activations whose shape is fully known at
  trace time with at least fused_elementwise.MIN_ELEMENTS (65,536) elements, each is one
  jit-compiled forward program and one backward program (tf.custom_gradient; the analytic
  derivative, float32 inside, 16-bit inputs rounded once at the end); otherwise (inference,
  trimmed batches' unknown shapes, small tensors) the very ops of before (inference's matmul
  + bias + GELU stays one oneDNN kernel). Values within float32 rounding of the ops path,
  gradients within 1e-5 relative (tests/test_fused_elementwise.py). The exact erf GELU
  ("gelu_exact", HuggingFace's "gelu") is applied the same way; in a training step, of any
  shape, it keeps its ops' forward values to the bit and takes the analytic gradient
  (fused_elementwise.gelu_exact: fewer kernels than autodiff's).
- LayerNorm outside training (training known false at trace time) on a CPU with TensorFlow's
  oneDNN rewrite (x86-64, TF_ENABLE_ONEDNN_OPTS not 0, no GPU or TPU visible:
  fused_elementwise.onednn_layer_norm_applies): written as the training-mode
  FusedBatchNormV3 subgraph grappler's remapper turns into one _MklLayerNorm kernel
  (`_layer_norm_onednn`, epsilon as given through the raw op); every other case the ops.
  `fused_elementwise.set_onednn_layer_norm(False)` keeps the ops for graphs traced after it.
  Outputs within 1e-5 of the ops path on a tiny and a MiniLM-shaped model, the same
  variables and checkpoints (tests/test_onednn_paths.py).
- Inference attention (attention.inference_attend): the whole batch at once (attend) by
  default; `attention.set_attention_by_example(True)` (returns the previous setting) makes
  graphs traced after it attend one batch row at a time (attend_by_example, a tf.map_fn) for
  keys of BY_EXAMPLE_MIN_LENGTH or more on such a CPU, same values within 1e-6; off by
  default because it was not faster in wall time (benchmarks/bench_attention.py).
  portable_graphs turns both CPU forms off. Profiles tell the attention's steps apart by its
  name scopes (attention_mask, scores, softmax, context; benchmarks/profile_ops.py); the
  scale and the mask add already run as post-ops of the scores' oneDNN batch-matmul.
- Dropout (bert_tf2/base/dropout_masks.py): every dropout of the model and the heads
  (modeling.Dropout, a tf_keras Dropout) and modeling.dropout go through
  dropout_masks.dropout(x, rate, seed=None): tf.nn.dropout's rule and ops (keep where a
  float32 uniform >= rate; kept units x * (1 / (1 - rate)) in x's dtype, the others 0; one
  select, its gradient the same select; for static shapes of at least 65,536 units the
  multiply and select are one XLA pass each way, fused_elementwise.keep_and_scale, bit for
  bit), the uniforms drawn by a jit-compiled ThreeFry stateless_uniform for
  size_class(count) units (a power of two >= count, at least 65,536: a handful of XLA
  programs per run) and cut to count (static shapes: cut inside the program,
  draw_keep_shaped, which then computes only the count it keeps; same bits,
  tests/test_dropout_masks.py and test_pretraining_step.py). The same size and seed give the
  same mask (gradient checkpointing's recomputation relies on it); without a seed each call
  takes a fresh [2] int32 seed from a stateful op (repeatable under tf.random.set_seed).
  Only the random stream differs from tf.nn.dropout's. compile_size_classes(device,
  largest=4M units) compiles those programs ahead; training.Runner calls it before its first
  step when batches are trimmed on CPU devices (not under XLA).
"""
import collections
import copy
import json
import re

import numpy as np
from absl import logging
import tensorflow as tf
import tf_keras

from bert_tf2.base import checkpoint_names
from bert_tf2.base import dropout_masks
from bert_tf2.base import json_files
from bert_tf2.base import tf1_variables
# The tf_keras layers BertModel is built from live in bert_tf2/encoder/, with the
# reference's gelu, get_activation, create_initializer, get_shape_list and assert_rank
# (the layers compute with them); every name below stays importable as modeling.X.
from bert_tf2.encoder import transformer
from bert_tf2.encoder.attention import (  # noqa: F401  pylint: disable=unused-import
    Attention, SelfAttention, attend, create_attention_mask)
from bert_tf2.encoder.layers import (  # noqa: F401  pylint: disable=unused-import
    DenseBlock, DenseResidualNorm, Dropout, Embeddings, LayerNorm, apply_activation,
    assert_rank, create_initializer, dense_and_activation, dense_layer, gelu, gelu_exact,
    get_activation, get_shape_list, layer_norm_epsilon, lookup)
from bert_tf2.encoder.transformer import (  # noqa: F401  pylint: disable=unused-import
    Encoder, TransformerLayer, set_gradient_checkpointing)


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
        data = json_files.read_json_object(json_file, "BERT config file ")
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
# The model (its layers: bert_tf2/encoder/)
# ---------------------------------------------------------------------------

def gather_indexes(sequence_tensor, positions):
    """Picks [B, P] positions out of a [B, S, H] tensor -> [B * P, H]."""
    shape = tf.shape(sequence_tensor)
    batch_size, seq_length, width = shape[0], shape[1], sequence_tensor.shape[-1]
    offsets = tf.reshape(tf.range(batch_size) * seq_length, [-1, 1])
    flat_positions = tf.reshape(tf.cast(positions, tf.int32) + offsets, [-1])
    flat_sequence = tf.reshape(sequence_tensor, [-1, width])
    return tf.gather(flat_sequence, flat_positions)


# At inference, a batch whose real tokens fill at least this share of its positions
# runs the encoder on every position even with skip_padding (BertModel._encode): on
# MiniLM at 8 x 384 the gathers and scatters cost ~6% at full batches and break even
# near 0.9 real tokens.
DENSE_REAL_FRACTION = 0.875


def set_skip_padding(model, enabled=True):
    """Runs every BERT encoder of `model` on the real tokens only (or not); returns how
    many BertModels it found.

    For models that never read the outputs at padding positions (input_mask 0): a
    classifier (the first token), a tagger whose loss and outputs cover real tokens,
    pooled sentence vectors. The real tokens' outputs are unchanged (see Encoder),
    the dense layers do the work of the real tokens instead of B x S positions, and
    the outputs at padding positions become zeros (at inference, batches of at least
    DENSE_REAL_FRACTION real tokens run every position instead). Shapes are then data-dependent:
    not for XLA or TPUs. Off by default (the reference's outputs everywhere).
    """
    return _set_on_encoders(model, "skip_padding", enabled)


def set_key_trimming(model, enabled=True):
    """Lets every BERT encoder of `model` attend, at inference on every position, over the
    keys up to its batch's last real one only (or not); returns how many BertModels it
    found.

    The keys after that one are masked in every row, so each position, padding
    included, gets the values of attending over all of them, up to the order of the
    sums (attention.key_span says when a row keeps no key). A batch of short rows at
    max_seq_length (run_squad's default full length, any runner's --notrim_padding)
    then does the attention work of its longest row. Data-dependent shapes: not under
    XLA or on TPUs. Off by default; graphs traced for an export
    (attention.portable_graphs) attend over every key either way.
    """
    return _set_on_encoders(model, "trim_keys", enabled)


def _set_on_encoders(model, attribute, enabled):
    """Sets `attribute` of every BertModel within `model` to bool(enabled); their count."""
    models = transformer.layers_of(model, BertModel)
    for bert in models:
        setattr(bert, attribute, bool(enabled))
    return len(models)


def _assert_at_most(values, limit, scope, message):
    """An assert_less_equal(values, limit) op in its own name scope.

    In a TF1 graph such an assert hangs off the data by a control edge only, like
    the reference's own sequence-length assert; each one sits in a scope ending in
    `assert_less_equal/`, the name the reference's modeling_test leaves out of its
    every-op-is-reachable check.
    """
    with tf.name_scope(scope):
        limit = np.array(limit, dtype=values.dtype.as_numpy_dtype)
        return tf.debugging.assert_less_equal(values, limit, message=message)


def _reference_attribute(key, shape):
    """A BertModel property for the reference's output attribute `key` ([shape]: as its
    get_* method); AttributeError when absent, so hasattr() and getattr(..., default) work."""
    return property(lambda self: self._reference_output(key, AttributeError),  # pylint: disable=protected-access
                    doc="%s: as get_%s() (the reference's attribute)." % (shape, key))

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
    outputs are the reference's. With skip_padding (set_skip_padding, or the call's
    argument) the layers run on the real tokens only and every output but the
    embeddings is zero at the positions of input_mask 0 (at inference, a batch at
    least DENSE_REAL_FRACTION real tokens runs every position: the reference's
    values there).

    Two ways to build it, one set of layers:
      BertModel(config, use_one_hot_embeddings=False, name="bert"): a Keras layer,
        called on inputs (the TF2 path every runner uses);
      BertModel(config, is_training, input_ids, input_mask=None, token_type_ids=None,
        use_one_hot_embeddings=False, scope=None): the reference's constructor. It
        runs the layer on input_ids at once (under tf.compat.v1 graph mode its
        variables get the reference's names, e.g. `bert/encoder/layer_0/...`, in
        the TF1 variable store; is_training=False turns every dropout off) and the
        reference's getters return the outputs: get_pooled_output,
        get_sequence_output, get_all_encoder_layers, get_embedding_output,
        get_embedding_table, and so do its attributes pooled_output,
        sequence_output, all_encoder_layers, embedding_output, embedding_table.
    One class serves both because code written against the reference names
    modeling.BertModel, and so do our task models: a second class of the same
    name elsewhere would be a second copy of the arithmetic.
    """

    def __init__(self, config, is_training=None, input_ids=None, input_mask=None,
                 token_type_ids=None, use_one_hot_embeddings=False, scope=None, name="bert",
                 **kwargs):
        if input_ids is not None and is_training is None:
            raise TypeError("BertModel(config, is_training, input_ids, ...): is_training is "
                            "required with input_ids (the reference's signature)")
        config = copy.deepcopy(config)
        if input_ids is not None and not is_training:
            # The reference's eval model: no dropout anywhere.
            config.hidden_dropout_prob = 0.0
            config.attention_probs_dropout_prob = 0.0
        super().__init__(name=scope if isinstance(scope, str) and scope else name, **kwargs)
        config.validate()
        self.config = config
        self.embeddings = Embeddings(config, use_one_hot_embeddings)
        self.encoder = Encoder(config)
        self.pooler = DenseBlock(config.hidden_size, config, "pooler", activation=tf.tanh)
        self.skip_padding = False  # see set_skip_padding
        self.trim_keys = False  # see set_key_trimming
        self._reference_outputs = None
        if input_ids is not None:
            get_shape_list(input_ids, expected_rank=2)
            self._reference_outputs = tf1_variables.run_in_tf1_scope(
                self, scope, "bert", input_ids, input_mask, token_type_ids,
                training=bool(is_training))

    def _reference_output(self, key, error=ValueError):
        """One output of the graph-style constructor; `error` when it was not used."""
        if self._reference_outputs is None:
            raise error("this BertModel was built without input_ids: call it on inputs, or "
                        "construct it as BertModel(config, is_training, input_ids, ...) to "
                        "use the get_* methods and the output attributes (%s)" % key)
        return self._reference_outputs[key]

    # The reference also sets its outputs as attributes (bert-as-service reads
    # model.all_encoder_layers). Properties rather than attributes: Keras would
    # track an assigned list, and the layer's checkpoint must stay as it is.
    pooled_output = _reference_attribute("pooled_output", "[B, H]")
    sequence_output = _reference_attribute("sequence_output", "[B, S, H]")
    all_encoder_layers = _reference_attribute("all_encoder_layers", "List of [B, S, H]")
    embedding_output = _reference_attribute("embedding_output", "[B, S, H]")

    def get_pooled_output(self):
        """[B, H]: the pooler's output (reference API)."""
        return self._reference_output("pooled_output")

    def get_sequence_output(self):
        """[B, S, H]: the last encoder layer (reference API)."""
        return self._reference_output("sequence_output")

    def get_all_encoder_layers(self):
        """List of [B, S, H], one per encoder layer (reference API)."""
        return self._reference_output("all_encoder_layers")

    def get_embedding_output(self):
        """[B, S, H]: embeddings after LayerNorm and dropout, the first layer's input."""
        return self._reference_output("embedding_output")

    def get_embedding_table(self):
        """[V, H]: the word embedding matrix (reference API)."""
        return self.embedding_table

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
            _assert_at_most(input_ids, c.vocab_size - 1, "check_input_ids",
                            "input_ids contain a token id >= vocab_size=%d of the BERT config "
                            "(do the vocab file and bert_config.json match?)" % c.vocab_size),
            _assert_at_most(token_type_ids, c.type_vocab_size - 1, "check_token_type_ids",
                            "token_type_ids contain a value >= type_vocab_size=%d"
                            % c.type_vocab_size),
        ]
        if seq_length is None:
            checks.append(_assert_at_most(
                tf.shape(input_ids)[1], c.max_position_embeddings, "check_length",
                "sequence length exceeds max_position_embeddings=%d" % c.max_position_embeddings))
        if position_ids is not None:
            checks.append(_assert_at_most(
                position_ids, c.max_position_embeddings - 1, "check_position_ids",
                "position_ids contain a value >= max_position_embeddings=%d"
                % c.max_position_embeddings))
        return checks

    def call(self, input_ids, input_mask=None, token_type_ids=None, training=False,
             position_ids=None, instance_ids=None, skip_padding=None):
        """Applies the layer (shapes in the class docstring); skip_padding: None for the
        layer's own setting (see set_skip_padding), or True/False for this call."""
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
        all_layers = self._encode(embedding_output, attention_mask, input_mask, training,
                                  self.skip_padding if skip_padding is None else skip_padding,
                                  group_rows=instance_ids is None)
        sequence_output = all_layers[-1]
        return {
            "pooled_output": self.pooler(sequence_output[:, 0, :]),
            "sequence_output": sequence_output,
            "all_encoder_layers": all_layers,
            "embedding_output": embedding_output,
        }

    def _encode(self, embedding_output, attention_mask, input_mask, training, skip_padding,
                group_rows=False):
        """The encoder's layers, on the real tokens only where that saves work.

        With skip_padding, training runs on the real tokens; at inference a batch
        whose real tokens fill at least DENSE_REAL_FRACTION of its positions runs
        the full computation instead (its gathers and scatters would cost more
        than the padding they skip: SQuAD's windows, mostly full), so its padding
        positions get the reference's values rather than zeros.
        """
        if not skip_padding:
            return self.encoder(embedding_output, attention_mask, training=training,
                                trim_keys=self.trim_keys)
        tokens = tf.where(tf.not_equal(tf.reshape(input_mask, [-1]), 0))[:, 0]

        def skipping():
            return self.encoder(embedding_output, attention_mask, training=training,
                                tokens=tokens, group_rows=group_rows)
        # Both branches call the encoder: its variables must exist before a cond.
        if tf.is_tensor(training) or training or not self.encoder.built:
            return skipping()
        dense = (tf.cast(tf.size(tokens), tf.float32)
                 >= DENSE_REAL_FRACTION * tf.cast(tf.size(input_mask), tf.float32))
        return tf.cond(dense, lambda: self.encoder(embedding_output, attention_mask,
                                                   trim_keys=self.trim_keys),
                       skipping)


# ---------------------------------------------------------------------------
# The reference's graph-style API (tf.compat.v1), built from the layers above
# ---------------------------------------------------------------------------

def reshape_to_matrix(input_tensor):
    """[..., W] (rank >= 2) -> [N, W]."""
    if input_tensor.shape.ndims < 2:
        raise ValueError("reshape_to_matrix needs rank >= 2, got shape %s" % input_tensor.shape)
    if input_tensor.shape.ndims == 2:
        return input_tensor
    return tf.reshape(input_tensor, [-1, input_tensor.shape[-1]])


def reshape_from_matrix(output_tensor, orig_shape_list):
    """[N, W] -> orig_shape_list[:-1] + [W]."""
    if len(orig_shape_list) == 2:
        return output_tensor
    width = get_shape_list(output_tensor)[-1]
    return tf.reshape(output_tensor, list(orig_shape_list[:-1]) + [width])


def get_assignment_map_from_checkpoint(tvars, init_checkpoint):
    """(assignment_map, initialized_variable_names) for tf.train.init_from_checkpoint:
    every variable of `tvars` whose name (without ":0") the checkpoint holds.

    A TF1 checkpoint holds the names themselves; a TF2 one of ours (model.ckpt-N of a
    run_classifier output folder) holds them under object-based keys: the map then goes
    from those keys to the names, so TensorFlow's own tf.compat.v1.train.init_from_checkpoint
    (and bert_tf2.tf1's) loads it as a TF1 checkpoint would be loaded.
    """
    names = collections.OrderedDict()
    for var in tvars:
        names[re.sub(r":\d+$", "", var.name)] = var
    assignment_map = collections.OrderedDict()
    initialized = {}
    for name, key in checkpoint_names.stored_names(init_checkpoint):
        if name in names:
            assignment_map[key] = name
            initialized[name] = 1
            initialized[name + ":0"] = 1
    return assignment_map, initialized


def dropout(input_tensor, dropout_prob):
    """Drops units with probability dropout_prob (None or 0: the input itself)."""
    if dropout_prob is None or dropout_prob == 0.0:
        return input_tensor
    return dropout_masks.dropout(input_tensor, dropout_prob)


def layer_norm(input_tensor, name=None):
    """LayerNorm over the last axis, variables `<name or LayerNorm>/gamma|beta`."""
    return tf1_variables.run_in_tf1_scope(LayerNorm(), name, "LayerNorm", input_tensor)


def layer_norm_and_dropout(input_tensor, dropout_prob, name=None):
    """layer_norm, then dropout."""
    return dropout(layer_norm(input_tensor, name), dropout_prob)


def create_attention_mask_from_input_mask(from_tensor, to_mask):
    """[B, F(, ...)] from_tensor, [B, T] 0/1 to_mask -> [B, F, T] float32 0/1 mask."""
    batch_size, from_length = get_shape_list(from_tensor, expected_rank=[2, 3])[:2]
    to_mask = tf.cast(to_mask, tf.float32)[:, tf.newaxis, :]
    return tf.ones([batch_size, from_length, 1], tf.float32) * to_mask


def _additive_mask(attention_mask):
    """[B, F, T] 0/1 mask -> [B, 1, F, T] additive (0 keep, -10000 drop)."""
    if attention_mask is None:
        return None
    return (1.0 - tf.cast(attention_mask, tf.float32)[:, tf.newaxis]) * -10000.0


def _table(name, rows, width, initializer_range):
    """A [rows, width] embedding table `name` from the TF1 variable store."""
    return tf.compat.v1.get_variable(name, shape=[rows, width],
                                     initializer=create_initializer(initializer_range))


def embedding_lookup(input_ids, vocab_size, embedding_size=128, initializer_range=0.02,
                     word_embedding_name="word_embeddings", use_one_hot_embeddings=False):
    """ids [B, S] (or [B, S, K]) -> ([B, S, E] (or [B, S, K*E]), the table [V, E])."""
    table = _table(word_embedding_name, vocab_size, embedding_size, initializer_range)
    shape = get_shape_list(input_ids)
    flat = tf.reshape(input_ids, [-1])
    vectors = lookup(table, flat, use_one_hot_embeddings)
    if len(shape) == 2:
        return tf.reshape(vectors, shape + [embedding_size]), table
    return tf.reshape(vectors, shape[:-1] + [shape[-1] * embedding_size]), table


def embedding_postprocessor(input_tensor, use_token_type=False, token_type_ids=None,
                            token_type_vocab_size=16,
                            token_type_embedding_name="token_type_embeddings",
                            use_position_embeddings=True,
                            position_embedding_name="position_embeddings",
                            initializer_range=0.02, max_position_embeddings=512,
                            dropout_prob=0.1):
    """[B, S, W] word embeddings + token-type and position embeddings, then
    LayerNorm and dropout (the reference's variable names and arguments)."""
    batch_size, seq_length, width = get_shape_list(input_tensor, expected_rank=3)
    output = input_tensor
    if use_token_type:
        if token_type_ids is None:
            raise ValueError("embedding_postprocessor: token_type_ids are required when "
                             "use_token_type is True")
        table = _table(token_type_embedding_name, token_type_vocab_size, width,
                       initializer_range)
        types = lookup(table, tf.reshape(token_type_ids, [-1]), True)
        output += tf.reshape(types, [batch_size, seq_length, width])
    if use_position_embeddings:
        if isinstance(seq_length, int) and seq_length > max_position_embeddings:
            raise ValueError("sequence length %d is longer than max_position_embeddings %d"
                             % (seq_length, max_position_embeddings))
        table = _table(position_embedding_name, max_position_embeddings, width,
                       initializer_range)
        output += table[tf.newaxis, :seq_length, :]
    return layer_norm_and_dropout(output, dropout_prob)


def attention_layer(from_tensor, to_tensor, attention_mask=None, num_attention_heads=1,
                    size_per_head=512, query_act=None, key_act=None, value_act=None,
                    attention_probs_dropout_prob=0.0, initializer_range=0.02,
                    do_return_2d_tensor=False, batch_size=None, from_seq_length=None,
                    to_seq_length=None):
    """Multi-head attention from `from_tensor` [B, F, W] to `to_tensor` [B, T, W]
    (or both 2-D with batch_size and the two lengths given).

    attention_mask [B, F, T] 0/1. Returns [B, F, N * D], or [B * F, N * D] with
    do_return_2d_tensor. Variables `query`, `key`, `value` in the current scope.
    """
    from_shape = get_shape_list(from_tensor, expected_rank=[2, 3])
    to_shape = get_shape_list(to_tensor, expected_rank=[2, 3])
    if len(from_shape) != len(to_shape):
        raise ValueError("attention_layer: from_tensor and to_tensor ranks differ")
    if len(from_shape) == 3:
        batch_size, from_seq_length, to_seq_length = from_shape[0], from_shape[1], to_shape[1]
    elif None in (batch_size, from_seq_length, to_seq_length):
        raise ValueError("attention_layer: 2-D inputs need batch_size, from_seq_length "
                         "and to_seq_length")
    heads, size = num_attention_heads, size_per_head

    def project(tensor, name, act, length):
        dense = tf_keras.layers.Dense(heads * size, activation=act, name=name,
                                      kernel_initializer=create_initializer(initializer_range))
        with tf1_variables.tf1_variable_scope():
            out = dense(reshape_to_matrix(tensor))
        return tf.transpose(tf.reshape(out, [batch_size, length, heads, size]), [0, 2, 1, 3])

    q = project(from_tensor, "query", query_act, from_seq_length)
    k = project(to_tensor, "key", key_act, to_seq_length)
    v = project(to_tensor, "value", value_act, to_seq_length)
    context = attend(q, k, v, _additive_mask(attention_mask),
                     lambda probs: dropout(probs, attention_probs_dropout_prob))
    if do_return_2d_tensor:
        return tf.reshape(context, [batch_size * from_seq_length, heads * size])
    return tf.reshape(context, [batch_size, from_seq_length, heads * size])


def transformer_model(input_tensor, attention_mask=None, hidden_size=768, num_hidden_layers=12,
                      num_attention_heads=12, intermediate_size=3072, intermediate_act_fn=gelu,
                      hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                      initializer_range=0.02, do_return_all_layers=False):
    """The transformer stack (`layer_<i>` in the current scope) on [B, S, H]:
    the last layer [B, S, H], or the list of all of them. attention_mask [B, S, S] 0/1."""
    if hidden_size % num_attention_heads:
        raise ValueError("hidden size %d is not a multiple of the number of attention "
                         "heads %d" % (hidden_size, num_attention_heads))
    width = get_shape_list(input_tensor, expected_rank=3)[2]
    if width != hidden_size:
        raise ValueError("input width %d != hidden size %d" % (width, hidden_size))
    config = BertConfig(vocab_size=1, hidden_size=hidden_size,
                        num_hidden_layers=num_hidden_layers,
                        num_attention_heads=num_attention_heads,
                        intermediate_size=intermediate_size, hidden_act=intermediate_act_fn,
                        hidden_dropout_prob=hidden_dropout_prob,
                        attention_probs_dropout_prob=attention_probs_dropout_prob,
                        initializer_range=initializer_range)
    training = bool(hidden_dropout_prob or attention_probs_dropout_prob)
    layers = tf1_variables.run_in_tf1_scope(Encoder(config), None, None, input_tensor,
                              _additive_mask(attention_mask), training=training)
    return layers if do_return_all_layers else layers[-1]
