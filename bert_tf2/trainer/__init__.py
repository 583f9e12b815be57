"""The training loop (training), evaluation during training with the best checkpoint and early
stopping (periodic_eval), --class_weights (class_weights), TF1/TF2 checkpoints and resume
(checkpoints); heads is the task models' old import path (they are in bert_tf2/heads.py)."""
