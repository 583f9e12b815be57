"""checkpoints.py and convert_tf1_checkpoint.py: TF1/TF2 loading by name, conversion."""
import dataclasses
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

import convert_tf1_checkpoint
import modeling
import optimization
from bert_tf2 import flags_common
from bert_tf2 import fileutil
from bert_tf2 import heads
from bert_tf2.trainer import checkpoints
from bert_tf2.trainer import restore_plan
from bert_tf2.trainer import training
from conftest import write_text
from test_training import (absl_records, classifier_loss, dataset_fn_of,  # noqa: F401
                           features, make_runner)
from test_training import tiny_config as runner_config


def tiny_config(**overrides):
    values = dict(vocab_size=40, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=16, max_position_embeddings=16, type_vocab_size=2)
    values.update(overrides)
    return modeling.BertConfig(**values)


def built(model):
    model(heads.dummy_features())
    return model


def test_tf1_name_rule():
    assert checkpoints.tf1_name("bert_pretrainer/bert/encoder/layer_0/output/dense/kernel:0") \
        == "bert/encoder/layer_0/output/dense/kernel"
    assert checkpoints.tf1_name("bert/pooler/dense/bias:0") == "bert/pooler/dense/bias"
    assert checkpoints.tf1_name("bert_classifier/classifier/output_weights:0") == "output_weights"
    assert checkpoints.tf1_name("my_model/cls/squad/output_bias:0") == "cls/squad/output_bias"


def write_tf1(tmp_path, model, extra=None):
    tensors = {n: v.numpy() for n, v in checkpoints.tf1_variable_map(model).items()}
    tensors.update(extra or {})
    return checkpoints.write_tf1_checkpoint(tensors, str(tmp_path / "tf1" / "bert_model.ckpt"))


def test_tf1_checkpoint_loads_into_every_task_model(tmp_path):
    cfg = tiny_config()
    source = built(heads.BertPretrainer(cfg))
    prefix = write_tf1(tmp_path, source)
    assert not checkpoints.is_tf2_checkpoint(prefix)
    target = built(heads.BertClassifier(cfg, 3))
    result = checkpoints.load_checkpoint(target, prefix)
    assert sorted(result.not_in_checkpoint) == ["output_bias", "output_weights"]
    assert any(n.startswith("cls/predictions") for n in result.unused)
    np.testing.assert_array_equal(target.bert.embedding_table.numpy(),
                                  source.bert.embedding_table.numpy())
    # A directory works as well as a prefix.
    assert checkpoints.resolve_checkpoint(str(tmp_path / "tf1")) == prefix


def test_shape_mismatch_names_the_variable(tmp_path):
    prefix = write_tf1(tmp_path, built(heads.BertPretrainer(tiny_config())))
    other = built(heads.BertPretrainer(tiny_config(vocab_size=41)))
    with pytest.raises(ValueError, match="bert/embeddings/word_embeddings.*bert_config"):
        checkpoints.load_checkpoint(other, prefix)


