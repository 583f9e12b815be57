"""run_classifier's metrics people choose by: a binary task's precision / recall / F1 of
--positive_label, a multi-class task's macro / weighted / per-class F1, and which way each
metric is better (periodic_eval.direction)."""
import json
import os

import numpy as np
import pytest

import run_classifier as rc
from bert_tf2 import flags_common
from bert_tf2.tasks import classifier_tasks
from bert_tf2.tasks import file_data
from bert_tf2.tasks import glue_data
from bert_tf2.trainer import periodic_eval
from conftest import write_text

_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "a", "dog", "."]
_CONFIG = {"vocab_size": len(_VOCAB), "hidden_size": 16, "num_hidden_layers": 1,
           "num_attention_heads": 2, "intermediate_size": 32, "hidden_act": "gelu",
           "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
           "max_position_embeddings": 32, "type_vocab_size": 2, "initializer_range": 0.02}


# ---------------------------------------------------------------------------
# The values, by hand and against scikit-learn
# ---------------------------------------------------------------------------

def test_binary_metrics_by_hand():
    labels = np.array([1, 1, 0, 0, 1])
    predictions = np.array([1, 0, 1, 0, 1])
    # positive 1: tp = 2 (rows 0, 4), fp = 1 (row 2), fn = 1 (row 1)
    assert glue_data.binary_metrics(labels, predictions, 1) == pytest.approx(
        {"eval_precision": 2 / 3, "eval_recall": 2 / 3, "eval_f1": 2 / 3})
    # positive 0: tp = 1 (row 3), fp = 1 (row 1), fn = 1 (row 2)
    assert glue_data.binary_metrics(labels, predictions, 0) == pytest.approx(
        {"eval_precision": 0.5, "eval_recall": 0.5, "eval_f1": 0.5})
    # Never predicted: precision 0 (0/0), recall 0, F1 0.
    assert glue_data.binary_metrics(labels, np.zeros(5, int), 1) == {
        "eval_precision": 0.0, "eval_recall": 0.0, "eval_f1": 0.0}


def test_multiclass_metrics_by_hand_with_a_label_absent_from_dev():
    labels = np.array([0, 1, 2, 2, 1, 0, 2, 1])
    predictions = np.array([0, 2, 2, 2, 1, 1, 0, 1])
    got = glue_data.multiclass_metrics(labels, predictions, ["a", "b", "c", "absent"])
    # a: tp 1, fp 1 (row 6), fn 1 (row 5) -> 2/4; b: tp 2, fp 1, fn 1 -> 4/6;
    # c: tp 2, fp 1, fn 1 -> 4/6; absent: never true, never predicted -> 0.
    f1 = [0.5, 2 / 3, 2 / 3, 0.0]
    assert got == pytest.approx({
        "eval_f1_a": f1[0], "eval_f1_b": f1[1], "eval_f1_c": f1[2], "eval_f1_absent": 0.0,
        "eval_macro_f1": sum(f1) / 4,                                  # every label counts
        "eval_weighted_f1": (2 * f1[0] + 3 * f1[1] + 3 * f1[2]) / 8})  # by dev examples
    # A label absent from dev but predicted: F1 0 (its precision 0), weight 0.
    got = glue_data.multiclass_metrics([0, 0, 1], [0, 2, 1], ["a", "b", "c"])
    assert got["eval_f1_c"] == 0.0 and got["eval_f1_a"] == pytest.approx(2 / 3)
    assert got["eval_weighted_f1"] == pytest.approx((2 * 2 / 3 + 1.0) / 3)
    assert glue_data.multiclass_metrics([], [], ["a", "b", "c"])["eval_weighted_f1"] == 0.0


def test_metrics_agree_with_sklearn():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.RandomState(0)
    for n in (2, 3, 5):
        labels = rng.randint(0, n, size=50)
        labels[labels == n - 1] = 0  # the last label absent from dev
        predictions = rng.randint(0, n, size=50)
        every = list(range(n))
        if n == 2:
            for positive in (0, 1):
                got = glue_data.binary_metrics(labels, predictions, positive)
                for key, fn in (("eval_precision", metrics.precision_score),
                                ("eval_recall", metrics.recall_score),
                                ("eval_f1", metrics.f1_score)):
                    assert got[key] == pytest.approx(fn(labels, predictions, pos_label=positive,
                                                        zero_division=0), abs=1e-6)
            continue
        got = glue_data.multiclass_metrics(labels, predictions, ["l%d" % i for i in every])
        for average in ("macro", "weighted"):
            assert got["eval_%s_f1" % average] == pytest.approx(metrics.f1_score(
                labels, predictions, labels=every, average=average, zero_division=0), abs=1e-6)
        per_class = metrics.f1_score(labels, predictions, labels=every, average=None,
                                     zero_division=0)
        for i in every:
            assert got["eval_f1_l%d" % i] == pytest.approx(per_class[i], abs=1e-6)


