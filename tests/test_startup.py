"""startup.py: entry points start without TensorFlow's C++ noise, real errors still show."""
import os
import re
import subprocess
import sys

import startup
from conftest import REPO_ROOT


def _run_script(args, env_extra=None):
    env = dict(os.environ)
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, str(REPO_ROOT / "convert_tf1_checkpoint.py")] + args,
                          capture_output=True, text=True, env=env, timeout=300, check=False)


def test_cuinit_line_is_noise_only_without_a_driver():
    line = ("2026-11-22 09:16:01.232746: E external/local_xla/xla/stream_executor/cuda/"
            "cuda_platform.cc:51] failed call to cuInit: INTERNAL: CUDA error: Failed call to "
            "cuInit: UNKNOWN ERROR (303)\n")
    assert startup.is_startup_noise(line, has_driver=False)
    assert not startup.is_startup_noise(line, has_driver=True)
    assert not startup.is_startup_noise("E some/real_error.cc:1] out of memory\n", False)


def test_a_runner_starts_quietly_and_ends_with_one_error_line(tmp_path):
    result = _run_script(["--input_checkpoint=%s" % (tmp_path / "none"),
                          "--output_dir=%s" % (tmp_path / "out")])
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    # Nothing but our one line: no C++ INFO notices, no cuInit error, no log record.
    assert lines == ["error: checkpoint %s not found (expected %s.index)"
                     % (tmp_path / "none", tmp_path / "none")], result.stderr


def test_the_users_log_level_wins(tmp_path):
    result = _run_script(["--input_checkpoint=%s" % (tmp_path / "none"),
                          "--output_dir=%s" % (tmp_path / "out")],
                         {"TF_CPP_MIN_LOG_LEVEL": "0"})
    assert result.returncode == 1
    # TensorFlow's own INFO start-up lines are back when the user asks for them.
    assert re.search(r": I \S+\.cc:\d+\]", result.stderr), result.stderr
