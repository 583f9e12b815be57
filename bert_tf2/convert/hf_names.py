"""The HF <-> TF1 name tables moved to bert_tf2/base/hf_names.py (below convert/ and export/:
the heads read them too); this old import path gives the same objects (every public name
there, a new one's too, with no edit here)."""
from bert_tf2.base.hf_names import *  # noqa: F401,F403
