"""Tests of serving.ServingModule's request lengths: trimmed requests equal full-length ones.

The golden tiny TF1 encoder (hidden 16, 2 layers) with seeded random heads, called in
process (no SavedModel written): every signature once packed to max_seq_length
(trim_padding=False, the exports before trimming) and once packed to the request's
longest row, on rows of very different lengths and on a batch of one.
"""
import dataclasses
import types

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

import modeling
from bert_tf2 import input_pipeline
from bert_tf2.export import serving
from bert_tf2.export import tokenization_graph
from bert_tf2.tasks import pooling
from bert_tf2.tasks import squad_results
from bert_tf2.trainer import checkpoints
from conftest import FP32_ATOL

SEQ_LENGTH = 64
_TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-MISC", "I-MISC"]
_LONG = ("The committee met on Tuesday in Geneva to discuss the new proposals for "
         "international shipping rules, which several delegations opposed strongly "
         "because of their cost to smaller ports and to the fishing fleets of the north. ")
_TEXTS = ["Paris.", _LONG * 2, "", "John Smith works for Acme Corp in Berlin.",
          "unwanted running"]
_OTHERS = ["It rained.", "", _LONG, "Is it raining in Geneva today?", "x"]


@pytest.fixture(scope="module")
def golden(shared_dir, tmp_path_factory):
    path = shared_dir / "golden" / "tf1_tiny"
    tokenizer = tokenization_graph.InGraphTokenizer(
        str(path / "vocab.txt"), True, str(tmp_path_factory.mktemp("asset")))
    config = modeling.BertConfig.from_json_file(str(path / "bert_config.json"))
    return {"tokenizer": tokenizer, "config": config, "checkpoint": str(path / "bert_model.ckpt"),
            "made": {}}


def _modules(golden, model_type, labels=None, **kwargs):
    """(full length, trimmed) ServingModules of one model: golden encoder, seeded head.

    Made once per module and model (golden["made"]): the tests only call them, and a
    module's signatures are traced once, on first call (building and tracing them again
    for every test was most of this file's time)."""
    key = (model_type, repr(labels), repr(sorted(kwargs.items())))
    if key not in golden["made"]:
        golden["made"][key] = _new_modules(golden, model_type, labels, **kwargs)
    return golden["made"][key]


def _new_modules(golden, model_type, labels=None, **kwargs):
    # Python's, numpy's and TensorFlow's seeds: tf_keras draws an unseeded initializer's
    # seed from Python's random, so TF's alone left the head to the tests run before.
    tf_keras.utils.set_random_seed(7)
    model = serving.build_model(model_type, golden["config"],
                                None if labels is None else len(labels))
    checkpoints.load_checkpoint(model, golden["checkpoint"])
    if model_type == "tagger":
        _vary_tags(model, golden["config"].vocab_size)
    return [serving.ServingModule(model_type, model, golden["tokenizer"], SEQ_LENGTH,
                                  labels=labels, trim_padding=trim, **kwargs)
            for trim in (False, True)]


def _vary_tags(model, vocab_size):
    """Gives the tagger a head whose argmax differs between pieces.

    The random encoder's outputs share a large common part, so a random head tags every
    piece alike (one tag, and the comparison sees nothing); a wide random kernel with the
    bias that centres each tag's logit over random pieces spreads the tags.
    """
    rows = np.random.RandomState(7)
    ids = tf.constant(rows.randint(1000, vocab_size, (4, 32)), tf.int32)
    inputs = {"input_ids": ids, "input_mask": tf.ones_like(ids),
              "segment_ids": tf.zeros_like(ids)}
    weights = {w.name.split("/", 1)[1]: w for w in model.weights if "tagger/output" in w.name}
    kernel = weights["tagger/output_weights:0"]
    kernel.assign(rows.normal(0.0, 1.0, kernel.shape).astype(np.float32))
    logits = model(inputs, training=False)["logits"]
    weights["tagger/output_bias:0"].assign(-tf.reduce_mean(logits, axis=[0, 1]))


