"""What export_saved_model.py builds: the served tf.Module and its signatures (serving), the
in-graph tokenizer made of core TensorFlow ops (tokenization_graph), the export folder
(saved_model_dir: what an export may replace, what it keeps) and the export itself with
plain values (exporter: model, weights, export_info.json)."""
