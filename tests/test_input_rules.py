"""The input-handling contract, one test per rule over every runner it applies to.

What the reference runs, we run; what it crashes on or silently corrupts ends with
one ValueError naming the file, line or flag (cli.run_cli prints it as one
line, exit code 1), and no output is left half-written. Each rule is enforced in one
place, named in the test's docstring.
"""
import importlib
import json
import os
import shutil

import pytest
from absl import flags
from absl.flags import _helpers as flags_helpers
import tensorflow as tf

import registry_lists
import create_pretraining_data
import create_vocab
import extract_features
import run_classifier
import run_multiple_choice
import run_ner
import run_pretraining
import run_squad
from bert_tf2 import fileutil
from bert_tf2 import flags_common
from bert_tf2 import loaders
from bert_tf2 import input_pipeline
from bert_tf2.tasks import classifier_run
from bert_tf2.tasks import ner_task
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
    return _files(tmp_path)


def _files(tmp_path):
    """The files of the `files` fixture, written into tmp_path."""
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


def _model_flags(files, out, max_seq_length=16):
    """The vocabulary, config, output folder and length flags every fine-tuner here takes."""
    return ["--vocab_file=%s" % files["vocab"], "--bert_config_file=%s" % files["config"],
            "--output_dir=%s" % out, "--max_seq_length=%d" % max_seq_length]


def _classifier(files, out, *extra):
    return run_classifier, ["--task_name=sst-2", "--data_dir=%s" % files["glue"]] + (
        _model_flags(files, out) + list(extra))


def _ner(files, out, *extra):
    return run_ner, ["--data_dir=%s" % files["ner"]] + _model_flags(files, out) + list(extra)


def _multiple_choice(files, out, *extra):
    return run_multiple_choice, ["--task_name=jsonl", "--data_dir=%s" % files["swag"]] + (
        _model_flags(files, out) + list(extra))


def _squad(files, out, *extra):
    return run_squad, ["--train_file=%s" % files["squad"], "--predict_file=%s" % files["squad"],
                       "--max_query_length=4", "--doc_stride=8"] + (
                           _model_flags(files, out, max_seq_length=24) + list(extra))


_FINE_TUNERS = {"run_classifier": _classifier, "run_ner": _ner,
                "run_multiple_choice": _multiple_choice, "run_squad": _squad}


def _run(module, argv):
    return module.run(flags_common.parse_flags(module.define_flags, argv))


# ---------------------------------------------------------------------------
# Rule: a misspelt or unknown flag is refused, never ignored (absl; under
# create_pretraining_data --runner, pretraining_beam.split_args: tested in
# test_pretraining_beam.py for every flag).
# ---------------------------------------------------------------------------

# Every root face (found on disk: tests/registry_lists.py).
_SCRIPTS = [importlib.import_module(name) for name in registry_lists.root_faces()]


@pytest.mark.parametrize("module", _SCRIPTS, ids=lambda m: m.__name__)
def test_every_misspelt_flag_is_refused(module, monkeypatch):
    # The refusal is checked, not absl's "Did you mean" hint added to its message: a
    # Damerau-Levenshtein distance in Python from each typo to every flag (about 3 s of
    # run_squad's 50 flags, most of the test's time), left out.
    monkeypatch.setattr(flags_helpers, "get_flag_suggestions", lambda attempt, names: [])
    fv = flags.FlagValues()
    module.define_flags(fv)
    typos = [name[:-2] + name[-1] + name[-2] for name in fv]
    for typo in [t for t in typos if t not in fv]:
        with pytest.raises(flags.UnrecognizedFlagError, match=typo):
            fv(["prog", "--%s=1" % typo])


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
    # 8 examples make 1 batch of 16 in 2 epochs: the plain path trains, so does accumulation.
    fv = flags_common.parse_flags(run_classifier.define_flags, [
        "--num_accumulation_steps=2", "--train_batch_size=16", "--num_train_epochs=2"])
    assert training.epoch_steps(8, fv) == (1, 0)


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

@pytest.fixture(scope="module")
def trained_classifier(tmp_path_factory):
    """The sst-2 classifier of `files`' data trained as test_tiny_data_trains_with_every_flag's
    plain run (2 epochs of 8 examples, batch 16: one step): its files and its output folder.
    A test that changes the folder works on a copy."""
    root = tmp_path_factory.mktemp("trained_classifier")
    trained = _files(root)
    module, argv = _classifier(trained, root / "out", *_tiny_flags("run_classifier"))
    _run(module, argv)
    return trained, root / "out"


