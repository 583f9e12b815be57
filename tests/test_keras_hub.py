"""convert_keras_hub.py: our model folders as keras-hub presets, and keras-hub presets as ours.

With keras-hub installed (the [keras-hub] extra): keras-hub's own from_preset loads each
preset and computes our numbers on real text (the same token ids; sequence and pooled
outputs and classifier probabilities within 1e-5; the masked LM within its documented
bound), presets go preset -> ours -> preset bit for bit, what keras-hub cannot hold is
refused, and keras-hub (Keras 3) and our tf_keras models leave each other's outputs alone
in one process. Without it: one line naming the extra, and keras-hub never imported.
"""
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import convert_keras_hub as conv
import modeling
import tokenization
from bert_tf2.export import head_types
from bert_tf2.trainer import checkpoints
from conftest import FP32_ATOL, REPO_ROOT, REQUIRE_DOORS, door_peer_missing, write_text
from conftest import features_of_rows, pack_as_reference, random_head_model
from conftest import HANG_GUARD_SECONDS, user_environ

# Under `make test` (REQUIRE_DOORS) a missing keras-hub fails these tests instead of skipping.
needs_keras_hub = pytest.mark.skipif(
    not REQUIRE_DOORS and importlib.util.find_spec("keras_hub") is None,
    reason="keras-hub is not installed (the [keras-hub] extra)")

_LENGTH = 32
_LABELS = ["neg", "neutral", "pos"]
# Real-looking texts: accents, CJK, apostrophes, a Wikipedia-like sentence, and pairs.
_TEXTS = ["Héllo, wörld! BERT's un-affable tokenizer reads 你好 too.",
          "The quick brown fox jumps over the lazy dog.",
          "EU rejects German call to boycott British lamb .",
          "Crème brûlée at the Café Müller was — frankly — über-sweet.",
          "東京は日本の首都です and Zürich is in Switzerland.",
          "it 's a charming and often affecting journey . "]
_PAIRS = [("Which NFL team represented the AFC at Super Bowl 50?",
           "The Denver Broncos defeated the Carolina Panthers 24-10 to earn their third "
           "Super Bowl title; the game was played on February 7, 2016, at Levi's Stadium "
           "in the San Francisco Bay Area at Santa Clara, California."),
          ("Où est la gare?", "La gare est à côté du musée, près de l'église.")]


def _config(vocab_size, act="gelu", layers=2):
    return {"vocab_size": vocab_size, "hidden_size": 32, "num_hidden_layers": layers,
            "num_attention_heads": 2, "intermediate_size": 48, "hidden_act": act,
            "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
            "max_position_embeddings": 64, "type_vocab_size": 2, "initializer_range": 0.2}


def _model(head, config, num_labels=None):
    return random_head_model(head, config, num_labels, seed=11)


def _folder(root, head, vocab, name=None, act="gelu", do_lower_case=True, layers=2):
    """A model folder as our runners leave it (`layers` encoder layers); returns (folder,
    model)."""
    folder = root / (name or head)
    folder.mkdir()
    config = _config(len(vocab), act, layers)
    model = _model(head, config, len(_LABELS) if head in ("classifier", "tagger") else None)
    tensors = {checkpoints.tf1_name(v): v.numpy() for v in model.variables}
    checkpoints.write_tf1_checkpoint(tensors, str(folder / "model.ckpt-3"))
    write_text(folder / "bert_config.json", json.dumps(config))
    write_text(folder / "vocab.txt", "\n".join(vocab) + "\n")
    settings = {"do_lower_case": do_lower_case, "max_seq_length": _LENGTH}
    if head == "classifier":
        settings.update(task_name="csv", runner="run_classifier")
        write_text(folder / "classifier_task.json",
                   json.dumps({"task_name": "csv", "task_type": "classification"}))
    if head in ("classifier", "tagger"):
        write_text(folder / "label_list.txt", "\n".join(_LABELS) + "\n")
    write_text(folder / "model_settings.json", json.dumps(settings))
    return folder, model


def _ids(tokenizer, a, b=None):
    return pack_as_reference(tokenizer, _LENGTH, a, b)


