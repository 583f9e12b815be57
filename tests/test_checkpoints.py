"""checkpoints.py and convert_tf1_checkpoint.py: TF1/TF2 loading by name, conversion."""
import numpy as np
import pytest
import tensorflow as tf

import convert_tf1_checkpoint
import modeling
import optimization
from bert_tf2 import flags_common
from bert_tf2.trainer import checkpoints
from bert_tf2.trainer import heads


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
    with pytest.raises(ValueError, match="^--output_dir is required$"):
        convert_tf1_checkpoint.run(convert_tf1_checkpoint.Settings(
            input_checkpoint=str(tmp_path / "model.ckpt")))
    with pytest.raises(ValueError, match="^--input_checkpoint is required$"):
        convert_tf1_checkpoint.run(convert_tf1_checkpoint.Settings(output_dir=str(tmp_path)))
    tf1 = write_tf1(tmp_path, built(heads.BertSquad(tiny_config())))
    with pytest.raises(ValueError, match="^--bert_config_file is required"):
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


def test_chinese_base_index_maps_onto_a_model_of_its_config(shared_dir):
    d = shared_dir / "data" / "tf1_checkpoints" / "chinese_L-12_H-768_A-12_index_only"
    cfg = modeling.BertConfig.from_json_file(str(d / "bert_config.json"))
    model = heads.BertPretrainer(cfg)
    model(heads.dummy_features())
    ours = {n: v.shape.as_list() for n, v in checkpoints.tf1_variable_map(model).items()}
    theirs = dict(tf.train.list_variables(str(d / "bert_model.ckpt")))
    assert len(theirs) == 206
    assert ours == {n: list(s) for n, s in theirs.items()}


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
