"""flags_common.py: shared flag groups and the required-flag check."""
import importlib
import pathlib
import re
import subprocess
import sys

import pytest
from absl import flags

import registry_lists
from bert_tf2 import flags_common
from bert_tf2 import cli
from bert_tf2 import loaders
from bert_tf2 import settings as settings_lib
from conftest import HANG_GUARD_SECONDS, wait_until


def _define(fv):
    flags_common.define_training_flags(fv)


def test_training_flags_keep_reference_defaults_and_add_port_flags():
    fv = flags_common.parse_flags(_define, [])
    assert fv.use_tpu is False and fv.iterations_per_loop == 1000
    assert fv.dtype == "fp32" and fv.enable_xla is False
    assert fv.num_accumulation_steps == 1 and fv.gradient_checkpointing is False


def test_require_names_the_first_missing_flag():
    settings = settings_lib.settings_class(_define, __name__)(tpu_name="x")
    settings.require("tpu_name")
    with pytest.raises(ValueError, match=r"^--tpu_zone is required$"):
        settings.require("tpu_name", "tpu_zone", "gcp_project")


_TABLE = (("string", "name_a", "x", "A string."), ("integer", "count", 3, "An int."),
          ("float", "rate", 0.5, "A float."), ("bool", "flag_b", False, "A bool."),
          ("enum", "mode", "up", "An enum.", ("up", "down")))


def test_a_flag_table_defines_each_kind_with_its_default_help_and_choices():
    fv = flags_common.parse_flags(lambda fv: settings_lib.define_flag_table(fv, _TABLE),
                                  ["--count=7", "--noflag_b", "--mode=down", "--rate=2"])
    assert (fv.name_a, fv.count, fv.rate, fv.flag_b, fv.mode) == ("x", 7, 2.0, False, "down")
    assert [fv[name].help for name in ("name_a", "mode")] == ["A string.", "<up|down>: An enum."]
    assert fv["mode"].parser.enum_values == ["up", "down"]
    with pytest.raises(flags.IllegalFlagValueError):
        fv["mode"].parse("sideways")


# The flags of each reference script (google-research/bert), which its --help showed.
_REFERENCE_FLAGS = {
    "run_classifier": "data_dir bert_config_file task_name vocab_file output_dir init_checkpoint "
                      "do_lower_case max_seq_length do_train do_eval do_predict train_batch_size "
                      "eval_batch_size predict_batch_size learning_rate num_train_epochs "
                      "warmup_proportion save_checkpoints_steps iterations_per_loop use_tpu "
                      "tpu_name tpu_zone gcp_project master num_tpu_cores",
    "run_squad": "bert_config_file vocab_file output_dir train_file predict_file init_checkpoint "
                 "do_lower_case max_seq_length doc_stride max_query_length do_train do_predict "
                 "train_batch_size predict_batch_size learning_rate num_train_epochs "
                 "warmup_proportion save_checkpoints_steps iterations_per_loop n_best_size "
                 "max_answer_length use_tpu tpu_name tpu_zone gcp_project master num_tpu_cores "
                 "verbose_logging version_2_with_negative null_score_diff_threshold",
    "run_pretraining": "bert_config_file input_file output_dir init_checkpoint max_seq_length "
                       "max_predictions_per_seq do_train do_eval train_batch_size "
                       "eval_batch_size learning_rate num_train_steps num_warmup_steps "
                       "save_checkpoints_steps iterations_per_loop max_eval_steps use_tpu "
                       "tpu_name tpu_zone gcp_project master num_tpu_cores",
    "create_pretraining_data": "input_file output_file vocab_file do_lower_case "
                               "do_whole_word_mask max_seq_length max_predictions_per_seq "
                               "random_seed dupe_factor masked_lm_prob short_seq_prob",
    "extract_features": "input_file output_file layers bert_config_file max_seq_length "
                        "init_checkpoint vocab_file do_lower_case batch_size use_tpu master "
                        "num_tpu_cores use_one_hot_embeddings",
}
# The fine-tuning scripts the reference never had take run_classifier's shared flags.
_SHARED_FINE_TUNING = ("bert_config_file vocab_file output_dir init_checkpoint do_lower_case "
                       "max_seq_length do_train do_eval do_predict train_batch_size "
                       "eval_batch_size predict_batch_size learning_rate num_train_epochs "
                       "warmup_proportion save_checkpoints_steps iterations_per_loop use_tpu")
