"""Pretraining records serialized straight from token ids, without protobuf objects.

`ExampleEncoder.encode` produces, for one pretraining instance, exactly the bytes
that `tf.train.Example(...).SerializeToString(deterministic=True)` gives for the
reference's seven features, several times faster: the fast path of
create_pretraining_data.py works on varint-encoded token ids and joins them.

`InstancePacker` turns those records into packed rows (`--pack_sequences`):
several instances side by side in one row of max_seq_length tokens, with the
features `packed_features` describes.

`Symbols` / `encoder_for` give create_pretraining_data's algorithm the token
values it works on (WordPiece strings, or the varints of the fast path).

`write_output` writes records round-robin into the output files and logs the
first ones as the original script does; `write_instances` does the same for
TrainingInstance objects through the protobuf API (the reference's way).
"""
import collections
import itertools
import struct

from absl import logging

from bert import tokenization  # ours, whatever tokenization.py a user's folder holds
from bert_tf2 import fileutil
from bert_tf2 import logs
from bert_tf2.pretraining import word_boundaries

tf = fileutil.tensorflow  # imported on first use (a worker that only encodes records never does)


def _input_pipeline():
    """bert_tf2.input_pipeline (TensorFlow, NumPy): imported where records are written or
    built as protobufs, never in a worker that only encodes them."""
    from bert_tf2 import input_pipeline  # pylint: disable=import-outside-toplevel
    return input_pipeline


