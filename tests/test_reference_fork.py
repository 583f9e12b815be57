"""Evidence for `import bert_tf2.tf1 as tf`: the reference's own files run on TF 2.20.

With BERT_REFERENCE_DIR naming a folder of google-research/bert's .py files (by default
../shared/reference/bert, the files of the commit its COMMIT names; nothing is fetched),
they are copied and bert_tf2.compat.move_fork's main (its command line's) changes their
`import tensorflow as tf` line and nothing else. Then, one after another in one subprocess
(tests/reference_fork_runs.py; bert_tf2.tf1 puts its process in TF1 graph mode):
- tests/reference_fork_graph.py: the reference's BertModel on a TF1 checkpoint equals
  bert-tf2's modeling.py (eager), its FullTokenizer equals ours, its create_optimizer trains a
  step, and run_classifier's TFRecord file and input_fn batches (tf.contrib.data.map_and_batch)
  equal ours;
- the reference's runners on the README's command lines, made small (the tiny TF1 checkpoint
  of ../shared: max_seq_length 16, its max_position_embeddings; 2-3 training steps):
  run_classifier (MRPC's first rows: train, eval, predict; then the README's predict-only
  command from the checkpoint it trained), run_squad (a SQuAD 2.0 subset: train, predict;
  the 1.1 subset it is made from: predict from that checkpoint),
  create_pretraining_data + run_pretraining (train, eval) and
  extract_features, through their own TPUEstimator code. Our root scripts, run in this
  process with the same flags (--do_train left out) on the checkpoint the reference trained,
  give the same eval_results.txt, test_results.tsv, predictions / nbest / null odds, records
  and JSONL features (the tolerances are at each test).
Without either folder those skip; test_a_tiny_fork_trains_evaluates_and_predicts always runs
(a run_classifier-style fork of tests/tiny_fork_classifier.py, no reference files needed), last
in the same process.
"""
import concurrent.futures
import contextlib
import difflib
import io
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

import create_pretraining_data
import extract_features
import modeling
import run_classifier
import run_pretraining
import run_squad
import tokenization
from bert_tf2 import flags_common
from bert_tf2.compat import move_fork
from bert_tf2.trainer import checkpoints
from conftest import REPO_ROOT, SHARED_DIR
from conftest import HANG_GUARD_SECONDS

SCRIPT = os.path.join(str(REPO_ROOT), "tests", "reference_fork_graph.py")
RUNS = os.path.join(str(REPO_ROOT), "tests", "reference_fork_runs.py")
TINY_FORK = os.path.join(str(REPO_ROOT), "tests", "tiny_fork_classifier.py")
RUNNERS = ("run_classifier.py", "run_squad.py", "run_pretraining.py", "extract_features.py",
           "create_pretraining_data.py")
MODULES = ("modeling.py", "tokenization.py", "optimization.py") + RUNNERS
THE_LINE = ("import tensorflow as tf", "import bert_tf2.tf1 as tf")
ONCE = "bert_tf2.tf1: this process now runs TensorFlow 1 graph mode"
# The same arrays and texts as reference_fork_graph.py's.
INPUT_IDS = np.array([[2, 5, 6, 7, 8, 9, 3, 0], [2, 10, 11, 12, 13, 1, 3, 4]], np.int32)
INPUT_MASK = np.array([[1, 1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 1, 1]], np.int32)
TOKEN_TYPE_IDS = np.array([[0, 0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 1, 1, 1]], np.int32)
PAIRS = [("The cat sat.", "A cat was sitting.", "1"), ("Stocks fell.", "It rained.", "0"),
         ("Hello world", None, "1"), ("na\u00efve caf\u00e9 owners", "Caf\u00e9s!", "0"),
         ("One more sentence here", "and its pair", "1")]
TEXTS = ["Hello, World! UNwant\u00e9d running", "na\u00efve caf\u00e9 --- 3.14 [MASK]",
         "\u4e2d\u6587 and \u00c5ngstr\u00f6m's  \t tabs", ""]


NO_REFERENCE = ("BERT_REFERENCE_DIR is not set and ../shared/reference/bert is absent (a folder "
                "of google-research/bert's .py files: modeling.py, tokenization.py, "
                "optimization.py, the runners), or ../shared is")


