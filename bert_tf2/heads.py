"""The heads BERT's tasks put on the encoder, their losses, and the task models.

Pretraining (masked LM with the output layer tied to the word embeddings, next
sentence), SQuAD start/end, sequence classification, per-token tagging and multiple
choice. Each task model owns a `bert` encoder (modeling.BertModel) and one head;
variable names follow the reference's (`cls/predictions/...`, `output_weights`, ...)
through checkpoints.py's one table.

Shapes in docstrings: B = batch size, S = sequence length, H = hidden size,
P = masked positions per sequence, V = vocabulary size, C = choices.

Contracts with the other modules (bert_tf2/heads.py):
- BertPretrainer(config), BertClassifier(config, num_labels), BertSquad(config): tf_keras
  Models with `.bert`; each call(features: dict, training=False) takes the input_pipeline
  feature dict (input_ids, input_mask, segment_ids, ...): BertPretrainer ->
  {"masked_lm_log_probs" [B,P,V], "masked_lm_logits" [B,P,V], "next_sentence_log_probs"
  [B,2],
                     + bert outputs} (training reads the logits: heads.masked_lm_loss_from_logits)
BertClassifier -> {"logits" [B,num_labels], "pooled_output"} (dropout 0.1 on pooled output
when training;
                    variables `output_weights` [num_labels,H], `output_bias` [num_labels] as the reference)
BertSquad      -> {"start_logits" [B,S], "end_logits" [B,S]} (variables
cls/squad/output_weights [2,H],
                    cls/squad/output_bias [2])
BertTagger(config, num_labels, feature_layers=None, lstm_units=768, crf=False,
crf_penalties=None)
                 -> {"logits" [B,S,num_labels]} (variables tagger/output_weights, tagger/output_bias;
                    feature-based: bilstm_0/, bilstm_1/ over frozen, concatenated encoder layers;
                    crf: + "transitions" [N,N], the variable crf/transitions (CrfTransitions:
                    zeros, float32 under mixed precision) plus crf_penalties' constants, and
                    with penalties "start_penalty" [N]; the checkpoint holds the learned part)
- run_ner --crf's chain (one place, used by run_ner and the exported tagger): a window's
  pieces of label weight > 0 in order (`first_pieces(label_weights)` -> (order, lengths));
  `crf_negative_log_likelihood(logits, transitions, label_ids, label_weights,
  start_penalty=None, starts=None)` -> (nll [B], has_words [B]); `crf_predictions(logits,
  transitions, label_weights, start_penalty=None, starts=None)` -> Viterbi tags [B,S] at the
  weighted positions (serving builds those weights with `serving.first_piece_weights`; its
  windows all start their text). start_penalty [N] is added to the first word of the windows
  whose `starts` [B] is > 0 (None: all). `crf_constraints(labels, scheme)` -> (transitions
  [N,N], starts [N]) of 0 / FORBIDDEN, or None for "none" (TAG_SCHEMES = auto, iob2, none;
  `iob2_parts(label)`). BertMultipleChoice(config) -> {"logits" [B,C]} from features of
  [B,C,S] (variables
                    multiple_choice/output_weights [1,H], multiple_choice/output_bias [1])
- BertMaskedLM(config) -> {"logits", "probabilities"} [B,P,V] at features'
  masked_lm_positions: fill-mask (bert_tf2/export/masked_lm.py), the variables
  cls/predictions/* alone (no next-sentence head).
- The heads themselves (MaskedLMHead, PretrainingHeads, SquadHead, OutputProjection), the
  losses (masked_lm_loss, masked_lm_loss_from_logits, next_sentence_loss,
  weighted_next_sentence_loss; masked_lm_loss_from_logits: -log softmax[label] from one
  softmax with its own gradient, softmax minus one-hot
  (fused_elementwise.label_softmax_gradient: one XLA pass for static shapes): the sparse
  cross-entropy kernel's values to float32 rounding) and dummy_features (zero features that
  build any task model).
"""
import numpy as np
import tensorflow as tf
import tf_keras