def _eval(processor, labels, predictions, positive=1):
    n = len(processor.get_labels())
    outputs = np.eye(n, dtype=np.float32)[predictions]
    return glue_data.eval_metrics(processor, np.zeros(len(labels)), np.asarray(labels),
                                  outputs, np.ones(len(labels)), np.zeros(len(labels), int),
                                  positive=positive)


def test_glue_keys_kept_and_added():
    labels, predictions = [1, 1, 0, 0, 1], [1, 0, 1, 0, 1]
    mrpc = _eval(glue_data.MrpcProcessor(), labels, predictions)
    # eval_f1 is MRPC's GLUE F1 as before (same function, same float32).
    assert mrpc["eval_f1"] == np.float32(glue_data._f1(np.array(labels), np.array(predictions)))
    assert sorted(mrpc) == ["eval_accuracy", "eval_f1", "eval_loss", "eval_precision",
                            "eval_recall", "loss"]
    assert _eval(glue_data.MrpcProcessor(), labels, predictions, positive=0)["eval_f1"] == 0.5
    mnli = _eval(glue_data.MnliProcessor(), [0, 1, 2], [0, 1, 1])
    assert sorted(mnli) == ["eval_accuracy", "eval_f1_contradiction", "eval_f1_entailment",
                            "eval_f1_neutral", "eval_loss", "eval_macro_f1",
                            "eval_weighted_f1", "loss"]
    stsb = glue_data.eval_metrics(glue_data.StsbProcessor(), np.zeros(3), np.arange(3.0),
                                  np.arange(3.0), np.ones(3), np.zeros(3, int))
    assert sorted(stsb) == ["eval_loss", "eval_pearson", "eval_spearman", "loss"]


def test_label_text_in_a_metric_name():
    assert glue_data.metric_key("not_entailment") == "not_entailment"
    assert glue_data.metric_key("very good/ok!") == "very_good_ok_"
    assert glue_data.metric_key("中文-1.5") == "中文-1.5"
    assert glue_data.class_f1_names(["a b", "a/b", "c"]) == [
        "eval_f1_a_b_0", "eval_f1_a_b_1", "eval_f1_c"]


# ---------------------------------------------------------------------------
# --positive_label
# ---------------------------------------------------------------------------

def _task_part(**given):
    settings = rc.Settings(task_name="mrpc", data_dir="d", vocab_file="v",
                           bert_config_file="c", output_dir="o", **given)
    return settings.part(*classifier_tasks.SETTINGS)


def test_positive_label_default_and_explicit():
    mrpc, qnli = glue_data.MrpcProcessor(), glue_data.QnliProcessor()
    assert classifier_tasks.positive_index(_task_part(), mrpc) == 1          # label "1"
    assert classifier_tasks.positive_index(_task_part(), qnli) == 1          # not_entailment
    assert classifier_tasks.positive_index(_task_part(positive_label="0"), mrpc) == 0
    assert classifier_tasks.positive_index(
        _task_part(positive_label="entailment"), qnli) == 0
    assert classifier_tasks.positive_index(_task_part(), glue_data.MnliProcessor()) is None
    assert classifier_tasks.positive_index(_task_part(), glue_data.StsbProcessor()) is None


def test_bad_positive_label():
    with pytest.raises(ValueError, match=r"^--positive_label=yes is not a label of "
                                         r"--task_name=mrpc; its labels: 0, 1$"):
        classifier_tasks.positive_index(_task_part(positive_label="yes"),
                                        glue_data.MrpcProcessor())
    with pytest.raises(ValueError, match=r"--positive_label=neutral is read by classification "
                                         r"tasks of 2 labels only, not --task_name=mrpc "
                                         r"\(labels: contradiction, entailment, neutral\)"):
        classifier_tasks.positive_index(_task_part(positive_label="neutral"),
                                        glue_data.MnliProcessor())
    with pytest.raises(ValueError, match=r"\(regression task\)"):
        classifier_tasks.positive_index(_task_part(positive_label="1"),
                                        glue_data.StsbProcessor())


def _own_data(tmp_path, labels, given=None):
    """A tsv task whose train.tsv names `labels` in this order (each twice)."""
    rows = "".join("the cat\t%s\n" % label for label in labels + labels)
    write_text(tmp_path / "data" / "train.tsv", "text\tlabel\n" + rows)
    processor = file_data.FileProcessor("tsv", file_data.Columns("text", None, "label"),
                                        labels=given)
    processor.get_train_examples(str(tmp_path / "data"))
    return processor


