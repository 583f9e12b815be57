"""Shared pieces of the model benchmarks: paths, timing, FLOP counts, the matmul peak, tables.

Timing rule of the project: a speed goal is a ratio against a peer measured in the same
run. `interleaved` therefore alternates ours and the peer (ABBA order, so a load change
during the run hits both alike) and reports the median of each side.

FLOP counts (multiply-add = 2 FLOPs; elementwise work, softmax, LayerNorm, embedding
gathers and the optimizer update are not counted, they are "overhead" in the fraction):

  encoder, forward, per token:      L * 2 * (4 H^2 + 2 H I)     (q, k, v, output, two FFN)
  attention, forward, per sequence: L * 4 * S^2 * H             (QK^T and probs @ V)
  pooler + NSP, forward, per seq.:  2 * (H^2 + 2 H)
  masked-LM head, forward, per prediction: 2 * (H^2 + H V)      (transform + tied output)

  inference  = forward(encoder + attention + pooler)
  training   = 3 * forward(everything above)   (backward = 2 x forward: grads of inputs
                                                and of weights)

Achieved FLOP/s = FLOPs of one step / measured seconds per step; its fraction of the
machine's fp32 matmul peak (the best of several large square tf.matmul calls) says how
much of the hardware the model uses.
"""
import argparse
import contextlib
import gc
import os
import random
import statistics
import subprocess
import sys
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
for _path in (BENCH_DIR, REPO_ROOT):
    if _path not in sys.path:
        sys.path.insert(0, _path)

# The runners' start-up settings before TensorFlow is imported: its C++ log level, the
# BFC CPU allocator (unless TF_CPU_ALLOCATOR_USE_BFC says otherwise) for ours and peer
# alike, and the device listing without the no-GPU cuInit line.
from bert_tf2 import startup  # noqa: E402  pylint: disable=wrong-import-position
from bert_tf2 import machine  # noqa: E402  pylint: disable=wrong-import-position
import bench_format  # noqa: E402  pylint: disable=wrong-import-position
from bench_format import format_number  # noqa: E402  pylint: disable=wrong-import-position

import numpy as np  # pylint: disable=wrong-import-position
import tensorflow as tf  # pylint: disable=wrong-import-position
import tf_keras  # pylint: disable=wrong-import-position

startup.initialize_devices()

# Model sizes of the benchmarks (BERT-Mini and BERT-Base of the BERT README).
MODEL_SIZES = {
    "tiny": dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=64, vocab_size=512),
    "mini": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                 intermediate_size=1024, vocab_size=30522),
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072, vocab_size=30522),
}
# --quick (a smoke test of every row's code): "tiny" with one layer, each layer more costing
# only the tracing of the same code again.
QUICK_SIZE = "tiny1"
MODEL_SIZES[QUICK_SIZE] = dict(MODEL_SIZES["tiny"], num_hidden_layers=1)


def model_config(size):
    """The BERT hyper-parameters of a named size, reference defaults elsewhere."""
    cfg = dict(hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
               max_position_embeddings=512, type_vocab_size=2, initializer_range=0.02)
    cfg.update(MODEL_SIZES[size])
    return cfg


# ---------------------------------------------------------------------------
# FLOPs
# ---------------------------------------------------------------------------

def forward_flops(cfg, batch_size, seq_length, max_predictions=0):
    """Matmul FLOPs of one forward pass (see the module docstring for the formula)."""
    h, i, n_layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    tokens = batch_size * seq_length
    encoder = tokens * n_layers * 2 * (4 * h * h + 2 * h * i)
    attention = batch_size * n_layers * 4 * seq_length * seq_length * h
    pooler = batch_size * 2 * (h * h + 2 * h)
    mlm = batch_size * max_predictions * 2 * (h * h + h * cfg["vocab_size"])
    return encoder + attention + pooler + mlm


def training_flops(cfg, batch_size, seq_length, max_predictions):
    """FLOPs of one training step: three forward passes' worth."""
    return 3 * forward_flops(cfg, batch_size, seq_length, max_predictions)


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------

