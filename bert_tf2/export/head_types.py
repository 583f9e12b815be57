"""The head registry: it finds the heads and the doors look them up here (find, get,
of_runner, type_of_runner, folder_runner, of_hf_class, held_by, detect_tf1, feature_based,
signature_of, described; the door lists SERVED, LITERT, TF1, HF, HELD) instead of comparing
type names.

The heads are the rooms of bert_tf2/export/model_types/, one module per head holding its
class and its ENTRY; rooms() finds them by scanning that package, so adding a model type is
adding its room (docs/developing.md, "Adding a head"). No list of the heads is kept by hand,
and no door's order is numbered: door_orders derives each from rules, which a room's
`before` statements amend where a door's order is older than any rule (tests/
test_head_registry.py checks the derived orders against those the ranks gave).

This module imports nothing of the project at load time but the rooms and request_kinds,
plain Python (LiteRTPredictor reads it without TensorFlow).
"""
import importlib
import pkgutil

from bert_tf2.export import model_types
from bert_tf2.export import request_kinds
from bert_tf2.export.model_types import base

ModelType = base.ModelType
SIGNATURES = request_kinds.SIGNATURES


def rooms(package=model_types):
    """The ENTRY of each module of `package` that has one (the rooms), unordered."""
    found = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module("%s.%s" % (package.__name__, info.name))
        if isinstance(getattr(module, "ENTRY", None), ModelType):
            found.append(module.ENTRY)
    return found


def listing_order(entries):
    """`entries` in the lists' order (export_saved_model --model_type's): the one listed
    after none first, then each followed by those listed after it (by name), theirs after
    them; ValueError naming a type listed after no registered one, or twice registered."""
    names = [e.name for e in entries]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError("model type %s is registered twice" % ", ".join(twice))
    unknown = [e for e in entries if e.listed_after is not None and e.listed_after not in names]
    if unknown:
        raise ValueError("model type %s is listed after %r, which is not registered"
                         % (unknown[0].name, unknown[0].listed_after))
    ordered = []

    def follow(name):
        for entry in sorted((e for e in entries if e.listed_after == name), key=lambda e: e.name):
            ordered.append(entry)
            follow(entry.name)
    follow(None)
    unreached = sorted(e.name for e in entries if e not in ordered)
    if unreached:  # listed after one another in a circle: none is reached from the first
        raise ValueError("model type %s is not reached from the first of the list: "
                         "listed_after goes round in a circle" % ", ".join(unreached))
    return tuple(ordered)


def _wholes_first(ordered, entries):
    """A type whose checkpoint holds others (their part_of names it) first, each followed by
    its parts: the converters meet the pretraining checkpoint, the one the rest start from."""
    wholes = [e for e in ordered if any(e.name in other.part_of for other in entries)]
    first = [x for whole in wholes for x in
             [whole] + [e for e in ordered if whole.name in e.part_of]]
    return first + [e for e in ordered if e not in first]


def _tried_in_turn(ordered):
    """The rules of a door that tells a checkpoint's head by trying the heads in turn: a head
    whose marks hold all of another's (and more) before that one; the one matching every
    checkpoint (the encoder) last."""
    result = list(ordered)
    for entry in ordered:
        wider = [e for e in result if entry.held_marks
                 and set(entry.held_marks) < set(e.held_marks)
                 and result.index(e) > result.index(entry)]
        for other in wider:
            result.remove(other)
            result.insert(result.index(entry), other)
    return ([e for e in result if not e.matches_every_checkpoint]
            + [e for e in result if e.matches_every_checkpoint])


def _placed(ordered, door):
    """`ordered` with each type's `before` statements of `door` applied, in turn."""
    result = list(ordered)
    for entry in ordered:
        for name in entry.before.get(door, ()):
            at = [e.name for e in result]
            if name in at and at.index(name) < at.index(entry.name):
                result.remove(entry)
                result.insert(at.index(name), entry)
    return result


def door_orders(entries):
    """{door: the types it takes, in its order} of registry `entries`:
      served: those exported (export_saved_model --model_type), in the lists' order;
      litert: those LiteRT carries, in the lists' order amended by `before`;
      tf1: those convert_tf1_checkpoint converts, in its --model_type=auto tries: wholes
        first, then as the held rules;
      hf: those with an HF class (convert_hf_checkpoint --model_type), wholes first (each
        with its parts), then as the held rules, amended by `before`;
      held: those the export doors tell from a checkpoint's variables (held_by: not a part
        of another's checkpoint), a superset of marks before its subset, the one matching
        every checkpoint last, amended by `before`.
    """
    listed = listing_order(entries)
    tf1 = _tried_in_turn(_wholes_first([e for e in listed if e.tf1], listed))
    hf = _tried_in_turn(_wholes_first([e for e in listed if e.hf_class], listed))
    held = _tried_in_turn([e for e in listed if not e.part_of])
    return {"served": tuple(e for e in listed if e.serves),
            "litert": tuple(_placed([e for e in listed if e.litert], "litert")),
            "tf1": tuple(tf1), "hf": tuple(_placed(hf, "hf")),
            "held": tuple(_placed(held, "held"))}


# The heads, in the lists' order (export_saved_model --model_type's).
ENTRIES = listing_order(rooms())
_BY_NAME = {entry.name: entry for entry in ENTRIES}
_ORDERS = door_orders(ENTRIES)

# The --model_type values of each door, in the order their flags and messages list them.
SERVED = tuple(entry.name for entry in _ORDERS["served"])
LITERT = tuple(entry.name for entry in _ORDERS["litert"])
TF1 = tuple(entry.name for entry in _ORDERS["tf1"])
HF = tuple(entry.name for entry in _ORDERS["hf"])
HELD = tuple(entry.name for entry in _ORDERS["held"])


def find(name):
    """The entry of model type `name`, or None."""
    return _BY_NAME.get(name)


def signature_of(name):
    """The Signature of model type `name`'s serving_default."""
    return SIGNATURES[_BY_NAME[name].signature]


def described(names):
    """The types `names`, each with what it is ("encoder (the bare encoder, ...), classifier
    (a run_classifier model), ... or masked_lm (...)"): a flag's help names them from here."""
    parts = ["%s (%s)" % (name, _BY_NAME[name].summary or "a %s model" % _BY_NAME[name].runner)
             for name in names]
    return " or ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 1 else parts)


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


def type_of_runner(runner):
    """The --model_type name a model folder its `runner` wrote exports as, or None
    (model_folder.defaults reads it: that floor cannot import the registry)."""
    entry = of_runner(runner)
    return entry.name if entry else None


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
    (the first, in HELD's order, whose held_marks are all there; else the encoder)."""
    names = set(names)
    return next(entry for entry in _ORDERS["held"] if entry.holds(names))


def feature_based(names):
    """Whether the TF1 variable `names` are a feature-based tagger's (its BiLSTM: the
    tagger head's rule)."""
    return _BY_NAME["tagger"].feature_based(names)


def detect_tf1(names):
    """The first convertible type (TF1's order: convert_tf1_checkpoint --model_type=auto)
    whose head the TF1 variable `names` hold (the heads' one rule, as held_by)."""
    names = set(names)
    return next(entry for entry in _ORDERS["tf1"] if entry.holds(names))
