"""`bert.run_squad`: bert-tf2's run_squad.py, whatever files a user's folder holds.

The top-level `run_squad` module itself when that is ours (one module object, not a copy);
see bert_tf2/root_modules.py.
"""
import sys

from bert_tf2 import root_modules

sys.modules[__name__] = root_modules.load("run_squad")
