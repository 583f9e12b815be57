"""Tokenizer throughput on SQuAD v1.1 dev: our exact path, our batch path, HF tokenizers.

Usage:
  python benchmarks/bench_tokenization.py [--squad PATH] [--vocab PATH] [--limit N] [--repeats R]

Every context and question of the SQuAD file is tokenized (uncased vocabulary,
do_lower_case=True, no [CLS]/[SEP]). For each tokenizer the table gives wall and CPU
seconds, throughput in MB/s of UTF-8 input, the number of tokens, the speedup over our
exact (pure-Python) path and whether every id list is identical to the exact path's.
tensorflow_text's own FastBertTokenizer is listed for contrast (fast, not exact).
Timings are the best of --repeats runs after one warm-up run (the exact path runs
once); one-time setup (importing TensorFlow, building tables) is reported apart. On a
busy machine, trust the CPU columns more than the wall ones (HF tokenizers runs
several threads, so its CPU time can exceed its wall time).
"""

import argparse
import json
import os
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

# The runners' quiet start (startup.py) before anything imports TensorFlow.
from bert_tf2 import startup  # noqa: E402  pylint: disable=wrong-import-position
import tokenization  # pylint: disable=wrong-import-position

startup.initialize_devices()

DEFAULT_SQUAD = os.path.join(REPO_ROOT, "..", "shared", "data", "squad", "dev-v1.1.json")
DEFAULT_VOCAB = os.path.join(REPO_ROOT, "..", "shared", "data", "vocab", "uncased_vocab.txt")


def squad_texts(squad_path, limit=None):
    """Returns the contexts and questions of a SQuAD json file, in file order."""
    with open(squad_path, encoding="utf-8") as reader:
        articles = json.load(reader)["data"]
    texts = []
    for article in articles:
        for paragraph in article["paragraphs"]:
            texts.append(paragraph["context"])
            texts.extend(qa["question"] for qa in paragraph["qas"])
    return texts[:limit] if limit else texts


def _best_time(function, repeats):
    """Returns (best wall seconds, best CPU seconds, last result) over `repeats` calls.

    CPU time (all threads of this process) is the steadier figure on a shared machine.
    """
    best_wall, best_cpu, result = float("inf"), float("inf"), None
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        result = function()
        best_cpu = min(best_cpu, time.process_time() - cpu)
        best_wall = min(best_wall, time.perf_counter() - wall)
    return best_wall, best_cpu, result


def _hf_tokenizer(vocab_path):
    """HF tokenizers' BERT WordPiece with the reference settings, or None if absent."""
    try:
        from tokenizers import BertWordPieceTokenizer  # pylint: disable=import-outside-toplevel
    except ImportError:
        return None
    return BertWordPieceTokenizer(vocab_path, lowercase=True)


