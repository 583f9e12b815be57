"""--task_name=multilabel: reading and errors, metrics against scikit-learn, a tiny model
that learns a synthetic multi-label task, and the SavedModel serving what run_classifier
writes."""
import json
import os
import random

import numpy as np
import pytest
import tensorflow as tf

import export_saved_model as esm
import run_classifier as rc
from bert_tf2 import flags_common
from bert_tf2.tasks import classifier_tasks
from bert_tf2.tasks import glue_data
from bert_tf2.tasks import multilabel_data as ml
from conftest import check_test_predictions
from conftest import write_text
from conftest import read_eval_results, read_tsv_floats

_TRIGGERS = ["red", "green", "blue", "gold"]
_FILLER = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "fast", "it", "is", "big"]
_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + _TRIGGERS + _FILLER
_CONFIG = {"vocab_size": len(_VOCAB), "hidden_size": 32, "num_hidden_layers": 2,
           "num_attention_heads": 2, "intermediate_size": 64, "hidden_act": "gelu",
           "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
           "max_position_embeddings": 32, "type_vocab_size": 2, "initializer_range": 0.1}
# Label names differ from the words: the labels file order is not the words' order.
_LABEL_OF = {"red": "has_red", "green": "has_green", "blue": "has_blue", "gold": "has_gold"}


def _common(root):
    return ["--vocab_file=%s" % write_text(root / "vocab.txt", "\n".join(_VOCAB) + "\n"),
            "--bert_config_file=%s" % write_text(root / "bert_config.json", json.dumps(_CONFIG))]


def _fv(argv):
    return flags_common.parse_flags(rc.define_flags, argv)


# ---------------------------------------------------------------------------
# Reading the files, and the errors
# ---------------------------------------------------------------------------

def test_reads_label_sets_and_sorts_the_label_list(tmp_path):
    write_text(tmp_path / "train.tsv", "a cat\tzeta, alpha\nno label here\t\nboth\talpha,alpha\n")
    write_text(tmp_path / "dev.tsv", "dev one\talpha\n")
    write_text(tmp_path / "test.tsv", "test one\tignored column\ntest two\n")
    p = ml.MultiLabelProcessor()
    train = p.get_train_examples(str(tmp_path))
    assert [(e.guid, e.text_a, e.text_b, e.label) for e in train] == [
        ("train-0", "a cat", None, ("alpha", "zeta")), ("train-1", "no label here", None, ()),
        ("train-2", "both", None, ("alpha",))]
    assert p.get_labels() == ["alpha", "zeta"]
    assert [e.label for e in p.get_dev_examples(str(tmp_path))] == [("alpha",)]
    assert [(e.text_a, e.label) for e in p.get_test_examples(str(tmp_path))] == [
        ("test one", ()), ("test two", ())]
    assert ml.multi_hot(("zeta",), p.get_labels()) == [0, 1]


@pytest.mark.parametrize("file_name,text,message", [
    ("dev.tsv", "ok\talpha\nbad\talpha,beta\n", r"dev.tsv, line 2: label 'beta' is not in "),
    ("dev.tsv", "ok\talpha\n\talpha\n", r"dev.tsv, line 2: the line has no text"),
    ("dev.tsv", "ok\talpha\n\n", r"dev.tsv, line 2: the line has no text"),
    ("dev.tsv", "no tab\n", r"dev.tsv, line 1: expected 2 tab-separated columns"),
    ("test.tsv", "fine\n  \tx\n", r"test.tsv, line 2: the line has no text"),
])
def test_bad_lines_name_file_and_line(tmp_path, file_name, text, message):
    write_text(tmp_path / "train.tsv", "t\talpha\n")
    write_text(tmp_path / file_name, text)
    p = ml.MultiLabelProcessor()
    p.get_train_examples(str(tmp_path))
    read = p.get_dev_examples if file_name == "dev.tsv" else p.get_test_examples
    with pytest.raises(ValueError, match=message):
        read(str(tmp_path))


