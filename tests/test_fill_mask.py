"""Fill-mask (bert_tf2/export/masked_lm.py): the pretraining checkpoint's masked-LM head at
every door (Python Predictor, extract_features --fill_mask_top_k, the SavedModel on raw
strings, LiteRT fp32, the HuggingFace export as BertForMaskedLM under transformers'
pipeline("fill-mask")), the reference's get_masked_lm_output math, the stated behaviour
for several [MASK]s, pieces and long texts, and the one-line refusals."""
import json
import os
import re
import subprocess

import numpy as np
import pytest
import tensorflow as tf

import convert_hf_checkpoint
import export_saved_model
import extract_features
import modeling
from bert_tf2 import flags_common
from bert_tf2 import heads
from bert_tf2.export import masked_lm
from bert_tf2.export import warmup
from bert_tf2.trainer import checkpoints
from conftest import HANG_GUARD_SECONDS, REPO_ROOT, peer_python, write_text
from trained import conversions_in_process

_TEXTS = ["all work and [MASK] play makes jack a [MASK] boy",
          "[MASK] work",
          "jack makes a [MASK] play"]


@pytest.fixture(scope="module")
def tiny(shared_dir):
    """The shared TF1 pretraining checkpoint (cls/predictions and cls/seq_relationship)."""
    folder = shared_dir / "data" / "tf1_checkpoints" / "kerasbert_tiny"
    return {"folder": folder, "prefix": str(folder / "bert_model.ckpt"),
            "predictor": masked_lm.Predictor(str(folder / "bert_model.ckpt"))}


def _gelu(x):  # the config's "gelu": the reference's tanh form
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def test_the_head_is_the_references_get_masked_lm_output(tiny):
    predictor = tiny["predictor"]
    reader = tf.train.load_checkpoint(tiny["prefix"])
    w = {name: reader.get_tensor(name) for name in masked_lm.TF1_NAMES}
    table = reader.get_tensor("bert/embeddings/word_embeddings")
    features, counts = predictor.head.encode(_TEXTS)
    assert counts == [2, 1, 1]
    # The encoder's sequence output at the masks, then the head in numpy.
    sequence = predictor.model.bert(features["input_ids"], features["input_mask"],
                                    features["segment_ids"])["sequence_output"].numpy()
    rows = np.take_along_axis(sequence, features["masked_lm_positions"][:, :, None], axis=1)
    hidden = _gelu(rows @ w["cls/predictions/transform/dense/kernel"]
                   + w["cls/predictions/transform/dense/bias"])
    mean, var = hidden.mean(-1, keepdims=True), hidden.var(-1, keepdims=True)
    hidden = (hidden - mean) / np.sqrt(var + 1e-12) * w[
        "cls/predictions/transform/LayerNorm/gamma"] + w["cls/predictions/transform/LayerNorm/beta"]
    logits = hidden @ table.T + w["cls/predictions/output_bias"]
    want = np.exp(logits - logits.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    got = predictor.model(features)["probabilities"].numpy()
    np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)
    # ... and run_pretraining's own model (BertPretrainer) gives the same.
    config = modeling.BertConfig.from_json_file(str(tiny["folder"] / "bert_config.json"))
    pretrainer = heads.BertPretrainer(config)
    pretrainer(heads.dummy_features(), training=False)
    checkpoints.load_checkpoint(pretrainer, tiny["prefix"], log=False)
    log_probs = pretrainer(features, training=False)["masked_lm_log_probs"].numpy()
    np.testing.assert_allclose(got, np.exp(log_probs), atol=1e-6, rtol=0)
    # The answers: the top 5 of those probabilities, per mask, in text order.
    answers = predictor.predict(_TEXTS)
    for row, count in enumerate(counts):
        assert len(answers[row]) == count
        for slot in range(count):
            best = np.argsort(-want[row, slot], kind="stable")[:5]
            assert [a["token_id"] for a in answers[row][slot]] == best.tolist()
            assert [a["token"] for a in answers[row][slot]] == [
                predictor.head.inv_vocab[i] for i in best]
            np.testing.assert_allclose([a["probability"] for a in answers[row][slot]],
                                       want[row, slot][best], atol=1e-6, rtol=0)


