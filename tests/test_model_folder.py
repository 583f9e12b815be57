"""model_folder: what a training run leaves in its output folder, and the one reader."""
import hashlib
import json
import os

import pytest

import run_classifier as rc
from bert_tf2 import fileutil
from bert_tf2.trainer import model_folder
from conftest import write_text


def _files(tmp_path):
    return (write_text(tmp_path / "in" / "config.json", '{"hidden_size": 16}'),
            write_text(tmp_path / "in" / "vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n"))


def test_write_then_read_back_and_resume_rules(tmp_path):
    config, vocab = _files(tmp_path)
    out = tmp_path / "out"
    values = {"do_lower_case": False, "max_seq_length": 32, "task_name": "csv",
              "not_saved": 1}
    model_folder.write(str(out), "run_classifier", config, vocab, values)
    vocab_bytes = (tmp_path / "in" / "vocab.txt").read_bytes()
    assert json.loads((out / "model_settings.json").read_text()) == {
        "runner": "run_classifier", "do_lower_case": False, "max_seq_length": 32,
        "task_name": "csv", "files": {"vocab.txt": {
            "size": 24, "sha256": hashlib.sha256(vocab_bytes).hexdigest()}}}
    assert (out / "vocab.txt").read_text() == (tmp_path / "in" / "vocab.txt").read_text()
    # Resumed: the same content (a JSON config spelt otherwise too) is kept.
    write_text(tmp_path / "in" / "config.json", '{ "hidden_size" : 16 }\n')
    model_folder.write(str(out), "run_classifier", config, vocab, values)
    assert (out / "bert_config.json").read_text() == '{"hidden_size": 16}'
    other = write_text(tmp_path / "other.txt", "[PAD]\n[CLS]\n")
    with pytest.raises(ValueError, match=r"--vocab_file=.*other.txt differs from .*out/vocab.txt"):
        model_folder.write(str(out), "run_classifier", config, other, values)
    found = model_folder.defaults(rc.Settings(init_checkpoint=str(out)).part(
        *model_folder.SETTINGS), "run_classifier")
    assert found == {"bert_config_file": str(out / "bert_config.json"),
                     "vocab_file": str(out / "vocab.txt"), "do_lower_case": False,
                     "max_seq_length": 32, "task_name": "csv"}
    # Another runner's folder gives the model, not its task; training runs the model only.
    assert "task_name" not in model_folder.defaults(rc.Settings(
        init_checkpoint=str(out)).part(*model_folder.SETTINGS), "run_ner")
    assert set(model_folder.defaults(rc.Settings(init_checkpoint=str(out), do_train=True).part(
        *model_folder.SETTINGS), "run_classifier")) == {"bert_config_file", "vocab_file",
                                                       "do_lower_case"}


def test_a_given_setting_that_contradicts_is_one_warning(tmp_path, caplog):
    config, vocab = _files(tmp_path)
    out = tmp_path / "out"
    model_folder.write(str(out), "run_classifier", config, vocab, {"max_seq_length": 32})
    other = write_text(tmp_path / "other.txt", "[PAD]\n[CLS]\n")
    part = rc.Settings(init_checkpoint=str(out / "model.ckpt-3"), max_seq_length=64,
                       vocab_file=other, bert_config_file=config).part(*model_folder.SETTINGS)
    caplog.clear()
    assert model_folder.defaults(part, "run_classifier")["max_seq_length"] == 32
    assert sorted(r.getMessage() for r in caplog.records if r.levelname == "WARNING") == [
        "--max_seq_length=64 is used, not the 32 of %s (a setting given wins)"
        % (out / "model_settings.json"),
        "--vocab_file=%s is used, not the folder's %s (other content; a setting given wins)"
        % (other, out / "vocab.txt")]


def test_folders_without_the_files_give_nothing(tmp_path):
    (tmp_path / "old").mkdir()
    assert model_folder.defaults(rc.Settings(init_checkpoint=str(tmp_path / "old")).part(
        *model_folder.SETTINGS), "run_classifier") == {}
    for name in ("bert_config.json", "vocab.txt", "model_settings.json", "classifier_task.json"):
        assert name in fileutil.SETTINGS_FILES


