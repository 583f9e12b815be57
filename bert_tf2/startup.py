"""Process settings made before TensorFlow starts, and a quiet start on any machine.

Besides the log level below, the CPU allocator: TF_CPU_ALLOCATOR_USE_BFC
defaults to true (see the comment at the setting); and on x86-64 TensorFlow's oneDNN
rewrite: TF_ENABLE_ONEDNN_OPTS defaults to 1 (`onednn_default`).

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
  NVIDIA driver library can be loaded (with a driver, a cuInit failure is real);
- the same level holds for the parts of TensorFlow that log through Abseil's C++
  logging, which ignores TF_CPP_MIN_LOG_LEVEL: XLA's "Compiled cluster using
  XLA!" notice and the "WARNING: All log messages before absl::InitializeLog()"
  line it brings;
- TensorFlow's Python INFO lines a user can do nothing with are dropped
  (LogNoiseFilter): SavedModel export's line listing every captured variable it
  renames (a thousand characters of internal numbers, nothing a user named) and
  the "Sharding callback duration" line of every checkpoint written.

In your own Python (loading an exported SavedModel, say), `from bert_tf2 import startup` and
`startup.quiet()` before importing tensorflow give the same quiet process:

    from bert_tf2 import startup; startup.quiet()
    import tensorflow as tf
"""
import contextlib
import ctypes
import functools
import gc
import logging
import os
import platform
import re
import sys
import tempfile
import threading

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

# TensorFlow's default CPU allocator hands every large tensor fresh pages from the
# OS, and the page faults cost as much as the arithmetic of elementwise ops (the
# optimizer update of BERT-Base takes twice as long). Its BFC allocator keeps and
# reuses freed memory. Read at the first CPU allocation, so setting it before any
# tensor exists works; TF_CPU_ALLOCATOR_USE_BFC=false keeps the default.
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")


def onednn_default(machine=None):
    """The TF_ENABLE_ONEDNN_OPTS this package starts TensorFlow with where the user set none:
    "1" on x86-64, None elsewhere (TensorFlow's own default kept).

    TensorFlow turns its oneDNN graph rewrite on by itself only on x86 CPUs with VNNI, bf16
    or AMX. Elsewhere (AVX2-only CPUs, Xeons before Cascade Lake) it stays off and every
    dense layer is an Eigen contraction: an all-MiniLM-L6-v2 call of one row takes 1.3x as
    long, one of 32 rows 1.17x (AMD EPYC Zen 3, benchmarks/README.md), for outputs within
    float32 rounding of the same (tests/test_onednn_paths.py). With it on, every x86 CPU
    runs the oneDNN kernels of its ISA, as those CPUs already do. Read once, when
    TensorFlow is imported; TF_ENABLE_ONEDNN_OPTS=0 keeps it off."""
    return "1" if is_x86_64(machine) else None


def is_x86_64(machine=None):
    """Whether `machine` (platform.machine() by default) names an x86-64 CPU."""
    return (machine or platform.machine()).lower() in ("x86_64", "amd64")


if onednn_default():
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")


# The signals that asked this process to stop, in order (cli.run_cli's handler notes each
# before it raises). A library may lose the handler's exception (TensorFlow's C++ code
# calling back into Python, e.g. the LiteRT converter: "SystemError" printed, the work
# carried on), so a writer checks this before it makes its output look complete.
STOP_SIGNALS = []


def check_not_stopped():
    """KeyboardInterrupt when a stop signal (SIGTERM, Ctrl-C) has arrived in this run,
    even one whose exception a library swallowed; run_cli turns it into its stop line
    and exit code."""
    if STOP_SIGNALS:
        raise KeyboardInterrupt()


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


def quiet():
    """Makes this process as quiet as our scripts: call it before importing tensorflow.

    Importing this module sets TF_CPP_MIN_LOG_LEVEL=1 unless it is set (C++ INFO
    lines hidden, warnings and errors kept); quiet() then imports TensorFlow,
    lists its devices without the no-GPU cuInit error line, applies the same log
    level to the C++ code that logs through Abseil (XLA), and drops TensorFlow's
    INFO lines about renamed captured variables and checkpoint sharding times.
    Real warnings and errors still show.
    """
    initialize_devices()


# Abseil's C++ logging (used by XLA) has its own threshold, which TensorFlow does not
# set from TF_CPP_MIN_LOG_LEVEL; TensorFlow 2.20's library exports the setter.
_ABSL_SET_MIN_LOG_LEVEL = "_ZN4absl12lts_2025012714SetMinLogLevelENS0_18LogSeverityAtLeastE"


def _apply_level_to_absl_logging(tf):
    """Gives Abseil's C++ logging TF_CPP_MIN_LOG_LEVEL's threshold (same numbering)."""
    try:
        level = int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0"))
        library = ctypes.CDLL(os.path.join(tf.sysconfig.get_lib(), "libtensorflow_framework.so.2"))
        setter = getattr(library, _ABSL_SET_MIN_LOG_LEVEL)
    except (OSError, AttributeError, ValueError):  # another TF build: its own default
        return
    setter(ctypes.c_int(max(0, min(level, 3))))


