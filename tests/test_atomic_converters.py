"""The converters write their output folder all at once (output_folder.write_outputs_aside).

convert_keras_hub.py (both directions), convert_hf_checkpoint.py --hf_dir and
convert_tf1_checkpoint.py (both directions) are stopped at the files they write while
re-converting into their earlier output (chosen_writes: the first write of every kind and
the last two, the renames into place): stopped as by an error (its clean-up runs) or as
by a kill (no clean-up at all), the earlier output is byte for byte as it was and loads;
the next run puts away what a kill left; a user's file in the folder is carried over.
"""
import builtins
import json
import os
import shutil
import tempfile

import numpy as np
import pytest
import tensorflow as tf

import convert_tf1_checkpoint
from bert_tf2 import fileutil
from bert_tf2.base import output_folder
from bert_tf2 import heads
from bert_tf2.convert import huggingface
from bert_tf2.trainer import checkpoints
from conftest import write_text
from test_checkpoints import built, tiny_config, write_tf1
from test_convert_hf_checkpoint import TINY_CONFIG, stored_names, tiny_hf_weights, write_hf_dir


class _Stop(BaseException):
    """The stop the test makes at one write (BaseException: as SIGTERM's KeyboardInterrupt)."""


_WRITE_MODES = "wax+"


def _patch_writes(patch, stop_at, steps):
    """Every way a converter writes a file counts as one step; step `stop_at` raises _Stop."""
    owners = [(tf.io.gfile, "GFile"), (tf.io.gfile, "copy"), (tf.io.gfile, "rename"),
              (tf.raw_ops, "SaveV2"), (tf.train.Checkpoint, "write"), (os, "link"),
              (builtins, "open")]
    try:
        import keras  # pylint: disable=import-outside-toplevel
        owners.append((keras.Model, "save_weights"))
    except ImportError:
        pass
    for owner, name in owners:
        real = getattr(owner, name)

        def wrapped(*args, _real=real, _name=name, **kwargs):
            if _name in ("GFile", "open"):
                mode = args[1] if len(args) > 1 else kwargs.get("mode", "r")
                if not any(c in str(mode) for c in _WRITE_MODES):
                    return _real(*args, **kwargs)
            steps.append(_name)
            if len(steps) == stop_at:
                raise _Stop("stopped at write %d (%s)" % (stop_at, _name))
            return _real(*args, **kwargs)

        patch.setattr(owner, name, wrapped)


def _tree(folder):
    out = {}
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, folder)] = f.read()
    return out


def _stop_once(monkeypatch, convert, stop_at, kill):
    """convert() stopped at its write `stop_at`, as by an error or (kill) as by a kill
    (fileutil.remove a no-op: nothing cleaned up); returns the writes it made (and those of
    its clean-up after the stop)."""
    steps = []
    with monkeypatch.context() as patch:
        _patch_writes(patch, stop_at, steps)
        if kill:
            patch.setattr(fileutil, "remove", lambda path: None)
        with pytest.raises(_Stop):
            convert()
    return steps


def chosen_writes(names):
    """The writes (1-based) a run of the writes `names` is stopped at, and whether as by a
    kill: the first write of each kind (open, GFile, SaveV2, save_weights, copy, link,
    rename, ...) by an error and by a kill in turn, then the last two (the renames into
    place: a kill between them is what recover_folder undoes) by a kill."""
    count = len(names)
    first = sorted({names.index(name) + 1 for name in set(names)} - {count - 1, count})
    return ([(k, i % 2 == 1) for i, k in enumerate(first)]
            + [(k, True) for k in (count - 1, count) if k >= 1])


