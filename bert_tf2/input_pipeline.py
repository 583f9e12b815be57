"""TFRecord files in and out: atomic writers, feature specs and tf.data readers.

Every runner writes its features with `RecordWriter` and reads them back with
`make_dataset`; the feature names and dtypes are those of the reference's files,
so records written by the reference can be read here and the other way round.

Contracts with the other modules (bert_tf2/input_pipeline.py):
RecordWriter(output_files) (+ int_feature / float_feature), pretraining_features /
classifier_features / squad_features specs, make_dataset(...), pack_pair /
truncate_seq_pair, doc_spans / check_is_max_context (windows), check_record_lengths.
make_dataset reads records through _record_stream (files, sharding, the reference's repeat
and shuffles) and batches them; drop_remainder=False (no padding, no grouping) keeps a last
partial batch (run_squad.input_fn_builder's predict input). in_memory_input_fn(columns,
is_training, drop_remainder) is the reference's in-memory input_fn(params) (run_classifier /
extract_features.input_fn_builder). Padding trim (--trim_padding): dataset_fn_for(files,
spec, batch_size, is_training, seed=None, trim_padding=False, bucket_width=None: 8 training,
16 otherwise) -> dataset_fn; training batches keep the reference's examples and order, each
cut by trim_batch to bucket_length(longest) (positions named by POSITION_FEATURES kept);
eval/predict batches are length-sorted within windows and carry EXAMPLE_INDEX, which
Runner.predict uses to give the outputs back in the input order's batches. In-memory batches
(extract_features): length_sorted_batches(lengths, batch_size) + bucket_length.
Length-grouped training (--group_by_length): dataset_fn_for(..., group_by_length=True) /
make_dataset(group_by_length=True): each pass over the files shuffled whole (up to
GROUP_SHUFFLE_BUFFER records), made into batches by length_grouped_batches(d, batch_size,
seed, group=GROUP_WINDOW): the pass's last N mod batch_size records left out, windows of
group x batch_size examples sorted by length (the last window of a pass shorter), cut into
full batches, the batches of a window shuffled; then the next pass (windows never span two
epochs). Every epoch holds each example once but for those N mod batch_size; same steps.
"""
import collections
import contextlib
import os
import threading

import numpy as np
import tensorflow as tf

from bert_tf2 import fileutil


# ---------------------------------------------------------------------------
# Writing records
# ---------------------------------------------------------------------------

def int_feature(values):
    """A tf.train.Feature of int64 values."""
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def float_feature(values):
    """A tf.train.Feature of float values."""
    return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))


# Records kept in memory instead of files (records_in_memory): per thread, a stack of
# {path: [feature dicts]}, the innermost block's on top.
_IN_MEMORY = threading.local()


@contextlib.contextmanager
def records_in_memory():
    """A block in which this thread's RecordWriters keep their records in memory under
    their paths (no file is made or replaced) and memory_records() gives them back.

    The Python Predictors' calls: their features never touch the disk, and calls from
    several threads (or one call made inside another's input generator) each see only
    their own records. The records of the block are dropped when it ends.
    """
    stack = _IN_MEMORY.__dict__.setdefault("stack", [])
    stack.append({})
    try:
        yield
    finally:
        stack.pop()


def memory_records(input_files):
    """The feature dicts ({name: tf.train.Feature}) this thread's records_in_memory
    block wrote to `input_files`, in reading order; None outside such a block or when
    one of the files was not written in it."""
    stack = getattr(_IN_MEMORY, "stack", None)
    if not stack or not all(path in stack[-1] for path in input_files):
        return None
    return [record for path in input_files for record in stack[-1][path]]