# TensorFlow's Python INFO lines that say nothing a user can act on. They log through
# absl's logger ("absl"), some through TensorFlow's ("tensorflow"): the filter sits on both.
# functional_saver: one line per checkpoint written ("Sharding callback duration: 72
# microseconds"); SavedModel's saver: two lines naming the temporary folder an export is
# written to (our own line names the folder it becomes), the first printed twice.
_NOISE_PREFIXES = ("Sharding callback duration", "Assets written to", "Writing fingerprint to")
# The names TensorFlow gives the inputs of a traced function: numbers, and Keras's input_N.
_AUTOMATIC_NAME = re.compile(r"^(\d+|input(_\d+)?)$")


class LogNoiseFilter(logging.Filter):
    """Drops TensorFlow's INFO lines that say nothing a user named or can act on.

    - "Sharding callback duration: N microseconds", written with every checkpoint;
    - SavedModel's "Assets written to" and "Writing fingerprint to" (temporary paths);
    - SavedModel's line about renaming the captured inputs of a function, when every
      name it lists is one TensorFlow made up (a number, Keras's input_N): the
      variables a serving function captures, a thousand characters and more per
      signature; the signature inputs users call by name are not among them.
    """

    def filter(self, record):
        """False (drop) for those lines; True (keep) for every other record."""
        if record.levelno > logging.INFO:
            return True
        message = str(record.msg)
        if message.startswith(_NOISE_PREFIXES):
            return False
        if "contains input name(s)" not in message or len(record.args or ()) < 2:
            return True
        names = str(record.args[1]).split(", ")
        return not all(_AUTOMATIC_NAME.match(name) for name in names)


def filter_log_noise():
    """Puts LogNoiseFilter on the loggers TensorFlow's Python code writes to (once)."""
    for name in ("absl", "tensorflow"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, LogNoiseFilter) for f in logger.filters):
            logger.addFilter(LogNoiseFilter())


class SingleLineFilter(logging.Filter):
    """On the stderr handler TensorFlow gives its logger: drops a record that the root
    logger's handlers print as well.

    TensorFlow adds that handler when the root logger has none at its import, and
    none otherwise ("this prevents double logging"). A handler the root logger gets
    later (Abseil's: absl.logging calls logging.basicConfig() at its first record
    outside absl.app, and absl.app installs its own) would print every TensorFlow
    warning a second time: this filter applies TensorFlow's rule when the record is
    written instead of at import.
    """

    def filter(self, record):
        """False (drop) when a root handler will print the record too."""
        logger = logging.getLogger("tensorflow")
        if not logger.propagate:
            return True
        return not any(record.levelno >= handler.level for handler in logging.getLogger().handlers)


def single_log_lines():
    """Puts SingleLineFilter on the handlers of TensorFlow's logger (once)."""
    for handler in logging.getLogger("tensorflow").handlers:
        if not any(isinstance(f, SingleLineFilter) for f in handler.filters):
            handler.addFilter(SingleLineFilter())


_DEVICES_LISTED = []  # [True] once initialize_devices has listed them in this process