def _text(values):
    return tf.constant(values, tf.string)


def _assert_outputs_equal(full, trimmed, atol=FP32_ATOL):
    """Trimmed vs full-length outputs: other shapes, so float32's bound, not equality."""
    assert set(full) == set(trimmed)
    for name in full:
        want, got = full[name].numpy(), trimmed[name].numpy()
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got, want, atol=atol, rtol=0, err_msg=name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)


def test_packing_to_the_longest_row_is_the_full_packing_cut(golden):
    tokenizer = golden["tokenizer"]
    ids_a, ids_b = tokenizer.tokenize(_text(_TEXTS)), tokenizer.tokenize(_text(_OTHERS))
    full = serving.pack_inputs(ids_a, ids_b, SEQ_LENGTH, tokenizer.cls_id, tokenizer.sep_id)
    assert full["input_ids"].shape.as_list() == [5, SEQ_LENGTH]
    lengths = full["input_mask"].numpy().sum(axis=1)
    assert lengths.max() == SEQ_LENGTH  # the long row fills the window
    for rows, width in (([0, 3, 4], 16), ([0, 3, 4], 1), ([0], 16), ([2], 16)):
        cut = serving.pack_inputs(tf.gather(ids_a, rows), tf.gather(ids_b, rows), SEQ_LENGTH,
                                  tokenizer.cls_id, tokenizer.sep_id, bucket_width=width)
        bucket = input_pipeline.bucket_length(int(lengths[rows].max()), SEQ_LENGTH, width)
        assert cut["input_ids"].shape[1] == bucket
        for key in ("input_ids", "input_mask", "segment_ids"):
            want = full[key].numpy()[rows]
            np.testing.assert_array_equal(cut[key].numpy(), want[:, :bucket])
            assert not want[:, bucket:].any()  # only padding was cut
    # The graph rule is the command line's.
    for longest in (0, 1, 15, 16, 17, 63, 64):
        assert int(input_pipeline.bucket_length(tf.constant(longest), SEQ_LENGTH)) == (
            input_pipeline.bucket_length(longest, SEQ_LENGTH))


def test_classifier_requests_trimmed_equal_full_length(golden):
    full, trimmed = _modules(golden, "classifier", labels=["a", "b"])
    assert not full.trim_padding and trimmed.trim_padding
    for rows in (slice(None), slice(3, 4)):
        a, b = _text(_TEXTS[rows]), _text(_OTHERS[rows])
        _assert_outputs_equal(full.serving_default(a, b), trimmed.serving_default(a, b))
        _assert_outputs_equal(full.serving_text_a(a), trimmed.serving_text_a(a))
    # serving_ids keeps its fixed input and output length.
    ids = trimmed.serving_ids.get_concrete_function()
    assert [s.shape.as_list() for s in ids.structured_input_signature[0]] == [
        [None, SEQ_LENGTH]] * 3


def test_tagger_requests_trimmed_equal_full_length(golden):
    full, trimmed = _modules(golden, "tagger", labels=_TAGS)
    tags = set()
    for rows in (slice(None), slice(3, 4)):
        text = _text(_TEXTS[rows])
        want, got = full.serving_default(text), trimmed.serving_default(text)
        _assert_outputs_equal(want, got)
        tags.update(want["word_tags"].numpy().ravel().tolist())
    assert len(tags) > 2  # the comparison sees several tags


def test_multiple_choice_requests_trimmed_equal_full_length(golden):
    full, trimmed = _modules(golden, "multiple_choice")
    endings = _text([[_OTHERS[i], _TEXTS[(i + 1) % 5], "no"] for i in range(5)])
    for rows in (slice(None), slice(0, 1)):
        context = _text(_TEXTS[rows])
        _assert_outputs_equal(full.serving_default(context, endings[rows]),
                              trimmed.serving_default(context, endings[rows]))