_REFERENCE_FLAGS["run_ner"] = _REFERENCE_FLAGS["run_multiple_choice"] = _SHARED_FINE_TUNING
# Every root face (found on disk: tests/registry_lists.py), the reference's scripts among them.
_SCRIPTS = registry_lists.root_faces()


def test_the_scripts_include_the_references():
    assert set(_REFERENCE_FLAGS) <= set(_SCRIPTS), sorted(set(_REFERENCE_FLAGS) - set(_SCRIPTS))


def _short_help(module_name):
    """What --help lists for the script: the key flags of the main module."""
    module = importlib.import_module(module_name)
    fv = flags.FlagValues()
    cli.define_key_flags(module.define_flags, fv, "prog.py")
    return fv, fv.module_help("prog.py")


@pytest.mark.parametrize("module_name", _SCRIPTS)
def test_help_lists_every_flag_of_the_script(module_name):
    fv, text = _short_help(module_name)
    listed = set(re.findall(r"^\s+--(?:\[no\])?(\w+)", text, flags=re.M))
    assert set(fv) - listed == set()
    missing = set(_REFERENCE_FLAGS.get(module_name, "").split()) - listed
    assert not missing, "%s --help lacks the reference's %s" % (module_name, sorted(missing))


@pytest.mark.parametrize("module_name", _SCRIPTS)
def test_usage_examples_keep_their_lines(module_name):
    # A backslash-newline in a plain docstring joins the example's lines into one.
    doc = importlib.import_module(module_name).__doc__
    assert max(len(line) for line in doc.splitlines()) <= 100


# One process for two faces' help (each start pays TensorFlow's import): run_classifier's
# --help as an installed command runs it (__main__ a wrapper, not the script), then
# `python export_saved_model.py --helpfull` (the script as __main__, as runpy runs it)
# once the first's flags are removed and absl's app.run may parse again (as
# tests/reference_fork_runs.py does between scripts). "@@ exit CODE" ends each one's stdout,
# "@@ next" the first one's stderr.
_TWO_HELPS = """
import runpy, sys
from absl import app, flags
import run_classifier
before = set(flags.FLAGS)
sys.argv = ["bert-run-classifier", "--help"]
try:
    run_classifier.main()
except SystemExit as e:
    print("@@ exit %s" % e.code, flush=True)
sys.stderr.write("@@ next\\n")
sys.stderr.flush()
for name in set(flags.FLAGS) - before:
    delattr(flags.FLAGS, name)
app._register_and_parse_flags_with_usage.done = False
sys.argv = ["export_saved_model.py", "--helpfull"]
try:
    runpy.run_path("export_saved_model.py", run_name="__main__")
except SystemExit as e:
    print("@@ exit %s" % e.code, flush=True)
"""


@pytest.fixture(scope="module")
def two_helps():
    """{"console": (exit code, stdout, stderr) of run_classifier's --help as a console
    command, "script": the same of `python export_saved_model.py --helpfull`}."""
    repo = pathlib.Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", _TWO_HELPS], capture_output=True, text=True,
                          timeout=HANG_GUARD_SECONDS, cwd=repo)
    assert done.returncode == 0, done.stderr[-2000:]
    outs = re.split(r"^@@ exit (\S+)\n", done.stdout, flags=re.M)
    errs = done.stderr.split("@@ next\n")
    assert len(outs) == 5 and outs[4] == "" and len(errs) == 2, (done.stdout[-2000:],
                                                                 done.stderr[-2000:])
    return {"console": (outs[1], outs[0], errs[0]), "script": (outs[3], outs[2], errs[1])}


