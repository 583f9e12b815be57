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
import hashlib
import json
import os
import random
import typing
import uuid

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions
from absl import flags
from absl import logging
import tensorflow as tf

from bert_tf2 import fileutil
from bert_tf2.pretraining import pretraining_corpus
from bert_tf2.pretraining import pretraining_shards

# Beam metrics namespace of the counters (files, bytes, documents, instances, ...).
NAMESPACE = "create_pretraining_data"

# Marks errors of the input inside a worker, to find them in the runner's report.
_BAD_INPUT = "bad input: "


def split_args(argv, define_flags):
    """(argv for absl, options for Beam): every flag that neither `define_flags`
    nor absl defines goes to Beam, with its value ("--project p" or "--project=p")."""
    ours_fv = flags.FlagValues()
    define_flags(ours_fv)

    def flag_of(name):
        for fv in (ours_fv, flags.FLAGS):
            for candidate in (name, name[2:] if name.startswith("no") else None):
                if candidate and candidate in fv:
                    return fv[candidate]
        return None

    ours, theirs = [argv[0]], []
    args = list(argv[1:])
    while args:
        arg = args.pop(0)
        flag = flag_of(arg.lstrip("-").split("=", 1)[0]) if arg.startswith("-") else None
        side = theirs if arg.startswith("-") and flag is None else ours
        side.append(arg)
        takes_value = arg.startswith("-") and "=" not in arg and not (flag is not None and flag.boolean)
        if takes_value and args and not args[0].startswith("-"):
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
        try:
            metadata = FileSystems.match([pattern])[0].metadata_list
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
        try:
            records, stats = self._make_records(self._state, file_index, path, None)
        except ValueError as e:
            raise ValueError(_BAD_INPUT + str(e)) from None
        for name, value in stats.items():
            beam.metrics.Metrics.counter(NAMESPACE, name).inc(value)
        deal = output_rng(self._random_seed, file_index).randrange
        pieces = [[] for _ in range(self._num_shards)]
        for record in records:
            pieces[deal(self._num_shards)].append(record)
        del records
        temp = os.path.join(self._temp_dir, "file-%06d-%s" % (file_index, uuid.uuid4().hex))
        pretraining_shards.write_shard_file(temp, (r for piece in pieces for r in piece))
        start = 0
        for shard, piece in enumerate(pieces):
            end = start + sum(len(r) for r in piece) + \
                pretraining_shards.RECORD_OVERHEAD * len(piece)
            if piece:
                yield shard, (file_index, temp, len(piece), start, end)
            start = end
        yield beam.pvalue.TaggedOutput("stats", json.dumps({"stats": stats}))


class _WriteShard(beam.DoFn):
    """An output shard's pieces -> one temporary TFRecord file; yields its manifest line."""

    def __init__(self, temp_dir):
        super(_WriteShard, self).__init__()
        self._temp_dir = temp_dir

    def process(self, shard_pieces):
        """(shard, pieces) -> the manifest line of the shard's temporary file."""
        shard, pieces = shard_pieces
        pieces = sorted(pieces)
        temp = os.path.join(self._temp_dir, "out-%06d-%s" % (shard, uuid.uuid4().hex))
        count = 0
        with tf.io.TFRecordWriter(temp) as writer:
            for record in pretraining_shards.interleave_shards([p[1:] for p in pieces]):
                writer.write(record)
                count += 1
        yield json.dumps({"shard": shard, "path": temp, "records": count})


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


def _finish(output_files, shards):
    """Renames the committed shard files to the output names (empty files for the rest)."""
    for shard, path in enumerate(output_files):
        if shard in shards:
            tf.io.gfile.rename(shards[shard][0], path, overwrite=True)
        else:
            with fileutil.atomic_open(path, "wb"):
                pass


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
    temp_dir = "%s.beam-tmp-%s" % (output_files[0], uuid.uuid4().hex[:8])
    tf.io.gfile.makedirs(temp_dir)
    if settings.runner == "DirectRunner":
        # Local worker processes import the per-file functions from this folder.
        here = os.path.dirname(os.path.abspath(__file__))
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [here] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    try:
        options = PipelineOptions(list(settings.args) + ["--runner=%s" % settings.runner])
        pipeline = beam.Pipeline(options=options)
        _build(pipeline, tasks, len(output_files), temp_dir, setup, setup_args, make_records,
               random_seed)
        try:
            pipeline.run().wait_until_finish()
        except Exception as e:  # pylint: disable=broad-except
            raise _input_error(e) or e
        counts, shards = _read_manifest(temp_dir)
        stats.update(counts)
        if not stats.get("documents"):
            raise pretraining_corpus.no_documents_error([path for _, path in tasks])
        _finish(output_files, shards)
        return sum(count for _, count in shards.values())
    finally:
        if tf.io.gfile.exists(temp_dir):
            tf.io.gfile.rmtree(temp_dir)
