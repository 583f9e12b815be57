"""demo/notebook.ipynb runs top to bottom: its code cells, in order, as one script.

(nbclient and ipykernel are not in the [test] extra: the cells are plain Python, run in a
subprocess the way a kernel runs them, from a fresh folder, with stderr off a terminal.)
"""
import json
import os
import subprocess
import sys

from conftest import REPO_ROOT
from conftest import HANG_GUARD_SECONDS

NOTEBOOK = REPO_ROOT / "demo" / "notebook.ipynb"


def code_cells(path):
    """The sources of the notebook's code cells, in order; checks it is saved clean."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    assert notebook["nbformat"] == 4
    cells = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    for cell in cells:  # saved without outputs: what a new user runs is what the test runs
        assert cell["outputs"] == [] and cell["execution_count"] is None
    return ["".join(cell["source"]) for cell in cells]


def test_the_notebook_trains_evaluates_and_predicts(tmp_path):
    script = tmp_path / "notebook.py"
    script.write_text("\n\n".join(code_cells(NOTEBOOK)) + "\n", encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run([sys.executable, str(script)], cwd=str(tmp_path), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=HANG_GUARD_SECONDS, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout.splitlines()
    # The evaluation's values, then one line per test row: label, text, probability.
    metrics = dict(line.split(None, 1) for line in out if line.startswith(("eval_", "global")))
    assert metrics["global_step"] == "32"  # 64 examples / batch 8 x 4 epochs
    assert 0.0 <= float(metrics["eval_accuracy"]) <= 1.0
    predictions = out[out.index("") + 1:] if "" in out else []
    predictions = [line for line in predictions if line.startswith(("positive", "negative"))]
    assert len(predictions) == 6
    written = (tmp_path / "notebook_work" / "model" / "test_predictions.jsonl").read_text()
    labels = [json.loads(line)["label"] for line in written.splitlines()]
    assert [line.split()[0] for line in predictions] == labels
    # The progress display off a terminal: each stage's last line (and one per 30 s at most),
    # no dump of examples (a Python run logs warnings only).
    shown = [line for line in done.stderr.splitlines()
             if line.split("  ")[0] in ("train", "eval", "predict")]
    # run_classifier.predict's two texts show none (a Predictor's calls: no display unless
    # asked), so the run's do_predict is the last.
    assert shown[-3].startswith("train  step 32/32  loss "), done.stderr
    assert shown[-2].startswith("eval  batch 2/2  ") and shown[-1].startswith("predict  batch 1/1")
    assert len(shown) <= 8 and "*** Example ***" not in done.stderr
    # Result.to_dict(): plain data; predict() from memory: one line per new text.
    assert "steps_trained 32 global_step 32" in out
    assert json.loads(next(line for line in out if line.startswith("{")))[
        "global_step"] == 32
    new = [line.split() for line in out if line.startswith("new: ")]
    assert len(new) == 2 and all(w[1] in ("positive", "negative") and float(w[-1]) >= 0.5
                                 for w in new)
