"""Throughput of create_pretraining_data: plain-Python baseline vs default mode vs workers.

Usage:
  python benchmarks/bench_create_pretraining_data.py [--max_mb 20] [--baseline_mb 2]
      [--dupe_factor 10] [--num_workers 2] [--repeats 2] [--shared DIR] [--vocab PATH]
      [--reference_mb 1] [--reference_repeats 1] [--reference_modes default,wwm,zh_wwm]

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
  reference  google-research/bert's create_pretraining_data.py itself (../shared/reference/
             bert), its `import tensorflow as tf` line moved to bert_tf2.tf1 by
             bert_tf2.compat.move_fork and nothing else, on the first --reference_mb MB
             as one file, alternating with our script on the same file and flags (the
             scripts' defaults: dupe_factor 10 whatever --dupe_factor says; each
             in its own process; main() timed, not the imports). Its records
             are compared with ours byte for byte once re-serialized deterministically
             (the reference writes each Example's map in a per-process hash order).
             One pair of rows per --reference_modes entry: "default" (the flags
             above), "wwm" (the same with --do_whole_word_mask=True) and "zh_wwm":
             synthetic Chinese text (chinese_corpus) on the Chinese vocabulary with
             --do_whole_word_mask, ours also reading the words' boundaries
             (--word_boundary_file; the reference has no such flag and masks single
             characters, so these records differ by design).
  scaling    our script (default mode) on one file of each --scaling_mb size, in its own
             process: instances/s and peak RSS (and its growth over the imports).
Times include reading, tokenizing, generating and writing, not TensorFlow's import
(the workers' start is included). "speedup" compares instances/s with the baseline's;
"CPU s" adds the workers' CPU time to the main process's, which tells the work
done apart from how many cores were free.
"""

import argparse
import itertools
import json
import os
import re
import shutil
import statistics
import subprocess
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


def _prefix_files(paths, directory, max_mb, name="prefix.txt"):
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
    prefix = os.path.join(directory, name)
    with open(prefix, "w", encoding="utf-8") as f:
        f.write("".join(out))
    return [prefix], size / 1e6


# Runs one script's main() in a fresh process (its command line: the reference's after
# its flags are parsed, as absl's app.run does; ours parses its own) and prints
# {"seconds", "cpu_seconds", "rss_mb", "import_rss_mb"} as JSON: argv = folder kind flags...
_CHILD = """
import json, resource, sys, time
folder, kind, argv = sys.argv[1], sys.argv[2], ["create_pretraining_data.py"] + sys.argv[3:]
sys.path.insert(0, folder)
if kind == "ours":
    from bert_tf2 import startup
import create_pretraining_data as script
from absl import flags
if kind == "ours":
    def work():
        sys.argv = argv
        try:
            script.main()
        except SystemExit as e:
            if e.code:
                raise
else:
    flags.FLAGS(argv)
    work = lambda: script.main(None)
peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
imported = peak()
start, cpu = time.perf_counter(), time.process_time()
work()
print(json.dumps(dict(seconds=time.perf_counter() - start, cpu_seconds=time.process_time() - cpu,
                      rss_mb=peak(), import_rss_mb=imported)))
"""


def reference_fork(shared, directory):
    """A copy of the reference's create_pretraining_data.py and tokenization.py whose
    `import tensorflow as tf` move_fork changed (the project's way to run the
    reference's files); None when ../shared/reference/bert is absent."""
    reference = os.path.join(shared, "reference", "bert")
    if not os.path.isfile(os.path.join(reference, "create_pretraining_data.py")):
        return None
    folder = os.path.join(directory, "reference_fork")
    os.makedirs(folder)
    for name in ("create_pretraining_data.py", "tokenization.py"):
        shutil.copyfile(os.path.join(reference, name), os.path.join(folder, name))
    subprocess.run([sys.executable, "-m", "bert_tf2.compat.move_fork", folder], check=True,
                   cwd=REPO_ROOT, env=_child_env(), capture_output=True)
    return folder


