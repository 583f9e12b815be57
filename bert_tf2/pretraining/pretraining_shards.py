"""The sharded parallel mode of create_pretraining_data.py (`--num_workers=N`, N > 1).

Each input file is one shard: a process reads it, makes its examples with a
random generator seeded from --random_seed and the file's position
(`shard_seed`), shuffles them and writes them to a temporary file; the shards
are then interleaved evenly into the output. The output depends only on the
files, their order and the flags, never on N or on timing. The N processes are
this one and N - 1 workers, all taking the next file as they become free: this
one starts at once, the workers once they are up (a fraction of a second when they
need no TensorFlow, a small local corpus; seconds when they do: about what a few MB
of text take), so a small corpus is not slowed by them.

This module holds the machinery (worker pool, temporary shard files, the even
interleave); what a shard's records are is given by the caller as two
module-level functions, so that they can be sent to the worker processes:

    setup(*setup_args) -> state          once per process
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
import threading
import time

from bert_tf2 import fileutil
from bert_tf2 import startup
from bert_tf2.pretraining import pretraining_corpus
from bert_tf2.pretraining import pretraining_records

tf = fileutil.tensorflow  # imported on first use: a worker of a small local corpus never does

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


class _SharedTasks(object):
    """Which shard task is next (taken in order by whichever process is free first)
    and each file's progress counters (documents, records), in shared memory."""

    def __init__(self, context, num_tasks):
        self.num_tasks = num_tasks
        self._next = context.RawValue("q", 0)
        self._lock = context.Lock()
        self.counters = context.RawArray("q", 2 * num_tasks)

    def take(self):
        """The index of the next task nobody has taken, or None."""
        with self._lock:
            index = self._next.value
            if index >= self.num_tasks:
                return None
            self._next.value = index + 1
        return index

    def close(self):
        """No task is taken after this (the ones under way finish)."""
        with self._lock:
            self._next.value = self.num_tasks

    def release(self):
        """Drops this process's lock once no worker can still need it: its named
        semaphore is then removed at once, not left for the resource tracker to
        report when an error ends the process with os._exit."""
        self._lock = None

    def counter(self, file_index):
        """A callback(new_documents, records_so_far) setting this file's counters.

        Each file has its own two slots, which only the process making its shard
        writes: no lock, so nothing for the resource tracker to miss when the
        parent ends on an error.
        """
        def add(new_documents, records_so_far):
            self.counters[2 * file_index] += new_documents
            self.counters[2 * file_index + 1] = records_so_far
        return add

    def totals(self):
        """(documents, records) of all files so far."""
        return sum(self.counters[0::2]), sum(self.counters[1::2])


def _make_shard(state, make_records, task, counter):
    """One input file -> one temporary file of its (shuffled) records."""
    file_index, path, temp_path = task
    records, stats = make_records(state, file_index, path, counter)
    write_shard_file(temp_path, records)
    return file_index, temp_path, stats, len(records)


def _init_worker(setup, setup_args, make_records, threads_per_worker, uses_tensorflow,
                 shared):
    if uses_tensorflow:
        try:
            tf.config.threading.set_intra_op_parallelism_threads(threads_per_worker)
            tf.config.threading.set_inter_op_parallelism_threads(threads_per_worker)
        except RuntimeError:
            pass  # TensorFlow already initialized in this process (fork start method)
    _WORKER.update(state=setup(*setup_args), make_records=make_records, shared=shared)


def _serve(tasks):
    """Worker: makes shards of `tasks` until none is left; (their results, CPU seconds)."""
    shared = _WORKER["shared"]
    results, cpu_s = [], 0.0
    index = shared.take()
    while index is not None:
        cpu_start = time.process_time()
        results.append(_make_shard(_WORKER["state"], _WORKER["make_records"], tasks[index],
                                   shared.counter(index)))
        cpu_s += time.process_time() - cpu_start
        index = shared.take()
    return results, cpu_s


