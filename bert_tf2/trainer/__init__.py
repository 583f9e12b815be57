"""The training loop (training), TF1/TF2 checkpoints and resume (checkpoints), the task heads
and their losses (heads)."""
