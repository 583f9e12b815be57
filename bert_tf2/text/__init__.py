"""What tokenization.py stands on: the code point tables both of its paths share (characters),
the exact path's shortcuts and caches (exact_shortcuts) and the batch path on tensorflow_text's
FastWordpieceTokenizer (fast_batch)."""
