"""The one lifecycle of every Python door (each head's Predictor, LiteRTPredictor).

A door subclasses `Door` and calls `open_door(name)` first in its __init__ and
`ready_tokenizer` on the tokenizers its predict() uses; `check_usable()` starts each
predict(). What that gives every door alike:
- built ready: the tokenizers' batch path (character tables, vocabulary model) is built
  when the door is made, so that no first call, from any number of threads, builds it;
- thread-safe: one door serves any number of threads (each door's own predict() keeps
  its state per call);
- fork: a process forked after a door was made in its parent (TensorFlow's runtime, or
  LiteRT's interpreters, started there) is refused in one RuntimeError, as is the door
  itself used there, instead of hanging; the message names the fix for multiprocessing
  and for prefork servers (gunicorn);
- signals: making or using a door installs no signal handler: SIGTERM and Ctrl-C are
  the program's (a server's, the command line's run_cli), never the library's.
"""
import os
import threading

# The process in which a door was first made (where TensorFlow / LiteRT started): a
# child forked from it after that inherits a runtime whose threads did not survive the
# fork, and its first call hangs for ever (check_process refuses instead).
_STARTED_IN = []
_STARTED_LOCK = threading.Lock()

FORK_ADVICE = (
    "TensorFlow cannot run in a forked child (it would hang): with multiprocessing, start "
    "the workers with the 'spawn' start method (multiprocessing.get_context(\"spawn\")) and "
    "make each one's Predictor there; under a prefork server (gunicorn), make no Predictor "
    "before the fork (not at import with --preload): make it in each worker, in gunicorn's "
    "post_fork hook or on the worker's first request (docs/serving.md, forking servers)")


def check_process(what):
    """RuntimeError (one line) when this process was forked from one in which a door had
    been made: TensorFlow cannot run in such a child (it would hang)."""
    if _STARTED_IN and _STARTED_IN[0] != os.getpid():
        raise RuntimeError(
            "%s: this process (pid %d) was forked from pid %d after TensorFlow ran there "
            "(a Predictor was made); %s" % (what, os.getpid(), _STARTED_IN[0], FORK_ADVICE))


def ready_tokenizers(tokenizers):
    """Builds the batch path of each tokenizer that has one (FullTokenizer.prepare_batch)."""
    for tokenizer in tokenizers:
        prepare = getattr(tokenizer, "prepare_batch", None)
        if prepare is not None:
            prepare()


class Door(object):
    """What every Python door shares (module docstring): open_door, ready_tokenizer,
    check_usable, close."""

    _door_name = "Predictor"
    _door_closed = False

    def open_door(self, name):
        """The first step of a door's __init__: refused in a forked child (check_process);
        this process noted as the one TensorFlow runs in."""
        check_process(name)
        self._door_name = name
        self._door_pid = os.getpid()
        self._door_closed = False
        with _STARTED_LOCK:
            if not _STARTED_IN:
                _STARTED_IN.append(os.getpid())

    def ready_tokenizer(self, *tokenizers):
        """Builds the tokenizers' batch path now (ready_tokenizers): built ready."""
        ready_tokenizers(tokenizers)

    def describe_door(self):
        """What a refusal names: the door and its model (a door may say more)."""
        return self._door_name

    def check_usable(self):
        """RuntimeError (one line) after close(), or in a child forked from the process
        that made the door (check_process)."""
        if self._door_closed:
            raise RuntimeError("%s is closed (close() was called): make a new one"
                               % self.describe_door())
        check_process(self._door_name)

    def close(self):
        """Ends the door: a later predict() is refused (RuntimeError)."""
        self._door_closed = True
