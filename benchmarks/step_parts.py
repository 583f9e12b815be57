"""How much of our pretraining step the optimizer's update takes, in wall time.

Usage:
  python benchmarks/step_parts.py [--size base] [--batch_size 4] [--rounds 3] [--repeats 5]

Times training.Runner's pretraining loop (the bench's `pretraining` row: synthetic batch,
fp32, XLA off) as it is, and with the fused optimizer's apply_gradients replaced by a
stand-in that still reads every gradient (their global norm, as the clip does) but
updates nothing. Each variant runs in a process of its own, alternating, `--rounds`
times; each process prints the median of `--repeats` timed calls of two steps. The
difference is the update's own cost; the fraction of the fp32 matmul peak the step would
reach without it is the bench's fraction scaled by the two times. A measurement tool:
the stand-in trains nothing.
"""
import argparse
import statistics
import subprocess
import sys
import tempfile
import time

import bench_util
from bench_util import tf


def _time_steps(size, batch_size, repeats, without_update):
    """Median seconds of one step of ours (a call of two steps, after two warm-up calls)."""
    import pretraining  # pylint: disable=import-outside-toplevel
    if without_update:
        from bert_tf2.base import fused_update  # pylint: disable=import-outside-toplevel

        def read_only(self, grads_and_vars, name=None, **unused):
            del name, unused
            norm = tf.linalg.global_norm([g for g, _ in grads_and_vars])
            return self.iterations.assign_add(tf.cast(norm >= 0.0, tf.int64))

        fused_update.FusedOptimizer.apply_gradients = read_only
    cfg = bench_util.model_config(size)
    run = pretraining.build_ours(cfg, "fp32", False, pretraining.synthetic_batch(
        cfg, batch_size), tempfile.mkdtemp(prefix="step_parts_"))
    run(1)
    run(1)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run(2)
        times.append((time.perf_counter() - start) / 2)
    return statistics.median(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="base")
    parser.add_argument("--batch_size", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--child", choices=["full", "without_update"], default=None)
    args = parser.parse_args(argv)
    if args.child:
        print(_time_steps(args.size, args.batch_size, args.repeats,
                          args.child == "without_update"))
        return
    seconds = {"full": [], "without_update": []}
    for _ in range(args.rounds):
        for kind in seconds:
            out = subprocess.run(
                [sys.executable, __file__, "--child", kind, "--size", args.size,
                 "--batch_size", str(args.batch_size), "--repeats", str(args.repeats)],
                check=True, capture_output=True, text=True).stdout
            seconds[kind].append(float(out.strip().split("\n")[-1]))
    full, bare = (statistics.median(seconds[k]) for k in ("full", "without_update"))
    print("%s b%d s128 fp32: step %.1f ms, without the update %.1f ms: the update %.1f ms "
          "(%.1f%% of the step; %d rounds, medians)" % (
              args.size, args.batch_size, full * 1e3, bare * 1e3, (full - bare) * 1e3,
              100 * (full - bare) / full, args.rounds))
    print("the step's fraction of the fp32 matmul peak without the update: the bench's "
          "fraction x %.3f" % (full / bare))


if __name__ == "__main__":
    main()
