"""The process around a command line run: run_cli defines the runner's flags, parses
them, runs it, and turns an error, Ctrl-C or SIGTERM into one line and an exit code;
--help and its kin exit with status 0.

The top floor of the package, under the root's faces alone (docs/CONTRACTS.md).
"""
import os
import re
import signal
import sys
import threading

from absl import app
from absl import flags
from absl import logging
import tensorflow as tf

from bert_tf2 import fileutil
from bert_tf2.base import path_match
from bert_tf2 import flags_common
from bert_tf2 import logs
from bert_tf2 import startup


def define_key_flags(define_flags, fv, module_name):
    """Runs `define_flags(fv)` and makes every flag it adds a key flag of `module_name`.

    absl's --help lists only the key flags of the main module: by default the
    flags defined in the script's own file, not those the shared define_*
    functions of this module register, nor any when the script runs as an
    installed console command (the main module is then the wrapper). Declaring
    them key flags puts each script's whole set of flags in --help, and leaves
    the flags of libraries (absl.testing, TPU client, ...) to --helpfull.
    """
    before = set(fv)
    define_flags(fv)
    for name in sorted(set(fv) - before):
        fv.register_key_flag_for_module(module_name, fv[name])


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread: the clean-up of Ctrl-C (temporaries removed)."""


# The signal that stopped the run (a library may wrap the exception it raised, or lose it:
# startup.check_not_stopped reads the same list).
_STOPPED_BY = startup.STOP_SIGNALS


def _on_signal(signum, frame):
    del frame
    _STOPPED_BY.append(signum)
    # Threads that then fail waiting for stopped workers are part of the stop, not news.
    threading.excepthook = lambda args: None
    if signum == signal.SIGTERM:
        signal.signal(signum, signal.SIG_DFL)  # a second SIGTERM ends the process at once
        # As Ctrl-C reaches the whole process group: worker processes (Beam's, the
        # --num_workers pool) stop too, rather than make the clean-up wait for them.
        for pid in _descendants(os.getpid()):
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass  # gone meanwhile
        raise _Terminated()
    raise KeyboardInterrupt()


def _descendants(pid):
    """The process ids of `pid`'s descendants (from Linux's /proc; none elsewhere)."""
    found, pending = [], [pid]
    while pending:
        parent = pending.pop()
        for path in path_match.matching("/proc/%d/task/" % parent, "*/children"):
            try:
                with open(path) as f:
                    children = [int(child) for child in f.read().split()]
            except (OSError, ValueError):
                continue
            found += children
            pending += children
    return found


def error_line(error):
    """(the one line run_cli prints for `error`, the exit code).

    A TensorFlow file error (tf.errors.OpError) says which path and why in the first
    line of its message; our temporary names in it become the output they stand for.
    """
    if isinstance(error, _Terminated) or _STOPPED_BY[-1:] == [signal.SIGTERM]:
        return "error: stopped by SIGTERM", 128 + signal.SIGTERM
    if isinstance(error, KeyboardInterrupt) or _STOPPED_BY:
        # Training's interrupt says where a rerun resumes (training.Interrupted).
        return (str(error) if isinstance(error, KeyboardInterrupt) and str(error)
                else "error: interrupted"), 128 + signal.SIGINT
    text = error.message if isinstance(error, tf.errors.OpError) else str(error)
    lines = text.strip().splitlines() or [type(error).__name__]
    line = _graph_error_line(lines) if isinstance(error, tf.errors.OpError) else lines[0]
    return "error: %s" % fileutil.without_temp_names(fileutil.without_op_names(line)), 1


def _graph_error_line(lines):
    """The line of a TensorFlow error that says what went wrong. An error inside a graph
    (a tf.function: training, evaluation) starts "Graph execution error:" and a stack of
    where the node was defined; its own message comes after that stack, followed by the
    node's name ("[[{{node Gather}}]]"), which is added in parentheses."""
    if not lines[0].startswith("Graph execution error"):
        return lines[0]
    message = None
    for line in lines[1:]:
        if not line.strip() or line[:1].isspace() or line.startswith(
                ("Detected at node", "<stack traces unavailable>")):
            continue
        message = line
        break
    if message is None:
        return lines[0]
    if re.match(r"^\d+ root error\(s\) found", message):
        first = next((m for m in (re.match(r"^\s*\(0\) \w+:\s*(.*)$", line) for line in lines)
                      if m), None)
        message = first.group(1) if first else message
    node = re.search(r"\[\[\{\{node ([^}]*)\}\}\]\]", "\n".join(lines))
    return message.strip() + (" (TensorFlow node %s)" % node.group(1) if node else "")


