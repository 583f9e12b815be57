"""onnx_graph.fuse_layer_norms (--onnx): tf2onnx's spelling of the reference's LayerNorm
becomes one LayerNormalization node, with the same values within float32 rounding; any
other graph is left as it was. The parity matrix holds every head's ONNX door to
do_predict's answers; here the rewrite itself, on graphs made by hand, and on the trained
classifier's export."""
import json
import os

import numpy as np
import pytest

from conftest import FP32_ATOL, REQUIRE_DOORS

if not REQUIRE_DOORS:
    pytest.importorskip("onnx", reason="the [onnx] extra is missing")
    pytest.importorskip("onnxruntime", reason="the [onnx] extra is missing")

from bert_tf2.export import onnx_graph  # noqa: E402  pylint: disable=wrong-import-position

_HIDDEN = 8


def _layer_norm_graph(centred=("x", "mean"), mean_op="ReduceMean"):
    """x [rows, 8] -> y: the eleven nodes tf2onnx writes for a LayerNorm (x * s + (beta -
    mean * s), s = gamma / sqrt(var + 1e-12)), then a Relu reading y; `centred`: the Sub's
    inputs (the real pattern's x - mean, or another)."""
    from onnx import helper, numpy_helper, TensorProto  # pylint: disable=import-outside-toplevel
    rng = np.random.RandomState(0)
    reduce = dict(axes=[1], keepdims=1) if mean_op == "ReduceMean" else {}
    rank = ["rows", _HIDDEN] if mean_op == "ReduceMean" else [1, "rows", _HIDDEN]
    nodes = [
        helper.make_node(mean_op, ["x"], ["mean"], **reduce),
        helper.make_node("Sub", list(centred), ["d"]),
        helper.make_node("Mul", ["d", "d"], ["sq"]),
        helper.make_node(mean_op, ["sq"], ["var"], **reduce),
        helper.make_node("Add", ["var", "eps"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["sd"]),
        helper.make_node("Reciprocal", ["sd"], ["r"]),
        helper.make_node("Mul", ["r", "gamma"], ["s"]),
        helper.make_node("Mul", ["mean", "s"], ["ms"]),
        helper.make_node("Sub", ["beta", "ms"], ["b"]),
        helper.make_node("Mul", ["x", "s"], ["xs"]),
        helper.make_node("Add", ["xs", "b"], ["y"]),
        helper.make_node("Relu", ["y"], ["out"]),
    ]
    initializers = [
        numpy_helper.from_array(np.array(1e-12, np.float32), "eps"),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, _HIDDEN).astype(np.float32), "gamma"),
        numpy_helper.from_array(rng.uniform(-0.5, 0.5, _HIDDEN).astype(np.float32), "beta"),
    ]
    graph = helper.make_graph(
        nodes, "ln", [helper.make_tensor_value_info("x", TensorProto.FLOAT, rank)],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, rank)], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run(model, x):
    import onnxruntime  # pylint: disable=import-outside-toplevel
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


@pytest.mark.parametrize("mean_op", ["ReduceMean", "GlobalAveragePool"])
def test_a_layer_norm_becomes_one_node_with_the_same_values(mean_op):
    import onnx  # pylint: disable=import-outside-toplevel
    model = _layer_norm_graph(mean_op=mean_op)
    x = np.random.RandomState(1).normal(0.3, 2.0, (5, _HIDDEN)).astype(np.float32)
    if mean_op == "GlobalAveragePool":
        x = x[None]
    want = _run(model, x)
    assert onnx_graph.fuse_layer_norms(model.graph) == 1
    onnx.checker.check_model(model)
    assert [n.op_type for n in model.graph.node] == ["LayerNormalization", "Relu"]
    assert [i.name for i in model.graph.initializer] == ["gamma", "beta"]  # eps unread
    norm = model.graph.node[0]
    assert list(norm.input) == ["x", "gamma", "beta"] and list(norm.output) == ["y"]
    got = _run(model, x)
    np.testing.assert_allclose(got, want, atol=FP32_ATOL)
    gamma = onnx.numpy_helper.to_array(model.graph.initializer[0])
    beta = onnx.numpy_helper.to_array(model.graph.initializer[1])
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    np.testing.assert_allclose(got, np.maximum((x - mean) / np.sqrt(var + 1e-12) * gamma + beta,
                                               0), atol=FP32_ATOL)


def test_another_graph_is_left_as_it_was():
    model = _layer_norm_graph(centred=("mean", "x"))  # mean - x: not a LayerNorm
    before = model.SerializeToString()
    assert onnx_graph.fuse_layer_norms(model.graph) == 0
    assert model.SerializeToString() == before


@pytest.mark.slow
def test_the_classifiers_onnx_model_has_one_node_per_layer_norm(trained_heads):
    import onnx  # pylint: disable=import-outside-toplevel
    import parity_helpers as ph  # pylint: disable=import-outside-toplevel
    from bert_tf2.export import onnx_predictor  # pylint: disable=import-outside-toplevel
    if ph.ids_door_missing("onnx"):
        pytest.skip(ph.ids_door_missing("onnx"))
    head = trained_heads.exported("classifier")
    model = onnx.load(os.path.join(head.export_dir, onnx_predictor.model_file("fp32")))
    with open(trained_heads.files()["bert_config_file"], encoding="utf-8") as f:
        layers = json.load(f)["num_hidden_layers"]
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("LayerNormalization") == 2 * layers + 1, ops  # embeddings', 2 a layer
    assert "Reciprocal" not in ops and "Sqrt" not in ops, ops
