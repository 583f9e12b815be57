"""What export_saved_model.py builds: the served tf.Module and its signatures (serving) and the
in-graph tokenizer made of core TensorFlow ops (tokenization_graph)."""
