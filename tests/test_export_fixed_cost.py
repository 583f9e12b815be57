"""An export's fixed cost cut without a number changed (issue 71): the in-graph tokenizer's
character tables built without asking _code about every code point, its vocabulary asset's
lines found in one lookup, and --litert's converter given the model's variables alone
instead of the whole serving module."""
import collections
import unicodedata

import numpy as np
import pytest

import export_saved_model as esm
import tokenization
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
    real_export = litert.export

    def export_also_with_the_module(export_dir, module, *args, **kwargs):
        written = real_export(export_dir, module, *args, **kwargs)
        info = litert_predictor.read_info(export_dir)
        function = litert.ids_function(module, info["model_type"], info["max_seq_length"])
        seen["with the module"] = litert.convert(function, module, "fp32")
        with open(written["fp32"], "rb") as f:
            seen["written"] = f.read()
        return written

    monkeypatch.setattr(litert, "export", export_also_with_the_module)
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
