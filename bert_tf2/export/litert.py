"""LiteRT models of an exported SavedModel: fp32, dynamic-range int8 and full int8, with the
report of how far each model is from the SavedModel (export_saved_model.py --litert): its
outputs, and what it predicts (a --crf tagger: its Viterbi tags, which LiteRT's logits are
decoded into in numpy under the same transitions and tag scheme, litert_predictor.CRF_FILE).

The converted function is the SavedModel's serving_ids signature (input_ids, input_mask,
segment_ids: int32 [batch, max_seq_length]; the batch axis stays dynamic) reduced to its
numeric outputs (ids_export.ids_function, the graph --openvino and --onnx convert too);
tokenization stays in Python (litert_predictor.py). Conversion is TensorFlow's own
tf.lite.TFLiteConverter (no extra package); running the models for the report needs
ai-edge-litert (the [litert] extra). What is LiteRT's own is here (RUNTIME); the driver,
the report and the files are ids_export's.

The conversions, calibration, quantization, the debugger and the report's LiteRT runs are
C++ code able to end the process: each runs inside native_steps.step, all of them in one
child process (convert_variants through native_steps.run_isolated); the SavedModel's own
reference outputs are computed here, in the exporting process.

Variants:
  fp32          the float model as LiteRT runs it (equal to the SavedModel to ~1e-5);
  dynamic_int8  int8 weights, activations quantized on the fly per batch (no calibration);
  int8          int8 weights and activations, their ranges calibrated on the
                --calibration_file examples; ops without int8 kernels stay float. When it
                costs more than --max_metric_drop, the sensitive ops are kept in float
                (FALLBACK_RECIPES), then also the int8 layers whose output errs most
                (Int8Models.sensitive_nodes, SENSITIVE_SHARES of them), and the best
                of the tries is kept, the report says which.
"""
import contextlib
import csv
import io
import warnings

from absl import logging
import tensorflow as tf
# mlir_quantize: the second step of TFLiteConverter's int8 conversion (Int8Models).
from tensorflow.lite.python import convert as lite_convert

from bert_tf2 import fileutil
from bert_tf2 import startup
from bert_tf2.export import ids_export
from bert_tf2.export import litert_data
from bert_tf2.export import litert_predictor
from bert_tf2.export import native_steps

VARIANTS = litert_predictor.VARIANTS
# The pieces every ids-in export shares, by the names they had here (tests, callers).
ids_function = ids_export.ids_function
variables_owner = ids_export.variables_owner
compare = ids_export.compare
drop = ids_export.drop
REPORT_FILE = litert_predictor.REPORT_FILE
# Full int8 tried again with these TFLite ops in float, in order, when it drops too much:
# softmax and LayerNorm's statistics first, then also the adds and multiplies (the
# attention mask's -10000 shares its int8 range with the scores, the residual stream
# has outliers), then everything but the weight matmuls (FULLY_CONNECTED) and the
# embedding lookup.
_NORM_OPS = ("SOFTMAX", "MEAN", "SQUARED_DIFFERENCE", "RSQRT")
FALLBACK_RECIPES = (
    ("float softmax + LayerNorm", _NORM_OPS),
    ("float softmax + LayerNorm + adds / muls", _NORM_OPS + ("ADD", "SUB", "MUL")),
    ("int8 weight matmuls only",
     _NORM_OPS + ("ADD", "SUB", "MUL", "BATCH_MATMUL", "GELU", "TANH", "ONE_HOT")),
)


def parse_variants(text):
    """"fp32,int8" -> ("fp32", "int8"); ValueError naming --litert for another name."""
    return ids_export.parse_variants(text, "--litert", VARIANTS)


def converter_for(function, owner, variant, calibration):
    """A TFLiteConverter set up for `variant` (calibration: a Batch, for int8)."""
    converter = tf.lite.TFLiteConverter.from_concrete_functions([function], owner)
    if variant == "fp32":
        return converter
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if variant == "int8":
        features = calibration.features

        def examples():
            for i in range(len(features["input_ids"])):
                yield {k: features[k][i:i + 1] for k in litert_data.ID_KEYS}

        converter.representative_dataset = examples
        # int8 kernels where LiteRT has them, float for the rest (e.g. GELU's erf).
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8,
                                               tf.lite.OpsSet.TFLITE_BUILTINS]
    return converter


