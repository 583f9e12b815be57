"""Packed pretraining rows: create_pretraining_data --pack_sequences, the model's
position_ids / instance_ids, the packed losses and run_pretraining --packed_sequences."""
import collections
import functools
import json
import random

import numpy as np
import pytest
import tensorflow as tf

import create_pretraining_data as cpd
import modeling
import run_pretraining
from bert_tf2 import flags_common
from bert_tf2 import heads
from bert_tf2 import input_pipeline
from bert_tf2.pretraining import pretraining_records

SEQ = 64            # max_seq_length
PREDS = 6           # max_predictions_per_seq
PER_ROW = 4         # max_instances_per_row
VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] +
         ["the", "a", "cat", "dog", "bird", "sat", "ran", "flew", "on", "over", "under",
          "mat", "tree", "house", "red", "big", "small", "quick", "slow", "and", ".", ",",
          "play", "##ing", "##ed", "##s"])
WORDS = ["the", "a", "cat", "dog", "bird", "sat", "ran", "flew", "on", "over", "under",
         "mat", "tree", "house", "red", "big", "small", "quick", "slow", "and", "playing",
         "played", "cats", "dogs"]


def _corpus(seed, num_documents=24):
    """Short documents: 1-4 sentences of 2-7 words (instances far below SEQ tokens)."""
    rng = random.Random(seed)
    documents = []
    for _ in range(num_documents):
        sentences = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 7))) + " ."
                     for _ in range(rng.randint(1, 4))]
        documents.append("\n".join(sentences))
    return "\n\n".join(documents) + "\n"


Data = collections.namedtuple("Data", "dir vocab inputs unpacked packed")


def _flags(inputs, output, vocab, *extra):
    return flags_common.parse_flags(cpd.define_flags, [
        "--input_file=" + ",".join(inputs), "--output_file=" + output,
        "--vocab_file=" + vocab, "--max_seq_length=%d" % SEQ,
        "--max_predictions_per_seq=%d" % PREDS, "--dupe_factor=2", "--random_seed=7",
        "--masked_lm_prob=0.2"] + list(extra))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A vocabulary, two corpus files, their unpacked and packed records."""
    d = tmp_path_factory.mktemp("packed")
    vocab = d / "vocab.txt"
    vocab.write_text("".join(t + "\n" for t in VOCAB))
    inputs = []
    for seed in (1, 2):
        path = d / ("corpus%d.txt" % seed)
        path.write_text(_corpus(seed))
        inputs.append(str(path))
    unpacked, packed = str(d / "unpacked.tfrecord"), str(d / "packed.tfrecord")
    cpd.run(_flags(inputs, unpacked, str(vocab)))
    cpd.run(_flags(inputs, packed, str(vocab), "--pack_sequences",
                   "--max_instances_per_row=%d" % PER_ROW))
    return Data(d, str(vocab), inputs, unpacked, packed)


def _raw(path):
    return [r.numpy() for r in tf.data.TFRecordDataset(path)]


def _values(record):
    feature = tf.train.Example.FromString(record).features.feature
    return {name: list(f.int64_list.value or f.float_list.value) for name, f in feature.items()}


def _unpack_row(row):
    """The unpacked records' feature values of the instances of one packed row."""
    out = []
    ids = np.array(row["instance_ids"])
    for k in range(1, int(ids.max()) + 1):
        where = np.flatnonzero(ids == k)
        start, n = int(where[0]), len(where)
        assert list(where) == list(range(start, start + n))
        assert row["position_ids"][start:start + n] == list(range(n))
        assert row["next_sentence_positions"][k - 1] == start
        assert row["next_sentence_weights"][k - 1] == 1.0
        real = [i for i, w in enumerate(row["masked_lm_weights"]) if w > 0
                and start <= row["masked_lm_positions"][i] < start + n]
        pad, slots = [0] * (SEQ - n), [0] * (PREDS - len(real))
        out.append({
            "input_ids": row["input_ids"][start:start + n] + pad,
            "input_mask": [1] * n + pad,
            "segment_ids": row["segment_ids"][start:start + n] + pad,
            "masked_lm_positions": [row["masked_lm_positions"][i] - start for i in real] + slots,
            "masked_lm_ids": [row["masked_lm_ids"][i] for i in real] + slots,
            "masked_lm_weights": [1.0] * len(real) + [0.0] * len(slots),
            "next_sentence_labels": [row["next_sentence_labels"][k - 1]],
        })
    return out


