"""The casing and the special tokens travel with every export (issue 91).

convert_hf_checkpoint.py --direction=to_hf and convert_keras_hub.py write the model folder's
casing (model_settings.json), else their --do_lower_case, else the reference's default True
with a warning when the vocabulary is visibly cased; a --do_lower_case that contradicts the
folder is used with the runners' one warning line (a setting given wins). HuggingFace's tokenizer reads a [CLS] / [SEP] / [MASK] typed in a text as
text, as ours does (split_special_tokens), but for a masked-LM head, whose fill-mask pipeline
needs its [MASK]s. A run that lower-cases a visibly cased vocabulary says so in one line.
"""
import importlib.util
import json
import logging
import os
import subprocess

import pytest

import convert_hf_checkpoint as hf_conv
import tokenization
from bert_tf2 import loaders
from bert_tf2.trainer import checkpoints
from conftest import HANG_GUARD_SECONDS, door_peer_missing, peer_python, random_head_model
from conftest import write_text

# A cased vocabulary: 15 entries hold upper-case letters (loaders.looks_cased), and every
# piece of _TEXTS is in it, cased or lower-cased, literal [CLS]s and [MASK]s included.
_CASED_VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "The", "cat", "Cat", "john", "John",
    "paris", "Paris", "lives", "Lives", "in", "In", "[", "]", ".", "CL", "cl", "##S", "##s",
    "SE", "se", "##P", "##p", "MA", "ma", "##SK", "##sk", "He", "he", "It", "it", "a", "A"]
_TEXTS = ["John lives in Paris.", "The Cat [CLS] sat in Paris [SEP] .",
          "He lives [MASK] in the [MASK].", "it [CLS]The[SEP]cat"]
_LENGTH = 24


def _config(vocab_size):
    return {"vocab_size": vocab_size, "hidden_size": 16, "num_hidden_layers": 1,
            "num_attention_heads": 2, "intermediate_size": 24, "hidden_act": "gelu",
            "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
            "max_position_embeddings": 32, "type_vocab_size": 2, "initializer_range": 0.2}


def _folder(root, head, settings, name=None, vocab=_CASED_VOCAB):
    """A model folder (TF1 checkpoint, bert_config.json, vocab.txt) with `settings` as its
    model_settings.json (None: none); a classifier's label_list.txt and task file too."""
    folder = root / (name or head)
    config = _config(len(vocab))
    model = random_head_model(head, config, 2 if head == "classifier" else None)
    folder.mkdir(parents=True)
    checkpoints.write_tf1_checkpoint({checkpoints.tf1_name(v): v.numpy()
                                      for v in model.variables}, str(folder / "model.ckpt-2"))
    write_text(folder / "bert_config.json", json.dumps(config))
    write_text(folder / "vocab.txt", "\n".join(vocab) + "\n")
    if head == "classifier":
        write_text(folder / "label_list.txt", "neg\npos\n")
        write_text(folder / "classifier_task.json",
                   json.dumps({"task_name": "csv", "task_type": "classification"}))
    if settings is not None:
        write_text(folder / "model_settings.json", json.dumps(settings))
    return folder


# run_pretraining records no casing (it has no --do_lower_case); a run_classifier does.
_PRETRAINING = {"runner": "run_pretraining", "max_seq_length": _LENGTH,
                "max_predictions_per_seq": 5}
_CASED_CLASSIFIER = {"runner": "run_classifier", "do_lower_case": False,
                     "max_seq_length": _LENGTH, "task_name": "csv"}


def _to_hf(folder, out, **values):
    return hf_conv.run(hf_conv.Settings(direction="to_hf", init_checkpoint=str(folder),
                                        output_dir=str(out), **values))


def _tokenizer_config(out):
    return json.loads((out / "tokenizer_config.json").read_text(encoding="utf-8"))


# ---------------------------------------------------------------------------
# HuggingFace: tokenizer_config.json
# ---------------------------------------------------------------------------

