"""Word boundaries for whole-word masking of Chinese text (create_pretraining_data.py).

`--do_whole_word_mask` masks the WordPieces of one word together, a word being a
token and the "##" pieces after it. The tokenizer cuts Chinese text into single
characters with no "##" between them, so without more information every character
is a word of its own. This module brings the missing information, as the
Chinese-BERT-wwm recipe does: a segmenter (`--chinese_word_segmenter=jieba`) or
the user's own segmentation (`--word_boundary_file`, e.g. from LTP or THULAC)
says where the words are, and within one word every CJK character that follows
another CJK character of the same word continues it, exactly as a "##" piece
continues the token before it. Only the masking decision changes: the tokens,
their ids and the vocabulary stay what the tokenizer gives (no "##" id appears in
the records), and the random draws keep the reference's order.

How the continuation is carried: a continuing character's token (a varint of the
fast path, or a WordPiece string) is replaced by an equal value of a marker
subclass (`JoinedBytes` / `JoinedStr`), which joins, compares and hashes as the
plain value, so records and vocabulary lookups are unchanged; the Symbols of
pretraining_records test for the marker (`joined_tests`) only when a
segmentation is on, so the default path runs as before.

Tokens of a line with a segmentation: the line is cut into single CJK characters
and the text between them; the tokenizer puts spaces around every CJK character
before anything else, so tokenizing the pieces gives exactly the tokens of the
whole line, one token per CJK character. Non-CJK text (an English word inside
Chinese text) is untouched: its "##" pieces group as always, and a segmented word
never joins across a non-CJK character.

Boundary files: `--word_boundary_file` is comma-separated, each entry a glob
sorted like `--input_file`'s; after expansion the i-th boundary file belongs to
the i-th input file and the counts must agree. A boundary file has the lines of
its input file with words separated by spaces: per line, the characters other
than whitespace must be those of the input line (a blank line stays blank).
"""
import collections
import logging
import re

from absl import flags

from bert_tf2.pretraining import pretraining_corpus

