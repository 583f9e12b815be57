"""--long_text (long_text.py): head_tail / windows features, pooling, runs and the export.

The learning test is issue 22's "label decided past position 512" scaled down: a tiny
model, max_seq_length 32 (30 pieces of text), documents of 60 words whose label is
its marker word, placed 6 times among the last 18; truncate never sees it.
"""
import json
import os
import pathlib
import random
import shutil

import numpy as np
import pytest
import tensorflow as tf

import run_classifier as rc
import tokenization
from bert_tf2 import flags_common
from bert_tf2.tasks import glue_data
from bert_tf2.tasks import long_text
from conftest import check_test_predictions
from conftest import write_text
from conftest import FP32_ATOL

_FILLER = ["the", "a", "on", "in", "it", "is", "was", "and", "of", "to", "for", "with"]
_MARKERS = ["dog", "cat"]  # label 0, label 1
_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + _MARKERS + _FILLER + ["##s"]
_CONFIG = {"vocab_size": len(_VOCAB), "hidden_size": 32, "num_hidden_layers": 1,
           "num_attention_heads": 2, "intermediate_size": 64, "hidden_act": "gelu",
           "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
           "max_position_embeddings": 64, "type_vocab_size": 2, "initializer_range": 0.02}
_SEQ = 32
_WORDS = 60


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    return write_text(tmp_path_factory.mktemp("vocab") / "vocab.txt",
                  "".join(t + "\n" for t in _VOCAB))


@pytest.fixture
def tokenizer(vocab):
    return tokenization.FullTokenizer(vocab, do_lower_case=True)


def _settings(mode, head=8, stride=10, pooling="mean", seq=_SEQ, argv=()):
    fv = flags_common.parse_flags(rc.define_flags, [
        "--long_text=%s" % mode, "--head_tokens=%d" % head, "--doc_stride=%d" % stride,
        "--window_pooling=%s" % pooling] + list(argv))
    return long_text.from_settings(rc.Settings.of(fv), seq)


# ---------------------------------------------------------------------------
# Features
# ---------------------------------------------------------------------------

def test_head_tail_keeps_head_and_tail_pieces():
    lt = _settings("head_tail", head=3)
    tokens = ["t%d" % i for i in range(40)]
    (a, b), = lt.split(None, list(tokens), None, 12)
    assert a == tokens[:3] + tokens[-7:] and b is None  # 10 = 12 - [CLS] - [SEP]
    (a, _), = lt.split(None, tokens[:10], None, 12)
    assert a == tokens[:10]  # fits: as truncate
    (a, b), = lt.split(None, list(tokens), ["q1", "q2"], 12)
    assert a == tokens[:3] + tokens[-4:] and b == ["q1", "q2"]  # 7 = 12 - 3 - 2


def test_windows_are_doc_spans_and_pairs_keep_text_b():
    lt = _settings("windows", stride=4)
    tokens = ["t%d" % i for i in range(17)]
    parts = lt.split(None, list(tokens), None, 12)
    assert [a for a, _ in parts] == [tokens[0:10], tokens[4:14], tokens[8:17]]
    parts = lt.split(None, list(tokens), ["q1", "q2", "q3"], 12)  # room 12 - 3 - 3 = 6
    assert [a for a, _ in parts] == [tokens[i:i + 6] for i in (0, 4, 8)] + [tokens[12:17]]
    assert all(b == ["q1", "q2", "q3"] for _, b in parts)
    # text_b longer than half the pair room (9 // 2 = 4): cut as truncate would.
    parts = lt.split(None, list(tokens), ["q%d" % i for i in range(8)], 12)
    assert all(b == ["q0", "q1", "q2", "q3"] for _, b in parts)
    assert [len(a) for a, _ in parts] == [5, 5, 5, 5]


