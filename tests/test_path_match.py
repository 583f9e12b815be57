"""A path the user names is never a pattern (issue 91 item 1): bert_tf2/base/path_match.py.

Every writer and converter runs into a folder whose name holds `[`, `*`, `?`, a space and
a newline, beside a folder that name matches as a glob (holding the user's files): the
outputs are complete, the user's files neither replaced nor removed. A guard enumerates
the package's glob call sites: none but path_match's, so a new one that skips it fails.
"""
import ast
import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf

import convert_tf1_checkpoint
from bert_tf2 import fileutil
from bert_tf2.base import output_folder
from bert_tf2 import heads
from bert_tf2.base import path_match
from bert_tf2.trainer import checkpoints
from bert_tf2.trainer import written_files
from conftest import HANG_GUARD_SECONDS, REPO_ROOT
import registry_lists
from test_checkpoints import built, tiny_config, write_tf1

# A folder name glob reads as a pattern, and one that pattern matches (never itself).
ODD = "exp[1] *?\nx"
LOOKALIKE = "exp1 ab\nx"


# ---------------------------------------------------------------------------
# The guard: every glob of the package goes through path_match
# ---------------------------------------------------------------------------

# Names whose call (or import) matches a pattern: glob, fnmatch, TensorFlow's globbing
# file and checkpoint lookups (tf.train.latest_checkpoint globs the folder; a
# CheckpointManager's removal of old checkpoints globs their prefix).
_GLOBBING = {"glob", "iglob", "Glob", "fnmatch", "fnmatchcase", "get_matching_files",
             "matching_files", "list_files", "latest_checkpoint", "checkpoint_exists",
             "CheckpointManager", "Saver"}
# Where one may be, and why.
_ALLOWED = {
    ("bert_tf2/base/path_match.py", "*"): "the one helper",
    ("bert_tf2/trainer/checkpoints.py", "CheckpointManager"):
        "checkpoints.Manager, TensorFlow's manager with a removal that lists the folder",
    ("bert_tf2/compat/estimator.py", "Saver"):
        "a fork's TF1 Estimator keeps TF1's tf.train.Saver, as the reference's does",
}


_sources = registry_lists.parsed_sources