def round_order(names, round_index, seed=0):
    """The order in which the sides `names` take their turns in round `round_index`: a
    shuffle seeded by `seed` and the round (the same in every run), so that over the rounds
    every side runs after a mix of the others.

    Rotating one order every round moves each side to another place but leaves it behind
    the same neighbour in every round, and what a side leaves behind (threads still
    spinning, caches filled with its own data) then falls on that neighbour's times alone.
    In bench_int8 our fp32 SavedModel, always behind torch's bf16 autocast, took 16-18 ms
    a call of one row where the same export served behind LiteRT took 13.3-13.6
    (all-MiniLM-L6-v2, a 2-core AMD Zen 5).
    """
    order = list(names)
    random.Random(seed * 1000003 + round_index).shuffle(order)
    return order


def interleaved(functions, repeats):
    """Times each of {name: function()} `repeats` times, the order reversed every other
    round.

    Returns {name: [seconds, ...]}. With two functions the order is ABBA..., so a load
    change during the run hits every side alike.
    """
    names = list(functions)
    times = {name: [] for name in names}
    for r in range(repeats):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            start = time.perf_counter()
            functions[name]()
            times[name].append(time.perf_counter() - start)
    return times


def median(values):
    """The median of `values`."""
    return statistics.median(values)


def peak_matmul(dtype=tf.float32, n=2048):
    """(function, FLOPs): one n x n x n tf.matmul in `dtype`, warmed up.

    Timed among the benchmarked functions (bench_util.interleaved), its median gives
    the matmul peak under the same machine load as the model's median.
    """
    a = tf.cast(tf.random.stateless_normal([n, n], seed=[1, 2]), dtype)
    b = tf.cast(tf.random.stateless_normal([n, n], seed=[3, 4]), dtype)
    multiply = tf.function(lambda x, y: tf.reduce_sum(tf.matmul(x, y)[:1, :1]))
    multiply(a, b).numpy()
    return (lambda: multiply(a, b).numpy()), 2.0 * n ** 3


def matmul_peak(dtype=tf.float32, n=2048, repeats=5):
    """Best FLOP/s of an n x n x n tf.matmul in `dtype` (after a warm-up call)."""
    multiply, flops = peak_matmul(dtype, n)
    best = min(interleaved({"peak": multiply}, repeats)["peak"])
    return flops / best


def _weight_matmuls(rows, k, n, training):
    """(batch, m, k, n, transpose_a, transpose_b) of x[rows, k] @ W[k, n] and its gradients."""
    shapes = [(1, rows, k, n, False, False)]
    if training:
        shapes += [(1, rows, n, k, False, True),   # d x = d y @ W^T
                   (1, k, rows, n, True, False)]   # d W = x^T @ d y
    return shapes


def step_matmuls(cfg, batch_size, seq_length, max_predictions=0, training=True):
    """Every matmul of a BERT step (forward, and backward when training) as shapes.

    The query/key/value projections are one [T, H] x [H, 3H] matmul (the fastest form).
    """
    h, inner, n_layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    heads = cfg["num_attention_heads"]
    tokens, head_size = batch_size * seq_length, h // heads
    layer = (_weight_matmuls(tokens, h, 3 * h, training) + _weight_matmuls(tokens, h, h, training)
             + _weight_matmuls(tokens, h, inner, training)
             + _weight_matmuls(tokens, inner, h, training))
    bh = batch_size * heads
    attention = [(bh, seq_length, head_size, seq_length, False, True),   # q k^T
                 (bh, seq_length, seq_length, head_size, False, False)]  # probs v
    if training:
        attention += [(bh, seq_length, seq_length, head_size, False, False),  # d q
                      (bh, seq_length, seq_length, head_size, True, False),   # d k
                      (bh, seq_length, head_size, seq_length, False, True),   # d probs
                      (bh, seq_length, seq_length, head_size, True, False)]   # d v
    shapes = (layer + attention) * n_layers + _weight_matmuls(batch_size, h, h, training)
    if max_predictions:
        predictions = batch_size * max_predictions
        shapes += _weight_matmuls(predictions, h, h, training)
        shapes.append((1, predictions, h, cfg["vocab_size"], False, True))  # x @ E^T
        if training:
            shapes += [(1, predictions, cfg["vocab_size"], h, False, False),
                       (1, cfg["vocab_size"], predictions, h, True, False)]
    return shapes


