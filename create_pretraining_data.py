"""Turns plain text into BERT pretraining records (masked LM + next sentence prediction).

Input: UTF-8 text files with one sentence per line and a blank line after each
document: the two segments of an example are runs of whole sentences, and "is the
second segment the real continuation?" is the next sentence task.

Output: TFRecord files of `tf.train.Example`s, round-robin over the `--output_file`s
(comma-separated, or a prefix with `--num_output_shards`), each with

    input_ids, input_mask, segment_ids   int64 [max_seq_length]
    masked_lm_positions, masked_lm_ids   int64 [max_predictions_per_seq]
    masked_lm_weights                    float [max_predictions_per_seq]
    next_sentence_labels                 int64 [1]  (1: segment B is random text)

With the default `--num_workers=1`, the records are those that the original BERT
release's create_pretraining_data.py writes for the same flags, one for one and
in the same order: every random decision is drawn from one `random.Random(seed)`
in the original order, while tokenizing (batched for 1 MB of text or more) and
encoding work on token ids: the same records, several times faster.
Two deliberate differences: a glob in `--input_file` is read in sorted file-name
order (the original takes the file system's listing order, which is not defined),
and bad input (no matching file, no text, text that is not UTF-8) stops the run
with a one-line error instead of a traceback or an empty output. Settings the
reference quietly caps (more masked tokens asked for than --max_predictions_per_seq
holds) run with its records and a warning.

This file keeps the flags, the reference's functions under their names and the
entry points, in the reference's order; bert_tf2/pretraining/ holds the rest:
pretraining_generator.py the algorithm (documents -> instances -> masks) on any
token values, pretraining_pipeline.py the fast default mode and the per-file
functions, pretraining_options.py the generation settings, pretraining_corpus.py
reads the text files, pretraining_draws.py the random draws,
pretraining_records.py encodes, packs and writes the records (packed rows: see
pretraining_records.packed_features), pretraining_shards.py / pretraining_beam.py
the per-file modes, word_boundaries.py Chinese whole words. From Python, without flags:

    result = create_pretraining_data.run(create_pretraining_data.Settings(
        input_file="corpus.txt", output_file="out.tfrecord", vocab_file="vocab.txt"))
    result.outputs["output_files"], result.metrics["records"]

Per-file mode (`--num_workers=N`, N > 1, or `--runner=...`)
-----------------------------------------------------------
Each input file is an independent shard, read, turned into examples and shuffled
with a generator seeded from `--random_seed` and the file's position in the
expanded `--input_file` list: the output depends only on the files and flags,
never on N or timing. Random next sentences come from the same file: a different
(equally valid) sample than the single-process mode. A worker holds one file, so
split a large corpus into many files of similar size. `--num_workers=N` runs the
files on this process and N - 1 local workers (pretraining_shards.py);
`--runner=...` runs the same per-file functions on Apache Beam
(pretraining_beam.py), from a laptop to a cluster, with the same multiset of
records.

`--pack_sequences` writes several instances side by side in rows of
--max_seq_length (for 512-token phases of short documents): exactly the
instances of the run without it, packed greedily in their output order (per
file in the per-file mode): an instance joins the current row while the row has
room for it and fewer than --max_instances_per_row instances. run_pretraining.py
--packed_sequences reads them (attention stays within each instance).
"""
from bert_tf2 import startup  # first, before tensorflow: a quiet C++ start-up (startup.py)
import collections
import functools
import importlib
import random
import sys

from absl import flags
from absl import logging
import tensorflow as tf

import tokenization
from bert_tf2 import fileutil
from bert_tf2 import cli
from bert_tf2 import loaders
from bert_tf2 import input_pipeline
from bert_tf2 import settings as settings_lib
from bert_tf2.pretraining import pretraining_corpus
from bert_tf2.pretraining import pretraining_draws
from bert_tf2.pretraining import pretraining_generator
from bert_tf2.pretraining import pretraining_options
from bert_tf2.pretraining import pretraining_pipeline
from bert_tf2.pretraining import pretraining_records
from bert_tf2.pretraining import pretraining_shards
from bert_tf2.pretraining import word_boundaries


# -- Flags --

