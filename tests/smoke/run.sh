#!/usr/bin/env bash
# Smoke run of a non-editable install on every Python from 3.10 to 3.13 found on this machine
# but the one that runs the full suite ($1, e.g. 3.11): a venv per version (kept under
# $BERT_TF2_SMOKE_CACHE, default ~/.cache/bert-tf2-smoke, and made anew when setup.py changes),
# the project installed into it as a user would (`pip install .`; with --no-compile, the
# check byte-compiling only what it imports), then tests/smoke/check.py.
# A version that is not on the machine is skipped with a line saying so.
#
# What each Python checks, and why. pytest has already run every test on this code (on the
# suite's Python, editable install); what only a plain install on another Python can show is
# its layout, its imports on that Python, its console commands, and that training runs on the
# dependencies pip resolved for that Python. So, in one process per Python (TensorFlow's import
# paid once):
#   every Python: site-packages' top-level names; every console command's entry point resolves
#     to the installed code; a TF1 checkpoint converted, extract_features and two training steps
#     plus an evaluation of run_classifier from it, in process; every module imports (TF1 graph
#     mode last), none of them a user's training.py first on sys.path.
#   the last Python (3.13 beside a 3.11 suite): run_classifier through its installed console
#     command instead (check.py --commands: one process), which shows a command starts; every
#     command is pip's wrapper of an entry point, all of them resolved above, on every Python.
#   the first Python (3.10): also, last in the same process (check.py --fork), a tiny fork
#     (tests/tiny_fork_classifier.py moved by the installed bert_tf2.compat.move_fork: its
#     Estimator trains, evaluates and predicts in TF1 graph mode) on the protobuf and TF a plain
#     `pip install .` resolves; BERT_TF2_SMOKE_FORK=0 leaves it out. The fork and tf1 tests
#     (test_reference_fork.py, test_tf1_estimator.py, test_tf1_namespace.py) run in pytest only:
#     the code is the same, and the tiny fork already runs the tf1 namespace in graph mode on
#     the plain install's packages.
set -euo pipefail
cd "$(dirname "$0")/../.."
skip_version=${1:-}
cache=${BERT_TF2_SMOKE_CACHE:-$HOME/.cache/bert-tf2-smoke}
shared=${BERT_TF2_SHARED:-$(cd .. && pwd)/shared}
key=$(sha256sum setup.py | cut -c1-12)
status=0
fork_tests=${BERT_TF2_SMOKE_FORK:-1}
versions=() pythons=()
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
  versions+=("$version") pythons+=("$python")
done
for i in "${!versions[@]}"; do
  version=${versions[$i]} python=${pythons[$i]}
  how=
  [ "$i" = $(( ${#versions[@]} - 1 )) ] && how=--commands
  fork=
  [ "$i" = 0 ] && [ "$fork_tests" != 0 ] && fork=--fork
  start=$(date +%s)
  venv="$cache/py$version-$key"
  log="$cache/install-$version.log"
  mkdir -p "$cache"
  if [ ! -f "$venv/.complete" ]; then
    # Marked complete only once everything is installed (a venv cannot be renamed: its
    # scripts name its python by path).
    rm -rf "$cache"/py"$version"-*
    "$python" -m venv "$venv"
    # --no-compile: pip would byte-compile every module of every package (TensorFlow's
    # thousands: about 55 s of CPU per Python); the check below compiles only what it
    # imports, once, into the venv's own .pycache.
    if ! { "$venv/bin/python" -m pip install -q --upgrade pip &&
           "$venv/bin/python" -m pip install -q --no-compile .; } >"$log" 2>&1; then
      echo "smoke $version: FAILED to install (pip's output: $log)"; status=1; continue
    fi
    touch "$venv/.complete"
  elif ! "$venv/bin/python" -m pip install -q --no-deps --force-reinstall --no-compile . \
         >"$log" 2>&1; then
    echo "smoke $version: FAILED to install (pip's output: $log)"; status=1; continue
  fi
  rm -rf build ./*.egg-info
  # Bytecode of what the check imports is written under the venv (PYTHONPYCACHEPREFIX),
  # never beside a source: the next run of this venv, and the check's own child process,
  # read it instead of compiling TensorFlow again (even where PYTHONDONTWRITEBYTECODE is set).
  if env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX="$venv/.pycache" TF_CPP_MIN_LOG_LEVEL=2 \
       PYTHONWARNINGS=ignore::FutureWarning \
       "$venv/bin/python" tests/smoke/check.py "$shared" $how $fork >"$cache/check-$version.log" 2>&1
  then
    echo "smoke $version${how:+ ($how)}: passed in $(( $(date +%s) - start )) s ($(grep -o \
      '^smoke: .* ok ([0-9]* s)' "$cache/check-$version.log" | sed 's/^smoke: //; s/ ok (/ (/' |
      paste -sd ';' | sed 's/;/; /g'))"
  else
    echo "smoke $version${how:+ ($how)}: FAILED (its output: $cache/check-$version.log)"
    grep '^smoke: ' "$cache/check-$version.log" || tail -n 20 "$cache/check-$version.log"
    status=1
  fi
done
exit $status
