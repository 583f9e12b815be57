"""create_pretraining_data's machinery: the corpus reader (pretraining_corpus), the exact
random draws (pretraining_draws), records (pretraining_records), the per-file shards
(pretraining_shards), Apache Beam (pretraining_beam) and Chinese word boundaries."""
