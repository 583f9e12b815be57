"""Flag groups every runner shares, and the wrapper that turns errors into one line.

Flags are registered by functions taking a `FlagValues`, never at import time,
so tests can import every runner into one process and give each its own flags.
"""
import sys

from absl import app
from absl import flags
from absl import logging


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


def define_training_flags(fv):
    """Reference checkpoint/loop flags plus the TF2 distribution/precision flags."""
    flags.DEFINE_integer("save_checkpoints_steps", 1000,
                         "How often to save the model checkpoint.", flag_values=fv)
    flags.DEFINE_integer("iterations_per_loop", 1000,
                         "How many steps to run inside one tf.function call (one host loop).",
                         flag_values=fv)
    define_tpu_flags(fv)
    define_distribution_flags(fv)


def define_distribution_flags(fv):
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
    flags.DEFINE_integer("num_accumulation_steps", 1,
                         "Micro-batches whose gradients are summed before one optimizer step.",
                         flag_values=fv)
    flags.DEFINE_bool("gradient_checkpointing", False,
                      "Recompute each transformer layer's activations in the backward pass "
                      "instead of keeping them: less memory (long sequences, big batches) "
                      "for about a third more compute per step. Dropout masks are then "
                      "drawn from per-step seeds.", flag_values=fv)
    flags.DEFINE_bool("deterministic_data", False,
                      "Fixed input order (needs --seed); a restarted run skips the batches "
                      "it already trained on, so with no dropout it ends with the same "
                      "weights as an uninterrupted run. Default: the input restarts, as "
                      "the reference's Estimator did.", flag_values=fv)
    flags.DEFINE_integer("seed", None,
                         "Random seed for initialisation, dropout and shuffling (default: "
                         "not fixed, as in the reference).", flag_values=fv)


def require(fv, names):
    """Raises a ValueError naming the first of the flags `names` left unset or empty."""
    for name in names:
        if not getattr(fv, name):
            raise ValueError("--%s is required" % name)


def run_cli(define_flags, run, argv=None):
    """Entry point of a runner: defines its flags, parses, runs `run(FLAGS)`.

    A ValueError or OSError (bad flag, missing file, malformed input) becomes one
    clear line on stderr and exit code 1 instead of a traceback.
    """
    define_flags(flags.FLAGS)

    def main(args):
        if len(args) > 1:
            raise app.UsageError("unexpected arguments: %s" % " ".join(args[1:]))
        try:
            run(flags.FLAGS)
        except (ValueError, OSError) as e:
            logging.error("%s: %s", type(e).__name__, e)
            print("error: %s" % e, file=sys.stderr)
            sys.exit(1)

    app.run(main, argv)


def parse_flags(define_flags, argv):
    """Test helper: a fresh FlagValues with `define_flags` applied, parsed from argv."""
    fv = flags.FlagValues()
    define_flags(fv)
    fv(["prog"] + list(argv))
    return fv
