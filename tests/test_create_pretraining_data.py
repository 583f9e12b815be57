"""Tests for create_pretraining_data.py: golden records, masking rules, workers, errors."""

import collections
import gc
import json
import os
import random
import stat
import subprocess
import sys

from absl import flags
import pytest
import tensorflow as tf

import create_pretraining_data as cpd
import tokenization
from bert_tf2 import flags_common
from bert_tf2 import input_pipeline
from bert_tf2.pretraining import pretraining_corpus
from bert_tf2.pretraining import pretraining_draws
from bert_tf2.pretraining import pretraining_pipeline
from bert_tf2.pretraining import record_store

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["the", "cat", "dog", "sat", "on", "mat", "a", "big", "red", "house", "run",
         "jump", "over", "fox", "quick", "brown", ".", ",", "un", "##break", "##able",
         "play", "##ing", "##ed", "s", "##t", "##o", "##p"]
TINY_VOCAB = SPECIAL + WORDS
SENTENCE_WORDS = ["the", "cat", "dog", "sat", "on", "mat", "a", "big", "red", "house",
                  "unbreakable", "playing", "played", "stop", "run", "jump", "quick"]


def _write(path, text):
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return str(path)


def _random_corpus(seed, num_documents=30):
    rng = random.Random(seed)
    documents = []
    for _ in range(num_documents):
        sentences = []
        for _ in range(rng.randint(1, 8)):
            words = [rng.choice(SENTENCE_WORDS) for _ in range(rng.randint(2, 14))]
            sentences.append(" ".join(words).capitalize() + ".")
        documents.append("\n".join(sentences))
    return "\n\n".join(documents) + "\n"


@pytest.fixture
def tiny(tmp_path):
    """A tiny vocabulary and two corpus files in tmp_path."""
    vocab = _write(tmp_path / "vocab.txt", "".join(t + "\n" for t in TINY_VOCAB))
    inputs = [_write(tmp_path / "a.txt", _random_corpus(1)),
              _write(tmp_path / "b.txt", _random_corpus(2))]
    return collections.namedtuple("Tiny", "dir vocab inputs")(tmp_path, vocab, inputs)


def _run(argv):
    """The number of records the run of `argv` wrote."""
    fv = flags_common.parse_flags(cpd.define_flags, argv)
    return cpd.run(fv).metrics["records"]


def _args(inputs, output, vocab, *extra):
    inputs = ",".join(inputs) if isinstance(inputs, list) else inputs
    output = ",".join(output) if isinstance(output, list) else output
    return ["--input_file=" + inputs, "--output_file=" + output,
            "--vocab_file=" + vocab] + list(extra)


def _raw_records(path):
    return [r.numpy() for r in tf.data.TFRecordDataset(path)]


def _features(path):
    """Every record of a TFRecord file as {name: list of values}."""
    out = []
    for raw in _raw_records(path):
        feature = tf.train.Example.FromString(raw).features.feature
        out.append({name: list(f.int64_list.value or f.float_list.value)
                    for name, f in feature.items()})
    return out


def _files_in(directory):
    return sorted(os.listdir(str(directory)))


# ---------------------------------------------------------------------------
# Golden output of the original script
# ---------------------------------------------------------------------------

def _golden_flags(shared_dir):
    golden = shared_dir / "golden" / "pretraining_data"
    flags_json = json.loads((golden / "flags.json").read_text())
    args = ["--%s=%s" % (name, flags_json[name])
            for name in ("do_lower_case", "do_whole_word_mask", "max_seq_length",
                         "max_predictions_per_seq", "random_seed", "dupe_factor",
                         "masked_lm_prob", "short_seq_prob")]
    return golden, flags_json, args


@pytest.fixture
def batch_tokenizer(monkeypatch):
    """Makes even tiny inputs go through the batch tokenizer."""
    monkeypatch.setattr(pretraining_corpus, "FAST_TOKENIZER_MIN_BYTES", 0)


@pytest.mark.parametrize("batch,spill", [(True, False), (False, False), (True, True)],
                         ids=["batch_tokenizer", "exact_tokenizer", "records_spilled_to_disk"])
