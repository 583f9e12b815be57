"""run_multiple_choice.py and multiple_choice_data.py: SWAG CSV, JSON lines, model, runs."""
import csv
import io
import json
import os
import random

import numpy as np
import pytest
import tensorflow as tf

import modeling
import run_multiple_choice
import tokenization
from bert_tf2 import flags_common
from bert_tf2 import heads
from bert_tf2.tasks import multiple_choice_data as mcd
from conftest import check_test_predictions
from conftest import write_text

_ANIMALS = ["cat", "dog", "bird", "fish", "cow", "pig"]
_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "sat", "ran", "on",
          "mat", "then", "it", ",", ".", "saw", "went", "home"] + _ANIMALS
_TINY = {"vocab_size": len(_VOCAB), "hidden_size": 32, "num_hidden_layers": 2,
         "num_attention_heads": 2, "intermediate_size": 64, "hidden_act": "gelu",
         "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
         "max_position_embeddings": 32, "type_vocab_size": 2, "initializer_range": 0.02}
_HEADER = ["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
           "ending0", "ending1", "ending2", "ending3", "label"]


def _swag_csv(rows, test=False):
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(_HEADER[:-1] if test else _HEADER)
    for i, (sent1, sent2, endings, label) in enumerate(rows):
        row = [str(i), "v%d" % i, "0", sent1 + " " + sent2, sent1, sent2, "gold"] + endings
        writer.writerow(row if test else row + [str(label)])
    return out.getvalue()


def _synthetic(n, seed):
    """The right ending sees the animal of the context; the others run on other animals.

    (The verb alone gives the answer away: a task a tiny model learns from any
    initialisation. Matching the animal alone leaves it on the chance plateau for
    some seeds.)
    """
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        animals = rng.sample(_ANIMALS, 4)
        label = rng.randrange(4)
        rows.append(("the %s sat on the mat ." % animals[label], "then it",
                     [("saw the %s ." if i == label else "ran on the %s .") % a
                      for i, a in enumerate(animals)], label))
    return rows


@pytest.fixture
def tokenizer(tmp_path):
    return tokenization.FullTokenizer(write_text(tmp_path / "vocab.txt", "\n".join(_VOCAB) + "\n"))


def test_swag_csv_with_quoted_commas_and_an_unlabelled_test_split(tmp_path):
    rows = [("The cat, calm, sat.", "Then it", ["ran home.", "sat, again.", "saw a dog.",
                                                 "went."], 2)]
    train = mcd.read_swag(write_text(tmp_path / "train.csv", _swag_csv(rows)))
    assert train == [mcd.Example("0", "The cat, calm, sat.",
                                 ["Then it ran home.", "Then it sat, again.",
                                  "Then it saw a dog.", "Then it went."], 2)]
    test = mcd.read_swag(write_text(tmp_path / "test.csv", _swag_csv(rows, test=True)),
                         is_test=True)
    assert test[0].label is None and test[0].choices == train[0].choices


def test_jsonl_any_fixed_number_of_choices(tmp_path):
    lines = [{"context": "c%d" % i, "question": "q", "endings": ["e%d" % j for j in range(5)],
              "label": i % 5} for i in range(3)]
    examples = mcd.read_jsonl(write_text(tmp_path / "dev.jsonl",
                                     "\n".join(json.dumps(x) for x in lines) + "\n"))
    assert [len(e.choices) for e in examples] == [5, 5, 5]
    assert examples[1].choices[0] == "q e0" and examples[2].label == 2
    three = mcd.read_jsonl(write_text(tmp_path / "t.jsonl", json.dumps(
        {"context": "c", "endings": ["a", "b", "c"]}) + "\n"), is_test=True)
    assert three[0].choices == ["a", "b", "c"] and three[0].label is None


@pytest.mark.parametrize("name, text, message", [
    ("train.csv", _swag_csv([("a", "b", ["x", "", "y", "z"], 0)]), r"line 2: ending1 is empty"),
    ("train.csv", _swag_csv([("a", "b", ["x", "w", "y", "z"], 4)]),
     r"line 2: label '4' is not a choice index"),
    ("train.csv", _swag_csv([("a", "b", ["x", "w", "y", "z"], "one")]),
     r"line 2: label 'one' is not an integer"),
    ("train.jsonl", '{"context": "c", "endings": ["a", "b"], "label": 0}\n{"context": \n',
     r"line 2: not valid JSON"),
    ("train.jsonl", '{"context": "c", "endings": ["a", "b"], "label": 0}\n'
                    '{"context": "c", "endings": ["a", "b", "c"], "label": 0}\n',
     r"line 2: 3 endings, earlier lines have 2"),
    ("train.jsonl", '{"context": "c", "endings": ["a", "b"], "label": 2}\n',
     r"line 1: label 2 is not a choice index"),
    ("train.jsonl", "\n\n", r"no examples"),
])
def test_bad_input_names_file_and_line(tmp_path, name, text, message):
    path = write_text(tmp_path / name, text)
    read = mcd.read_swag if name.endswith(".csv") else mcd.read_jsonl
    with pytest.raises(ValueError, match=name.replace(".", r"\.") + ".*" + message):
        read(path)