@pytest.mark.slow
def test_empty_test_split_writes_an_empty_complete_output(trained_classifier, tmp_path):
    trained, model = trained_classifier
    files = dict(trained, glue=str(tmp_path / "sst"))
    shutil.copytree(trained["glue"], files["glue"])
    write_text(os.path.join(files["glue"], "test.tsv"), "index\tsentence\n")
    module, argv = _classifier(files, tmp_path / "out", "--do_predict",
                               "--init_checkpoint=%s" % model)
    _run(module, argv)
    assert open(tmp_path / "out" / "test_results.tsv").read() == ""
    # extract_features of an empty text, into a folder that does not exist yet: made.
    empty = write_text(tmp_path / "empty.txt", "")
    output = tmp_path / "new" / "sub" / "f.jsonl"
    assert _run(extract_features, [
        "--input_file=%s" % empty, "--output_file=%s" % output,
        "--vocab_file=%s" % files["vocab"], "--bert_config_file=%s" % files["config"],
        "--init_checkpoint=%s" % model, "--max_seq_length=16", "--layers=-1"]).outputs == {
            "output_file": str(output)}
    assert open(output).read() == ""


@pytest.mark.slow
def test_squad_file_without_articles_writes_empty_predictions(files, tmp_path):
    empty = write_text(tmp_path / "empty.json", json.dumps({"version": "1.1", "data": []}))
    module, argv = _squad(files, tmp_path / "out", "--do_predict")
    argv = [a for a in argv if not a.startswith("--predict_file")] + [
        "--predict_file=%s" % empty]
    assert _run(module, argv).metrics == {}
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
# a vocabulary without BERT's tokens (loaders.load_tokenizer), a sequence
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
    tokenizer = loaders.load_tokenizer(files["vocab"], True)
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
def test_stale_checkpoint_of_another_task(trained_classifier, tmp_path):
    files, trained = trained_classifier
    out = tmp_path / "out"
    shutil.copytree(trained, out)
    module, argv = _classifier(files, out, "--do_train", "--num_train_epochs=1",
                               "--train_batch_size=4")
    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    sts = tmp_path / "sts"
    write_text(sts / "train.tsv", header + "".join("%d\tg\tf\t2012\t0\ts\ts\tthe cat\ta dog\t%d\n"
                                                % (i, i % 5) for i in range(8)))
    argv = [a.replace("--task_name=sst-2", "--task_name=sts-b").replace(
        "--data_dir=%s" % files["glue"], "--data_dir=%s" % sts) for a in argv]
    # The task the first run left (classifier_tasks.check_labels) names the clash first...
    with pytest.raises(ValueError, match=r"classifier_task.json is of a classification model; "
                                         r"--task_name=sts-b is a regression task"):
        _run(module, argv)
    # ...and in an output dir written before that file existed, the checkpoint does.
    os.remove(str(out / "classifier_task.json"))
    os.remove(str(out / "label_list.txt"))
    with pytest.raises(ValueError, match=r"--output_dir=.* holds the checkpoint .*model\.ckpt-1 "
                                         r"of a different model"):
        _run(module, argv)


# ---------------------------------------------------------------------------
# Rule: data the plain path trains on trains with every flag that shapes the training
# data or its steps, however tiny (fewer examples than a batch): training.epoch_steps
# (accumulation: at least one step), training.fine_tune (--group_by_length keeps the
# reference's batches when no epoch holds one).
# ---------------------------------------------------------------------------

def _pretraining(files, out, *extra):
    """run_pretraining on the few records (packed rows with --packed_sequences) of a corpus."""
    corpus = write_text(os.path.join(files["glue"], "corpus.txt"),
                        "the cat sat .\na dog sat .\n\nthe dog sat .\nthe cat .\n")
    packed = "--packed_sequences" in extra
    records = os.path.join(files["glue"], "packed.tfrecord" if packed else "plain.tfrecord")
    if not os.path.exists(records):
        _run(create_pretraining_data, [
            "--input_file=%s" % corpus, "--output_file=%s" % records,
            "--vocab_file=%s" % files["vocab"], "--max_seq_length=16", "--dupe_factor=1",
            "--max_predictions_per_seq=2"] + (["--pack_sequences"] if packed else []))
    return run_pretraining, ["--input_file=%s" % records, "--output_dir=%s" % out,
                             "--bert_config_file=%s" % files["config"], "--max_seq_length=16",
                             "--max_predictions_per_seq=2", "--num_train_steps=1",
                             "--num_warmup_steps=0"] + list(extra)


