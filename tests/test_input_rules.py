"""The input-handling contract, one test per rule over every runner it applies to.

What the reference runs, we run; what it crashes on or silently corrupts ends with
one ValueError naming the file, line or flag (flags_common.run_cli prints it as one
line, exit code 1), and no output is left half-written. Each rule is enforced in one
place, named in the test's docstring.
"""
import json
import os

import pytest

import create_pretraining_data
import create_vocab
import extract_features
import run_classifier
import run_multiple_choice
import run_ner
import run_pretraining
import run_squad
from bert_tf2 import flags_common
from bert_tf2 import input_pipeline
from bert_tf2.trainer import training
from conftest import write_text

_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "a", "dog", "."]
_CONFIG = {"vocab_size": len(_VOCAB), "hidden_size": 16, "num_hidden_layers": 1,
           "num_attention_heads": 2, "intermediate_size": 32, "hidden_act": "gelu",
           "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
           "max_position_embeddings": 32, "type_vocab_size": 2, "initializer_range": 0.02}


@pytest.fixture
def files(tmp_path):
    """A vocabulary, a config and one small data set per runner."""
    f = {"vocab": write_text(tmp_path / "vocab.txt", "\n".join(_VOCAB) + "\n"),
         "config": write_text(tmp_path / "bert_config.json", json.dumps(_CONFIG)),
         "glue": str(tmp_path / "sst"), "ner": str(tmp_path / "ner"),
         "swag": str(tmp_path / "mc"), "squad": write_text(tmp_path / "squad.json", json.dumps(
             {"version": "1.1", "data": [{"title": "t", "paragraphs": [{
                 "context": "the cat sat .", "qas": [{"id": "q1", "question": "the cat ?",
                                                      "answers": [{"text": "sat",
                                                                   "answer_start": 8}]}]}]}]}))}
    rows = "".join("the cat sat .\t%d\n" % (i % 2) for i in range(8))
    for name in ("train", "dev"):
        write_text(os.path.join(f["glue"], name + ".tsv"), "sentence\tlabel\n" + rows)
    write_text(os.path.join(f["glue"], "test.tsv"), "index\tsentence\n0\tthe dog .\n")
    for name in ("train", "dev", "test"):
        write_text(os.path.join(f["ner"], name + ".txt"), "the O\ncat B-X\n\na O\ndog B-X\n")
    lines = "".join(json.dumps({"context": "the cat", "endings": ["sat", "dog"], "label": 1})
                    + "\n" for _ in range(8))
    for name in ("train", "dev", "test"):
        write_text(os.path.join(f["swag"], name + ".jsonl"), lines)
    return f


def _classifier(files, out, *extra):
    return run_classifier, ["--task_name=sst-2", "--data_dir=%s" % files["glue"],
                            "--vocab_file=%s" % files["vocab"],
                            "--bert_config_file=%s" % files["config"],
                            "--output_dir=%s" % out, "--max_seq_length=16"] + list(extra)


def _ner(files, out, *extra):
    return run_ner, ["--data_dir=%s" % files["ner"], "--vocab_file=%s" % files["vocab"],
                     "--bert_config_file=%s" % files["config"], "--output_dir=%s" % out,
                     "--max_seq_length=16"] + list(extra)


def _multiple_choice(files, out, *extra):
    return run_multiple_choice, ["--task_name=jsonl", "--data_dir=%s" % files["swag"],
                                 "--vocab_file=%s" % files["vocab"],
                                 "--bert_config_file=%s" % files["config"],
                                 "--output_dir=%s" % out, "--max_seq_length=16"] + list(extra)


def _squad(files, out, *extra):
    return run_squad, ["--train_file=%s" % files["squad"], "--predict_file=%s" % files["squad"],
                       "--vocab_file=%s" % files["vocab"],
                       "--bert_config_file=%s" % files["config"], "--output_dir=%s" % out,
                       "--max_seq_length=24", "--max_query_length=4", "--doc_stride=8"] + list(
                           extra)


