"""The SIGTERM watch of a training run (Runner.train): a preemption's stop becomes a
checkpoint and exit code 143, within a step.

Python runs a signal's handler only when the main thread is back in Python; a training call
of --iterations_per_loop steps (1000 by default in run_pretraining) keeps it in TensorFlow's
C++ code until the call ends, minutes under load (issue 91 item 13: 2.5 minutes after a
SIGTERM). So the watch also has the signal written to a pipe (signal.set_wakeup_fd, which
the interpreter's C-level handler writes at once), read by a thread of its own, which sets
`stop`, a variable the training loop reads after each step: the call ends after the step in
progress, the Runner writes its checkpoint and stops.
"""
import os
import signal
import threading

from absl import logging
import tensorflow as tf

# What the watch writes to its own pipe to end its thread (no signal is number 0).
_QUIT = b"\0"


class TerminationWatch(object):
    """Notes a SIGTERM (preemption) so that the loop can checkpoint and stop.

    In the main thread: a SIGTERM handler (`requested`), and, when no wakeup fd is set
    already (an asyncio loop's), the wakeup pipe and its reader thread, which set
    `requested` and `stop` (a tf.Variable made outside any strategy, False until then)
    while the main thread is still in a training call. Between host loops, between the
    batches of an evaluation during training (Runner.predict) and, through `stop`, after
    each step of a loop that reads it, the stop is seen. Outside the main thread nothing
    is installed. Every handler and the wakeup fd are put back as they were on exit.
    """

    def __init__(self):
        self.requested = False
        self._previous = None
        self._pipe = None  # (read fd, write fd) of the wakeup pipe
        self._reader = None
        with tf.init_scope():
            self.stop = tf.Variable(False, trainable=False, name="stop_requested")

    def _handler(self, signum, frame):
        del signum, frame
        self._note()
        logging.warning("SIGTERM received: will checkpoint after the current step "
                        "(or loop) and stop (or stop after the current evaluation batch)")

    def _note(self):
        self.requested = True
        self.stop.assign(True)

    def _read(self, read_fd):
        """The reader thread: SIGTERM's number on the pipe notes the stop; _QUIT ends it."""
        while True:
            try:
                data = os.read(read_fd, 64)
            except OSError:
                return
            if not data or _QUIT in data:
                return
            if signal.SIGTERM in data:
                self._note()

    def __enter__(self):
        if threading.current_thread() is not threading.main_thread():
            return self
        self._previous = signal.signal(signal.SIGTERM, self._handler)
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)  # as set_wakeup_fd requires
        try:
            earlier = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        except ValueError:  # not the main interpreter
            earlier = None
        if earlier != -1:  # another's wakeup fd (or none possible): theirs stays
            if earlier is not None:
                signal.set_wakeup_fd(earlier)
            os.close(read_fd)
            os.close(write_fd)
            return self
        self._pipe = (read_fd, write_fd)
        self._reader = threading.Thread(target=self._read, args=(read_fd,), daemon=True,
                                        name="sigterm_watch")
        self._reader.start()
        return self

    def __exit__(self, *exc):
        if self._pipe is not None:
            signal.set_wakeup_fd(-1)
            read_fd, write_fd = self._pipe
            os.set_blocking(write_fd, True)
            os.write(write_fd, _QUIT)
            self._reader.join()
            os.close(read_fd)
            os.close(write_fd)
            self._pipe = None
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
        return False
