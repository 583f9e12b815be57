"""The per-run fixed cost of a training / predict run, cut without changing a number.

Each lever here keeps a run's outputs as they were: tokens equal to a tokenizer built
without the lever, and a cache never serves what a changed input would not give.
"""
import os

import pytest

import tokenization
from bert_tf2.text import fast_batch
from conftest import write_text

pytest.importorskip("tensorflow_text")

_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "sat", "on", "mat", "a",
          "dog", "ran", "##s", "fast", ".", "is", "it", "un", "##want", "##ed"]
# Long enough for the batch path (over SMALL_BATCH_CHARS in all), with words the
# vocabulary splits into pieces, unknown words and punctuation.
_TEXTS = ["The cat sat on the mat.", "A dog ran fast; dogs ran!", "Unwanted cats is it",
          "caf\u00e9 the MAT sat", "zz the cat"] * 12


def _vocab_file(path, words):
    return write_text(path, "".join(w + "\n" for w in words))


def _fast_model(tokenizer):
    """The FastWordpieceTokenizer the batch path of `tokenizer` ran on (built on first use)."""
    return tokenizer._fast.fast._model  # pylint: disable=protected-access


@pytest.fixture
def fresh_models(monkeypatch):
    """An empty model cache for the test (the process's own is left as it was)."""
    monkeypatch.setattr(fast_batch, "MODELS", type(fast_batch.MODELS)())
    return fast_batch.MODELS


def test_same_vocabulary_builds_its_model_once_with_the_same_tokens(tmp_path, fresh_models):
    vocab = _vocab_file(tmp_path / "vocab.txt", _VOCAB)
    first = tokenization.FullTokenizer(vocab, do_lower_case=True)
    want = [first.tokenize(t) for t in _TEXTS]  # the exact path, text by text
    assert first.tokenize_batch(_TEXTS) == want
    assert want[0] == ["the", "cat", "sat", "on", "the", "mat", "."]
    assert want[2] == ["un", "##want", "##ed", "cat", "##s", "is", "it"]
    assert len(fresh_models) == 1
    # A second run's tokenizer (lower-casing or not) reuses the model: same tokens.
    second = tokenization.FullTokenizer(vocab, do_lower_case=True)
    cased = tokenization.FullTokenizer(vocab, do_lower_case=False)
    assert second.tokenize_batch(_TEXTS) == want
    assert second.convert_batch_to_ids(_TEXTS) == [first.convert_tokens_to_ids(t) for t in want]
    assert cased.tokenize_batch(_TEXTS) == [cased.tokenize(t) for t in _TEXTS]
    assert cased.tokenize_batch(["The cat"]) == [["[UNK]", "cat"]]
    assert _fast_model(second) is _fast_model(first) is _fast_model(cased)
    assert len(fresh_models) == 1
    # Built again with the cache emptied: the same tokens.
    fresh_models.clear()
    rebuilt = tokenization.FullTokenizer(vocab, do_lower_case=True)
    assert rebuilt.tokenize_batch(_TEXTS) == want
    assert _fast_model(rebuilt) is not _fast_model(first)


