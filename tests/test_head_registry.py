"""The head registry (bert_tf2/export/head_types.py): one entry per model type, read by the
doors instead of comparisons of type names."""
import importlib
import re

import pytest

import convert_tf1_checkpoint
import export_saved_model
import parity_helpers
import registry_lists
from bert_tf2 import heads
from bert_tf2.export import head_types
from bert_tf2.export import litert_data
from bert_tf2.export.model_types import base
from bert_tf2.trainer import model_folder
from conftest import REPO_ROOT

# The comparisons of a model type with a name the tree may keep (issue 62: at most 10).
MAX_COMPARISONS = 10


def _comparisons():
    found = []
    paths = list(REPO_ROOT.glob("*.py")) + list((REPO_ROOT / "bert_tf2").rglob("*.py"))
    for path in sorted(paths):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"model_type\s*[!=]=", line):
                found.append("%s:%d" % (path.relative_to(REPO_ROOT), number))
    return found


def test_the_doors_look_the_type_up_instead_of_comparing_names():
    found = _comparisons()
    assert len(found) <= MAX_COMPARISONS, found


def test_every_type_a_model_folder_holds_has_an_entry():
    # A head's runner keeps its folder's settings (model_folder.task_settings: its row, or
    # its face's FOLDER_SETTINGS) and its folders
    # export as a served type (run_pretraining's: the encoder); model_folder keeps no copy of
    # the runner -> type table (issue 93: head_types.type_of_runner).
    assert not hasattr(model_folder, "MODEL_TYPES")
    for runner in registry_lists.head_runners():
        entry = head_types.of_runner(runner)
        assert entry is not None and head_types.type_of_runner(runner) == entry.name, runner
        assert entry.serves and entry.build is not None
        assert model_folder.task_settings(runner) is not None, runner
    assert head_types.of_runner("create_vocab") is None
    assert head_types.type_of_runner("create_vocab") is None
    assert head_types.type_of_runner("run_pretraining") == "encoder"


def _names(entries):
    return tuple(e.name for e in entries)


def door_list_problems(registered):
    """What breaks the rules of the door lists of registry entries `registered` (read, not
    pinned: a head added to the registry is in them with no edit here)."""
    problems = registry_lists.order_problems(head_types.door_orders(registered))
    served = _names(head_types.door_orders(registered)["served"])
    # The export's types in the registry's order, the encoder (its default) first; a type
    # served as another (run_pretraining's folders: the encoder) is not one itself.
    if not served or not registry_lists.matches_every_checkpoint(
            next(e for e in registered if e.name == served[0])):
        problems.append("SERVED %s: the encoder is not first" % (served,))
    problems += ["%s is served as %s and served too" % (e.name, e.served_as)
                 for e in registered if e.served_as and e.serves]
    problems += ["%s is served with nothing to build" % e.name
                 for e in registered if e.serves and e.build is None]
    return problems


def test_each_door_lists_the_registry_types():
    orders = head_types.door_orders(head_types.ENTRIES)
    assert export_saved_model.MODEL_TYPES == head_types.SERVED == _names(orders["served"])
    assert litert_data.MODEL_TYPES == head_types.LITERT == _names(orders["litert"])
    assert convert_tf1_checkpoint.MODEL_TYPES == ("auto",) + head_types.TF1
    assert head_types.TF1 == _names(orders["tf1"])
    assert head_types.HELD == _names(orders["held"])
    assert set(export_saved_model._FLAGS_OF_TYPE) == set(head_types.SERVED)
    assert not door_list_problems(head_types.ENTRIES)
    # What each door carries of today's heads (a new head changes none of these).
    assert {"encoder", "classifier", "squad", "tagger", "multiple_choice", "masked_lm"} <= \
        set(head_types.SERVED) and "pretraining" not in head_types.SERVED
    assert {"classifier", "encoder", "tagger", "squad", "masked_lm"} <= set(head_types.LITERT)
    assert not {"multiple_choice", "pretraining"} & set(head_types.LITERT)
    assert head_types.LITERT[0] == "classifier"  # LiteRT's flags and messages name it first