def test_embed_runs_sorted_batches_and_gives_the_full_length_vectors(golden):
    spec = pooling.PoolingSpec("mean", [-1, -2], True)
    full, sorted_batches = _modules(golden, "encoder", pooling_spec=spec, embed_batch_size=2)
    texts = _TEXTS + _OTHERS
    want = full.serving_text_a(_text(texts))["sentence_embedding"].numpy()
    assert want.shape == (10, 32)
    got = sorted_batches.embed(_text(texts))["sentence_embedding"].numpy()
    np.testing.assert_allclose(got, want, atol=FP32_ATOL, rtol=0)  # other batch shapes
    one = sorted_batches.embed(_text(texts[3:4]))["sentence_embedding"].numpy()
    np.testing.assert_allclose(one, want[3:4], atol=FP32_ATOL, rtol=0)
    assert sorted_batches.embed(_text([]))["sentence_embedding"].shape == (0, 32)
    # The encoder's serving_default keeps max_seq_length (per-position outputs).
    out = sorted_batches.serving_text_a(_text(texts[:1]))
    assert out["sequence_output"].shape[1] == SEQ_LENGTH


def test_trimmed_squad_answers_rank_real_positions_only(golden):
    full, trimmed = _modules(golden, "squad", max_query_length=16)
    assert serving.default_trim_padding("squad") is False
    questions = _text(["Where?", "", "Who met on Tuesday?", "What rules?", "x"])
    contexts = _text(["Paris.", "a", "The committee met on Tuesday in Geneva.",
                      "The new rules for international shipping were opposed.", ""])
    logits = full.serving_default(questions, contexts)
    cut = trimmed.serving_default(questions, contexts)
    width = cut["start_logits"].shape[1]
    assert width < SEQ_LENGTH and width % 16 == 0
    for name in ("start_logits", "end_logits"):
        # Another sequence length: another GEMM blocking (one value of 80 was 1.19e-6 off
        # on an AVX2-only CPU), so float32's bound.
        np.testing.assert_allclose(cut[name].numpy(), logits[name].numpy()[:, :width],
                                   atol=FP32_ATOL, rtol=0)
    # The answer: the reference's span rules on the full logits, padding never ranking
    # (each context here is one window: best_spans' rules are answer()'s).
    mask, segments = logits["input_mask"], logits["segment_ids"]
    len_b = tf.reduce_sum(segments, axis=1) - 1          # the context's tokens
    len_a = tf.reduce_sum(mask, axis=1) - len_b - 3      # the question's
    answer = trimmed.answer(questions, contexts)
    assert answer["num_windows"].numpy().tolist() == [1, 1, 1, 1, 0]
    start, end, score, found = serving.best_spans(
        squad_results.real_position_logits(logits["start_logits"], mask),
        squad_results.real_position_logits(logits["end_logits"], mask),
        len_a, len_b, full.n_best_size, full.max_answer_length)
    np.testing.assert_array_equal(answer["start_position"].numpy(), start.numpy())
    np.testing.assert_array_equal(answer["end_position"].numpy(), end.numpy())
    found = found.numpy()
    np.testing.assert_allclose(answer["score"].numpy()[found], score.numpy()[found], atol=1e-5)
    assert found.sum() >= 3  # answers were found


def test_invalid_utf8_is_refused_in_the_graph_naming_the_input_and_row(golden):
    """Issue 73: invalid UTF-8 bytes were dropped, so a tagger's word_start / word_end
    indexed a string the client never sent (here "Paris \\xff Smith": word 2 at 6, where
    the text sent has "\\xff"). Every string input of every signature refuses them now;
    valid texts (non-ASCII included) answer as before, at the offsets of the text sent."""
    (tagger,) = _modules(golden, "tagger", labels=_TAGS)[1:]
    texts = ["Paris \xe9t\xe9 Smith".encode("utf-8"), b"Paris \xff Smith", b"ok"]
    good = tagger.serving_default(tf.constant(texts[:1]))
    assert good["word_start"].numpy().tolist() == [[0, 6, 10]]  # code points of the text
    assert good["word_end"].numpy().tolist() == [[5, 9, 15]]
    for module, call in (
            (tagger, lambda m: m.serving_default(tf.constant(texts))),
            (tagger, lambda m: m.tokenize(tf.constant(texts))),
            (_modules(golden, "classifier", labels=["a", "b"])[1],
             lambda m: m.serving_default(tf.constant(["x", "y", "z"]), tf.constant(texts))),
            (_modules(golden, "multiple_choice")[1],
             lambda m: m.serving_default(tf.constant(["a"]), tf.constant([[b"b", b"c\xc3"]])))):
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"input (text|text_b|endings) holds bytes that are not UTF-8 "
                                 r"\(refused, not dropped"):
            call(module)
    squad = _modules(golden, "squad", max_query_length=16)[1]  # its answer traced already
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"input context holds bytes"):
        squad.answer(tf.constant(["who?"]), tf.constant([b"\x80 John"]))


