"""The head registry (bert_tf2/export/head_types.py): one entry per model type, read by the
doors instead of comparisons of type names."""
import re

import pytest

import convert_tf1_checkpoint
import export_saved_model
import parity_helpers
import registry_lists
from bert_tf2 import heads
from bert_tf2.export import head_types
from bert_tf2.export import litert_data
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
    for runner, model_type in model_folder.MODEL_TYPES.items():
        entry = head_types.of_runner(runner)
        assert entry is not None and entry.name == model_type, runner
        assert entry.serves and entry.build is not None
    assert head_types.of_runner("create_vocab") is None


def _ranked(field, registered):
    return tuple(e.name for e in sorted((e for e in registered if getattr(e, field) is not None),
                                        key=lambda e: getattr(e, field)))


def door_list_problems(registered):
    """What breaks the rules of the door lists of registry entries `registered` (read, not
    pinned: a head added to the registry is in them with no edit here)."""
    problems = [p for field in registry_lists.DETECTION_RANKS + ("litert_rank",)
                for p in registry_lists.rank_problems(registered, field)]
    served = tuple(e.name for e in registered if e.serves)
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
    assert export_saved_model.MODEL_TYPES == head_types.SERVED == tuple(
        e.name for e in head_types.ENTRIES if e.serves)
    assert litert_data.MODEL_TYPES == head_types.LITERT == _ranked("litert_rank",
                                                                    head_types.ENTRIES)
    assert convert_tf1_checkpoint.MODEL_TYPES == ("auto",) + head_types.TF1
    assert head_types.TF1 == _ranked("tf1_rank", head_types.ENTRIES)
    assert set(export_saved_model._FLAGS_OF_TYPE) == set(head_types.SERVED)
    assert not door_list_problems(head_types.ENTRIES)
    # What each door carries of today's heads (a new head changes none of these).
    assert {"encoder", "classifier", "squad", "tagger", "multiple_choice", "masked_lm"} <= \
        set(head_types.SERVED) and "pretraining" not in head_types.SERVED
    assert {"classifier", "encoder", "tagger", "squad", "masked_lm"} <= set(head_types.LITERT)
    assert not {"multiple_choice", "pretraining"} & set(head_types.LITERT)
    assert head_types.LITERT[0] == "classifier"  # LiteRT's flags and messages name it first


def _changed(name, **changes):
    """The registry's entries with entry `name`'s fields changed (in its place)."""
    import dataclasses  # pylint: disable=import-outside-toplevel
    return [dataclasses.replace(e, **changes) if e.name == name else e
            for e in head_types.ENTRIES]


