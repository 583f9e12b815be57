"""`bert.modeling` is the top-level `modeling` module itself (one module object, not a copy)."""
import sys

import modeling

sys.modules[__name__] = modeling