# The code point blocks tokenization.is_chinese_char calls CJK (the reference's).
_CJK_BLOCKS = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
               (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
_CJK_CLASS = "".join("%s-%s" % (chr(low), chr(high)) for low, high in _CJK_BLOCKS)
# Splitting on one captured CJK character: [text, char, text, char, ..., text].
CJK_SPLIT = re.compile("([%s])" % _CJK_CLASS)
_CJK_RUN = re.compile("[%s]+" % _CJK_CLASS)

SEGMENTERS = ("jieba",)
EXTRA = "chinese"


class JoinedBytes(bytes):
    """A varint token that continues the word before it (equal to the plain value)."""
    __slots__ = ()


class JoinedStr(str):
    """A WordPiece string that continues the word before it (equal to the plain value)."""
    __slots__ = ()


_JOINED = (JoinedBytes, JoinedStr)


def joined(token):
    """`token` marked as the continuation of the word before it."""
    return JoinedBytes(token) if isinstance(token, bytes) else JoinedStr(token)


def joined_tests(is_continuation, starts_word):
    """The _Symbols predicates extended to marked tokens (continuations, never starts)."""
    def continues(token):
        return isinstance(token, _JOINED) or is_continuation(token)

    def starts(token):
        return not isinstance(token, _JOINED) and starts_word(token)
    return continues, starts


def define_flags(fv):
    """Registers --chinese_word_segmenter and --word_boundary_file on `fv`."""
    flags.DEFINE_enum(
        "chinese_word_segmenter", None, list(SEGMENTERS),
        "With --do_whole_word_mask: segment each line with this segmenter (jieba: the "
        "'%s' extra) and mask the characters of one Chinese word together." % EXTRA,
        flag_values=fv)
    flags.DEFINE_string(
        "word_boundary_file", None,
        "With --do_whole_word_mask: your own segmentation (LTP, THULAC, ...): comma-separated "
        "files (globs, sorted as --input_file's), the i-th holding the i-th input file's "
        "lines with words separated by spaces; the characters of one word are masked "
        "together.", flag_values=fv)


class WordSegmentation(collections.namedtuple("WordSegmentation", "segmenter files")):
    """Where the words come from: a segmenter name, or boundary files.

    files: comma-separated globs as given, or (after `resolve`) a tuple with the
    boundary file of each input file, in the input files' order.
    """

    def reader(self, number, path, open_file=pretraining_corpus.gfile_open):
        """The words of the lines of `path`, the `number`-th file of the input list."""
        if self.segmenter == "jieba":
            return _JiebaWords()
        return _BoundaryFileWords(self.files[number], path, open_file)

    def for_file(self, file_index):
        """This segmentation for a run over the `file_index`-th input file alone."""
        if self.segmenter:
            return self
        return self._replace(files=(self.files[file_index],))

    @staticmethod
    def tokenizer(tokenize):
        """tokenize(lines) -> tokenize(lines, words) marking continuing characters."""
        return _MarkingTokenizer(tokenize)


def segmentation(chinese_word_segmenter=None, word_boundary_file=None):
    """The WordSegmentation the two settings ask for, or None (neither given).

    Args:
      chinese_word_segmenter: a name of SEGMENTERS, or None.
      word_boundary_file: comma-separated globs of boundary files, or None.
    """
    if chinese_word_segmenter and word_boundary_file:
        raise ValueError("--chinese_word_segmenter and --word_boundary_file are two sources "
                         "of word boundaries: give one")
    if chinese_word_segmenter and chinese_word_segmenter not in SEGMENTERS:
        raise ValueError("--chinese_word_segmenter=%s is not one of %s"
                         % (chinese_word_segmenter, ", ".join(SEGMENTERS)))
    if chinese_word_segmenter:
        return WordSegmentation(chinese_word_segmenter, None)
    if word_boundary_file:
        return WordSegmentation(None, word_boundary_file)
    return None


def resolve(options, input_files, expand, fast=True):
    """options.word_segmentation ready for the run over `input_files` (None: none asked).

    Checks that whole-word masking is on and the segmenter importable, and pairs the
    boundary files (globs expanded by `expand`) with the input files.
    """
    segmentation = options.word_segmentation
    if segmentation is None:
        return None
    source = ("--chinese_word_segmenter" if segmentation.segmenter
              else "--word_boundary_file")
    if not options.do_whole_word_mask:
        raise ValueError("%s only decides which tokens --do_whole_word_mask masks together: "
                         "add --do_whole_word_mask" % source)
    if not fast:
        raise ValueError("%s runs in the fast pipeline only (not with fast=False)" % source)
    if segmentation.segmenter:
        _import_jieba()
        return segmentation
    files = segmentation.files
    if isinstance(files, str):
        try:
            files = expand([p.strip() for p in files.split(",") if p.strip()])
        except ValueError as e:
            raise ValueError("--word_boundary_file: %s" % e) from None
    if len(files) != len(input_files):
        raise ValueError("--word_boundary_file names %d files for %d input files (the i-th "
                         "boundary file is the i-th input file's)"
                         % (len(files), len(input_files)))
    return segmentation._replace(files=tuple(files))


def _import_jieba():
    try:
        import jieba  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        raise ValueError("--chinese_word_segmenter=jieba needs jieba, an optional extra: pip "
                         "install 'bert-tf2[%s]' (%s)" % (EXTRA, e)) from None
    jieba.setLogLevel(logging.WARNING)
    return jieba


class _JiebaWords(object):
    """Segments every line with jieba (its default, deterministic mode)."""

    def __init__(self):
        self._cut = _import_jieba().lcut

    def words(self, lines):
        """One list of words per line."""
        return [self._cut(line.strip()) if line.strip() else [] for line in lines]

    def close(self):
        """Nothing to check at the end of a file."""


class _BoundaryFileWords(object):
    """Reads a boundary file line by line beside its input file, checking each line."""

    def __init__(self, boundary_path, input_path, open_file):
        self._path, self._input = boundary_path, input_path
        self._blocks = pretraining_corpus.text_blocks(boundary_path, open_file)
        self._lines = []
        self._at = 0
        self._number = 0

    def _next_line(self):
        while self._at == len(self._lines):
            self._lines = next(self._blocks, None)
            self._at = 0
            if self._lines is None:
                self._lines = []
                return None
        self._at += 1
        return self._lines[self._at - 1]

    def words(self, lines):
        """The words of the boundary lines beside `lines` (the input file's next lines)."""
        result = []
        for line in lines:
            self._number += 1
            boundary = self._next_line()
            if boundary is None:
                raise ValueError("word boundary file %s has %d lines, fewer than input file %s"
                                 % (self._path, self._number - 1, self._input))
            words = boundary.split()
            _check_same_characters("".join(line.split()), "".join(words), self._path,
                                   self._input, self._number)
            result.append(words)
        return result

    def close(self):
        """Refuses a boundary file with more lines than its input file."""
        if self._next_line() is not None:
            raise ValueError("word boundary file %s has more lines than input file %s (%d)"
                             % (self._path, self._input, self._number))


def _check_same_characters(text, segmented, path, input_path, number):
    if text == segmented:
        return
    at = next((i for i, (a, b) in enumerate(zip(text, segmented)) if a != b),
              min(len(text), len(segmented)))
    raise ValueError(
        "word boundary file %s, line %d: without spaces it is not line %d of %s (first "
        "difference at character %d: %r in the input, %r in the boundary file)"
        % (path, number, number, input_path, at + 1, text[at:at + 5], segmented[at:at + 5]))


def continuations(words):
    """For each CJK character of `words` in order: does it continue its word?

    True when the character before it in the same word is a CJK character too.
    """
    joins = []
    for word in words:
        for run in _CJK_RUN.findall(word):
            joins.append(False)
            joins.extend([True] * (len(run) - 1))
    return joins


class _MarkingTokenizer(object):
    """Tokens of lines with each continuing CJK character's token marked.

    The text between CJK characters is tokenized in one batch per call; the token of
    each CJK character (always exactly one) is kept once per character.
    """

    def __init__(self, tokenize):
        self._tokenize = tokenize
        self._plain = {}
        self._marked = {}

    def _learn(self, chars):
        new = sorted(set(chars).difference(self._plain))
        for char, tokens in zip(new, self._tokenize(new) if new else ()):
            if len(tokens) != 1:
                raise ValueError("CJK character %r gave %d tokens, not one"
                                 % (char, len(tokens)))
            self._plain[char] = tokens[0]
            self._marked[char] = joined(tokens[0])

    def __call__(self, lines, words):
        pieces = [CJK_SPLIT.split(line) for line in lines]
        self._learn(char for parts in pieces for char in parts[1::2])
        between = [text for parts in pieces for text in parts[0::2] if text]
        between_tokens = iter(self._tokenize(between) if between else ())
        plain, marked = self._plain, self._marked
        result = []
        for line, parts, line_words in zip(lines, pieces, words):
            joins = continuations(line_words)
            if len(joins) != len(parts) // 2:
                raise ValueError("the segmentation of %r has %d CJK characters, the line %d"
                                 % (line[:40], len(joins), len(parts) // 2))
            tokens = []
            for i, text in enumerate(parts):
                if i % 2:
                    tokens.append((marked if joins[i // 2] else plain)[text])
                elif text:
                    tokens += next(between_tokens)
            result.append(tokens)
        return result
