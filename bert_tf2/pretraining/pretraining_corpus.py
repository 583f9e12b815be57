"""Reading the pretraining corpus: text files -> documents of tokenized sentences.

The input of create_pretraining_data.py is UTF-8 text with one sentence per line
and a blank line after each document. `read_documents` turns files into
documents (lists of sentences, each a list of tokens), the way the original
script's GFile.readline loop does, but a few MB at a time and with the lines of
a block tokenized together; `line_tokenizer` gives the tokenize callable (the
tokenizer's batch path when it has one, the exact per-line path otherwise).

Text that is not UTF-8 stops the run with the file and line of the first bad
byte. `Progress` and `summary_line` report what was read and made. `open_file` lets a caller read through another file system layer (Beam's,
for gs:// or hdfs:// input); by default `gfile_open` reads them (TensorFlow's GFile for remote
files only).
"""
import os
import time

from absl import logging

from bert_tf2 import fileutil

tf = fileutil.tensorflow  # imported on first use

# Below this much input text the batch tokenizer is not used: building it takes
# about as long as the exact tokenizer needs for 1-2 MB (same tokens either way).
FAST_TOKENIZER_MIN_BYTES = 1 << 20

# Bytes read (and lines tokenized together) at a time.
READ_BLOCK_BYTES = 4 << 20

# Seconds between two progress lines.
PROGRESS_INTERVAL_S = 15.0


def gfile_open(path):
    """Opens `path` for binary reading: a local file as it is, a remote one (gs://, ...)
    with TensorFlow's file systems (the same bytes; TensorFlow imported only for them)."""
    if "://" in str(path):
        return tf.io.gfile.GFile(path, "rb")
    return open(path, "rb")


def text_blocks(path, open_file=gfile_open, on_bytes=None):
    """Yields the lines of a UTF-8 file, as lists of a few MB at a time.

    Lines are split on "\\n" only and every "\\r" is dropped, which is how
    TensorFlow's GFile.readline (used by the original) reads text; a final piece
    without "\\n" counts only if non-empty.

    Args:
      open_file: callable(path) -> binary file object with read(n).
      on_bytes: optional callable(number of bytes), after each read.

    Raises:
      ValueError: naming the file and line of the first invalid UTF-8 byte.
    """
    line_number = 1
    rest = b""
    with open_file(path) as reader:
        while True:
            data = reader.read(READ_BLOCK_BYTES)
            if on_bytes is not None:
                on_bytes(len(data))
            at_end = not data
            data = rest + data
            cut = len(data) if at_end else data.rfind(b"\n") + 1
            block, rest = data[:cut], data[cut:]
            block = block.replace(b"\r", b"")
            if block:
                try:
                    text = block.decode("utf-8")
                except UnicodeDecodeError as e:
                    bad_line = line_number + block.count(b"\n", 0, e.start)
                    raise ValueError("%s, line %d: not valid UTF-8 text (%s)"
                                     % (path, bad_line, e.reason))
                lines = text.split("\n")
                if lines[-1] == "":
                    lines.pop()  # after the final "\n", or an empty last piece
                yield lines
                line_number += len(lines)
            if at_end:
                return


def read_documents(input_files, tokenize_lines, on_progress=None, open_file=gfile_open,
                   on_bytes=None, segmentation=None):
    """Reads `input_files` in order into documents (lists of tokenized sentences).

    A blank line (after stripping whitespace) ends a document; a line that
    tokenizes to nothing is skipped. As in the original, files are concatenated:
    a document not closed by a blank line continues into the next file. Empty
    documents are dropped.

    Args:
      tokenize_lines: callable, list of stripped non-blank lines -> list of
        token (or id) lists.
      on_progress: optional callable(num_documents), called after each block.
      open_file, on_bytes: as in `text_blocks`.
      segmentation: optional word_boundaries.WordSegmentation; then tokenize_lines
        is called as tokenize_lines(lines, words of each line).
    """
    documents = [[]]
    for number, path in enumerate(input_files):
        if open_file is gfile_open and (tf.io.gfile.isdir(path) if "://" in str(path)
                                        else os.path.isdir(path)):
            raise ValueError("input %s is a directory, not a text file" % path)
        words = None if segmentation is None else segmentation.reader(number, path, open_file)
        for lines in text_blocks(path, open_file, on_bytes):
            stripped = [line.strip() for line in lines]
            texts = [line for line in stripped if line]
            if words is None:
                tokenized = iter(tokenize_lines(texts) if texts else ())
            else:  # every line's words, blank lines too (a boundary file is checked)
                line_words = [w for w, line in zip(words.words(lines), stripped) if line]
                tokenized = iter(tokenize_lines(texts, line_words) if texts else ())
            for line in stripped:
                if not line:
                    documents.append([])
                    continue
                tokens = next(tokenized)
                if tokens:
                    documents[-1].append(tokens)
            if on_progress is not None:
                on_progress(len(documents))
        if words is not None:
            words.close()
    return [document for document in documents if document]