_FINE_TUNERS = {"run_classifier": _classifier, "run_ner": _ner,
                "run_multiple_choice": _multiple_choice, "run_squad": _squad}


def _run(module, argv):
    return module.run(flags_common.parse_flags(module.define_flags, argv))


# ---------------------------------------------------------------------------
# Rule: an epoch is examples / (batch x accumulation) optimizer steps, and a plan that
# trains nothing is an error (training.epoch_steps).
# ---------------------------------------------------------------------------

def test_epoch_steps_count_optimizer_steps_with_accumulation():
    fv = flags_common.parse_flags(run_classifier.define_flags, [
        "--num_accumulation_steps=3", "--train_batch_size=7", "--num_train_epochs=1"])
    assert training.epoch_steps(64, fv) == (3, 0)  # 64 / 21, not 64 / 7 = 9
    fv = flags_common.parse_flags(run_classifier.define_flags, ["--train_batch_size=32"])
    assert training.epoch_steps(640, fv) == (60, 6)  # the reference: int(640/32*3)


@pytest.mark.parametrize("runner", sorted(_FINE_TUNERS))
@pytest.mark.parametrize("extra, message", [
    (["--num_train_epochs=0"], r"--num_train_epochs=0\.0 must be > 0"),
    (["--num_train_epochs=-1"], r"--num_train_epochs=-1\.0 must be > 0"),
    (["--train_batch_size=64", "--num_train_epochs=1"], r"makes 0 optimizer steps"),
])
def test_a_run_that_would_train_nothing_is_an_error(files, tmp_path, runner, extra, message):
    module, argv = _FINE_TUNERS[runner](files, tmp_path / "out", "--do_train", *extra)
    with pytest.raises(ValueError, match=message):
        _run(module, argv)
    assert not os.path.exists(tmp_path / "out" / "train.tf_record")


def test_pretraining_needs_positive_steps(files, tmp_path):
    with pytest.raises(ValueError, match=r"--num_train_steps=0: nothing would be trained"):
        _run(run_pretraining, ["--input_file=x", "--output_dir=%s" % tmp_path,
                               "--bert_config_file=%s" % files["config"], "--do_train",
                               "--num_train_steps=0"])


# ---------------------------------------------------------------------------
# Rule: every batch size is >= 1 (flags_common.check_common, for every script).
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("module, flag", [
    (run_classifier, "train_batch_size"), (run_classifier, "eval_batch_size"),
    (run_squad, "predict_batch_size"), (run_pretraining, "eval_batch_size"),
    (extract_features, "batch_size"), (run_ner, "predict_batch_size"),
    (run_multiple_choice, "train_batch_size")])
def test_batch_sizes_must_be_positive(module, flag):
    with pytest.raises(ValueError, match="--%s=0 must be >= 1" % flag):
        flags_common.parse_flags(module.define_flags, ["--%s=0" % flag])


# ---------------------------------------------------------------------------
# Rule: an output path of the wrong kind is an error naming the flag and is never
# touched (fileutil.prepare_output_dir, fileutil.check_output_file, atomic_open).
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("runner", sorted(_FINE_TUNERS))
def test_output_dir_that_is_a_file(files, tmp_path, runner):
    blocker = write_text(tmp_path / "blocker", "keep")
    module, argv = _FINE_TUNERS[runner](files, blocker, "--do_train")
    with pytest.raises(ValueError, match=r"--output_dir=.*blocker is a file, not a directory"):
        _run(module, argv)
    assert open(blocker).read() == "keep"


