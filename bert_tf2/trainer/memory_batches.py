"""make_dataset's evaluation / prediction batches made in numpy from records in memory.

The Python Predictors keep their features in memory (input_pipeline.records_in_memory)
and training.Runner.predict runs them through here instead of a tf.data pipeline: a
pipeline is built and traced anew for every call (its map functions, its iterator:
about 0.3-0.8 s whatever the model), while these batches cost microseconds and the
traced prediction step is reused. The batches are make_dataset's for the same records
(input_pipeline.PredictSource: the same examples in the same rows, length-sorted
within windows of DEFAULT_BUCKET_WINDOW batches, EXAMPLE_INDEX, trimmed to
bucket_length), with one difference: a call of fewer examples than the batch size gets
one batch padded to the power of two at or above their count, not to the batch size (2
texts with a batch size of 2**20 are 2 rows, not 2**20). Padding rows carry no example
and their outputs are never read. The step's signature is the dataset's (a static batch
size, the trimmed axis None): at or over the batch size, the answers are do_predict's
to the bit; a smaller batch's shape may move them in the last float32 bits.

Small record files on disk (file_columns: SMALL_FILES_BYTES in all, every feature of
fixed length) are read whole the same way: the evaluation and prediction files of
run_classifier, run_squad, run_ner, ... Their batches keep make_dataset's batch size
(whole_batches) even for fewer examples, so their answers are the tf.data pipeline's to
the bit, without its set-up (a SQuAD file of 96 features: about 0.19 s of its 1.3 s pass).
"""
import numpy as np
import tensorflow as tf

from bert_tf2 import input_pipeline


def columns(records, spec):
    """{name: [N, ...] array} of the feature dicts `records` as decode_record gives them
    (int64 as int32; a feature the record lacks takes the spec's default)."""
    found = {}
    for name, feature in spec.items():
        shape = list(feature.shape)
        dtype = np.int32 if feature.dtype in (tf.int64, tf.int32) else feature.dtype.as_numpy_dtype
        kind = "float_list" if dtype == np.float32 else "int64_list"
        if not records:
            found[name] = np.zeros([0] + shape, dtype)
        elif all(name in record for record in records):
            found[name] = np.array([getattr(r[name], kind).value for r in records],
                                   dtype).reshape([len(records)] + shape)
        else:
            found[name] = np.stack([_value(record, name, feature, index, kind, dtype, shape)
                                    for index, record in enumerate(records)])
    return found


# Record files up to this many bytes in all are predicted from memory (file_columns):
# parsed at about 100 MB/s here, their int32 columns up to four times their size.
SMALL_FILES_BYTES = 32 << 20


def file_columns(files, spec, max_bytes=None):
    """{name: [N, ...] array} of the records of the TFRecord `files` as make_dataset decodes
    them (input_pipeline.decode_records), or None when they hold more than `max_bytes`
    (default SMALL_FILES_BYTES) in all, one cannot be read, or `spec` has a feature that
    is not a FixedLenFeature (those stay with the tf.data pipeline, which reads them as it
    always did)."""
    max_bytes = SMALL_FILES_BYTES if max_bytes is None else max_bytes
    if not files or not all(isinstance(f, tf.io.FixedLenFeature) for f in spec.values()):
        return None
    try:
        size = sum(tf.io.gfile.stat(path).length for path in files)
    except tf.errors.OpError:  # the pipeline says what is wrong with the file
        return None
    if size > max_bytes:
        return None
    serialized = list(tf.data.TFRecordDataset(files).batch(1 << 30))
    if not serialized:  # no record: no batch, as the pipeline gives none
        return None
    decoded = input_pipeline.decode_records(tf.concat(serialized, axis=0), spec)
    return {name: value.numpy() for name, value in decoded.items()}


def _value(record, name, feature, index, kind, dtype, shape):
    """One record's feature `name` as an array (the spec's default when it has none)."""
    if name in record:
        return np.asarray(getattr(record[name], kind).value, dtype).reshape(shape)
    if feature.default_value is None:
        raise ValueError("record %d has no feature %r" % (index, name))
    return np.broadcast_to(np.asarray(feature.default_value, dtype), shape)


