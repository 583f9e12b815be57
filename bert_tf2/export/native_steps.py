"""The export's steps that call a library able to end the process, and the child process they
run in: a crash there becomes one line, and leaves nothing behind.

TFLite's converter, its int8 calibration and quantizer, its quantization debugger and the
LiteRT interpreter (--litert), OpenVINO's conversion, NNCF and OpenVINO's CPU plugin
(--openvino), tf2onnx, ONNX Runtime and its quantizer (--onnx) are C++; a fault in them (a segfault, glibc's abort on a corrupted heap:
"corrupted double-linked list", exit 134) ends the process with no Python error, so no
clean-up runs and the export's temporary folder stays. Each such call runs inside
step(name, variant), a name of STEPS; the work that holds them goes through run_isolated(),
which runs it in a child process started with 'spawn' (a fresh interpreter: TensorFlow
does not survive a fork) and gets its result back through a file. The child notes each
step as it enters it, so when the child dies by a signal the parent raises one line naming
that step and variant (NativeStepCrash); the export then fails as after any other error:
its temporary folder removed, an earlier export as it was, nothing under the usual name.
A Python error in the child is raised again in the parent, the same type and message.

The cost: the child imports TensorFlow and loads what it converts (a few seconds, once per
export; docs/litert.md).
"""
import contextlib
import multiprocessing
import os
import pickle
import signal
import tempfile

from bert_tf2 import fileutil
from bert_tf2 import startup

# Every step that calls native code able to end the process, by the export flag whose
# conversion makes it: name -> what it runs (names unique across flags).
STEPS_BY_FLAG = {
    "--litert": {
        "convert": "TFLite's converter",
        "calibrate": "TFLite's int8 calibration (the converter running the float model)",
        "quantize": "TFLite's int8 quantizer",
        "sensitivity": "the int8 layers' sensitivity (TFLite's quantization debugger)",
        "evaluate": "the agreement report (LiteRT's interpreter)",
    },
    "--openvino": {
        "ov_convert": "OpenVINO's model conversion",
        "ov_quantize": "NNCF's int8 quantization (OpenVINO running the float model)",
        "ov_evaluate": "the agreement report (OpenVINO's CPU plugin)",
    },
    "--onnx": {
        "onnx_convert": "tf2onnx's conversion",
        "onnx_quantize": "ONNX Runtime's int8 quantizer",
        "onnx_evaluate": "ONNX Runtime running the model (the conversion's check, the report)",
    },
}
STEPS = {name: what for table in STEPS_BY_FLAG.values() for name, what in table.items()}

# Tests only: run_isolated runs the work in this process (so that their monkeypatches
# reach it); the steps are still noted.
IN_PROCESS = False

_CURRENT = []  # the (name, variant) of the steps under way, innermost last
_PROGRESS = []  # in a child: the file each step's name is written to as it starts


class NativeStepCrash(RuntimeError):
    """The child process running native steps ended without a result (killed by a signal,
    or exited): one line naming the step and variant under way."""


@contextlib.contextmanager
def step(name, variant):
    """Marks a call into native code: `name` one of STEPS, `variant` the model it makes."""
    if name not in STEPS:
        raise ValueError("unknown native step %r (native_steps.STEPS has %s)"
                         % (name, ", ".join(STEPS)))
    _CURRENT.append((name, variant))
    _note(name, variant, "in")
    try:
        yield
    finally:
        _CURRENT.pop()
        _note(name, variant, "after")


def _note(name, variant, where):
    """In a child: the step under way (where: "in"), or the last one (where: "after")."""
    if _PROGRESS:
        with open(_PROGRESS[0], "w", encoding="utf-8") as f:
            f.write("%s\t%s\t%s\n" % (where, name, variant))


def current():
    """The (name, variant) of the innermost step under way, or None."""
    return _CURRENT[-1] if _CURRENT else None


def run_isolated(work, args, scratch_parent, flag):
    """work(*args) run in a child process started with 'spawn'; its return value.

    `work` must be a module-level function (pickled by name), `args` picklable;
    `scratch_parent`: a folder the exchange files go into (a temporary folder of ours
    there, removed before this returns); `flag`: the option named in a crash's message
    when the step under way does not name its own (e.g. "--litert", "--litert / --onnx").
    """
    if IN_PROCESS:
        return work(*args)
    scratch = tempfile.mkdtemp(prefix=".native-", dir=scratch_parent)
    result_path, progress_path = (os.path.join(scratch, n) for n in ("result", "progress"))
    process = multiprocessing.get_context("spawn").Process(
        target=_child, args=(work, args, result_path, progress_path), daemon=True)
    try:
        with startup.main_script_not_rerun([work]):  # nor a user's unguarded script's work
            process.start()
        process.join()
        if not os.path.exists(result_path):
            raise NativeStepCrash(crash_line(flag, process.exitcode, progress_path))
        with open(result_path, "rb") as f:
            try:
                ok, value = pickle.load(f)
            except Exception as error:  # pylint: disable=broad-except  e.g. an error's class
                ok, value = False, RuntimeError("%s: the conversion process's result could "
                                                "not be read: %s" % (flag, error))
    finally:
        if process.is_alive():  # the parent stopped (SIGTERM, Ctrl-C): the child too
            process.terminate()
            process.join()
        fileutil.remove(scratch)
    if not ok:
        raise value
    return value


def crash_line(flag, exitcode, progress_path):
    """The one line of a child that ended without a result (exitcode: the process's;
    progress_path: the file its steps were noted in)."""
    try:
        with open(progress_path, encoding="utf-8") as f:
            where, name, variant = f.read().rstrip("\n").split("\t")
        where = "%s %s of the %s model" % (where, STEPS[name], variant)
        advice = "export without %s" % variant
        # One child converts for every runtime asked for: the line names the step's own.
        flag = next(f for f, steps in STEPS_BY_FLAG.items() if name in steps)
    except (OSError, ValueError, KeyError):
        where, advice = "before its first native step", "see the lines above"
    if exitcode is not None and exitcode < 0:
        try:
            how = "was killed by %s" % signal.Signals(-exitcode).name
        except ValueError:
            how = "was killed by signal %d" % -exitcode
        why = "a crash inside the library"
    else:
        how, why = "exited with code %s" % exitcode, "no result"
    return ("%s: the conversion process %s %s, %s; nothing was written: %s"
            % (flag, how, where, why, advice))


def _child(work, args, result_path, progress_path):
    """The child's side: runs the work, writes (True, value) or (False, error)."""
    startup.initialize_devices()
    _PROGRESS.append(progress_path)
    try:
        outcome = (True, work(*args))
    except Exception as error:  # pylint: disable=broad-except
        outcome = (False, error)
    try:
        data = pickle.dumps(outcome)
    except Exception:  # pylint: disable=broad-except  an error (or result) pickle refuses
        what = outcome[1]
        data = pickle.dumps((False, RuntimeError("%s: %s" % (type(what).__name__, what))))
    with fileutil.atomic_open(result_path, "wb") as f:
        f.write(data)
