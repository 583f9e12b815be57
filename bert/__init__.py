"""The reference's modules under `bert.`, as Google's `bert-tensorflow` package laid them out.

`from bert import modeling, tokenization, optimization, run_classifier, run_squad,
run_pretraining, create_pretraining_data, extract_features` gives the very modules that
`import modeling` (and so on) gives: one copy of each, never two. Nothing is imported
until a module is asked for.
"""
