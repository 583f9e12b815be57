"""Packed pretraining rows (--pack_sequences) vs one instance per row, at 512 tokens.

Usage:
  python benchmarks/bench_packing.py [--documents N] [--dupe_factor D] [--batch_size B]
      [--warmup W] [--steps S] [--repeats R] [--max_instances_per_row K] [--vocab PATH]
      [--quick]

Data: N short documents (2-6 sentences of 10-20 words), drawn deterministically
(random.Random(0)) from a word list built from the vocabulary: its whole words of
3 or more letters (the uncased BERT vocabulary of ../shared/data/vocab, or
--vocab; without either, a made-up vocabulary of syllable words). The same text
goes through create_pretraining_data.write_pretraining_data with
max_seq_length 512 and 80 predictions per sequence, once as the reference writes
it and once with pack_sequences=True (the same instances, packed greedily, at most
K per row).

Training: BERT-Mini (L4 H256 A4 I1024, the vocabulary's size), fp32, dropout on,
batch B, the step run_pretraining.py trains with (BertPretrainer,
run_pretraining.pretraining_loss, AdamWeightDecay clipped to global norm 1.0) on
the first batches of each record file (read through run_pretraining's feature spec
and input_pipeline.make_dataset). After W warm-up steps that trace, R timed calls
of S steps each alternate between the two (ABBA); the rows give the medians of
real tokens/s (the sum of input_mask over the batches trained / seconds): "ours"
is packed, "peer" unpacked, so the ratio is the speed-up of packing.
"""
import argparse
import os
import random
import tempfile
import time

import bench_util
from bench_util import np, tf

SEQ_LENGTH = 512
MAX_PREDICTIONS = 80
DEFAULT_VOCAB = os.path.join(bench_util.REPO_ROOT, "..", "shared", "data", "vocab",
                             "uncased_vocab.txt")


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------

def _made_up_vocab(path, size=4000):
    """Writes a vocabulary of special tokens and syllable words; returns its path."""
    syllables = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"]
    rng = random.Random(1)
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 3))))
    specials = ["[PAD]"] + ["[unused%d]" % i for i in range(99)] + [
        "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in specials + [".", ","] + sorted(words)))
    return path


def word_list(vocab_path):
    """The whole words of 3 or more letters of a vocabulary file, in its order."""
    with open(vocab_path, encoding="utf-8") as f:
        tokens = [line.strip() for line in f]
    return [t for t in tokens if len(t) >= 3 and t.isalpha() and t.isascii()]


def write_corpus(path, words, num_documents, seed=0):
    """Writes short documents (2-6 sentences of 10-20 words); returns the byte count."""
    rng = random.Random(seed)
    documents = []
    for _ in range(num_documents):
        sentences = []
        for _ in range(rng.randint(2, 6)):
            sentence = " ".join(rng.choice(words) for _ in range(rng.randint(10, 20)))
            sentences.append(sentence.capitalize() + ".")
        documents.append("\n".join(sentences))
    text = "\n\n".join(documents) + "\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return len(text.encode("utf-8"))


def make_records(workdir, vocab, num_documents, dupe_factor, max_instances_per_row):
    """Writes the corpus, then its unpacked and packed records; returns a dict of facts."""
    import create_pretraining_data as cpd
    corpus = os.path.join(workdir, "corpus.txt")
    write_corpus(corpus, word_list(vocab), num_documents)
    options = cpd.PretrainingOptions(
        max_seq_length=SEQ_LENGTH, max_predictions_per_seq=MAX_PREDICTIONS,
        masked_lm_prob=0.15, short_seq_prob=0.1, dupe_factor=dupe_factor,
        do_whole_word_mask=False, random_seed=12345)
    facts = {}
    # Tokenizer tables and TensorFlow's first calls, outside the timed runs.
    cpd.write_pretraining_data([corpus], [os.path.join(workdir, "warmup.tfrecord")], vocab,
                               options._replace(dupe_factor=1))
    for name, packed in (("unpacked", False), ("packed", True)):
        path = os.path.join(workdir, name + ".tfrecord")
        start = time.perf_counter()
        count = cpd.write_pretraining_data([corpus], [path], vocab, options,
                                           pack_sequences=packed,
                                           max_instances_per_row=max_instances_per_row)
        facts[name] = dict(path=path, rows=count, seconds=time.perf_counter() - start)
    return facts


# ---------------------------------------------------------------------------
# Training steps
# ---------------------------------------------------------------------------

def _run_settings(path, batch_size, packed):
    import run_pretraining
    return run_pretraining.Settings(
        input_file=path, max_seq_length=SEQ_LENGTH, max_predictions_per_seq=MAX_PREDICTIONS,
        train_batch_size=batch_size, packed_sequences=bool(packed))


def load_batches(path, batch_size, num_batches, packed):
    """The first training batches of a record file, read as run_pretraining reads them."""
    from bert_tf2 import input_pipeline
    import run_pretraining
    settings = _run_settings(path, batch_size, packed)
    spec = run_pretraining.feature_spec(settings, run_pretraining.check_packing(path, packed))
    dataset = input_pipeline.make_dataset([path], spec, batch_size, is_training=True,
                                          repeat=True, seed=0)
    return list(dataset.take(num_batches))


def build_step(cfg):
    """A traced training step (model, loss, clipped AdamWeightDecay) on fresh weights."""
    from bert_tf2 import heads
    import modeling
    import optimization
    import run_pretraining
    model = heads.BertPretrainer(modeling.BertConfig(**cfg))
    model(heads.dummy_features())
    optimizer = optimization.create_optimizer(1e-4, 100000, 1000, clip_norm=1.0)
    variables = model.trainable_variables
    optimization.create_slots(optimizer, variables)

    @tf.function(reduce_retracing=True)
    def step(features):
        with tf.GradientTape() as tape:
            loss, _ = run_pretraining.pretraining_loss(model, features, True)
        grads = tape.gradient(loss, variables)
        grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
                 for g in grads]
        optimizer.apply_gradients(zip(grads, variables), experimental_aggregate_gradients=False)
        return loss

    return step


