"""ModelType: a head's data (the fields below) and the questions every door asks it, each
door's questions in the module of that door's contract (serving_door: the SavedModel and
export_saved_model; litert_door: LiteRT and LiteRTPredictor; converter_door: the
HuggingFace and keras-hub converters and an export's checkpoint check). A head's room (a
module of this package) subclasses it, overrides what its head answers differently and
holds its one registered instance, ENTRY; head_types finds the rooms.

Also here: what the rooms use to fill their entries (head_builder, axes, doors).
Nothing of the project is imported at load time (LiteRTPredictor reads the registry
without TensorFlow); the builders import the models when called.
"""
import dataclasses
import types
from typing import Callable, Optional, Tuple

from bert_tf2.export.model_types import converter_door
from bert_tf2.export.model_types import litert_door
from bert_tf2.export.model_types import serving_door

# The doors whose order of the heads a room may place itself in (ModelType.before):
# "held": the export doors' tries of a checkpoint's variables (head_types.held_by);
# "hf": convert_hf_checkpoint --model_type's list; "litert": LiteRT's list.
DOORS = ("held", "hf", "litert")


def _frozen(mapping=None):
    return types.MappingProxyType(dict(mapping or {}))


@dataclasses.dataclass(frozen=True)
class ModelType(serving_door.ServingQuestions, litert_door.LiteRTQuestions,
                converter_door.ConverterQuestions):
    """A model type (export_saved_model / convert_tf1_checkpoint --model_type, a model
    folder's type) and what each door does with it.

    Fields:
      name: the --model_type value (export_info.json's model_type).
      runner: the runner whose model folders hold it (None: the encoder, any folder's).
      heads: the head types of it the project trains (documentation and tests).
      build: bert_config, num_labels=..., feature_layers=..., ... -> its built Keras model.
      summary: what it is, in --model_type's help (None: "a <runner> model").
      listed_after: the type it follows in the lists of the types (export_saved_model
        --model_type's, the registry's ENTRIES); None: the first (the encoder). Types after
        the same one follow it by name (head_types.listing_order).
      serves: export_saved_model exports it (a SavedModel of raw strings).
      tf1: convert_tf1_checkpoint converts it (--model_type=auto tries the types in the
        converters' order: head_types.door_orders).
      litert: LiteRT carries it (--litert, LiteRTPredictor).
      before: {door: types} it comes before in that door's order although the rules put it
        after (a door of DOORS; head_types.door_orders: the rules, then these).
      litert_refused: its heads LiteRT refuses all the same (litert_step.check says so).
      signature: which inputs serving_default takes: "pair" (text_a, text_b; also
        serving_text_a), "words" (text: serving_tagger's words and windows), "choices"
        (context, endings), "squad" (question, context; also answer), "fill_mask" (text
        with [MASK]s: masked_lm's graph).
      sequence_axes: outputs with a position axis, {name: axis} (static S at full length).
      trims_by_default: its requests are packed to their longest row by default (SQuAD:
        no, its n-best ranks padding positions as run_squad does).
      checks_head: an export refuses a checkpoint of another head (the encoder is served
        from any task's checkpoint).
      labels: its export holds a label list (classifier labels, tagger tags).
      class_labels: a classifier: its answers are labels (or regression values), gold
        labels come from a text file's label column.
      sentence_embedding: the encoder: its sentence_embedding output (--pooling); its
        LiteRT answers are these vectors, compared by cosine.
      litert_outputs: the numeric serving_ids outputs its LiteRT models keep.
      litert_compared: of those, the ones the LiteRT report compares (those present).
      flags: export_saved_model flags only this type (among the types) reads.
      served_as: the type its folders are exported as (run_pretraining's: the encoder).
      part_of: the types whose checkpoints hold this head too (the masked LM: the
        pretraining checkpoint's cls/predictions); the export doors tell such a checkpoint
        as theirs (held_by never answers a part).
      hf_class: the transformers class of its HuggingFace export (config.json's
        architectures); None: not exported.
      hf_pooler: that class has the pooler (HF builds the token and span heads without).
      hf_head_keys: (TF1 variable name, HF state-dict key) of its head's weights.
      hf_prefix: the prefix of the encoder's keys in its HF class ("": BertModel's own).
      held_marks: the TF1 variables that show a checkpoint holds this head (all of them:
        holds, the one rule); () : any checkpoint (the encoder, tried last).
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
    summary: Optional[str] = None
    listed_after: Optional[str] = None
    serves: bool = True
    tf1: bool = False
    litert: bool = False
    before: types.MappingProxyType = dataclasses.field(default_factory=_frozen)
    litert_refused: Tuple[str, ...] = ()
    signature: str = "pair"
    sequence_axes: types.MappingProxyType = dataclasses.field(default_factory=_frozen)
    trims_by_default: bool = True
    checks_head: bool = True
    labels: bool = False
    class_labels: bool = False
    sentence_embedding: bool = False
    litert_outputs: Tuple[str, ...] = ()
    litert_compared: Tuple[str, ...] = ()
    flags: Tuple[str, ...] = ()
    served_as: Optional[str] = None
    part_of: Tuple[str, ...] = ()
    hf_class: Optional[str] = None
    hf_pooler: bool = True
    hf_head_keys: Tuple[Tuple[str, str], ...] = ()
    hf_prefix: str = "bert."
    held_marks: Tuple[str, ...] = ()
    label_variable: Optional[str] = None
    keras_hub_class: Optional[str] = None
    keras_hub_weights: Tuple[Tuple[str, str, str], ...] = ()
    keras_hub_note: Optional[str] = None

    def carries_litert(self, head):
        """Whether --litert exports its head `head` (one of `heads`)."""
        if head not in self.heads:
            raise ValueError("%s has no head %r (its heads: %s)"
                             % (self.name, head, ", ".join(self.heads)))
        return self.litert and head not in self.litert_refused

    def holds(self, names):
        """Whether a checkpoint with TF1 variables `names` (a set) holds this head: its
        held_marks all there. The one rule every door and converter tells a head by
        (head_types.held_by, detect_tf1: each in its own order)."""
        return all(mark in names for mark in self.held_marks)

    @property
    def matches_every_checkpoint(self):
        """Whether it is told from any checkpoint (no marks, no head to check: the
        encoder): the doors that tell a checkpoint's head try it last."""
        return not self.held_marks and not self.checks_head


def head_builder(class_name, *keys):
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


def axes(**named):
    """A ModelType's sequence_axes: {output: its position axis}, read-only."""
    return _frozen(named)


def doors(**placed):
    """A ModelType's `before`: {door: the types it comes before there}, read-only; a door
    not in DOORS is a ValueError (a misspelt door would be silently ignored)."""
    unknown = sorted(set(placed) - set(DOORS))
    if unknown:
        raise ValueError("before=: no door %s (the doors: %s)" % (", ".join(unknown),
                                                                 ", ".join(DOORS)))
    return _frozen({door: tuple(names) for door, names in placed.items()})
