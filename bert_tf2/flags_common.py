"""Flag groups every runner shares, and the wrapper that turns errors into one line.

Flags are registered by functions taking a `FlagValues`, never at import time,
so tests can import every runner into one process and give each its own flags.
"""
import glob
import os
import re
import signal
import sys
import threading

from absl import app
from absl import flags
from absl import logging
import tensorflow as tf

import modeling
from bert_tf2 import fileutil
from bert_tf2.tasks import pooling
from bert_tf2.trainer import periodic_eval
from bert_tf2.trainer import progress
from bert_tf2 import logs
from bert_tf2.trainer import training_record
from bert_tf2 import settings as settings_lib
from bert_tf2 import startup
from bert_tf2.trainer import checkpoints
import tokenization


def define_tpu_flags(fv, with_tpu_name=True):
    """The reference's TPU flags (same names, defaults and meaning)."""
    flags.DEFINE_bool("use_tpu", False, "Whether to use TPU or GPU/CPU.", flag_values=fv)
    if with_tpu_name:
        flags.DEFINE_string(
            "tpu_name", None,
            "The Cloud TPU to use for training: a name or a grpc://ip.address.of.tpu:8470 url.",
            flag_values=fv)
        flags.DEFINE_string(
            "tpu_zone", None,
            "GCE zone of the Cloud TPU; detected automatically when not given.",
            flag_values=fv)
        flags.DEFINE_string(
            "gcp_project", None,
            "GCP project of the Cloud TPU; detected automatically when not given.",
            flag_values=fv)
    flags.DEFINE_string("master", None, "TensorFlow master URL (TPU).", flag_values=fv)
    flags.DEFINE_integer(
        "num_tpu_cores", 8,
        "Only used if `use_tpu` is True: total number of TPU cores to use.",
        flag_values=fv)


_MODEL_FLAG_HELP = {
    "bert_config_file": "bert_config.json of the pre-trained model: it fixes the architecture. "
                        "Fine-tuning runners and the export: default the bert_config.json of "
                        "--init_checkpoint's model folder (README: The output folder is the "
                        "model).",
    "init_checkpoint": "Checkpoint to start from, usually a pre-trained BERT: a Google TF1 "
                       "checkpoint or one of ours (a file prefix or a directory). A run "
                       "that does not train uses it over --output_dir's checkpoints when it "
                       "holds the whole model; training resumes --output_dir's latest first.",
    "vocab_file": "WordPiece vocabulary the BERT model was trained with (default: the "
                  "vocab.txt of --init_checkpoint's model folder).",
    "do_lower_case": "Lower-case (and strip accents from) the input text: True for uncased "
                     "models, False for cased ones.",
    "max_seq_length": "Length in WordPiece tokens of every model input: longer inputs are "
                      "truncated, shorter ones zero-padded.",
}
MODEL_FLAGS = tuple(_MODEL_FLAG_HELP)


def define_model_flags(fv, names=MODEL_FLAGS, max_seq_length=128, help_overrides=None):
    """The model/vocab/checkpoint flags the reference declares in each script.

    Args:
      fv: the FlagValues to register on.
      names: which of MODEL_FLAGS this script takes.
      max_seq_length: the script's default for --max_seq_length (128, run_squad 384).
      help_overrides: {name: help text} where a script says more than the shared text.
    """
    unknown = set(names) - set(MODEL_FLAGS)
    if unknown:
        raise ValueError("not model flags: %s" % ", ".join(sorted(unknown)))
    texts = dict(_MODEL_FLAG_HELP, **(help_overrides or {}))
    for name in names:
        if name == "do_lower_case":
            flags.DEFINE_bool(name, True, texts[name], flag_values=fv)
        elif name == "max_seq_length":
            flags.DEFINE_integer(name, max_seq_length, texts[name], flag_values=fv)
        else:
            flags.DEFINE_string(name, None, texts[name], flag_values=fv)