# The orders the hand-numbered ranks (tf1_rank, litert_rank, hf_rank, held_rank) and
# ENTRIES' hand-kept order gave before issue 93, captured from head_types then. The rules
# (head_types.door_orders) and the rooms' statements (listed_after, before) give them again:
# today's heads in today's order, a head added later placed among them.
RANKED_ORDERS = {
    "listed": ("encoder", "classifier", "squad", "tagger", "multiple_choice", "pretraining",
               "masked_lm"),
    "served": ("encoder", "classifier", "squad", "tagger", "multiple_choice", "masked_lm"),
    "litert": ("classifier", "encoder", "tagger", "squad", "masked_lm"),
    "tf1": ("pretraining", "classifier", "squad", "encoder"),
    "hf": ("pretraining", "masked_lm", "classifier", "tagger", "squad", "multiple_choice",
           "encoder"),
    "held": ("tagger", "classifier", "squad", "multiple_choice", "pretraining", "encoder"),
}


# The registry's lists as this module found them (the rooms on disk): what a room added by
# a test is placed among, and what is back after it.
_AT_START = dict({door: _names(ranked) for door, ranked in
                  head_types.door_orders(head_types.ENTRIES).items()},
                 listed=_names(head_types.ENTRIES))


def test_the_rules_give_the_orders_the_ranks_gave():
    orders = dict(head_types.door_orders(head_types.ENTRIES), listed=head_types.ENTRIES)
    for door, ranked in RANKED_ORDERS.items():
        names = _names(orders[door])
        assert set(ranked) <= set(names), door
        assert tuple(name for name in names if name in ranked) == ranked, door
    # The rooms' statements are needed where no rule gives today's order (the rules alone
    # put the classifier after the encoder in LiteRT's list, SQuAD before the tagger in
    # HF's and LiteRT's, the classifier before the tagger at the export doors).
    bare = head_types.door_orders([_replaced(e, before=base.doors())
                                   for e in head_types.ENTRIES])
    assert _names(bare["litert"])[:2] == ("encoder", "classifier")
    assert _names(bare["held"])[:2] == ("classifier", "squad")
    assert not door_list_problems([_replaced(e, before=base.doors())
                                   for e in head_types.ENTRIES])


def _replaced(entry, **changes):
    import dataclasses  # pylint: disable=import-outside-toplevel
    return dataclasses.replace(entry, **changes)


def _changed(name, entries=None, **changes):
    """The registry's entries (or `entries`) with entry `name`'s fields changed."""
    return [_replaced(e, **changes) if e.name == name else e
            for e in (head_types.ENTRIES if entries is None else entries)]


def test_the_door_list_rules_catch_a_misplaced_statement():
    assert door_list_problems(_changed("encoder", before=base.doors(
        held=("tagger",), hf=("pretraining",)))) == [
        "%s: encoder matches every checkpoint but is not last" % door for door in ("hf", "held")]
    assert door_list_problems(_changed("masked_lm", before=base.doors(hf=("pretraining",)))) \
        == ["hf: masked_lm before pretraining, which it is part of"]
    # A head whose marks hold all of another's is tried before it by the rule; a statement
    # putting the other first is caught.
    wider = _changed("squad", held_marks=("output_weights", "output_bias",
                                          "cls/squad/output_weights"))
    orders = {door: [n for n in _names(ranked) if n in RANKED_ORDERS["listed"]]
              for door, ranked in head_types.door_orders(wider).items()}  # today's heads
    assert orders["tf1"] == ["pretraining", "squad", "classifier", "encoder"]
    assert orders["held"][:3] == ["squad", "tagger", "classifier"]
    assert not door_list_problems(wider)
    assert door_list_problems(_changed("classifier", wider, before=base.doors(
        held=("squad",)))) == ["held: classifier before squad, whose marks hold all of its"]
    # The encoder listed after another: the export's default is not first.
    moved = _changed("classifier", _changed("encoder", listed_after="masked_lm"),
                     listed_after=None)
    assert door_list_problems(moved)[-1].endswith(": the encoder is not first")
    assert door_list_problems(_changed("pretraining", serves=True)) == [
        "pretraining is served as encoder and served too"]