def test_warmup_requests_of_every_head_replay_as_the_batched_call(golden, tmp_path):
    """The warm-up requests of each head (tagger from a CoNLL file, SQuAD from a SQuAD JSON
    file, multiple choice and the encoder from plain lines), written, read back and
    replayed one by one through the signatures they name: each equal to the same rows
    called as one batch."""
    import json
    import export_saved_model as esm
    from bert_tf2.export import warmup
    from conftest import write_text
    files = {
        "tagger": write_text(tmp_path / "dev.conll", "John B-PER\nSmith I-PER\n\nParis B-LOC\n"
                                                     "is O\nbig O\n"),
        "squad": write_text(tmp_path / "dev.json", json.dumps({"data": [{"paragraphs": [
            {"context": "The committee met on Tuesday in Geneva.",
             "qas": [{"id": "1", "question": "Who met?", "answers": []},
                     {"id": "2", "question": "Where?", "answers": []}]}]}]})),
        "multiple_choice": write_text(tmp_path / "mc.txt", "She opened the door.\tShe walked in."
                                                           "\tIt rained.\nx\ty\tz\n"),
        "encoder": write_text(tmp_path / "enc.txt", "It rained.\n" + _LONG + "\n"),
    }
    kwargs = {"tagger": {"labels": _TAGS}, "squad": {"max_query_length": 16},
              "encoder": {"pooling_spec": pooling.PoolingSpec("mean", [-1], False)}}
    want_rows = {"tagger": [("John Smith",), ("Paris is big",)],
                 "squad": [("Who met?", "The committee met on Tuesday in Geneva."),
                           ("Where?", "The committee met on Tuesday in Geneva.")],
                 "multiple_choice": [("She opened the door.", "She walked in.", "It rained."),
                                     ("x", "y", "z")],
                 "encoder": [("It rained.",), (_LONG.rstrip("\n"),)]}
    for kind, path in files.items():
        module = _modules(golden, kind, **kwargs.get(kind, {}))[1]
        settings = esm.Settings(model_type=kind, warmup_file=str(path))
        rows = warmup.read_rows(settings, ("text", None, None))
        assert rows == want_rows[kind], kind
        found = warmup.requests(kind, rows, module.signatures())
        written = tmp_path / kind / warmup.WARMUP_FILE
        warmup.write(str(tmp_path / kind), "m", found)
        requests = warmup.read_requests(str(written))
        # every signature docs/serving.md shows for the head (the encoder's single texts
        # and embed too: issue 91; the ranker's rank: tests/test_ranker.py)
        signatures = {"squad": ["answer", "serving_default"],
                      "encoder": ["serving_default", "serving_text_a", "embed"]}.get(
                          kind, ["serving_default"])
        assert [r[1] for r in requests] == signatures * len(rows)
        for number, (_, name, inputs) in enumerate(requests):
            row = number // len(signatures)
            function = module.signatures()[name]
            one = function(**{k: tf.constant(v) for k, v in inputs.items()})
            # the names warmup.requests read off the signature without a trace: the traced
            # function's (get_concrete_function: the call's own trace)
            assert warmup.input_names(function) == warmup.input_names(
                function.get_concrete_function()) == set(inputs), (kind, name)
            batched = module.signatures()[name](**{k: tf.constant(np.concatenate(
                [r[2][k] for r in requests if r[1] == name])) for k in inputs})
            for key, value in one.items():
                # Padded outputs (words, entities, positions): the row's own width.
                value, other = np.asarray(value.numpy()[0]), np.asarray(batched[key].numpy()[row])
                if value.ndim:
                    width = min(value.shape[0], other.shape[0])
                    value, other = value[:width], other[:width]
                if value.dtype.kind in "fc":
                    np.testing.assert_allclose(value, other, atol=FP32_ATOL,
                                               err_msg="%s %s" % (kind, key))
                else:
                    assert np.array_equal(value, other), (kind, key, value, other)