def _tf_text_as_is(vocab_path):
    """tensorflow_text's own FastBertTokenizer, uncased: fast but not exact (for contrast)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    import tensorflow_text as tf_text  # pylint: disable=import-outside-toplevel

    vocab = list(tokenization.load_vocab(vocab_path))
    tokenizer = tf_text.FastBertTokenizer(
        vocab=vocab, lower_case_nfd_strip_accents=True, token_out_type=tf.int64)

    def ids(texts):
        ragged = tokenizer.tokenize(tf.constant(texts))
        values = ragged.flat_values.numpy().tolist()
        bounds = ragged.row_splits.numpy().tolist()
        return [values[start:end] for start, end in zip(bounds, bounds[1:])]

    return ids


def run(squad_path=DEFAULT_SQUAD, vocab_path=DEFAULT_VOCAB, limit=None, repeats=3):
    """Runs the benchmark; returns one dict per tokenizer.

    Each row has: name, seconds (wall), cpu_seconds, mb_per_s, tokens, speedup and
    cpu_speedup (vs the exact path), identical (id lists equal to the exact path's for
    every text), differing_texts, setup (one-time cost, as text).
    """
    texts = squad_texts(squad_path, limit)
    megabytes = sum(len(text.encode("utf-8")) for text in texts) / 1e6
    ours = tokenization.FullTokenizer(vocab_path, do_lower_case=True)

    def exact():
        return [ours.convert_tokens_to_ids(ours.tokenize(text)) for text in texts]

    # The exact path runs long enough that once is plenty.
    exact_times = _best_time(exact, 1)

    candidates = []
    start = time.perf_counter()
    try:
        import tensorflow_text  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    except ImportError as error:
        print("tensorflow_text missing (%s): no batch-path rows" % error, file=sys.stderr)
    else:
        import_seconds = time.perf_counter() - start
        start = time.perf_counter()
        ours.convert_batch_to_ids(texts[:1])  # builds the character tables and the model
        setup = "%.2fs + importing TensorFlow %.2fs" % (
            time.perf_counter() - start, import_seconds)
        candidates.append(("ours, batch path (tensorflow_text)", setup,
                           lambda: ours.convert_batch_to_ids(texts)))

        start = time.perf_counter()
        as_is = _tf_text_as_is(vocab_path)
        setup = "%.2fs" % (time.perf_counter() - start)
        candidates.append(("tensorflow_text FastBertTokenizer as is", setup,
                           lambda: as_is(texts)))

    start = time.perf_counter()
    hf = _hf_tokenizer(vocab_path)
    if hf is not None:
        setup = "%.2fs" % (time.perf_counter() - start)

        def hf_ids():
            encodings = hf.encode_batch(texts, add_special_tokens=False)
            return [encoding.ids for encoding in encodings]

        candidates.append(("HF tokenizers BertWordPiece (encode_batch)", setup, hf_ids))

    rows = [_row("ours, exact path (pure Python)", exact_times, megabytes, exact_times, "none")]
    for name, setup, function in candidates:
        function()  # warm-up
        rows.append(_row(name, _best_time(function, repeats), megabytes, exact_times, setup))
    return rows


def _row(name, times, megabytes, exact_times, setup):
    seconds, cpu_seconds, ids = times
    reference_ids = exact_times[2]
    differing = sum(1 for mine, theirs in zip(ids, reference_ids) if mine != theirs)
    return {
        "name": name,
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "mb_per_s": megabytes / seconds,
        "tokens": sum(len(row) for row in ids),
        "speedup": exact_times[0] / seconds,
        "cpu_speedup": exact_times[1] / cpu_seconds,
        "identical": differing == 0 and len(ids) == len(reference_ids),
        "differing_texts": differing,
        "setup": setup,
    }


def format_table(rows):
    """Renders the rows of `run` as a fixed-width text table."""
    header = "%-42s %7s %7s %6s %8s %8s %8s  %s" % (
        "tokenizer", "wall s", "CPU s", "MB/s", "tokens", "speedup", "(CPU)", "ids == exact path")
    lines = [header, "-" * len(header)]
    for row in rows:
        same = "yes" if row["identical"] else "no (%d texts differ)" % row["differing_texts"]
        lines.append("%-42s %7.3f %7.3f %6.2f %8d %7.1fx %7.1fx  %s" % (
            row["name"], row["seconds"], row["cpu_seconds"], row["mb_per_s"], row["tokens"],
            row["speedup"], row["cpu_speedup"], same))
    lines.append("MB/s and speedup from wall time; one-time setup, not in the timings:")
    lines.extend("  %s: %s" % (row["name"], row["setup"]) for row in rows[1:])
    return "\n".join(lines)


def main(argv=None):
    """Times the tokenizers on SQuAD's texts (ids compared with the exact path's)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--squad", default=DEFAULT_SQUAD, help="SQuAD json file")
    parser.add_argument("--vocab", default=DEFAULT_VOCAB, help="WordPiece vocabulary file")
    parser.add_argument("--limit", type=int, default=None, help="only the first N texts")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per fast tokenizer")
    args = parser.parse_args(argv)
    for path in (args.squad, args.vocab):
        if not os.path.isfile(path):
            parser.error("file not found: %s" % path)
    texts = squad_texts(args.squad, args.limit)
    print("%d texts, %.2f MB of UTF-8 (SQuAD contexts + questions), do_lower_case=True" % (
        len(texts), sum(len(t.encode("utf-8")) for t in texts) / 1e6))
    print(format_table(run(args.squad, args.vocab, args.limit, args.repeats)))


if __name__ == "__main__":
    main()