def _globbing_sites(tree):
    """(name, line) of every use of a _GLOBBING name (an attribute, an import)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in _GLOBBING:
            # Our own functions of the same name (checkpoints.latest_checkpoint, the
            # estimator's method) are not TensorFlow's.
            owner = ast.unparse(node.value)
            if node.attr == "latest_checkpoint" and not owner.endswith("train"):
                continue
            yield node.attr, node.lineno
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
            for name in names:
                if name.split(".")[0] in ("glob", "fnmatch"):
                    yield name, node.lineno


def test_every_glob_of_the_package_goes_through_path_match():
    found = ["%s:%d %s" % (where, line, name) for where, tree in _sources()
             for name, line in _globbing_sites(tree)
             if (where, "*") not in _ALLOWED and (where, name) not in _ALLOWED]
    assert not found, ("a path may hold [ * ? (a user's folder): match names with "
                       "bert_tf2/base/path_match.py, not %s" % found)


def test_only_the_reference_pattern_flags_are_globbed_as_given():
    """path_match.user_pattern (a glob of the user's text) is for the flags the reference
    documents as globs (--input_file ...), through fileutil.expand_input_files alone."""
    callers = []
    for where, tree in _sources():
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Attribute) and node.attr == "user_pattern":
                    callers.append((where, function.name))
    assert callers == [("bert_tf2/fileutil.py", "expand_input_files")]


# ---------------------------------------------------------------------------
# The helper
# ---------------------------------------------------------------------------

def _odd_folders(tmp_path):
    """(the odd folder, its look-alike holding the user's files), both made."""
    odd, lookalike = tmp_path / ODD, tmp_path / LOOKALIKE
    for folder in (odd, lookalike):
        folder.mkdir()
    for name in ("checkpoint", "bert_model.ckpt.index", "notes.txt",
                 "model.ckpt-1.index", "model.ckpt-1.data-00000-of-00001"):
        (lookalike / name).write_text("the user's " + name)
    return odd, lookalike


def _user_files_kept(lookalike):
    for name in os.listdir(lookalike):
        assert (lookalike / name).read_text() == "the user's " + name
    assert len(os.listdir(lookalike)) == 5


def test_matching_takes_the_path_literally(tmp_path, monkeypatch):
    odd, lookalike = _odd_folders(tmp_path)
    # What TensorFlow's glob gives: the look-alike's files.
    assert tf.io.gfile.glob(str(odd) + "/*.index") == [
        str(lookalike / "bert_model.ckpt.index"), str(lookalike / "model.ckpt-1.index")]
    (odd / "a.index").write_text("")
    (odd / "a.json").write_text("")
    assert path_match.matching(str(odd) + "/", "*.index") == [str(odd / "a.index")]
    assert path_match.matching(str(odd / "a"), ".*") == [str(odd / "a.index"),
                                                          str(odd / "a.json")]
    assert path_match.matching(str(tmp_path / "exp1"), "*") == [str(lookalike)]
    assert path_match.name_matches("model.ckpt-4.index", "model.ckpt-4.*")
    assert path_match.escape("a[1]*?") == "a[[]1][*][?]"
    monkeypatch.chdir(odd)
    assert path_match.matching("", "*.json") == ["a.json"]


def test_latest_checkpoint_of_an_odd_folder(tmp_path):
    odd, lookalike = _odd_folders(tmp_path)
    manager = checkpoints.Manager(tf.train.Checkpoint(v=tf.Variable(1.0)), str(odd),
                                  max_to_keep=1)
    for _ in range(3):
        manager.save()
    assert tf.train.latest_checkpoint(str(odd)) is None  # TensorFlow's: globbed
    assert path_match.latest_checkpoint(str(odd)) == str(odd / "ckpt-3")
    # The old ones removed (TensorFlow's manager removed none here), the user's kept.
    assert sorted(os.listdir(odd)) == ["checkpoint", "ckpt-3.data-00000-of-00001",
                                       "ckpt-3.index"]
    _user_files_kept(lookalike)


def test_the_manager_keeps_what_tensorflows_keeps(tmp_path, monkeypatch):
    """checkpoints.Manager replaces only how the old checkpoints are found (listed, not
    globbed): with keep_checkpoint_every_n_hours, the files left are TensorFlow's
    manager's, save by save (its clock stubbed: saves 0, 0.6, 1.2, ... hours apart)."""
    import time  # pylint: disable=import-outside-toplevel
    clock = [1000.0]
    monkeypatch.setattr(time, "time", lambda: clock[0])
    left = {}
    for kind, make in (("ours", checkpoints.Manager), ("tf", tf.train.CheckpointManager)):
        folder, clock[0], seen = tmp_path / kind, 1000.0, []
        manager = make(tf.train.Checkpoint(v=tf.Variable(1.0)), str(folder), max_to_keep=2,
                       keep_checkpoint_every_n_hours=1)
        for _ in range(6):
            manager.save()
            clock[0] += 0.6 * 3600
            seen.append(sorted(n for n in os.listdir(folder) if n.endswith(".index")))
        left[kind] = seen
    assert left["ours"] == left["tf"]
    # By hand: ckpt-1 and -2 are under an hour after the start, removed; ckpt-3 (1.2 h) is
    # kept for good; ckpt-4 (0.6 h after it) removed; -5 and -6 the two newest.
    assert left["ours"][-1] == ["ckpt-3.index", "ckpt-5.index", "ckpt-6.index"], left["ours"]


# ---------------------------------------------------------------------------
# Every writer and converter into an odd folder
# ---------------------------------------------------------------------------

def _tf1_source(tmp_path):
    cfg = tiny_config()
    cfg_path = tmp_path / "bert_config.json"
    cfg_path.write_text(cfg.to_json_string())
    model = built(heads.BertClassifier(cfg, 3))
    return write_tf1(tmp_path / "m", model), cfg, cfg_path


def _convert(source, cfg_path, out, **kwargs):
    return convert_tf1_checkpoint.run(convert_tf1_checkpoint.Settings(
        input_checkpoint=source, bert_config_file=str(cfg_path), output_dir=str(out),
        **kwargs))


@pytest.mark.parametrize("direction", ["tf1_to_tf2", "tf2_to_tf1"])
def test_tf1_conversions_into_an_odd_folder(tmp_path, direction):
    odd, lookalike = _odd_folders(tmp_path)
    source, cfg, cfg_path = _tf1_source(tmp_path)
    if direction == "tf2_to_tf1":
        source, _ = convert_tf1_checkpoint.tf1_to_tf2(
            source, cfg, str(tmp_path / "t" / "bert_model.ckpt"))
    # The user's own checkpoint there is refused, as in a plain folder.
    (odd / "checkpoint").write_text("mine")
    with pytest.raises(ValueError, match="holds checkpoint, which convert_tf1_checkpoint "
                                         "did not write"):
        _convert(source, cfg_path, odd)
    assert (odd / "checkpoint").read_text() == "mine"
    os.remove(odd / "checkpoint")
    for _ in range(2):  # a rerun replaces its own files
        result = _convert(source, cfg_path, odd)
    names = sorted(os.listdir(odd))
    assert not [n for n in names if fileutil.is_temporary(str(odd / n))]
    assert names == sorted(["bert_model.ckpt.index", "bert_model.ckpt.data-00000-of-00001",
                            "checkpoint", output_folder.OUTPUTS_RECORD])
    assert path_match.latest_checkpoint(str(odd)) == result.outputs["checkpoint"]
    contents = checkpoints.CheckpointContents(str(odd))
    assert contents.is_tf2 == (direction == "tf1_to_tf2") and contents.model_names()
    _user_files_kept(lookalike)


def test_hf_import_into_an_odd_folder(tmp_path):
    from test_convert_hf_checkpoint import (  # pylint: disable=import-outside-toplevel
        TINY_CONFIG, stored_names, tiny_hf_weights, write_hf_dir)
    from bert_tf2.convert import huggingface  # pylint: disable=import-outside-toplevel
    odd, lookalike = _odd_folders(tmp_path)
    hf_dir = write_hf_dir(tmp_path / "hf", TINY_CONFIG, stored_names(tiny_hf_weights(TINY_CONFIG)))
    (odd / "bert_model.ckpt.index").write_text("mine")
    with pytest.raises(ValueError, match="holds bert_model.ckpt.index, which"):
        huggingface.convert(str(hf_dir), str(odd))
    os.remove(odd / "bert_model.ckpt.index")
    for _ in range(2):
        written = huggingface.convert(str(hf_dir), str(odd), write_tf2=True)
    assert checkpoints.is_tf2_checkpoint(written["tf2"])
    record = json.loads((odd / output_folder.OUTPUTS_RECORD).read_text())
    files = next(iter(record.values()))["files"]
    assert "bert_model.ckpt.index" in files and "checkpoint" in files
    assert [n for n in files if n.startswith("tf2/")]
    _user_files_kept(lookalike)


@pytest.mark.slow
def test_training_records_and_keep_best_only_in_an_odd_folder(tmp_path):
    from test_keep_checkpoints import _evaluation, _train  # pylint: disable=import-outside-toplevel
    from test_training import make_runner  # pylint: disable=import-outside-toplevel
    _, lookalike = _odd_folders(tmp_path)
    os.rmdir(tmp_path / ODD)
    runner = make_runner(tmp_path, ODD, num_train_steps=6, keep_best_only=True,
                         keep_checkpoint_max=0)
    _train(runner, _evaluation({2: 0.5, 4: 0.9, 6: 0.6}))
    odd = tmp_path / ODD
    record = json.loads((odd / written_files.FILE).read_text())
    assert "best/best.json" in record["files"] and "best" in record["folders"]
    assert not [n for n in os.listdir(odd) if n.startswith("model.ckpt")]
    assert sorted(os.listdir(odd / "best")) == [
        "best.json", "checkpoint", "model.ckpt-4.data-00000-of-00001", "model.ckpt-4.index"]
    assert checkpoints.best_hint(str(odd)).endswith("use %s" % (odd / "best"))
    _user_files_kept(lookalike)


@pytest.mark.slow
def test_keep_checkpoint_max_in_an_odd_folder(tmp_path):
    from test_keep_checkpoints import _indexes, _train  # pylint: disable=import-outside-toplevel
    from test_training import make_runner  # pylint: disable=import-outside-toplevel
    _, lookalike = _odd_folders(tmp_path)
    runner = make_runner(tmp_path, ODD, num_train_steps=4, save_checkpoints_steps=1,
                         iterations_per_loop=1, keep_checkpoint_max=2)
    _train(runner)
    assert _indexes(tmp_path / ODD) == ["model.ckpt-3.index", "model.ckpt-4.index"]
    assert make_runner(tmp_path, ODD, num_train_steps=4).global_step == 4
    _user_files_kept(lookalike)


def _odd_classifier_export(odd):
    """export_saved_model's flags for a tiny classifier checkpoint written in `odd`,
    exported into odd/export."""
    cfg = tiny_config(vocab_size=12)
    (odd / "bert_config.json").write_text(cfg.to_json_string())
    (odd / "vocab.txt").write_text("".join(t + "\n" for t in [
        "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "good", "film", "bad", "the",
        "movie", "##s"]))
    model = built(heads.BertClassifier(cfg, 2))
    tensors = {n: v.numpy() for n, v in checkpoints.tf1_variable_map(model).items()}
    checkpoints.write_tf1_checkpoint(tensors, str(odd / "model.ckpt"))
    return ["--model_type=classifier", "--bert_config_file=%s" % (odd / "bert_config.json"),
            "--init_checkpoint=%s" % odd, "--vocab_file=%s" % (odd / "vocab.txt"),
            "--max_seq_length=16", "--export_dir=%s" % (odd / "export"), "--task_name=SST-2"]


@pytest.mark.slow
def test_export_saved_model_from_and_into_an_odd_folder(tmp_path):
    import export_saved_model  # pylint: disable=import-outside-toplevel
    from bert_tf2 import flags_common  # pylint: disable=import-outside-toplevel
    odd, lookalike = _odd_folders(tmp_path)
    export_saved_model.run(flags_common.parse_flags(
        export_saved_model.define_flags, _odd_classifier_export(odd)))
    assert not [n for n in os.listdir(odd) if fileutil.is_temporary(str(odd / n))]
    # TensorFlow's own loader globs the variables' prefix: a link without the `[`.
    os.symlink(odd / "export", tmp_path / "link")
    loaded = tf.saved_model.load(str(tmp_path / "link"))
    outputs = loaded.signatures["serving_default"](text_a=tf.constant(["a good film"]),
                                                  text_b=tf.constant([""]))
    assert all(np.all(np.isfinite(v.numpy())) for v in outputs.values()
               if v.dtype.is_floating)
    _user_files_kept(lookalike)


@pytest.mark.parametrize("name", ["../x", "sub/../../x", "/abs/x", ".", "sub/"])
def test_an_output_name_outside_the_output_dir_is_one_line(tmp_path, name):
    """Issue 91 (low): --output_name=../x wrote beside --output_dir (outside the folder the
    conversion replaces whole and records); now one line, nothing written."""
    source, _, cfg_path = _tf1_source(tmp_path)
    with pytest.raises(ValueError, match=r"^(--)?output_name=%s must be a file prefix "
                                         r"inside (--)?output_dir" % re.escape(name)):
        _convert(source, cfg_path, tmp_path / "out", output_name=name)
    assert sorted(os.listdir(tmp_path)) == ["bert_config.json", "m"]
    _convert(source, cfg_path, tmp_path / "out", output_name="sub/../model.ckpt")
    assert (tmp_path / "out" / "model.ckpt.index").exists()


def test_output_files_in_an_odd_folder_touch_no_look_alike(tmp_path):
    """create_pretraining_data / create_vocab's outputs: our leftovers beside them are
    removed and another run's shards refused in that folder only (before: the look-alike
    folder's temporaries were removed, the odd folder's own shards never seen)."""
    odd, lookalike = _odd_folders(tmp_path)
    (lookalike / "x.tfrecord.tmp-0123abcd").write_text("the user's")
    (odd / "x.tfrecord.tmp-89abcdef").write_text("a killed run's")
    assert fileutil.output_files(str(odd / "x.tfrecord"), 0, "--output_file") == [
        str(odd / "x.tfrecord")]
    assert not (odd / "x.tfrecord.tmp-89abcdef").exists()
    assert (lookalike / "x.tfrecord.tmp-0123abcd").read_text() == "the user's"
    (odd / "s-00000-of-00003").write_text("another run's")
    with pytest.raises(ValueError, match="already holds files of another run"):
        fileutil.output_files(str(odd / "s"), 2, "--output_file")
    (lookalike / "t-00000-of-00003").write_text("the user's")
    assert len(fileutil.output_files(str(odd / "t"), 2, "--output_file")) == 2


def test_every_folder_swap_goes_through_the_one_rule():
    """A folder replaced whole (fileutil.replace_folder) goes through output_folder.swap_in
    (a mount point filled in place, permissions kept): the converters' write_outputs_aside
    (each converter face reaches it) and the export's write_saved_model."""
    callers = sorted({where for where, tree in _sources() for node in ast.walk(tree)
                      if isinstance(node, ast.Attribute) and node.attr == "replace_folder"
                      and where != "bert_tf2/fileutil.py"})
    assert callers == ["bert_tf2/base/output_folder.py"]
    users = {where for where, tree in _sources() for node in ast.walk(tree)
             if isinstance(node, ast.Attribute) and node.attr == "write_outputs_aside"}
    assert users >= {"convert_tf1_checkpoint.py", "bert_tf2/convert/huggingface.py",
                     "bert_tf2/convert/keras_hub.py", "bert_tf2/convert/hf_export.py"}
    swappers = {where for where, tree in _sources() for node in ast.walk(tree)
                if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1]
                == "swap_in"}
    assert swappers >= {"bert_tf2/base/output_folder.py", "bert_tf2/export/saved_model_dir.py"}


# Every function that renames (os.rename / os.replace / tf.io.gfile.rename / shutil.move),
# each with what it renames: a folder is put in place by fileutil.replace_folder (through
# output_folder.swap_in) alone; a new writer renaming a folder on its own is not listed.
_RENAMERS = {
    ("bert_tf2/fileutil.py", "replace_folder"): "the folder swap",
    ("bert_tf2/fileutil.py", "recover_folder"): "the folder a killed swap set aside, put back",
    ("bert_tf2/fileutil.py", "atomic_open"): "a file",
    ("bert_tf2/base/output_folder.py", "swap_in"): "files moved into a mount point",
    ("bert_tf2/export/saved_model_dir.py", "_move_beside"): "--litert's files",
    ("bert_tf2/compat/estimator.py", "write_graph_text"): "a file",
    ("bert_tf2/compat/move_fork.py", "move_fork"): "files",
    ("bert_tf2/input_pipeline.py", "__exit__"): "a file",
    ("bert_tf2/pretraining/pretraining_beam.py", "_finish"): "shard files",
    ("bert_tf2/trainer/checkpoints.py", "write_tf1_checkpoint"): "checkpoint files",
    # best/ inside the run's own --output_dir (never a mount point), swapped under the
    # training record (written_files.writing); its kill tests stop between the renames.
    ("bert_tf2/trainer/periodic_eval.py", "_save_best"): "the folder best/",
}


def _renaming_functions(tree):
    """The names of the functions (innermost) of `tree` that call a rename."""
    found = set()

    def visit(node, function):
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                else function
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute):
                owner, attr = ast.unparse(child.func.value), child.func.attr
                if attr in ("rename", "renames") or (attr == "replace" and owner == "os") or (
                        attr == "move" and owner == "shutil"):
                    found.add(function)
            visit(child, inner)
    visit(tree, "<module>")
    return found