def _own_part(tmp_path, **given):
    settings = rc.Settings(task_name="tsv", data_dir="d", vocab_file="v",
                           bert_config_file="c", output_dir=str(tmp_path / "out"),
                           do_train=True, **given)
    return settings.part(*classifier_tasks.SETTINGS)


@pytest.mark.parametrize("order, positive", [
    (["pos", "neg"], "neg"),       # no positive name: the second label train names
    (["neg", "pos"], "pos"),
    (["Yes", "No"], "Yes"),        # a positive name wins, any case
    (["1", "0"], "1"),
    (["positive", "negative"], "positive"),
    (["true", "false"], "true"),
])
def test_own_data_positive_label_default(tmp_path, order, positive):
    processor = _own_data(tmp_path, order)
    names = processor.get_labels()
    assert names == sorted(order)  # the label ids stay the sorted list's
    assert classifier_tasks.positive_index(_own_part(tmp_path), processor) == \
        names.index(positive)
    # --positive_label still decides; a GLUE task keeps the second label.
    assert classifier_tasks.positive_index(_own_part(tmp_path, positive_label=names[0]),
                                           processor) == 0
    # The training run saves its choice: a run that does not train reports the same.
    os.makedirs(str(tmp_path / "out"))
    classifier_tasks.save_task(_own_part(tmp_path), processor, names.index(positive))
    saved = json.loads((tmp_path / "out" / classifier_tasks.TASK_FILE).read_text())
    assert saved == {"task_name": "tsv", "task_type": "classification",
                     "positive_label": positive}
    evaluation = file_data.FileProcessor("tsv", file_data.Columns("text", None, "label"),
                                         labels=names)  # label_list.txt's: no file order
    part = _own_part(tmp_path).replace(do_train=False)
    assert classifier_tasks.positive_index(part, evaluation) == names.index(positive)


def test_own_data_positive_label_of_a_labels_file_and_of_an_old_folder(tmp_path):
    # --labels_file: its order is the file order (and the label ids).
    processor = _own_data(tmp_path, ["a", "b"], given=["b", "a"])
    part = _own_part(tmp_path, labels_file="labels.txt")
    assert classifier_tasks.positive_index(part, processor) == 1  # "a"
    # A folder saved before the choice was kept: the name, else label_list.txt's second.
    write_text(tmp_path / "out" / classifier_tasks.TASK_FILE,
               json.dumps({"task_name": "tsv", "task_type": "classification"}))
    part = _own_part(tmp_path).replace(do_train=False)
    for names, positive in ((["neg", "pos"], 1), (["Positive", "negative"], 0)):
        processor = file_data.FileProcessor("tsv", file_data.Columns("text", None, "label"),
                                            labels=names)
        assert classifier_tasks.positive_index(part, processor) == positive


def test_own_data_binary_task_reports_mcc():
    labels, predictions = [1, 1, 0, 0, 1], [1, 0, 1, 0, 1]
    processor = file_data.FileProcessor("tsv", file_data.Columns("text", None, "label"),
                                        labels=["neg", "pos"])
    got = _eval(processor, labels, predictions)
    # tp 2, tn 1, fp 1, fn 1: (2 - 1) / sqrt(3 * 3 * 2 * 2) = 1/6
    assert got["eval_mcc"] == pytest.approx(1 / 6, abs=1e-6)
    assert got["eval_mcc"] == _eval(processor, labels, predictions, positive=0)["eval_mcc"]
    three = file_data.FileProcessor("tsv", file_data.Columns("text", None, "label"),
                                    labels=["a", "b", "c"])
    assert "eval_mcc" not in _eval(three, [0, 1, 2], [0, 1, 1])
    assert "eval_mcc" not in _eval(glue_data.MrpcProcessor(), labels, predictions)


# ---------------------------------------------------------------------------
# Which way is better: from what a metric is, never from its name
# ---------------------------------------------------------------------------

def test_direction_from_the_table():
    assert periodic_eval.lower_is_better("eval_loss")
    assert periodic_eval.lower_is_better("loss")
    assert periodic_eval.lower_is_better("masked_lm_loss")
    for name in ("eval_f1_label_weight_loss", "eval_f1_loss", "eval_accuracy", "eval_f1",
                 "eval_macro_f1", "f1", "eval_f1_PER"):
        assert not periodic_eval.lower_is_better(name), name
    evaluation = periodic_eval.PeriodicEval(None, 1, "eval_f1_label_weight_loss")
    evaluation.best = {"metric": evaluation.metric, "value": 0.5, "global_step": 1}
    assert evaluation._improves(0.6) and not evaluation._improves(0.4)
    evaluation = periodic_eval.PeriodicEval(None, 1, "eval_loss")
    evaluation.best = {"metric": evaluation.metric, "value": 0.5, "global_step": 1}
    assert evaluation._improves(0.4) and not evaluation._improves(0.6)


