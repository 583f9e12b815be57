"""ONNX models of an exported SavedModel (export_saved_model.py --onnx): fp32 and int8 on
ONNX Runtime, with onnx_report.json, each variant's agreement with the SavedModel.

What is converted is the numeric ids-in graph every ids-in door shares
(ids_export.ids_function, saved for the converters by ids_export.convert_isolated):
tf2onnx converts its serving_default signature at OPSET; the model keeps its input names
(input_ids, input_mask, segment_ids: int32 [batch, S], the batch dynamic) and output names
(the head's litert_outputs). Everything that calls tf2onnx, ONNX Runtime or its quantizer
runs in the child of native_steps.run_isolated (convert_variants), each call inside a
named step.

Variants:
  fp32  onnx/model_fp32.onnx;
  int8  onnx/model_int8.onnx, by ONNX Runtime's quantizer (onnxruntime.quantization), its
        MatMul / Gemm weights int8, each of INT8_RECIPES tried: dynamic (activations
        quantized per call, no calibration) and static (QDQ, activation ranges calibrated
        on the --calibration_file examples, weights per channel); the one kept agrees
        best with the SavedModel, then runs faster (ids_export.choose).
"""
import os
import tempfile

from bert_tf2 import fileutil
from bert_tf2 import startup
from bert_tf2.export import ids_export
from bert_tf2.export import ids_predictor
from bert_tf2.export import litert_data
from bert_tf2.export import native_steps
from bert_tf2.export import onnx_graph
from bert_tf2.export import onnx_predictor

VARIANTS = onnx_predictor.VARIANTS
# ONNX opset of the conversion: 17 is read by every ONNX Runtime since 1.13 (Triton's
# onnxruntime backends of 2022 on) and has every op of the graph.
OPSET = 17
INT8_RECIPES = ("dynamic int8 (MatMul / Gemm weights)",
                "static QDQ int8 (MatMul / Gemm, calibrated, weights per channel)")
_QUANTIZED_OPS = ["MatMul", "Gemm"]
# The floating-point constants of at least this many values are given to tf2onnx as graph
# inputs and put back as initializers (_weights_as_inputs): BERT's kernels and embedding
# tables, not the scalars and small vectors its rewriters may need as constants.
WEIGHT_MIN_SIZE = 4096


def parse_variants(text):
    """"fp32,int8" -> ("fp32", "int8"); ValueError naming --onnx for another name."""
    return ids_export.parse_variants(text, "--onnx", VARIANTS)


def model_name(variant, over_bound):
    """A variant's .onnx (relative): onnx_predictor.model_file, OVER_BOUND_FILE for an int8
    model over its bound."""
    if variant == "int8" and over_bound:
        return onnx_predictor.OVER_BOUND_FILE
    return onnx_predictor.model_file(variant)


def _evaluated(variant, blob, sets, reference, info, num_threads, recipe):
    """(report entry, seconds) of the ONNX model `blob` on ONNX Runtime."""
    with native_steps.step("onnx_evaluate", variant):
        run = onnx_predictor.ModelRunner(blob, num_threads)
        results, seconds = ids_export.timed_evaluate(run, sets, reference, info)
    return {"recipe": recipe, "results": results, "opset": OPSET}, seconds