def stop_at_every_write(monkeypatch, out, convert, minimum_steps):
    """Runs `convert()` (a re-conversion into the earlier output `out`) once to the end to
    list its writes, puts `out` back as it was, then stops it at each of chosen_writes in
    turn; after each, `out` must be as it was, and recover_folder (what the next run does
    first) leaves nothing beside it. Returns convert()'s result once it runs to the end
    again. Every kind of write is stopped at; stopping at every write in turn (a keras-hub
    model built for each) adds no kind of write."""
    earlier, beside = _tree(out), sorted(os.listdir(os.path.dirname(out)))
    backup = tempfile.mkdtemp()
    try:
        shutil.copytree(str(out), os.path.join(backup, "out"), symlinks=True)
        names = []
        with monkeypatch.context() as patch:
            _patch_writes(patch, 0, names)  # 0: never stopped, the writes listed
            convert()
        shutil.rmtree(str(out))
        shutil.copytree(os.path.join(backup, "out"), str(out), symlinks=True)
    finally:
        shutil.rmtree(backup)
    assert _tree(out) == earlier and len(names) > minimum_steps, names
    stopped = set()
    print("%d writes (%s); stopped at %s" % (len(names), ", ".join(names),
                                             chosen_writes(names)))
    for k, kill in chosen_writes(names):
        steps = _stop_once(monkeypatch, convert, k, kill)[:k]  # then its clean-up's
        assert steps == names[:k], (k, steps)  # the same writes in the same order
        stopped.add(steps[-1])
        where = "stopped at write %d of %d (%s, %s)" % (k, len(names), steps[-1],
                                                       "kill" if kill else "error")
        assert _tree(out) == earlier, where
        fileutil.recover_folder(str(out))
        assert sorted(os.listdir(os.path.dirname(out))) == beside, where
        assert _tree(out) == earlier, where
    assert stopped == set(names), (stopped, names)
    return convert()


# ---------------------------------------------------------------------------
# convert_tf1_checkpoint.py
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("direction", ["tf1_to_tf2", "tf2_to_tf1"])
def test_tf1_convert_stopped_at_any_write_keeps_the_earlier_checkpoint(tmp_path, monkeypatch,
                                                                      direction):
    cfg = tiny_config()
    cfg_path = tmp_path / "bert_config.json"
    cfg_path.write_text(cfg.to_json_string())
    out = tmp_path / "out"
    sources = []
    for seed in (1, 2):
        model = built(heads.BertClassifier(cfg, 3))
        for variable in model.variables:
            variable.assign(np.full(variable.shape, seed, np.float32))
        source = write_tf1(tmp_path / ("m%d" % seed), model)
        if direction == "tf2_to_tf1":
            source, _ = convert_tf1_checkpoint.tf1_to_tf2(
                source, cfg, str(tmp_path / ("t%d" % seed) / "bert_model.ckpt"))
        sources.append(source)

    def convert(source):
        return convert_tf1_checkpoint.run(convert_tf1_checkpoint.Settings(
            input_checkpoint=source, bert_config_file=str(cfg_path), output_dir=str(out)))

    convert(sources[0])
    write_text(out / "notes.txt", "the user's own file")
    result = stop_at_every_write(monkeypatch, out, lambda: convert(sources[1]), 3)
    assert result.outputs["checkpoint"].startswith(str(out) + "/")
    assert (out / "notes.txt").read_text() == "the user's own file"
    contents = checkpoints.CheckpointContents(str(out))
    assert all(np.all(contents.get(n) == 2) for n in contents.model_names())
    record = json.loads((out / output_folder.OUTPUTS_RECORD).read_text())
    assert "notes.txt" not in record["convert_tf1_checkpoint"]["files"]


# ---------------------------------------------------------------------------
# convert_hf_checkpoint.py --hf_dir
# ---------------------------------------------------------------------------

def test_hf_import_stopped_at_any_write_keeps_the_earlier_folder(tmp_path, monkeypatch):
    hf_dirs = [write_hf_dir(tmp_path / ("hf%d" % seed), TINY_CONFIG,
                            stored_names(tiny_hf_weights(TINY_CONFIG, seed=seed)))
               for seed in (0, 1)]
    out = tmp_path / "out"
    huggingface.convert(str(hf_dirs[0]), str(out), write_tf2=True)
    write_text(out / "notes" / "notes.txt", "the user's own file")
    first = checkpoints.CheckpointContents(str(out / "bert_model.ckpt"))
    first = {n: first.get(n) for n in first.model_names()}
    written = stop_at_every_write(
        monkeypatch, out, lambda: huggingface.convert(str(hf_dirs[1]), str(out),
                                                      write_tf2=True), 5)
    assert written["checkpoint"] == str(out / "bert_model.ckpt")
    assert written["tf2"].startswith(str(out / "tf2") + "/")
    assert (out / "notes" / "notes.txt").read_text() == "the user's own file"
    second = checkpoints.CheckpointContents(written["checkpoint"])
    name = "bert/embeddings/word_embeddings"
    assert not np.array_equal(second.get(name), first[name])
    assert checkpoints.is_tf2_checkpoint(written["tf2"])


