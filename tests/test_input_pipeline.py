"""input_pipeline.py: round-robin records, datasets and padding."""
import numpy as np
import pytest
import tensorflow as tf

from bert_tf2 import input_pipeline


def write_records(path, n, seq=4):
    with input_pipeline.RecordWriter(str(path)) as w:
        for i in range(n):
            w.write({"input_ids": input_pipeline.int_feature([i] * seq),
                     "label_ids": input_pipeline.int_feature([i % 2]),
                     "score": input_pipeline.float_feature([i / 2])})


SPEC = {"input_ids": tf.io.FixedLenFeature([4], tf.int64),
        "label_ids": tf.io.FixedLenFeature([], tf.int64),
        "score": tf.io.FixedLenFeature([], tf.float32)}


def test_record_writer_round_robin_and_failure(tmp_path):
    files = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
    with input_pipeline.RecordWriter(files) as w:
        for i in range(5):
            w.write({"x": input_pipeline.int_feature([i])})
    counts = [sum(1 for _ in tf.data.TFRecordDataset(f)) for f in files]
    assert counts == [3, 2]
    with pytest.raises(ValueError):
        with input_pipeline.RecordWriter(str(tmp_path / "c.tfrecord")) as w:
            w.write({"x": input_pipeline.int_feature([1])})
            raise ValueError("bad input")
    assert not (tmp_path / "c.tfrecord").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tfrecord", "b.tfrecord"]


def test_eval_dataset_is_ordered_int32_and_padded(tmp_path):
    write_records(tmp_path / "r.tfrecord", 5)
    d = input_pipeline.make_dataset([str(tmp_path / "r.tfrecord")], SPEC, 2, is_training=False,
                                    pad_final_batch=True)
    batches = list(d.as_numpy_iterator())
    assert len(batches) == 3
    assert batches[0]["input_ids"].dtype == np.int32
    assert batches[0]["score"].dtype == np.float32
    ids = np.concatenate([b["input_ids"][:, 0] for b in batches])
    real = np.concatenate([b["is_real_example"] for b in batches])
    np.testing.assert_array_equal(ids, [0, 1, 2, 3, 4, 0])
    np.testing.assert_array_equal(real, [1, 1, 1, 1, 1, 0])


def test_training_dataset_repeats_shuffles_and_drops_remainder(tmp_path):
    write_records(tmp_path / "r.tfrecord", 5)
    d = input_pipeline.make_dataset([str(tmp_path / "r.tfrecord")], SPEC, 4, is_training=True,
                                    seed=3)
    # 25 batches: the order depends on the global seed an earlier test may have set, and
    # 100 draws see every one of the 5 records whatever the order (20 could miss one).
    batches = list(d.take(25).as_numpy_iterator())
    assert all(b["input_ids"].shape == (4, 4) for b in batches)
    seen = np.concatenate([b["input_ids"][:, 0] for b in batches])
    assert set(seen) == {0, 1, 2, 3, 4}
    again = list(input_pipeline.make_dataset([str(tmp_path / "r.tfrecord")], SPEC, 4,
                                             is_training=True, seed=3).take(25).as_numpy_iterator())
    np.testing.assert_array_equal(seen, np.concatenate([b["input_ids"][:, 0] for b in again]))


def test_feature_specs_have_reference_names():
    assert sorted(input_pipeline.pretraining_features(128, 20)) == sorted([
        "input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
        "masked_lm_weights", "next_sentence_labels"])
    assert input_pipeline.pretraining_features(128, 20)["masked_lm_weights"].dtype == tf.float32
    assert sorted(input_pipeline.classifier_features(8)) == sorted([
        "input_ids", "input_mask", "segment_ids", "label_ids", "is_real_example"])
    assert "start_positions" in input_pipeline.squad_features(8, True)
    assert "start_positions" not in input_pipeline.squad_features(8, False)


class _Vocab:
    def convert_tokens_to_ids(self, tokens):
        return [len(t) for t in tokens]


def test_truncate_seq_pair_pops_from_the_longer_b_on_ties():
    a, b = list("abcde"), list("xyz")
    input_pipeline.truncate_seq_pair(a, b, 6)
    assert (a, b) == (list("abc"), list("xyz"))
    a, b = list("ab"), list("xy")
    input_pipeline.truncate_seq_pair(a, b, 3)
    assert (a, b) == (list("ab"), list("x"))


