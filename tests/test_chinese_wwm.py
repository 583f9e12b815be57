"""Chinese whole-word masking: create_pretraining_data --do_whole_word_mask with word
boundaries from --word_boundary_file or --chinese_word_segmenter=jieba (word_boundaries.py).

The corpus is made of known words whose first characters never occur inside a word, so
the words of any record can be read back from its tokens; the vocabulary is the shared
chinese_vocab.txt.
"""
import collections
import random
import sys

import pytest
import tensorflow as tf

import create_pretraining_data as cpd
import tokenization
from bert_tf2 import flags_common
from bert_tf2.pretraining import pretraining_corpus
from bert_tf2.pretraining import pretraining_shards
from bert_tf2.pretraining import word_boundaries

WORDS = ["北京", "天安门", "学习", "自然语言", "处理", "我们", "喜欢", "图书馆", "电脑", "足球",
         "程序员", "研究所", "中华人民共和国", "漂亮", "非常", "很", "也", "在", "他", "好", "看",
         "playing", "ok", "，"]
SEQ, PREDS, PROB = 48, 12, 0.15


def _document(rng):
    lines = []
    for _ in range(rng.randint(1, 6)):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 15))] + ["。"]
        lines.append(words)
    return lines


def _unspaced(words):
    """The words of a line written as Chinese text: English words keep spaces around them."""
    return " ".join("".join(" %s " % w if w.isascii() and w.isalpha() else w
                            for w in words).split())


def _corpus(seed, num_documents):
    """(input text, boundary text): the same lines, the boundary one with spaces between words."""
    rng = random.Random(seed)
    documents = [_document(rng) for _ in range(num_documents)]
    text = "\n\n".join("\n".join(_unspaced(line) for line in doc) for doc in documents)
    text += "\n"
    bounds = "\n\n".join("\n".join(" ".join(line) for line in doc) for doc in documents) + "\n"
    return text, bounds


@pytest.fixture(scope="module")
def vocab(shared_dir):
    return str(shared_dir / "data" / "vocab" / "chinese_vocab.txt")


@pytest.fixture(scope="module")
def tokenizer(vocab):
    return tokenization.FullTokenizer(vocab)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Two input files with their boundary files."""
    d = tmp_path_factory.mktemp("zh")
    inputs, bounds = [], []
    for i, size in enumerate((25, 15)):
        text, seg = _corpus(i, size)
        inputs.append(d / ("part-%d.txt" % i))
        bounds.append(d / ("part-%d.seg" % i))
        inputs[-1].write_text(text, encoding="utf-8")
        bounds[-1].write_text(seg, encoding="utf-8")
    return collections.namedtuple("Corpus", "dir inputs bounds")(d, inputs, bounds)


def _flags(vocab, inputs, output, *extra):
    return flags_common.parse_flags(cpd.define_flags, [
        "--input_file=%s" % ",".join(map(str, inputs)), "--output_file=%s" % output,
        "--vocab_file=%s" % vocab, "--max_seq_length=%d" % SEQ,
        "--max_predictions_per_seq=%d" % PREDS, "--masked_lm_prob=%g" % PROB,
        "--dupe_factor=3", "--random_seed=7"] + list(extra))


def _run(vocab, inputs, output, *extra):
    cpd.run(_flags(vocab, inputs, output, *extra))
    return [r.numpy() for r in tf.data.TFRecordDataset(str(output))]


def _decoded(record):
    """(original tokens ids, segment ids, masked positions) of one record."""
    f = tf.train.Example.FromString(record).features.feature
    n = sum(f["input_mask"].int64_list.value)
    ids = list(f["input_ids"].int64_list.value)[:n]
    weights = f["masked_lm_weights"].float_list.value
    m = int(sum(weights))
    positions = list(f["masked_lm_positions"].int64_list.value)[:m]
    for p, label in zip(positions, f["masked_lm_ids"].int64_list.value):
        ids[p] = label
    return ids, list(f["segment_ids"].int64_list.value)[:n], positions


STARTS = {w[0] for w in WORDS}
INSIDE = {c for w in WORDS for c in w[1:] if not w.isascii()}
assert not STARTS & INSIDE


def _groups(tokens, segments):
    """The words of each segment as lists of positions: a CJK character that is not a
    word's first one, or a "##" piece, continues the word before it."""
    groups = []
    for seg in (0, 1):
        positions = [i for i, s in enumerate(segments) if s == seg and tokens[i] not in
                     ("[CLS]", "[SEP]")]
        segment_groups = []
        for i in positions:
            if (tokens[i] in INSIDE or tokens[i].startswith("##")) and segment_groups:
                segment_groups[-1].append(i)
            else:
                segment_groups.append([i])
        groups.append(segment_groups)
    return groups