def test_a_full_disk_at_the_checkpoint_leaves_no_folder(tmp_path, monkeypatch):
    hf_dir = write_hf_dir(tmp_path / "hf", TINY_CONFIG,
                          stored_names(tiny_hf_weights(TINY_CONFIG)))

    def full(*args, **kwargs):
        raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")

    monkeypatch.setattr(tf.raw_ops, "SaveV2", full)
    with pytest.raises(ValueError, match=r"^--output_dir=\S+/out: no space left on the device"):
        huggingface.convert(str(hf_dir), str(tmp_path / "out"))
    assert sorted(os.listdir(tmp_path)) == ["hf"]  # no bert_config.json + vocab.txt alone


# ---------------------------------------------------------------------------
# convert_keras_hub.py, both ways
# ---------------------------------------------------------------------------

def _keras_hub_folders(tmp_path):
    """Two classifier folders of the same shape (one encoder layer: each stopped run builds
    the keras-hub model again), different weights (the second scaled)."""
    from test_keras_hub import _folder  # pylint: disable=import-outside-toplevel
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "good", "film", "bad"]
    first, _ = _folder(tmp_path, "classifier", vocab, name="first", layers=1)
    second, _ = _folder(tmp_path, "classifier", vocab, name="second", layers=1)
    contents = checkpoints.CheckpointContents(str(second))
    tensors = {n: contents.get(n) * 0.5 for n in contents.model_names()}
    for name in tf.io.gfile.glob(str(second / "model.ckpt-3*")):
        os.remove(name)
    checkpoints.write_tf1_checkpoint(tensors, str(second / "model.ckpt-3"))
    return first, second


@pytest.mark.slow
def test_keras_hub_export_and_import_stopped_at_any_write_keep_the_earlier(tmp_path,
                                                                          monkeypatch):
    pytest.importorskip("keras_hub")
    import convert_keras_hub  # pylint: disable=import-outside-toplevel
    first, second = _keras_hub_folders(tmp_path)
    presets = [tmp_path / "preset1", tmp_path / "preset"]

    def export(folder, preset):
        return convert_keras_hub.run(convert_keras_hub.Settings(
            init_checkpoint=str(folder), output_dir=str(preset))).outputs

    export(first, presets[1])
    export(second, presets[0])
    # Re-export into the earlier preset: its two weight files (model.weights.h5,
    # task.weights.h5) never come from two runs.
    outputs = stop_at_every_write(monkeypatch, presets[1], lambda: export(second, presets[1]),
                                  5)
    assert outputs["task.weights.h5"] == str(presets[1] / "task.weights.h5")
    from test_keras_hub import _preset_weights  # pylint: disable=import-outside-toplevel
    want, got = _preset_weights(presets[0]), _preset_weights(presets[1])
    assert sorted(got) == sorted(want) and any(k.startswith("task.") for k in got)
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)

    def import_(preset, out):
        return convert_keras_hub.run(convert_keras_hub.Settings(
            direction="from_keras_hub", preset_dir=str(preset), output_dir=str(out))).outputs

    out = tmp_path / "ours"
    import_(presets[1], out)  # the second model's, written above
    export(first, presets[1])
    stop_at_every_write(monkeypatch, out, lambda: import_(presets[1], out), 4)
    back = checkpoints.CheckpointContents(str(out / "bert_model.ckpt"))
    original = checkpoints.CheckpointContents(str(first))
    for name in original.model_names():
        np.testing.assert_array_equal(back.get(name), original.get(name), err_msg=name)
