"""What every ids-in runtime export shares (export_saved_model.py --litert, --openvino,
--onnx): the numeric graph they convert, the child process their conversions run in, the
agreement report of each variant against the SavedModel, and the writing of their files.

The converted function is the SavedModel's model on ids (input_ids, input_mask,
segment_ids: int32 [batch, max_seq_length]; the batch axis stays dynamic) reduced to the
head's numeric outputs (its litert_outputs): the graph LiteRT, OpenVINO, ONNX Runtime and
Triton take, none of the in-graph tokenizer's string ops. Tokenization stays in Python
(ids_predictor). A runtime's own part is a Runtime (litert.RUNTIME, openvino_export.RUNTIME,
onnx_export.RUNTIME): its flag, variants, files, and the module-level function that
converts and evaluates every variant in the child (native_steps.run_isolated), where a
crash of the runtime's C++ code is one line; the SavedModel's own reference outputs are
computed here, in the exporting process.

The report (<runtime>_report.json) has one shape for every runtime: per variant its
results on each example set (compare: agreement, max / mean |delta|, the task metric
both ways), its recipe and file; a variant that loses more than --max_metric_drop warns,
and an int8 model over the bound is not written under its usual name unless
--keep_int8_over_bound.
"""
import collections
import json
import os
import shutil
import time

import numpy as np
import tensorflow as tf

from bert_tf2 import fileutil
from bert_tf2 import heads
from bert_tf2.export import head_types
from bert_tf2.export import ids_predictor
from bert_tf2.export import litert_data
from bert_tf2.export import native_steps

# A runtime's export (see the module docstring):
#   name: as messages say it ("LiteRT"); flag: "--litert"; variants: its variant names;
#   report_file: its report, relative to the export; check_available(flag): one-line
#   ValueError without its extra; convert_variants: module-level work for the child,
#   convert_variants(ids_dir, variants, calibration, sets, reference, info,
#   max_metric_drop, num_threads) -> [({relative file: bytes}, report entry)], the files
#   under their usual names (model_name); model_name(variant, over_bound): a variant's
#   main file (relative); export_files(): every name the export may write (top entries);
#   triton: the line of a Triton config.pbtxt naming its backend (None: no model
#   repository, LiteRT); repository: the top entry the repository is written in.
Runtime = collections.namedtuple(
    "Runtime", "name flag variants report_file check_available convert_variants "
               "model_name export_files triton repository")
Runtime.__new__.__defaults__ = (None, None)
# Triton's data types of the graph's outputs and inputs.
_TRITON_TYPES = {"float32": "TYPE_FP32", "int32": "TYPE_INT32", "int64": "TYPE_INT64",
                 "bool": "TYPE_BOOL"}
# The most rows a Triton model of the repository batches (its max_batch_size).
TRITON_MAX_BATCH = 64


def parse_variants(text, flag, variants):
    """"fp32,int8" -> ("fp32", "int8"); ValueError naming `flag` for another name."""
    names = tuple(dict.fromkeys(p.strip() for p in (text or "").split(",") if p.strip()))
    unknown = [n for n in names if n not in variants]
    if unknown or not names:
        raise ValueError("%s=%s: expected a comma-separated list of %s"
                         % (flag, text, ", ".join(variants)))
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
    """The object the function is saved with for the converters (into a temporary
    SavedModel): a bare tf.Module holding the variables the function reads. The
    serving.ServingModule itself would have its tokenizer and every signature saved and
    loaded again with it, for nothing (about 2 CPU s of a tiny model's export); the
    converted model is the same, byte for byte (tests/test_export_fixed_cost.py)."""
    owner = tf.Module(name="litert_ids")
    owner.read_variables = list(function.variables)
    return owner


# ---------------------------------------------------------------------------
# Agreement with the SavedModel
# ---------------------------------------------------------------------------