def _read(out):
    return model_folder.read(str(out))[0]


def test_vocab_and_label_files_are_checked_against_the_training_run(tmp_path):
    config, vocab = _files(tmp_path)
    out = tmp_path / "out"
    write_text(out / "label_list.txt", "neg\npos\n")
    model_folder.write(str(out), "run_classifier", config, vocab, {"max_seq_length": 32})
    saved = json.loads((out / "model_settings.json").read_text())
    assert saved["files"]["label_list.txt"] == {
        "size": 8, "sha256": hashlib.sha256(b"neg\npos\n").hexdigest()}
    assert _read(out)["vocab_file"] == str(out / "vocab.txt")
    # The labels reordered: every name would be swapped.
    write_text(out / "label_list.txt", "pos\nneg\n")
    with pytest.raises(ValueError, match=r"^\S+/out/label_list\.txt is not the file the "
                       r"model in \S+/out was trained with \(8 bytes, sha256 \w+\.\.\., "
                       r"recorded in model_settings\.json: 8 bytes, sha256 \w+\.\.\.\): "
                       r"another label order gives other ids or names; [^\n]*$"):
        _read(out)
    write_text(out / "label_list.txt", "neg\npos\n")
    # Another vocabulary (one more word) put in the folder.
    write_text(out / "vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n")
    with pytest.raises(ValueError, match=r"out/vocab\.txt is not the file .*\(28 bytes.*"
                       r"24 bytes.*another vocabulary"):
        _read(out)
    # A folder written before checksums were recorded keeps loading.
    del saved["files"]
    write_text(out / "model_settings.json", json.dumps(saved))
    assert _read(out)["max_seq_length"] == 32


@pytest.mark.parametrize("values, message", [
    ({"max_seq_length": "32"}, r"'max_seq_length' is \"32\", expected an integer"),
    ({"max_seq_length": True}, r"'max_seq_length' is true, expected an integer"),
    ({"do_lower_case": "false"}, r"'do_lower_case' is \"false\", expected true/false"),
    ({"runner": "run_ner", "crf": 1}, r"'crf' is 1, expected true/false"),
    ({"runner": "run_classifier", "crf": True},
     r"crf is a setting of another runner than its \"runner\" run_classifier"),
    ({"runner": "run_tagger"}, r"\"runner\" is \"run_tagger\", expected one of"),
    ({"runner": "run_ner", "files": ["vocab.txt"]}, r"'files' must map file names"),
])
def test_every_value_read_from_the_folder_is_type_checked(tmp_path, values, message):
    write_text(tmp_path / "model_settings.json", json.dumps(values))
    with pytest.raises(ValueError, match="^" + os.path.join(str(tmp_path), "model_settings.json")
                       .replace(".", r"\.") + ": " + message):
        _read(tmp_path)
    # sentence_embedding.json (a converted model) likewise.
    if "max_seq_length" in values:
        os.remove(str(tmp_path / "model_settings.json"))
        write_text(tmp_path / "sentence_embedding.json", json.dumps(dict(
            values, layers=[-1], pooling="mean")))  # pooling's own keys: not ours to check
        with pytest.raises(ValueError, match="sentence_embedding.json: 'max_seq_length'"):
            _read(tmp_path)


def test_a_converted_models_sentence_embedding_json_reads_with_its_own_keys(tmp_path):
    write_text(tmp_path / "sentence_embedding.json", json.dumps(
        {"pooling": "mean", "layers": [-1], "normalize": True, "max_seq_length": 128,
         "do_lower_case": True}))
    assert _read(tmp_path) == {"max_seq_length": 128, "do_lower_case": True}


# What earlier versions wrote into model_settings.json beside runner, do_lower_case and
# max_seq_length (model_folder.TASK_SETTINGS until issue 93 moved each row to its face's
# FOLDER_SETTINGS): a folder of theirs reads the same (a format, kept; not a list of runners).
_WRITTEN_BEFORE = {
    "run_classifier": {"task_name": "csv", "processor": None, "task_type": "multilabel",
                       "text_a_column": "text", "text_b_column": None, "label_column": "y",
                       "threshold": 0.5, "xnli_language": "zh"},
    "run_ner": {"doc_stride": 64, "document_context": True, "feature_based": False,
                "layers": "-1,-2,-3,-4", "lstm_units": 768, "crf": True,
                "crf_tag_scheme": "iob2"},
    "run_multiple_choice": {"task_name": "swag"},
    "run_squad": {"doc_stride": 128, "max_query_length": 64, "version_2_with_negative": True},
    "run_pretraining": {"max_predictions_per_seq": 20},
}