# ---------------------------------------------------------------------------
# (a) create_pretraining_data --pack_sequences
# ---------------------------------------------------------------------------

def test_packed_rows_hold_exactly_the_unpacked_instances_in_order(data):
    unpacked = [_values(r) for r in _raw(data.unpacked)]
    rows = [_values(r) for r in _raw(data.packed)]
    recovered = [instance for row in rows for instance in _unpack_row(row)]
    assert recovered == unpacked
    assert len(rows) < len(unpacked) / 2
    lengths = [sum(u["input_mask"]) for u in unpacked]
    taken = 0
    for row in rows:
        count = max(row["instance_ids"])
        used = sum(row["input_mask"])
        assert used == sum(lengths[taken:taken + count]) <= SEQ
        assert row["input_mask"] == [1] * used + [0] * (SEQ - used)
        assert row["next_sentence_weights"] == [1.0] * count + [0.0] * (PER_ROW - count)
        taken += count
        if taken < len(lengths):  # greedy: the next instance did not fit
            assert count == PER_ROW or used + lengths[taken] > SEQ
    assert taken == len(unpacked)


def test_packed_records_parse_with_the_packed_spec(data):
    spec = pretraining_records.packed_features(SEQ, PREDS, PER_ROW)
    for raw in _raw(data.packed)[:3]:
        parsed = tf.io.parse_single_example(raw, spec)
        assert parsed["masked_lm_ids"].shape == [PREDS * PER_ROW]
        assert parsed["next_sentence_positions"].shape == [PER_ROW]


def test_packing_with_workers_and_the_plain_path(data):
    # The per-file mode packs each file's (different) instances in the worker: the
    # rows hold the instances of the unpacked run, each file's in its order.
    unpacked, packed = str(data.dir / "w_unpacked.tfrecord"), str(data.dir / "w_packed.tfrecord")
    cpd.run(_flags(data.inputs, unpacked, data.vocab, "--num_workers=2"))
    cpd.run(_flags(data.inputs, packed, data.vocab, "--num_workers=2", "--pack_sequences"))
    rows = [_unpack_row(_values(r)) for r in _raw(packed)]
    recovered = [i for row in rows for i in row]
    key = functools.partial(json.dumps, sort_keys=True)
    assert sorted(map(key, recovered)) == sorted(key(_values(r)) for r in _raw(unpacked))
    assert max(len(row) for row in rows) > 1
    # The plain-Python path packs into the same bytes as the fast path.
    plain = str(data.dir / "plain_packed.tfrecord")
    fv = _flags(data.inputs, plain, data.vocab)
    cpd.write_pretraining_data(data.inputs, [plain], data.vocab,
                               cpd.options_of(fv), fast=False,
                               use_fast_tokenizer=False, pack_sequences=True,
                               max_instances_per_row=PER_ROW)
    assert _raw(plain) == _raw(data.packed)


def test_max_instances_per_row_must_be_positive(data):
    with pytest.raises(ValueError, match="--max_instances_per_row"):
        cpd.run(_flags(data.inputs, str(data.dir / "x.tfrecord"), data.vocab,
                       "--pack_sequences", "--max_instances_per_row=0"))


# ---------------------------------------------------------------------------
# (b) the model on packed rows, (c) the losses
# ---------------------------------------------------------------------------

def _config(**overrides):
    values = dict(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1,
                  num_attention_heads=2, intermediate_size=32, max_position_embeddings=SEQ,
                  type_vocab_size=2, initializer_range=0.2, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0)
    values.update(overrides)
    return modeling.BertConfig(**values)