from bert import modeling
from bert_tf2.base import crf
from bert_tf2.base import fused_elementwise
from bert_tf2.encoder import attention

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
            initializer=modeling.create_initializer(self.initializer_range))
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
    """`cls/predictions`: transform (dense + act + modeling.LayerNorm), tied output layer + bias."""

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
    """`cls/predictions/transform`: dense with the config's activation, then modeling.LayerNorm."""

    def __init__(self, config, name="transform", **kwargs):
        super().__init__(name=name, **kwargs)
        self.dense, self.activation = modeling.dense_and_activation(
            config.hidden_size, config, "dense", modeling.get_activation(config.hidden_act))
        self.layer_norm = modeling.LayerNorm(modeling.layer_norm_epsilon(config))

    def call(self, x, training=None):
        """Applies the layer (shapes in the class docstring)."""
        hidden = modeling.apply_activation(self.activation, self.dense(x), training)
        return self.layer_norm(hidden, training=training)


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
        picked = modeling.gather_indexes(sequence_output, masked_lm_positions)
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


@tf.custom_gradient
def _label_cross_entropy(logits, labels):
    """[N] -log softmax(logits)[n, labels[n]] of logits [N, V] float32, labels [N] int32.

    One softmax (the CPU's oneDNN kernel, several times faster on [320, 30522] than
    TensorFlow's sparse softmax cross-entropy kernel: 7.0 against 18.5 ms forward and
    backward, with the one-pass gradient), and from it, without a log over V: with m
    the largest logit and S = sum(exp(logits - m)), the largest probability is
    exp(0) / S, so log S = -log(max probability), a number in [1/V, 1] that cannot
    underflow, and the loss is (m - logit of the label) + log S. The gradient is the
    softmax minus the one-hot label (fused_elementwise.label_softmax_gradient). Same
    values as the fused kernel's to float32 rounding.
    """
    probs = tf.nn.softmax(logits)
    picked = tf.gather(logits, labels, batch_dims=1)
    loss = (tf.reduce_max(logits, -1) - picked) - tf.math.log(tf.reduce_max(probs, -1))

    def grad(d_loss):
        return fused_elementwise.label_softmax_gradient(probs, labels, d_loss), None
    return loss, grad


def masked_lm_loss_from_logits(logits, label_ids, label_weights):
    """masked_lm_loss computed from the logits ([B, P, V] float32): same value, less work.

    -log_softmax(logits)[label] from one softmax with its own gradient
    (_label_cross_entropy), instead of a log-softmax over V, a pick and the
    log-softmax gradient; the two agree to float32 rounding (~1e-7 relative).
    """
    label_ids = tf.cast(label_ids, tf.int32)
    per_example = tf.reshape(
        _label_cross_entropy(tf.reshape(logits, [-1, tf.shape(logits)[-1]]),
                             tf.reshape(label_ids, [-1])), tf.shape(label_ids))
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

def _encode(bert, features, training, skip_padding=None):
    # position_ids / instance_ids: only packed pretraining rows have them.
    return bert(features["input_ids"], features.get("input_mask"),
                features.get("segment_ids"), training=training,
                position_ids=features.get("position_ids"),
                instance_ids=features.get("instance_ids"), skip_padding=skip_padding)


def _packed_pooled_output(bert, sequence_output, positions):
    """The pooler (dense + tanh) at each [CLS] of `positions` [B, K] -> [B, K, H]."""
    picked = modeling.gather_indexes(sequence_output, positions)
    pooled = bert.pooler(picked)
    return tf.reshape(pooled, [tf.shape(positions)[0], tf.shape(positions)[1],
                               pooled.shape[-1]])


class BertPretrainer(tf_keras.Model):
    """BERT with the masked-LM and next-sentence heads (run_pretraining's model)."""
    # reads_padding: its masked-LM positions may point anywhere.
    READS_PADDING = True

    def __init__(self, config, use_one_hot_embeddings=False, name="bert_pretrainer", **kwargs):
        super().__init__(name=name, **kwargs)
        self.bert = modeling.BertModel(config, use_one_hot_embeddings=use_one_hot_embeddings)
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