def test_empty_label_list_and_labels_file_errors(tmp_path):
    write_text(tmp_path / "train.tsv", "one\t\ntwo\t \n")
    with pytest.raises(ValueError, match=r"train.tsv: no example has a label.*--labels_file"):
        ml.MultiLabelProcessor().get_train_examples(str(tmp_path))
    # With a labels file, rows without labels are fine; labels outside it are not.
    labels = ml.read_labels(write_text(tmp_path / "labels.txt", "b\n\n a \n"))
    assert labels == ["b", "a"]  # the file's order is the output order
    assert len(ml.MultiLabelProcessor(labels).get_train_examples(str(tmp_path))) == 2
    write_text(tmp_path / "train.tsv", "one\ta\ntwo\tc\n")
    with pytest.raises(ValueError, match=r"train.tsv, line 2: label 'c' is not in the label"):
        ml.MultiLabelProcessor(labels).get_train_examples(str(tmp_path))
    with pytest.raises(ValueError, match=r"dup.txt, line 3: label 'a' is listed twice "
                                         r"\(first on line 1\)"):
        ml.read_labels(write_text(tmp_path / "dup.txt", "a\nb\na\n"))
    with pytest.raises(ValueError, match=r"comma.txt, line 1: label 'a,b' contains ','"):
        ml.read_labels(write_text(tmp_path / "comma.txt", "a,b\n"))
    with pytest.raises(ValueError, match=r"blank.txt: no labels"):
        ml.read_labels(write_text(tmp_path / "blank.txt", "\n \n"))
    with pytest.raises(ValueError, match=r"nope.txt: no such labels file"):
        ml.read_labels(str(tmp_path / "nope.txt"))


def test_training_keeps_the_label_list_of_its_output_dir(tmp_path):
    write_text(tmp_path / "train.tsv", "one\tb,a\ntwo\t\n")
    out = tmp_path / "out"
    fv = rc.Settings.of(_fv(_common(tmp_path) + [
        "--task_name=multilabel", "--data_dir=%s" % tmp_path, "--output_dir=%s" % out,
        "--do_train"])).part(*classifier_tasks.SETTINGS)
    p = classifier_tasks.processor_of(fv)
    p.get_train_examples(str(tmp_path))
    out.mkdir()
    classifier_tasks.check_labels(fv, p)
    classifier_tasks.save_task(fv, p)
    assert (out / "label_list.txt").read_text() == "a\nb\n"
    # Resuming in that --output_dir reads its label list (the output layer's order, issue
    # 70): data of the same labels resumes with it, another label is refused at its line.
    write_text(tmp_path / "train.tsv", "one\tb\n")
    p = classifier_tasks.processor_of(fv)
    p.get_train_examples(str(tmp_path))
    classifier_tasks.check_labels(fv, p)
    assert p.get_labels() == ["a", "b"]
    write_text(tmp_path / "train.tsv", "one\ta,c\n")
    p = classifier_tasks.processor_of(fv)
    with pytest.raises(ValueError, match=r"train.tsv, line 1: label 'c' is not in the label "
                                         r"list \(a,b\)"):
        p.get_train_examples(str(tmp_path))


def test_single_label_task_rejects_an_empty_label(tmp_path):
    # In multilabel an empty set is an example without labels; a single-label task needs one.
    write_text(tmp_path / "train.tsv", "sentence\tlabel\ngood\t1\nbad\t\n")
    with pytest.raises(ValueError, match=r"train.tsv, line 3: the label is empty"):
        glue_data.get_processor("sst-2").get_train_examples(str(tmp_path))


