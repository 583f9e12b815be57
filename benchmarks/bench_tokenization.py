"""Tokenizer throughput on three corpora: our exact path, our batch path, HF tokenizers.

Usage:
  python benchmarks/bench_tokenization.py [--squad PATH] [--vocab PATH] [--chinese_vocab PATH]
      [--corpora squad_uncased,squad_cased,cjk_accented] [--limit N] [--repeats R]

The corpora (texts tokenized without [CLS]/[SEP]):
  squad_uncased  every context and question of SQuAD v1.1 dev, the uncased vocabulary,
                 do_lower_case=True (the row of record since the first bench).
  squad_cased    the same texts, do_lower_case=False, with a cased WordPiece vocabulary
                 that create_vocab.py learns from them (--nodo_lower_case; cached in the
                 temporary directory, about a minute of CPU the first time).
  cjk_accented   synthetic Chinese text (characters drawn from the Chinese vocabulary,
                 Zipf-weighted, with Chinese punctuation) mixed with the accented words of
                 SQuAD dev in three casings and some digits, the Chinese vocabulary,
                 do_lower_case=True; fixed seed, so every run sees the same text.
For each tokenizer the table gives wall and CPU seconds, MB/s of UTF-8 input, tokens, the
ratio to HF tokenizers, and whether every id list equals that of the reference's own
FullTokenizer (google-research/bert's tokenization.py from ../shared/reference, run
unchanged but for `import tensorflow.compat.v1 as tf`; our exact path stands in when it
is absent). The fast tokenizers are timed interleaved: one warm-up call each, then
--repeats rounds in which each runs once (the order rotating every round); the best
round counts. The exact path and the reference run once. The limit the batch path is
judged against, 8x HF tokenizers (what the Fast WordPiece paper reports for
LinMaxMatch end to end), is printed beside its ratio.
"""

import argparse
import hashlib
import importlib.util
import json
import os
import random
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

# The runners' quiet start (startup.py) before anything imports TensorFlow.
from bert_tf2 import startup  # noqa: E402  pylint: disable=wrong-import-position
import tokenization  # pylint: disable=wrong-import-position
from bert_tf2.text import characters  # pylint: disable=wrong-import-position
import bench_format  # pylint: disable=wrong-import-position

startup.initialize_devices()

SHARED = os.environ.get("BERT_TF2_SHARED", os.path.join(REPO_ROOT, "..", "shared"))
DEFAULT_SQUAD = os.path.join(SHARED, "data", "squad", "dev-v1.1.json")
DEFAULT_VOCAB = os.path.join(SHARED, "data", "vocab", "uncased_vocab.txt")
DEFAULT_CHINESE_VOCAB = os.path.join(SHARED, "data", "vocab", "chinese_vocab.txt")
REFERENCE_TOKENIZATION = os.path.join(SHARED, "reference", "bert", "tokenization.py")
CORPORA = ("squad_uncased", "squad_cased", "cjk_accented")
LIMIT = 8.0  # the batch path's goal, x HF tokenizers (Fast WordPiece paper: 8.2x)
MEASURE = "tokenizer throughput vs HF tokenizers"
BATCH_NAME = "ours, batch path (tensorflow_text)"
EXACT_NAME = "ours, exact path (pure Python)"
HF_NAME = "HF tokenizers BertWordPiece (encode_batch)"


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