# Per runner: epochs for one plain step of 16 (8 classifier and 8 multiple-choice examples,
# 2 NER sentences, 1 SQuAD question; pretraining runs --num_train_steps=1), and every flag
# that shapes the training data or counts its steps. Accumulating 2 micro-batches of 16
# makes a plan of 0 steps: one step is trained instead.
_TINY_TRAINING = {
    "run_classifier": (2, ["--group_by_length", "--long_text=windows"]),
    "run_ner": (8, ["--group_by_length", "--document_context"]),
    "run_multiple_choice": (2, ["--group_by_length"]),
    "run_squad": (16, []),
    "run_pretraining": (None, ["--packed_sequences"]),
}


def _tiny_flags(runner):
    """The training flags of the plain run of `runner` in test_tiny_data_trains_with_every_flag."""
    epochs = _TINY_TRAINING[runner][0]
    return ["--do_train", "--train_batch_size=16", "--seed=1"] + (
        ["--num_train_epochs=%d" % epochs] if epochs else [])


@pytest.mark.slow
@pytest.mark.parametrize("runner", sorted(_TINY_TRAINING))
def test_tiny_data_trains_with_every_flag(files, tmp_path, runner, request):
    """Fewer examples than a batch: the plain path trains one step, so does the run with
    every flag that shapes the data (and --num_accumulation_steps, --deterministic_data).
    (run_classifier's plain run is the module's trained_classifier.)"""
    flags = _TINY_TRAINING[runner][1]
    make = dict(_FINE_TUNERS, run_pretraining=_pretraining)[runner]
    every = flags + ["--num_accumulation_steps=2", "--deterministic_data"]
    folders = {}
    if runner == "run_classifier":
        folders["plain"] = request.getfixturevalue("trained_classifier")[1]
    for name, extra in (("plain", []), ("every_flag", every)):
        if name not in folders:
            folders[name] = tmp_path / name
            module, argv = make(files, folders[name], *(_tiny_flags(runner) + extra))
            _run(module, argv)
    for folder in folders.values():
        assert tf.train.latest_checkpoint(str(folder)).endswith("model.ckpt-1")


# ---------------------------------------------------------------------------
# Rule: every writer makes its output folder and probes it before the work, and never
# writes over one of its inputs (fileutil.prepare_output_file / make_parent_folder /
# prepare_output_dir); a text input is read through before the model loads
# (fileutil.check_utf8), its errors naming the flag, the file and the line.
# ---------------------------------------------------------------------------

def _extract(files, tmp_path, *extra, checkpoint="missing"):
    """extract_features' argv; --init_checkpoint=missing shows what fails before the model."""
    text = write_text(tmp_path / "in.txt", "the cat sat .\na dog ||| the cat\n")
    return extract_features, ["--input_file=%s" % text, "--vocab_file=%s" % files["vocab"],
                              "--bert_config_file=%s" % files["config"], "--layers=-1",
                              "--init_checkpoint=%s" % checkpoint,
                              "--max_seq_length=16"] + list(extra)


def test_every_writer_makes_and_probes_its_output_folder_first(files, tmp_path):
    write_text(tmp_path / "a_file", "keep")
    blocked = str(tmp_path / "a_file" / "sub" / "out")
    text = write_text(tmp_path / "corpus.txt", "the cat sat .\n\na dog .\n")
    cases = [
        _extract(files, tmp_path, "--output_file=%s" % blocked),
        (create_vocab, ["--input_file=%s" % text, "--output_file=%s" % blocked,
                        "--vocab_size=200"]),
        (create_pretraining_data, ["--input_file=%s" % text, "--output_file=%s" % blocked,
                                   "--vocab_file=%s" % files["vocab"]]),
        _classifier(files, blocked, "--do_train"),
    ]
    before = sorted(os.listdir(tmp_path))
    for module, argv in cases:
        with pytest.raises(ValueError, match=r"^--output_(file|dir)=.*a_file/sub/out is not "
                                             r"writable"):
            _run(module, argv)
    assert sorted(os.listdir(tmp_path)) == before
    assert open(tmp_path / "a_file").read() == "keep"


