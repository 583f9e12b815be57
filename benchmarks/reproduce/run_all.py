"""Drives the whole reproduction: converts MiniLM once, makes the subsets, runs ours.py
(project venv) and peer.py (.venv-reproduce) for every seed and task, one job at a time,
and writes results.json and results.md next to this file after every run (so a cut-off
run still leaves an honest partial table).

  .venv/bin/python benchmarks/reproduce/run_all.py --tasks=sst-2,mrpc --seeds=1,2,3 \
      --deadline=08:25

Sides (--sides): "ours"; "peer", transformers + torch with the reference's optimiser rule
and schedule (the like-for-like comparison); "peer_buffer", the same reading the training
data in the reference pipeline's order (GLUE tasks); "peer_hf", transformers + torch with torch
AdamW and HF's linear schedule (how the model is usually fine-tuned with HF). Runs go
seed by seed (all tasks with seed 1, then seed 2, ...), side after side, so that
stopping early drops whole seeds rather than whole tasks. With --deadline (UTC HH:MM) a
run is not started when the same run took longer last time than the time left.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # pylint: disable=wrong-import-position

HEADLINE = {
    "sst-2": ["accuracy"],
    "sst-2-1536": ["accuracy"],
    "cola-1280": ["mcc"],
    "sts-b-960": ["pearson", "spearman"],
    "sts-b-960-shuffled": ["pearson", "spearman"],
    "cola": ["mcc"],
    "mrpc": ["f1", "accuracy"],
    "rte": ["accuracy"],
    "sts-b": ["pearson", "spearman"],
    "squad": ["exact_match", "f1"],
}


def _seconds_left(deadline):
    if not deadline:
        return float("inf")
    now = datetime.datetime.now(datetime.timezone.utc)
    hh, mm = (int(x) for x in deadline.split(":"))
    end = now.replace(hour=hh, minute=mm, second=0, microsecond=0)
    return (end - now).total_seconds()


def _score_squad(predict_file, predictions_file):
    """EM / F1 (fractions) with the official SQuAD 1.1 evaluation (tf-models-official's
    copy, the one run_squad.py uses), applied to both sides' predictions.json."""
    from official.nlp.tools import squad_evaluate_v1_1  # pylint: disable=import-outside-toplevel
    with open(predict_file, "r", encoding="utf-8") as f:
        articles = json.load(f)["data"]
    with open(predictions_file, "r", encoding="utf-8") as f:
        predictions = json.load(f)
    scores = squad_evaluate_v1_1.evaluate(articles, predictions)
    return {"exact_match": scores["exact_match"], "f1": scores["final_f1"]}


