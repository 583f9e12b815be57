"""Smoke check of an installed bert-tf2 (run by tests/smoke/run.sh, once per Python version).

Run from an empty folder with the venv's python: it checks what a non-editable install put at
the top level of site-packages, imports every module, checks `from bert import X` is the
top-level module, that a user's own training.py in the working folder changes nothing, then
(with ../shared) converts the reference's tiny TF1 checkpoint, runs extract_features on it and
a few run_classifier training steps from it through the installed commands. Ends with the plain
line 'smoke: N passed, N failed'.
"""
import importlib
import importlib.metadata
import json
import os
import pkgutil
import subprocess
import sys
import tempfile

REFERENCE = ["modeling", "tokenization", "optimization", "create_pretraining_data",
             "run_pretraining", "run_classifier", "run_squad", "extract_features"]
TOP_LEVEL = set(REFERENCE) | {"run_ner", "run_multiple_choice", "convert_tf1_checkpoint",
                              "convert_hf_checkpoint", "convert_keras_hub", "export_saved_model",
                              "create_vocab", "bert", "bert_tf2"}
SENTENCES = ["all work and no play", "makes jack a dull boy", "jack and no play",
             "a dull boy makes work", "no work", "all play makes jack", "a boy and jack",
             "dull work and play"]


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


def check_imports():
    """Every bert_tf2 module imports; the others come from site-packages; bert.X is X."""
    import bert_tf2  # pylint: disable=import-outside-toplevel
    for info in pkgutil.walk_packages(bert_tf2.__path__, "bert_tf2."):
        if info.name.endswith("pretraining_beam"):
            continue  # the [beam] extra, not installed here
        importlib.import_module(info.name)
    for name in TOP_LEVEL - {"bert", "bert_tf2"}:
        module = importlib.import_module(name)
        assert "site-packages" in module.__file__, "%s from %s" % (name, module.__file__)
    for name in REFERENCE:
        assert importlib.import_module("bert." + name) is sys.modules[name], "bert." + name


def check_user_file_does_not_shadow(work):
    """A user's training.py in the working folder is not imported by our runners."""
    with open(os.path.join(work, "training.py"), "w", encoding="utf-8") as f:
        f.write("raise SystemExit('the user training.py was imported')\n")
    # '' (the working folder) comes first on sys.path, as for a user's script there.
    subprocess.run([sys.executable, "-c", "import run_classifier"], cwd=work, check=True,
                   timeout=300)
    os.remove(os.path.join(work, "training.py"))


def command(name, *args, cwd):
    """Runs an installed console command in `cwd`; fails with its stderr."""
    bindir = os.path.dirname(sys.executable)
    out = subprocess.run([os.path.join(bindir, name)] + list(args), cwd=cwd, text=True,
                         capture_output=True, timeout=600)
    assert out.returncode == 0, "%s failed:\n%s" % (name, out.stderr[-3000:])
    return out


def check_pipeline(work, shared):
    """Converts a TF1 checkpoint, extracts features and fine-tunes through the console commands."""
    tiny = os.path.join(shared, "data", "tf1_checkpoints", "kerasbert_tiny")
    config, vocab = os.path.join(tiny, "bert_config.json"), os.path.join(tiny, "vocab.txt")
    converted = os.path.join(work, "converted")
    command("bert-convert-tf1-checkpoint", "--input_checkpoint=%s/bert_model.ckpt" % tiny,
            "--bert_config_file=" + config, "--output_dir=" + converted, cwd=work)
    text = os.path.join(work, "input.txt")
    with open(text, "w", encoding="utf-8") as f:
        f.write("\n".join(SENTENCES[:3]) + "\n")
    features = os.path.join(work, "features.jsonl")
    command("bert-extract-features", "--input_file=" + text, "--output_file=" + features,
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
    command("bert-run-classifier", "--task_name=sst-2", "--do_train=true", "--do_eval=true",
            "--data_dir=" + data, "--vocab_file=" + vocab, "--bert_config_file=" + config,
            "--init_checkpoint=%s/bert_model.ckpt" % tiny, "--max_seq_length=16",
            "--train_batch_size=4", "--num_train_epochs=2", "--output_dir=" + out, cwd=work)
    with open(os.path.join(out, "eval_results.txt"), encoding="utf-8") as f:
        results = dict(line.strip().split(" = ") for line in f if " = " in line)
    assert results["global_step"] == "4", results


def main():
    """Runs the checks in a temporary folder; exit status 1 if one fails."""
    shared = os.environ.get("BERT_TF2_SHARED") or sys.argv[1]
    passed, failed = 0, 0
    with tempfile.TemporaryDirectory() as work:
        os.chdir(work)
        checks = [("top-level names", check_top_level), ("imports", check_imports),
                  ("no shadowing", lambda: check_user_file_does_not_shadow(work))]
        if os.path.isdir(os.path.join(shared, "data", "tf1_checkpoints")):
            checks.append(("convert, extract_features, run_classifier",
                           lambda: check_pipeline(work, shared)))
        else:
            print("smoke: skipped the TF1 checkpoint run: no shared data at %s" % shared)
        for name, check in checks:
            try:
                check()
                passed += 1
                print("smoke: %s ok" % name)
            except Exception as e:  # pylint: disable=broad-except
                failed += 1
                print("smoke: %s FAILED: %s" % (name, e))
    print("smoke: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
