"""Where the time of one pretraining or inference step goes, ours and tf-models-official's.

Usage:
  python benchmarks/profile_step.py [--what pretraining|inference] [--size mini]
      [--dtype fp32] [--xla] [--steps 3] [--top 25]
  python benchmarks/profile_step.py --what finetuning|predict --task sst-2|mrpc
      [--grouped] [--noskip_padding] [--batches 1]

finetuning / predict: the converted all-MiniLM-L6-v2 on --batches batches of 32 real
training examples of the task (random batches, or with --grouped --group_by_length's),
cut to its bucket length as --trim_padding cuts it: bench_finetuning's training step (model,
loss, clip + fused AdamWeightDecay) or the classifier's forward pass, with the encoder on
the real tokens only unless --noskip_padding; the steps cycle over the batches after one
untimed pass. With --what finetuning and the peer venv, torch's steps on the same batches
(benchmarks/peer_step.py) are timed the same way.

Runs a few steps of each side under tf.profiler and prints, per side, the time of the
TensorFlow ops grouped by op type (MatMul, BatchMatMulV2, Mul, ...), their share of the
profiled op time, and the share of matrix multiplications. The trace (an XSpace protobuf
under a temporary log directory) is read with the protobuf classes TensorFlow ships, so
no profiler plugin is needed. With --xla the compiled clusters show up as a few large
events (XLA's own kernels are not broken down).
"""
import argparse
import collections
import glob
import os
import re
import tempfile
import time

import bench_util  # pylint: disable=unused-import
from bench_util import np, tf

MATMUL_TYPES = ("MatMul", "BatchMatMulV2", "BatchMatMulV3", "_MklMatMul", "_MklBatchMatMulV2",
                "_FusedMatMul", "_MklFusedMatMul", "Einsum", "_MklEinsum",
                "_MklNativeFusedMatMul", "_MklNativeBatchMatMulV2")


# Trace events that enclose op executions (executor and function runs), not ops.
_CONTAINERS = ("Process", "Run", "RunWithBorrowedArgs", "InstantiatedCapturedFunction::Run")


