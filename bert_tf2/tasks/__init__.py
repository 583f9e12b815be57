"""Task data, importable without a runner: GLUE-style files (glue_data), your own csv / tsv /
jsonl files (file_data) and DataProcessor (user_processor), run_classifier's choice of task and
the label list it keeps (classifier_tasks), multi-label (multilabel_data), long documents
(long_text), SQuAD (squad_data, squad_results), NER (ner_data, ner_metrics), multiple choice
(multiple_choice_data) and sentence pooling (pooling)."""