def write_shard_file(path, records):
    """Writes serialized records to a temporary shard file, each after its length.

    A record takes RECORD_OVERHEAD + len(record) bytes of the file (a local one
    written without TensorFlow: fileutil.atomic_open).
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
                with pretraining_corpus.gfile_open(path) as f:
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


def _process_context(num_workers, preload, uses_tensorflow):
    """Where `num_workers` worker processes come from.

    More than one: a fork server that has imported `preload` once (and TensorFlow
    when the workers use it, rather than each of them), so that they share its
    memory (and safely: the server only imports modules, it never runs TensorFlow);
    its first start waits for those imports. One worker, or no fork servers
    (Windows): fresh interpreters, whose start returns at once.
    """
    if num_workers == 1 or "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    heavy = ["tensorflow", "tensorflow_text"] if uses_tensorflow else []
    context.set_forkserver_preload(heavy + list(preload))
    return context


def _failure(error):
    """What the main process raises for a worker's `error`: the error itself, or for a
    worker that died (killed; out of memory) an OSError that says so in one line."""
    if isinstance(error, concurrent.futures.process.BrokenProcessPool):
        return OSError("a worker process ended abruptly (killed, or out of memory: a worker "
                       "holds one input file and its records, so smaller files need less)")
    return error


class _WorkerPool(object):
    """`count` worker processes serving the shared tasks.

    They are started from a thread (a fork server's first start waits for it to
    import TensorFlow: seconds), while this process already makes shards.
    """

    def __init__(self, count, tasks, make_records, initargs):
        context = _process_context(count, [__name__, make_records.__module__], initargs[-1])
        self.shared = _SharedTasks(context, len(tasks))
        self._others = set(multiprocessing.active_children())
        # A worker that dies makes the executor fail (BrokenProcessPool) instead of
        # hanging, unlike multiprocessing.Pool.
        self._executor = concurrent.futures.ProcessPoolExecutor(
            count, mp_context=context, initializer=_init_worker,
            initargs=initargs + (self.shared,))
        self._futures = []
        self._start_error = None
        self._thread = threading.Thread(target=self._start, args=(count, tasks, initargs[:3]),
                                        daemon=True)
        self._thread.start()

    def _start(self, count, tasks, functions):
        try:
            # The executor starts its processes at the first submit.
            with startup.main_script_not_rerun(functions):
                for _ in range(count):
                    self._futures.append(self._executor.submit(_serve, tasks))
        except BaseException as e:  # pylint: disable=broad-except
            self._start_error = e  # raised in the main thread (raise_failure)

    def raise_failure(self):
        """Raises what made a worker (or their start) fail, if anything did."""
        if self._start_error is not None:
            raise _failure(self._start_error)
        for future in list(self._futures):
            if future.done() and future.exception() is not None:
                raise _failure(future.exception())

    def _terminate(self):
        self._thread.join()
        for process in set(multiprocessing.active_children()) - self._others:
            process.terminate()

    def results(self, progress, any_taken):
        """Waits for the workers' shards; (their results, their CPU seconds).

        any_taken: whether any worker took a task; if none did, the workers still
        starting are stopped rather than waited for.
        """
        if not any_taken:
            self._terminate()
            self._executor.shutdown(cancel_futures=True)
            return [], 0.0
        self._thread.join()
        self.raise_failure()
        results, cpu_s = [], 0.0
        pending = set(self._futures)
        while pending:
            done, pending = concurrent.futures.wait(
                pending, timeout=1.0, return_when=concurrent.futures.FIRST_COMPLETED)
            self.raise_failure()
            for future in done:
                served, seconds = future.result()
                results += served
                cpu_s += seconds
            if progress is not None:
                progress.report(*self.shared.totals())
        self._executor.shutdown()
        return results, cpu_s

    def stop(self, terminate):
        """After an error: no task is taken any more; waits for the shards under way
        (terminate: stops the workers at once instead) and for the pool to end."""
        self.shared.close()
        if terminate:
            # Ctrl-C reaches the workers too; SIGTERM only this process: stop them,
            # rather than wait for the files they are on.
            self._terminate()
        self._thread.join()
        self._executor.shutdown(cancel_futures=True)


def _run_workers(tasks, num_workers, setup, setup_args, make_records, progress,
                 uses_tensorflow=False):
    """Makes every shard; (the results sorted by file, the workers' CPU seconds).

    This process takes tasks from the start, and `num_workers - 1` worker processes
    join in as soon as they are up (when they use TensorFlow, a fresh interpreter
    imports it: seconds, most of the time of a corpus of a few MB). Whichever process
    makes a shard, its records are the same. uses_tensorflow: whether the workers
    will (their fork server imports it, their TensorFlow threads are limited); only
    a matter of speed.
    """
    processes = min(num_workers, len(tasks))
    pool = None
    if processes > 1:
        threads = max(1, (os.cpu_count() or 1) // processes)
        pool = _WorkerPool(processes - 1, tasks, make_records,
                           (setup, setup_args, make_records, threads, uses_tensorflow))
        shared = pool.shared
    else:
        shared = _SharedTasks(multiprocessing.get_context(), len(tasks))
    try:
        state = setup(*setup_args)
        results, cpu_s = [], 0.0

        def counter(file_index):
            add = shared.counter(file_index)

            def report(new_documents, records_so_far):
                add(new_documents, records_so_far)
                if pool is not None:
                    pool.raise_failure()
                if progress is not None:
                    progress.report(*shared.totals())
            return report

        index = shared.take()
        while index is not None:
            if pool is not None:
                pool.raise_failure()
            results.append(_make_shard(state, make_records, tasks[index], counter(index)))
            index = shared.take()
        if pool is not None:
            served, cpu_s = pool.results(progress, any_taken=len(results) < len(tasks))
            results += served
    except BaseException as e:
        if pool is not None:
            pool.stop(terminate=not isinstance(e, Exception))
        raise
    finally:
        shared.release()  # the pool has ended (results or stop)
    return sorted(results), cpu_s


@contextlib.contextmanager
def sharded_records(input_files, scratch_beside, num_workers, setup, setup_args,
                    make_records, progress=None, uses_tensorflow=False):
    """Makes every file's shard in worker processes; yields a `ShardedRecords`.

    Its `records` iterates over all shards' records, interleaved evenly. The
    temporary shard files live in a folder beside `scratch_beside` (the first
    output file), which is removed when the block ends, whatever happens.
    uses_tensorflow: as _run_workers'.
    """
    temp_dir = fileutil.temp_name(scratch_beside, "shards")
    tf.io.gfile.makedirs(temp_dir)
    try:
        tasks = [(index, path, os.path.join(temp_dir, "shard-%05d" % index))
                 for index, path in enumerate(input_files)]
        results, worker_cpu_s = _run_workers(tasks, num_workers, setup, setup_args,
                                             make_records, progress, uses_tensorflow)
        yield ShardedRecords(
            records=interleave_shards([(r[1], r[3]) for r in results]),
            stats=pretraining_corpus.sum_counts(r[2] for r in results),
            num_records=sum(r[3] for r in results), worker_cpu_s=worker_cpu_s,
            num_files=len(results))
    finally:
        fileutil.remove(temp_dir)


def write_sharded(input_files, output_files, num_workers, options, setup, worker_args,
                  make_records, vocab, stats, packed=False):
    """The per-file mode on this process and num_workers - 1 workers; returns the count.

    Args:
      input_files, output_files: lists of paths (output records dealt round-robin).
      options: a PretrainingOptions (sent to the workers as a tuple).
      setup: setup(options, corpus_bytes, open_file, *worker_args) -> state, once per
        process; make_records(state, file_index, path, counter) -> (records, stats).
      vocab: {token: id}, for the log of the first records.
      stats: dict, gets the summed per-file counts and "worker_cpu_s".
      packed: the records are packed rows.
    """
    progress = pretraining_corpus.Progress(
        "creating instances (%d workers)" % min(num_workers, len(input_files)))
    corpus_bytes = pretraining_corpus.corpus_bytes(input_files)
    setup_args = (tuple(options), corpus_bytes, None)
    # A worker uses TensorFlow for the batch tokenizer (a corpus that large), for
    # packing (protobufs) and for remote files; a small local corpus needs none.
    uses_tensorflow = packed or corpus_bytes >= pretraining_corpus.FAST_TOKENIZER_MIN_BYTES or \
        any("://" in str(path) for path in list(input_files) + list(output_files))
    with sharded_records(input_files, output_files[0], num_workers, setup,
                         setup_args + tuple(worker_args), make_records, progress,
                         uses_tensorflow) as shards:
        stats.update(shards.stats, worker_cpu_s=shards.worker_cpu_s)
        progress.report(stats["documents"] * options.dupe_factor, shards.num_records,
                        force=True)
        if not stats["documents"]:
            raise pretraining_corpus.no_documents_error(input_files)
        return pretraining_records.write_output(shards.records, output_files, vocab,
                                                packed=packed)