def test_the_door_list_rules_catch_a_misplaced_rank():
    assert door_list_problems(_changed("encoder", tf1_rank=-1, held_rank=-1, hf_rank=-1)) == [
        "%s: encoder matches every checkpoint but is not last" % field
        for field in ("tf1_rank", "held_rank", "hf_rank")]
    assert door_list_problems(_changed("masked_lm", hf_rank=-1)) == [
        "hf_rank: masked_lm before pretraining, which it is part of"]
    assert door_list_problems(_changed("tagger", held_rank=1.5, held_marks=(
        "output_weights", "output_bias", "x"))) == [
        "%s: classifier before tagger, whose marks hold all of its" % field
        for field in ("held_rank", "hf_rank")]
    assert door_list_problems(_changed("tagger", litert_rank=head_types.find(
        "classifier").litert_rank))[0].startswith("litert_rank: equal ranks")
    assert door_list_problems(_changed("pretraining", serves=True)) == [
        "pretraining is served as encoder and served too"]
    assert door_list_problems(list(head_types.ENTRIES[1:]) + [head_types.ENTRIES[0]])[0] == (
        "SERVED %s: the encoder is not first" % (head_types.SERVED[1:] + ("encoder",),))


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
    # pretraining head it is part of (registry_lists.rank_problems' rules).
    assert head_types.HF == _ranked("hf_rank", head_types.ENTRIES)
    assert set(head_types.HF) == {e.name for e in head_types.ENTRIES}
    assert head_types.HF[-1] == "encoder"
    assert head_types.HF.index("pretraining") < head_types.HF.index("masked_lm")
    for name in head_types.HF:
        assert head_types.of_hf_class(head_types.find(name).hf_class).name == name
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
    # The one rule (head_classes.ModelType.holds): every mark of a head, as held_by reads
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
NAME_COUNTS = {"names": 0, "signatures": 0, "sub_kinds": 0, "tables": 2,
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
# disk. A head added as a new head is (an entry in head_classes.ENTRIES, head_types read
# anew as at a process's start) is in each of them, with no test list edited.

def _dummy_head():
    """A ranker: a pair head beside the classifier, tried just before the encoder."""
    import dataclasses  # pylint: disable=import-outside-toplevel
    encoder = head_types.find("encoder")
    top_litert = max(e.litert_rank for e in head_types.ENTRIES if e.litert)
    return dataclasses.replace(
        head_types.find("classifier"), name="ranker", runner="run_ranker", heads=("ranker",),
        tf1_rank=encoder.tf1_rank - 0.5, litert_rank=top_litert + 1, litert_refused=(),
        hf_rank=encoder.hf_rank - 0.5, held_rank=encoder.held_rank - 0.5,
        held_marks=("ranker/output_weights", "ranker/output_bias"), hf_class="BertForRanking",
        hf_head_keys=(("ranker/output_weights", "classifier.weight"),
                      ("ranker/output_bias", "classifier.bias")),
        label_variable=None, keras_hub_class=None, keras_hub_weights=())


def test_a_head_added_to_the_registry_is_in_every_derived_list(monkeypatch):
    import importlib  # pylint: disable=import-outside-toplevel
    import head_name_counts  # pylint: disable=import-outside-toplevel
    from bert_tf2.export import head_classes  # pylint: disable=import-outside-toplevel
    before = {name: len(getattr(head_types, name)) for name in ("SERVED", "LITERT", "TF1", "HF")}
    original = head_classes.ENTRIES
    head_classes.ENTRIES = original + (_dummy_head(),)
    try:
        importlib.reload(head_types)
        # The registry's door lists, and its lookups.
        for name, size in before.items():
            assert "ranker" in getattr(head_types, name) and \
                len(getattr(head_types, name)) == size + 1, name
        assert head_types.held_by({"ranker/output_weights", "ranker/output_bias"}).name == \
            "ranker"
        assert head_types.detect_tf1({"ranker/output_weights", "ranker/output_bias"}).name == \
            "ranker"
        # The rules instead of pinned tuples hold with it; the checks that read the lists pass.
        assert not door_list_problems(head_types.ENTRIES)
        test_get_names_the_flag_and_the_choices()
        test_the_door_list_rules_catch_a_misplaced_rank()
        # The runners of the registry's heads (tests/test_task_protocol.FACES).
        assert "run_ranker" in registry_lists.head_runners()
        # The name-count guard: its names, its head modules.
        assert {"ranker", "run_ranker"} <= head_name_counts.type_names()
        assert "run_ranker.py" in head_name_counts.head_modules()
        text = 'if name == "ranker": pass\nTABLE = {"ranker": 1}\n'
        found = head_name_counts.totals(head_name_counts.count([("x.py", text)]))
        assert (found["names"], found["tables"]) == (1, 1)
        inside = head_name_counts.totals(head_name_counts.count([("run_ranker.py", text)]))
        assert (inside["names"], inside["tables"]) == (0, 0)
        # The parity matrix: a Head class added to parity_helpers is one of its heads.
        ranker = type("Ranker", (parity_helpers.Head,), {
            "name": "ranker", "runner": "run_ranker", "model_type": "ranker",
            "registry_head": "ranker"})
        monkeypatch.setattr(parity_helpers, "Ranker", ranker, raising=False)
        assert parity_helpers.head_classes()["ranker"] is ranker
        test_the_parity_heads_are_registry_heads("ranker")
    finally:
        head_classes.ENTRIES = original
        importlib.reload(head_types)
    assert "ranker" not in head_types.SERVED and "ranker" not in head_name_counts.type_names()


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
