"""`bert.create_pretraining_data` is the top-level `create_pretraining_data` module itself (one module object, not a copy)."""
import sys

import create_pretraining_data

sys.modules[__name__] = create_pretraining_data