def define_fine_tuning_flags(fv, unit="examples"):
    """The reference's fine-tuning flags (run_classifier's names and defaults).

    do_train / do_eval / do_predict, train_batch_size 32, eval_batch_size 8,
    predict_batch_size 8, learning_rate 5e-5, num_train_epochs 3.0,
    warmup_proportion 0.1. `unit` says what a batch counts (examples, windows...).
    """
    modes = (("do_train", "Fine-tune on the training set."),
             ("do_eval", "Evaluate on the dev set."),
             ("do_predict", "Write predictions for the test set."))
    batches = (("train_batch_size", 32), ("eval_batch_size", 8), ("predict_batch_size", 8))
    define_flag_table(fv, [("bool", name, False, text) for name, text in modes] + [
        ("integer", name, default, "Global %s (%s)." % (name.replace("_", " "), unit))
        for name, default in batches] + [
        ("float", "learning_rate", 5e-5, "Peak learning rate of the optimizer."),
        ("float", "num_train_epochs", 3.0, "Number of passes over the training %s." % unit),
        ("float", "warmup_proportion", 0.1,
         "Fraction of the training steps over which the learning rate rises linearly from 0 "
         "(0.1 = the first 10%)."),
        ("bool", "group_by_length", False,
         "Training batches of %s of similar length (each epoch shuffled, cut into windows of "
         "50 batches sorted by length, the batches of a window shuffled; a window never spans "
         "two epochs): with trimmed batches less padding to compute. The same steps; each "
         "epoch holds every one of its %s once but for the N mod batch size left out at "
         "random. Default: the reference's order." % (unit, unit))])
    periodic_eval.define_flags(fv)


# The settings check_fine_tuning reads, besides the runner's required ones.
FINE_TUNING_CHECKS = ("do_lower_case", "init_checkpoint", "do_train", "do_eval", "do_predict",
                      "bert_config_file", "max_seq_length") + periodic_eval.SETTINGS


def check_fine_tuning(checks, required, check_task=None):
    """The checks every fine-tuning runner starts with; returns the BertConfig.

    `checks`: a part of the runner's settings with FINE_TUNING_CHECKS and `required`.
    The settings `required` are set, do_lower_case fits the checkpoint's name, at
    least one of do_train / do_eval / do_predict is set, `check_task()` (the
    runner's own checks, optional) passes, the evaluation-during-training settings
    fit (periodic_eval.check_settings) and the model's config fits max_seq_length
    (load_bert_config), in that order.
    """
    checks.require(*required)
    tokenization.validate_case_matches_checkpoint(checks.do_lower_case, checks.init_checkpoint)
    if not (checks.do_train or checks.do_eval or checks.do_predict):
        raise ValueError("nothing to do: pass at least one of --do_train, --do_eval and "
                         "--do_predict")
    if check_task is not None:
        check_task()
    periodic_eval.check_settings(checks)
    return load_bert_config(checks.bert_config_file, checks.max_seq_length)


def define_flag_table(fv, rows):
    """Registers one flag per row of `rows` on `fv`: (kind, name, default, help) with kind
    "string", "integer", "float" or "bool", or ("enum", name, default, help, choices)."""
    for kind, name, default, help_text, *choices in rows:
        define = getattr(flags, "DEFINE_" + kind)
        if choices:
            define(name, default, list(choices[0]), help_text, flag_values=fv)
        else:
            define(name, default, help_text, flag_values=fv)


def define_pooling_flags(fv):
    """--pooling and --normalize: one vector per input (pooling.py)."""
    flags.DEFINE_enum(
        "pooling", None, list(pooling.POOLING_MODES),
        "Sentence vectors: pool the --layers (concatenated) over each input's real "
        "tokens: cls, mean, max or mean_sqrt_len (sentence-transformers' modes). "
        "Default: the model's sentence_embedding.json beside --init_checkpoint, if any.",
        flag_values=fv)
    flags.DEFINE_bool(
        "normalize", False,
        "L2-normalise each sentence vector (default: the model's sentence_embedding.json).",
        flag_values=fv)