class RecordWriter:
    """Writes tf.train.Examples round-robin over one or more TFRecord files.

    Use as a context manager: the files are written under temporary names and
    renamed into place only when the block ends without an exception. Inside a
    records_in_memory() block the records stay in memory instead (no file), unless
    `to_disk`.
    """

    def __init__(self, output_files, to_disk=False):
        if isinstance(output_files, str):
            output_files = [output_files]
        if not output_files:
            raise ValueError("RecordWriter needs at least one output file")
        self.output_files = list(output_files)
        self._temps = [fileutil.temp_name(p) for p in self.output_files]
        self._writers = []
        self._next = 0
        self.num_written = 0
        stack = getattr(_IN_MEMORY, "stack", None)
        self._memory = stack[-1] if stack and not to_disk else None

    def __enter__(self):
        if self._memory is not None:
            self._writers = [[] for _ in self.output_files]
            return self
        for path, temp in zip(self.output_files, self._temps):
            parent = os.path.dirname(path)
            if parent and not tf.io.gfile.exists(parent):
                tf.io.gfile.makedirs(parent)
            self._writers.append(tf.io.TFRecordWriter(temp))
        return self

    def write(self, features):
        """Writes one example; `features` maps a name to a tf.train.Feature."""
        if self._memory is not None:
            self._add(features)
            return
        example = tf.train.Example(features=tf.train.Features(feature=features))
        self.write_serialized(example.SerializeToString())

    def write_serialized(self, record):
        """Writes one already serialized tf.train.Example (bytes)."""
        if self._memory is not None:
            self._add(dict(tf.train.Example.FromString(record).features.feature))
            return
        self._writers[self._next].write(record)
        self._next = (self._next + 1) % len(self._writers)
        self.num_written += 1

    def _add(self, features):
        """One record kept in memory (records_in_memory)."""
        self._writers[self._next].append(features)
        self._next = (self._next + 1) % len(self._writers)
        self.num_written += 1

    def __exit__(self, exc_type, exc, tb):
        if self._memory is not None:
            if exc_type is None:
                self._memory.update(zip(self.output_files, self._writers))
            return False
        for writer in self._writers:
            writer.close()
        for path, temp in zip(self.output_files, self._temps):
            if exc_type is None:
                tf.io.gfile.rename(temp, path, overwrite=True)
            else:
                fileutil.remove(temp)
        return False


# ---------------------------------------------------------------------------
# Packing WordPieces into fixed-length features (run_classifier, extract_features)
# ---------------------------------------------------------------------------

def truncate_seq_pair(tokens_a, tokens_b, max_length):
    """Shortens a pair in place to `max_length` tokens, always from the longer list.

    One token at a time comes off the end of whichever list is longer (of
    equal lists, tokens_b), so a short text keeps its tokens as long as possible.
    """
    while len(tokens_a) + len(tokens_b) > max_length:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        longer.pop()