def test_stated_behaviour_several_masks_long_texts_and_errors(tiny, tmp_path):
    predictor = tiny["predictor"]
    assert predictor.head.max_seq_length == 16  # the config's max_position_embeddings
    # A str is one text; one batch or one text at a time: the same answers.
    alone = [predictor.predict(text)[0] for text in _TEXTS]
    together = predictor.predict(_TEXTS)
    for a, b in zip(alone, together):
        assert [[x["token_id"] for x in m] for m in a] == [[x["token_id"] for x in m] for m in b]
        np.testing.assert_allclose([[x["probability"] for x in m] for m in a],
                                   [[x["probability"] for x in m] for m in b], atol=1e-6)
    assert predictor.predict([]) == []
    assert predictor.predict(np.array(_TEXTS)) == predictor.predict(t for t in _TEXTS) == together
    for bad, message in ((None, r"^texts is None; expected a list"),
                         (set(_TEXTS), r"^texts is a set; .*a set has no order"),
                         ([_TEXTS[0], 3], r"^texts\[1\]: expected a str, got int$")):
        with pytest.raises(ValueError, match=message):
            predictor.predict(bad)
    # Longer than max_seq_length: cut after its first 14 pieces, as the classifier cuts.
    long_text = "jack makes a [MASK] play " + "all work and no play " * 4
    cut = " ".join(long_text.split()[:14])
    assert predictor.predict(long_text) == predictor.predict(cut)
    with pytest.raises(ValueError, match=r"^texts\[1\]: its \[MASK\] at word piece 16 is past "
                                         r"max_seq_length=16 \(the first 14 pieces"):
        predictor.predict(["[MASK] work", "all work and no play " * 3 + "[MASK]"])
    with pytest.raises(ValueError, match=r"^texts\[0\] has no \[MASK\] to fill"):
        predictor.predict("all work and no play")
    # A [MASK] is one WordPiece; lower-case "[mask]" is text, as HuggingFace's tokenizer has it.
    with pytest.raises(ValueError, match=r"has no \[MASK\]"):
        predictor.predict("all [mask] work")
    # A checkpoint without the head: one line.
    reader = tf.train.load_checkpoint(tiny["prefix"])
    encoder = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()
               if n.startswith("bert/") and "adam" not in n}
    prefix = checkpoints.write_tf1_checkpoint(encoder, str(tmp_path / "enc" / "bert_model.ckpt"))
    with pytest.raises(ValueError, match=r"^checkpoint .*enc/bert_model.ckpt has no head of a "
                                         r"masked_lm model \(it lacks cls/predictions/.*\): "
                                         r"fill-mask needs a pretraining checkpoint "
                                         r"\(run_pretraining's, a Google release\)$"):
        masked_lm.Predictor(prefix, vocab_file=str(tiny["folder"] / "vocab.txt"),
                            bert_config_file=str(tiny["folder"] / "bert_config.json"))
    # A classifier's folder: named as what it is (before: "has no masked-LM head", and the
    # export asked "is it a checkpoint of a fine-tuned masked_lm model?").
    classifier = dict(encoder, output_weights=np.zeros([2, 32], np.float32),
                      output_bias=np.zeros([2], np.float32))
    prefix = checkpoints.write_tf1_checkpoint(classifier, str(tmp_path / "cls" / "model.ckpt"))
    write_text(tmp_path / "cls" / "model_settings.json", json.dumps({"runner": "run_classifier"}))
    for make in (lambda: masked_lm.Predictor(prefix, vocab_file=str(tiny["folder"] / "vocab.txt"),
                                             bert_config_file=str(tiny["folder"] /
                                                                  "bert_config.json")),
                 lambda: export_saved_model.run(export_saved_model.Settings(
                     model_type="masked_lm", init_checkpoint=prefix,
                     vocab_file=str(tiny["folder"] / "vocab.txt"),
                     bert_config_file=str(tiny["folder"] / "bert_config.json"),
                     export_dir=str(tmp_path / "export")))):
        with pytest.raises(ValueError, match=r"^checkpoint .*cls/model.ckpt is run_classifier's "
                                             r"model \(its model_settings.json\), not a masked_lm "
                                             r"model \(it lacks cls/predictions/.*\): .*pretrain"
                                             r".*; this one exports as (--)?model_type=classifier$"):
            make()
    assert not (tmp_path / "export").exists()
    with pytest.raises(ValueError, match=r"^top_k=0: expected an integer >= 1$"):
        masked_lm.Predictor(tiny["prefix"], top_k=0)


