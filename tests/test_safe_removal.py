"""Nothing is removed through a symlink, and a run that refuses has removed nothing.

fileutil.remove (the one removal of the project) and replace_folder / recover_folder;
--existing_checkpoint=restart planned whole before it removes (a linked train/, best/ or
checkpoint file, the --init_checkpoint it starts from, a user's file in best/: refused,
nothing removed); the HuggingFace export replaced whole, never half (a stop at any write
leaves the earlier export), and HF -> ours -> HF keeping labels and model_max_length.
"""
import json
import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

from bert_tf2 import fileutil
from bert_tf2.convert import hf_export
from bert_tf2.convert import huggingface
from bert_tf2.trainer import checkpoints
from bert_tf2.trainer import training_record
from bert_tf2.trainer import written_files
from conftest import write_text
from test_training_record import _fake_folder

safetensors_numpy = pytest.importorskip("safetensors.numpy")


def _tree(folder):
    """{relative path: content} of every file under `folder`, links not followed (a
    link is listed as "-> target")."""
    found = {}
    for top, folders, files in os.walk(str(folder)):
        for name in files + [n for n in folders if os.path.islink(os.path.join(top, n))]:
            path = os.path.join(top, name)
            key = os.path.relpath(path, str(folder))
            found[key] = ("-> " + os.readlink(path) if os.path.islink(path)
                          else open(path, "rb").read())
    return found


# ---------------------------------------------------------------------------
# fileutil.remove, replace_folder, recover_folder
# ---------------------------------------------------------------------------

def test_remove_never_goes_through_a_link(tmp_path):
    shared = tmp_path / "shared"
    write_text(shared / "events.other", "another run's")
    write_text(tmp_path / "elsewhere.txt", "kept")
    folder = tmp_path / "folder"
    write_text(folder / "mine.txt", "x")
    os.symlink(shared, folder / "linked_dir")
    os.symlink(tmp_path / "elsewhere.txt", folder / "linked_file")
    link = tmp_path / "link_to_shared"
    os.symlink(shared, link)
    before = _tree(shared)
    fileutil.remove(str(link))  # a link to a folder: the link only
    assert not os.path.lexists(link) and _tree(shared) == before
    fileutil.remove(str(folder / "linked_file"))
    assert (tmp_path / "elsewhere.txt").read_text() == "kept"
    fileutil.remove(str(folder))  # a folder holding a link: the link goes, not its files
    assert not folder.exists() and _tree(shared) == before
    fileutil.remove(str(folder))  # nothing there: nothing done
    fileutil.remove(str(tmp_path / "elsewhere.txt"))
    assert not (tmp_path / "elsewhere.txt").exists()