def test_a_rewritten_vocabulary_file_is_not_served_stale(tmp_path, fresh_models):
    path = tmp_path / "vocab.txt"
    _vocab_file(path, _VOCAB)
    old = tokenization.FullTokenizer(str(path), do_lower_case=True)
    assert old.tokenize_batch(_TEXTS)[0] == ["the", "cat", "sat", "on", "the", "mat", "."]
    assert old.convert_batch_to_ids(["the cat"]) == [[4, 5]]
    stat = os.stat(str(path))
    # Same path, same size, same modification time; "cat" and "dog" swap ids and
    # "mat" becomes "hat": a key of name, size and time would serve the old model.
    changed = list(_VOCAB)
    changed[5], changed[10] = "dog", "cat"
    changed[8] = "hat"
    _vocab_file(path, changed)
    os.utime(str(path), ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert os.stat(str(path)).st_size == stat.st_size
    new = tokenization.FullTokenizer(str(path), do_lower_case=True)
    got = new.tokenize_batch(_TEXTS)
    assert got == [new.tokenize(t) for t in _TEXTS]
    assert got[0] == ["the", "cat", "sat", "on", "the", "[UNK]", "."]
    assert new.convert_batch_to_ids(["the cat", "a dog"]) == [[4, 10], [9, 5]]
    assert _fast_model(new) is not _fast_model(old)
    # Another vocabulary file, and another unknown token: models of their own.
    other = tokenization.FullTokenizer(_vocab_file(tmp_path / "other.txt", _VOCAB + ["mats"]))
    assert other.tokenize_batch(["the mats"] * 40)[0] == ["the", "mats"]
    assert len(fresh_models) == 3
    # The old vocabulary again: its model, not the rewritten one's.
    again = tokenization.FullTokenizer(_vocab_file(tmp_path / "again.txt", _VOCAB))
    assert again.convert_batch_to_ids(["the cat"] * 40)[0] == [4, 5]
    assert _fast_model(again) is _fast_model(old)


def test_the_model_cache_keeps_the_last_few(tmp_path, fresh_models):
    tokenizers = [tokenization.FullTokenizer(_vocab_file(tmp_path / ("v%d.txt" % i),
                                                         _VOCAB + ["extra%d" % i]))
                  for i in range(fast_batch.MODELS_KEPT + 1)]
    for i, tokenizer in enumerate(tokenizers):
        assert tokenizer.tokenize_batch(["extra%d the" % i] * 40)[0] == ["extra%d" % i, "the"]
    assert len(fresh_models) == fast_batch.MODELS_KEPT
    # The oldest went first: its vocabulary builds a model again, with the same tokens.
    first = tokenization.FullTokenizer(str(tmp_path / "v0.txt"))
    assert first.tokenize_batch(["extra0 the"] * 40)[0] == ["extra0", "the"]
    assert _fast_model(first) is not _fast_model(tokenizers[0])


# ---------------------------------------------------------------------------
# The input pipeline's functions, left as written by AutoGraph
# ---------------------------------------------------------------------------

def _records(path, lengths, seq_length=16):
    """A record file of classifier examples whose input_mask has the given lengths."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    from bert_tf2 import input_pipeline  # pylint: disable=import-outside-toplevel
    with input_pipeline.RecordWriter(str(path)) as writer:
        for i, length in enumerate(lengths):
            ids = [(7 * i + j) % 50 + 1 for j in range(length)] + [0] * (seq_length - length)
            writer.write(dict(
                input_ids=input_pipeline.int_feature(ids),
                input_mask=input_pipeline.int_feature([1] * length + [0] * (seq_length - length)),
                segment_ids=input_pipeline.int_feature([0] * seq_length),
                label_ids=input_pipeline.int_feature([i % 3]),
                is_real_example=input_pipeline.int_feature([1])))
    return np.asarray(lengths)


def _batches(dataset, count=None):
    out = []
    for batch in dataset.take(count) if count else dataset:
        out.append({name: t.numpy().tolist() for name, t in batch.items()})
    return out


@pytest.mark.parametrize("case", ["training", "grouped", "predict_buckets", "predict_plain"])
def test_pipeline_batches_are_those_autograph_would_give(tmp_path, monkeypatch, case):
    from bert_tf2 import input_pipeline  # pylint: disable=import-outside-toplevel
    path = tmp_path / "train.tf_record"
    lengths = _records(path, [3, 16, 5, 9, 1, 12, 7, 2, 15, 4, 8, 6, 11])
    spec = input_pipeline.classifier_features(16)
    options = dict(
        training=dict(is_training=True, seed=3, trim=True, bucket_width=4),
        grouped=dict(is_training=True, seed=5, trim=True, group_by_length=True),
        predict_buckets=dict(is_training=False, pad_final_batch=True, trim=True, buckets=True,
                             bucket_window=2),
        predict_plain=dict(is_training=False, pad_final_batch=True))[case]

    def batches():
        dataset = input_pipeline.make_dataset([str(path)], spec, 4, **options)
        return _batches(dataset, 8 if options["is_training"] else None)

    got = batches()
    with monkeypatch.context() as patched:  # the lever off: AutoGraph converts them
        patched.setattr(input_pipeline, "_as_written", lambda function: function)
        want = batches()
    assert got == want
    # Real values: every example once (prediction), the padding rows, the trimmed lengths.
    assert len(got) == (8 if options["is_training"] else 4)
    if not options["is_training"]:
        real = [r for b in got for r, ok in zip(b["input_ids"], b["is_real_example"]) if ok]
        assert sorted(row[0] for row in real) == sorted((7 * i) % 50 + 1
                                                        for i in range(len(lengths)))
        assert sum(b["is_real_example"].count(0) for b in got) == 3
    if options.get("trim"):
        for b in got:
            longest = max(sum(m) for m in b["input_mask"])
            width = options.get("bucket_width", input_pipeline.DEFAULT_BUCKET_WIDTH)
            assert len(b["input_ids"][0]) == min(16, -(-longest // width) * width)


# ---------------------------------------------------------------------------
# One traced prediction step for every batch size of a run
# ---------------------------------------------------------------------------

def _tiny_runner(tmp_path, name):
    """A Runner (no training) of a one-layer classifier over trimmed batches: its
    encoder skips padding, so the step holds the dense / real-tokens tf.cond."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    import modeling  # pylint: disable=import-outside-toplevel
    from bert_tf2 import heads  # pylint: disable=import-outside-toplevel
    from bert_tf2.trainer import training  # pylint: disable=import-outside-toplevel
    config = modeling.BertConfig(vocab_size=60, hidden_size=16, num_hidden_layers=1,
                                 num_attention_heads=2, intermediate_size=24,
                                 max_position_embeddings=16)
    run_config = training.RunConfig(output_dir=str(tmp_path / name), learning_rate=1e-2,
                                    num_train_steps=1, num_warmup_steps=0, trim_padding=True,
                                    autograph=False)
    return training.Runner(tf.distribute.get_strategy(),
                           lambda: heads.BertClassifier(config, 3), run_config)


def _shape_recording_predict_fn(traced):
    """A predict_fn of logits that appends the input_ids shape of each trace to `traced`."""
    def predict_fn(model, features):
        traced.append(features["input_ids"].shape.as_list())
        return {"logits": model(features, training=False)["logits"],
                "is_real_example": features["is_real_example"]}
    return predict_fn


def _with_a_step_per_batch_size(tmp_path, monkeypatch, shared, run):
    """run(runner) of a runner holding `shared`'s weights with the shared-step lever off
    (PredictionLoop traces a step per batch size, as before it)."""
    from bert_tf2.trainer import prediction  # pylint: disable=import-outside-toplevel
    with monkeypatch.context() as patched:
        patched.setattr(prediction.PredictionLoop, "_any_batch_size", lambda self, spec: spec)
        apart = _tiny_runner(tmp_path, "apart")
        for mine, theirs in zip(apart.model.variables, shared.model.variables):
            mine.assign(theirs)
        return run(apart)


@pytest.mark.slow  # trains / exports: make test, not the quick lane
def test_evaluation_and_prediction_batch_sizes_share_one_traced_step(tmp_path, monkeypatch):
    """--eval_batch_size 8 then --predict_batch_size 4 (run_classifier / run_ner): one
    trace of the step, the same logits bit for bit as a step traced per batch size."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    from bert_tf2 import input_pipeline  # pylint: disable=import-outside-toplevel
    path = tmp_path / "eval.tf_record"
    # Full batches (the encoder on every position) and mostly padded ones (real tokens only).
    _records(path, [16, 16, 15, 16, 16, 16, 16, 16, 2, 3, 9, 1, 12, 4, 7, 5, 16, 14, 2])
    spec = input_pipeline.classifier_features(16)
    traced = []
    predict_fn = _shape_recording_predict_fn(traced)

    def passes(runner):
        out = []
        for batch_size in (8, 4, 8):
            dataset_fn = input_pipeline.dataset_fn_for([str(path)], spec, batch_size,
                                                       is_training=False, trim_padding=True)
            out.append([b["logits"] for b in runner.predict(dataset_fn, predict_fn)])
        return out

    shared = _tiny_runner(tmp_path, "shared")
    assert shared.skip_padding
    got = passes(shared)
    assert traced == [[None, None]]  # eval 8, predict 4, eval 8 again: one trace
    del traced[:]
    want = _with_a_step_per_batch_size(tmp_path, monkeypatch, shared, passes)
    assert traced == [[8, None], [4, None]]
    assert [len(p) for p in got] == [3, 5, 3]
    for got_pass, want_pass in zip(got, want):
        for g, w in zip(got_pass, want_pass):
            assert g.dtype == np.float32 and np.array_equal(g, w)
    # Each example's logits are those of its own text, whatever the batch it ran in.
    rows = [np.concatenate(p)[:19] for p in got]
    assert np.array_equal(rows[0], rows[2])
    np.testing.assert_allclose(rows[0], rows[1], rtol=0, atol=1e-5)
    assert not np.allclose(rows[0][0], rows[0][8])


@pytest.mark.slow  # trains / exports: make test, not the quick lane
def test_a_predictors_batches_of_every_size_share_one_traced_step(tmp_path, monkeypatch):
    """In-memory records (a Predictor's call) of 1, 3 and 8 examples run as batches of 1,
    4 and 8: one trace, the same logits bit for bit as a step traced per size."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    from bert_tf2 import input_pipeline  # pylint: disable=import-outside-toplevel
    spec = input_pipeline.classifier_features(16)
    lengths = [16, 3, 9, 16, 1, 12, 16, 5]
    traced = []
    predict_fn = _shape_recording_predict_fn(traced)

    def calls(runner):
        out = []
        for count in (1, 3, 8):
            with input_pipeline.records_in_memory():
                path = str(tmp_path / ("call%d.tf_record" % count))
                _records(path, lengths[:count])
                dataset_fn = input_pipeline.dataset_fn_for([path], spec, 8, is_training=False,
                                                           trim_padding=True)
                out.append(np.concatenate([b["logits"] for b in runner.predict(dataset_fn,
                                                                               predict_fn)]))
        return out

    shared = _tiny_runner(tmp_path, "shared")
    got = calls(shared)
    assert len(traced) == 1 and traced[0][0] is None
    assert not list(tmp_path.glob("call*"))  # in memory: no record file was written
    del traced[:]
    want = _with_a_step_per_batch_size(tmp_path, monkeypatch, shared, calls)
    assert [t[0] for t in traced] == [1, 4, 8]
    assert [len(g) for g in got] == [1, 4, 8]  # the padding rows too
    for g, w in zip(got, want):
        assert np.array_equal(g, w)
    np.testing.assert_allclose(got[2][:3], got[1][:3], rtol=0, atol=1e-5)