def test_a_pretraining_folder_reaches_hf_cased_with_the_flag(tmp_path):
    folder = _folder(tmp_path, "pretraining", _PRETRAINING)
    _to_hf(folder, tmp_path / "hf", do_lower_case=False)
    written = _tokenizer_config(tmp_path / "hf")
    assert written["do_lower_case"] is False
    # transformers' fill-mask pipeline finds the [MASK]s by their id: they stay special.
    assert written["split_special_tokens"] is False


def test_a_cased_folder_reaches_hf_cased_and_reads_special_names_as_text(tmp_path, caplog):
    folder = _folder(tmp_path, "classifier", _CASED_CLASSIFIER)
    _to_hf(folder, tmp_path / "hf")
    written = _tokenizer_config(tmp_path / "hf")
    assert written["do_lower_case"] is False and written["split_special_tokens"] is True
    with caplog.at_level(logging.WARNING, logger="absl"):
        _to_hf(folder, tmp_path / "hf_again", do_lower_case=False)  # the same as the folder's
    assert _tokenizer_config(tmp_path / "hf_again")["do_lower_case"] is False
    assert not [r for r in caplog.records if "a setting given wins" in r.getMessage()]


def test_a_flag_that_contradicts_the_folder_wins_with_the_runners_warning(tmp_path, caplog):
    """A flag given wins over the folder's record, in one warning line: the rule of every
    face that fills its settings from a model folder (model_folder.warn_given_wins)."""
    folder = _folder(tmp_path, "classifier", _CASED_CLASSIFIER)
    with caplog.at_level(logging.WARNING, logger="absl"):
        _to_hf(folder, tmp_path / "hf", do_lower_case=True)
    assert _tokenizer_config(tmp_path / "hf")["do_lower_case"] is True
    warned = [r.getMessage() for r in caplog.records if "a setting given wins" in r.getMessage()]
    assert len(warned) == 1, warned
    assert warned[0].startswith("--do_lower_case=True is used, not the false of ")
    assert "model_settings.json" in warned[0] and "\n" not in warned[0]


def test_the_default_on_a_cased_vocabulary_is_warned(tmp_path, caplog):
    folder = _folder(tmp_path, "pretraining", _PRETRAINING)
    with caplog.at_level(logging.WARNING, logger="absl"):
        _to_hf(folder, tmp_path / "hf")
    assert _tokenizer_config(tmp_path / "hf")["do_lower_case"] is True  # the reference's
    warned = [r.getMessage() for r in caplog.records if "looks cased" in r.getMessage()]
    assert len(warned) == 1 and "15 of 38 entries" in warned[0], warned
    assert "pass --do_lower_case=False" in warned[0] and "\n" not in warned[0]


def test_the_flag_belongs_to_the_export_direction(tmp_path):
    with pytest.raises(ValueError, match="^do_lower_case=False has no effect with direction=from_hf"):
        hf_conv.run(hf_conv.Settings(hf_dir=str(tmp_path), output_dir=str(tmp_path / "o"),
                                     do_lower_case=False))


@pytest.mark.slow
def test_transformers_tokenizer_gives_our_ids_on_cased_text_and_special_names(tmp_path):
    """In the torch peer venv: the tokenizer of a cased classifier's export gives our ids
    on cased texts holding a literal [CLS] / [SEP] / [MASK]; a masked-LM export's keeps
    [MASK] special (its pipeline's mask) and gives our ids on the other texts."""
    peer = peer_python()
    classifier = _folder(tmp_path, "classifier", _CASED_CLASSIFIER)
    pretraining = _folder(tmp_path, "pretraining", _PRETRAINING)
    _to_hf(classifier, tmp_path / "hf_cls")
    _to_hf(pretraining, tmp_path / "hf_mlm", do_lower_case=False)
    script = ("import json, sys, transformers\n"
              "out = {}\n"
              "for folder in sys.argv[2:]:\n"
              "    tok = transformers.AutoTokenizer.from_pretrained(folder)\n"
              "    out[folder] = tok(json.loads(sys.argv[1]))['input_ids']\n"
              "print(json.dumps(out))\n")
    done = subprocess.run([peer, "-c", script, json.dumps(_TEXTS), str(tmp_path / "hf_cls"),
                           str(tmp_path / "hf_mlm")], capture_output=True, text=True,
                          check=True, timeout=HANG_GUARD_SECONDS,
                          env=dict(os.environ, HF_HUB_OFFLINE="1",
                                   TOKENIZERS_PARALLELISM="false"))
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    ours = tokenization.FullTokenizer(str(classifier / "vocab.txt"), do_lower_case=False)
    expected = [ours.convert_tokens_to_ids(["[CLS]"] + ours.tokenize(t) + ["[SEP]"])
                for t in _TEXTS]
    assert ours.tokenize(_TEXTS[1])[2:6] == ["[", "CL", "##S", "]"]  # text, to ours
    assert theirs[str(tmp_path / "hf_cls")] == expected
    mlm = theirs[str(tmp_path / "hf_mlm")]
    assert mlm[0] == expected[0]
    assert mlm[2] == ours.convert_tokens_to_ids(
        ["[CLS]", "He", "lives", "[MASK]", "in", "the", "[MASK]", ".", "[SEP]"])


