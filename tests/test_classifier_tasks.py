"""Your own task end to end: --task_name=csv (word labels), --processor (the README's
example's command line, run in this process), label_list.txt kept through predict-only runs
and the export, and every bad input as one error naming the file, line or flag."""
import csv
import hashlib
import io
import json
import logging
import os
import random
import re
import shutil
import sys

import numpy as np
import pytest
import tensorflow as tf

import export_saved_model as esm
import run_classifier as rc
from bert_tf2 import flags_common
from bert_tf2.trainer import checkpoints
from conftest import REPO_ROOT
from conftest import check_test_predictions
from conftest import write_text
from conftest import read_eval_results, read_tsv_floats

_SENTIMENT = {"positive": ["great", "excellent", "love"],
              "negative": ["awful", "broken", "hate"],
              "neutral": ["okay", "average", "ordinary"]}
_THINGS = ["the screen", "the battery", "this phone", "the case", "the price", "delivery"]
_FILLER = ["honestly", "overall", "i think", "so far", "for me"]
_WORDS = sorted({w for ws in _SENTIMENT.values() for w in ws} |
                {w for t in _THINGS + _FILLER for w in t.split()} |
                {"is", "was", "and", "it", "we", "said", ",", ".", '"', "really"})
_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + _WORDS
_CONFIG = {"vocab_size": len(_VOCAB), "hidden_size": 32, "num_hidden_layers": 2,
           "num_attention_heads": 2, "intermediate_size": 64, "hidden_act": "gelu",
           "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
           "max_position_embeddings": 32, "type_vocab_size": 2, "initializer_range": 0.1}
_LABELS = ["negative", "neutral", "positive"]
# csv_run's --labels_file: not the sorted order of the data's labels, the head's order.
_ORDER = ["positive", "negative", "neutral"]


def _review(rng, label):
    """A short review whose one sentiment word decides the label; commas, quotes, newlines."""
    thing, word = rng.choice(_THINGS), rng.choice(_SENTIMENT[label])
    text = rng.choice(["%s is %s, %s." % (thing, word, rng.choice(_FILLER)),
                       "%s, %s, was really %s." % (rng.choice(_FILLER), thing, word),
                       "%s is %s.\nit was, %s." % (thing, word, rng.choice(_FILLER)),
                       'we said "%s" and %s.' % (word, thing)])
    return text[0].upper() + text[1:]