def compare(model_type, reference, outputs, batch, labels, do_lower_case, crf=None):
    """How far `outputs` are from the SavedModel's `reference` outputs on `batch` (a dict).

    crf: a --crf tagger's (transitions, start_penalty): `outputs` are tagged with Viterbi
    in numpy (as the ids-in predictors do), the reference holds the SavedModel's own
    Viterbi tags ("tag_ids", TensorFlow's).

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


def evaluate(run, sets, reference, info):
    """{set name: compare(...)} of a runner `run` (features -> outputs) on every example
    set. The runner's calls belong inside the caller's native_steps.step."""
    outputs = {name: run(batch.features) for name, batch in sets.items()}
    return {name: compare(info["model_type"], reference[name], outputs[name], batch,
                          info.get("labels"), info["do_lower_case"], info["crf_parameters"])
            for name, batch in sets.items()}


def judged(results):
    """{name: result} of the set a variant is judged on: the --agreement_file's when there
    is one (dev examples, all of them), else the calibration examples'."""
    name = "agreement" if "agreement" in results else "calibration"
    return {name: results[name]} if name in results else {}


def worst_drop(results):
    """The drop of the judged set (0 without examples)."""
    return max([drop(r) for r in judged(results).values()] or [0.0])


def timed_evaluate(run, sets, reference, info):
    """(evaluate(...), seconds the runner took on the judged set's features)."""
    name = next(iter(judged({n: None for n in sets})), None)
    seconds = 0.0
    if name is not None:
        start = time.perf_counter()
        run(sets[name].features)
        seconds = time.perf_counter() - start
    return evaluate(run, sets, reference, info), seconds


def choose(tried):
    """The kept one of several recipes of a variant, tried = [(files, entry, seconds)]:
    agreement first (the least drop, to a hundredth of a point), then speed (the least
    seconds on the judged set). Its entry gets "tried": {recipe: {drop, seconds}}."""
    best = min(tried, key=lambda t: (round(worst_drop(t[1]["results"]), 2), t[2]))
    best[1]["tried"] = {entry["recipe"]: {"drop": round(worst_drop(entry["results"]), 4),
                                          "seconds": round(seconds, 4)}
                        for _, entry, seconds in tried}
    return best[0], best[1]


def saved_model_outputs(function, batch, crf=None):
    """The SavedModel's outputs on a batch, 32 rows at a time (numpy); a --crf tagger's
    (crf: its (transitions, start_penalty)) also "tag_ids", decoded by TensorFlow's
    Viterbi as the SavedModel's serving_default and run_ner --crf do."""
    parts, size = [], ids_predictor.BATCH_SIZE
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


# ---------------------------------------------------------------------------
# The export
# ---------------------------------------------------------------------------

def export_runtimes(asked, export_dir, module, calibration=None, agreement=None,
                    max_metric_drop=1.0, num_threads=None, keep_over_bound=False,
                    repository=None):
    """Writes each runtime's variants' model files and its report into export_dir: the
    ids-in function saved once, the SavedModel's reference outputs computed once, and every
    runtime's conversions in one child process (its start, the import of TensorFlow and the
    load of the function, paid once: about 6 s of a tiny model's 3-runtime export).

    Args:
      asked: [(Runtime, variants: names from its variants)], in the order written.
      export_dir: a SavedModel folder export_saved_model.py wrote (being written: the
        temporary folder that then replaces --export_dir).
      module: the serving.ServingModule saved there (its outputs, a --crf tagger's
        Viterbi tags included, are the reference every variant is compared with).
      calibration, agreement: litert_data.Batch of the --calibration_file (needed for
        int8) and --agreement_file examples, or None.
      max_metric_drop: points a variant may lose against the SavedModel (on the
        agreement examples, else the calibration ones) before the report warns.
      repository: (model name, version) of a TF Serving version (--export_base): also a
        model repository OpenVINO Model Server and Triton read (model_repository), for a
        runtime that has one.

    Returns:
      per runtime, in order: {variant: path of its main file} of the models written,
      "report", and "crf" (a --crf tagger's ids_predictor.CRF_FILE).
    """
    for runtime, _ in asked:
        runtime.check_available(runtime.flag)
    info = ids_predictor.read_info(export_dir)
    function = ids_function(module, info["model_type"], info["max_seq_length"])
    owner = variables_owner(function)
    crf = module.crf_parameters()  # a --crf tagger's, else None
    info = dict(info, crf_parameters=crf)
    sets = {name: batch for name, batch in (("calibration", calibration),
                                            ("agreement", agreement)) if batch is not None}
    reference = {name: saved_model_outputs(function, batch, crf)
                 for name, batch in sets.items()}
    converted = convert_isolated(
        export_dir, function, owner, convert_each,
        ([(runtime.convert_variants, variants) for runtime, variants in asked], calibration,
         sets, reference, info, max_metric_drop, num_threads),
        " / ".join(runtime.flag for runtime, _ in asked))
    return [_write_runtime(runtime, variants, results, export_dir, function, info,
                           max_metric_drop, keep_over_bound, repository)
            for (runtime, variants), results in zip(asked, converted)]