def _features(rows):
    return features_of_rows(rows)


def _hub_inputs(features):
    return {"token_ids": features["input_ids"], "segment_ids": features["segment_ids"],
            "padding_mask": features["input_mask"]}


@pytest.fixture(scope="module")
def real_vocab(shared_dir):
    path = shared_dir / "data" / "vocab" / "uncased_vocab.txt"
    return str(path), [line.rstrip("\n") for line in open(path, encoding="utf-8")]


@pytest.fixture(scope="module")
def exported(tmp_path_factory, real_vocab):
    """{head: (our folder, our model, the preset folder, export outputs)}, written once."""
    if importlib.util.find_spec("keras_hub") is None:
        door_peer_missing("keras-hub is not installed (the [keras-hub] extra)")
    root = tmp_path_factory.mktemp("keras_hub")
    out = {}
    # The heads keras-hub has a class for (the registry's keras_hub_class), in its order.
    for head in (e.name for e in head_types.ENTRIES if e.keras_hub_class):
        folder, model = _folder(root, head, real_vocab[1])
        preset = root / ("preset_" + head)
        outputs = conv.run(conv.Settings(init_checkpoint=str(folder),
                                         output_dir=str(preset))).outputs
        out[head] = (folder, model, preset, outputs)
    return out


def _real_texts(shared_dir):
    sst = [line.split("\t")[0] for line in open(
        shared_dir / "data" / "glue_data" / "SST-2" / "dev.tsv", encoding="utf-8")][1:31]
    return _TEXTS + sst


# ---------------------------------------------------------------------------
# keras-hub computes our numbers
# ---------------------------------------------------------------------------

@needs_keras_hub
def test_the_preset_holds_the_files_keras_hub_writes(exported):
    names = {head: sorted(outputs) for head, (_, _, _, outputs) in exported.items()}
    for head in names:
        assert {"config.json", "model.weights.h5", "tokenizer.json", "metadata.json",
                "assets/tokenizer/vocabulary.txt"} <= set(names[head]), head
    assert {"task.json", "task.weights.h5", "preprocessor.json", "label_list.txt",
            "classifier_task.json"} <= set(names["classifier"])
    assert "task.json" not in names["encoder"]
    task = json.load(open(exported["classifier"][3]["task.json"], encoding="utf-8"))
    assert task["class_name"] == "BertTextClassifier"
    assert task["config"]["num_classes"] == 3
    assert (exported["classifier"][2] / "label_list.txt").read_text().split() == _LABELS


@needs_keras_hub
def test_keras_hub_tokenizer_gives_our_ids(exported, real_vocab, shared_dir):
    import keras_hub  # pylint: disable=import-outside-toplevel
    ours = tokenization.FullTokenizer(real_vocab[0], do_lower_case=True)
    preset = str(exported["classifier"][2])
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor.from_preset(preset)
    texts = _real_texts(shared_dir)
    rows = [_ids(ours, t) for t in texts]
    theirs = preprocessor(tf.constant(texts))
    assert np.asarray(theirs["token_ids"]).tolist() == [r[0] for r in rows]
    assert np.asarray(theirs["padding_mask"]).astype(int).tolist() == [r[1] for r in rows]
    firsts, seconds = zip(*_PAIRS)
    rows = [_ids(ours, a, b) for a, b in _PAIRS]
    theirs = preprocessor(x=(tf.constant(firsts), tf.constant(seconds)))  # a pair, not (x, y)
    assert np.asarray(theirs["token_ids"]).tolist() == [r[0] for r in rows]
    assert np.asarray(theirs["segment_ids"]).tolist() == [r[2] for r in rows]