def _csv_file(path, rows, with_label=True):
    """id,text,label rows as Python's csv module writes them (quotes where needed)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["id", "text", "label"] if with_label else ["id", "text"])
    for number, (text, label) in enumerate(rows):
        writer.writerow([number, text, label] if with_label else [number, text])
    return write_text(path, out.getvalue())


def _common(root, **config):
    return ["--vocab_file=%s" % write_text(root / "vocab.txt", "\n".join(_VOCAB) + "\n"),
            "--bert_config_file=%s" % write_text(root / "bert_config.json",
                                                 json.dumps(dict(_CONFIG, **config))),
            "--max_seq_length=24"]


_TRAIN_FLAGS = ["--do_train", "--do_eval", "--do_predict", "--train_batch_size=16",
                "--num_train_epochs=8", "--learning_rate=2e-3", "--eval_batch_size=16",
                "--predict_batch_size=16", "--seed=1"]


def _fv(argv):
    return flags_common.parse_flags(rc.define_flags, argv)


def _export(root, init_checkpoint, export_dir, **config):
    esm.run(flags_common.parse_flags(esm.define_flags, _common(root, **config) + [
        "--model_type=classifier", "--init_checkpoint=%s" % init_checkpoint,
        "--export_dir=%s" % export_dir]))
    return tf.saved_model.load(str(export_dir))


# ---------------------------------------------------------------------------
# A CSV of word labels: train, evaluate, predict, export, serve
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def csv_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("csv_task")
    rng = random.Random(3)
    splits = {name: [(_review(rng, label), label) for _ in range(size) for label in _LABELS]
              for name, size in (("train", 32), ("dev", 10), ("test", 5))}
    for rows in splits.values():
        rng.shuffle(rows)
    data = root / "data"
    _csv_file(data / "train.csv", splits["train"])
    _csv_file(data / "dev.csv", splits["dev"])
    _csv_file(data / "test.csv", splits["test"], with_label=False)
    out = root / "out"
    order = write_text(root / "order.txt", "".join(label + "\n" for label in _ORDER))
    # best/ (tests of the model folder below): evaluated once during training, at its last
    # step, best/ holds the last checkpoint, the one do_predict wrote test_results.tsv of.
    rc.run(_fv(_common(root) + ["--task_name=csv", "--data_dir=%s" % data,
                                "--output_dir=%s" % out, "--eval_every_n_steps=48",
                                "--best_metric=eval_loss", "--labels_file=%s" % order]
                  + _TRAIN_FLAGS))
    return {"root": root, "data": data, "out": out, "splits": splits}


@pytest.mark.slow
def test_csv_word_labels_train_evaluate_and_predict(csv_run):
    out = csv_run["out"]
    with open(str(csv_run["data"] / "train.csv")) as f:
        text = f.read()
    assert '"' in text and ",\n" not in text and re.search(r'"[^"]*\n[^"]*"', text)
    # The order of --labels_file, not the sorted one of the data.
    assert (out / "label_list.txt").read_text() == "positive\nnegative\nneutral\n"
    assert json.loads((out / "classifier_task.json").read_text()) == {
        "task_name": "csv", "task_type": "classification"}
    result = read_eval_results(out / "eval_results.txt")
    print("csv task, 3 word labels: eval_accuracy = %s (chance 0.33)" % result["eval_accuracy"])
    assert set(result) == {"eval_accuracy", "eval_loss", "global_step", "loss", "eval_macro_f1",
                           "eval_weighted_f1", "eval_f1_negative", "eval_f1_neutral",
                           "eval_f1_positive"}
    assert result["global_step"] == "48"  # int(96 / 16 * 8)
    assert float(result["eval_accuracy"]) >= 0.9
    probabilities = read_tsv_floats(out / "test_results.tsv")
    assert probabilities.shape == (15, 3)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)
    truth = [_ORDER.index(label) for _, label in csv_run["splits"]["test"]]
    assert np.mean(probabilities.argmax(axis=1) == truth) >= 0.8
    # test_predictions.jsonl: the id column of test.csv, the word labels.
    check_test_predictions(out, [str(n) for n in range(15)], _ORDER)


@pytest.mark.slow
def test_predict_only_run_takes_the_labels_beside_the_checkpoint(csv_run, tmp_path):
    argv = _common(tmp_path) + ["--task_name=csv", "--data_dir=%s" % csv_run["data"],
                                "--init_checkpoint=%s" % csv_run["out"], "--do_predict",
                                "--predict_batch_size=16"]
    rc.run(_fv(argv + ["--output_dir=%s" % (tmp_path / "again")]))
    np.testing.assert_allclose(read_tsv_floats(tmp_path / "again" / "test_results.tsv"),
                               read_tsv_floats(csv_run["out"] / "test_results.tsv"),
                               atol=1e-5, rtol=0)
    labels_file = write_text(tmp_path / "other.txt", "neutral\npositive\nnegative\n")
    with pytest.raises(ValueError, match=r"label_list.txt lists the labels positive, negative, "
                                         r"neutral, the model's outputs in order; "
                                         r"--labels_file=.*other.txt has neutral, positive, "
                                         r"negative \(output 0: 'positive' there, 'neutral' "
                                         r"here\): give --labels_file in that order"):
        rc.run(_fv(argv + ["--output_dir=%s" % (tmp_path / "b"), "--labels_file=%s"
                           % labels_file]))
    assert not (tmp_path / "b" / "test_results.tsv").exists()


@pytest.mark.slow
def test_an_empty_text_of_a_one_column_test_file_keeps_its_row(csv_run, tmp_path):
    # 39 lines gave 38 rows before the fix (the blank line skipped, every later row beside
    # the wrong input): one row per line, in order, the others as without the empty text.
    texts = ["good battery", "the screen broke", "", "fine i guess", "great"]
    argv = _common(tmp_path) + ["--task_name=tsv", "--init_checkpoint=%s" % csv_run["out"],
                                "--do_predict", "--predict_batch_size=2"]
    rows = {}
    for name, lines in (("with", texts), ("without", [t for t in texts if t])):
        write_text(tmp_path / name / "test.tsv", "text\n" + "".join(t + "\n" for t in lines))
        rc.run(_fv(argv + ["--data_dir=%s" % (tmp_path / name),
                           "--output_dir=%s" % (tmp_path / (name + "_out"))]))
        rows[name] = read_tsv_floats(tmp_path / (name + "_out") / "test_results.tsv")
        check_test_predictions(tmp_path / (name + "_out"),
                               ["test-%d" % i for i in range(len(lines))], _ORDER)
    kept = [i for i, text in enumerate(texts) if text]
    np.testing.assert_allclose(np.asarray(rows["with"])[kept], rows["without"], atol=1e-5, rtol=0)


@pytest.mark.slow
def test_training_on_from_a_folder_keeps_its_label_order(csv_run, tmp_path):
    # Labels not in sorted order (csv_run's --labels_file): a run training on from its
    # folder without --labels_file must keep them (the output layer's order), not re-sort
    # them from the data (before the fix: label_list.txt sorted, dev accuracy 1.0 -> 0.0, no
    # warning). (csv_run trains alone: the second's accuracy shows its labels kept their
    # order; re-sorted, the answers would be wrong.)
    common = _common(tmp_path) + ["--task_name=csv", "--data_dir=%s" % csv_run["data"]]
    first = csv_run["out"]
    assert (first / "label_list.txt").read_text() == "positive\nnegative\nneutral\n"
    # Trained on with a learning rate too small to change the answers.
    again = ["--do_train", "--do_eval", "--num_train_epochs=1", "--learning_rate=1e-12",
             "--train_batch_size=16", "--eval_batch_size=16", "--init_checkpoint=%s" % first]
    second = tmp_path / "second"
    rc.run(_fv(common + again + ["--output_dir=%s" % second]))
    assert (second / "label_list.txt").read_text() == "positive\nnegative\nneutral\n"
    after = float(read_eval_results(second / "eval_results.txt")["eval_accuracy"])
    print("trained on from a folder of labels positive, negative, neutral: eval_accuracy "
          "%.3f" % after)
    assert after >= 0.9  # chance 0.33; the labels re-sorted: about 0
    # A --labels_file in another order than the head's: one line, before any training.
    sorted_file = write_text(tmp_path / "sorted.txt", "negative\nneutral\npositive\n")
    with pytest.raises(ValueError, match=r"^%s lists the labels positive, negative, neutral, "
                                         r"the model's outputs in order; --labels_file=.*sorted"
                                         r".txt has negative, neutral, positive \(output 0: "
                                         r"'positive' there, 'negative' here\): the output "
                                         r"layer of --init_checkpoint is in that order"
                       % re.escape(str(first / "label_list.txt"))):
        rc.run(_fv(common + again + ["--output_dir=%s" % (tmp_path / "third"),
                                     "--labels_file=%s" % sorted_file]))
    assert not list((tmp_path / "third").glob("model.ckpt*"))


# ---------------------------------------------------------------------------
# The output folder is the model: best/ alone predicts and exports
# ---------------------------------------------------------------------------

@pytest.mark.slow
def test_best_folder_alone_predicts_and_exports(csv_run, tmp_path, caplog):
    best = csv_run["out"] / "best"
    for name in ("bert_config.json", "vocab.txt", "model_settings.json", "label_list.txt",
                 "classifier_task.json"):
        assert (best / name).exists(), name
    recorded = {name: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                for name in ("label_list.txt", "vocab.txt")
                for data in [(best / name).read_bytes()]}
    assert json.loads((best / "model_settings.json").read_text()) == {
        "runner": "run_classifier", "do_lower_case": True, "max_seq_length": 24,
        "task_name": "csv", "processor": None, "task_type": "classification",
        "text_a_column": "text", "text_b_column": None, "label_column": "label",
        "threshold": 0.5, "xnli_language": "zh", "files": recorded}
    # No config, vocab, task, column or length flag: all from best/.
    alone = ["--init_checkpoint=%s" % best, "--data_dir=%s" % csv_run["data"], "--do_predict",
             "--predict_batch_size=16"]
    rc.run(_fv(alone + ["--output_dir=%s" % (tmp_path / "alone")]))
    # best/ holds the run's last checkpoint (csv_run), the one its do_predict (given every
    # flag) wrote test_results.tsv of.
    assert checkpoints.checkpoint_step(str(best)) == checkpoints.checkpoint_step(
        str(csv_run["out"])) == 48
    want = read_tsv_floats(csv_run["out"] / "test_results.tsv")
    # The same checkpoint, settings and batch shapes: only where the settings came from differs.
    np.testing.assert_allclose(read_tsv_floats(tmp_path / "alone" / "test_results.tsv"), want,
                               atol=1e-6, rtol=0)
    # A flag given wins; contradicting the folder, it is one warning line.
    caplog.clear()
    rc.run(_fv(alone + ["--output_dir=%s" % (tmp_path / "longer"), "--max_seq_length=32"]))
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert [w for w in warned if "max_seq_length" in w] == [
        "--max_seq_length=32 is used, not the 24 of %s (a setting given wins)"
        % (best / "model_settings.json")]
    assert (tmp_path / "longer" / "test_results.tsv").exists()
    # The export from best/ alone: the classifier, its word labels, length 24.
    esm.run(flags_common.parse_flags(esm.define_flags, [
        "--init_checkpoint=%s" % best, "--export_dir=%s" % (tmp_path / "model")]))
    info = json.loads((tmp_path / "model" / "assets.extra" / "export_info.json").read_text())
    assert info["max_seq_length"] == 24
    model = tf.saved_model.load(str(tmp_path / "model"))
    served = model.serving_text_a(tf.constant([t for t, _ in csv_run["splits"]["test"]]))
    np.testing.assert_allclose(served["probabilities"].numpy(), want, atol=1e-5, rtol=0)
    assert served["labels"].numpy()[0].tolist() == [l.encode() for l in _ORDER]
    assert [l.decode() for l in served["predicted_label"].numpy()] == [
        _ORDER[k] for k in want.argmax(axis=1)]


@pytest.mark.slow
def test_folder_of_an_earlier_version_works_with_the_flags(csv_run, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(str(csv_run["out"] / "best"), str(old))
    for name in ("bert_config.json", "vocab.txt", "model_settings.json"):
        os.remove(str(old / name))
    argv = ["--init_checkpoint=%s" % old, "--data_dir=%s" % csv_run["data"], "--do_predict",
            "--predict_batch_size=16", "--output_dir=%s" % (tmp_path / "out")]
    with pytest.raises(ValueError, match=r"--task_name is required"):
        rc.run(_fv(argv))
    rc.run(_fv(_common(tmp_path) + argv + ["--task_name=csv"]))
    assert read_tsv_floats(tmp_path / "out" / "test_results.tsv").shape == (15, 3)


# ---------------------------------------------------------------------------
# The README's plugged-in processor, from the command line
# ---------------------------------------------------------------------------

def readme_processor():
    """The my_tasks.py example of the README, as it is printed there."""
    with open(str(REPO_ROOT / "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return re.search(r'```python\n("""my_tasks\.py:.*?)```', readme, re.S).group(1)


@pytest.mark.slow
def test_readme_processor_from_the_command_line(tmp_path, monkeypatch, caplog):
    # The README's command line (relative paths from the folder it runs in), parsed and run in
    # this process; the same --processor in a real process: test_user_processor_exits.py.
    source = readme_processor()
    assert 20 <= len(source.splitlines()) <= 40
    write_text(tmp_path / "plugins" / "my_tasks.py", source)
    rng = random.Random(4)
    for split, size in (("train", 24), ("dev", 8)):
        for label, sentiment in (("neg", "negative"), ("pos", "positive")):
            for i in range(size):
                write_text(tmp_path / "reviews" / split / label / ("%d.txt" % i),
                           _review(rng, sentiment))
    tests = [_review(rng, s) for s in ("positive", "negative", "negative")]
    for i, text in enumerate(tests):
        write_text(tmp_path / "reviews" / "test" / ("%d.txt" % i), text)
    out = tmp_path / "out"
    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.INFO, logger="absl"):
        rc.run(_fv(["--processor=plugins/my_tasks.py:FolderProcessor", "--task_name=reviews",
                    "--data_dir=reviews", "--output_dir=out", "--notrim_padding"] + (
                        _common(tmp_path) + _TRAIN_FLAGS)))
    assert any(r.getMessage().startswith("  eval_accuracy = ") for r in caplog.records)
    result = read_eval_results(out / "eval_results.txt")
    print("plugged-in FolderProcessor: eval_accuracy = %s (chance 0.5)"
          % result["eval_accuracy"])
    assert float(result["eval_accuracy"]) >= 0.9
    assert (out / "label_list.txt").read_text() == "neg\npos\n"
    # The export of the output dir alone (with the model's flags) needs no --task_name and
    # no --processor: the word labels come from out/.
    model = _export(tmp_path, out, tmp_path / "model")
    served = model.signatures["serving_text_a"](text_a=tf.constant(tests))
    want = read_tsv_floats(out / "test_results.tsv")
    np.testing.assert_allclose(served["probabilities"].numpy(), want, atol=1e-5, rtol=0)
    assert served["labels"].numpy()[0].tolist() == [b"neg", b"pos"]
    assert [l.decode() for l in served["predicted_label"].numpy()] == [
        ["neg", "pos"][k] for k in want.argmax(axis=1)]


# ---------------------------------------------------------------------------
# Regression and multi-label from files: trained, evaluated, predicted; best/ keeps the kind
# ---------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("task,task_type,labels", [
    ("tsv", "regression", ["0.5", "4.25", "2", "3"]),
    ("jsonl", "multilabel", [["screen"], [], ["price", "screen"], ["price"]]),
])
def test_regression_and_multilabel_files_train_evaluate_and_predict(tmp_path, task, task_type,
                                                                    labels):
    rng = random.Random(5)
    rows = [(_review(rng, "positive"), labels[i % 4]) for i in range(16)]
    for split in ("train", "dev", "test"):
        if task == "tsv":
            lines = ["sentence\tscore"] + ["%s\t%s" % (t.replace("\n", " "), l) for t, l in rows]
        else:
            lines = [json.dumps({"sentence": t, "score": l}) for t, l in rows]
        write_text(tmp_path / "data" / ("%s.%s" % (split, task)), "\n".join(lines) + "\n")
    out = tmp_path / "out"
    # One layer and fixed-length batches (one trace of each step): the plumbing is tested.
    rc.run(_fv(_common(tmp_path, num_hidden_layers=1) + [
        "--task_name=%s" % task, "--task_type=%s" % task_type, "--data_dir=%s" % (
            tmp_path / "data"), "--output_dir=%s" % out, "--text_a_column=sentence",
        "--label_column=score", "--do_train", "--do_eval", "--do_predict",
        "--train_batch_size=8", "--num_train_epochs=1", "--eval_batch_size=16",
        "--predict_batch_size=16", "--notrim_padding", "--eval_every_n_steps=2",
        "--best_metric=eval_loss"]))
    result = read_eval_results(out / "eval_results.txt")
    assert json.loads((out / "classifier_task.json").read_text())["task_type"] == task_type
    # best/ (its one evaluation: the last step) carries the kind of head an export of it alone
    # reads. (Such exports: test_best_folder_alone_predicts_and_exports, of best/ with
    # --init_checkpoint alone; the multilabel and regression heads' SavedModels from their
    # folders alone, each answering as do_predict: tests/test_parity_matrix.py.)
    assert json.loads((out / "best" / "classifier_task.json").read_text()) == json.loads(
        (out / "classifier_task.json").read_text())
    assert checkpoints.checkpoint_step(str(out / "best")) == 2
    want = read_tsv_floats(out / "test_results.tsv")
    if task_type == "regression":
        assert {"eval_pearson", "eval_spearman"} <= set(result)
        assert not (out / "label_list.txt").exists()
        assert want.shape == (16, 1)
        check_test_predictions(out, ["test-%d" % n for n in range(16)], kind="regression")
    else:
        assert "eval_micro_f1" in result
        assert (out / "label_list.txt").read_text() == "price\nscreen\n"
        assert (out / "best" / "label_list.txt").read_text() == "price\nscreen\n"
        assert want.shape == (16, 2) and ((want >= 0) & (want <= 1)).all()  # sigmoids
        check_test_predictions(out, ["test-%d" % n for n in range(16)], ["price", "screen"],
                               kind="multilabel")


# ---------------------------------------------------------------------------
# Bad input: one error naming the file, line or flag; nothing written
# ---------------------------------------------------------------------------

_PLUGINS = {
    "broken.py": "import os\n\nVALUE = os.path.join('a', undefined_name)\n",
    "syntax.py": "class P(object:\n    pass\n",
    "plain.py": "class NotAProcessor(object):\n    pass\n",
    "partial.py": ("from run_classifier import DataProcessor\n\n\nclass OnlyTrain(DataProcessor):"
                   "\n    def get_labels(self):\n        return ['a']\n\n"
                   "    def get_train_examples(self, data_dir):\n        return []\n"),
    "raising.py": ("from run_classifier import DataProcessor\n\n\nclass P(DataProcessor):\n"
                   "    def get_labels(self):\n        return {}['labels']\n\n"
                   "    def get_train_examples(self, data_dir):\n        return []\n"),
    "none_text.py": ("from run_classifier import DataProcessor, InputExample\n\n\n"
                     "class P(DataProcessor):\n    def get_labels(self):\n"
                     "        return ['a', 'b']\n\n"
                     "    def get_train_examples(self, data_dir):\n"
                     "        return [InputExample('train-0', 'x', None, 'a'),\n"
                     "                InputExample('train-1', None, None, 'b')]\n"),
}


@pytest.mark.parametrize("train,extra,message", [
    ("id,text,sentiment\n1,fine,positive\n", [],
     r"train.csv, line 1: no column 'label' .*the header's columns are 'id', 'text', "
     r"'sentiment'"),
    ("great phone,positive\nawful,negative\n", [],
     r"train.csv, line 1: expected a header row naming the columns text, label"),
    ('text,label\n"so good,\nreally",positive\nbad\n', [],
     r"train.csv, line 4: 1 field, the header has 2"),
    (None, ["--do_eval"], r"dev.csv, line 3: label 'Positive' is not one of the task's "
                          r"labels \['negative', 'positive'\]"),
    ("text,label\ngood,4.5\nbad,low\n", ["--task_type=regression"],
     r"train.csv, line 3: label 'low' is not a number"),
    ("text,label\n", [], r"train.csv: no examples"),
    (None, ["--processor=plugins/missing.py:P"],
     r"--processor=plugins/missing.py:P: no such file plugins/missing.py"),
    (None, ["--processor=plugins/plain.py:NotAProcessor"],
     r"--processor=plugins/plain.py:NotAProcessor: NotAProcessor is not a DataProcessor"),
    (None, ["--processor=plugins/plain.py:Other"],
     r"plugins/plain.py has no Other \(its classes: NotAProcessor\)"),
    (None, ["--processor=plugins/broken.py:P"],
     r"--processor=plugins/broken.py:P: import failed at .*plugins/broken.py, line 3: "
     r"NameError: name 'undefined_name' is not defined"),
    (None, ["--processor=plugins/syntax.py:P"],
     r"import failed at .*plugins/syntax.py, line 1: SyntaxError: "),
    (None, ["--processor=plugins/plain.py"],
     r"--processor=plugins/plain.py: expected FILE.py:CLASS or MODULE:CLASS"),
    (None, ["--processor=no_such_module_29:P"],
     r"no module named 'no_such_module_29' on the Python path"),
    (None, ["--processor=plugins/partial.py:OnlyTrain", "--do_predict"],
     r"OnlyTrain does not define get_test_examples \(needed by --do_predict\)"),
    (None, ["--processor=plugins/raising.py:P"],
     r"^--processor=plugins/raising.py:P: get_labels\(\) failed at .*plugins/raising.py, "
     r"line 6: KeyError: 'labels'$"),
    (None, ["--processor=plugins/none_text.py:P", "--train_batch_size=1"],
     r"^example train-1: text_a is None, not a text \(every example needs a text_a\)$"),
    (None, ["--task_name=sst-2", "--label_column=y"],
     r"--label_column is read by --task_name=csv, tsv and jsonl only, not --task_name=sst-2"),
    (None, ["--task_name=sst-2", "--labels_file=x.txt"],
     r"--labels_file is read by --task_name=csv, tsv, jsonl and multilabel only"),
    (None, ["--task_name=sst-2", "--task_type=regression"],
     r"--task_type=regression, but --task_name=sst-2 is a classification task"),
    (None, ["--task_name=sst-2", "--threshold=0.3"],
     r"--threshold is read by multi-label tasks only, not --task_name=sst-2"),
    (None, ["--task_type=regression", "--labels_file=x.txt"],
     r"--labels_file: a --task_type=regression task has no labels"),
    (None, ["--task_name=nope"], r"unknown --task_name 'nope'; known tasks: cola, .*"
                                 r"--processor=FILE.py:CLASS"),
])
def test_bad_input_is_one_error_naming_file_line_or_flag(tmp_path, monkeypatch, train, extra,
                                                         message):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name, source in _PLUGINS.items():
        write_text(tmp_path / "plugins" / name, source)
    data = tmp_path / "data"
    write_text(data / "train.csv", train or "text,label\ngood,positive\nbad,negative\n")
    write_text(data / "dev.csv", "text,label\nfine,positive\nmeh,Positive\n")
    write_text(data / "train.tsv", "sentence\tlabel\ngood\t1\n")
    argv = _common(tmp_path) + ["--task_name=csv", "--data_dir=%s" % data, "--do_train",
                                "--output_dir=%s" % (tmp_path / "out")]
    with pytest.raises(ValueError, match=message):
        rc.run(_fv(argv + extra))
    assert not os.path.exists(str(tmp_path / "out")) or not os.listdir(str(tmp_path / "out"))


def test_predict_only_run_whose_saved_labels_differ(tmp_path):
    # An output dir of a built-in task whose label_list.txt names other labels (a model
    # trained on another task): a clear error, not predictions under the wrong names.
    data = tmp_path / "data"
    write_text(data / "test.tsv", "index\tsentence\n0\tgood\n")
    write_text(tmp_path / "ckpt" / "label_list.txt", "negative\npositive\n")
    argv = _common(tmp_path) + ["--task_name=sst-2", "--data_dir=%s" % data, "--do_predict",
                                "--init_checkpoint=%s" % (tmp_path / "ckpt"),
                                "--output_dir=%s" % (tmp_path / "out")]
    with pytest.raises(ValueError, match=r"ckpt/label_list.txt lists the labels negative, "
                                         r"positive, the model's outputs in order; "
                                         r"--task_name=sst-2 has 0, 1 \(output 0: 'negative' "
                                         r"there, '0' here\)$"):
        rc.run(_fv(argv))
    assert os.listdir(str(tmp_path / "out")) == []
    # The export refuses the same mismatch; without --task_name it needs the task file.
    export = _common(tmp_path) + ["--model_type=classifier", "--init_checkpoint=%s" % (
        tmp_path / "ckpt"), "--export_dir=%s" % (tmp_path / "model")]
    with pytest.raises(ValueError, match=r"ckpt/label_list.txt lists the labels negative, "
                                         r"positive, the model's outputs in order; "
                                         r"--task_name=sst-2 has 0, 1"):
        esm.run(flags_common.parse_flags(esm.define_flags, export + ["--task_name=sst-2"]))
    with pytest.raises(ValueError, match=r"needs the model's labels, and --init_checkpoint=.* "
                                         r"has no classifier_task.json"):
        esm.run(flags_common.parse_flags(esm.define_flags, export))
    assert not (tmp_path / "model").exists()