# (kind, name, default, help): the reference's flags first, then this port's.
_FLAGS = (
    ("string", "input_file", None, "Input text file(s): comma-separated, each may be a glob."),
    ("string", "output_file", None,
     "Output TFRecord file(s), comma-separated; records are dealt round-robin over them."),
    ("string", "vocab_file", None, "The vocabulary file the BERT model was trained on."),
    ("bool", "do_lower_case", True,
     "Lower-case the input text: True for uncased models, False for cased ones."),
    ("bool", "do_whole_word_mask", False,
     "Mask all WordPieces of a word together instead of masking WordPieces independently."),
    ("integer", "max_seq_length", 128, "Maximum sequence length."),
    ("integer", "max_predictions_per_seq", 20,
     "Maximum number of masked LM predictions per sequence (caps round(length * "
     "masked_lm_prob), as in the reference)."),
    ("integer", "random_seed", 12345, "Random seed for data generation."),
    ("integer", "dupe_factor", 10,
     "Number of passes over the input, each with different masks and pairings."),
    ("float", "masked_lm_prob", 0.15, "Masked LM probability."),
    ("float", "short_seq_prob", 0.1,
     "Probability of aiming at a sequence shorter than the maximum length."),
    ("integer", "num_workers", 1,
     "Worker processes. 1 (default) reproduces the original BERT output exactly. N > 1: the "
     "per-file mode on N processes, this one and N - 1 workers (each file a shard with its own "
     "seed and next sentences from within it): deterministic, a different sample than 1 "
     "worker."),
    ("bool", "pack_sequences", False,
     "Pack several instances (the same ones as without it) into each row of --max_seq_length "
     "tokens, for run_pretraining.py --packed_sequences: for long rows (512) of short "
     "documents, where most of a row is otherwise padding."),
    ("integer", "max_instances_per_row", 4,
     "With --pack_sequences: at most this many instances per row (a row has "
     "max_predictions_per_seq * this masked-LM slots); 4 fits 512-token rows."),
    ("integer", "num_output_shards", 0,
     "N > 0: --output_file is a prefix; the records go to N files PREFIX-00000-of-0000N, ..."),
    ("string", "runner", None,
     "Apache Beam runner (DirectRunner, DataflowRunner, ...) for the per-file mode (the "
     "records of --num_workers=N); Beam's own options (--project, --direct_num_workers, ...) "
     "go to Beam, any other unknown flag is an error. Needs the beam extra."),
    ("integer", "max_input_file_mb", 64,
     "With --runner: the largest input file (MB) one worker takes (it holds ~3 x dupe_factor "
     "bytes per byte of its file)."),
)


def define_flags(fv):
    """Registers the flags of this script on `fv` (names and defaults as in BERT)."""
    for kind, name, default, help_text in _FLAGS:
        getattr(flags, "DEFINE_" + kind)(name, default, help_text, flag_values=fv)
    word_boundaries.define_flags(fv)  # Chinese whole-word masking (word_boundaries.py)


Settings = settings_lib.settings_class(define_flags, __name__)

PretrainingOptions = pretraining_options.PretrainingOptions


def options_of(settings):
    """The PretrainingOptions of `settings` (a Settings, or parsed flags)."""
    settings = Settings.of(settings)
    return PretrainingOptions(
        max_seq_length=settings.max_seq_length,
        max_predictions_per_seq=settings.max_predictions_per_seq,
        masked_lm_prob=settings.masked_lm_prob, short_seq_prob=settings.short_seq_prob,
        dupe_factor=settings.dupe_factor, do_whole_word_mask=settings.do_whole_word_mask,
        random_seed=settings.random_seed,
        word_segmentation=word_boundaries.segmentation(settings.chinese_word_segmenter,
                                                       settings.word_boundary_file))


# -- The reference's functions, under its names --

class TrainingInstance(object):
    """One example: a sentence pair with its masks, as WordPiece strings."""

    def __init__(self, tokens, segment_ids, masked_lm_positions, masked_lm_labels,
                 is_random_next):
        self.tokens = tokens
        self.segment_ids = segment_ids
        self.masked_lm_positions = masked_lm_positions
        self.masked_lm_labels = masked_lm_labels
        self.is_random_next = is_random_next

    def __str__(self):
        def joined(values):
            return " ".join(tokenization.printable_text(str(v)) for v in values)
        return ("tokens: %s\nsegment_ids: %s\nis_random_next: %s\n"
                "masked_lm_positions: %s\nmasked_lm_labels: %s\n\n"
                % (joined(self.tokens), joined(self.segment_ids), self.is_random_next,
                   joined(self.masked_lm_positions), joined(self.masked_lm_labels)))

    __repr__ = __str__