# (extract_features making a missing output folder: the extract run of
# test_empty_test_split_writes_an_empty_complete_output, on the module's trained folder.)

def test_an_output_never_replaces_an_input(files, tmp_path):
    text = write_text(tmp_path / "in.txt", "the cat sat .\n")
    for module, argv in (_extract(files, tmp_path, "--output_file=%s" % text),
                         (create_vocab, ["--input_file=%s" % (tmp_path / "*.txt"),
                                         "--output_file=%s" % text, "--vocab_size=200"])):
        write_text(text, "the cat sat .\n")
        with pytest.raises(ValueError, match=r"^--output_file=.*in\.txt is also a file of "
                                             r"--input_file"):
            _run(module, argv)
        assert open(text).read() == "the cat sat .\n"


def test_a_text_input_that_is_not_utf8_is_named_before_the_model(files, tmp_path):
    module, argv = _extract(files, tmp_path, "--output_file=%s" % (tmp_path / "o.jsonl"))
    with open(tmp_path / "in.txt", "wb") as f:
        f.write(b"the cat\n\xc3\xa9t\xc3\xa9\n\xff dog\n")
    with pytest.raises(ValueError, match=r"^--input_file=\S*in\.txt, line 3: not valid UTF-8 "
                                         r"\(byte 0xff\)$"):
        _run(module, argv)
    assert not (tmp_path / "o.jsonl").exists()


def test_check_utf8_across_blocks(tmp_path, monkeypatch):
    """A character split between two blocks is read whole; the line number counts every
    block's lines."""
    monkeypatch.setattr(fileutil, "_CHECK_BLOCK", 3)
    path = write_text(tmp_path / "t.txt", "ab\u00e9\u4e2d\nx\n\u00e9\u00e9\n")
    fileutil.check_utf8(path, "--input_file")
    with open(path, "ab") as f:
        f.write(b"ok\nok\xe4\xb8\n")
    with pytest.raises(ValueError, match=r"t\.txt, line 5: not valid UTF-8 \(byte 0xe4\)"):
        fileutil.check_utf8(path, "--input_file")
    with pytest.raises(ValueError, match=r"^--input_file=\S*none\.txt: no such file$"):
        fileutil.check_utf8(str(tmp_path / "none.txt"), "--input_file")


# ---------------------------------------------------------------------------
# Rule: a flag the others leave without effect is refused, never silently dropped
# (Settings.refuse_unused); another --long_text mode's or task's flag, which one
# command line for every mode may carry, is warned.
# ---------------------------------------------------------------------------

def test_flags_that_cannot_apply_are_refused(files, tmp_path):
    cases = [
        (_extract(files, tmp_path, "--output_file=%s" % (tmp_path / "o.jsonl"), "--normalize"),
         r"^--normalize has no effect without sentence vectors \(--pooling\)"),
        (_classifier(files, tmp_path / "out", "--do_train", "--threshold=0.3"),
         r"^--threshold is read by multi-label tasks only"),
        (_ner(files, tmp_path / "out", "--do_train", "--lstm_units=8"),
         r"^--lstm_units=8 has no effect without --feature_based"),
    ]
    before = sorted(os.listdir(tmp_path))
    for (module, argv), message in cases:
        with pytest.raises(ValueError, match=message):
            _run(module, argv)
    assert sorted(os.listdir(tmp_path)) == before