class _HelpExitsZero:
    """Mixin for absl's help flags: asked for, help is the answer, so the exit status is 0
    (absl's own flags print the help and exit with status 1)."""

    def parse(self, arg):
        """Prints the help as absl does, then exits with status 0."""
        try:
            super().parse(arg)
        except SystemExit:
            raise SystemExit(0) from None


# absl's help flags, by name; each prints its help then exits with status 1.
_ABSL_HELP_FLAGS = {"help": app.HelpFlag, "helpshort": app.HelpshortFlag,
                    "helpfull": app.HelpfullFlag, "helpxml": app.HelpXMLFlag}


def help_flags_exit_zero(fv=flags.FLAGS):
    """Puts help flags that exit with status 0 in place of absl's --help (-?), --helpshort,
    --helpfull and --helpxml on `fv`: the same text; absl's app.run then keeps them."""
    if fv is flags.FLAGS:
        app.define_help_flags()  # registers absl's once: it would not replace ours later
    for name, absl_class in _ABSL_HELP_FLAGS.items():
        if name in fv:
            if isinstance(fv[name], _HelpExitsZero):
                continue
            for alias in {name, fv[name].short_name} - {None}:
                delattr(fv, alias)
        exits_zero = type(absl_class.__name__, (_HelpExitsZero, absl_class), {})
        flags.DEFINE_flag(exits_zero(), flag_values=fv, module_name=app.__name__)


def run_cli(define_flags, run, argv=None):
    """Entry point of a runner: defines its flags, parses, runs `run(FLAGS)`.

    A ValueError, OSError or tf.errors.OpError (bad flag, missing file, malformed
    input, a path TensorFlow cannot write) becomes one clear line on stderr and exit
    code 1 instead of a traceback (which --verbosity=1 logs); Ctrl-C and SIGTERM
    stop the run the same way (exit codes 130 and 143), after the usual clean-up of
    temporary files; training's Ctrl-C line says where a rerun resumes. --help,
    --helpshort and --helpfull print the script's help and exit with status 0.
    A stderr that takes no more text (`2>&1 | head -1`, `2>/dev/full`) stops nothing:
    the progress display and the log handlers turn off (logs.stream_lost) and the run
    trains, saves, evaluates and predicts as it would have, exit 0.
    """
    define_key_flags(define_flags, flags.FLAGS, sys.argv[0])
    help_flags_exit_zero()
    main_module = sys.modules.get("__main__")
    if main_module is not None and not main_module.__doc__:
        # An installed console command's __main__ is a wrapper: --help shows the script's text.
        main_module.__doc__ = sys.modules[define_flags.__module__].__doc__
    startup.initialize_devices()

    def main(args):
        if len(args) > 1:
            raise app.UsageError("unexpected arguments: %s" % " ".join(args[1:]))
        if threading.current_thread() is threading.main_thread():
            del _STOPPED_BY[:]  # an earlier run's stop (in the same process) is not this one's
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, _on_signal)
        # absl's app.run made the log INFO unless --verbosity was given: then it leaves
        # out the reference's detail lines (bert_tf2/logs.py).
        logs.use_command_line_default(flags.FLAGS["verbosity"].present)
        logs.watch_handlers()
        try:
            flags_common.check_common(flags.FLAGS)
            flags_common.set_command_line_defaults(flags.FLAGS)
            run(flags.FLAGS)
        except (ValueError, OSError, tf.errors.OpError, KeyboardInterrupt) as e:
            _exit_with(e)
        except Exception as e:  # pylint: disable=broad-except
            if not _STOPPED_BY:
                raise
            _exit_with(e)  # the signal, wrapped by a library (Beam's workers)
        finally:
            logs.use_command_line_default(True)
            # This run's stop is handled: Python calls after it in the same process (a
            # notebook's, a test's) are not stopped by it (startup.check_not_stopped).
            del _STOPPED_BY[:]

    app.run(main, argv)


def _exit_with(error):
    """Prints error_line(error) and ends the process with its exit code.

    One line, not also a log record: the message is the whole story. An error ends
    with os._exit: TensorFlow's exit-time warnings (unrestored checkpoint values, ...)
    would otherwise print after it; every output is already complete or removed. A
    signal ends through Python's exit, whose clean-up also releases what the worker
    processes it stopped shared (else the resource tracker warns of it).
    """
    logging.debug("the error in full:", exc_info=error)
    line, code = error_line(error)
    # A lost stdout or stderr (a closed pipe, a full device) takes the line nowhere; the
    # exit code still says it.
    logs.write(sys.stdout, "")
    logs.write(sys.stderr, line + "\n")
    if _STOPPED_BY:
        sys.exit(code)
    fileutil.remove_link_folders()  # the exit's clean-up that os._exit skips
    os._exit(code)
