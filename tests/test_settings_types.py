"""Settings check their values: every field's kind, conversions as the flag's parser
makes them, unknown names, assignment as "given", dataclasses.replace, the spelling of
errors for a Python caller, and one run() at a time across threads."""
import dataclasses
import json
import os
import pathlib
import re
import threading

import numpy as np
import pytest
from absl import app
from absl import flags

import create_pretraining_data
import create_vocab
import convert_hf_checkpoint
import convert_tf1_checkpoint
import export_saved_model
import extract_features
import run_classifier as rc
import run_multiple_choice
import run_ner
import run_pretraining
import run_squad
from bert_tf2 import flags_common
from bert_tf2 import settings as settings_lib
from bert_tf2 import startup
from bert_tf2.trainer import model_folder
from conftest import HANG_GUARD_SECONDS, write_text
from test_training import absl_records  # noqa: F401  (a fixture)

FACES = [create_pretraining_data, create_vocab, convert_hf_checkpoint, convert_tf1_checkpoint,
         export_saved_model, extract_features, rc, run_multiple_choice, run_ner,
         run_pretraining, run_squad]


# ---------------------------------------------------------------------------
# Values by kind
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("settings_class, field, value, message", [
    # bool: True/False, or a str absl reads as one
    (rc.Settings, "do_train", 1, "do_train=1: expected True or False"),
    (rc.Settings, "do_train", 0.0, "do_train=0.0: expected True or False"),
    (rc.Settings, "do_train", "maybe", "do_train='maybe': expected True or False"),
    (rc.Settings, "do_lower_case", None,
     "do_lower_case=None: expected True or False (None only where the default is None)"),
    (run_ner.Settings, "crf", [], "crf=[]: expected True or False"),
    # int: an int, a float with no fraction, a str of an int; never a bool
    (rc.Settings, "max_seq_length", "abc", "max_seq_length='abc': expected an integer"),
    (rc.Settings, "max_seq_length", "32.0", "max_seq_length='32.0': expected an integer"),
    (rc.Settings, "max_seq_length", 32.5, "max_seq_length=32.5: expected an integer"),
    (rc.Settings, "max_seq_length", True, "max_seq_length=True: expected an integer"),
    (rc.Settings, "max_seq_length", None,
     "max_seq_length=None: expected an integer (None only where the default is None)"),
    # float
    (rc.Settings, "learning_rate", "fast", "learning_rate='fast': expected a number"),
    (rc.Settings, "learning_rate", False, "learning_rate=False: expected a number"),
    (rc.Settings, "learning_rate", [3e-5], r"learning_rate=[3e-05]: expected a number"),
    pytest.param(rc.Settings, "learning_rate", 10 ** 400, "learning_rate=100000000000... "
                 "(401 digits): too large for a number (a float's largest is 1.798e+308)",
                 id="learning_rate-10**400"),
    (rc.Settings, "max_seq_length", np.float32(64.5),
     "max_seq_length=np.float32(64.5): expected an integer"),
    (rc.Settings, "max_seq_length", np.bool_(True), "max_seq_length=np.True_: expected an "
     "integer"),
    (rc.Settings, "do_train", np.int64(1), "do_train=np.int64(1): expected True or False"),
    # numpy seeds Python, numpy and TensorFlow (tf_keras.utils.set_random_seed): 32 bits
    (rc.Settings, "seed", 2 ** 33, "seed=8589934592: expected an integer in the range "
     "[0, 4294967295]"),
    (rc.Settings, "seed", -1, "seed=-1: expected an integer in the range [0, 4294967295]"),
    # enum: one of the choices, spelt as on the command line
    (rc.Settings, "dtype", "fp64", "dtype='fp64': expected one of fp32, fp16, bf16"),
    (rc.Settings, "dtype", "BF16", "dtype='BF16': expected one of fp32, fp16, bf16"),
    (rc.Settings, "dtype", 16, "dtype=16: expected one of fp32, fp16, bf16"),
    # str / path
    # data_dir also takes a dict of tables from Python (Settings.PYTHON_VALUES): said too.
    (rc.Settings, "data_dir", 3, "data_dir=3: expected a string or a path, or (from Python) "
     + rc.Settings.PYTHON_VALUES["data_dir"]),
    (rc.Settings, "data_dir", b"/data", "data_dir=b'/data': expected a string or a path, or "
     "(from Python) " + rc.Settings.PYTHON_VALUES["data_dir"]),
    (rc.Settings, "data_dir", ["a", "b"], "data_dir=['a', 'b']: expected a string or a path, "
     "or (from Python) " + rc.Settings.PYTHON_VALUES["data_dir"]),
    (rc.Settings, "output_dir", ["a"], "output_dir=['a']: expected a string or a path"),
    (rc.Settings, "task_name", True, "task_name=True: expected a string or a path"),
    (rc.Settings, "label_column", None,
     "label_column=None: expected a string or a path (None only where the default is None)"),
    # comma lists: a str, or a list / tuple whose items hold no comma
    (extract_features.Settings, "layers", [-1, "a,b"],
     "layers=[-1, 'a,b']: item 'a,b' holds a comma, the separator"),
    (extract_features.Settings, "layers", [-1, None],
     "layers=[-1, None]: item None is not a string, path or number"),
    (extract_features.Settings, "layers", {-1: 1},
     "layers={-1: 1}: expected a string (comma-separated) or a list of strings"),
])
def test_a_wrong_value_names_the_field_and_the_value(settings_class, field, value, message):
    with pytest.raises(ValueError) as raised:
        settings_class(**{field: value})
    assert str(raised.value) == message
    settings = settings_class()  # the same check when assigned, or on replace
    with pytest.raises(ValueError) as assigned:
        setattr(settings, field, value)
    assert str(assigned.value) == message
    assert not settings.given(field)
    assert getattr(settings, field) == settings.default(field)  # unchanged
    with pytest.raises(ValueError, match="^%s=" % field):
        settings.replace(**{field: value})
    with pytest.raises(ValueError, match="^%s=" % field):
        settings.part(field).replace(**{field: value})


