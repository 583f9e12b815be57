"""One entry per model type a model folder or a door can hold: what each door needs.

The doors (export_saved_model's SavedModel and its serving module, its warm-up requests,
the LiteRT step and LiteRTPredictor) and the converters (convert_tf1_checkpoint, the
HuggingFace and keras-hub conversions, both ways) look a model type up here and read its
entry, instead of comparing type names: how it is built, its TF1 variables and how a
checkpoint shows it (held_by), its serving signature (a Signature: what its requests take)
and outputs, whether LiteRT carries it, its HuggingFace and keras-hub classes and head
weights, its label rows, the per-head post-processing it needs (a tagger's word windows
and Viterbi, SQuAD's windows and n-best). A head's own door code stays in its module
(serving_tagger, serving_squad, masked_lm, tasks/ner_data, tasks/squad_results); its entry
says which of those apply. Adding a model type is one entry here beside its model and
module (docs/developing.md, "Adding a head").

This module imports nothing of the project at load time (LiteRTPredictor reads it without
TensorFlow); the builders import the models when called.
"""
import dataclasses
import types
from typing import Callable, Optional, Tuple


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


@dataclasses.dataclass(frozen=True)
class ModelType:
    """A model type (export_saved_model / convert_tf1_checkpoint --model_type, a model
    folder's type) and what each door does with it.

    Fields:
      name: the --model_type value (export_info.json's model_type).
      runner: the runner whose model folders hold it (None: the encoder, any folder's).
      heads: the head types of it the project trains (documentation and tests).
      build: bert_config, num_labels=..., feature_layers=..., ... -> its built Keras model.
      serves: export_saved_model exports it (a SavedModel of raw strings).
      tf1_rank: convert_tf1_checkpoint converts it; --model_type=auto tries the types in
        this order (None: not converted).
      tf1_marker: the TF1 variable name that shows a checkpoint holds this head ("x/": a
        variable under x/); None: any checkpoint (the encoder).
      litert_rank: LiteRT carries it (--litert, LiteRTPredictor), listed in this order;
        None: refused.
      litert_refused: its heads LiteRT refuses all the same (litert_step.check says so).
      signature: which inputs serving_default takes: "pair" (text_a, text_b; also
        serving_text_a), "words" (text: serving_tagger's words and windows), "choices"
        (context, endings), "squad" (question, context; also answer), "fill_mask" (text
        with [MASK]s: masked_lm's graph).
      outputs: which outputs the model gives ServingModule (its _OUTPUTS table).
      sequence_axes: outputs with a position axis, {name: axis} (static S at full length).
      trims_by_default: its requests are packed to their longest row by default (SQuAD:
        no, its n-best ranks padding positions as run_squad does).
      full_length_text: its text signatures pack to max_seq_length (the encoder's
        per-position outputs).
      long_text: --long_text head_tail / windows apply.
      checks_head: an export refuses a checkpoint of another head (the encoder is served
        from any task's checkpoint).
      labels: its export holds a label list (classifier labels, tagger tags).
      class_labels: a classifier: its answers are labels (or regression values), gold
        labels come from a text file's label column.
      sentence_embedding: the encoder: its sentence_embedding output (--pooling); its
        LiteRT answers are these vectors, compared by cosine.
      litert_outputs: the numeric serving_ids outputs its LiteRT models keep.
      litert_compared: of those, the ones the LiteRT report compares (those present).
      word_tags: a tagger: word windows (--doc_stride), Viterbi (--crf), CoNLL files.
      answer_spans: SQuAD: question / context windows, n-best answer rules, SQuAD JSON.
      fill_mask: the masked LM: [MASK]s in the text, top-k tokens per mask (masked_lm.py).
      flags: export_saved_model flags only this type (among the types) reads.
      served_as: the type its folders are exported as (run_pretraining's: the encoder).
      part_of: the types whose checkpoints hold this head too (the masked LM: the
        pretraining checkpoint's cls/predictions).
      hf_class: the transformers class of its HuggingFace export (config.json's
        architectures); None: not exported.
      hf_pooler: that class has the pooler (HF builds the token and span heads without).
      hf_head_keys: (TF1 variable name, HF state-dict key) of its head's weights.
      hf_rank: convert_hf_checkpoint --model_type lists it in this order (None: not
        exported to HuggingFace).
      hf_prefix: the prefix of the encoder's keys in its HF class ("": BertModel's own).
      held_rank: the order in which the export doors (HuggingFace, keras-hub) try the
        types on a checkpoint's variables (held_by); None: never told from them.
      held_marks: the TF1 variables that show those doors a checkpoint holds this head
        (all of them); () : any checkpoint (the encoder, tried last).
      label_variable: the TF1 variable whose rows are its labels (its export checks
        their number against its label list); None: no label list.
      keras_hub_class: the keras-hub class of its preset (convert_keras_hub.py, both
        ways); None: keras-hub has none, the conversion refuses it.
      keras_hub_weights: (TF1 variable name, attribute path in the keras-hub model, its
        weight) of its head's weights (the encoder's are convert/keras_hub.py's).
      keras_hub_note: what keras-hub's class does differently (the export logs it).
    """
    name: str
    runner: Optional[str]
    heads: Tuple[str, ...]
    build: Optional[Callable] = None
    serves: bool = True
    tf1_rank: Optional[int] = None
    tf1_marker: Optional[str] = None
    litert_rank: Optional[int] = None
    litert_refused: Tuple[str, ...] = ()
    signature: str = "pair"
    outputs: str = ""
    sequence_axes: types.MappingProxyType = dataclasses.field(
        default_factory=lambda: types.MappingProxyType({}))
    trims_by_default: bool = True
    full_length_text: bool = False
    long_text: bool = False
    checks_head: bool = True
    labels: bool = False
    class_labels: bool = False
    sentence_embedding: bool = False
    litert_outputs: Tuple[str, ...] = ()
    litert_compared: Tuple[str, ...] = ()
    word_tags: bool = False
    answer_spans: bool = False
    fill_mask: bool = False
    flags: Tuple[str, ...] = ()
    served_as: Optional[str] = None
    part_of: Tuple[str, ...] = ()
    hf_class: Optional[str] = None
    hf_pooler: bool = True
    hf_head_keys: Tuple[Tuple[str, str], ...] = ()
    hf_rank: Optional[int] = None
    hf_prefix: str = "bert."
    held_rank: Optional[int] = None
    held_marks: Tuple[str, ...] = ()
    label_variable: Optional[str] = None
    keras_hub_class: Optional[str] = None
    keras_hub_weights: Tuple[Tuple[str, str, str], ...] = ()
    keras_hub_note: Optional[str] = None

    @property
    def litert(self):
        """Whether LiteRT carries it."""
        return self.litert_rank is not None

    def carries_litert(self, head):
        """Whether --litert exports its head `head` (one of `heads`)."""
        if head not in self.heads:
            raise ValueError("%s has no head %r (its heads: %s)"
                             % (self.name, head, ", ".join(self.heads)))
        return self.litert and head not in self.litert_refused

    def holds_tf1(self, names):
        """Whether a TF1 checkpoint with variables `names` (a set) holds this head."""
        marker = self.tf1_marker
        if marker is None:
            return True
        if marker.endswith("/"):
            return any(n.startswith(marker) for n in names)
        return marker in names

    def holds(self, names):
        """Whether the export doors read a checkpoint with variables `names` (a set) as
        holding this head (its held_marks all there)."""
        return all(mark in names for mark in self.held_marks)


