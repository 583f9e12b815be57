"""`bert.optimization`: bert-tf2's optimization.py, whatever files a user's folder holds.

The top-level `optimization` module itself when that is ours (one module object, not a copy);
see bert_tf2/root_modules.py.
"""
import sys

from bert_tf2 import root_modules

sys.modules[__name__] = root_modules.load("optimization")
