"""Dev metrics of run_classifier.py with --group_by_length against the same runs without it.

Both sides are ours (ours.py, the port's own command line) on the reproduction's subsets,
hyper-parameters and converted all-MiniLM-L6-v2 (common.py); only the training order
differs. Runs go seed by seed, ungrouped then grouped, and results_grouped.md (next to
this file) is rewritten after every run, so a run cut short leaves whole seeds.

  .venv/bin/python benchmarks/reproduce/grouped.py --tasks=sst-2,mrpc --seeds=1,2,3
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # pylint: disable=wrong-import-position

VARIANTS = (("ours", []), ("ours_grouped", ["--group_by_length"]))
METRICS = {"mrpc": ["accuracy", "f1"]}


def protocol(tasks, seeds):
    """What the table measured, in words."""
    hp = common.GLUE_HPARAMS
    parts = ["%s: first %d train rows, %s dev rows, max_seq_length %d, %d steps" % (
        t, common.TASKS[t].num_train,
        "all" if common.TASKS[t].num_dev is None else "first %d" % common.TASKS[t].num_dev,
        common.TASKS[t].max_seq_length,
        common.num_train_steps(common.TASKS[t].num_train, hp["train_batch_size"],
                               hp["num_train_epochs"])) for t in tasks]
    return ("Protocol: run_classifier.py on converted all-MiniLM-L6-v2, seeds %s, batch %d, "
            "lr %g, %g epochs, warmup %g; %s. Metrics in percent (std over seeds); 2 SE = "
            "twice the standard error of the difference, 'yes' when the difference is "
            "inside it; train ex/s from the runs' logs (%d CPU threads)." % (
                ",".join(str(s) for s in seeds), hp["train_batch_size"], hp["learning_rate"],
                hp["num_train_epochs"], hp["warmup_proportion"], "; ".join(parts),
                common.NUM_THREADS))


def run_one(task, seed, variant, data_dir, model_dir, work):
    """The result dict of one ours.py run (raises RuntimeError with its log's tail)."""
    name = "%s-%s-seed%d" % (variant, task, seed)
    out_json = os.path.join(work, name + ".json")
    cmd = [sys.executable, os.path.join(common.HERE, "ours.py"), "glue", "--task=%s" % task,
           "--data_dir=%s" % data_dir, "--model_dir=%s" % model_dir, "--seed=%d" % seed,
           "--output=%s" % out_json, "--work_dir=%s" % os.path.join(work, name)]
    cmd += dict(VARIANTS)[variant]
    start = time.time()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          cwd=common.ROOT, check=False)
    if proc.returncode != 0:
        raise RuntimeError("%s failed:\n%s" % (name, "\n".join(proc.stdout.splitlines()[-15:])))
    with open(out_json, "r", encoding="utf-8") as f:
        result = json.load(f)
    result["process_seconds"] = time.time() - start
    return result


def table(results, tasks):
    """Markdown rows: per task and metric, both variants and their difference."""
    lines = ["| task | metric | ours mean ± std | ours --group_by_length mean ± std | "
             "grouped − plain (2 SE) within noise | seeds | train ex/s plain / grouped |",
             "|---|---|---|---|---|---|---|"]
    for task in tasks:
        runs = {v: [r for r in results if r["task"] == task and r["side"] == v]
                for v, _ in VARIANTS}
        for i, metric in enumerate(METRICS.get(task, [common.TASKS[task].metric])):
            values = {v: [r["metrics"][metric] for r in rs] for v, rs in runs.items()}
            speed = " / ".join("%.2f" % common.mean_std(
                [r["train_examples_per_second"] for r in runs[v]])[0] if runs[v] else "n/a"
                for v, _ in VARIANTS) if i == 0 else ""
            lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                task, metric, common.fmt_ms(values["ours"]),
                common.fmt_ms(values["ours_grouped"]),
                common.compare(values["ours_grouped"], values["ours"], 100.0),
                " / ".join(str(len(values[v])) for v, _ in VARIANTS), speed))
    return "\n".join(lines) + "\n"


def main():
    """Fine-tunes with and without --group_by_length over the seeds; writes the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default="sst-2,mrpc")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--work_dir", default="/tmp/bert_tf2_grouped")
    parser.add_argument("--results", default=os.path.join(common.HERE, "results_grouped.md"))
    args = parser.parse_args()
    tasks = [t for t in args.tasks.split(",") if t]
    os.makedirs(args.work_dir, exist_ok=True)
    model_dir = common.convert_minilm(common.minilm_dir(),
                                      os.path.join(args.work_dir, "minilm_tf1"))
    data = {t: common.make_glue_subset(common.TASKS[t], os.path.join(args.work_dir, "glue"))
            for t in tasks}
    results = []
    seeds = [int(s) for s in args.seeds.split(",")]
    for seed in seeds:
        for task in tasks:
            for variant, _ in VARIANTS:
                common.log("running %s %s seed %d" % (variant, task, seed))
                results.append(run_one(task, seed, variant, data[task], model_dir,
                                       args.work_dir))
                common.log("done: %s" % results[-1]["metrics"])
                text = table(results, tasks)
                with open(args.results, "w", encoding="utf-8") as f:
                    f.write(text + "\n" + protocol(tasks, seeds) + "\n")
    print(text)


if __name__ == "__main__":
    main()