def truncated_pair_lengths(len_a, len_b, max_length):
    """Lengths after the reference's _truncate_seq_pair, in closed form.

    The reference pops from the end of the longer list (from B on ties) until the
    pair fits. B ends at min(len_b, max(max_length // 2, max_length - len_a)), then A
    at min(len_a, max_length - B's length); works on numbers and on tensors.
    """
    if isinstance(len_b, tf.Tensor) or isinstance(len_a, tf.Tensor):
        max_length = tf.cast(max_length, len_a.dtype)
        keep_b = tf.minimum(len_b, tf.maximum(max_length // 2, max_length - len_a))
        return tf.minimum(len_a, max_length - keep_b), keep_b
    keep_b = min(len_b, max(max_length // 2, max_length - len_a))
    return min(len_a, max_length - keep_b), keep_b


def pack_pair(tokens_a, tokens_b, max_seq_length, tokenizer):
    """[CLS] A [SEP] (B [SEP]), truncated and zero-padded to max_seq_length.

    A pair is cut to max_seq_length - 3 WordPieces by truncate_seq_pair (the
    lists are shortened in place), a single text to max_seq_length - 2.

    Returns:
      (tokens, input_ids, input_mask, segment_ids); tokens unpadded, the rest
      lists of max_seq_length ints.
    """
    needed = 3 if tokens_b else 2
    if max_seq_length < needed:
        # The reference pops from an empty list here (pairs) or writes rows longer
        # than max_seq_length (single texts).
        raise ValueError("--max_seq_length=%d is too short: [CLS] A [SEP]%s needs at least %d "
                         "positions" % (max_seq_length, " B [SEP]" if tokens_b else "", needed))
    if tokens_b:
        truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
    else:
        tokens_a = tokens_a[:max_seq_length - 2]
    tokens = ["[CLS]"] + list(tokens_a) + ["[SEP]"]
    segment_ids = [0] * len(tokens)
    if tokens_b:
        tokens += list(tokens_b) + ["[SEP]"]
        segment_ids += [1] * (len(tokens_b) + 1)
    input_ids = list(tokenizer.convert_tokens_to_ids(tokens))
    input_mask = [1] * len(input_ids)
    padding = [0] * (max_seq_length - len(input_ids))
    return tokens, input_ids + padding, input_mask + padding, segment_ids + padding


# ---------------------------------------------------------------------------
# Windows over inputs longer than one sequence (run_squad, run_ner)
# ---------------------------------------------------------------------------

DocSpan = collections.namedtuple("DocSpan", ["start", "length"])


def check_is_max_context(doc_spans, cur_span_index, position):
    """Whether span `cur_span_index` gives the token at `position` its best context.

    A token covered by several windows is scored in each by the smaller of its
    left and right context, plus 1% of the window length as tie-breaker; the first
    window with the best score wins.
    """
    best_index = None
    best_score = None
    for index, span in enumerate(doc_spans):
        last = span.start + span.length - 1
        if not span.start <= position <= last:
            continue
        score = min(position - span.start, last - position) + 0.01 * span.length
        if best_score is None or score > best_score:
            best_index, best_score = index, score
    return best_index == cur_span_index


def doc_spans(num_tokens, max_tokens_for_doc, doc_stride):
    """Windows of at most max_tokens_for_doc tokens, doc_stride apart, covering the doc."""
    spans = []
    start = 0
    while start < num_tokens:
        length = min(num_tokens - start, max_tokens_for_doc)
        spans.append(DocSpan(start=start, length=length))
        if start + length == num_tokens:
            break
        start += min(length, doc_stride)
    return spans


# ---------------------------------------------------------------------------
# Feature specs (names and dtypes as the reference writes them)
# ---------------------------------------------------------------------------

def pretraining_features(max_seq_length, max_predictions_per_seq):
    """Feature spec of create_pretraining_data's records."""
    seq = tf.io.FixedLenFeature([max_seq_length], tf.int64)
    preds = tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64)
    return {
        "input_ids": seq,
        "input_mask": seq,
        "segment_ids": seq,
        "masked_lm_positions": preds,
        "masked_lm_ids": preds,
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }


def classifier_features(seq_length, label_dtype=tf.int64):
    """Features of run_classifier's files; label_dtype float32 for regression."""
    seq = tf.io.FixedLenFeature([seq_length], tf.int64)
    return {
        "input_ids": seq,
        "input_mask": seq,
        "segment_ids": seq,
        "label_ids": tf.io.FixedLenFeature([], label_dtype),
        "is_real_example": tf.io.FixedLenFeature([], tf.int64),
    }


def squad_features(seq_length, is_training):
    """Feature spec of run_squad's feature files (training adds the answer positions)."""
    seq = tf.io.FixedLenFeature([seq_length], tf.int64)
    spec = {
        "unique_ids": tf.io.FixedLenFeature([], tf.int64),
        "input_ids": seq,
        "input_mask": seq,
        "segment_ids": seq,
    }
    if is_training:
        spec["start_positions"] = tf.io.FixedLenFeature([], tf.int64)
        spec["end_positions"] = tf.io.FixedLenFeature([], tf.int64)
    return spec


# ---------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------

def check_record_lengths(path, spec, flag_of=None):
    """Checks the first record of `path` against the fixed lengths of `spec`.

    A record written with other lengths (e.g. pretraining data made with another
    --max_seq_length) otherwise fails deep inside tf.data with "Can't parse
    serialized Example". `flag_of` maps a feature name to the flag that sets its
    length, for the message. An empty file passes.
    """
    for raw in tf.data.TFRecordDataset([path]).take(1):
        example = tf.train.Example.FromString(raw.numpy())
        for name, feature_spec in spec.items():
            if name not in example.features.feature:
                raise ValueError("%s: the records have no feature %r" % (path, name))
            feature = example.features.feature[name]
            kind = feature.WhichOneof("kind")
            have = len(getattr(feature, kind).value) if kind else 0
            want = int(np.prod(feature_spec.shape)) if feature_spec.shape else 1
            if have != want:
                flag = (flag_of or {}).get(name)
                raise ValueError(
                    "%s: the records hold %s of length %d, not %d%s" % (
                        path, name, have, want,
                        " (%s): pass the value the records were written with" % flag
                        if flag else ""))


def decode_record(record, spec):
    """Parses one serialized Example; int64 becomes int32 (what TPUs take)."""
    return _int64_as_int32(tf.io.parse_single_example(record, spec))


def decode_records(records, spec):
    """decode_record over a [N] string tensor of serialized Examples at once: [N, ...]."""
    return _int64_as_int32(tf.io.parse_example(records, spec))


def _int64_as_int32(example):
    return {name: tf.cast(t, tf.int32) if t.dtype == tf.int64 else t
            for name, t in example.items()}


def _as_written(function):
    """`function` for Dataset.map, left as written by AutoGraph. The pipeline's functions
    branch and loop only on Python values (feature names, static shapes), so AutoGraph's
    rewrite would give the same graph; skipping it saves reading and converting their
    source (traced dataset functions of a process's first classifier run: 1.5 -> 0.5 CPU s)."""
    return tf.autograph.experimental.do_not_convert(function)


def _pad_batch(batch, batch_size):
    """Pads a (possibly partial) batch to `batch_size` rows of zeros.

    Adds `is_real_example` (1 for real rows) when the records lack it, so that
    padding rows can be masked out of metrics and never written as outputs.
    """
    first = next(iter(batch.values()))
    real = tf.shape(first)[0]
    out = {}
    for name, t in batch.items():
        pad = [[0, batch_size - real]] + [[0, 0]] * (len(t.shape) - 1)
        # A padding row is no example: its index (bucketed predict) is -1.
        out[name] = tf.pad(t, pad, constant_values=-1 if name == EXAMPLE_INDEX else 0)
    if "is_real_example" not in out:
        out["is_real_example"] = tf.pad(tf.ones([real], tf.int32), [[0, batch_size - real]])
    for name, t in out.items():
        t.set_shape([batch_size] + t.shape.as_list()[1:])
    return out


# ---------------------------------------------------------------------------
# Trimming padding (--trim_padding)
# ---------------------------------------------------------------------------
#
# The records keep the reference's fixed length; the pipeline cuts every batch's
# per-token features to the batch's longest example, rounded up to a multiple of
# `bucket_width`. The outputs of real tokens do not depend on the padding after
# them (the attention mask adds -10000 to padded keys: their softmax weight is an
# exact 0 in float32), so a trimmed batch computes the same values with less work,
# and the few lengths (max_seq_length / bucket_width of them) are all tf.function
# and XLA ever see. TPUs need static shapes: keep the full length there
# (training.Runner.trim_padding says whether trimming is allowed).
#
# Exact only where no number reads a padding position. Classifier, tagger (its
# weights are 0 on padding), multiple choice and pretraining (masked positions lie
# in the real tokens; POSITION_FEATURES are kept anyway) qualify. run_squad does not:
# the reference's start/end softmax runs over all max_seq_length positions, padding
# included (trimming changes its loss), and its n-best lists rank padding positions
# too, so it keeps the full length.

DEFAULT_BUCKET_WIDTH = 16
# Training batches are not sorted by length, so their longest example sets the
# length: a finer rounding cuts more (measured 2026-11-22, MiniLM on SST-2, CPU:
# 8 is ~9% faster than 16 for training; 16 is best for length-sorted eval batches).
TRAINING_BUCKET_WIDTH = 8
# run_squad --trim_padding's prediction windows (sorted by length, a few per batch, up
# to 384 positions): rounding to 4 rather than 16 ran 6-8% faster on SQuAD dev (MiniLM,
# batch 8, CPU, 2026-11-24); under XLA, which compiles a program per length, 16 stays.
SQUAD_PREDICT_BUCKET_WIDTH = 4
# Per-replica batches whose examples are sorted by length together (bucketed predict);
# it bounds both the reordering and the outputs training.Runner.predict holds back.
DEFAULT_BUCKET_WINDOW = 64
# Input position of each example in bucketed batches (-1 on padding rows).
EXAMPLE_INDEX = "example_index"
# Features holding positions INTO the sequence: a trimmed batch keeps every position
# they name (max position + 1), whatever the mask says.
POSITION_FEATURES = ("masked_lm_positions", "start_positions", "end_positions",
                     "next_sentence_positions")
# Features of one value per masked-LM prediction, whatever their length.
_PER_PREDICTION = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")


def sequence_feature_names(spec):
    """The per-token features of `spec`: those shaped like its input_mask.

    [S] for most tasks (input_ids, input_mask, segment_ids, and run_ner's label_ids
    and label_weights), [C, S] for multiple choice; the masked-LM prediction
    features are never per-token, even when max_predictions_per_seq equals S.
    """
    if "input_mask" not in spec:
        raise ValueError("trimming padding needs an input_mask feature; the spec has %s"
                         % sorted(spec))
    shape = list(spec["input_mask"].shape)
    return tuple(name for name, feature in spec.items()
                 if list(feature.shape) == shape and name not in _PER_PREDICTION)


def bucket_length(longest, max_length, width=DEFAULT_BUCKET_WIDTH):
    """`longest` rounded up to a multiple of `width` (at least one), at most max_length.

    Python ints (extract_features' in-memory batches) or, when `longest` is a
    tensor, the same in the graph (trim_batch, the served signatures).
    """
    if width < 1:
        raise ValueError("the bucket width must be >= 1, got %d" % width)
    if isinstance(longest, tf.Tensor):
        rounded = tf.maximum(tf.cast(1, longest.dtype), (longest + width - 1) // width) * width
        return tf.minimum(rounded, tf.cast(max_length, longest.dtype))
    return min(max_length, max(1, -(-int(longest) // width)) * width)


def length_sorted_batches(lengths, batch_size):
    """Batches of indexes into `lengths`, longest examples first (ties in input order).

    For in-memory batches (extract_features' chunks): run each batch trimmed to
    bucket_length(its longest), then put each output row back at its index.
    """
    order = np.argsort(-np.asarray(lengths, np.int64), kind="stable")
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def example_lengths(features, position_names=POSITION_FEATURES):
    """[B] int32: positions each example needs, 1 + its last real token (or named position).

    The last nonzero of input_mask (over every choice of [B, C, S] features), so a mask
    need not be a prefix; any feature of `position_names` present raises it to its
    largest position + 1.
    """
    mask = tf.cast(tf.not_equal(features["input_mask"], 0), tf.int32)
    positions = tf.range(1, tf.shape(mask)[-1] + 1, dtype=tf.int32)
    needed = [_per_example_max(mask * positions)]
    for name in position_names:
        if name in features:
            needed.append(_per_example_max(tf.cast(features[name], tf.int32)) + 1)
    return tf.reduce_max(tf.stack(needed, axis=1), axis=1)


def _per_example_max(t):
    """[B, ...] -> [B]: the largest value of each example (rank must be static)."""
    rank = t.shape.rank
    return t if rank == 1 else tf.reduce_max(t, axis=list(range(1, rank)))


def trim_batch(batch, names, width=DEFAULT_BUCKET_WIDTH, position_names=POSITION_FEATURES):
    """Cuts the features `names` of a batch to its bucket length along their last axis.

    The bucket length is the longest example_lengths() of the batch rounded up to a
    multiple of `width`, at most the features' length (max_seq_length): the full
    length when an example fills it. Other features pass unchanged.
    """
    max_length = batch["input_mask"].shape[-1]
    if max_length is None:
        max_length = tf.shape(batch["input_mask"])[-1]
    longest = tf.reduce_max(tf.concat([example_lengths(batch, position_names), [0]], axis=0))
    length = bucket_length(longest, max_length, width)
    return {name: t[..., :length] if name in names else t for name, t in batch.items()}


def _sort_window(window):
    """The examples of a window, longest first (equal lengths keep input order)."""
    order = tf.argsort(example_lengths(window), direction="DESCENDING", stable=True)
    return {name: tf.gather(t, order) for name, t in window.items()}


def _length_sorted(d, window):
    """Examples numbered (EXAMPLE_INDEX) in input order, then sorted by length per window."""
    d = d.enumerate().map(_as_written(
        lambda i, f: dict(f, **{EXAMPLE_INDEX: tf.cast(i, tf.int32)})))
    return d.batch(window).map(_as_written(_sort_window)).unbatch()


# --group_by_length (training): batches whose examples have similar lengths, so that
# trimming cuts more, in an order that stays random. Grouping is done epoch by epoch,
# as HF's length-grouped sampler does: each pass over the files is shuffled as a whole
# (a buffer of up to GROUP_SHUFFLE_BUFFER records), the N mod batch_size records at
# its end (random ones) are left out of that pass so that every batch is full, the
# rest is cut into windows of GROUP_WINDOW batches (the last one shorter), each
# window sorted by length, split into batches and its batches put in a random order;
# then the next pass. A window never spans two epochs, so every epoch sees each of
# its floor(N / batch_size) x batch_size examples exactly once, however short the run.
GROUP_WINDOW = 50
GROUP_SHUFFLE_BUFFER = 200000


def _shuffled_batches(batches, group, seed):
    """The batches of each window of `group` consecutive batches in a random order."""
    seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)

    def permute(window, window_seed):
        count = tf.shape(window["input_mask"])[0]
        keys = tf.random.stateless_uniform([count], seed=window_seed)
        order = tf.argsort(keys)
        return {name: tf.gather(t, order) for name, t in window.items()}
    windows = tf.data.Dataset.zip((batches.batch(group), seeds))
    return windows.map(_as_written(permute)).unbatch()


def length_grouped_batches(d, batch_size, seed=None, group=GROUP_WINDOW):
    """Batches of `batch_size` from ONE pass over a stream of examples, grouped by length.

    The last len(d) mod batch_size examples are dropped (every batch full, as in
    training); the rest is cut into windows of `group` x batch_size examples (the
    last window shorter), each sorted by example_lengths (longest first), cut into
    batches, and the batches of each window shuffled. The examples of a window are
    those of the same window of `d`: the grouping only reorders within it. Repeat
    the result for several epochs: windows then never cross an epoch.
    """
    d = d.batch(batch_size, drop_remainder=True).unbatch()
    d = d.batch(batch_size * group).map(_as_written(_sort_window)).unbatch()
    return _shuffled_batches(d.batch(batch_size, drop_remainder=True), group, seed)


def _replicas_per_pipeline(input_context):
    if input_context is None:
        return 1
    return max(1, input_context.num_replicas_in_sync // input_context.num_input_pipelines)


def _padded_batches(d, batch_size, replicas):
    """Batches of `batch_size`, the last one padded; their number a multiple of `replicas`.

    A distributed dataset hands consecutive batches to the replicas and drops a last
    group that cannot give every replica a batch of the static size: whole batches
    of padding rows (is_real_example = 0) complete that group, so no example is lost.
    """
    d = d.batch(batch_size, drop_remainder=False)
    d = d.map(_as_written(lambda b: _pad_batch(b, batch_size)))
    if replicas > 1:
        d = d.batch(replicas, drop_remainder=False)
        d = d.map(_as_written(lambda group: _pad_batch(group, replicas))).unbatch()
    return d


def dataset_fn_for(input_files, spec, batch_size, is_training, seed=None, trim_padding=False,
                   bucket_width=None, group_by_length=False):
    """dataset_fn(input_context) for training.Runner.train / predict over record files.

    Training: the reference's pipeline (repeated, shuffled with `seed`); otherwise the
    files read once in order, the last batch padded (is_real_example = 0), never dropped.
    trim_padding: training batches trimmed (same examples, same order); evaluation and
    prediction batches grouped by length and trimmed, which Runner.predict turns back
    into the batches of the input order (see make_dataset's `buckets`).
    bucket_width: trimmed lengths are multiples of it (default TRAINING_BUCKET_WIDTH
    for training, DEFAULT_BUCKET_WIDTH otherwise).
    group_by_length: (training) batches of examples of similar length, see
    make_dataset's `group_by_length`.
    """
    if bucket_width is None:
        bucket_width = TRAINING_BUCKET_WIDTH if is_training else DEFAULT_BUCKET_WIDTH

    def dataset_fn(input_context=None):
        return make_dataset(input_files, spec, batch_size, is_training,
                            input_context=input_context, pad_final_batch=not is_training,
                            seed=seed, trim=trim_padding,
                            buckets=trim_padding and not is_training, bucket_width=bucket_width,
                            group_by_length=group_by_length and is_training)
    if not is_training:  # what an in-memory prediction needs to make the same batches
        dataset_fn.source = PredictSource(list(input_files), spec, batch_size, trim_padding,
                                          bucket_width)
    return dataset_fn


# An evaluation / prediction input of dataset_fn_for (its `source` attribute): its files,
# spec, global batch size, whether batches are trimmed (and then length-sorted: buckets)
# and the trimmed lengths' multiple. training.Runner.predict reads records kept in memory
# (records_in_memory) through it, as memory_batches.py makes make_dataset's batches.
PredictSource = collections.namedtuple(
    "PredictSource", ["files", "spec", "batch_size", "trim", "bucket_width"])


def _files_dataset(input_files, input_context):
    """(dataset of file names, whether they are sharded across input pipelines)."""
    files = tf.data.Dataset.from_tensor_slices(tf.constant(input_files))
    if input_context is None or input_context.num_input_pipelines <= 1:
        return files, True
    if len(input_files) >= input_context.num_input_pipelines:
        return files.shard(input_context.num_input_pipelines,
                           input_context.input_pipeline_id), True
    return files, False


def _check_bucketing(is_training, repeat, pad_final_batch, trim):
    if is_training or repeat or not pad_final_batch or not trim:
        raise ValueError("buckets=True groups the examples of a single ordered pass: it needs "
                         "is_training=False, repeat=False, pad_final_batch=True and trim=True")


def _record_stream(input_files, input_context, is_training, repeat, num_cpu_threads,
                   shuffle_buffer, seed, group_by_length):
    """The serialized records make_dataset decodes, in the reference's order (see there)."""
    files, sharded_by_file = _files_dataset(input_files, input_context)
    if is_training:
        # Grouped: the repeat comes after a whole-epoch shuffle, not before the buffer.
        files = files.repeat() if repeat and not group_by_length else files
        files = files.shuffle(len(input_files), seed=seed)
        d = files.interleave(
            tf.data.TFRecordDataset,
            cycle_length=max(1, min(num_cpu_threads, len(input_files))),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=seed is not None)
    else:
        d = tf.data.TFRecordDataset(files)
    if not sharded_by_file:
        d = d.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    if not is_training:
        return d.repeat() if repeat else d
    if group_by_length:
        return d.shuffle(GROUP_SHUFFLE_BUFFER, seed=seed, reshuffle_each_iteration=True)
    return d.shuffle(shuffle_buffer, seed=seed)


def make_dataset(input_files, spec, batch_size, is_training, input_context=None,
                 repeat=None, pad_final_batch=False, num_cpu_threads=4,
                 shuffle_buffer=100, seed=None, trim=False, buckets=False,
                 bucket_width=DEFAULT_BUCKET_WIDTH, bucket_window=DEFAULT_BUCKET_WINDOW,
                 group_by_length=False, drop_remainder=True):
    """Builds the tf.data pipeline the reference's input_fn builds.

    Training: the files are repeated and shuffled, up to `num_cpu_threads` are
    read at once, records shuffled in a buffer of 100, the remainder dropped.
    Evaluation/prediction: files read in order, no shuffling; with
    `pad_final_batch` the last batch is padded (is_real_example = 0) instead of
    dropped, so every example is seen and every batch has a static shape (and,
    with several replicas per input pipeline, whole padding batches complete the
    last group of replicas, which a distributed dataset would otherwise drop).

    Args:
      input_files: list of TFRecord files (see fileutil.expand_input_files).
      spec: feature spec, e.g. pretraining_features(...).
      batch_size: the GLOBAL batch size; with `input_context` the per-replica
        size is derived from it.
      is_training: selects the training pipeline described above.
      input_context: tf.distribute.InputContext, to shard across input
        pipelines (workers).
      repeat: repeat the data forever; defaults to `is_training`.
      seed: shuffle seed, for deterministic runs.
      trim: cut each batch's per-token features (sequence_feature_names(spec)) to
        its longest example rounded up to a multiple of `bucket_width` (trim_batch);
        their sequence axis becomes None in the element_spec. Same batches otherwise.
      buckets: (evaluation/prediction, with pad_final_batch and trim) sort the
        examples by length within windows of `bucket_window` per-replica batches
        before batching, and number them: feature EXAMPLE_INDEX, the input position
        (-1 on padding rows), from which training.Runner.predict restores the
        input order and batches. As many batches of the same size as without it.
      group_by_length: (training) instead of the reference's shuffle buffer over the
        repeated files, each pass over the files is shuffled whole (up to
        GROUP_SHUFFLE_BUFFER records) and made into batches by
        length_grouped_batches(): similar lengths together, in random order, still
        `batch_size` examples each; then the next pass. Every epoch holds each example
        once, but for the N mod batch_size left out of it at random.
      drop_remainder: without pad_final_batch or group_by_length, False keeps a
        last partial batch (the reference's run_squad predict input) instead of
        dropping it.

    Returns:
      A dataset of dicts of [batch, ...] int32 / float32 tensors.
    """
    input_files = [input_files] if isinstance(input_files, str) else list(input_files)
    repeat = is_training if repeat is None else repeat
    if buckets:
        _check_bucketing(is_training, repeat, pad_final_batch, trim)
    if group_by_length and not is_training:
        raise ValueError("group_by_length is for training batches (is_training=True)")
    if input_context is not None:
        batch_size = input_context.get_per_replica_batch_size(batch_size)
    d = _record_stream(input_files, input_context, is_training, repeat, num_cpu_threads,
                       shuffle_buffer, seed, group_by_length)
    d = d.map(_as_written(lambda r: decode_record(r, spec)),
              num_parallel_calls=tf.data.AUTOTUNE)
    if buckets:
        d = _length_sorted(d, batch_size * bucket_window)
    if group_by_length:
        d = length_grouped_batches(d, batch_size, seed)
        d = d.repeat() if repeat else d
    elif pad_final_batch and not repeat:
        d = _padded_batches(d, batch_size, _replicas_per_pipeline(input_context))
    else:
        d = d.batch(batch_size, drop_remainder=drop_remainder)
    if trim:
        names = sequence_feature_names(spec)
        d = d.map(_as_written(lambda b: trim_batch(b, names, bucket_width)),
                  num_parallel_calls=tf.data.AUTOTUNE)
    return d.prefetch(tf.data.AUTOTUNE)


def in_memory_input_fn(columns, is_training=False, drop_remainder=False):
    """The reference's in-memory input_fn(params): batches of params["batch_size"] rows.

    columns: feature name -> numpy array [N, ...] (small sets only: the data
    becomes constants of the graph). Training repeats it and shuffles in a
    buffer of 100.
    """
    def input_fn(params):
        d = tf.data.Dataset.from_tensor_slices(columns)
        if is_training:
            d = d.repeat().shuffle(100)
        return d.batch(params["batch_size"], drop_remainder=drop_remainder)
    return input_fn
