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
import logging as std_logging

from absl import logging

# True while the log is INFO only because absl's app.run raised it (run_cli sets it).
_IMPLICIT_INFO = [False]


def use_command_line_default(verbosity_given):
    """Notes whether --verbosity was on the command line (flags_common.run_cli): without it
    the detail lines stay out of absl's implicit INFO log."""
    _IMPLICIT_INFO[0] = not verbosity_given


def details_shown():
    """Whether the reference's detail lines (example dumps, the progress log line) go to
    the log: INFO is on and the user chose it (not the command line's implicit INFO)."""
    # The logger's level, not absl's flag: Python's own logging settings count too.
    return logging.get_absl_logger().isEnabledFor(std_logging.INFO) and not _IMPLICIT_INFO[0]
