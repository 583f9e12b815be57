"""create_pretraining_data's per-file mode as an Apache Beam pipeline (`--runner=...`).

The records are those of `--num_workers=N` (any N), as a multiset, whatever the
runner and the number of Beam workers: each input file is one task, run by the
same two functions as the process pool (create_pretraining_data.shard_worker_state
and shard_records: the file's shard seed, its documents, masking, shuffle and,
with --pack_sequences, its packed rows). This module only wires them:

    input files --Reshuffle--> one task per file: its records, dealt over the
        output shards by a seeded draw per record and written as one temporary
        file of consecutive pieces (one piece per output shard)
    --GroupByKey(output shard)--> the shard's pieces (names and byte ranges only:
        no record passes through the shuffle), interleaved evenly as in
        pretraining_shards, written to a temporary TFRecord file
    --> a manifest of the committed temporary files and per-file counts.

The entry point then renames the committed files to the output names and removes
the temporary folder, so an output file appears only when the whole run
succeeded; a failed run leaves none. Retried bundles write files of their own
(unique names) that no manifest line names; exactly-once output of the GroupByKey
and of the manifest sink makes the result independent of retries.

A worker holds one input file's documents and records (the largest input file
bounds it, checked up front against --max_input_file_mb) plus one block buffer
per piece while it writes a shard. Input files are read through Beam's file
systems; temporary and output files through TensorFlow's (the reader of the
output, run_pretraining.py, needs those anyway): local, gs://, hdfs://.

Only create_pretraining_data imports this module, and only with --runner.
"""
import argparse
import contextlib
import difflib
import hashlib
import io
import json
import logging as python_logging
import os
import random
import re
import signal
import struct
import sys
import threading
import traceback
import typing
import uuid

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.pipeline_options import StandardOptions
from absl import flags
from absl import logging

from bert_tf2 import fileutil
from bert_tf2.pretraining import pretraining_corpus
from bert_tf2.pretraining import pretraining_shards
from bert_tf2.pretraining import word_boundaries

# TensorFlow, imported on first use: a local worker writing small shards never does.
tf = fileutil.tensorflow

# Beam metrics namespace of the counters (files, bytes, documents, instances, ...).
NAMESPACE = "create_pretraining_data"

# Marks errors of the input inside a worker, to find them in the runner's report.
_BAD_INPUT = "bad input: "


class _OptionNames(argparse.ArgumentParser):
    """Collects the options Beam's PipelineOptions classes declare: name -> takes a value."""

    def __init__(self):
        super(_OptionNames, self).__init__(add_help=False, allow_abbrev=False)
        self.takes_value = {}

    def add_argument(self, *args, **kwargs):
        action = super(_OptionNames, self).add_argument(*args, **kwargs)
        for name in action.option_strings:
            self.takes_value[name] = action.nargs != 0
        return action

    add_value_provider_argument = add_argument


def beam_options():
    """{"--name": takes a value} of every option Beam's PipelineOptions know here."""
    names = _OptionNames()
    pending, seen = [PipelineOptions], set()
    while pending:
        for cls in pending.pop().__subclasses__():
            if cls not in seen:
                seen.add(cls)
                cls._add_argparse_args(names)  # pylint: disable=protected-access
                pending.append(cls)
    return names.takes_value


def _absl_flag(name, flag_values):
    """The absl flag `name` ("noNAME" for a boolean NAME) of flag_values, or None."""
    for fv in flag_values:
        if name in fv:
            return fv[name]
        if name.startswith("no") and name[2:] in fv and fv[name[2:]].boolean:
            return fv[name[2:]]
    return None


def _unknown_flag(arg, names, program):
    """The one-line error of an argument neither absl nor Beam knows."""
    name = arg.split("=", 1)[0]
    close = difflib.get_close_matches(name.lstrip("-"), [n.lstrip("-") for n in names],
                                      n=1, cutoff=0.75)
    return ("unknown flag %s: not a flag of %s, nor an option of Apache Beam%s"
            % (name, os.path.basename(program),
               "; did you mean --%s?" % close[0] if close else ""))