@needs_keras_hub
def test_backbone_and_classifier_give_our_outputs(exported, real_vocab, shared_dir):
    import keras_hub  # pylint: disable=import-outside-toplevel
    ours = tokenization.FullTokenizer(real_vocab[0], do_lower_case=True)
    rows = [_ids(ours, t) for t in _real_texts(shared_dir)]
    rows += [_ids(ours, a, b) for a, b in _PAIRS]
    features = _features(rows)
    _, model, preset, _ = exported["encoder"]
    backbone = keras_hub.models.BertBackbone.from_preset(str(preset))
    theirs = backbone(_hub_inputs(features))
    mine = model(features["input_ids"], features["input_mask"], features["segment_ids"])
    mask = features["input_mask"][:, :, None].astype(bool)
    for name in ("sequence_output", "pooled_output"):
        diff = np.abs(np.asarray(theirs[name]) - mine[name].numpy())
        if name == "sequence_output":  # padded positions are never read
            diff = np.where(mask, diff, 0.0)
        print("encoder %s: max |keras-hub - ours| = %.2e" % (name, diff.max()))
        assert diff.max() <= FP32_ATOL, name
    _, model, preset, _ = exported["classifier"]
    classifier = keras_hub.models.BertTextClassifier.from_preset(str(preset))
    probs = np.asarray(classifier(_hub_inputs(features)))
    mine = tf.nn.softmax(model(features, training=False)["logits"]).numpy()
    print("classifier probabilities: max |keras-hub - ours| = %.2e"
          % np.abs(probs - mine).max())
    np.testing.assert_allclose(probs, mine, atol=FP32_ATOL, rtol=0)
    # From raw strings too: its own preprocessor, then the model.
    texts = _TEXTS[:3]
    raw = np.asarray(classifier.predict(tf.constant(texts), verbose=0))
    mine = tf.nn.softmax(model(_features([_ids(ours, t) for t in texts]),
                               training=False)["logits"]).numpy()
    np.testing.assert_allclose(raw, mine, atol=FP32_ATOL, rtol=0)


# The masked-LM head of keras-hub's BertMaskedLM: exact erf GELU and LayerNorm epsilon
# 1e-5, fixed by keras-hub (ours: tanh GELU, 1e-12); docs/keras-hub.md gives the bound.
_MLM_BOUND = 5e-3


@needs_keras_hub
def test_masked_lm_logits_within_the_documented_bound(exported, real_vocab, shared_dir):
    import keras_hub  # pylint: disable=import-outside-toplevel
    ours = tokenization.FullTokenizer(real_vocab[0], do_lower_case=True)
    features = _features([_ids(ours, t) for t in _real_texts(shared_dir)[:12]])
    positions = np.tile(np.array([1, 2, 3, 5, 8], np.int32), [len(features["input_ids"]), 1])
    _, model, preset, _ = exported["pretraining"]
    masked_lm = keras_hub.models.BertMaskedLM.from_preset(str(preset))
    theirs = np.asarray(masked_lm(dict(_hub_inputs(features), mask_positions=positions)))
    mine = model(dict(features, masked_lm_positions=positions), training=False)
    mine = mine["masked_lm_logits"].numpy().reshape(theirs.shape)
    diff = np.abs(theirs - mine).max()
    print("masked LM logits: max |keras-hub - ours| = %.2e" % diff)
    assert 0 < diff <= _MLM_BOUND
    # The encoder under it is ours exactly (within fp32).
    sequence = masked_lm.backbone(_hub_inputs(features))["sequence_output"]
    ref = model.bert(features["input_ids"], features["input_mask"],
                     features["segment_ids"])["sequence_output"].numpy()
    mask = features["input_mask"][:, :, None].astype(bool)
    assert np.where(mask, np.abs(np.asarray(sequence) - ref), 0).max() <= FP32_ATOL


