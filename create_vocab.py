r"""Learns a WordPiece vocabulary (vocab.txt) from raw text corpora.

The input is what create_pretraining_data.py reads: plain UTF-8 text, one
sentence per line, documents separated by blank lines (blank lines are simply
skipped here). Every line is first split into words exactly as
`tokenization.BasicTokenizer` splits it at training time (clean-up, CJK
splitting, punctuation splitting and, with --do_lower_case, lower-casing and
accent stripping), so the learned pieces are the ones `FullTokenizer` will look
for. The word counts are then handed to tensorflow_text's WordPiece learner.

Layout of the written file (one token per line, no duplicates), modelled on
Google's released vocabularies:

    [PAD]                       id 0
    [unused0] .. [unused{N-1}]  ids 1..N        (N = --num_unused, default 99)
    [UNK] [CLS] [SEP] [MASK]    ids N+1..N+4    (100..103 with the default,
                                                 the ids Google's files use)
    every single character seen, then "##" + every such character
    the learned words and "##" pieces, most frequent first

Every character that occurs in the corpus (up to --max_unique_chars distinct
ones) is in the vocabulary both as a word start and as a "##" continuation, so
any word made of those characters tokenizes without [UNK]. The pieces are cut
to keep the file at most --vocab_size lines; the learner may stop below that on
a small corpus (a piece must occur at least --min_count times).

Example:
    python create_vocab.py --input_file=corpus/*.txt --output_file=vocab.txt \
        --vocab_size=30522 --do_lower_case=True
"""
from bert_tf2 import startup  # first, before tensorflow: a quiet C++ start-up (startup.py)
import collections

from absl import flags
from absl import logging

from bert import tokenization  # ours, whatever tokenization.py a user's folder holds
from bert_tf2 import fileutil
from bert_tf2 import cli
from bert_tf2 import settings as settings_lib

SPECIAL_TOKENS = ("[UNK]", "[CLS]", "[SEP]", "[MASK]")
JOINER = "##"


def define_flags(fv):
    """Registers create_vocab's flags on `fv`."""
    flags.DEFINE_string(
        "input_file", None,
        "Input raw text file(s), comma-separated globs: one sentence per line, "
        "blank lines between documents (the create_pretraining_data.py format).",
        flag_values=fv)
    flags.DEFINE_string("output_file", None, "Where to write the vocabulary (vocab.txt).",
                        flag_values=fv)
    flags.DEFINE_integer("vocab_size", 30522,
                         "Largest number of lines in the output, reserved tokens included.",
                         flag_values=fv)
    flags.DEFINE_bool(
        "do_lower_case", True,
        "Lower-case and strip accents before learning; use the same value when "
        "tokenizing with the resulting vocabulary.", flag_values=fv)
    flags.DEFINE_integer(
        "num_unused", 99,
        "Number of [unusedK] placeholder tokens placed right after [PAD]. The default "
        "puts [UNK], [CLS], [SEP], [MASK] at ids 100-103, as in Google's vocabularies.",
        flag_values=fv)
    flags.DEFINE_integer(
        "min_count", 2,
        "Smallest number of occurrences for a multi-character piece to be learned "
        "(single characters are always kept).", flag_values=fv)
    flags.DEFINE_integer(
        "max_unique_chars", 1000,
        "Keep at most this many distinct characters (the most frequent); words "
        "with any other character are left out of learning and map to [UNK].",
        flag_values=fv)
    flags.DEFINE_integer("max_token_length", 50,
                         "Words longer than this many characters are not learned from.",
                         flag_values=fv)
    flags.DEFINE_integer(
        "max_input_words", 5000000,
        "Learn from at most this many distinct words, the most frequent (-1: all).",
        flag_values=fv)
    flags.DEFINE_integer("num_iterations", 4, "Refinement passes of the learner.",
                         flag_values=fv)


Settings = settings_lib.settings_class(define_flags, __name__)


def reserved_tokens(num_unused):
    """The tokens at the head of the vocabulary, in order."""
    return ["[PAD]"] + ["[unused%d]" % i for i in range(num_unused)] + list(SPECIAL_TOKENS)