def test_a_room_statement_that_names_nothing_is_refused():
    with pytest.raises(ValueError, match=r"^model type squad is listed after 'clasifier', "
                                         r"which is not registered$"):
        head_types.listing_order(_changed("squad", listed_after="clasifier"))
    circle = _changed("classifier", listed_after="squad")  # squad is listed after it
    with pytest.raises(ValueError, match=r"^model type classifier, masked_lm, multiple_choice, "
                                         r"pretraining, squad, tagger is not reached from the "
                                         r"first of the list: listed_after goes round in a "
                                         r"circle$"):
        head_types.listing_order([e for e in circle if e.name in RANKED_ORDERS["listed"]])
    with pytest.raises(ValueError, match=r"^model type classifier is registered twice$"):
        head_types.listing_order(list(head_types.ENTRIES) + [head_types.find("classifier")])
    with pytest.raises(ValueError, match=r"^before=: no door helt \(the doors: held, hf, "
                                         r"litert\)$"):
        base.doors(helt=("classifier",))


@pytest.mark.parametrize("name", parity_helpers.HEADS)
def test_the_parity_heads_are_registry_heads(name):
    cls = parity_helpers.head_classes()[name]
    entry = head_types.find(cls.model_type)
    assert cls.registry_head in entry.heads
    # The matrix's LiteRT door: exported, or refused at export, as the entry says (its
    # type carried by LiteRT, its head not one LiteRT refuses); today's refusals as facts.
    expected = entry.litert and cls.registry_head not in entry.litert_refused
    assert entry.carries_litert(cls.registry_head) is expected
    if name in ("multilabel", "long_windows", "long_head_tail", "multiple_choice"):
        assert not expected


def test_the_masked_lm_modules_names_are_its_entrys():
    from bert_tf2.export import masked_lm  # pylint: disable=import-outside-toplevel
    assert masked_lm.TF1_NAMES == tuple(
        name for name, _ in head_types.find("masked_lm").hf_head_keys)


def test_a_head_the_type_does_not_have_is_refused():
    with pytest.raises(ValueError, match="classifier has no head 'tagger crf'"):
        head_types.find("classifier").carries_litert("tagger crf")


def test_get_names_the_flag_and_the_choices():
    with pytest.raises(ValueError, match=r"^--model_type must be one of %s, got 'pretraining'$"
                       % re.escape(", ".join(head_types.SERVED))):
        head_types.get("pretraining")


def test_the_export_doors_tell_the_head_in_their_order():
    def held(*names):
        return head_types.held_by(names).name

    assert held("tagger/output_weights", "output_weights", "output_bias") == "tagger"
    assert held("output_weights", "output_bias", "cls/squad/output_weights",
                "cls/squad/output_bias") == "classifier"
    assert held("output_weights") == "encoder"  # a classifier's marks are both its weights
    assert held("cls/squad/output_weights", "cls/squad/output_bias") == "squad"
    assert held("multiple_choice/output_weights", "multiple_choice/output_bias") == \
        "multiple_choice"
    assert held("cls/predictions/output_bias", "cls/seq_relationship/output_weights",
                "output_weights", "output_bias") == "classifier"
    assert held("cls/predictions/output_bias", "cls/seq_relationship/output_weights") == \
        "pretraining"
    assert held("cls/predictions/output_bias") == "encoder"
    assert head_types.feature_based({"bilstm_fw/kernel"})
    assert not head_types.feature_based({"tagger/output_weights"})


