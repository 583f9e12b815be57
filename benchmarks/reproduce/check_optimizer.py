"""Checks that the peer's optimiser (peer.ReferenceAdam + reference_lr_factor, torch) and
ours (optimization.create_optimizer, TF) make the same updates.

Both sides start from the same weights (one decayed matrix, one bias without decay) and
apply the same 10 gradients, clipped to global norm 1.0, with 3 warmup steps out of 10.
Run from the project venv; it runs the torch side in the peer venv:

  .venv/bin/python benchmarks/reproduce/check_optimizer.py
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # pylint: disable=wrong-import-position

NUM_STEPS, NUM_WARMUP, LEARNING_RATE = 10, 3, 0.1


def _problem():
    """(weights, bias, [(weight grad, bias grad)] x NUM_STEPS), fixed by seed 0."""
    rng = np.random.RandomState(0)
    weights = rng.randn(5, 3).astype(np.float32)
    bias = rng.randn(3).astype(np.float32)
    grads = [(3.0 * rng.randn(5, 3).astype(np.float32), rng.randn(3).astype(np.float32))
             for _ in range(NUM_STEPS)]
    return weights, bias, grads


def run_torch():
    """The peer's reference-Adam weights after the fixed gradients (torch side)."""
    import torch  # pylint: disable=import-outside-toplevel
    import peer  # pylint: disable=import-outside-toplevel
    weights, bias, grads = _problem()
    w = torch.nn.Parameter(torch.tensor(weights))
    b = torch.nn.Parameter(torch.tensor(bias))
    optimizer = peer.ReferenceAdam([{"params": [w], "weight_decay": 0.01},
                                    {"params": [b], "weight_decay": 0.0}],
                                   lr=LEARNING_RATE, eps=1e-6)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: peer.reference_lr_factor(step, NUM_STEPS, NUM_WARMUP))
    for gw, gb in grads:
        w.grad, b.grad = torch.tensor(gw), torch.tensor(gb)
        torch.nn.utils.clip_grad_norm_([w, b], 1.0)
        optimizer.step()
        schedule.step()
    return np.concatenate([w.detach().numpy().ravel(), b.detach().numpy().ravel()])


def run_tf():
    """Our optimizer's weights after the same gradients (TensorFlow side)."""
    sys.path.insert(0, common.ROOT)
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    import optimization  # pylint: disable=import-outside-toplevel
    weights, bias, grads = _problem()
    w = tf.Variable(weights, name="dense/kernel")
    b = tf.Variable(bias, name="dense/bias")
    optimizer = optimization.create_optimizer(LEARNING_RATE, NUM_STEPS, NUM_WARMUP)
    for gw, gb in grads:
        clipped, _ = tf.clip_by_global_norm([tf.constant(gw), tf.constant(gb)], 1.0)
        optimizer.apply_gradients(zip(clipped, [w, b]))
    return np.concatenate([w.numpy().ravel(), b.numpy().ravel()])


def main():
    """Runs both sides (torch in the peer's Python) and compares the weights."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--torch_side", default=None,
                        help="(internal) write the torch side's weights to this .npy file")
    parser.add_argument("--peer_python",
                        default=os.path.join(common.ROOT, ".venv-reproduce", "bin", "python"))
    args = parser.parse_args()
    if args.torch_side:
        np.save(args.torch_side, run_torch())
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "torch.npy")
        subprocess.run([args.peer_python, os.path.abspath(__file__), "--torch_side=%s" % path],
                       check=True)
        theirs = np.load(path)
    ours = run_tf()
    start = np.concatenate([x.ravel() for x in _problem()[:2]])
    diff = float(np.abs(ours - theirs).max())
    print("%d steps: weights moved by up to %.3f; max |ours - peer| = %.2e"
          % (NUM_STEPS, float(np.abs(ours - start).max()), diff))
    if diff > 1e-5:
        print("MISMATCH: the peer's optimiser does not make the reference's updates")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
