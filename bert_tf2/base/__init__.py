"""What the reference's modeling.py (with bert_tf2/encoder) and optimization.py stand on:
TF1 variable names for tf_keras layers (tf1_variables), dropout's random draws
(dropout_masks), GELU, LayerNorm, dropout's select-and-scale and the masked-LM loss gradient
of training steps as XLA programs (fused_elementwise) and the XLA-compiled optimizer update
(fused_update)."""