def test_the_hf_export_lists_and_finds_its_classes_in_the_registry():
    # Every type, the encoder last (it matches every checkpoint), the masked LM after the
    # pretraining head it is part of (registry_lists.order_problems' rules).
    assert head_types.HF == _names(head_types.door_orders(head_types.ENTRIES)["hf"])
    assert set(head_types.HF) == {e.name for e in head_types.ENTRIES}
    assert head_types.HF[-1] == "encoder"
    assert head_types.HF.index("pretraining") < head_types.HF.index("masked_lm")
    for name in head_types.HF:
        # A class two heads share (a head with another's layout, as a one-label classifier's)
        # is read as the first listed; the other is exported as it, and imported as the first.
        hf_class = head_types.find(name).hf_class
        first = next(e for e in head_types.ENTRIES if e.hf_class == hf_class)
        assert head_types.of_hf_class(hf_class) is first
        assert first is head_types.find(name) or first.held_marks == head_types.find(
            name).held_marks
    assert head_types.of_hf_class("BertForNextSentencePrediction") is None
    assert head_types.find("classifier").label_variable == "output_weights"
    assert head_types.find("tagger").label_variable == "tagger/output_weights"


def test_tf1_detection_in_the_converters_order():
    def detect(*names):
        return head_types.detect_tf1(set(names)).name

    classifier = ("output_weights", "output_bias")
    squad = ("cls/squad/output_weights", "cls/squad/output_bias")
    pretraining = ("cls/predictions/output_bias", "cls/seq_relationship/output_weights")
    assert detect(*pretraining + classifier) == "pretraining"  # TF1's order, not held_by's
    assert head_types.held_by(pretraining + classifier).name == "classifier"
    assert detect(*classifier + squad) == "classifier"
    assert detect(*squad + ("bert/pooler/dense/kernel",)) == "squad"
    assert detect("bert/pooler/dense/kernel") == "encoder"
    # The one rule (ModelType.holds): every mark of a head, as held_by reads
    # them. Before, TF1's own markers took a masked-LM head alone for run_pretraining's and
    # output_weights alone for a classifier.
    assert detect("cls/predictions/output_bias", "cls/predictions/transform/dense/kernel") == \
        "encoder"
    assert detect("output_weights") == "encoder"


def test_convert_tf1_builds_a_head_only_from_a_checkpoint_holding_it():
    import collections  # pylint: disable=import-outside-toplevel
    contents = collections.namedtuple("Contents", "shapes")
    with pytest.raises(ValueError, match=r"^--model_type=squad but the checkpoint has no "
                                         r"cls/squad/output_bias$"):
        convert_tf1_checkpoint.build_model("squad", None, contents(
            {"cls/squad/output_weights": [2, 8]}))
    with pytest.raises(ValueError, match=r"^--model_type=classifier but the checkpoint has "
                                         r"no output_weights$"):
        convert_tf1_checkpoint.build_model("classifier", None, contents({}))


def test_every_type_names_its_hf_class_and_head_weights():
    from bert_tf2.convert import huggingface  # pylint: disable=import-outside-toplevel
    for entry in head_types.ENTRIES:
        assert entry.hf_class and entry.hf_class.startswith("Bert"), entry.name
        # Head weights unless it has no head (the encoder: checks no head).
        assert bool(entry.hf_head_keys) is entry.checks_head, entry.name
    # The pre-training head's keys follow the converter's rule for cls/ names (both
    # directions of convert_hf_checkpoint read them).
    for tf1_name, hf_key in head_types.find("pretraining").hf_head_keys:
        assert huggingface.hf_key_for(tf1_name) == hf_key
    assert set(huggingface.HF_HEADS) == {e.name for e in head_types.ENTRIES}
    assert huggingface.HF_HEADS["tagger"] == "BertForTokenClassification"


# Issue 70: where the tree still decides by a head's name instead of asking the head
# (tests/head_name_counts.py; `python tests/head_name_counts.py` lists them by file). The
# counts may only fall: lower a number here when a change removes some.
NAME_COUNTS = {"names": 0, "signatures": 0, "sub_kinds": 0, "tables": 0,
               "variable_detection": 0, "flag_branches": 0, "doc_stride_checks": 1,
               "tagger_windows": 2}