class _MaskedLMScope(tf_keras.layers.Layer):
    """The `cls` scope holding `predictions` (heads.MaskedLMHead) alone."""

    def __init__(self, config, name="cls", **kwargs):
        super().__init__(name=name, **kwargs)
        self.predictions = MaskedLMHead(config)

    def call(self, sequence_output, positions, embedding_table):
        """[B, S, H], positions [B, P] -> logits [B, P, V] (float32)."""
        picked = modeling.gather_indexes(sequence_output, positions)
        logits = self.predictions(picked, embedding_table)
        return tf.reshape(logits, [tf.shape(positions)[0], tf.shape(positions)[1], -1])


class BertMaskedLM(tf_keras.Model):
    """BERT with the masked-LM head only: features (input_ids, input_mask, segment_ids,
    masked_lm_positions [B, P]) -> {"logits", "probabilities"} [B, P, V], float32."""
    # reads_padding: its [MASK] positions may point anywhere.
    READS_PADDING = True

    def __init__(self, config, name="bert_masked_lm", **kwargs):
        super().__init__(name=name, **kwargs)
        self.bert = modeling.BertModel(config)
        self.cls = _MaskedLMScope(config)

    def call(self, features, training=False):
        """Applies the model (shapes in the class docstring)."""
        outputs = self.bert(features["input_ids"], features.get("input_mask"),
                            features.get("segment_ids"), training=training)
        logits = self.cls(outputs["sequence_output"], features["masked_lm_positions"],
                          self.bert.embedding_table)
        return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1)}


class BertClassifier(tf_keras.Model):
    """BERT + dropout + linear layer on the pooled output (run_classifier's model).

    Variables `output_weights` [num_labels, H] and `output_bias` [num_labels]
    carry the reference's names. With num_labels == 1 the single logit is a
    regression output.
    """
    # reads_padding: the pooled [CLS] only.
    READS_PADDING = False

    def __init__(self, config, num_labels, use_one_hot_embeddings=False,
                 name="bert_classifier", **kwargs):
        super().__init__(name=name, **kwargs)
        self.num_labels = num_labels
        self.bert = modeling.BertModel(config, use_one_hot_embeddings=use_one_hot_embeddings)
        self.dropout = modeling.Dropout(0.1)
        # A nameless projection: its variables sit at the top level, as in TF1.
        self.classifier = OutputProjection(num_labels, 0.02, name="classifier")

    def call(self, features, training=False):
        """Applies the layer (shapes in the class docstring)."""
        pooled = _encode(self.bert, features, training)["pooled_output"]
        pooled = self.dropout(pooled, training=training)
        return {"logits": self.classifier(pooled), "pooled_output": pooled}


class BertSquad(tf_keras.Model):
    """BERT + a linear start/end layer over every token (run_squad's model).

    Its logits at padding positions count (the reference's loss and n-best see them),
    so it skips the padding only when a caller asks: call(..., skip_padding=True) for
    predictions that rank real positions only (run_squad --trim_padding).
    """
    # reads_padding: its n-best ranks every position's logits.
    READS_PADDING = True

    def __init__(self, config, use_one_hot_embeddings=False, name="bert_squad", **kwargs):
        super().__init__(name=name, **kwargs)
        self.bert = modeling.BertModel(config, use_one_hot_embeddings=use_one_hot_embeddings)
        self.cls = SquadHead()

    def call(self, features, training=False, skip_padding=None):
        """Applies the layer (shapes in the class docstring)."""
        sequence = _encode(self.bert, features, training, skip_padding)["sequence_output"]
        start_logits, end_logits = self.cls(sequence)
        return {"start_logits": start_logits, "end_logits": end_logits}


# A --crf tagger's transitions (CrfTransitions' TF1 name).
CRF_VARIABLE = "crf/transitions"


def holds_crf(names):
    """Whether a checkpoint's TF1 variable `names` hold a --crf tagger's transitions (the
    tagger's one rule: exports, conversions and checkpoints.check_serves ask it)."""
    return CRF_VARIABLE in names


