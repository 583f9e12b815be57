"""Our side: the same fine-tuning through the port's own command lines.

Runs run_classifier.py / run_squad.py as subprocesses (project venv), exactly as a user
would, with the converted MiniLM checkpoint, and reads eval_results.txt. Train and eval
times come from the runners' absl log timestamps (training: from "Training from step" to
the last step line, so TF start-up, feature writing and checkpoint saving are excluded,
as on the peer side; the first tf.function trace is included, as the peer's first step
is).

  .venv/bin/python benchmarks/reproduce/ours.py glue --task=mrpc --data_dir=/tmp/x/MRPC \
      --model_dir=/tmp/x/minilm_tf --seed=1 --work_dir=/tmp/x/ours-mrpc-1 --output=/tmp/x/o.json
"""
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # pylint: disable=wrong-import-position

_ABSL_TIME = re.compile(r"^[IWEF](\d{4}) (\d\d):(\d\d):(\d\d)\.(\d+)")


def _thread_env():
    env = dict(os.environ)
    n = str(common.NUM_THREADS)
    env.update({"TF_NUM_INTRAOP_THREADS": n, "TF_NUM_INTEROP_THREADS": n,
                "OMP_NUM_THREADS": n, "CUDA_VISIBLE_DEVICES": "",
                "TF_CPP_MIN_LOG_LEVEL": "1"})
    return env


def _stamp(line):
    """Seconds since midnight of an absl log line (None when it has no prefix)."""
    m = _ABSL_TIME.match(line)
    if not m:
        return None
    return int(m.group(2)) * 3600 + int(m.group(3)) * 60 + int(m.group(4)) + float(
        "0." + m.group(5))


def _span(lines, start_pattern, end_pattern, last=True):
    """Seconds between the first line matching start_pattern and the (last) line matching
    end_pattern after it."""
    t0 = t1 = None
    for line in lines:
        if t0 is None:
            if start_pattern in line:
                t0 = _stamp(line)
            continue
        if re.search(end_pattern, line):
            t1 = _stamp(line)
            if not last:
                break
    if t0 is None or t1 is None:
        return None
    return (t1 - t0) % 86400