@needs_keras_hub
def test_masked_lm_preset_gives_the_fill_mask_predictors_top5(exported, tmp_path):
    """keras-hub's BertMaskedLM of our preset fills [MASK]s as masked_lm.Predictor does:
    the same top-5 tokens, probabilities within the head's documented difference; the
    preset imported back (from_keras_hub) answers as the folder it came from."""
    import keras_hub  # pylint: disable=import-outside-toplevel
    from bert_tf2.export import masked_lm as fill_mask  # pylint: disable=import-outside-toplevel
    folder, _, preset, _ = exported["pretraining"]
    predictor = fill_mask.Predictor(str(folder))
    texts = ["the [MASK] sat on the mat .", "paris is the [MASK] of [MASK] .",
             "a very [MASK] film", "[MASK]"]
    ours = predictor.predict(texts)
    features, counts = predictor.head.encode(texts)
    hub = keras_hub.models.BertMaskedLM.from_preset(str(preset))
    logits = np.asarray(hub(dict(_hub_inputs(features),
                                 mask_positions=features["masked_lm_positions"])))
    theirs = predictor.head.decode(tf.nn.softmax(logits).numpy(), counts)
    worst = 0.0
    for a, b in zip(ours, theirs):
        assert [[x["token"] for x in m] for m in a] == [[x["token"] for x in m] for m in b]
        worst = max([worst] + [abs(x["probability"] - y["probability"])
                               for m, n in zip(a, b) for x, y in zip(m, n)])
    print("fill-mask top-5: keras-hub = ours, max |p diff| %.1e" % worst)
    # Measured 4.1e-7: the logits differ by ~1e-3 (_MLM_BOUND), and the probabilities of a
    # random head over 30522 WordPieces are ~3e-5, so 1e-5 holds here; a peaked trained head
    # would differ more (docs/fill-mask.md: keras-hub).
    assert worst <= 1e-5
    back = tmp_path / "back"
    conv.run(conv.Settings(direction="from_keras_hub", preset_dir=str(preset),
                           output_dir=str(back)))
    assert fill_mask.Predictor(str(back)).predict(texts) == ours


# ---------------------------------------------------------------------------
# keras-hub -> ours -> keras-hub
# ---------------------------------------------------------------------------

def _preset_weights(preset):
    """{path: array} of every file of a preset's .weights.h5 files."""
    import h5py  # pylint: disable=import-outside-toplevel
    out = {}
    for name in ("model.weights.h5", "task.weights.h5"):
        path = os.path.join(str(preset), name)
        if not os.path.exists(path):
            continue
        with h5py.File(path, "r") as f:
            f.visititems(lambda key, item, name=name: out.__setitem__(
                name + ":" + key, np.asarray(item)) if hasattr(item, "shape") else None)
    return out


@needs_keras_hub
@pytest.mark.parametrize("head", ["encoder", "classifier"])
def test_round_trip_preset_ours_preset_is_bit_for_bit(exported, tmp_path, head):
    folder, _, preset, _ = exported[head]
    ours = tmp_path / "ours"
    result = conv.run(conv.Settings(direction="from_keras_hub", preset_dir=str(preset),
                                    output_dir=str(ours)))
    assert {"checkpoint", "bert_config_file", "vocab_file"} <= set(result.outputs)
    # ours -> keras-hub -> ours: every weight of the folder comes back equal.
    back = checkpoints.CheckpointContents(str(ours / "bert_model.ckpt"))
    original = checkpoints.CheckpointContents(str(folder))
    assert sorted(back.model_names()) == sorted(original.model_names())
    for name in original.model_names():
        np.testing.assert_array_equal(back.get(name), original.get(name), err_msg=name)
    assert (ours / "vocab.txt").read_text() == (folder / "vocab.txt").read_text()
    config = json.loads((ours / "bert_config.json").read_text())
    assert config["hidden_act"] == "gelu" and config["layer_norm_eps"] == 1e-12
    modeling.BertConfig.from_dict(config).validate()
    if head == "classifier":
        assert (ours / "label_list.txt").read_text().split() == _LABELS
    # ... and again to keras-hub: the same weights, bit for bit.
    again = tmp_path / "again"
    conv.run(conv.Settings(init_checkpoint=str(ours / "bert_model.ckpt"),
                           output_dir=str(again)))
    first, second = _preset_weights(preset), _preset_weights(again)
    assert sorted(first) == sorted(second) and first
    for key in first:
        np.testing.assert_array_equal(first[key], second[key], err_msg=key)


