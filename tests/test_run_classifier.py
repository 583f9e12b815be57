"""Tests of run_classifier: processors, feature conversion, record files, metrics, runs."""
import json
import os

import numpy as np
import pytest
import tensorflow as tf

import run_classifier as rc
import tokenization
from bert_tf2 import flags_common
from bert_tf2 import input_pipeline
from conftest import check_test_predictions
from conftest import write_text

# A vocabulary small enough to check ids by hand.
_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "sat", "on", "mat", "a",
          "dog", "ran", "##s", "fast", ".", "is", "it"]

_TINY_CONFIG = {
    "vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
    "intermediate_size": 64, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 64,
    "type_vocab_size": 2, "initializer_range": 0.02,
}


def _tsv(path, rows):
    return write_text(path, "".join("\t".join(r) + "\n" for r in rows))


@pytest.fixture
def small_tokenizer(tmp_path):
    vocab = write_text(tmp_path / "vocab.txt", "".join(t + "\n" for t in _VOCAB))
    return tokenization.FullTokenizer(vocab, do_lower_case=True)


def _fields(examples):
    return [(e.guid, e.text_a, e.text_b, e.label) for e in examples]


# ---------------------------------------------------------------------------
# Processors on hand-written files
# ---------------------------------------------------------------------------

def test_mrpc_processor(tmp_path):
    header = ["\ufeffQuality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
    _tsv(tmp_path / "train.tsv", [header, ["1", "11", "12", "A \"quoted\" one .", "B one ."],
                                  ["0", "21", "22", "A two", "B two"]])
    _tsv(tmp_path / "dev.tsv", [header, ["0", "31", "32", "dev a", "dev b"]])
    _tsv(tmp_path / "test.tsv", [["index"] + header[1:], ["0", "41", "42", "t a", "t b"]])
    p = rc.get_processor("MRPC")
    assert p.get_labels() == ["0", "1"]
    assert _fields(p.get_train_examples(str(tmp_path))) == [
        ("train-1", 'A "quoted" one .', "B one .", "1"), ("train-2", "A two", "B two", "0")]
    assert _fields(p.get_dev_examples(str(tmp_path))) == [("dev-1", "dev a", "dev b", "0")]
    assert _fields(p.get_test_examples(str(tmp_path))) == [("test-1", "t a", "t b", "0")]


def test_cola_processor_header_only_in_test(tmp_path):
    _tsv(tmp_path / "train.tsv", [["gj04", "1", "", "First ."], ["gj04", "0", "*", "Second ."]])
    _tsv(tmp_path / "dev.tsv", [["gj04", "1", "", "Dev ."]])
    _tsv(tmp_path / "test.tsv", [["index", "sentence"], ["0", "Test ."]])
    p = rc.get_processor("cola")
    assert _fields(p.get_train_examples(str(tmp_path))) == [
        ("train-0", "First .", None, "1"), ("train-1", "Second .", None, "0")]
    assert _fields(p.get_dev_examples(str(tmp_path))) == [("dev-0", "Dev .", None, "1")]
    assert _fields(p.get_test_examples(str(tmp_path))) == [("test-1", "Test .", None, "0")]


def test_subclasses_of_the_reference_processors_call_create_examples(tmp_path):
    # A protein-classification project's pattern: its own files and labels through
    # ColaProcessor's _read_tsv / _create_examples (set_type "test": the test layout).
    class ProteinProcessor(rc.ColaProcessor):
        def get_labels(self):
            return ["membrane", "soluble"]

        def get_train_examples(self, data_dir):
            return self._create_examples(
                self._read_tsv(os.path.join(data_dir, "proteins.tsv")), "train")

    path = _tsv(tmp_path / "proteins.tsv", [["p1", "soluble", "", "M K T A"],
                                            ["p2", "membrane", "", "L L V I"]])
    p = ProteinProcessor()
    assert _fields(p.get_train_examples(str(tmp_path))) == [
        ("train-0", "M K T A", None, "soluble"), ("train-1", "L L V I", None, "membrane")]
    assert _fields(p._create_examples([["id", "sentence"], ["0", "G A"]], "test")) == [
        ("test-1", "G A", None, "membrane")]
    with pytest.raises(ValueError, match="proteins.tsv, line 1: label 'x'"):
        p._create_examples([rc.TsvRow(["p", "x", "", "A"], path, 1)], "train")
    # A subclass overriding _create_examples is what the inherited getters call.
    class Upper(rc.MrpcProcessor):
        def _create_examples(self, lines, set_type):
            examples = super()._create_examples(lines, set_type)
            for example in examples:
                example.text_a = example.text_a.upper()
            return examples
    _tsv(tmp_path / "dev.tsv", [["Quality", "a", "b", "s1", "s2"], ["1", "3", "4", "yes", "no"]])
    assert _fields(Upper().get_dev_examples(str(tmp_path))) == [("dev-1", "YES", "no", "1")]
    assert _fields(rc.MnliProcessor()._create_examples(
        [["h"] * 12, ["9"] + ["x"] * 7 + ["P", "H", "y", "neutral"]], "dev_matched")) == [
        ("dev_matched-9", "P", "H", "neutral")]


def test_mnli_processor(tmp_path):
    header = ["index", "promptID", "pairID", "genre", "s1bp", "s2bp", "s1p", "s2p",
              "sentence1", "sentence2", "label1", "gold_label"]
    row = ["7", "p", "q", "fiction", "x", "y", "z", "w", "Prem .", "Hyp .", "neutral", "entailment"]
    for name in ("train.tsv", "dev_matched.tsv"):
        _tsv(tmp_path / name, [header, row])
    _tsv(tmp_path / "test_matched.tsv", [header[:10], row[:10]])
    p = rc.get_processor("mnli")
    assert _fields(p.get_train_examples(str(tmp_path))) == [
        ("train-7", "Prem .", "Hyp .", "entailment")]
    assert _fields(p.get_dev_examples(str(tmp_path))) == [
        ("dev_matched-7", "Prem .", "Hyp .", "entailment")]
    assert _fields(p.get_test_examples(str(tmp_path))) == [
        ("test-7", "Prem .", "Hyp .", "contradiction")]


def test_xnli_processor_language_and_label_spelling(tmp_path):
    _tsv(tmp_path / "multinli" / "multinli.train.de.tsv",
         [["premise", "hypo", "label"], ["P1", "H1", "contradictory"], ["P2", "H2", "neutral"]])
    dev_header = ["language", "gold_label", "a", "b", "c", "d", "sentence1", "sentence2"]
    _tsv(tmp_path / "xnli.dev.tsv", [
        dev_header, ["de", "entailment", "", "", "", "", "S1", "S2"],
        ["zh", "neutral", "", "", "", "", "Z1", "Z2"],
        ["de", "neutral", "", "", "", "", "S3", "S4"]])
    p = rc.get_processor("XNLI", xnli_language="de")
    assert _fields(p.get_train_examples(str(tmp_path))) == [
        ("train-1", "P1", "H1", "contradiction"), ("train-2", "P2", "H2", "neutral")]
    assert _fields(p.get_dev_examples(str(tmp_path))) == [
        ("dev-1", "S1", "S2", "entailment"), ("dev-3", "S3", "S4", "neutral")]
    assert rc.get_processor("xnli").language == "zh"


@pytest.mark.parametrize("task,train_rows,test_rows,expected_train,expected_test", [
    ("sst-2", [["sentence", "label"], ["good film ", "1"]], [["index", "sentence"], ["0", "bad"]],
     ("train-1", "good film ", None, "1"), ("test-1", "bad", None, "0")),
    ("qqp", [["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
             ["5", "1", "2", "Q one?", "Q two?", "1"]],
     [["id", "question1", "question2"], ["0", "T one?", "T two?"]],
     ("train-1", "Q one?", "Q two?", "1"), ("test-1", "T one?", "T two?", "0")),
    ("qnli", [["index", "question", "sentence", "label"], ["0", "Why?", "Because.", "entailment"]],
     [["index", "question", "sentence"], ["0", "Who?", "Me."]],
     ("train-1", "Why?", "Because.", "entailment"), ("test-1", "Who?", "Me.", "entailment")),
    ("rte", [["index", "sentence1", "sentence2", "label"], ["0", "A.", "B.", "not_entailment"]],
     [["index", "sentence1", "sentence2"], ["0", "C.", "D."]],
     ("train-1", "A.", "B.", "not_entailment"), ("test-1", "C.", "D.", "entailment")),
    ("wnli", [["index", "sentence1", "sentence2", "label"], ["0", "A.", "B.", "0"]],
     [["index", "sentence1", "sentence2"], ["0", "C.", "D."]],
     ("train-1", "A.", "B.", "0"), ("test-1", "C.", "D.", "0")),
    ("sts-b", [["index", "genre", "filename", "year", "old_index", "source1", "source2",
                "sentence1", "sentence2", "score"],
               ["0", "g", "f", "2012", "0001", "none", "none", "A plane.", "A jet.", "3.800"]],
     [["index", "genre", "filename", "year", "old_index", "source1", "source2",
       "sentence1", "sentence2"], ["0", "g", "f", "2012", "0002", "none", "none", "X.", "Y."]],
     ("train-1", "A plane.", "A jet.", "3.800"), ("test-1", "X.", "Y.", "0")),
])
def test_glue_processors(tmp_path, task, train_rows, test_rows, expected_train, expected_test):
    _tsv(tmp_path / "train.tsv", train_rows)
    _tsv(tmp_path / "dev.tsv", train_rows)
    _tsv(tmp_path / "test.tsv", test_rows)
    p = rc.get_processor(task)
    assert _fields(p.get_train_examples(str(tmp_path))) == [expected_train]
    dev = expected_train[:1]
    assert _fields(p.get_dev_examples(str(tmp_path))) == [
        ("dev" + dev[0][len("train"):],) + expected_train[1:]]
    assert _fields(p.get_test_examples(str(tmp_path))) == [expected_test]


def test_task_names_are_case_insensitive_and_unknown_lists_known():
    assert isinstance(rc.get_processor("CoLA"), rc.ColaProcessor)
    assert isinstance(rc.get_processor("STS-B"), rc.StsbProcessor)
    assert rc.get_processor("sts-b").is_regression
    assert rc.get_processor("sts-b").get_labels() == [None]
    with pytest.raises(ValueError) as err:
        rc.get_processor("squad")
    message = str(err.value)
    assert "squad" in message
    for known in ("cola", "mnli", "mrpc", "xnli", "sst-2", "qqp", "qnli", "rte", "wnli", "sts-b"):
        assert known in message


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------

def test_short_row_names_file_and_line(tmp_path):
    header = ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
    path = _tsv(tmp_path / "train.tsv", [header, ["1", "1", "2", "a", "b"], ["0", "3", "4", "c"]])
    with pytest.raises(ValueError) as err:
        rc.get_processor("mrpc").get_train_examples(str(tmp_path))
    assert path in str(err.value)
    assert "line 3" in str(err.value)
    assert "5" in str(err.value) and "found 4" in str(err.value)


def test_missing_data_file(tmp_path):
    with pytest.raises(ValueError, match="train.tsv not found"):
        rc.get_processor("rte").get_train_examples(str(tmp_path))


def test_unknown_label_names_file_line_and_label(tmp_path):
    path = _tsv(tmp_path / "dev.tsv", [["gj04", "1", "", "ok ."], ["gj04", "maybe", "", "bad ."]])
    with pytest.raises(ValueError) as err:
        rc.get_processor("cola").get_dev_examples(str(tmp_path))
    assert path in str(err.value) and "line 2" in str(err.value) and "'maybe'" in str(err.value)


def test_regression_label_must_be_a_number(tmp_path):
    header = ["index", "genre", "filename", "year", "old_index", "source1", "source2",
              "sentence1", "sentence2", "score"]
    path = _tsv(tmp_path / "train.tsv",
                [header, ["0", "g", "f", "y", "o", "s", "s", "A.", "B.", "high"]])
    with pytest.raises(ValueError) as err:
        rc.get_processor("sts-b").get_train_examples(str(tmp_path))
    assert path in str(err.value) and "line 2" in str(err.value) and "'high'" in str(err.value)


def test_xnli_has_no_test_set(tmp_path):
    with pytest.raises(ValueError):
        rc.get_processor("xnli").get_test_examples(str(tmp_path))


# ---------------------------------------------------------------------------
# Features
# ---------------------------------------------------------------------------

def test_single_sentence_features(small_tokenizer):
    example = rc.InputExample("g-1", "The cat sat.", None, "1")
    f = rc.convert_single_example(0, example, ["0", "1"], 10, small_tokenizer)
    # [CLS] the cat sat . [SEP] + 4 padding
    assert f.input_ids == [2, 4, 5, 6, 14, 3, 0, 0, 0, 0]
    assert f.input_mask == [1] * 6 + [0] * 4
    assert f.segment_ids == [0] * 10
    assert f.label_id == 1 and f.is_real_example is True


def test_pair_features_and_truncation_from_longer(small_tokenizer):
    example = rc.InputExample("g-2", "the cat sat on the mat", "a dog", "0")
    f = rc.convert_single_example(0, example, ["0", "1"], 9, small_tokenizer)
    # 9 - 3 = 6 WordPieces: "the cat sat on the mat" (6) + "a dog" (2) -> 4 + 2
    assert f.input_ids == [2, 4, 5, 6, 7, 3, 9, 10, 3]
    assert f.input_mask == [1] * 9
    assert f.segment_ids == [0] * 6 + [1] * 3
    assert f.label_id == 0


def test_wordpieces_unknown_and_single_truncation(small_tokenizer):
    example = rc.InputExample("g-3", "Cats runs zebra it is", None, "0")
    f = rc.convert_single_example(0, example, ["0", "1"], 6, small_tokenizer)
    # cats -> cat ##s ; runs -> [UNK] ("run" is not in the vocab); cut to 4 tokens
    assert f.input_ids == [2, 5, 12, 1, 1, 3]


def test_truncate_seq_pair_ties_pop_b():
    a, b = ["a1", "a2", "a3"], ["b1", "b2", "b3"]
    rc._truncate_seq_pair(a, b, 4)
    assert a == ["a1", "a2"] and b == ["b1", "b2"]
    a, b = ["a1", "a2", "a3", "a4", "a5"], ["b1"]
    rc._truncate_seq_pair(a, b, 3)
    assert a == ["a1", "a2"] and b == ["b1"]


def test_empty_text_b_is_a_single_sentence(small_tokenizer):
    f = rc.convert_single_example(0, rc.InputExample("g", "it is", "", "1"), ["0", "1"], 6,
                                  small_tokenizer)
    assert f.input_ids == [2, 16, 15, 3, 0, 0] and f.segment_ids == [0] * 6


def test_padding_example(small_tokenizer):
    f = rc.convert_single_example(3, rc.PaddingInputExample(), ["0", "1"], 5, small_tokenizer)
    assert (f.input_ids, f.input_mask, f.segment_ids, f.label_id) == ([0] * 5,) * 3 + (0,)
    assert f.is_real_example is False


def test_regression_features_keep_float_label(small_tokenizer):
    f = rc.convert_single_example(0, rc.InputExample("g", "a dog", "a cat", "3.800"), [None], 8,
                                  small_tokenizer)
    assert f.label_id == pytest.approx(3.8)


def test_batch_and_single_conversion_agree(small_tokenizer):
    examples = [rc.InputExample("g-%d" % i, "the cat sat on the mat " * (i % 3),
                                "a dog ran" if i % 2 else None, str(i % 2)) for i in range(7)]
    single = [rc.convert_single_example(i, e, ["0", "1"], 12, small_tokenizer)
              for i, e in enumerate(examples)]
    batched = rc.convert_examples_to_features(examples, ["0", "1"], 12, small_tokenizer)
    assert [(f.input_ids, f.segment_ids, f.input_mask, f.label_id) for f in single] == [
        (f.input_ids, f.segment_ids, f.input_mask, f.label_id) for f in batched]


def _read_records(path):
    return [tf.train.Example.FromString(r.numpy()).features.feature
            for r in tf.data.TFRecordDataset(path)]


def test_record_file_and_padded_reading(tmp_path, small_tokenizer):
    examples = [rc.InputExample("g-%d" % i, "the cat", "a dog" if i else None, str(i % 2))
                for i in range(5)]
    path = str(tmp_path / "eval.tf_record")
    n = rc.file_based_convert_examples_to_features(examples, ["0", "1"], 8, small_tokenizer,
                                                   path)
    assert n == 5
    records = _read_records(path)
    assert list(records[1]["input_ids"].int64_list.value) == [2, 4, 5, 3, 9, 10, 3, 0]
    assert list(records[1]["segment_ids"].int64_list.value) == [0, 0, 0, 0, 1, 1, 1, 0]
    assert [r["label_ids"].int64_list.value[0] for r in records] == [0, 1, 0, 1, 0]
    assert all(r["is_real_example"].int64_list.value[0] == 1 for r in records)
    batches = list(input_pipeline.make_dataset(path, rc.record_spec(8), 2, is_training=False,
                                               pad_final_batch=True))
    assert len(batches) == 3
    assert batches[-1]["is_real_example"].numpy().tolist() == [1, 0]
    # only the final file is left, no temporaries
    assert sorted(os.listdir(str(tmp_path))) == ["eval.tf_record", "vocab.txt"]


def test_regression_record_has_float_label(tmp_path, small_tokenizer):
    path = str(tmp_path / "train.tf_record")
    rc.file_based_convert_examples_to_features(
        [rc.InputExample("g", "a dog", "a cat", "2.25")], [None], 8, small_tokenizer, path)
    record = _read_records(path)[0]
    assert list(record["label_ids"].float_list.value) == [2.25]
    batch = next(iter(input_pipeline.make_dataset(path, rc.record_spec(8, regression=True), 1,
                                                  is_training=False, pad_final_batch=True)))
    assert batch["label_ids"].dtype == tf.float32


def test_input_fn_builders(tmp_path, small_tokenizer):
    examples = [rc.InputExample("g-%d" % i, "the cat", None, str(i % 2)) for i in range(5)]
    features = rc.convert_examples_to_features(examples, ["0", "1"], 6, small_tokenizer)
    batches = list(rc.input_fn_builder(features, 6, False, False)({"batch_size": 2}))
    assert [b["label_ids"].numpy().tolist() for b in batches] == [[0, 1], [0, 1], [0]]
    path = str(tmp_path / "x.tf_record")
    rc.file_based_convert_examples_to_features(examples, ["0", "1"], 6, small_tokenizer, path)
    batches = list(rc.file_based_input_fn_builder(path, 6, False, False)({"batch_size": 2}))
    assert [b["is_real_example"].numpy().tolist() for b in batches] == [[1, 1], [1, 1], [1, 0]]
    assert batches[0]["input_ids"].numpy().tolist()[0] == features[0].input_ids
    train = rc.file_based_input_fn_builder(path, 6, True, True)({"batch_size": 4})
    assert next(iter(train))["input_ids"].shape == (4, 6)


# ---------------------------------------------------------------------------
# Real GLUE files (first rows of each file)
# ---------------------------------------------------------------------------

_GLUE = {"CoLA": "cola", "MRPC": "mrpc", "SST-2": "sst-2", "RTE": "rte", "STS-B": "sts-b",
         "WNLI": "wnli", "QNLI": "qnli"}


def _copy_head(src_dir, dst_dir, rows=40):
    os.makedirs(dst_dir, exist_ok=True)
    for name in ("train.tsv", "dev.tsv", "test.tsv"):
        src = os.path.join(src_dir, name)
        if os.path.exists(src):
            with open(src, encoding="utf-8", newline="") as f:
                lines = [next(f, "") for _ in range(rows)]
            with open(os.path.join(dst_dir, name), "w", encoding="utf-8", newline="") as f:
                f.write("".join(lines))


def _raw_rows(path):
    with open(path, encoding="utf-8", newline="") as f:
        return [line.rstrip("\r\n").split("\t") for line in f]


@pytest.mark.parametrize("folder", sorted(_GLUE))
def test_real_glue_files_parse(shared_dir, tmp_path, folder):
    src = shared_dir / "data" / "glue_data" / folder
    _copy_head(str(src), str(tmp_path))
    p = rc.get_processor(_GLUE[folder])
    for split in ("train", "dev", "test"):
        path = tmp_path / ("%s.tsv" % split)
        if not path.exists():
            continue
        examples = getattr(p, "get_%s_examples" % split)(str(tmp_path))
        raw = _raw_rows(str(path))
        has_header = not (folder == "CoLA" and split != "test")
        body = raw[1:] if has_header else raw
        assert len(examples) == len(body)
        for example, row in zip(examples, body):
            assert example.text_a in row
            if example.text_b is not None:
                assert example.text_b in row
                assert row.index(example.text_b) > row.index(example.text_a)
            if split == "test":
                assert example.label == ("0" if p.is_regression else p.get_labels()[0])
            elif p.is_regression:
                assert example.label == row[-1]
            else:
                assert example.label in row and example.label in p.get_labels()
    # Spot checks against the files' first data rows.
    first = getattr(p, "get_dev_examples")(str(tmp_path))[0]
    row = _raw_rows(str(tmp_path / "dev.tsv"))[0 if folder == "CoLA" else 1]
    column = {"CoLA": 3, "MRPC": 3, "SST-2": 0, "STS-B": 7}.get(folder, 1)
    expected_text = row[column]
    assert first.text_a == expected_text


# ---------------------------------------------------------------------------
# Metrics and flags
# ---------------------------------------------------------------------------

def test_eval_metrics_match_sklearn_and_reference_loss_semantics():
    from sklearn.metrics import f1_score, matthews_corrcoef
    rng = np.random.RandomState(0)
    labels = rng.randint(0, 2, size=21)
    probs = rng.dirichlet([1, 1], size=21).astype(np.float32)
    losses = -np.log(probs[np.arange(21), labels])
    real = np.array([1] * 19 + [0, 0])
    batch_ids = np.arange(21) // 8
    result = rc.eval_metrics(rc.MrpcProcessor(), losses, labels, probs, real, batch_ids)
    preds = probs.argmax(-1)
    assert result["eval_accuracy"] == pytest.approx(np.mean(preds[:19] == labels[:19]))
    assert result["eval_f1"] == pytest.approx(f1_score(labels[:19], preds[:19]))
    assert result["eval_loss"] == pytest.approx(losses[:19].mean(), rel=1e-6)
    batch_means = [losses[:8].mean(), losses[8:16].mean(), losses[16:19].mean()]
    assert result["loss"] == pytest.approx(np.mean(batch_means), rel=1e-6)
    cola = rc.eval_metrics(rc.ColaProcessor(), losses, labels, probs, real, batch_ids)
    assert cola["eval_mcc"] == pytest.approx(matthews_corrcoef(labels[:19], preds[:19]), abs=1e-6)
    # Every task of 2 labels: precision / recall / F1 of label 1 (MRPC's F1 as before).
    assert cola["eval_f1"] == pytest.approx(f1_score(labels[:19], preds[:19]))
    assert set(cola) == {"eval_accuracy", "eval_loss", "loss", "eval_mcc", "eval_precision",
                         "eval_recall", "eval_f1"}


def test_regression_metrics():
    from scipy.stats import pearsonr, spearmanr
    labels = np.array([0.5, 1.0, 3.0, 4.5, 2.0], np.float32)
    preds = np.array([1.0, 0.8, 2.5, 4.0, 9.0], np.float32)
    losses = (labels - preds) ** 2
    result = rc.eval_metrics(rc.StsbProcessor(), losses, labels, preds, [1, 1, 1, 1, 0],
                             [0, 0, 1, 1, 1])
    assert "eval_accuracy" not in result
    assert result["eval_pearson"] == pytest.approx(pearsonr(preds[:4], labels[:4])[0], abs=1e-6)
    assert result["eval_spearman"] == pytest.approx(spearmanr(preds[:4], labels[:4])[0], abs=1e-6)
    assert result["eval_loss"] == pytest.approx(losses[:4].mean())


def _base_flags(tmp_path, data_dir, vocab_file, task="MRPC", config=None, extra=(),
                output_dir=None):
    config_path = write_text(tmp_path / "bert_config.json", json.dumps(config or _TINY_CONFIG))
    return ["--task_name=%s" % task, "--data_dir=%s" % data_dir,
            "--vocab_file=%s" % vocab_file, "--bert_config_file=%s" % config_path,
            "--output_dir=%s" % (output_dir or tmp_path / "out")] + list(extra)


@pytest.fixture
def vocab_file(shared_dir):
    return str(shared_dir / "data" / "vocab" / "uncased_vocab.txt")


def _fv(argv):
    return flags_common.parse_flags(rc.define_flags, argv)


def test_reference_readme_command_line_parses():
    fv = _fv(["--task_name=MRPC", "--do_train=true", "--do_eval=true",
              "--data_dir=/glue/MRPC", "--vocab_file=/b/vocab.txt",
              "--bert_config_file=/b/bert_config.json", "--init_checkpoint=/b/bert_model.ckpt",
              "--max_seq_length=128", "--train_batch_size=32", "--learning_rate=2e-5",
              "--num_train_epochs=3.0", "--output_dir=/tmp/mrpc_output/"])
    assert fv.do_train and fv.do_eval and not fv.do_predict
    assert fv.learning_rate == 2e-5 and fv.eval_batch_size == 8 and fv.predict_batch_size == 8
    assert fv.warmup_proportion == 0.1 and fv.save_checkpoints_steps == 1000
    assert fv.xnli_language == "zh" and fv.do_lower_case is True


@pytest.mark.parametrize("missing", ["data_dir", "task_name", "vocab_file", "bert_config_file",
                                     "output_dir"])
def test_required_flags(tmp_path, missing):
    argv = ["--data_dir=d", "--task_name=mrpc", "--vocab_file=v", "--bert_config_file=c",
            "--output_dir=%s" % tmp_path, "--do_train"]
    argv = [a for a in argv if not a.startswith("--%s=" % missing)]
    with pytest.raises(ValueError, match="--%s is required" % missing):
        rc.run(_fv(argv))


def test_needs_an_action_and_a_short_enough_sequence(tmp_path, vocab_file):
    with pytest.raises(ValueError, match="do_train"):
        rc.run(_fv(_base_flags(tmp_path, str(tmp_path), vocab_file)))
    with pytest.raises(ValueError, match="max_seq_length=65"):
        rc.run(_fv(_base_flags(tmp_path, str(tmp_path), vocab_file,
                               extra=["--do_eval", "--max_seq_length=65"])))
    with pytest.raises(ValueError, match="unknown --task_name"):
        rc.run(_fv(_base_flags(tmp_path, str(tmp_path), vocab_file, task="nope",
                               extra=["--do_eval", "--max_seq_length=32"])))


def test_case_check_against_checkpoint_name(tmp_path, vocab_file):
    with pytest.raises(ValueError, match="do_lower_case"):
        rc.run(_fv(_base_flags(tmp_path, str(tmp_path), vocab_file, extra=[
            "--do_eval", "--do_lower_case=false",
            "--init_checkpoint=/m/uncased_L-12_H-768_A-12/bert_model.ckpt"])))


# ---------------------------------------------------------------------------
# End-to-end runs (tiny model, few steps)
# ---------------------------------------------------------------------------

def _read_eval_results(path):
    with open(path) as f:
        lines = f.read().splitlines()
    assert lines == sorted(lines)
    return dict(line.split(" = ", 1) for line in lines)


def _read_tsv_floats(path):
    with open(path) as f:
        return [[float(x) for x in line.rstrip("\n").split("\t")] for line in f]


@pytest.fixture(scope="module")
def mrpc_run(tmp_path_factory, shared_dir):
    """A tiny MRPC fine-tuning run (40 rows per file): train, eval and predict."""
    root = tmp_path_factory.mktemp("mrpc_run")
    data_dir = root / "data"
    _copy_head(str(shared_dir / "data" / "glue_data" / "MRPC"), str(data_dir), rows=41)
    vocab = str(shared_dir / "data" / "vocab" / "uncased_vocab.txt")
    argv = _base_flags(root, str(data_dir), vocab, output_dir=root / "out", extra=[
        "--do_train", "--do_eval", "--do_predict", "--max_seq_length=32",
        "--train_batch_size=8", "--num_train_epochs=1", "--learning_rate=1e-3",
        "--eval_batch_size=16", "--predict_batch_size=16", "--seed=1"])
    result = rc.run(_fv(argv))
    return {"root": root, "data_dir": data_dir, "out": root / "out", "argv": argv,
            "vocab": vocab, "result": result}


@pytest.mark.slow
def test_train_eval_predict_outputs(mrpc_run):
    out = mrpc_run["out"]
    result = _read_eval_results(str(out / "eval_results.txt"))
    assert set(result) == {"eval_accuracy", "eval_f1", "eval_loss", "global_step", "loss",
                           "eval_precision", "eval_recall"}
    assert result["global_step"] == "5"  # int(40 / 8 * 1.0)
    assert 0.0 <= float(result["eval_accuracy"]) <= 1.0
    rows = _read_tsv_floats(str(out / "test_results.tsv"))
    assert len(rows) == 40  # 40 test rows; the last batch (8 of 16) was padded
    for row in rows:
        assert len(row) == 2 and sum(row) == pytest.approx(1.0, abs=1e-5)
    # Beside it, test_predictions.jsonl: the guids, MRPC's labels "0" / "1".
    ids = [e.guid for e in rc.MrpcProcessor().get_test_examples(str(mrpc_run["data_dir"]))]
    assert ids[:2] == ["test-1", "test-2"]  # the reference's: the header is row 0
    check_test_predictions(out, ids, ["0", "1"])
    assert mrpc_run["result"].outputs["test_predictions"] == str(
        out / "test_predictions.jsonl")
    assert mrpc_run["result"].outputs["test_results"] == str(out / "test_results.tsv")
    for name in ("train.tf_record", "eval.tf_record", "predict.tf_record", "checkpoint"):
        assert (out / name).exists()
    assert not [n for n in os.listdir(str(out)) if ".tmp-" in n]


@pytest.mark.slow
def test_eval_of_a_fixed_checkpoint_is_repeatable(mrpc_run, tmp_path):
    ckpt = tf.train.latest_checkpoint(str(mrpc_run["out"]))
    results = []
    for name in ("a", "b"):
        argv = _base_flags(tmp_path, str(mrpc_run["data_dir"]), mrpc_run["vocab"],
                           output_dir=tmp_path / name, extra=[
                               "--do_eval", "--max_seq_length=32", "--eval_batch_size=16",
                               "--init_checkpoint=%s" % ckpt])
        rc.run(_fv(argv))
        results.append(_read_eval_results(str(tmp_path / name / "eval_results.txt")))
    assert results[0] == results[1]
    # Same weights as at the end of training: same metrics, and the checkpoint's step.
    trained = _read_eval_results(str(mrpc_run["out"] / "eval_results.txt"))
    assert results[0]["global_step"] == trained["global_step"] != "0"
    for key in ("eval_accuracy", "eval_f1", "eval_loss", "loss"):
        assert float(results[0][key]) == pytest.approx(float(trained[key]), abs=1e-6)


@pytest.mark.slow
def test_trimmed_and_full_padding_write_the_same_files(mrpc_run, tmp_path):
    # --trim_padding (default) groups eval/predict examples by length and cuts the
    # batches; --notrim_padding runs the reference's fixed-length batches. The trimmed
    # run: mrpc_run's own evaluation and prediction of its last checkpoint.
    assert _fv(mrpc_run["argv"]).trim_padding
    ckpt = tf.train.latest_checkpoint(str(mrpc_run["out"]))
    outputs = {"trim": (_read_eval_results(str(mrpc_run["out"] / "eval_results.txt")),
                        _read_tsv_floats(str(mrpc_run["out"] / "test_results.tsv")))}
    argv = _base_flags(tmp_path, str(mrpc_run["data_dir"]), mrpc_run["vocab"],
                       output_dir=tmp_path / "notrim", extra=[
                           "--do_eval", "--do_predict", "--max_seq_length=32",
                           "--eval_batch_size=16", "--predict_batch_size=16",
                           "--init_checkpoint=%s" % ckpt, "--notrim_padding"])
    fv = _fv(argv)
    assert not fv.trim_padding
    rc.run(fv)
    outputs["notrim"] = (_read_eval_results(str(tmp_path / "notrim" / "eval_results.txt")),
                         _read_tsv_floats(str(tmp_path / "notrim" / "test_results.tsv")))
    (trim_eval, trim_rows), (full_eval, full_rows) = outputs["trim"], outputs["notrim"]
    assert sorted(trim_eval) == sorted(full_eval)
    for key in trim_eval:
        assert float(trim_eval[key]) == pytest.approx(float(full_eval[key]), abs=1e-5), key
    assert len(trim_rows) == len(full_rows) == 40
    np.testing.assert_allclose(np.array(trim_rows), np.array(full_rows), atol=1e-5, rtol=0)


def test_group_by_length_is_off_by_default_in_every_fine_tuning_runner():
    import run_multiple_choice  # pylint: disable=import-outside-toplevel
    import run_ner  # pylint: disable=import-outside-toplevel
    for runner in (rc, run_ner, run_multiple_choice):
        fv = flags_common.parse_flags(runner.define_flags, [])
        assert fv.group_by_length is False
        assert flags_common.parse_flags(runner.define_flags,
                                        ["--group_by_length"]).group_by_length


@pytest.mark.slow
def test_sts_b_regression_run(shared_dir, tmp_path, vocab_file):
    data_dir = tmp_path / "data"
    _copy_head(str(shared_dir / "data" / "glue_data" / "STS-B"), str(data_dir), rows=25)
    rc.run(_fv(_base_flags(tmp_path, str(data_dir), vocab_file, task="STS-B", extra=[
        "--do_train", "--do_eval", "--do_predict", "--max_seq_length=32",
        "--train_batch_size=8", "--num_train_epochs=1", "--eval_batch_size=10",
        "--predict_batch_size=10"])))
    result = _read_eval_results(str(tmp_path / "out" / "eval_results.txt"))
    assert set(result) == {"eval_loss", "eval_pearson", "eval_spearman", "global_step", "loss"}
    assert result["global_step"] == "3"
    rows = _read_tsv_floats(str(tmp_path / "out" / "test_results.tsv"))
    assert len(rows) == 24 and all(len(r) == 1 for r in rows)
    ids = [e.guid for e in rc.StsbProcessor().get_test_examples(str(data_dir))]
    check_test_predictions(tmp_path / "out", ids, kind="regression")


@pytest.mark.slow
def test_tf1_golden_checkpoint_classifier(shared_dir, tmp_path):
    """The golden TF1 checkpoint's 2-label head on its 4 inputs, checked against numpy."""
    golden = shared_dir / "golden" / "tf1_tiny"
    with open(str(golden / "inputs.json"), encoding="utf-8") as f:
        lines = json.load(f)["lines"]
    expected = np.load(str(golden / "expected_outputs.npz"))
    reader = tf.train.load_checkpoint(str(golden / "bert_model.ckpt"))
    weights, bias = reader.get_tensor("output_weights"), reader.get_tensor("output_bias")
    logits = expected["pooled_output"].astype(np.float64) @ weights.T + bias
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)

    # MRPC layout; an empty second text makes a single-sentence example.
    header = ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
    rows = []
    for i, line in enumerate(lines):
        a, _, b = line.partition(" ||| ")
        rows.append([str(i % 2), str(i), str(i), a, b])
    data_dir = tmp_path / "data"
    _tsv(data_dir / "dev.tsv", [header] + rows)
    _tsv(data_dir / "test.tsv", [["index"] + header[1:]] + rows)
    with open(str(golden / "bert_config.json")) as f:
        config = json.load(f)
    rc.run(_fv(_base_flags(tmp_path, str(data_dir), str(golden / "vocab.txt"), config=config,
                           extra=["--do_eval", "--do_predict", "--max_seq_length=24",
                                  "--eval_batch_size=3", "--predict_batch_size=3",
                                  "--init_checkpoint=%s" % (golden / "bert_model.ckpt")])))
    got = np.array(_read_tsv_floats(str(tmp_path / "out" / "test_results.tsv")))
    np.testing.assert_allclose(got, probs, atol=1e-5)

    labels = np.arange(4) % 2
    losses = -np.log(probs[np.arange(4), labels])
    result = _read_eval_results(str(tmp_path / "out" / "eval_results.txt"))
    assert float(result["eval_loss"]) == pytest.approx(losses.mean(), abs=1e-5)
    # Batches of 3: loss is the mean of the two batch means (3 rows, then 1 row).
    assert float(result["loss"]) == pytest.approx(
        (losses[:3].mean() + losses[3]) / 2, abs=1e-5)
    assert float(result["eval_accuracy"]) == pytest.approx(
        np.mean(probs.argmax(-1) == labels))
    assert result["global_step"] == "0"


@pytest.mark.slow
def test_eval_during_training_keeps_the_run_and_its_best_and_group_by_length(mrpc_run,
                                                                              tmp_path):
    """Two flags that do not interact, in one run of mrpc_run's training: evaluation
    during training (its history, best/) and --group_by_length (40 training rows at batch
    8: 5 steps per epoch with or without grouping)."""
    # The default run (mrpc_run) leaves none of the new files.
    for name in ("eval_history.jsonl", "best", "eval"):
        assert not (mrpc_run["out"] / name).exists()
    argv = [a for a in mrpc_run["argv"] if not a.startswith("--output_dir")]
    out = tmp_path / "evaluated"
    rc.run(_fv(argv + ["--output_dir=%s" % out, "--eval_every_n_steps=2",
                       "--best_metric=eval_loss", "--group_by_length", "--nodo_predict"]))
    plain = _read_eval_results(str(mrpc_run["out"] / "eval_results.txt"))
    grouped = _read_eval_results(str(out / "eval_results.txt"))
    assert grouped["global_step"] == plain["global_step"] == "5"
    assert np.isfinite(float(grouped["eval_loss"]))
    with open(str(out / "eval_history.jsonl")) as f:
        history = [json.loads(line) for line in f]
    assert [r["global_step"] for r in history] == [2, 4, 5]  # every 2 steps and the last
    # The final --do_eval evaluates the last checkpoint with the same code.
    final = _read_eval_results(str(out / "eval_results.txt"))
    assert {k: float(v) for k, v in final.items()} == dict(history[-1])
    # best/ is a checkpoint folder --init_checkpoint takes; evaluated there, the best
    # step scores what its history line says.
    best = min(history, key=lambda r: r["eval_loss"])
    rc.run(_fv(_base_flags(tmp_path, str(mrpc_run["data_dir"]), mrpc_run["vocab"],
                           output_dir=tmp_path / "again", extra=[
                               "--do_eval", "--max_seq_length=32", "--eval_batch_size=16",
                               "--init_checkpoint=%s" % (out / "best")])))
    again = _read_eval_results(str(tmp_path / "again" / "eval_results.txt"))
    assert {k: float(v) for k, v in again.items()} == dict(best)