def test_every_removal_goes_through_fileutil_remove():
    """No other way of removing a file in the package or its faces."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sources = [os.path.join(top, n) for top, _, names in os.walk(os.path.join(root, "bert_tf2"))
               for n in names if n.endswith(".py")]
    sources += [os.path.join(root, n) for n in os.listdir(root) if n.endswith(".py")]
    removal = re.compile(r"\b(rmtree|os\.remove|os\.unlink|os\.rmdir|removedirs|"
                         r"gfile\.remove)\(|\.unlink\(")
    found = []
    for path in sources:
        if path.endswith(os.path.join("bert_tf2", "fileutil.py")):
            continue
        for number, line in enumerate(open(path, encoding="utf-8"), 1):
            if removal.search(line.split("#")[0]):
                found.append("%s:%d: %s" % (os.path.relpath(path, root), number, line.strip()))
    assert found == []


def test_replace_folder_keeps_the_earlier_folder_until_the_new_one_is_in(tmp_path,
                                                                         monkeypatch):
    target = tmp_path / "out"
    write_text(target / "a.txt", "old")
    new = tmp_path / "out.tmp-0000abcd"
    write_text(new / "a.txt", "new")
    renames = []
    real_rename = tf.io.gfile.rename

    def failing_second(src, dst, overwrite=False):
        renames.append((src, dst))
        if len(renames) == 2:
            raise OSError("disk full")
        return real_rename(src, dst, overwrite)
    monkeypatch.setattr(tf.io.gfile, "rename", failing_second)
    with pytest.raises(OSError, match="disk full"):
        fileutil.replace_folder(str(new), str(target))
    monkeypatch.setattr(tf.io.gfile, "rename", real_rename)
    assert sorted(os.listdir(tmp_path)) == ["out"]  # the old one back, the new one gone
    assert (target / "a.txt").read_text() == "old"
    # A kill between the two renames: the old folder aside, the new one half-written.
    os.rename(target, tmp_path / "out.old-0000beef")
    write_text(tmp_path / "out.tmp-0000cafe" / "a.txt", "ne")
    write_text(tmp_path / "out.tmp-notours" / "a.txt", "someone's")
    fileutil.recover_folder(str(target))
    assert sorted(os.listdir(tmp_path)) == ["out", "out.tmp-notours"]
    assert (target / "a.txt").read_text() == "old"
    # A target that is a symlink goes aside as the link: its own target is kept whole.
    shutil.rmtree(tmp_path / "out.tmp-notours")
    os.rename(target, tmp_path / "real")
    os.symlink(tmp_path / "real", target)
    write_text(new / "a.txt", "new")
    fileutil.replace_folder(str(new), str(target))
    assert (target / "a.txt").read_text() == "new" and not os.path.islink(target)
    assert (tmp_path / "real" / "a.txt").read_text() == "old"


# ---------------------------------------------------------------------------
# --existing_checkpoint=restart: planned whole, then removed
# ---------------------------------------------------------------------------

_OLD = {"learning_rate": 5e-5, "train_data": "8 examples, sha256 01"}
_NEW = dict(_OLD, learning_rate=1e-4)


def _folder_of_ours(folder):
    """A folder as training leaves it, with _OLD recorded (the user's files at its top
    and in train/, none in best/)."""
    _fake_folder(str(folder), _OLD)
    os.remove(os.path.join(str(folder), "best", "notes.txt"))


def _refused(folder, match, init_checkpoint=None, outside=None):
    """decide(restart) raises `match` and leaves `folder` (and `outside`) as they were."""
    before, before_outside = _tree(folder), _tree(outside) if outside else None
    with pytest.raises(ValueError, match=match):
        training_record.decide(str(folder), dict(_NEW), "restart", 2, 4,
                               init_checkpoint=init_checkpoint)
    assert _tree(folder) == before
    if outside:
        assert _tree(outside) == before_outside


def test_restart_refuses_a_linked_subfolder_or_file_and_removes_nothing(tmp_path):
    for sub in ("train", "best", "eval"):
        folder, shared = tmp_path / ("out_" + sub), tmp_path / ("shared_" + sub)
        _folder_of_ours(folder)
        write_text(shared / "events.out.tfevents.9.other", "another run's events")
        write_text(shared / "best.json", "{}")
        shutil.rmtree(folder / sub)
        os.symlink(shared, folder / sub)
        _refused(folder, r"^--existing_checkpoint=restart: --output_dir=\S+: \S+/%s is a "
                         r"symbolic link \(to \S+shared_%s\); a restart removes only files "
                         r"training wrote, never a link .*; nothing was removed$" % (sub, sub),
                 outside=shared)
    folder = tmp_path / "out_file"
    _folder_of_ours(folder)
    data = folder / "model.ckpt-2.data-00000-of-00001"
    write_text(tmp_path / "store" / "data", "the weights")
    data.unlink()
    os.symlink(tmp_path / "store" / "data", data)
    _refused(folder, r"model.ckpt-2.data-00000-of-00001 is a symbolic link",
             outside=tmp_path / "store")


def test_restart_never_removes_the_checkpoint_it_starts_from(tmp_path):
    folder = tmp_path / "out"
    _folder_of_ours(folder)
    for init in (folder / "best", folder / "model.ckpt-2", folder / "best" / "model.ckpt-1",
                 folder):
        _refused(folder, r"^--existing_checkpoint=restart would remove --init_checkpoint=%s"
                         r"(,| \(\S+\),) the checkpoint the run starts from: copy it out of "
                         r"--output_dir=\S+ first .*nothing was removed$" % re.escape(str(init)),
                 init_checkpoint=str(init))
    elsewhere = tmp_path / "pretrained"
    write_text(elsewhere / "model.ckpt-7.index", "x")
    decision = training_record.decide(str(folder), dict(_NEW), "restart", 2, 4,
                                      init_checkpoint=str(elsewhere / "model.ckpt-7"))
    assert decision.restart and not (folder / "model.ckpt-2.index").exists()


def test_restart_refuses_a_users_file_in_best_then_works_once_it_is_moved(tmp_path):
    folder = tmp_path / "out"
    _fake_folder(str(folder), _OLD)  # best/notes.txt is the user's
    _refused(folder, r"^--existing_checkpoint=restart: --output_dir=\S+ holds notes.txt in "
                     r"best/, which training did not write; move it out of best/ .*nothing "
                     r"was removed$")
    os.rename(folder / "best" / "notes.txt", tmp_path / "notes.txt")
    decision = training_record.decide(str(folder), dict(_NEW), "restart", 2, 4)
    assert decision.restart and not (folder / "best").exists()
    assert sorted(_tree(folder)) == ["bert_config.json", "label_list.txt",
                                     "model.ckpt-2.index.bak", "notes.txt",
                                     "train.tf_record", "train/mine.txt",
                                     written_files.FILE]


# ---------------------------------------------------------------------------
# The HuggingFace export: replaced whole or not at all
# ---------------------------------------------------------------------------

def _tiny_model(tmp_path, head):
    from test_hf_export import _SMALL_VOCAB, _folder  # pylint: disable=import-outside-toplevel
    return _folder(tmp_path, head, _SMALL_VOCAB)[0]


def test_interrupted_re_export_leaves_the_earlier_export_whole(tmp_path, monkeypatch):
    folder = _tiny_model(tmp_path, "tagger")
    out = tmp_path / "hf"
    huggingface.export_to_hf(str(folder), str(out))
    earlier = _tree(out)
    write_text(folder / "label_list.txt", "B-X\nI-X\nO\nB-Y\n")  # a new export differs
    steps = []

    def stop_at(k):
        def wrap(function):
            def wrapped(*args, **kwargs):
                steps.append(function.__name__)
                if len(steps) == k:
                    raise KeyboardInterrupt("stopped at write %d" % k)
                return function(*args, **kwargs)
            return wrapped
        return wrap

    k = 0
    while True:
        k += 1
        steps.clear()
        with monkeypatch.context() as patch:
            wrap = stop_at(k)
            for name in ("_write_json", "_write_safetensors"):
                patch.setattr(hf_export, name, wrap(getattr(hf_export, name)))
            for name in ("copy", "rename"):
                patch.setattr(tf.io.gfile, name, wrap(getattr(tf.io.gfile, name)))
            patch.setattr(fileutil, "atomic_open", wrap(fileutil.atomic_open))
            try:
                huggingface.export_to_hf(str(folder), str(out))
            except KeyboardInterrupt:
                assert _tree(out) == earlier, "stopped at write %d (%s)" % (k, steps[-1])
                assert sorted(os.listdir(tmp_path)) == sorted(["hf", "tagger"]), k
                continue
        break
    assert k > 5  # every write was stopped at once
    config = json.loads((out / "config.json").read_text())
    assert config["id2label"] == {"0": "B-X", "1": "I-X", "2": "O", "3": "B-Y"}


def test_a_killed_export_is_put_back_by_the_next(tmp_path):
    folder = _tiny_model(tmp_path, "classifier")
    out = tmp_path / "hf"
    huggingface.export_to_hf(str(folder), str(out))
    earlier = _tree(out)
    # What a SIGKILL between replace_folder's renames leaves: the earlier export aside,
    # the new one complete beside it.
    os.rename(out, tmp_path / "hf.old-12345678")
    shutil.copytree(tmp_path / "hf.old-12345678", tmp_path / "hf.tmp-87654321")
    fileutil.recover_folder(str(out))
    assert _tree(out) == earlier and sorted(os.listdir(tmp_path)) == ["classifier", "hf"]
    # A user's file in the export is never replaced: refused, the export as it was.
    write_text(out / "README.md", "my model card")
    with pytest.raises(ValueError, match="holds README.md, which the HuggingFace export "
                                         "does not write"):
        huggingface.export_to_hf(str(folder), str(out))
    assert _tree(out) == dict(earlier, **{"README.md": b"my model card"})
    # An output_dir that is a symlink: its target replaced, the link kept.
    os.remove(out / "README.md")
    os.rename(out, tmp_path / "real")
    os.symlink(tmp_path / "real", out)
    outputs = huggingface.export_to_hf(str(folder), str(out))
    assert os.path.islink(out) and outputs["config"] == str(out / "config.json")
    assert _tree(tmp_path / "real") == earlier


@pytest.mark.parametrize("head", ["classifier", "tagger"])
def test_hf_ours_hf_keeps_labels_and_model_max_length(tmp_path, head):
    folder = _tiny_model(tmp_path, head)
    first = huggingface.export_to_hf(str(folder), str(tmp_path / "hf1"))
    huggingface.convert(str(tmp_path / "hf1"), str(tmp_path / "ours"))
    second = huggingface.export_to_hf(str(tmp_path / "ours"), str(tmp_path / "hf2"))
    for what in ("config", "tokenizer_config", "special_tokens_map", "vocab"):
        assert open(first[what]).read() == open(second[what]).read(), what
    config = json.loads(open(second["config"]).read())
    labels = (folder / "label_list.txt").read_text().split()
    assert config["id2label"] == {str(i): label for i, label in enumerate(labels)}
    assert config["label2id"] == {label: i for i, label in enumerate(labels)}
    assert json.loads(open(second["tokenizer_config"]).read())["model_max_length"] == 24
    a, b = (safetensors_numpy.load_file(o["weights"]) for o in (first, second))
    assert sorted(a) == sorted(b)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_restart_does_not_compare_the_folders_labels(tmp_path):
    """--existing_checkpoint=restart starts over: other labels than the folder's are
    this run's (a resumed or continued run keeps refusing them)."""
    import run_classifier  # pylint: disable=import-outside-toplevel
    from bert_tf2.tasks import classifier_tasks  # pylint: disable=import-outside-toplevel
    from bert_tf2.tasks import glue_data  # pylint: disable=import-outside-toplevel
    write_text(tmp_path / "o" / "label_list.txt", "negative\npositive\n")

    def part(**given):
        return run_classifier.Settings(
            task_name="mrpc", data_dir="d", vocab_file="v", bert_config_file="c",
            output_dir=str(tmp_path / "o"), do_train=True, **given).part(
                *classifier_tasks.SETTINGS)
    for mode in (None, "continue", "refuse"):
        with pytest.raises(ValueError, match="lists the labels negative, positive"):
            classifier_tasks.check_labels(part(existing_checkpoint=mode),
                                          glue_data.MrpcProcessor())
    classifier_tasks.check_labels(part(existing_checkpoint="restart"),
                                  glue_data.MrpcProcessor())


