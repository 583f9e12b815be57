"""OpenVINO IR of an exported SavedModel (export_saved_model.py --openvino): fp32, bf16 and
NNCF's int8, with openvino_report.json, each variant's agreement with the SavedModel.

What is converted is the numeric ids-in graph every ids-in door shares
(ids_export.ids_function, saved for the converters by ids_export.convert_isolated):
openvino.convert_model reads that SavedModel; the IR keeps its input names (input_ids,
input_mask, segment_ids: int32 [batch, S], the batch dynamic) and output names (the
head's litert_outputs). Everything that calls OpenVINO or NNCF runs in the child of
native_steps.run_isolated (convert_variants), each call inside a named step.

Variants (openvino_predictor.PRECISION: the CPU plugin's INFERENCE_PRECISION_HINT):
  fp32  openvino/model_fp32.xml + .bin, compiled with f32 (on a CPU with AMX or AVX-512
        BF16 the plugin would otherwise pick bf16 by itself);
  bf16  the same IR compiled with bf16: no file of its own (a compressed IR stores fp16
        weights, which the plugin widens again: the same bf16 arithmetic, and fp32's file
        is the one OpenVINO Model Server and Triton serve either way); the report records
        the precision the plugin took (f32 on a CPU without bf16);
  int8  openvino/model_int8.xml + .bin: nncf.quantize on the --calibration_file examples,
        model_type=TRANSFORMER (the MatMuls int8; softmax, LayerNorm, GELU float), each
        of NNCF's presets tried (MIXED: asymmetric activations; PERFORMANCE: symmetric,
        the faster kernels), the one kept that agrees best with the SavedModel, then the
        faster (ids_export.choose).
"""
import os
import tempfile

from bert_tf2 import fileutil
from bert_tf2 import startup
from bert_tf2.export import ids_export
from bert_tf2.export import ids_predictor
from bert_tf2.export import litert_data
from bert_tf2.export import native_steps
from bert_tf2.export import openvino_predictor

VARIANTS = openvino_predictor.VARIANTS
# NNCF's presets, as the report names them.
PRESETS = (("NNCF transformer, MIXED preset", "MIXED"),
           ("NNCF transformer, PERFORMANCE preset", "PERFORMANCE"))


def parse_variants(text):
    """"fp32,int8" -> ("fp32", "int8"); ValueError naming --openvino for another name."""
    return ids_export.parse_variants(text, "--openvino", VARIANTS)


def model_name(variant, over_bound):
    """A variant's .xml (relative): openvino_predictor.model_file, OVER_BOUND_FILE for an
    int8 IR over its bound."""
    if variant == "int8" and over_bound:
        return openvino_predictor.OVER_BOUND_FILE
    return openvino_predictor.model_file(variant)


def _ir_files(model, folder, variant):
    """{relative .xml / .bin: bytes} of an openvino.Model saved as an IR (float weights
    kept in float32: no fp16 compression)."""
    import openvino  # pylint: disable=import-outside-toplevel
    relative = model_name(variant, False)
    path = os.path.join(folder, os.path.basename(relative))
    openvino.save_model(model, path, compress_to_fp16=False)
    files = {}
    for ending in (".xml", ".bin"):
        with open(os.path.splitext(path)[0] + ending, "rb") as f:
            files[os.path.splitext(relative)[0] + ending] = f.read()
    return files, path


def _evaluated(variant, path, sets, reference, info, num_threads, recipe):
    """(files-less report entry, seconds) of the IR at `path` compiled for `variant`."""
    with native_steps.step("ov_evaluate", variant):
        run = openvino_predictor.ModelRunner(path, openvino_predictor.PRECISION[variant],
                                             num_threads)
        results, seconds = ids_export.timed_evaluate(run, sets, reference, info)
    return {"recipe": recipe, "results": results,
            "inference_precision": run.precision}, seconds


def convert_variants(ids_dir, variants, calibration, sets, reference, info, max_metric_drop,
                     num_threads):
    """[({relative file: bytes}, report entry)] of each variant of the function saved in
    `ids_dir` (ids_export.convert_isolated), made and evaluated in this (child) process."""
    del max_metric_drop  # every int8 recipe is evaluated; the export judges the bound
    import openvino  # pylint: disable=import-outside-toplevel
    scratch = tempfile.mkdtemp(prefix=".openvino-", dir=os.path.dirname(ids_dir))
    try:
        with native_steps.step("ov_convert", "fp32"):
            model = openvino.convert_model(ids_dir)
            fp32_files, fp32_path = _ir_files(model, scratch, "fp32")
        startup.check_not_stopped()
        converted = []
        for variant in variants:
            if variant in ("fp32", "bf16"):
                entry, _ = _evaluated(variant, fp32_path, sets, reference, info, num_threads,
                                      "the fp32 IR, INFERENCE_PRECISION_HINT=%s"
                                      % openvino_predictor.PRECISION[variant])
                converted.append((dict(fp32_files), entry))
            else:
                converted.append(_int8(model, scratch, calibration, sets, reference, info,
                                       num_threads))
            startup.check_not_stopped()
        return converted
    finally:
        fileutil.remove(scratch)  # the child's own temporary folder


def _int8(model, scratch, calibration, sets, reference, info, num_threads):
    """(files, entry) of NNCF's int8 IR: each of PRESETS, ids_export.choose's pick."""
    import nncf  # pylint: disable=import-outside-toplevel
    features = calibration.features
    examples = [{k: features[k][i:i + 1] for k in litert_data.ID_KEYS}
                for i in range(len(features["input_ids"]))]
    tried = []
    for recipe, preset in PRESETS:
        folder = os.path.join(scratch, preset.lower())
        os.makedirs(folder)
        with native_steps.step("ov_quantize", "int8"):
            quantized = nncf.quantize(
                model, nncf.Dataset(examples), preset=getattr(nncf.QuantizationPreset, preset),
                model_type=nncf.ModelType.TRANSFORMER, subset_size=len(examples))
            files, path = _ir_files(quantized, folder, "int8")
        startup.check_not_stopped()
        entry, seconds = _evaluated("int8", path, sets, reference, info, num_threads, recipe)
        tried.append((files, entry, seconds))
    return ids_export.choose(tried)


def check_available(flag="--openvino"):
    """ValueError in one line when a package the export needs (the [openvino] extra:
    openvino, nncf) is missing."""
    ids_predictor.check_packages(flag, "openvino", ("openvino", "nncf"))


RUNTIME = ids_export.Runtime(
    name="OpenVINO", flag="--openvino", variants=VARIANTS,
    report_file=openvino_predictor.REPORT_FILE,
    check_available=check_available, convert_variants=convert_variants,
    model_name=model_name, export_files=openvino_predictor.export_files,
    triton="backend: \"openvino\"", repository=openvino_predictor.REPOSITORY)
