"""`bert.extract_features` is the top-level `extract_features` module itself (one module object, not a copy)."""
import sys

import extract_features

sys.modules[__name__] = extract_features
