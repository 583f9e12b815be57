"""A model folder's label order, checked by one function at every reader of --labels_file.

The label_list.txt beside a trained head is the order of its outputs. A --labels_file in
another order renamed the outputs at the export and the conversion (before the fix: the
folder's Predictor said `neg`, the export served `pos` for the same text; HuggingFace's
id2label swapped). Every root face whose Settings has a labels_file is found here (not
listed by hand), and each refuses such a file for each head it reads labels of, and takes
the same order (a runner's Predictor too).
"""
import dataclasses
import importlib
import json
import re

import pytest

from bert_tf2.tasks import label_order
from bert_tf2.trainer import checkpoints
from conftest import random_head_model, write_text
import registry_lists

_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film", "john", "paris"]
_CONFIG = {"vocab_size": len(_VOCAB), "hidden_size": 16, "num_hidden_layers": 1,
           "num_attention_heads": 2, "intermediate_size": 32, "hidden_act": "gelu",
           "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
           "max_position_embeddings": 32, "type_vocab_size": 2, "initializer_range": 0.2}
# Each kind of head with a label list: (model, classifier_task.json's task_type, labels).
_HEADS = {"classifier": ("classifier", "classification", ["neg", "neutral", "pos"]),
          "multilabel": ("classifier", "multilabel", ["sports", "tech", "arts"]),
          "tagger": ("tagger", None, ["O", "B-PER", "I-PER", "B-LOC"])}


def _model_folder(tmp_path, head):
    """A trained-looking model folder of `head` (random weights): checkpoint, config,
    vocab, model_settings.json and the label list in the head's output order."""
    model_name, kind, labels = _HEADS[head]
    folder = tmp_path / head
    folder.mkdir()
    model = random_head_model(model_name, _CONFIG, len(labels))
    checkpoints.write_tf1_checkpoint({checkpoints.tf1_name(v): v.numpy()
                                      for v in model.variables}, str(folder / "model.ckpt-1"))
    write_text(folder / "bert_config.json", json.dumps(_CONFIG))
    write_text(folder / "vocab.txt", "\n".join(_VOCAB) + "\n")
    write_text(folder / "label_list.txt", "\n".join(labels) + "\n")
    settings = {"do_lower_case": True, "max_seq_length": 16}
    if kind:
        task = "csv" if kind == "classification" else "multilabel"
        settings.update(runner="run_classifier", task_name=task)
        write_text(folder / "classifier_task.json",
                   json.dumps({"task_name": task, "task_type": kind}))
    else:
        settings.update(runner="run_ner", crf=False, crf_tag_scheme="none")
    write_text(folder / "model_settings.json", json.dumps(settings))
    return folder


def _run_classifier(tmp_path, head, folder):
    data = tmp_path / "data"
    if head == "multilabel":
        write_text(data / "test.tsv", "good film\nbad film\n")
    else:
        write_text(data / "test.csv", "text\ngood film\nbad film\n")
    return {"task_name": "multilabel" if head == "multilabel" else "csv",
            "data_dir": str(data), "do_predict": True, "init_checkpoint": str(folder),
            "output_dir": str(tmp_path / "out"), "max_seq_length": 16}


def _run_ner(tmp_path, head, folder):
    del head
    data = tmp_path / "data"
    write_text(data / "test.txt", "john\nparis\n\ngood\n")
    return {"data_dir": str(data), "do_predict": True, "init_checkpoint": str(folder),
            "output_dir": str(tmp_path / "out"), "max_seq_length": 16, "doc_stride": 8}


def _export_saved_model(tmp_path, head, folder):
    return {"model_type": "tagger" if head == "tagger" else "classifier",
            "init_checkpoint": str(folder), "export_dir": str(tmp_path / "out"),
            "max_seq_length": 16}


def _convert_hf_checkpoint(tmp_path, head, folder):
    del head
    return {"direction": "to_hf", "init_checkpoint": str(folder),
            "output_dir": str(tmp_path / "out")}


# Every face whose Settings has labels_file: (its settings for a head's folder, the heads
# whose label lists it reads). A face added with the flag fails
# test_every_face_reading_labels_file_is_run_here until it is here.
_FACE_RUNS = {"run_classifier": (_run_classifier, ("classifier", "multilabel")),
              "run_ner": (_run_ner, ("tagger",)),
              "export_saved_model": (_export_saved_model, ("classifier", "multilabel",
                                                           "tagger")),
              "convert_hf_checkpoint": (_convert_hf_checkpoint, ("classifier", "multilabel",
                                                                 "tagger"))}


def test_every_face_reading_labels_file_is_run_here():
    faces = registry_lists.root_faces()
    assert {"run_classifier", "export_saved_model", "convert_keras_hub"} <= set(faces)
    reading = {name for name in faces if "labels_file" in {
        field.name for field in dataclasses.fields(importlib.import_module(name).Settings)}}
    assert reading == set(_FACE_RUNS), (
        "faces with a labels_file setting: %s; tests/test_label_order.py runs %s: give a new "
        "one its run in _FACE_RUNS (and its labels through label_order.read_labels_file)"
        % (sorted(reading), sorted(_FACE_RUNS)))


@pytest.mark.slow
@pytest.mark.parametrize("face_name,head", [(face, head) for face, (_, heads)
                                            in sorted(_FACE_RUNS.items()) for head in heads])
