"""`bert.optimization` is the top-level `optimization` module itself (one module object, not a copy)."""
import sys

import optimization

sys.modules[__name__] = optimization