def test_flags_another_step_mode_or_device_reads_are_warned(files, tmp_path, caplog):
    """One command line may serve every step, mode or task of a sweep, and the reference's
    own flags were accepted: these are warned (the run goes on)."""
    out = tmp_path / "out"
    cases = [
        (_classifier(files, out, "--do_eval", "--head_tokens=4", "--xnli_language=de",
                     "--group_by_length", "--num_accumulation_steps=2"),
         ["--group_by_length has no effect without --do_train",
          "--num_accumulation_steps=2 has no effect without --do_train",
          "--head_tokens=4 has no effect with long_text mode truncate (it is read by "
          "--long_text=head_tail)", "--xnli_language=de has no effect without "
          "--task_name=xnli"]),
        (_ner(files, out, "--do_eval", "--train_file=x.txt"),
         ["--train_file=x.txt has no effect without --do_train"]),
        (_squad(files, out, "--do_predict", "--null_score_diff_threshold=1.5"),
         ["--train_file=%s has no effect without --do_train" % files["squad"],
          "--null_score_diff_threshold=1.5 has no effect without --version_2_with_negative"]),
        (_extract(files, tmp_path, "--output_file=%s" % (tmp_path / "o.jsonl"), "--use_tpu"),
         ["--use_tpu has no effect here: extract_features runs on the local devices "
          "(CPU/GPU)"]),
    ]
    checks = {run_classifier: classifier_run.check, run_ner: ner_task.check_settings}
    for (module, argv), warnings in cases:
        caplog.clear()
        check = checks[module] if module in checks else module._check_settings
        check(module.Settings.of(flags_common.parse_flags(module.define_flags, argv)))
        warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert warned == warnings


# ---------------------------------------------------------------------------
# Rule: the evaluation-during-training flags are checked before any work
# (periodic_eval.check_settings, via loaders.check_fine_tuning; run_squad's own
# _check_settings), a --best_metric the run does not report before training where its
# metrics are known (periodic_eval.check_metric).
# ---------------------------------------------------------------------------

def _dev_flag(runner):
    return "--do_predict" if runner == "run_squad" else "--do_eval"


@pytest.mark.parametrize("runner", sorted(_FINE_TUNERS))
@pytest.mark.parametrize("extra, message", [
    (["--early_stopping_patience=2"], r"--early_stopping_patience needs --eval_every_n_steps"),
    (["--early_stopping_patience=0"], r"--early_stopping_patience needs --eval_every_n_steps"),
    (["--keep_best_only"], r"--keep_best_only needs --eval_every_n_steps"),
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
    ("run_classifier", "eval_accuracy, eval_f1, eval_loss, eval_precision, eval_recall, loss"),
    ("run_ner", "eval_accuracy, eval_f1, eval_f1_X, eval_loss, eval_precision, eval_recall"),
    ("run_multiple_choice", "eval_accuracy, eval_loss"),
    ("run_squad", "exact_match, f1, total")])
def test_unknown_best_metric_is_named_before_any_work(files, tmp_path, runner, reported):
    module, argv = _FINE_TUNERS[runner](files, tmp_path / "out", "--do_train",
                                        _dev_flag(runner), "--eval_every_n_steps=1",
                                        "--best_metric=eval_f2", "--train_batch_size=2",
                                        "--num_train_epochs=1")
    with pytest.raises(ValueError, match=r"--best_metric=eval_f2 is not a metric this run "
                                         r"reports \(checked before training\); it reports: "
                                         + reported + "$"):
        _run(module, argv)
    # Before the model loads or any file is written (the folder may have been made).
    out = tmp_path / "out"
    assert not out.exists() or os.listdir(out) == []


def test_patience_without_best_metric_watches_eval_loss_named_before_any_work(files, tmp_path):
    module, argv = _squad(files, tmp_path / "out", "--do_train", "--do_predict",
                          "--eval_every_n_steps=1", "--early_stopping_patience=2")
    with pytest.raises(ValueError, match=r"--early_stopping_patience watches eval_loss without "
                                         r"--best_metric, but eval_loss is not a metric this "
                                         r"run reports .*; it reports: exact_match, f1, total$"):
        _run(module, argv)
    assert os.listdir(tmp_path / "out") == []


# ---------------------------------------------------------------------------
# Rule: --class_weights is 'balanced' or one positive number per label, for single-label
# classification and tagging only (class_weights.from_settings).
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
                             ("multilabel", "ml", "a multi-label task")):
        module, argv = _classifier(dict(files, glue=str(tmp_path / data)), tmp_path / "out",
                                   "--do_train", "--class_weights=balanced")
        argv = [a.replace("--task_name=sst-2", "--task_name=" + task) for a in argv]
        with pytest.raises(ValueError, match=r"--class_weights is not supported for %s"
                                             % what):
            _run(module, argv)
