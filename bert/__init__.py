"""The reference's modules under `bert.`, as Google's `bert-tensorflow` package laid them out.

`from bert import modeling, tokenization, optimization, run_classifier, run_squad,
run_pretraining, create_pretraining_data, extract_features` gives bert-tf2's own modules,
whatever files of those names sit in the user's folder: the very modules that `import
modeling` (and so on) gives when those are ours (one copy of each, never two), else ours
loaded from their files, leaving the user's top-level names to the user's files
(bert_tf2/root_modules.py). Nothing is imported until a module is asked for.
"""