def test_no_writer_renames_a_folder_into_place_on_its_own():
    renamers = {(where, function) for where, tree in _sources()
                for function in _renaming_functions(tree)}
    assert renamers == set(_RENAMERS), (
        "a rename outside the list: a folder put in place goes through "
        "output_folder.swap_in (a mount point, permissions); a file's rename is listed "
        "in tests/test_path_match._RENAMERS: %s" % sorted(renamers ^ set(_RENAMERS)))


def test_the_rename_guard_sees_a_folder_renamed_on_its_own():
    tree = ast.parse("import os\nimport tensorflow as tf\n"
                     "def publish(temp, folder):\n    tf.io.gfile.rename(temp, folder)\n"
                     "class W:\n    def put(self, a, b):\n        os.replace(a, b)\n")
    assert _renaming_functions(tree) == {"publish", "put"}


@pytest.mark.slow
def test_keras_hub_export_and_import_in_odd_folders(tmp_path):
    pytest.importorskip("keras_hub")
    import convert_keras_hub  # pylint: disable=import-outside-toplevel
    from test_keras_hub import _folder  # pylint: disable=import-outside-toplevel
    odd, lookalike = _odd_folders(tmp_path)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "good", "film", "bad"]
    folder, _ = _folder(odd, "classifier", vocab, layers=1)
    preset = odd / "preset"
    for _ in range(2):
        convert_keras_hub.run(convert_keras_hub.Settings(init_checkpoint=str(folder),
                                                         output_dir=str(preset)))
    assert (preset / "config.json").exists() and (preset / "model.weights.h5").exists()
    back = odd / "back"
    convert_keras_hub.run(convert_keras_hub.Settings(
        direction="from_keras_hub", preset_dir=str(preset), output_dir=str(back)))
    assert checkpoints.CheckpointContents(str(back)).model_names()
    _user_files_kept(lookalike)