def count_words(input_files, do_lower_case):
    """Counts the BasicTokenizer words of every non-blank line of `input_files`."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    basic = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
    counts = collections.Counter()
    for path in input_files:
        before = sum(counts.values())
        with tf.io.gfile.GFile(path, "rb") as reader:
            for raw in reader:
                line = tokenization.convert_to_unicode(raw).strip()
                if line:
                    counts.update(basic.tokenize(line))
        logging.info("%s: %d words", path, sum(counts.values()) - before)
    return counts


def _learn_pieces(word_counts, vocab_size, settings):
    """Runs tensorflow_text's learner; returns its tokens, most useful first."""
    # pylint: disable=import-outside-toplevel
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

    return learner.learn(
        sorted(word_counts.items()),
        vocab_size=vocab_size,
        reserved_tokens=[],
        upper_thresh=None,
        lower_thresh=settings.min_count,
        num_iterations=settings.num_iterations,
        max_input_tokens=settings.max_input_words,
        max_token_length=settings.max_token_length,
        max_unique_chars=settings.max_unique_chars,
        include_joiner_token=True,
        joiner=JOINER)


def build_vocab(word_counts, settings):
    """Returns the list of vocabulary tokens for `word_counts` (a word -> count map).

    Args:
      word_counts: word -> count, as count_words returns.
      settings: create_vocab's Settings (vocab_size, num_unused, min_count,
        max_unique_chars, max_token_length, max_input_words, num_iterations).
    """
    head = reserved_tokens(settings.num_unused)
    learned = _learn_pieces(word_counts, max(settings.vocab_size - len(head), 1), settings)

    # The learner keeps the characters of the words it learned from; also keep
    # those of longer words (up to the WordpieceTokenizer limit of 200
    # characters), within the same --max_unique_chars most frequent ones.
    char_counts = collections.Counter()
    for word, count in word_counts.items():
        if len(word) <= 200:
            for char in word:
                char_counts[char] += count
    frequent = sorted(char_counts.items(), key=lambda kv: (-kv[1], kv[0]))
    chars = {char for char, _ in frequent[:settings.max_unique_chars]}
    chars = sorted(chars | {t for t in learned if len(t) == 1})
    char_set = set(chars)
    continuations = [JOINER + c for c in chars]
    base = head + chars + continuations
    if len(base) > settings.vocab_size:
        raise ValueError(
            "--vocab_size=%d is too small: the %d reserved tokens and the %d characters "
            "of the corpus (each also as a '##' continuation) need %d lines"
            % (settings.vocab_size, len(head), len(chars), len(base)))

    seen = set(base)
    pieces = []
    for token in learned:
        if token in seen:
            continue
        if token.startswith(JOINER) and token[len(JOINER):] in char_set and \
                len(token) == len(JOINER) + 1:
            continue
        seen.add(token)
        pieces.append(token)
    return base + pieces[:settings.vocab_size - len(base)]


def _check_settings(settings):
    """ValueError naming the first flag whose value cannot make a vocabulary."""
    settings.require("input_file", "output_file")
    fileutil.check_output_file(settings.output_file, "--output_file")
    if settings.num_unused < 0:
        raise ValueError("--num_unused must be >= 0, got %d" % settings.num_unused)
    if settings.min_count < 1:
        raise ValueError("--min_count must be >= 1, got %d" % settings.min_count)
    if settings.max_unique_chars < 1:
        raise ValueError("--max_unique_chars must be >= 1, got %d" % settings.max_unique_chars)
    if settings.vocab_size < len(reserved_tokens(settings.num_unused)) + 2:
        raise ValueError("--vocab_size=%d leaves no room after the %d reserved tokens"
                         % (settings.vocab_size, len(reserved_tokens(settings.num_unused))))


@startup.keeps_process_settings
def run(settings):
    """Learns the vocabulary and writes it to --output_file.

    Args:
      settings: a Settings, or create_vocab's parsed flags.
    Returns:
      a settings.Result whose outputs are {"vocab_file": the file written}.
    """
    settings = Settings.of(settings)
    _check_settings(settings)
    try:
        input_files = fileutil.expand_input_files(settings.input_file)
    except ValueError as e:
        raise ValueError("--input_file: %s" % e) from e
    fileutil.prepare_output_file(settings.output_file, "--output_file",
                                 inputs=[("--input_file", path) for path in input_files])
    counts = count_words(input_files, settings.do_lower_case)
    if not counts:
        raise ValueError("--input_file: no text in %s" % ", ".join(input_files))
    logging.info("%d words, %d distinct", sum(counts.values()), len(counts))

    vocab = build_vocab(counts, settings)
    assert len(vocab) == len(set(vocab)), "duplicate tokens in the vocabulary"
    with fileutil.atomic_open(settings.output_file, "w") as writer:
        for token in vocab:
            writer.write(token + "\n")
    logging.info("Wrote %d tokens to %s", len(vocab), settings.output_file)
    return settings_lib.Result(outputs={"vocab_file": settings.output_file})


def main():
    """Console entry point."""
    cli.run_cli(define_flags, run)


if __name__ == "__main__":
    main()