def test_a_labels_file_in_another_order_is_refused_the_same_order_taken(tmp_path, face_name,
                                                                       head):
    face = importlib.import_module(face_name)
    folder = _model_folder(tmp_path, head)
    labels = _HEADS[head][2]
    settings = _FACE_RUNS[face_name][0](tmp_path, head, folder)
    fields = {field.name for field in dataclasses.fields(face.Settings)}
    settings.update({name: str(folder / file) for name, file in (
        ("vocab_file", "vocab.txt"), ("bert_config_file", "bert_config.json")) if name in fields})
    swapped = write_text(tmp_path / "swapped.txt", "\n".join([labels[1], labels[0]]
                                                             + labels[2:]) + "\n")
    with pytest.raises(ValueError, match=r"^%s lists the labels %s, the model's outputs in "
                                         r"order; (?:--)?labels_file=%s has .*\(output 0: %r there, "
                                         r"%r here\)" % (
                                             re.escape(str(folder / "label_list.txt")),
                                             re.escape(", ".join(labels)),
                                             re.escape(str(swapped)), labels[0], labels[1])):
        face.run(face.Settings(labels_file=swapped, **settings))
    out = tmp_path / "out"
    assert not out.exists() or not [p for p in out.iterdir() if p.name != "tf_logs"], (
        sorted(p.name for p in out.iterdir()))
    same = write_text(tmp_path / "same.txt", "\n".join(labels) + "\n")
    face.run(face.Settings(labels_file=same, **settings))
    if hasattr(face, "Predictor"):  # a runner's Python door reads the setting the same way
        with pytest.raises(ValueError, match=r"--labels_file=%s has .*\(output 0: "
                                             % re.escape(str(swapped))):
            face.Predictor(str(folder), labels_file=swapped)
        face.Predictor(str(folder), labels_file=same).close()
    if face_name == "convert_hf_checkpoint":
        config = json.loads((out / "config.json").read_text())
        assert config["id2label"] == {str(i): label for i, label in enumerate(labels)}
    if face_name == "export_saved_model":
        info = json.loads((out / "assets.extra" / "export_info.json").read_text())
        assert info["labels"] == labels


def test_the_one_check_names_both_lists_and_the_first_difference(tmp_path):
    from bert_tf2 import fileutil  # pylint: disable=import-outside-toplevel
    folder_list = write_text(tmp_path / "label_list.txt", "neg\npos\n")
    given = write_text(tmp_path / "given.txt", "neg\npos\n")
    read = fileutil.read_label_list
    assert label_order.read_labels_file(given, folder_list, read) == ["neg", "pos"]
    assert label_order.read_labels_file(None, folder_list, read) == ["neg", "pos"]
    assert label_order.read_labels_file(None, None, read) is None
    assert label_order.read_labels_file(given, None, read) == ["neg", "pos"]  # no list there
    for text, difference in (("pos\nneg\n", "output 0: 'neg' there, 'pos' here"),
                             ("neg\npos\nneutral\n", "2 labels there, 3 here"),
                             ("neg\n", "2 labels there, 1 here")):
        write_text(tmp_path / "given.txt", text)
        with pytest.raises(ValueError) as caught:
            label_order.read_labels_file(given, folder_list, read)
        message = str(caught.value)
        assert "\n" not in message and str(folder_list) in message and str(given) in message
        assert "(%s): give --labels_file in that order, or leave it out" % difference in message
    # A task's own labels (a built-in --task_name) against the folder's: the same check.
    with pytest.raises(ValueError, match=r"label_list.txt lists the labels neg, pos, the "
                                         r"model's outputs in order; --task_name=sst-2 has 0, "
                                         r"1 \(output 0: 'neg' there, '0' here\)$"):
        label_order.check(["0", "1"], "--task_name=sst-2", folder_list, read)


def test_a_bom_is_no_part_of_the_first_label(tmp_path):
    # Notepad's UTF-8 BOM stayed in the first label ("\ufeffneg"): a --labels_file saved so
    # was then "another order" than the folder's, and a label_list.txt so named a label
    # no data file holds.
    from bert_tf2 import fileutil  # pylint: disable=import-outside-toplevel
    given = tmp_path / "given.txt"
    given.write_bytes(b"\xef\xbb\xbfneg\r\npos\r\n")
    assert fileutil.read_label_list(str(given)) == ["neg", "pos"]
    folder_list = write_text(tmp_path / "label_list.txt", "neg\npos\n")
    assert label_order.read_labels_file(str(given), folder_list,
                                        fileutil.read_label_list) == ["neg", "pos"]


@pytest.mark.parametrize("line", ["B-PER\tI-PER", "B-PER I-PER"])
def test_a_tag_line_holding_a_blank_is_refused_naming_file_and_line(tmp_path, line):
    # One line "B-PER<tab>I-PER" was one tag holding a tab: no CoNLL word can carry it (its
    # columns end at blanks) and the predictions file read it back as two tags.
    from bert_tf2.tasks import ner_data  # pylint: disable=import-outside-toplevel
    path = write_text(tmp_path / "tags.txt", "O\n%s\nB-LOC\n" % line)
    with pytest.raises(ValueError, match=r"^%s, line 2: label %s contains %s, which a label "
                                         r"may not hold \(a CoNLL tag holds no blank: one tag "
                                         r"per line\)$" % (re.escape(path), re.escape(repr(line)),
                                                          re.escape(repr(line[5])))):
        ner_data.read_labels(path)
    # A classifier's label may hold a space (it is no CoNLL tag).
    from bert_tf2 import fileutil  # pylint: disable=import-outside-toplevel
    assert fileutil.read_label_list(path)[1] == line