class BertTagger(tf_keras.Model):
    """BERT + a per-token tag classifier (run_ner's model).

    Fine-tuned (default): dropout 0.1 on sequence_output, then `tagger/output_weights`
    [num_labels, H] and `tagger/output_bias`. Feature-based (the BERT paper's
    ablation): the encoder is frozen and run without dropout, the encoder layers
    `feature_layers` (e.g. [-1, -2, -3, -4]) are concatenated and fed to a two-layer
    bidirectional LSTM of `lstm_units` per direction, then to the same classifier (on a
    host without a GPU its graphs trace the LSTMs' generic kernel alone: host_lstm_kernels).
    crf (run_ner --crf): the logits are a linear-chain CRF's unary scores over the
    first pieces of the words, with `crf/transitions` [num_labels, num_labels]
    (CrfTransitions); the outputs add "transitions" (with crf_penalties' forbidden
    transitions) and, with penalties, "start_penalty" [num_labels].
    crf_penalties: crf_constraints(labels, scheme) (None: no constraints).
    """
    # reads_padding: its loss and tags skip padding positions.
    READS_PADDING = False

    # Variables a run that does not train may take at their initial value when the
    # checkpoint lacks them (checkpoints.check_serves): the CRF's transitions start at
    # zero, not at random (--crf over a softmax tagger's checkpoint; run_ner warns).
    ZERO_START_VARIABLES = (CRF_VARIABLE,)

    def __init__(self, config, num_labels, use_one_hot_embeddings=False, feature_layers=None,
                 lstm_units=768, crf=False, crf_penalties=None, name="bert_tagger", **kwargs):
        super().__init__(name=name, **kwargs)
        self.num_labels = num_labels
        self.bert = modeling.BertModel(config, use_one_hot_embeddings=use_one_hot_embeddings)
        self.feature_layers = list(feature_layers) if feature_layers else None
        self.dropout = modeling.Dropout(0.1)
        if self.feature_layers:
            self.bert.trainable = False
            self.lstm = [tf_keras.layers.Bidirectional(
                tf_keras.layers.LSTM(lstm_units, return_sequences=True), name="bilstm_%d" % i)
                for i in range(2)]
        self.tagger = OutputProjection(num_labels, config.initializer_range, name="tagger")
        self.crf = CrfTransitions(num_labels, crf_penalties) if crf else None

    def call(self, features, training=False):
        """features -> {"logits": [B, S, num_labels] float32} (+ "transitions" [N, N])."""
        if not self.feature_layers:
            sequence = _encode(self.bert, features, training)["sequence_output"]
            logits = self.tagger(self.dropout(sequence, training=training))
        else:
            layers = _encode(self.bert, features, False)["all_encoder_layers"]
            x = tf.concat([layers[i] for i in self.feature_layers], axis=-1)
            mask = tf.cast(features["input_mask"], tf.bool)
            for lstm in self.lstm:
                host_lstm_kernels(lstm)
                x = lstm(x, mask=mask, training=training)
            logits = self.tagger(x)
        if self.crf is None:
            return {"logits": logits}
        outputs = {"logits": logits, "transitions": self.crf(logits)}
        if self.crf.start_penalty is not None:
            outputs["start_penalty"] = self.crf.start_penalty
        return outputs


# The tf_keras LSTM attribute that says whether a graph may hold its cuDNN kernel.
_CUDNN_ATTRIBUTE = "_could_use_gpu_kernel"


def host_lstm_kernels(bidirectional):
    """Lets the two LSTMs of `bidirectional` (a tf_keras Bidirectional) trace their generic
    kernel alone when no GPU is visible, outside attention.portable_graphs; else both, as
    tf_keras does. Call it before each call of the layer.

    In a graph, tf_keras traces each LSTM twice, its cuDNN kernel and its generic one, and
    Grappler keeps one when the graph runs: on a CPU always the generic one, the very ops
    (outputs and gradients bit for bit the same). Tracing only that one took a two-layer
    BiLSTM's first training step from 6.0 to 2.5 s on a 2-core CPU. A SavedModel keeps
    both, for a GPU that loads it. Nothing changes on a tf_keras without the attribute.
    """
    generic_only = (not attention.tracing_portable_graphs()
                    and not tf.config.list_logical_devices("GPU"))
    for lstm in (bidirectional.forward_layer, bidirectional.backward_layer):
        if not hasattr(lstm, _CUDNN_ATTRIBUTE):
            continue
        if not hasattr(lstm, "bert_tf2_cudnn_capable"):  # tf_keras's own verdict, kept
            lstm.bert_tf2_cudnn_capable = getattr(lstm, _CUDNN_ATTRIBUTE)
        setattr(lstm, _CUDNN_ATTRIBUTE, lstm.bert_tf2_cudnn_capable and not generic_only)