def _face(tiny, tmp_path, *extra):
    inputs = write_text(tmp_path / "texts.txt", "\n".join(_TEXTS) + "\n")
    out = tmp_path / "answers.jsonl"
    extract_features.run(flags_common.parse_flags(extract_features.define_flags, [
        "--input_file=%s" % inputs, "--output_file=%s" % out,
        "--init_checkpoint=%s" % tiny["prefix"],
        "--bert_config_file=%s" % (tiny["folder"] / "bert_config.json"),
        "--vocab_file=%s" % (tiny["folder"] / "vocab.txt")] + list(extra)))
    return [json.loads(line) for line in out.read_text().splitlines()]


@pytest.fixture(scope="module")
def file_door(tiny, tmp_path_factory):
    """extract_features --fill_mask_top_k=5's lines for _TEXTS (made once)."""
    return _face(tiny, tmp_path_factory.mktemp("file_door"), "--fill_mask_top_k=5")


def test_the_file_door_and_its_bad_input(tiny, file_door, tmp_path):
    lines = file_door
    assert [line["linex_index"] for line in lines] == [0, 1, 2]
    assert [line["text"] for line in lines] == _TEXTS
    assert [line["masks"] for line in lines] == tiny["predictor"].predict(_TEXTS)
    for extra, message in (
            (["--fill_mask_top_k=0"], r"fill_mask_top_k"),
            (["--fill_mask_top_k=5", "--pooling=mean"], r"^--pooling=mean has no effect with "
                                                        r"--fill_mask_top_k"),
            (["--fill_mask_top_k=5", "--max_seq_length=32"], r"^--max_seq_length=32 is longer "
                                                             r"than the 16 positions")):
        with pytest.raises(Exception, match=message):
            _face(tiny, tmp_path, *extra)
    write_text(tmp_path / "texts.txt", "all work and no play\n")
    out = tmp_path / "refused.jsonl"
    with pytest.raises(ValueError, match=r"texts.txt, line 1: no \[MASK\] to fill$"):
        extract_features.run(extract_features.Settings(
            input_file=str(tmp_path / "texts.txt"), output_file=str(out),
            init_checkpoint=tiny["prefix"], fill_mask_top_k=5,
            bert_config_file=str(tiny["folder"] / "bert_config.json"),
            vocab_file=str(tiny["folder"] / "vocab.txt")))
    assert not out.exists()


@pytest.fixture(scope="module")
def exported(tiny, tmp_path_factory):
    """export_saved_model --model_type=masked_lm --litert=fp32 of the tiny checkpoint (its
    config and vocab are the folder's), the report compared on _TEXTS, TF Serving's warm-up
    requests made of them. No max_seq_length: the export takes the Predictor's default (the
    config's 16 positions; on main before the fix it took the flag's 128 and the config
    refused it)."""
    root = tmp_path_factory.mktemp("fill_mask_export")
    texts = write_text(root / "texts.txt", "\n".join(_TEXTS) + "\n")
    with conversions_in_process():  # the model is tested here, not the converting child
        export_saved_model.run(export_saved_model.Settings(
            model_type="masked_lm", init_checkpoint=tiny["prefix"],
            export_dir=str(root / "export"), litert="fp32", agreement_file=texts,
            warmup_file=texts))
    return root / "export"


def _same_answers(want, got, atol=1e-5):
    """The same top-k tokens and ids per mask, probabilities within atol."""
    assert [[[(a["token"], a["token_id"]) for a in m] for m in t] for t in got] == [
        [[(a["token"], a["token_id"]) for a in m] for m in t] for t in want]
    np.testing.assert_allclose([p["probability"] for t in got for m in t for p in m],
                               [p["probability"] for t in want for m in t for p in m],
                               atol=atol, rtol=0)