def _trainer(cfg, batches, warmup):
    """(run(count): `count` steps over the next batches, cycling; the list of the real
    tokens of every batch trained after the `warmup` steps)."""
    step = build_step(cfg)
    tokens = [int(np.sum(b["input_mask"])) for b in batches]
    position = [0]
    trained = []

    def run(count):
        for _ in range(count):
            i = position[0] % len(batches)
            loss = step(batches[i])
            trained.append(tokens[i])
            position[0] += 1
        float(loss)  # waits for the last step

    run(warmup)
    del trained[:]
    return run, trained


def measure(cfg, facts, batch_size, warmup, steps, repeats, log=print):
    """{"unpacked"/"packed": (median real tokens/s of R interleaved calls of S steps,
    mean real tokens per row trained)}."""
    runs, tokens = {}, {}
    for name in ("unpacked", "packed"):
        batches = load_batches(facts[name]["path"], batch_size, warmup + steps * repeats,
                               name == "packed")
        runs[name], tokens[name] = _trainer(cfg, batches, warmup)
        if log:
            log("%s: warmed up (%d steps)" % (name, warmup))
    times = bench_util.interleaved({n: (lambda r=r: r(steps)) for n, r in runs.items()},
                                   repeats)
    rates = {}
    for name in runs:
        per_call = np.array(tokens[name]).reshape(repeats, steps).sum(1)
        # The calls' order in `times` is the order they ran: the same ABBA rotation.
        rates[name] = (bench_util.median(list(per_call / np.array(times[name]))),
                       float(np.mean(tokens[name])) / batch_size)
    return rates


def run(quick=False, log=print, num_documents=None, dupe_factor=None, batch_size=4,
        warmup=2, steps=None, repeats=None, max_instances_per_row=4, vocab=None):
    """Makes the records, times the training steps; returns rows of bench_results.json."""
    num_documents = num_documents or (400 if quick else 3000)
    dupe_factor = dupe_factor or 1
    steps = steps or (2 if quick else 5)
    repeats = repeats or (2 if quick else 4)
    size = "tiny" if quick else "mini"
    with tempfile.TemporaryDirectory(prefix="bench_packing_") as workdir:
        vocab = vocab or (DEFAULT_VOCAB if os.path.exists(DEFAULT_VOCAB) else
                          _made_up_vocab(os.path.join(workdir, "vocab.txt")))
        with open(vocab, encoding="utf-8") as f:
            vocab_size = sum(1 for _ in f)
        cfg = dict(bench_util.model_config(size), vocab_size=vocab_size)
        facts = make_records(workdir, vocab, num_documents, dupe_factor, max_instances_per_row)
        rates = measure(cfg, facts, batch_size, warmup, steps, repeats, log)
    bench_util.release_models()
    config = "%s L%d H%d b%d s%d p%d fp32, K=%d" % (
        size, cfg["num_hidden_layers"], cfg["hidden_size"], batch_size, SEQ_LENGTH,
        MAX_PREDICTIONS, max_instances_per_row)
    unpacked, packed = facts["unpacked"], facts["packed"]
    data = "%d docs: %d instances -> %d rows" % (num_documents, unpacked["rows"],
                                                 packed["rows"])
    return [
        bench_util.row("packing: training real tokens/s (packed vs unpacked)", config,
                       rates["packed"][0], rates["unpacked"][0], "tokens/s", against="ours"),
        bench_util.row("packing: real tokens per %d-token row" % SEQ_LENGTH, config,
                       rates["packed"][1], rates["unpacked"][1], "tokens", against="ours"),
        bench_util.row("packing: rows written (packed vs unpacked)", data,
                       float(packed["rows"]), float(unpacked["rows"]), "rows", against="ours"),
        bench_util.row("packing: create_pretraining_data time", data,
                       packed["seconds"], unpacked["seconds"], "s", against="ours"),
    ]


def main(argv=None):
    """Command line: prints the table of `run`."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--documents", type=int, default=None)
    parser.add_argument("--dupe_factor", type=int, default=None)
    parser.add_argument("--batch_size", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=None, help="steps per timed call")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls of each side")
    parser.add_argument("--max_instances_per_row", type=int, default=4)
    parser.add_argument("--vocab", default=None)
    parser.add_argument("--quick", action="store_true", help="tiny model smoke test")
    args = parser.parse_args(argv)
    from absl import logging as absl_logging  # pylint: disable=import-outside-toplevel
    absl_logging.set_verbosity(absl_logging.WARNING)
    rows = run(args.quick, print, args.documents, args.dupe_factor, args.batch_size,
               args.warmup, args.steps, args.repeats, args.max_instances_per_row, args.vocab)
    print(bench_util.format_table(rows))
    return rows


if __name__ == "__main__":
    main()