@pytest.mark.slow
def test_console_command_help_shows_the_text_and_flags_not_the_libraries(two_helps):
    # As an installed command runs it: __main__ is a wrapper, not run_classifier.py.
    code, out, err = two_helps["console"]
    first_line = importlib.import_module("run_classifier").__doc__.splitlines()[0]
    assert code == "0", err[-2000:]
    assert out.startswith(first_line)
    for name in _REFERENCE_FLAGS["run_classifier"].split():
        assert re.search(r"--(\[no\])?%s:" % name, out), name
    for noise in ("test_srcdir", "hbm_oom_exit", "tensor_tracer"):
        assert noise not in out
    assert "WARNING: All log messages" not in err


@pytest.mark.slow
def test_help_exits_0_and_prints_the_flags(two_helps):
    # One face as a script (after the console command's --help, in the same process); every
    # face's help flags are checked below in-process.
    code, out, err = two_helps["script"]
    assert code == "0", err[-2000:]
    assert out.startswith(importlib.import_module("export_saved_model").__doc__.splitlines()[0])
    fv, _ = _short_help("export_saved_model")
    for name in fv:
        assert re.search(r"--(\[no\])?%s:" % name, out), name


@pytest.mark.parametrize("module_name", _SCRIPTS)
@pytest.mark.parametrize("asked", ["--help", "-?", "--helpshort", "--helpfull"])
def test_every_scripts_help_flags_exit_0(module_name, asked, capsys):
    # run_cli's help flags, on the script's own flags in this process (usage goes to stdout).
    fv, _ = _short_help(module_name)
    cli.help_flags_exit_zero(fv)
    with pytest.raises(SystemExit) as stopped:
        fv(["prog", asked])
    assert stopped.value.code == 0
    assert capsys.readouterr().out


def test_error_line_of_tensorflow_file_errors():
    import tensorflow as tf
    try:
        tf.io.gfile.GFile("/nonexistent-dir/x.tfrecord.tmp-0a1b2c3d", "w").write("x")
    except tf.errors.OpError as e:
        error = e
    assert cli.error_line(error) == (
        "error: /nonexistent-dir/x.tfrecord; No such file or directory", 1)
    assert cli.error_line(ValueError("--x=1 is bad\nmore")) == ("error: --x=1 is bad", 1)
    # An eager op's error (a checkpoint saved onto a full disk): no op names, the
    # checkpoint's own name for TensorFlow's temporary.
    saved = tf.errors.ResourceExhaustedError(None, None, (
        "{{function_node __wrapped__SaveV2_dtypes_3_device_/job:localhost/replica:0/task:0/"
        "device:CPU:0}} out/model.ckpt-5_temp/part-00000-of-00001.data-00000-of-00001."
        "tempstate15396942205611381082; No space left on device [Op:SaveV2]"))
    assert cli.error_line(saved) == (
        "error: out/model.ckpt-5; No space left on device", 1)
    written = tf.errors.ResourceExhaustedError(None, None, (
        "{{function_node __wrapped__WriteFile_device_/job:localhost/replica:0/task:0/device:"
        "CPU:0}} out/x.bin.tmp-0a1b2c3d; No space left on device [Op:WriteFile] name: w"))
    assert cli.error_line(written) == ("error: out/x.bin; No space left on device", 1)


