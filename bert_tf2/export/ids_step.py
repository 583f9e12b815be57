"""export_saved_model --litert, --openvino and --onnx (the ids-in runtime exports): their
flags, the checks made before any work, the calibration and agreement examples they share,
and the step that writes each runtime's models into the export (ids_export.export_runtimes:
every runtime's ids_export.Runtime converted in one child process)."""
import json
import os

from absl import logging

from bert import tokenization  # ours, whatever tokenization.py a user's folder holds
from bert_tf2 import settings as settings_lib
from bert_tf2.export import head_types
from bert_tf2.export import ids_export
from bert_tf2.export import litert
from bert_tf2.export import litert_data
from bert_tf2.export import onnx_export
from bert_tf2.export import openvino_export
from bert_tf2.export import serving_layout

# The ids-in runtimes' export modules (each: RUNTIME, an ids_export.Runtime, and its
# convert_variants) by the setting that asks for them, in the order they are written.
RUNTIMES = (("litert", litert), ("openvino", openvino_export), ("onnx", onnx_export))
RUNTIME_FLAGS = tuple(name for name, _ in RUNTIMES)
# The flags only the ids-in runtime exports read (refused without one of them).
FLAGS_OF_IDS = ("calibration_file", "calibration_examples", "agreement_file",
                "max_metric_drop", "litert_columns", "keep_int8_over_bound")
_ANY = "--litert / --openvino / --onnx"


def define_flags(fv):
    """--litert, --openvino, --onnx and the flags of their calibration and agreement
    report."""
    settings_lib.define_flag_table(fv, _FLAGS)


def given(settings):
    """[(setting name, export module, variants)] of the runtimes the settings ask for."""
    return [(name, module, ids_export.parse_variants(
        getattr(settings, name), module.RUNTIME.flag, module.RUNTIME.variants))
            for name, module in RUNTIMES if getattr(settings, name)]


# (kind, name, default, help), as settings_lib.define_flag_table reads them.
_FLAGS = (
    ("string", "litert", None,
     "Also write LiteRT models into --export_dir, a comma-separated list of fp32 (float), "
     "dynamic_int8 (int8 weights) and int8 (int8 weights and activations, calibrated on "
     "--calibration_file): model_<variant>.tflite, beside assets/vocab.txt and "
     "export_info.json, for --model_type=%s; plus " % ", ".join(head_types.LITERT) +
     "litert_report.json, each model's agreement with the SavedModel (a --crf tagger: also "
     "litert_crf.json, its transitions, for Viterbi's tags as the SavedModel's). Needs the "
     "[litert] extra (ai-edge-litert); serve with "
     "bert_tf2.export.litert_predictor.LiteRTPredictor (README: Serving int8 on LiteRT)."),
    ("string", "openvino", None,
     "Also write OpenVINO IR into --export_dir, a comma-separated list of fp32 "
     "(openvino/model_fp32.xml + .bin, compiled with INFERENCE_PRECISION_HINT=f32: the "
     "SavedModel's answers), bf16 (the same IR compiled with the hint bf16, OpenVINO's own "
     "choice on a CPU with AMX) and int8 (openvino/model_int8.xml: NNCF's post-training "
     "quantization on --calibration_file), for --model_type=%s; plus " % ", ".join(
         head_types.LITERT) +
     "openvino_report.json, each variant's agreement with the SavedModel (a --crf tagger: "
     "also litert_crf.json). Under --export_base: in <version>.openvino beside the version, "
     "with a model repository OpenVINO Model Server and Triton read. Needs the [openvino] "
     "extra (openvino, nncf); serve with "
     "bert_tf2.export.openvino_predictor.OpenVINOPredictor (docs/openvino-onnx.md)."),
    ("string", "onnx", None,
     "Also write ONNX models into --export_dir, a comma-separated list of fp32 "
     "(onnx/model_fp32.onnx, tf2onnx) and int8 (onnx/model_int8.onnx: ONNX Runtime's "
     "quantizer, dynamic or static calibrated on --calibration_file, whichever agrees "
     "best with the SavedModel), for --model_type=%s; plus " % ", ".join(head_types.LITERT) +
     "onnx_report.json (a --crf tagger: also litert_crf.json). Under --export_base: in "
     "<version>.onnx beside the version, with a Triton model repository. Needs the [onnx] "
     "extra (onnxruntime, onnx, tf2onnx); serve with "
     "bert_tf2.export.onnx_predictor.ONNXPredictor (docs/openvino-onnx.md)."),
    ("string", "calibration_file", None,
     _ANY + ": examples of the model's inputs, in the format its runner reads: a "
     ".tsv/.csv/.jsonl of texts (classifier, encoder; columns: --litert_columns), CoNLL "
     "(tagger), SQuAD JSON (squad), texts with [MASK]s one per line (masked_lm). int8 "
     "calibrates its activation ranges on the first "
     "--calibration_examples; the report compares every variant with the SavedModel on "
     "them."),
    ("integer", "calibration_examples", 100,
     _ANY + ": how many examples of --calibration_file to use."),
    ("string", "agreement_file", None,
     _ANY + ": dev examples (same formats as --calibration_file; all of them) the report "
     "compares every variant with the SavedModel on: label agreement, |delta| of "
     "probabilities / vectors, and the task metric both ways when the file has labels."),
    ("float", "max_metric_drop", 1.0,
     _ANY + ": points (of the task metric, and of label agreement in %) a model may "
     "lose against the SavedModel on the --agreement_file examples (else the calibration "
     "ones) before a WARNING; a LiteRT int8 model losing more is converted again with "
     "softmax and LayerNorm in float, then also the adds / multiplies, then all but the "
     "weight matmuls, then that with the int8 layers whose outputs err most (1/8, then 1/4 "
     "of them) in float too: the first within the bound (else the best) is kept, "
     "litert_report.json names it. OpenVINO's and ONNX Runtime's int8 try each of their "
     "recipes and keep the one that agrees best, then the faster."),
    ("bool", "keep_int8_over_bound", False,
     "--litert=int8 / --openvino=int8 / --onnx=int8: write an int8 model that loses more "
     "than --max_metric_drop (after every fallback) as model_int8.tflite (.xml, .onnx) all "
     "the same; by default it is written as model_int8_over_bound.tflite (.xml, .onnx), "
     "which the predictors' variant='int8' does not load (the report and a WARNING say by "
     "how much it lost)."),
    ("string", "litert_columns", "text,,label",
     _ANY + ", classifier / encoder files: the columns (header names or JSON keys) of "
     "text_a, text_b (empty: single texts) and the label, comma-separated; e.g. '#1 "
     "String,#2 String,Quality' for GLUE MRPC."),
)