def convert(function, owner, variant, calibration=None):
    """The .tflite bytes of `variant` (int8: every op LiteRT has an int8 kernel for)."""
    with _quiet_interpreter(), native_steps.step("convert", variant):
        blob = converter_for(function, owner, variant, calibration).convert()
    # The converter calls the calibration examples from C++, where a SIGTERM's exception
    # is printed ("SystemError") and lost: the stop is honoured here.
    startup.check_not_stopped()
    return blob


# How many calibration examples Int8Models.sensitive_nodes runs to rank the layers.
SENSITIVITY_EXAMPLES = 16
# The shares of the layers still int8 after FALLBACK_RECIPES' last (the weight matmuls
# and what carries their int8 values) kept float, most sensitive first, tried in turn.
# No more than a quarter: the weight matmuls' outputs err most, so a half of the layers
# (all-MiniLM-L6-v2: 40 of 80) holds all of them, a model of fp32's size and speed.
SENSITIVE_SHARES = (0.125, 0.25)


class Int8Models(object):
    """The full int8 models of `function`, all quantized from a single calibration.

    TFLiteConverter makes an int8 model in two steps: it runs the float model over the
    calibration examples to record the range of every tensor (the long part: minutes for
    BERT-Base), then quantizes with those ranges. Here the converter does the first step
    only (calibrate-only, as TensorFlow's QuantizationDebugger has it do), and model()
    does the second as often as the fallback search asks, with other ops (TFLite op
    names) or nodes (output tensor names) kept float. With nothing kept float it computes
    what the converter's one-step int8 model computes (tests/test_litert.py compares the
    two), so the first try and the fallbacks share the calibration. sensitive_nodes()
    ranks the quantized layers by their error on the first SENSITIVITY_EXAMPLES
    calibration examples.
    """

    def __init__(self, function, owner, calibration):
        converter = converter_for(function, owner, "int8", calibration)
        self._examples = converter.representative_dataset
        # The converter's switch for the first step alone (QuantizationDebugger sets it too).
        converter._experimental_calibrate_only = True  # pylint: disable=protected-access
        with _quiet_interpreter(), native_steps.step("calibrate", "int8"):
            self._calibrated = converter.convert()
        startup.check_not_stopped()  # see convert()

    def _quantized(self, float_ops=(), float_nodes=(), numeric_verify=False):
        """The calibrated model quantized (numeric_verify: with the debugger's NumericVerify
        ops after each quantized layer, comparing it with its float version)."""
        with _quiet_interpreter(), native_steps.step("quantize", "int8"):
            return lite_convert.mlir_quantize(
                self._calibrated, fully_quantize=False, enable_numeric_verify=numeric_verify,
                denylisted_ops=list(float_ops) or None,
                denylisted_nodes=list(float_nodes) or None)

    def model(self, float_ops=(), float_nodes=()):
        """The .tflite bytes with these ops and nodes in float (none: every op LiteRT has
        an int8 kernel for in int8)."""
        return self._quantized(float_ops, float_nodes)

    def sensitive_nodes(self, float_ops=()):
        """The output tensor names of the layers still quantized with these ops in float,
        the largest quantization error first (root-mean-square error over the scale of
        the layer's int8 output: in units of one int8 step)."""
        debug_model = self._quantized(float_ops, numeric_verify=True)
        with _quiet_interpreter(), native_steps.step("sensitivity", "int8"):
            inputs = tf.lite.Interpreter(model_content=debug_model).get_input_details()
        order = [next(k for k in litert_data.ID_KEYS if k in detail["name"])
                 for detail in inputs]

        def first_examples():
            # The debugger feeds a list, in the order of its interpreter's inputs.
            for i, example in enumerate(self._examples()):
                if i >= SENSITIVITY_EXAMPLES:
                    return
                yield [example[k] for k in order]

        with _quiet_interpreter(), native_steps.step("sensitivity", "int8"):
            debugger = tf.lite.experimental.QuantizationDebugger(
                quant_debug_model_content=debug_model, debug_dataset=first_examples)
            debugger.run()
            text = io.StringIO()
            debugger.layer_statistics_dump(text)
        ranked = []
        for row in csv.DictReader(io.StringIO(text.getvalue())):
            scale = float(row["scale"] or 0)
            if scale > 0 and row["tensor_name"]:
                error = float(row["mean_squared_error"]) ** 0.5 / scale
                ranked.append((-error, row["tensor_name"]))
        return [name for _, name in sorted(ranked)]