def _partial_words(records, tokenizer, bounded=True):
    """(words cut by the masking, words masked whole, masked, budget) over all records."""
    cut = whole = masked = budget = 0
    for record in records:
        ids, segments, positions = _decoded(record)
        tokens = tokenizer.convert_ids_to_tokens(ids)
        assert not any(t.startswith("##") and not t[2:].isascii() for t in tokens)
        chosen = set(positions)
        a_groups, b_groups = _groups(tokens, segments)
        for group in a_groups + b_groups:
            hit = len(chosen.intersection(group))
            cut += 0 < hit < len(group)
            whole += hit == len(group)
        # A segment B that starts inside a word: that piece joins A's last word (the
        # reference's rule for a "##" piece there).
        first_b = b_groups[0]
        if bounded and tokens[first_b[0]] in INSIDE:
            assert (first_b[0] in chosen) == (a_groups[-1][-1] in chosen)
        masked += len(positions)
        budget += min(PREDS, max(1, round(len(ids) * PROB)))
        assert len(positions) <= min(PREDS, max(1, round(len(ids) * PROB)))
    return cut, whole, masked, budget


def test_cjk_pattern_is_the_tokenizers():
    for cp in range(0x30000):
        assert bool(word_boundaries.CJK_SPLIT.fullmatch(chr(cp)) is None) != \
            tokenization.is_chinese_char(cp), hex(cp)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("batch", [False, True])
def test_marked_tokens_are_the_tokenizers(vocab, lower, batch):
    """Cutting lines around CJK characters gives the whole lines' tokens; the marks sit on
    the characters that continue a word and compare equal to the plain tokens."""
    tok = tokenization.FullTokenizer(vocab, do_lower_case=lower)
    lines = ["我们喜欢playing足球，ok？", "北京\u0301天安门 Héllo世界", "\uf900\u2028中\x00文 x",
             "😀𠀀𠀁abc", "中华人民共和国", "plain english text only"]
    words = [["我们", "喜欢", "playing", "足球", "，", "ok", "？"],
             ["北京\u0301", "天安门", "Héllo", "世界"], ["\uf900\u2028中\x00文", "x"],
             ["😀", "𠀀𠀁", "abc"], ["中华", "人民", "共和国"], ["plain", "english", "text", "only"]]
    base = pretraining_corpus.line_tokenizer(tok, batch)
    marked = word_boundaries.WordSegmentation.tokenizer(base)(lines, words)
    assert marked == [tok.tokenize(line) for line in lines]
    joined = [[type(t) is word_boundaries.JoinedStr for t in tokens] for tokens in marked]
    assert joined[0] == [False, True, False, True, False, False, False, True, False, False, False]
    assert joined[4] == [False, True, False, True, False, True, True]
    assert joined[3][:3] == [False, False, True]  # emoji [UNK], 𠀀 [UNK], 𠀁 joined
    assert not any(joined[5])
    # The fast path's tokens: varints, marked the same way.
    varints = [bytes([i % 128]) for i in range(len(tok.vocab))]
    encoded = word_boundaries.WordSegmentation.tokenizer(
        pretraining_corpus.line_tokenizer(tok, batch, varints))(lines, words)
    assert [[type(t) is word_boundaries.JoinedBytes for t in tokens]
            for tokens in encoded] == joined


def test_every_masked_span_covers_whole_words(vocab, tokenizer, corpus, tmp_path):
    """With the boundary files no word is cut; without them many are (same flags)."""
    records = _run(vocab, corpus.inputs, tmp_path / "wwm.tfrecord", "--do_whole_word_mask",
                   "--word_boundary_file=%s" % ",".join(map(str, corpus.bounds)))
    cut, whole, masked, budget = _partial_words(records, tokenizer)
    assert len(records) > 100
    assert cut == 0 and whole > 300
    # The masking rate asked for: round(n * 0.15) per record (capped by the slots), minus
    # what whole words cannot fill.
    assert 0.95 * budget <= masked <= budget
    plain = _run(vocab, corpus.inputs, tmp_path / "plain.tfrecord", "--do_whole_word_mask")
    plain_cut, _, plain_masked, plain_budget = _partial_words(plain, tokenizer, False)
    assert plain_cut > 100 and plain_masked == plain_budget