@pytest.mark.slow
@needs_keras_hub
def test_the_converted_preset_folder_trains_with_run_classifier(exported, tmp_path):
    import run_classifier  # pylint: disable=import-outside-toplevel
    ours = tmp_path / "ours"
    conv.run(conv.Settings(direction="from_keras_hub",
                           preset_dir=str(exported["encoder"][2]), output_dir=str(ours)))
    rows = ["%d,%s,%s\n" % (i, text, label) for i, (text, label) in enumerate(
        [("a good film", "yes"), ("an awful plot", "no")] * 4)]
    for split in ("train", "dev"):
        write_text(tmp_path / "data" / (split + ".csv"), "id,text,label\n" + "".join(rows))
    result = run_classifier.run(run_classifier.Settings(
        task_name="csv", data_dir=str(tmp_path / "data"),
        vocab_file=str(ours / "vocab.txt"), bert_config_file=str(ours / "bert_config.json"),
        init_checkpoint=str(ours / "bert_model.ckpt"), output_dir=str(tmp_path / "run"),
        max_seq_length=16, do_train=True, do_eval=True, train_batch_size=4,
        num_train_epochs=1.0))
    assert result.global_step == 2 and "eval_accuracy" in result.metrics


# ---------------------------------------------------------------------------
# Refusals
# ---------------------------------------------------------------------------