def model_folder_settings(init_checkpoint, output_dir=None):
    """The sentence_embedding.json of --init_checkpoint's model ({} when none), found by
    checkpoints.settings_file.

    Its max_seq_length and do_lower_case are the defaults of those settings: pass it
    to the face's `settings.with_defaults(...)`, so values the user gave win.
    """
    return pooling.read_settings(checkpoints.settings_file(
        pooling.SETTINGS_FILE, init_checkpoint, output_dir))


def pooling_spec(chosen, saved, mode, num_hidden_layers):
    """The pooling.PoolingSpec of `mode` with the settings' layers / normalize or `saved`'s.

    `chosen`: settings with layers and normalize; `saved`: model_folder_settings().
    layers counts only when given (its default is the per-token output's); else the
    saved layers, else the last layer.
    """
    if chosen.given("layers"):
        layers = pooling.parse_layers(chosen.layers, num_hidden_layers)
    else:
        layers = pooling.parse_layers(",".join(str(x) for x in saved.get("layers", [-1])),
                                      num_hidden_layers, flag="layers of %s"
                                      % pooling.SETTINGS_FILE)
    normalize = chosen.normalize if chosen.given("normalize") else saved.get("normalize", False)
    return pooling.PoolingSpec(mode, layers, normalize)


def load_bert_config(bert_config_file, max_seq_length=None):
    """The BertConfig of --bert_config_file, checked against --max_seq_length.

    A --max_seq_length longer than the model's max_position_embeddings would index
    past the position table; it is an error naming both.
    """
    bert_config = modeling.BertConfig.from_json_file(bert_config_file)
    if max_seq_length is not None and max_seq_length > bert_config.max_position_embeddings:
        raise ValueError(
            "--max_seq_length=%d is longer than the %d positions the BERT model has "
            "(max_position_embeddings in --bert_config_file=%s)"
            % (max_seq_length, bert_config.max_position_embeddings, bert_config_file))
    return bert_config


def load_tokenizer(vocab_file, do_lower_case, required=("[CLS]", "[SEP]", "[UNK]")):
    """The FullTokenizer of --vocab_file / --do_lower_case, checked for BERT's tokens.

    A vocabulary without [CLS], [SEP] or [UNK] would fail later with a KeyError
    deep in feature conversion; here it is one line naming the flag.
    """
    tokenizer = tokenization.FullTokenizer(vocab_file=vocab_file, do_lower_case=do_lower_case)
    check_vocab_tokens(tokenizer.vocab, vocab_file, required)
    return tokenizer


def check_vocab_tokens(vocab, vocab_file, required, flag="--vocab_file"):
    """ValueError naming `flag` and the file when `vocab` lacks a token of `required`."""
    missing = [token for token in required if token not in vocab]
    if missing:
        raise ValueError("%s=%s has no %s token" % (flag, vocab_file, " / ".join(missing)))


def define_training_flags(fv, trim_padding=True, trim_padding_help=None):
    """Reference checkpoint/loop flags plus the TF2 distribution/precision flags.

    trim_padding, trim_padding_help: the default of --trim_padding and a script's
    own help text for it (run_squad: off, prediction only).
    """
    flags.DEFINE_integer("save_checkpoints_steps", 1000,
                         "How often to save the model checkpoint.", flag_values=fv)
    flags.DEFINE_integer("keep_checkpoint_max", 5,
                         "How many of the most recent checkpoints (output_dir/model.ckpt-N) "
                         "to keep; an older one is deleted when a new one is written (TF1 "
                         "RunConfig's keep_checkpoint_max). 0: keep every one (TF1's 0 or "
                         "None). Each holds the weights and the optimizer's slots (Adam: 3x "
                         "the weights); the fine-tuning runners' --keep_best_only keeps only "
                         "best/ at the end.",
                         flag_values=fv)
    flags.DEFINE_integer("iterations_per_loop", 1000,
                         "How many steps to run inside one tf.function call (one host loop).",
                         flag_values=fv)
    flags.DEFINE_float("log_every_seconds", 30.0,
                       "Log a progress line (step, loss, learning rate, examples/s, ETA) "
                       "at least this often, also in the middle of an --iterations_per_loop "
                       "call (the steps and their numbers stay the same), when the log "
                       "shows details (--verbosity=0); and the interval of "
                       "--progress=lines. 0: one line after each call only (lines: the "
                       "stage's last line only).", flag_values=fv)
    flags.DEFINE_enum("progress", "auto", list(progress.MODES),
                      "The progress display of training, evaluation and prediction on "
                      "stderr (stage, step/total, loss, lr, examples/s, ETA). bar: one "
                      "line rewritten in place (a widget in a Jupyter notebook); lines: a "
                      "line every --log_every_seconds and one at the stage's end; none: "
                      "nothing; auto: bar in a terminal or notebook, else lines (none when "
                      "--verbosity=0 logs the progress lines).", flag_values=fv)
    training_record.define_flags(fv)  # --existing_checkpoint
    define_tpu_flags(fv)
    define_distribution_flags(fv, trim_padding, trim_padding_help)