def test_restart_does_not_compare_a_taggers_labels(tmp_path):
    import run_ner  # pylint: disable=import-outside-toplevel
    from bert_tf2.tasks import ner_task  # pylint: disable=import-outside-toplevel
    write_text(tmp_path / "o" / "label_list.txt", "B-X\nO\n")
    train = write_text(tmp_path / "train.txt", "John B-PER\nlives O\n\n")

    def labels(**given):
        return ner_task.labels_of(run_ner.Settings(
            train_file=train, vocab_file="v", bert_config_file="c",
            output_dir=str(tmp_path / "o"), do_train=True, **given), ner_task.ner_data.read_conll(
                train))
    with pytest.raises(ValueError, match="holds the label_list.txt of other tags"):
        labels(existing_checkpoint="continue")
    assert sorted(labels(existing_checkpoint="restart")) == ["B-PER", "O"]


def test_restart_with_another_vocab_replaces_the_folders_copy(tmp_path):
    """model_folder.write refuses a folder's vocab.txt of other content: a restart with
    another --vocab_file removes the copy training made (after its checks), not leaving
    a folder without checkpoints that every later run refuses."""
    folder = tmp_path / "out"
    _folder_of_ours(folder)
    write_text(folder / "vocab.txt", "[PAD]\nold\n")
    written_files.note(str(folder), ["vocab.txt"])  # the copy model_folder.write made
    new_vocab = write_text(tmp_path / "vocab.txt", "[PAD]\nnew\n")
    same = dict(_NEW, vocab_file=training_record.file_fingerprint([str(folder / "vocab.txt")]))
    plan = training_record.plan_restart(str(folder), values=same)
    assert str(folder / "vocab.txt") not in plan.files
    other = dict(_NEW, vocab_file=training_record.file_fingerprint([new_vocab]))
    training_record.decide(str(folder), other, "restart", 2, 4)
    assert not (folder / "vocab.txt").exists() and (folder / "bert_config.json").exists()


