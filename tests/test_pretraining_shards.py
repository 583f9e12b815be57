"""pretraining_shards.py: shard seeds, shard files and the even interleave."""
import os
import sys
import time

import pytest

from bert_tf2.pretraining import pretraining_shards
from conftest import HANG_GUARD_SECONDS


def test_shard_seeds_depend_on_seed_and_file_only():
    assert pretraining_shards.shard_seed(7, 0) == pretraining_shards.shard_seed(7, 0)
    seeds = {pretraining_shards.shard_seed(s, i) for s in (7, 8) for i in range(3)}
    assert len(seeds) == 6


def test_interleave_spreads_shards_evenly(tmp_path):
    paths = []
    for s, count in enumerate((6, 2, 3)):
        path = str(tmp_path / ("s%d" % s))
        pretraining_shards.write_shard_file(
            path, [("%d:%d" % (s, i)).encode() for i in range(count)])
        paths.append((path, count))
    merged = [r.decode() for r in pretraining_shards.interleave_shards(paths)]
    assert sorted(merged) == sorted("%d:%d" % (s, i) for s, c in enumerate((6, 2, 3))
                                    for i in range(c))
    for s, count in enumerate((6, 2, 3)):
        mine = [m for m in merged if m.startswith("%d:" % s)]
        assert mine == ["%d:%d" % (s, i) for i in range(count)]  # order kept per shard
    assert merged[:4] == ["0:0", "2:0", "0:1", "1:0"]  # ties: lower shard first


def test_shard_file_round_trip_in_small_blocks(tmp_path):
    records = [b"x" * n for n in (0, 1, 5, 300, 17)]
    path = str(tmp_path / "shard")
    pretraining_shards.write_shard_file(path, records)
    assert list(pretraining_shards.shard_file_records(path, block_bytes=7)) == records


def test_merge_buffers_stay_bounded_with_many_pieces():
    # A Beam shard writer merges one piece per input file: with 64 KB blocks as the
    # floor, 8,192 input files would have held 512 MB of buffers per writer.
    for n in (1, 64, 2048, 4096, 8192, 65536):
        block = pretraining_shards.merge_block_bytes(n)
        assert 4 << 10 <= block <= 4 << 20
        assert block * n <= max(pretraining_shards.MERGE_BUFFER_BYTES, 4 << 20)


# -- The pool: this process and the workers share the tasks ------------------------
# Shard makers at module level, so that worker processes find them by name.

def _pool_setup(marker_dir, parent_pid, workers_fail):
    return dict(marker_dir=marker_dir, parent_pid=parent_pid, workers_fail=workers_fail)


def _pool_records(state, file_index, path, counter):
    """Records made from the file's words; the parent's first file waits until a
    worker has made a shard (so that both make some), reporting progress meanwhile
    (which is where the parent learns of a worker's failure)."""
    marker = os.path.join(state["marker_dir"], "a-worker-made-a-shard")
    in_worker = os.getpid() != state["parent_pid"]
    if in_worker and state["workers_fail"] == "raise":
        raise ValueError("%s, line 2: made-up error" % path)
    if in_worker and state["workers_fail"] == "die":
        os._exit(3)  # as if killed (out of memory)
    if not in_worker and state["marker_dir"] and file_index == 0:
        deadline = time.time() + HANG_GUARD_SECONDS
        while not os.path.exists(marker):
            assert time.time() < deadline, "no worker made a shard"
            counter(0, 0)
            time.sleep(0.02)
    with open(path, "rb") as f:
        lines = f.read().split()
    records = [b"%d/%s/%d" % (file_index, line, i) for i, line in enumerate(lines)]
    counter(1, len(records))
    if in_worker:
        open(marker, "w").close()
    return records, {"documents": 1, "by_workers": int(in_worker),
                     "tensorflow_in_workers": int(in_worker and "tensorflow" in sys.modules)}


def _pool_run(tmp_path, num_workers, wait_for_a_worker=True, workers_fail=None):
    inputs = []
    for i in range(6):
        inputs.append(str(tmp_path / ("in-%d.txt" % i)))
        with open(inputs[-1], "w") as f:
            f.write(" ".join("w%d" % (i * 10 + j) for j in range(i + 2)))
    markers = tmp_path / ("markers-%d" % num_workers)
    markers.mkdir()
    setup_args = (str(markers) if wait_for_a_worker else "", os.getpid(), workers_fail)
    with pretraining_shards.sharded_records(
            inputs, str(tmp_path / "out.tfrecord"), num_workers, _pool_setup, setup_args,
            _pool_records) as shards:
        return list(shards.records), shards.stats, shards.worker_cpu_s


@pytest.mark.parametrize("num_workers", [2, 3])  # one fresh interpreter; a fork server
def test_the_parent_and_the_workers_make_the_shards_of_one_process(tmp_path, num_workers):
    records, stats, cpu_s = _pool_run(tmp_path, num_workers)
    assert 1 <= stats["by_workers"] < 6 and cpu_s > 0
    # Workers that need no TensorFlow do not import it (seconds of CPU each).
    assert stats["tensorflow_in_workers"] == 0
    alone, alone_stats, alone_cpu_s = _pool_run(tmp_path, 1, wait_for_a_worker=False)
    assert alone_stats["by_workers"] == 0 and alone_cpu_s == 0
    assert records == alone and len(records) == sum(i + 2 for i in range(6))
    assert stats["documents"] == 6
    assert not [name for name in os.listdir(tmp_path) if "shards" in name or "tmp" in name]


def test_a_workers_error_stops_the_parent_and_leaves_no_temporary_file(tmp_path):
    # The parent's first file waits for a worker's shard, which never comes: the worker's
    # error reaching it is the only way out (else its hang guard's AssertionError, not this).
    with pytest.raises(ValueError, match=r"in-\d\.txt, line 2: made-up error"):
        _pool_run(tmp_path, 2, workers_fail="raise")
    assert not [name for name in os.listdir(tmp_path) if "shards" in name or "tmp" in name]


def test_a_worker_that_dies_is_one_clear_error(tmp_path):
    with pytest.raises(OSError, match=r"^a worker process ended abruptly \(killed, or out "
                                      r"of memory"):
        _pool_run(tmp_path, 2, workers_fail="die")
    assert not [name for name in os.listdir(tmp_path) if "shards" in name or "tmp" in name]