@pytest.mark.parametrize("extra,message", [
    (["--threshold=0"], r"--threshold=0.0 must be between 0 and 1"),
    (["--threshold=1.5"], r"--threshold=1.5 must be between 0 and 1"),
    (["--threshold=nan"], r"--threshold=nan is not a number"),  # every field's nan rule
])
def test_threshold_outside_zero_one(tmp_path, extra, message):
    argv = _common(tmp_path) + ["--task_name=multilabel", "--data_dir=%s" % tmp_path,
                                "--output_dir=%s" % (tmp_path / "out"), "--do_train",
                                "--max_seq_length=16"] + extra
    with pytest.raises(ValueError, match=message):
        rc.run(_fv(argv))
    assert not (tmp_path / "out").exists()


def test_flag_errors_before_any_work(tmp_path):
    base = _common(tmp_path) + ["--data_dir=%s" % tmp_path, "--max_seq_length=16",
                                "--output_dir=%s" % (tmp_path / "out")]
    with pytest.raises(ValueError, match=r"--labels_file is read by --task_name=csv, tsv, "
                                         r"jsonl and multilabel only"):
        rc.run(_fv(base + ["--task_name=sst-2", "--do_train", "--labels_file=x"]))
    with pytest.raises(ValueError, match=r"without --do_train needs the label list"):
        rc.run(_fv(base + ["--task_name=multilabel", "--do_eval"]))
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------
# Metrics against scikit-learn
# ---------------------------------------------------------------------------

def test_metrics_match_sklearn_on_random_predictions():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(7)
    labels = ["l%d" % i for i in range(6)]
    for trial in range(20):
        n = int(rng.integers(1, 40))
        true = rng.random((n, 6)) < rng.uniform(0.1, 0.6)
        predicted = rng.random((n, 6)) < rng.uniform(0.1, 0.6)
        true[:, 0] = False          # a label never true
        predicted[:, 1] = False     # a label never predicted
        true[:, 2] = predicted[:, 2] = False  # a label neither true nor predicted (F1 0/0)
        if trial == 0:
            predicted[:] = False    # nothing predicted at all: micro precision 0/0
        got = ml.label_set_metrics(true, predicted, labels)
        for average in ("micro", "macro"):
            p, r, f, _ = metrics.precision_recall_fscore_support(
                true, predicted, average=average, zero_division=0)
            assert got["eval_%s_precision" % average] == pytest.approx(p, abs=1e-6)
            assert got["eval_%s_recall" % average] == pytest.approx(r, abs=1e-6)
            assert got["eval_%s_f1" % average] == pytest.approx(f, abs=1e-6)
        assert got["eval_subset_accuracy"] == pytest.approx(
            metrics.accuracy_score(true, predicted), abs=1e-6)
        per_label = metrics.f1_score(true, predicted, average=None, zero_division=0)
        for name, value in zip(labels, per_label):
            assert got["eval_f1_label_%s" % name] == pytest.approx(value, abs=1e-6)
        assert got["eval_f1_label_l2"] == 0.0


def test_loss_is_binary_cross_entropy_averaged_over_labels():
    logits = np.array([[2.0, -1.0, 0.5], [0.0, 3.0, -2.0]], np.float32)
    labels = np.array([[[1, 0, 1]], [[0, 0, 1]]], np.int32)  # the records' [B, 1, L]
    loss, per_example, probabilities = ml.compute_loss(tf.constant(logits), labels)
    p = 1 / (1 + np.exp(-logits.astype(np.float64)))
    y = labels[:, 0].astype(np.float64)
    want = -(y * np.log(p) + (1 - y) * np.log(1 - p)).mean(axis=1)
    np.testing.assert_allclose(per_example.numpy(), want, rtol=1e-5)
    np.testing.assert_allclose(loss.numpy(), want.mean(), rtol=1e-5)
    np.testing.assert_allclose(probabilities.numpy(), p, rtol=1e-5)


# ---------------------------------------------------------------------------
# A tiny model on a synthetic task: labels = which trigger words occur
# ---------------------------------------------------------------------------