def test_the_converters_ask_the_heads():
    # Which checkpoint a conversion of each head may read (hf_export, keras_hub).
    find = head_types.find
    # (Today's heads by name; an added head is in none of these lists' rules.)
    from_pretraining = {e.name for e in head_types.ENTRIES if e.written_from(find("pretraining"))}
    assert {"encoder", "pretraining", "masked_lm"} <= from_pretraining
    assert not {"classifier", "squad", "tagger", "multiple_choice"} & from_pretraining
    from_squad = {e.name for e in head_types.ENTRIES if e.written_from(find("squad"))}
    assert {"encoder", "squad"} <= from_squad
    assert not {"classifier", "tagger", "multiple_choice", "pretraining", "masked_lm"} & \
        from_squad
    # What a checkpoint of any head may be written as: its own type and any checking no head.
    for held in head_types.ENTRIES:
        written = {e.name for e in head_types.ENTRIES if e.written_from(held)}
        assert {held.name} | {e.name for e in head_types.ENTRIES if not e.checks_head} <= \
            written, held.name
    # The HF class's weights: the tagger's without the pooler, under bert.; the encoder's bare.
    config = {"vocab_size": 9, "hidden_size": 4, "num_hidden_layers": 1,
              "num_attention_heads": 1, "intermediate_size": 8, "max_position_embeddings": 16,
              "type_vocab_size": 2}
    tagger, shapes = find("tagger").hf_weights(config)
    assert "bert/pooler/dense/kernel" not in tagger and len(tagger) == len(shapes) + 2
    assert tagger["tagger/output_weights"] == "classifier.weight"
    assert tagger["bert/embeddings/word_embeddings"] == "bert.embeddings.word_embeddings.weight"
    encoder, shapes = find("encoder").hf_weights(config)
    assert encoder["bert/pooler/dense/kernel"] == "pooler.dense.weight"
    assert shapes["bert/pooler/dense/kernel"] == [4, 4] and len(encoder) == len(shapes)
    # An imported HF head's task type: the classifier's only.
    assert find("classifier").task_type_of(None, 1) == "regression"
    assert find("classifier").task_type_of("multi_label_classification", 3) == "multilabel"
    assert find("tagger").task_type_of(None, 1) is None
    assert heads.holds_crf({"tagger/output_weights", "crf/transitions"})
    assert not heads.holds_crf({"tagger/output_weights"})


def test_head_name_decisions_outside_the_heads_do_not_grow():
    import head_name_counts  # pylint: disable=import-outside-toplevel
    found = head_name_counts.count()
    grown = {category: dict(found[category])
             for category, limit in NAME_COUNTS.items()
             if sum(found[category].values()) > limit}
    assert not grown, grown


def test_the_counter_sees_each_kind_of_decision():
    import head_name_counts  # pylint: disable=import-outside-toplevel
    text = '\n'.join([
        'if head == "classifier": pass',
        'if x in ("tagger", "squad"): pass',
        'for head in ("classifier", "squad"): pass',
        'if signature == "words": pass',
        'if kind == "squad": pass',
        'if task_type == "regression": pass',
        'TABLE = {"encoder": 1}',
        'ORDER = ("encoder", "classifier")',
        'if "tagger/output_weights" in names: pass',
        'bilstm = any(n.startswith("bilstm_") for n in names)',
        'if settings.doc_stride < 1: pass',
        'stride = ner_data.DEFAULT_DOC_STRIDE if s is None else s',
        'if mode == "regression": pass',
        'if head_types.find(name).word_tags: pass',
        'x = 1 if entry.class_labels else 2',
        'if settings.long_text: pass',
        'if head.name == "ranker": pass',
        'if entry.runner != "run_unregistered": pass',
    ])
    found = head_name_counts.totals(head_name_counts.count([("x.py", text)]))
    assert found == {"names": 5, "signatures": 2, "sub_kinds": 1, "tables": 2,
                     "variable_detection": 2, "flag_branches": 2, "doc_stride_checks": 1,
                     "tagger_windows": 1}
    inside = head_name_counts.totals(head_name_counts.count([("bert_tf2/heads.py", text)]))
    assert inside == dict.fromkeys(found, 0) | {"doc_stride_checks": 1,
                                                  "tagger_windows": 1}