class CrfTransitions(tf_keras.layers.Layer):
    """`crf/transitions` [N, N] float32: the score of tag i followed by tag j.

    Zeros at first: until trained (or restored from a softmax tagger's checkpoint,
    which has none), Viterbi picks every word's own best tag, as the softmax does.
    penalties: crf_constraints' (transitions [N, N], starts [N]) added to what the
    layer gives (the variable, and so the checkpoint, holds the learned scores only);
    None: none.
    """

    def __init__(self, num_labels, penalties=None, name="crf", **kwargs):
        super().__init__(name=name, **kwargs)
        self.num_labels = num_labels
        self.transition_penalty, self.start_penalty = None, None
        if penalties is not None:
            self.transition_penalty = tf.constant(penalties[0], tf.float32)
            self.start_penalty = tf.constant(penalties[1], tf.float32)

    def build(self, input_shape):
        """Creates the transitions (float32 under mixed precision too)."""
        self.transitions = self.add_weight(
            "transitions", shape=[self.num_labels, self.num_labels], initializer="zeros",
            experimental_autocast=False)
        super().build(input_shape)

    def call(self, logits):
        """logits (only to build the layer) -> the transitions [N, N] float32, the
        forbidden ones FORBIDDEN lower."""
        del logits
        if self.transition_penalty is None:
            return tf.convert_to_tensor(self.transitions)
        return self.transitions + self.transition_penalty


# run_ner --crf_tag_scheme's values: "auto" is resolved by run_ner to one of the others.
TAG_SCHEMES = ("auto", "iob2", "none")

# Added to the score of a transition or a start the tag scheme forbids: like the -10000
# the reference adds to masked attention logits, it takes every path through it out of
# the CRF's sums (exp(-10000) is 0 in float32) and maxima.
FORBIDDEN = -10000.0


def iob2_parts(label):
    """("B" | "I", type) of an IOB2 label, ("O", None) for "O", None for any other."""
    if label == "O":
        return "O", None
    if len(label) > 2 and label[:2] in ("B-", "I-"):
        return label[0], label[2:]
    return None


def crf_constraints(labels, scheme):
    """The penalties of a tag scheme: (transitions [N, N], starts [N]) float32 numpy.

    iob2: I-X follows only B-X or I-X (O -> I-X, B-Y -> I-X, I-Y -> I-X forbidden) and
    never starts a sentence; a label outside the scheme (no B- / I- prefix, not O) is
    constrained neither way. none: None (no constraints).

    Args:
      labels: the label list (index i = tag i).
      scheme: one of TAG_SCHEMES but "auto".
    """
    if scheme == "none":
        return None
    if scheme != "iob2":
        raise ValueError("--crf_tag_scheme must be one of iob2, none (auto resolved), "
                         "got %r" % scheme)
    parts = [iob2_parts(label) for label in labels]
    transitions = np.zeros([len(labels), len(labels)], np.float32)
    starts = np.zeros([len(labels)], np.float32)
    for j, to in enumerate(parts):
        if to is None or to[0] != "I":
            continue
        starts[j] = FORBIDDEN
        for i, before in enumerate(parts):
            if before is not None and before not in (("B", to[1]), ("I", to[1])):
                transitions[i, j] = FORBIDDEN
    return transitions, starts


def first_pieces(label_weights):
    """Each row's weighted positions first, in order, then the rest; and their count.

    Args:
      label_weights: [B, S], > 0 on the pieces that carry a word's tag.

    Returns:
      (order [B, S] int32: positions, the weighted ones first; lengths [B] int32).
    """
    weighted = tf.cast(label_weights > 0, tf.int32)
    order = tf.argsort(-weighted, axis=1, stable=True)
    return order, tf.reduce_sum(weighted, axis=1)


