"""Flag groups every runner shares (the define_* functions), and parsing them in a test.

Flags are registered by functions taking a `FlagValues`, never at import time,
so tests can import every runner into one process and give each its own flags. What
a run loads from those flags is bert_tf2/loaders.py; the process around a command
line run (run_cli: signals, the one error line, exit codes) is bert_tf2/cli.py.
"""
from absl import flags

from bert_tf2.tasks import pooling
from bert_tf2.trainer import periodic_eval
from bert_tf2.trainer import progress
from bert_tf2.trainer import training_record
from bert_tf2 import settings as settings_lib


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
# The largest --seed: tf_keras.utils.set_random_seed seeds numpy, whose seeds are 32-bit.
SEED_MAX = 2 ** 32 - 1


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
    settings_lib.define_flag_table(fv, [("bool", name, False, text) for name, text in modes] + [
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
                         "Random seed for initialisation, dropout and shuffling, 0 to 2**32 - 1 "
                         "(numpy's range, which seeds Python, numpy and TensorFlow alike; "
                         "default: not fixed, as in the reference).",
                         lower_bound=0, upper_bound=SEED_MAX, flag_values=fv)


def check_common(fv):
    """The rules of settings_lib.Settings.check_common on parsed flags `fv`
    (cli.run_cli and parse_flags: before any run starts)."""
    settings_lib.of_flag_values(fv).check_common()


def set_command_line_defaults(fv):
    """The command line's own defaults on parsed flags `fv` (cli.run_cli, parse_flags):
    --existing_checkpoint left unset is continue (a Settings made in Python: refuse)."""
    flag = training_record.FLAG
    if flag in fv and fv[flag].value is None:
        fv[flag].value = training_record.COMMAND_LINE_MODE


def parse_flags(define_flags, argv):
    """Test helper: a fresh FlagValues with `define_flags` applied, parsed from argv."""
    fv = flags.FlagValues()
    define_flags(fv)
    fv(["prog"] + list(argv))
    check_common(fv)
    set_command_line_defaults(fv)
    return fv