def test_one_check_of_a_taggers_doc_stride_for_every_door():
    from bert_tf2.export import serving_tagger  # pylint: disable=import-outside-toplevel
    from bert_tf2.tasks import ner_data  # pylint: disable=import-outside-toplevel
    for check in (ner_data.doc_stride_of, serving_tagger.check_doc_stride):
        assert check(None) == ner_data.DEFAULT_DOC_STRIDE == 128
        assert check(3) == 3
        with pytest.raises(ValueError, match=r"^--doc_stride=0 must be >= 1$"):
            check(0)


def test_warmup_rows_take_the_format_the_signature_kind_reads(tmp_path):
    from bert_tf2.export import warmup  # pylint: disable=import-outside-toplevel
    table = tmp_path / "dev.tsv"
    table.write_text("text\tlabel\nIt rained.\tno\nA b.\tyes\n", encoding="utf-8")
    lines = tmp_path / "dev.txt"
    lines.write_text("It rained.\tA b.\n", encoding="utf-8")

    def rows(model_type, path, **given):
        settings = export_saved_model.Settings(model_type=model_type, **given)
        return warmup.read_rows(settings, ("text", None, "label"))

    assert rows("classifier", table, warmup_file=str(table)) == [("It rained.",), ("A b.",)]
    assert rows("classifier", lines, warmup_file=str(lines)) == [("It rained.", "A b.")]
    # A LiteRT --calibration_file of a classifier is its format by its ending only.
    assert rows("classifier", lines, calibration_file=str(lines), warmup_examples=5) == [
        ("It rained.", "A b.")]
    three = tmp_path / "three.txt"
    three.write_text("a\tb\tc\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"example 1 has 3 tab-separated field\(s\), a "
                                         r"request of this model is text_a\[<TAB>text_b\]"):
        rows("classifier", three, warmup_file=str(three))
    assert head_types.signature_of("squad").requests == ("answer", "serving_default")
    assert head_types.signature_of("tagger").inputs([b"a", b"b"]) == {"text": [b"a\tb"]}


def test_an_hf_export_of_a_type_it_does_not_know_is_one_line(tmp_path):
    # Checked before the folder is read. Before: the folder's own error first, and with a
    # folder of another head an AttributeError ('NoneType' ... 'part_of') from inside.
    from bert_tf2.convert import hf_export  # pylint: disable=import-outside-toplevel
    with pytest.raises(ValueError, match=r"^--model_type must be one of %s, got 'tagger crf'$"
                       % re.escape(", ".join(head_types.HF))):
        hf_export.HfExport(str(tmp_path / "missing" / "bert_model.ckpt"), "tagger crf")


# Issue 93: the lists the tests go through are read from the registry and from the root on
# disk. A head added as a new head is (a room module in bert_tf2/export/model_types/, found
# by head_types as at a process's start) is in each of them, with no test list edited.

# A toy ranker's room: a pair head beside the classifier, written as a new head's module is
# (a name no real head takes: the test adds it to whatever the registry holds).
_RANKER_ROOM = '''"""A toy cross-encoder ranker's room (a test's)."""
from bert_tf2.export.model_types import base


class ToyRanker(base.ModelType):
    """A (query, passage) pair, a score."""


ENTRY = ToyRanker(
    "toy_ranker", "run_toy_ranker", ("toy ranker",),
    build=base.head_builder("BertClassifier", "num_labels"),
    listed_after="multiple_choice", tf1=True, litert=True,
    held_marks=("toy_ranker/output_weights", "toy_ranker/output_bias"), hf_class="BertForRanking",
    hf_head_keys=(("toy_ranker/output_weights", "classifier.weight"),
                  ("toy_ranker/output_bias", "classifier.bias")))
'''