def varint(value):
    """The protobuf varint encoding of a non-negative integer."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint_table(size):
    """[varint(i) for i in range(size)], built a byte count at a time (a vocabulary's
    ids: one or two bytes, faster than a call per id)."""
    table = [bytes((i,)) for i in range(min(size, 0x80))]
    table += [bytes(((i & 0x7F) | 0x80, i >> 7)) for i in range(0x80, min(size, 0x4000))]
    table += [varint(i) for i in range(0x4000, size)]
    return table


class EntryPrefixes(dict):
    """payload length -> the bytes of a Features map entry that precede the payload."""

    def __init__(self, key, list_tag):
        super(EntryPrefixes, self).__init__()
        self.key = key
        self.list_tag = list_tag

    def __missing__(self, size):
        # entry = {1: key, 2: Feature{list_tag: List{1 (packed): payload}}}
        value_list_header = b"\x0a" + varint(size) if size else b""
        feature_header = self.list_tag + varint(len(value_list_header) + size)
        feature_size = len(feature_header) + len(value_list_header) + size
        body_header = (b"\x0a" + varint(len(self.key)) + self.key +
                       b"\x12" + varint(feature_size))
        body_size = len(body_header) + feature_size
        prefix = (b"\x0a" + varint(body_size) + body_header + feature_header +
                  value_list_header)
        self[size] = prefix
        return prefix


_INT64_LIST, _FLOAT_LIST = b"\x1a", b"\x12"


class ExampleEncoder(object):
    """Serializes pretraining tf.train.Examples directly from varint-encoded tokens.

    Produces the bytes `tf.train.Example.SerializeToString(deterministic=True)`
    gives for the same features (map entries in sorted key order, packed values),
    at a fraction of the cost of building protobuf objects: a token's varint is
    its share of the packed input_ids, and every byte before a payload depends
    only on the payload's length, so those are cached.

    Attributes:
      varints: varints[i] is the encoding of the integer i, for every vocabulary
        id and every position.
    """

    def __init__(self, vocab, max_seq_length, max_predictions_per_seq):
        self.max_seq_length = L = max_seq_length
        self.max_predictions = P = max_predictions_per_seq
        largest = max(max(vocab.values()) if vocab else 0, L)
        self.varints = varint_table(largest + 1)
        self._zeros = [b"\x00" * i for i in range(max(L, P) + 1)]
        self._ones = [b"\x01" * i for i in range(L + 1)]
        self._input_ids = EntryPrefixes(b"input_ids", _INT64_LIST)
        self._masked_lm_ids = EntryPrefixes(b"masked_lm_ids", _INT64_LIST)
        self._masked_lm_positions = EntryPrefixes(b"masked_lm_positions", _INT64_LIST)
        self._example_prefixes = {}
        # Entries whose size is fixed: prefix (+ payload) built once.
        self._input_mask_prefix = EntryPrefixes(b"input_mask", _INT64_LIST)[L]
        self._segment_ids_prefix = EntryPrefixes(b"segment_ids", _INT64_LIST)[L]
        weights = EntryPrefixes(b"masked_lm_weights", _FLOAT_LIST)[4 * P]
        self._weights = [weights + struct.pack("<%df" % P, *([1.0] * m + [0.0] * (P - m)))
                         for m in range(P + 1)]
        labels = EntryPrefixes(b"next_sentence_labels", _INT64_LIST)[1]
        self._next_sentence = (labels + b"\x00", labels + b"\x01")

    def encode(self, tokens, num_segment_a, positions, labels, is_random_next):
        """The serialized Example of one instance (unpadded; padding is added here).

        tokens, labels: varint-encoded ids; positions: ints; num_segment_a: the
        number of leading tokens with segment id 0.
        """
        n, m = len(tokens), len(positions)
        if n > self.max_seq_length or m > self.max_predictions:
            raise ValueError("example of %d tokens / %d predictions exceeds "
                             "max_seq_length %d / max_predictions_per_seq %d"
                             % (n, m, self.max_seq_length, self.max_predictions))
        pad = self._zeros[self.max_seq_length - n]
        slots = self._zeros[self.max_predictions - m]
        ids = b"".join(tokens)
        label_ids = b"".join(labels)
        places = b"".join([self.varints[p] for p in positions])
        body = b"".join((
            self._input_ids[len(ids) + len(pad)], ids, pad,
            self._input_mask_prefix, self._ones[n], pad,
            self._masked_lm_ids[len(label_ids) + len(slots)], label_ids, slots,
            self._masked_lm_positions[len(places) + len(slots)], places, slots,
            self._weights[m],
            self._next_sentence[1 if is_random_next else 0],
            self._segment_ids_prefix, self._zeros[num_segment_a],
            self._ones[n - num_segment_a], pad,
        ))
        size = len(body)
        prefix = self._example_prefixes.get(size)
        if prefix is None:
            prefix = self._example_prefixes[size] = b"\x0a" + varint(size)
        return prefix + body


# The tokens the algorithm places itself (never masked, never a segment's text).
CLS, SEP, MASK = "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = (CLS, SEP, MASK)


class Symbols(collections.namedtuple(
        "Symbols", "cls sep mask replacements is_continuation starts_word")):
    """What create_pretraining_data's algorithm knows about the token values it handles.

    The same code runs on WordPiece strings (the reference's functions) and, in the
    fast pipeline, on each token's id already encoded as protobuf varint bytes,
    so that a record's input_ids are one b"".join away. Both map one-to-one to
    vocabulary entries, so both lead to the same decisions.

    Attributes:
      cls, sep, mask: the values of [CLS], [SEP], [MASK].
      replacements: the values a "random word" is drawn from, in vocabulary
        order (the original draws `vocab_words[randint(0, len - 1)]`).
      is_continuation: callable, True for "##..." WordPieces.
      starts_word: callable, its negation.
    """
    __slots__ = ()

    @classmethod
    def for_strings(cls_, vocab_words):
        """Symbols for WordPiece strings (the plain-Python path)."""
        return cls_(CLS, SEP, MASK, list(vocab_words), lambda t: t.startswith("##"),
                    lambda t: not t.startswith("##"))

    @classmethod
    def for_encoded(cls_, vocab, varints, joined=False):
        """Symbols of varint ids (varints[i]: id i); joined: word_boundaries' marks too."""
        # The caller checks first, naming --vocab_file (loaders.check_vocab_tokens).
        missing = [t for t in SPECIAL_TOKENS if t not in vocab]
        if missing:
            raise ValueError("the vocabulary has no %s token" % " / ".join(missing))
        pieces = frozenset(varints[i] for t, i in vocab.items() if t.startswith("##"))
        words = frozenset(varints[i] for t, i in vocab.items() if not t.startswith("##"))
        tests = (pieces.__contains__, words.__contains__)
        return cls_(varints[vocab[CLS]], varints[vocab[SEP]], varints[vocab[MASK]],
                    [varints[i] for i in vocab.values()],
                    *(word_boundaries.joined_tests(*tests) if joined else tests))


Encoding = collections.namedtuple("Encoding", "varints encode symbols")


def encoder_for(options, vocab):
    """The fast path's Encoding: varints, ExampleEncoder.encode and the Symbols of varints.

    options: a PretrainingOptions (lengths, and whether a word segmentation marks tokens).
    """
    encoder = ExampleEncoder(vocab, options.max_seq_length, options.max_predictions_per_seq)
    return Encoding(encoder.varints, encoder.encode, Symbols.for_encoded(
        vocab, encoder.varints, options.word_segmentation is not None))


# ---------------------------------------------------------------------------
# Packed rows (create_pretraining_data --pack_sequences)
# ---------------------------------------------------------------------------

# The features of a packed row, in the order the log shows them.
PACKED_FEATURE_ORDER = (
    "input_ids", "input_mask", "segment_ids", "position_ids", "instance_ids",
    "masked_lm_positions", "masked_lm_ids", "masked_lm_weights", "next_sentence_labels",
    "next_sentence_positions", "next_sentence_weights")
# Features only packed records have: their presence tells packed records apart.
PACKED_ONLY_FEATURES = ("position_ids", "instance_ids", "next_sentence_positions",
                        "next_sentence_weights")


def packed_features(max_seq_length, max_predictions_per_seq, max_instances_per_row):
    """Feature spec of packed rows (L = max_seq_length, K = max_instances_per_row).

    input_ids, input_mask, segment_ids, position_ids, instance_ids   int64 [L]
    masked_lm_positions, masked_lm_ids            int64 [max_predictions_per_seq * K]
    masked_lm_weights                             float [max_predictions_per_seq * K]
    next_sentence_labels, next_sentence_positions int64 [K]
    next_sentence_weights                         float [K]
    """
    seq = tf.io.FixedLenFeature([max_seq_length], tf.int64)
    slots = max_predictions_per_seq * max_instances_per_row
    preds = tf.io.FixedLenFeature([slots], tf.int64)
    per_instance = tf.io.FixedLenFeature([max_instances_per_row], tf.int64)
    return {
        "input_ids": seq, "input_mask": seq, "segment_ids": seq,
        "position_ids": seq, "instance_ids": seq,
        "masked_lm_positions": preds, "masked_lm_ids": preds,
        "masked_lm_weights": tf.io.FixedLenFeature([slots], tf.float32),
        "next_sentence_labels": per_instance,
        "next_sentence_positions": per_instance,
        "next_sentence_weights": tf.io.FixedLenFeature([max_instances_per_row], tf.float32),
    }


Instance = collections.namedtuple(
    "Instance", "input_ids segment_ids masked_lm_positions masked_lm_ids next_sentence_label")


def decode_instance(record):
    """The `Instance` (unpadded lists) of one serialized unpacked pretraining record."""
    feature = tf.train.Example.FromString(record).features.feature
    length = sum(feature["input_mask"].int64_list.value)
    weights = feature["masked_lm_weights"].float_list.value
    count = sum(1 for w in weights if w > 0)
    return Instance(
        input_ids=list(feature["input_ids"].int64_list.value[:length]),
        segment_ids=list(feature["segment_ids"].int64_list.value[:length]),
        masked_lm_positions=list(feature["masked_lm_positions"].int64_list.value[:count]),
        masked_lm_ids=list(feature["masked_lm_ids"].int64_list.value[:count]),
        next_sentence_label=int(feature["next_sentence_labels"].int64_list.value[0]))


def _int64s(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def _floats(values):
    return tf.train.Feature(float_list=tf.train.FloatList(value=values))


class InstancePacker(object):
    """Packs pretraining instances greedily, in their order, into rows of max_seq_length.

    An instance joins the current row while the row has room for its tokens and
    fewer than max_instances_per_row instances; otherwise it starts a new row.
    Counts what it packed: num_instances, num_rows, num_tokens (real tokens).
    """

    def __init__(self, max_seq_length, max_predictions_per_seq, max_instances_per_row):
        if max_instances_per_row < 1:
            raise ValueError("--max_instances_per_row must be at least 1, got %d"
                             % max_instances_per_row)
        self.max_seq_length = max_seq_length
        self.max_predictions = max_predictions_per_seq
        self.max_instances = max_instances_per_row
        self.num_instances = self.num_rows = self.num_tokens = 0

    def pack_records(self, records):
        """Yields the serialized packed rows of serialized unpacked records (an iterable)."""
        return self.pack(decode_instance(record) for record in records)

    def pack(self, instances):
        """Yields the serialized packed rows of `Instance`s (an iterable)."""
        row, used = [], 0
        for instance in instances:
            n = len(instance.input_ids)
            if n > self.max_seq_length or len(instance.masked_lm_ids) > self.max_predictions:
                raise ValueError("instance of %d tokens / %d predictions exceeds "
                                 "max_seq_length %d / max_predictions_per_seq %d"
                                 % (n, len(instance.masked_lm_ids), self.max_seq_length,
                                    self.max_predictions))
            if row and (used + n > self.max_seq_length or len(row) >= self.max_instances):
                yield self.encode_row(row)
                row, used = [], 0
            row.append(instance)
            used += n
        if row:
            yield self.encode_row(row)

    def row_features(self, row):
        """{name: list of values} of one packed row made of the `Instance`s `row`."""
        L, K = self.max_seq_length, self.max_instances
        slots = self.max_predictions * K
        values = {name: [] for name in PACKED_FEATURE_ORDER}
        for number, instance in enumerate(row, 1):
            start, n = len(values["input_ids"]), len(instance.input_ids)
            values["input_ids"] += instance.input_ids
            values["segment_ids"] += instance.segment_ids
            values["position_ids"] += range(n)
            values["instance_ids"] += [number] * n
            values["masked_lm_positions"] += [start + p for p in instance.masked_lm_positions]
            values["masked_lm_ids"] += instance.masked_lm_ids
            values["next_sentence_labels"].append(instance.next_sentence_label)
            values["next_sentence_positions"].append(start)
        values["input_mask"] = [1] * len(values["input_ids"])
        values["masked_lm_weights"] = [1.0] * len(values["masked_lm_ids"])
        values["next_sentence_weights"] = [1.0] * len(row)
        for name in PACKED_FEATURE_ORDER:
            if name.startswith("masked_lm"):
                size = slots
            elif name.startswith("next_sentence"):
                size = K
            else:
                size = L
            pad = 0.0 if name.endswith("weights") else 0
            values[name] += [pad] * (size - len(values[name]))
        return values

    def encode_row(self, row):
        """The serialized tf.train.Example of one packed row (see row_features)."""
        values = self.row_features(row)
        self.num_instances += len(row)
        self.num_rows += 1
        self.num_tokens += sum(len(instance.input_ids) for instance in row)
        feature = {name: (_floats(v) if name.endswith("weights") else _int64s(v))
                   for name, v in values.items()}
        example = tf.train.Example(features=tf.train.Features(feature=feature))
        return example.SerializeToString(deterministic=True)

    def summary(self):
        """One line: how many instances went into how many rows, and the real tokens."""
        rows = max(self.num_rows, 1)
        return ("Packed %d instances into %d rows (%.2f instances per row, %.1f%% of the "
                "%d-token rows are real tokens)"
                % (self.num_instances, self.num_rows, self.num_instances / rows,
                   100.0 * self.num_tokens / (rows * self.max_seq_length),
                   self.max_seq_length))


# ---------------------------------------------------------------------------
# Writing records (create_pretraining_data's output files)
# ---------------------------------------------------------------------------

# Number of examples shown in the log, as the original script does.
NUM_LOGGED_EXAMPLES = 20

# The features of an unpacked record, in the order the log shows them.
FEATURE_ORDER = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                 "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")


def log_files(input_files, output_files):
    """Logs the input and output files as the original script does."""
    logging.info("*** Reading from input files ***")
    for path in input_files:
        logging.info("  %s", path)
    logging.info("*** Writing to output files ***")
    for path in output_files:
        logging.info("  %s", path)


def log_example(tokens, features, feature_order=FEATURE_ORDER):
    """Logs one example the way the original script does (tokens, then each feature),
    when the log shows details (logs.details_shown)."""
    if not logs.details_shown():
        return
    logging.info("*** Example ***")
    logging.info("tokens: %s", " ".join(tokenization.printable_text(t) for t in tokens))
    for name in feature_order:
        feature = features[name]
        values = feature.int64_list.value or feature.float_list.value
        logging.info("%s: %s", name, " ".join(str(v) for v in values))


def instance_features(instance, tokenizer, max_seq_length, max_predictions_per_seq):
    """The features (name -> tf.train.Feature, in FEATURE_ORDER) of a TrainingInstance.

    Built with the protobuf API from WordPiece strings: the plain-Python form of
    what `ExampleEncoder.encode` writes.
    """
    input_ids = tokenizer.convert_tokens_to_ids(instance.tokens)
    if len(input_ids) > max_seq_length:
        raise ValueError("instance of %d tokens exceeds max_seq_length %d"
                         % (len(input_ids), max_seq_length))
    padding = [0] * (max_seq_length - len(input_ids))
    label_ids = tokenizer.convert_tokens_to_ids(instance.masked_lm_labels)
    slots = [0] * (max_predictions_per_seq - len(label_ids))
    pipeline = _input_pipeline()
    int_feature, float_feature = pipeline.int_feature, pipeline.float_feature
    features = collections.OrderedDict()
    features["input_ids"] = int_feature(input_ids + padding)
    features["input_mask"] = int_feature([1] * len(input_ids) + padding)
    features["segment_ids"] = int_feature(list(instance.segment_ids) + padding)
    features["masked_lm_positions"] = int_feature(list(instance.masked_lm_positions) + slots)
    features["masked_lm_ids"] = int_feature(label_ids + slots)
    features["masked_lm_weights"] = float_feature([1.0] * len(label_ids) + [0.0] * len(slots))
    features["next_sentence_labels"] = int_feature([1 if instance.is_random_next else 0])
    return features


def instance_record(instance, tokenizer, max_seq_length, max_predictions_per_seq):
    """The serialized (unpacked) tf.train.Example of a TrainingInstance."""
    features = instance_features(instance, tokenizer, max_seq_length, max_predictions_per_seq)
    example = tf.train.Example(features=tf.train.Features(feature=features))
    return example.SerializeToString(deterministic=True)


def write_instances(instances, tokenizer, max_seq_length, max_predictions_per_seq,
                    output_files):
    """Writes TrainingInstances round-robin to `output_files`; returns the count.

    Logs the first NUM_LOGGED_EXAMPLES examples and the total.
    """
    with _input_pipeline().RecordWriter(output_files) as writer:
        for index, instance in enumerate(instances):
            features = instance_features(instance, tokenizer, max_seq_length,
                                         max_predictions_per_seq)
            writer.write(features)
            if index < NUM_LOGGED_EXAMPLES:
                log_example(instance.tokens, features)
    logging.info("Wrote %d total instances", writer.num_written)
    return writer.num_written


def write_serialized(records, output_files, vocab, feature_order=FEATURE_ORDER,
                     what="instances"):
    """Writes serialized Examples round-robin, logging the first ones; returns the count.

    vocab: token -> id, to show the tokens of the logged examples.
    feature_order: the features logged.
    """
    records = iter(records)
    inv_vocab = {i: t for t, i in vocab.items()}
    with _input_pipeline().RecordWriter(output_files) as writer:
        for record in itertools.islice(records, NUM_LOGGED_EXAMPLES):
            features = tf.train.Example.FromString(record).features.feature
            tokens = [inv_vocab[i] for i in features["input_ids"].int64_list.value]
            tokens = tokens[:sum(features["input_mask"].int64_list.value)]
            log_example(tokens, features, feature_order)
            writer.write_serialized(record)
        write = writer.write_serialized
        for record in records:
            write(record)
    logging.info("Wrote %d total %s", writer.num_written, what)
    return writer.num_written


def write_output(records, output_files, vocab, packer=None, packed=False):
    """Writes serialized `records`, packed into rows first with an InstancePacker `packer`.

    packed: the records are packed rows already.
    Returns the number of records written (rows when packed).
    """
    if packed:
        return write_serialized(records, output_files, vocab, PACKED_FEATURE_ORDER,
                                what="packed rows")
    if packer is None:
        return write_serialized(records, output_files, vocab)
    count = write_serialized(packer.pack_records(records), output_files, vocab,
                             PACKED_FEATURE_ORDER, what="packed rows")
    logging.info("%s", packer.summary())
    return count