@pytest.mark.slow
def test_english_records_unchanged_by_a_segmentation(tmp_path):
    """English text: a boundary file (words = the spaced tokens) or jieba changes nothing."""
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat",
                                "sat", "on", "mat", "play", "##ing", "##ed", "."]) + "\n")
    rng = random.Random(3)
    words = ["the", "cat", "sat", "on", "mat", "playing", "played"]
    text = "\n\n".join("\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(2, 9)))
                                 + " ." for _ in range(rng.randint(1, 5))) for _ in range(30))
    source = tmp_path / "en.txt"
    source.write_text(text + "\n")
    plain = _run(vocab, [source], tmp_path / "a.tfrecord", "--do_whole_word_mask")
    bounded = _run(vocab, [source], tmp_path / "b.tfrecord", "--do_whole_word_mask",
                   "--word_boundary_file=%s" % source)
    assert bounded == plain and len(plain) > 50
    try:
        import jieba  # pylint: disable=import-outside-toplevel,unused-import
    except ImportError:
        return
    assert _run(vocab, [source], tmp_path / "c.tfrecord", "--do_whole_word_mask",
                "--chinese_word_segmenter=jieba") == plain


def _multiset(records):
    return collections.Counter(records)


@pytest.mark.slow
def test_same_records_in_every_mode(vocab, corpus, tmp_path):
    """--num_workers=2 (and Beam) pair each input file with its boundary file: their
    records are those of one process over each file under its shard seed."""
    extra = ("--do_whole_word_mask", "--word_boundary_file=%s" % ",".join(map(str, corpus.bounds)))
    workers = _run(vocab, corpus.inputs, tmp_path / "w.tfrecord", "--num_workers=2", *extra)
    expected = []
    for index, (source, bounds) in enumerate(zip(corpus.inputs, corpus.bounds)):
        options = cpd.options_of(
            _flags(vocab, [source], "x", "--do_whole_word_mask",
                   "--word_boundary_file=%s" % bounds))
        out = tmp_path / ("single-%d.tfrecord" % index)
        cpd.write_pretraining_data([str(source)], [str(out)], vocab, options._replace(
            random_seed=pretraining_shards.shard_seed(7, index)))
        expected += [r.numpy() for r in tf.data.TFRecordDataset(str(out))]
    assert _multiset(workers) == _multiset(expected)
    # Swapping the boundary files breaks the pairing: the first line differs.
    with pytest.raises(ValueError, match=r"part-1.seg, line 1: without spaces it is not "
                                         r"line 1 of .*part-0.txt"):
        _run(vocab, corpus.inputs, tmp_path / "swap.tfrecord", "--do_whole_word_mask",
             "--word_boundary_file=%s,%s" % (corpus.bounds[1], corpus.bounds[0]))
    pytest.importorskip("apache_beam")
    prefix = tmp_path / "beam"
    cpd.run(_flags(vocab, [corpus.dir / "part-*.txt"], prefix, "--runner=DirectRunner",
                   "--num_output_shards=2", "--do_whole_word_mask",
                   "--word_boundary_file=%s" % (corpus.dir / "part-*.seg")),
            beam_args=["--direct_num_workers=1", "--direct_running_mode=in_memory"])
    beam = [r.numpy() for path in sorted(tf.io.gfile.glob("%s-*" % prefix))
            for r in tf.data.TFRecordDataset(path)]
    assert _multiset(beam) == _multiset(workers)


def _bad(tmp_path, vocab, text, bounds, *extra, workers=1):
    source, seg = tmp_path / "in.txt", tmp_path / "in.seg"
    source.write_text(text, encoding="utf-8")
    seg.write_text(bounds, encoding="utf-8")
    out = tmp_path / "out.tfrecord"
    with pytest.raises(ValueError) as e:
        _run(vocab, [source], out, "--do_whole_word_mask", "--word_boundary_file=%s" % seg,
             "--num_workers=%d" % workers, *extra)
    assert not out.exists() and "\n" not in str(e.value)
    return str(e.value)


