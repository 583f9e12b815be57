"""The head registry (bert_tf2/export/head_types.py): one entry per model type, read by the
doors instead of comparisons of type names."""
import re

import pytest

import convert_tf1_checkpoint
import export_saved_model
import parity_helpers
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


def test_each_door_lists_the_registry_types():
    assert export_saved_model.MODEL_TYPES == head_types.SERVED == (
        "encoder", "classifier", "squad", "tagger", "multiple_choice", "masked_lm")
    assert litert_data.MODEL_TYPES == head_types.LITERT == (
        "classifier", "encoder", "tagger", "squad", "masked_lm")
    assert convert_tf1_checkpoint.MODEL_TYPES == ("auto",) + head_types.TF1
    assert set(export_saved_model._FLAGS_OF_TYPE) == set(head_types.SERVED)


@pytest.mark.parametrize("name", parity_helpers.HEADS)
def test_the_parity_heads_are_registry_heads(name):
    cls = parity_helpers._CLASSES.get(name, parity_helpers.Encoder)
    entry = head_types.find(cls.model_type)
    assert cls.registry_head in entry.heads
    # The matrix's LiteRT door: exported, or refused at export, as the entry says.
    expected = {"multilabel": False, "long_windows": False, "long_head_tail": False,
                "multiple_choice": False}.get(name, True)
    assert entry.carries_litert(cls.registry_head) is expected


def test_the_masked_lm_modules_names_are_its_entrys():
    from bert_tf2.export import masked_lm  # pylint: disable=import-outside-toplevel
    assert masked_lm.TF1_NAMES == tuple(
        name for name, _ in head_types.find("masked_lm").hf_head_keys)


def test_a_head_the_type_does_not_have_is_refused():
    with pytest.raises(ValueError, match="classifier has no head 'tagger crf'"):
        head_types.find("classifier").carries_litert("tagger crf")


def test_get_names_the_flag_and_the_choices():
    with pytest.raises(ValueError, match=r"^--model_type must be one of encoder, classifier, "
                                         r"squad, tagger, multiple_choice, masked_lm, got "
                                         r"'pretraining'$"):
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
    assert head_types.HF == ("pretraining", "masked_lm", "classifier", "tagger", "squad",
                             "multiple_choice", "encoder")
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
        assert bool(entry.hf_head_keys) is (entry.name != "encoder"), entry.name
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
    assert [e.name for e in head_types.ENTRIES if e.written_from(find("pretraining"))] == [
        "encoder", "pretraining", "masked_lm"]
    assert [e.name for e in head_types.ENTRIES if e.written_from(find("squad"))] == [
        "encoder", "squad"]
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
    ])
    found = head_name_counts.totals(head_name_counts.count([("x.py", text)]))
    assert found == {"names": 3, "signatures": 2, "sub_kinds": 1, "tables": 2,
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
    with pytest.raises(ValueError, match=r"^--model_type must be one of pretraining, masked_lm, "
                                         r"classifier, tagger, squad, multiple_choice, encoder, "
                                         r"got 'tagger crf'$"):
        hf_export.HfExport(str(tmp_path / "missing" / "bert_model.ckpt"), "tagger crf")