# ---------------------------------------------------------------------------
# keras-hub: the preset's tokenizer
# ---------------------------------------------------------------------------

def _needs_keras_hub():
    if importlib.util.find_spec("keras_hub") is None:
        door_peer_missing("keras-hub is not installed (the [keras-hub] extra)")


@pytest.mark.slow
def test_a_pretraining_folder_reaches_keras_hub_cased_with_the_flag(tmp_path):
    _needs_keras_hub()
    import convert_keras_hub as hub_conv  # pylint: disable=import-outside-toplevel
    import keras_hub  # pylint: disable=import-outside-toplevel
    import numpy as np  # pylint: disable=import-outside-toplevel
    folder = _folder(tmp_path, "encoder", _PRETRAINING)
    hub_conv.run(hub_conv.Settings(init_checkpoint=str(_folder(
        tmp_path, "encoder", _CASED_CLASSIFIER, name="cased")),
        output_dir=str(tmp_path / "given"), do_lower_case=True))  # a setting given wins
    given = json.loads((tmp_path / "given" / "tokenizer.json").read_text(encoding="utf-8"))
    assert given["config"]["lowercase"] is True
    preset = tmp_path / "preset"
    hub_conv.run(hub_conv.Settings(init_checkpoint=str(folder), output_dir=str(preset),
                                   do_lower_case=False))
    config = json.loads((preset / "tokenizer.json").read_text(encoding="utf-8"))["config"]
    assert (config["lowercase"], config["strip_accents"]) == (False, False)
    tokenizer = keras_hub.models.BertTokenizer.from_preset(str(preset))
    ours = tokenization.FullTokenizer(str(folder / "vocab.txt"), do_lower_case=False)
    for text in _TEXTS:  # cased, and a literal [CLS] / [SEP] / [MASK] read as text
        assert np.asarray(tokenizer(text)).tolist() == ours.convert_tokens_to_ids(
            ours.tokenize(text)), text


# ---------------------------------------------------------------------------
# Runs: a visibly cased vocabulary lower-cased
# ---------------------------------------------------------------------------

def test_a_cased_vocabulary_lower_cased_is_warned_once(tmp_path, caplog, shared_dir):
    cased = write_text(tmp_path / "cased.txt", "\n".join(_CASED_VOCAB) + "\n")
    with caplog.at_level(logging.WARNING, logger="absl"):
        loaders.load_tokenizer(cased, do_lower_case=True)
        loaders.load_tokenizer(cased, do_lower_case=True)  # once per file
        loaders.load_tokenizer(cased, do_lower_case=False)
        loaders.load_tokenizer(str(shared_dir / "data" / "vocab" / "uncased_vocab.txt"), True)
        loaders.load_tokenizer(str(shared_dir / "data" / "vocab" / "chinese_vocab.txt"), True)
    warned = [r.getMessage() for r in caplog.records if "looks cased" in r.getMessage()]
    assert warned == ["--vocab_file=%s looks cased (15 of its 38 entries hold upper-case "
                      "letters, e.g. The, Cat, John) but --do_lower_case=True lower-cases the "
                      "text: those entries are never used; pass --do_lower_case=False for a "
                      "cased model" % cased]


