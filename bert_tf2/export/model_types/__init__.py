"""The heads, one room each: a module per model type holding its class (a subclass of
base.ModelType), its head-specific pieces (decoding, converter names, LiteRT decoding, the
link to its Keras model) and its one registered instance, ENTRY. head_types finds the rooms
by scanning this package (a module with an ENTRY is a room), so a new head is a new module
here and nothing else in this package or the registry.

base.py holds ModelType (the fields) and takes each door's questions from the module of
that door's contract: serving_door.py (the SavedModel and export_saved_model),
litert_door.py (LiteRT, LiteRTPredictor), converter_door.py (HuggingFace, keras-hub).
"""
