"""What a fork of the reference needs that TensorFlow 2 removed, for bert_tf2/tf1.py
(`import bert_tf2.tf1 as tf`): tf.contrib's namespaces (contrib) and the pieces in them
(contrib_ops), and move_fork, which changes a fork's import lines. Nothing else in the
package imports them."""