def test_each_choice_is_packed_as_a_pair(tokenizer):
    example = mcd.Example("0", "the cat sat on the mat .", ["then it ran", "then it saw a dog"],
                          0)
    ids, mask, segments = mcd.example_features(example, 12, tokenizer)
    tokens = [tokenizer.convert_ids_to_tokens(row[:sum(m)]) for row, m in zip(ids, mask)]
    # 9 positions for the pair: one token at a time from the end of the longer text, b on
    # ties (7 + 3: the context loses "."; 7 + 5: "." and "mat", then "dog" on the tie).
    assert tokens[0] == ["[CLS]", "the", "cat", "sat", "on", "the", "mat", "[SEP]", "then",
                         "it", "ran", "[SEP]"]
    assert tokens[1] == ["[CLS]", "the", "cat", "sat", "on", "the", "[SEP]", "then", "it",
                         "saw", "a", "[SEP]"]
    assert segments[1] == [0] * 7 + [1] * 5


def test_choices_run_as_one_batch_equal_each_choice_alone():
    config = modeling.BertConfig.from_dict(_TINY)
    model = heads.BertMultipleChoice(config)
    rng = np.random.RandomState(0)
    features = {"input_ids": rng.randint(1, len(_VOCAB), [2, 3, 7]).astype(np.int32),
                "input_mask": np.ones([2, 3, 7], np.int32),
                "segment_ids": np.zeros([2, 3, 7], np.int32)}
    logits = model(features)["logits"].numpy()
    assert logits.shape == (2, 3)
    for c in range(3):
        single = {k: v[:, c] for k, v in features.items()}
        pooled = model.bert(single["input_ids"], single["input_mask"],
                            single["segment_ids"])["pooled_output"]
        np.testing.assert_allclose(logits[:, c], model.scorer(pooled).numpy()[:, 0],
                                   atol=1e-5)


def _swag_splits(tmp_path, train, val, test=None):
    """swag/train.csv, val.csv and test.csv (when `test`) of that many synthetic examples
    (seeds 1, 2 and 3); returns swag/."""
    data = tmp_path / "swag"
    write_text(data / "train.csv", _swag_csv(_synthetic(train, 1)))
    write_text(data / "val.csv", _swag_csv(_synthetic(val, 2)))
    if test is not None:
        write_text(data / "test.csv", _swag_csv(_synthetic(test, 3), test=True))
    return data


def _flags(tmp_path, data, out, *extra):
    config = write_text(tmp_path / "bert_config.json", json.dumps(_TINY))
    vocab = write_text(tmp_path / "vocab.txt", "\n".join(_VOCAB) + "\n")
    return flags_common.parse_flags(run_multiple_choice.define_flags, [
        "--task_name=swag", "--data_dir=%s" % data, "--vocab_file=%s" % vocab,
        "--bert_config_file=%s" % config, "--output_dir=%s" % out, "--max_seq_length=20",
        "--train_batch_size=8", "--eval_batch_size=5", "--predict_batch_size=5",
        "--learning_rate=2e-3", "--seed=1", "--save_checkpoints_steps=10000"] + list(extra))


@pytest.mark.slow
def test_a_tiny_model_learns_a_swag_format_task(tmp_path):
    data = _swag_splits(tmp_path, 96, 40, 13)
    result = run_multiple_choice.run(_flags(tmp_path, data, tmp_path / "out", "--do_train",
                                            "--do_eval", "--do_predict",
                                            "--num_train_epochs=25")).metrics
    assert result["eval_accuracy"] >= 0.8  # chance: 0.25
    assert result["global_step"] == 300
    assert "eval_accuracy = " in (tmp_path / "out" / "eval_results.txt").read_text()
    lines = (tmp_path / "out" / "test_results.tsv").read_text().splitlines()
    assert len(lines) == 13
    for line in lines:
        probabilities = [float(v) for v in line.split("\t")]
        assert len(probabilities) == 4 and sum(probabilities) == pytest.approx(1, abs=1e-5)
    # test_predictions.jsonl: SWAG's first (unnamed) column as the id, the choice index.
    check_test_predictions(tmp_path / "out", [str(n) for n in range(13)], kind="choice")


@pytest.mark.slow
def test_trimmed_and_full_padding_write_the_same_files(small_run):
    # small_run evaluated and predicted its last checkpoint with --trim_padding (the
    # default); the same checkpoint again with --notrim_padding writes the same numbers.
    tmp_path, data, first, _ = small_run
    ckpt = tf.train.latest_checkpoint(str(first))
    out = tmp_path / "notrim"
    results = {"notrim": run_multiple_choice.run(_flags(
        tmp_path, data, out, "--do_eval", "--do_predict", "--init_checkpoint=" + ckpt,
        "--notrim_padding")).metrics}
    pairs = (line.split(" = ") for line in (first / "eval_results.txt").read_text().splitlines())
    results["trim"] = {key: float(value) for key, value in pairs}
    rows = {name: np.array([[float(v) for v in line.split("\t")] for line in
                            (folder / "test_results.tsv").read_text().splitlines()])
            for name, folder in (("trim", first), ("notrim", out))}
    assert rows["trim"].shape == rows["notrim"].shape == (7, 4)
    np.testing.assert_allclose(rows["trim"], rows["notrim"], atol=1e-5, rtol=0)
    assert sorted(results["trim"]) == sorted(results["notrim"])
    for key, value in results["notrim"].items():
        assert results["trim"][key] == pytest.approx(float(str(value)), abs=1e-5), key


