"""One worker of the multi-worker test (tests/test_training.py starts two of these, and
calls train() itself for the one-process run it compares them with).

argv: repo_root output_dir init_checkpoint result.npz. TF_CONFIG comes from the
environment; without it the job runs as a single process on one device.
"""
import json
import os
import sys

if __name__ == "__main__":
    sys.path.insert(0, sys.argv[1])

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import modeling  # noqa: E402
from bert_tf2 import heads  # noqa: E402
from bert_tf2.trainer import training  # noqa: E402
from test_training import classifier_loss, features, tiny_config  # noqa: E402

GLOBAL_BATCH = 8


def dataset_fn(ctx):
    """The per-worker dataset: this worker's shard of 16 fixed examples, repeated."""
    data = tf.data.Dataset.from_tensor_slices(features(16, seed=5))
    if ctx.num_input_pipelines > 1:
        data = data.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
    return data.batch(ctx.get_per_replica_batch_size(GLOBAL_BATCH), drop_remainder=True).repeat()


def train(strategy, output_dir, init_checkpoint):
    """The Runner after 3 steps on GLOBAL_BATCH examples from `init_checkpoint`."""
    config = training.RunConfig(output_dir=output_dir, learning_rate=1e-2, num_train_steps=3,
                                num_warmup_steps=0, iterations_per_loop=3,
                                init_checkpoint=init_checkpoint, autograph=False)
    runner = training.Runner(strategy, lambda: heads.BertClassifier(tiny_config(), 2), config)
    runner.train(dataset_fn, classifier_loss)
    return runner


def main():
    """Trains 3 steps (multi-worker if TF_CONFIG is set) and writes the result file."""
    output_dir, init_checkpoint, result = sys.argv[2:5]
    if "TF_CONFIG" in os.environ:
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    else:
        strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    runner = train(strategy, output_dir, init_checkpoint)
    np.savez(result, *[v.numpy() for v in runner.model.trainable_variables])
    print(json.dumps({"step": runner.global_step, "chief": runner.is_chief}))


if __name__ == "__main__":
    main()