def convert_each(ids_dir, works, *args):
    """In the child: [convert_variants(ids_dir, variants, *args) for each (convert_variants,
    variants) of `works`], one runtime after the other."""
    return [work(ids_dir, variants, *args) for work, variants in works]


def _write_runtime(runtime, variants, converted, export_dir, function, info, max_metric_drop,
                   keep_over_bound, repository):
    """One runtime's files, repository links and report written (write), from what its
    convert_variants gave in the child."""
    files, report = {}, {"model_type": info["model_type"], "max_metric_drop": max_metric_drop,
                         "reference": "the SavedModel (TensorFlow, float32%s)"
                                      % (", its Viterbi tags" if info["crf_parameters"] else ""),
                         "variants": {}, "warnings": []}
    main = {}
    for variant, (blobs, entry) in zip(variants, converted):
        warning = warning_text(runtime.name, variant, entry, max_metric_drop)
        usual = runtime.model_name(variant, False)
        name = runtime.model_name(variant, warning is not None and not keep_over_bound)
        renamed = {_renamed(path, usual, name): blob for path, blob in blobs.items()}
        files.update(renamed)
        main[variant] = name
        report["variants"][variant] = dict(entry, file=name,
                                           bytes=sum(len(b) for b in renamed.values()))
        if warning:
            if name != usual:
                warning += "; written as %s, not %s (--keep_int8_over_bound: that name)" % (
                    name, usual)
            report["warnings"].append(warning)
    links = {}
    if repository and runtime.repository:
        links = model_repository(runtime, function, main, files, *repository)
    return write(export_dir, files, main, runtime.report_file, report,
                 info["crf_parameters"], links)


def model_repository(runtime, function, main, files, name, version):
    """{repository file: the model file it is a link of} of every variant with files of its
    own under their usual name (OpenVINO's bf16 is the fp32 IR compiled otherwise; an
    over-bound int8 is not served): <runtime.repository>/<name>-<variant>/<version>/model.*
    and its config.pbtxt (written into `files`), the layout OpenVINO Model Server (a
    model's base path: <name>-<variant>) and Triton (the repository) read."""
    links, seen = {}, set()
    for variant, relative in main.items():
        if relative != runtime.model_name(variant, False) or relative in seen:
            continue
        seen.add(relative)
        model = "%s-%s" % (name, variant)
        stem = os.path.splitext(relative)[0]
        for path in sorted(files):
            if path.startswith(stem + "."):
                links["%s/%s/%s/model%s" % (runtime.repository, model, version,
                                            path[len(stem):])] = path
        files["%s/%s/config.pbtxt" % (runtime.repository, model)] = triton_config(
            runtime, function, model).encode("utf-8")
    return links


def triton_config(runtime, function, model):
    """The config.pbtxt of a Triton model of the ids-in graph `function`: its backend, the
    three int32 [batch, S] inputs, the head's outputs, TRITON_MAX_BATCH rows at most."""
    def tensor(spec_name, spec):
        dims = ", ".join(str(-1 if d is None else d) for d in spec.shape.as_list()[1:])
        return "  { name: \"%s\" data_type: %s dims: [ %s ] }" % (
            spec_name, _TRITON_TYPES[spec.dtype.name], dims)

    inputs = [tensor(s.name, s) for s in function.structured_input_signature[0]]
    outputs = [tensor(n, s) for n, s in sorted(function.structured_outputs.items())]
    return "\n".join(['name: "%s"' % model, runtime.triton,
                      "max_batch_size: %d" % TRITON_MAX_BATCH,
                      "input [\n%s\n]" % ",\n".join(inputs),
                      "output [\n%s\n]" % ",\n".join(outputs), ""])


def _renamed(path, usual, name):
    """`path` (one of a variant's files, named as its main file `usual` is) under the
    variant's name `name` (the over-bound one: the same change of stem)."""
    stem, new_stem = os.path.splitext(usual)[0], os.path.splitext(name)[0]
    return new_stem + path[len(stem):] if path.startswith(stem) else path