@pytest.mark.parametrize("name", ["vocab.txt", "bert_config.json"])
def test_restart_never_removes_the_users_own_vocab_or_config(tmp_path, name):
    """A vocabulary made into the output folder (create_vocab.py), or a Google release
    folder used as the output folder: the first run read the file there and wrote no
    copy; a restart with another file refuses in one line and removes nothing (before
    the fix: "removed its 6 training files", the user's file among them)."""
    folder = tmp_path / "out"
    _folder_of_ours(folder)
    mine = "[PAD]\nmine\n" if name == "vocab.txt" else '{"hidden_size": 32}\n'
    write_text(folder / name, mine)  # the user's: never recorded as written
    key = "vocab_file" if name == "vocab.txt" else "bert_config_file"
    other = write_text(tmp_path / ("other_" + name), "something else\n")
    values = dict(_NEW, **{key: training_record.file_fingerprint([other])})
    before = _tree(folder)
    with pytest.raises(ValueError, match=r"^--existing_checkpoint=restart: --output_dir=\S+ holds "
                                         r"%s: training_files.json does not record training "
                                         r"writing it \(your file, or changed since\); .*move "
                                         r"it away, or use a new --output_dir; nothing was "
                                         r"removed$" % re.escape(name)):
        training_record.decide(str(folder), values, "restart", 2, 4)
    assert _tree(folder) == before and (folder / name).read_text() == mine
    # A copy training made, edited by the user since, is the user's too.
    write_text(folder / name, "copied\n")
    written_files.note(str(folder), [name])
    write_text(folder / name, "copied, then edited\n")
    with pytest.raises(ValueError, match="does not record training writing it"):
        training_record.decide(str(folder), values, "restart", 2, 4)
    assert (folder / name).read_text() == "copied, then edited\n"