def _reference_dir():
    """$BERT_REFERENCE_DIR, else ../shared/reference/bert (the reference's files as published,
    its COMMIT beside them); None when neither is there, or ../shared (its data) is absent."""
    folder = os.environ.get("BERT_REFERENCE_DIR")
    if SHARED_DIR is None:
        return None
    if not folder:
        shared = SHARED_DIR / "reference" / "bert"
        if not shared.is_dir():
            return None
        folder = str(shared)
    missing = [m for m in MODULES if not os.path.isfile(os.path.join(folder, m))]
    if missing:
        pytest.fail("BERT_REFERENCE_DIR=%s lacks %s" % (folder, ", ".join(missing)))
    return folder


def _env():
    """A fork's process: bert_tf2 from this repository (its own folder comes first on the path)."""
    path = os.pathsep.join([str(REPO_ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=path)


def _moved_reference(reference, folder):
    """A copy of the reference's modules in `folder` that move_fork's main moved to
    bert_tf2.tf1."""
    for name in MODULES:  # the contents only: ../shared's files are read-only, a fork's are not
        shutil.copyfile(os.path.join(reference, name), os.path.join(folder, name))
    # Its command line's main, in this process (the tiny fork's test and tests/smoke run
    # move_fork on the files they run; test_readme runs the README's command line).
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert move_fork.main([folder]) == 0
    for name in MODULES:
        assert "changed %s" % os.path.join(folder, name) in stdout.getvalue(), (
            name, stdout.getvalue())
        with open(os.path.join(reference, name), encoding="utf-8") as f:
            before = f.read().split("\n")
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            after = f.read().split("\n")
        changed = [line for line in difflib.ndiff(before, after) if line[:2] in ("- ", "+ ")]
        assert changed == ["- " + THE_LINE[0], "+ " + THE_LINE[1]], (name, changed)
    return folder


@pytest.fixture(scope="module")
def fork_folder(fork_process):
    """The moved copy of the reference's modules (skips without them)."""
    if fork_process["reference"] is None:
        pytest.skip(NO_REFERENCE)
    return fork_process["reference"]


@pytest.fixture(scope="module")
def fork(fork_folder, shared_dir, reference_runs):  # pylint: disable=unused-argument
    """What reference_fork_graph.py found (the first run of reference_runs' process), and the
    checkpoint and vocab it used."""
    runs = reference_runs[0].result()
    results = dict(np.load(runs["graph"]["flags"]["out"]))
    results.update(checkpoint=runs["graph"]["flags"]["checkpoint"],
                   vocab=runs["graph"]["flags"]["vocab"], folder=fork_folder, texts=PAIRS)
    return results


def _ours(checkpoint):
    """bert-tf2's modeling.BertModel (eager) on the checkpoint and the same inputs."""
    config = modeling.BertConfig.from_json_file(
        os.path.join(os.path.dirname(checkpoint), "bert_config.json"))
    model = modeling.BertModel(config)
    model(INPUT_IDS, input_mask=INPUT_MASK, token_type_ids=TOKEN_TYPE_IDS)
    loaded = checkpoints.load_checkpoint(model, checkpoint, log=False)
    assert loaded.not_in_checkpoint == []
    return model(INPUT_IDS, input_mask=INPUT_MASK, token_type_ids=TOKEN_TYPE_IDS,
                 training=False)


def test_the_references_bert_model_equals_ours_on_a_tf1_checkpoint(fork):
    assert os.path.dirname(str(fork["modeling_file"])) == fork["folder"]
    assert int(fork["initialized"]) > 0
    ours = _ours(fork["checkpoint"])
    deltas = {key: float(np.abs(fork[key] - ours[key].numpy()).max())
              for key in ("sequence_output", "pooled_output")}
    print("max |delta| reference (bert_tf2.tf1, graph) vs ours (eager): %s" % deltas)
    assert max(deltas.values()) <= 1e-5, deltas


def test_the_references_tokenizer_equals_ours(fork):
    ours = []
    for lower in (True, False):
        tokenizer = tokenization.FullTokenizer(vocab_file=fork["vocab"], do_lower_case=lower)
        ours += [tokenizer.tokenize(text) for text in TEXTS]
    assert json.loads(str(fork["tokens"])) == ours
    assert ours[0][:4] == ["hello", ",", "world", "!"]


def test_the_references_optimizer_trains_a_step_in_graph_mode(fork):
    assert int(fork["step"]) == 1
    assert float(fork["kernel_change"]) > 0
    assert [str(s) for s in fork["slots"]] == ["bert/embeddings/LayerNorm/beta/adam_m:0",
                                               "bert/embeddings/LayerNorm/beta/adam_v:0"]


def test_the_references_classifier_records_and_batches_equal_ours(fork, tmp_path):
    # The same records from our writer, and our input_fn's batches from the
    # reference's file: the same rows (ours pads the last eval batch with is_real_example 0).
    tokenizer = tokenization.FullTokenizer(vocab_file=fork["vocab"], do_lower_case=True)
    examples = [run_classifier.InputExample(guid="dev-%d" % i, text_a=a, text_b=b, label=label)
                for i, (a, b, label) in enumerate(PAIRS)]
    ours = str(tmp_path / "dev.tf_record")
    run_classifier.file_based_convert_examples_to_features(examples, ["0", "1"], 16,
                                                           tokenizer, ours)
    records = [[tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(path)]
               for path in (ours, os.path.join(fork["folder"], "dev.tf_record"))]
    assert len(records[0]) == 5 and records[0] == records[1]  # maps compared by key
    assert fork["sizes_drop0"].tolist() == [2, 2, 1]
    assert fork["sizes_drop1"].tolist() == [2, 2]
    batches = list(run_classifier.file_based_input_fn_builder(
        os.path.join(fork["folder"], "dev.tf_record"), 16, False, False)(
            {"batch_size": 2}).as_numpy_iterator())
    real = np.concatenate([b["is_real_example"] for b in batches]) == 1
    for key in ("input_ids", "input_mask", "segment_ids", "label_ids", "is_real_example"):
        np.testing.assert_array_equal(
            np.concatenate([b[key] for b in batches])[real], fork["records_drop0_" + key])
        np.testing.assert_array_equal(fork["records_drop1_" + key],
                                      fork["records_drop0_" + key][:4])


# --- The reference's runners, their README command lines made small -----------------------

def _args(flags):
    return ["--%s=%s" % item for item in flags.items()]


def _squad_subsets(squad_file, folder):
    """SQuAD 1.1 and 2.0 files of 9 questions (3 paragraphs of dev-v1.1's first article, one
    answer each; in 2.0 every paragraph's third question unanswerable)."""
    with open(squad_file, encoding="utf-8") as f:
        article = json.load(f)["data"][0]
    paragraphs = [{"context": p["context"], "qas": [dict(q, answers=q["answers"][:1])
                                                    for q in p["qas"][:3]]}
                  for p in article["paragraphs"][:3]]
    paths = {}
    for version in ("1.1", "v2.0"):
        if version == "v2.0":
            for paragraph in paragraphs:
                for index, question in enumerate(paragraph["qas"]):
                    question["is_impossible"] = index == 2
                paragraph["qas"][2]["answers"] = []
        paths[version] = os.path.join(folder, "squad-%s.json" % version)
        with open(paths[version], "w", encoding="utf-8") as f:
            json.dump({"version": version, "data": [{"title": article["title"],
                                                     "paragraphs": paragraphs}]}, f)
    return paths


def _mrpc_subset(mrpc, folder):
    """MRPC's train, dev and test files cut to their first MRPC_ROWS rows (header kept):
    the data folder."""
    out = os.path.join(folder, "MRPC")
    os.makedirs(out)
    for name, rows in MRPC_ROWS.items():
        with open(os.path.join(mrpc, name), encoding="utf-8", newline="") as f:
            lines = f.readlines()[:rows + 1]
        with open(os.path.join(out, name), "w", encoding="utf-8", newline="") as f:
            f.writelines(lines)
    return out


# Rows of each MRPC file the runs read (the whole task's tokenization, in the reference's
# process and in ours, is most of their time; what is compared does not need it).
MRPC_ROWS = {"train.tsv": 64, "dev.tsv": 40, "test.tsv": 48}


def _command_lines(shared_dir, folder):
    """{name: (script, flags)}: the README's command lines on the tiny checkpoint."""
    tiny = str(shared_dir / "data" / "tf1_checkpoints" / "kerasbert_tiny")
    model = {"vocab_file": os.path.join(tiny, "vocab.txt"),
             "bert_config_file": os.path.join(tiny, "bert_config.json"),
             "init_checkpoint": os.path.join(tiny, "bert_model.ckpt")}
    squad = _squad_subsets(str(shared_dir / "data" / "squad" / "dev-v1.1.json"), folder)
    with open(os.path.join(folder, "input.txt"), "w", encoding="utf-8") as f:
        f.write("Who was Jim Henson ? ||| Jim Henson was a puppeteer\n"
                "all work and no play makes jack a dull boy\n"
                "all work ||| no play makes jack a dull boy all work and no play\n")
    lines = {
        # 64 examples / 32 * 1 epoch: 2 steps.
        "classifier": ("run_classifier.py", dict(
            task_name="MRPC", do_train="true", do_eval="true", do_predict="true",
            data_dir=_mrpc_subset(str(shared_dir / "data" / "glue_data" / "MRPC"), folder),
            **model, max_seq_length=16, train_batch_size=32, learning_rate=2e-5,
            num_train_epochs=1.0)),
        "pretraining_data": ("create_pretraining_data.py", dict(
            input_file=str(shared_dir / "data" / "sample_text.txt"),
            output_file=os.path.join(folder, "tf_examples.tfrecord"),
            vocab_file=model["vocab_file"], do_lower_case="True", max_seq_length=16,
            max_predictions_per_seq=3, masked_lm_prob=0.15, random_seed=12345, dupe_factor=5)),
        "pretraining": ("run_pretraining.py", dict(
            input_file=os.path.join(folder, "tf_examples.tfrecord"), do_train="True",
            do_eval="True", bert_config_file=model["bert_config_file"],
            init_checkpoint=model["init_checkpoint"], train_batch_size=32, max_seq_length=16,
            max_predictions_per_seq=3, num_train_steps=3, num_warmup_steps=1,
            learning_rate=2e-5)),
        "features": ("extract_features.py", dict(
            input_file=os.path.join(folder, "input.txt"), **model, layers="-1,-2",
            max_seq_length=16, batch_size=8)),
    }
    for name, version in (("squad", "1.1"), ("squad2", "v2.0")):
        # 9 questions / 6 * 2 epochs: 3 steps.
        lines[name] = ("run_squad.py", dict(
            **model, do_train="True", train_file=squad[version], do_predict="True",
            predict_file=squad[version], train_batch_size=6, learning_rate=3e-5,
            num_train_epochs=2.0, max_seq_length=16, max_query_length=6, doc_stride=4,
            version_2_with_negative=str(version == "v2.0")))
    return lines


def _plan(fork_folder, shared_dir, lines, folder):
    """The runs of reference_fork_runs.py, in order: reference_fork_graph.py, then the
    reference's command lines (create_pretraining_data before run_pretraining, the README's
    predict-only run_classifier after the one that trained); {name: run} of the tests."""
    plan, runs = [], {}

    def add(name, script, flags, cwd):
        plan.append({"name": name, "argv": [os.path.join(fork_folder, script)] + _args(flags),
                     "cwd": cwd})
        return {"out": cwd, "flags": flags}

    tiny = shared_dir / "data" / "tf1_checkpoints" / "kerasbert_tiny"
    graph = dict(checkpoint=str(tiny / "bert_model.ckpt"),
                 vocab=str(shared_dir / "data" / "vocab" / "uncased_vocab.txt"),
                 out=os.path.join(fork_folder, "results.npz"))
    plan.append({"name": "graph", "argv": [SCRIPT, str(REPO_ROOT), fork_folder,
                                           graph["checkpoint"], graph["vocab"], graph["out"]],
                 "cwd": os.path.join(folder, "graph")})
    runs["graph"] = {"out": plan[0]["cwd"], "flags": graph}
    for name in ("classifier", "squad2", "squad", "pretraining", "features"):
        out = os.path.join(folder, "reference_" + name)
        script, flags = lines[name]
        flags = dict(flags)
        if name == "squad":
            # SQuAD 1.1 predicts from the checkpoint the 2.0 run trained (its TPUEstimator's
            # training, the same model_fn and input_fn, is that run's): what is compared is
            # the 1.1 features and predictions, ours on the same checkpoint.
            flags["do_train"] = "False"
            flags["init_checkpoint"] = os.path.join(runs["squad2"]["out"], "model.ckpt-3")
        if name == "features":
            # Its TPUEstimator has no model_dir and takes a temporary folder (as TF 1.x did):
            # reference_fork_runs.py makes each run's folder its TMPDIR.
            flags["output_file"] = os.path.join(out, "output.jsonl")
        else:
            flags["output_dir"] = out
        if name == "pretraining":
            add("pretraining_data", *lines["pretraining_data"], os.path.join(folder, "data_run"))
        runs[name] = add(name, script, flags, out)
        runs[name]["trained_by"] = "squad2" if name == "squad" else name
        if name == "classifier":
            # The README's second command: --do_predict alone, from the classifier trained.
            predict = {k: v for k, v in flags.items() if k not in ("do_train", "do_eval")}
            predict.update(output_dir=os.path.join(folder, "reference_classifier_predict"),
                           init_checkpoint=os.path.join(out, "model.ckpt-2"))
            runs[name]["predict_out"] = add("classifier_predict", script, predict,
                                            predict["output_dir"])["out"]
    return plan, runs


def _run_plan(fork_folder, plan, runs, folder):
    """reference_fork_runs.py on `plan` (one process); `runs`, each with its stderr."""
    start = time.time()
    path = os.path.join(folder, "plan.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(plan, f)
    proc = subprocess.run([sys.executable, RUNS, fork_folder, path], cwd=folder, env=_env(),
                          capture_output=True, text=True, timeout=HANG_GUARD_SECONDS,
                          check=False)
    stderr = {}
    for run in plan:
        log = os.path.join(run["cwd"], "stderr.txt")
        if os.path.exists(log):
            with open(log, encoding="utf-8") as f:
                stderr[run["name"]] = f.read()
    last = list(stderr.values())[-1] if stderr else ""  # the run that failed, if one did
    assert proc.returncode == 0, "%s\n%s" % (proc.stderr[-3000:], last[-3000:])
    # bert_tf2.tf1's notice: once in the process, when the first script imports it.
    assert sum(text.count(ONCE) for text in stderr.values()) == 1, list(stderr.values())[0][-3000:]
    for name, run in runs.items():
        run["stderr"] = stderr[name]
    print("the reference's runs, one process: %.0f s" % (time.time() - start))
    return runs


def _tiny_fork(folder):
    """tests/tiny_fork_classifier.py moved by move_fork in `folder`/fork: its run, and what
    move_fork returned."""
    fork_dir = os.path.join(folder, "tiny_fork")
    os.makedirs(fork_dir)
    shutil.copy(TINY_FORK, os.path.join(fork_dir, "tiny_fork.py"))
    moved = move_fork.move_fork(fork_dir, report=lambda line: None)
    out = os.path.join(folder, "tiny_fork_out")
    return {"name": "tiny_fork", "argv": [os.path.join(fork_dir, "tiny_fork.py"),
                                          "--output_dir=" + out],
            "cwd": os.path.join(folder, "tiny_fork_run")}, {"out": out, "moved": moved,
                                                            "script": fork_dir + "/tiny_fork.py"}


@pytest.fixture(scope="module")
def fork_process(tmp_path_factory):
    """One process started in the background (each start pays TensorFlow's import): with the
    reference's files, reference_fork_graph.py and the reference's runners, one after another;
    then, always, the tiny fork. {"future": of {name: run}, "reference": the moved reference
    folder or None, "lines": the command lines, "folder": theirs}."""
    folder = str(tmp_path_factory.mktemp("runs"))
    reference = _reference_dir()
    plan, runs, lines = [], {}, None
    if reference is not None:
        reference = _moved_reference(reference, str(tmp_path_factory.mktemp("fork")))
        lines = _command_lines(SHARED_DIR, folder)
        plan, runs = _plan(reference, SHARED_DIR, lines, folder)
    # Last: its Estimator's graphs and flags come after every run that is compared with ours.
    tiny_run, runs["tiny_fork"] = _tiny_fork(folder)
    plan.append(tiny_run)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    fork_dir = reference or os.path.dirname(tiny_run["argv"][0])
    yield {"future": pool.submit(_run_plan, fork_dir, plan, runs, folder),
           "reference": reference, "lines": lines, "folder": folder}
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="module")
def reference_runs(fork_folder, fork_process):
    """The reference's runs: (a future of {name: run}, the command lines, their folder)."""
    return fork_process["future"], fork_process["lines"], fork_process["folder"]


def _our_script(module, flags, trained, **outputs):
    """Our root script on the reference's flags, --do_train left out and --init_checkpoint the
    checkpoint the reference trained (its step in the name)."""
    flags = {k: v for k, v in flags.items() if k != "do_train"}
    flags.update(outputs)
    if trained:
        flags["init_checkpoint"] = trained
    return module.run(flags_common.parse_flags(module.define_flags, _args(flags)))


def _results(path):
    """eval_results.txt: {key: value text}."""
    with open(path, encoding="utf-8") as f:
        return dict(line.split(" = ") for line in f.read().splitlines())


def _compare_results(reference, ours, exact):
    """The reference's eval_results.txt keys in ours (ours adds its own keys): the `exact` ones
    equal, the losses within 1e-6 relative (float32 sums in another order); max |delta|."""
    deltas = {}
    for key, value in reference.items():
        if key in exact:
            assert float(ours[key]) == float(value), (key, ours[key], value)
        else:
            deltas[key] = abs(float(ours[key]) - float(value))
            assert deltas[key] <= 1e-6 * max(1.0, abs(float(value))), (key, ours[key], value)
    return deltas


def _trained(run, steps):
    """The reference's last checkpoint, after `steps` steps saved by its TPUEstimator."""
    assert "*INIT_FROM_CKPT*" in run["stderr"]  # the reference's model_fn, not ours
    assert "Saving checkpoints for %d into" % steps in run["stderr"]
    assert tf.train.latest_checkpoint(run["out"]).endswith("model.ckpt-%d" % steps)
    return os.path.join(run["out"], "model.ckpt-%d" % steps)


def test_the_references_run_classifier_equals_ours(reference_runs, tmp_path):
    future, _, _ = reference_runs
    run = future.result()["classifier"]
    ours = str(tmp_path / "ours")
    _our_script(run_classifier, run["flags"], _trained(run, 2), output_dir=ours)
    reference = _results(os.path.join(run["out"], "eval_results.txt"))
    assert sorted(reference) == ["eval_accuracy", "eval_loss", "global_step", "loss"]
    deltas = _compare_results(reference, _results(os.path.join(ours, "eval_results.txt")),
                              exact=("eval_accuracy", "global_step"))
    tables = []
    for folder in (run["out"], ours, run["predict_out"]):
        with open(os.path.join(folder, "test_results.tsv"), encoding="utf-8") as f:
            tables.append(f.read())
    rows = [np.array([line.split("\t") for line in t.splitlines()], np.float64) for t in tables]
    assert rows[0].shape == rows[1].shape == (MRPC_ROWS["test.tsv"], 2)
    # The predict-only run initialized from the trained checkpoint (no checkpoint in its
    # output_dir): the same file as the run that trained.
    assert tables[2] == tables[0]
    print("run_classifier MRPC: eval %s, max |delta| %s; test_results.tsv identical: %s, max "
          "|delta| %g" % (reference, deltas, tables[0] == tables[1],
                          np.abs(rows[0] - rows[1]).max()))
    assert np.abs(rows[0] - rows[1]).max() <= 1e-6


# Spans of the tiny model's all-[UNK] windows often score alike: answers whose scores are
# this close (float32 sums in another order move them ~1e-8) may change places.
TIE = 1e-6


def _score(entry):
    return entry["start_logit"] + entry["end_logit"]


def _nbest_deltas(reference, ours):
    """Each question's n-best: the same scores, and the same numbers for every answer in both
    (the max |delta| is returned); an answer in one list only must tie the last one kept.
    Returns (max |delta|, how many answers changed places or lists within a tie)."""
    assert sorted(reference) == sorted(ours)
    delta, swapped = 0.0, 0
    for key in reference:
        lists = [{e["text"]: e for e in n[key]} for n in (reference, ours)]
        scores = [sorted(map(_score, found.values()), reverse=True) for found in lists]
        np.testing.assert_allclose(scores[0], scores[1], rtol=0, atol=TIE, err_msg=key)
        for text in set(lists[0]) ^ set(lists[1]):
            entry = lists[0].get(text) or lists[1][text]
            assert _score(entry) <= max(scores[0][-1], scores[1][-1]) + TIE, (key, text)
        swapped += len(set(lists[0]) ^ set(lists[1])) // 2 + sum(
            a["text"] != b["text"] for a, b in zip(reference[key], ours[key]))
        for text in set(lists[0]) & set(lists[1]):
            delta = max([delta] + [abs(lists[0][text][f] - lists[1][text][f])
                                   for f in ("probability", "start_logit", "end_logit")])
    return delta, swapped


def _best_answers(reference, ours, nbest):
    """predictions.json: the same answers, or answers that tie the reference's best; how many
    differ."""
    assert sorted(reference) == sorted(ours)
    differ = [key for key in reference if reference[key] != ours[key]]
    for key in differ:
        scores = {e["text"]: _score(e) for e in nbest[key]}
        top = max(scores.values())
        assert ours[key] in scores and min(scores[ours[key]], scores[reference[key]]) >= (
            top - TIE), (key, reference[key], ours[key])
    return len(differ)


@pytest.mark.parametrize("name", ["squad", "squad2"])
def test_the_references_run_squad_equals_ours(reference_runs, tmp_path, name):
    future, _, _ = reference_runs
    run = future.result()[name]
    ours = str(tmp_path / "ours")
    trained = _trained(future.result()[run["trained_by"]], 3)
    if name == "squad":
        assert "*INIT_FROM_CKPT*" in run["stderr"] and run["flags"]["init_checkpoint"] == trained
    _our_script(run_squad, run["flags"], trained, output_dir=ours)
    found = {}
    for key, folder in (("reference", run["out"]), ("ours", ours)):
        for file in ("predictions", "nbest_predictions", "null_odds"):
            if file != "null_odds" or name == "squad2":
                with open(os.path.join(folder, file + ".json"), encoding="utf-8") as f:
                    found[key, file] = json.load(f)
    assert len(found["ours", "predictions"]) == 9
    differ = _best_answers(found["reference", "predictions"], found["ours", "predictions"],
                           found["reference", "nbest_predictions"])
    deltas = {}
    deltas["nbest"], swapped = _nbest_deltas(found["reference", "nbest_predictions"],
                                             found["ours", "nbest_predictions"])
    if name == "squad2":
        odds = [found[key, "null_odds"] for key in ("reference", "ours")]
        assert sorted(odds[0]) == sorted(odds[1])
        deltas["null_odds"] = max(abs(odds[0][k] - odds[1][k]) for k in odds[0])
    print("run_squad %s: predictions.json: %d of 9 answers differ (tied); n-best: %d answers "
          "swapped within ties; max |delta| %s" % (name, differ, swapped, deltas))
    assert max(deltas.values()) <= 1e-6, deltas


def test_the_references_run_pretraining_equals_ours(reference_runs, tmp_path):
    future, lines, folder = reference_runs
    run = future.result()["pretraining"]
    # Our create_pretraining_data on the same flags: the same records.
    records_flags = dict(lines["pretraining_data"][1],
                         output_file=str(tmp_path / "ours.tfrecord"))
    create_pretraining_data.run(flags_common.parse_flags(create_pretraining_data.define_flags,
                                                         _args(records_flags)))
    records = [[tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(p)]
               for p in (str(tmp_path / "ours.tfrecord"),
                         os.path.join(folder, "tf_examples.tfrecord"))]
    assert len(records[0]) > 100 and records[0] == records[1]
    ours = str(tmp_path / "ours")
    _our_script(run_pretraining, run["flags"], _trained(run, 3), output_dir=ours)
    reference = _results(os.path.join(run["out"], "eval_results.txt"))
    assert sorted(reference) == ["global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
                                 "next_sentence_accuracy", "next_sentence_loss"]
    deltas = _compare_results(reference, _results(os.path.join(ours, "eval_results.txt")),
                              exact=("global_step", "masked_lm_accuracy",
                                     "next_sentence_accuracy"))
    print("run_pretraining: %d records equal; eval %s, max |delta| %s" % (
        len(records[0]), reference, deltas))


def _features(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_the_references_extract_features_equals_ours(reference_runs, tmp_path):
    future, _, _ = reference_runs
    run = future.result()["features"]
    assert "*INIT_FROM_CKPT*" in run["stderr"]
    ours = str(tmp_path / "ours.jsonl")
    _our_script(extract_features, run["flags"], None, output_file=ours)
    reference, found = _features(run["flags"]["output_file"]), _features(ours)
    assert len(reference) == len(found) == 3
    delta = 0.0
    for a, b in zip(reference, found):
        assert a["linex_index"] == b["linex_index"]
        assert [t["token"] for t in a["features"]] == [t["token"] for t in b["features"]]
        for token_a, token_b in zip(a["features"], b["features"]):
            assert [l["index"] for l in token_a["layers"]] == [-1, -2]
            assert [l["index"] for l in token_b["layers"]] == [-1, -2]
            delta = max([delta] + [float(np.abs(np.subtract(x["values"], y["values"])).max())
                                   for x, y in zip(token_a["layers"], token_b["layers"])])
    print("extract_features: tokens equal; values (6 decimals) max |delta| %g" % delta)
    # Both round to 6 decimals: values a float32 ulp apart can print 1e-6 apart.
    assert delta <= 1.5e-6


# --- Always on: a tiny fork written against TF 1.x --------------------------------------

def test_a_tiny_fork_trains_evaluates_and_predicts(fork_process):
    # A run_classifier-style fork (tests/tiny_fork_classifier.py) moved by move_fork: its
    # TPUEstimator predicts and evaluates from scaffold_fn's init_from_checkpoint, trains 12
    # steps (checkpoints every 5, the last 3 kept), evaluates and predicts again. It runs last
    # in fork_process's process (as `python tiny_fork.py --output_dir=OUT`), whose
    # _run_plan checks bert_tf2.tf1's notice is printed once in the process.
    runs = fork_process["future"].result()
    run = runs["tiny_fork"]
    assert run["moved"] == [run["script"]]
    with open(run["script"], encoding="utf-8") as f:
        assert "\nimport bert_tf2.tf1 as tf\n" in f.read()
    # protobuf's notice about the float_format TF's graph.pbtxt writer passes (nothing a fork
    # can act on) is not shown: not by the tiny fork, nor by any run before it in the process.
    for name, other in runs.items():
        assert "float_format" not in other["stderr"], (name, other["stderr"][-3000:])
    out = run["out"]
    with open(os.path.join(out, "found.json"), encoding="utf-8") as f:
        found = json.load(f)
    assert found["initialized_from_checkpoint"] and found["embeddings_trained"]
    assert found["checkpoints"] == ["model.ckpt-10.index", "model.ckpt-12.index",
                                    "model.ckpt-5.index"]
    assert found["before"]["global_step"] == 0 and found["after"]["global_step"] == 12
    assert sorted(found["after"]) == ["eval_accuracy", "eval_loss", "global_step", "loss"]
    assert found["after"]["eval_loss"] < found["before"]["eval_loss"]
    assert found["after"]["eval_accuracy"] >= 0.9
    probabilities = np.array(found["probabilities"])
    assert probabilities.shape == (20, 2)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
    assert found["executing_eagerly"] is False