def convert_isolated(export_dir, function, owner, work, args, flag):
    """work(ids_dir, *args) run in a child process (native_steps.run_isolated: a crash of a
    runtime's C++ code is one line there), ids_dir being `function` saved as the converters
    would save it themselves (`owner` under the default signature), in a temporary folder
    inside the export being written, removed here."""
    scratch = fileutil.temp_name(os.path.join(export_dir, "litert_ids"))
    try:
        tf.saved_model.save(owner, scratch, signatures={"serving_default": function},
                            options=tf.saved_model.SaveOptions(save_debug_info=True))
        return native_steps.run_isolated(work, (scratch,) + args, export_dir, flag)
    finally:
        fileutil.remove(scratch)


def warning_text(runtime_name, variant, entry, max_metric_drop):
    """The WARNING text of a variant (fp32 too) that drops more than max_metric_drop by
    the metric or by its agreement with the SavedModel (else None)."""
    bad = {name: r for name, r in judged(entry["results"]).items()
           if drop(r) > max_metric_drop}
    if not bad:
        return None
    parts = []
    for name, r in bad.items():
        part = "%s: agreement with the SavedModel %.2f%%" % (name, 100 * r["agreement"])
        if "metric" in r:
            part += ", %s %.2f -> %.2f" % (r["metric_name"], r["metric_fp32"], r["metric"])
        parts.append(part)
    return ("%s %s (%s) loses more than --max_metric_drop=%g points against the "
            "SavedModel: %s" % (runtime_name, variant, entry["recipe"], max_metric_drop,
                                "; ".join(parts)))


def write(export_dir, files, main, report_file, report, crf=None, links=None):
    """Writes the model files ({relative path: bytes}), a --crf tagger's CRF_FILE and the
    report (each whole or absent; none left after an error). `main`: {variant: its main
    file}; `links`: {relative path: the written file it is a hard link of (a copy where
    the file system has none)}. Returns {variant: path, "report": path, "crf": path}."""
    written, made = {}, []
    try:
        if crf is not None:
            path = os.path.join(export_dir, ids_predictor.CRF_FILE)
            with fileutil.atomic_open(path, "w") as f:
                # float32 -> float64 -> JSON's shortest repr: read back, the same float32.
                f.write(json.dumps({"transitions": crf[0].tolist(), "start_penalty": None
                                    if crf[1] is None else crf[1].tolist()}) + "\n")
            made.append(path)
            written["crf"] = path
        for relative, blob in files.items():
            path = os.path.join(export_dir, relative)
            if os.path.dirname(relative):
                os.makedirs(os.path.dirname(path), exist_ok=True)
            with fileutil.atomic_open(path, "wb") as f:
                f.write(blob)
            made.append(path)
        for relative, source in (links or {}).items():
            path = os.path.join(export_dir, relative)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            try:
                os.link(os.path.join(export_dir, source), path)
            except OSError:  # no hard links here: a copy
                shutil.copyfile(os.path.join(export_dir, source), path)
            made.append(path)
        for variant, relative in main.items():
            written[variant] = os.path.join(export_dir, relative)
        path = os.path.join(export_dir, report_file)
        with fileutil.atomic_open(path, "w") as f:
            f.write(json.dumps(report, indent=1, sort_keys=True) + "\n")
        made.append(path)
        written["report"] = path
    except BaseException:
        for path in made:
            fileutil.remove(path)
        raise
    return written


def summary_lines(runtime_name, report):
    """The report as lines to print: one per variant and example set."""
    lines = []
    for variant, entry in report["variants"].items():
        for name, r in entry["results"].items():
            metric = (" %s %.2f (SavedModel %.2f)"
                      % (r["metric_name"], r["metric"], r["metric_fp32"]) if "metric" in r else "")
            lines.append("%s %-12s %-9s %4d examples: agreement with the SavedModel "
                         "%.4f, max |delta| %.4g, mean |delta| %.4g%s [%s, %d bytes]"
                         % (runtime_name, variant, name, r["examples"], r["agreement"],
                            r["max_abs_delta"], r["mean_abs_delta"], metric, entry["recipe"],
                            entry["bytes"]))
        if not entry["results"]:
            lines.append("%s %-12s %d bytes (no examples to compare: --agreement_file)"
                         % (runtime_name, variant, entry["bytes"]))
    return lines