@needs_keras_hub
@pytest.mark.parametrize("head", ["tagger", "squad"])
def test_a_head_keras_hub_has_no_class_for_is_refused(tmp_path, head):
    folder, _ = _folder(tmp_path, head, ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"])
    with pytest.raises(ValueError, match="holds a %s head, which keras-hub has no BERT class"
                       % head):
        conv.run(conv.Settings(init_checkpoint=str(folder), output_dir=str(tmp_path / "p")))
    assert not (tmp_path / "p").exists()


def test_exact_gelu_is_refused_before_keras_hub_is_needed(tmp_path):
    folder, _ = _folder(tmp_path, "encoder", ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                        act="gelu_exact")
    with pytest.raises(ValueError, match="hidden_act 'gelu_exact': keras-hub's BertBackbone "
                                         "always uses the tanh GELU"):
        conv.run(conv.Settings(init_checkpoint=str(folder), output_dir=str(tmp_path / "p")))


def test_missing_keras_hub_is_one_line_naming_the_extra(tmp_path, monkeypatch):
    folder, _ = _folder(tmp_path, "encoder", ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    monkeypatch.setitem(sys.modules, "keras_hub", None)  # import keras_hub -> ImportError
    with pytest.raises(ValueError, match=r"needs keras-hub \(pip install 'bert-tf2\[keras-hub\]'"):
        conv.run(conv.Settings(init_checkpoint=str(folder), output_dir=str(tmp_path / "p")))
    with pytest.raises(ValueError, match="preset_dir=.* has no effect with direction=to_keras_hub"):
        conv.run(conv.Settings(init_checkpoint=str(folder), preset_dir=str(folder),
                               output_dir=str(tmp_path / "p")))


@needs_keras_hub
def test_from_keras_hub_refuses_what_is_not_a_bert_preset(tmp_path, exported):
    broken = tmp_path / "broken"
    broken.mkdir()
    write_text(broken / "config.json", json.dumps({"class_name": "GemmaBackbone",
                                                   "config": {}}))
    with pytest.raises(ValueError, match="class_name 'GemmaBackbone'; only keras-hub's "
                                         "BertBackbone"):
        conv.run(conv.Settings(direction="from_keras_hub", preset_dir=str(broken),
                               output_dir=str(tmp_path / "o")))
    with pytest.raises(ValueError, match="has no config.json"):
        conv.run(conv.Settings(direction="from_keras_hub", preset_dir=str(tmp_path),
                               output_dir=str(tmp_path / "o2")))


# ---------------------------------------------------------------------------
# The preset's preprocessing and labels come along (issue 72)
# ---------------------------------------------------------------------------

_SMALL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "cafe", "café", "a", "##s"]


def _copy_preset(preset, target, drop=(), tokenizer=None):
    import shutil  # pylint: disable=import-outside-toplevel
    shutil.copytree(preset, target)
    for name in drop:
        os.remove(target / name)
    if tokenizer:
        record = json.loads((target / "tokenizer.json").read_text())
        record["config"].update(tokenizer)
        write_text(target / "tokenizer.json", json.dumps(record))
    return target


@pytest.fixture(scope="module")
def cased_preset(tmp_path_factory):
    """A classifier folder of _SMALL, do_lower_case False, exported once: the preset."""
    if importlib.util.find_spec("keras_hub") is None:
        door_peer_missing("keras-hub is not installed (the [keras-hub] extra)")
    root = tmp_path_factory.mktemp("cased_preset")
    folder, _ = _folder(root, "classifier", _SMALL, do_lower_case=False)
    conv.run(conv.Settings(init_checkpoint=str(folder), output_dir=str(root / "preset")))
    return root / "preset"


@needs_keras_hub
def test_from_keras_hub_keeps_the_presets_casing_and_length(tmp_path, cased_preset):
    from bert_tf2.trainer import model_folder  # pylint: disable=import-outside-toplevel
    preset = cased_preset
    hub = json.loads((preset / "tokenizer.json").read_text())["config"]
    assert (hub["lowercase"], hub["strip_accents"]) == (False, False)
    ours = tmp_path / "ours"
    conv.run(conv.Settings(direction="from_keras_hub", preset_dir=str(preset),
                           output_dir=str(ours)))
    found, _ = model_folder.read(str(ours / "bert_model.ckpt"))
    assert found["do_lower_case"] is False and found["max_seq_length"] == _LENGTH
    assert found["runner"] == "run_classifier"
    # ... and back to keras-hub with the same tokenizer and length.
    again = tmp_path / "again"
    conv.run(conv.Settings(init_checkpoint=str(ours / "bert_model.ckpt"),
                           output_dir=str(again)))
    assert json.loads((again / "tokenizer.json").read_text())["config"]["lowercase"] is False
    length = json.loads((again / "preprocessor.json").read_text())["config"]["sequence_length"]
    assert length == _LENGTH


@needs_keras_hub
@pytest.mark.parametrize("lowercase,strip_accents", [(True, False), (False, True)])
def test_a_tokenizer_our_tokenizer_cannot_follow_is_refused(tmp_path, cased_preset, lowercase,
                                                           strip_accents):
    """keras-hub's BertTokenizer(lowercase=True) keeps accents ("café" stays "café");
    ours, as the reference, strips them whenever it lower-cases ("cafe")."""
    edited = _copy_preset(cased_preset, tmp_path / "edited", tokenizer={
        "lowercase": lowercase, "strip_accents": strip_accents})
    with pytest.raises(ValueError, match=r"tokenizer.json: lowercase %s with strip_accents %s, "
                                         r"which bert-tf2's tokenizer .* cannot follow"
                       % (json.dumps(lowercase), json.dumps(strip_accents))):
        conv.run(conv.Settings(direction="from_keras_hub", preset_dir=str(edited),
                               output_dir=str(tmp_path / "ours")))
    assert not (tmp_path / "ours").exists()


@needs_keras_hub
def test_a_classifier_preset_without_labels_is_warned(tmp_path, exported):
    preset = _copy_preset(exported["classifier"][2], tmp_path / "resaved",
                          drop=("label_list.txt", "classifier_task.json"))
    import logging  # pylint: disable=import-outside-toplevel
    seen = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    logging.getLogger("absl").addHandler(handler)
    try:
        conv.run(conv.Settings(direction="from_keras_hub", preset_dir=str(preset),
                               output_dir=str(tmp_path / "ours")))
    finally:
        logging.getLogger("absl").removeHandler(handler)
    assert [m for m in seen if "has no label_list.txt (keras-hub's own save_to_preset does "
            "not keep it): the classifier's 3 outputs have no label names" in m]


@needs_keras_hub
def test_a_classifier_without_labels_names_only_real_flags(tmp_path):
    folder, _ = _folder(tmp_path, "classifier", _SMALL)
    os.remove(folder / "label_list.txt")
    os.remove(folder / "classifier_task.json")
    with pytest.raises(ValueError) as raised:
        conv.run(conv.Settings(init_checkpoint=str(folder), output_dir=str(tmp_path / "p")))
    message = str(raised.value)
    assert "write them into label_list.txt beside the checkpoint" in message
    # convert_keras_hub.py has no --task_name / --labels_file (run() names flags as fields).
    assert "task_name" not in message and "labels_file" not in message, message
    assert not (tmp_path / "p").exists()


def test_python_3_10_is_one_line_and_the_extra_has_its_marker(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "version_info", (3, 10, 14, "final", 0))
    with pytest.raises(ValueError, match=r"^convert_keras_hub.py needs keras-hub, which needs "
                                         r"Python 3.11 or later \(this is Python 3.10.14\)$"):
        conv.run(conv.Settings(init_checkpoint=str(tmp_path), output_dir=str(tmp_path / "p")))
    monkeypatch.undo()
    setup = (REPO_ROOT / "setup.py").read_text(encoding="utf-8")
    assert """"keras-hub": ['keras-hub==0.32.0; python_version >= "3.11"']""" in setup


# ---------------------------------------------------------------------------
# One process: keras-hub (Keras 3) and our tf_keras models
# ---------------------------------------------------------------------------

_ORDER_SCRIPT = r"""
import json, sys
import numpy as np
order, folder, out = sys.argv[1:4]
if order == "hub_first":
    import keras_hub
from bert_tf2 import startup
import convert_keras_hub, modeling, run_classifier, export_saved_model
from bert_tf2.trainer import checkpoints
if order == "ours_first":
    assert "keras_hub" not in sys.modules, "importing our modules imported keras_hub"
config = modeling.BertConfig.from_json_file(folder + "/bert_config.json")
ids = np.array([[2, 5, 7, 9, 3, 0], [2, 6, 3, 8, 3, 0]], np.int32)
mask = (ids > 0).astype(np.int32)
segments = np.array([[0, 0, 0, 0, 0, 0], [0, 0, 0, 1, 1, 0]], np.int32)

def ours():
    model = modeling.BertModel(config)
    model(ids, mask, segments)
    checkpoints.load_checkpoint(model, folder, log=False)
    got = model(ids, mask, segments)
    return [got["sequence_output"].numpy().tolist(), got["pooled_output"].numpy().tolist()]

results = [ours()]
if order == "ours_first":
    import keras_hub
    backbone = keras_hub.models.BertBackbone(vocabulary_size=12, num_layers=1, num_heads=2,
                                             hidden_dim=8, intermediate_dim=16)
    backbone({"token_ids": ids, "segment_ids": segments, "padding_mask": mask})
    results.append(ours())
json.dump(results, open(out, "w"))
"""


@needs_keras_hub
def test_keras_hub_and_our_models_leave_each_other_alone(tmp_path):
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "d", "e"]
    folder, _ = _folder(tmp_path, "encoder", vocab)
    runs = {}
    for order in ("ours_first", "hub_first"):
        out = tmp_path / (order + ".json")
        subprocess.run([sys.executable, "-c", _ORDER_SCRIPT, order, str(folder), str(out)],
                       check=True, cwd=str(REPO_ROOT), timeout=HANG_GUARD_SECONDS,
                       env=user_environ(PYTHONPATH=str(REPO_ROOT)))  # Keras 3 as tf.keras
        runs[order] = json.loads(out.read_text())
    before, after = runs["ours_first"]
    (hub_first,) = runs["hub_first"]
    # The same shapes through the same kernels in each run: equal, not merely close.
    assert before == after
    assert before == hub_first


def test_a_vocabulary_longer_than_the_model_is_refused(tmp_path):
    # as the HuggingFace export: keras-hub's tokenizer would give ids past the embeddings.
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "good", "film", "bad"]
    folder, _ = _folder(tmp_path, "classifier", vocab, layers=1)
    (folder / "vocab.txt").write_text("\n".join(vocab + ["extra"]) + "\n")
    with pytest.raises(ValueError, match=r"has 10 entries but the model only 9"):
        conv.run(conv.Settings(init_checkpoint=str(folder), output_dir=str(tmp_path / "preset")))
    assert not (tmp_path / "preset").exists()
