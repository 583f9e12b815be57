"""Smoke check of an installed bert-tf2 (run by tests/smoke/run.sh, once per Python version).

Run with the venv's python, in one process (TensorFlow's import is paid once): it checks what a
non-editable install put at the top level of site-packages, that every console command's entry
point resolves to a function of the installed code, that a user's own training.py (or five other
names of ours) in the script's folder is never imported, then (with ../shared) converts the
reference's tiny TF1 checkpoint and runs extract_features and two run_classifier training steps
and an evaluation from it: in this process, or with --commands run_classifier through its
installed console command (one process). Last, every module imports (bert_tf2.tf1 last of all: it switches the
process to TF1 graph mode), and `from bert import X` is the top-level module X. With --fork,
then, in the same process (now in TF1 graph mode): tests/tiny_fork_classifier.py moved by the
installed move_fork, its TPUEstimator predicting, evaluating, training and predicting again
(what tests/test_reference_fork.py's test_a_tiny_fork_trains_evaluates_and_predicts checks of it,
here on the packages a plain install resolved). Ends with the line 'smoke: N passed, N failed';
each check prints its seconds.
"""
import importlib
import importlib.metadata
import json
import os
import pkgutil
import runpy
import shutil
import subprocess
import sys
import tempfile
import time

REFERENCE = ["modeling", "tokenization", "optimization", "create_pretraining_data",
             "run_pretraining", "run_classifier", "run_squad", "extract_features"]
REPO_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir)


def top_level(root=REPO_ROOT):
    """What an install puts at the top of site-packages: the repository root's modules (its
    *.py but setup.py, found on disk: a new runner is one with no edit here), bert and
    bert_tf2."""
    return {name[:-3] for name in os.listdir(root)
            if name.endswith(".py") and name != "setup.py"} | {"bert", "bert_tf2"}


TOP_LEVEL = top_level()
SENTENCES = ["all work and no play", "makes jack a dull boy", "jack and no play",
             "a dull boy makes work", "no work", "all play makes jack", "a boy and jack",
             "dull work and play"]
TINY_FORK = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir,
                         "tiny_fork_classifier.py")
# Files a user may have beside their script, named like modules of ours.
USER_MODULES = ("training", "serving", "heads", "checkpoints", "fileutil", "startup")


def installed_top_level():
    """First path parts of the installed distribution's files, less metadata and scripts."""
    names = set()
    for path in importlib.metadata.distribution("bert-tf2").files:
        first = path.parts[0]
        if first.endswith(".dist-info") or first in ("..", "__pycache__") or "/bin/" in str(path):
            continue
        names.add(first[:-3] if first.endswith(".py") else first)
    return names


def check_top_level():
    """The install puts exactly TOP_LEVEL into site-packages."""
    names = installed_top_level()
    assert names == TOP_LEVEL, "top level of site-packages: extra %s, missing %s" % (
        sorted(names - TOP_LEVEL), sorted(TOP_LEVEL - names))


def put_user_files_first(work):
    """A user's training.py (and the other USER_MODULES) in `work`, first on sys.path (as the
    folder of a user's script is): importing one fails the check that imports it."""
    for name in USER_MODULES:
        with open(os.path.join(work, name + ".py"), "w", encoding="utf-8") as f:
            f.write("raise RuntimeError('the user file %s.py was imported')\n" % name)
    sys.path.insert(0, work)


def check_commands_resolve():
    """Every console command is in the venv's bin/ and names a callable of the installed code."""
    bindir = os.path.dirname(sys.executable)
    commands = [ep for ep in importlib.metadata.distribution("bert-tf2").entry_points
                if ep.group == "console_scripts"]
    # A command for every top-level module but the package and the reference's libraries.
    runners = TOP_LEVEL - {"bert", "bert_tf2", "modeling", "tokenization", "optimization"}
    assert {ep.module for ep in commands} == runners, sorted(ep.value for ep in commands)
    for ep in commands:
        assert os.access(os.path.join(bindir, ep.name), os.X_OK), "no command " + ep.name
        target = ep.load()
        assert callable(target), ep.value
        module = sys.modules[ep.module]
        assert "site-packages" in module.__file__, "%s from %s" % (ep.module, module.__file__)


