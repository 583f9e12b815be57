"""Serving speed of an exported classifier on CPU: raw strings vs ids, same SavedModel.

Usage:
  python benchmarks/bench_serving.py [--sizes tiny,mini] [--seq_length 128]
      [--batch_sizes 1,32] [--repeats 30] [--quick]

A 2-label classifier of each size (random weights; tiny, mini or base of bench_util,
with the uncased vocabulary of ../shared when there) is exported with
export_saved_model.py, loaded back with tf.saved_model.load, and called on MRPC test
sentence pairs (../shared; built-in pairs without it) on the CPU:

ours: the `serving_default` signature, raw strings in: UTF-8 decoding, BasicTokenizer,
  WordPiece and packing run in the graph, then the model;
peer: the `serving_ids` signature of the same SavedModel, given input_ids, input_mask
  and segment_ids made beforehand by tokenization.FullTokenizer (what a client that
  tokenizes for itself sends).

ratio = ours / peer: for latencies, how much in-graph tokenization adds; for
throughput, the fraction kept. Calls alternate (ABBA) after one warm-up call each;
p50 / p90 are over the timed calls, throughput is batch size / mean latency. Both
outputs are checked to agree first.
"""
import argparse
import os
import tempfile

import bench_util  # sets up sys.path; pylint: disable=unused-import
from bench_util import np, tf

import export_saved_model  # pylint: disable=wrong-import-order
import modeling  # pylint: disable=wrong-import-order
import tokenization  # pylint: disable=wrong-import-order
from bert_tf2 import heads  # pylint: disable=wrong-import-order
from bert_tf2.tasks import glue_data  # pylint: disable=wrong-import-order
from bert_tf2.trainer import checkpoints  # pylint: disable=wrong-import-order

SHARED = os.environ.get("BERT_TF2_SHARED",
                        os.path.join(bench_util.REPO_ROOT, "..", "shared"))

_FALLBACK_PAIRS = [
    ("The company said its quarterly profit rose 12 percent on strong sales.",
     "Quarterly profit at the company increased by 12 percent, it said."),
    ("Shares of the bank fell sharply in early trading on Tuesday.",
     "The bank's stock dropped steeply when markets opened on Tuesday."),
    ("He was arrested after a two-month investigation by local police.",
     "Police arrested him following an investigation lasting two months."),
    ("The new law will take effect at the start of next year.",
     "Officials expect the measure to pass before the summer recess."),
]


def sentence_pairs(count):
    """`count` (text_a, text_b) pairs: MRPC test rows when ../shared has them."""
    data_dir = os.path.join(SHARED, "data", "glue_data", "MRPC")
    pairs = []
    if os.path.exists(os.path.join(data_dir, "test.tsv")):
        examples = glue_data.MrpcProcessor().get_test_examples(data_dir)
        pairs = [(e.text_a, e.text_b) for e in examples[:count]]
    while len(pairs) < count:
        pairs.append(_FALLBACK_PAIRS[len(pairs) % len(_FALLBACK_PAIRS)])
    return pairs