@pytest.mark.parametrize("settings_class, field, value, expected", [
    (rc.Settings, "do_train", "false", False),     # a str as absl reads it
    (rc.Settings, "do_train", "True", True),
    (rc.Settings, "do_train", "1", True),
    (rc.Settings, "do_lower_case", "f", False),
    (rc.Settings, "max_seq_length", "32", 32),
    (rc.Settings, "max_seq_length", " 64 ", 64),
    (rc.Settings, "max_seq_length", 32.0, 32),
    (rc.Settings, "max_seq_length", np.int64(48), 48),
    (rc.Settings, "learning_rate", "3e-5", 3e-05),
    (rc.Settings, "learning_rate", 1, 1.0),
    (rc.Settings, "learning_rate", np.float32(0.5), 0.5),
    # numpy's bool and whole floats, as its ints (issue 72: np.bool_ and np.float32(64.0)
    # were refused while np.int64 was taken)
    (rc.Settings, "do_train", np.bool_(True), True),
    (rc.Settings, "do_lower_case", np.bool_(False), False),
    (rc.Settings, "max_seq_length", np.float32(64.0), 64),
    (rc.Settings, "max_seq_length", np.float64(32.0), 32),
    (rc.Settings, "seed", 2 ** 32 - 1, 2 ** 32 - 1),  # numpy's largest seed, still taken
    (rc.Settings, "seed", 0, 0),
    (rc.Settings, "dtype", "bf16", "bf16"),
    (rc.Settings, "data_dir", pathlib.Path("/data/glue"), "/data/glue"),
    (rc.Settings, "seed", None, None),             # Optional: the default is None
    (export_saved_model.Settings, "trim_padding", None, None),
    (export_saved_model.Settings, "pooling", None, None),
    (extract_features.Settings, "layers", [-1, -2], "-1,-2"),
    (extract_features.Settings, "layers", (-4,), "-4"),
    (create_vocab.Settings, "input_file", [pathlib.Path("/a/x.txt"), "/b/*.txt"],
     "/a/x.txt,/b/*.txt"),
    (export_saved_model.Settings, "litert_columns", ["text", "", "label"], "text,,label"),
])
def test_values_are_converted_as_the_flag_would_take_them(settings_class, field, value,
                                                          expected):
    made = settings_class(**{field: value})
    assert getattr(made, field) == expected
    assert type(getattr(made, field)) is type(expected)
    assigned = settings_class()
    setattr(assigned, field, value)
    assert getattr(assigned, field) == expected and type(getattr(assigned, field)) is \
        type(expected)


@pytest.mark.parametrize("face", FACES, ids=lambda m: m.__name__)
def test_a_string_is_what_the_command_line_makes_of_it(face):
    """For each flag, a few texts: the field takes a str as absl parses --name=text."""
    fv = flags.FlagValues()
    face.define_flags(fv)
    texts = ("1", "0", "false", "3e-5", "12", "x", "a,b", "", "-1,-2")
    compared = 0
    for name in (key for key in fv if fv[key].name == key):
        for text in texts:
            try:
                expected = fv[name].parser.parse(text)
            except (ValueError, TypeError):
                with pytest.raises(ValueError, match="^%s=%r: expected " % (name, text)):
                    face.Settings(**{name: text})
                continue
            try:
                made = face.Settings(**{name: text})
            except ValueError as error:  # parsed, but out of the field's range (a batch of 0)
                assert str(error) == "%s=%s must be >= 1" % (name, expected), (name, text)
                continue
            assert getattr(made, name) == expected, (name, text)
            compared += 1
    assert compared > 20


