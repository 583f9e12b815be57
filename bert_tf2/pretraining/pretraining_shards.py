"""The sharded parallel mode of create_pretraining_data.py (`--num_workers=N`, N > 1).

Each input file is one shard: a worker process reads it, makes its examples with
a random generator seeded from --random_seed and the file's position
(`shard_seed`), shuffles them and writes them to a temporary file; the shards
are then interleaved evenly into the output. The output depends only on the
files, their order and the flags, never on N or on timing.

This module holds the machinery (worker pool, temporary shard files, the even
interleave); what a shard's records are is given by the caller as two
module-level functions, so that they can be sent to the worker processes:

    setup(*setup_args) -> state          once per worker
    make_records(state, file_index, path, counter) -> (records, stats)

where counter(new_documents, records_so_far) reports progress to the parent and
stats is a dict of counts ("documents", ...) that the parent sums over shards.
The Beam pipeline (pretraining_beam.py) runs the same two functions and reuses
the temporary shard format and the even interleave of this module.
"""
import collections
import concurrent.futures
import contextlib
import hashlib
import heapq
import multiprocessing
import os
import struct
import time

import tensorflow as tf

from bert_tf2 import fileutil
from bert_tf2.pretraining import pretraining_corpus

_RECORD_LENGTH = struct.Struct("<I")
# Bytes before each record in a temporary shard file (its length).
RECORD_OVERHEAD = _RECORD_LENGTH.size
_WORKER = {}

ShardedRecords = collections.namedtuple(
    "ShardedRecords", "records stats num_records worker_cpu_s num_files")


def shard_seed(random_seed, file_index):
    """The seed of the shard made from the `file_index`-th input file."""
    digest = hashlib.sha256(("%d/%d" % (random_seed, file_index)).encode("ascii")).digest()
    return int.from_bytes(digest[:8], "big")


def _init_worker(setup, setup_args, make_records, counters, threads_per_worker):
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads_per_worker)
        tf.config.threading.set_inter_op_parallelism_threads(threads_per_worker)
    except RuntimeError:
        pass  # TensorFlow already initialized in this process (fork start method)
    _WORKER.update(state=setup(*setup_args), make_records=make_records, counters=counters)


def _shared_counter(file_index):
    """A callback(new_documents, records_so_far) setting this file's progress counters.

    Each file has its own two slots of the shared array (documents, records), which
    only its worker writes: no lock, so nothing for the resource tracker to miss when
    the parent ends on an error.
    """
    counters = _WORKER["counters"]

    def add(new_documents, records_so_far):
        counters[2 * file_index] += new_documents
        counters[2 * file_index + 1] = records_so_far
    return add


def _process_shard(task):
    """Worker: one input file -> one temporary file of its (shuffled) records."""
    cpu_start = time.process_time()
    file_index, path, temp_path = task
    records, stats = _WORKER["make_records"](_WORKER["state"], file_index, path,
                                             _shared_counter(file_index))
    write_shard_file(temp_path, records)
    return (file_index, temp_path, stats, len(records), time.process_time() - cpu_start)


def write_shard_file(path, records):
    """Writes serialized records to a temporary shard file, each after its length.

    A record takes RECORD_OVERHEAD + len(record) bytes of the file.
    """
    with fileutil.atomic_open(path, "wb") as f:
        chunk = []
        for record in records:
            chunk.append(_RECORD_LENGTH.pack(len(record)))
            chunk.append(record)
            if len(chunk) >= 8192:
                f.write(b"".join(chunk))
                chunk = []
        f.write(b"".join(chunk))


def shard_file_records(path, block_bytes, start=0, end=None):
    """Yields the records of a temporary shard file, reading block_bytes at a time.

    start, end: the byte range to read (a piece of the file; end None: to the end).
    The file is reopened for every block so that thousands of shards can be
    merged without keeping thousands of files open.
    """
    offset = start
    buffer = b""
    at = 0
    while True:
        if len(buffer) - at < _RECORD_LENGTH.size or \
                len(buffer) - at < _RECORD_LENGTH.size + _RECORD_LENGTH.unpack_from(buffer, at)[0]:
            size = block_bytes if end is None else min(block_bytes, end - offset)
            data = b""
            if size > 0:
                with tf.io.gfile.GFile(path, "rb") as f:
                    f.seek(offset)
                    data = f.read(size)
            if not data:
                if at != len(buffer):
                    raise ValueError("truncated temporary shard file %s" % path)
                return
            offset += len(data)
            buffer = buffer[at:] + data
            at = 0
            continue
        (length,) = _RECORD_LENGTH.unpack_from(buffer, at)
        start = at + _RECORD_LENGTH.size
        at = start + length
        yield buffer[start:at]


