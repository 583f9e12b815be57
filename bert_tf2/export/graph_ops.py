"""Small graphs for the row bookkeeping of the serving signatures (issue 71).

tf.boolean_mask, RaggedTensor.value_rowids, tf.repeat, a RaggedTensor's row slices and
tf.strings.reduce_join of its rows are general: each adds 25 to 80 nodes of shape
arithmetic and checks to a traced graph.
The signatures use them dozens of times on 1-D tensors whose shapes are known to be
consistent, so that tracing, saving, tf.saved_model.load and each signature's first call
spent most of their work on that bookkeeping. These give the same values (the same
dtypes, any size including empty) with a handful of nodes each.
"""
import tensorflow as tf


def boolean_mask(values, mask):
    """tf.boolean_mask(values, mask) (a `mask` of another rank than 1: that op itself)."""
    if mask.shape.rank != 1:
        return tf.boolean_mask(values, mask)
    return tf.gather(values, tf.reshape(tf.where(mask), [-1]))


def row_ids(row_splits, num_values=None):
    """The row of each value of a ragged tensor with `row_splits` (1-D, sorted): what
    RaggedTensor.value_rowids() gives, in row_splits' dtype. num_values: the number of
    values (default: row_splits' last entry)."""
    row_splits = tf.convert_to_tensor(row_splits)
    if num_values is None:
        num_values = row_splits[-1]
    positions = tf.range(tf.cast(num_values, row_splits.dtype), dtype=row_splits.dtype)
    # The rows ending at or before each position: its row (empty rows end where they start).
    return tf.raw_ops.UpperBound(sorted_inputs=row_splits[tf.newaxis, 1:],
                                 values=positions[tf.newaxis, :],
                                 out_type=row_splits.dtype)[0]


def value_rowids(ragged):
    """ragged.value_rowids() of a RaggedTensor (its outermost rows)."""
    return row_ids(ragged.row_splits)


def repeat(values, counts):
    """tf.repeat(values, counts) (1-D `values` and `counts`, int32 or int64; any other
    ranks: tf.repeat itself)."""
    values, counts = tf.convert_to_tensor(values), tf.convert_to_tensor(counts)
    if values.shape.rank != 1 or counts.shape.rank != 1:
        return tf.repeat(values, counts)
    splits = tf.concat([tf.zeros([1], counts.dtype), tf.cumsum(counts)], axis=0)
    return tf.gather(values, row_ids(splits))


def split_rows(ragged, num_rows):
    """(ragged[:num_rows], ragged[num_rows:]) of a RaggedTensor of one ragged dimension,
    `num_rows` a scalar within its rows."""
    splits = ragged.row_splits
    cut = tf.cast(num_rows, splits.dtype)
    middle = splits[cut]
    first = tf.RaggedTensor.from_row_splits(ragged.values[:middle], splits[:cut + 1],
                                            validate=False)
    rest = tf.RaggedTensor.from_row_splits(ragged.values[middle:], splits[cut:] - middle,
                                           validate=False)
    return first, rest


def join_rows(strings, separator):
    """tf.strings.reduce_join(strings, axis=1, separator=separator) of a RaggedTensor
    [B, (strings)]: each row's strings joined ("" for an empty row)."""
    return tf.strings.unsorted_segment_join(strings.flat_values, value_rowids(strings),
                                            strings.nrows(), separator=separator)
