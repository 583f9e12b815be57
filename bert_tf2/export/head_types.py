"""The head registry's lookups: the doors and converters find a model type's head here
(find, get, of_runner, folder_runner, of_hf_class, held_by, detect_tf1, feature_based,
signature_of; the door lists SERVED, LITERT, TF1, HF) instead of comparing type names.
The heads themselves, one class and one registered instance (ENTRIES) each, are
bert_tf2/export/head_classes.py: adding a model type is one class and its entry there,
beside its model and module (docs/developing.md, "Adding a head").

This module imports nothing of the project at load time but head_classes and
request_kinds, plain Python (LiteRTPredictor reads it without TensorFlow).
"""
from bert_tf2.export import head_classes
from bert_tf2.export import request_kinds

ModelType = head_classes.ModelType
SIGNATURES = request_kinds.SIGNATURES
# The heads, one instance of each class (head_classes.ENTRIES), in export_saved_model
# --model_type's order.
ENTRIES = head_classes.ENTRIES
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
