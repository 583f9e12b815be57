"""pretraining_shards.py: shard seeds, shard files and the even interleave."""
from bert_tf2.pretraining import pretraining_shards


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
