"""The serving module of exported SavedModels: packing, answer spans and signatures.

`ServingModule` wraps a model and a tokenization_graph.InGraphTokenizer into a
tf.Module whose signatures take raw strings (see export_saved_model.py for the
signatures and their outputs): the reference's [CLS] A [SEP] B [SEP] packing in
the graph (`pack_inputs`); SQuAD's answer() is run_squad's windows and n-best rules
(serving_squad.py), `best_spans` the same rules over one window.
"""
import inspect

import numpy as np
import tensorflow as tf

from bert import modeling
from bert_tf2 import heads
from bert_tf2 import input_pipeline
from bert_tf2.export import graph_ops
from bert_tf2.export import head_types
from bert_tf2.export import masked_lm
from bert_tf2.export import serving_tagger
from bert_tf2.export import serving_squad
from bert_tf2.export import tokenization_graph
from bert_tf2.tasks import multilabel_data
from bert_tf2.tasks import pooling

MODEL_TYPES = head_types.SERVED


# ---------------------------------------------------------------------------
# Packing (the reference's feature conversion, in the graph)
# ---------------------------------------------------------------------------

def pack_inputs(ids_a, ids_b, seq_length, cls_id, sep_id, max_length_a=None,
                bucket_width=None):
    """[CLS] A [SEP] (B [SEP]) -> input_ids, input_mask, segment_ids int32 [B, S].

    As the reference: a row whose B has no tokens is a single text, cut to S - 2
    tokens; a pair is cut to S - 3 tokens by _truncate_seq_pair's rule, and B's [SEP]
    is added only if B keeps a token. With max_length_a (SQuAD), A is first cut to
    max_length_a tokens and B to the room left (S - len(A) - 3), which is
    run_squad's first window; B's [SEP] is always there.

    Args:
      ids_a, ids_b: RaggedTensors [B, (tokens)] of int32 ids.
      bucket_width: None: every row padded to S (seq_length); else to the batch's
        longest packed row rounded up by input_pipeline.bucket_length (at most S),
        the command line's trimmed batches. The truncation is S's either way.

    Returns:
      dict of input_ids, input_mask, segment_ids (int32 [B, S] or [B, bucket]) and
      len_a, len_b (int64 [B], the tokens of A and B kept).
    """
    len_a = ids_a.row_lengths()
    len_b = ids_b.row_lengths()
    if max_length_a is not None:
        keep_a = tf.minimum(len_a, max_length_a)
        keep_b = tf.minimum(len_b, seq_length - 3 - keep_a)
        has_b = tf.ones_like(keep_b, tf.bool)
    else:
        pair_a, pair_b = input_pipeline.truncated_pair_lengths(len_a, len_b, seq_length - 3)
        keep_a = tf.where(len_b > 0, pair_a, tf.minimum(len_a, seq_length - 2))
        keep_b = tf.where(len_b > 0, pair_b, 0)
        has_b = keep_b > 0
    # Every row: [CLS] at 0, A from 1, [SEP] after it, B after that, then B's [SEP].
    first_b = keep_a + 2
    total = first_b + keep_b + tf.cast(has_b, tf.int64)

    def scatter_values(ids, keep, first):
        rows = graph_ops.value_rowids(ids)
        position = (tf.range(tf.size(rows, out_type=tf.int64))
                    - tf.gather(ids.row_starts(), rows))
        kept = position < tf.gather(keep, rows)
        rows = graph_ops.boolean_mask(rows, kept)
        columns = graph_ops.boolean_mask(position, kept) + tf.gather(first, rows)
        return tf.stack([rows, columns], axis=1), graph_ops.boolean_mask(ids.flat_values, kept)

    num_rows = tf.size(len_a, out_type=tf.int64)
    batch = tf.range(num_rows)
    width = tf.constant(seq_length, tf.int64)
    if bucket_width is not None:
        longest = tf.reduce_max(tf.concat([total, [0]], axis=0))
        width = input_pipeline.bucket_length(longest, seq_length, bucket_width)
    index_a, values_a = scatter_values(ids_a, keep_a, tf.ones_like(keep_a))
    index_b, values_b = scatter_values(ids_b, keep_b, first_b)
    special_index = tf.concat([
        tf.stack([batch, tf.zeros_like(batch)], axis=1),
        tf.stack([batch, keep_a + 1], axis=1),
        graph_ops.boolean_mask(tf.stack([batch, first_b + keep_b], axis=1), has_b)], axis=0)
    special_ids = tf.concat([
        tf.fill([num_rows], cls_id), tf.fill([num_rows], sep_id),
        tf.fill([tf.reduce_sum(tf.cast(has_b, tf.int64))], sep_id)], axis=0)
    input_ids = tf.scatter_nd(
        tf.concat([index_a, index_b, special_index], axis=0),
        tf.concat([values_a, values_b, special_ids], axis=0),
        tf.stack([num_rows, width]))
    columns = tf.range(width)[tf.newaxis, :]
    input_mask = columns < total[:, tf.newaxis]
    segment_ids = input_mask & (columns >= first_b[:, tf.newaxis])
    shape = [None, seq_length if bucket_width is None else None]
    return {"input_ids": tf.ensure_shape(input_ids, shape),
            "input_mask": tf.ensure_shape(tf.cast(input_mask, tf.int32), shape),
            "segment_ids": tf.ensure_shape(tf.cast(segment_ids, tf.int32), shape),
            "len_a": keep_a, "len_b": keep_b}