def command(name, *args, cwd):
    """Runs an installed console command in `cwd`; fails with its stderr."""
    bindir = os.path.dirname(sys.executable)
    out = subprocess.run([os.path.join(bindir, name)] + list(args), cwd=cwd, text=True,
                         capture_output=True, timeout=600, check=False)
    assert out.returncode == 0, "%s failed:\n%s" % (name, out.stderr[-3000:])
    return out


def in_process(module_name, *args, cwd):
    """Runs the top-level runner `module_name` in this process, as its command would."""
    del cwd
    from bert_tf2 import flags_common  # pylint: disable=import-outside-toplevel
    module = importlib.import_module(module_name)
    return module.run(flags_common.parse_flags(module.define_flags, list(args)))


def check_pipeline(work, shared, through_commands):
    """Converts a TF1 checkpoint and extracts features (in this process), and fine-tunes from
    it (in this process, or through run_classifier's console command)."""
    tiny = os.path.join(shared, "data", "tf1_checkpoints", "kerasbert_tiny")
    config, vocab = os.path.join(tiny, "bert_config.json"), os.path.join(tiny, "vocab.txt")
    converted = os.path.join(work, "converted")
    in_process("convert_tf1_checkpoint", "--input_checkpoint=%s/bert_model.ckpt" % tiny,
               "--bert_config_file=" + config, "--output_dir=" + converted, cwd=work)
    # Through its console command: run_classifier's alone (one process shows pip's wrapper
    # starts; check_commands_resolve checked every command's entry point).
    runner = (lambda name, *args, cwd: command("bert-" + name.replace("_", "-"), *args,
                                               cwd=cwd)) if through_commands else in_process
    text = os.path.join(work, "input.txt")
    with open(text, "w", encoding="utf-8") as f:
        f.write("\n".join(SENTENCES[:3]) + "\n")
    features = os.path.join(work, "features.jsonl")
    in_process("extract_features", "--input_file=" + text, "--output_file=" + features,
           "--vocab_file=" + vocab, "--bert_config_file=" + config, "--max_seq_length=16",
           "--init_checkpoint=%s/bert_model.ckpt" % converted, "--layers=-1", cwd=work)
    with open(features, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    assert len(rows) == 3 and len(rows[0]["features"][0]["layers"][0]["values"]) == 4
    data = os.path.join(work, "sst2")
    os.makedirs(data)
    for split in ("train", "dev"):
        with open(os.path.join(data, split + ".tsv"), "w", encoding="utf-8") as f:
            f.write("sentence\tlabel\n")
            f.writelines("%s\t%d\n" % (s, i % 2) for i, s in enumerate(SENTENCES))
    out = os.path.join(work, "classifier")
    runner("run_classifier", "--task_name=sst-2", "--do_train=true", "--do_eval=true",
           "--data_dir=" + data, "--vocab_file=" + vocab, "--bert_config_file=" + config,
           "--init_checkpoint=%s/bert_model.ckpt" % converted, "--max_seq_length=16",
           "--train_batch_size=4", "--num_train_epochs=1", "--output_dir=" + out, cwd=work)
    with open(os.path.join(out, "eval_results.txt"), encoding="utf-8") as f:
        results = dict(line.strip().split(" = ") for line in f if " = " in line)
    assert results["global_step"] == "2", results
    assert 0 <= float(results["eval_accuracy"]) <= 1, results


def check_imports():
    """Every bert_tf2 module imports (bert_tf2.tf1 last); the top-level modules come from
    site-packages; bert.X is X; no user's file of USER_MODULES was imported."""
    import bert_tf2  # pylint: disable=import-outside-toplevel
    names = [info.name for info in pkgutil.walk_packages(bert_tf2.__path__, "bert_tf2.")
             if not info.name.endswith("pretraining_beam")]  # the [beam] extra, not installed
    for name in sorted(names, key=lambda n: n == "bert_tf2.tf1" or n.startswith("bert_tf2.tf1.")):
        importlib.import_module(name)
    for name in TOP_LEVEL - {"bert", "bert_tf2"}:
        module = importlib.import_module(name)
        assert "site-packages" in module.__file__, "%s from %s" % (name, module.__file__)
    for name in REFERENCE:
        assert importlib.import_module("bert." + name) is sys.modules[name], "bert." + name
    mine = [name for name in USER_MODULES if name in sys.modules]
    assert not mine, "imported the user's %s" % [sys.modules[name] for name in mine]


def check_tiny_fork(work):
    """tests/tiny_fork_classifier.py moved to bert_tf2.tf1 by the installed move_fork, run in
    this process as its command line would (tf.app.run); what it wrote to found.json."""
    from bert_tf2.compat import move_fork  # pylint: disable=import-outside-toplevel
    folder = os.path.join(work, "fork")
    os.makedirs(folder)
    script = os.path.join(folder, "tiny_fork.py")
    shutil.copyfile(TINY_FORK, script)
    assert move_fork.move_fork(folder, report=lambda line: None) == [script]
    out = os.path.join(work, "fork_out")
    argv = sys.argv
    sys.argv = [script, "--output_dir=" + out]
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        assert not e.code, "the tiny fork exited with %r" % e.code
    finally:
        sys.argv = argv
    with open(os.path.join(out, "found.json"), encoding="utf-8") as f:
        found = json.load(f)
    assert found["initialized_from_checkpoint"] and found["embeddings_trained"], found
    assert found["checkpoints"] == ["model.ckpt-10.index", "model.ckpt-12.index",
                                    "model.ckpt-5.index"], found["checkpoints"]
    assert found["before"]["global_step"] == 0 and found["after"]["global_step"] == 12
    assert found["after"]["eval_loss"] < found["before"]["eval_loss"], found
    assert len(found["probabilities"]) == 20 and found["executing_eagerly"] is False


def main():
    """Runs the checks in a temporary folder; exit status 1 if one fails."""
    args = [a for a in sys.argv[1:] if a not in ("--commands", "--fork")]
    through_commands = "--commands" in sys.argv[1:]
    fork = "--fork" in sys.argv[1:]
    shared = os.environ.get("BERT_TF2_SHARED") or args[0]
    passed, failed = 0, 0
    with tempfile.TemporaryDirectory() as work:
        os.chdir(work)
        put_user_files_first(work)
        checks = [("top-level names", check_top_level),
                  ("console commands resolve", check_commands_resolve)]
        if os.path.isdir(os.path.join(shared, "data", "tf1_checkpoints")):
            checks.append(("convert, extract_features, run_classifier "
                           + ("(its console command)" if through_commands else "(in process)"),
                           lambda: check_pipeline(work, shared, through_commands)))
        else:
            print("smoke: skipped the TF1 checkpoint run: no shared data at %s" % shared)
        checks.append(("imports, no shadowing", check_imports))
        if fork:
            import google.protobuf  # pylint: disable=import-outside-toplevel
            checks.append(("a tiny fork (TF1 graph mode, protobuf %s)"
                           % google.protobuf.__version__, lambda: check_tiny_fork(work)))
        for name, check in checks:
            start = time.time()
            try:
                check()
                passed += 1
                print("smoke: %s ok (%.0f s)" % (name, time.time() - start), flush=True)
            except Exception as e:  # pylint: disable=broad-except
                failed += 1
                print("smoke: %s FAILED: %s" % (name, e), flush=True)
    print("smoke: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
