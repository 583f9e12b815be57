"""The old home of the heads, kept so that an import of it works as before: every head
class, ModelType and ENTRIES, now found in their rooms (bert_tf2/export/model_types/, one
module per head; head_types finds them). A new head's class is here too, with no edit:
the names are read from the rooms when this module loads.
"""
from bert_tf2.export import head_types
from bert_tf2.export.model_types import base

ModelType = base.ModelType
# The heads, one instance of each class, in export_saved_model --model_type's order.
ENTRIES = head_types.ENTRIES
# Each room's class under its own name (Encoder, Classifier, Squad, Tagger, ...).
globals().update({type(entry).__name__: type(entry) for entry in ENTRIES})