def test_missing_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="not found"):
        checkpoints.resolve_checkpoint(str(tmp_path / "nothing" / "model.ckpt"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no checkpoint found"):
        checkpoints.resolve_checkpoint(str(tmp_path / "empty"))


def test_tf2_checkpoint_loads_by_name_into_another_model(tmp_path):
    cfg = tiny_config()
    source = built(heads.BertPretrainer(cfg))
    opt = optimization.create_optimizer(1e-3, 10, 1)
    opt.build(source.trainable_variables)
    path = tf.train.Checkpoint(model=source, optimizer=opt).write(str(tmp_path / "tf2" / "ckpt"))
    assert checkpoints.is_tf2_checkpoint(path)
    target = built(heads.BertSquad(cfg))
    result = checkpoints.load_checkpoint(target, path)
    assert sorted(result.not_in_checkpoint) == ["cls/squad/output_bias", "cls/squad/output_weights"]
    for name, var in checkpoints.tf1_variable_map(target).items():
        if name.startswith("bert/"):
            np.testing.assert_array_equal(var.numpy(),
                                          checkpoints.tf1_variable_map(source)[name].numpy())
    contents = checkpoints.CheckpointContents(path)
    assert "bert/pooler/dense/kernel/adam_m" in contents.keys  # slots are named like TF1's


def test_round_trip_tf1_tf2_tf1_is_lossless_with_optimizer(tmp_path):
    cfg = tiny_config()
    model = built(heads.BertPretrainer(cfg))
    rng = np.random.RandomState(0)
    extra = {"global_step": np.int64(1234)}
    for name, var in checkpoints.tf1_variable_map(model).items():
        extra[name + "/adam_m"] = rng.randn(*var.shape).astype(np.float32)
        extra[name + "/adam_v"] = rng.rand(*var.shape).astype(np.float32)
    tf1 = write_tf1(tmp_path, model, extra)
    tf2, _ = convert_tf1_checkpoint.tf1_to_tf2(tf1, cfg, str(tmp_path / "tf2" / "bert_model.ckpt"),
                                               include_optimizer=True)
    back = str(tmp_path / "back" / "bert_model.ckpt")
    checkpoints.tf2_to_tf1(tf2, back, include_optimizer=True)
    a, b = checkpoints.CheckpointContents(tf1), checkpoints.CheckpointContents(back)
    assert sorted(a.names()) == sorted(b.names())
    for name in a.names():
        np.testing.assert_array_equal(a.get(name), b.get(name), err_msg=name)


@pytest.mark.slow
def test_convert_cli_both_directions(tmp_path):
    cfg = tiny_config()
    cfg_path = tmp_path / "bert_config.json"
    cfg_path.write_text(cfg.to_json_string())
    tf1 = write_tf1(tmp_path, built(heads.BertSquad(cfg)))
    fv = flags_common.parse_flags(convert_tf1_checkpoint.define_flags, [
        "--input_checkpoint=" + tf1, "--bert_config_file=%s" % cfg_path,
        "--output_dir=%s" % (tmp_path / "out2")])
    out = convert_tf1_checkpoint.run(fv).outputs["checkpoint"]
    assert checkpoints.is_tf2_checkpoint(out)
    assert "cls/squad/output_weights" in checkpoints.CheckpointContents(out).keys
    fv = flags_common.parse_flags(convert_tf1_checkpoint.define_flags, [
        "--input_checkpoint=%s" % (tmp_path / "out2"), "--output_dir=%s" % (tmp_path / "out1")])
    out1 = convert_tf1_checkpoint.run(fv).outputs["checkpoint"]
    assert not checkpoints.is_tf2_checkpoint(out1)


def _same_checkpoint(a, b):
    a, b = checkpoints.CheckpointContents(a), checkpoints.CheckpointContents(b)
    assert a.is_tf2 == b.is_tf2 and sorted(a.names()) == sorted(b.names())
    for name in a.names():
        np.testing.assert_array_equal(a.get(name), b.get(name), err_msg=name)


@pytest.mark.slow
@pytest.mark.parametrize("direction", ["tf1_to_tf2", "tf2_to_tf1"])
def test_convert_run_with_settings_twice_in_one_process(tmp_path, direction):
    """run(Settings(...)) needs no flag parsing, runs again in the same process and writes
    what the command line's flags write."""
    cfg = tiny_config()
    cfg_path = tmp_path / "bert_config.json"
    cfg_path.write_text(cfg.to_json_string())
    source = write_tf1(tmp_path, built(heads.BertClassifier(cfg, 3)))
    if direction == "tf2_to_tf1":
        source, _ = convert_tf1_checkpoint.tf1_to_tf2(
            source, cfg, str(tmp_path / "tf2" / "bert_model.ckpt"))
    parsed = convert_tf1_checkpoint.run(flags_common.parse_flags(
        convert_tf1_checkpoint.define_flags,
        ["--input_checkpoint=" + source, "--bert_config_file=%s" % cfg_path,
         "--output_dir=%s" % (tmp_path / "parsed"), "--output_name=sub/model.ckpt"]))
    for name in ("first", "second"):
        out = tmp_path / name
        result = convert_tf1_checkpoint.run(convert_tf1_checkpoint.Settings(
            input_checkpoint=source, bert_config_file=str(cfg_path), output_dir=str(out),
            output_name="sub/model.ckpt"))
        prefix = str(out / "sub" / "model.ckpt")
        assert result.output_dir == str(out)
        assert result.outputs == {"checkpoint": prefix, "checkpoint_index": prefix + ".index",
                                  "checkpoint_state": str(out / "sub" / "checkpoint")}
        assert all(tf.io.gfile.exists(path) for key, path in result.outputs.items()
                   if key != "checkpoint")
        assert checkpoints.is_tf2_checkpoint(prefix) == (direction == "tf1_to_tf2")
        _same_checkpoint(result.outputs["checkpoint"], parsed.outputs["checkpoint"])
        assert (out / "sub" / "checkpoint").read_text() == \
            (tmp_path / "parsed" / "sub" / "checkpoint").read_text()


def test_convert_settings_missing_a_required_field(tmp_path):
    with pytest.raises(ValueError, match="^output_dir is required$"):
        convert_tf1_checkpoint.run(convert_tf1_checkpoint.Settings(
            input_checkpoint=str(tmp_path / "model.ckpt")))
    with pytest.raises(ValueError, match="^input_checkpoint is required$"):
        convert_tf1_checkpoint.run(convert_tf1_checkpoint.Settings(output_dir=str(tmp_path)))
    tf1 = write_tf1(tmp_path, built(heads.BertSquad(tiny_config())))
    with pytest.raises(ValueError, match="^bert_config_file is required"):
        convert_tf1_checkpoint.run(convert_tf1_checkpoint.Settings(
            input_checkpoint=tf1, output_dir=str(tmp_path / "out")))


# ---------------------------------------------------------------------------
# Real checkpoints in ../shared
# ---------------------------------------------------------------------------

def test_real_tf1_checkpoint_loads_with_only_optimizer_state_left(shared_dir):
    d = shared_dir / "data" / "tf1_checkpoints" / "kerasbert_tiny"
    cfg = modeling.BertConfig.from_json_file(str(d / "bert_config.json"))
    model = built(heads.BertPretrainer(cfg))
    result = checkpoints.load_checkpoint(model, str(d / "bert_model.ckpt"))
    assert result.not_in_checkpoint == [] and result.unused == []
    contents = checkpoints.CheckpointContents(str(d / "bert_model.ckpt"))
    left = set(contents.names()) - set(result.loaded)
    assert left and all(n == "global_step" or n.endswith(("/adam_m", "/adam_v")) for n in left)


def test_real_tf1_checkpoint_round_trip_with_slots(shared_dir, tmp_path):
    d = shared_dir / "data" / "tf1_checkpoints" / "kerasbert_tiny"
    cfg = modeling.BertConfig.from_json_file(str(d / "bert_config.json"))
    tf2, _ = convert_tf1_checkpoint.tf1_to_tf2(str(d / "bert_model.ckpt"), cfg,
                                               str(tmp_path / "tf2" / "bert_model.ckpt"),
                                               include_optimizer=True)
    back = str(tmp_path / "back" / "bert_model.ckpt")
    checkpoints.tf2_to_tf1(tf2, back, include_optimizer=True)
    a = checkpoints.CheckpointContents(str(d / "bert_model.ckpt"))
    b = checkpoints.CheckpointContents(back)
    assert sorted(a.names()) == sorted(b.names())
    for name in a.names():
        np.testing.assert_array_equal(a.get(name), b.get(name), err_msg=name)


@pytest.mark.slow
def test_chinese_base_index_maps_onto_a_model_of_its_config(shared_dir):
    d = shared_dir / "data" / "tf1_checkpoints" / "chinese_L-12_H-768_A-12_index_only"
    cfg = modeling.BertConfig.from_json_file(str(d / "bert_config.json"))
    model = heads.BertPretrainer(cfg)
    model(heads.dummy_features())
    ours = {n: v.shape.as_list() for n, v in checkpoints.tf1_variable_map(model).items()}
    theirs = dict(tf.train.list_variables(str(d / "bert_model.ckpt")))
    assert len(theirs) == 206
    assert ours == {n: list(s) for n, s in theirs.items()}


@pytest.mark.slow
def test_convert_never_replaces_a_checkpoint_it_did_not_write(tmp_path):
    cfg = tiny_config()
    cfg_path = tmp_path / "bert_config.json"
    cfg_path.write_text(cfg.to_json_string())
    tf1 = write_tf1(tmp_path, built(heads.BertSquad(cfg)))
    argv = ["--input_checkpoint=" + tf1, "--bert_config_file=%s" % cfg_path]
    # Into the input's own folder: its checkpoint and `checkpoint` file are the user's.
    before = {p.name: p.read_bytes() for p in (tmp_path / "tf1").iterdir()}
    fv = flags_common.parse_flags(convert_tf1_checkpoint.define_flags,
                                  argv + ["--output_dir=%s" % (tmp_path / "tf1")])
    with pytest.raises(ValueError, match=r"^--output_dir=\S*tf1 holds bert_model\.ckpt\.data-"
                                         r"00000-of-00001, bert_model\.ckpt\.index, checkpoint, "
                                         r"which convert_tf1_checkpoint did not write"):
        convert_tf1_checkpoint.run(fv)
    assert {p.name: p.read_bytes() for p in (tmp_path / "tf1").iterdir()} == before
    # Its own earlier output is replaced.
    fv = flags_common.parse_flags(convert_tf1_checkpoint.define_flags,
                                  argv + ["--output_dir=%s" % (tmp_path / "tf2")])
    assert convert_tf1_checkpoint.run(fv) == convert_tf1_checkpoint.run(fv)


# ---------------------------------------------------------------------------
# What a run restores (training.Runner._restore): the named checkpoint is the one
# used; a checkpoint that cannot be read is one line, raised before anything is written
# ---------------------------------------------------------------------------

def _snapshot(folder):
    """{relative path: (size, mtime_ns, bytes)} of every file under `folder` but the lock
    file of a training run (fileutil.LOCK_FILE: no output; a training attempt takes it)."""
    found = {}
    for root, _, files in os.walk(folder):
        for name in files:
            if name == fileutil.LOCK_FILE:
                continue
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, folder)] = (os.path.getsize(path),
                                                        os.stat(path).st_mtime_ns, f.read())
    return found


