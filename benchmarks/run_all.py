"""All side-by-side benchmarks (`make bench`): one table, and bench_results.json in the cwd.

Usage:
  python benchmarks/run_all.py [--quick | --full] [--steps N] [--repeats R]
      [--only pretraining,inference,optimizer,memory,tokenization,create_pretraining_data,
              finetuning,packing,embeddings,ranker,long_text,int8,runtime_doors,
              repeated_runs,predictor]
      [--output PATH]

Every row is {"measure", "config", "ours", "peer", "unit", "ratio"} with ratio = ours/peer
(higher is better), ours and the peer measured in the same process, interleaved:
  pretraining              our training step vs tf-models-official's (pretraining.py),
                           BERT-Mini fp32/bf16 with XLA off/on, BERT-Base fp32;
  inference                BertModel vs tf-models-official's BertEncoder (inference.py),
                           BERT-Base fp32 and bf16;
  optimizer                clip + AdamWeightDecay update on BERT-Mini/Base variables, ours
                           (TF1 op by op, and XLA-fused) vs tf-models' (optimizer.py);
  memory                   training step peak memory and speed with --gradient_checkpointing
                           vs without (memory.py), 512 tokens (--full only);
  tokenization             benchmarks/bench_tokenization.py: our tokenizer vs HF tokenizers
                           (MB/s on SQuAD dev);
  create_pretraining_data  benchmarks/bench_create_pretraining_data.py: our modes vs the
                           plain-Python original algorithm (instances/s);
  finetuning               benchmarks/bench_finetuning.py: run_classifier training and
                           eval, extract_features and run_squad predict with trimmed
                           batches vs HF transformers + torch (the peer venv) and vs our
                           --notrim_padding path (examples/s);
  packing                  benchmarks/bench_packing.py: real tokens/s of 512-token
                           pretraining steps on packed rows vs one instance per row
                           (--full only);
  embeddings               benchmarks/bench_embeddings.py: all-MiniLM-L6-v2 sentence
                           vectors of STS-B dev, extract_features' path and the SavedModel
                           vs sentence-transformers encode (the peer venv), sentences/s;
  ranker                   benchmarks/bench_ranker.py: run_ranker's cross-encoder
                           (all-MiniLM-L6-v2's encoder, a seeded one-logit head) scoring
                           1,000 SQuAD dev (query, passage) pairs, run_ranker.Predictor and
                           the SavedModel's rank signature vs sentence-transformers'
                           CrossEncoder.predict on its HF export (the peer venv), pairs/s,
                           the scores' largest difference in each row's note;
  long_text                benchmarks/bench_long_text.py: run_classifier --long_text
                           truncate / head_tail / windows on SQuAD-dev documents whose
                           label is in their last paragraph: accuracy, documents/s (no peer;
                           --full only);
  int8                     benchmarks/bench_int8.py: CPU serving of all-MiniLM-L6-v2 and a
                           BERT-Base-shaped model, batch 1 and 32, seq 128, 2 threads each
                           side: LiteRT dynamic int8 / int8 exports (export_saved_model.py
                           --litert) vs our fp32 SavedModel, torch's quantize_dynamic and
                           ONNX Runtime int8 (fused graph + quantize_dynamic); our fp32
                           SavedModel vs OpenVINO fp32 and ONNX Runtime fp32 (fused); our
                           --serving_dtype=bf16 SavedModel vs our fp32 (goal 1.6x), torch
                           bf16 autocast and OpenVINO bf16, the bf16 goals judged only where
                           the CPU has avx512_bf16 or AMX (the peers in the peer venv; needs
                           the [litert] extra);
  runtime_doors            benchmarks/bench_runtime_doors.py: text in, sentence vectors out,
                           all-MiniLM-L6-v2 and a random BERT-Base, batch 1 and 32: our
                           OpenVINO door (fp32 / bf16 / int8, export_saved_model.py
                           --openvino) vs optimum-intel's OVModelForFeatureExtraction with the
                           HF tokenizer on our transformers export, our ONNX Runtime door
                           (fp32 / int8) vs optimum's ORTModelForFeatureExtraction, each vs
                           our SavedModel, OpenVINO int8 vs our LiteRT int8, issue 92's goals
                           as notes (the peers in .venv-optimum, $BERT_TF2_OPTIMUM_PYTHON);
  repeated_runs            benchmarks/bench_memory.py: the process's RSS over ten
                           run_classifier.run() calls in one process (tiny model and
                           all-MiniLM-L6-v2; no peer, no ../shared; --full only);
  predictor                benchmarks/bench_predictor.py: run_classifier.Predictor vs the
                           exported SavedModel's serving_text_a in the same process, tiny
                           and mini, latency at 1 and 16 texts, throughput from 8 threads.
Eight before it read ../shared/data and are skipped with a note when it (or their script)
is absent. Rows whose "ours" is the matmuls alone give the best ratio any implementation
on the same matmul kernels could reach; the matmul peak rows (peer null) are the machine's.

Default: every group with another implementation's rows, meant to take at most 30 minutes on
2 cores (issue 74's bound; 24.8 on a 2-core Intel Xeon, 2026-11-27, where the run with every
group took 43.7; 35.9 on a 2-core AVX2 AMD EPYC and 12.5 on a 2-core AMD Zen 5, 2026-11-28):
the groups of our own paths alone (OWN_PATH_GROUPS: memory, packing, repeated_runs) run in
--full, and so do the static int8 LiteRT rows (the default times the dynamic_int8 models),
and the training groups time three rounds (--full: --repeats). bench_results.json's
group_seconds tells each group's share. The torch peers run in the venv of
$BERT_TF2_PEER_PYTHON (`make bench` makes .venv-reproduce from
benchmarks/requirements-peer.txt); BERT_TF2_PEERS=0 (`make bench PEERS=0`) skips them on
purpose. A peer or benchmark that did not run is a row saying why;
rows whose peer runs below 25% of the matmul peak are noted "peer degenerate on this CPU"
(no wins). The JSON holds {"machine": date, CPU, cores, peaks, load, notes, group_seconds
(each group's wall time); "rows": [...]}; while the run goes on, <output>.partial holds the
groups done so far (machine "complete": false), and is removed when the whole file is
written; write_readme.py turns it into benchmarks/README.md's tables. --quick: tiny models
and data only (a smoke test, a minute or two); --full: adds BERT-Base bf16 training,
BERT-Base with XLA, the BERT-Base fine-tuning rows, the full-size data benchmarks, the
OWN_PATH_GROUPS, long_text and the static int8 rows.
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback

import bench_util
from bench_util import tf
import write_readme
from bert_tf2.machine import isa_summary

BENCH_DIR = bench_util.BENCH_DIR
SHARED = os.environ.get("BERT_TF2_SHARED",
                        os.path.join(bench_util.REPO_ROOT, "..", "shared"))


# Groups whose script is not bench_<group>.py ("memory" is the gradient-checkpointing
# benchmark, memory.py).
SCRIPTS = {"repeated_runs": "memory"}
# The groups of benchmarks/<name>.py (not bench_<name>.py), which need no ../shared.
MODEL_BENCHMARKS = ("pretraining", "inference", "optimizer", "memory")
# Groups that read nothing from ../shared.
WITHOUT_SHARED_DATA = ("repeated_runs",)
# Groups with no other implementation's row (a flag's cost, our own paths, our memory over
# runs): in --full only, so that the default run of every peer comparison stays within 30
# minutes on 2 cores (issue 74; 2026-11-27: 43.7 minutes with them, 24.8 without).
OWN_PATH_GROUPS = ("memory", "packing", "repeated_runs")


def _load(name):
    """benchmarks/bench_<name>.py (SCRIPTS) as a module (None when the file is absent)."""
    path = os.path.join(BENCH_DIR, "bench_%s.py" % SCRIPTS.get(name, name))
    if not os.path.isfile(path):
        return None
    spec = importlib.util.spec_from_file_location("bench_" + name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------
# Adapters: the data benchmarks' rows -> the bench_results.json schema
# ---------------------------------------------------------------------------

SCHEMA = ("measure", "config", "ours", "peer", "unit", "ratio")


def _schema_rows(rows):
    """Rows that already carry the schema's fields, reduced to them (else None)."""
    if rows and all({"measure", "ours", "peer"} <= set(r) for r in rows):
        return [dict({k: r.get(k) for k in SCHEMA}, against=r.get("against", "peer"),
                     **({"note": r["note"]} if r.get("note") else {})) for r in rows]
    return None