@dataclasses.dataclass(frozen=True)
class Signature:
    """A kind of serving_default (ModelType.signature) and what its requests take.

    Fields:
      name: the ModelType.signature value.
      fields: a warm-up example's tab-separated fields: (least, most, in words).
      requests: the signatures one warm-up example calls, in order.
      data_format: the data format its warm-up rows may come in besides plain lines:
        "table" (.tsv / .csv / .jsonl texts), "conll", "squad_json"; None: lines only.
      data_endings: the file endings read in that format.
      always_data: a LiteRT --calibration_file / --agreement_file (warm-up rows taken
        from it) is read in that format whatever its ending.
      any_ending: every file is read in that format, whatever its ending.
      inputs: a warm-up example's fields (bytes) -> the request's inputs {name: list}.
    """
    name: str
    fields: Tuple[int, int, str]
    requests: Tuple[str, ...] = ("serving_default",)
    data_format: Optional[str] = None
    data_endings: Tuple[str, ...] = ()
    always_data: bool = False
    inputs: Callable = None
    any_ending: bool = False


SIGNATURES = {signature.name: signature for signature in (
    Signature("pair", (1, 2, "text_a[<TAB>text_b]"), data_format="table",
              data_endings=(".tsv", ".csv", ".jsonl"),
              inputs=lambda f: {"text_a": f[:1], "text_b": (f[1:] or [b""])[:1]}),
    Signature("words", (1, 10 ** 9, "a sentence"), data_format="conll",
              data_endings=(".conll", ".iob"), always_data=True,
              inputs=lambda f: {"text": [b"\t".join(f)]}),
    Signature("choices", (2, 10 ** 9, "context<TAB>ending[<TAB>ending...]"),
              inputs=lambda f: {"context": f[:1], "endings": [f[1:]]}),
    Signature("squad", (2, 2, "question<TAB>context"), ("answer", "serving_default"),
              data_format="squad_json", data_endings=(".json",), always_data=True,
              inputs=lambda f: {"question": f[:1], "context": f[1:]}),
    Signature("fill_mask", (1, 1, "a text with [MASK]s"), data_format="masked_texts",
              any_ending=True, inputs=lambda f: {"text": [b"\t".join(f)]}),
)}


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
    ModelType(
        "encoder", None, ("encoder", "sentence embedding"), build=_build_encoder,
        tf1_rank=3, litert_rank=1, outputs="encoder", full_length_text=True,
        checks_head=False, sentence_embedding=True, litert_outputs=("sentence_embedding",),
        litert_compared=("sentence_embedding",),
        sequence_axes=_axes(sequence_output=1, encoder_layers=2, input_ids=1, input_mask=1,
                            segment_ids=1),
        flags=("layers", "pooling", "normalize"), hf_class="BertModel", hf_rank=6,
        hf_prefix="", held_rank=5, keras_hub_class="BertBackbone"),
    ModelType(
        "classifier", "run_classifier",
        ("classifier", "multi-label classifier", "regression", "long-text classifier"),
        build=_head_builder("BertClassifier", "num_labels"), tf1_rank=1,
        tf1_marker="output_weights", litert_rank=0,
        litert_refused=("multi-label classifier", "long-text classifier"),
        outputs="classifier", long_text=True, labels=True, class_labels=True,
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
    ModelType(
        "squad", "run_squad", ("squad v1.1", "squad v2.0"),
        build=_head_builder("BertSquad"), tf1_rank=2, tf1_marker="cls/squad/output_weights",
        litert_rank=3, signature="squad", outputs="squad",
        sequence_axes=_axes(start_logits=1, end_logits=1), trims_by_default=False,
        answer_spans=True, litert_outputs=("start_logits", "end_logits"),
        litert_compared=("start_logits", "end_logits"),
        flags=("max_query_length", "max_answer_length", "n_best_size", "doc_stride",
               "version_2_with_negative", "null_score_diff_threshold"),
        hf_class="BertForQuestionAnswering", hf_pooler=False,
        hf_head_keys=(("cls/squad/output_weights", "qa_outputs.weight"),
                      ("cls/squad/output_bias", "qa_outputs.bias")), hf_rank=4, held_rank=2,
        held_marks=("cls/squad/output_weights", "cls/squad/output_bias")),
    ModelType(
        "tagger", "run_ner", ("tagger softmax", "tagger crf", "tagger bilstm"),
        build=_head_builder("BertTagger", "num_labels", "feature_layers", "lstm_units",
                            "crf", "crf_penalties"),
        litert_rank=2, signature="words", outputs="tagger", sequence_axes=_axes(logits=1),
        labels=True, word_tags=True, litert_outputs=("logits",), litert_compared=("logits",),
        flags=("labels_file", "feature_based", "layers", "lstm_units", "crf",
               "crf_tag_scheme", "doc_stride"),
        hf_class="BertForTokenClassification", hf_pooler=False,
        hf_head_keys=(("tagger/output_weights", "classifier.weight"),
                      ("tagger/output_bias", "classifier.bias")), hf_rank=3, held_rank=0,
        held_marks=("tagger/output_weights",), label_variable="tagger/output_weights"),
    ModelType(
        "multiple_choice", "run_multiple_choice", ("multiple choice",),
        build=_head_builder("BertMultipleChoice"), signature="choices",
        outputs="multiple_choice", hf_class="BertForMultipleChoice",
        hf_head_keys=(("multiple_choice/output_weights", "classifier.weight"),
                      ("multiple_choice/output_bias", "classifier.bias")), hf_rank=5,
        held_rank=3,
        held_marks=("multiple_choice/output_weights", "multiple_choice/output_bias")),
    ModelType(
        "pretraining", "run_pretraining", ("pretraining",),
        build=_head_builder("BertPretrainer"), serves=False, tf1_rank=0,
        tf1_marker="cls/predictions/", served_as="encoder", hf_class="BertForPreTraining",
        hf_head_keys=_MASKED_LM_KEYS + (
            ("cls/seq_relationship/output_weights", "cls.seq_relationship.weight"),
            ("cls/seq_relationship/output_bias", "cls.seq_relationship.bias")), hf_rank=0,
        held_rank=4,
        held_marks=("cls/predictions/output_bias", "cls/seq_relationship/output_weights"),
        keras_hub_class="BertMaskedLM", keras_hub_weights=_KERAS_HUB_MASKED_LM,
        keras_hub_note=_KERAS_HUB_MASKED_LM_NOTE),
    # Fill-mask: bert_tf2/export/masked_lm.py (its model, inputs, decoding, Predictor and
    # the SavedModel / LiteRT graph).
    ModelType(
        "masked_lm", None, ("masked lm",), build=_head_builder("BertMaskedLM"),
        litert_rank=4, signature="fill_mask", outputs="masked_lm",
        sequence_axes=_axes(token_ids=1, probabilities=1), fill_mask=True,
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
# The prefix of a feature-based tagger's variables (heads.BertTagger's BiLSTM), which no
# HuggingFace or keras-hub class holds.
FEATURE_BASED_PREFIX = "bilstm_"


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
    """Whether the TF1 variable `names` are a feature-based tagger's (its BiLSTM)."""
    return any(name.startswith(FEATURE_BASED_PREFIX) for name in names)


def detect_tf1(names):
    """The first convertible type (TF1's order) whose head the TF1 variable `names` hold."""
    return next(_BY_NAME[name] for name in TF1 if _BY_NAME[name].holds_tf1(names))