def _op_totals(logdir, by_name=False):
    """{op type (or op name): (total microseconds, count)} over the host plane of the trace."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2  # pylint: disable=import-outside-toplevel
    totals = collections.defaultdict(lambda: [0.0, 0])
    for path in glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True):
        space = xplane_pb2.XSpace()
        with open(path, "rb") as f:
            space.ParseFromString(f.read())
        for plane in space.planes:
            if not plane.name.startswith("/host:CPU"):
                continue
            for line in plane.lines:
                for event in line.events:
                    name = plane.event_metadata[event.metadata_id].name
                    if ":" not in name or name.startswith(("__inference", "Iterator")):
                        continue
                    op_name, op_type = name.rsplit(":", 1)
                    if (not op_type or " " in op_type or op_type[0].islower()
                            or op_type in _CONTAINERS):
                        continue
                    key = op_type
                    if by_name:
                        # The first step and the loop body of a train loop are one op.
                        op_name = re.sub(r"^(while/body/_\d+/)?(while/)?", "", op_name)
                        op_name = op_name.replace("gradient_tape/while/", "gradient_tape/")
                        key = "%s (%s)" % (op_name, op_type)
                    totals[key][0] += event.duration_ps / 1e6
                    totals[key][1] += 1
    return totals


def profile(run, steps, by_name=False):
    """Profiles run(steps) (already warmed up); returns {op type: [us, count]}."""
    logdir = tempfile.mkdtemp(prefix="bench_profile_")
    tf.profiler.experimental.start(logdir)
    run(steps)
    tf.profiler.experimental.stop()
    return _op_totals(logdir, by_name)


def format_profile(title, totals, steps, top):
    """The `top` op types by time per step, with the matmuls' share, as text."""
    total = sum(t for t, _ in totals.values()) or 1.0
    matmul = sum(t for k, (t, _) in totals.items()
                 if k.rsplit("(", 1)[-1].rstrip(")") in MATMUL_TYPES)
    lines = ["%s: %.1f ms of op time per step, matmuls %.0f%%" % (
        title, total / 1e3 / steps, 100.0 * matmul / total)]
    for op_type, (micros, count) in sorted(totals.items(), key=lambda kv: -kv[1][0])[:top]:
        lines.append("  %-36s %9.2f ms/step %5.1f%%  %6d calls/step" % (
            op_type, micros / 1e3 / steps, 100.0 * micros / total, count // steps))
    return "\n".join(lines)


def _sides(what, size, dtype, xla):
    """(ours run(n), peer run(n)) for the chosen benchmark."""
    cfg = bench_util.model_config(size)
    if what == "pretraining":
        import pretraining  # pylint: disable=import-outside-toplevel
        batch = pretraining.synthetic_batch(cfg, pretraining.BATCH_SIZES[size])
        workdir = tempfile.mkdtemp(prefix="bench_profile_run_")
        return (pretraining.build_ours(cfg, dtype, xla, batch, workdir),
                pretraining.build_peer(cfg, dtype, xla, batch))
    import inference  # pylint: disable=import-outside-toplevel
    tokens = bench_util.synthetic_tokens(inference.BATCH_SIZE, inference.SEQ_LENGTH,
                                         cfg["vocab_size"])
    return (inference.build_ours(cfg, dtype, xla, tokens),
            inference.build_peer(cfg, dtype, xla, tokens))


def _padded_batch(examples, rows, lengths):
    """The examples `rows` as one batch of int32 tensors, cut to their bucket length as
    --trim_padding cuts a training batch."""
    from bert_tf2 import input_pipeline  # pylint: disable=import-outside-toplevel
    length = input_pipeline.bucket_length(max(lengths[i] for i in rows), 128, 8)
    batch = {"input_ids": [], "input_mask": [], "segment_ids": [], "label_ids": []}
    for i in rows:
        e = examples[i]
        pad = [0] * (length - len(e["input_ids"]))
        batch["input_ids"].append(e["input_ids"] + pad)
        batch["input_mask"].append([1] * len(e["input_ids"]) + pad)
        batch["segment_ids"].append(e["token_type_ids"] + pad)
        batch["label_ids"].append(e["labels"])
    return {k: tf.constant(v, tf.int32) for k, v in batch.items()}


def _finetuning_side(what, task, grouped, skip_padding, count=1, dtype="fp32"):
    """(run(n): n of our fine-tuning steps or forward passes, cycling over `count` real
    batches (module docstring), the model built under `dtype`'s policy as
    bench_finetuning builds it; the batches as lists; the task's label count)."""
    import bench_finetuning  # pylint: disable=import-outside-toplevel
    import modeling  # pylint: disable=import-outside-toplevel
    import optimization  # pylint: disable=import-outside-toplevel
    import tokenization  # pylint: disable=import-outside-toplevel
    from bert_tf2.trainer import checkpoints, heads  # pylint: disable=import-outside-toplevel
    workdir = tempfile.mkdtemp(prefix="bench_profile_run_")
    config, checkpoint, _ = bench_finetuning.model_setup("minilm", workdir)
    tokenizer = tokenization.FullTokenizer(os.path.join(
        bench_finetuning.shared_dir(), "data", "vocab", "uncased_vocab.txt"), True)
    _, examples, num_labels = bench_finetuning.glue_data_files(workdir, task, "train", 1600,
                                                               tokenizer)
    lengths = [len(e["input_ids"]) for e in examples]
    if grouped:
        chosen = bench_finetuning.grouped_batches(lengths, count)
    else:
        order = np.random.RandomState(1).permutation(len(examples))
        chosen = [order[i * 32:(i + 1) * 32].tolist() for i in range(count)]
    batches = [_padded_batch(examples, rows, lengths) for rows in chosen]
    for batch in batches[:3]:
        print("%s batch: 32 x %d positions, %d real tokens" % (
            task, batch["input_ids"].shape[1], int(tf.reduce_sum(batch["input_mask"]))))
    spec = {k: tf.TensorSpec([None, None] if k != "label_ids" else [None], tf.int32)
            for k in batches[0]}
    with bench_util.policy(dtype):
        model = heads.BertClassifier(config, num_labels)
        model(heads.dummy_features())
    checkpoints.load_checkpoint(model, checkpoint)
    modeling.set_skip_padding(model, skip_padding)
    if what == "finetuning":
        optimizer = optimization.create_optimizer(2e-5, 1000, 100, clip_norm=1.0)
        optimization.create_slots(optimizer, model.trainable_variables)
        step = bench_finetuning.train_step(model, optimizer, spec)
    else:
        step = tf.function(lambda features: model(features, training=False)["logits"])

    def run(n):
        for i in range(n):
            out = step(batches[i % len(batches)])
        out.numpy()
    return run, [{k: v.numpy().tolist() for k, v in b.items()} for b in batches], num_labels


def time_peer_step(batches, num_labels, steps=10):
    """torch's training steps on `batches` (benchmarks/peer_step.py), printed; or why not."""
    import json  # pylint: disable=import-outside-toplevel
    import subprocess  # pylint: disable=import-outside-toplevel
    import bench_finetuning  # pylint: disable=import-outside-toplevel
    python, why_not = bench_util.peer_python()
    if python is None:
        print("torch finetuning not run: %s" % why_not)
        return
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(batches, f)
    subprocess.run([python, os.path.join(bench_util.BENCH_DIR, "peer_step.py"),
                    bench_finetuning.minilm_dir(), f.name, str(steps), str(num_labels)],
                   check=True)  # torch's own OpenMP wait policy: these are wall times
    os.remove(f.name)


def main(argv=None):
    """Profiles training or inference steps of ours and the peer, op by op."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--what", default="pretraining",
                        choices=["pretraining", "inference", "finetuning", "predict"])
    parser.add_argument("--task", default="sst-2", choices=["sst-2", "mrpc"])
    parser.add_argument("--grouped", action="store_true")
    parser.add_argument("--noskip_padding", action="store_true")
    parser.add_argument("--batches", type=int, default=1,
                        help="finetuning / predict: steps cycle over this many batches "
                             "(grouped: bench_finetuning's grouped_batches)")
    parser.add_argument("--size", default="mini")
    parser.add_argument("--dtype", default="fp32")
    parser.add_argument("--xla", action="store_true")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--only", default="ours,peer")
    parser.add_argument("--by_name", action="store_true", help="group by op name, not type")
    args = parser.parse_args(argv)
    if args.what in ("finetuning", "predict"):
        run, batches, num_labels = _finetuning_side(args.what, args.task, args.grouped,
                                                    not args.noskip_padding, args.batches,
                                                    args.dtype)
        steps = max(10, 2 * args.batches)
        run(max(2, args.batches))   # every batch's shapes seen once
        start = time.perf_counter()
        run(steps)
        print("ours %s %s, %d batch(es): %.1f ms per step (wall, mean of %d)" % (
            args.what, args.task, args.batches, (time.perf_counter() - start) * 1e3 / steps,
            steps))
        if args.what == "finetuning":
            time_peer_step(batches, num_labels, steps)
        print(format_profile("ours %s %s %s skip_padding=%s" % (
            args.what, args.task, args.dtype, not args.noskip_padding),
            profile(run, args.steps, args.by_name), args.steps, args.top))
        return
    ours, peer = _sides(args.what, args.size, args.dtype, args.xla)
    for name, run in (("ours", ours), ("peer", peer)):
        if name not in args.only.split(","):
            continue
        run(1)
        print(format_profile("%s %s %s %s xla=%s" % (name, args.what, args.size, args.dtype,
                                                      args.xla),
                             profile(run, args.steps, args.by_name), args.steps, args.top))


if __name__ == "__main__":
    main()