def tokenization_rows(rows):
    """Our tokenizer paths vs HF tokenizers, in MB/s of UTF-8 input."""
    if _schema_rows(rows) is not None:
        return _schema_rows(rows)
    peer = next((r for r in rows if "hf" in r.get("name", "").lower()), None)
    ours = [r for r in rows if r.get("name", "").lower().startswith("ours")]
    out = []
    for r in ours or [r for r in rows if r is not peer]:
        same = r.get("identical")
        config = "SQuAD dev, %s%s" % (r.get("name", "?"), "" if same is None else
                                      ", ids identical: %s" % ("yes" if same else "NO"))
        out.append(bench_util.row("tokenizer throughput vs HF tokenizers", config,
                                  r.get("mb_per_s"), peer and peer.get("mb_per_s"), "MB/s"))
    return out


def create_pretraining_data_rows(rows):
    """Our modes vs the plain-Python original algorithm (the first row), instances/s."""
    if _schema_rows(rows) is not None:
        return _schema_rows(rows)
    if not rows:
        return []
    baseline = rows[0]
    return [bench_util.row("create_pretraining_data vs plain-Python original",
                           "%s, %s MB" % (r.get("mode", "?"), r.get("input_mb", "?")),
                           r.get("instances_per_s"), baseline.get("instances_per_s"),
                           "instances/s") for r in rows[1:]]