@pytest.fixture
def ranker_room(tmp_path, monkeypatch):
    """The registry with the toy ranker's room added (its module in a folder of the rooms'
    package path), and without it again after the test."""
    import importlib  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel
    from bert_tf2.export import head_classes  # pylint: disable=import-outside-toplevel
    from bert_tf2.export import model_types  # pylint: disable=import-outside-toplevel
    (tmp_path / "toy_ranker.py").write_text(_RANKER_ROOM, encoding="utf-8")
    names = set(vars(head_classes))
    monkeypatch.setattr(model_types, "__path__", list(model_types.__path__) + [str(tmp_path)])
    try:
        importlib.reload(head_types)
        importlib.reload(head_classes)
        yield head_types.find("toy_ranker")
    finally:
        monkeypatch.undo()
        sys.modules.pop("bert_tf2.export.model_types.toy_ranker", None)
        importlib.reload(head_types)
        importlib.reload(head_classes)
        for name in set(vars(head_classes)) - names:  # a reload keeps what it does not set
            delattr(head_classes, name)


def test_a_head_added_to_the_registry_is_in_every_derived_list(ranker_room, monkeypatch):
    import head_name_counts  # pylint: disable=import-outside-toplevel
    from bert_tf2.export import head_classes  # pylint: disable=import-outside-toplevel
    assert ranker_room is not None and ranker_room.name == "toy_ranker"
    # The registry's door lists, in the places the rules give (among the heads there were
    # before it); its lookups; the old home.
    assert head_types.SERVED == _AT_START["served"] + ("toy_ranker",)
    assert head_types.TF1 == _AT_START["tf1"][:-1] + ("toy_ranker", "encoder")
    assert head_types.HF[-2:] == head_types.HELD[-2:] == ("toy_ranker", "encoder")
    assert head_types.LITERT[-1] == "toy_ranker"
    assert head_types.held_by({"toy_ranker/output_weights", "toy_ranker/output_bias"}) is ranker_room
    assert head_types.detect_tf1({"toy_ranker/output_weights", "toy_ranker/output_bias"}) is \
        ranker_room
    assert head_classes.ToyRanker is type(ranker_room) and ranker_room in head_classes.ENTRIES
    # The type its runner's folders export as (model_folder.defaults reads it from here).
    assert head_types.type_of_runner("run_toy_ranker") == "toy_ranker"
    # The rules instead of pinned tuples hold with it; the checks that read the lists pass.
    assert not door_list_problems(head_types.ENTRIES)
    test_the_rules_give_the_orders_the_ranks_gave()
    test_get_names_the_flag_and_the_choices()
    test_the_door_list_rules_catch_a_misplaced_statement()
    # export_saved_model --model_type's help names it (the flags defined anew).
    from absl import flags  # pylint: disable=import-outside-toplevel
    fv = flags.FlagValues()
    export_saved_model.define_flags(fv)
    assert "toy_ranker (a run_toy_ranker model)" in fv["model_type"].help
    # The runners of the registry's heads (tests/test_task_protocol.FACES).
    assert "run_toy_ranker" in registry_lists.head_runners()
    # The name-count guard: its names, its head modules (its runner, a module named after it).
    assert {"toy_ranker", "run_toy_ranker"} <= head_name_counts.type_names()
    modules = head_name_counts.head_modules(paths=["bert_tf2/tasks/toy_ranker_task.py"])
    assert {"run_toy_ranker.py", "bert_tf2/tasks/toy_ranker_task.py"} <= modules
    text = ('if name == "toy_ranker": pass\nTABLE = {"toy_ranker": 1}\n'
            'if head.name == "toy_ranker": pass\n')
    found = head_name_counts.totals(head_name_counts.count([("x.py", text)]))
    assert (found["names"], found["tables"]) == (2, 1)
    inside = head_name_counts.totals(head_name_counts.count([("run_toy_ranker.py", text)]))
    assert (inside["names"], inside["tables"]) == (0, 0)
    # The parity matrix: a Head class added to parity_helpers is one of its heads.
    ranker = type("ToyRanker", (parity_helpers.Head,), {
        "name": "toy_ranker", "runner": "run_toy_ranker", "model_type": "toy_ranker",
        "registry_head": "toy ranker"})
    monkeypatch.setattr(parity_helpers, "ToyRanker", ranker, raising=False)
    assert parity_helpers.head_classes()["toy_ranker"] is ranker
    test_the_parity_heads_are_registry_heads("toy_ranker")