@pytest.mark.parametrize("mode", ["head_tail", "windows"])
def test_records_cls_sep_segments_and_index(tmp_path, tokenizer, mode):
    lt = _settings(mode, head=4, stride=6, seq=16)
    long_doc = " ".join(_FILLER * 3)  # 36 pieces
    examples = [glue_data.InputExample("a", long_doc, None, "0"),
                glue_data.InputExample("b", "the cat", None, "1"),
                glue_data.InputExample("c", long_doc, "dog is it", "1")]
    path = str(tmp_path / "x.tf_record")
    n = glue_data.file_based_convert_examples_to_features(
        examples, ["0", "1"], 16, tokenizer, path, split=lt.split,
        index_feature=long_text.DOCUMENT_INDEX if lt.windows else None)
    spec = lt.record_spec(glue_data.record_spec(16))
    rows = [{k: v.numpy() for k, v in tf.io.parse_single_example(r, spec).items()}
            for r in tf.data.TFRecordDataset(path)]
    assert len(rows) == n
    cls, sep = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
    for row in rows:
        ids, mask, seg = row["input_ids"], row["input_mask"], row["segment_ids"]
        length = int(mask.sum())
        assert ids[0] == cls and ids[length - 1] == sep and not ids[length:].any()
        assert list(mask[:length]) == [1] * length
        if seg.any():  # the pair: [CLS] A [SEP] B [SEP], B whole (3 pieces)
            assert list(seg[length - 4:length]) == [1] * 4 and not seg[:length - 4].any()
            assert list(ids[length - 4:length - 1]) == tokenizer.convert_tokens_to_ids(
                ["dog", "is", "it"])
    if mode == "head_tail":
        assert n == 3 and all(r["input_mask"].sum() == 16 for r in (rows[0], rows[2]))
        assert list(rows[0]["input_ids"][1:5]) == tokenizer.convert_tokens_to_ids(_FILLER[:4])
        assert list(rows[0]["input_ids"][5:15]) == tokenizer.convert_tokens_to_ids(_FILLER[2:])
        return
    index = [int(r[long_text.DOCUMENT_INDEX]) for r in rows]
    # 36 pieces in windows of 14, 6 apart: 0, 6, 12, 18, 24 (24 + 14 >= 36); the pair's
    # room is 16 - 3 - 3 = 10: 0, 6, ..., 24 (24 + 10 < 36), 30.
    assert index == [0] * 5 + [1] + [2] * 6
    assert rows[5]["input_mask"].sum() == 4  # the short example: as truncate


def test_short_examples_give_the_truncate_records(tmp_path, tokenizer):
    examples = [glue_data.InputExample("a", "the cat is on it", "a dog", "1"),
                glue_data.InputExample("b", "it was the dog", None, "0")]
    files = []
    for mode in ("truncate", "head_tail", "windows"):
        files.append(str(tmp_path / mode))
        glue_data.file_based_convert_examples_to_features(
            examples, ["0", "1"], 16, tokenizer, files[-1], split=_settings(mode, seq=16).split)
    data = [open(f, "rb").read() for f in files]
    assert data[0] == data[1] == data[2]


@pytest.mark.parametrize("mode", ["head_tail", "windows"])
def test_graph_windows_equal_python_split(mode):
    lt = _settings(mode, head=5, stride=7, seq=20)
    rng = random.Random(3)
    lengths = [(rng.choice([0, 3, 17, 18, 40, 77]), rng.choice([0, 0, 2, 9, 30]))
               for _ in range(30)]
    a = [list(range(1000 * i, 1000 * i + la)) for i, (la, _) in enumerate(lengths)]
    b = [list(range(1000 * i + 500, 1000 * i + 500 + lb)) for i, (_, lb) in enumerate(lengths)]
    window_a, window_b, rows = lt.graph_windows(tf.ragged.constant(a, tf.int64, ragged_rank=1),
                                                tf.ragged.constant(b, tf.int64, ragged_rank=1),
                                                20)
    expected = [(i, pa, pb or []) for i in range(len(a))
                for pa, pb in lt.split(None, a[i], b[i] or None, 20)]
    assert rows.numpy().tolist() == [i for i, _, _ in expected]
    assert window_a.to_list() == [pa for _, pa, _ in expected]
    assert window_b.to_list() == [pb for _, _, pb in expected]