def test_warmup_requests_cover_every_signature_a_room_declares(monkeypatch):
    """The signatures a warm-up example calls come from the registry: its kind's requests,
    then each other signature its room's serving_functions declare that the export has,
    with the inputs the room's warmup_inputs makes (no list in warmup.py). Checked on
    every served head with stand-in signatures (no model), and on a head added here."""
    from bert_tf2.export import head_types
    from bert_tf2.export import warmup

    def stand_ins(entry):
        # what warmup.input_names reads of a signature: its named input specs
        return {name: types.SimpleNamespace(input_signature=[
            tf.TensorSpec([None] * rank, tf.string, name=n) for n, rank in inputs])
                for name, _, inputs, _ in entry.serving_functions}

    def row_of(entry):
        least, most, _ = head_types.signature_of(entry.name).fields
        return ("[MASK] one",) + ("two", "three")[:min(max(least, 2), most) - 1]

    seen = {}
    for name in head_types.SERVED:
        entry = head_types.find(name)
        signatures = stand_ins(entry)
        found = warmup.requests(name, [row_of(entry)], signatures)
        kind = head_types.signature_of(name)
        declared = {f[0]: f[2] for f in entry.serving_functions}
        assert [r[0] for r in found] == list(kind.requests) + [
            n for n in declared if n not in kind.requests], name
        for signature, inputs in found:
            assert set(inputs) == warmup.input_names(signatures[signature]), (name, signature)
            for input_name, rank in declared[signature]:
                assert inputs[input_name].ndim == rank, (name, signature, input_name)
        seen[name] = [r[0] for r in found]
    assert seen["ranker"] == ["serving_default", "serving_text_a", "rank"]
    assert seen["encoder"] == ["serving_default", "serving_text_a", "embed"]
    # A signature the export does not have (the encoder's embed without --pooling): left out.
    encoder = stand_ins(head_types.find("encoder"))
    del encoder["embed"]
    assert warmup.signature_names("encoder", encoder) == ["serving_default", "serving_text_a"]
    # A head added later: its own signature called with its room's inputs, warmup.py as is.
    ranker = head_types.find("ranker")
    fields = {f.name: getattr(ranker, f.name) for f in dataclasses.fields(ranker)}
    scorer_class = type("Scorer", (type(ranker),), {
        "serving_functions": ranker.serving_functions + (
            ("score_one", "serve_single", (("query", 1),), None),)})
    added = scorer_class(**dict(fields, name="scorer"))
    monkeypatch.setattr(head_types, "find", lambda n: added if n == "scorer" else None)
    monkeypatch.setattr(head_types, "signature_of",
                        lambda n: head_types.SIGNATURES[added.signature])
    found = warmup.requests("scorer", [("a query", "a passage")], stand_ins(added))
    assert [r[0] for r in found] == ["serving_default", "serving_text_a", "rank", "score_one"]
    assert found[-1][1]["query"].tolist() == [b"a query"]
    # A room that declares a signature but not the inputs of its requests: refused, named.
    silent = type("Silent", (scorer_class,), {"warmup_inputs": lambda self, fields: {}})
    added = silent(**dict(fields, name="scorer"))
    with pytest.raises(ValueError, match=r"^--warmup_file: the rank signature takes passages, "
                                         r"query, a row gave text_a, text_b$"):
        warmup.requests("scorer", [("a query", "a passage")], stand_ins(added))