def _child_env():
    path = os.pathsep.join([REPO_ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    return dict(os.environ, PYTHONPATH=path, TF_CPP_MIN_LOG_LEVEL="2")


def _script_flags(input_file, output_file, vocab, dupe_factor, whole_word_mask=False):
    return ["--input_file=" + input_file, "--output_file=" + output_file,
            "--vocab_file=" + vocab, "--do_lower_case=True", "--max_seq_length=128",
            "--max_predictions_per_seq=20", "--masked_lm_prob=0.15", "--short_seq_prob=0.1",
            "--random_seed=12345", "--dupe_factor=%d" % dupe_factor,
            "--do_whole_word_mask=%s" % whole_word_mask]


# The reference rows' modes: name -> (--do_whole_word_mask, what the rows' labels add,
# Chinese corpus). "zh_wwm" runs both scripts on Chinese text with --do_whole_word_mask,
# ours also given the text's words (--word_boundary_file), which the reference cannot take:
# it masks every character as a word of its own, so the records differ by design.
REFERENCE_MODES = {"default": (False, "", False), "wwm": (True, ", --do_whole_word_mask", False),
                   "zh_wwm": (True, ", Chinese, --do_whole_word_mask (ours: "
                              "+ --word_boundary_file)", True)}


def chinese_corpus(directory, chinese_vocab, megabytes, seed=20261125):
    """About `megabytes` MB of synthetic Chinese documents and their word boundary file.

    Words of one to four characters drawn from the Chinese vocabulary's single CJK
    characters (Zipf-weighted, so words repeat as in text), sentences of 4 to 30 words
    closed by Chinese punctuation, one sentence per line, documents of 2 to 20 lines;
    now and then an English word or a number between spaces. The boundary file has the
    same lines with a space between words (what --word_boundary_file reads).

    Returns:
      (input path, boundary path, size in MB).
    """
    import random  # pylint: disable=import-outside-toplevel

    with open(chinese_vocab, encoding="utf-8") as f:
        entries = [line.strip() for line in f]
    hanzi = [t for t in entries if len(t) == 1 and "\u4e00" <= t <= "\u9fff"]
    weights = list(itertools.accumulate(1.0 / (rank + 10) for rank in range(len(hanzi))))
    rng = random.Random(seed)
    lexicon = ["".join(rng.choices(hanzi, cum_weights=weights, k=rng.choice((1, 2, 2, 3, 4))))
               for _ in range(20000)]
    lexicon_weights = list(itertools.accumulate(1.0 / (rank + 5) for rank in range(len(lexicon))))
    others = ["model", "BERT", "data", "2019", "GPU", "playing", "ok"]
    text, bounds, size = [], [], 0
    while size < megabytes * 1e6:
        for _ in range(rng.randint(2, 20)):
            words = rng.choices(lexicon, cum_weights=lexicon_weights, k=rng.randint(4, 30))
            if rng.random() < 0.2:
                words.insert(rng.randrange(len(words)), rng.choice(others))
            words.append(rng.choice("\u3002\uff01\uff1f"))
            line = " ".join("".join(" %s " % w if w.isascii() else w for w in words).split())
            text.append(line + "\n")
            bounds.append(" ".join(words) + "\n")
            size += len(text[-1].encode("utf-8"))
        text.append("\n")
        bounds.append("\n")
    paths = []
    for name, lines in (("chinese_input.txt", text), ("chinese_input.seg", bounds)):
        paths.append(os.path.join(directory, name))
        with open(paths[-1], "w", encoding="utf-8") as f:
            f.write("".join(lines))
    return paths[0], paths[1], size / 1e6


def run_script(kind, folder, flag_list):
    """One process running the reference's script ("reference") or ours ("ours")."""
    proc = subprocess.run([sys.executable, "-c", _CHILD, folder, kind] + flag_list,
                          env=_child_env(), capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError("%s create_pretraining_data failed: %s" % (kind, proc.stderr[-2000:]))
    return json.loads(proc.stdout.strip().split("\n")[-1])


def canonical_records(path):
    """The records of a TFRecord file, each re-serialized deterministically."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    return [tf.train.Example.FromString(r).SerializeToString(deterministic=True)
            for r in tf.data.TFRecordDataset(path).as_numpy_iterator()]


def reference_rows(shared, vocab, workdir, files, megabytes, dupe_factor, repeats=1,
                   modes=("default",)):
    """The reference's script vs ours on the first `megabytes` MB (one file), alternating
    (ABBA...): rows with instances/s (wall and CPU) and the byte comparison, one pair
    per mode of `modes` (names of REFERENCE_MODES)."""
    fork = reference_fork(shared, workdir)
    if fork is None:
        return []
    [prefix], size = _prefix_files(files, workdir, megabytes, "reference_input.txt")
    chinese_vocab = os.path.join(shared, "data", "vocab", "chinese_vocab.txt")
    rows = []
    for mode in modes:
        if not REFERENCE_MODES[mode][2]:
            rows += _reference_mode_rows(fork, vocab, workdir, prefix, size, dupe_factor,
                                         repeats, mode)
        elif os.path.isfile(chinese_vocab):
            text, bounds, text_mb = chinese_corpus(workdir, chinese_vocab, megabytes)
            rows += _reference_mode_rows(fork, chinese_vocab, workdir, text, text_mb,
                                         dupe_factor, repeats, mode, bounds)
    return rows


def _reference_mode_rows(fork, vocab, workdir, prefix, size, dupe_factor, repeats, mode,
                         boundary_file=None):
    whole_word_mask, label, _ = REFERENCE_MODES[mode]
    outputs = {kind: os.path.join(workdir, "%s_%s.tfrecord" % (kind, mode))
               for kind in ("reference", "ours")}
    folders = {"reference": fork, "ours": REPO_ROOT}
    extra = {"reference": [], "ours": ["--word_boundary_file=" + boundary_file]
             if boundary_file else []}
    runs = {"reference": [], "ours": []}
    for r in range(repeats):
        for kind in (("reference", "ours") if r % 2 == 0 else ("ours", "reference")):
            runs[kind].append(run_script(kind, folders[kind], _script_flags(
                prefix, outputs[kind], vocab, dupe_factor, whole_word_mask) + extra[kind]))
    records = {k: canonical_records(outputs[k]) for k in ("reference", "ours")}
    theirs, ours = records["reference"], records["ours"]
    if boundary_file:
        compared = ("differ by design (ours masks the boundary file's words, the reference "
                    "each character)")
    else:
        with open(outputs["ours"], "rb") as f:
            raw_ours = f.read()
        identical = theirs == ours and raw_ours == _framed(
            theirs, os.path.join(workdir, "reference_canonical.tfrecord"))
        compared = "%s (compared re-serialized deterministically, and our file byte for " \
                   "byte with theirs so framed)" % ("identical" if identical else "DIFFER")
    note = "records %s: %d reference, %d ours; load average %s" % (
        compared, len(theirs), len(ours), " / ".join("%.2f" % x for x in os.getloadavg()))
    rows = []
    for unit, key in (("instances/s", "seconds"), ("instances/CPU s", "cpu_seconds")):
        speed = {k: len(records[k]) / statistics.median(r[key] for r in runs[k]) for k in runs}
        rows.append(dict(
            measure="create_pretraining_data vs the reference's script",
            config="reference create_pretraining_data.py, %.1f MB, dupe_factor=%d%s, %s" % (
                size, dupe_factor, label, unit), ours=speed["ours"], peer=speed["reference"],
            unit=unit, ratio=speed["ours"] / speed["reference"], note=note,
            mode="vs reference script%s (%s)" % (label, unit), input_mb=size,
            instances=len(ours),
            seconds=statistics.median(r["seconds"] for r in runs["ours"]),
            cpu_seconds=statistics.median(r["cpu_seconds"] for r in runs["ours"]),
            reference_seconds=statistics.median(r[key] for r in runs["reference"])))
    return rows


def _framed(records, path):
    """The bytes of a TFRecord file of `records` as TFRecordWriter writes it."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    with tf.io.TFRecordWriter(path) as writer:
        for record in records:
            writer.write(record)
    with open(path, "rb") as f:
        return f.read()


def scaling_rows(shared, vocab, workdir, sizes, dupe_factor):
    """Our script on one file of each size (MB): instances/s and peak RSS, each in its
    own process; the peer column is the smallest size's instances/s."""
    rows = []
    for megabytes in sizes:
        folder = os.path.join(workdir, "scaling_%g" % megabytes)
        os.makedirs(folder)
        [path] = build_corpus(folder, shared, megabytes, 1)
        out = os.path.join(folder, "out.tfrecord")
        result = run_script("ours", REPO_ROOT, _script_flags(path, out, vocab, dupe_factor))
        count = _count_records(out)
        os.remove(out)
        rows.append(dict(mode="scaling, default, %g MB, 1 file" % megabytes,
                         input_mb=os.path.getsize(path) / 1e6, instances=count,
                         seconds=result["seconds"], cpu_seconds=result["cpu_seconds"],
                         rss_mb=result["rss_mb"], import_rss_mb=result["import_rss_mb"]))
    base = rows[0]["instances"] / rows[0]["seconds"] if rows else None
    for row in rows:
        speed = row["instances"] / row["seconds"]
        row.update(measure="create_pretraining_data scaling (ours)",
                   config="%s, dupe_factor=%d" % (row["mode"], dupe_factor), ours=speed,
                   peer=base, unit="instances/s", ratio=speed / base, against="ours",
                   note="peak RSS %.0f MB (%.0f MB over the imports)" % (
                       row["rss_mb"], row["rss_mb"] - row["import_rss_mb"]))
    return rows


def _count_records(path):
    """The number of records of a TFRecord file (reads the length fields only)."""
    count = 0
    with open(path, "rb") as f:
        while True:
            header = f.read(12)
            if len(header) < 12:
                return count
            f.seek(int.from_bytes(header[:8], "little") + 4, 1)
            count += 1


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
        num_workers=2, num_files=8, repeats=2, reference_mb=None, reference_repeats=1,
        scaling_mb=None, reference_dupe_factor=10, reference_modes=tuple(REFERENCE_MODES)):
    """Measures the modes; returns one dict per mode (see the module docstring).

    reference_mb: the reference script's input (None: 1 MB, at most max_mb; 0: not run),
      run with the script's default flags (reference_dupe_factor: its dupe_factor, 10);
    reference_modes: the reference rows' modes (REFERENCE_MODES: "default", "wwm",
      "zh_wwm"; the last on ../shared's Chinese vocabulary, skipped without it);
    scaling_mb: the sizes of the scaling rows (None: 1 and 10 MB, or max_mb when smaller).

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
        if reference_mb is None:
            reference_mb = min(1.0, max_mb)
        extra = reference_rows(shared, vocab, workdir, files, reference_mb, reference_dupe_factor,
                               reference_repeats, reference_modes) if reference_mb else []
        if scaling_mb is None:
            scaling_mb = (1.0, 10.0) if max_mb >= 1 else (max_mb,)
        extra += scaling_rows(shared, vocab, workdir, scaling_mb, dupe_factor)
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
    return rows + extra


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
    parser.add_argument("--reference_mb", type=float, default=None,
                        help="input of the reference script's rows (default 1; 0: skip)")
    parser.add_argument("--reference_repeats", type=int, default=1)
    parser.add_argument("--reference_modes", default=",".join(REFERENCE_MODES),
                        help="comma-separated reference row modes: default (the scripts' "
                             "flags), wwm (with --do_whole_word_mask=True), zh_wwm (Chinese "
                             "text, --do_whole_word_mask, ours with the words' boundaries)")
    parser.add_argument("--scaling_mb", default=None,
                        help="comma-separated sizes of the scaling rows (default 1,10)")
    args = parser.parse_args(argv)
    scaling = ([float(s) for s in args.scaling_mb.split(",")] if args.scaling_mb else None)
    modes = [m.strip() for m in args.reference_modes.split(",") if m.strip()]
    unknown = sorted(set(modes) - set(REFERENCE_MODES))
    if unknown:
        parser.error("--reference_modes: unknown %s (known: %s)"
                     % (", ".join(unknown), ", ".join(REFERENCE_MODES)))
    rows = run(args.shared, args.vocab, args.max_mb, args.baseline_mb, args.dupe_factor,
               args.num_workers, args.num_files, args.repeats, args.reference_mb,
               args.reference_repeats, scaling, reference_modes=modes)
    print("create_pretraining_data throughput (dupe_factor=%d, cpus=%s)"
          % (args.dupe_factor, os.cpu_count()))
    print(format_table([r for r in rows if "speedup" in r]))
    others = [row for row in rows if "speedup" not in row]
    width = max([44] + [len(row["mode"]) for row in others])
    for row in others:
        print("%-*s %8.2f MB  ours %9.0f  peer %9.0f %-15s %6.2fx  %s" % (
            width, row["mode"], row["input_mb"], row["ours"], row["peer"], row["unit"],
            row["ratio"], row.get("note", "")))
    return rows


if __name__ == "__main__":
    from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top
    absl_logging.set_verbosity(absl_logging.WARNING)
    main()
