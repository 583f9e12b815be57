"""Gradient checkpointing: peak memory and speed of a training step, with and without.

Usage:
  python benchmarks/memory.py [--sizes mini,base] [--seq_length 512] [--batch_size 8]
      [--repeats R] [--quick]

One step = forward + backward of BertPretrainer's loss (masked LM + next sentence, dropout
0.1 active) on a synthetic batch, gradients of every trainable variable, inside a
tf.function, after a warm-up call:
  ours (checkpointing)  --gradient_checkpointing: each transformer layer keeps only its
                        input and is recomputed in the backward pass;
  peer                  the same model without it (every activation kept).
Memory is the peak of TensorFlow's CPU allocator (BFC, which training.py selects) during
one step, minus what was allocated before it (the variables): the step's working memory,
activations and gradients. The ratio column is ours / peer: below 1 for memory means
less, for speed it is the price in sequences/s. Each size runs in its own process (the
allocator's peak cannot be shared between models).
"""
import argparse
import json
import os
import subprocess
import sys

import bench_util
from bench_util import np, tf

MAX_PREDICTIONS = 20


def _step(model, features):
    from bert_tf2 import heads  # pylint: disable=import-outside-toplevel
    import modeling  # pylint: disable=import-outside-toplevel

    # No AutoGraph rewrite, as our training loops trace (RunConfig.autograph=False): the
    # same graph, less tracing.
    @tf.function(autograph=False)
    def step():
        with tf.GradientTape() as tape:
            out = model(features, training=True)
            mlm, _ = heads.masked_lm_loss_from_logits(
                out["masked_lm_logits"], features["masked_lm_ids"],
                features["masked_lm_weights"])
            nsp, _ = heads.next_sentence_loss(out["next_sentence_log_probs"],
                                                 features["next_sentence_labels"])
            loss = mlm + nsp
        grads = tape.gradient(loss, model.trainable_variables)
        return tf.add_n([tf.reduce_sum(tf.convert_to_tensor(g)) for g in grads])
    return step


def measure_in_process(size, seq_length, batch_size, repeats):
    """{"ours"|"peer": {"bytes": step peak bytes, "seconds": [per step]}} for one size."""
    from bert_tf2 import heads  # pylint: disable=import-outside-toplevel
    import modeling  # pylint: disable=import-outside-toplevel
    cfg = bench_util.model_config(size)
    ids, mask, segments = bench_util.synthetic_tokens(batch_size, seq_length, cfg["vocab_size"])
    rng = np.random.RandomState(1)
    features = {
        "input_ids": tf.constant(ids), "input_mask": tf.constant(mask),
        "segment_ids": tf.constant(segments),
        "masked_lm_positions": tf.constant(rng.randint(
            1, seq_length * 3 // 4, [batch_size, MAX_PREDICTIONS]).astype(np.int32)),
        "masked_lm_ids": tf.constant(rng.randint(
            1, cfg["vocab_size"], [batch_size, MAX_PREDICTIONS]).astype(np.int32)),
        "masked_lm_weights": tf.ones([batch_size, MAX_PREDICTIONS]),
        "next_sentence_labels": tf.constant(rng.randint(0, 2, [batch_size, 1]).astype(np.int32)),
    }
    model = heads.BertPretrainer(modeling.BertConfig(**cfg))
    model(heads.dummy_features())
    steps = {}
    for name, recompute in (("peer", False), ("ours", True)):
        modeling.set_gradient_checkpointing(model, recompute)
        steps[name] = _step(model, features)
        steps[name]().numpy()  # trace and warm up
    result = {}
    for name, step in steps.items():
        tf.config.experimental.reset_memory_stats("CPU:0")
        before = tf.config.experimental.get_memory_info("CPU:0")["current"]
        step().numpy()
        peak = tf.config.experimental.get_memory_info("CPU:0")["peak"]
        result[name] = {"bytes": peak - before}
    times = bench_util.interleaved({k: (lambda s=s: s().numpy()) for k, s in steps.items()},
                                   repeats)
    for name in steps:
        result[name]["seconds"] = times[name]
    return result


def measure(size, seq_length, batch_size, repeats):
    """Rows for one size, measured in a fresh process."""
    env = dict(os.environ, TF_CPU_ALLOCATOR_USE_BFC="true")
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--_child", size, "--seq_length",
         str(seq_length), "--batch_size", str(batch_size), "--repeats", str(repeats)],
        capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError("memory benchmark (%s) failed:\n%s" % (size, proc.stderr[-3000:]))
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    cfg = bench_util.model_config(size)
    config = "%s L%d H%d b%d s%d fp32" % (size, cfg["num_hidden_layers"], cfg["hidden_size"],
                                          batch_size, seq_length)
    rate = {k: batch_size / bench_util.median(v["seconds"]) for k, v in result.items()}
    mib = {k: v["bytes"] / 2.0 ** 20 for k, v in result.items()}
    return [
        bench_util.row("training step peak memory (gradient checkpointing vs none)", config,
                       mib["ours"], mib["peer"], "MiB", against="ours"),
        bench_util.row("training step speed (gradient checkpointing vs none)", config,
                       rate["ours"], rate["peer"], "sequences/s", against="ours"),
    ]


def run(sizes=("mini", "base"), seq_length=512, batch_size=8, repeats=3, quick=False,
        log=print):
    """Peak training memory of each size, each measured in a child process."""
    if quick:
        sizes, seq_length, batch_size, repeats = (bench_util.QUICK_SIZE,), 64, 4, 1
    return bench_util.sweep([(size, seq_length, batch_size, repeats) for size in sizes],
                            measure, log)


def main(argv=None):
    """Command line of the memory benchmark (also the child process's entry)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="mini,base")
    parser.add_argument("--seq_length", type=int, default=512)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--_child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._child:  # pylint: disable=protected-access
        result = measure_in_process(args._child, args.seq_length, args.batch_size,  # pylint: disable=protected-access
                                    args.repeats)
        print(json.dumps(result))
        return
    rows = run(bench_util.csv_list(args.sizes), args.seq_length, args.batch_size,
               args.repeats, args.quick, log=None)
    print(bench_util.format_table(rows))


if __name__ == "__main__":
    main()