_TRIM_PADDING_HELP = (
    "Cut each batch to its longest example (rounded up to a multiple of 8 in training, "
    "16 otherwise) and, for evaluation and prediction, batch examples of similar length "
    "together (outputs come back in input order): the same numbers with less work. "
    "--notrim_padding keeps every batch at --max_seq_length (fixed shapes; TPUs always "
    "do).")


def define_distribution_flags(fv, trim_padding=True, trim_padding_help=None):
    """Flags that are new in the TF2 port; their defaults keep reference behaviour."""
    flags.DEFINE_enum(
        "distribution_strategy", None,
        ["one_device", "mirrored", "multi_worker_mirrored", "tpu"],
        "tf.distribute strategy. Default: tpu with --use_tpu, else mirrored over "
        "--num_gpus GPUs when there are any, else one_device.", flag_values=fv)
    flags.DEFINE_integer("num_gpus", None,
                         "GPUs to use with the mirrored strategy (default: all visible).",
                         flag_values=fv)
    flags.DEFINE_enum("dtype", "fp32", ["fp32", "fp16", "bf16"],
                      "Compute precision. fp16 uses dynamic loss scaling; variables stay fp32.",
                      flag_values=fv)
    flags.DEFINE_bool("enable_xla", False, "jit-compile the train/eval steps with XLA.",
                      flag_values=fv)
    flags.DEFINE_enum("optimizer_type", "adamw", ["adamw", "lamb"],
                      "adamw: the reference AdamWeightDecay; lamb: LAMB for large batches.",
                      flag_values=fv)
    flags.DEFINE_bool("fused_optimizer", True,
                      "Update all variables of a device (gradient clip included) in a few "
                      "XLA computations instead of op by op per variable: the same rule, "
                      "values within a few ulp. --nofused_optimizer runs the reference's "
                      "update bit for bit.", flag_values=fv)
    flags.DEFINE_bool("trim_padding", trim_padding, trim_padding_help or _TRIM_PADDING_HELP,
                      flag_values=fv)
    flags.DEFINE_integer("num_accumulation_steps", 1,
                         "Micro-batches whose gradients are summed before one optimizer step.",
                         flag_values=fv)
    flags.DEFINE_bool("gradient_checkpointing", False,
                      "Recompute each transformer layer's activations in the backward pass "
                      "instead of keeping them: less memory (long sequences, big batches) "
                      "for about a third more compute per step. Dropout masks are then "
                      "drawn from per-step seeds.", flag_values=fv)
    flags.DEFINE_bool("deterministic_data", False,
                      "Fixed input order and dropout masks (needs --seed): a restarted run "
                      "skips the batches it already trained on and draws each step's "
                      "dropout masks from --seed and the step's number, so it ends with "
                      "the same weights as an uninterrupted run, bit for bit, wherever it "
                      "stopped. Default: the input restarts, as the reference's Estimator "
                      "did.", flag_values=fv)
    flags.DEFINE_integer("seed", None,
                         "Random seed for initialisation, dropout and shuffling (default: "
                         "not fixed, as in the reference).", flag_values=fv)