def test_hf_export_from_and_into_odd_folders(tmp_path):
    from test_hf_export import _SMALL_VOCAB, _folder  # pylint: disable=import-outside-toplevel
    from bert_tf2.convert import huggingface  # pylint: disable=import-outside-toplevel
    odd, lookalike = _odd_folders(tmp_path)
    folder = _folder(odd, "classifier", _SMALL_VOCAB)[0]
    out = odd / "hf"
    for _ in range(2):
        written = huggingface.export_to_hf(str(folder), str(out))
    assert json.loads((out / "config.json").read_text())["architectures"]
    assert os.path.exists(written["weights"])
    assert not [n for n in os.listdir(odd) if fileutil.is_temporary(str(odd / n))]
    _user_files_kept(lookalike)


@pytest.mark.slow
def test_export_warm_up_and_litert_into_an_odd_folder(tmp_path):
    """--warmup_file's replay and --litert's conversion load the export they write (before:
    tf.saved_model.load globbed odd/export's variables prefix, and both refused every
    export into such a folder: 'Failed to find any matching files')."""
    pytest.importorskip("ai_edge_litert", reason="the [litert] extra (ai-edge-litert) is missing")
    import export_saved_model  # pylint: disable=import-outside-toplevel
    from bert_tf2 import flags_common  # pylint: disable=import-outside-toplevel
    from bert_tf2.export import warmup  # pylint: disable=import-outside-toplevel
    odd, lookalike = _odd_folders(tmp_path)
    (odd / "warm up.txt").write_text("a good film\tthe movie\nbad\n")
    export_saved_model.run(flags_common.parse_flags(
        export_saved_model.define_flags, _odd_classifier_export(odd) + [
            "--warmup_file=%s" % (odd / "warm up.txt"), "--litert=fp32"]))
    export = odd / "export"
    assert len(warmup.read_requests(str(export / warmup.WARMUP_FILE))) == 4
    assert [n for n in os.listdir(export) if n.endswith(".tflite")]
    assert not [n for n in os.listdir(odd) if fileutil.is_temporary(str(odd / n))]
    _user_files_kept(lookalike)


