"""LiteRT models of an exported SavedModel: fp32, dynamic-range int8 and full int8, with the
report of how far each model is from the SavedModel (export_saved_model.py --litert): its
outputs, and what it predicts (a --crf tagger: its Viterbi tags, which LiteRT's logits are
decoded into in numpy under the same transitions and tag scheme, litert_predictor.CRF_FILE).

The converted function is the SavedModel's serving_ids signature (input_ids, input_mask,
segment_ids: int32 [batch, max_seq_length]; the batch axis stays dynamic) reduced to its
numeric outputs; tokenization stays in Python (litert_predictor.py). Conversion is
TensorFlow's own tf.lite.TFLiteConverter (no extra package); running the models for the
report needs ai-edge-litert (the [litert] extra).

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
import json
import os
import warnings

from absl import logging
import numpy as np
import tensorflow as tf
# mlir_quantize: the second step of TFLiteConverter's int8 conversion (Int8Models).
from tensorflow.lite.python import convert as lite_convert

from bert_tf2 import fileutil
from bert_tf2 import startup
from bert_tf2.export import head_types
from bert_tf2.export import litert_data
from bert_tf2.export import litert_predictor
from bert_tf2.export import native_steps
from bert_tf2 import heads

VARIANTS = litert_predictor.VARIANTS
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
    names = tuple(dict.fromkeys(p.strip() for p in (text or "").split(",") if p.strip()))
    unknown = [n for n in names if n not in VARIANTS]
    if unknown or not names:
        raise ValueError("--litert=%s: expected a comma-separated list of %s"
                         % (text, ", ".join(VARIANTS)))
    return names


def ids_function(module, model_type, max_seq_length):
    """The concrete function converted: the serving.ServingModule's model on ids
    [batch, max_seq_length], its numeric outputs only."""
    specs = [tf.TensorSpec([None, max_seq_length], tf.int32, name=k)
             for k in litert_data.ID_KEYS]

    def ids(input_ids, input_mask, segment_ids):
        out = module.run_ids(input_ids, input_mask, segment_ids)
        return {name: out[name] for name in head_types.find(model_type).litert_outputs
                if name in out}

    return tf.function(ids, input_signature=specs, autograph=False).get_concrete_function()


def variables_owner(function):
    """The object the converter saves `function` with (into its own temporary SavedModel,
    read back at once): a bare tf.Module holding the variables the function reads. The
    serving.ServingModule itself would have its tokenizer and every signature saved and
    loaded again with it, for nothing (about 2 CPU s of a tiny model's export); the
    converted model is the same, byte for byte (tests/test_export_fixed_cost.py)."""
    owner = tf.Module(name="litert_ids")
    owner.read_variables = list(function.variables)
    return owner


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
# Agreement with the SavedModel
# ---------------------------------------------------------------------------

def compare(model_type, reference, outputs, batch, labels, do_lower_case, crf=None):
    """How far `outputs` are from the SavedModel's `reference` outputs on `batch` (a dict).

    crf: a --crf tagger's (transitions, start_penalty): `outputs` are tagged with Viterbi
    in numpy (as LiteRTPredictor does), the reference holds the SavedModel's own Viterbi
    tags ("tag_ids", TensorFlow's).

    Keys: agreement (share of examples with the same label / word tag / answer text;
    encoder: the mean cosine), max_abs_delta / mean_abs_delta (probabilities; tagger:
    per-position tag probabilities; encoder: vectors; squad: logits), and, when the
    batch has gold labels, metric (accuracy, word accuracy, SQuAD F1; in %) for both.
    """
    head = head_types.find(model_type)
    names = [n for n in head.litert_compared if n in reference]
    ref = [head.litert_values(np.asarray(reference[n], np.float64)) for n in names]
    got = [head.litert_values(np.asarray(outputs[n], np.float64)) for n in names]
    deltas = np.concatenate([np.abs(a - b).ravel() for a, b in zip(ref, got)])
    result = {"examples": head.litert_count(batch),
              "max_abs_delta": float(deltas.max()), "mean_abs_delta": float(deltas.mean())}
    want = litert_data.decode(model_type, reference, batch, labels, do_lower_case)
    found = litert_data.decode(model_type, outputs, batch, labels, do_lower_case, crf=crf)
    result.update(head.litert_agreement(want, found, batch, labels, (ref, got)))
    return result


def drop(result):
    """Points lost against the SavedModel: the larger of the task metric's loss (when
    there are labels) and the disagreement (100 x (1 - agreement))."""
    lost = 100.0 * (1.0 - result["agreement"])
    if "metric" in result:
        lost = max(lost, result["metric_fp32"] - result["metric"])
    return lost


# ---------------------------------------------------------------------------
# The export
# ---------------------------------------------------------------------------

def export(export_dir, module, variants, calibration=None, agreement=None,
           max_metric_drop=1.0, num_threads=None, keep_over_bound=False):
    """Writes model_<variant>.tflite of each variant and litert_report.json into export_dir.

    Args:
      export_dir: a SavedModel folder export_saved_model.py wrote (being written: the
        temporary folder that then replaces --export_dir).
      module: the serving.ServingModule saved there (its outputs, a --crf tagger's
        Viterbi tags included, are the reference every variant is compared with).
      variants: names from VARIANTS.
      calibration, agreement: litert_data.Batch of the --calibration_file (needed for
        int8) and --agreement_file examples, or None.
      max_metric_drop: points a variant may lose against the SavedModel (on the
        agreement examples, else the calibration ones) before the report warns (and int8
        tries FALLBACK_RECIPES).

    Returns:
      {variant: path} of the models written, "report", and "crf" (a --crf tagger's
      litert_predictor.CRF_FILE).
    """
    litert_predictor.check_available()
    info = litert_predictor.read_info(export_dir)
    function = ids_function(module, info["model_type"], info["max_seq_length"])
    owner = variables_owner(function)
    crf = module.crf_parameters()  # a --crf tagger's, else None
    info = dict(info, crf_parameters=crf)
    sets = {name: batch for name, batch in (("calibration", calibration),
                                            ("agreement", agreement)) if batch is not None}
    reference = {name: _saved_model_outputs(function, batch, crf)
                 for name, batch in sets.items()}
    converted = _convert_isolated(export_dir, function, owner, (
        variants, calibration, sets, reference, info, max_metric_drop, num_threads))
    models, report = {}, {"model_type": info["model_type"], "max_metric_drop": max_metric_drop,
                          "reference": "the SavedModel (TensorFlow, float32%s)"
                                       % (", its Viterbi tags" if crf else ""),
                          "variants": {}, "warnings": []}
    for variant, (blob, entry) in zip(variants, converted):
        models[variant] = blob
        warning = _warning(variant, entry, max_metric_drop)
        name = model_name(variant, warning is not None, keep_over_bound)
        report["variants"][variant] = dict(entry, file=name, bytes=len(blob))
        if warning:
            if name != litert_predictor.model_file(variant):
                warning += "; written as %s, not %s (--keep_int8_over_bound: that name)" % (
                    name, litert_predictor.model_file(variant))
            report["warnings"].append(warning)
    return _write(export_dir, models, report, crf)


def _convert_isolated(export_dir, function, owner, args):
    """[(bytes, report entry)] of each variant, made in a child process
    (native_steps.run_isolated: a crash of TFLite's or LiteRT's C++ code is one line there).
    The child gets `function` as the converter would save it itself (`owner` under the
    default signature), in a temporary folder inside the export being written, removed here."""
    scratch = fileutil.temp_name(os.path.join(export_dir, "litert_ids"))
    try:
        tf.saved_model.save(owner, scratch, signatures={"serving_default": function},
                            options=tf.saved_model.SaveOptions(save_debug_info=True))
        return native_steps.run_isolated(convert_variants, (scratch,) + args, export_dir,
                                         "--litert")
    finally:
        fileutil.remove(scratch)


def convert_variants(ids_dir, variants, calibration, sets, reference, info, max_metric_drop,
                     num_threads):
    """[(bytes, report entry)] of each variant (_best_variant) of the function saved in
    `ids_dir` (_convert_isolated): the converter given it loaded converts the same graph,
    the same bytes, as it did given the function and its variables in the exporting process
    (it saves those in its own temporary SavedModel and converts from that)."""
    loaded = fileutil.load_saved_model(ids_dir)
    function = loaded.signatures["serving_default"]
    converted = []
    for variant in variants:
        converted.append(_best_variant(function, loaded, variant, calibration, sets,
                                       reference, info, max_metric_drop, num_threads))
        startup.check_not_stopped()  # a stop a conversion's C++ code swallowed
    return converted


def model_name(variant, over_bound, keep_over_bound=False):
    """The file a variant's model is written as: model_<variant>.tflite, but for a full-int8
    model over its bound (after every fallback), which takes OVER_BOUND_FILE unless
    `keep_over_bound`: a model that failed its own check is not served by the usual name."""
    if variant == "int8" and over_bound and not keep_over_bound:
        return litert_predictor.OVER_BOUND_FILE
    return litert_predictor.model_file(variant)


def _saved_model_outputs(function, batch, crf=None):
    """The SavedModel's outputs on a batch, 32 rows at a time (numpy); a --crf tagger's
    (crf: its (transitions, start_penalty)) also "tag_ids", decoded by TensorFlow's
    Viterbi as the SavedModel's serving_default and run_ner --crf do."""
    parts, size = [], litert_predictor.BATCH_SIZE
    for start in range(0, len(batch.features["input_ids"]), size):
        parts.append(function(**{k: tf.constant(batch.features[k][start:start + size])
                                 for k in litert_data.ID_KEYS}))
    outputs = {n: np.concatenate([p[n].numpy() for p in parts], axis=0) for n in parts[0]}
    if crf is not None:
        features = batch.extra[1]
        weights = tf.constant([f.label_weights for f in features], tf.float32)
        starts = tf.constant([f.starts_sentence for f in features], tf.int32)
        outputs["tag_ids"] = heads.crf_predictions(
            tf.constant(outputs["logits"]), tf.constant(crf[0]), weights,
            None if crf[1] is None else tf.constant(crf[1]), starts).numpy()
    return outputs


def _evaluate(variant, blob, sets, reference, info, num_threads):
    """{set name: compare(...)} of a LiteRT model of `variant` on every example set."""
    with native_steps.step("evaluate", variant):
        run = litert_predictor.ModelRunner(blob, num_threads)
        outputs = {name: run(batch.features) for name, batch in sets.items()}
    return {name: compare(info["model_type"], reference[name], outputs[name], batch,
                          info.get("labels"), info["do_lower_case"], info["crf_parameters"])
            for name, batch in sets.items()}


def _judged(results):
    """{name: result} of the set a variant is judged on: the --agreement_file's when there
    is one (dev examples, all of them), else the calibration examples'."""
    name = "agreement" if "agreement" in results else "calibration"
    return {name: results[name]} if name in results else {}


def _worst_drop(results):
    """The drop of the judged set (0 without examples)."""
    return max([drop(r) for r in _judged(results).values()] or [0.0])


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
    if variant != "int8" or _worst_drop(results) <= max_metric_drop or not sets:
        return blob, entry
    tried = [(_worst_drop(results), blob, entry)]

    def attempt(name, float_ops, float_nodes=()):
        logging.info("LiteRT int8 drops %.2f points: trying %s", tried[-1][0], name)
        other = int8.model(float_ops, float_nodes)
        other_results = _evaluate(variant, other, sets, reference, info, num_threads)
        recipe = {"recipe": name, "float_ops": list(float_ops), "results": other_results}
        if float_nodes:
            recipe["float_nodes"] = list(float_nodes)
        tried.append((_worst_drop(other_results), other, recipe))
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


def _warning(variant, entry, max_metric_drop):
    """The WARNING text of a variant (fp32 too) that drops more than max_metric_drop by
    the metric or by its agreement with the SavedModel (else None)."""
    bad = {name: r for name, r in _judged(entry["results"]).items()
           if drop(r) > max_metric_drop}
    if not bad:
        return None
    parts = []
    for name, r in bad.items():
        part = "%s: agreement with the SavedModel %.2f%%" % (name, 100 * r["agreement"])
        if "metric" in r:
            part += ", %s %.2f -> %.2f" % (r["metric_name"], r["metric_fp32"], r["metric"])
        parts.append(part)
    return ("LiteRT %s (%s) loses more than --max_metric_drop=%g points against the "
            "SavedModel: %s" % (variant, entry["recipe"], max_metric_drop, "; ".join(parts)))


def _write(export_dir, models, report, crf=None):
    """Writes the models, a --crf tagger's CRF_FILE and the report (each whole or absent;
    none left after an error)."""
    written = {}
    try:
        if crf is not None:
            path = os.path.join(export_dir, litert_predictor.CRF_FILE)
            with fileutil.atomic_open(path, "w") as f:
                # float32 -> float64 -> JSON's shortest repr: read back, the same float32.
                f.write(json.dumps({"transitions": crf[0].tolist(), "start_penalty": None
                                    if crf[1] is None else crf[1].tolist()}) + "\n")
            written["crf"] = path
        for variant, blob in models.items():
            path = os.path.join(export_dir, report["variants"][variant]["file"])
            with fileutil.atomic_open(path, "wb") as f:
                f.write(blob)
            written[variant] = path
        path = os.path.join(export_dir, REPORT_FILE)
        with fileutil.atomic_open(path, "w") as f:
            f.write(json.dumps(report, indent=1, sort_keys=True) + "\n")
        written["report"] = path
    except BaseException:
        for path in written.values():
            fileutil.remove(path)
        raise
    return written


def summary_lines(report):
    """The report as lines to print: one per variant and example set, then warnings."""
    lines = []
    for variant, entry in report["variants"].items():
        for name, r in entry["results"].items():
            metric = (" %s %.2f (SavedModel %.2f)"
                      % (r["metric_name"], r["metric"], r["metric_fp32"]) if "metric" in r else "")
            lines.append("LiteRT %-12s %-9s %4d examples: agreement with the SavedModel "
                         "%.4f, max |delta| %.4g, mean |delta| %.4g%s [%s, %d bytes]"
                         % (variant, name, r["examples"], r["agreement"], r["max_abs_delta"],
                            r["mean_abs_delta"], metric, entry["recipe"], entry["bytes"]))
        if not entry["results"]:
            lines.append("LiteRT %-12s %d bytes (no examples to compare: --agreement_file)"
                         % (variant, entry["bytes"]))
    return lines