def test_run_errors(tmp_path):
    data = tmp_path / "swag"
    write_text(data / "train.csv", _swag_csv(_synthetic(4, 1)))
    with pytest.raises(ValueError, match="unknown --task_name 'race'"):
        run_multiple_choice.run(flags_common.parse_flags(
            run_multiple_choice.define_flags,
            ["--task_name=race", "--data_dir=x", "--vocab_file=v", "--bert_config_file=c",
             "--output_dir=%s" % tmp_path, "--do_train"]))
    with pytest.raises(ValueError, match=r"val\.csv: no such file"):
        run_multiple_choice.run(_flags(tmp_path, data, tmp_path / "out", "--do_eval"))


def _settings(tmp_path, data):
    """run(Settings) of the small splits: one epoch (2 steps), evaluated after each step
    (best/ by eval_loss) and at the end, the test split predicted."""
    return run_multiple_choice.Settings(
        task_name="swag", data_dir=str(data),
        vocab_file=write_text(tmp_path / "vocab.txt", "\n".join(_VOCAB) + "\n"),
        bert_config_file=write_text(tmp_path / "bert_config.json", json.dumps(_TINY)),
        output_dir=str(tmp_path / "first"), max_seq_length=20, train_batch_size=8,
        eval_batch_size=5, predict_batch_size=5, learning_rate=2e-3, seed=1,
        save_checkpoints_steps=10000, num_train_epochs=1.0, do_train=True, do_eval=True,
        do_predict=True, eval_every_n_steps=1, best_metric="eval_loss")


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """_settings' run on 16 / 12 / 7 examples: (tmp_path, swag/, the output folder, its
    Result)."""
    tmp_path = tmp_path_factory.mktemp("small_run")
    data = _swag_splits(tmp_path, 16, 12, 7)
    settings = _settings(tmp_path, data)
    return tmp_path, data, tmp_path / "first", run_multiple_choice.run(settings)


@pytest.mark.slow
def test_eval_during_training_writes_the_history_of_eval_results(small_run):
    _, _, out, run = small_run
    result = run.metrics
    history = [json.loads(line) for line in (out / "eval_history.jsonl").read_text().splitlines()]
    assert [sorted(r) for r in history] == [["eval_accuracy", "eval_loss", "global_step"]] * 2
    assert [r["global_step"] for r in history] == [1, 2]
    assert history[-1] == {k: float(str(v)) for k, v in result.items()}
    best = min(history, key=lambda r: r["eval_loss"])
    assert json.loads((out / "best" / "best.json").read_text()) == {
        "metric": "eval_loss", "value": best["eval_loss"], "global_step": best["global_step"]}
    assert run.best_checkpoint == str(out / "best" / ("model.ckpt-%d" % best["global_step"]))


def _check_result(result, out):
    """What run() returned of the run into `out` against what it wrote; its eval results."""
    assert result.output_dir == str(out) and result.global_step == 2  # 16 / 8
    assert sorted(result.outputs) == ["eval_records", "eval_results", "predict_records",
                                      "test_predictions", "test_results", "train_records"]
    for path in result.outputs.values():
        assert path.startswith(str(out)) and os.path.isfile(path), path
    pairs = (line.split(" = ") for line in (out / "eval_results.txt").read_text().splitlines())
    written = {key: float(value) for key, value in pairs}
    assert sorted(result.metrics) == ["eval_accuracy", "eval_loss", "global_step"]
    assert {k: float(str(v)) for k, v in result.metrics.items()} == written
    assert len((out / "test_results.tsv").read_text().splitlines()) == 7
    return written


@pytest.mark.slow
def test_run_of_settings_twice_in_one_process(small_run):
    # small_run's run(Settings) again in this process: the same numbers, nothing left
    # behind, the caller's settings untouched.
    tmp_path, data, first, first_result = small_run
    settings = _settings(tmp_path, data)
    second = tmp_path / "second"
    result = run_multiple_choice.run(settings.replace(output_dir=str(second)))
    assert settings.output_dir == str(first)
    assert result.best_checkpoint == first_result.best_checkpoint.replace(
        str(first), str(second))
    results = {"first": _check_result(first_result, first),
               "second": _check_result(result, second)}
    for key, value in results["first"].items():
        assert results["second"][key] == pytest.approx(value, abs=1e-5), key
    np.testing.assert_allclose(
        *[np.array([[float(v) for v in line.split("\t")] for line in
                    (out / "test_results.tsv").read_text().splitlines()])
          for out in (first, second)], atol=1e-5, rtol=0)
