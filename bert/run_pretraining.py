"""`bert.run_pretraining`: bert-tf2's run_pretraining.py, whatever files a user's folder holds.

The top-level `run_pretraining` module itself when that is ours (one module object, not a copy);
see bert_tf2/root_modules.py.
"""
import sys

from bert_tf2 import root_modules

sys.modules[__name__] = root_modules.load("run_pretraining")