def test_pool_columns_mean_max_and_padding_rows():
    columns = {"logits": np.array([[1, 0], [3, 0], [9, 9], [0, 2], [5, -1]], np.float32),
               long_text.DOCUMENT_INDEX: np.array([0, 0, 0, 1, 1]),
               "is_real_example": np.array([1, 1, 0, 1, 1]),
               "label_ids": np.array([1, 1, 0, 0, 0]), "batch_ids": np.array([0, 0, 0, 1, 1])}
    logits, pooled = _settings("windows").pool_columns(columns)
    np.testing.assert_allclose(logits, [[2, 0], [2.5, 0.5]])
    assert pooled["label_ids"].tolist() == [1, 0] and pooled["is_real_example"].tolist() == [1, 1]
    logits, _ = _settings("windows", pooling="max").pool_columns(columns)
    np.testing.assert_allclose(logits, [[3, 0], [5, 2]])


@pytest.mark.parametrize("argv, message", [
    (["--long_text=chunks"], "--long_text=chunks: must be one of truncate, head_tail, windows"),
    (["--long_text=head_tail", "--head_tokens=31"], "--head_tokens=31 must be between 0 and"),
    (["--long_text=head_tail", "--head_tokens=-1"], "--head_tokens=-1"),
    (["--long_text=windows", "--doc_stride=0"], "--doc_stride=0 must be between 1 and"),
    (["--long_text=windows", "--doc_stride=31"], "--doc_stride=31"),
    (["--window_pooling=vote"], "--window_pooling=vote: must be one of mean, max"),
])
def test_bad_flags_are_one_line_errors(tmp_path, vocab, argv, message):
    data = tmp_path / "data"
    write_text(data / "dev.tsv", "sentence\tlabel\nthe cat\t1\n")
    out = tmp_path / "out"
    fv = flags_common.parse_flags(rc.define_flags, [
        "--task_name=sst-2", "--data_dir=%s" % data, "--vocab_file=%s" % vocab,
        "--bert_config_file=%s" % write_text(tmp_path / "c.json", json.dumps(_CONFIG)),
        "--output_dir=%s" % out, "--do_eval", "--max_seq_length=32"] + argv)
    with pytest.raises(ValueError, match=message) as error:
        rc.run(fv)
    assert "\n" not in str(error.value)
    assert not out.exists()


def test_defaults_scale_with_max_seq_length():
    fv = flags_common.parse_flags(rc.define_flags, ["--long_text=head_tail"])
    assert long_text.from_settings(rc.Settings.of(fv), 512) == long_text.LongText("head_tail", 128, 255, "mean")
    assert long_text.from_settings(rc.Settings.of(fv), 128).head_tokens == 32
    fv = flags_common.parse_flags(rc.define_flags, [])
    assert long_text.from_settings(rc.Settings.of(fv), 128).mode == "truncate"


def test_saved_settings_are_defaults_and_their_errors_name_the_file(tmp_path):
    trained = tmp_path / "trained"
    trained.mkdir()
    long_text.write_settings(trained, long_text.LongText("windows", 3, 5, "max"))
    fv = flags_common.parse_flags(rc.define_flags, ["--doc_stride=7",
                                                    "--init_checkpoint=%s" % trained])
    assert long_text.from_settings(rc.Settings.of(fv), 32) == long_text.LongText("windows", 3, 7, "max")
    fv = flags_common.parse_flags(rc.define_flags, ["--init_checkpoint=%s" % trained])
    with pytest.raises(ValueError, match=r"^\S*trained/long_text\.json: doc_stride=5 must be "
                                         r"between 1 and max_seq_length - 2 = 3 .*; pass "
                                         r"--doc_stride, or the --max_seq_length"):
        long_text.from_settings(rc.Settings.of(fv), 5)
    # A truncate run rewrites a file already there (never stale), adds none elsewhere.
    long_text.write_settings(trained, long_text.LongText("truncate", 3, 5, "max"))
    assert json.load(open(trained / "long_text.json"))["mode"] == "truncate"
    assert long_text.write_settings(tmp_path, long_text.LongText("truncate", 3, 5, "max")) is None
    assert not (tmp_path / "long_text.json").exists()


