"""create_pretraining_data on Apache Beam vs the local modes: wall time, instances/s, peak RSS.

Usage (not part of `make bench`; minutes to hours depending on the sizes):
  python benchmarks/bench_beam.py [--file_mb 1] [--num_files 64,128] [--dupe_factor 10]
      [--modes w1,w2,beam2] [--shared DIR] [--vocab PATH] [--json out.json]

Corpus: the text of bench_create_pretraining_data.build_corpus (SQuAD v1.1 dev
contexts, GLUE sentences, the BERT sample text; about 20 MB of distinct text) cut
into documents, then dealt in a seeded random order (a new shuffle on each pass over
the documents) into files of --file_mb MB each, as many as --num_files says. Every
corpus size keeps the file size fixed: a worker's memory is bounded by its file,
so peak RSS per worker must stay flat as the number of files grows.

Modes (all with the default flags but --dupe_factor; one subprocess each):
  w1      --num_workers=1 (the reference's single process)
  w2      --num_workers=2 (the per-file mode on a local process pool)
  beam2   --runner=DirectRunner --direct_running_mode=multi_processing
          --direct_num_workers=2 (the same per-file records, on Beam), 64 output shards
Reported: wall time, instances/s (from the run's summary line), peak RSS of the
launching process and the largest peak RSS of a worker process (Beam's SDK workers,
the process pool's workers; each process's VmHWM, read every 0.25 s; multiprocessing's
fork server and resource tracker left out), and the machine's load average.
"""

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time

import psutil

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO_ROOT, "benchmarks"))

import bench_create_pretraining_data  # pylint: disable=wrong-import-position

DEFAULT_SHARED = os.path.join(REPO_ROOT, "..", "shared")
MODES = {
    "w1": ["--num_workers=1"],
    "w2": ["--num_workers=2"],
    "beam2": ["--runner=DirectRunner", "--direct_running_mode=multi_processing",
              "--direct_num_workers=2", "--num_output_shards=64"],
}


def base_documents(shared):
    """The distinct documents (text blocks ending in a blank line) of the base corpus."""
    with tempfile.TemporaryDirectory() as d:
        (path,) = bench_create_pretraining_data.build_corpus(d, shared, max_mb=20.0,
                                                             num_files=1)
        with open(path, encoding="utf-8") as f:
            text = f.read()
    return [block + "\n\n" for block in text.split("\n\n") if block.strip()]


def write_corpus(directory, documents, num_files, file_mb, seed=0):
    """num_files files of about file_mb MB each, documents dealt in shuffled passes."""
    rng = random.Random(seed)
    order = []
    paths = []
    for index in range(num_files):
        path = os.path.join(directory, "part-%05d.txt" % index)
        size = 0
        with open(path, "w", encoding="utf-8") as f:
            while size < file_mb * 1e6:
                if not order:
                    order = list(range(len(documents)))
                    rng.shuffle(order)
                text = documents[order.pop()]
                f.write(text)
                size += len(text.encode("utf-8"))
        paths.append(path)
    return paths


