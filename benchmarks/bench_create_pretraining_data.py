"""Throughput of create_pretraining_data: plain-Python baseline vs default mode vs workers.

Usage:
  python benchmarks/bench_create_pretraining_data.py [--max_mb 20] [--baseline_mb 2]
      [--dupe_factor 10] [--num_workers 2] [--repeats 2] [--shared DIR] [--vocab PATH]

A corpus of at least --max_mb MB is assembled in a temporary directory from the
text under ../shared/data: SQuAD v1.1 dev contexts (one document per paragraph,
split into sentences), the sentences of the GLUE tasks (grouped into documents of
a few dozen sentences, in file order) and the BERT sample text, repeated in turn
until the size is reached, then split at document boundaries into 8 files.

Modes, all with the default flags (max_seq_length 128, 20 predictions, uncased):
  baseline   the original algorithm in plain Python: exact pure-Python tokenizer
             line by line, WordPiece-string instances, random module methods,
             protobuf Examples (`write_pretraining_data(fast=False,
             use_fast_tokenizer=False)`). It is slow, so it runs on the first
             --baseline_mb MB only; its instances/s is the comparison point. (The
             original script itself is slower still: its tokenizer and instance
             objects cost more.)
  default    --num_workers=1: batch tokenizer, id-space pipeline, direct record
             encoding; the same records as the baseline. Timed on the same prefix,
             alternating with the baseline, and on the whole corpus.
  workers=N  --num_workers=N: one shard per file in N processes (a different sample).
Times include reading, tokenizing, generating and writing, not TensorFlow's import
(the workers' start is included). "speedup" compares instances/s with the baseline's;
"CPU s" adds the workers' CPU time to the main process's, which tells the work
done apart from how many cores were free.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

# The runners' quiet start (startup.py) before anything imports TensorFlow.
from bert_tf2 import startup  # noqa: E402  pylint: disable=wrong-import-position
import create_pretraining_data as cpd  # pylint: disable=wrong-import-position

startup.initialize_devices()

DEFAULT_SHARED = os.path.join(REPO_ROOT, "..", "shared")

# GLUE files and the (0-based) tab-separated columns that hold sentences.
_GLUE_COLUMNS = (
    ("SST-2/train.tsv", (0,), True), ("SST-2/dev.tsv", (0,), True),
    ("SST-2/test.tsv", (1,), True), ("QNLI/dev.tsv", (1, 2), True),
    ("QNLI/test.tsv", (1, 2), True), ("MRPC/train.tsv", (3, 4), True),
    ("MRPC/test.tsv", (3, 4), True), ("MRPC/dev.tsv", (3, 4), True),
    ("RTE/train.tsv", (1, 2), True), ("RTE/test.tsv", (1, 2), True),
    ("STS-B/train.tsv", (7, 8), True), ("STS-B/test.tsv", (7, 8), True),
    ("CoLA/train.tsv", (3,), False), ("CoLA/test.tsv", (1,), True),
    ("WNLI/train.tsv", (1, 2), True),
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")
_GLUE_DOCUMENT_SENTENCES = 40


def _squad_documents(shared):
    path = os.path.join(shared, "data", "squad", "dev-v1.1.json")
    with open(path, encoding="utf-8") as f:
        data = json.load(f)["data"]
    return [[s for s in _SENTENCE_END.split(p["context"].strip()) if s]
            for article in data for p in article["paragraphs"]]


def _glue_documents(shared):
    documents = []
    for name, columns, header in _GLUE_COLUMNS:
        path = os.path.join(shared, "data", "glue_data", name)
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8-sig") as f:
            rows = f.read().split("\n")[1 if header else 0:]
        sentences = []
        for row in rows:
            cells = row.split("\t")
            sentences += [cells[c].strip() for c in columns
                          if c < len(cells) and cells[c].strip()]
        for start in range(0, len(sentences), _GLUE_DOCUMENT_SENTENCES):
            documents.append(sentences[start:start + _GLUE_DOCUMENT_SENTENCES])
    return documents


def _sample_documents(shared):
    with open(os.path.join(shared, "data", "sample_text.txt"), encoding="utf-8") as f:
        text = f.read()
    return [[l.strip() for l in block.split("\n") if l.strip()]
            for block in text.split("\n\n") if block.strip()]


def build_corpus(directory, shared=DEFAULT_SHARED, max_mb=20.0, num_files=8):
    """Writes a corpus of >= max_mb MB as `num_files` files; returns their paths."""
    documents = _squad_documents(shared) + _glue_documents(shared) + _sample_documents(shared)
    texts = ["\n".join(d) + "\n\n" for d in documents if d]
    target = int(max_mb * 1e6)
    chosen, size = [], 0
    while size < target:
        for text in texts:
            chosen.append(text)
            size += len(text.encode("utf-8"))
            if size >= target:
                break
    per_file = (len(chosen) + num_files - 1) // num_files
    paths = []
    for index in range(num_files):
        part = chosen[index * per_file:(index + 1) * per_file]
        if not part:
            break
        path = os.path.join(directory, "corpus-%02d.txt" % index)
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(part))
        paths.append(path)
    return paths


def _prefix_files(paths, directory, max_mb):
    """The first max_mb MB of the corpus (whole documents), as one file."""
    target = int(max_mb * 1e6)
    out, size = [], 0
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for document in f.read().split("\n\n"):
                if size >= target:
                    break
                if document.strip():
                    out.append(document + "\n\n")
                    size += len(out[-1].encode("utf-8"))
    prefix = os.path.join(directory, "prefix.txt")
    with open(prefix, "w", encoding="utf-8") as f:
        f.write("".join(out))
    return [prefix], size / 1e6


def _measure(name, inputs, megabytes, output, vocab, options, **kwargs):
    stats = {}
    start, cpu_start = time.perf_counter(), time.process_time()
    count = cpd.write_pretraining_data(inputs, [output], vocab, options, stats=stats, **kwargs)
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu_start + stats["worker_cpu_s"]
    return {"mode": name, "input_mb": round(megabytes, 2), "seconds": round(seconds, 2),
            "cpu_seconds": round(cpu, 2), "instances": count}


def _median_run(runs):
    """One row from repeated runs of one mode: median seconds and CPU seconds."""
    row = dict(runs[0])
    row["seconds"] = round(statistics.median(r["seconds"] for r in runs), 2)
    row["cpu_seconds"] = round(statistics.median(r["cpu_seconds"] for r in runs), 2)
    return row


def run(shared=DEFAULT_SHARED, vocab=None, max_mb=20.0, baseline_mb=2.0, dupe_factor=10,
        num_workers=2, num_files=8, repeats=2):
    """Measures the modes; returns one dict per mode (see the module docstring).

    The baseline and the default mode are first timed on the same prefix, in
    alternation (ABBA...), `repeats` times each, so that a change of machine load
    during the run hits both alike; the medians are kept. Each row also carries
    the bench_results.json fields (measure, config, ours, peer, unit, ratio) with
    the baseline as the peer.
    """
    vocab = vocab or os.path.join(shared, "data", "vocab", "uncased_vocab.txt")
    options = cpd.PretrainingOptions(
        max_seq_length=128, max_predictions_per_seq=20, masked_lm_prob=0.15,
        short_seq_prob=0.1, dupe_factor=dupe_factor, do_whole_word_mask=False,
        random_seed=12345)
    workdir = tempfile.mkdtemp(prefix="bench_cpd_")
    try:
        files = build_corpus(workdir, shared, max_mb, num_files)
        corpus_mb = sum(os.path.getsize(p) for p in files) / 1e6
        prefix, prefix_mb = _prefix_files(files, workdir, baseline_mb)
        out = os.path.join(workdir, "out.tfrecord")
        # Loads TensorFlow and the tokenizer tables outside the timed runs.
        cpd.write_pretraining_data(prefix, [out], vocab, options._replace(dupe_factor=1))

        def baseline():
            return _measure("baseline (plain Python, %.1f MB prefix)" % prefix_mb, prefix,
                            prefix_mb, out, vocab, options, fast=False,
                            use_fast_tokenizer=False)

        def default_on_prefix():
            return _measure("default, same prefix", prefix, prefix_mb, out, vocab, options)

        runs = {baseline: [], default_on_prefix: []}
        for r in range(repeats):
            for mode in ((baseline, default_on_prefix) if r % 2 == 0 else
                         (default_on_prefix, baseline)):
                runs[mode].append(mode())
        rows = [_median_run(runs[baseline]), _median_run(runs[default_on_prefix]),
                _measure("default (--num_workers=1)", files, corpus_mb, out, vocab, options)]
        if num_workers > 1:
            rows.append(_measure("--num_workers=%d, %d files" % (num_workers, len(files)),
                                 files, corpus_mb, out, vocab, options,
                                 num_workers=num_workers))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    base = rows[0]["instances"] / rows[0]["seconds"]
    for row in rows:
        row["instances_per_s"] = row["instances"] / row["seconds"]
        row["instances_per_cpu_s"] = row["instances"] / row["cpu_seconds"]
        row["speedup"] = row["instances_per_s"] / base
        row.update(measure="create_pretraining_data instances/s",
                   config="%s, dupe_factor=%d" % (row["mode"], dupe_factor),
                   ours=row["instances_per_s"], peer=base, unit="instances/s",
                   ratio=row["speedup"])
    return rows


def format_table(rows):
    """The result rows as a fixed-width text table."""
    header = "%-40s %8s %8s %8s %10s %12s %8s %12s" % (
        "mode", "input MB", "seconds", "CPU s", "instances", "instances/s", "speedup",
        "inst/CPU s")
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append("%-40s %8.2f %8.2f %8.2f %10d %12.0f %7.1fx %12.0f" % (
            r["mode"], r["input_mb"], r["seconds"], r["cpu_seconds"], r["instances"],
            r["instances_per_s"], r["speedup"], r["instances_per_cpu_s"]))
    return "\n".join(lines)


def main(argv=None):
    """Times create_pretraining_data's modes on growing inputs and prints the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shared", default=DEFAULT_SHARED)
    parser.add_argument("--vocab", default=None)
    parser.add_argument("--max_mb", type=float, default=20.0)
    parser.add_argument("--baseline_mb", type=float, default=2.0)
    parser.add_argument("--dupe_factor", type=int, default=10)
    parser.add_argument("--num_workers", type=int, default=2)
    parser.add_argument("--num_files", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2,
                        help="timed runs of the baseline and of the default mode on the prefix")
    args = parser.parse_args(argv)
    rows = run(args.shared, args.vocab, args.max_mb, args.baseline_mb, args.dupe_factor,
               args.num_workers, args.num_files, args.repeats)
    print("create_pretraining_data throughput (dupe_factor=%d, cpus=%s)"
          % (args.dupe_factor, os.cpu_count()))
    print(format_table(rows))
    return rows


if __name__ == "__main__":
    from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top
    absl_logging.set_verbosity(absl_logging.WARNING)
    main()