def cjk_accented_texts(squad_path, chinese_vocab_path, count=6000, seed=20261125):
    """Synthetic Chinese paragraphs with accented Latin words (see the module docstring).

    Returns `count` texts, the same for the same files and seed.
    """
    vocab = tokenization.load_vocab(chinese_vocab_path)
    hanzi = [t for t in vocab if len(t) == 1 and characters.is_chinese_char(ord(t))]
    weights, total = [], 0.0
    for rank in range(len(hanzi)):
        total += 1.0 / (rank + 10)
        weights.append(total)
    accented = sorted({word.strip(".,;:()[]\"'") for text in squad_texts(squad_path)
                       for word in text.split() if not word.isascii()} - {""})
    rng = random.Random(seed)
    punctuation = "\uff0c\u3002\u3001\uff01\uff1f\uff1b\uff1a\u201c\u201d\u300a\u300b\uff08\uff09"
    texts = []
    for _ in range(count):
        clauses = []
        for _ in range(rng.randint(1, 12)):
            clause = "".join(rng.choices(hanzi, cum_weights=weights, k=rng.randint(2, 20)))
            if rng.random() < 0.3:
                word = rng.choice(accented)
                clause += " %s " % rng.choice((word, word.upper(), word.capitalize()))
            if rng.random() < 0.1:
                clause += str(rng.randint(0, 3000))
            clauses.append(clause + rng.choice(punctuation))
        texts.append("".join(clauses))
    return texts


def cased_vocab(texts, vocab_size=28996):
    """A cased vocabulary learned from `texts` by create_vocab.py (--nodo_lower_case).

    Written once per set of texts to the temporary directory and reused after that.
    """
    digest = hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()[:16]
    folder = os.path.join(tempfile.gettempdir(), "bert_tf2_bench_tokenization")
    path = os.path.join(folder, "cased_vocab_%s_%d.txt" % (digest, vocab_size))
    if os.path.isfile(path):
        return path
    os.makedirs(folder, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as work:
        corpus = os.path.join(work, "corpus.txt")
        with open(corpus, "w", encoding="utf-8") as writer:
            writer.write("\n".join(" ".join(text.split()) for text in texts) + "\n")
        output = os.path.join(work, "vocab.txt")
        subprocess.run([sys.executable, os.path.join(REPO_ROOT, "create_vocab.py"),
                        "--input_file=" + corpus, "--output_file=" + output,
                        "--nodo_lower_case", "--num_iterations=1",
                        "--vocab_size=%d" % vocab_size],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.replace(output, path)
    return path


def reference_module(path=REFERENCE_TOKENIZATION):
    """google-research/bert's tokenization.py, its TensorFlow import made TF1's; or None."""
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as reader:
        source = reader.read()
    if source.count("import tensorflow as tf\n") != 1:
        return None
    source = source.replace("import tensorflow as tf\n", "import tensorflow.compat.v1 as tf\n")
    spec = importlib.util.spec_from_loader("reference_tokenization", loader=None)
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, path, "exec"), module.__dict__)  # pylint: disable=exec-used
    return module


def corpus_list(names, squad_path, vocab_path, chinese_vocab_path, limit=None):
    """[(name, texts, vocabulary path, do_lower_case)] for the corpora in `names`."""
    squad = squad_texts(squad_path, limit)
    made = {
        "squad_uncased": lambda: (squad, vocab_path, True),
        "squad_cased": lambda: (squad, cased_vocab(squad), False),
        "cjk_accented": lambda: (
            cjk_accented_texts(squad_path, chinese_vocab_path)[:limit or None],
            chinese_vocab_path, True),
    }
    unknown = sorted(set(names) - set(made))
    if unknown:
        raise ValueError("unknown corpora %s; known: %s" % (unknown, ", ".join(CORPORA)))
    return [(name,) + made[name]() for name in names]


def _timed(function):
    wall, cpu = time.perf_counter(), time.process_time()
    result = function()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def time_interleaved(candidates, repeats):
    """{name: (best wall s, best CPU s, last result)} of [(name, function)].

    One warm-up call each, then `repeats` rounds, each calling every function once,
    the order rotating from round to round (so none always runs first or last).
    """
    best = {}
    for name, function in candidates:
        best[name] = (float("inf"), float("inf"), function())
    for round_index in range(repeats):
        shift = round_index % len(candidates)
        for name, function in candidates[shift:] + candidates[:shift]:
            wall, cpu, result = _timed(function)
            old = best[name]
            best[name] = (min(old[0], wall), min(old[1], cpu), result)
    return best