@pytest.mark.parametrize("processor", [
    glue_data.MrpcProcessor(), glue_data.ColaProcessor(), glue_data.MnliProcessor(),
    glue_data.StsbProcessor()])
def test_every_classifier_metric_is_in_the_table(processor):
    n = len(processor.get_labels())
    if processor.is_regression:
        names = glue_data.eval_metrics(processor, np.zeros(2), np.arange(2.0), np.arange(2.0),
                                       np.ones(2), np.zeros(2, int))
    else:
        names = _eval(processor, list(range(n)), list(range(n)))
    assert all(periodic_eval.known_metric(name) for name in names), sorted(names)


# ---------------------------------------------------------------------------
# run_classifier: refused before any work, the metrics of a run
# ---------------------------------------------------------------------------

@pytest.fixture
def csv_files(tmp_path):
    """A vocab, a config, a 3-label csv task and a binary sst-2 one (train / dev)."""
    data = tmp_path / "data"
    rows = ["the cat sat .,cat", "a dog .,dog", "the dog sat .,dog", "a cat .,cat",
            "the .,other", "a .,other"]
    for name in ("train", "dev"):
        write_text(data / (name + ".csv"), "text,label\n" + "\n".join(rows) + "\n")
        write_text(data / (name + ".tsv"), "sentence\tlabel\nthe cat .\t1\na dog .\t0\n")
    return {"vocab": write_text(tmp_path / "vocab.txt", "\n".join(_VOCAB) + "\n"),
            "config": write_text(tmp_path / "bert_config.json", json.dumps(_CONFIG)),
            "data": str(data), "out": tmp_path / "out"}


def _argv(files, *extra):
    return ["--task_name=csv", "--data_dir=%s" % files["data"],
            "--vocab_file=%s" % files["vocab"], "--bert_config_file=%s" % files["config"],
            "--output_dir=%s" % files["out"], "--max_seq_length=16", "--do_train",
            "--do_eval", "--train_batch_size=2", "--num_train_epochs=1"] + list(extra)


def _run(argv):
    return rc.run(flags_common.parse_flags(rc.define_flags, argv))


def _nothing_written(folder):
    return not os.path.exists(folder) or os.listdir(folder) == []


def test_wrong_best_metric_refused_before_any_file(csv_files):
    with pytest.raises(ValueError, match=r"^--best_metric=eval_f1 is not a metric this run "
                                         r"reports \(checked before training\); it reports: "
                                         r"eval_accuracy, eval_f1_cat, eval_f1_dog, "
                                         r"eval_f1_other, eval_loss, eval_macro_f1, "
                                         r"eval_weighted_f1, loss$"):
        _run(_argv(csv_files, "--eval_every_n_steps=1", "--best_metric=eval_f1"))
    assert _nothing_written(csv_files["out"])


def test_bad_positive_label_refused_before_any_file(csv_files):
    with pytest.raises(ValueError, match=r"--positive_label=cat is read by classification "
                                         r"tasks of 2 labels only"):
        _run(_argv(csv_files, "--positive_label=cat"))
    assert _nothing_written(csv_files["out"])
    with pytest.raises(ValueError, match=r"--positive_label=bird is not a label of "
                                         r"--task_name=sst-2; its labels: 0, 1"):
        _run(_argv(csv_files, "--positive_label=bird")[1:] + ["--task_name=sst-2"])
    assert _nothing_written(csv_files["out"])


@pytest.mark.slow
def test_per_class_f1_is_a_best_metric(csv_files):
    result = _run(_argv(csv_files, "--eval_every_n_steps=1", "--best_metric=eval_f1_other",
                        "--train_batch_size=3"))
    with open(os.path.join(csv_files["out"], periodic_eval.HISTORY_FILE)) as f:
        history = [json.loads(line) for line in f]
    assert len(history) == 2  # 6 examples / 3
    assert set(history[0]) == {"global_step", "eval_accuracy", "eval_loss", "loss",
                               "eval_macro_f1", "eval_weighted_f1", "eval_f1_cat",
                               "eval_f1_dog", "eval_f1_other"}
    assert set(result.metrics) == set(history[0])
    with open(os.path.join(csv_files["out"], "eval_results.txt")) as f:
        assert "eval_macro_f1 = " in f.read()
    best = json.loads((csv_files["out"] / "best" / "best.json").read_text())
    assert best["value"] == max(r["eval_f1_other"] for r in history)