@pytest.mark.parametrize("name", ["checkpoint", "model.ckpt-3.index"])
def test_restart_never_removes_a_users_folder_named_like_a_training_file(tmp_path, name):
    folder = tmp_path / "out"
    _folder_of_ours(folder)
    if name == "checkpoint":  # the state file's name: the user's folder instead
        os.remove(folder / name)
        written_files.note(str(folder), [])
    write_text(folder / name / "thesis.tex", "years of work")
    _refused(folder, r"^--existing_checkpoint=restart: --output_dir=\S+: \S+/%s is a folder, "
                     r"which training never makes under that name: a restart never removes a "
                     r"folder it did not make; .*nothing was removed$" % re.escape(name))
    assert (folder / name / "thesis.tex").read_text() == "years of work"


def test_restart_removes_no_file_training_did_not_record(tmp_path):
    """A checkpoint-like file training did not record (another tool's, a copy the user
    put there, an earlier version's folder) refuses the restart: removing it could be
    the user's loss, keeping it would be resumed as the new run's."""
    folder = tmp_path / "out"
    _folder_of_ours(folder)
    write_text(folder / "model.ckpt-9.index", "the user's")
    _refused(folder, r"holds model.ckpt-9.index: training_files.json does not record "
                     r"training writing it")
    os.remove(folder / "model.ckpt-9.index")
    write_text(folder / "eval_history.jsonl", "edited by hand\n")  # changed since
    _refused(folder, r"holds eval_history.jsonl: training_files.json does not record")
    os.remove(folder / written_files.FILE)  # an earlier version's folder: nothing proven
    _refused(folder, r"holds checkpoint, eval_history.jsonl, model.ckpt-2.data-00000-of-00001"
                     r", \.\.\.: it has no training_files.json \(trained by an earlier version\)")


def _bind_mount(source, target):
    """Bind-mounts `source` on `target` (as docker -v does); False when this machine
    cannot (no privilege): the test then takes os.path.ismount's word instead."""
    os.makedirs(target, exist_ok=True)
    import subprocess  # pylint: disable=import-outside-toplevel
    try:
        return subprocess.run(["mount", "--bind", str(source), str(target)],
                              capture_output=True, check=False).returncode == 0
    except OSError:
        return False