def initialize_devices():
    """Lists TensorFlow's devices once, dropping the no-driver cuInit line from stderr."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    _apply_level_to_absl_logging(tf)
    filter_log_noise()
    single_log_lines()
    if _DEVICES_LISTED:
        return
    _DEVICES_LISTED.append(True)
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


def release_run_memory():
    """Gives back the memory of a run that has returned: its model, optimizer, traced
    graphs and datasets (reference cycles, freed by a full garbage collection now rather
    than at some later one), then glibc's free memory to the system (malloc_trim; a
    no-op elsewhere). Nothing a later run computes depends on it. The objects older than
    the outermost run are frozen meanwhile (keeps_process_settings), so the collection
    walks the run's objects only, not the whole heap of a long-lived process (0.5-2 s
    in a test session or a notebook)."""
    gc.collect()
    try:
        libc = ctypes.CDLL(None)
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc
        return
    trim(ctypes.c_size_t(0))


# The run() calls in progress in this process, outermost first: [(thread, face)].
_RUNS = []
_RUNS_LOCK = threading.Lock()


def keeps_process_settings(run):
    """Decorator for every face's run(), the one place each run passes.

    - One run at a time per process: a run() called from another thread while one is in
      progress is refused at once (RuntimeError, one line): runs share TensorFlow's
      process-wide precision policy and the per-process output-folder locks. The same
      thread may nest runs.
    - On return or error, the tf_keras mixed-precision policy and the TensorFloat-32
      setting are what they were before (training.configure_precision and
      extract_features change them), and the output folders the run locked
      (fileutil.lock_output_dir) are free again, so runs called from Python one after
      another leave the process as they found it; the run's memory is released
      (release_run_memory). Before the first run, the quiet start-up of the command line
      (initialize_devices: no cuInit line, each log line once).
    - In a process in TF1 graph mode (a fork's `import bert_tf2.tf1`) the run is refused
      in one line before it touches anything.
    - Called with a Settings (from Python, not the command line's FlagValues), a
      ValueError or absl UsageError it raises names the settings' fields as Python
      does (`max_seq_length=64`, `do_train=True`), not as flags (`--max_seq_length=64`,
      `--do_train`): settings.respell_error; type and traceback stay.
    """
    @functools.wraps(run)
    def wrapper(*args, **kwargs):
        from absl import app  # pylint: disable=import-outside-toplevel
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        from bert_tf2 import fileutil  # pylint: disable=import-outside-toplevel
        if not tf.compat.v1.executing_eagerly_outside_functions():
            raise RuntimeError(
                "%s.%s: this process runs TensorFlow 1 graph mode (bert_tf2.tf1 was imported, "
                "or tf.compat.v1.disable_v2_behavior / disable_eager_execution called), and "
                "bert-tf2's runners need TensorFlow 2's eager mode: run them in a process of "
                "their own (python %s.py ...); nothing was done"
                % (_face_name(run), run.__name__, _face_name(run).rsplit(".", 1)[-1]))
        from bert_tf2 import settings as settings_lib  # pylint: disable=import-outside-toplevel
        # The objects of before the outermost run are out of the collector's sight until
        # it returns (release_run_memory walks the run's only); left as they are when the
        # caller (or create_pretraining_data's main) froze objects itself.
        thaw = _enter(run) and not gc.get_freeze_count()
        if thaw:
            gc.freeze()
        try:
            settings = args[0] if args else kwargs.get("settings")
            # tf_keras is imported by the runs that use it: one not imported yet has
            # its default policy, which None restores.
            keras = sys.modules.get("tf_keras")
            policy = keras.mixed_precision.global_policy() if keras else None
            tf32 = tf.config.experimental.tensor_float_32_execution_enabled()
            locks = fileutil.held_output_locks()
            try:
                initialize_devices()
                return run(*args, **kwargs)
            except (ValueError, app.UsageError) as error:
                if isinstance(settings, settings_lib.Settings):
                    settings_lib.respell_error(error, settings)
                raise
            finally:
                fileutil.release_output_locks(keep=locks)
                keras = sys.modules.get("tf_keras")
                if keras is not None:
                    keras.mixed_precision.set_global_policy(policy)
                tf.config.experimental.enable_tensor_float_32_execution(tf32)
                release_run_memory()
        finally:
            if thaw:
                gc.unfreeze()  # back into the oldest generation, collected as before
            _leave()
    return wrapper


def _face_name(run):
    """The module name of the face whose run() this is (its script's name under __main__)."""
    face = run.__module__
    if face == "__main__":
        face = os.path.splitext(os.path.basename(sys.argv[0] or "__main__"))[0]
    return face


def _enter(run):
    """Records a run() starting in this thread; RuntimeError if another thread's is on.
    True for the outermost run of the thread (no run in progress before it)."""
    face = _face_name(run)
    with _RUNS_LOCK:
        if _RUNS and _RUNS[0][0] is not threading.current_thread():
            thread, other = _RUNS[0]
            raise RuntimeError(
                "another run() is in progress in this process (thread %r, %s): runs share "
                "TensorFlow's process-wide precision policy; run them one after another, "
                "or in separate processes" % (thread.name, other))
        _RUNS.append((threading.current_thread(), face))
        return len(_RUNS) == 1


def _leave():
    with _RUNS_LOCK:
        _RUNS.pop()


@contextlib.contextmanager
def main_script_not_rerun(functions):
    """While worker processes start (multiprocessing's 'spawn' or 'forkserver'): they do
    not run the parent's main script again.

    A spawned (or fork-server) process imports the parent's __main__ first, so that
    functions defined there can be unpickled; the scripts import TensorFlow at their
    top (seconds of CPU per worker), and a user's script without an `if __name__ ==
    "__main__"` guard would run its work again. The workers' functions live in package modules,
    so multiprocessing is not shown where __main__ comes from meanwhile (nothing else
    reads it); when one of `functions` is defined in __main__, nothing changes.
    """
    main = sys.modules.get("__main__")
    if main is None or any(getattr(f, "__module__", None) == "__main__" for f in functions):
        yield
        return
    saved = {name: main.__dict__[name] for name in ("__file__", "__spec__")
             if name in main.__dict__}
    main.__dict__.pop("__file__", None)
    main.__dict__["__spec__"] = None
    try:
        yield
    finally:
        main.__dict__.pop("__spec__", None)
        main.__dict__.update(saved)
