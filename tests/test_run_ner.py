"""run_ner.py: training, evaluation and tagging runs, label lists, errors, the loss."""
import itertools
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import modeling
import run_ner
import tokenization
from bert_tf2 import flags_common
from bert_tf2 import heads
from bert_tf2.tasks import ner_data
from bert_tf2.trainer import checkpoints
from conftest import REPO_ROOT
from conftest import HANG_GUARD_SECONDS
from test_ner_data import IOB1, IOB2, VOCAB, write
from test_training import absl_records  # noqa: F401  (a fixture)
import two_cpu_checks

TINY = {"vocab_size": len(VOCAB), "hidden_size": 32, "num_hidden_layers": 2,
        "num_attention_heads": 2, "intermediate_size": 64, "hidden_act": "gelu",
        "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
        "max_position_embeddings": 64, "type_vocab_size": 2, "initializer_range": 0.02}

WORDS_ONLY = "".join(line.split()[0] + "\n" if line.strip() else "\n"
                     for line in IOB2.splitlines())


def flag_list(tmp_path, data_dir, out, *extra):
    """run_ner's command line for the tiny model, as a list of flags."""
    config = write(tmp_path / "bert_config.json", json.dumps(TINY))
    vocab = write(tmp_path / "vocab.txt", "\n".join(VOCAB) + "\n")
    return ["--data_dir=%s" % data_dir, "--vocab_file=%s" % vocab,
            "--bert_config_file=%s" % config, "--output_dir=%s" % out,
            "--max_seq_length=16", "--doc_stride=8", "--train_batch_size=4",
            "--eval_batch_size=3", "--predict_batch_size=3", "--learning_rate=3e-3",
            "--seed=1", "--save_checkpoints_steps=1000"] + list(extra)


def run(tmp_path, data_dir, out, *extra):
    """Runs run_ner in this process; returns its settings_lib.Result."""
    return run_ner.run(flags_common.parse_flags(
        run_ner.define_flags, flag_list(tmp_path, data_dir, out, *extra)))


def write_splits(tmp_path):
    """data/train.txt and dev.txt (IOB2) and test.txt (its words alone); returns data/."""
    data = tmp_path / "data"
    write(data / "train.txt", IOB2)
    write(data / "dev.txt", IOB2)
    write(data / "test.txt", WORDS_ONLY)
    return data


