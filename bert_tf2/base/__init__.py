"""What the reference's modeling.py and optimization.py stand on: TF1 variable names for
tf_keras layers (tf1_variables) and the XLA-compiled optimizer update (fused_update)."""