def test_golden_records(shared_dir, tmp_path, monkeypatch, batch, spill):
    """Both tokenizer paths; the batch one is used for large inputs only by default.
    spill: the records go through record_store's temporary file (from the 2nd record on)."""
    monkeypatch.setattr(pretraining_corpus, "FAST_TOKENIZER_MIN_BYTES", 0 if batch else 1 << 62)
    stores = []
    if spill:
        store_class = record_store.RecordStore

        def small_store(spill_bytes=None, directory=None):
            del spill_bytes  # the default's 128 MiB: 1000 bytes here
            stores.append(store_class(1000, directory))
            return stores[-1]
        monkeypatch.setattr(record_store, "RecordStore", small_store)
    golden, flags_json, args = _golden_flags(shared_dir)
    vocab = str(shared_dir / "data" / "vocab" / "uncased_vocab.txt")
    out = str(tmp_path / "out.tfrecord")
    count = _run(_args(str(golden / "sample_text.txt"), out, vocab, *args))
    expected = _features(str(golden / "sample.tfrecord"))
    assert count == len(expected) == flags_json["num_records"] == 23
    got = _features(out)
    for index, (mine, theirs) in enumerate(zip(got, expected)):
        assert mine == theirs, "record %d differs" % index
    # Our encoder writes what SerializeToString(deterministic=True) writes: the
    # stored golden file (re-serialized that way) is matched byte for byte.
    assert _raw_records(out) == _raw_records(str(golden / "sample.tfrecord"))
    # The temporary file goes beside the output (and is gone).
    assert [(s.spilled, s.directory) for s in stores] == (
        [(True, str(tmp_path))] if spill else [])
    assert os.listdir(str(tmp_path)) == ["out.tfrecord"]


def test_record_store_gives_the_order_of_a_shuffled_list():
    """In memory or spilled at any point, the store yields what shuffling the list yields,
    and leaves the generator where shuffling the list leaves it."""
    rng = random.Random(5)
    records = [bytes(rng.randrange(256) for _ in range(rng.randint(0, 40))) for _ in range(300)]
    for spill_bytes in (1, 7, 500, 1 << 30):
        store = record_store.RecordStore(spill_bytes)
        for record in records:
            store.append(record)
        assert len(store) == 300 and store.spilled == (spill_bytes < 1 << 30)
        expected, theirs, ours = list(records), random.Random(11), random.Random(11)
        theirs.shuffle(expected)
        assert list(store.shuffled(ours.shuffle)) == expected
        assert ours.getstate() == theirs.getstate()


def test_collector_pause_leaves_the_process_as_it_found_it(monkeypatch):
    """A run from Python freezes the objects that exist and unfreezes them after; objects
    the caller froze stay frozen; after freeze_for_process (main()) they stay frozen."""
    monkeypatch.setattr(pretraining_pipeline, "_PROCESS_FROZEN", [False])
    gc.unfreeze()
    try:
        with pretraining_pipeline.collector_skips_existing_objects():
            assert gc.get_freeze_count() > 1000
        assert gc.get_freeze_count() == 0
        gc.freeze()
        frozen = gc.get_freeze_count()
        with pretraining_pipeline.collector_skips_existing_objects():
            pass
        assert gc.get_freeze_count() == frozen
        gc.unfreeze()
        pretraining_pipeline.freeze_for_process()
        with pretraining_pipeline.collector_skips_existing_objects():
            pass
        assert gc.get_freeze_count() > 1000
    finally:
        gc.unfreeze()


def test_golden_records_plain_python_path(shared_dir, tmp_path):
    """The plain-Python form (benchmark baseline) gives the same records."""
    golden, _, args = _golden_flags(shared_dir)
    fv = flags_common.parse_flags(cpd.define_flags, _args(
        "x", "y", str(shared_dir / "data" / "vocab" / "uncased_vocab.txt"), *args))
    out = str(tmp_path / "plain.tfrecord")
    cpd.write_pretraining_data([str(golden / "sample_text.txt")], [out], fv.vocab_file,
                               cpd.options_of(fv),
                               fast=False, use_fast_tokenizer=False)
    assert _features(out) == _features(str(golden / "sample.tfrecord"))


# ---------------------------------------------------------------------------
# Whole word masking
# ---------------------------------------------------------------------------

def _check_whole_words(records, inv_vocab, max_predictions):
    """Every masked piece's whole word is masked; returns how many multi-piece words were."""
    multi_piece_words = 0
    for record in records:
        ids = list(record["input_ids"])
        num_masked = int(sum(record["masked_lm_weights"]))
        positions = record["masked_lm_positions"][:num_masked]
        assert positions == sorted(set(positions))
        assert num_masked <= max_predictions
        original = list(ids)
        for p, label in zip(positions, record["masked_lm_ids"]):
            original[p] = label
        tokens = [inv_vocab[i] for i in original[:sum(record["input_mask"])]]
        # Words as the masking groups them: "##" pieces join the previous word,
        # [CLS]/[SEP] belong to none.
        words = []
        for i, token in enumerate(tokens):
            if token in ("[CLS]", "[SEP]"):
                continue
            if words and token.startswith("##"):
                words[-1].append(i)
            else:
                words.append([i])
        masked = set(positions)
        assert not masked & {i for i, t in enumerate(tokens) if t in ("[CLS]", "[SEP]")}
        for word in words:
            hit = masked.intersection(word)
            assert not hit or hit == set(word), "word %s partly masked" % word
            if hit and len(word) > 1:
                multi_piece_words += 1
    return multi_piece_words