def test_output_file_that_is_a_directory(files, tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    text = write_text(tmp_path / "in.txt", "the cat sat .\n")
    cases = [
        (extract_features, ["--input_file=%s" % text, "--output_file=%s" % folder,
                            "--vocab_file=%s" % files["vocab"], "--init_checkpoint=x",
                            "--bert_config_file=%s" % files["config"]]),
        (create_pretraining_data, ["--input_file=%s" % text, "--output_file=%s" % folder,
                                   "--vocab_file=%s" % files["vocab"]]),
        (create_vocab, ["--input_file=%s" % text, "--output_file=%s" % folder,
                        "--vocab_size=20"]),
    ]
    for module, argv in cases:
        with pytest.raises(ValueError, match=r"--output_file=.*folder is a directory"):
            _run(module, argv)
    assert os.listdir(folder) == []


# ---------------------------------------------------------------------------
# Rule: zero examples in gives an empty, complete output or one clear line, never a
# traceback or a half-written file (fileutil.atomic_open writes empty files; each
# runner refuses an empty evaluation set before writing anything).
# ---------------------------------------------------------------------------

@pytest.mark.slow
def test_empty_test_split_writes_an_empty_complete_output(files, tmp_path):
    write_text(os.path.join(files["glue"], "test.tsv"), "index\tsentence\n")
    module, argv = _classifier(files, tmp_path / "out", "--do_train", "--do_predict",
                               "--train_batch_size=4", "--num_train_epochs=1")
    _run(module, argv)
    assert open(tmp_path / "out" / "test_results.tsv").read() == ""
    empty = write_text(tmp_path / "empty.txt", "")
    _run(extract_features, [
        "--input_file=%s" % empty, "--output_file=%s" % (tmp_path / "f.jsonl"),
        "--vocab_file=%s" % files["vocab"], "--bert_config_file=%s" % files["config"],
        "--init_checkpoint=%s" % (tmp_path / "out"), "--max_seq_length=16", "--layers=-1"])
    assert open(tmp_path / "f.jsonl").read() == ""


@pytest.mark.slow
def test_squad_file_without_articles_writes_empty_predictions(files, tmp_path):
    empty = write_text(tmp_path / "empty.json", json.dumps({"version": "1.1", "data": []}))
    module, argv = _squad(files, tmp_path / "out", "--do_predict")
    argv = [a for a in argv if not a.startswith("--predict_file")] + [
        "--predict_file=%s" % empty]
    assert _run(module, argv) is None
    assert json.load(open(tmp_path / "out" / "predictions.json")) == {}


def test_empty_dev_set_is_an_error_before_any_file(files, tmp_path):
    write_text(os.path.join(files["glue"], "dev.tsv"), "sentence\tlabel\n")
    module, argv = _classifier(files, tmp_path / "out", "--do_eval")
    with pytest.raises(ValueError, match=r"--do_eval: the dev set of the --task_name=sst-2 "
                                         r"data in --data_dir=.* has no examples"):
        _run(module, argv)
    assert not os.path.exists(tmp_path / "out" / "eval.tf_record")


# ---------------------------------------------------------------------------
# Rule: a label that would make the loss or a metric NaN is a read-time error naming
# file and line (glue_data's label check).
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf"])
def test_non_finite_regression_labels(tmp_path, value):
    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    row = "0\tg\tf\t2012\t0\ts\ts\tA cat .\tA dog .\t%s\n"
    write_text(tmp_path / "dev.tsv", header + row % "3.2" + row % value)
    with pytest.raises(ValueError, match=r"dev\.tsv, line 3: label '%s' is not a finite"
                                         % value):
        run_classifier.get_processor("sts-b").get_dev_examples(str(tmp_path))


# ---------------------------------------------------------------------------
# Rule: what would crash deep inside TensorFlow or the feature code is named up front:
# a vocabulary without BERT's tokens (flags_common.tokenizer_from_flags), a sequence
# too short for [CLS] A [SEP] B [SEP] (input_pipeline.pack_pair), records written with
# other lengths (input_pipeline.check_record_lengths).
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("runner", sorted(_FINE_TUNERS))
def test_vocab_without_special_tokens(files, tmp_path, runner):
    files = dict(files, vocab=write_text(tmp_path / "v.txt", "\n".join(
        t for t in _VOCAB if t != "[SEP]") + "\n"))
    module, argv = _FINE_TUNERS[runner](files, tmp_path / "out", "--do_train")
    with pytest.raises(ValueError, match=r"--vocab_file=.*v\.txt has no \[SEP\] token"):
        _run(module, argv)


def test_sequences_too_short_for_a_pair(files, tmp_path):
    tokenizer = flags_common.tokenizer_from_flags(flags_common.parse_flags(
        run_classifier.define_flags, ["--vocab_file=%s" % files["vocab"]]))
    for length in (0, 2):
        with pytest.raises(ValueError, match="--max_seq_length=%d is too short" % length):
            input_pipeline.pack_pair(["the"], ["cat"], length, tokenizer)
    assert input_pipeline.pack_pair(["the"], None, 2, tokenizer)[0] == ["[CLS]", "[SEP]"]


def test_pretraining_records_of_other_lengths(files, tmp_path):
    records = str(tmp_path / "r.tfrecord")
    with input_pipeline.RecordWriter(records) as writer:
        writer.write({name: input_pipeline.int_feature([0] * n) for name, n in (
            ("input_ids", 8), ("input_mask", 8), ("segment_ids", 8),
            ("masked_lm_positions", 2), ("masked_lm_ids", 2), ("next_sentence_labels", 1))})
        # (a float feature in a real file; the lengths are what is checked)
    with pytest.raises(ValueError, match=r"r\.tfrecord: the records hold input_ids of length "
                                         r"8, not 16 \(--max_seq_length=16\)"):
        _run(run_pretraining, ["--input_file=%s" % records, "--output_dir=%s" % tmp_path,
                               "--bert_config_file=%s" % files["config"], "--do_eval",
                               "--max_seq_length=16", "--max_predictions_per_seq=2"])


# ---------------------------------------------------------------------------
# Rule: a checkpoint in output_dir of another model is named as the cause
# (training.Runner._restore).
# ---------------------------------------------------------------------------

@pytest.mark.slow
def test_stale_checkpoint_of_another_task(files, tmp_path):
    out = tmp_path / "out"
    module, argv = _classifier(files, out, "--do_train", "--num_train_epochs=1",
                               "--train_batch_size=4")
    _run(module, argv)
    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    sts = tmp_path / "sts"
    write_text(sts / "train.tsv", header + "".join("%d\tg\tf\t2012\t0\ts\ts\tthe cat\ta dog\t%d\n"
                                                % (i, i % 5) for i in range(8)))
    argv = [a.replace("--task_name=sst-2", "--task_name=sts-b").replace(
        "--data_dir=%s" % files["glue"], "--data_dir=%s" % sts) for a in argv]
    with pytest.raises(ValueError, match=r"--output_dir=.* holds the checkpoint .*model\.ckpt-2 "
                                         r"of a different model"):
        _run(module, argv)


# ---------------------------------------------------------------------------
# Rule: the evaluation-during-training flags are checked before any work
# (periodic_eval.check_flags, via flags_common.check_fine_tuning_flags; run_squad's own
# _check_flags), a --best_metric the run does not report before training where its
# metrics are known (periodic_eval.check_metric).
# ---------------------------------------------------------------------------

def _dev_flag(runner):
    return "--do_predict" if runner == "run_squad" else "--do_eval"


@pytest.mark.parametrize("runner", sorted(_FINE_TUNERS))
@pytest.mark.parametrize("extra, message", [
    (["--early_stopping_patience=2"], r"--early_stopping_patience needs --eval_every_n_steps"),
    (["--best_metric=eval_loss"], r"--best_metric needs --eval_every_n_steps"),
    (["--eval_every_n_steps=0"], r"--eval_every_n_steps=0 must be >= 1"),
    (["--eval_every_n_steps=2", "--early_stopping_patience=0"],
     r"--early_stopping_patience=0 must be >= 1"),
])
def test_evaluation_flags_that_cannot_work(files, tmp_path, runner, extra, message):
    module, argv = _FINE_TUNERS[runner](files, tmp_path / "out", "--do_train",
                                        _dev_flag(runner), *extra)
    with pytest.raises(ValueError, match=message):
        _run(module, argv)
    assert not os.path.exists(tmp_path / "out" / "train.tf_record")


@pytest.mark.parametrize("runner", sorted(_FINE_TUNERS))
def test_evaluation_during_training_needs_dev_data(files, tmp_path, runner):
    module, argv = _FINE_TUNERS[runner](files, tmp_path / "out", "--do_train",
                                        "--eval_every_n_steps=2")
    with pytest.raises(ValueError, match=r"--eval_every_n_steps needs %s: the dev data"
                                         % _dev_flag(runner)):
        _run(module, argv)
    module, argv = _FINE_TUNERS[runner](files, tmp_path / "out", _dev_flag(runner),
                                        "--eval_every_n_steps=2")
    with pytest.raises(ValueError, match=r"--eval_every_n_steps evaluates during training: "
                                         r"it needs --do_train"):
        _run(module, argv)


@pytest.mark.parametrize("runner, reported", [
    ("run_classifier", "eval_accuracy, eval_loss, loss"),
    ("run_ner", "eval_accuracy, eval_f1, eval_f1_X, eval_loss, eval_precision, eval_recall"),
    ("run_multiple_choice", "eval_accuracy, eval_loss")])
def test_unknown_best_metric_is_named_before_training(files, tmp_path, runner, reported):
    module, argv = _FINE_TUNERS[runner](files, tmp_path / "out", "--do_train", "--do_eval",
                                        "--eval_every_n_steps=1", "--best_metric=eval_f2",
                                        "--train_batch_size=2", "--num_train_epochs=1")
    with pytest.raises(ValueError, match=r"--best_metric=eval_f2 is not a metric this run "
                                         r"reports \(checked before training\); it reports: "
                                         + reported + "$"):
        _run(module, argv)
    assert not [n for n in os.listdir(tmp_path / "out") if n.startswith("model.ckpt")]


# ---------------------------------------------------------------------------
# Rule: --class_weights is 'balanced' or one positive number per label, for single-label
# classification and tagging only (class_weights.from_flags).
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("runner", ["run_classifier", "run_ner"])
@pytest.mark.parametrize("value, message", [
    ("1,2,3", r"--class_weights=1,2,3 has 3 weights for 2 labels"),
    ("1,0", r"--class_weights=1,0: '0' \(label .*\) must be a positive number"),
    ("1,-2", r"--class_weights=1,-2: '-2' \(label .*\) must be a positive number"),
    ("1,nan", r"--class_weights=1,nan: 'nan' \(label .*\) must be a positive number"),
    ("1,x", r"--class_weights=1,x: 'x' \(label .*\) is not a number"),
])
def test_bad_class_weights(files, tmp_path, runner, value, message):
    module, argv = _FINE_TUNERS[runner](files, tmp_path / "out", "--do_train",
                                        "--class_weights=" + value)
    with pytest.raises(ValueError, match=message):
        _run(module, argv)
    assert not os.path.exists(tmp_path / "out" / "train.tf_record")


def test_class_weights_refused_for_regression_and_multilabel(files, tmp_path):
    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    write_text(tmp_path / "sts" / "train.tsv", header + "0\tg\tf\t2012\t0\ts\ts\tthe\ta\t3\n")
    write_text(tmp_path / "ml" / "train.tsv", "the cat\tx,y\n")
    for task, data, what in (("sts-b", "sts", "a regression task"),
                             ("multilabel", "ml", "--task_name=multilabel")):
        module, argv = _classifier(dict(files, glue=str(tmp_path / data)), tmp_path / "out",
                                   "--do_train", "--class_weights=balanced")
        argv = [a.replace("--task_name=sst-2", "--task_name=" + task) for a in argv]
        with pytest.raises(ValueError, match=r"--class_weights is not supported for %s"
                                             % what):
            _run(module, argv)