# What the merge of interleave_shards may hold in read buffers, whatever the number of
# pieces; each reader holds one block (and the record it is in the middle of).
MERGE_BUFFER_BYTES = 256 << 20


def merge_block_bytes(num_pieces):
    """Read size of each of `num_pieces` readers: up to 4 MB, all of them together
    within MERGE_BUFFER_BYTES up to 65,536 pieces (blocks of at least 4 KB; smaller
    blocks only mean more reads, a record may span several)."""
    return min(4 << 20, max(4 << 10, MERGE_BUFFER_BYTES // max(1, num_pieces)))


def interleave_shards(shards):
    """Yields the records of all shards, each shard spread evenly over the output.

    shards: list of (path, count), or (path, count, start, end) for a byte range
    of the file. The i-th record of a shard of n records has the sort key
    (i + 0.5) / n; records come out in key order (ties: lower shard first),
    which is deterministic and needs one reader (one block buffer) per shard.
    """
    block_bytes = merge_block_bytes(len(shards))
    readers = [shard_file_records(shard[0], block_bytes, *shard[2:]) for shard in shards]
    heap = [(0.5 / shard[1], s, 0) for s, shard in enumerate(shards) if shard[1]]
    heapq.heapify(heap)
    while heap:
        _, s, i = heapq.heappop(heap)
        yield next(readers[s])
        count = shards[s][1]
        if i + 1 < count:
            heapq.heappush(heap, ((i + 1.5) / count, s, i + 1))


def _process_context(preload):
    """Where workers come from: a fork server that has imported `preload` once.

    Workers forked from it start in a fraction of a second, and safely: the
    server only imports modules, it never runs TensorFlow. Without fork servers
    (Windows), each worker is a fresh interpreter.
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["tensorflow", "tensorflow_text"] + list(preload))
    return context


def _run_workers(tasks, num_workers, setup, setup_args, make_records, progress):
    """Runs every shard task on the pool; returns the workers' results sorted by file."""
    workers = min(num_workers, len(tasks))
    context = _process_context([__name__, make_records.__module__])
    counters = context.RawArray("q", 2 * len(tasks))
    threads = max(1, (os.cpu_count() or 1) // workers)
    results = []
    # A worker that dies makes the executor fail (BrokenProcessPool) instead of
    # hanging, unlike multiprocessing.Pool.
    with concurrent.futures.ProcessPoolExecutor(
            workers, mp_context=context, initializer=_init_worker,
            initargs=(setup, setup_args, make_records, counters, threads)) as executor:
        pending = {executor.submit(_process_shard, task) for task in tasks}
        try:
            while pending:
                done, pending = concurrent.futures.wait(
                    pending, timeout=1.0, return_when=concurrent.futures.FIRST_COMPLETED)
                results.extend(future.result() for future in done)
                if progress is not None:
                    progress.report(sum(counters[0::2]), sum(counters[1::2]))
        except BaseException as e:
            for future in pending:
                future.cancel()
            if not isinstance(e, Exception):
                # Ctrl-C reaches the workers too; SIGTERM only this process: stop them,
                # rather than wait for the files they are on.
                for process in multiprocessing.active_children():
                    process.terminate()
            raise
    return sorted(results)


@contextlib.contextmanager
def sharded_records(input_files, scratch_beside, num_workers, setup, setup_args,
                    make_records, progress=None):
    """Makes every file's shard in worker processes; yields a `ShardedRecords`.

    Its `records` iterates over all shards' records, interleaved evenly. The
    temporary shard files live in a folder beside `scratch_beside` (the first
    output file), which is removed when the block ends, whatever happens.
    """
    temp_dir = fileutil.temp_name(scratch_beside, "shards")
    tf.io.gfile.makedirs(temp_dir)
    try:
        tasks = [(index, path, os.path.join(temp_dir, "shard-%05d" % index))
                 for index, path in enumerate(input_files)]
        results = _run_workers(tasks, num_workers, setup, setup_args, make_records, progress)
        yield ShardedRecords(
            records=interleave_shards([(r[1], r[3]) for r in results]),
            stats=pretraining_corpus.sum_counts(r[2] for r in results), num_records=sum(r[3] for r in results),
            worker_cpu_s=sum(r[4] for r in results), num_files=len(results))
    finally:
        if tf.io.gfile.exists(temp_dir):
            tf.io.gfile.rmtree(temp_dir)
