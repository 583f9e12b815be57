"""How much a run logs: the reference's detail lines belong to a log the user asked for.

absl's `app.run` raises the log to INFO when --verbosity is not on the command line, so the
command line's default log is INFO; from Python (no app.run) it is absl's WARNING. The
reference's detail lines (the "*** Example ***" dumps of the first examples of each file,
the training loop's progress line every --log_every_seconds) fill a notebook or a terminal
with ~100 lines per run; they are kept for a log the user chose:

- command line, --verbosity not given: INFO without the detail lines (stage headers,
  checkpoints, results); the progress display (trainer/progress.py) shows the steps;
- command line --verbosity=0 (or -v 0), or from Python absl's
  `logging.set_verbosity(logging.INFO)` (or Python's logging set to INFO for the "absl"
  logger): the whole INFO log, detail lines included, as the reference wrote it;
- Python by default (WARNING): warnings only, and the progress display.
"""
import io
import logging as std_logging
import sys

from absl import logging

# True while the log is INFO only because absl's app.run raised it (run_cli sets it).
_IMPLICIT_INFO = [False]


def use_command_line_default(verbosity_given):
    """Notes whether --verbosity was on the command line (cli.run_cli): without it
    the detail lines stay out of absl's implicit INFO log."""
    _IMPLICIT_INFO[0] = not verbosity_given


def details_shown():
    """Whether the reference's detail lines (example dumps, the progress log line) go to
    the log: INFO is on and the user chose it (not the command line's implicit INFO)."""
    # The logger's level, not absl's flag: Python's own logging settings count too.
    return logging.get_absl_logger().isEnabledFor(std_logging.INFO) and not _IMPLICIT_INFO[0]


# ---------------------------------------------------------------------------
# A log stream that is gone: a closed pipe, a full device, a closed file
# ---------------------------------------------------------------------------

# The errors of writing to a stream that no longer takes text: OSError (a broken pipe,
# no space left) and ValueError (a closed file).
STREAM_ERRORS = (OSError, ValueError)


class _Nowhere(io.TextIOBase):
    """A text stream that takes every write and keeps nothing (what replaces a lost one)."""

    def writable(self):
        return True

    def write(self, text):
        return len(text)


NOWHERE = _Nowhere()


def write(stream, text):
    """Writes `text` to `stream` and flushes it; True if it went, else (the stream is lost)
    False, after stream_lost(stream): the caller stops writing there."""
    try:
        stream.write(text)
        stream.flush()
        return True
    except STREAM_ERRORS:
        stream_lost(stream)
        return False


def _handlers():
    """The handlers a log record may reach (the root logger's, absl's, TensorFlow's and
    Python's last resort), absl's own as the stream handler inside it."""
    found = [std_logging.lastResort] if std_logging.lastResort is not None else []
    for logger in (std_logging.getLogger(), logging.get_absl_logger(),
                   std_logging.getLogger("tensorflow")):
        found += logger.handlers
    return [getattr(h, "python_handler", h) for h in found]


def stream_lost(stream):
    """Turns off what writes to `stream`, which took no more text (progress.py's displays
    and run_cli find out): every log handler writing to it writes nowhere from now on,
    and so does sys.stderr when it is that stream (absl's handler, print(file=sys.stderr)
    and Python's flush at exit use it). The run itself goes on: its files are its result.

    Nothing says so: the stream was the place to say it. Idempotent.
    """
    if stream is None or stream is NOWHERE:
        return
    for handler in _handlers():
        if getattr(handler, "stream", None) is stream:
            handler.acquire()
            try:  # not setStream: it flushes the lost stream first
                handler.stream = NOWHERE
            except AttributeError:  # Python's last resort: sys.stderr, replaced below
                pass
            finally:
                handler.release()
    if sys.stderr is stream:
        sys.stderr = NOWHERE
    if sys.stdout is stream:
        sys.stdout = NOWHERE


def watch_handlers():
    """Makes a log handler that fails to write (absl's, the root logger's) check its stream:
    one that no longer takes text is stream_lost, and the handler writes nowhere from then
    on (instead of Python's "--- Logging error ---" on every record). Other errors are
    reported as before. For the command line's own process (cli.run_cli)."""
    for handler in _handlers():
        if getattr(handler, "stream", None) is None or getattr(
                handler.handleError, "watches_stream", False):
            continue
        handler.handleError = _stream_checking(handler, handler.handleError)


def _stream_checking(handler, report):
    def handle_error(record):
        stream = handler.stream
        if stream is not NOWHERE and not write(stream, ""):
            return  # lost: write() turned it off
        report(record)
    handle_error.watches_stream = True
    return handle_error