def matmul_floor(shapes, dtype=tf.float32):
    """A function running every matmul of `shapes` once (random operands made up front).

    Its time is what the step would take if everything but its matmuls were free: the
    bound of any implementation built on the same matmul kernels.
    """
    operands = []
    for i, (batch, m, k, n, transpose_a, transpose_b) in enumerate(shapes):
        a_shape = [k, m] if transpose_a else [m, k]
        b_shape = [n, k] if transpose_b else [k, n]
        if batch > 1:
            a_shape, b_shape = [batch] + a_shape, [batch] + b_shape
        operands.append((
            tf.cast(tf.random.stateless_uniform(a_shape, seed=[i, 0], minval=-1), dtype),
            tf.cast(tf.random.stateless_uniform(b_shape, seed=[i, 1], minval=-1), dtype),
            transpose_a, transpose_b))

    @tf.function
    def all_matmuls():
        # One element of each product keeps every matmul alive and the result tiny.
        return tf.add_n([tf.cast(tf.reshape(tf.matmul(a, b, transpose_a=ta, transpose_b=tb),
                                            [-1])[0], tf.float32)
                         for a, b, ta, tb in operands])

    all_matmuls().numpy()
    return lambda: all_matmuls().numpy()


def release_models():
    """Drops Keras' global state between measurements (memory, layer-name counters)."""
    tf_keras.backend.clear_session()
    gc.collect()


def set_policy(dtype):
    """Global tf_keras mixed-precision policy for `dtype` ("fp32" or "bf16")."""
    tf_keras.mixed_precision.set_global_policy(
        "mixed_bfloat16" if dtype == "bf16" else "float32")


@contextlib.contextmanager
def policy(dtype):
    """Within it, set_policy(dtype); float32 again after, whatever happens."""
    set_policy(dtype)
    try:
        yield
    finally:
        set_policy("fp32")


def cpu_model():
    """The CPU's model name from /proc/cpuinfo ("unknown" where there is none)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def cpu_vendor():
    """"Intel", "AMD" or /proc/cpuinfo's vendor_id as it is ("unknown" where there is none)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    vendor = line.split(":", 1)[1].strip()
                    return {"GenuineIntel": "Intel", "AuthenticAMD": "AMD"}.get(vendor, vendor)
    except OSError:
        pass
    return "unknown"


# Run in a fresh process with ONEDNN_VERBOSE=1: oneDNN prints its version and ISA when it
# starts and one line per primitive it runs, naming the kernel it chose.
_ONEDNN_PROBE = """
import os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
a = tf.ones([256, 256])
print(float(tf.function(lambda x: tf.reduce_sum(tf.matmul(x, x)))(a)))
"""


def tf_gemm_library():
    """What TensorFlow's fp32 matmuls run on here: oneDNN's version, ISA and the matmul
    kernel it picks (from ONEDNN_VERBOSE in a child process), or Eigen when the oneDNN
    rewrite is off (TF_ENABLE_ONEDNN_OPTS=0)."""
    if os.environ.get("TF_ENABLE_ONEDNN_OPTS", "").strip() in ("0", "false", "False"):
        return "Eigen (TF_ENABLE_ONEDNN_OPTS=0)"
    try:
        out = subprocess.run([sys.executable, "-c", _ONEDNN_PROBE], capture_output=True,
                             text=True, timeout=300, check=True,
                             env=dict(os.environ, ONEDNN_VERBOSE="1")).stdout
    except (OSError, subprocess.SubprocessError):
        return "oneDNN (version not reported)"
    version, isa, kernels = "oneDNN", None, []
    for line in out.splitlines():
        fields = line.split(",")
        if "info" in fields and "oneDNN" in line and not version.startswith("oneDNN v"):
            version = fields[-1].split("(")[0].strip()
        elif any(f.startswith("isa:") for f in fields):
            isa = next(f for f in fields if f.startswith("isa:"))[4:]
        elif fields[2:5] == ["primitive", "exec", "cpu"] and len(fields) > 6:
            kernels.append(" ".join(f for f in fields[5:7] if f))
    details = ["ISA: %s" % isa] if isa else []
    if kernels:
        details.append("fp32 matmul kernel %s" % kernels[-1])
    return "%s%s" % (version, " (%s)" % "; ".join(details) if details else "")