def test_whole_word_mask_invariants_and_determinism(tiny):
    out1, out2 = str(tiny.dir / "w1.tfrecord"), str(tiny.dir / "w2.tfrecord")
    flags_ = ["--do_whole_word_mask=True", "--max_seq_length=48",
              "--max_predictions_per_seq=7", "--dupe_factor=3"]
    _run(_args(tiny.inputs, out1, tiny.vocab, *flags_))
    _run(_args(tiny.inputs, out2, tiny.vocab, *flags_))
    assert _raw_records(out1) == _raw_records(out2)
    inv_vocab = dict(enumerate(TINY_VOCAB))
    records = _features(out1)
    assert len(records) > 50
    assert _check_whole_words(records, inv_vocab, 7) > 10


@pytest.mark.usefixtures("batch_tokenizer")
def test_whole_word_mask_fast_equals_plain_path(tiny):
    options = cpd.PretrainingOptions(48, 7, 0.15, 0.2, 2, True, 99)
    fast, plain = str(tiny.dir / "f.tfrecord"), str(tiny.dir / "p.tfrecord")
    cpd.write_pretraining_data(tiny.inputs, [fast], tiny.vocab, options)
    cpd.write_pretraining_data(tiny.inputs, [plain], tiny.vocab, options, fast=False,
                               use_fast_tokenizer=False)
    assert _features(fast) == _features(plain)


def test_whole_word_mask_groups_continuations():
    tokens = ["[CLS]", "un", "##break", "##able", "dog", "[SEP]", "##ing", "cat", "[SEP]"]
    vocab_words = TINY_VOCAB
    for seed in range(30):
        out, positions, labels = cpd.create_masked_lm_predictions(
            tokens, 0.5, 20, vocab_words, random.Random(seed), do_whole_word_mask=True)
        masked = set(positions)
        # "##ing" after [SEP] still joins the word before the [SEP] ("dog").
        for word in ({1, 2, 3}, {4, 6}, {7}):
            assert not masked & word or word <= masked
        assert labels == [tokens[p] for p in positions]
        assert out[0] == "[CLS]" and out[5] == out[8] == "[SEP]"


# ---------------------------------------------------------------------------
# Building blocks
# ---------------------------------------------------------------------------

def _truncate_step_by_step(tokens_a, tokens_b, max_num_tokens, rng):
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            longer.pop(0)
        else:
            longer.pop()


def test_truncate_seq_pair():
    a, b = list("abcdefgh"), list("xyz")
    cpd.truncate_seq_pair(a, b, 20, random.Random(0))
    assert (a, b) == (list("abcdefgh"), list("xyz"))  # fits: untouched
    for seed in range(50):
        rng = random.Random(seed)
        len_a, len_b, limit = rng.randint(1, 40), rng.randint(1, 40), rng.randint(2, 30)
        a, b = list(range(len_a)), list(range(100, 100 + len_b))
        expected_a, expected_b = list(a), list(b)
        _truncate_step_by_step(expected_a, expected_b, limit, random.Random(seed))
        state = random.Random(seed)
        cpd.truncate_seq_pair(a, b, limit, state)
        assert (a, b) == (expected_a, expected_b)
        assert len(a) + len(b) == min(limit, len_a + len_b)
        # Cut from the ends only: what is left is a contiguous run.
        assert a == list(range(a[0], a[0] + len(a))) if a else True
    # Ties cut tokens_b.
    a, b = [1, 2], [3, 4]
    cpd.truncate_seq_pair(a, b, 3, random.Random(1))
    assert len(a) == 2 and len(b) == 1


def test_masked_lm_counts_and_labels():
    counts = collections.Counter()
    for len_a, len_b in ((1, 1), (3, 2), (10, 7), (30, 27), (62, 61)):
        tokens = ["[CLS]"] + ["cat"] * len_a + ["[SEP]"] + ["dog"] * len_b + ["[SEP]"]
        for seed in range(20):
            out, positions, labels = cpd.create_masked_lm_predictions(
                tokens, 0.15, 20, TINY_VOCAB, random.Random(seed))
            expected = min(20, max(1, int(round(len(tokens) * 0.15))))
            assert len(positions) == min(expected, len_a + len_b)
            assert positions == sorted(set(positions))
            assert all(tokens[p] not in ("[CLS]", "[SEP]") for p in positions)
            assert labels == [tokens[p] for p in positions]
            assert [t for i, t in enumerate(out) if i not in positions] == \
                [t for i, t in enumerate(tokens) if i not in positions]
            for p in positions:
                counts["mask" if out[p] == "[MASK]" else
                       "same" if out[p] == tokens[p] else "random"] += 1
    total = sum(counts.values())
    assert 0.75 < counts["mask"] / total < 0.85
    assert counts["same"] > 0.05 * total and counts["random"] > 0.05 * total


