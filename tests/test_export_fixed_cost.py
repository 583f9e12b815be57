"""An export's fixed cost cut without a number changed (issue 71): the in-graph tokenizer's
character tables built without asking _code about every code point, its vocabulary asset's
lines found in one lookup, --litert's converter given the model's variables alone
instead of the whole serving module, and the signatures' row bookkeeping done by
graph_ops' small graphs (fewer nodes to trace, save, load and optimize at a first call)."""
import collections
import os
import unicodedata

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

import export_saved_model as esm
import tokenization
from bert_tf2.export import graph_ops
from bert_tf2.export import ids_export
from bert_tf2.export import litert
from bert_tf2.export import litert_predictor
from bert_tf2.export import tokenization_graph
from conftest import REQUIRE_DOORS


def _tables_of_every_code_point():
    """The tables as they were built before: tokenization_graph's _code asked for each of
    the 1,114,112 code points in turn (the oracle of the faster build)."""
    starts, codes, keys, values = [], [], [], []
    previous = None
    for cp in range(0x110000):
        code = 0
        if not 0xD800 <= cp <= 0xDFFF:
            char = chr(cp)
            code = tokenization_graph.CharacterTables._code(  # pylint: disable=protected-access
                char, unicodedata.category(char), keys, values)
        if code != previous:
            starts.append(cp)
            codes.append(code)
            previous = code
    return {"range_starts": np.array(starts, np.int32), "range_codes": np.array(codes, np.int32),
            "map_keys": np.array(keys, np.int32),
            "map_values": np.array(values, np.int32).reshape(-1, 4)}


def test_character_tables_equal_those_of_every_code_point():
    built = tokenization_graph.CharacterTables()
    oracle = _tables_of_every_code_point()
    for name, expected in oracle.items():
        got = getattr(built, name)
        assert got.dtype == expected.dtype and got.shape == expected.shape, name
        np.testing.assert_array_equal(got, expected, err_msg=name)
    # What the tables hold, by hand: "A" lower-cases to "a"; U+00C0 (A grave) to "a" and a
    # combining grave (ccc 230) after NFD; the ideograph U+4E00 and an unassigned code point
    # in a CJK block (U+9FFF) are words of their own; U+E000 (private use) is nothing.
    def code(cp):
        return int(built.range_codes[np.searchsorted(built.range_starts, cp, side="right") - 1])

    mapped = dict(zip(built.map_keys.tolist(), built.map_values.tolist()))
    assert mapped[0x41] == [0x61, -1, -1, -1]
    assert mapped[0xC0] == [0x61, 0x300, -1, -1]
    assert code(0x300) >> 8 == 230 and code(0x300) & 16  # _MARK
    assert code(0x4E00) & 4 and code(0x9FFF) & 4 and code(0x10FFFF) == 0
    assert code(0xE000) == 0 and code(0x20) == 2  # _SPACE


@pytest.mark.slow
def test_litert_converts_the_same_model_without_the_serving_module(
        trained_classifier, tmp_path, monkeypatch):
    """The fp32 model --litert writes (the converter given the variables alone) is the
    one the converter makes given the whole serving module, as it was before: the same
    bytes."""
    if not REQUIRE_DOORS:
        pytest.importorskip("ai_edge_litert", reason="the [litert] extra is missing")
    seen = {}
    real_export = ids_export.export_runtimes

    def export_also_with_the_module(asked, export_dir, module, *args, **kwargs):
        written = real_export(asked, export_dir, module, *args, **kwargs)
        info = litert_predictor.read_info(export_dir)
        function = litert.ids_function(module, info["model_type"], info["max_seq_length"])
        seen["with the module"] = litert.convert(function, module, "fp32")
        with open(written[0]["fp32"], "rb") as f:
            seen["written"] = f.read()
        return written

    monkeypatch.setattr(ids_export, "export_runtimes", export_also_with_the_module)
    esm.run(esm.Settings(init_checkpoint=trained_classifier.folder, model_type="classifier",
                         export_dir=str(tmp_path / "export"), litert="fp32"))
    assert len(seen["written"]) > 100000
    assert seen["written"] == seen["with the module"]


def _asset_lines_token_by_token(vocab):
    """vocab_asset_lines as it was: each token's code points looked up on their own."""
    tables = tokenization_graph.character_tables()
    lines = [" %d" % index for index in range(max(vocab.values()) + 1)]
    for token, index in vocab.items():
        codes = tables.range_codes[np.searchsorted(
            tables.range_starts, [ord(c) for c in token], side="right") - 1]
        if token and not np.any(codes & (2 | 1)):  # _SPACE | _DROP
            lines[index] = token
    return lines


