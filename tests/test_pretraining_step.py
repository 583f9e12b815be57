"""The pretraining step's numbers do not depend on how its dropout masks are drawn.

A few training steps of a small one-layer BertPretrainer (run_pretraining's loss, clip to global
norm 1.0, fused AdamWeightDecay, dropout 0.1 with step seeds) on the path the step
takes now, against the same steps with the masks drawn as before issue 55 (the whole
ThreeFry size class drawn, then cut outside the program). Losses and every variable
after each step agree to 1e-6 (relative to the largest value); the masks' bits are the
same, so here they agree exactly.
"""
import numpy as np
import pytest
import tensorflow as tf

import modeling
import optimization
import run_pretraining
from bert_tf2.base import dropout_masks
from bert_tf2 import heads

BATCH, SEQ, PREDICTIONS, VOCAB = 4, 64, 8, 1000
_SHAPED_DRAW = dropout_masks.draw_keep_shaped  # the test swaps the module's for a while


def _config():
    return modeling.BertConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=1,
                               num_attention_heads=4, intermediate_size=256,
                               max_position_embeddings=SEQ, type_vocab_size=2)


def _batch():
    rng = np.random.RandomState(5)
    mask = np.ones([BATCH, SEQ], np.int32)
    mask[1, 40:] = 0
    positions = np.sort(rng.choice(np.arange(1, 40), [BATCH, PREDICTIONS]), axis=1)
    return {
        "input_ids": tf.constant(rng.randint(1, VOCAB, [BATCH, SEQ]) * mask, tf.int32),
        "input_mask": tf.constant(mask), "segment_ids": tf.constant((np.arange(SEQ) >= 30)
                                                                    * mask, tf.int32),
        "masked_lm_positions": tf.constant(positions, tf.int32),
        "masked_lm_ids": tf.constant(rng.randint(1, VOCAB, [BATCH, PREDICTIONS]), tf.int32),
        "masked_lm_weights": tf.constant(np.ones([BATCH, PREDICTIONS]), tf.float32),
        "next_sentence_labels": tf.constant([[0], [1], [1], [0]], tf.int32),
    }


def _draw_before_issue_55(size, seed, rate, shape):
    """The masks as drawn before: the whole size class, then cut and reshaped."""
    keep = _SHAPED_DRAW(size, seed, rate, (int(tf.get_static_value(size)),))
    return tf.reshape(keep[:int(np.prod(shape))], shape)


class _Steps:
    """A pretrainer, its optimizer and its step, traced once: each run() starts from the
    same initial weights (drawn from numpy's RNG, not TensorFlow's) and a fresh optimizer
    state (its iterations and slots back to zero)."""

    def __init__(self):
        self.model = heads.BertPretrainer(_config())
        self.model(heads.dummy_features())
        rng = np.random.RandomState(11)
        self.initial = [rng.normal(0.0, 0.02, v.shape).astype(np.float32)
                        for v in self.model.trainable_variables]
        self.optimizer = optimization.create_optimizer(1e-3, 100, 2, clip_norm=1.0)
        model, optimizer, batch = self.model, self.optimizer, _batch()

        @tf.function
        def step(number, seed):
            with dropout_masks.step_seeds(tf.stack([seed, number])):
                with tf.GradientTape() as tape:
                    loss, _ = run_pretraining.pretraining_loss(model, batch, True)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        self.step = step

    def run(self, steps, seed=7):
        """(loss of each step, every variable after the last) of `steps` steps whose
        dropout masks come from the step seeds (seed, step number)."""
        for variable, value in zip(self.model.trainable_variables, self.initial):
            variable.assign(value)
        for variable in self.optimizer.variables():
            variable.assign(tf.zeros_like(variable))
        losses = [float(self.step(tf.constant(i), tf.constant(seed))) for i in range(steps)]
        return losses, [v.numpy() for v in self.model.trainable_variables]


@pytest.mark.slow  # trains / exports: make test, not the quick lane
def test_the_step_is_today_s_step(monkeypatch):
    today = _Steps()
    losses, variables = today.run(3)
    monkeypatch.setattr(dropout_masks, "draw_keep_shaped", _draw_before_issue_55)
    want_losses, want_variables = _Steps().run(3)  # traced with the draw of before
    assert len(set(losses)) == 3  # the steps changed the model
    np.testing.assert_allclose(losses, want_losses, rtol=1e-6, atol=0)
    assert len(variables) == len(want_variables) == 30  # one layer, heads, embeddings
    for got, want in zip(variables, want_variables):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * np.abs(want).max())
    # The dropout is on: another seed's masks (seeds 8 instead of 7, on today's traced
    # step) move the losses well past the tolerance.
    moved = max(abs(a - b) for a, b in zip(losses, today.run(3, seed=8)[0]))
    assert moved > 5 * 1e-6 * max(losses), moved
    # run() starts afresh: seed 7 again gives the first run's losses bit for bit.
    assert today.run(3)[0] == losses