def test_masked_lm_prediction_cap():
    tokens = ["[CLS]"] + ["cat"] * 100 + ["[SEP]"]
    _, positions, _ = cpd.create_masked_lm_predictions(tokens, 0.5, 20, TINY_VOCAB,
                                                       random.Random(0))
    assert len(positions) == 20  # the original silently caps at the slots


@pytest.mark.usefixtures("batch_tokenizer")
def test_public_functions_match_fast_pipeline(tiny):
    """create_training_instances + write_instance_to_example_files == run()."""
    import tokenization  # pylint: disable=import-outside-toplevel
    tokenizer = tokenization.FullTokenizer(tiny.vocab, do_lower_case=True)
    instances = cpd.create_training_instances(tiny.inputs, tokenizer, 40, 2, 0.3, 0.15, 6,
                                              random.Random(3))
    assert all(isinstance(i, cpd.TrainingInstance) for i in instances)
    assert "tokens: [CLS]" in str(instances[0])
    public = str(tiny.dir / "public.tfrecord")
    assert cpd.write_instance_to_example_files(instances, tokenizer, 40, 6, [public]) == \
        len(instances)
    fast = str(tiny.dir / "fast.tfrecord")
    _run(_args(tiny.inputs, fast, tiny.vocab, "--max_seq_length=40",
               "--max_predictions_per_seq=6", "--dupe_factor=2", "--short_seq_prob=0.3",
               "--random_seed=3"))
    assert _features(public) == _features(fast)


def test_records_are_padded(tiny):
    out = str(tiny.dir / "out.tfrecord")
    count = _run(_args(tiny.inputs, out, tiny.vocab, "--max_seq_length=32",
                       "--max_predictions_per_seq=6", "--dupe_factor=2"))
    records = _features(out)
    assert count == len(records) > 20
    assert any(r["next_sentence_labels"] == [1] for r in records)
    assert any(r["next_sentence_labels"] == [0] for r in records)
    cls, sep = TINY_VOCAB.index("[CLS]"), TINY_VOCAB.index("[SEP]")
    for r in records:
        assert len(r["input_ids"]) == len(r["input_mask"]) == len(r["segment_ids"]) == 32
        assert len(r["masked_lm_positions"]) == len(r["masked_lm_ids"]) == 6
        assert len(r["masked_lm_weights"]) == 6
        n = sum(r["input_mask"])
        m = int(sum(r["masked_lm_weights"]))
        assert r["input_mask"] == [1] * n + [0] * (32 - n)
        assert r["input_ids"][n:] == [0] * (32 - n) and r["segment_ids"][n:] == [0] * (32 - n)
        num_a = r["segment_ids"].index(1)
        assert r["segment_ids"][:n] == [0] * num_a + [1] * (n - num_a)
        assert r["input_ids"][0] == cls and r["input_ids"][num_a - 1] == sep
        assert r["input_ids"][n - 1] == sep
        assert r["masked_lm_weights"] == [1.0] * m + [0.0] * (6 - m)
        assert m == min(6, max(1, round(n * 0.15)))
        assert r["masked_lm_positions"][m:] == [0] * (6 - m)
        assert r["masked_lm_ids"][m:] == [0] * (6 - m)
    # The files parse with the spec run_pretraining reads them with.
    spec = input_pipeline.pretraining_features(32, 6)
    for raw in _raw_records(out)[:5]:
        tf.io.parse_single_example(raw, spec)


def test_round_robin_over_output_files(tiny):
    single = str(tiny.dir / "all.tfrecord")
    pair = [str(tiny.dir / "part0.tfrecord"), str(tiny.dir / "part1.tfrecord")]
    _run(_args(tiny.inputs, single, tiny.vocab, "--dupe_factor=1"))
    _run(_args(tiny.inputs, pair, tiny.vocab, "--dupe_factor=1"))
    everything = _raw_records(single)
    assert _raw_records(pair[0]) == everything[0::2]
    assert _raw_records(pair[1]) == everything[1::2]
    assert not [f for f in _files_in(tiny.dir) if ".tmp-" in f]


def test_fast_draws_reproduce_random_module():
    assert pretraining_draws.fast_draws_agree()
    ours, theirs = random.Random(11), random.Random(11)
    fast = pretraining_draws.FastDraws(ours)
    for size in range(0, 300, 7):
        a, b = list(range(size)), list(range(size))
        fast.shuffle(a)
        theirs.shuffle(b)
        assert a == b
        assert fast.randint(0, size) == theirs.randint(0, size)
        assert fast.random() == theirs.random()
    assert ours.getstate() == theirs.getstate()
    with pytest.raises(ValueError):
        fast.randint(3, 2)


def _documents_by_readline(paths, tokenize):
    """Documents as a loop over GFile.readline() builds them (the original's reader)."""
    documents = [[]]
    for path in paths:
        with tf.io.gfile.GFile(path, "r") as reader:
            for line in iter(reader.readline, ""):
                line = line.strip()
                if not line:
                    documents.append([])
                elif tokenize(line):
                    documents[-1].append(tokenize(line))
    return [d for d in documents if d]