def test_every_saved_model_load_goes_through_fileutil():
    """tf.saved_model.load globs the variables' prefix: a folder holding `[` loads through
    fileutil.load_saved_model (its link) alone."""
    found = ["%s:%d" % (where, node.lineno) for where, tree in _sources()
             for node in ast.walk(tree)
             if isinstance(node, ast.Attribute) and node.attr == "load"
             and ast.unparse(node.value).endswith("saved_model")
             and where != "bert_tf2/fileutil.py"]
    assert not found, "load a SavedModel with fileutil.load_saved_model, not at %s" % found


def test_an_input_pattern_naming_a_file_is_that_file(tmp_path, caplog):
    """--input_file is the reference's glob; a file literally named by it is read as
    itself (before: 'matches no file' in an odd folder, or, beside a look-alike, the
    look-alike read in its place without a word)."""
    odd, lookalike = _odd_folders(tmp_path)
    (odd / "in[1].txt").write_text("the user's input")
    assert fileutil.expand_input_files(str(odd / "in[1].txt")) == [str(odd / "in[1].txt")]
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "in1.txt").write_text("a look-alike")
    assert fileutil.expand_input_files(str(plain / "in[1].txt")) == [str(plain / "in1.txt")]
    (plain / "in[1].txt").write_text("the user's input")
    with caplog.at_level("WARNING"):
        assert fileutil.expand_input_files(str(plain / "in[1].txt")) == [
            str(plain / "in[1].txt")]
    assert "in1.txt" in caplog.text
    assert fileutil.expand_input_files(str(plain / "in*.txt")) == [
        str(plain / "in1.txt"), str(plain / "in[1].txt")]
    _user_files_kept(lookalike)