def test_pack_pair_layout_and_padding():
    tokens, ids, mask, seg = input_pipeline.pack_pair(["aa", "b"], ["ccc"], 8, _Vocab())
    assert tokens == ["[CLS]", "aa", "b", "[SEP]", "ccc", "[SEP]"]
    assert ids == [5, 2, 1, 5, 3, 5, 0, 0]
    assert mask == [1, 1, 1, 1, 1, 1, 0, 0]
    assert seg == [0, 0, 0, 0, 1, 1, 0, 0]
    tokens, ids, _, seg = input_pipeline.pack_pair(list("abcdef"), None, 5, _Vocab())
    assert tokens == ["[CLS]", "a", "b", "c", "[SEP]"] and seg == [0] * 5


def write_varied_lengths(path, n, seq=16, seed=0):
    """n classifier records whose first token is the example's id + 1, lengths 2..seq."""
    rng = np.random.RandomState(seed)
    lengths = rng.randint(2, seq + 1, size=n)
    with input_pipeline.RecordWriter(str(path)) as w:
        for i, length in enumerate(lengths):
            mask = [1] * length + [0] * (seq - length)
            w.write({"input_ids": input_pipeline.int_feature(
                         [i + 1] + [7] * (length - 1) + [0] * (seq - length)),
                     "input_mask": input_pipeline.int_feature(mask),
                     "segment_ids": input_pipeline.int_feature([0] * seq),
                     "label_ids": input_pipeline.int_feature([i % 2]),
                     "is_real_example": input_pipeline.int_feature([1])})
    return lengths


def _grouped_ids(path, batch_size, num_batches, seed=5):
    d = input_pipeline.dataset_fn_for([str(path)], input_pipeline.classifier_features(16),
                                      batch_size, is_training=True, seed=seed,
                                      trim_padding=True, group_by_length=True)()
    batches = list(d.take(num_batches).as_numpy_iterator())
    assert all(b["input_ids"].shape[0] == batch_size for b in batches)
    return batches, [b["input_ids"][:, 0] - 1 for b in batches]


def test_group_by_length_sees_every_example_once_per_epoch(tmp_path):
    # One window of 50 batches of 2 is exactly one epoch of 100 examples: each of the
    # three epochs (50 steps each, as without grouping) holds every example once.
    n, batch = 100, 2
    lengths = write_varied_lengths(tmp_path / "r.tfrecord", n)
    batches, ids = _grouped_ids(tmp_path / "r.tfrecord", batch, 3 * n // batch)
    epochs = [np.concatenate(ids[e * 50:(e + 1) * 50]) for e in range(3)]
    for epoch in epochs:
        np.testing.assert_array_equal(np.sort(epoch), np.arange(n))
    assert not np.array_equal(epochs[0], epochs[1])   # reshuffled every epoch
    # Grouped by length: the trimmed batches are far shorter than the longest example
    # of a random pair would make them, and the batch order is not sorted.
    trimmed = [b["input_ids"].shape[1] for b in batches[:50]]
    rng = np.random.RandomState(1)
    random_pairs = [input_pipeline.bucket_length(max(lengths[rng.choice(n, batch)]), 16, 8)
                    for _ in range(50)]
    assert sum(trimmed) < sum(random_pairs)
    batch_lengths = [max(lengths[i]) for i in ids[:50]]
    assert batch_lengths != sorted(batch_lengths, reverse=True)


def test_group_by_length_epochs_smaller_than_a_window(tmp_path):
    # 37 examples in batches of 3, windows of 50 batches: one window would hold four
    # epochs. Windows stop at the end of an epoch, so each epoch's 12 batches hold 36
    # different examples (the one left out differs between epochs) and a run shorter
    # than a window still sees a whole epoch before any example comes twice.
    n, batch = 37, 3
    write_varied_lengths(tmp_path / "r.tfrecord", n)
    _, ids = _grouped_ids(tmp_path / "r.tfrecord", batch, 8 * 12)
    left_out = set()
    for e in range(8):
        epoch = np.concatenate(ids[e * 12:(e + 1) * 12])
        assert len(set(epoch.tolist())) == 36
        left_out |= set(range(n)) - set(epoch.tolist())
    assert len(left_out) > 1


def test_group_by_length_one_epoch_of_many_windows(tmp_path):
    # 230 examples, batches of 2, windows of 50 batches: two full windows and a short
    # one (15 batches) per epoch; every epoch is 115 batches of distinct examples.
    n, batch = 230, 2
    write_varied_lengths(tmp_path / "r.tfrecord", n)
    _, ids = _grouped_ids(tmp_path / "r.tfrecord", batch, 2 * 115)
    for e in range(2):
        np.testing.assert_array_equal(np.sort(np.concatenate(ids[e * 115:(e + 1) * 115])),
                                      np.arange(n))
