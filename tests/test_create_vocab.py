"""create_vocab.py: layout of the learned vocabulary and how well it covers its corpus."""
import pytest

import create_vocab
import tokenization
from bert_tf2 import flags_common

CORPUS = """\
The baker opened her shop before sunrise and lit the old brick oven.
Fresh loaves of rye and wheat cooled on the wooden racks by the window.
Customers queued in the cold, talking about the weather and the harvest.

The river froze early this winter, so the children skated after school.
Their parents watched from the bank, holding cups of hot cocoa.
Nobody could remember the last time the ice had been so thick.

A café in the square serves crêpes, espresso and naïve little pastries.
Prices rose by 12% last year; the owner blamed the cost of butter!
Visitors from Tōkyō and München wrote kind notes in the guest book.
Some notes were in Chinese: 你好, 谢谢 and 再见 appeared on one page.
"""


def _learn(tmp_path, text, *extra):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(text, encoding="utf-8")
    out = tmp_path / "vocab.txt"
    fv = flags_common.parse_flags(create_vocab.define_flags, [
        "--input_file=%s" % corpus, "--output_file=%s" % out, *extra])
    create_vocab.run(fv)
    return out


def _unk_rate(vocab_file, lines, do_lower_case=True):
    tokenizer = tokenization.FullTokenizer(str(vocab_file), do_lower_case=do_lower_case)
    total = unk = 0
    for line in lines:
        tokens = tokenizer.tokenize(line)
        total += len(tokens)
        unk += tokens.count("[UNK]")
    assert total > 0
    return unk / total


def _read_vocab(path):
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def test_layout_and_coverage(tmp_path):
    out = _learn(tmp_path, CORPUS, "--vocab_size=500")
    tokens = _read_vocab(out)
    assert len(tokens) == len(set(tokens))
    assert 0 < len(tokens) <= 500
    assert all(t and t == t.strip() for t in tokens)
    assert tokens[0] == "[PAD]"
    assert tokens[1:100] == ["[unused%d]" % i for i in range(99)]
    assert tokens[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    # Every character and its continuation form is present, lower-cased and
    # accent-stripped as BasicTokenizer leaves it.
    for char in "abcz.,;:!%12你好":
        assert char in tokens and "##" + char in tokens
    assert "é" not in tokens and "T" not in tokens
    # Frequent words are learned whole.
    assert "the" in tokens
    lines = [l for l in CORPUS.splitlines() if l.strip()]
    assert _unk_rate(out, lines) < 0.01
    # Words never seen but made of known characters still need no [UNK].
    assert _unk_rate(out, ["Brown rabbits nibble clover."]) == 0.0


def test_cased_and_num_unused(tmp_path):
    out = _learn(tmp_path, CORPUS, "--do_lower_case=false", "--num_unused=3",
                 "--vocab_size=400")
    tokens = _read_vocab(out)
    assert tokens[:8] == ["[PAD]", "[unused0]", "[unused1]", "[unused2]",
                          "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert "T" in tokens and "é" in tokens
    lines = [l for l in CORPUS.splitlines() if l.strip()]
    assert _unk_rate(out, lines, do_lower_case=False) < 0.01


@pytest.mark.slow
def test_vocab_size_is_an_upper_bound(tmp_path):
    text = "\n".join("word%d appears here along with token%d" % (i, i * 7) for i in range(300))
    for size in (170, 220):
        tokens = _read_vocab(_learn(tmp_path, text, "--vocab_size=%d" % size,
                                    "--min_count=1"))
        assert len(tokens) == size
    with pytest.raises(ValueError, match="--vocab_size"):
        _learn(tmp_path, text, "--vocab_size=150")


def test_bad_input(tmp_path):
    with pytest.raises(ValueError, match="--input_file"):
        create_vocab.run(flags_common.parse_flags(
            create_vocab.define_flags, ["--output_file=%s" % (tmp_path / "v.txt")]))
    with pytest.raises(ValueError, match="--input_file.*nothing-here"):
        create_vocab.run(flags_common.parse_flags(create_vocab.define_flags, [
            "--input_file=%s" % (tmp_path / "nothing-here*.txt"),
            "--output_file=%s" % (tmp_path / "v.txt")]))
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n\n", encoding="utf-8")
    with pytest.raises(ValueError, match="empty.txt"):
        create_vocab.run(flags_common.parse_flags(create_vocab.define_flags, [
            "--input_file=%s" % empty, "--output_file=%s" % (tmp_path / "v.txt")]))
    assert not (tmp_path / "v.txt").exists()


def test_shared_sample_text(shared_dir, tmp_path):
    sample = shared_dir / "data" / "sample_text.txt"
    out = tmp_path / "vocab.txt"
    fv = flags_common.parse_flags(create_vocab.define_flags, [
        "--input_file=%s" % sample, "--output_file=%s" % out, "--vocab_size=2000"])
    create_vocab.run(fv)
    tokens = _read_vocab(out)
    assert tokens[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    lines = [l for l in sample.read_text(encoding="utf-8").splitlines() if l.strip()]
    assert _unk_rate(out, lines) < 0.01


def test_run_with_settings_twice_in_one_process(tmp_path):
    """run(Settings(...)) needs no flag parsing, runs again in the same process and writes
    what the command line's flags write."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(CORPUS, encoding="utf-8")
    parsed = tmp_path / "parsed.txt"
    from_flags = create_vocab.run(flags_common.parse_flags(create_vocab.define_flags, [
        "--input_file=%s" % corpus, "--output_file=%s" % parsed, "--vocab_size=400"]))
    assert from_flags.outputs == {"vocab_file": str(parsed)}
    for name in ("first.txt", "second.txt"):
        out = tmp_path / name
        result = create_vocab.run(create_vocab.Settings(
            input_file=str(corpus), output_file=str(out), vocab_size=400))
        assert result.outputs == {"vocab_file": str(out)}
        assert result.output_dir is None and result.metrics == {}
        assert out.read_bytes() == parsed.read_bytes()


def test_settings_missing_a_required_field(tmp_path):
    with pytest.raises(ValueError, match="^output_file is required$"):
        create_vocab.run(create_vocab.Settings(input_file=str(tmp_path / "corpus.txt")))
    with pytest.raises(ValueError, match="^input_file is required$"):
        create_vocab.run(create_vocab.Settings(output_file=str(tmp_path / "v.txt")))
    assert not (tmp_path / "v.txt").exists()