@pytest.mark.parametrize("runner", sorted(_WRITTEN_BEFORE))
def test_folders_written_before_the_faces_declared_their_settings_read_the_same(
        tmp_path, runner):
    saved = dict(_WRITTEN_BEFORE[runner], runner=runner, do_lower_case=True,
                 max_seq_length=64)
    write_text(tmp_path / "model_settings.json", json.dumps(saved))
    assert _read(tmp_path) == saved
    assert set(model_folder.task_settings(runner)) == set(_WRITTEN_BEFORE[runner])
    assert set(model_folder.task_settings(runner)) <= set(model_folder.SETTINGS)
    # Given back to a later run of that runner (not training): every one of them.
    module = __import__(runner)
    part = module.Settings(init_checkpoint=str(tmp_path)).part(*model_folder.SETTINGS)
    assert set(model_folder.defaults(part, runner)) == {
        key for key in saved if key != "runner" and key in part}
    assert all(key in part for key in _WRITTEN_BEFORE[runner])


def test_every_runner_face_declares_its_folder_settings_with_their_types():
    # The runners are the faces declaring FOLDER_SETTINGS; each setting has its VALUE_TYPES
    # row (read() checks it) and is in SETTINGS (defaults() reads it).
    runners = model_folder.runners()
    assert set(_WRITTEN_BEFORE) | {"run_ranker"} <= set(runners)
    for runner in runners:
        for name in model_folder.task_settings(runner):
            assert name in model_folder.VALUE_TYPES and name in model_folder.SETTINGS, (
                runner, name)


def test_a_runner_keeps_the_settings_its_face_declares(tmp_path, monkeypatch):
    # A runner's face declares FOLDER_SETTINGS, read from its file (not imported); a file
    # that is no face, or a name that is no module, is unknown.
    from bert_tf2 import root_modules  # pylint: disable=import-outside-toplevel
    assert model_folder.task_settings("run_classifier") == rc.FOLDER_SETTINGS
    face = "def define_flags(fv):\n  pass\n\ndef run(s):\n  pass\n\ndef main():\n  pass\n"
    write_text(tmp_path / "run_newhead.py", 'FOLDER_SETTINGS = ("task_name",)\n' + face)
    write_text(tmp_path / "run_plain.py", 'FOLDER_SETTINGS = ("task_name",)\n')
    write_text(tmp_path / "run_odd.py", "FOLDER_SETTINGS = ('a', 1)\n" + face)
    monkeypatch.setattr(root_modules, "ROOT", str(tmp_path))
    assert model_folder.task_settings("run_newhead") == ("task_name",)
    for name in ("run_plain", "run_missing", "../run_newhead", None, "run_classifier"):
        assert model_folder.task_settings(name) is None, name
    with pytest.raises(ValueError, match=r"^run_odd\.py: FOLDER_SETTINGS must be a tuple"):
        model_folder.task_settings("run_odd")
    out = tmp_path / "out"
    out.mkdir()
    write_text(out / "model_settings.json", json.dumps(
        {"runner": "run_newhead", "task_name": "x", "max_seq_length": 16}))
    assert _read(out)["task_name"] == "x"
    write_text(out / "model_settings.json", json.dumps({"runner": "run_newhead", "crf": True}))
    with pytest.raises(ValueError, match=r"crf is a setting of another runner than its "
                                         r"\"runner\" run_newhead"):
        _read(out)
    write_text(out / "model_settings.json", json.dumps({"runner": "run_plain"}))
    with pytest.raises(ValueError, match=r"\"runner\" is \"run_plain\", expected one of "
                                         r"run_newhead, run_odd or "
                                         r"a root face declaring FOLDER_SETTINGS"):
        _read(out)