@pytest.mark.slow
def test_the_saved_model_on_raw_strings_gives_the_predictors_answers(tiny, exported):
    saved = tf.saved_model.load(str(exported))
    assert sorted(saved.signatures) == ["serving_default", "serving_ids", "tokenize"]
    out = saved.signatures["serving_default"](text=tf.constant(_TEXTS))
    # [B, M, K]: M the request's most masks (2), K --fill_mask_top_k (5).
    assert {k: v.shape.as_list() for k, v in out.items()} == {
        "tokens": [3, 2, 5], "token_ids": [3, 2, 5], "probabilities": [3, 2, 5],
        "num_masks": [3]}
    assert out["num_masks"].numpy().tolist() == [2, 1, 1]
    answers = [[[{"token": t.decode("utf-8"), "token_id": int(i), "probability": float(p)}
                 for t, i, p in zip(*(out[k].numpy()[row][slot]
                                      for k in ("tokens", "token_ids", "probabilities")))]
                for slot in range(count)] for row, count in enumerate([2, 1, 1])]
    _same_answers(tiny["predictor"].predict(_TEXTS), answers)
    # A row's slots past its masks: id -1, no token, probability 0.
    assert out["token_ids"].numpy()[1, 1].tolist() == [-1] * 5
    assert out["tokens"].numpy()[1, 1].tolist() == [b""] * 5
    assert not out["probabilities"].numpy()[1, 1].any()
    # serving_ids: the same on ids packed elsewhere, every slot of S = 16 positions.
    features, _ = tiny["predictor"].head.encode(_TEXTS)
    ids = saved.signatures["serving_ids"](**{k: tf.constant(np.pad(
        features[k], [[0, 0], [0, 16 - features[k].shape[1]]])) for k in
        ("input_ids", "input_mask", "segment_ids")})
    assert ids["token_ids"].shape == (3, 16, 5)
    np.testing.assert_array_equal(ids["token_ids"].numpy()[:, :2], out["token_ids"].numpy())
    # The Predictor's refusals: a text without [MASK], a [MASK] past the cut (row 1 each).
    for texts, message in ((["[MASK] work", "all work"],
                            r"no \[MASK\] to fill in row\(s\):\] \[1\]"),
                           (["[MASK] work", "all work and no play " * 3 + "[MASK]"],
                            r"a \[MASK\] past max_seq_length=16 \(the first 14 pieces of a text "
                            r"are read\) in row\(s\):\] \[1\]")):
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            saved.signatures["serving_default"](text=tf.constant(texts))
    requests = warmup.read_requests(str(exported / warmup.WARMUP_FILE))
    assert [(name, inputs["text"].tolist()) for _, name, inputs in requests] == [
        ("serving_default", [t.encode("utf-8")]) for t in _TEXTS]
    info = json.loads((exported / "assets.extra" / "export_info.json").read_text())
    assert (info["model_type"], info["fill_mask_top_k"], info["max_seq_length"]) == (
        "masked_lm", 5, 16)


@pytest.mark.slow
def test_litert_fp32_gives_the_predictors_answers_and_refusals(tiny, exported):
    from bert_tf2.export import litert_predictor  # pylint: disable=import-outside-toplevel
    report = json.loads((exported / "litert_report.json").read_text())
    assert report["variants"]["fp32"]["results"]["agreement"]["agreement"] == 1.0
    litert = litert_predictor.LiteRTPredictor(str(exported), "fp32")
    want = tiny["predictor"].predict(_TEXTS)
    _same_answers(want, litert.predict(_TEXTS))
    assert litert.predict([]) == []
    _same_answers(want[:1], litert.predict(_TEXTS[0]))  # a str is one text
    for bad in (["[MASK] work", "all work and no play " * 3 + "[MASK]"], ["all work"],
                None, [_TEXTS[0], 3]):
        with pytest.raises(ValueError) as theirs:
            tiny["predictor"].predict(bad)
        with pytest.raises(ValueError) as ours:
            litert.predict(bad)
        assert str(ours.value) == str(theirs.value)
    with pytest.raises(ValueError, match=r"^fill-mask takes texts only: leave texts_b out$"):
        litert.predict(_TEXTS, ["x"] * 3)