def split_args(argv, define_flags):
    """(argv for absl, options for Beam) of a command line with --runner.

    A flag of `define_flags` or of absl goes to absl; an option Beam's PipelineOptions
    declare goes to Beam, with its value ("--project p" or "--project=p"). Anything
    else is a ValueError naming it (with the closest known name): Beam would only log
    that it discards an argument it does not know, and run with the default of the
    flag the user misspelt.
    """
    ours_fv = flags.FlagValues()
    define_flags(ours_fv)
    theirs_known = beam_options()
    ours, theirs = [argv[0]], []
    args = list(argv[1:])
    while args:
        arg = args.pop(0)
        if arg == "--":  # absl's end of flags: the rest are its positional arguments
            ours += [arg] + args
            break
        if not arg.startswith("-") or arg == "-":
            ours.append(arg)
            continue
        name = arg.split("=", 1)[0]
        flag = _absl_flag(name.lstrip("-"), (ours_fv, flags.FLAGS))
        if flag is not None:
            side, takes_value = ours, not flag.boolean
        elif name in theirs_known:
            side, takes_value = theirs, theirs_known[name]
        else:
            raise ValueError(_unknown_flag(arg, list(ours_fv) + list(flags.FLAGS) +
                                           list(theirs_known), argv[0]))
        side.append(arg)
        # absl takes the next argument as the value whatever it is; argparse (Beam)
        # unless it looks like an option.
        if takes_value and "=" not in arg and args and (
                side is ours or not args[0].startswith("-")):
            side.append(args.pop(0))
    return ours, theirs


def open_file(path):
    """Opens an input file through Beam's file systems (bytes as stored)."""
    return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def match_input_files(patterns, max_file_mb):
    """[(path, size)] of comma-separated globs: each glob sorted, as the other modes.

    Raises:
      ValueError: a glob matching nothing, or a file over max_file_mb MB.
    """
    files = []
    for pattern in patterns:
        # Beam's local file system matches a glob without a folder ("part-*.txt") nowhere.
        where = pattern if "://" in pattern or os.path.dirname(pattern) else \
            os.path.join(os.curdir, pattern)
        try:
            metadata = FileSystems.match([where])[0].metadata_list
        except (IOError, OSError, beam.io.filesystem.BeamIOError):
            metadata = []
        if not metadata:
            raise ValueError("input file pattern %r matches no file" % pattern)
        files.extend(sorted((m.path, m.size_in_bytes) for m in metadata))
    if not files:
        raise ValueError("no input files given")
    for path, size in files:
        if max_file_mb and size > max_file_mb << 20:
            raise ValueError(
                "%s holds %.0f MB, more than --max_input_file_mb=%d that one worker takes "
                "(its documents and records stay in memory, ~3 x --dupe_factor bytes per "
                "byte): split it into smaller files at blank lines (document ends)"
                % (path, size / 2.0 ** 20, max_file_mb))
    return files


def output_rng(random_seed, file_index):
    """The generator that deals a file's records over the output shards."""
    digest = hashlib.sha256(b"output/%d/%d" % (random_seed, file_index)).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


# Declared, as Beam cannot infer it from a process() that also yields tagged stats.
@beam.typehints.with_output_types(typing.Tuple[int, typing.Any])
class _MakePieces(beam.DoFn):
    """One input file -> its records, as pieces of one temporary file per output shard."""

    def __init__(self, setup, setup_args, make_records, random_seed, num_shards, temp_dir):
        super(_MakePieces, self).__init__()
        self._setup, self._setup_args = setup, setup_args
        self._make_records = make_records
        self._random_seed, self._num_shards, self._temp_dir = random_seed, num_shards, temp_dir
        self._state = None

    def setup(self):
        """Builds the per-worker state (tokenizer, options) once per DoFn instance."""
        self._state = self._setup(*self._setup_args)

    def process(self, task):
        """(file_index, path) -> (shard, piece) pairs, and the file's stats tagged "stats"."""
        file_index, path = task
        temp, pieces, stats = _one_line_errors(self._write_pieces, file_index, path)
        for name, value in stats.items():
            beam.metrics.Metrics.counter(NAMESPACE, name).inc(value)
        start = 0
        for shard, piece in enumerate(pieces):
            end = start + sum(len(r) for r in piece) + \
                pretraining_shards.RECORD_OVERHEAD * len(piece)
            if piece:
                yield shard, (file_index, temp, len(piece), start, end)
            start = end
        yield beam.pvalue.TaggedOutput("stats", json.dumps({"stats": stats}))

    def _write_pieces(self, file_index, path):
        """(temporary file, records per output shard, stats) of one input file."""
        records, stats = self._make_records(self._state, file_index, path, None)
        deal = output_rng(self._random_seed, file_index).randrange
        pieces = [[] for _ in range(self._num_shards)]
        for record in records:
            pieces[deal(self._num_shards)].append(record)
        del records
        temp = os.path.join(self._temp_dir, "file-%06d-%s" % (file_index, uuid.uuid4().hex))
        pretraining_shards.write_shard_file(temp, (r for piece in pieces for r in piece))
        return temp, pieces, stats


