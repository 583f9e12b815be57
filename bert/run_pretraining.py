"""`bert.run_pretraining` is the top-level `run_pretraining` module itself (one module object, not a copy)."""
import sys

import run_pretraining

sys.modules[__name__] = run_pretraining
