"""Task data, importable without a runner: GLUE-style files (glue_data), multi-label
(multilabel_data), long documents (long_text), SQuAD (squad_data, squad_results), NER (ner_data,
ner_metrics), multiple choice (multiple_choice_data) and sentence pooling (pooling)."""
