"""`bert.extract_features`: bert-tf2's extract_features.py, whatever files a user's folder holds.

The top-level `extract_features` module itself when that is ours (one module object, not a copy);
see bert_tf2/root_modules.py.
"""
import sys

from bert_tf2 import root_modules

sys.modules[__name__] = root_modules.load("extract_features")