@pytest.mark.parametrize("face", FACES, ids=lambda m: m.__name__)
def test_every_default_passes_its_own_check(face):
    default = face.Settings()
    for f in dataclasses.fields(default):
        value = getattr(default, f.name)
        assert settings_lib.check_value(f.name, default.parser(f.name), value, value) == value


def test_comma_fields_are_the_string_flags_that_say_comma():
    says_comma, strings = set(), set()
    for face in FACES:
        fv = flags.FlagValues()
        face.define_flags(fv)
        for name in (key for key in fv if fv[key].name == key):
            if type(fv[name].parser) is flags.ArgumentParser:  # a plain string flag
                strings.add(name)
                if "comma" in (fv[name].help or "").lower():
                    says_comma.add(name)
    assert settings_lib.COMMA_FIELDS == says_comma and says_comma <= strings


# ---------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------

def test_an_unknown_name_says_which_field_was_meant():
    with pytest.raises(TypeError, match=r"^Settings has no field max_seq_lenght "
                                        r"\(did you mean max_seq_length\?\)$"):
        rc.Settings(max_seq_lenght=64)
    settings = rc.Settings()
    with pytest.raises(AttributeError, match=r"^Settings has no field do_trian "
                                             r"\(did you mean do_train\?\)$"):
        settings.do_trian = True
    with pytest.raises(AttributeError, match=r"did you mean learning_rate\?"):
        settings.learnig_rate  # pylint: disable=pointless-statement
    with pytest.raises(TypeError, match=r"^Settings has no field zzz, zzz_top$"):
        settings.replace(zzz_top=1, zzz=2)
    with pytest.raises(TypeError, match=r"^SettingsPart has no field data_dir$"):
        settings.part("task_name", "do_train").replace(data_dir="d")
    assert not hasattr(settings, "do_trian") and not settings.given("do_train")
    with pytest.raises(AttributeError):
        del settings.do_train
    with pytest.raises(TypeError, match="several values for data_dir"):
        rc.Settings("d", data_dir="e")


# ---------------------------------------------------------------------------
# Given: keywords, assignment, replace
# ---------------------------------------------------------------------------

def test_assignment_counts_as_given_and_replace_keeps_given():
    settings = rc.Settings(task_name="mrpc")
    settings.max_seq_length = 128  # the default's value, set by the user: given
    settings.do_train = "true"
    assert (settings.max_seq_length, settings.do_train) == (128, True)
    assert {n for n in settings.values() if settings.given(n)} == {
        "task_name", "max_seq_length", "do_train"}
    copy = settings.with_defaults({"max_seq_length": 32, "do_lower_case": False,
                                   "task_name": "cola"})
    assert (copy.max_seq_length, copy.do_lower_case, copy.task_name) == (128, False, "mrpc")
    # dataclasses.replace: given = the original's + the changed fields, as Settings.replace.
    for replaced in (dataclasses.replace(settings, do_eval=True, seed=1, learning_rate="1e-4"),
                     settings.replace(do_eval=True, seed=1, learning_rate="1e-4")):
        assert {n for n in replaced.values() if replaced.given(n)} == {
            "task_name", "max_seq_length", "do_train", "do_eval", "seed", "learning_rate"}
        assert replaced.learning_rate == 1e-4 and replaced.do_eval and replaced.seed == 1
    # A change to the value it already has still counts (it was named).
    same = dataclasses.replace(rc.Settings(), do_lower_case=True)
    assert [n for n in same.values() if same.given(n)] == ["do_lower_case"]
    assert not [n for n in dataclasses.replace(rc.Settings()).values()
                if dataclasses.replace(rc.Settings()).given(n)]
    with pytest.raises(ValueError, match=r"^seed='one': expected an integer$"):
        dataclasses.replace(settings, seed="one")
    part = settings.part("max_seq_length", "seed")
    part.seed = 7
    assert part.given("seed") and dataclasses.replace(part, seed=8).given("seed")