# ---------------------------------------------------------------------------
# SQuAD answer selection
# ---------------------------------------------------------------------------

def best_spans(start_logits, end_logits, len_a, len_b, n_best_size, max_answer_length):
    """The reference's best span of one window per row, in the graph (every context
    position counting as its max context: a question of one window; answer() itself
    uses serving_squad.best_span over all windows).

    Candidates: the n_best_size best start and end positions (over the whole window,
    ties to the lower position, as sorted() does), pairs with both positions in the
    context part (positions len_a + 2 ... len_a + 1 + len_b), start <= end and
    end - start + 1 <= max_answer_length. The best sum of logits wins; among equal
    sums, the first in the reference's order (by start rank, then end rank).

    Returns:
      (start, end, score, found): int32 positions (-1 when none), float32 score
      (-inf when none), bool found; each [B].
    """
    k = tf.minimum(n_best_size, tf.shape(start_logits)[1])
    start_values, start_index = tf.math.top_k(start_logits, k=k)
    end_values, end_index = tf.math.top_k(end_logits, k=k)
    first = tf.cast(len_a, tf.int32)[:, tf.newaxis] + 2
    last = first + tf.cast(len_b, tf.int32)[:, tf.newaxis] - 1

    def in_context(index):
        return (index >= first) & (index <= last)

    starts = start_index[:, :, tf.newaxis]
    ends = end_index[:, tf.newaxis, :]
    valid = (in_context(start_index)[:, :, tf.newaxis] & in_context(end_index)[:, tf.newaxis, :]
             & (ends >= starts) & (ends - starts + 1 <= max_answer_length))
    scores = start_values[:, :, tf.newaxis] + end_values[:, tf.newaxis, :]
    scores = tf.where(valid, scores, -np.inf)
    flat = tf.reshape(scores, [tf.shape(scores)[0], -1])
    flat_valid = tf.reshape(valid, tf.shape(flat))
    best = tf.reduce_max(flat, axis=1, keepdims=True)
    order = tf.range(tf.shape(flat)[1])[tf.newaxis, :]
    big = tf.shape(flat)[1]
    choice = tf.reduce_min(tf.where(flat_valid & tf.equal(flat, best), order, big), axis=1)
    found = choice < big
    choice = tf.minimum(choice, big - 1)
    start = tf.gather(start_index, choice // k, batch_dims=1)
    end = tf.gather(end_index, choice % k, batch_dims=1)
    score = tf.gather(flat, choice, axis=1, batch_dims=1)
    return (tf.where(found, start, -1), tf.where(found, end, -1),
            tf.where(found, score, -np.inf), found)


# ---------------------------------------------------------------------------
# The exported module
# ---------------------------------------------------------------------------

def build_model(model_type, bert_config, num_labels=None, feature_layers=None, lstm_units=768,
                crf=False, crf_penalties=None):
    """The Keras model of `model_type`, its variables created.

    feature_layers, lstm_units: a tagger trained with run_ner --feature_based;
    crf: one trained with run_ner --crf (its tags are Viterbi's), crf_penalties its
    tag scheme's (heads.crf_constraints; None: none).
    """
    return head_types.get(model_type).build(
        bert_config, num_labels=num_labels, feature_layers=feature_layers,
        lstm_units=lstm_units, crf=crf, crf_penalties=crf_penalties)


_ID_KEYS = ("input_ids", "input_mask", "segment_ids")


def default_trim_padding(model_type):
    """Whether requests are packed to their longest row by default: all but SQuAD.

    A SQuAD window's n-best ranks padding positions too (as run_squad does by
    default), so trimming could change an answer: it is asked for explicitly.
    """
    return head_types.get(model_type).trims_by_default


class ServingModule(tf.Module):
    """What gets saved: the tokenizer, the model's variables and the signatures.

    trim_padding (default: default_trim_padding(model_type)): the classifier, tagger,
    multiple-choice and SQuAD signatures pack each request to its longest row
    rounded up to a multiple of 16 (input_pipeline.bucket_length, as the command
    line's evaluation does) instead of max_seq_length; the SQuAD answer then ranks
    real positions only (squad_results.real_position_logits). The encoder's
    serving_default keeps max_seq_length (its outputs are per position); its embed
    always runs texts sorted by length in batches of at most embed_batch_size rows,
    each at its longest text. doc_stride: a tagger's windows, run_ner's --doc_stride
    (serving_tagger; None: run_ner's default).
    """

    def __init__(self, model_type, model, tokenizer, max_seq_length, labels=None,
                 max_query_length=64, max_answer_length=30, n_best_size=20,
                 pooling_spec=None, threshold=None, long_text=None, trim_padding=None,
                 embed_batch_size=32, doc_stride=None, squad_rules=None, top_k=5):
        super().__init__(name="bert_serving")
        self.threshold = threshold  # set: a multi-label classifier (sigmoid outputs)
        self.pooling_spec = pooling_spec  # encoder: the sentence_embedding output
        self.model_type = model_type
        self.head = head_types.get(model_type)
        self.tokenizer = tokenizer
        self.model_variables = list(model.variables)
        self.max_seq_length = max_seq_length
        self.labels = None if labels is None else tuple(str(label) for label in labels)
        self.regression = labels is not None and list(labels) == [None]
        # SQuAD: run_squad's prediction settings (squad_rules, a serving_squad.SquadRules,
        # else these three with run_squad's other defaults).
        if squad_rules is None:
            squad_rules = serving_squad.SquadRules(
                max_query_length=max_query_length, max_answer_length=max_answer_length,
                n_best_size=n_best_size)
        self.squad_rules = squad_rules
        self.max_query_length = squad_rules.max_query_length
        self.max_answer_length = squad_rules.max_answer_length
        self.n_best_size = squad_rules.n_best_size
        # What this head's signatures keep beyond these (SQuAD: id -> piece; fill-mask:
        # top_k, [MASK]'s id, id -> piece).
        self.top_k = None
        for name, value in self.head.serving_state(tokenizer, max_seq_length, squad_rules,
                                                   top_k).items():
            setattr(self, name, value)
        self.crf = getattr(model, "crf", None) is not None  # a run_ner --crf tagger
        # Its tag scheme: constrained transitions and starts (crf_tag_scheme iob2).
        self.crf_tag_scheme = "iob2" if self.crf and model.crf.start_penalty is not None else (
            "none")
        # A tagger's windows: run_ner's --doc_stride (None: its default).
        self.doc_stride = serving_tagger.check_doc_stride(doc_stride)
        if trim_padding is None:
            trim_padding = default_trim_padding(model_type)
        self.trim_padding = bool(trim_padding)
        # Trimmed requests of a model that reads no padding output: the real tokens only.
        modeling.set_skip_padding(model, self.trim_padding and not heads.reads_padding(model))
        if embed_batch_size < 1:
            raise ValueError("the embed batch size must be >= 1, got %d" % embed_batch_size)
        self.embed_batch_size = int(embed_batch_size)
        # long_text: a classifier's long_text.LongText other than truncate (head_tail,
        # windows): graph_windows cuts the texts, graph_pool pools the window logits.
        # run_model: the model at any length, traced once; every signature calls it,
        # so the SavedModel holds one copy of the model's graph.
        ids_any_length = [tf.TensorSpec([None, None], tf.int32)] * 3
        self._holder = tokenization_graph.Untracked(
            model=model, long_text=self.head.long_text_mode(long_text),
            run_model=tf.function(self._run_model, input_signature=ids_any_length,
                                  autograph=False))
        self._holder.by_method = {}  # the signatures' tf.functions by method name
        self._holder.signatures = self._make_signatures()

    def _make_signatures(self):
        """The tf.functions of the signatures of this model type, by name."""
        def text(name):
            return tf.TensorSpec([None], tf.string, name=name)

        def function(method, *specs):
            # Every string input is checked to be UTF-8 first (checked_utf8).
            def checked(*args):
                return method(*[tokenization_graph.checked_utf8(arg, spec.name)
                                if spec.dtype == tf.string else arg
                                for arg, spec in zip(args, specs)])
            checked.__name__ = method.__name__
            checked.__signature__ = inspect.signature(method)
            return tf.function(checked, input_signature=list(specs), autograph=False)

        ids = [tf.TensorSpec([None, self.max_seq_length], tf.int32, name=name)
               for name in _ID_KEYS]
        self.serving_ids = function(self._serve_ids, *ids)
        self.tokenize = function(self._tokenize, text("text"))
        # Given to tf.saved_model.save as tf.functions, not concrete functions: traced
        # once, inside the save (a trace made before it would be made again there).
        signatures = {"serving_ids": self.serving_ids, "tokenize": self.tokenize}
        # The head's signatures: (name, method, inputs, the attribute it needs set).
        for name, method, inputs, needs in self.head.serving_functions:
            if needs is None or getattr(self, needs) is not None:
                specs = [tf.TensorSpec([None] * rank, tf.string, name=input_name)
                         for input_name, rank in inputs]
                signatures[name] = function(getattr(self, "_" + method), *specs)
                setattr(self, name, signatures[name])
                self._holder.by_method[method] = signatures[name]
        return signatures

    def signatures(self):
        """The signatures to save, by name (tf.functions with input signatures)."""
        return dict(self._holder.signatures)

    @property
    def _bucket_width(self):
        """Packing of the text signatures: a bucket width, or None for max_seq_length."""
        return self.head.bucket_width(self.trim_padding)

    # -- model outputs ------------------------------------------------------

    def crf_parameters(self):
        """A --crf tagger's Viterbi parameters as the signatures decode with them:
        (transitions float32 [N, N] with the tag scheme's forbidden ones, start_penalty
        float32 [N] or None); None for every other model."""
        crf = self._holder.model.crf if self.crf else None
        if crf is None:
            return None
        start = crf.start_penalty
        return (np.asarray(crf(None), np.float32),
                None if start is None else np.asarray(start, np.float32))

    def run_ids(self, input_ids, input_mask, segment_ids):
        """The model's outputs on packed ids, for tracing into another graph (what
        export/litert.py converts): every position computed (no skip_padding, whose
        tf.cond and data-dependent shapes LiteRT's int8 calibration cannot see into; the
        real tokens' outputs are the same) and none of the signatures' shape checks
        (tf.ensure_shape has no LiteRT kernel)."""
        model = self._holder.model
        modeling.set_skip_padding(model, False)
        try:
            return self._run_model(input_ids, input_mask, segment_ids)
        finally:
            modeling.set_skip_padding(
                model, self.trim_padding and not heads.reads_padding(model))

    def _run_model(self, input_ids, input_mask, segment_ids):
        return self._model_outputs({"input_ids": input_ids, "input_mask": input_mask,
                                    "segment_ids": segment_ids})

    def _model_outputs(self, features):
        return self.head.serving_outputs(self, self._holder.model, features)  # its head's

    def encoder_outputs(self, model, features):
        """The encoder's outputs (head_classes.Encoder.serving_outputs): its per-position
        outputs, and sentence_embedding when the module pools."""
        out = model(features["input_ids"], features["input_mask"],
                    features["segment_ids"], training=False)
        outputs = {} if self.pooling_spec is None else {
            "sentence_embedding": self._pool(out, features["input_mask"])}
        return dict(outputs, **{
            "pooled_output": tf.cast(out["pooled_output"], tf.float32),
            "sequence_output": tf.cast(out["sequence_output"], tf.float32),
            "encoder_layers": tf.stack(
                [tf.cast(x, tf.float32) for x in out["all_encoder_layers"]], axis=1),
            "input_ids": features["input_ids"],
            "input_mask": features["input_mask"],
            "segment_ids": features["segment_ids"],
        })

    def classifier_answers(self, logits):
        """A classifier's outputs of its logits [B, C] (regression, multi-label, labels)."""
        if self.regression:
            return {"predictions": logits[:, 0], "logits": logits}
        if self.threshold is not None:
            return multilabel_data.serving_outputs(logits, self.labels, self.threshold)
        probabilities = tf.nn.softmax(logits, axis=-1)
        names = tf.constant(self.labels)
        batch = tf.shape(logits)[0]
        return {
            "probabilities": probabilities,
            "logits": logits,
            "predicted_label": tf.gather(names, tf.argmax(probabilities, axis=-1)),
            "labels": tf.tile(names[tf.newaxis, :], [batch, 1]),
        }

    def _pool(self, out, input_mask):
        spec = self.pooling_spec
        return pooling.pool([out["all_encoder_layers"][i] for i in spec.layers], input_mask,
                            spec.mode, spec.normalize)

    def _embed(self, text):
        """sentence_embedding alone, texts run longest first in short batches (same vectors).

        The request's texts are sorted by length (ties in input order, as
        input_pipeline.length_sorted_batches) and run embed_batch_size at a time, each
        batch cut to its longest text, as extract_features' sentence vectors are; the
        vectors come back in the request's order.
        """
        features = self._pack(text, tf.fill(tf.shape(text), ""), bucket_width=1)
        lengths = tf.reduce_sum(features["input_mask"], axis=1)
        order = tf.argsort(lengths, direction="DESCENDING", stable=True)
        num_rows = tf.size(order)
        size = self.embed_batch_size
        dim = self._holder.model.config.hidden_size * len(self.pooling_spec.layers)

        def embed_batch(start, vectors):
            rows = order[start:start + size]
            length = tf.reduce_max(tf.gather(lengths, rows))
            cut = [tf.gather(features[k], rows)[:, :length] for k in _ID_KEYS]
            pooled = self._pool(self._holder.model(*cut, training=False, skip_padding=True),
                                cut[1])
            return start + size, tf.tensor_scatter_nd_update(vectors, rows[:, tf.newaxis],
                                                             pooled)

        _, vectors = tf.while_loop(lambda start, _: start < num_rows, embed_batch,
                                   (tf.constant(0), tf.zeros([num_rows, dim])),
                                   parallel_iterations=1)
        return {"sentence_embedding": vectors}

    def _serve_ids(self, input_ids, input_mask, segment_ids):
        return self._forward({"input_ids": input_ids, "input_mask": input_mask,
                              "segment_ids": segment_ids})

    def _forward(self, features):
        """The model on packed features (run_model); full-length outputs keep S static."""
        outputs = self._holder.run_model(*[features[k] for k in _ID_KEYS])
        if features["input_ids"].shape[1] != self.max_seq_length:
            return outputs
        for name, axis in self.head.sequence_axes.items():
            shape = [None] * outputs[name].shape.rank
            shape[axis] = self.max_seq_length
            outputs[name] = tf.ensure_shape(outputs[name], shape)
        return outputs

    # -- text in ------------------------------------------------------------

    def _tokenize(self, text):
        ids = self.tokenizer.tokenize(text)
        return {"token_ids": ids.to_tensor(default_value=-1),
                "num_tokens": tf.cast(ids.row_lengths(), tf.int32)}

    def _pack_ids(self, ids_a, ids_b, bucket_width=None, max_length_a=None):
        return pack_inputs(ids_a, ids_b, self.max_seq_length, self.tokenizer.cls_id,
                           self.tokenizer.sep_id, max_length_a=max_length_a,
                           bucket_width=bucket_width)

    def _pack(self, text_a, text_b, cut=None, bucket_width=None):
        # One tokenizer call for both texts (half the per-call cost at small batches).
        num_rows = tf.shape(text_a)[0]
        with tf.control_dependencies([tf.debugging.assert_equal(
                tf.shape(text_b)[0], num_rows,
                message="text_a and text_b must have the same number of rows")]):
            ids = self.tokenizer.tokenize(tf.concat([text_a, text_b], axis=0))
        ids_a, ids_b = graph_ops.split_rows(ids, num_rows)
        if cut is not None:  # (ids_a, ids_b, S) -> (ids_a, ids_b, rows), e.g. windows
            ids_a, ids_b, rows = cut(ids_a, ids_b, self.max_seq_length)
        features = self._pack_ids(ids_a, ids_b, bucket_width)
        return features if cut is None else (features, rows)

    def _serve_pair(self, text_a, text_b):
        long_text = self._holder.long_text
        if long_text is None:
            return self._forward(self._pack(text_a, text_b, bucket_width=self._bucket_width))
        features, rows = self._pack(text_a, text_b, long_text.graph_windows,
                                    bucket_width=self._bucket_width)
        logits = self._forward(features)["logits"]
        return self.classifier_answers(long_text.graph_pool(logits, rows))

    def _serve_single(self, text_a):
        # The pair signature's function, called: traced once for both signatures, and the
        # SavedModel holds one copy of its graph.
        return self._holder.by_method["serve_pair"](text_a, tf.fill(tf.shape(text_a), ""))

    # -- SQuAD --------------------------------------------------------------

    def _squad_features(self, question, context):
        context_ids, span_starts, span_limits = self.tokenizer.tokenize_with_spans(context)
        features = self._pack_ids(self.tokenizer.tokenize(question), context_ids,
                                  self._bucket_width, max_length_a=self.max_query_length)
        return features, span_starts, span_limits

    def _serve_squad(self, question, context):
        features, _, _ = self._squad_features(question, context)
        outputs = self._forward(features)
        for key in _ID_KEYS:
            outputs[key] = features[key]
        return outputs

    def _answer(self, question, context):
        """run_squad's answer over every window of the context (serving_squad.answer)."""
        def pack(ids_a, ids_b, max_length_a):
            return self._pack_ids(ids_a, ids_b, self._bucket_width, max_length_a=max_length_a)
        return serving_squad.answer(question, context, self.tokenizer, self.squad_tokens,
                                    self.squad_rules, self.max_seq_length, pack,
                                    self._forward, self.trim_padding)

    # -- tagging (run_ner) ---------------------------------------------------

    def _tag(self, text):
        """Per word its tag, and the entities: what run_ner predicts, on raw text
        (serving_tagger: its words, windows and Viterbi)."""
        words = serving_tagger.split_words(text)
        windowed = serving_tagger.windows(words, self.tokenizer.tokenize(words["strings"]),
                                          self.max_seq_length, self.doc_stride)
        ids = windowed["ids"]
        empty = tf.RaggedTensor.from_row_lengths(tf.zeros([0], ids.dtype),
                                                 tf.zeros_like(ids.row_lengths()))
        logits = self._forward(self._pack_ids(ids, empty, self._bucket_width))["logits"]
        tag_ids = serving_tagger.word_tag_ids(
            logits, windowed, tf.size(words["strings"], out_type=tf.int64),
            self._holder.model.crf)
        return serving_tagger.tagged_outputs(text, words, tag_ids, self.labels)

    # -- fill-mask ------------------------------------------------------------

    def _fill_mask(self, text):
        """Each [MASK]'s top_k tokens, ids and probabilities (masked_lm: the Predictor's
        pieces, cut and refusals)."""
        ids, counts = masked_lm.graph_pieces(self.tokenizer, text, self.mask_id)
        empty = tf.RaggedTensor.from_row_lengths(tf.zeros([0], ids.dtype),
                                                 tf.zeros_like(ids.row_lengths()))
        features = self._pack_ids(ids, empty, self._bucket_width)
        checks = masked_lm.check_masks(counts, features["input_ids"], self.mask_id,
                                       self.max_seq_length)
        with tf.control_dependencies(checks):
            outputs = self._forward(features)
        return masked_lm.served_answers(outputs, self.fill_tokens, self.tokenizer)

    # -- multiple choice ----------------------------------------------------

    def _choose(self, context, endings):
        """Choice probabilities of [B] contexts and their [B, C] endings."""
        num_choices = tf.shape(endings)[1]
        contexts = tf.reshape(tf.tile(context[:, tf.newaxis], [1, num_choices]), [-1])
        ids = self.tokenizer.tokenize(tf.concat([contexts, tf.reshape(endings, [-1])], 0))
        rows = tf.shape(contexts)[0]
        features = self._pack_ids(*graph_ops.split_rows(ids, rows), self._bucket_width)
        logits = tf.reshape(self._forward(features)["logits"], [-1, num_choices])
        return {"probabilities": tf.nn.softmax(logits, axis=-1), "logits": logits,
                "predicted_choice": tf.argmax(logits, axis=-1, output_type=tf.int32)}
