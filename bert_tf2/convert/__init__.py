"""Model formats of other projects, both ways (HuggingFace)."""