def _convert(ids_dir):
    """The ONNX bytes of the serving_default signature saved in ids_dir.

    tf2onnx is given the signature's graph with its variables frozen into constants here
    (_frozen_graph_def): given the function itself, it left a --crf tagger's captured
    tensor as a fourth graph input ONNX Runtime then asked for. Its large weights are then
    made graph inputs (_weights_as_inputs) for tf2onnx, and the ONNX graph's initializers
    after it: tf2onnx's grappler passes and graph copies held a BERT-Base's 435 MB of
    constants many times over (the child's RSS past 20 GB, killed by the OOM killer); a
    BERT-Base export's peak is now 3.8 GB. The frozen graph's tensor names ("input_ids:0",
    "Identity_1:0") are renamed to the signature's (input_ids, ..., the head's output
    names), its LayerNorms made LayerNormalization nodes (onnx_graph), checked on one
    row."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    import tf2onnx  # pylint: disable=import-outside-toplevel
    loaded = fileutil.load_saved_model(ids_dir)
    signature = loaded.signatures["serving_default"]
    graph_def = _frozen_graph_def(signature)
    specs = signature.structured_input_signature[1]
    inputs = [n.name + ":0" for n in graph_def.node if n.op == "Placeholder"]
    names = {name: name.split(":")[0] for name in inputs}
    if sorted(names.values()) != sorted(litert_data.ID_KEYS):
        raise ValueError("--onnx: the ids graph's inputs are %s, not %s"
                         % (sorted(names.values()), ", ".join(litert_data.ID_KEYS)))
    # A dict's outputs are flattened in the order of its sorted keys.
    outputs = sorted(signature.structured_outputs)
    output_names = [t.name for t in signature.outputs]
    names.update(zip(output_names, outputs))
    weights = _weights_as_inputs(graph_def)
    with native_steps.step("onnx_convert", "fp32"):
        proto, _ = tf2onnx.convert.from_graph_def(
            graph_def, input_names=inputs + sorted(weights), output_names=output_names,
            opset=OPSET)
    del graph_def
    _inputs_as_initializers(proto.graph, weights)
    _rename(proto.graph, names)
    onnx_graph.fuse_layer_norms(proto.graph)  # ONNX Runtime's own LayerNorm kernel
    blob = proto.SerializeToString()
    row = {k: np.ones([1, specs[k].shape[-1]], np.int32) for k in litert_data.ID_KEYS}
    want = signature(**{k: tf.constant(v) for k, v in row.items()})
    with native_steps.step("onnx_evaluate", "fp32"):
        got = onnx_predictor.ModelRunner(blob)(row)
    for name in outputs:
        if not np.allclose(got[name], want[name].numpy(), atol=1e-4):
            raise ValueError("--onnx: the converted model's %r is not the SavedModel's "
                             "(tf2onnx)" % name)
    return blob


def _frozen_graph_def(function):
    """The GraphDef of `function` (a ConcreteFunction) with its functions inlined and its
    captured variables and tensors made constants.

    convert_variables_to_constants_v2 makes the same graph then a ConcreteFunction of it,
    whose import held the weights some five times more (BERT-Base: a peak of 5.2 GB
    against 2.0 GB here); its two steps before that are called here, the public function
    kept for a TensorFlow without them."""
    from tensorflow.python.framework import convert_to_constants  # pylint: disable=import-outside-toplevel
    data_class = getattr(convert_to_constants, "_FunctionConverterDataInEager", None)
    replace = getattr(convert_to_constants, "_replace_variables_by_constants", None)
    if data_class is None or replace is None:
        return convert_to_constants.convert_variables_to_constants_v2(
            function).graph.as_graph_def()
    data = data_class(func=function, lower_control_flow=True, aggressive_inlining=False)
    return replace(converter_data=data)[0]


def _weights_as_inputs(graph_def):
    """{tensor name: array} of the large floating-point constants of graph_def, each turned
    into a placeholder of its dtype and shape here (graph_def is changed in place)."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    weights = {}
    for node in graph_def.node:
        if node.op != "Const":
            continue
        tensor = node.attr["value"].tensor
        dtype = tf.dtypes.as_dtype(tensor.dtype)
        size = int(np.prod([d.size for d in tensor.tensor_shape.dim]))
        if not dtype.is_floating or size < WEIGHT_MIN_SIZE:
            continue
        weights[node.name + ":0"] = tf.make_ndarray(tensor)
        node.op = "Placeholder"
        node.attr["shape"].shape.CopyFrom(tensor.tensor_shape)
        del node.attr["value"]
    return weights


def _inputs_as_initializers(graph, weights):
    """Makes the inputs of an ONNX graph named in weights ({name: array}) its initializers
    of those values, those no node reads dropped (as tf2onnx drops an unused constant;
    ONNX Runtime warns of each at every load); weights is emptied, each array freed once
    copied."""
    from onnx import numpy_helper  # pylint: disable=import-outside-toplevel
    read = onnx_graph.read_names(graph)
    made = [value.name for value in graph.input if value.name in weights and value.name in read]
    kept = [value for value in graph.input if value.name not in weights]
    del graph.input[:]
    graph.input.extend(kept)
    for name in made:
        graph.initializer.append(numpy_helper.from_array(weights.pop(name), name))
    weights.clear()