@pytest.mark.parametrize("workers", [1, 2])
def test_bad_boundary_files(vocab, tmp_path, workers):
    text = "我们喜欢学习。\n北京很好。\n\n他在看书。\n"
    message = _bad(tmp_path, vocab, text, "我们 喜欢 学习 。\n北京 很 好 。\n", workers=workers)
    assert message.endswith("in.seg has 2 lines, fewer than input file %s"
                            % (tmp_path / "in.txt"))
    message = _bad(tmp_path, vocab, text, "我们 喜欢 学习 。\n北京 很 好 。\n\n他 在 看书 。\n\n")
    assert "in.seg has more lines than input file" in message and message.endswith("(4)")
    message = _bad(tmp_path, vocab, text, "我们 喜欢 学习 。\n北京 很 好 。\n\n他 在 读书 。\n",
                   workers=workers)
    assert message == ("word boundary file %s, line 4: without spaces it is not line 4 of %s "
                       "(first difference at character 3: '看书。' in the input, '读书。' in the "
                       "boundary file)" % (tmp_path / "in.seg", tmp_path / "in.txt"))
    message = _bad(tmp_path, vocab, text, "我们 喜欢 学习 。\n北京 很 好 。\n他 在 看书 。\n\n")
    assert "line 3: without spaces it is not line 3" in message


def test_bad_flags(vocab, tmp_path, monkeypatch):
    text = "我们喜欢学习。\n"
    assert _bad(tmp_path, vocab, text, text, "--nodo_whole_word_mask").startswith(
        "--word_boundary_file only decides which tokens --do_whole_word_mask masks together")
    assert "two sources of word boundaries" in _bad(tmp_path, vocab, text, text,
                                                    "--chinese_word_segmenter=jieba")
    two = "--input_file=%s,%s" % (tmp_path / "in.txt", tmp_path / "in.txt")
    assert _bad(tmp_path, vocab, text, text, two) == (
        "--word_boundary_file names 1 files for 2 input files (the i-th boundary file is the "
        "i-th input file's)")
    assert _bad(tmp_path, vocab, text, text, "--word_boundary_file=%s" % (tmp_path / "no*.seg")
                ).startswith("--word_boundary_file: input file pattern")
    segmentation = word_boundaries.WordSegmentation(None, str(tmp_path / "in.seg"))
    options = cpd.PretrainingOptions(32, 5, 0.15, 0.1, 1, True, 1, segmentation)
    with pytest.raises(ValueError, match="runs in the fast pipeline only"):
        cpd.write_pretraining_data([str(tmp_path / "in.txt")], [str(tmp_path / "p.tfrecord")],
                                   vocab, options, fast=False)
    monkeypatch.setitem(sys.modules, "jieba", None)
    source = tmp_path / "in.txt"
    with pytest.raises(ValueError, match=r"^--chinese_word_segmenter=jieba needs jieba, an "
                                         r"optional extra: pip install 'bert-tf2\[chinese\]'"):
        _run(vocab, [source], tmp_path / "j.tfrecord", "--do_whole_word_mask",
             "--chinese_word_segmenter=jieba")
    assert not (tmp_path / "j.tfrecord").exists()


def test_jieba_segmentation(vocab, tokenizer, tmp_path):
    """jieba's words mask as whole words: the same records as a boundary file of them."""
    jieba = pytest.importorskip("jieba", reason="jieba (the 'chinese' extra) not installed")
    text, _ = _corpus(5, 20)
    source, seg = tmp_path / "in.txt", tmp_path / "in.seg"
    source.write_text(text, encoding="utf-8")
    seg.write_text("\n".join(" ".join(jieba.lcut(line)) for line in text.split("\n")),
                   encoding="utf-8")
    by_jieba = _run(vocab, [source], tmp_path / "j.tfrecord", "--do_whole_word_mask",
                    "--chinese_word_segmenter=jieba")
    by_file = _run(vocab, [source], tmp_path / "f.tfrecord", "--do_whole_word_mask",
                   "--word_boundary_file=%s" % seg)
    plain = _run(vocab, [source], tmp_path / "p.tfrecord", "--do_whole_word_mask")
    assert by_jieba == by_file and by_jieba != plain