def check_common(fv):
    """The rules of settings_lib.Settings.check_common on parsed flags `fv`
    (run_cli and parse_flags: before any run starts)."""
    settings_lib.of_flag_values(fv).check_common()


def define_key_flags(define_flags, fv, module_name):
    """Runs `define_flags(fv)` and makes every flag it adds a key flag of `module_name`.

    absl's --help lists only the key flags of the main module: by default the
    flags defined in the script's own file, not those the shared define_*
    functions of this module register, nor any when the script runs as an
    installed console command (the main module is then the wrapper). Declaring
    them key flags puts each script's whole set of flags in --help, and leaves
    the flags of libraries (absl.testing, TPU client, ...) to --helpfull.
    """
    before = set(fv)
    define_flags(fv)
    for name in sorted(set(fv) - before):
        fv.register_key_flag_for_module(module_name, fv[name])


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread: the clean-up of Ctrl-C (temporaries removed)."""


# The signal that stopped the run (a library may wrap the exception it raised).
_STOPPED_BY = []


def _on_signal(signum, frame):
    del frame
    _STOPPED_BY.append(signum)
    # Threads that then fail waiting for stopped workers are part of the stop, not news.
    threading.excepthook = lambda args: None
    if signum == signal.SIGTERM:
        signal.signal(signum, signal.SIG_DFL)  # a second SIGTERM ends the process at once
        # As Ctrl-C reaches the whole process group: worker processes (Beam's, the
        # --num_workers pool) stop too, rather than make the clean-up wait for them.
        for pid in _descendants(os.getpid()):
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass  # gone meanwhile
        raise _Terminated()
    raise KeyboardInterrupt()


def _descendants(pid):
    """The process ids of `pid`'s descendants (from Linux's /proc; none elsewhere)."""
    found, pending = [], [pid]
    while pending:
        parent = pending.pop()
        for path in glob.glob("/proc/%d/task/*/children" % parent):
            try:
                with open(path) as f:
                    children = [int(child) for child in f.read().split()]
            except (OSError, ValueError):
                continue
            found += children
            pending += children
    return found


def error_line(error):
    """(the one line run_cli prints for `error`, the exit code).

    A TensorFlow file error (tf.errors.OpError) says which path and why in the first
    line of its message; our temporary names in it become the output they stand for.
    """
    if isinstance(error, _Terminated) or _STOPPED_BY[-1:] == [signal.SIGTERM]:
        return "error: stopped by SIGTERM", 128 + signal.SIGTERM
    if isinstance(error, KeyboardInterrupt) or _STOPPED_BY:
        # Training's interrupt says where a rerun resumes (training.Interrupted).
        return (str(error) if isinstance(error, KeyboardInterrupt) and str(error)
                else "error: interrupted"), 128 + signal.SIGINT
    text = error.message if isinstance(error, tf.errors.OpError) else str(error)
    lines = text.strip().splitlines() or [type(error).__name__]
    return "error: %s" % fileutil.without_temp_names(_without_op_names(lines[0])), 1


def _without_op_names(line):
    """An eager op's error line without TensorFlow's names of the op: the leading
    "{{function_node __wrapped__SaveV2_...}} " and the trailing " [Op:SaveV2]"."""
    line = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", line)
    return re.sub(r"\s*\[Op:[^\]]*\](?: name: \S*)?$", "", line) or line


class _HelpExitsZero:
    """Mixin for absl's help flags: asked for, help is the answer, so the exit status is 0
    (absl's own flags print the help and exit with status 1)."""

    def parse(self, arg):
        """Prints the help as absl does, then exits with status 0."""
        try:
            super().parse(arg)
        except SystemExit:
            raise SystemExit(0) from None


# absl's help flags, by name; each prints its help then exits with status 1.
_ABSL_HELP_FLAGS = {"help": app.HelpFlag, "helpshort": app.HelpshortFlag,
                    "helpfull": app.HelpfullFlag, "helpxml": app.HelpXMLFlag}


def help_flags_exit_zero(fv=flags.FLAGS):
    """Puts help flags that exit with status 0 in place of absl's --help (-?), --helpshort,
    --helpfull and --helpxml on `fv`: the same text; absl's app.run then keeps them."""
    if fv is flags.FLAGS:
        app.define_help_flags()  # registers absl's once: it would not replace ours later
    for name, absl_class in _ABSL_HELP_FLAGS.items():
        if name in fv:
            if isinstance(fv[name], _HelpExitsZero):
                continue
            for alias in {name, fv[name].short_name} - {None}:
                delattr(fv, alias)
        exits_zero = type(absl_class.__name__, (_HelpExitsZero, absl_class), {})
        flags.DEFINE_flag(exits_zero(), flag_values=fv, module_name=app.__name__)


def run_cli(define_flags, run, argv=None):
    """Entry point of a runner: defines its flags, parses, runs `run(FLAGS)`.

    A ValueError, OSError or tf.errors.OpError (bad flag, missing file, malformed
    input, a path TensorFlow cannot write) becomes one clear line on stderr and exit
    code 1 instead of a traceback (which --verbosity=1 logs); Ctrl-C and SIGTERM
    stop the run the same way (exit codes 130 and 143), after the usual clean-up of
    temporary files; training's Ctrl-C line says where a rerun resumes. --help,
    --helpshort and --helpfull print the script's help and exit with status 0.
    A stderr that takes no more text (`2>&1 | head -1`, `2>/dev/full`) stops nothing:
    the progress display and the log handlers turn off (logs.stream_lost) and the run
    trains, saves, evaluates and predicts as it would have, exit 0.
    """
    define_key_flags(define_flags, flags.FLAGS, sys.argv[0])
    help_flags_exit_zero()
    main_module = sys.modules.get("__main__")
    if main_module is not None and not main_module.__doc__:
        # An installed console command's __main__ is a wrapper: --help shows the script's text.
        main_module.__doc__ = sys.modules[define_flags.__module__].__doc__
    startup.initialize_devices()

    def main(args):
        if len(args) > 1:
            raise app.UsageError("unexpected arguments: %s" % " ".join(args[1:]))
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, _on_signal)
        # absl's app.run made the log INFO unless --verbosity was given: then it leaves
        # out the reference's detail lines (bert_tf2/logs.py).
        logs.use_command_line_default(flags.FLAGS["verbosity"].present)
        logs.watch_handlers()
        try:
            check_common(flags.FLAGS)
            training_record.command_line_default(flags.FLAGS)
            run(flags.FLAGS)
        except (ValueError, OSError, tf.errors.OpError, KeyboardInterrupt) as e:
            _exit_with(e)
        except Exception as e:  # pylint: disable=broad-except
            if not _STOPPED_BY:
                raise
            _exit_with(e)  # the signal, wrapped by a library (Beam's workers)
        finally:
            logs.use_command_line_default(True)

    app.run(main, argv)


def _exit_with(error):
    """Prints error_line(error) and ends the process with its exit code.

    One line, not also a log record: the message is the whole story. An error ends
    with os._exit: TensorFlow's exit-time warnings (unrestored checkpoint values, ...)
    would otherwise print after it; every output is already complete or removed. A
    signal ends through Python's exit, whose clean-up also releases what the worker
    processes it stopped shared (else the resource tracker warns of it).
    """
    logging.debug("the error in full:", exc_info=error)
    line, code = error_line(error)
    # A lost stdout or stderr (a closed pipe, a full device) takes the line nowhere; the
    # exit code still says it.
    logs.write(sys.stdout, "")
    logs.write(sys.stderr, line + "\n")
    if _STOPPED_BY:
        sys.exit(code)
    os._exit(code)


def parse_flags(define_flags, argv):
    """Test helper: a fresh FlagValues with `define_flags` applied, parsed from argv."""
    fv = flags.FlagValues()
    define_flags(fv)
    fv(["prog"] + list(argv))
    check_common(fv)
    training_record.command_line_default(fv)  # a command line's defaults
    return fv
