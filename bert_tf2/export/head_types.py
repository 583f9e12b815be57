"""The head registry: one entry per model type a model folder or a door can hold, each an
instance of its head's class (bert_tf2/export/head_classes.py: its data and the methods the
doors call), and the lookups the doors and converters use (find, get, of_runner, held_by,
detect_tf1, ...) instead of comparing type names. Adding a model type is one class there
and one entry here beside its model and module (docs/developing.md, "Adding a head").

This module imports nothing of the project at load time but head_classes and
request_kinds, plain Python (LiteRTPredictor reads it without TensorFlow); the builders
import the models when called.
"""
import types

from bert_tf2.export import head_classes
from bert_tf2.export import request_kinds

ModelType = head_classes.ModelType
SIGNATURES = request_kinds.SIGNATURES


def _build_encoder(bert_config, **unused):
    import modeling  # pylint: disable=import-outside-toplevel
    from bert_tf2 import heads  # pylint: disable=import-outside-toplevel
    model = modeling.BertModel(bert_config)
    dummy = heads.dummy_features()
    model(dummy["input_ids"], dummy["input_mask"], dummy["segment_ids"])
    return model


def _head_builder(class_name, *keys):
    """A builder of heads.`class_name` (bert_tf2/heads.py), given the keyword arguments `keys`
    (num_labels first, positionally, when it is one of them)."""
    def build(bert_config, **kwargs):
        from bert_tf2 import heads  # pylint: disable=import-outside-toplevel
        given = {key: kwargs.get(key) for key in keys if key != "num_labels"}
        args = (kwargs.get("num_labels"),) if "num_labels" in keys else ()
        model = getattr(heads, class_name)(bert_config, *args, **given)
        model(heads.dummy_features(), training=False)
        return model
    build.__name__ = "build_" + class_name
    return build




def _axes(**axes):
    return types.MappingProxyType(axes)


# In export_saved_model --model_type's order (its flag and messages list them so).
# The masked-LM head's weights, TF1 name -> HF name: the pre-training head's first part and
# fill-mask's whole head.
_MASKED_LM_KEYS = (
            ("cls/predictions/transform/dense/kernel", "cls.predictions.transform.dense.weight"),
            ("cls/predictions/transform/dense/bias", "cls.predictions.transform.dense.bias"),
            ("cls/predictions/transform/LayerNorm/gamma",
             "cls.predictions.transform.LayerNorm.weight"),
            ("cls/predictions/transform/LayerNorm/beta",
             "cls.predictions.transform.LayerNorm.bias"),
            ("cls/predictions/output_bias", "cls.predictions.bias"),
)

# keras-hub's BertMaskedLM: where the masked-LM head's weights sit, and how it differs.
_KERAS_HUB_MASKED_LM = (
    ("cls/predictions/transform/dense/kernel", "masked_lm_head._intermediate_dense", "kernel"),
    ("cls/predictions/transform/dense/bias", "masked_lm_head._intermediate_dense", "bias"),
    ("cls/predictions/transform/LayerNorm/gamma", "masked_lm_head._intermediate_layer_norm",
     "gamma"),
    ("cls/predictions/transform/LayerNorm/beta", "masked_lm_head._intermediate_layer_norm",
     "beta"),
    ("cls/predictions/output_bias", "masked_lm_head", "_bias"),
)
_KERAS_HUB_MASKED_LM_NOTE = (
    "keras-hub's BertMaskedLM computes its masked-LM transform with the exact erf GELU and "
    "LayerNorm epsilon 1e-5 (ours: tanh GELU, 1e-12) and has no next-sentence head: its "
    "logits differ slightly from ours and cls/seq_relationship is not written")

