"""`bert.run_classifier` is the top-level `run_classifier` module itself (one module object, not a copy)."""
import sys

import run_classifier

sys.modules[__name__] = run_classifier