def write_instance_to_example_files(instances, tokenizer, max_seq_length,
                                    max_predictions_per_seq, output_files):
    """Writes `TrainingInstance`s round-robin to `output_files`; returns the count.

    Builds each tf.train.Example with the protobuf API (the records equal those
    of the fast pipeline). Logs the first examples and the total.
    """
    return pretraining_records.write_instances(instances, tokenizer, max_seq_length,
                                               max_predictions_per_seq, output_files)


# The reference's tf.train.Feature helpers, under its names.
create_int_feature, create_float_feature = input_pipeline.int_feature, input_pipeline.float_feature


def create_training_instances(input_files, tokenizer, max_seq_length, dupe_factor,
                              short_seq_prob, masked_lm_prob, max_predictions_per_seq, rng,
                              do_whole_word_mask=False, use_fast_tokenizer=True):
    """Reads, tokenizes and turns `input_files` into shuffled `TrainingInstance`s.

    This is the plain-Python form of the pipeline (WordPiece strings, the random
    module's own methods); `write_pretraining_data` gives the same records faster.
    use_fast_tokenizer=False tokenizes line by line with the exact pure-Python
    tokenizer (same tokens, slower).
    """
    documents = pretraining_corpus.read_tokenized(input_files, tokenizer, use_fast_tokenizer)
    generator = _string_generator(max_seq_length, short_seq_prob, masked_lm_prob,
                                  max_predictions_per_seq, list(tokenizer.vocab.keys()), rng,
                                  do_whole_word_mask, dupe_factor)
    instances = [_instance(e) for e in generator.corpus_examples(documents)]
    rng.shuffle(instances)
    return instances


def create_instances_from_document(all_documents, document_index, max_seq_length,
                                   short_seq_prob, masked_lm_prob, max_predictions_per_seq,
                                   vocab_words, rng, do_whole_word_mask=False):
    """Creates the `TrainingInstance`s of all_documents[document_index].

    all_documents: list of documents, each a list of sentences, each a list of
    WordPiece strings; random B segments are drawn from all of them.
    """
    generator = _string_generator(max_seq_length, short_seq_prob, masked_lm_prob,
                                  max_predictions_per_seq, vocab_words, rng,
                                  do_whole_word_mask)
    return [_instance(e) for e in generator.document_examples(all_documents, document_index)]


MaskedLmInstance = collections.namedtuple("MaskedLmInstance", ["index", "label"])


def create_masked_lm_predictions(tokens, masked_lm_prob, max_predictions_per_seq,
                                 vocab_words, rng, do_whole_word_mask=False):
    """Chooses and masks the masked-LM positions of one sequence.

    Args:
      tokens: WordPiece strings, [CLS]/[SEP] included (those are never masked).
      vocab_words: the vocabulary, in order; random replacements come from it.
      rng: random.Random.
      do_whole_word_mask: mask all pieces of a word ("##" continuations) together.

    Returns:
      (output_tokens, masked_lm_positions, masked_lm_labels).
    """
    generator = _string_generator(masked_lm_prob=masked_lm_prob,
                                  max_predictions_per_seq=max_predictions_per_seq,
                                  vocab_words=vocab_words, rng=rng,
                                  do_whole_word_mask=do_whole_word_mask)
    return generator.mask(tokens)


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    """Truncates two token lists in place until their total length is <= max_num_tokens.

    Each step removes one token from the longer list (from `tokens_b` on a tie),
    from the front or the back with equal probability (one `rng.random()` draw).
    """
    pretraining_generator.truncate_pair(tokens_a, tokens_b, max_num_tokens, rng.random)


def _instance(example):
    tokens, num_segment_a, positions, labels, is_random_next = example
    segment_ids = [0] * num_segment_a + [1] * (len(tokens) - num_segment_a)
    return TrainingInstance(tokens=tokens, segment_ids=segment_ids,
                            masked_lm_positions=positions, masked_lm_labels=labels,
                            is_random_next=is_random_next)


def _string_generator(max_seq_length=128, short_seq_prob=0.1, masked_lm_prob=0.15,
                      max_predictions_per_seq=20, vocab_words=(), rng=None,
                      do_whole_word_mask=False, dupe_factor=1):
    options = PretrainingOptions(
        max_seq_length=max_seq_length, max_predictions_per_seq=max_predictions_per_seq,
        masked_lm_prob=masked_lm_prob, short_seq_prob=short_seq_prob,
        dupe_factor=dupe_factor, do_whole_word_mask=do_whole_word_mask, random_seed=None)
    return pretraining_generator.Generator(
        options, pretraining_records.Symbols.for_strings(vocab_words),
        pretraining_draws.Draws(rng))