def _files_of(folder, start):
    return sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.startswith(start))


def _gone(folder):
    for path in _files_of(folder, "model.ckpt-4."):
        os.remove(path)


def _cut(ext):
    def damage(folder):
        path = _files_of(folder, "model.ckpt-4" + ext)[0]
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 2)
    return damage


def _garbage(ext):
    def damage(folder):
        with open(_files_of(folder, "model.ckpt-4" + ext)[0], "wb") as f:
            f.write(b"not a checkpoint " * 8)
    return damage


def _no_state_file(folder):
    os.remove(os.path.join(folder, "checkpoint"))


def _history_only(folder):
    for path in _files_of(folder, "model.ckpt-") + _files_of(folder, "checkpoint"):
        os.remove(path)


_FOLDER = r"--output_dir=\S+/ck"
_DAMAGES = {
    "newest_gone": (_gone, _FOLDER + r": its state file names the checkpoint model\.ckpt-4, "
                    r"whose files are gone; make \S+/checkpoint name model\.ckpt-2 "),
    "index_cut": (_cut(".index"), r"checkpoint \S+/model\.ckpt-4 cannot be read \(not an "
                  r"sstable \(bad magic number\)\): its \.index or \.data file is cut short "
                  r"or corrupt; make \S+/checkpoint name model\.ckpt-2 "),
    "data_cut": (_cut(".data"), r"checkpoint \S+/model\.ckpt-4 cannot be read \(Read less "
                 r"bytes than requested\): .* name model\.ckpt-2 "),
    "index_garbage": (_garbage(".index"), r"checkpoint \S+/model\.ckpt-4 cannot be read \(not "
                      r"an sstable \(bad magic number\)\)"),
    "data_garbage": (_garbage(".data"), r"checkpoint \S+/model\.ckpt-4 cannot be read "),
    "no_state_file": (_no_state_file, _FOLDER + r" holds model\.ckpt-2, model\.ckpt-4 but no "
                      r"readable state file \S+/checkpoint naming its latest"),
    "history_only": (_history_only, _FOLDER + r" holds eval_history\.jsonl but no checkpoint "
                     r"to restore"),
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run's folder: model.ckpt-2 and -4 (the latest), an eval_history.jsonl."""
    folder = tmp_path_factory.mktemp("trained")
    runner = make_runner(folder, "ck", num_train_steps=4, save_checkpoints_steps=2)
    runner.train(dataset_fn_of(features(8), 4), classifier_loss)
    write_text(folder / "ck" / "eval_history.jsonl", '{"global_step": 2}\n{"global_step": 4}\n')
    return str(folder / "ck")


def _runner(output_dir, for_training, init_checkpoint=None):
    config = training.RunConfig(output_dir=output_dir, num_train_steps=8 if for_training else 0,
                                init_checkpoint=init_checkpoint)
    return training.Runner(tf.distribute.get_strategy(),
                           lambda: heads.BertClassifier(runner_config(), 2), config,
                           for_training=for_training)


@pytest.mark.slow
@pytest.mark.parametrize("for_training", [True, False], ids=["train", "predict"])
@pytest.mark.parametrize("damage", sorted(_DAMAGES))
def test_a_checkpoint_that_cannot_be_read_is_one_line_and_nothing_changes(
        trained, tmp_path, damage, for_training):
    folder = str(tmp_path / "ck")
    shutil.copytree(trained, folder)
    harm, message = _DAMAGES[damage]
    harm(folder)
    before = _snapshot(folder)
    with pytest.raises(ValueError, match="^" + message) as error:
        _runner(folder, for_training)
    assert "\n" not in str(error.value)
    assert _snapshot(folder) == before


@pytest.mark.slow
def test_a_damaged_init_checkpoint_is_one_line_naming_the_flag(trained, tmp_path):
    folder = str(tmp_path / "ck")
    shutil.copytree(trained, folder)
    _cut(".data")(folder)
    out = str(tmp_path / "out")
    for for_training in (True, False):
        with pytest.raises(ValueError, match=r"^checkpoint \S+/model\.ckpt-4 cannot be read "
                           r"\(Read less bytes than requested\): .*; point --init_checkpoint "
                           r"at a whole copy of it$"):
            _runner(out, for_training, init_checkpoint=folder)
    _gone(folder)
    with pytest.raises(ValueError, match=r"^--init_checkpoint=\S+/ck: its state file names "
                       r"the checkpoint model\.ckpt-4, whose files are gone"):
        _runner(out, False, init_checkpoint=folder)
    with pytest.raises(ValueError, match=r"^checkpoint --init_checkpoint=\S+/nope not found"):
        _runner(out, False, init_checkpoint=str(tmp_path / "nope"))
    assert os.listdir(out) == []


@pytest.mark.slow
def test_the_named_checkpoint_is_the_one_evaluated(trained, tmp_path, absl_records):
    folder = str(tmp_path / "ck")
    shutil.copytree(trained, folder)
    older = os.path.join(folder, "model.ckpt-2")
    runner = _runner(folder, False, init_checkpoint=older)
    assert runner.global_step == 2
    want = tf.train.load_checkpoint(older)
    key = "model/bert/embeddings/word_embeddings/.ATTRIBUTES/VARIABLE_VALUE"
    embeddings = [v for v in runner.model.variables if "word_embeddings" in v.name][0]
    np.testing.assert_array_equal(embeddings.numpy(), want.get_tensor(key))
    messages = [r.getMessage() for r in absl_records.records]
    assert ("Using --init_checkpoint=%s (%s), not the latest checkpoint of --output_dir %s "
            "(%s/model.ckpt-4)" % (older, older, folder, folder)) in messages
    # The same checkpoint named as a folder (its latest): restored as before, no line.
    absl_records.clear()
    assert _runner(folder, False, init_checkpoint=folder).global_step == 4
    assert not any(m.startswith("Using --init_checkpoint") for m in
                   (r.getMessage() for r in absl_records.records))
    # A pre-trained checkpoint (no task head) beside trained ones: the latest, as the
    # reference did, and a line says why.
    pretrained = str(tmp_path / "pretrained" / "bert_model.ckpt")
    contents = checkpoints.CheckpointContents(older)
    checkpoints.write_tf1_checkpoint({n: contents.get(n) for n in contents.model_names()
                                      if n.startswith("bert/")}, pretrained)
    absl_records.clear()
    assert _runner(folder, False, init_checkpoint=pretrained).global_step == 4
    assert any(m.startswith("--init_checkpoint=%s lacks 2 of the model's variables "
                            "(output_weights...: a pre-trained model without the task head): "
                            "using the latest checkpoint of --output_dir %s" % (pretrained, folder))
               for m in (r.getMessage() for r in absl_records.records))
    # Training resumes output_dir's latest, as TPUEstimator did, and says so.
    assert _runner(folder, True, init_checkpoint=older).global_step == 4
    assert any(m.startswith("Resuming from %s/model.ckpt-4, the latest checkpoint of "
                            "--output_dir %s, not --init_checkpoint=%s" % (folder, folder, older))
               for m in (r.getMessage() for r in absl_records.records))


def test_the_restore_plan_names_one_checkpoint_and_loads_nothing(trained, tmp_path):
    folder = str(tmp_path / "ck")
    shutil.copytree(trained, folder)
    older, latest = os.path.join(folder, "model.ckpt-2"), os.path.join(folder, "model.ckpt-4")
    model = built(heads.BertClassifier(runner_config(), 2))
    weights = [v.numpy() for v in model.variables]
    config = training.RunConfig(output_dir=folder, init_checkpoint=older)
    # A run that does not train: the named checkpoint, whole; a training run: the latest,
    # and what to do if its files turn out damaged (the older one left).
    named = restore_plan.plan(model, config, training=False)
    assert (named.source, named.prefix, named.advice) == (restore_plan.INIT, older, None)
    resumed = restore_plan.plan(model, config, training=True)
    assert (resumed.source, resumed.prefix) == (restore_plan.LATEST, latest)
    assert resumed.advice == ("make %s name model.ckpt-2 (the newest one left; a run that "
                              "does not train can take --init_checkpoint=%s), or use a new "
                              "--output_dir" % (os.path.join(folder, "checkpoint"), older))
    # An empty folder and no --init_checkpoint: nothing to restore, a new record.
    empty = restore_plan.plan(model, training.RunConfig(output_dir=str(tmp_path / "new")),
                              training=True)
    assert (empty.source, empty.prefix, empty.decision.record, empty.decision.restart) == (
        None, None, None, False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        empty.prefix = latest
    # Planning read the checkpoints; it loaded none of them into the model.
    for before, variable in zip(weights, model.variables):
        np.testing.assert_array_equal(before, variable.numpy())
    assert [checkpoints.step_in_name(p) for p in (latest, "x/bert_model.ckpt", "a-b")] == [
        4, 0, 0]


@pytest.mark.slow
def test_evaluating_best_reports_its_step_and_a_gone_latest_writes_nothing(
        trained_classifier_with_best, tmp_path, absl_records):
    import run_classifier
    from trained import classifier_with_best_task
    # The shared folder (best/ at step 2, evaluated by accuracy with a learning rate too
    # small to change it; the latest step 4), copied: this test changes it.
    shutil.copytree(str(trained_classifier_with_best), str(tmp_path / "task"))
    task = classifier_with_best_task(tmp_path / "task")
    out = task["output_dir"]
    assert checkpoints.checkpoint_step(out) == 4
    best = os.path.join(out, "best")
    result = run_classifier.run(run_classifier.Settings(do_eval=True, init_checkpoint=best,
                                                        **task))
    assert result.global_step == result.metrics["global_step"] == 2
    with open(os.path.join(out, "eval_results.txt")) as f:
        assert "global_step = 2\n" in f.read()
    assert ("Using --init_checkpoint=%s (%s/model.ckpt-2), not the latest checkpoint of "
            "--output_dir %s (%s/model.ckpt-4)" % (best, best, out, out)) in [
                r.getMessage() for r in absl_records.records]
    # The state file names model.ckpt-4, whose files are gone: no test_results.tsv from
    # a random model, nothing of the folder changed.
    for path in _files_of(out, "model.ckpt-4."):
        os.remove(path)
    before = _snapshot(out)
    for settings in (dict(do_predict=True), dict(do_train=True, num_train_epochs=1.0)):
        with pytest.raises(ValueError, match=r"^output_dir=\S+: its state file names the "
                           r"checkpoint model\.ckpt-4, whose files are gone; make \S+ name "
                           r"model\.ckpt-2 \(the newest one left"):
            run_classifier.run(run_classifier.Settings(**settings, **task))
        assert _snapshot(out) == before
    assert not os.path.exists(os.path.join(out, "test_results.tsv"))


def _deeper_classifier():
    config = runner_config()
    config.num_hidden_layers = 2
    return heads.BertClassifier(config, 2)


def test_a_run_that_does_not_train_never_serves_a_variable_the_checkpoint_lacks(
        trained, tmp_path):
    folder = str(tmp_path / "ck")
    shutil.copytree(trained, folder)
    latest = os.path.join(folder, "model.ckpt-4")
    contents = checkpoints.CheckpointContents(latest)
    pretrained = str(tmp_path / "pretrained" / "bert_model.ckpt")
    checkpoints.write_tf1_checkpoint({n: contents.get(n) for n in contents.model_names()
                                      if n.startswith("bert/")}, pretrained)
    # A pre-trained checkpoint (no head) and no checkpoint in output_dir: refused, one line.
    with pytest.raises(ValueError, match=r"^checkpoint --init_checkpoint=\S+bert_model\.ckpt "
                       r"lacks 2 of the model's 25 variables \(output_weights, "
                       r"output_bias\): they would be served at their random initial "
                       r"values; [^\n]*$"):
        _runner(str(tmp_path / "out"), False, init_checkpoint=pretrained)
    # Training from it keeps the reference's behaviour: the head starts fresh.
    assert _runner(str(tmp_path / "train"), True, init_checkpoint=pretrained).global_step == 0
    # Another depth: output_dir's latest lacks layer_1; the named checkpoint likewise.
    for init in (None, latest):
        config = training.RunConfig(output_dir=folder, num_train_steps=0, init_checkpoint=init)
        with pytest.raises(ValueError, match=r"model\.ckpt-4\)? lacks 16 of the model's 41 "
                           r"variables \(bert/encoder/layer_1/attention/self/query/kernel, .*, "
                           r"\.\.\.\)"):
            training.Runner(tf.distribute.get_strategy(), _deeper_classifier, config,
                            for_training=False)
    # A checkpoint with another head's variables (a --crf tagger's transitions) is refused.
    tensors = {n: contents.get(n) for n in contents.model_names()}
    tensors["crf/transitions"] = np.zeros([2, 2], np.float32)
    crf = str(tmp_path / "crf" / "model.ckpt")
    checkpoints.write_tf1_checkpoint(tensors, crf)
    with pytest.raises(ValueError, match=r"holds 1 variable\(s\) the model lacks "
                       r"\(crf/transitions: a --crf tagger's transitions: pass --crf\)"):
        _runner(str(tmp_path / "out2"), False, init_checkpoint=crf)
    # The whole model: restored.
    assert _runner(str(tmp_path / "out3"), False, init_checkpoint=latest).global_step == 4


def test_spare_heads_are_left_unused_but_deeper_layers_are_another_model(trained, tmp_path):
    contents = checkpoints.CheckpointContents(os.path.join(trained, "model.ckpt-4"))
    tensors = {n: contents.get(n) for n in contents.model_names()}
    model = heads.BertClassifier(runner_config(), 2)
    model(heads.dummy_features())
    # Another task's head beside the classifier's (a multi-head file): served as before.
    spare = dict(tensors, **{"cls/squad/output_weights": np.zeros([2, 8], np.float32)})
    path = checkpoints.write_tf1_checkpoint(spare, str(tmp_path / "spare" / "model.ckpt"))
    assert checkpoints.check_serves(model, path).path == path
    # A layer the model does not have: another bert_config.
    deeper = dict(tensors, **{"bert/encoder/layer_1/output/dense/bias": np.zeros([8], np.float32)})
    path = checkpoints.write_tf1_checkpoint(deeper, str(tmp_path / "deeper" / "model.ckpt"))
    with pytest.raises(ValueError, match=r"holds 1 variable\(s\) the model lacks "
                       r"\(bert/encoder/layer_1/output/dense/bias: a model with another head "
                       r"or bert_config\)"):
        checkpoints.check_serves(model, path)
