"""The progress display of a stage (train / eval / predict): one display, updated in place.

What it shows: the stage, step/total (batches for eval and predict), loss, learning rate,
examples/s and the ETA (the time taken once the stage ends); a stage of unknown length
shows its count and the time so far. Where (`--progress`, on stderr):

- bar: in a terminal one line, rewritten with "\\r" (a log record clears it first, and the
  next update draws it again); in a Jupyter notebook an ipywidgets bar when ipywidgets is
  installed (with the stage's last line as its text, what a saved notebook shows), else a
  text output updated in place (IPython's display_id);
- lines: a plain line at most every --log_every_seconds, and the stage's last line (CI,
  a log file: a long run writes a line per interval, never one per step);
- none: nothing;
- auto (the default): bar in a notebook or when stderr is a terminal, else lines; and
  none there when the log already carries the progress lines (logs.details_shown).

Nothing here reads flags: the runner gives the mode, the interval and the stage's numbers.
"""
import math
import sys
import time

from absl import logging

from bert_tf2 import logs

MODES = ("auto", "bar", "lines", "none")

# In-place displays: how often training reports from inside a call, and the least time
# between two redraws (prediction reports every batch).
REDRAW_SECONDS = 1.0
_MIN_REDRAW_SECONDS = 0.1
_BAR_WIDTH = 20
# Rates measured after the first update need this long a span (outputs of several
# prediction batches may arrive together).
_MIN_RATE_SECONDS = 1.0


def check_mode(mode):
    """ValueError naming --progress unless `mode` is one of MODES."""
    if mode not in MODES:
        raise ValueError("--progress=%s: expected one of %s" % (mode, ", ".join(MODES)))