class _WriteShard(beam.DoFn):
    """An output shard's pieces -> one temporary TFRecord file; yields its manifest line."""

    def __init__(self, temp_dir):
        super(_WriteShard, self).__init__()
        self._temp_dir = temp_dir

    def process(self, shard_pieces):
        """(shard, pieces) -> the manifest line of the shard's temporary file."""
        shard, pieces = shard_pieces
        temp = os.path.join(self._temp_dir, "out-%06d-%s" % (shard, uuid.uuid4().hex))
        count = _one_line_errors(_write_records, temp, pretraining_shards.interleave_shards(
            [p[1:] for p in sorted(pieces)]), sum(p[4] - p[3] for p in pieces))
        yield json.dumps({"shard": shard, "path": temp, "records": count})


# Up to this many bytes of records, a local shard is written in Python (crc32c at about
# 10 MB/s) by a worker that has not imported TensorFlow (its import costs seconds of CPU).
PYTHON_WRITER_MAX_BYTES = 32 << 20


def _write_records(path, records, num_bytes):
    """Writes `records` (num_bytes in all) as a TFRecord file at `path`; their count."""
    if "tensorflow" in sys.modules or "://" in path or num_bytes > PYTHON_WRITER_MAX_BYTES:
        writer = tf.io.TFRecordWriter(path)
        write = writer.write
    else:
        writer = open(path, "wb")
        write = lambda record: writer.write(tfrecord_frame(record))
    count = 0
    with writer:
        for record in records:
            write(record)
            count += 1
    return count


def _crc32c_table():
    table = []
    for byte in range(256):
        value = byte
        for _ in range(8):
            value = (value >> 1) ^ 0x82F63B78 if value & 1 else value >> 1
        table.append(value)
    return table


_CRC32C_TABLE = _crc32c_table()


