"""Inference attention in wall time: ours over the whole batch, ours one batch row at a
time, and torch's fused scaled_dot_product_attention, interleaved.

Usage:
  python benchmarks/bench_attention.py [--shapes 8x12x384x32,...] [--rounds 7]
      [--calls 10] [--threads 2] [--json PATH]

Per shape B x N x S x D (batch, heads, keys = queries, head size) the same inputs on
every side (numpy RandomState(0) draws of q, k, v; the last eighth of every row's keys
masked): our `attention.attend` (scale, scores with the mask add, softmax, context,
transpose to [B, S, N, D]: the oneDNN kernels of the inference forward, traced with
unknown batch and length as the models trace it), our `attention.attend_by_example`
(the same, one batch row at a time: the opt-in `set_attention_by_example(True)`), and
torch SDPA in the peer venv (benchmarks/peer_attention.py, a process that answers one
command at a time, so no side runs while another is timed). Each round runs --calls calls
of every side, in an order shuffled every round (bench_util.round_order); the table gives
each side's median ms per call and the ratios. Without the peer venv (or with
BERT_TF2_PEERS=0) the torch column says why it is empty.
"""
import argparse
import json
import time

import bench_util
from bench_util import np, tf

DEFAULT_SHAPES = ("8x12x128x32", "32x12x128x32", "8x12x256x32", "8x12x384x32",
                  "8x12x128x64", "32x12x128x64", "8x12x384x64")


def parse_shape(text):
    """"BxNxSxD" -> (B, N, S, D)."""
    try:
        shape = tuple(int(x) for x in text.lower().split("x"))
    except ValueError:
        shape = ()
    if len(shape) != 4 or min(shape) < 1:
        raise SystemExit("bench_attention.py: --shapes: %r is not BxNxSxD (four positive "
                         "integers, e.g. 8x12x384x32)" % text)
    return shape


def our_sides(shape):
    """{name: run(calls)} of our two forms on the shape's inputs (module docstring)."""
    from bert_tf2.encoder import attention  # pylint: disable=import-outside-toplevel
    batch, heads, length, size = shape
    rng = np.random.RandomState(0)
    q, k, v = (tf.constant(rng.randn(*shape).astype(np.float32)) for _ in range(3))
    keep = np.ones([batch, length], np.int32)
    keep[:, length - length // 8:] = 0
    mask = attention.create_attention_mask(tf.constant(keep))
    spec = [tf.TensorSpec([None, heads, None, size])] * 3 + [tf.TensorSpec([None, 1, 1, None])]
    sides = {}
    for name, function in (("ours whole batch", attention.attend),
                           ("ours by row", attention.attend_by_example)):
        traced = tf.function(function, input_signature=spec)
        traced(q, k, v, mask).numpy()

        def run(calls, traced=traced):
            for _ in range(calls):
                out = traced(q, k, v, mask)
            out.numpy()
        sides[name] = run
    return sides


def measure(shape, rounds, calls, peer):
    """{side: median ms per call} for one shape; the sides take turns, in an order shuffled
    every round (the peer's time is its own clock's, without the pipe's round trip)."""
    sides = our_sides(shape)
    if peer is not None:
        peer.ask(op="run", shape=list(shape), calls=1)   # warm-up
        sides["torch sdpa"] = lambda n: peer.ask(op="run", shape=list(shape),
                                                  calls=n)["seconds"]
    names = list(sides)
    times = {name: [] for name in names}
    for r in range(rounds):
        for name in bench_util.round_order(names, r):
            start = time.perf_counter()
            seconds = sides[name](calls)
            times[name].append(seconds if seconds is not None
                               else time.perf_counter() - start)
    return {name: 1e3 * bench_util.median(t) / calls for name, t in times.items()}


def table(results, why_not=None):
    """The markdown table of [(shape, {side: ms})]."""
    lines = ["| B x N x S x D | scores MB | ours whole batch ms | ours by row ms | "
             "torch SDPA ms | by row / whole | torch / ours whole |",
             "|---|---|---|---|---|---|---|"]
    for shape, ms in results:
        batch, heads, length, _ = shape
        torch_ms = ms.get("torch sdpa")
        lines.append("| %s | %.1f | %.2f | %.2f | %s | %.2f | %s |" % (
            "x".join(str(x) for x in shape), batch * heads * length * length * 4 / 1e6,
            ms["ours whole batch"], ms["ours by row"],
            "%.2f" % torch_ms if torch_ms else (why_not or "-"),
            ms["ours by row"] / ms["ours whole batch"],
            "%.2f" % (torch_ms / ms["ours whole batch"]) if torch_ms else "-"))
    return "\n".join(lines)


def main(argv=None):
    """Measures every shape and prints the table (and writes --json)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--shapes", default=",".join(DEFAULT_SHAPES))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2,
                        help="torch's threads (ours: TensorFlow's default intra-op pool)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    shapes = [parse_shape(s) for s in bench_util.csv_list(args.shapes)]
    python, why_not = bench_util.peer_python()
    peer = (bench_util.PeerProcess(python, "peer_attention.py", [args.threads],
                                   {"OMP_NUM_THREADS": str(args.threads)})
            if python else None)
    results = []
    try:
        for shape in shapes:
            results.append((shape, measure(shape, args.rounds, args.calls, peer)))
            print("%s: %s" % ("x".join(str(x) for x in shape), ", ".join(
                "%s %.2f ms" % kv for kv in results[-1][1].items())), flush=True)
    finally:
        if peer is not None:
            peer.close()
    print(bench_util.machine_header({}))
    print(table(results, None if python else "not run: %s" % why_not))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"machine": bench_util.machine_header({}),
                       "results": [{"shape": list(s), "ms": ms} for s, ms in results]}, f,
                      indent=1)


if __name__ == "__main__":
    main()