def check(settings, multilabel, long_texts):
    """The ids-in exports' checks before any work: variants, model type, the extras,
    files (one line each, naming the flag)."""
    asked = given(settings)
    if not asked:
        return
    for _, module, variants in asked:
        runtime = module.RUNTIME
        flag = runtime.flag
        if settings.model_type not in litert_data.MODEL_TYPES:
            raise ValueError("%s: --model_type=%s is not supported (%s are)"
                             % (flag, settings.model_type, ", ".join(litert_data.MODEL_TYPES)))
        if multilabel or long_texts:
            raise ValueError("%s: multi-label classifiers and --long_text=head_tail / "
                             "windows are not supported (truncate only)" % flag)
        if settings.serving_dtype != "fp32":
            raise ValueError("%s converts the float32 model (its int8 variants quantize "
                             "it): leave %s out" % (flag, settings.flag("serving_dtype")))
        runtime.check_available(flag)
        if "int8" in variants and not settings.calibration_file:
            raise ValueError("%s=int8 needs --calibration_file (examples to calibrate "
                             "the activation ranges on)" % flag)
    if settings.calibration_examples < 1:
        raise ValueError("%s must be >= 1" % settings.flag("calibration_examples"))
    parse_columns(settings)
    for flag in ("calibration_file", "agreement_file"):
        if getattr(settings, flag):
            litert_data.check_file("--" + flag, getattr(settings, flag))


def parse_columns(settings):
    """--litert_columns as (text_a, text_b or None, label or None)."""
    parts = [p.strip() for p in settings.litert_columns.split(",")]
    if len(parts) > 3 or not parts[0]:
        raise ValueError("%s: expected text_a[,text_b[,label]] column names"
                         % settings.flag("litert_columns"))
    parts += [""] * (3 - len(parts))
    return tuple(p or None for p in parts)


def read_examples(settings, labels):
    """The ids-in exports' (calibration, agreement) litert_data.Batch of the files (None
    where not given), read before any work so that a bad file costs nothing."""
    if not given(settings):
        return None, None
    tokenizer = tokenization.FullTokenizer(settings.vocab_file, settings.do_lower_case)
    columns = parse_columns(settings)
    own = head_types.find(settings.model_type).litert_file_settings(settings)

    def examples(flag, limit):
        path = getattr(settings, flag)
        if not path:
            return None
        return litert_data.read_file(
            settings.model_type, "--" + flag, path, tokenizer,
            settings.max_seq_length, limit, labels=labels, columns=columns, **own)

    return (examples("calibration_file", settings.calibration_examples),
            examples("agreement_file", None))


def export(settings, folder, module, examples, version=None):
    """Each ids-in runtime asked for: its models and report in `folder` (the export being
    written; `version`: a TF Serving version's number under --export_base, its model
    repositories written too); {output name ("<runtime>_<variant>", "<runtime>_report",
    ...): path relative to folder}. Every runtime converts in one child process
    (ids_export.export_runtimes)."""
    calibration, agreement = examples
    asked = given(settings)
    # Each module's convert_variants as it has it now (the child gets it by its name).
    runtimes = [runtime_module.RUNTIME._replace(
        convert_variants=runtime_module.convert_variants) for _, runtime_module, _ in asked]
    repository = None
    if version is not None and any(runtime.repository for runtime in runtimes):
        repository = (serving_layout.model_name(folder, settings), version)
    written_all = ids_export.export_runtimes(
        [(runtime, variants) for runtime, (_, _, variants) in zip(runtimes, asked)], folder,
        module, calibration, agreement, settings.max_metric_drop,
        keep_over_bound=settings.keep_int8_over_bound, repository=repository)
    outputs = {}
    for (name, _, _), runtime, written in zip(asked, runtimes, written_all):
        with open(written["report"], encoding="utf-8") as f:
            report = json.load(f)
        for line in ids_export.summary_lines(runtime.name, report):
            print(line)
        for warning in report["warnings"]:
            logging.warning("\n%s\nWARNING: %s\n%s", "=" * 78, warning, "=" * 78)
        outputs.update((name + "_" + key, os.path.relpath(path, folder))
                       for key, path in written.items())
    return outputs


def runtime_of(output_name):
    """The setting name ("litert", "openvino", "onnx") of an output name export() gave."""
    return next(name for name in RUNTIME_FLAGS if output_name.startswith(name + "_"))