def masked_crc32c(data, table=_CRC32C_TABLE):
    """The TFRecord format's checksum of `data`: its CRC-32C, rotated and offset."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord_frame(record):
    """`record` as tf.io.TFRecordWriter writes it: length, its checksum, data, its checksum."""
    length = struct.pack("<Q", len(record))
    return b"".join([length, struct.pack("<I", masked_crc32c(length)), record,
                     struct.pack("<I", masked_crc32c(record))])


def _one_line_errors(function, *args):
    """function(*args), its bad-input and file errors marked for _input_error.

    Inside a worker the error reaches the entry point as text (a remote traceback),
    whatever its type: ValueError (a bad input line), OSError (Beam's file systems)
    or tf.errors.OpError (TensorFlow's) alike become one marked line.
    """
    try:
        return function(*args)
    except Exception as e:  # pylint: disable=broad-except
        imported = sys.modules.get("tensorflow")  # none of its errors without it
        op_errors = (imported.errors.OpError,) if imported else ()
        if not isinstance(e, (ValueError, OSError) + op_errors):
            raise
        text = e.message if isinstance(e, op_errors) else str(e)
        raise ValueError(_BAD_INPUT + (text.strip().splitlines() or [repr(e)])[0]) from None


def _build(pipeline, tasks, num_shards, temp_dir, setup, setup_args, make_records,
           random_seed):
    made = (pipeline
            | "InputFiles" >> beam.Create(tasks)
            | "SpreadFiles" >> beam.Reshuffle()
            | "MakeRecords" >> beam.ParDo(_MakePieces(setup, setup_args, make_records,
                                                      random_seed, num_shards, temp_dir))
            .with_outputs("stats", main="pieces"))
    written = (made.pieces
               | "GroupByShard" >> beam.GroupByKey()
               | "WriteShards" >> beam.ParDo(_WriteShard(temp_dir)))
    _ = ((written, made.stats)
         | "Manifest" >> beam.Flatten()
         | "WriteManifest" >> beam.io.WriteToText(os.path.join(temp_dir, "manifest"),
                                                  shard_name_template="", num_shards=1))


def _read_manifest(temp_dir):
    stats, shards = [], {}
    with tf.io.gfile.GFile(os.path.join(temp_dir, "manifest")) as f:
        for line in f:
            entry = json.loads(line)
            if "stats" in entry:
                stats.append(entry["stats"])
            else:
                shards[entry["shard"]] = (entry["path"], entry["records"])
    return pretraining_corpus.sum_counts(stats), shards


def _input_error(error):
    """The one-line ValueError of a bad input inside a worker, else None."""
    text = str(error)
    at = text.rfind(_BAD_INPUT)
    if at < 0:
        return None
    return ValueError(text[at + len(_BAD_INPUT):].split("\n")[0].split(" [while running")[0])


_WORKER_EXIT = re.compile(r"Worker subprocess exited with return code (-?\d+)")


def _worker_lost(error, thread_errors):
    """The one-line ValueError of a worker process that died (killed, out of memory)
    while the pipeline ran, else None. Beam reports it as "Channel closed prematurely"
    and, in its threads, the worker's return code."""
    texts = [str(error)] + [str(e) for e in thread_errors]
    codes = [int(m.group(1)) for m in map(_WORKER_EXIT.search, texts) if m]
    if not codes and "Channel closed prematurely" not in texts[0]:
        return None
    how = ""
    if codes:
        number = codes[0] - 128 if codes[0] > 128 else -codes[0]
        name = signal.Signals(number).name if number in set(signal.Signals) else None
        how = " (return code %d%s)" % (codes[0], ": stopped by %s" % name if name else "")
    return ValueError("a Beam worker process ended before the pipeline finished%s; "
                      "nothing was written (was it killed, or out of memory?)" % how)


@contextlib.contextmanager
def _thread_errors_kept(errors):
    """While a pipeline runs: an exception that ends one of Beam's threads (a worker
    process gone) goes to `errors` and the debug log, not to the terminal as a traceback."""
    saved = threading.excepthook

    def keep(args):
        errors.append(args.exc_value)
        logging.debug("Beam thread %s ended: %s", getattr(args.thread, "name", "?"),
                      "".join(traceback.format_exception(args.exc_type, args.exc_value,
                                                         args.exc_traceback)))
    threading.excepthook = keep
    try:
        yield
    finally:
        threading.excepthook = saved


def _finish(output_files, shards):
    """Renames the committed shard files to the output names (empty files for the rest)."""
    for shard, path in enumerate(output_files):
        if shard in shards:
            tf.io.gfile.rename(shards[shard][0], path, overwrite=True)
        else:
            with fileutil.atomic_open(path, "wb"):
                pass


def write_beam(input_patterns, output_files, options, setup, worker_args, make_records,
               settings, stats):
    """The per-file mode on Beam over the files of `input_patterns`; returns the count.

    Args:
      input_patterns: list of globs (matched by Beam's file systems, each sorted).
      options: a PretrainingOptions; its word segmentation is paired with the files here.
      setup: setup(options, corpus_bytes, open_file, *worker_args) -> state, on each
        worker; make_records: as pretraining_shards' (module-level: Beam pickles both).
      settings, stats: as run_pipeline's.
    """
    files = match_input_files(input_patterns, settings.max_file_mb)
    fileutil.check_distinct(output_files, "--output_file", [path for path, _ in files])
    options = options._replace(word_segmentation=word_boundaries.resolve(
        options, files, lambda globs: [p for p, _ in match_input_files(globs, 0)]))
    setup_args = (tuple(options), sum(size for _, size in files), open_file)
    return run_pipeline(files, output_files, setup, setup_args + tuple(worker_args),
                        make_records, options.random_seed, settings, stats)


def run_pipeline(files, output_files, setup, setup_args, make_records, random_seed,
                 settings, stats):
    """Runs the pipeline; returns the number of records written.

    files: [(path, size)] from match_input_files; output_files: one per output shard.
    setup, setup_args, make_records: the per-file functions (see pretraining_shards).
    settings: create_pretraining_data.BeamSettings (runner, Beam args, max file MB).
    stats: dict, gets the summed per-file counts.
    """
    tasks = [(index, path) for index, (path, _) in enumerate(files)]
    logging.info("Beam: %d input files, %d output shards, runner %s", len(tasks),
                 len(output_files), settings.runner)
    local = settings.runner in StandardOptions.LOCAL_RUNNERS
    if local:
        # Local worker processes import the per-file functions from where bert_tf2 is.
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    temp_dir = fileutil.temp_name(output_files[0], "beam-tmp")
    tf.io.gfile.makedirs(temp_dir)
    try:
        pipeline = beam.Pipeline(options=PipelineOptions(_pipeline_args(settings, local)))
        _build(pipeline, tasks, len(output_files), temp_dir, setup, setup_args, make_records,
               random_seed)
        thread_errors = []
        with _beam_errors_at_debug_level(), _quiet_local_workers(local), \
                _thread_errors_kept(thread_errors):
            try:
                pipeline.run().wait_until_finish()
            except Exception as e:  # pylint: disable=broad-except
                raise _input_error(e) or _worker_lost(e, thread_errors) or e
        counts, shards = _read_manifest(temp_dir)
        stats.update(counts)
        if not stats.get("documents"):
            raise pretraining_corpus.no_documents_error([path for _, path in tasks])
        _finish(output_files, shards)
        return sum(count for _, count in shards.values())
    finally:
        # Also on Ctrl-C and SIGTERM (cli.run_cli); after a SIGKILL, the next
        # run's fileutil.output_files removes it.
        fileutil.remove(temp_dir)


_LOG_LEVEL_OPTION = "--default_sdk_harness_log_level"


def _pipeline_args(settings, local):
    """Beam's arguments: the user's, the runner and, for local workers, their log level.

    A local worker process logs to this terminal: a bad input would print its
    tracebacks before run_cli's one line. They stay at Beam's level with
    --verbosity=1 (absl's debug) or when the user sets the option.
    """
    args = list(settings.args) + ["--runner=%s" % settings.runner]
    given = any(a.split("=", 1)[0] == _LOG_LEVEL_OPTION for a in settings.args)
    if local and not given and not logging.level_debug():
        args.append("%s=CRITICAL" % _LOG_LEVEL_OPTION)
    return args


class _DemoteBeamErrors(python_logging.Filter):
    """Beam's logged errors (tracebacks of what run_pipeline raises) at debug level."""

    def filter(self, record):
        if record.name.startswith("apache_beam") and record.levelno >= python_logging.ERROR:
            record.levelno, record.levelname = python_logging.DEBUG, "DEBUG"
            return logging.level_debug()
        return True


@contextlib.contextmanager
def _beam_errors_at_debug_level():
    """While the pipeline runs: only run_cli's one line reaches the user on a bad input."""
    handlers = list(python_logging.getLogger().handlers)
    demote = _DemoteBeamErrors()
    for handler in handlers:
        handler.addFilter(demote)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(demote)


class _WithoutWorkerTracebacks(io.TextIOBase):
    """A text stream that drops the tracebacks Beam's workers print of a bad input.

    A worker prints the traceback of a failed bundle to stderr in one write (then a
    newline), whatever the log level; the error reaches run_cli, which prints its one
    line. Everything else is written on.
    """

    def __init__(self, stream):
        super(_WithoutWorkerTracebacks, self).__init__()
        self._stream = stream
        self._dropped = False

    def write(self, text):
        dropped = self._dropped
        self._dropped = text.startswith("Traceback (most recent call last):") and \
            _BAD_INPUT in text
        if not self._dropped and not (dropped and text == "\n"):
            self._stream.write(text)
        return len(text)

    def flush(self):
        self._stream.flush()

    def fileno(self):
        return self._stream.fileno()

    def isatty(self):
        return self._stream.isatty()


@contextlib.contextmanager
def _quiet_local_workers(local):
    """While a local pipeline runs: its worker processes' stderr goes to os.devnull.

    Worker processes inherit file descriptor 2, which points at os.devnull meanwhile
    (they also print tracebacks there whatever their log level); this process's
    sys.stderr and its logging write to the terminal through _WithoutWorkerTracebacks
    (Beam's in-process workers print there too). --verbosity=1 (absl's debug) keeps
    everything as it is.
    """
    if not local or logging.level_debug():
        yield
        return
    saved = sys.stderr
    saved.flush()
    terminal = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    os.close(null)
    terminal_stream = open(terminal, "w", buffering=1, errors="backslashreplace",
                           encoding=getattr(saved, "encoding", None))
    stream = _WithoutWorkerTracebacks(terminal_stream)
    handlers = [h for h in [logging.get_absl_handler().python_handler] +
                python_logging.getLogger().handlers
                if isinstance(h, python_logging.StreamHandler) and h.stream is saved]
    sys.stderr = stream
    for handler in handlers:
        handler.setStream(stream)
    try:
        yield
    finally:
        for handler in handlers:
            handler.setStream(saved)
        sys.stderr = saved
        terminal_stream.flush()
        os.dup2(terminal, 2)
        terminal_stream.close()