def _batch(path, spec):
    """Every record of `path` as one batch of int32 / float32 tensors."""
    d = tf.data.TFRecordDataset(path).map(lambda r: input_pipeline.decode_record(r, spec))
    return next(iter(d.batch(1000)))


@pytest.fixture(scope="module")
def batches(data):
    unpacked = _batch(data.unpacked, input_pipeline.pretraining_features(SEQ, PREDS))
    packed = _batch(data.packed, pretraining_records.packed_features(SEQ, PREDS, PER_ROW))
    tf.random.set_seed(3)
    model = heads.BertPretrainer(_config())
    model(unpacked)
    return model, unpacked, packed


def _first_row_with(packed, count):
    row = int(np.flatnonzero(packed["next_sentence_weights"].numpy().sum(1) >= count)[0])
    first = int(packed["next_sentence_weights"].numpy()[:row].sum())
    return row, first


def _per_token_mlm(out, features):
    _, per_slot = heads.masked_lm_loss_from_logits(
        out["masked_lm_logits"], features["masked_lm_ids"], features["masked_lm_weights"])
    weights = features["masked_lm_weights"].numpy()
    return per_slot.numpy()[weights > 0]


def _compare_row(model, unpacked, packed, row, first, call=None):
    call = call or (lambda f: model(f, training=False))
    one_row = {k: v[row:row + 1] for k, v in packed.items()}
    count = int(one_row["next_sentence_weights"].numpy().sum())
    alone = {k: v[first:first + count] for k, v in unpacked.items()}
    out_packed, out_alone = call(one_row), call(alone)
    starts = one_row["next_sentence_positions"].numpy()[0]
    lengths = alone["input_mask"].numpy().sum(1)
    for i in range(count):
        s, n = starts[i], lengths[i]
        np.testing.assert_allclose(out_packed["sequence_output"].numpy()[0, s:s + n],
                                   out_alone["sequence_output"].numpy()[i, :n], atol=1e-5)
    np.testing.assert_allclose(_per_token_mlm(out_packed, one_row),
                               _per_token_mlm(out_alone, alone), atol=1e-5)
    np.testing.assert_allclose(out_packed["next_sentence_log_probs"].numpy()[0, :count],
                               out_alone["next_sentence_log_probs"].numpy(), atol=1e-5)
    return out_packed


def test_packed_row_outputs_equal_the_instances_run_alone(batches):
    model, unpacked, packed = batches
    row, first = _first_row_with(packed, 3)
    out = _compare_row(model, unpacked, packed, row, first)
    assert out["next_sentence_log_probs"].shape == [1, PER_ROW, 2]
    # Without instance_ids / position_ids the row is one sequence: other outputs.
    plain = {k: v[row:row + 1] for k, v in packed.items()
             if k not in ("instance_ids", "position_ids", "next_sentence_positions")}
    leaked = model(plain, training=False)["sequence_output"].numpy()
    assert np.abs(leaked - out["sequence_output"].numpy())[0, :int(
        packed["input_mask"][row].numpy().sum())].max() > 1e-3


def test_packed_row_under_xla(batches):
    model, unpacked, packed = batches
    row, first = _first_row_with(packed, 2)
    compiled = tf.function(lambda f: model(f, training=False), jit_compile=True)
    _compare_row(model, unpacked, packed, row, first, call=compiled)


def test_packed_gradients_with_gradient_checkpointing_and_xla(batches):
    model, _, packed = batches
    features = {k: v[:2] for k, v in packed.items()}

    def gradients(f):
        with tf.GradientTape() as tape:
            loss, _ = run_pretraining.pretraining_loss(model, f, True)
        return [tf.convert_to_tensor(g) for g in tape.gradient(loss, model.trainable_variables)]

    plain = gradients(features)
    modeling.set_gradient_checkpointing(model, True)
    try:
        recomputed = gradients(features)
        compiled = tf.function(gradients, jit_compile=True)(features)
    finally:
        modeling.set_gradient_checkpointing(model, False)
    for a, b, c in zip(plain, recomputed, compiled):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)
        np.testing.assert_allclose(a.numpy(), c.numpy(), atol=1e-5)