# Kept importable here: the reader is the one every mode of this script uses.
read_documents = pretraining_corpus.read_documents


# -- Entry points --

def _write_reference_style(input_files, output_files, tokenizer, options, use_fast_tokenizer,
                           packer=None):
    """The plain-Python path: TrainingInstance objects and protobuf building."""
    rng = random.Random(options.random_seed)
    instances = create_training_instances(
        input_files, tokenizer, options.max_seq_length, options.dupe_factor,
        options.short_seq_prob, options.masked_lm_prob, options.max_predictions_per_seq,
        rng, do_whole_word_mask=options.do_whole_word_mask,
        use_fast_tokenizer=use_fast_tokenizer)
    if not instances:
        raise pretraining_corpus.no_documents_error(input_files)
    if packer is not None:
        records = (pretraining_records.instance_record(
            instance, tokenizer, options.max_seq_length, options.max_predictions_per_seq)
            for instance in instances)
        return pretraining_records.write_output(records, output_files, tokenizer.vocab, packer)
    return write_instance_to_example_files(instances, tokenizer, options.max_seq_length,
                                           options.max_predictions_per_seq, output_files)


# -- Per-file mode: one shard per input file (pretraining_shards.py, pretraining_beam.py) --

# The per-file functions both parallel modes run (pretraining_pipeline.py), kept importable here.
shard_seed = pretraining_shards.shard_seed
shard_worker_state = pretraining_pipeline.shard_worker_state
shard_records = pretraining_pipeline.shard_records


def write_pretraining_data(input_files, output_files, vocab_file, options, do_lower_case=True,
                           num_workers=1, use_fast_tokenizer=True, fast=True, stats=None,
                           pack_sequences=False, max_instances_per_row=4, beam=None):
    """Creates the pretraining records of `input_files` into `output_files`.

    Args:
      input_files: list of text files, read in this order (with `beam`: globs).
      output_files: list of TFRecord files (records round-robin over them).
      options: PretrainingOptions.
      num_workers: 1 for the original algorithm; N > 1 for the per-file mode.
      use_fast_tokenizer: the batch tokenizer (same tokens) for 1 MB of text or
        more (pretraining_corpus); False: line by line in pure Python.
      fast: False runs the plain-Python form in one process (WordPiece strings, protobuf
        objects, the random module's own methods); same records, slowly.
      stats: optional dict; gets the counts of the summary line and "worker_cpu_s",
        the CPU seconds the worker processes used (0 without workers).
      pack_sequences: write the instances packed into rows, at most
        `max_instances_per_row` per row (see the module docstring).
      beam: None, or BeamSettings: the per-file mode on Apache Beam.

    Returns:
      The number of records written (packed rows with pack_sequences).
    """
    for warning in options.validate():
        logging.warning(warning)
    if beam is None:
        options = options._replace(word_segmentation=word_boundaries.resolve(
            options, input_files, fileutil.expand_input_files, fast))
    if not tf.io.gfile.exists(vocab_file):
        raise ValueError("--vocab_file=%s does not exist" % vocab_file)
    if num_workers < 1:
        raise ValueError("--num_workers must be at least 1, got %d" % num_workers)
    packer = None
    if pack_sequences:
        packer = pretraining_records.InstancePacker(
            options.max_seq_length, options.max_predictions_per_seq, max_instances_per_row)
    tokenizer = tokenization.FullTokenizer(vocab_file=vocab_file, do_lower_case=do_lower_case)
    loaders.check_vocab_tokens(tokenizer.vocab, vocab_file,
                               pretraining_records.SPECIAL_TOKENS)
    if do_lower_case:
        loaders.warn_if_cased(tokenizer.vocab, vocab_file)
    pretraining_records.log_files(input_files, output_files)
    stats = {} if stats is None else stats
    stats["worker_cpu_s"] = 0.0
    per_row = max_instances_per_row if pack_sequences else None
    # shard_worker_state's arguments after (options, corpus_bytes, open_file).
    worker_args = (vocab_file, do_lower_case, use_fast_tokenizer, per_row)
    if beam is not None:
        count = _beam_module().write_beam(input_files, output_files, options,
                                          shard_worker_state, worker_args, shard_records,
                                          beam, stats)
    elif num_workers > 1:
        count = pretraining_shards.write_sharded(
            input_files, output_files, num_workers, options, shard_worker_state, worker_args,
            shard_records, tokenizer.vocab, stats, packed=bool(per_row))
    elif not fast:
        return _write_reference_style(input_files, output_files, tokenizer, options,
                                      use_fast_tokenizer, packer)
    else:
        with pretraining_pipeline.collector_skips_existing_objects():
            count = pretraining_pipeline.write_single_process(
                input_files, output_files, tokenizer, options, use_fast_tokenizer, stats,
                packer)
    logging.info("%s", pretraining_corpus.summary_line(stats, options.max_seq_length))
    return count


