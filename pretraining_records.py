"""Pretraining records serialized straight from token ids, without protobuf objects.

`ExampleEncoder.encode` produces, for one pretraining instance, exactly the bytes
that `tf.train.Example(...).SerializeToString(deterministic=True)` gives for the
reference's seven features, several times faster: the fast path of
create_pretraining_data.py works on varint-encoded token ids and joins them.
"""
import struct


def varint(value):
    """The protobuf varint encoding of a non-negative integer."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


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
        self.varints = [varint(i) for i in range(largest + 1)]
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