def test_packed_attention_mask():
    ids = tf.constant([[1, 1, 2, 0]])
    mask = modeling.create_attention_mask(tf.constant([[1, 1, 1, 0]]), instance_ids=ids)
    assert mask.shape == [1, 1, 4, 4]
    allowed = (mask.numpy()[0, 0] == 0).astype(int)
    assert allowed.tolist() == [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0]]
    assert set(np.unique(mask.numpy())) == {0.0, -10000.0}


def test_packed_loss_equals_the_unpacked_loss(batches):
    model, unpacked, packed = batches
    loss_u, metrics_u = run_pretraining.pretraining_loss(model, unpacked, False)
    loss_p, metrics_p = run_pretraining.pretraining_loss(model, packed, False)
    for name in ("masked_lm_loss", "next_sentence_loss", "masked_lm_accuracy",
                 "next_sentence_accuracy"):
        np.testing.assert_allclose(metrics_p[name].numpy(), metrics_u[name].numpy(), atol=1e-5)
    np.testing.assert_allclose(loss_p.numpy(), loss_u.numpy(), atol=1e-5)
    # The eval metrics too (one batch each: the same instances).
    results_u = run_pretraining.compute_eval_metrics(
        [{k: v.numpy() for k, v in run_pretraining.eval_outputs(model, unpacked).items()}])
    results_p = run_pretraining.compute_eval_metrics(
        [{k: v.numpy() for k, v in run_pretraining.eval_outputs(model, packed).items()}])
    for name, value in results_u.items():
        np.testing.assert_allclose(results_p[name], value, atol=1e-5, err_msg=name)


# ---------------------------------------------------------------------------
# (d) run_pretraining --packed_sequences
# ---------------------------------------------------------------------------

def _run_flags(data, input_file, name, **extra):
    config = data.dir / "bert_config.json"
    config.write_text(json.dumps(_config(hidden_dropout_prob=0.1).to_dict()))
    values = dict(bert_config_file=config, input_file=input_file,
                  output_dir=data.dir / name, train_batch_size=2, eval_batch_size=2,
                  max_seq_length=SEQ, max_predictions_per_seq=PREDS, learning_rate=1e-3,
                  num_train_steps=2, num_warmup_steps=0, iterations_per_loop=1,
                  save_checkpoints_steps=2, max_eval_steps=2, seed=5)
    values.update(extra)
    return flags_common.parse_flags(run_pretraining.define_flags,
                                    ["--%s=%s" % kv for kv in values.items()])


def test_run_pretraining_trains_and_evaluates_on_packed_records(data):
    results = run_pretraining.run(_run_flags(data, data.packed, "run", do_train=True,
                                             do_eval=True, packed_sequences=True)).metrics
    assert results["global_step"] == 2
    for name in ("loss", "masked_lm_loss", "next_sentence_loss", "masked_lm_accuracy",
                 "next_sentence_accuracy"):
        assert np.isfinite(results[name]), name


def test_packed_flag_must_match_the_records(data):
    with pytest.raises(ValueError, match="packed records.*pass --packed_sequences") as e:
        run_pretraining.run(_run_flags(data, data.packed, "m1", do_train=True))
    assert data.packed in str(e.value)
    with pytest.raises(ValueError, match="unpacked records.*drop --packed_sequences") as e:
        run_pretraining.run(_run_flags(data, data.unpacked, "m2", do_train=True,
                                       packed_sequences=True))
    assert data.unpacked in str(e.value)
    with pytest.raises(ValueError, match="masked_lm_positions of length 24, not 12"):
        run_pretraining.run(_run_flags(data, data.packed, "m3", do_train=True,
                                       packed_sequences=True, max_predictions_per_seq=3))
