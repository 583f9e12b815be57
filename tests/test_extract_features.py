"""Tests of extract_features: input reading, features, JSON output, golden TF1 outputs."""
import json
import os

import numpy as np
import pytest
import tensorflow as tf

import extract_features as ef
import modeling
import tokenization
from bert_tf2 import flags_common
from bert_tf2 import heads
from conftest import write_text
from conftest import FP32_ATOL

_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "sat", "on", "mat", "a",
          "dog", "ran", "##s", "fast", "."]


@pytest.fixture
def small_tokenizer(tmp_path):
    vocab = write_text(tmp_path / "vocab.txt", "".join(t + "\n" for t in _VOCAB))
    return tokenization.FullTokenizer(vocab, do_lower_case=True)


@pytest.fixture
def golden(shared_dir):
    path = shared_dir / "golden" / "tf1_tiny"
    with open(str(path / "inputs.json"), encoding="utf-8") as f:
        inputs = json.load(f)
    return {"dir": path, "inputs": inputs,
            "expected": np.load(str(path / "expected_outputs.npz"))}


def _golden_argv(golden, input_file, output_file, extra=()):
    g = golden["dir"]
    return ["--input_file=%s" % input_file, "--output_file=%s" % output_file,
            "--bert_config_file=%s" % (g / "bert_config.json"),
            "--init_checkpoint=%s" % (g / "bert_model.ckpt"),
            "--vocab_file=%s" % (g / "vocab.txt"), "--max_seq_length=24"] + list(extra)


def _run(argv):
    return ef.run(flags_common.parse_flags(ef.define_flags, argv))