def test_reading_follows_gfile_readline(tmp_path):
    """Blank lines split documents; "\\r" is dropped; files run on into each other."""
    first = _write(tmp_path / "1.txt", b"a b\r\nc\rd\n \t\n\n\xc2\xa0\ne\n\x00\n")
    second = _write(tmp_path / "2.txt", b"f\n\x0b\ng\r")

    def tokenize(line):
        return line.replace("\x00", "").split()
    documents = cpd.read_documents([first, second], lambda lines: [tokenize(l) for l in lines])
    assert documents == [[["a", "b"], ["cd"]], [["e"], ["f"]], [["g"]]]
    assert documents == _documents_by_readline([first, second], tokenize)
    # A block boundary inside the file changes nothing.
    big = _write(tmp_path / "big.txt", ("w%d x\r\n" * 7 + "\n") * 3000 % tuple(range(21000)))
    old_block = pretraining_corpus.READ_BLOCK_BYTES
    pretraining_corpus.READ_BLOCK_BYTES = 1000
    try:
        assert cpd.read_documents([big], lambda lines: [l.split() for l in lines]) == \
            _documents_by_readline([big], str.split)
        bad = _write(tmp_path / "bad.txt", b"ok\r\n" * 4999 + b"caf\xe9\n" + b"ok\n" * 10)
        with pytest.raises(ValueError, match=r"bad\.txt, line 5000:"):
            cpd.read_documents([bad], lambda lines: [l.split() for l in lines])
    finally:
        pretraining_corpus.READ_BLOCK_BYTES = old_block


# ---------------------------------------------------------------------------
# Settings: a run from Python, without flags
# ---------------------------------------------------------------------------

def test_settings_run_twice_without_absl_gives_the_records_of_the_flags(tiny, monkeypatch):
    """Two runs of one Settings in one process write the same records as the command line."""
    values = dict(input_file=",".join(tiny.inputs), vocab_file=tiny.vocab, max_seq_length=32,
                  max_predictions_per_seq=6, dupe_factor=2, random_seed=7)
    out_flags = str(tiny.dir / "flags.tfrecord")
    count = _run(_args(tiny.inputs, out_flags, tiny.vocab, "--max_seq_length=32",
                       "--max_predictions_per_seq=6", "--dupe_factor=2", "--random_seed=7"))

    def no_parsing(*args, **kwargs):
        raise AssertionError("absl parsed flags during a run of Settings")

    monkeypatch.setattr(flags.FlagValues, "__call__", no_parsing)
    results = []
    for name in ("one.tfrecord", "two.tfrecord"):
        out = str(tiny.dir / name)
        results.append(cpd.run(cpd.Settings(output_file=out, **values)))
        assert results[-1].outputs == {"output_files": [out]}
        assert os.path.exists(out)
    one, two = (_raw_records(r.outputs["output_files"][0]) for r in results)
    assert one == two == _raw_records(out_flags)
    assert results[0].metrics == results[1].metrics
    assert results[0].metrics["records"] == count == len(one) > 20


@pytest.mark.parametrize("values, message", [
    (dict(input_file=None), r"^input_file is required$"),
    (dict(vocab_file=""), r"^vocab_file is required$"),
    (dict(chinese_word_segmenter="pkuseg", do_whole_word_mask=True),
     r"^chinese_word_segmenter='pkuseg': expected one of jieba$"),
    (dict(num_workers=2, runner="DirectRunner"), r"^num_workers=2 counts local processes"),
])
def test_settings_with_a_bad_value_name_the_flag(tiny, values, message):
    settings = dict(input_file=tiny.inputs[0], output_file=str(tiny.dir / "x.tfrecord"),
                    vocab_file=tiny.vocab)
    settings.update(values)
    with pytest.raises(ValueError, match=message):
        cpd.run(cpd.Settings(**settings))
    assert not os.path.exists(str(tiny.dir / "x.tfrecord"))


# ---------------------------------------------------------------------------
# Parallel mode
# ---------------------------------------------------------------------------

@pytest.mark.slow
def test_workers_deterministic_and_valid(tiny):
    """Same output twice, whatever the number of workers; records well formed."""
    out2, out3 = str(tiny.dir / "w2.tfrecord"), str(tiny.dir / "w3.tfrecord")
    flags_ = ["--max_seq_length=32", "--max_predictions_per_seq=6", "--dupe_factor=2"]
    n2 = _run(_args(tiny.inputs, out2, tiny.vocab, "--num_workers=2", *flags_))
    n3 = _run(_args(tiny.inputs, out3, tiny.vocab, "--num_workers=3", *flags_))
    assert n2 == n3 > 20
    assert _raw_records(out2) == _raw_records(out3)
    assert not [f for f in _files_in(tiny.dir) if "shards" in f or ".tmp-" in f]

    records = _features(out2)
    single = str(tiny.dir / "single.tfrecord")
    _run(_args(tiny.inputs, single, tiny.vocab, *flags_))
    assert records != _features(single)  # a different sample, as documented
    spec = input_pipeline.pretraining_features(32, 6)
    for raw in _raw_records(out2):
        tf.io.parse_single_example(raw, spec)
    for r in records:
        n = sum(r["input_mask"])
        m = int(sum(r["masked_lm_weights"]))
        assert r["input_mask"] == [1] * n + [0] * (32 - n)
        assert m == min(6, max(1, round(n * 0.15)))