def test_error_line_of_an_error_inside_a_graph_keeps_tensorflows_message():
    """A training step's error (a tf.function) says what went wrong, not only
    "Graph execution error:"."""
    import tensorflow as tf
    table = tf.Variable(tf.ones([5, 3]))

    @tf.function
    def step(ids):
        return tf.gather(table, ids) * 2.0

    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        step(tf.constant([1, 7]))
    assert raised.value.message.startswith("Graph execution error:")
    assert cli.error_line(raised.value) == (
        "error: indices[1] = 7 is not in [0, 5) (TensorFlow node Gather)", 1)
    several = tf.errors.InvalidArgumentError(None, None, (
        "Graph execution error:\n\nDetected at node x defined at (most recent call last):\n"
        "<stack traces unavailable>\n2 root error(s) found.\n  (0) INVALID_ARGUMENT:  "
        "Nan in summary histogram for: loss\n\t [[{{node loss_hist}}]]\n  (1) INVALID_ARGUMENT:"
        "  the same\n0 successful operations."))
    assert cli.error_line(several) == (
        "error: Nan in summary histogram for: loss (TensorFlow node loss_hist)", 1)


def test_vocab_tokens_name_the_flag_and_file():
    with pytest.raises(ValueError, match=r"^--vocab_file=v\.txt has no \[MASK\] / \[SEP\] token$"):
        loaders.check_vocab_tokens({"[CLS]": 0}, "v.txt", ("[CLS]", "[MASK]", "[SEP]"))


# A runner whose run() fails with TensorFlow's error, or writes a file and waits; with
# --then_interrupt, once that run_cli has ended by SystemExit (a signal's way), a second one
# in the same process whose run raises what training.Interrupted is (a KeyboardInterrupt).
_RUNNER = """
import sys, time
from absl import flags
import tensorflow as tf
from bert_tf2 import cli, fileutil

def define_flags(fv):
    flags.DEFINE_string("output_file", None, "out", flag_values=fv)
    flags.DEFINE_bool("wait", False, "write, then wait", flag_values=fv)
    flags.DEFINE_bool("then_interrupt", False, "then a run interrupted", flag_values=fv)

def run(fv):
    with fileutil.atomic_open(fv.output_file) as f:
        f.write("partial")
        f.flush()
        while fv.wait:
            time.sleep(0.1)

def interrupted(fv):
    raise KeyboardInterrupt("interrupted at step 7; rerun the same command to resume from "
                            "out/model.ckpt-5")

try:
    cli.run_cli(define_flags, run)
except SystemExit as e:
    if not flags.FLAGS.then_interrupt:
        raise
    print("exit %s" % e.code, flush=True)
    cli.run_cli(lambda fv: None, interrupted, ["interrupted"])
"""


def _runner(*args, **kwargs):
    repo = pathlib.Path(__file__).resolve().parents[1]
    return subprocess.Popen([sys.executable, "-c", _RUNNER] + list(args), cwd=repo,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **kwargs)


@pytest.mark.slow
def test_run_cli_one_line_for_tensorflow_errors_and_signals(tmp_path):
    import signal
    blocker = tmp_path / "a_file"
    blocker.write_text("keep")
    proc = _runner("--output_file=%s/x.txt" % blocker)
    _, err = proc.communicate(timeout=HANG_GUARD_SECONDS)
    assert (proc.returncode, err) == (1, "error: %s/x.txt; Not a directory\n" % blocker)
    # SIGTERM as Ctrl-C: the block's temporary file is removed, one line, 128 + 15 (the
    # SystemExit the process's next run_cli follows).
    proc = _runner("--output_file=%s/y.txt" % tmp_path, "--wait", "--then_interrupt")
    wait_until(lambda: [p for p in tmp_path.iterdir() if ".tmp-" in p.name], proc,
               what="the block's temporary file")
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=HANG_GUARD_SECONDS)
    assert out.splitlines()[0] == "exit 143"
    assert [p.name for p in tmp_path.iterdir()] == ["a_file"]
    # Then, in the same process, training.Interrupted (a KeyboardInterrupt) without a
    # signal: its text alone (where a rerun resumes), exit code 130, no traceback.
    assert (proc.returncode, err) == (130, "error: stopped by SIGTERM\ninterrupted at step 7; "
                                           "rerun the same command to resume from "
                                           "out/model.ckpt-5\n")