ENTRIES = (
    head_classes.Encoder(
        "encoder", None, ("encoder", "sentence embedding"), build=_build_encoder,
        tf1_rank=3, litert_rank=1,
        checks_head=False, sentence_embedding=True, litert_outputs=("sentence_embedding",),
        litert_compared=("sentence_embedding",),
        sequence_axes=_axes(sequence_output=1, encoder_layers=2, input_ids=1, input_mask=1,
                            segment_ids=1),
        flags=("layers", "pooling", "normalize"), hf_class="BertModel", hf_rank=6,
        hf_prefix="", held_rank=5, keras_hub_class="BertBackbone"),
    head_classes.Classifier(
        "classifier", "run_classifier",
        ("classifier", "multi-label classifier", "regression", "long-text classifier"),
        build=_head_builder("BertClassifier", "num_labels"), tf1_rank=1,
        litert_rank=0,
        litert_refused=("multi-label classifier", "long-text classifier"),
        labels=True, class_labels=True,
        litert_outputs=("probabilities", "logits", "predictions"),
        litert_compared=("predictions", "probabilities"),
        flags=("task_name", "xnli_language", "labels_file", "threshold", "long_text",
               "head_tokens", "doc_stride", "window_pooling"),
        hf_class="BertForSequenceClassification",
        hf_head_keys=(("output_weights", "classifier.weight"),
                      ("output_bias", "classifier.bias")), hf_rank=2, held_rank=1,
        held_marks=("output_weights", "output_bias"), label_variable="output_weights",
        keras_hub_class="BertTextClassifier",
        keras_hub_weights=(("output_weights", "output_dense", "kernel"),
                           ("output_bias", "output_dense", "bias"))),
    head_classes.Squad(
        "squad", "run_squad", ("squad v1.1", "squad v2.0"),
        build=_head_builder("BertSquad"), tf1_rank=2,
        litert_rank=3, signature="squad",
        sequence_axes=_axes(start_logits=1, end_logits=1), trims_by_default=False,
        litert_outputs=("start_logits", "end_logits"),
        litert_compared=("start_logits", "end_logits"),
        flags=("max_query_length", "max_answer_length", "n_best_size", "doc_stride",
               "version_2_with_negative", "null_score_diff_threshold"),
        hf_class="BertForQuestionAnswering", hf_pooler=False,
        hf_head_keys=(("cls/squad/output_weights", "qa_outputs.weight"),
                      ("cls/squad/output_bias", "qa_outputs.bias")), hf_rank=4, held_rank=2,
        held_marks=("cls/squad/output_weights", "cls/squad/output_bias")),
    head_classes.Tagger(
        "tagger", "run_ner", ("tagger softmax", "tagger crf", "tagger bilstm"),
        build=_head_builder("BertTagger", "num_labels", "feature_layers", "lstm_units",
                            "crf", "crf_penalties"),
        litert_rank=2, signature="words", sequence_axes=_axes(logits=1),
        labels=True, litert_outputs=("logits",), litert_compared=("logits",),
        flags=("labels_file", "feature_based", "layers", "lstm_units", "crf",
               "crf_tag_scheme", "doc_stride"),
        hf_class="BertForTokenClassification", hf_pooler=False,
        hf_head_keys=(("tagger/output_weights", "classifier.weight"),
                      ("tagger/output_bias", "classifier.bias")), hf_rank=3, held_rank=0,
        held_marks=("tagger/output_weights",), label_variable="tagger/output_weights"),
    head_classes.MultipleChoice(
        "multiple_choice", "run_multiple_choice", ("multiple choice",),
        build=_head_builder("BertMultipleChoice"), signature="choices",
        hf_class="BertForMultipleChoice",
        hf_head_keys=(("multiple_choice/output_weights", "classifier.weight"),
                      ("multiple_choice/output_bias", "classifier.bias")), hf_rank=5,
        held_rank=3,
        held_marks=("multiple_choice/output_weights", "multiple_choice/output_bias")),
    head_classes.Pretraining(
        "pretraining", "run_pretraining", ("pretraining",),
        build=_head_builder("BertPretrainer"), serves=False, tf1_rank=0,
        served_as="encoder", hf_class="BertForPreTraining",
        hf_head_keys=_MASKED_LM_KEYS + (
            ("cls/seq_relationship/output_weights", "cls.seq_relationship.weight"),
            ("cls/seq_relationship/output_bias", "cls.seq_relationship.bias")), hf_rank=0,
        held_rank=4,
        held_marks=("cls/predictions/output_bias", "cls/seq_relationship/output_weights"),
        keras_hub_class="BertMaskedLM", keras_hub_weights=_KERAS_HUB_MASKED_LM,
        keras_hub_note=_KERAS_HUB_MASKED_LM_NOTE),
    # Fill-mask: bert_tf2/export/masked_lm.py (its model, inputs, decoding, Predictor and
    # the SavedModel / LiteRT graph).
    head_classes.MaskedLM(
        "masked_lm", None, ("masked lm",), build=_head_builder("BertMaskedLM"),
        litert_rank=4, signature="fill_mask",
        sequence_axes=_axes(token_ids=1, probabilities=1),
        litert_outputs=("token_ids", "probabilities", "num_masks"),
        litert_compared=("probabilities",), flags=("fill_mask_top_k",),
        part_of=("pretraining",), hf_class="BertForMaskedLM", hf_pooler=False,
        hf_head_keys=_MASKED_LM_KEYS, hf_rank=1),
)