@startup.keeps_process_settings
def run(settings, beam_args=()):
    """Writes the records the settings describe.

    Args:
      settings: a Settings (or the parsed flags of define_flags).
      beam_args: with settings.runner, Beam's pipeline options as command-line
        arguments (["--direct_num_workers=2", "--project=p", ...]); main() takes them
        from the command line (pretraining_beam.split_args).

    Returns:
      A settings Result: outputs["output_files"] the files written, metrics the
      counts of the run ("records": records written, packed rows with
      --pack_sequences; "documents", "instances", ... as the summary line).
    """
    settings = Settings.of(settings)
    settings.require("input_file", "output_file", "vocab_file")
    _check_mode_settings(settings)
    beam = None
    output_files = fileutil.output_files(settings.output_file, settings.num_output_shards,
                                         "--output_file")
    if settings.runner:
        beam = BeamSettings(settings.runner, list(beam_args), settings.max_input_file_mb)
        input_files = [p.strip() for p in settings.input_file.split(",") if p.strip()]
    else:
        input_files = fileutil.expand_input_files(settings.input_file)
        fileutil.check_distinct(output_files, "--output_file", input_files)
    _refuse_pipes(input_files)
    fileutil.check_distinct(output_files, "--output_file", [settings.vocab_file],
                            "--vocab_file")
    stats = {}
    count = write_pretraining_data(
        input_files, output_files, settings.vocab_file, options_of(settings),
        do_lower_case=settings.do_lower_case, num_workers=settings.num_workers,
        stats=stats, pack_sequences=settings.pack_sequences,
        max_instances_per_row=settings.max_instances_per_row, beam=beam)
    metrics = {key: value for key, value in stats.items() if key != "worker_cpu_s"}
    metrics["records"] = count
    return settings_lib.Result(outputs={"output_files": list(output_files)}, metrics=metrics)


def _refuse_pipes(input_files):
    """An input that is a pipe or device is an error (opening a pipe with no writer
    waits for ever; the run measures each input's size and may read it twice)."""
    for path in input_files:
        kind = fileutil.special_file_kind(path)
        if kind:
            raise ValueError("--input_file=%s is a %s: create_pretraining_data measures "
                             "each input file and may read it twice, so %ss are not "
                             "supported; save the text to a file first" % (path, kind, kind))


def _check_mode_settings(settings):
    """A setting of one mode given in another is an error or a warning, never ignored."""
    if settings.runner and settings.given("num_workers"):
        raise ValueError("--num_workers=%d counts local processes and does not apply with "
                         "--runner=%s: Beam takes its own (--direct_num_workers, "
                         "--max_num_workers, ...)" % (settings.num_workers, settings.runner))
    if not settings.runner and settings.given("max_input_file_mb"):
        logging.warning("--max_input_file_mb applies with --runner only: ignored")


BeamSettings = collections.namedtuple("BeamSettings", "runner args max_file_mb")


def _beam_module():
    """pretraining_beam, or a one-line error naming the extra when Beam is missing."""
    try:
        # import_module, not `from bert_tf2.pretraining import ...`: that one takes the
        # package's attribute once set, whatever sys.modules says (tests hide Beam there).
        pretraining_beam = importlib.import_module("bert_tf2.pretraining.pretraining_beam")
    except ImportError as e:
        raise ValueError("--runner needs Apache Beam, an optional extra: pip install "
                         "'bert-tf2[beam]' (%s)" % e) from None
    return pretraining_beam


def main():
    """Console entry point."""
    # The objects of the imports live as long as the process: no collection need walk them.
    pretraining_pipeline.freeze_for_process()
    argv, beam_args = sys.argv, []
    if any(a == "--runner" or a.startswith("--runner=") for a in argv[1:]):
        try:
            argv, beam_args = _beam_module().split_args(argv, define_flags)
        except ValueError as e:
            sys.exit("error: %s" % e)
    cli.run_cli(define_flags, functools.partial(run, beam_args=beam_args), argv)


if __name__ == "__main__":
    main()