# ---------------------------------------------------------------------------
# docs/fill-mask.md: what HuggingFace's pipeline names an id without a vocabulary entry
# ---------------------------------------------------------------------------

@pytest.mark.slow
def test_the_fill_mask_page_says_what_the_pipeline_gives_an_unnamed_id(tmp_path):
    """A vocab_size past the vocabulary: the pipeline's token_str of an id past the file,
    or of an earlier line of a token listed twice, is '' (the page said None)."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    from conftest import REPO_ROOT  # pylint: disable=import-outside-toplevel
    peer = peer_python()
    lines = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "a"]  # "a": 5 and 7
    config = dict(_config(9), hidden_size=8, intermediate_size=8)  # row 8: past the file
    model = random_head_model("pretraining", config)
    tensors = {checkpoints.tf1_name(v): v.numpy() for v in model.variables}
    bias = np.zeros([9], np.float32)
    for index, value in {5: 30.0, 8: 20.0, 6: 10.0}.items():  # 5, then 8, then 6 ("b")
        bias[index] = value
        tensors["bert/embeddings/word_embeddings"][index] = 0.0
    tensors["cls/predictions/output_bias"] = bias
    folder = tmp_path / "ours"
    checkpoints.write_tf1_checkpoint(tensors, str(folder / "bert_model.ckpt"))
    write_text(folder / "bert_config.json", json.dumps(config))
    write_text(folder / "vocab.txt", "\n".join(lines) + "\n")
    _to_hf(folder / "bert_model.ckpt", tmp_path / "hf")
    script = ("import json, sys, transformers\n"
              "fill = transformers.pipeline('fill-mask', model=sys.argv[1], top_k=3)\n"
              "print(json.dumps([[r['token'], r['token_str']] for r in fill('a [MASK] b')]))\n")
    done = subprocess.run([peer, "-c", script, str(tmp_path / "hf")], capture_output=True,
                          text=True, check=True, timeout=HANG_GUARD_SECONDS,
                          env=dict(os.environ, HF_HUB_OFFLINE="1",
                                   TOKENIZERS_PARALLELISM="false"))
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [[5, ""], [8, ""], [6, "b"]]
    page = " ".join((REPO_ROOT / "docs" / "fill-mask.md").read_text(encoding="utf-8").split())
    assert "whose pipeline gives it the `token_str` `''`" in page
    assert "names it `None`" not in page


def _cased_warnings(caplog):
    return [r.getMessage() for r in caplog.records if "looks cased" in r.getMessage()]


def test_create_pretraining_data_warns_of_a_cased_vocabulary_lower_cased(tmp_path, caplog):
    import create_pretraining_data as cpd  # pylint: disable=import-outside-toplevel
    cased = write_text(tmp_path / "cased.txt", "\n".join(_CASED_VOCAB) + "\n")
    text = write_text(tmp_path / "in.txt", "John lives in Paris.\nThe cat.\n\nHe lives in Paris.\n")
    options = cpd.PretrainingOptions(16, 3, 0.15, 0.1, 1, False, 1)
    with caplog.at_level(logging.WARNING, logger="absl"):
        cpd.write_pretraining_data([text], [str(tmp_path / "out.tfrecord")], cased, options,
                                   do_lower_case=False)
        assert not _cased_warnings(caplog)
        cpd.write_pretraining_data([text], [str(tmp_path / "out.tfrecord")], cased, options)
    assert len(_cased_warnings(caplog)) == 1


@pytest.mark.slow
def test_the_export_warns_of_a_cased_vocabulary_lower_cased(tmp_path, caplog):
    import export_saved_model  # pylint: disable=import-outside-toplevel
    folder = _folder(tmp_path, "encoder", None)
    with caplog.at_level(logging.WARNING, logger="absl"):
        export_saved_model.run(export_saved_model.Settings(
            model_type="encoder", init_checkpoint=str(folder / "model.ckpt-2"),
            bert_config_file=str(folder / "bert_config.json"),
            vocab_file=str(folder / "vocab.txt"), max_seq_length=16,
            export_dir=str(tmp_path / "export")))
    (warned,) = _cased_warnings(caplog)
    assert warned.startswith("--vocab_file=%s looks cased" % (folder / "vocab.txt"))