def test_the_registry_is_today_s_after_a_room_was_added():
    import head_name_counts  # pylint: disable=import-outside-toplevel
    from bert_tf2.export import head_classes  # pylint: disable=import-outside-toplevel
    assert "toy_ranker" not in head_types.SERVED
    assert "toy_ranker" not in head_name_counts.type_names()
    assert not hasattr(head_classes, "ToyRanker")
    assert _names(head_types.ENTRIES) == _AT_START["listed"]


def test_a_face_added_at_the_root_is_in_every_runner_list(tmp_path):
    # The runner lists (tests/test_layout.RUNNERS, test_docs' flag pages, the smoke check's
    # TOP_LEVEL) are the root's faces on disk: a script with define_flags, run and main.
    import importlib.util  # pylint: disable=import-outside-toplevel
    (tmp_path / "run_ranker.py").write_text(
        "def define_flags(fv):\n    pass\n\n\ndef run(settings):\n    pass\n\n\n"
        "def main():\n    pass\n", encoding="utf-8")
    (tmp_path / "modeling.py").write_text("class BertConfig:\n    pass\n", encoding="utf-8")
    (tmp_path / "setup.py").write_text("def main():\n    pass\n", encoding="utf-8")
    assert registry_lists.root_faces(tmp_path) == ["run_ranker"]
    assert registry_lists.root_modules(tmp_path) == ["modeling", "run_ranker"]
    spec = importlib.util.spec_from_file_location("smoke_check",
                                                  REPO_ROOT / "tests" / "smoke" / "check.py")
    smoke = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(smoke)
    assert smoke.top_level(str(tmp_path)) == {"modeling", "run_ranker", "bert", "bert_tf2"}
    assert smoke.TOP_LEVEL == set(registry_lists.root_modules()) | {"bert", "bert_tf2"}


def test_a_warmup_files_error_names_the_file_once(tmp_path):
    """A reader's error that names its file ("PATH, line 2: ...") is not prefixed with the
    path again ("--warmup_file=PATH: PATH, line 2: ..." before)."""
    from bert_tf2.export import warmup  # pylint: disable=import-outside-toplevel
    lines = tmp_path / "fill.txt"
    lines.write_text("a [MASK] b\nno mask here\n", encoding="utf-8")
    settings = export_saved_model.Settings(model_type="masked_lm", warmup_file=str(lines))
    with pytest.raises(ValueError) as raised:
        warmup.read_rows(settings, None)
    text = str(raised.value)
    assert text.startswith("--warmup_file=%s" % lines), text
    assert text.count(str(lines)) == 1, text


def test_each_room_holds_one_head_and_the_rooms_hold_them_all():
    """No module holds more than one head's class (issue 93: head_classes.py held them
    all); each registered head's class and entry live in one room of model_types/."""
    from bert_tf2.export.model_types import base  # pylint: disable=import-outside-toplevel

    def subclasses(cls):
        return [c for sub in cls.__subclasses__() for c in [sub] + subclasses(sub)]
    by_module = {}
    for cls in subclasses(base.ModelType):
        # The package's classes only: a test's own stand-ins (test_serving.py makes two
        # subclasses of a room's class) are found too when that file ran first here.
        if cls.__module__.startswith("bert_tf2."):
            by_module.setdefault(cls.__module__, []).append(cls.__name__)
    crowded = {module: names for module, names in by_module.items() if len(names) > 1}
    assert not crowded, crowded
    for entry in head_types.ENTRIES:
        module = importlib.import_module(type(entry).__module__)
        assert module.__name__.startswith("bert_tf2.export.model_types."), entry.name
        assert module.ENTRY is entry, entry.name