def _peak_rss(process):
    """The peak RSS of a process so far (VmHWM on Linux: no peak between samples is lost)."""
    try:
        with open("/proc/%d/status" % process.pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        return process.memory_info().rss
    except (OSError, psutil.Error):
        return 0


def _is_helper(process, root_pid):
    """multiprocessing's fork server and resource tracker: they do no work of the run
    (the fork server holds the preloaded imports, which its forked workers share)."""
    try:
        command = " ".join(process.cmdline())
        return process.ppid() == root_pid and ("forkserver" in command or
                                               "resource_tracker" in command)
    except psutil.Error:
        return True


def run_mode(inputs, output, vocab, dupe_factor, mode):
    """Runs one mode as a subprocess; returns its measurements."""
    command = [sys.executable, os.path.join(REPO_ROOT, "create_pretraining_data.py"),
               "--input_file=%s" % inputs, "--output_file=%s" % output,
               "--vocab_file=%s" % vocab, "--dupe_factor=%d" % dupe_factor] + MODES[mode]
    log_path = output + ".log"
    start = time.time()
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                   cwd=REPO_ROOT)
        root = psutil.Process(process.pid)
        peaks = {}
        while process.poll() is None:
            try:
                for p in root.children(recursive=True):
                    if not _is_helper(p, process.pid):
                        peaks[p.pid] = max(peaks.get(p.pid, 0), _peak_rss(p))
                peaks[process.pid] = max(peaks.get(process.pid, 0), _peak_rss(root))
            except psutil.Error:
                pass
            time.sleep(0.25)
    wall = time.time() - start
    with open(log_path) as f:
        log_text = f.read()
    summary = re.findall(r"Summary: .*? (\d+) instances", log_text)
    if process.returncode or not summary:
        raise RuntimeError("%s failed (exit %s), see %s" % (mode, process.returncode, log_path))
    instances = int(summary[-1])
    workers = [rss for pid, rss in peaks.items() if pid != process.pid]
    return dict(mode=mode, wall_s=round(wall, 1), instances=instances,
                instances_per_s=round(instances / wall), launcher_rss_mb=round(
                    peaks.get(process.pid, 0) / 2 ** 20),
                worker_rss_mb=round(max(workers) / 2 ** 20) if workers else None,
                processes=len(peaks), load=round(os.getloadavg()[0], 1))


def main():
    """Builds the corpora, runs every mode on each, prints a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--file_mb", type=float, default=1.0)
    parser.add_argument("--num_files", default="64,128")
    parser.add_argument("--dupe_factor", type=int, default=10)
    parser.add_argument("--modes", default="w1,w2,beam2")
    parser.add_argument("--shared", default=DEFAULT_SHARED)
    parser.add_argument("--vocab", default=None)
    parser.add_argument("--json", default=None)
    parser.add_argument("--single_file_mb", default="",
                        help="also: --num_workers=2 on ONE file of each of these sizes (MB), "
                             "whose worker's peak RSS shows the memory per MB of a file")
    args = parser.parse_args()
    vocab = args.vocab or os.path.join(args.shared, "data", "vocab", "uncased_vocab.txt")
    documents = base_documents(args.shared)
    rows = []
    for num_files in [int(n) for n in args.num_files.split(",") if n]:
        with tempfile.TemporaryDirectory() as d:
            paths = write_corpus(d, documents, num_files, args.file_mb)
            corpus_mb = sum(os.path.getsize(p) for p in paths) / 1e6
            for mode in args.modes.split(","):
                out = os.path.join(d, "out-%s" % mode)
                row = run_mode(os.path.join(d, "part-*.txt"), out, vocab,
                               args.dupe_factor, mode)
                row.update(num_files=num_files, corpus_mb=round(corpus_mb, 1),
                           dupe_factor=args.dupe_factor, cpus=os.cpu_count())
                rows.append(row)
                print(json.dumps(row), flush=True)
    for file_mb in [float(m) for m in args.single_file_mb.split(",") if m]:
        with tempfile.TemporaryDirectory() as d:
            write_corpus(d, documents, 1, file_mb)
            row = run_mode(os.path.join(d, "part-*.txt"), os.path.join(d, "out"), vocab,
                           args.dupe_factor, "w2")
            row.update(num_files=1, corpus_mb=file_mb, dupe_factor=args.dupe_factor,
                       cpus=os.cpu_count())
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("| corpus | mode | wall s | instances | instances/s | launcher RSS MB | "
          "worker RSS MB (max) | load |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %(corpus_mb)s MB, %(num_files)d files | %(mode)s | %(wall_s)s | %(instances)d "
              "| %(instances_per_s)d | %(launcher_rss_mb)s | %(worker_rss_mb)s | %(load)s |" % r)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