def _run_one(side, task, seed, paths, model_dirs, work, python_peer, resume=False):
    out_json = os.path.join(work, "%s-%s-seed%d.json" % (side, task, seed))
    here = os.path.dirname(os.path.abspath(__file__))
    if side == "ours":
        cmd = [sys.executable, os.path.join(here, "ours.py")]
        model_dir = model_dirs["ours"]
    else:
        cmd = [python_peer, os.path.join(here, "peer.py"),
               "--optimizer=%s" % ("hf" if side == "peer_hf" else "reference"),
               "--data_order=%s" % ("buffer" if side == "peer_buffer" else "permutation")]
        model_dir = model_dirs["peer"]
    if task == "squad":
        cmd += ["squad", "--train_file=%s" % paths["squad"]["train"],
                "--predict_file=%s" % paths["squad"]["eval"]]
    else:
        cmd += ["glue", "--task=%s" % task, "--data_dir=%s" % paths[task]]
    cmd += ["--model_dir=%s" % model_dir, "--seed=%d" % seed, "--output=%s" % out_json]
    if side == "ours":
        cmd += ["--work_dir=%s" % os.path.join(work, "ours-%s-seed%d" % (task, seed))]
    if resume and os.path.exists(out_json + ".done"):
        with open(out_json + ".done", "r", encoding="utf-8") as f:
            common.log("reusing %s" % out_json)
            return json.load(f)
    env = dict(os.environ)
    env.update({"OMP_NUM_THREADS": str(common.NUM_THREADS),
                "MKL_NUM_THREADS": str(common.NUM_THREADS)})
    log_path = os.path.join(work, "%s-%s-seed%d.log" % (side, task, seed))
    start = time.time()
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                              cwd=common.ROOT, check=False)
    if proc.returncode != 0:
        with open(log_path, "r", encoding="utf-8", errors="replace") as f:
            tail = f.read().splitlines()[-15:]
        raise RuntimeError("%s %s seed %d failed:\n%s" % (side, task, seed, "\n".join(tail)))
    with open(out_json, "r", encoding="utf-8") as f:
        result = json.load(f)
    result["process_seconds"] = time.time() - start
    if task == "squad":
        result["metrics"] = _score_squad(paths["squad"]["eval"], result["predictions_file"])
    with open(out_json + ".done", "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    return result


def _mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _speed(results):
    if not results:
        return "n/a"
    parts = []
    train_s = _mean([r.get("train_seconds") for r in results])
    train_eps = _mean([r.get("train_examples_per_second") for r in results])
    eval_eps = _mean([r.get("eval_examples_per_second") for r in results])
    wall = _mean([r.get("process_seconds") for r in results])
    if train_s is not None:
        parts.append("train %.0f s, %.2f ex/s" % (train_s, train_eps))
    if eval_eps is not None:
        parts.append("eval %.1f ex/s" % eval_eps)
    if wall is not None:
        parts.append("process %.0f s" % wall)
    return "; ".join(parts)


SIDES = ("ours", "peer", "peer_buffer", "peer_hf")


def _table(results, tasks):
    rows = []
    for task in tasks:
        side = {name: [r for r in results if r["task"] == task and r["side"] == name]
                for name in SIDES}
        if not any(side.values()):
            continue
        for i, metric in enumerate(HEADLINE[task]):
            # Every metric is stored as a fraction (SQuAD's official v1.1 `evaluate` returns
            # fractions too; run_squad.py's eval_results.txt has them x100).
            scale = 100.0
            values = {name: [r["metrics"][metric] for r in runs if metric in r["metrics"]]
                      for name, runs in side.items()}
            row = {"task": task, "metric": metric,
                   "seeds": " / ".join(str(len(values[name])) for name in SIDES),
                   "ours_speed": _speed(side["ours"]) if i == 0 else "",
                   "peer_speed": _speed(side["peer"]) if i == 0 else ""}
            for name in SIDES:
                row[name] = common.fmt_ms(values[name], scale)
            row["vs_peer"] = common.compare(values["ours"], values["peer"], scale)
            row["vs_peer_buffer"] = common.compare(values["ours"], values["peer_buffer"], scale)
            rows.append(row)
    return rows


def _protocol_lines(tasks, seeds):
    hp = common.GLUE_HPARAMS
    lines = ["Protocol (both sides identical): converted all-MiniLM-L6-v2 (6 layers, H=384); "
             "seeds %s; batch %d, peak lr %g, %g epochs, linear warmup %g%% then linear decay "
             "to 0, dropout 0.1, weight decay 0.01 (not on bias/LayerNorm), gradient clip 1.0, "
             "%d CPU threads per side." % (
                 ",".join(str(s) for s in seeds), hp["train_batch_size"], hp["learning_rate"],
                 hp["num_train_epochs"], 100 * hp["warmup_proportion"], common.NUM_THREADS)]
    for name in tasks:
        if name == "squad":
            s = common.SQUAD
            lines.append(
                "- squad: train = articles %d-%d of dev-v1.1.json, eval = articles %d-%d; "
                "max_seq_length %d, doc_stride %d, %g epoch(s), batch %d, lr %g; "
                "official SQuAD 1.1 EM/F1." % (
                    s["train_articles"][0], s["train_articles"][1] - 1, s["eval_articles"][0],
                    s["eval_articles"][1] - 1, s["max_seq_length"], s["doc_stride"],
                    s["num_train_epochs"], s["train_batch_size"], s["learning_rate"]))
            continue
        t = common.TASKS[name]
        steps = common.num_train_steps(t.num_train, hp["train_batch_size"],
                                       hp["num_train_epochs"])
        lines.append("- %s: first %d train rows%s, %s dev rows, max_seq_length %d, %d steps "
                     "(%d warmup)." % (
                         name, t.num_train,
                         " (shuffled once, seed 0)" if t.shuffle_train else "",
                         "all" if t.num_dev is None else "first %d" % t.num_dev,
                         t.max_seq_length, steps,
                         common.num_warmup_steps(steps, hp["warmup_proportion"])))
    lines.append("Ours: run_classifier.py / run_squad.py (reference AdamWeightDecay, no bias "
                 "correction, polynomial decay after warmup). Peer: transformers BertFor* + "
                 "torch with the reference's update rule and schedule (peer.ReferenceAdam, "
                 "truncated-normal head), data in one shuffled pass after another; peer, "
                 "reference order: the same reading the training file the way the "
                 "reference's pipeline does (file order, repeat, shuffle buffer of 100). "
                 "Peer HF: the same with torch AdamW (bias-corrected) "
                 "+ get_linear_schedule_with_warmup, transformers' head init. Metric values in "
                 "percent; std = sample std over seeds; 2 SE = twice the standard error of "
                 "the difference of the means, the seed-noise band, 'yes' when the "
                 "difference is inside it; train ex/s = optimizer steps x batch / "
                 "training seconds.")
    return lines


def _not_run(skipped):
    """One line listing the (side, task, seed, why) runs that are not in the table."""
    seeds = {}
    for side, task, seed, why in skipped:
        seeds.setdefault((side, task, why), []).append(str(seed))
    return "Not run (not asked for, time budget or failure): " + "; ".join(
        "%s %s seeds %s%s" % (side, task, ",".join(found), why)
        for (side, task, why), found in seeds.items())


def main():
    """Runs every side on the tasks and seeds asked for; writes results.json and .md."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default="sst-2,mrpc")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--sides", default="ours,peer,peer_buffer,peer_hf")
    parser.add_argument("--work_dir", default="/tmp/bert_tf2_reproduce")
    parser.add_argument("--peer_python",
                        default=os.path.join(common.ROOT, ".venv-reproduce", "bin", "python"))
    parser.add_argument("--deadline", default=None, help="UTC HH:MM; no run starts that "
                        "would likely end after it")
    parser.add_argument("--resume", action="store_true",
                        help="reuse the results of runs already finished in --work_dir")
    parser.add_argument("--table_only", action="store_true",
                        help="run nothing: the table of the runs finished in --work_dir")
    parser.add_argument("--results", default=os.path.dirname(os.path.abspath(__file__)))
    args = parser.parse_args()
    args.resume = args.resume or args.table_only
    os.makedirs(args.results, exist_ok=True)

    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    seeds = [int(s) for s in args.seeds.split(",")]
    sides = args.sides.split(",")
    os.makedirs(args.work_dir, exist_ok=True)
    hf_dir = common.minilm_dir()
    model_dirs = {"ours": common.convert_minilm(hf_dir, os.path.join(args.work_dir,
                                                                      "minilm_tf1")),
                  "peer": hf_dir}
    paths = {}
    for task in tasks:
        if task == "squad":
            paths["squad"] = common.make_squad_subsets(os.path.join(args.work_dir, "squad"))
        else:
            paths[task] = common.make_glue_subset(common.TASKS[task],
                                                  os.path.join(args.work_dir, "glue"))

    results_json = os.path.join(args.results, "results.json")
    results_md = os.path.join(args.results, "results.md")
    results, skipped, last_duration = [], [], {}
    for seed in seeds:
        for task in tasks:
            for side in sides:
                done = os.path.join(args.work_dir, "%s-%s-seed%d.json.done" % (side, task, seed))
                if args.table_only and not os.path.exists(done):
                    skipped.append((side, task, seed, ""))
                    continue
                left = _seconds_left(args.deadline)
                expected = last_duration.get((side, task), 0.0)
                if expected > left:
                    skipped.append((side, task, seed, ""))
                    common.log("skipping %s %s seed %d (%.0f s expected, %.0f s left)"
                               % (side, task, seed, expected, left))
                    continue
                common.log("running %s %s seed %d" % (side, task, seed))
                try:
                    result = _run_one(side, task, seed, paths, model_dirs, args.work_dir,
                                      args.peer_python, args.resume)
                except RuntimeError as e:
                    common.log(str(e))
                    skipped.append((side, task, seed, " (failed)"))
                    continue
                last_duration[(side, task)] = result["process_seconds"]
                results.append(result)
                common.log("done %s %s seed %d: %s (%.0f s)" % (
                    side, task, seed, result["metrics"], result["process_seconds"]))
                protocol = _protocol_lines(tasks, seeds)
                if skipped:
                    protocol.append(_not_run(skipped))
                with open(results_json, "w", encoding="utf-8") as f:
                    json.dump({"protocol": protocol, "results": results}, f, indent=2)
                common.write_table(results_md, _table(results, tasks), protocol)
    protocol = _protocol_lines(tasks, seeds)
    if skipped:
        protocol.append(_not_run(skipped))
    with open(results_json, "w", encoding="utf-8") as f:
        json.dump({"protocol": protocol, "results": results}, f, indent=2)
    print(common.write_table(results_md, _table(results, tasks), protocol))


if __name__ == "__main__":
    main()