def clock_text(seconds):
    """h:mm:ss of a duration in seconds (rounded up, so a last second never reads 0)."""
    seconds = int(math.ceil(max(seconds, 0.0)))
    hours, rest = divmod(seconds, 3600)
    return "%d:%02d:%02d" % (hours, rest // 60, rest % 60)


def eta_seconds(step, total, steps_per_second):
    """The seconds left to reach `total` at `steps_per_second`; None when not known."""
    if not total or not steps_per_second or steps_per_second <= 0:
        return None
    return max(total - step, 0) / steps_per_second


def status_text(stage, step, total=None, loss=None, lr=None, examples_per_second=None,
                eta=None, elapsed=None, done=False, bar=False):
    """One line: "train  step 8/16  loss 0.6931  lr 2.5e-05  41.2 examples/s  ETA 0:00:12".

    eval and predict count batches ("batch 3/5"); without an `eta`, `elapsed` shows the
    time so far ("took 0:00:20" when `done`); `bar` puts a bar of the done part after the
    stage's name when the total is known.
    """
    unit = "step" if stage == "train" else "batch"
    parts = [stage]
    if bar and total:
        filled = int(_BAR_WIDTH * min(step / total, 1.0))
        parts.append("[%s%s]" % ("#" * filled, "." * (_BAR_WIDTH - filled)))
    parts.append("%s %d/%d" % (unit, step, total) if total else "%s %d" % (unit, step))
    if loss is not None:
        parts.append("loss %.4f" % loss)
    if lr is not None:
        parts.append("lr %.3g" % lr)
    if examples_per_second is not None:
        parts.append("%.1f examples/s" % examples_per_second)
    if eta is not None:
        parts.append("ETA %s" % clock_text(eta))
    elif elapsed is not None:
        parts.append(("took %s" if done else "%s") % clock_text(elapsed))
    return "  ".join(parts)


class Stage:
    """The display of one stage; `update` after each step or batch, `close` at its end.

    Args:
      name: "train", "eval" or "predict".
      total: the steps (batches) the stage will run; None: not known.
      mode: one of MODES.
      every: --log_every_seconds, the interval of the lines mode (<= 0: only the
        stage's last line).
      start_step: the step the stage starts from (a resumed training run).
      shown: False for a process that shows nothing (a multi-worker run's other workers).
      stream: where to write (default: sys.stderr when the stage starts).
      clock: the seconds of a monotonic clock (tests give a fake one).
    """

    def __init__(self, name, total=None, mode="auto", every=30.0, start_step=0, shown=True,
                 stream=None, clock=time.monotonic):
        check_mode(mode)
        self.name = name
        self.total = total
        self.start_step = start_step
        self._clock = clock
        self._start = clock()
        self._first = None      # (time, step, examples) of the first update: rates after it
        self._last = None       # the arguments of the last update
        self._closed = False
        self._view = _view(mode, stream or sys.stderr, every, name, total, self._start) \
            if shown else None

    @property
    def interval(self):
        """How often the display wants updates from inside a long call (seconds); None:
        no more often than the log's interval."""
        return getattr(self._view, "interval", None)

    def update(self, step, examples=None, loss=None, lr=None):
        """The stage reached `step` after `examples` examples in all (None: not counted),
        with this `loss` and learning rate `lr` (None: not shown)."""
        now = self._clock()
        if self._first is None:
            self._first = (now, step, examples)
        self._last = (now, step, examples, loss, lr)
        if self._view is not None:
            self._view.show(self.text(now), step, now, final=False)

    def text(self, now=None, final=False):
        """The display's line at `now` (final: the stage's last line, with the time taken).

        The rates are those up to the last update, counted from the first update when
        at least a second of steps followed it (leaving out the start: tracing,
        compiling), else from the stage's start.
        """
        now = self._clock() if now is None else now
        at, step, examples, loss, lr = self._last or (now, self.start_step, None, None, None)
        since, base_step, base_examples = self._start, self.start_step, 0
        if self._first is not None and step > self._first[1] and \
                at - self._first[0] >= _MIN_RATE_SECONDS:
            since, base_step, base_examples = self._first
        seconds = max(at - since, 1e-9)
        rate = None
        if examples is not None and (step > base_step or final):
            rate = (examples - (base_examples or 0)) / seconds
        eta = None if final else eta_seconds(step, self.total, (step - base_step) / seconds)
        return status_text(self.name, step, self.total, loss, lr, rate, eta,
                           elapsed=now - self._start, done=final,
                           bar=isinstance(self._view, _Bar) and not final)

    def close(self):
        """Shows the stage's last line (once; a stage never updated shows nothing)."""
        if self._closed:
            return
        self._closed = True
        if self._view is not None:
            now = self._clock()
            if self._last is not None:
                self._view.show(self.text(now, final=True), self._last[1], now, final=True)
            self._view.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _view(mode, stream, every, name, total, start):
    """The renderer of `mode` on `stream` (None: nothing shown)."""
    if mode == "none":
        return None
    notebook = _notebook_shell() is not None
    if mode == "auto":
        if not notebook and not _is_terminal(stream):
            if logs.details_shown():
                return None  # the log's own progress lines say it
            mode = "lines"
        else:
            mode = "bar"
    if mode == "lines":
        return _Lines(stream, every, start, total)
    if notebook:
        return _Notebook(name, total)
    return _Bar(stream)


def _is_terminal(stream):
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def _notebook_shell():
    """The running Jupyter kernel's IPython shell, or None (a terminal IPython is a
    terminal). IPython is never imported here: a kernel has imported it already."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(
        ipython, "get_ipython") else None
    return shell if getattr(shell, "kernel", None) is not None else None


class _Lines:
    """Plain lines: one at most every `every` seconds, and the stage's last one (the
    stage's last step waits for that)."""

    interval = None

    def __init__(self, stream, every, start, total):
        self._stream = stream
        self._every = float(every or 0)
        self._printed_at = start
        self._total = total

    def show(self, text, step, now, final):
        if self._stream is None:  # lost: a closed pipe, a full device
            return
        if final or (self._every > 0 and now - self._printed_at >= self._every
                     and not (self._total and step >= self._total)):
            if not logs.write(self._stream, text + "\n"):
                self._stream = None
            self._printed_at = now

    def close(self):
        pass


# The width of the line each stream's bar has drawn (a stage's bar may follow another's on
# the same line: an evaluation during training).
_DRAWN = {}


class _Bar:
    """One terminal line, rewritten with "\\r"; log records clear it before they print."""

    interval = REDRAW_SECONDS

    def __init__(self, stream):
        self._stream = stream
        self._drawn_at = None
        self._handlers = _log_handlers()
        for handler in self._handlers:
            handler.addFilter(self._clear_for_record)

    def show(self, text, step, now, final):
        del step
        if self._stream is None or not final and self._drawn_at is not None and \
                now - self._drawn_at < _MIN_REDRAW_SECONDS:
            return
        width = _DRAWN.get(id(self._stream), 0)
        self._draw("\r" + text + " " * max(width - len(text), 0) + ("\n" if final else ""),
                   0 if final else len(text))
        self._drawn_at = now

    def clear(self):
        """Blanks the drawn line; the next update draws it again."""
        width = _DRAWN.pop(id(self._stream), 0)
        if width and self._stream is not None:
            self._draw("\r" + " " * width + "\r", 0)
        self._drawn_at = None

    def _draw(self, text, width):
        """Writes `text`, a line now `width` wide; a lost stream turns the bar off (and,
        through logs.stream_lost, the log handlers writing there)."""
        if logs.write(self._stream, text):
            _DRAWN[id(self._stream)] = width
            return
        _DRAWN.pop(id(self._stream), None)
        self._stream = None
        self.close()

    def _clear_for_record(self, record):
        del record
        self.clear()
        return True

    def close(self):
        for handler in self._handlers:
            handler.removeFilter(self._clear_for_record)
        self._handlers = []


def _log_handlers():
    """The handlers a log record may reach: the root logger's, absl's and TensorFlow's
    (Python's last resort when the root has none)."""
    import logging as std_logging  # pylint: disable=import-outside-toplevel
    root = std_logging.getLogger()
    found = [] if root.handlers or std_logging.lastResort is None else [std_logging.lastResort]
    for logger in (root, logging.get_absl_logger(), std_logging.getLogger("tensorflow")):
        found += [h for h in logger.handlers if h not in found]
    return found


# The MIME type of a live widget's view in a notebook's output (ipywidgets 7 and 8).
_WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _widget_view(widget):
    """The output data of `widget` without its text: the view a live kernel draws."""
    return {_WIDGET_VIEW: {"version_major": 2, "version_minor": 0,
                           "model_id": widget.model_id}}


class _Notebook:
    """A Jupyter display updated in place: an ipywidgets bar and label, else text.

    The widget's output also carries a text/plain line, the stage's last one once it
    ends: what a saved notebook shows where no kernel draws the widget (nbviewer,
    GitHub, a closed kernel), instead of the widget's repr."""

    interval = REDRAW_SECONDS

    def __init__(self, name, total):
        from IPython import display  # pylint: disable=import-outside-toplevel
        self._display = display
        self._drawn_at = None
        try:
            import ipywidgets  # pylint: disable=import-outside-toplevel
        except ImportError:
            self._bar = None
            self._handle = display.display(display.Pretty(name), display_id=True)
            return
        self._bar = ipywidgets.IntProgress(min=0, max=max(total or 1, 1), value=0,
                                           description=name)
        self._label = ipywidgets.Label(value="")
        self._view = _widget_view(ipywidgets.HBox([self._bar, self._label]))
        self._handle = display.display(dict(self._view, **{"text/plain": name}), raw=True,
                                       display_id=True)

    def show(self, text, step, now, final):
        if not final and self._drawn_at is not None and \
                now - self._drawn_at < _MIN_REDRAW_SECONDS:
            return
        self._drawn_at = now
        if self._bar is None:
            self._handle.update(self._display.Pretty(text))
            return
        self._bar.value = min(step, self._bar.max)
        if final:
            self._bar.value = self._bar.max
            self._bar.bar_style = "success"
        self._label.value = text
        if final and self._handle is not None:
            # The same widget, its text fallback now the last line (the view stays live).
            self._handle.update(dict(self._view, **{"text/plain": text}), raw=True)

    def close(self):
        pass