def line_tokenizer(tokenizer, use_fast_tokenizer, encoded=None):
    """A callable: list of lines -> list of token lists, one per line.

    Tokens are WordPiece strings, or with `encoded` (encoded[i] is what the
    caller wants for the id i, e.g. its protobuf varint) that value for each
    token's id. use_fast_tokenizer uses the tokenizer's batch methods when it
    has them (same tokens as `tokenize`, much faster); otherwise lines are
    tokenized one by one.
    """
    has = lambda name: use_fast_tokenizer and hasattr(tokenizer, name)
    vocab = tokenizer.vocab
    if encoded is not None and has("convert_batch_to_ids"):
        def tokenize_many(lines):
            return [[encoded[i] for i in ids] for ids in tokenizer.convert_batch_to_ids(lines)]
    else:
        if has("tokenize_batch"):
            pieces_of = tokenizer.tokenize_batch
        else:
            def pieces_of(lines):
                return [tokenizer.tokenize(line) for line in lines]
        if encoded is None:
            tokenize_many = pieces_of
        else:
            def tokenize_many(lines):
                return [[encoded[vocab[t]] for t in tokens] for tokens in pieces_of(lines)]

    def tokenize(lines):
        try:
            return tokenize_many(lines)
        except KeyError as e:
            raise ValueError("token %s produced by the tokenizer is not in the vocabulary "
                             "(is [UNK] missing from it?)" % e)
    return tokenize


def corpus_bytes(input_files):
    """The total size of `input_files` (GFile)."""
    return sum(tf.io.gfile.stat(path).length for path in input_files)


def read_tokenized(input_files, tokenizer, use_fast_tokenizer=True, encoded=None,
                   on_progress=None, open_file=gfile_open, on_bytes=None, batch_bytes=None,
                   segmentation=None):
    """The documents of `input_files`, tokenized by `tokenizer` (see line_tokenizer).

    The batch tokenizer is only set up for FAST_TOKENIZER_MIN_BYTES of text or
    more (same tokens either way). batch_bytes: how much text this tokenizer
    will see in all (a worker of the per-file mode keeps it over many files);
    default: the size of `input_files`. segmentation: optional
    word_boundaries.WordSegmentation: the same tokens, each CJK character that
    continues a word marked (see word_boundaries).
    """
    if use_fast_tokenizer:
        if batch_bytes is None:
            batch_bytes = corpus_bytes(input_files)
        use_fast_tokenizer = batch_bytes >= FAST_TOKENIZER_MIN_BYTES
    tokenize = line_tokenizer(tokenizer, use_fast_tokenizer, encoded)
    if segmentation is not None:
        tokenize = segmentation.tokenizer(tokenize)
    return read_documents(input_files, tokenize, on_progress, open_file, on_bytes,
                          segmentation)


def read_encoded_documents(input_files, tokenizer, use_fast_tokenizer, varints, stats,
                           stage=None, open_file=gfile_open, batch_bytes=None,
                           segmentation=None):
    """The documents of `input_files` as varints; adds files, bytes, documents to stats.

    stage: the progress line's name (None: no progress line); the rest as read_tokenized.
    """
    on_progress = Progress(stage).report if stage else None
    documents = read_tokenized(
        input_files, tokenizer, use_fast_tokenizer, varints, on_progress, open_file,
        on_bytes=lambda n: add_counts(stats, bytes=n), batch_bytes=batch_bytes,
        segmentation=segmentation)
    add_counts(stats, files=len(input_files), documents=len(documents))
    return documents


def no_documents_error(input_files):
    """The error of an input without a single document."""
    return ValueError("no documents in the input files %s (only blank lines or no text)"
                      % ", ".join(input_files))


class Progress(object):
    """Logs "documents, instances, instances/s" at most every PROGRESS_INTERVAL_S."""

    def __init__(self, stage):
        self.stage = stage
        self.start = time.time()
        self.last = self.start

    def report(self, documents, instances=None, force=False):
        """documents: documents done (x dupe_factor); instances: None while reading."""
        now = time.time()
        if not force and now - self.last < PROGRESS_INTERVAL_S:
            return
        self.last = now
        elapsed = max(now - self.start, 1e-9)
        if instances is None:
            logging.info("%s: %d documents (%.0f s)", self.stage, documents, elapsed)
        else:
            logging.info("%s: %d documents, %d instances, %.0f instances/s (%.0f s)",
                         self.stage, documents, instances, instances / elapsed, elapsed)


def add_counts(stats, **counts):
    """Adds `counts` to the dict of counts `stats`."""
    for key, value in counts.items():
        stats[key] = stats.get(key, 0) + value


def sum_counts(all_stats):
    """The sum, key by key, of dicts of counts."""
    total = {}
    for stats in all_stats:
        add_counts(total, **stats)
    return total


def summary_line(stats, max_seq_length):
    """The closing summary line of every mode, from a dict of counts."""
    line = ("Summary: %d files, %d bytes read, %d documents, %d instances, %d masked tokens"
            % tuple(stats.get(k, 0) for k in ("files", "bytes", "documents", "instances",
                                              "masked_tokens")))
    if stats.get("rows"):
        line += "; %d packed rows, %.1f%% of their %d-token rows real tokens" % (
            stats["rows"], 100.0 * stats["row_tokens"] / (stats["rows"] * max_seq_length),
            max_seq_length)
    return line
