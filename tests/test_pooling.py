"""Tests of sentence pooling: the rule, and the three ways to a vector that use it.

pooling.pool is compared with an independently written numpy rule (sentence-
transformers' definitions: real tokens by the attention mask, [CLS]/[SEP] included);
extract_features --pooling, extract_features.SentenceEncoder and the encoder
SavedModel's sentence_embedding are compared with that rule on a tiny random model.
"""
import json
import os

import numpy as np
import pytest
import tensorflow as tf

import convert_hf_checkpoint
import export_saved_model
import extract_features
import modeling
from bert_tf2 import flags_common
from bert_tf2 import loaders
from bert_tf2.tasks import pooling
from bert_tf2.trainer import checkpoints

_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "sat", "on", "mat", "a",
          "dog", "ran", "##s", "fast", "."]
_CONFIG = dict(vocab_size=len(_VOCAB), hidden_size=16, num_hidden_layers=2,
               num_attention_heads=2, intermediate_size=32, max_position_embeddings=40,
               type_vocab_size=2, hidden_act="gelu", initializer_range=0.5)
_LINES = ["the cat sat on the mat .", "a dog", "the dogs ran fast . the cat sat",
          "cat", "the mat ||| a dog ran"]


def numpy_pool(hidden, mask, mode, normalize):
    """The rule written out independently: [B, S, H] (numpy), [B, S] -> [B, H]."""
    out = []
    for row, row_mask in zip(hidden, mask):
        real = row[row_mask.astype(bool)]
        if mode == "cls":
            vector = row[0]
        elif mode == "max":
            vector = real.max(axis=0)
        elif mode == "mean":
            vector = real.sum(axis=0) / len(real)
        else:
            vector = real.sum(axis=0) / np.sqrt(len(real))
        if normalize:
            vector = vector / np.linalg.norm(vector)
        out.append(vector)
    return np.array(out, np.float32)


@pytest.mark.parametrize("mode", pooling.POOLING_MODES)
@pytest.mark.parametrize("normalize", [False, True])
def test_pool_equals_the_numpy_rule(mode, normalize):
    rng = np.random.RandomState(3)
    hidden = [rng.normal(size=(3, 6, 4)).astype(np.float32) for _ in range(2)]
    hidden[0][0, 4:] = 50.0  # large values at padding must not leak into max or mean
    mask = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0]])
    got = pooling.pool(hidden, mask, mode, normalize).numpy()
    want = numpy_pool(np.concatenate(hidden, axis=-1), mask, mode, normalize)
    assert got.shape == (3, 8)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_parse_layers_names_the_bad_index():
    assert pooling.parse_layers("-1,-2", 2) == [-1, -2]
    with pytest.raises(ValueError, match="index -3 is out of range for a model with 2"):
        pooling.parse_layers("-1,-3", 2)


# ---------------------------------------------------------------------------
# A tiny model: the command line, the Python function, the SavedModel
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A random tiny encoder as a TF1 checkpoint, with its config, vocab and input file."""
    root = tmp_path_factory.mktemp("tiny_pool")
    (root / "vocab.txt").write_text("".join(t + "\n" for t in _VOCAB))
    (root / "bert_config.json").write_text(json.dumps(_CONFIG))
    (root / "input.txt").write_text("".join(line + "\n" for line in _LINES))
    config = modeling.BertConfig.from_dict(_CONFIG)
    model = modeling.BertModel(config)
    model(*[tf.zeros([1, 2], tf.int32)] * 3)
    tensors = {n: v.numpy() for n, v in checkpoints.tf1_variable_map(model).items()}
    checkpoints.write_tf1_checkpoint(tensors, str(root / "bert_model.ckpt"))
    return root


def _argv(root, output, extra=()):
    return ["--input_file=%s" % (root / "input.txt"), "--output_file=%s" % output,
            "--bert_config_file=%s" % (root / "bert_config.json"),
            "--init_checkpoint=%s" % (root / "bert_model.ckpt"),
            "--vocab_file=%s" % (root / "vocab.txt"), "--max_seq_length=12",
            "--batch_size=2"] + list(extra)


def _run(argv):
    return extract_features.run(flags_common.parse_flags(extract_features.define_flags, argv))


def _reference(root, mode, layers, normalize, seq_length=12):
    """The numpy rule over extract_features' per-token outputs at full length."""
    tokenizer = loaders.load_tokenizer(str(root / "vocab.txt"), do_lower_case=True)
    features = extract_features.convert_examples_to_features(
        extract_features.read_examples(str(root / "input.txt")), seq_length, tokenizer)
    extractor = extract_features.FeatureExtractor(
        modeling.BertConfig.from_dict(_CONFIG), str(root / "bert_model.ckpt"), layers,
        seq_length)
    hidden = np.concatenate(extractor(features), axis=-1)
    mask = np.array([f.input_mask for f in features])
    return numpy_pool(hidden, mask, mode, normalize)