_FAILING_FACE = """
import sys
from bert_tf2 import cli, fileutil

def run(flags):
    print(fileutil.readable_checkpoint(sys.argv[1]), flush=True)
    raise ValueError("a bad setting found after the checkpoint was read")

cli.run_cli(lambda fv: None, run, argv=sys.argv[:1])
"""


@pytest.mark.slow
def test_a_face_ending_in_an_error_leaves_no_link_folder(tmp_path):
    """A face that read a checkpoint in an odd folder (through links in a folder of ours)
    and then stopped on an error (one line, os._exit) left that folder in the temporary
    folder, one per run (seen: 35 after a session of tries)."""
    import subprocess  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel
    from conftest import user_environ  # pylint: disable=import-outside-toplevel
    odd, _ = _odd_folders(tmp_path)
    checkpoints.write_tf1_checkpoint(
        {"bert/embeddings/word_embeddings": np.zeros([3, 2], np.float32)}, str(odd / "model.ckpt"))
    done = subprocess.run([sys.executable, "-c", _FAILING_FACE, str(odd / "model.ckpt")],
                          capture_output=True, text=True, cwd=str(REPO_ROOT),
                          env=user_environ(PYTHONPATH=str(REPO_ROOT),
                                           TMPDIR=str(tmp_path)),
                          timeout=HANG_GUARD_SECONDS, check=False)
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr.strip().endswith(
        "error: a bad setting found after the checkpoint was read")
    link = done.stdout.strip().splitlines()[-1]
    assert link != str(odd / "model.ckpt") and not os.path.exists(os.path.dirname(link))