# The module's one trained tagger: evaluated during training (every 10 steps, best/ by
# eval_f1) and at the end, tagging the test split.
TRAINED_FLAGS = ("--do_train", "--do_eval", "--do_predict", "--num_train_epochs=40",
                 "--eval_every_n_steps=10", "--best_metric=eval_f1")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One tiny run trained (evaluated during training), evaluated and tagged; (tmp_path,
    data, out, result). A copy of what it wrote is in tmp_path/as_written (a later test
    rewrites out/test_predictions.txt): as_written(trained, name) reads it."""
    tmp_path = tmp_path_factory.mktemp("ner")
    data = write_splits(tmp_path)
    out = tmp_path / "out"
    result = run(tmp_path, data, out, *TRAINED_FLAGS)
    for name in ("eval_predictions.txt", "test_predictions.txt", "eval_results.txt"):
        write(tmp_path / "as_written" / name, (out / name).read_text())
    return tmp_path, data, out, result


@pytest.fixture(scope="module")
def untrained(tmp_path_factory):
    """A model never trained (--seed=2; the tags of the `trained` run, from a labels file)
    evaluated on the dev sentences and tagging their words four times over (a softmax
    head): (tmp_path, data, labels file, output folder, result)."""
    tmp_path = tmp_path_factory.mktemp("untrained")
    data = tmp_path / "data"
    write(data / "dev.txt", IOB2)
    write(data / "test.txt", "\n".join([WORDS_ONLY] * 4))
    labels = write(tmp_path / "labels.txt", "O\nB-LOC\nB-ORG\nB-PER\nI-ORG\nI-PER\n")
    out = tmp_path / "softmax"
    result = run(tmp_path, data, out, "--do_eval", "--do_predict", "--labels_file=%s" % labels,
                 "--seed=2")
    return tmp_path, data, labels, out, result


def as_written(trained, name):
    """The text of the file `name` as the `trained` run wrote it."""
    return (trained[0] / "as_written" / name).read_text()


def read_results(path):
    """eval_results.txt as {key: float}."""
    pairs = (line.split(" = ") for line in path.read_text().splitlines())
    return {key: float(value) for key, value in pairs}


@pytest.mark.slow
def test_a_tiny_model_learns_the_tags_and_writes_conll_files(trained, untrained):
    _, _, out, result = trained
    results = read_results(out / "eval_results.txt")
    assert results["global_step"] == 30  # 3 sentences x 40 epochs / 4
    assert results["eval_f1"] == pytest.approx(float(result.metrics["eval_f1"]))
    assert results["eval_f1"] > 0.9 and results["eval_accuracy"] > 0.9
    assert results["eval_loss"] < 0.3
    assert sorted(results) == sorted(
        ["eval_f1", "eval_precision", "eval_recall", "eval_accuracy", "eval_loss",
         "global_step", "eval_f1_LOC", "eval_f1_ORG", "eval_f1_PER"])
    # The same dev sentences and tags, never trained: the loss and F1 it started from.
    _, _, labels, folder, never = untrained
    assert open(labels).read() == (out / "label_list.txt").read_text()
    assert never.metrics["eval_loss"] > 1.0 and never.metrics["eval_f1"] < 0.5
    assert not (folder / "label_list.txt").exists()  # only training saves
    # Each input line once, a predicted tag appended to each token line.
    lines = (out / "eval_predictions.txt").read_text().splitlines()
    assert len(lines) == len(IOB2.splitlines())
    for line, source in zip(lines, IOB2.splitlines()):
        assert line == source if not source else line.rsplit(" ", 1)[0] == source
    test_lines = (out / "test_predictions.txt").read_text().splitlines()
    assert [line.split()[0] for line in test_lines if line] == WORDS_ONLY.split()
    assert [line.split()[-1] for line in test_lines if line] == [
        line.split()[-1] for line in lines if line]
    assert (out / "label_list.txt").read_text().split() == [
        "O", "B-LOC", "B-ORG", "B-PER", "I-ORG", "I-PER"]
    assert (out / "train.tf_record").exists() and (out / "predict.tf_record").exists()


@pytest.mark.slow
def test_trimmed_and_full_padding_write_the_same_files(trained):
    # The trained run evaluated and tagged with --trim_padding (the default): its last
    # checkpoint again with --notrim_padding writes the same files. A new output_dir and a
    # checkpoint's path: the labels and the step come from the checkpoint's folder (as
    # test_eval_in_a_new_dir_takes_labels_and_step_from_the_checkpoint's folder path).
    tmp_path, data, out, _ = trained
    ckpt = str(sorted(out.glob("model.ckpt-*.index"))[-1])[:-len(".index")]
    folder = tmp_path / "padding_notrim"
    run(tmp_path, data, folder, "--do_eval", "--do_predict", "--init_checkpoint=" + ckpt,
        "--notrim_padding")
    assert read_results(folder / "eval_results.txt")["global_step"] == 30
    full = {f: (folder / f).read_text() for f in ("eval_predictions.txt", "test_predictions.txt")}
    full["results"] = read_results(folder / "eval_results.txt")
    trim = {f: as_written(trained, f) for f in ("eval_predictions.txt", "test_predictions.txt")}
    trim["results"] = read_results(tmp_path / "as_written" / "eval_results.txt")
    assert trim["eval_predictions.txt"] == full["eval_predictions.txt"]
    assert trim["test_predictions.txt"] == full["test_predictions.txt"]
    assert sorted(trim["results"]) == sorted(full["results"])
    for key, value in full["results"].items():
        assert trim["results"][key] == pytest.approx(value, abs=1e-5), key


@pytest.mark.slow
def test_eval_in_a_new_dir_takes_labels_and_step_from_the_checkpoint(trained):
    # The folder's path here; a checkpoint's path: test_trimmed_and_full_padding_write_the_
    # same_files (its eval in a new dir, its numbers the trained run's).
    tmp_path, data, out, result = trained
    folder = tmp_path / "from_folder"
    again = run(tmp_path, data, folder, "--do_eval", "--init_checkpoint=%s" % out)
    assert again.metrics["eval_f1"] == pytest.approx(float(result.metrics["eval_f1"]), abs=1e-6)
    assert read_results(folder / "eval_results.txt")["global_step"] == 30


@pytest.mark.slow
def test_predict_alone_from_the_trained_output_dir(trained):
    tmp_path, data, out, _ = trained
    before = (out / "test_predictions.txt").read_text()
    (out / "test_predictions.txt").unlink()
    # A tagged file to predict: its tags (here IOB1, unseen) are not used.
    other = write(tmp_path / "iob1" / "test.txt", IOB1)
    assert run(tmp_path, data, out, "--do_predict").metrics == {}
    assert (out / "test_predictions.txt").read_text() == before
    run(tmp_path, data, out, "--do_predict", "--predict_file=%s" % other)
    lines = (out / "test_predictions.txt").read_text().splitlines()
    assert len(lines) == len(IOB1.splitlines())
    assert lines[0] == "-DOCSTART- -X- -X- O O" and lines[2].startswith("John NNP B-NP I-PER ")
    assert len(lines[2].split()) == 5


@pytest.mark.slow
def test_feature_based_trains_the_lstm_and_leaves_the_encoder(tmp_path, absl_records):
    # Also --class_weights=balanced (the weights of the training file's tags; they do not
    # interact with the head's kind).
    data = tmp_path / "data"
    write(data / "train.txt", IOB2)
    out = tmp_path / "out"
    run(tmp_path, data, out, "--do_train", "--num_train_epochs=4", "--feature_based",
        "--layers=-1,-2", "--lstm_units=8", "--save_checkpoints_steps=1",
        "--class_weights=balanced")
    # Balanced over the 14 words' tags: O 6 times -> 14 / (6 * 6); B-ORG once -> 14 / 6.
    assert any(r.getMessage() == "Class weights (--class_weights=balanced): O 0.3889, "
               "B-LOC 0.7778, B-ORG 2.333, B-PER 1.167, I-ORG 2.333, I-PER 2.333"
               for r in absl_records.records)
    first = checkpoints.CheckpointContents(str(out / "model.ckpt-1"))
    last = checkpoints.CheckpointContents(str(out))
    assert last.path.endswith("model.ckpt-3")
    names = last.model_names()
    lstm = [n for n in names if n.startswith("bilstm_")]
    assert any("bilstm_1" in n for n in lstm) and "tagger/output_weights" in names
    # Two layers concatenated: the first LSTM reads 2 x 32 features, the second 2 x 8.
    kernels = sorted(n for n in lstm if n.endswith("/kernel") and "recurrent" not in n)
    assert [last.get(n).shape for n in kernels] == [(64, 32)] * 2 + [(16, 32)] * 2
    encoder = [n for n in names if n.startswith("bert/")]
    assert encoder and all(np.array_equal(first.get(n), last.get(n)) for n in encoder)
    for name in ["tagger/output_weights"] + kernels:
        assert not np.array_equal(first.get(name), last.get(name)), name


def test_bad_input_and_flags_are_errors_before_any_work(tmp_path):
    data = tmp_path / "data"
    write(data / "train.txt", IOB2)
    write(data / "dev.txt", IOB2)
    out = tmp_path / "out"
    cases = [
        (["--do_eval"], "no label list"),
        (["--do_train", "--train_file=%s" % write(tmp_path / "one.txt", "John B-PER\nSmith\n")],
         r"one\.txt, line 2: 'Smith' has one column"),
        (["--do_train", "--do_eval", "--eval_file=%s" % write(tmp_path / "d1.txt", "John\n")],
         r"d1\.txt, line 1: 'John' has one column"),
        (["--do_train", "--do_eval",
          "--eval_file=%s" % write(tmp_path / "d2.txt", "John B-PER\n\nParis B-GPE\n")],
         r"d2\.txt, line 3: tag 'B-GPE' was not seen in training"),
        (["--do_train", "--train_file=%s" % write(tmp_path / "e.txt", "-DOCSTART- O\n\n")],
         r"e\.txt: no sentences"),
        (["--do_train", "--labels_file=%s" % write(tmp_path / "l.txt", "O\nB-PER\n")],
         r"train\.txt, line 1: tag 'B-PER'|train\.txt, line 2: tag 'I-PER'"),
        (["--do_train", "--feature_based", "--layers=5"], "--layers: 5 is not a layer"),
        (["--do_train", "--feature_based", "--layers=-1,x"], "--layers must be comma"),
        (["--do_train", "--feature_based", "--lstm_units=0"], "--lstm_units=0 must be >= 1"),
        (["--do_train", "--max_seq_length=128"], "--max_seq_length=128 is longer"),
        (["--do_train", "--doc_stride=0"], "--doc_stride=0 must be >= 1"),
        (["--do_train", "--crf", "--class_weights=balanced"],
         "--class_weights=balanced has no effect with --crf"),
        (["--do_train", "--crf_tag_scheme=iob2"], "--crf_tag_scheme=iob2 has no effect without "
                                                  "--crf"),
        (["--do_train", "--crf", "--crf_learning_rate=0"], "--crf_learning_rate=0 must be > 0"),
        # CoNLL-2003's original IOB1: auto takes none, iob2 asked for is an error.
        (["--do_train", "--crf", "--crf_tag_scheme=iob2",
          "--train_file=%s" % write(tmp_path / "iob1.txt", IOB1)],
         r"--crf_tag_scheme=iob2: .*iob1\.txt, line 3: I-PER starts a sentence breaks IOB2 "
         r"and has no B- label"),
        ([], "nothing to do"),
    ]
    for extra, message in cases:
        with pytest.raises(ValueError, match=message):
            run(tmp_path, data, out, *extra)
    with pytest.raises(ValueError, match="--train_file or --data_dir is required"):
        run(tmp_path, "", out, "--do_train")
    assert not (out / "label_list.txt").exists() and not list(out.glob("model.ckpt*"))
    # An output_dir trained on other tags is not resumed with these.
    write(out / "label_list.txt", "O\nB-PER\nI-PER\n")
    with pytest.raises(ValueError, match="holds the label_list.txt of other tags"):
        run(tmp_path, data, out, "--do_train")


def test_training_on_from_a_folder_keeps_its_tag_order(tmp_path):
    # The output layer of --init_checkpoint's tagger has its tags in label_list.txt's order
    # (here not the training file's O-first-then-sorted order): a run that trains on from
    # it keeps that order, and a --labels_file in another order is one error (before the
    # fix: the tags re-sorted from the data, the old output layer kept, silently wrong).
    from bert_tf2.tasks import ner_task  # pylint: disable=import-outside-toplevel
    folder = tmp_path / "first"
    write(folder / "label_list.txt", "O\nI-PER\nB-PER\n")
    train = write(tmp_path / "train.txt", "John B-PER\nSmith I-PER\nlives O\n\n")

    def labels(**given):
        return ner_task.labels_of(run_ner.Settings(
            train_file=train, vocab_file="v", bert_config_file="c", do_train=True,
            init_checkpoint=str(folder), output_dir=str(tmp_path / "second"), **given),
            ner_data.read_conll(train))
    assert labels() == ["O", "I-PER", "B-PER"]
    other = write(tmp_path / "sorted.txt", "O\nB-PER\nI-PER\n")
    with pytest.raises(ValueError, match=r"^%s lists the labels O, I-PER, B-PER, the model's "
                                         r"outputs in order; --labels_file=.*sorted.txt has O, "
                                         r"B-PER, I-PER \(output 1: 'I-PER' there, 'B-PER' "
                                         r"here\): the output layer of --init_checkpoint is in "
                                         r"that order"
                       % re.escape(str(folder / "label_list.txt"))):
        labels(labels_file=other)
    # Tags the head does not have: one error naming both lists.
    write(folder / "label_list.txt", "O\nB-PER\n")
    with pytest.raises(ValueError, match=r"^--init_checkpoint=.*first holds the label_list.txt "
                                         r"of other tags \(O B-PER\) than .*train.txt's "
                                         r"\(O B-PER I-PER\)"):
        labels()


def test_command_line_error_is_one_line_and_exit_1(tmp_path):
    data = tmp_path / "data"
    write(data / "train.txt", "John B-PER\n\nMary B-PER\nSmith\n")
    argv = flag_list(tmp_path, data, tmp_path / "out", "--do_train")
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "run_ner.py")] + argv,
                          capture_output=True, text=True, timeout=HANG_GUARD_SECONDS)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last == "error: %s, line 4: 'Smith' has one column; expected the word first and " \
                   "its tag last" % (data / "train.txt")
    assert "Traceback" not in proc.stderr


# The loss on two replicas equals the loss on one device over the same global batch,
# when the replicas hold different numbers of labelled pieces (run_ner's losses in
# tests/two_cpu_checks.py's child, which has the two logical CPUs).
def test_loss_is_the_mean_over_the_global_batch_on_any_number_of_replicas(tmp_path_factory):
    got = two_cpu_checks.results(tmp_path_factory)["ner_loss"]
    assert len(got["replicas"]) == 2
    # training.Runner scales each replica's loss by 1 / replicas and sums the gradients.
    assert np.mean(got["replicas"]) == pytest.approx(got["one"], rel=1e-5)
    # Against numpy: the weighted mean cross-entropy over the 12 labelled pieces.
    rng = np.random.RandomState(0)
    logits = rng.normal(size=(4, 5, 3))
    labels = rng.randint(0, 3, size=(4, 5))
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    picked = np.take_along_axis(log_probs, labels[..., None], -1)[..., 0]
    mask = np.zeros((4, 5))
    mask[0, :1] = mask[1, :2] = mask[2, :] = mask[3, 1:] = 1
    assert got["one"] == pytest.approx(-(picked * mask).sum() / mask.sum(), rel=1e-4)
    # A per-replica mean would weigh replica 0's 3 pieces like replica 1's 9.
    assert abs(np.mean(got["replicas"]) - np.mean(
        [-(picked * mask)[:2].sum() / 3, -(picked * mask)[2:].sum() / 9])) > 1e-3
    # --crf: the mean negative log-likelihood over the 3 windows with words, however split.
    assert np.mean(got["crf_replicas"]) == pytest.approx(got["crf_one"], rel=1e-5)
    transitions = rng.normal(size=(3, 3))
    nll = []
    for i in (0, 2, 3):
        words, tags = logits[i][mask[i] > 0], labels[i][mask[i] > 0]
        scores = {seq: _sequence_score(words, transitions, seq)
                  for seq in itertools.product(range(3), repeat=len(words))}
        log_norm = np.log(np.sum(np.exp(list(scores.values()))))
        nll.append(log_norm - scores[tuple(tags)])
    assert got["crf_one"] == pytest.approx(np.mean(nll), rel=1e-4)


@pytest.mark.slow
def test_eval_during_training_writes_its_history_and_best(trained):
    # (--class_weights=balanced: test_feature_based_trains_the_lstm_and_leaves_the_encoder.)
    tmp_path, data, out, result = trained
    history = [json.loads(line) for line in (out / "eval_history.jsonl").read_text().splitlines()]
    assert [r["global_step"] for r in history] == [10, 20, 30]
    assert set(history[0]) == {"global_step", "eval_precision", "eval_recall", "eval_f1",
                               "eval_accuracy", "eval_loss", "eval_f1_LOC", "eval_f1_ORG",
                               "eval_f1_PER"}
    assert history[-1]["eval_f1"] == float(str(result.metrics["eval_f1"]))
    best = max(history, key=lambda r: r["eval_f1"])  # the first of equals stays
    assert checkpoints.checkpoint_step(str(out / "best")) == best["global_step"]
    assert result.best_checkpoint == str(out / "best" / ("model.ckpt-%d" % best["global_step"]))
    # best/ carries the label list: tagging from it alone works.
    assert (out / "best" / "label_list.txt").read_text() == (out / "label_list.txt").read_text()
    # best/ is a whole model folder: config, vocab, length and windows come from there.
    assert json.loads((out / "best" / "model_settings.json").read_text())["runner"] == "run_ner"
    alone = run_ner.run(flags_common.parse_flags(run_ner.define_flags, [
        "--data_dir=%s" % data, "--output_dir=%s" % (tmp_path / "alone"), "--do_eval",
        "--eval_batch_size=3",
        "--init_checkpoint=%s" % (out / "best")]))
    assert float(str(alone.metrics["eval_f1"])) == best["eval_f1"]
    assert read_results(tmp_path / "alone" / "eval_results.txt")["global_step"] == best[
        "global_step"]


@pytest.mark.slow
def test_run_of_settings_twice_in_one_process(trained):
    # Python's way in: run(Settings(...)), no absl parsing; the module's trained run (the
    # flags' way, earlier in this process) trained again: the same numbers and tags,
    # nothing left behind.
    tmp_path, data, _, first = trained
    settings = run_ner.Settings(
        data_dir=str(data), vocab_file=str(tmp_path / "vocab.txt"),
        bert_config_file=str(tmp_path / "bert_config.json"),
        output_dir=str(tmp_path / "unused"), max_seq_length=16, doc_stride=8,
        train_batch_size=4, eval_batch_size=3, predict_batch_size=3, learning_rate=3e-3,
        seed=1, save_checkpoints_steps=1000, num_train_epochs=40.0, eval_every_n_steps=10,
        best_metric="eval_f1", do_train=True, do_eval=True, do_predict=True)
    out = tmp_path / "second"
    result = run_ner.run(settings.replace(output_dir=str(out)))
    assert settings.output_dir == str(tmp_path / "unused")  # the caller's settings untouched
    assert result.output_dir == str(out) and result.global_step == 30  # 3 x 40 / 4
    assert result.best_checkpoint == first.best_checkpoint.replace(
        str(first.output_dir), str(out))
    assert sorted(result.outputs) == sorted(first.outputs)
    assert {"eval_predictions", "eval_records", "eval_results", "predict_records",
            "test_predictions", "train_records"} <= set(result.outputs)
    for path in result.outputs.values():
        assert path.startswith(str(out)) and os.path.exists(path), path
    written = read_results(out / "eval_results.txt")
    assert sorted(result.metrics) == sorted(written)
    for key, value in written.items():
        assert float(str(result.metrics[key])) == pytest.approx(value), key
    for key, value in read_results(tmp_path / "as_written" / "eval_results.txt").items():
        assert written[key] == pytest.approx(value, abs=1e-5), key
    assert (out / "test_predictions.txt").read_text() == as_written(
        trained, "test_predictions.txt")


def _sequence_score(logits, transitions, tags):
    """A tag sequence's CRF score: its unary scores [W, N] plus its transitions."""
    return sum(logits[t, tag] for t, tag in enumerate(tags)) + sum(
        transitions[a, b] for a, b in zip(tags[:-1], tags[1:]))


