"""What optimization.py's TF2 half stands on: the schedule, AdamWeightDecay, LAMB, argument
checks, and the Keras optimizer bridge (keras_optimizer, clip_gradients, create_slots)."""