def test_vocab_asset_lines_equal_those_token_by_token(trained_heads):
    files = trained_heads.files()
    real = tokenization.load_vocab(files["vocab_file"])
    # An id no token has (an earlier duplicate's: a placeholder), blank and spaced tokens,
    # deleted characters (NUL, U+200B is Cf), an ideograph, a combining mark.
    odd = collections.OrderedDict([
        ("[UNK]", 0), ("[CLS]", 1), ("a b", 3), ("", 4), ("x\u200by", 5), ("\u4e00", 6),
        ("e\u0301", 7), ("\x00", 8), ("##s", 9), ("\u3000", 10), ("[SEP]", 11)])
    for vocab in (real, odd):
        assert (tokenization_graph.vocab_asset_lines(vocab)
                == _asset_lines_token_by_token(vocab))
    assert tokenization_graph.vocab_asset_lines(odd) == [
        "[UNK]", "[CLS]", " 2", " 3", " 4", " 5", "\u4e00", "e\u0301", " 8", "##s", " 10", "[SEP]"]


def _same(got, want):
    got, want = got.numpy(), want.numpy()
    return got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)


@pytest.mark.parametrize("dtype", [tf.int64, tf.int32])
def test_graph_ops_equal_the_general_ops(dtype):
    """graph_ops' versions give tf.boolean_mask's, value_rowids', tf.repeat's, row slices'
    and reduce_join's values and dtypes, empty rows, empty tensors and all-False masks
    included."""
    rng = np.random.default_rng(7)
    cases = [[], [0], [0, 0], [3], [2, 0, 1], [0, 4, 0, 0, 2]] + [
        list(rng.integers(0, 4, int(rng.integers(1, 7)))) for _ in range(20)]
    for lengths in cases:
        lengths = np.array(lengths, np.int64)
        values = tf.constant(rng.integers(0, 1000, int(lengths.sum())), tf.int32)
        ragged = tf.RaggedTensor.from_row_lengths(values, tf.constant(lengths, dtype))
        assert _same(graph_ops.value_rowids(ragged), ragged.value_rowids())
        counts = tf.constant(lengths, dtype)
        rows = tf.range(len(lengths), dtype=tf.int64)
        assert _same(graph_ops.repeat(rows, counts), tf.repeat(rows, counts))
        for mask in (rng.integers(0, 2, len(values)).astype(bool), np.zeros(len(values), bool)):
            mask = tf.constant(mask, shape=[len(values)])
            assert _same(graph_ops.boolean_mask(values, mask), tf.boolean_mask(values, mask))
        pairs = tf.reshape(tf.range(2 * len(lengths)), [-1, 2])  # a mask over rows
        row_mask = tf.constant(lengths > 1, shape=[len(lengths)])
        assert _same(graph_ops.boolean_mask(pairs, row_mask), tf.boolean_mask(pairs, row_mask))
        strings = tf.RaggedTensor.from_row_lengths(
            tf.strings.as_string(values), tf.constant(lengths, dtype))
        assert _same(graph_ops.join_rows(strings, " "),
                     tf.strings.reduce_join(strings, axis=1, separator=" "))
        for cut in range(len(lengths) + 1):
            for got, want in zip(graph_ops.split_rows(ragged, tf.constant(cut)),
                                 (ragged[:cut], ragged[cut:])):
                assert _same(got.values, want.values) and _same(got.row_splits,
                                                                 want.row_splits)
    # By hand: rows [2, 0, 1] -> row ids 0 0 2; a 2-D mask is tf.boolean_mask's own case.
    three = tf.RaggedTensor.from_row_lengths([5, 6, 7], tf.constant([2, 0, 1], dtype))
    assert graph_ops.value_rowids(three).numpy().tolist() == [0, 0, 2]
    grid = tf.constant([[1, 2], [3, 4]])
    assert graph_ops.boolean_mask(grid, tf.constant([[True, False], [False, True]])
                                  ).numpy().tolist() == [1, 4]


def _function_nodes(export_dir):
    """{function name: its node count} of an export's saved_model.pb."""
    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    library = saved.meta_graphs[0].graph_def.library
    return {f.signature.name: len(f.node_def) for f in library.function}


@pytest.mark.slow  # trains / exports: make test, not the quick lane
def test_the_classifier_export_holds_small_graphs(trained_heads):
    """The tiny classifier's SavedModel: one copy of the tokenizer and of the model, the row
    bookkeeping in graph_ops' small graphs. Before graph_ops its functions held 2,793
    nodes (the tokenizer 1,051, serve_pair 661); then about 2,080, and 2,317 once the
    attention of trimmed requests ran in length groups (attention.row_groups): each node
    costs at every export's trace and save, every tf.saved_model.load and each
    signature's first call."""
    head = trained_heads.exported("classifier")
    nodes = _function_nodes(head.export_dir)
    assert sum(nodes.values()) <= 2400, sum(nodes.values())
    by_prefix = collections.Counter()
    for name in nodes:
        by_prefix[name.rsplit("_", 1)[0]] += 1
    # Traced once each: the tokenizer, the model, the pair signature's graph.
    for name in ("__inference__tokenize_flat", "__inference__run_model",
                 "__inference__serve_pair"):
        assert by_prefix[name] == 1, (name, sorted(nodes))
    assert max(n for name, n in nodes.items() if "_tokenize_flat" in name) <= 800
    assert max(n for name, n in nodes.items() if "_serve_pair" in name) <= 400