def _vocab_file(directory, vocab_size, pairs):
    """The uncased vocabulary of ../shared, else one of at most vocab_size tokens made
    from `pairs` (characters, their "##" forms and whole words)."""
    shared = os.path.join(SHARED, "data", "vocab", "uncased_vocab.txt")
    if os.path.exists(shared):
        return shared
    basic = tokenization.BasicTokenizer(do_lower_case=True)
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = sorted({c for a, b in pairs for c in (a + b).lower() if not c.isspace()})
    tokens += chars + ["##" + c for c in chars]
    for a, b in pairs:
        for word in basic.tokenize(a) + basic.tokenize(b):
            if word not in tokens:
                tokens.append(word)
    tokens = tokens[:vocab_size]
    path = os.path.join(directory, "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in tokens))
    return path


def export_classifier(directory, size, seq_length, pairs):
    """Exports a random classifier of `size`; returns (export_dir, vocab_file)."""
    cfg = bench_util.model_config(size)
    vocab_file = _vocab_file(directory, cfg["vocab_size"], pairs)
    # The model's vocabulary is the file's (the real one makes tokenization realistic).
    cfg["vocab_size"] = len(tokenization.load_vocab(vocab_file))
    config = modeling.BertConfig.from_dict(cfg)
    model = heads.BertClassifier(config, 2)
    model(heads.dummy_features())
    prefix = os.path.join(directory, "checkpoint", "model.ckpt")
    checkpoints.write_tf1_checkpoint(
        {name: var.numpy() for name, var in checkpoints.tf1_variable_map(model).items()},
        prefix)
    export_dir = os.path.join(directory, "export")
    export_saved_model.export("classifier", config, prefix, vocab_file, True, seq_length,
                              export_dir, labels=["0", "1"])
    bench_util.release_models()
    return export_dir, vocab_file


def _features(pairs, vocab_file, seq_length):
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    features = [glue_data.convert_single_example(
        i + 5, glue_data.InputExample(str(i), a, b, "0"), ["0", "1"], seq_length,
        tokenizer) for i, (a, b) in enumerate(pairs)]
    return {key: tf.constant([getattr(f, key) for f in features], tf.int32)
            for key in ("input_ids", "input_mask", "segment_ids")}


def measure(loaded, pairs, vocab_file, seq_length, batch_size, repeats, config):
    """Rows for one batch size: p50 and p90 latency (ms) and throughput (examples/s)."""
    batch = pairs[:batch_size]
    text_a = tf.constant([a for a, _ in batch])
    text_b = tf.constant([b for _, b in batch])
    ids = _features(batch, vocab_file, seq_length)
    serve_text = loaded.signatures["serving_default"]
    serve_ids = loaded.signatures["serving_ids"]

    def ours():
        return serve_text(text_a=text_a, text_b=text_b)["probabilities"].numpy()

    def peer():
        return serve_ids(**ids)["probabilities"].numpy()

    np.testing.assert_allclose(ours(), peer(), atol=1e-5)  # also the warm-up calls
    times = bench_util.interleaved({"ours": ours, "peer": peer}, repeats)
    ours_s, peer_s = times["ours"], times["peer"]
    config = "%s, batch %d, raw text vs ids" % (config, batch_size)
    rows = []
    for name, q in (("latency p50", 50), ("latency p90", 90)):
        rows.append(bench_util.row("serving %s, CPU" % name, config,
                                   1000.0 * float(np.percentile(ours_s, q)),
                                   1000.0 * float(np.percentile(peer_s, q)), "ms"))
    rows.append(bench_util.row("serving throughput, CPU", config,
                               batch_size / float(np.mean(ours_s)),
                               batch_size / float(np.mean(peer_s)), "examples/s"))
    return rows


def run(sizes=("tiny", "mini"), seq_length=128, batch_sizes=(1, 32), repeats=30,
        quick=False, log=print):
    """Exports, loads and times the classifiers; returns rows of bench_results.json.

    tiny (2 layers of 32) shows the tokenization cost nearly alone, mini (4 layers of
    256) next to a small real model. quick: tiny only, sequence length 32 and 3
    repeats (a smoke test).
    """
    if quick:
        sizes, seq_length, repeats = ("tiny",), 32, 3
    pairs = sentence_pairs(max(batch_sizes))
    rows = []
    for size in sizes:
        with tf.device("/CPU:0"), tempfile.TemporaryDirectory() as directory:
            export_dir, vocab_file = export_classifier(directory, size, seq_length, pairs)
            loaded = tf.saved_model.load(export_dir)
            config = "%s, seq %d" % (size, seq_length)
            for batch_size in batch_sizes:
                new = measure(loaded, pairs, vocab_file, seq_length, batch_size, repeats,
                              config)
                if log:
                    log(bench_util.format_table(new))
                rows.extend(new)
            del loaded
            bench_util.release_models()
    return rows


def main(argv=None):
    """Runs the SavedModel serving benchmark for the sizes and batch sizes asked for."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="tiny,mini", help="of: tiny, mini, base")
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--batch_sizes", default="1,32")
    parser.add_argument("--repeats", type=int, default=30, help="timed calls of each side")
    parser.add_argument("--quick", action="store_true", help="tiny model smoke test")
    args = parser.parse_args(argv)
    batch_sizes = tuple(int(x) for x in args.batch_sizes.split(",") if x.strip())
    sizes = tuple(x.strip() for x in args.sizes.split(",") if x.strip())
    rows = run(sizes, args.seq_length, batch_sizes, args.repeats, quick=args.quick, log=None)
    print(bench_util.format_table(rows))
    return rows


if __name__ == "__main__":
    main()
