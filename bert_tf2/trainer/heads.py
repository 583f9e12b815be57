"""The task models moved to bert_tf2/heads.py; this old import path gives the same objects
(every public name there, a new head's too, with no edit here)."""
from bert_tf2.heads import *  # noqa: F401,F403
