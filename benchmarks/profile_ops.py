"""Where a BERT forward pass spends its time, per op class: ours against HF torch (eager and SDPA).

Usage:
  python benchmarks/profile_ops.py [--models minilm,base] [--batches 8,32]
      [--lengths 32,128,384] [--sides ours,ours_before,eager,sdpa] [--repeats 3]
      [--output profile_ops.json] [--markdown]

For every model x batch x length: our modeling.BertModel forward (inference, fp32, a
tf.function as extract_features and the SavedModel run it) and HF transformers' BertModel
(random weights, eval mode, torch.inference_mode) with the same configuration and the
same token ids (bench_util.synthetic_tokens: rows of 3/4 to full length, padded), with
torch's attention as "eager" (matmul, mask add, softmax, matmul) and as "sdpa" (one fused
scaled_dot_product_attention kernel; transformers' default). Models: MiniLM (6 layers,
H 384, 12 heads of 32: all-MiniLM-L6-v2's shape) and BERT-Base (12 x 768, 12 heads of
64), both with the exact-erf GELU of HF's "gelu". Our sides: "ours" (the default forward:
each LayerNorm one oneDNN kernel, the attention over the whole batch), "ours_before" (as
before issue 45: fused_elementwise.set_onednn_layer_norm(False), LayerNorms op by op) and
"ours_by_row" (the default with attention.set_attention_by_example(True): the attention
one batch row at a time from BY_EXAMPLE_MIN_LENGTH keys, an opt-in): before / after in
one process.

Each side: one untimed forward, --repeats timed ones (fewer for the big shapes: at most
about 30 s of forwards per side; the median is the wall time), then one forward under the
profiler (ours: tf.profiler's trace, read as profile_step reads it; torch: torch.profiler,
in the peer venv through benchmarks/peer_profile_ops.py, with OMP_WAIT_POLICY=PASSIVE).
Op times are put in classes: QKV / attention-output / FFN matmuls (with their fused bias, GELU or residual add), the
attention's scores and context batch-matmuls (ours: the mask add and scale fused into the
scores'), softmax, mask add / scale, LayerNorm, GELU (when not fused into its matmul),
gathers / embeddings, other (transposes, reshapes, copies, the residual adds torch runs
apart). Op time is the sum of the ops' own times; the wall time also holds the
runtime's per-op overhead. The sides run one after the other in separate processes:
on a shared machine compare shares within a profile and medians, not single numbers.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import bench_util
from bench_util import tf
import profile_step

MODELS = {
    "minilm": dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                   intermediate_size=1536),
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072),
}
CLASSES = ("QKV matmul", "attention-output matmul", "FFN matmuls", "scores batch-matmul",
           "context batch-matmul", "fused attention (SDPA)", "softmax", "mask add / scale",
           "LayerNorm", "GELU", "gathers / embeddings", "other")
# Seconds of forwards a side may spend on its timed repeats.
TIME_BUDGET = 30.0


def model_config(model):
    """Our BertConfig dict for a named model (exact-erf GELU, as HF's "gelu")."""
    cfg = dict(vocab_size=30522, hidden_act="gelu_exact", hidden_dropout_prob=0.1,
               attention_probs_dropout_prob=0.1, max_position_embeddings=512,
               type_vocab_size=2, initializer_range=0.02)
    cfg.update(MODELS[model])
    return cfg


def op_class(name, op_type):
    """The op class (CLASSES) of one of our ops, from its name scope and type."""
    parts = name.split("/")
    # oneDNN's rewrites rename them (_MklFusedBatchMatMulV2, _MklNativeFusedMatMul, ...).
    matmul = op_type in profile_step.MATMUL_TYPES or "MatMul" in op_type or "Einsum" in op_type
    if "scores" in parts:
        return "scores batch-matmul" if matmul else "mask add / scale"
    if "context" in parts:
        return "context batch-matmul" if matmul else "other"
    if "softmax" in parts or op_type in ("Softmax", "_MklSoftmax"):
        return "softmax"
    if "attention_mask" in parts:
        return "mask add / scale"
    if "LayerNorm" in parts:
        return "LayerNorm"
    if "embeddings" in parts:
        return "gathers / embeddings"
    if "Gelu" in parts or "Erf" in op_type:
        return "GELU"
    if matmul and "self" in parts:
        return "QKV matmul"
    if matmul and "attention" in parts:
        return "attention-output matmul"
    if matmul and ("intermediate" in parts or "output" in parts):
        return "FFN matmuls"
    if "intermediate" in parts and op_type in ("Mul", "AddV2", "Erf"):
        return "GELU"
    return "other"


def classify(totals, forwards):
    """{"op name (op type)": [us, count]} -> {class: ms per forward}."""
    classes = {}
    for key, (micros, _) in totals.items():
        name, op_type = key.rsplit(" (", 1)
        cls = op_class(name, op_type.rstrip(")"))
        classes[cls] = classes.get(cls, 0.0) + micros / 1e3 / forwards
    return classes


def repeats_for(seconds, repeats):
    """Timed repeats within TIME_BUDGET given one forward's `seconds` (at least 1)."""
    return max(1, min(repeats, int(TIME_BUDGET / max(seconds, 1e-6))))


# Our sides: (oneDNN LayerNorm, attention by row) of each (module docstring).
OUR_SIDES = {"ours": (True, False), "ours_before": (False, False), "ours_by_row": (True, True)}


def profile_ours(model, tokens, repeats, side="ours"):
    """{"seconds", "classes"} of our forward on `tokens` with the forms of `side`, one
    of OUR_SIDES (module docstring)."""
    import inference  # pylint: disable=import-outside-toplevel
    import time  # pylint: disable=import-outside-toplevel
    from bert_tf2.base import fused_elementwise  # pylint: disable=import-outside-toplevel
    from bert_tf2.encoder import attention  # pylint: disable=import-outside-toplevel
    bench_util.release_models()
    layer_norm, by_row = OUR_SIDES[side]
    layer_norm_was = fused_elementwise.onednn_layer_norm_enabled()
    fused_elementwise.set_onednn_layer_norm(layer_norm)
    by_row_was = attention.set_attention_by_example(by_row)
    try:
        run = inference.build_ours(model_config(model), "fp32", False, tokens)
        run(1)  # traced with the settings above
    finally:
        fused_elementwise.set_onednn_layer_norm(layer_norm_was)
        attention.set_attention_by_example(by_row_was)
    start = time.perf_counter()
    run(1)
    first = time.perf_counter() - start
    times = bench_util.interleaved({"ours": lambda: run(1)},
                                   repeats_for(first, repeats))["ours"]
    totals = profile_step.profile(run, 1, by_name=True)
    return {"seconds": bench_util.median(times), "classes": classify(totals, 1)}


def profile_peer(python, model, attention, tokens, repeats, workdir):
    """{"seconds", "classes", "config", ...} of HF BertModel (peer_profile_ops.py)."""
    cfg = dict(MODELS[model], vocab_size=30522, hidden_act="gelu",
               max_position_embeddings=512, type_vocab_size=2)
    ids, mask, types = (t.tolist() for t in tokens)
    job = dict(config=cfg, attention=attention, input_ids=ids, attention_mask=mask,
               token_type_ids=types, repeats=repeats, time_budget=TIME_BUDGET)
    job_path, result_path = (os.path.join(workdir, n) for n in ("job.json", "result.json"))
    with open(job_path, "w", encoding="utf-8") as f:
        json.dump(job, f)
    script = os.path.join(bench_util.BENCH_DIR, "peer_profile_ops.py")
    # Passive OpenMP waits: on a shared machine torch's spinning threads otherwise lose
    # several times their speed (benchmarks/README.md, sentence embeddings).
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    proc = subprocess.run([python, script, job_path, result_path], check=False, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        raise RuntimeError("peer_profile_ops.py failed:\n" + proc.stdout[-2000:])
    with open(result_path, encoding="utf-8") as f:
        return json.load(f)


def run(models, batches, lengths, sides, repeats, log=print):
    """[{"model", "batch", "length", "side", "seconds", "classes", ...}] for every shape."""
    python, why_not = bench_util.peer_python()
    results = []
    with tempfile.TemporaryDirectory() as workdir:
        for model in models:
            for batch in batches:
                for length in lengths:
                    tokens = bench_util.synthetic_tokens(batch, length, 30522)
                    for side in sides:
                        if side in OUR_SIDES:
                            result = profile_ours(model, tokens, repeats, side)
                        elif python is None:
                            log("torch %s not run: %s" % (side, why_not))
                            continue
                        else:
                            result = profile_peer(python, model, side, tokens, repeats,
                                                  workdir)
                        result.update(model=model, batch=batch, length=length, side=side)
                        log(format_result(result))
                        results.append(result)
    return results


def format_result(result):
    """One line: the shape, the side, wall ms and the classes' ms per forward."""
    classes = result["classes"]
    return "%s b%d s%d %-5s wall %8.1f ms | %s" % (
        result["model"], result["batch"], result["length"], result["side"],
        1e3 * result["seconds"], ", ".join("%s %.1f" % (c, classes[c])
                                           for c in CLASSES if classes.get(c)))


def markdown(results):
    """The op-class table (ms per forward and share of the op time) as markdown."""
    present = [c for c in CLASSES if any(r["classes"].get(c) for r in results)]
    head = ["model", "batch", "length", "side", "wall ms", "op ms"] + present
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        total = sum(r["classes"].values()) or 1.0
        cells = ["%.1f (%.0f%%)" % (r["classes"][c], 100 * r["classes"][c] / total)
                 if r["classes"].get(c) else "—" for c in present]
        side = (r["side"].replace("_", " ") if r["side"] in OUR_SIDES
                else "torch " + r["side"])
        lines.append("| " + " | ".join([r["model"], str(r["batch"]), str(r["length"]), side,
                                        "%.1f" % (1e3 * r["seconds"]), "%.1f" % total]
                                       + cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    """Profiles the chosen shapes and writes the JSON (and prints the table)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--models", default="minilm,base")
    parser.add_argument("--batches", default="8,32")
    parser.add_argument("--lengths", default="32,128,384")
    parser.add_argument("--sides", default="ours,eager,sdpa",
                        help="ours, ours_before (our forward as before issue 45: "
                             "LayerNorms op by op), ours_by_row (the attention one batch "
                             "row at a time, opt-in), eager (torch, eager attention), sdpa "
                             "(torch SDPA)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="timed forwards per side (fewer for the big shapes)")
    parser.add_argument("--output", default="profile_ops.json")
    parser.add_argument("--markdown", action="store_true", help="print the markdown table")
    args = parser.parse_args(argv)
    tf.get_logger().setLevel("ERROR")
    results = run(bench_util.csv_list(args.models),
                  [int(b) for b in bench_util.csv_list(args.batches)],
                  [int(n) for n in bench_util.csv_list(args.lengths)],
                  bench_util.csv_list(args.sides), args.repeats)
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump({"machine": bench_util.machine_header({}), "results": results}, f, indent=1)
    if args.markdown:
        print(markdown(results))


if __name__ == "__main__":
    sys.exit(main())
