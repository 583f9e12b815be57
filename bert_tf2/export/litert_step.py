"""export_saved_model --litert: its flags, the checks made before any work, the calibration
and agreement examples, and the step that writes the LiteRT models into the export."""
import json
import os

from absl import logging

from bert import tokenization  # ours, whatever tokenization.py a user's folder holds
from bert_tf2 import settings as settings_lib
from bert_tf2.export import head_types
from bert_tf2.export import litert
from bert_tf2.export import litert_data
from bert_tf2.export import litert_predictor

# The flags only --litert reads (refused without it).
FLAGS_OF_LITERT = ("calibration_file", "calibration_examples", "agreement_file",
                   "max_metric_drop", "litert_columns", "keep_int8_over_bound")


def define_flags(fv):
    """--litert and the flags of its calibration and agreement report."""
    settings_lib.define_flag_table(fv, _FLAGS)


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
    ("string", "calibration_file", None,
     "--litert: examples of the model's inputs, in the format its runner reads: a "
     ".tsv/.csv/.jsonl of texts (classifier, encoder; columns: --litert_columns), CoNLL "
     "(tagger), SQuAD JSON (squad), texts with [MASK]s one per line (masked_lm). int8 "
     "calibrates its activation ranges on the first "
     "--calibration_examples; the report compares every variant with the SavedModel on "
     "them."),
    ("integer", "calibration_examples", 100,
     "--litert: how many examples of --calibration_file to use."),
    ("string", "agreement_file", None,
     "--litert: dev examples (same formats as --calibration_file; all of them) the report "
     "compares every variant with the SavedModel on: label agreement, |delta| of "
     "probabilities / vectors, and the task metric both ways when the file has labels."),
    ("float", "max_metric_drop", 1.0,
     "--litert: points (of the task metric, and of label agreement in %) a LiteRT model may "
     "lose against the SavedModel on the --agreement_file examples (else the calibration "
     "ones) before a WARNING; an int8 model losing more is converted again with softmax and "
     "LayerNorm in float, then also the adds / multiplies, then all but the weight matmuls, "
     "then that with the int8 layers whose outputs err most (1/8, then 1/4 of them) in "
     "float too: the first within the bound (else the best) is kept, litert_report.json "
     "names it."),
    ("bool", "keep_int8_over_bound", False,
     "--litert=int8: write a full-int8 model that loses more than --max_metric_drop (after "
     "every fallback) as model_int8.tflite all the same; by default it is written as "
     "model_int8_over_bound.tflite, which LiteRTPredictor(variant='int8') does not load "
     "(litert_report.json and a WARNING say by how much it lost)."),
    ("string", "litert_columns", "text,,label",
     "--litert, classifier / encoder files: the columns (header names or JSON keys) of "
     "text_a, text_b (empty: single texts) and the label, comma-separated; e.g. '#1 "
     "String,#2 String,Quality' for GLUE MRPC."),
)


def check(settings, multilabel, long_texts):
    """--litert's checks before any work: variants, model type, the extra, files."""
    if not settings.litert:
        return
    variants = litert.parse_variants(settings.litert)
    if settings.model_type not in litert_data.MODEL_TYPES:
        raise ValueError("--litert: --model_type=%s is not supported (%s are)"
                         % (settings.model_type, ", ".join(litert_data.MODEL_TYPES)))
    if multilabel or long_texts:
        raise ValueError("--litert: multi-label classifiers and --long_text=head_tail / "
                         "windows are not supported (truncate only)")
    if settings.serving_dtype != "fp32":
        raise ValueError("--litert converts the float32 model (its int8 variants quantize "
                         "it): leave %s out" % settings.flag("serving_dtype"))
    litert_predictor.check_available()
    if "int8" in variants and not settings.calibration_file:
        raise ValueError("--litert=int8 needs --calibration_file (examples to calibrate "
                         "the activation ranges on)")
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
    """--litert: (calibration, agreement) litert_data.Batch of the files (None where not
    given), read before any work so that a bad file costs nothing."""
    if not settings.litert:
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


def export(settings, folder, module, examples):
    """--litert: the LiteRT models and their report in `folder` (the export being
    written); {name: path relative to folder}."""
    calibration, agreement = examples
    written = litert.export(
        folder, module, litert.parse_variants(settings.litert),
        calibration=calibration, agreement=agreement, max_metric_drop=settings.max_metric_drop,
        keep_over_bound=settings.keep_int8_over_bound)
    with open(written["report"], encoding="utf-8") as f:
        report = json.load(f)
    for line in litert.summary_lines(report):
        print(line)
    for warning in report["warnings"]:
        logging.warning("\n%s\nWARNING: %s\n%s", "=" * 78, warning, "=" * 78)
    return {"litert_" + name if name != "report" else "litert_report":
            os.path.relpath(path, folder) for name, path in written.items()}