@pytest.mark.parametrize("mode,layers,normalize", [("mean", "-1", True),
                                                   ("max", "0,-1", False)])
def test_command_line_vectors_equal_the_rule(tiny, tmp_path, mode, layers, normalize):
    want = _reference(tiny, mode, pooling.parse_layers(layers), normalize)
    extra = ["--pooling=%s" % mode, "--layers=%s" % layers,
             "--normalize" if normalize else "--nonormalize"]
    result = _run(_argv(tiny, tmp_path / "v.npy", extra + ["--output_format=npy"]))
    assert result.outputs == {"output_file": str(tmp_path / "v.npy")}
    vectors = np.load(str(tmp_path / "v.npy"))
    assert vectors.dtype == np.float32 and vectors.shape == want.shape
    np.testing.assert_allclose(vectors, want, atol=2e-5)
    if mode != "mean":
        return  # the jsonl writer takes the vectors whatever made them: checked once
    _run(_argv(tiny, tmp_path / "v.jsonl", extra))
    lines = [json.loads(line) for line in (tmp_path / "v.jsonl").read_text().splitlines()]
    assert [line["linex_index"] for line in lines] == list(range(5))
    np.testing.assert_array_equal(np.array([line["embedding"] for line in lines],
                                           np.float32), vectors)