def _run(cmd, work_dir):
    os.makedirs(work_dir, exist_ok=True)
    log_path = os.path.join(work_dir, "log.txt")
    common.log("ours: " + " ".join(cmd))
    start = time.time()
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=_thread_env(),
                              cwd=common.ROOT, check=False)
    wall = time.time() - start
    with open(log_path, "r", encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    if proc.returncode != 0:
        raise RuntimeError("%s failed (exit %d); last lines of %s:\n%s" % (
            cmd[1], proc.returncode, log_path, "\n".join(lines[-20:])))
    return lines, wall


def _common_flags(args, out_dir):
    return ["--vocab_file=%s" % os.path.join(args.model_dir, "vocab.txt"),
            "--bert_config_file=%s" % os.path.join(args.model_dir, "bert_config.json"),
            "--init_checkpoint=%s" % os.path.join(args.model_dir, "bert_model.ckpt"),
            "--do_lower_case=True", "--output_dir=%s" % out_dir,
            "--seed=%d" % args.seed, "--iterations_per_loop=10",
            "--save_checkpoints_steps=100000"]


def run_glue(args):
    """Fine-tunes and evaluates one GLUE task with run_classifier.py; writes the result."""
    task = common.TASKS[args.task]
    hp = common.GLUE_HPARAMS
    out_dir = os.path.join(args.work_dir, "output")
    shutil.rmtree(out_dir, ignore_errors=True)
    cmd = [sys.executable, os.path.join(common.ROOT, "run_classifier.py"),
           "--task_name=%s" % task.name, "--do_train=true", "--do_eval=true",
           "--data_dir=%s" % args.data_dir,
           "--max_seq_length=%d" % task.max_seq_length,
           "--train_batch_size=%d" % hp["train_batch_size"],
           "--eval_batch_size=%d" % hp["eval_batch_size"],
           "--learning_rate=%g" % hp["learning_rate"],
           "--num_train_epochs=%g" % hp["num_train_epochs"],
           "--warmup_proportion=%g" % hp["warmup_proportion"]] + _common_flags(args, out_dir)
    if args.group_by_length:
        cmd.append("--group_by_length")
    lines, wall = _run(cmd, args.work_dir)
    ev = common.read_eval_results(os.path.join(out_dir, "eval_results.txt"))
    metrics = {}
    for ours_key, key in (("eval_accuracy", "accuracy"), ("eval_f1", "f1"), ("eval_mcc", "mcc"),
                          ("eval_pearson", "pearson"), ("eval_spearman", "spearman")):
        if ours_key in ev:
            metrics[key] = ev[ours_key]
    n_train = len(common.read_glue_examples(task, args.data_dir, "train"))
    n_dev = len(common.read_glue_examples(task, args.data_dir, "dev"))
    steps = common.num_train_steps(n_train, hp["train_batch_size"], hp["num_train_epochs"])
    _finish(args, task.key, metrics, lines, wall, n_train, n_dev, steps,
            hp["train_batch_size"], "Running evaluation", r"Eval results", n_dev, out_dir)


def run_squad(args):
    """Fine-tunes and predicts SQuAD with run_squad.py; writes the result."""
    cfg = common.SQUAD
    out_dir = os.path.join(args.work_dir, "output")
    shutil.rmtree(out_dir, ignore_errors=True)
    cmd = [sys.executable, os.path.join(common.ROOT, "run_squad.py"),
           "--do_train=True", "--do_predict=True",
           "--train_file=%s" % args.train_file, "--predict_file=%s" % args.predict_file,
           "--max_seq_length=%d" % cfg["max_seq_length"],
           "--doc_stride=%d" % cfg["doc_stride"],
           "--max_query_length=%d" % cfg["max_query_length"],
           "--train_batch_size=%d" % cfg["train_batch_size"],
           "--predict_batch_size=%d" % cfg["predict_batch_size"],
           "--learning_rate=%g" % cfg["learning_rate"],
           "--num_train_epochs=%g" % cfg["num_train_epochs"],
           "--warmup_proportion=%g" % cfg["warmup_proportion"],
           "--n_best_size=%d" % cfg["n_best_size"],
           "--max_answer_length=%d" % cfg["max_answer_length"]] + _common_flags(args, out_dir)
    lines, wall = _run(cmd, args.work_dir)
    n_train = common.count_squad_questions(args.train_file)
    n_dev = common.count_squad_questions(args.predict_file)
    steps = None
    for line in lines:
        m = re.search(r"Training from step \d+ to (\d+)", line)
        if m:
            steps = int(m.group(1))
    result_path = os.path.join(out_dir, "predictions.json")
    _finish(args, "squad", {}, lines, wall, n_train, n_dev, steps, cfg["train_batch_size"],
            "Running prediction", r"Writing predictions|predictions\.json|Eval results",
            n_dev, out_dir, predictions_file=result_path)


def _finish(args, task_name, metrics, lines, wall, n_train, n_dev, steps, batch_size,
            eval_start, eval_end, n_eval, out_dir, predictions_file=None):
    train_s = _span(lines, "Training from step", r"step \d+/\d+, loss")
    eval_s = _span(lines, eval_start, eval_end, last=False)
    side = "ours_grouped" if getattr(args, "group_by_length", False) else "ours"
    result = {"side": side, "task": task_name, "seed": args.seed, "metrics": metrics,
              "num_train_examples": n_train, "num_eval_examples": n_dev,
              "num_train_steps": steps, "train_seconds": train_s, "eval_seconds": eval_s,
              "train_examples_per_second": (steps * batch_size / train_s
                                            if train_s and steps else None),
              "eval_examples_per_second": n_eval / eval_s if eval_s else None,
              "wall_seconds": wall, "output_dir": out_dir}
    if predictions_file:
        result["predictions_file"] = predictions_file
    common.write_result(args.output, result)


def main():
    """Our side of a reproduction run (glue or squad mode)."""
    parser = common.side_parser(__doc__.split("\n")[0], "convert_hf_checkpoint.py output")
    parser.add_argument("--work_dir", required=True)
    parser.add_argument("--group_by_length", action="store_true",
                        help="glue mode: run_classifier.py --group_by_length")
    args = parser.parse_args()
    if args.mode == "glue":
        run_glue(args)
    else:
        run_squad(args)


if __name__ == "__main__":
    main()