def _synthetic(rng, n):
    rows = []
    for _ in range(n):
        words = [rng.choice(_FILLER) for _ in range(rng.randint(3, 8))]
        present = [t for t in _TRIGGERS if rng.random() < 0.35]
        for trigger in present:
            words.insert(rng.randint(0, len(words)), trigger)
        rows.append((" ".join(words), sorted(_LABEL_OF[t] for t in present)))
    return rows


def _all_positive_micro_f1(rows):
    positives = sum(len(labels) for _, labels in rows)
    precision = positives / (len(rows) * len(_TRIGGERS))
    return 2 * precision / (precision + 1)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("multilabel")
    rng = random.Random(5)
    data = root / "data"
    splits = {"train": _synthetic(rng, 320), "dev": _synthetic(rng, 67),
              "test": _synthetic(rng, 37)}
    for name, rows in splits.items():
        write_text(data / ("%s.tsv" % name), "".join(
            "%s\t%s\n" % (text, ",".join(labels)) for text, labels in rows))
    out = root / "out"
    argv = _common(root) + [
        "--task_name=multilabel", "--data_dir=%s" % data, "--output_dir=%s" % out,
        "--do_train", "--do_eval", "--do_predict", "--max_seq_length=16",
        "--train_batch_size=16", "--num_train_epochs=20", "--learning_rate=1.5e-3",
        "--eval_batch_size=16", "--predict_batch_size=16", "--seed=1"]
    rc.run(_fv(argv))
    return {"root": root, "data": data, "out": out, "splits": splits}


@pytest.mark.slow
def test_tiny_model_learns_which_triggers_occur(trained):
    out = trained["out"]
    result = read_eval_results(out / "eval_results.txt")
    labels = sorted(_LABEL_OF.values())
    assert (out / "label_list.txt").read_text() == "".join(l + "\n" for l in labels)
    assert set(result) == {"eval_loss", "loss", "global_step", "eval_subset_accuracy"} | {
        "eval_%s_%s" % (a, m) for a in ("micro", "macro")
        for m in ("precision", "recall", "f1")} | {"eval_f1_label_%s" % l for l in labels}
    assert result["global_step"] == "400"  # int(320 / 16 * 20)
    baseline = _all_positive_micro_f1(trained["splits"]["dev"])
    print("dev micro-F1 %s (all-positive baseline %.3f), subset accuracy %s" % (
        result["eval_micro_f1"], baseline, result["eval_subset_accuracy"]))
    assert baseline < 0.6
    assert float(result["eval_micro_f1"]) > 0.9
    # test_results.tsv: one line per test example, one probability per label, label order.
    probabilities = read_tsv_floats(out / "test_results.tsv")
    assert probabilities.shape == (37, 4)  # 37 = 2 batches of 16 + 5 (padding rows dropped)
    truth = np.array([[l in labels_ for l in labels] for _, labels_ in trained["splits"]["test"]])
    assert np.mean((probabilities >= 0.5) == truth) > 0.9
    records = check_test_predictions(out, ["test-%d" % n for n in range(37)], labels,
                                     kind="multilabel")
    assert len({len(r["label"]) for r in records}) > 1  # sets of labels, of several sizes