def test_restart_refuses_a_mount_point_and_removes_nothing(tmp_path, monkeypatch):
    """OUT/train a bind mount of a shared TensorBoard folder: refused before anything is
    removed (before the fix: every events file there deleted, another run's too, then
    "Device or resource busy"). os.path.ismount misses a bind mount within one file
    system: fileutil reads /proc/self/mountinfo too."""
    folder, shared = tmp_path / "out", tmp_path / "shared"
    _folder_of_ours(folder)
    write_text(shared / "events.out.tfevents.9.other", "another run's events")
    shutil.rmtree(folder / "train")
    mounted = _bind_mount(shared, folder / "train")
    if not mounted:
        real = os.path.ismount
        monkeypatch.setattr(os.path, "ismount",
                            lambda p: str(p) == str(folder / "train") or real(p))
    try:
        _refused(folder, r"^--existing_checkpoint=restart: --output_dir=\S+: \S+/train is a "
                         r"mount point; a restart removes only files training wrote, never what "
                         r"is mounted there .*nothing was removed$", outside=shared)
    finally:
        if mounted:
            import subprocess  # pylint: disable=import-outside-toplevel
            subprocess.run(["umount", str(folder / "train")], check=True)
    assert (shared / "events.out.tfevents.9.other").read_text() == "another run's events"


# ---------------------------------------------------------------------------
# The cases through run_classifier: a vocabulary the user made in the output
# folder; a --keep_best_only folder served
# ---------------------------------------------------------------------------

def test_a_real_restart_keeps_the_vocab_the_user_made_in_the_output_folder(tmp_path):
    """create_vocab.py made OUT/vocab.txt and the first run read it from there; a restart
    with another --vocab_file refuses in one line and removes nothing (before the fix:
    "removed its 6 training files", the user's vocabulary among them)."""
    import run_classifier  # pylint: disable=import-outside-toplevel
    from test_training_record import _files  # pylint: disable=import-outside-toplevel
    values = _files(tmp_path)
    out = tmp_path / "out"
    mine = (tmp_path / "vocab.txt").read_text()
    write_text(out / "vocab.txt", mine)  # made into the output folder
    run_classifier.run(run_classifier.Settings(**dict(values, vocab_file=str(out / "vocab.txt"))))
    other = write_text(tmp_path / "other_vocab.txt", mine + "extra\n")
    before = _tree(out)
    with pytest.raises(ValueError, match=r"^existing_checkpoint=restart: output_dir=\S+ holds "
                                         r"vocab.txt: training_files.json does not record "
                                         r"training writing it .*nothing was removed$"):
        run_classifier.run(run_classifier.Settings(**dict(
            values, vocab_file=other, existing_checkpoint="restart")))
    assert _tree(out) == before and (out / "vocab.txt").read_text() == mine


def test_a_keep_best_only_folder_is_served_from_best_or_refused_naming_it(tmp_path):
    """predict(OUT) / Predictor(OUT) on a finished --keep_best_only folder: one line naming
    OUT/best; predict(OUT/best) answers."""
    import run_classifier  # pylint: disable=import-outside-toplevel
    from test_training_record import _files  # pylint: disable=import-outside-toplevel
    out = tmp_path / "out"
    run_classifier.run(run_classifier.Settings(**dict(
        _files(tmp_path), do_eval=True, eval_every_n_steps=1, best_metric="eval_loss",
        keep_best_only=True)))
    assert not [n for n in os.listdir(out) if n.startswith("model.ckpt")]
    best = checkpoints.best_hint(str(out))
    assert best.startswith(": its model is %s/best/model.ckpt-" % out)
    for call in (lambda: run_classifier.predict(str(out), ["a dog ."]),
                 lambda: run_classifier.Predictor(str(out)).predict(["a dog ."])):
        with pytest.raises(ValueError, match=r"no checkpoint found in directory "
                                             r"(--)?init_checkpoint=%s: its model is .*: use %s$"
                                             % (re.escape(str(out)), re.escape(str(out / "best")))):
            call()
    served = run_classifier.predict(str(out / "best"), ["a dog .", "the cat sat ."])
    assert len(served) == 2
    # The same command rerun (issue 72 item 2): nothing trained, the evaluation is best/'s
    # model's, the number the evaluation during training kept in best.json.
    rerun = run_classifier.run(run_classifier.Settings(**dict(
        _files(tmp_path), do_eval=True, eval_every_n_steps=1, best_metric="eval_loss",
        keep_best_only=True)))
    kept = json.loads((out / "best" / "best.json").read_text())
    assert (rerun.steps_trained, rerun.global_step) == (0, kept["global_step"])
    assert rerun.metrics["eval_loss"] == pytest.approx(kept["value"], abs=1e-6)
    assert not [n for n in os.listdir(out) if n.startswith("model.ckpt")]