def example_lengths(batch, position_names=input_pipeline.POSITION_FEATURES):
    """input_pipeline.example_lengths in numpy: [B] positions each example needs."""
    mask = (np.asarray(batch["input_mask"]) != 0).astype(np.int32)
    positions = np.arange(1, mask.shape[-1] + 1, dtype=np.int32)
    needed = [_per_example_max(mask * positions)]
    for name in position_names:
        if name in batch:
            needed.append(_per_example_max(np.asarray(batch[name], np.int32)) + 1)
    return np.max(np.stack(needed, axis=1), axis=1)


def _per_example_max(array):
    return array if array.ndim == 1 else array.reshape(len(array), -1).max(axis=1, initial=0)


def batches(found, source, whole_batches=False):
    """The batches (dicts of numpy arrays) make_dataset(pad_final_batch=True, trim=
    source.trim, buckets=source.trim) makes of the columns `found` (module docstring:
    the batch size cut to the number of examples unless `whole_batches`). One replica,
    one input pipeline."""
    count = len(next(iter(found.values())))
    size = batch_size(source, count, whole_batches)
    found = dict(found)
    if source.trim:  # buckets: numbered, then sorted by length within each window
        found[input_pipeline.EXAMPLE_INDEX] = np.arange(count, dtype=np.int32)
        window = size * input_pipeline.DEFAULT_BUCKET_WINDOW
        lengths = example_lengths(found)
        order = np.concatenate([start + np.argsort(-lengths[start:start + window], kind="stable")
                                for start in range(0, count, window)] or [np.zeros([0], int)])
        found = {name: value[order] for name, value in found.items()}
    if "is_real_example" not in found:
        found["is_real_example"] = np.ones([count], np.int32)
    names = input_pipeline.sequence_feature_names(source.spec) if source.trim else ()
    for start in range(0, count, size):
        batch = {name: _padded(name, value[start:start + size], size)
                 for name, value in found.items()}
        if source.trim:
            longest = int(np.max(example_lengths(batch), initial=0))
            length = input_pipeline.bucket_length(longest, batch["input_mask"].shape[-1],
                                                  source.bucket_width)
            batch = {name: value[..., :length] if name in names else value
                     for name, value in batch.items()}
        yield batch


def batch_size(source, count, whole_batches=False):
    """The rows of each batch of `count` examples: the batch size, or for fewer examples
    (unless `whole_batches`) the power of two at or above their count (padding rows to it):
    a few shapes in all, not one per count (one traced step for all of them where the
    prediction loop leaves the batch axis open: one replica, no XLA; under XLA a program
    per shape)."""
    if count >= source.batch_size or whole_batches:
        return source.batch_size
    return min(source.batch_size, 1 << max(0, count - 1).bit_length())


def _padded(name, rows, size):
    """`rows` with rows of zeros (-1 for EXAMPLE_INDEX) up to `size`, as _pad_batch."""
    if len(rows) == size:
        return rows
    pad = np.full((size - len(rows),) + rows.shape[1:],
                  -1 if name == input_pipeline.EXAMPLE_INDEX else 0, rows.dtype)
    return np.concatenate([rows, pad])


def element_spec(found, source, whole_batches=False):
    """The step's input signature for batches(found, source, whole_batches): any batch
    size, and (trimmed) any length on the per-token features' last axis."""
    size = batch_size(source, len(next(iter(found.values()))), whole_batches)
    key = (id(source.spec), source.trim, size,
           tuple((n, v.dtype.str) for n, v in found.items()))
    cached = _SPECS.get(key)
    if cached is not None and cached[0] is source.spec:
        return cached[1]
    spec = _element_spec(found, source, size)
    if len(_SPECS) > 64:
        _SPECS.clear()
    _SPECS[key] = (source.spec, spec)
    return spec


# element_spec's signatures by the spec object they were made for (kept with it, so
# that an id is never taken for another spec's).
_SPECS = {}


def _element_spec(found, source, size):
    names = input_pipeline.sequence_feature_names(source.spec) if source.trim else ()
    spec = {}
    for name, value in found.items():
        shape = [size] + list(value.shape[1:])
        if name in names:
            shape[-1] = None
        spec[name] = tf.TensorSpec(shape, tf.as_dtype(value.dtype))
    if source.trim:
        spec[input_pipeline.EXAMPLE_INDEX] = tf.TensorSpec([size], tf.int32)
    spec.setdefault("is_real_example", tf.TensorSpec([size], tf.int32))
    return spec