def _hf_ids(vocab_path, lower):
    """HF tokenizers' BERT WordPiece with the reference settings (None if absent)."""
    try:
        from tokenizers import BertWordPieceTokenizer  # pylint: disable=import-outside-toplevel
    except ImportError:
        return None
    tokenizer = BertWordPieceTokenizer(vocab_path, lowercase=lower)
    return lambda texts: [e.ids for e in tokenizer.encode_batch(texts, add_special_tokens=False)]


def _tf_text_as_is(vocab_path, lower):
    """tensorflow_text's own FastBertTokenizer: fast but not exact (for contrast)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    import tensorflow_text as tf_text  # pylint: disable=import-outside-toplevel

    tokenizer = tf_text.FastBertTokenizer(
        vocab=list(tokenization.load_vocab(vocab_path)), lower_case_nfd_strip_accents=lower,
        token_out_type=tf.int64)

    def ids(texts):
        ragged = tokenizer.tokenize(tf.constant(texts))
        values = ragged.flat_values.numpy().tolist()
        bounds = ragged.row_splits.numpy().tolist()
        return [values[start:end] for start, end in zip(bounds, bounds[1:])]

    return ids


def measure_corpus(name, texts, vocab_path, lower, repeats=3):
    """Times the tokenizers on one corpus; returns one dict per tokenizer.

    Each has: corpus, name, seconds (wall), cpu_seconds, mb_per_s, tokens, identical
    (every id list equal to the reference's), differing_texts, texts, setup.
    """
    megabytes = sum(len(text.encode("utf-8")) for text in texts) / 1e6
    ours = tokenization.FullTokenizer(vocab_path, do_lower_case=lower)
    reference = reference_module()
    if reference is not None:
        theirs = reference.FullTokenizer(vocab_path, do_lower_case=lower)
        base_name = "reference tokenization.py (google-research/bert)"
    else:
        theirs, base_name = ours, EXACT_NAME + ", standing in for the reference"
    base = _timed(lambda: [theirs.convert_tokens_to_ids(theirs.tokenize(t)) for t in texts])
    timings = {base_name: base}
    if theirs is not ours:
        timings[EXACT_NAME] = _timed(
            lambda: [ours.convert_tokens_to_ids(ours.tokenize(t)) for t in texts])

    candidates, setup = [], {}
    start = time.perf_counter()
    ours.convert_batch_to_ids(texts[:1])  # imports TensorFlow, builds the tables and model
    setup[BATCH_NAME] = "%.2fs" % (time.perf_counter() - start)
    candidates.append((BATCH_NAME, lambda: ours.convert_batch_to_ids(texts)))
    as_is = _tf_text_as_is(vocab_path, lower)
    candidates.append(("tensorflow_text FastBertTokenizer as is", lambda: as_is(texts)))
    hf = _hf_ids(vocab_path, lower)
    if hf is not None:
        candidates.append((HF_NAME, lambda: hf(texts)))
    timings.update(time_interleaved(candidates, repeats))

    records = []
    for tokenizer_name, (seconds, cpu_seconds, ids) in timings.items():
        differing = sum(1 for mine, want in zip(ids, base[2]) if mine != want)
        records.append({
            "corpus": name, "name": tokenizer_name, "seconds": seconds,
            "cpu_seconds": cpu_seconds, "mb_per_s": megabytes / seconds,
            "tokens": sum(len(row) for row in ids), "texts": len(texts),
            "identical": differing == 0 and len(ids) == len(base[2]),
            "differing_texts": differing, "setup": setup.get(tokenizer_name, "")})
    return records


def schema_rows(records):
    """Our rows of `measure_corpus` records in bench_results.json's schema, vs HF."""
    rows = []
    for corpus in dict.fromkeys(r["corpus"] for r in records):
        mine = [r for r in records if r["corpus"] == corpus]
        peer = next((r for r in mine if r["name"] == HF_NAME), None)
        for record in mine:
            if record["name"] not in (EXACT_NAME, BATCH_NAME):
                continue
            config = "%s, %s, ids identical to the reference (%d texts): %s" % (
                corpus, record["name"], record["texts"],
                "yes" if record["identical"] else "NO")
            peer_mb = peer and peer["mb_per_s"]
            row = {"measure": MEASURE, "config": config, "ours": record["mb_per_s"],
                   "peer": peer_mb, "unit": "MB/s",
                   "ratio": record["mb_per_s"] / peer_mb if peer_mb else None,
                   "against": "peer"}
            if record["name"] == BATCH_NAME:
                # The goal (issue 94: on every corpus, on Intel and AMD alike), and the
                # CPU-time ratio beside it (both sides use every core in wall time).
                row["note"] = "%s (CPU time ratio %.1fx)" % (
                    bench_format.goal_note(row["ratio"], LIMIT),
                    peer["cpu_seconds"] / record["cpu_seconds"] if peer else 0.0)
            rows.append(row)
    return rows


def measure(squad_path=DEFAULT_SQUAD, vocab_path=DEFAULT_VOCAB,
            chinese_vocab_path=DEFAULT_CHINESE_VOCAB, limit=None, repeats=3, corpora=CORPORA):
    """The records of measure_corpus for every corpus of `corpora`."""
    records = []
    for name, texts, vocab, lower in corpus_list(corpora, squad_path, vocab_path,
                                                 chinese_vocab_path, limit):
        records.extend(measure_corpus(name, texts, vocab, lower, repeats))
    return records


def run(limit=None, repeats=3, corpora=CORPORA):
    """make bench's entry (group `tokenization`): the rows of schema_rows."""
    return schema_rows(measure(limit=limit, repeats=repeats, corpora=corpora))


def format_table(records):
    """Renders `measure_corpus` records as a fixed-width text table."""
    header = "%-14s %-50s %7s %7s %6s %8s %7s %7s  %s" % (
        "corpus", "tokenizer", "wall s", "CPU s", "MB/s", "tokens", "x HF", "(CPU)",
        "ids == reference")
    lines = [header, "-" * len(header)]
    for record in records:
        peer = next((r for r in records
                     if r["corpus"] == record["corpus"] and r["name"] == HF_NAME), None)
        same = "yes" if record["identical"] else "no (%d texts differ)" % (
            record["differing_texts"])
        lines.append("%-14s %-50s %7.3f %7.3f %6.2f %8d %6.1fx %6.1fx  %s%s" % (
            record["corpus"], record["name"], record["seconds"], record["cpu_seconds"],
            record["mb_per_s"], record["tokens"],
            peer["seconds"] / record["seconds"] if peer else 0.0,
            peer["cpu_seconds"] / record["cpu_seconds"] if peer else 0.0, same,
            "   (limit %.1fx)" % LIMIT if record["name"] == BATCH_NAME else ""))
    lines.append("x HF from wall time (CPU: from CPU time); load average %.2f / %.2f / %.2f" %
                 os.getloadavg())
    return "\n".join(lines)


def main(argv=None):
    """Times the tokenizers on the corpora (ids compared with the reference's)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--squad", default=DEFAULT_SQUAD, help="SQuAD json file")
    parser.add_argument("--vocab", default=DEFAULT_VOCAB, help="uncased WordPiece vocabulary")
    parser.add_argument("--chinese_vocab", default=DEFAULT_CHINESE_VOCAB,
                        help="Chinese WordPiece vocabulary (cjk_accented corpus)")
    parser.add_argument("--corpora", default=",".join(CORPORA),
                        help="comma-separated, from: %s" % ", ".join(CORPORA))
    parser.add_argument("--limit", type=int, default=None, help="only the first N texts")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds")
    args = parser.parse_args(argv)
    for path in (args.squad, args.vocab, args.chinese_vocab):
        if not os.path.isfile(path):
            parser.error("file not found: %s" % path)
    records = measure(args.squad, args.vocab, args.chinese_vocab, args.limit, args.repeats,
                      [name for name in args.corpora.split(",") if name])
    print(format_table(records))


if __name__ == "__main__":
    main()