def _assert_fails(tiny, message, argv):
    before = _files_in(tiny.dir)
    with pytest.raises(ValueError, match=message):
        _run(argv)
    assert _files_in(tiny.dir) == before  # no output, no temporary file left


def test_missing_vocab_file(tiny):
    _assert_fails(tiny, r"--vocab_file=\S*nope\.txt does not exist",
                  _args(tiny.inputs, str(tiny.dir / "o.tfrecord"), str(tiny.dir / "nope.txt")))


def test_input_pattern_matching_nothing(tiny):
    _assert_fails(tiny, "matches no file",
                  _args(str(tiny.dir / "missing*.txt"), str(tiny.dir / "o.tfrecord"),
                        tiny.vocab))


def test_pipes_and_devices_are_refused_not_waited_on_or_replaced(tiny):
    fifo = str(tiny.dir / "fifo")
    os.mkfifo(fifo)  # no writer: opening it to read would wait for ever
    _assert_fails(tiny, r"^--input_file=\S*fifo is a pipe: create_pretraining_data measures "
                        r"each input file and may read it twice, so pipes are not supported",
                  _args([tiny.inputs[0], fifo], str(tiny.dir / "o.tfrecord"), tiny.vocab))
    # An output pipe or device would be replaced by the finished file (renamed over it).
    _assert_fails(tiny, r"^--output_file=\S*fifo is a pipe: outputs are written to a file "
                        r"of their own .*so pipes are not supported",
                  _args(tiny.inputs, fifo, tiny.vocab))
    _assert_fails(tiny, r"^--output_file=/dev/null is a device",
                  _args(tiny.inputs, os.devnull, tiny.vocab))
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and stat.S_ISCHR(os.stat(os.devnull).st_mode)


@pytest.mark.parametrize("workers", [1, 2])
def test_empty_corpus(tiny, workers):
    empty = _write(tiny.dir / "empty.txt", "\n  \n\n\t\n")
    _assert_fails(tiny, "no documents",
                  _args(empty, str(tiny.dir / "o.tfrecord"), tiny.vocab,
                        "--num_workers=%d" % workers))