def test_settings_file_never_describes_an_earlier_mode(tmp_path):
    """A truncate run writes no long_text.json (the reference's outputs), but rewrites
    one an earlier run of another mode left in its output_dir."""
    truncate = long_text.LongText("truncate", 32, 63, "mean")
    assert long_text.write_settings(tmp_path / "new", truncate) is None
    assert not (tmp_path / "new").exists()
    path = long_text.write_settings(tmp_path, long_text.LongText("windows", 32, 63, "max"))
    assert long_text.read_settings(path)["mode"] == "windows"
    assert long_text.write_settings(tmp_path, truncate) == path
    assert long_text.read_settings(path) == truncate.to_dict()
    fv = flags_common.parse_flags(rc.define_flags, ["--output_dir=%s" % tmp_path])
    assert long_text.from_settings(rc.Settings.of(fv), 128) == truncate


# ---------------------------------------------------------------------------
# Runs: learning past the first window, one row per example, export
# ---------------------------------------------------------------------------

def _documents(rng, n):
    """(text, label): 60 filler words, the label's marker word 6 times in the last 18.

    Labels alternate: chance is 0.5.
    """
    rows = []
    for index in range(n):
        label = index % 2
        words = [rng.choice(_FILLER) for _ in range(_WORDS)]
        for position in rng.sample(range(_WORDS - 18, _WORDS), 6):
            words[position] = _MARKERS[label]
        rows.append((" ".join(words), str(label)))
    return rows


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("long_docs")
    rng = random.Random(7)
    for name, n in (("train.tsv", 128), ("dev.tsv", 64)):
        write_text(root / name, "sentence\tlabel\n" + "".join(
            "%s\t%s\n" % row for row in _documents(rng, n)))
    write_text(root / "test.tsv", "index\tsentence\n" + "".join(
        "%d\t%s\n" % (i, text) for i, (text, _) in enumerate(_documents(rng, 21))))
    return root


def _run(root, data, vocab, mode, extra=()):
    out = root / mode
    argv = ["--task_name=sst-2", "--data_dir=%s" % data, "--vocab_file=%s" % vocab,
            "--bert_config_file=%s" % write_text(root / "config.json", json.dumps(_CONFIG)),
            "--output_dir=%s" % out, "--max_seq_length=%d" % _SEQ, "--long_text=%s" % mode,
            "--head_tokens=8", "--doc_stride=15", "--seed=1"] + list(extra)
    rc.run(flags_common.parse_flags(rc.define_flags, argv))
    return out


def _eval_results(out):
    with open(str(out / "eval_results.txt")) as f:
        return dict(line.split(" = ") for line in f.read().splitlines())


def _test_rows(out):
    with open(str(out / "test_results.tsv")) as f:
        return np.array([[float(x) for x in line.split("\t")] for line in f])


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data_dir, vocab):
    root = tmp_path_factory.mktemp("runs")
    train = ["--do_train", "--do_eval", "--do_predict", "--train_batch_size=16",
             # 5 epochs (was 10), measured: head_tail and windows 1.0 on dev, truncate 0.5
             "--num_train_epochs=5", "--learning_rate=1e-3", "--eval_batch_size=24",
             "--predict_batch_size=8"]
    # truncate's run only shows what it learnt (nothing past the first window): no predict.
    return {mode: _run(root, data_dir, vocab, mode,
                       [f for f in train if mode != "truncate" or f != "--do_predict"])
            for mode in ("truncate", "head_tail", "windows")}


@pytest.mark.slow
def test_only_head_tail_and_windows_learn_a_word_past_the_first_window(runs):
    accuracy = {mode: float(_eval_results(out)["eval_accuracy"]) for mode, out in runs.items()}
    print("accuracy on the dev documents:", accuracy)
    assert accuracy["truncate"] <= 0.7
    assert accuracy["head_tail"] >= 0.9 and accuracy["windows"] >= 0.9


