"""pretraining_records.py: the fast encoder writes exactly protobuf's bytes."""
import collections
import random

import tensorflow as tf

from bert_tf2 import input_pipeline
from bert_tf2.pretraining import pretraining_records

_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "##s", "sat"]


def test_varint_table_is_varint_of_each_number():
    for size in (0, 1, 127, 128, 129, 16383, 16384, 16385, 30522, 300001):
        table = pretraining_records.varint_table(size)
        assert len(table) == size
        assert table == [pretraining_records.varint(i) for i in range(size)], size
    assert pretraining_records.varint_table(300001)[300000] == bytes((0xE0, 0xA7, 0x12))


def test_encoder_equals_protobuf_serialization():
    vocab = collections.OrderedDict((t, i) for i, t in enumerate(_VOCAB))
    vocab["big_id"] = 300000
    encoder = pretraining_records.ExampleEncoder(vocab, 200, 30)
    rng = random.Random(0)
    for _ in range(50):
        n, m = rng.randint(5, 200), rng.randint(0, 30)
        ids = [rng.choice([0, 1, 127, 128, 16383, 16384, 300000, rng.randint(0, 300000)])
               for _ in range(n)]
        positions = sorted(rng.sample(range(n), min(m, n)))
        labels = [rng.randint(0, 300000) for _ in positions]
        num_a = rng.randint(2, n - 1)
        is_random = rng.random() < 0.5
        varint = pretraining_records.varint
        mine = encoder.encode([varint(i) for i in ids], num_a, positions,
                              [varint(i) for i in labels], is_random)
        pad, slots = [0] * (200 - n), [0] * (30 - len(positions))
        example = tf.train.Example(features=tf.train.Features(feature={
            "input_ids": input_pipeline.int_feature(ids + pad),
            "input_mask": input_pipeline.int_feature([1] * n + pad),
            "segment_ids": input_pipeline.int_feature([0] * num_a + [1] * (n - num_a) + pad),
            "masked_lm_positions": input_pipeline.int_feature(positions + slots),
            "masked_lm_ids": input_pipeline.int_feature(labels + slots),
            "masked_lm_weights": input_pipeline.float_feature(
                [1.0] * len(positions) + [0.0] * len(slots)),
            "next_sentence_labels": input_pipeline.int_feature([int(is_random)]),
        }))
        assert mine == example.SerializeToString(deterministic=True)