@contextlib.contextmanager
def _quiet_interpreter():
    """TensorFlow's converter (int8 calibration) and debugger run their own
    tf.lite.Interpreter, which warns that it is deprecated: not the user's concern (their
    models run on ai-edge-litert)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"(?s).*tf\.lite\.Interpreter is deprecated")
        yield


# ---------------------------------------------------------------------------
# The export
# ---------------------------------------------------------------------------

def convert_variants(ids_dir, variants, calibration, sets, reference, info, max_metric_drop,
                     num_threads):
    """[({model file: bytes}, report entry)] of each variant (_best_variant) of the
    function saved in `ids_dir` (ids_export.convert_isolated): the converter given it loaded converts the same graph,
    the same bytes, as it did given the function and its variables in the exporting process
    (it saves those in its own temporary SavedModel and converts from that)."""
    loaded = fileutil.load_saved_model(ids_dir)
    function = loaded.signatures["serving_default"]
    converted = []
    for variant in variants:
        blob, entry = _best_variant(function, loaded, variant, calibration, sets,
                                    reference, info, max_metric_drop, num_threads)
        converted.append(({litert_predictor.model_file(variant): blob}, entry))
        startup.check_not_stopped()  # a stop a conversion's C++ code swallowed
    return converted


def model_name(variant, over_bound, keep_over_bound=False):
    """The file a variant's model is written as: model_<variant>.tflite, but for a full-int8
    model over its bound (after every fallback), which takes OVER_BOUND_FILE unless
    `keep_over_bound`: a model that failed its own check is not served by the usual name."""
    if variant == "int8" and over_bound and not keep_over_bound:
        return litert_predictor.OVER_BOUND_FILE
    return litert_predictor.model_file(variant)


def _evaluate(variant, blob, sets, reference, info, num_threads):
    """{set name: compare(...)} of a LiteRT model of `variant` on every example set."""
    with native_steps.step("evaluate", variant):
        run = litert_predictor.ModelRunner(blob, num_threads)
        return ids_export.evaluate(run, sets, reference, info)


def _best_variant(function, owner, variant, calibration, sets, reference, info,
                  max_metric_drop, num_threads):
    """(bytes, report entry) of a variant; int8: the best of plain and the fallbacks
    (FALLBACK_RECIPES, then the last of them with the most sensitive layers in float),
    all from one calibration (Int8Models)."""
    if variant == "int8":
        int8 = Int8Models(function, owner, calibration)
        blob = int8.model()
    else:
        blob = convert(function, owner, variant, calibration)
    results = _evaluate(variant, blob, sets, reference, info, num_threads)
    entry = {"recipe": "all int8" if variant == "int8" else variant, "results": results}
    if variant != "int8" or ids_export.worst_drop(results) <= max_metric_drop or not sets:
        return blob, entry
    tried = [(ids_export.worst_drop(results), blob, entry)]

    def attempt(name, float_ops, float_nodes=()):
        logging.info("LiteRT int8 drops %.2f points: trying %s", tried[-1][0], name)
        other = int8.model(float_ops, float_nodes)
        other_results = _evaluate(variant, other, sets, reference, info, num_threads)
        recipe = {"recipe": name, "float_ops": list(float_ops), "results": other_results}
        if float_nodes:
            recipe["float_nodes"] = list(float_nodes)
        tried.append((ids_export.worst_drop(other_results), other, recipe))
        return tried[-1][0] <= max_metric_drop

    done = any(attempt(name, float_ops) for name, float_ops in FALLBACK_RECIPES)
    if not done:
        float_ops = FALLBACK_RECIPES[-1][1]
        ranked = int8.sensitive_nodes(float_ops)
        for share in SENSITIVE_SHARES:
            nodes = ranked[:max(1, int(round(share * len(ranked))))]
            if attempt("%s, the %d most sensitive of %d int8 layers in float" % (
                    FALLBACK_RECIPES[-1][0], len(nodes), len(ranked)), float_ops, nodes):
                break
    best = min(tried, key=lambda t: t[0])
    best[2]["tried"] = {t[2]["recipe"]: round(t[0], 4) for t in tried}
    return best[1], best[2]


def summary_lines(report):
    """The report as lines to print: one per variant and example set."""
    return ids_export.summary_lines("LiteRT", report)


RUNTIME = ids_export.Runtime(
    name="LiteRT", flag="--litert", variants=VARIANTS, report_file=REPORT_FILE,
    check_available=litert_predictor.check_available, convert_variants=convert_variants,
    model_name=model_name, export_files=litert_predictor.export_files)