def _rename(graph, names):
    """Renames the tensors of an ONNX graph ({old: new}): its inputs, outputs and every
    node's."""
    for value in list(graph.input) + list(graph.output):
        value.name = names.get(value.name, value.name)
    for node in graph.node:
        for i, name in enumerate(node.input):
            node.input[i] = names.get(name, name)
        for i, name in enumerate(node.output):
            node.output[i] = names.get(name, name)


class _Calibration(object):
    """onnxruntime.quantization's CalibrationDataReader of the calibration examples (one
    example a call, as the converter's int8 calibration reads them)."""

    def __init__(self, features):
        self._rows = iter([{k: features[k][i:i + 1] for k in litert_data.ID_KEYS}
                           for i in range(len(features["input_ids"]))])

    def get_next(self):
        return next(self._rows, None)


def _quantized(fp32_path, folder, recipe, calibration):
    """The bytes of the fp32 model at `fp32_path` quantized by `recipe` (INT8_RECIPES)."""
    from onnxruntime import quantization  # pylint: disable=import-outside-toplevel
    out = os.path.join(folder, "model_int8_%d.onnx" % INT8_RECIPES.index(recipe))
    with native_steps.step("onnx_quantize", "int8"):
        if recipe == INT8_RECIPES[0]:
            quantization.quantize_dynamic(fp32_path, out, op_types_to_quantize=_QUANTIZED_OPS,
                                          weight_type=quantization.QuantType.QInt8)
        else:
            quantization.quantize_static(
                fp32_path, out, _Calibration(calibration.features),
                quant_format=quantization.QuantFormat.QDQ, op_types_to_quantize=_QUANTIZED_OPS,
                per_channel=True, activation_type=quantization.QuantType.QUInt8,
                weight_type=quantization.QuantType.QInt8)
    with open(out, "rb") as f:
        return f.read()


def convert_variants(ids_dir, variants, calibration, sets, reference, info, max_metric_drop,
                     num_threads):
    """[({relative file: bytes}, report entry)] of each variant of the function saved in
    `ids_dir` (ids_export.convert_isolated), made and evaluated in this (child) process."""
    del max_metric_drop  # every int8 recipe is evaluated; the export judges the bound
    scratch = tempfile.mkdtemp(prefix=".onnx-", dir=os.path.dirname(ids_dir))
    try:
        fp32 = _convert(ids_dir)
        startup.check_not_stopped()
        fp32_path = os.path.join(scratch, "model_fp32.onnx")
        with open(fp32_path, "wb") as f:
            f.write(fp32)
        converted = []
        for variant in variants:
            if variant == "fp32":
                entry, _ = _evaluated("fp32", fp32, sets, reference, info, num_threads,
                                      "tf2onnx, opset %d" % OPSET)
                converted.append(({model_name("fp32", False): fp32}, entry))
                continue
            tried = []
            for recipe in INT8_RECIPES:
                blob = _quantized(fp32_path, scratch, recipe, calibration)
                startup.check_not_stopped()
                entry, seconds = _evaluated("int8", blob, sets, reference, info, num_threads,
                                            recipe)
                tried.append(({model_name("int8", False): blob}, entry, seconds))
            converted.append(ids_export.choose(tried))
        return converted
    finally:
        fileutil.remove(scratch)  # the child's own temporary folder


def check_available(flag="--onnx"):
    """ValueError in one line when a package the export needs (the [onnx] extra:
    onnxruntime, onnx, tf2onnx) is missing."""
    ids_predictor.check_packages(flag, "onnx", ("onnxruntime", "onnx", "tf2onnx"))


RUNTIME = ids_export.Runtime(
    name="ONNX Runtime", flag="--onnx", variants=VARIANTS,
    report_file=onnx_predictor.REPORT_FILE,
    check_available=check_available, convert_variants=convert_variants,
    model_name=model_name, export_files=onnx_predictor.export_files,
    triton="platform: \"onnxruntime_onnx\"", repository=onnx_predictor.REPOSITORY)
