"""`bert.tokenization` is the top-level `tokenization` module itself (one module object, not a copy)."""
import sys

import tokenization

sys.modules[__name__] = tokenization