def _peer_stdout(python, code):
    """What `python -c code` (the peer venv's) prints; None if it cannot run or fails."""
    try:
        return subprocess.run([python, "-c", code], capture_output=True, text=True,
                              timeout=300, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def peer_gemm_library(python):
    """What torch's matmuls run on in the peer venv: its BLAS (MKL / OpenBLAS), oneDNN
    version and CPU capability, from torch.__config__.show()."""
    code = ("import torch\n"
            "for line in torch.__config__.show().splitlines():\n"
            "    print(line.strip(' -'))\n")
    out = _peer_stdout(python, code)
    if out is None:
        return "unknown"
    parts = []
    for line in out.splitlines():
        if line.startswith(("Intel(R) oneAPI Math Kernel Library Version", "Intel(R) Math Kernel")):
            parts.append("MKL " + line.split("Version", 1)[-1].split("-Product")[0].strip())
        elif line.startswith(("Intel(R) MKL-DNN", "oneDNN")):
            parts.append("oneDNN " + line.split()[2] if len(line.split()) > 2 else line)
        elif line.startswith("CPU capability usage"):
            parts.append("CPU capability " + line.split(":", 1)[1].strip())
        elif line.startswith("Build settings"):
            parts += [s.strip().rsplit(" ", 1)[-1] for s in line.split(",") if "BLAS_INFO=" in s]
    return ", ".join(parts) if parts else "unknown"


def peer_python():
    """(the torch peer venv's python or None, why not): $BERT_TF2_PEER_PYTHON, else
    .venv-reproduce (made by `make bench`); BERT_TF2_PEERS=0 (make bench PEERS=0)
    skips the peers on purpose."""
    if os.environ.get("BERT_TF2_PEERS", "1") == "0":
        return None, "skipped on purpose (make bench PEERS=0)"
    path = os.environ.get("BERT_TF2_PEER_PYTHON") or os.path.join(
        REPO_ROOT, ".venv-reproduce", "bin", "python")
    if not os.path.exists(path):
        return None, ("no peer venv at %s (`make bench` creates .venv-reproduce from "
                      "benchmarks/requirements-peer.txt)" % path)
    return path, None


def peer_versions(python):
    """What the peers ran on: the peer python, relative to the repo, and the versions of
    torch, transformers and sentence-transformers in its environment."""
    where = os.path.relpath(python, REPO_ROOT)
    if where.startswith(".."):
        where = python
    code = ("import importlib.metadata as m\n"
            "for n in ('torch', 'transformers', 'sentence-transformers'):\n"
            "    try: print(n, m.version(n))\n"
            "    except m.PackageNotFoundError: pass\n")
    out = _peer_stdout(python, code)
    if out is None:
        return where
    versions = ", ".join(line.strip() for line in out.splitlines() if line.strip())
    return "%s (%s)" % (where, versions) if versions else where


# A peer below this fraction of the machine's matmul peak is not running its normal
# kernels on this CPU (e.g. a bf16 path without bf16 units): its rows are no wins.
DEGENERATE_FRACTION = 0.25
DEGENERATE_NOTE = "peer degenerate on this CPU"


def mark_degenerate_peers(rows, peaks=None):
    """Notes DEGENERATE_NOTE on every row of a configuration whose peer runs below
    DEGENERATE_FRACTION of the matmul peak.

    The peer's fraction comes from the "FLOP/s / fp32 matmul peak" rows; for a bf16
    configuration it is taken against the larger of the fp32 and bf16 peaks when
    `peaks` ({"fp32": GFLOP/s, "bf16": GFLOP/s}) gives both. Returns the rows.
    """
    peaks = peaks or {}
    degenerate = {}
    for r in rows:
        if "matmul peak" not in r["measure"] or r.get("unit") != "fraction" or r["peer"] is None:
            continue
        fraction = r["peer"]
        if " bf16" in " " + r["config"] and peaks.get("fp32") and peaks.get("bf16"):
            fraction *= peaks["fp32"] / max(peaks["fp32"], peaks["bf16"])
        if fraction < DEGENERATE_FRACTION:
            degenerate[r["config"]] = fraction
    for r in rows:
        if r["config"] in degenerate and r["peer"] is not None:
            r["note"] = "%s (peer at %.0f%% of the matmul peak)" % (
                DEGENERATE_NOTE, 100 * degenerate[r["config"]])
    return rows


# bf16 rows without a goal of their own (a bf16 row against a peer's bf16) are left out of
# the wins and losses on a CPU where bf16_measurable() is false, the same rule as the bf16
# goals (issue 74): judged wherever avx512_bf16 or AMX is present.
BF16_NOT_JUDGED_NOTE = "bf16 not judged on this CPU"


# The bf16 speed goals of issue 74 (inference >= 1.6x our fp32 and ahead of torch bf16,
# fine-tuning >= 1.4x) are judged wherever the CPU has bf16 instructions at all (the
# dot-product ones, avx512_bf16, or AMX); elsewhere their rows say NOT_MEASURABLE_NOTE.
BF16_GOAL_FLAGS = ("avx512_bf16", "amx_bf16")
NOT_MEASURABLE_NOTE = bench_format.NOT_MEASURABLE_NOTE
GOAL_NOTE = bench_format.GOAL_NOTE
goal_note = bench_format.goal_note


def bf16_measurable(flags=None):
    """Whether the bf16 speed goals are judged here: avx512_bf16 or amx_bf16 among `flags`
    (default: this machine's /proc/cpuinfo flags; none readable: not measurable)."""
    flags = machine.cpu_flags() if flags is None else flags
    return any(flag in (flags or ()) for flag in BF16_GOAL_FLAGS)


# Where bf16 is not judged, its matmuls run in software: torch's autocast bf16 is 20-50x
# slower than its fp32 there (a BERT-Base batch of 32: about 50 s a call on a 2-core AVX2
# CPU), and tf-models-official's bf16 about as slow. Those sides are timed in one round
# (one step when training) there: their rows are still written, for information, at a
# fraction of the time (issue 74: `make bench` within 30 minutes).
UNJUDGED_BF16_ROUNDS = 1


def bf16_rounds(rounds, flags=None):
    """Timed rounds (or steps) of a bf16 side: `rounds` where bf16_measurable(flags), else
    UNJUDGED_BF16_ROUNDS."""
    return rounds if bf16_measurable(flags) else min(rounds, UNJUDGED_BF16_ROUNDS)


def mark_unjudged_bf16(rows, peaks, flags=None):
    """On a CPU where bf16_measurable(flags) is false (no avx512_bf16, no AMX), notes
    BF16_NOT_JUDGED_NOTE on every bf16 row with a peer (no win, no loss) but those with a
    goal_note (they say NOT_MEASURABLE_NOTE themselves); returns a line for the header, or
    None when bf16 rows are judged. `peaks` ({"fp32", "bf16"} GFLOP/s) only fill the line."""
    if bf16_measurable(flags):
        return None
    ratio = (peaks["bf16"] / peaks["fp32"]) if peaks.get("fp32") and peaks.get("bf16") else None
    why = ("bf16 matmul peak %.2fx the fp32 peak" % ratio if ratio is not None
           else "bf16 matmul peak not measured")
    for r in rows:
        # Rows with a bf16 goal carry their own verdict (goal_note).
        if (" bf16" in " " + r["config"] and r.get("peer") is not None
                and not str(r.get("note") or "").startswith(GOAL_NOTE)):
            note = "%s (no avx512_bf16 or AMX)" % BF16_NOT_JUDGED_NOTE
            r["note"] = note if not r.get("note") else "%s; %s" % (note, r["note"])
    return ("bf16 rows %s: no avx512_bf16 or AMX (%s); they are judged where either is "
            "present; their slowest sides are timed in one round here" % (
                NOT_MEASURABLE_NOTE, why))


def machine_header(peaks, load=None):
    """{"date", "cpu", "cpu_vendor", "isa", "cores", "fp32_peak", "bf16_peak", "load"} of
    this run ("isa": bert_tf2.machine.isa_summary())."""
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu_model(),
            "cpu_vendor": cpu_vendor(), "isa": machine.isa_summary(), "cores": os.cpu_count(),
            "fp32_peak_gflops": peaks.get("fp32"),
            "bf16_peak_gflops": peaks.get("bf16"),
            "load": load if load is not None else _load_average()}


