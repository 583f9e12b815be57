"""Work for native_steps.run_isolated's child in tests (a module the spawned child imports
by name): the real LiteRT conversions with a crash injected into one native step, and a
Python error."""
import os
import resource
import signal

import tensorflow as tf

from bert_tf2.export import litert
from bert_tf2.export import native_steps


def _segfault(*args, **kwargs):
    """What a fault in C++ does to the process: ends it with SIGSEGV (no core file)."""
    del args, kwargs
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.kill(os.getpid(), signal.SIGSEGV)


def convert_variants_debugger_crashes(*args):
    """litert.convert_variants with TFLite's quantization debugger crashing the process,
    as it did on a masked-LM export (issue 91)."""
    tf.lite.experimental.QuantizationDebugger.run = _segfault
    return litert.convert_variants(*args)


def raises_value_error(text):
    """A Python error inside a step: it reaches the parent as itself."""
    with native_steps.step("convert", "fp32"):
        raise ValueError(text)