def _shared_data(*parts):
    return os.path.exists(os.path.join(SHARED, "data", *parts))


def not_run_row(name, why):
    """A visible row for a benchmark (or peer) that did not run, saying why."""
    return dict(bench_util.row(name, "-", None, None, "-"), note="not run: %s" % why)


def run_data_benchmark(name, kwargs, adapter, notes):
    """Runs benchmarks/bench_<name>.py's run(**kwargs) if it and ../shared are there;
    otherwise (or when it fails) one row saying why."""
    module = _load(name)
    if module is None or not hasattr(module, "run"):
        why = "benchmarks/bench_%s.py (with run()) is absent" % SCRIPTS.get(name, name)
    elif name not in WITHOUT_SHARED_DATA and not _shared_data():
        why = "%s/data is absent (set BERT_TF2_SHARED)" % SHARED
    else:
        try:
            return adapter(_run_in_child(name, kwargs))
        except Exception as e:  # pylint: disable=broad-except
            traceback.print_exc()
            why = "failed, %s: %s" % (type(e).__name__, e)
    notes.append("%s: %s" % (name, why))
    return [not_run_row(name, why)]


def _run_in_child(name, kwargs):
    """bench_<name>.run(**kwargs) in a fresh Python process; its rows.

    Each benchmark starts as its peer does, in a process of its own: in one long-lived
    process the memory, thread pools and tf.data threads of the benchmarks before it stay
    behind (the 2026-11-23 19:14 run had grown to 13 GB by the fine-tuning rows, and ours ran
    25-35% below the same rows run alone, while the peer always gets a fresh process). The
    model groups (MODEL_BENCHMARKS) too: run in this process, they left it holding 11.3 GB
    (TensorFlow's BFC allocator keeps its peak), and the 2026-11-27 run on a 23.5 GB Intel
    Xeon was ended by the OOM killer in its int8 group.
    """
    with tempfile.TemporaryDirectory() as workdir:
        out = os.path.join(workdir, "rows.json")
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name,
                               json.dumps(kwargs), out], check=False)
        if proc.returncode != 0:
            raise RuntimeError("bench_%s.py exited with %d" % (name, proc.returncode))
        with open(out, encoding="utf-8") as f:
            return json.load(f)


def child_main(name, kwargs_json, out):
    """The child of _run_in_child: bench_<name>.run (or <name>.run of MODEL_BENCHMARKS) with
    the kwargs it takes -> JSON rows."""
    import inspect  # pylint: disable=import-outside-toplevel
    module = importlib.import_module(name) if name in MODEL_BENCHMARKS else _load(name)
    kwargs = json.loads(kwargs_json)
    accepted = inspect.signature(module.run).parameters
    rows = module.run(**{k: v for k, v in kwargs.items() if k in accepted})
    with open(out, "w", encoding="utf-8") as f:
        json.dump(rows, f, default=float)