def _model_folder(tmp_path, max_seq_length):
    """A run_classifier model folder that saved `max_seq_length`; its model has 48
    positions, so a longer length is an error saying which length the run used."""
    config = write_text(tmp_path / "in" / "bert_config.json", json.dumps({
        "vocab_size": 8, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
        "intermediate_size": 8, "max_position_embeddings": 48, "type_vocab_size": 2}))
    vocab = write_text(tmp_path / "in" / "vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n")
    out = tmp_path / "model"
    model_folder.write(str(out), "run_classifier", config, vocab,
                       {"max_seq_length": max_seq_length, "do_lower_case": True,
                        "task_name": "mrpc"})
    return out


def test_an_assigned_field_wins_over_the_model_folder(tmp_path):
    out = _model_folder(tmp_path, max_seq_length=56)
    settings = rc.Settings(data_dir=str(tmp_path / "no_data"), init_checkpoint=str(out),
                           output_dir=str(tmp_path / "run"), do_predict=True)
    config = out / "bert_config.json"
    with pytest.raises(ValueError, match=r"^max_seq_length=56 is longer than the 48 positions "
                       r"the BERT model has \(max_position_embeddings in bert_config_file=%s\)$"
                       % re.escape(str(config))):
        rc.run(settings)  # the folder's 56 fills the length the user left out
    for length in (64, 128):  # 128: the default's value, assigned
        settings.max_seq_length = length
        with pytest.raises(ValueError, match=r"^max_seq_length=%d is longer" % length):
            rc.run(settings)
    assert not (tmp_path / "run").exists()
    assert model_folder.defaults(settings.part(*model_folder.SETTINGS),
                                 "run_classifier")["max_seq_length"] == 56


# ---------------------------------------------------------------------------
# Errors: field names for Python, flags for the command line
# ---------------------------------------------------------------------------

def test_run_names_fields_for_python_and_flags_for_the_command_line(tmp_path):
    out = _model_folder(tmp_path, max_seq_length=32)
    values = dict(data_dir=str(tmp_path / "no_data"), init_checkpoint=str(out),
                  output_dir=str(tmp_path / "run"), do_predict=True, max_seq_length=64)
    line = ("max_seq_length=64 is longer than the 48 positions the BERT model has "
            "(max_position_embeddings in bert_config_file=%s)" % (out / "bert_config.json"))
    with pytest.raises(ValueError) as from_python:
        rc.run(rc.Settings(**values))
    assert str(from_python.value) == line
    fv = flags_common.parse_flags(rc.define_flags, ["--%s=%s" % item for item in values.items()])
    with pytest.raises(ValueError) as from_flags:
        rc.run(fv)
    assert str(from_flags.value) == line.replace("max_seq", "--max_seq").replace(
        "in bert_config", "in --bert_config")
    assert not (tmp_path / "run").exists()


def test_python_spelling_rewrites_only_the_fields():
    settings = rc.Settings()
    text = ("--max_seq_length=64 needs --do_train, not --nodo_eval; --data_dir is required; "
            "--helpfull, --noseed, --do_train_steps=3, x--do_train, ---do_train stay")
    assert settings_lib.python_spelling(text, settings) == (
        "max_seq_length=64 needs do_train=True, not do_eval=False; data_dir is required; "
        "--helpfull, --noseed, --do_train_steps=3, x--do_train, ---do_train stay")
    assert settings_lib.python_spelling(text, settings.part("data_dir")) == text.replace(
        "--data_dir", "data_dir")


@startup.keeps_process_settings
def _failing_run(settings, error):
    raise error


def test_the_decorator_respells_value_and_usage_errors_for_a_settings_caller():
    cause = KeyError("k")
    for error, args in ((ValueError("--do_train needs --data_dir=x", 2),
                         ("do_train=True needs data_dir=x", 2)),
                        (app.UsageError("--do_train needs --data_dir=x"),
                         ("do_train=True needs data_dir=x",))):
        error_type = type(error)
        error.__cause__ = cause
        with pytest.raises(error_type) as raised:
            _failing_run(rc.Settings(), error)
        assert raised.value is error and raised.value.__cause__ is cause
        assert raised.value.args == args
        fv = flags_common.parse_flags(rc.define_flags, [])
        with pytest.raises(error_type, match="^--do_train needs --data_dir=x$"):
            _failing_run(fv, error_type("--do_train needs --data_dir=x"))
    with pytest.raises(OSError, match="^--data_dir"):  # other errors: as raised
        _failing_run(rc.Settings(), OSError("--data_dir"))


# ---------------------------------------------------------------------------
# One run at a time across threads
# ---------------------------------------------------------------------------

