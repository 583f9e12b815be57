"""The learning-rate schedule of BERT's training: linear warm-up, then linear decay to 0."""

import tensorflow as tf
import tf_keras

from bert_tf2.optim.args import as_float, as_step_count


@tf_keras.utils.register_keras_serializable(package="bert_tf2")
class WarmupPolynomialDecay(tf_keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up followed by linear (power 1) decay to zero.

    For ``t`` completed updates (the value of ``optimizer.iterations`` when the
    next update is computed)::

        lr(t) = init_lr * t / num_warmup_steps                   if t < num_warmup_steps
        lr(t) = init_lr * (1 - min(t, num_train_steps) / num_train_steps)   otherwise

    So the very first update (t = 0) uses a learning rate of 0 when there is a
    warm-up, and every update from ``num_train_steps`` on uses 0.  With
    ``num_warmup_steps == 0`` there is no warm-up phase at all.

    All arithmetic is done in float32, in the same order as the TF1 graph
    (``tf.train.polynomial_decay`` + the warm-up blend), so values agree
    bit for bit with the original implementation.
    """

    def __init__(self, init_lr, num_train_steps, num_warmup_steps=0, name=None):
        super().__init__()
        self.init_lr = as_float(init_lr, "init_lr", low=0.0)
        self.num_train_steps = as_step_count(num_train_steps, "num_train_steps", 1)
        self.num_warmup_steps = as_step_count(
            num_warmup_steps, "num_warmup_steps", 0)
        self.name = name

    def __call__(self, step):
        with tf.name_scope(self.name or "WarmupPolynomialDecay"):
            step = tf.convert_to_tensor(step)
            if step.dtype.is_integer:
                step_int = tf.cast(step, tf.int64)
                step_float = tf.cast(step_int, tf.float32)
            else:
                step_float = tf.cast(step, tf.float32)
                step_int = None

            init_lr = tf.constant(self.init_lr, dtype=tf.float32)
            total = tf.constant(float(self.num_train_steps), dtype=tf.float32)

            # Polynomial (power 1) decay towards 0, frozen after num_train_steps.
            fraction_done = tf.minimum(step_float, total) / total
            decayed_lr = init_lr * (1.0 - fraction_done)

            if not self.num_warmup_steps:
                return decayed_lr

            warmup = tf.constant(float(self.num_warmup_steps), dtype=tf.float32)
            warmup_lr = init_lr * (step_float / warmup)
            if step_int is not None:
                in_warmup = step_int < tf.constant(self.num_warmup_steps, tf.int64)
            else:
                in_warmup = step_float < warmup
            return tf.where(in_warmup, warmup_lr, decayed_lr)

    def get_config(self):
        """The optimizer's settings, for Keras serialization."""
        return {
            "init_lr": self.init_lr,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
            "name": self.name,
        }