def _load_average():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def cpu_flags():
    """bf16/AMX-related CPU flags of this machine (empty on CPUs without them, or where
    /proc/cpuinfo gives no flags)."""
    return sorted(flag for flag in machine.cpu_flags() or ()
                  if "bf16" in flag or "amx" in flag or flag == "avx512f")


# ---------------------------------------------------------------------------
# Rows and tables
# ---------------------------------------------------------------------------

def row(measure, config, ours, peer, unit, against="peer"):
    """One result in the schema of bench_results.json (ratio = ours / peer).

    `against` is "peer" when the peer column is another implementation, "ours" when it
    is another path or option of our own (what a flag costs or gains): those rows are
    reported but not counted as wins or losses.
    """
    ratio = (ours / peer) if (ours is not None and peer) else None
    return {"measure": measure, "config": config, "ours": ours, "peer": peer, "unit": unit,
            "ratio": ratio, "against": against}


def _fmt(value):
    return format_number(value, missing="-")


def format_table(rows):
    """Fixed-width text table of rows in the bench_results.json schema (with a note
    column when a row has a note)."""
    columns = ("measure", "config", "ours", "peer", "unit", "ratio")
    if any(r.get("note") for r in rows):
        columns += ("note",)
    cells = [[(r.get(c) or "") if c == "note" else _fmt(r.get(c)) for c in columns]
             for r in rows]
    widths = [max([len(c)] + [len(line[k]) for line in cells]) for k, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths))]
    lines.append("  ".join("-" * w for w in widths))
    for line in cells:
        lines.append("  ".join(v.ljust(w) if k < 2 or k >= 4 else v.rjust(w)
                               for k, (v, w) in enumerate(zip(line, widths))).rstrip())
    return "\n".join(lines)