def test_settings_beside_the_checkpoint_are_the_defaults(tiny, tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    for name in os.listdir(str(tiny)):
        (folder / name).write_bytes((tiny / name).read_bytes())
    pooling.write_settings(str(folder), {"pooling": "max", "layers": [-2],
                                         "normalize": True, "max_seq_length": 8})
    want = _reference(folder, "max", [-2], True, seq_length=8)
    argv = [a for a in _argv(folder, tmp_path / "a.npy", ["--output_format=npy"])
            if not a.startswith("--max_seq_length")]  # 8 from the settings
    _run(argv)
    np.testing.assert_allclose(np.load(str(tmp_path / "a.npy")), want, atol=2e-5)
    # Flags win over the settings.
    _run(_argv(folder, tmp_path / "b.npy", ["--output_format=npy", "--nonormalize"]))
    raw = np.load(str(tmp_path / "b.npy"))
    assert np.abs(np.linalg.norm(raw, axis=1) - 1).max() > 1e-3

    encoder = extract_features.SentenceEncoder(str(folder), batch_size=3)
    texts = [line if "|||" not in line else tuple(line.split(" ||| ")) for line in _LINES]
    np.testing.assert_allclose(encoder.encode(texts), want, atol=2e-5)


@pytest.mark.slow
def test_saved_model_sentence_embedding(tiny, tmp_path):
    export_dir = tmp_path / "export"
    export_saved_model.run(flags_common.parse_flags(export_saved_model.define_flags, [
        "--model_type=encoder", "--bert_config_file=%s" % (tiny / "bert_config.json"),
        "--init_checkpoint=%s" % (tiny / "bert_model.ckpt"),
        "--vocab_file=%s" % (tiny / "vocab.txt"), "--max_seq_length=12",
        "--export_dir=%s" % export_dir, "--pooling=mean_sqrt_len", "--layers=-1,-2",
        "--normalize"]))
    info = json.loads((export_dir / "assets.extra" / "export_info.json").read_text())
    assert info["sentence_embedding"] == {"pooling": "mean_sqrt_len", "layers": [-1, -2],
                                          "normalize": True}
    singles = [line for line in _LINES if "|||" not in line]
    want = _reference(tiny, "mean_sqrt_len", [-1, -2], True)[:len(singles)]
    loaded = tf.saved_model.load(str(export_dir))
    text = tf.constant(singles)
    np.testing.assert_allclose(loaded.serving_text_a(text)["sentence_embedding"].numpy(),
                               want, atol=2e-5)
    np.testing.assert_allclose(loaded.embed(text)["sentence_embedding"].numpy(), want,
                               atol=2e-5)


@pytest.mark.parametrize("extra,message", [
    (["--output_format=npy"], "--output_format=npy writes sentence vectors: give --pooling"),
    (["--pooling=mean", "--layers=-1,2"], "--layers: index 2 is out of range"),
])
def test_bad_flags(tiny, tmp_path, extra, message):
    with pytest.raises(ValueError, match=message):
        _run(_argv(tiny, tmp_path / "out", extra))
    assert not (tmp_path / "out").exists()


def test_empty_input_file(tiny, tmp_path):
    (tmp_path / "empty.txt").write_text("")
    argv = _argv(tiny, tmp_path / "out.npy", ["--pooling=cls", "--output_format=npy"])
    argv[0] = "--input_file=%s" % (tmp_path / "empty.txt")
    with pytest.raises(ValueError, match="empty.txt is empty: there is no line to embed"):
        _run(argv)


# ---------------------------------------------------------------------------
# sentence-transformers folders
# ---------------------------------------------------------------------------

def _st_folder(path, modes, modules=("Transformer", "Pooling", "Normalize"), lower=False):
    path.mkdir()
    (path / "modules.json").write_text(json.dumps([
        {"idx": i, "name": str(i), "path": {"Pooling": "1_Pooling"}.get(m, ""),
         "type": "sentence_transformers.models." + m} for i, m in enumerate(modules)]))
    (path / "1_Pooling").mkdir()
    config = {"word_embedding_dimension": 16, "pooling_mode_cls_token": False,
              "pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": False}
    config.update({key: True for key in modes})
    (path / "1_Pooling" / "config.json").write_text(json.dumps(config))
    (path / "config.json").write_text(json.dumps(dict(_CONFIG, model_type="bert")))
    (path / "vocab.txt").write_text("".join(t + "\n" for t in _VOCAB))
    (path / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": 24, "do_lower_case": lower}))
    return str(path)


def test_sentence_transformers_settings(tmp_path):
    folder = _st_folder(tmp_path / "a", ["pooling_mode_mean_tokens"])
    assert pooling.sentence_transformers_settings(folder, tokenizer_lower_case=True) == {
        "pooling": "mean", "layers": [-1], "normalize": True, "max_seq_length": 24,
        "do_lower_case": True}
    folder = _st_folder(tmp_path / "b", ["pooling_mode_cls_token"],
                        modules=("Transformer", "Pooling"))
    assert pooling.sentence_transformers_settings(folder, tokenizer_lower_case=False) == {
        "pooling": "cls", "layers": [-1], "normalize": False, "max_seq_length": 24,
        "do_lower_case": False}
    assert pooling.sentence_transformers_settings(str(tmp_path)) is None


@pytest.mark.parametrize("modes,modules,message", [
    (["pooling_mode_weightedmean_tokens"], ("Transformer", "Pooling"),
     "pooling pooling_mode_weightedmean_tokens is not supported"),
    (["pooling_mode_cls_token", "pooling_mode_max_tokens"], ("Transformer", "Pooling"),
     "pooling pooling_mode_cls_token \\+ pooling_mode_max_tokens is not supported"),
    (["pooling_mode_mean_tokens"], ("Transformer", "Pooling", "Dense"),
     "module sentence_transformers.models.Dense is not supported"),
])
def test_unsupported_sentence_transformers_folders(tmp_path, modes, modules, message):
    folder = _st_folder(tmp_path / "st", modes, modules)
    with pytest.raises(ValueError, match=message):
        convert_hf_checkpoint.convert(folder, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()