# ---------------------------------------------------------------------------
# The plan
# ---------------------------------------------------------------------------

def plan(mode, steps, repeats, flags=None):
    """[(benchmark name, kwargs)] for mode "quick", "default" or "full"; the bf16 groups
    time one round where the CPU (`flags`, default this machine's) does not judge bf16
    (bench_util.bf16_rounds)."""
    if mode == "quick":
        return [
            ("pretraining", dict(quick=True)),
            ("inference", dict(quick=True)),
            ("optimizer", dict(quick=True)),
            ("memory", dict(quick=True)),
            ("tokenization", dict(limit=200, repeats=1)),
            ("create_pretraining_data", dict(max_mb=0.2, baseline_mb=0.05, dupe_factor=1,
                                             num_workers=1)),
        ]
    full = mode == "full"
    # tf-models-official's bf16 steps are slow on CPUs without bf16 matmul units (its
    # Einsum kernels), so the bf16 runs time fewer, single-step calls.
    bf16 = dict(steps=1, repeats=bench_util.bf16_rounds(max(3, repeats // 2), flags))
    # Training calls of 2-8 s a side: the median of three rounds (--full: `repeats`).
    training = repeats if full else min(repeats, 3)
    items = [
        ("pretraining", dict(sizes=("mini",), dtypes=("fp32",), xla=(False, True),
                             steps=steps, repeats=training)),
        ("pretraining", dict(sizes=("mini",), dtypes=("bf16",), xla=(False, True), **bf16)),
        ("pretraining", dict(sizes=("base",), dtypes=("fp32",),
                             xla=(False, True) if full else (False,), steps=1,
                             repeats=training)),
        ("pretraining", dict(sizes=("base",), dtypes=("bf16",), xla=(False,), **bf16))
        if full else None,
        ("inference", dict(sizes=("base",), dtypes=("fp32",), batches=1, repeats=repeats)),
        # tf-models-official's BERT-Base bf16 forward pass takes about a minute here.
        ("inference", dict(sizes=("base",), dtypes=("bf16",), batches=1,
                           repeats=bench_util.bf16_rounds(repeats if full else 2, flags))),
        ("optimizer", dict(sizes=("mini", "base"), repeats=repeats)),
        # Gradient checkpointing at 512 tokens: BERT-Mini b8 and BERT-Base b4 (a flag's
        # cost against our own path: --full, OWN_PATH_GROUPS).
        ("memory", dict(sizes=("mini",), batch_size=8, repeats=3)),
        ("memory", dict(sizes=("base",), batch_size=4, repeats=3)),
        # Calls of 0.03-0.4 s, the best round counting: ten rounds (three gave the Chinese
        # corpus 7.0x and 8.5x in two runs back to back on a 2-core Zen 5, ten 7.8x and 8.2x).
        ("tokenization", dict(repeats=10)),
        # The reference's own script runs at 1,500-2,000 instances/s: a quarter of a
        # megabyte (its default dupe_factor 10) is enough for its rows and their byte
        # comparison (--full: 1 MB).
        ("create_pretraining_data", dict() if full else dict(max_mb=5.0, baseline_mb=0.5,
                                                              dupe_factor=5, reference_mb=0.25)),
        # Against HF transformers + torch (the peer venv): a few minutes per model.
        ("finetuning", dict(models=("minilm", "base") if full else ("minilm",))),
        ("packing", dict()),
        # Rounds of about 10 s a side (3000 sentences): the median of three (--full: five).
        ("embeddings", dict(repeats=repeats if full else 3)),
        # 1,000 pairs a pass, a few seconds a side: the median of three (--full: five).
        ("ranker", dict(repeats=repeats if full else 3)),
        # About 13 minutes on a loaded 2-core machine (three MiniLM fine-tuning runs).
        ("long_text", dict()) if full else None,
        # Per size an export with LiteRT conversions (BERT-Base: a few minutes), a bf16
        # export and the peers' ONNX graphs, then ten sides a round (BERT-Base batch 32:
        # about 30 s a round on 2 idle cores): about 13 minutes in all, 6 of them BERT-Base's
        # int8 export and its fallback search, so the default times the dynamic_int8
        # models alone (--full: both variants; MiniLM's int8 model, whose search took
        # about a minute on a 2-core AVX2 CPU, was over its agreement bound, 87.7-87.8%,
        # in every run on Intel and AMD, so never our best int8).
        ("int8", dict(repeats=repeats) if full else dict(repeats=repeats,
                                                         dynamic_only=("minilm", "base"))),
        # Per size an export with the OpenVINO, ONNX and LiteRT doors and a bf16 export
        # while the optimum peer exports and quantizes its own, then thirteen sides a round.
        ("runtime_doors", dict(repeats=repeats)),
        # Ten runs of each model in one process: two and a half minutes (--full).
        ("repeated_runs", dict(runs=10)),
        # The Python Predictor against the SavedModel's signature (two small trainings).
        ("predictor", dict(sizes=("tiny", "mini"), repeats=repeats)),
    ]
    return [item for item in items if full or item is None or item[0] not in OWN_PATH_GROUPS]


def header_line(machine):
    """The table's header: mode, date, CPU (vendor, model, instruction sets), cores, GEMM
    libraries, matmul peaks, load."""
    gemm = machine.get("gemm") or {}
    return ("bert-tf2 benchmarks (%s mode, %.0f s), %s, %s (ISA: %s), %d cores; GEMM: ours %s, "
            "torch %s; matmul peak fp32 %.1f / bf16 %.1f GFLOP/s, load average %s: ratio = "
            "ours / peer, higher is better" % (
                machine["mode"], machine["seconds"], machine["date"],
                write_readme.cpu_name(machine), machine.get("isa") or "unknown",
                machine["cores"],
                gemm.get("ours") or "?", gemm.get("peer") or "not run",
                machine["fp32_peak_gflops"] or 0, machine["bf16_peak_gflops"] or 0,
                " ".join(str(x) for x in machine["load"] or ["?"])))


def main(argv=None):
    """Runs the benchmarks asked for and writes their results (JSON and tables)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="tiny smoke test")
    size.add_argument("--full", action="store_true", help="every configuration, full data")
    parser.add_argument("--steps", type=int, default=3,
                        help="optimizer steps per timed call (BERT-Mini fp32)")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls of each side")
    parser.add_argument("--only", default="",
                        help="comma-separated subset of: pretraining, inference, optimizer, "
                             "memory, tokenization, create_pretraining_data, finetuning, "
                             "packing, embeddings, ranker, long_text, int8, runtime_doors, "
                             "repeated_runs, predictor")
    parser.add_argument("--output", default="bench_results.json")
    args = parser.parse_args(argv)
    from absl import logging as absl_logging  # pylint: disable=import-outside-toplevel
    absl_logging.set_verbosity(absl_logging.WARNING)
    tf.get_logger().setLevel("ERROR")

    # First, what the numbers below depend on: the CPU's instruction sets.
    print("CPU ISA: %s" % isa_summary(), flush=True)
    mode = "quick" if args.quick else ("full" if args.full else "default")
    only = set(bench_util.csv_list(args.only))
    items = plan(mode, args.steps, args.repeats)
    absent = sorted(only - {item[0] for item in items if item})
    if absent:  # nothing would run, or less than asked, without a word
        parser.error("--only %s: not in the %s run's plan (%s)" % (
            ",".join(absent), mode, "--full runs every group" if mode != "full"
            else "the groups: " + ", ".join(dict.fromkeys(i[0] for i in items if i))))
    start = time.time()
    notes = []
    flags = bench_util.cpu_flags()
    notes.append("CPU: %s (%s), %d cores; bf16/AMX flags: %s" % (
        bench_util.cpu_model(), bench_util.cpu_vendor(), os.cpu_count(),
        ", ".join(flags) if flags else "none (bf16 matmuls are converted to fp32 in software)"))
    notes.append("CPU allocator: %s" % (
        "BFC (TF_CPU_ALLOCATOR_USE_BFC=true, training.py's default), for ours and the peer"
        if os.environ.get("TF_CPU_ALLOCATOR_USE_BFC", "").lower() in ("true", "1")
        else "TensorFlow's default"))
    peers, why_not = bench_util.peer_python()
    notes.append("torch peers: %s" % (bench_util.peer_versions(peers) if peers
                                       else "not run, " + why_not))
    gemm = {"ours": bench_util.tf_gemm_library(),
            "peer": bench_util.peer_gemm_library(peers) if peers else None}
    notes.append("GEMM library: ours (TensorFlow %s) %s%s" % (
        tf.__version__, gemm["ours"], "; torch peers %s" % gemm["peer"] if peers else ""))
    rows = []
    # The machine's best, for the header: the FLOP/s fractions use a peak timed
    # alongside each model instead (same load as the model).
    peaks = {}
    for dtype, name in ((tf.float32, "fp32"), (tf.bfloat16, "bf16")):
        peaks[name] = bench_util.matmul_peak(dtype) / 1e9
        rows.append(bench_util.row("matmul peak, 2048^3 tf.matmul (best of 5)", name,
                                   peaks[name], None, "GFLOP/s"))
    partial = args.output + ".partial"
    group_seconds = run_groups(items, only, rows, notes, partial, dict(mode=mode, start=start))
    bench_util.mark_degenerate_peers(rows, peaks)
    machine = dict(bench_util.machine_header(peaks), mode=mode, seconds=time.time() - start,
                   notes=notes, bf16=bench_util.mark_unjudged_bf16(rows, peaks, flags),
                   gemm=gemm, group_seconds=group_seconds)
    print()
    print(header_line(machine))
    if machine["bf16"]:
        print(machine["bf16"])
    print(bench_util.format_table(rows))
    print(write_readme.behind_line(machine, rows))
    for note in notes:
        print("note: " + note)
    _write_results(args.output, machine, rows)
    if group_seconds and os.path.exists(partial):  # this run's, now in the whole file
        os.remove(partial)
    print("wrote %s (%d rows)" % (os.path.abspath(args.output), len(rows)))
    return rows


def run_groups(items, only, rows, notes, partial, run):
    """Runs the plan's items (those named in `only`, when given), adding their rows to
    `rows`; after each group, what has run so far is written to `partial` (machine
    "complete": false), so a crash or the OOM killer later on keeps the groups before it.
    run: {"mode", "start"}. Returns [[group, seconds]] in order."""
    data_adapters = {"tokenization": tokenization_rows,
                     "create_pretraining_data": create_pretraining_data_rows}
    group_seconds = []
    for item in items:
        if item is None or (only and item[0] not in only):
            continue
        name, kwargs = item
        print("== %s %s" % (name, kwargs), flush=True)
        group_start = time.time()
        if name in MODEL_BENCHMARKS:
            new = _run_in_child(name, kwargs)
        else:
            new = run_data_benchmark(name, kwargs, data_adapters.get(
                name, lambda found: _schema_rows(found) or []), notes)
            if new:
                print(bench_util.format_table(new), flush=True)
        rows.extend(new)
        group_seconds.append([name, round(time.time() - group_start, 1)])
        print("== %s took %.0f s (%.0f s so far)" % (name, group_seconds[-1][1],
                                                    time.time() - run["start"]), flush=True)
        _write_results(partial, dict(mode=run["mode"], seconds=time.time() - run["start"],
                                     notes=notes, group_seconds=group_seconds,
                                     complete=False), rows)
    return group_seconds


def _write_results(path, machine, rows):
    """{"machine": machine, "rows": rows} as JSON at path, written whole in a new temporary
    file beside it, then renamed over it."""
    handle, temporary = tempfile.mkstemp(prefix=".bench_results_", suffix=".json",
                                         dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as f:
            json.dump({"machine": machine, "rows": rows}, f, indent=1, default=float)
            f.write("\n")
        os.chmod(temporary, 0o644)  # mkstemp's is 0600: readable as an open() file would be
        os.replace(temporary, path)
    except BaseException:
        os.remove(temporary)
        raise


if __name__ == "__main__" and sys.argv[1:2] == ["--child"]:
    child_main(*sys.argv[2:5])
elif __name__ == "__main__":
    main()