def _read_jsonl(path):
    with open(str(path), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


# ---------------------------------------------------------------------------
# Reading input lines
# ---------------------------------------------------------------------------

def test_read_examples_splits_pairs_like_the_reference(tmp_path):
    path = write_text(tmp_path / "in.txt",
                  "  Just one sentence.  \n"
                  "Left side ||| right side\n"
                  "a ||| b ||| c\n"
                  "no|||split\n"
                  "\n"
                  "trailing sep ||| \n"
                  "last line without newline")
    examples = ef.read_examples(path)
    assert [(e.unique_id, e.text_a, e.text_b) for e in examples] == [
        (0, "Just one sentence.", None),
        (1, "Left side", "right side"),
        (2, "a ||| b", "c"),
        (3, "no|||split", None),
        (4, "", None),
        (5, "trailing sep |||", None),  # stripped first, so " ||| " is gone
        (6, "last line without newline", None),
    ]


def test_features_single_pair_truncation_and_padding(small_tokenizer):
    examples = [ef.InputExample(0, "The cat sat.", None),
                ef.InputExample(1, "the cat sat on the mat", "a dog ran"),
                ef.InputExample(2, "cats cats cats cats", None)]
    f = ef.convert_examples_to_features(examples, 9, small_tokenizer)
    assert f[0].tokens == ["[CLS]", "the", "cat", "sat", ".", "[SEP]"]
    assert f[0].input_ids == [2, 4, 5, 6, 14, 3, 0, 0, 0]
    assert f[0].input_mask == [1] * 6 + [0] * 3
    assert f[0].input_type_ids == [0] * 9
    # 9 - 3 = 6 WordPieces, taken from the longer text first: 6 + 3 -> 3 + 3
    assert f[1].tokens == ["[CLS]", "the", "cat", "sat", "[SEP]", "a", "dog", "ran", "[SEP]"]
    assert f[1].input_type_ids == [0] * 5 + [1] * 4
    assert f[1].input_mask == [1] * 9
    # single text cut to 9 - 2 WordPieces
    assert f[2].tokens == ["[CLS]"] + ["cat", "##s"] * 3 + ["cat", "[SEP]"]
    assert [x.unique_id for x in f] == [0, 1, 2]


def test_batch_tokenizer_path_equals_exact_path(small_tokenizer):
    class ExactOnly(object):
        def __init__(self, inner):
            self.tokenize = inner.tokenize
            self.convert_tokens_to_ids = inner.convert_tokens_to_ids

    examples = [ef.InputExample(i, "the cat sat on the mat " * (i % 4), "a dog" if i % 2 else "")
                for i in range(9)]
    fast = ef.convert_examples_to_features(examples, 12, small_tokenizer)
    exact = ef.convert_examples_to_features(examples, 12, ExactOnly(small_tokenizer))
    assert [(f.tokens, f.input_ids, f.input_type_ids) for f in fast] == [
        (f.tokens, f.input_ids, f.input_type_ids) for f in exact]


def test_parse_layers():
    assert ef.parse_layers("-1,-2,-3,-4", 4) == [-1, -2, -3, -4]
    assert ef.parse_layers("0,1", 2) == [0, 1]
    with pytest.raises(ValueError, match="out of range"):
        ef.parse_layers("-3", 2)
    with pytest.raises(ValueError, match="integers"):
        ef.parse_layers("last", 2)


def test_feature_json_schema_and_rounding():
    feature = ef.InputFeatures(7, ["[CLS]", "hi", "[SEP]"], [2, 5, 3, 0], [1, 1, 1, 0],
                               [0, 0, 0, 0])
    rng = np.random.RandomState(0)
    outputs = [rng.randn(4, 3).astype(np.float32) for _ in range(2)]
    line = ef.feature_json(feature, [-1, -2], outputs)
    assert line.startswith('{"linex_index": 7, "features": [{"token": "[CLS]", "layers": '
                           '[{"index": -1, "values": [')
    data = json.loads(line)
    assert [t["token"] for t in data["features"]] == ["[CLS]", "hi", "[SEP]"]  # no padding
    for position, token in enumerate(data["features"]):
        assert [layer["index"] for layer in token["layers"]] == [-1, -2]
        for layer, output in zip(token["layers"], outputs):
            assert layer["values"] == [round(float(x), 6) for x in output[position]]


@pytest.mark.parametrize("missing", ["input_file", "output_file", "bert_config_file",
                                     "init_checkpoint", "vocab_file"])
def test_required_flags(missing):
    argv = ["--input_file=i", "--output_file=o", "--bert_config_file=c",
            "--init_checkpoint=k", "--vocab_file=v"]
    argv = [a for a in argv if not a.startswith("--%s=" % missing)]
    with pytest.raises(ValueError, match="--%s is required" % missing):
        _run(argv)


def test_reference_flag_names_and_defaults():
    fv = flags_common.parse_flags(ef.define_flags, [])
    assert fv.layers == "-1,-2,-3,-4" and fv.max_seq_length == 128 and fv.batch_size == 32
    assert fv.do_lower_case is True and fv.use_tpu is False and fv.num_tpu_cores == 8
    assert fv.master is None and fv.use_one_hot_embeddings is False


# ---------------------------------------------------------------------------
# Golden TF1 checkpoint
# ---------------------------------------------------------------------------

def _check_against_golden(golden, records):
    expected = golden["expected"]
    assert len(records) == len(golden["inputs"]["lines"])
    for i, record in enumerate(records):
        assert record["linex_index"] == i
        tokens = [t["token"] for t in record["features"]]
        assert tokens == golden["inputs"]["tokens"][i]
        for slot, name in ((0, "encoder_layer_1"), (1, "encoder_layer_0")):
            values = np.array([t["layers"][slot]["values"] for t in record["features"]])
            assert [t["layers"][slot]["index"] for t in record["features"]] == [-1 - slot] * len(
                tokens)
            # 6-decimal rounding adds at most 5e-7 to float32 noise
            np.testing.assert_allclose(values, expected[name][i, :len(tokens)], atol=1e-5,
                                       rtol=0)


def test_golden_tf1_checkpoint(golden, tmp_path):
    input_file = write_text(tmp_path / "in.txt", "\n".join(golden["inputs"]["lines"]) + "\n")
    output_file = tmp_path / "out.jsonl"
    result = _run(_golden_argv(golden, input_file, output_file, ["--layers=-1,-2"]))
    assert result.outputs == {"output_file": str(output_file)}
    _check_against_golden(golden, _read_jsonl(output_file))
    assert sorted(os.listdir(str(tmp_path))) == ["in.txt", "out.jsonl"]  # no temporaries


@pytest.mark.slow
def test_run_takes_settings_twice_in_one_process(golden, tmp_path):
    """run(Settings(...)) with no flag parsing, twice: the Result names the file written,
    which holds the golden values the parsed flags write (test_golden_tf1_checkpoint: the
    same settings as flags), the same both times."""
    input_file = write_text(tmp_path / "in.txt", "\n".join(golden["inputs"]["lines"]) + "\n")
    g = golden["dir"]
    for name in ("a.jsonl", "b.jsonl"):
        settings = ef.Settings(
            input_file=str(input_file), output_file=str(tmp_path / name),
            bert_config_file=str(g / "bert_config.json"),
            init_checkpoint=str(g / "bert_model.ckpt"), vocab_file=str(g / "vocab.txt"),
            max_seq_length=24, layers="-1,-2")
        result = ef.run(settings)
        assert result.outputs == {"output_file": str(tmp_path / name)}
        assert os.path.exists(result.outputs["output_file"])
        assert result.metrics == {} and result.output_dir is None
    _check_against_golden(golden, _read_jsonl(tmp_path / "a.jsonl"))
    assert _read_jsonl(tmp_path / "b.jsonl") == _read_jsonl(tmp_path / "a.jsonl")


def test_settings_name_a_missing_setting_by_its_flag():
    with pytest.raises(ValueError, match="^vocab_file is required"):
        ef.run(ef.Settings(input_file="i", output_file="o", bert_config_file="c",
                           init_checkpoint="k"))


def test_golden_from_a_tf2_checkpoint(golden, tmp_path):
    """The same weights saved as one of our TF2 checkpoints give the same output."""
    from bert_tf2.trainer import checkpoints  # pylint: disable=import-outside-toplevel
    config = modeling.BertConfig.from_json_file(str(golden["dir"] / "bert_config.json"))
    model = heads.BertClassifier(config, 2)
    model(heads.dummy_features(seq_length=8))
    checkpoints.load_checkpoint(model, str(golden["dir"] / "bert_model.ckpt"))
    prefix = tf.train.Checkpoint(model=model).save(str(tmp_path / "tf2" / "ckpt"))
    input_file = write_text(tmp_path / "in.txt", "\n".join(golden["inputs"]["lines"]) + "\n")
    output_file = tmp_path / "out.jsonl"
    argv = _golden_argv(golden, input_file, output_file, ["--layers=-1,-2"])
    argv = [a for a in argv if not a.startswith("--init_checkpoint")]
    _run(argv + ["--init_checkpoint=%s" % prefix])
    _check_against_golden(golden, _read_jsonl(output_file))


def test_streaming_chunks_keep_order_and_match_one_chunk(golden, tmp_path):
    lines = golden["inputs"]["lines"] * 10 + ["extra line %d ||| pair %d" % (i, i)
                                              for i in range(5)]
    input_file = write_text(tmp_path / "in.txt", "\n".join(lines) + "\n")
    small = tmp_path / "small.jsonl"
    large = tmp_path / "large.jsonl"
    # batch_size 2 -> chunks of 32 lines: 45 lines make two chunks and an odd last batch.
    _run(_golden_argv(golden, input_file, small, ["--batch_size=2", "--layers=-1"]))
    _run(_golden_argv(golden, input_file, large, ["--batch_size=64", "--layers=-1"]))
    with open(str(small)) as a, open(str(large)) as b:
        small_lines, large_lines = a.read().splitlines(), b.read().splitlines()
    assert len(small_lines) == 45
    assert [json.loads(x)["linex_index"] for x in small_lines] == list(range(45))
    for x, y in zip(small_lines, large_lines):
        vx = np.array([t["layers"][0]["values"] for t in json.loads(x)["features"]])
        vy = np.array([t["layers"][0]["values"] for t in json.loads(y)["features"]])
        # Batches of 2 vs 64: other shapes (float32's bound), plus each side's 6-decimal rounding.
        np.testing.assert_allclose(vx, vy, atol=FP32_ATOL + 1e-6, rtol=0)
    # The 11th copy of line 0 equals the first.
    assert json.loads(small_lines[4])["features"][3]["token"] == "brown"


def test_trimmed_batches_write_the_full_padding_values_in_order(golden, tmp_path):
    # Lines of very different lengths, so that length-sorted batches reorder them.
    lines = [line if i % 3 else line + " " + " ".join(["more words here"] * (6 * (i % 5)))
             for i, line in enumerate(golden["inputs"]["lines"] * 6)]
    input_file = write_text(tmp_path / "in.txt", "\n".join(lines) + "\n")
    values = {}
    for name in ("trim", "notrim"):
        output_file = tmp_path / (name + ".jsonl")
        _run(_golden_argv(golden, input_file, output_file,
                          ["--batch_size=3", "--layers=-1,-2", "--max_seq_length=96",
                           "--%s_padding" % name]))
        values[name] = _read_jsonl(output_file)
    assert len(values["trim"]) == len(values["notrim"]) == len(lines)
    for a, b in zip(values["trim"], values["notrim"]):
        assert a["linex_index"] == b["linex_index"]
        assert [t["token"] for t in a["features"]] == [t["token"] for t in b["features"]]
        for ta, tb in zip(a["features"], b["features"]):
            for la, lb in zip(ta["layers"], tb["layers"]):
                assert la["index"] == lb["index"]
                # Trimmed vs full padding: other shapes, plus the 6-decimal rounding.
                np.testing.assert_allclose(la["values"], lb["values"], atol=FP32_ATOL + 1e-6,
                                           rtol=0)


def test_failure_leaves_no_output(golden, tmp_path, monkeypatch):
    input_file = write_text(tmp_path / "in.txt", "\n".join(["line %d" % i for i in range(40)]))
    output_file = tmp_path / "out.jsonl"
    original = ef.feature_json

    def failing(feature, layer_indexes, outputs):
        if feature.unique_id == 35:
            raise RuntimeError("boom")
        return original(feature, layer_indexes, outputs)

    monkeypatch.setattr(ef, "feature_json", failing)
    with pytest.raises(RuntimeError):
        _run(_golden_argv(golden, input_file, output_file, ["--batch_size=1", "--layers=-2"]))
    assert sorted(os.listdir(str(tmp_path))) == ["in.txt"]


def test_bad_layers_and_sequence_length(golden, tmp_path):
    input_file = write_text(tmp_path / "in.txt", "hello\n")
    with pytest.raises(ValueError, match="out of range"):
        _run(_golden_argv(golden, input_file, tmp_path / "o.jsonl", ["--layers=-1,2"]))
    with pytest.raises(ValueError, match="max_seq_length=129"):
        _run(_golden_argv(golden, input_file, tmp_path / "o.jsonl",
                          ["--max_seq_length=129", "--layers=-1"]))


def test_a_checkpoint_lacking_an_encoder_layer_is_refused_a_missing_pooler_is_not(tmp_path):
    from bert_tf2.trainer import checkpoints
    config = modeling.BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=2,
                                 num_attention_heads=2, intermediate_size=16,
                                 max_position_embeddings=16)
    model = modeling.BertModel(config)
    ids = tf.zeros([1, 4], tf.int32)
    model(ids, tf.ones_like(ids), ids)
    tensors = {n: v.numpy() for n, v in checkpoints.tf1_variable_map(model).items()
               if not n.startswith("bert/pooler/")}
    no_pooler = checkpoints.write_tf1_checkpoint(tensors, str(tmp_path / "a" / "model.ckpt"))
    extractor = ef.FeatureExtractor(config, no_pooler, [-1], 4)
    np.testing.assert_array_equal(extractor.model.embedding_table.numpy(),
                                  tensors["bert/embeddings/word_embeddings"])
    shallow = checkpoints.write_tf1_checkpoint(
        {n: v for n, v in tensors.items() if "layer_1/" not in n},
        str(tmp_path / "b" / "model.ckpt"))
    with pytest.raises(ValueError, match=r"^checkpoint --init_checkpoint=\S+ lacks 16 of the "
                       r"model's 39 variables \(bert/encoder/layer_1/"):
        ef.FeatureExtractor(config, shallow, [-1], 4)