@pytest.mark.parametrize("workers", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_not_utf8_names_file_and_line(tiny, workers):
    bad = _write(tiny.dir / "latin1.txt", "the cat\n\nsat on\nthe mat caf\xe9\n".encode("latin-1"))
    _assert_fails(tiny, r"latin1\.txt, line 4: not valid UTF-8",
                  _args(tiny.inputs + [bad], str(tiny.dir / "o.tfrecord"), tiny.vocab,
                        "--num_workers=%d" % workers))


# ---------------------------------------------------------------------------
# The reference's rule, written out independently of create_pretraining_data.py
# ---------------------------------------------------------------------------

def _rule_documents(paths, tokenizer):
    documents = [[]]
    for path in paths:
        with open(path, encoding="utf-8") as reader:
            for line in reader:
                line = line.strip()
                if not line:
                    documents.append([])
                    continue
                pieces = tokenizer.tokenize(line)
                if pieces:
                    documents[-1].append(pieces)
    return [d for d in documents if d]


def _rule_mask(tokens, prob, slots, whole_word, vocab_words, rng):
    groups = []
    for i, token in enumerate(tokens):
        if token in ("[CLS]", "[SEP]"):
            continue
        if whole_word and groups and token.startswith("##"):
            groups[-1].append(i)
        else:
            groups.append([i])
    rng.shuffle(groups)
    budget = min(slots, max(1, int(round(len(tokens) * prob))))
    out, chosen = list(tokens), []
    for group in groups:
        if len(chosen) >= budget:
            break
        if len(chosen) + len(group) > budget:
            continue
        for i in group:
            chosen.append(i)
            if rng.random() < 0.8:
                out[i] = "[MASK]"
            elif rng.random() >= 0.5:
                out[i] = vocab_words[rng.randint(0, len(vocab_words) - 1)]
    chosen.sort()
    return out, chosen, [tokens[i] for i in chosen]


def _rule_pair(documents, index, chunk, a_end, target, rng):
    """Segments A and B of one instance; returns (a, b, is_random, segments to put back)."""
    tokens_a = [t for segment in chunk[:a_end] for t in segment]
    if len(chunk) > 1 and rng.random() >= 0.5:
        return tokens_a, [t for segment in chunk[a_end:] for t in segment], False, 0
    other = index
    for _ in range(10):
        other = rng.randint(0, len(documents) - 1)
        if other != index:
            break
    tokens_b, start = [], rng.randint(0, len(documents[other]) - 1)
    for segment in documents[other][start:]:
        tokens_b += segment
        if len(tokens_b) >= target - len(tokens_a):
            break
    return tokens_a, tokens_b, True, len(chunk) - a_end


def _rule_instances(documents, index, opts, vocab_words, rng):
    room = opts["max_seq_length"] - 3
    target = rng.randint(2, room) if rng.random() < opts["short_seq_prob"] else room
    document, out, chunk, length, i = documents[index], [], [], 0, 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            a, b, is_random, back = _rule_pair(documents, index, chunk, a_end, target, rng)
            i -= back
            while len(a) + len(b) > room:
                longer = a if len(a) > len(b) else b
                del longer[0 if rng.random() < 0.5 else -1]
            tokens = ["[CLS]"] + a + ["[SEP]"] + b + ["[SEP]"]
            masked, positions, labels = _rule_mask(
                tokens, opts["masked_lm_prob"], opts["max_predictions_per_seq"],
                opts["do_whole_word_mask"], vocab_words, rng)
            out.append((masked, [0] * (len(a) + 2) + [1] * (len(b) + 1), positions, labels,
                        is_random))
            chunk, length = [], 0
        i += 1
    return out


def _rule_records(paths, tokenizer, opts):
    rng = random.Random(opts["random_seed"])
    documents = _rule_documents(paths, tokenizer)
    rng.shuffle(documents)
    vocab_words = list(tokenizer.vocab.keys())
    instances = []
    for _ in range(opts["dupe_factor"]):
        for index in range(len(documents)):
            instances += _rule_instances(documents, index, opts, vocab_words, rng)
    rng.shuffle(instances)
    seq, slots = opts["max_seq_length"], opts["max_predictions_per_seq"]
    records = []
    for tokens, segments, positions, labels, is_random in instances:
        ids = tokenizer.convert_tokens_to_ids(tokens)
        pad, free = seq - len(ids), slots - len(positions)
        records.append({
            "input_ids": ids + [0] * pad, "input_mask": [1] * len(ids) + [0] * pad,
            "segment_ids": segments + [0] * pad,
            "masked_lm_positions": positions + [0] * free,
            "masked_lm_ids": tokenizer.convert_tokens_to_ids(labels) + [0] * free,
            "masked_lm_weights": [1.0] * len(positions) + [0.0] * free,
            "next_sentence_labels": [1 if is_random else 0]})
    return records


@pytest.mark.parametrize("whole_word", [False, True])
@pytest.mark.parametrize("workers", [1, 2])
def test_capped_masking_runs_with_the_reference_records(tiny, whole_word, workers):
    """64 / 10 / 0.2 asks for 13 masked tokens with 10 slots: the reference caps, so do we."""
    opts = dict(max_seq_length=64, max_predictions_per_seq=10, masked_lm_prob=0.2,
                short_seq_prob=0.1, dupe_factor=2, do_whole_word_mask=whole_word,
                random_seed=7)
    flags = ["--%s=%s" % kv for kv in opts.items()]
    out = str(tiny.dir / "capped.tfrecord")
    _run(_args(tiny.inputs, out, tiny.vocab, "--num_workers=%d" % workers, *flags))
    got = _features(out)
    tokenizer = tokenization.FullTokenizer(tiny.vocab)
    if workers == 1:
        want = _rule_records(tiny.inputs, tokenizer, opts)
        assert got == want
    else:
        # The sharded mode seeds each file on its own: the records of each file run
        # alone under its shard seed, interleaved.
        want = []
        for index, path in enumerate(tiny.inputs):
            want += _rule_records([path], tokenizer,
                                  dict(opts, random_seed=cpd.shard_seed(7, index)))
        key = lambda r: json.dumps(r, sort_keys=True)  # noqa: E731
        assert sorted(map(key, got)) == sorted(map(key, want))
    assert max(sum(r["masked_lm_weights"]) for r in got) == 10


@pytest.mark.parametrize("fast", [True, False])
def test_whole_word_mask_at_cut_segment_ends_is_the_reference_rule(tiny, fast):
    """Truncation leaves "##" pieces at the segments' starts: one leading A starts a word,
    one leading B joins A's last word across the [SEP] (the reference's rule); the word
    starts worked out per sentence follow the cuts."""
    rng = random.Random(5)
    words = ["unbreakable", "playing", "played", "stop", "cat"]
    documents = ["\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(3, 12)))
                           for _ in range(rng.randint(1, 5))) for _ in range(12)]
    path = _write(tiny.dir / "pieces.txt", "\n\n".join(documents) + "\n")
    opts = dict(max_seq_length=16, max_predictions_per_seq=5, masked_lm_prob=0.3,
                short_seq_prob=0.2, dupe_factor=3, do_whole_word_mask=True, random_seed=3)
    out = str(tiny.dir / "pieces.tfrecord")
    cpd.write_pretraining_data([path], [out], tiny.vocab, cpd.PretrainingOptions(**opts),
                               fast=fast, use_fast_tokenizer=fast)
    got = _features(out)
    tokenizer = tokenization.FullTokenizer(tiny.vocab)
    assert got == _rule_records([path], tokenizer, opts)
    inv_vocab = {i: t for t, i in tokenizer.vocab.items()}
    leading_a = leading_b = 0
    for record in got:
        ids = list(record["input_ids"])
        for position, label, weight in zip(record["masked_lm_positions"],
                                           record["masked_lm_ids"],
                                           record["masked_lm_weights"]):
            if weight:
                ids[position] = label
        start_b = record["segment_ids"].index(1)
        leading_a += inv_vocab[ids[1]].startswith("##")
        leading_b += inv_vocab[ids[start_b]].startswith("##")
    assert leading_a > 5 and leading_b > 5