def test_export_refusals_in_one_line_before_any_work(tiny, tmp_path):
    def export(**settings):
        export_saved_model.run(export_saved_model.Settings(**dict(dict(
            model_type="masked_lm", init_checkpoint=tiny["prefix"], max_seq_length=16,
            export_dir=str(tmp_path / "model")), **settings)))

    with pytest.raises(ValueError, match=r"^fill_mask_top_k=0: expected an integer >= 1$"):
        export(fill_mask_top_k=0)
    # A warm-up text without [MASK] would fail the version's load in TF Serving.
    no_mask = write_text(tmp_path / "warmup.txt", "[MASK] work\nall work\n")
    with pytest.raises(ValueError, match=r"warmup.txt, line 2: no \[MASK\] to fill$"):
        export(warmup_file=no_mask)
    with pytest.raises(ValueError, match=r"^fill_mask_top_k=3 has no effect with "
                                         r"model_type=encoder"):
        export(model_type="encoder", fill_mask_top_k=3)
    # A checkpoint without the head: the export's own message.
    reader = tf.train.load_checkpoint(tiny["prefix"])
    encoder = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()
               if n.startswith("bert/")}
    prefix = checkpoints.write_tf1_checkpoint(encoder, str(tmp_path / "enc" / "bert_model.ckpt"))
    with pytest.raises(ValueError, match=r"has no head of a masked_lm model \(it lacks "
                                         r"cls/predictions/.*\): a masked_lm model is made by "
                                         r"run_pretraining$"):
        export(init_checkpoint=prefix, vocab_file=str(tiny["folder"] / "vocab.txt"),
               bert_config_file=str(tiny["folder"] / "bert_config.json"))
    assert not (tmp_path / "model").exists()


@pytest.mark.slow
def test_a_warmup_text_the_served_signature_refuses_is_refused_at_export(tiny, tmp_path):
    """Issue 91: a warm-up line whose [MASK] is past the cut was exported (exit 0), and
    TF Serving, replaying it, would not load the version. The requests are replayed through
    the saved export before it is renamed into place: one line naming the file and line,
    nothing written under --export_dir (or beside it)."""
    long_line = " ".join(["work"] * 20) + " [MASK]"
    path = write_text(tmp_path / "warmup.txt", "[MASK] work\n\n%s\n" % long_line)
    with pytest.raises(ValueError) as raised:
        export_saved_model.run(export_saved_model.Settings(
            model_type="masked_lm", init_checkpoint=tiny["prefix"], max_seq_length=16,
            export_dir=str(tmp_path / "model"), warmup_file=path))
    assert str(raised.value) == (  # (a Settings' error names the field, not the flag)
        "warmup_file=%s: line 3 fails the export's serving_default signature, so TF "
        "Serving would not load the version: input text: a [MASK] past max_seq_length=16 "
        "(the first 14 pieces of a text are read)" % path)
    assert sorted(os.listdir(str(tmp_path))) == ["warmup.txt"]