def _word_scores(logits, order, start_penalty, starts):
    """The unary scores [B, S, N] float32 in word order, start_penalty added to the
    first word of the chains that start a sentence (starts [B] > 0; None: every one)."""
    word_logits = tf.gather(tf.cast(logits, tf.float32), order, batch_dims=1)
    if start_penalty is None:
        return word_logits
    at_start = (tf.ones([tf.shape(order)[0]]) if starts is None
                else tf.cast(tf.reshape(starts, [-1]) > 0, tf.float32))
    first = tf.one_hot(0, tf.shape(order)[1])
    return word_logits + (first[tf.newaxis, :, tf.newaxis] *
                          (at_start[:, tf.newaxis] * start_penalty)[:, tf.newaxis, :])


def crf_negative_log_likelihood(logits, transitions, label_ids, label_weights,
                                start_penalty=None, starts=None):
    """-log p(the windows' word tags) under the CRF over their first pieces.

    Args:
      logits: [B, S, N] float32 unary scores; label_ids [B, S]; label_weights [B, S].
      transitions: [N, N].
      start_penalty: [N] added to the first word's scores of a chain that starts its
        sentence (crf_constraints; None: nothing); starts: [B], > 0 for those windows
        (None: every window; a window cut from the middle of a sentence starts none).

    Returns:
      (nll [B] float32, 0 for a window without words; has_words [B] float32).
    """
    order, lengths = first_pieces(label_weights)
    word_logits = _word_scores(logits, order, start_penalty, starts)
    word_tags = tf.gather(tf.cast(label_ids, tf.int32), order, batch_dims=1)
    log_likelihood, _ = crf.crf_log_likelihood(word_logits, word_tags, lengths,
                                               tf.cast(transitions, tf.float32))
    return -log_likelihood, tf.cast(lengths > 0, tf.float32)


def crf_predictions(logits, transitions, label_weights, start_penalty=None, starts=None):
    """The Viterbi tags of each window's words, at their first pieces.

    Args:
      logits: [B, S, N] unary scores; transitions [N, N]; label_weights [B, S];
      start_penalty, starts: as crf_negative_log_likelihood's.

    Returns:
      [B, S] int32: the decoded tag at every weighted position (others: no meaning).
    """
    order, lengths = first_pieces(label_weights)
    word_logits = _word_scores(logits, order, start_penalty, starts)
    tags, _ = crf.crf_decode(word_logits, tf.cast(transitions, tf.float32), lengths)
    # Back from word order to positions: the inverse permutation.
    return tf.gather(tags, tf.argsort(order, axis=1), batch_dims=1)


class BertMultipleChoice(tf_keras.Model):
    """BERT + one score per choice from the pooled output (run_multiple_choice's model).

    Inputs are [B, C, S]; the B*C sequences run through BERT as one batch; dropout
    0.1 on the pooled output, then `multiple_choice/output_weights` [1, H] and
    `multiple_choice/output_bias` [1] give a logit per choice: logits [B, C].
    """
    # reads_padding: the pooled [CLS] only.
    READS_PADDING = False

    def __init__(self, config, use_one_hot_embeddings=False, name="bert_multiple_choice",
                 **kwargs):
        super().__init__(name=name, **kwargs)
        self.bert = modeling.BertModel(config, use_one_hot_embeddings=use_one_hot_embeddings)
        self.dropout = modeling.Dropout(0.1)
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


def reads_padding(model):
    """False for the task models that never read an output at a padding position
    (input_mask 0): their encoder may skip those positions (modeling.set_skip_padding).
    Each task model says so (its READS_PADDING, tests/test_modeling.py checks every one
    does); a model that does not (the bare encoder) reads them."""
    return getattr(model, "READS_PADDING", True)


def dummy_features(batch_size=1, seq_length=2, max_predictions_per_seq=1):
    """Zero features with every key the task models read; used to build variables."""
    seq = np.zeros([batch_size, seq_length], np.int32)
    return {
        "input_ids": seq, "input_mask": seq + 1, "segment_ids": seq,
        "masked_lm_positions": np.zeros([batch_size, max_predictions_per_seq], np.int32),
    }