def _brute_force_tags(logits, transitions):
    """The best tag sequence of unary scores [W, N] by enumerating every one (each
    sequence scored as _sequence_score does, all of them at once; the first of equals)."""
    every = np.array(list(itertools.product(range(transitions.shape[0]),
                                            repeat=len(logits))), np.int64)
    unary = sum(logits[t, every[:, t]] for t in range(len(logits)))
    moves = sum(transitions[every[:, t], every[:, t + 1]] for t in range(len(logits) - 1))
    return tuple(every[np.argmax(unary + moves)].tolist())


@pytest.mark.slow
def test_crf_predictions_are_the_best_sequences_of_the_model(trained_ner_crf, tmp_path,
                                                             absl_records):
    # The run's shared --crf folder (tests/trained.py: this module's TINY model and flags,
    # 40 epochs on IOB2's sentences given in memory; tests/test_in_memory.py evaluates the
    # same from files), only read here.
    data = write_splits(tmp_path)  # test.txt: WORDS_ONLY, the words the folder tagged
    out = trained_ner_crf / "out"
    results = read_results(out / "eval_results.txt")
    assert results["global_step"] == 30
    assert results["eval_f1"] > 0.9 and results["eval_loss"] < 0.5
    saved = json.loads((out / "model_settings.json").read_text())
    # IOB2 training sentences: --crf_tag_scheme=auto chose iob2.
    assert saved["crf"] is True and saved["crf_tag_scheme"] == "iob2"
    # A later run takes --crf and the scheme from the folder, and says where it came from
    # (its tags: below).
    absl_records.clear()
    run(tmp_path, data, tmp_path / "again", "--do_predict", "--init_checkpoint=%s" % out)
    assert "--crf tag scheme: iob2 (the model folder's)" in [
        r.getMessage() for r in absl_records.records]
    contents = checkpoints.CheckpointContents(str(out))
    transitions = contents.get("crf/transitions")
    # --crf_learning_rate's default, 100 x --learning_rate: the transitions have moved.
    assert transitions.shape == (6, 6) and np.abs(transitions).max() > 0.5
    # Viterbi over each window's words: the best of every sequence of the model's word
    # logits + transitions (the test file's windows, as run_ner made them), the ones
    # IOB2 forbids scored FORBIDDEN lower (the checkpoint holds the learned scores).
    config = modeling.BertConfig.from_dict(TINY)
    model = heads.BertTagger(config, 6, crf=True)
    model(heads.dummy_features(), training=False)
    checkpoints.load_checkpoint(model, str(out))
    labels = ner_data.read_labels(str(out / "label_list.txt"))
    transition_penalty, start_penalty = heads.crf_constraints(labels, "iob2")
    transitions = transitions + transition_penalty
    test_file = ner_data.read_conll(str(data / "test.txt"), require_tags=False)
    features = ner_data.convert_file(test_file, labels, 16, 8, tokenization.FullTokenizer(
        str(tmp_path / "vocab.txt"), do_lower_case=True))
    logits = model({"input_ids": np.array([f.input_ids for f in features]),
                    "input_mask": np.array([f.input_mask for f in features]),
                    "segment_ids": np.array([f.segment_ids for f in features])})["logits"]
    predicted = []
    for feature, window in zip(features, logits.numpy()):
        positions = sorted(feature.word_at)
        words = window[positions]
        words[0] += start_penalty * feature.starts_sentence
        ids = np.zeros(16, np.int32)
        ids[positions] = _brute_force_tags(words, transitions)
        predicted.append(ids)
    want = ner_data.sentence_predictions(test_file, features, predicted, labels)
    lines = (out / "test_predictions.txt").read_text().split("\n\n")
    got = [[line.split()[-1] for line in block.splitlines()] for block in lines
           if block.strip()]
    assert got == want
    # The later run of the folder decoded with the CRF without being told (model_settings;
    # the folder as output_dir: test_predict_alone_from_the_trained_output_dir).
    assert (tmp_path / "again" / "test_predictions.txt").read_text().split("\n\n") == lines