@pytest.mark.slow
def test_windows_outputs_one_row_per_example_whatever_the_batching(runs, tmp_path, data_dir,
                                                                   vocab):
    """One row per document whatever the batching; later runs without --long_text read
    the text as the windows run trained: in its --output_dir (long_text.json there) and
    from a new one (beside --init_checkpoint), as the export does."""
    out = runs["windows"]
    assert _eval_results(out)["global_step"] == str(int(128 * 3 * 5 / 16))  # 3 windows a doc
    assert (out / long_text.SETTINGS_FILE).exists()
    assert not (runs["truncate"] / long_text.SETTINGS_FILE).exists()
    rows = _test_rows(out)
    assert rows.shape == (21, 2)
    # test_predictions.jsonl: one line per document (its windows pooled), SST-2's guids.
    ids = [e.guid for e in glue_data.Sst2Processor().get_test_examples(str(data_dir))]
    check_test_predictions(out, ids, ["0", "1"])
    trained = tmp_path / "trained"
    shutil.copytree(str(out), str(trained))
    for name in ("test_results.tsv", "eval_results.txt"):
        os.remove(str(trained / name))
    argv = ["--task_name=sst-2", "--data_dir=%s" % data_dir, "--vocab_file=%s" % vocab,
            "--bert_config_file=%s" % (out.parent / "config.json"),
            "--max_seq_length=%d" % _SEQ, "--do_eval", "--do_predict"]
    for again, extra in ((trained, ["--trim_padding", "--eval_batch_size=7",
                                    "--predict_batch_size=5"]),
                         (tmp_path / "new", ["--init_checkpoint=%s" % trained,
                                             "--notrim_padding", "--eval_batch_size=5"])):
        rc.run(flags_common.parse_flags(rc.define_flags, argv + [
            "--output_dir=%s" % again] + extra))
        # Prediction in another run than the training one's: float32's bound.
        np.testing.assert_allclose(_test_rows(again), rows, atol=FP32_ATOL, rtol=0)
        assert (float(_eval_results(again)["eval_accuracy"])
                == float(_eval_results(out)["eval_accuracy"]))
        assert (float(_eval_results(again)["eval_loss"])
                == pytest.approx(float(_eval_results(out)["eval_loss"]), abs=1e-5))
    assert not (tmp_path / "new" / long_text.SETTINGS_FILE).exists()  # it did not train


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["windows", "head_tail"])
def test_served_probabilities_equal_test_results(trained_heads, mode):
    # The run's shared long-text folder of this mode (tests/trained.py: a jsonl task trained
    # with do_predict on the parity inputs, two- and three-window texts among them) and its
    # export, made once per run: export_saved_model of the folder alone (the long_text.json
    # beside the checkpoint gives --long_text and its flags).
    head = trained_heads.exported("long_" + mode)
    with open(os.path.join(head.export_dir, "assets.extra", "export_info.json")) as f:
        info = json.load(f)
    assert info["long_text"]["mode"] == mode
    texts = [item for _, item in head.reference_items()]
    rows = _test_rows(pathlib.Path(head.folder))
    assert rows.shape == (len(texts), 3)  # labels neg, neutral, pos
    model = head.saved_model()
    served = model.signatures["serving_text_a"](text_a=tf.constant(texts))
    np.testing.assert_allclose(served["probabilities"].numpy(), rows, atol=2e-5, rtol=0)
    # text_b, when given, keeps its place in every window (served rows stay one per input).
    long_ones = [texts.index(t) for t in head.kinds["three_windows"] + head.kinds["two_windows"]]
    pair = model.signatures["serving_default"](
        text_a=tf.constant([texts[i] for i in long_ones[:3]]),
        text_b=tf.constant([head.kinds["short"][0], "", head.kinds["short"][2]]))
    assert pair["probabilities"].shape == (3, 3)
    np.testing.assert_allclose(pair["probabilities"].numpy()[1], rows[long_ones[1]], atol=2e-5)