@pytest.mark.parametrize("whole_word", [False, True])
def test_create_instances_from_document_is_the_reference_rule(tiny, whole_word):
    """The reference's per-document function (public API) follows the rule written out."""
    tokenizer = tokenization.FullTokenizer(tiny.vocab)
    documents = _rule_documents(tiny.inputs, tokenizer)
    vocab_words = list(tokenizer.vocab.keys())
    opts = dict(max_seq_length=40, max_predictions_per_seq=6, masked_lm_prob=0.2,
                short_seq_prob=0.3, do_whole_word_mask=whole_word)
    for index in range(8):
        ours = cpd.create_instances_from_document(
            documents, index, 40, 0.3, 0.2, 6, vocab_words, random.Random(index),
            do_whole_word_mask=whole_word)
        want = _rule_instances(documents, index, opts, vocab_words, random.Random(index))
        assert [(i.tokens, i.segment_ids, i.masked_lm_positions, i.masked_lm_labels,
                 i.is_random_next) for i in ours] == want


def test_golden_records_match_the_rule_written_out(shared_dir):
    """The independent rule above reproduces the reference's own golden records."""
    golden, flags_json, _ = _golden_flags(shared_dir)
    opts = {k: flags_json[k] for k in ("max_seq_length", "max_predictions_per_seq",
                                        "masked_lm_prob", "short_seq_prob", "dupe_factor",
                                        "do_whole_word_mask", "random_seed")}
    tokenizer = tokenization.FullTokenizer(
        str(shared_dir / "data" / "vocab" / "uncased_vocab.txt"),
        do_lower_case=flags_json["do_lower_case"])
    want = _rule_records([str(golden / "sample_text.txt")], tokenizer, opts)
    assert want == _features(str(golden / "sample.tfrecord"))


def test_prediction_slot_rule_warns_and_refuses_only_what_the_reference_cannot_run():
    for length, slots, prob in ((128, 20, 0.15), (512, 80, 0.15), (512, 77, 0.15),
                                (128, 19, 0.15), (64, 10, 0.15), (384, 58, 0.15)):
        assert cpd.PretrainingOptions(length, slots, prob, 0.1, 1, False, 1).validate() == []
    (warning,) = cpd.PretrainingOptions(64, 10, 0.2, 0.1, 1, False, 1).validate()
    assert "caps the masking" in warning and "= 13" in warning
    assert len(cpd.PretrainingOptions(128, 20, 1.5, -0.2, 0, False, 1).validate()) == 4
    with pytest.raises(ValueError, match="max_seq_length must be at least 5"):
        cpd.PretrainingOptions(4, 20, 0.15, 0.1, 1, False, 1).validate()


def test_missing_special_token(tmp_path, tiny):
    vocab = _write(tmp_path / "nomask.txt", "".join(t + "\n" for t in TINY_VOCAB
                                                     if t != "[MASK]"))
    for workers in ("--num_workers=1", "--num_workers=2"):
        _assert_fails(tiny, r"^--vocab_file=\S*nomask\.txt has no \[MASK\] token$",
                      _args(tiny.inputs, str(tiny.dir / "o.tfrecord"), vocab, workers))


@pytest.mark.slow
def test_command_line_error_is_one_line(tiny):
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "create_pretraining_data.py")
    result = subprocess.run(
        [sys.executable, script] + _args(str(tiny.dir / "none*.txt"),
                                         str(tiny.dir / "o.tfrecord"), tiny.vocab),
        capture_output=True, text=True)
    assert result.returncode == 1
    assert "error: input file pattern" in result.stderr
    assert "Traceback" not in result.stderr