@pytest.mark.slow
def test_eval_again_from_the_checkpoint_trimmed_or_not(trained, tmp_path):
    # A run that does not train finds the labels beside --init_checkpoint; trimmed and
    # fixed-length batches give the same numbers; --threshold changes the predictions;
    # bf16 (mixed precision) stays close.
    # (bf16 first: the fp32 runs after it set the process's precision policy back.)
    # The trimmed fp32 run: the trained run's own evaluation and prediction (--trim_padding
    # is the default) of its last checkpoint.
    results = {"trim": (read_eval_results(trained["out"] / "eval_results.txt"),
                        read_tsv_floats(trained["out"] / "test_results.tsv"))}
    for name, extra in (("bf16", ["--dtype=bf16"]), ("notrim", ["--notrim_padding"]),
                        ("high", ["--threshold=0.99"])):
        out = tmp_path / name
        rc.run(_fv(_common(tmp_path) + [
            "--task_name=multilabel", "--data_dir=%s" % trained["data"],
            "--output_dir=%s" % out, "--init_checkpoint=%s" % trained["out"], "--do_eval",
            "--do_predict", "--max_seq_length=16", "--eval_batch_size=16",
            "--predict_batch_size=16"] + extra))
        results[name] = (read_eval_results(out / "eval_results.txt"),
                         read_tsv_floats(out / "test_results.tsv"))
        assert not (out / "label_list.txt").exists()  # only training runs write it
    trained_result = read_eval_results(trained["out"] / "eval_results.txt")
    for name in ("notrim",):
        got, probabilities = results[name]
        for key, value in trained_result.items():
            assert float(got[key]) == pytest.approx(float(value), abs=1e-5), (name, key)
        np.testing.assert_allclose(probabilities,
                                   read_tsv_floats(trained["out"] / "test_results.tsv"),
                                   atol=1e-5, rtol=0)
    np.testing.assert_allclose(results["bf16"][1], results["trim"][1], atol=0.05, rtol=0)
    assert float(results["bf16"][0]["eval_micro_f1"]) > 0.9
    assert results["high"][0]["eval_loss"] == trained_result["eval_loss"]
    assert results["high"][0]["eval_micro_recall"] != trained_result["eval_micro_recall"]


@pytest.mark.slow
def test_served_probabilities_equal_test_results(trained_multilabel):
    # The run's shared multi-label folder (tests/trained.py: a jsonl task trained with
    # do_predict on the parity inputs) and its export, made once per run.
    folder = trained_multilabel.folder
    texts = [item for _, item in trained_multilabel.reference_items()]
    # Loaded by TensorFlow alone (no class of ours), in this process.
    signature = trained_multilabel.saved_model().signatures["serving_text_a"]
    served = {key: value.numpy().tolist() for key, value in
              signature(text_a=tf.constant(texts)).items()}
    served["labels"] = [[label.decode("utf-8") for label in row] for row in served["labels"]]
    served["predicted_labels"] = [label.decode("utf-8") for label in served["predicted_labels"]]
    want = read_tsv_floats(os.path.join(folder, "test_results.tsv"))
    assert want.shape == (len(texts), 3)
    np.testing.assert_allclose(np.array(served["probabilities"]), want, atol=1e-5, rtol=0)
    with open(os.path.join(folder, "label_list.txt"), encoding="utf-8") as f:
        labels = f.read().split()
    assert labels == ["neg", "neutral", "pos"]
    assert served["labels"][0] == labels
    assert np.array_equal(np.array(served["predicted"]), want >= 0.5)
    assert served["predicted_labels"] == [
        ",".join(l for l, p in zip(labels, row) if p >= 0.5) for row in want]
    assert len(set(served["predicted_labels"])) > 1  # sets of labels that differ
    with open(os.path.join(trained_multilabel.export_dir, "assets.extra",
                           "export_info.json")) as f:
        info = json.load(f)
    assert info["labels"] == labels and info["multilabel_threshold"] == 0.5


def test_export_needs_the_label_list(tmp_path):
    argv = _common(tmp_path) + ["--model_type=classifier", "--task_name=multilabel",
                                "--init_checkpoint=%s" % tmp_path,
                                "--export_dir=%s" % (tmp_path / "model")]
    with pytest.raises(ValueError, match=r"needs the label list: pass --labels_file"):
        esm.run(flags_common.parse_flags(esm.define_flags, argv))
    with pytest.raises(ValueError, match=r"--threshold=1.0 must be between 0 and 1"):
        esm.run(flags_common.parse_flags(esm.define_flags, argv + ["--threshold=1"]))
