#!/usr/bin/env bash
# Smoke run of a non-editable install on every Python from 3.10 to 3.13 found on this machine
# but the one that runs the full suite ($1, e.g. 3.11): a venv per version (kept under
# $BERT_TF2_SMOKE_CACHE, default ~/.cache/bert-tf2-smoke, and made anew when setup.py changes),
# the project installed into it as a user would (`pip install .`), then tests/smoke/check.py.
# A version that is not on the machine is skipped with a line saying so.
# In the first of those venvs, a tiny fork (tests/tiny_fork_classifier.py moved to
# bert_tf2.tf1: its Estimator trains, evaluates and predicts) and the tf1 namespace's import
# also run, on the dependencies a plain `pip install .` resolves (protobuf among them) and
# pytest installed beside them; BERT_TF2_SMOKE_FORK=0 leaves them out. The rest of the fork
# tests (tests/test_reference_fork.py, test_tf1_estimator.py, test_tf1_namespace.py) run in
# pytest on the same code: the smoke run adds only the other Python and the plain install.
set -euo pipefail
cd "$(dirname "$0")/../.."
skip_version=${1:-}
cache=${BERT_TF2_SMOKE_CACHE:-$HOME/.cache/bert-tf2-smoke}
shared=${BERT_TF2_SHARED:-$(cd .. && pwd)/shared}
key=$(sha256sum setup.py | cut -c1-12)
status=0
fork_tests=${BERT_TF2_SMOKE_FORK:-1}
for version in 3.10 3.11 3.12 3.13; do
  [ "$version" = "$skip_version" ] && continue
  # pyenv's own folders first: its shims answer `command -v` for versions it has not selected.
  python=
  for candidate in $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$version".*/bin/"python$version" \
                       2>/dev/null) $(command -v "python$version" 2>/dev/null); do
    if "$candidate" -c 'import venv' >/dev/null 2>&1; then python=$candidate; break; fi
  done
  if [ -z "$python" ]; then
    echo "smoke $version: skipped, no python$version on this machine"
    continue
  fi
  start=$(date +%s)
  venv="$cache/py$version-$key"
  log="$cache/install-$version.log"
  mkdir -p "$cache"
  if [ ! -f "$venv/.complete" ]; then
    # Marked complete only once everything is installed (a venv cannot be renamed: its
    # scripts name its python by path).
    rm -rf "$cache"/py"$version"-*
    "$python" -m venv "$venv"
    if ! { "$venv/bin/python" -m pip install -q --upgrade pip &&
           "$venv/bin/python" -m pip install -q . &&
           "$venv/bin/python" -m pip install -q pytest; } >"$log" 2>&1; then
      echo "smoke $version: FAILED to install (pip's output: $log)"; status=1; continue
    fi
    touch "$venv/.complete"
  elif ! "$venv/bin/python" -m pip install -q --no-deps --force-reinstall . >"$log" 2>&1; then
    echo "smoke $version: FAILED to install (pip's output: $log)"; status=1; continue
  fi
  rm -rf build ./*.egg-info
  if TF_CPP_MIN_LOG_LEVEL=2 PYTHONWARNINGS=ignore::FutureWarning \
       "$venv/bin/python" tests/smoke/check.py "$shared"; then
    echo "smoke $version: passed in $(( $(date +%s) - start )) s"
  else
    echo "smoke $version: FAILED"
    status=1
  fi
  if [ "$fork_tests" != 0 ]; then
    fork_tests=0
    start=$(date +%s)
    # (A venv made before this step existed lacks pytest.)
    "$venv/bin/python" -c 'import pytest' 2>/dev/null ||
      "$venv/bin/python" -m pip install -q pytest >>"$log" 2>&1
    protobuf=$("$venv/bin/python" -c 'import google.protobuf as p; print(p.__version__)')
    # From the repository (its tests and bert_tf2 first on the path), on the venv's packages.
    if BERT_TF2_SHARED="$shared" TF_CPP_MIN_LOG_LEVEL=2 "$venv/bin/python" -m pytest -q \
         -p no:cacheprovider \
         tests/test_reference_fork.py::test_a_tiny_fork_trains_evaluates_and_predicts \
         tests/test_tf1_namespace.py::test_the_import_runs_graph_mode_and_says_so_once \
         >"$cache/fork-tests-$version.log" 2>&1; then
      echo "smoke $version: a tiny fork on a plain install (protobuf $protobuf): $(tail -n 1 \
        "$cache/fork-tests-$version.log") ($(( $(date +%s) - start )) s)"
    else
      echo "smoke $version: the tiny fork FAILED on a plain install (protobuf $protobuf; pytest's" \
        "output: $cache/fork-tests-$version.log)"
      status=1
    fi
  fi
done
exit $status