def test_a_second_thread_is_refused_while_a_run_is_on(tmp_path, monkeypatch):
    inside, release = threading.Event(), threading.Event()

    def counting_slowly(files, do_lower_case):
        del files, do_lower_case
        inside.set()
        assert release.wait(HANG_GUARD_SECONDS)
        return {}  # no words: the run ends with an error, nothing written

    monkeypatch.setattr(create_vocab, "count_words", counting_slowly)
    corpus = write_text(tmp_path / "corpus.txt", "a b c\n")
    outcome = []

    def first():
        try:
            create_vocab.run(create_vocab.Settings(input_file=str(corpus),
                                                   output_file=str(tmp_path / "v.txt")))
        except ValueError as e:
            outcome.append(str(e))

    thread = threading.Thread(target=first, name="vocab-thread")
    thread.start()
    try:
        assert inside.wait(HANG_GUARD_SECONDS)
        # Every face's run() passes the guard first (no data_dir: no check before it).
        for face, settings in [(rc, rc.Settings(task_name="mrpc"))] + [
                (face, face.Settings()) for face in FACES]:
            with pytest.raises(RuntimeError) as refused:
                face.run(settings)
            assert str(refused.value) == (
                "another run() is in progress in this process (thread 'vocab-thread', "
                "create_vocab): runs share TensorFlow's process-wide precision policy; run "
                "them one after another, or in separate processes")
    finally:
        release.set()
        thread.join(HANG_GUARD_SECONDS)
    assert outcome == ["input_file: no text in %s" % corpus]
    # Once it ended, this thread runs (and gets its own error).
    with pytest.raises(ValueError, match="^data_dir is required$"):
        rc.run(rc.Settings(task_name="mrpc"))
    assert not (tmp_path / "v.txt").exists()


def test_a_run_may_call_another_in_the_same_thread():
    import tf_keras  # pylint: disable=import-outside-toplevel

    @startup.keeps_process_settings
    def outer(settings):
        tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
        with pytest.raises(ValueError, match="^data_dir is required$"):
            rc.run(rc.Settings(task_name="mrpc"))  # nested: allowed, restores bf16
        return tf_keras.mixed_precision.global_policy().name

    before = tf_keras.mixed_precision.global_policy().name
    assert outer(rc.Settings()) == "mixed_bfloat16"
    assert tf_keras.mixed_precision.global_policy().name == before == "float32"


def test_a_python_path_with_a_tilde_is_the_home_the_command_line_keeps_it(monkeypatch,
                                                                           tmp_path, absl_records):
    """Issue 72 (a low): output_dir="~/x" from Python made a folder named "~" (the value
    reached tf.io.gfile as written). From Python a path field's leading ~ is the home, as a
    shell makes it; other fields, and the command line's value (which the reference takes
    as written: bash leaves the ~ of --output_dir=~/x), stay as given, the latter warned."""
    home = str(tmp_path / "home")
    monkeypatch.setenv("HOME", home)
    s = rc.Settings(output_dir="~/x", data_dir=pathlib.Path("~/glue/SST-2"),
                    vocab_file="~/m/vocab.txt", init_checkpoint="~/m/best", task_name="~sst")
    assert (s.output_dir, s.data_dir, s.vocab_file, s.init_checkpoint, s.task_name) == (
        home + "/x", home + "/glue/SST-2", home + "/m/vocab.txt", home + "/m/best", "~sst")
    s.bert_config_file = "~/m/bert_config.json"
    assert s.bert_config_file == home + "/m/bert_config.json"
    assert s.replace(output_dir="~/y").output_dir == home + "/y"
    assert dataclasses.replace(s, output_dir="~/z").output_dir == home + "/z"
    assert rc.Settings.of(s).output_dir == home + "/x"
    pre = create_pretraining_data.Settings(input_file=["~/a.txt", "b.txt"], output_file="~/o")
    assert (pre.input_file, pre.output_file) == (home + "/a.txt,b.txt", home + "/o")
    assert create_pretraining_data.Settings(input_file="~/a.txt,~/b.txt").input_file == \
        home + "/a.txt," + home + "/b.txt"
    # The command line: as written, one warning line (not one per check).
    fv = flags_common.parse_flags(rc.define_flags, ["--output_dir=~/cli", "--task_name=sst-2"])
    cli = rc.Settings.of(fv)
    assert cli.output_dir == "~/cli" and rc.Settings.of(cli).output_dir == "~/cli"
    lines = [r.getMessage() for r in absl_records.records if "~/cli" in r.getMessage()]
    assert lines == ["--output_dir=~/cli starts with ~, which the shell did not expand (it does "
                     "not after --output_dir=): used as written, a folder named ~ in the "
                     "current directory, as the reference did; write --output_dir ~/... or "
                     "$HOME/... for your home"]
