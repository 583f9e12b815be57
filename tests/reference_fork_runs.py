"""The reference's scripts, moved to bert_tf2.tf1, run one after another in this one process.

Run by tests/test_reference_fork.py in a subprocess (bert_tf2.tf1 puts its process in TF1
graph mode; one process pays TensorFlow's import once for every run):
`python reference_fork_runs.py FORK_DIR PLAN.json`. PLAN.json is a list of runs, each
{"name", "argv" (the script first, then its flags), "cwd"}; each is run as
`python SCRIPT FLAGS...` would run it: as __main__, with sys.argv, FORK_DIR first on
sys.path, in the folder `cwd` (made if missing; TMPDIR and tempfile's folder too), its
stderr (file descriptor 2: Python's, absl's and TensorFlow's C++ lines) written to
CWD/stderr.txt. The flags a run defines are removed after it, so that the next script
defines its own (absl's FLAGS is one per process), and absl's app.run is let parse again. Exits 1 at the first run that fails
(exit code, or an exception), after naming it on stderr.
"""
import json
import os
import runpy
import sys
import tempfile
import traceback
os.environ.pop("TF_USE_LEGACY_KERAS", None)  # as a user runs it: see tests/conftest.py

from absl import app
from absl import flags


def run_one(argv, cwd):
    """Runs one script as __main__ in `cwd`, its stderr in CWD/stderr.txt; its exit code."""
    os.makedirs(cwd, exist_ok=True)
    os.chdir(cwd)
    os.environ["TMPDIR"] = cwd
    tempfile.tempdir = cwd
    known = set(flags.FLAGS)
    sys.stdout.flush()
    sys.stderr.flush()
    terminal = os.dup(2)
    with open(os.path.join(cwd, "stderr.txt"), "w", encoding="utf-8") as log:
        os.dup2(log.fileno(), 2)
    sys.argv = list(argv)
    # absl's app.run parses the flags once a process and refuses a second time (its own
    # guard, a function attribute): each script here is a process's first.
    app._register_and_parse_flags_with_usage.done = False  # pylint: disable=protected-access
    code = 0
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except Exception:  # pylint: disable=broad-except
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(terminal, 2)
        os.close(terminal)
        for name in set(flags.FLAGS) - known:
            delattr(flags.FLAGS, name)
    return code


def main():
    fork_dir, plan = sys.argv[1:3]
    sys.path.insert(0, fork_dir)  # as the folder of `python FORK_DIR/SCRIPT` is
    with open(plan, encoding="utf-8") as f:
        runs = json.load(f)
    for run in runs:
        code = run_one(run["argv"], run["cwd"])
        if code:
            print("%s exited with %s; its stderr: %s" % (
                run["name"], code, os.path.join(run["cwd"], "stderr.txt")), file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