_BY_NAME = {entry.name: entry for entry in ENTRIES}

# The --model_type values of each door, in the order their flags and messages list them.
SERVED = tuple(entry.name for entry in ENTRIES if entry.serves)
LITERT = tuple(entry.name for entry in sorted(
    (e for e in ENTRIES if e.litert), key=lambda e: e.litert_rank))
TF1 = tuple(entry.name for entry in sorted(
    (e for e in ENTRIES if e.tf1_rank is not None), key=lambda e: e.tf1_rank))
HF = tuple(entry.name for entry in sorted(
    (e for e in ENTRIES if e.hf_rank is not None), key=lambda e: e.hf_rank))
_HELD = tuple(sorted((e for e in ENTRIES if e.held_rank is not None),
                     key=lambda e: e.held_rank))


def find(name):
    """The entry of model type `name`, or None."""
    return _BY_NAME.get(name)


def signature_of(name):
    """The Signature of model type `name`'s serving_default."""
    return SIGNATURES[_BY_NAME[name].signature]


def get(name, choices=SERVED, flag="--model_type"):
    """The entry of `name`, one of `choices`; else ValueError naming the flag and them."""
    if name not in choices:
        raise ValueError("%s must be one of %s, got %r" % (flag, ", ".join(choices), name))
    return _BY_NAME[name]


def of_runner(runner):
    """The model type of a model folder its `runner` wrote (run_pretraining: the
    encoder), or None."""
    entry = next((e for e in ENTRIES if e.runner == runner), None)
    return _BY_NAME[entry.served_as] if entry and entry.served_as else entry


def folder_runner(entry):
    """The runner a model folder of `entry`'s type is recorded as (model_settings.json): its
    own, else that of the type served as it (the encoder: run_pretraining's); or None."""
    if entry.runner:
        return entry.runner
    return next((e.runner for e in ENTRIES if e.served_as == entry.name), None)


def of_hf_class(hf_class):
    """The entry whose HuggingFace export is the transformers class `hf_class` (config.json's
    architectures[0]), or None."""
    return next((entry for entry in ENTRIES if entry.hf_class and entry.hf_class == hf_class),
                None)


def held_by(names):
    """The entry of the head the export doors read in a checkpoint's TF1 variable `names`
    (the first, in held_rank order, whose held_marks are all there; else the encoder)."""
    names = set(names)
    return next(entry for entry in _HELD if entry.holds(names))


def feature_based(names):
    """Whether the TF1 variable `names` are a feature-based tagger's (its BiLSTM: the
    tagger head's rule)."""
    return _BY_NAME["tagger"].feature_based(names)


def detect_tf1(names):
    """The first convertible type (TF1's order: convert_tf1_checkpoint --model_type=auto)
    whose head the TF1 variable `names` hold (the heads' one rule, as held_by)."""
    names = set(names)
    return next(_BY_NAME[name] for name in TF1 if _BY_NAME[name].holds(names))
