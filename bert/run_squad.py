"""`bert.run_squad` is the top-level `run_squad` module itself (one module object, not a copy)."""
import sys

import run_squad

sys.modules[__name__] = run_squad
