"""Process settings made before TensorFlow starts, and a quiet start on any machine.

Besides the log level below, the CPU allocator: TF_CPU_ALLOCATOR_USE_BFC
defaults to true (see the comment at the setting).

TensorFlow's C++ side prints several lines on every start: INFO notices (oneDNN,
CPU instruction sets, "Could not find cuda drivers") when it is imported, and,
on a machine with no NVIDIA driver, an ERROR-level "failed call to cuInit ...
(303)" line when the devices are first listed, which reads like a failure but
only says there is no GPU. Entry points import this module before tensorflow
and call `initialize_devices()` before their run:

- TF_CPP_MIN_LOG_LEVEL defaults to 1 (C++ INFO lines hidden, warnings and
  errors shown); a value the user set always wins;
- the devices are listed once with the C++ stderr captured, and everything
  captured is printed again except the cuInit failure, and that only when no
  NVIDIA driver library can be loaded (with a driver, a cuInit failure is real).
"""
import ctypes
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

# TensorFlow's default CPU allocator hands every large tensor fresh pages from the
# OS, and the page faults cost as much as the arithmetic of elementwise ops (the
# optimizer update of BERT-Base takes twice as long). Its BFC allocator keeps and
# reuses freed memory. Read at the first CPU allocation, so setting it before any
# tensor exists works; TF_CPU_ALLOCATOR_USE_BFC=false keeps the default.
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")


def _has_nvidia_driver():
    """True when the CUDA driver library can be loaded (a GPU driver is installed)."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def is_startup_noise(line, has_driver):
    """Whether a captured C++ log line is the harmless no-GPU cuInit failure."""
    return not has_driver and "failed call to cuInit" in line


def initialize_devices():
    """Lists TensorFlow's devices once, dropping the no-driver cuInit line from stderr."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    try:
        stderr_fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # no real stderr (embedded, captured)
        tf.config.list_physical_devices()
        return
    sys.stderr.flush()
    saved = os.dup(stderr_fd)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), stderr_fd)
        try:
            tf.config.list_physical_devices()
        finally:
            os.dup2(saved, stderr_fd)
            os.close(saved)
        captured.seek(0)
        text = captured.read().decode("utf-8", "replace")
    has_driver = _has_nvidia_driver()
    kept = [line for line in text.splitlines(True) if not is_startup_noise(line, has_driver)]
    if kept:
        sys.stderr.write("".join(kept))
        sys.stderr.flush()
