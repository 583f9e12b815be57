"""TensorBoard scalars as the Scalars tab and every event reader see them.

tf.summary.scalar in TF2 writes a tensor summary (plugin "scalars"): TensorBoard's own
server converts it, but readers of the event files such as
tensorboard's EventAccumulator(...).Scalars() see none. A Summary proto whose values
are `simple_value`s is the scalar every reader knows; write_scalars writes those.
"""
import tensorflow as tf


def write_scalars(writer, step, values):
    """Writes {tag: number} at `step` to the summary `writer` as simple_value scalars."""
    if not values:
        return
    summary = tf.compat.v1.Summary(value=[
        tf.compat.v1.Summary.Value(tag=str(tag), simple_value=float(value))
        for tag, value in values.items()])
    with writer.as_default(step=int(step)):
        tf.summary.experimental.write_raw_pb(summary.SerializeToString(), step=int(step))
