"""The Python door against the SavedModel: run_classifier.Predictor vs the exported
`serving_text_a` signature, in one process on the CPU.

Usage:
  python benchmarks/bench_predictor.py [--sizes tiny,mini] [--repeats 30] [--threads 8]

For each size (bench_util.MODEL_SIZES; the uncased vocabulary of ../shared), a
run_classifier folder is trained for two steps on 16 made-up texts (max_seq_length 128;
the weights do not matter for speed) and exported with export_saved_model.py. Then, on MRPC test sentences (bench_serving.sentence_pairs):

ours: Predictor(folder).predict(texts): WordPiece in Python, the model's traced step;
peer: tf.saved_model.load(export).signatures["serving_text_a"](text_a=...): tokenization
  in the graph (what TF Serving runs).

Rows: latency (median over ABBA-interleaved calls, after one warm-up call each) for one
text and for 16; throughput with `threads` threads each calling with one text (requests
per second over the same number of calls). Both doors' labels are checked to agree and
their probabilities to be within 1e-5 first. ratio = ours / peer (against "ours": the same
model through two doors of our own).
"""
import argparse
import json
import os
import tempfile
import threading
import time

import bench_util  # sets up sys.path; pylint: disable=unused-import
from bench_util import np, tf

import bench_serving  # pylint: disable=wrong-import-order
import export_saved_model  # pylint: disable=wrong-import-order
import run_classifier  # pylint: disable=wrong-import-order


def _folder(directory, size, texts):  # pylint: disable=too-many-locals
    """A trained run_classifier folder and its SavedModel export: (folder, export_dir)."""
    vocab = os.path.join(bench_serving.SHARED, "data", "vocab", "uncased_vocab.txt")
    if not os.path.exists(vocab):
        raise FileNotFoundError("%s is absent (set BERT_TF2_SHARED)" % vocab)
    config = dict(bench_util.model_config(size), vocab_size=sum(1 for _ in open(vocab)))
    config_file = os.path.join(directory, "bert_config.json")
    with open(config_file, "w", encoding="utf-8") as f:
        json.dump(config, f)
    rows = [{"text": texts[i % len(texts)], "label": ("pos", "neg")[i % 2]} for i in range(16)]
    folder = os.path.join(directory, "model")
    run_classifier.run(run_classifier.Settings(
        task_name="jsonl", data_dir={"train": rows}, vocab_file=vocab,
        bert_config_file=config_file, output_dir=folder, do_train=True, max_seq_length=128,
        train_batch_size=8, num_train_epochs=1.0, learning_rate=1e-5, seed=1,
        do_lower_case=True, progress="none"))
    export_dir = os.path.join(directory, "export")
    export_saved_model.run(export_saved_model.Settings(init_checkpoint=folder,
                                                       export_dir=export_dir))
    return folder, export_dir


def _check_agreement(predictor, signature, texts):
    """AssertionError unless both doors give the same labels, probabilities within 1e-5."""
    ours = predictor.predict(texts)
    theirs = signature(text_a=tf.constant(texts))
    labels = [str(x.decode("utf-8") if isinstance(x, bytes) else x)
              for x in theirs["predicted_label"].numpy()]
    assert [r["label"] for r in ours] == labels, (ours, labels)
    names = sorted(ours[0]["probabilities"])
    ours_p = np.array([[r["probabilities"][n] for n in names] for r in ours])
    order = [names.index(n.decode("utf-8") if isinstance(n, bytes) else str(n))
             for n in theirs["labels"].numpy()[0]]
    theirs_p = theirs["probabilities"].numpy()[:, np.argsort(order)]
    assert np.max(np.abs(ours_p - theirs_p)) <= 1e-5, np.max(np.abs(ours_p - theirs_p))


def _throughput(call, threads, calls):
    """Requests per second of `threads` threads making `calls` calls in all."""
    per_thread = max(1, calls // threads)
    start = threading.Barrier(threads + 1)

    def work():
        start.wait()
        for _ in range(per_thread):
            call()

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    start.wait()
    began = time.perf_counter()
    for worker in workers:
        worker.join()
    return per_thread * threads / (time.perf_counter() - began)


def run(sizes=("tiny", "mini"), repeats=30, threads=8, log=print):
    """The rows of each size: latency at 1 and 16 texts, throughput with threads."""
    rows = []
    texts = [a for a, _ in bench_serving.sentence_pairs(16)]
    for size in sizes:
        with tempfile.TemporaryDirectory() as directory:
            folder, export_dir = _folder(directory, size, texts)
            predictor = run_classifier.Predictor(folder, batch_size=32)
            signature = tf.saved_model.load(export_dir).signatures["serving_text_a"]
            try:
                _check_agreement(predictor, signature, texts)
                for count in (1, 16):
                    batch = texts[:count]
                    doors = {"predictor": lambda b=batch: predictor.predict(b),
                             "saved_model": lambda b=batch: signature(text_a=tf.constant(b))}
                    for door in doors.values():
                        door()
                    times = bench_util.interleaved(doors, repeats)
                    ours, peer = (1000 * bench_util.median(times[n]) for n in doors)
                    rows.append(bench_util.row(
                        "Predictor vs SavedModel latency, %d text%s" % (count, "s" * (count > 1)),
                        "%s, seq 128, CPU" % size, ours, peer, "ms", against="ours"))
                    log(rows[-1])
                one = texts[:1]
                ours = _throughput(lambda: predictor.predict(one), threads, repeats * threads)
                peer = _throughput(lambda: signature(text_a=tf.constant(one)), threads,
                                   repeats * threads)
                rows.append(bench_util.row(
                    "Predictor vs SavedModel throughput, %d threads x 1 text" % threads,
                    "%s, seq 128, CPU" % size, ours, peer, "requests/s", against="ours"))
                log(rows[-1])
            finally:
                predictor.close()
                bench_util.release_models()
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="tiny,mini")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    load = os.getloadavg()
    rows = run(tuple(args.sizes.split(",")), args.repeats, args.threads, log=lambda r: None)
    print(bench_util.format_table(rows))
    print("CPU: %s, %d cores; ISA: %s; load average %.2f before, %.2f after"
          % (bench_util.cpu_model(), os.cpu_count(), bench_util.machine.isa_summary(), load[0],
             os.getloadavg()[0]))


if __name__ == "__main__":
    main()