@pytest.mark.slow
def test_every_door_gives_the_same_top5(tiny, file_door, tmp_path):
    """Python Predictor = extract_features --fill_mask_top_k = transformers'
    pipeline("fill-mask") over the BertForMaskedLM export: same top-5 tokens,
    probabilities within 1e-5."""
    peer = peer_python()
    hf_dir = tmp_path / "hf"
    convert_hf_checkpoint.run(convert_hf_checkpoint.Settings(
        direction="to_hf", init_checkpoint=tiny["prefix"], model_type="masked_lm",
        output_dir=str(hf_dir)))
    assert json.loads((hf_dir / "config.json").read_text())["architectures"] == [
        "BertForMaskedLM"]
    request = write_text(tmp_path / "request.json", json.dumps({"folders": [{
        "dir": str(hf_dir), "texts": _TEXTS,
        "pipeline": {"task": "fill-mask", "make": {"top_k": 5}}}]}))
    subprocess.run([peer, os.path.join(str(REPO_ROOT), "tests", "hf_peer_check.py"), request,
                    str(tmp_path / "peer.json")], check=True, timeout=HANG_GUARD_SECONDS,
                   env=dict(os.environ, TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1"))
    hf = json.loads((tmp_path / "peer.json").read_text())[0]["pipeline"]
    ours = tiny["predictor"].predict(_TEXTS)
    doors = {"Predictor": ours, "file": [line["masks"] for line in file_door],
             # the pipeline: a text of one mask gives one list, of several a list per mask
             "HF pipeline": [[[{"token_id": a["token"], "probability": a["score"]}
                               for a in mask] for mask in (r if isinstance(r[0], list) else [r])]
                             for r in hf]}
    for door, answers in doors.items():
        worst = 0.0
        for text, (want, got) in enumerate(zip(ours, answers)):
            assert len(got) == len(want), (door, text)
            for a, b in zip(want, got):
                assert [x["token_id"] for x in a] == [x["token_id"] for x in b], (door, text)
                worst = max(worst, float(np.abs(np.subtract(
                    [x["probability"] for x in a], [x["probability"] for x in b])).max()))
        print("fill-mask parity, kerasbert_tiny, %d texts / %d masks: Predictor vs %-11s "
              "top-5 tokens =, max |p diff| %.1e" % (len(_TEXTS), sum(map(len, ours)), door,
                                                      worst))
        assert worst <= 1e-5, door


def test_a_checkpoint_without_the_head_is_refused_as_what_its_folder_is(tmp_path):
    # Before: the export of a run_classifier folder as masked_lm asked "is it a checkpoint of
    # a fine-tuned masked_lm model?"; the refusal now names the folder's runner and export.
    from bert_tf2.export import head_refusal  # pylint: disable=import-outside-toplevel
    lacking = ["cls/predictions/output_bias", "cls/predictions/transform/dense/kernel"]
    write_text(tmp_path / "model_settings.json", json.dumps({"runner": "run_pretraining"}))
    (tmp_path / "none").mkdir()  # a folder without model_settings.json (a bare checkpoint)
    for folder, model_type, missing, message in (
            (tmp_path, "classifier", ["output_weights", "output_bias"],
             "is run_pretraining's model (its model_settings.json), not a classifier model (it "
             "lacks output_weights, output_bias): NEEDS; this one exports as "
             "--model_type=encoder"),
            (tmp_path / "none", "masked_lm", lacking,
             "has no head of a masked_lm model (it lacks cls/predictions/output_bias, "
             "cls/predictions/transform/dense/kernel): NEEDS"),
            (tmp_path, "classifier", ["bert/encoder/layer_3/output/dense/kernel"] * 4,
             "lacks 4 variable(s) of the classifier model (bert/encoder/layer_3/output/dense/"
             "kernel, bert/encoder/layer_3/output/dense/kernel, bert/encoder/layer_3/output/"
             "dense/kernel, ...): its encoder is not the one bert_config_file describes "
             "(num_hidden_layers, ...)")):
        error = head_refusal.error(model_type, str(folder), missing, "NEEDS")
        assert str(error) == "checkpoint %s %s" % (folder, message)


def test_the_litert_example_file_of_the_masked_lm_room(tiny, tmp_path):
    # --calibration_file / --agreement_file of --model_type=masked_lm: the room's reader
    # (issue 93: moved from litert_batches, which imported this head's module).
    from bert_tf2.export import head_types  # pylint: disable=import-outside-toplevel
    room = head_types.find("masked_lm")
    tokenizer = tiny["predictor"].head.tokenizer
    path = tmp_path / "fill.txt"
    path.write_text("the [MASK] sat .\n\n[MASK] and [MASK] .\nthird [MASK]\n", encoding="utf-8")
    batch = room.litert_examples(str(path), tokenizer, 16, 2, None, None, None, None)
    assert batch.gold is None and batch.extra == [1, 2]  # the first 2 texts, their [MASK]s
    assert batch.features["input_ids"].shape == (2, 16)
    want, counts = masked_lm.litert_batch(["the [MASK] sat .", "[MASK] and [MASK] ."],
                                          tokenizer, 16)
    assert counts == [1, 2]
    np.testing.assert_array_equal(batch.features["input_ids"], want["input_ids"])
    empty = tmp_path / "empty.txt"
    empty.write_text("\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"^%s: no texts$" % re.escape(str(empty))):
        room.litert_examples(str(empty), tokenizer, 16, 2, None, None, None, None)