def sweep(configurations, measure, log=print):
    """Rows of measure(*c) for every tuple c of `configurations`, each batch of rows
    logged as a table when `log` is set (progress of a long run)."""
    rows = []
    for configuration in configurations:
        new = measure(*configuration)
        if log:
            log(format_table(new))
        rows.extend(new)
    return rows


def model_sweep(measure, sizes, dtypes, xla, count, repeats, quick=False, log=print):
    """sweep() of measure(size, dtype, use_xla, count, repeats, peak_size=...) over every
    (size, dtype, xla) combination, the peak a 2048^3 matmul. quick: the QUICK_SIZE model
    in fp32 without XLA, count 1 x 2 repeats and a 256^3 peak (a smoke test)."""
    peak_size = 2048
    if quick:
        sizes, dtypes, xla = (QUICK_SIZE,), ("fp32",), (False,)
        count, repeats, peak_size = 1, 2, 256
    return sweep([(size, dtype, use_xla, count, repeats)
                  for size in sizes for dtype in dtypes for use_xla in xla],
                 lambda *c: measure(*c, peak_size=peak_size), log)


def model_sweep_main(description, run, argv, sizes, xla, count_flag, count_help):
    """The command line of a model_sweep benchmark: --sizes, --dtypes, --xla, --<count_flag>,
    --repeats, --quick; prints the table of run(...)'s rows and returns them."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--sizes", default=sizes, help="of: tiny, tiny1, mini, base")
    parser.add_argument("--dtypes", default="fp32,bf16")
    parser.add_argument("--xla", default=xla, help="off, on or off,on")
    parser.add_argument("--" + count_flag, type=int, default=count_help[0], help=count_help[1])
    parser.add_argument("--repeats", type=int, default=5, help="timed calls of each side")
    parser.add_argument("--quick", action="store_true", help="tiny model smoke test")
    args = parser.parse_args(argv)
    rows = run(csv_list(args.sizes), csv_list(args.dtypes),
               tuple(x == "on" for x in csv_list(args.xla)), getattr(args, count_flag),
               args.repeats, quick=args.quick, log=None)
    print(format_table(rows))
    return rows


def csv_list(text):
    """"a, b,c" -> ("a", "b", "c") (command-line lists)."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def synthetic_tokens(batch_size, seq_length, vocab_size, seed=0):
    """input_ids, input_mask (a real length per row), segment_ids as int32 numpy arrays."""
    rng = np.random.RandomState(seed)
    input_ids = rng.randint(1, vocab_size, size=[batch_size, seq_length]).astype(np.int32)
    lengths = rng.randint(seq_length * 3 // 4, seq_length + 1, size=[batch_size])
    input_mask = (np.arange(seq_length)[None, :] < lengths[:, None]).astype(np.int32)
    input_ids *= input_mask
    segment_ids = ((np.arange(seq_length)[None, :] >= lengths[:, None] // 2)
                   * input_mask).astype(np.int32)
    return input_ids, input_mask, segment_ids


def save_rows(path, rows):
    """Writes a benchmark's rows as JSON to `path` (nothing when path is None)."""
    if path:
        import json  # pylint: disable=import-outside-toplevel
        with open(path, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)


# Rest after each answer of a PeerProcess: its idle OpenMP threads stop spinning.
SETTLE_SECONDS = 0.1


class PeerProcess(object):
    """A peer script kept running in the peer venv, answering one JSON command per stdin
    line with one stdout line starting "@@ " (peer_int8.py, peer_embeddings.py,
    peer_attention.py).

    python: the peer venv's python; script: the file name in benchmarks/; args: its
    command-line arguments; env: extra environment variables.

    The peer keeps its OpenMP runtime's own wait policy: OMP_WAIT_POLICY=PASSIVE, which
    this class once set so that the peer's idle threads would not spin while our side
    was timed, also made every one of its calls wake sleeping threads (torch's
    fine-tuning steps 17-20% slower on the Intel Xeon, sentence-transformers' encode
    about 5%). Instead each answer is followed by SETTLE_SECONDS of rest, in which the
    peer's threads stop spinning (libgomp spins for at most a few ms) before anything
    else is timed.
    """

    def __init__(self, python, script, args, env=None):
        import subprocess  # pylint: disable=import-outside-toplevel
        self.script = script
        environment = dict(os.environ, **(env or {}))
        self.proc = subprocess.Popen([python, os.path.join(BENCH_DIR, script)]
                                     + [str(a) for a in args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=environment)

    def ask(self, **command):
        """Sends one command; returns its answer (RuntimeError naming the script if the
        peer ended without answering)."""
        import json  # pylint: disable=import-outside-toplevel
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith("@@ "):
                time.sleep(SETTLE_SECONDS)
                return json.loads(line[3:])
        raise RuntimeError("the peer (%s) ended without answering" % self.script)

    def close(self):
        """Ends the peer process."""
        import json  # pylint: disable=import-outside-toplevel
        if self.proc.poll() is None:
            self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