@pytest.mark.slow
def test_crf_from_a_softmax_checkpoint_starts_at_zero_transitions(trained, absl_records):
    tmp_path, data, out, _ = trained
    folder = tmp_path / "crf_of_softmax"
    run(tmp_path, data, folder, "--do_predict", "--init_checkpoint=%s" % out, "--crf")
    # Zero transitions: Viterbi picks each word's best tag, the softmax's (the tags the
    # trained run wrote from the same checkpoint).
    assert (folder / "test_predictions.txt").read_text() == as_written(
        trained, "test_predictions.txt")
    assert any("without crf/transitions" in r.getMessage() and r.levelname == "WARNING"
               for r in absl_records.records)


def _breaking_iob2(tags):
    """The I-X tags of a sentence whose previous tag (O at its start) is neither B-X nor
    I-X (benchmarks/reproduce/conll.py's count)."""
    return sum(tag.startswith("I-") and previous not in ("B-" + tag[2:], tag)
               for previous, tag in zip(["O"] + tags[:-1], tags))


@pytest.mark.slow
def test_crf_tags_of_an_untrained_model_never_break_iob2(untrained, tmp_path, absl_records):
    # A model never trained (random logits, zero transitions): its softmax tags (the
    # module's untrained run) break IOB2; the same with --crf --crf_tag_scheme=iob2:
    # Viterbi takes the best valid sequence.
    _, data, labels, softmax, _ = untrained
    absl_records.clear()
    run(tmp_path, data, tmp_path / "crf", "--do_predict", "--labels_file=%s" % labels,
        "--seed=2", "--crf", "--crf_tag_scheme=iob2")
    broken = {}
    for head, out in (("softmax", softmax), ("crf", tmp_path / "crf")):
        blocks = (out / "test_predictions.txt").read_text().split("\n\n")
        broken[head] = sum(_breaking_iob2([line.split()[-1] for line in block.splitlines()])
                           for block in blocks if block.strip())
    assert broken["softmax"] > 3 and broken["crf"] == 0
    assert any(r.getMessage() == "--crf tag scheme: iob2 (given)" for r in absl_records.records)
