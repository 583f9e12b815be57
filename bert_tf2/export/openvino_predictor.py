"""OpenVINOPredictor: text in, labels / vectors / tags / answers out, from an export folder's
OpenVINO IR (export_saved_model.py --openvino): openvino/model_<variant>.xml + .bin.

The IR is the numeric ids-in graph of every ids-in door (ids_export.ids_function); the
text is tokenized here in Python by our exact tokenizer and each head decodes as
do_predict does (ids_predictor.IdsPredictor, the door LiteRTPredictor shares). Needs the
`[openvino]` extra (openvino), imported only when a predictor or runner is made.

Precision. OpenVINO's CPU plugin runs a float IR in bf16 by itself on a CPU with AMX or
AVX-512 BF16 (its INFERENCE_PRECISION_HINT defaults to bf16 there): answers a little off
the SavedModel's. So the variants here say the precision: fp32 compiles the fp32 IR with
INFERENCE_PRECISION_HINT=f32 (the SavedModel's answers, ~1e-6), bf16 compiles the same IR
with the hint bf16 (no file of its own), int8 compiles NNCF's quantized IR with f32 for
the ops it left in float.

    from bert_tf2.export.openvino_predictor import OpenVINOPredictor
    predictor = OpenVINOPredictor("/tmp/sst2_export", variant="fp32")
    predictor.predict(["a great film", "dull"])
"""

import numpy as np

from bert_tf2.export import ids_predictor

VARIANTS = ("fp32", "bf16", "int8")
REPORT_FILE = "openvino_report.json"
FOLDER = "openvino"
# A TF Serving version's model repository (--export_base; ids_export.model_repository):
# <name>-<variant>/config.pbtxt and <name>-<variant>/<version>/model.* (links of the models).
REPOSITORY = FOLDER + "_repository"
# The CPU plugin's INFERENCE_PRECISION_HINT each variant is compiled with.
PRECISION = {"fp32": "f32", "bf16": "bf16", "int8": "f32"}
# NNCF's int8 IR beyond its --max_metric_drop bound: written under this name, not
# model_int8.xml, unless --keep_int8_over_bound.
OVER_BOUND_FILE = FOLDER + "/model_int8_over_bound.xml"


def model_file(variant):
    """The IR (.xml; its weights: the same name in .bin) of a variant, relative to the
    export folder: bf16 runs the fp32 IR."""
    return "%s/model_%s.xml" % (FOLDER, "fp32" if variant == "bf16" else variant)


def export_files():
    """Every top entry export_saved_model.py --openvino may write in an export folder."""
    return (FOLDER, REPOSITORY, REPORT_FILE, ids_predictor.CRF_FILE)


def check_available(flag="--openvino"):
    """ValueError in one line when the openvino package (the [openvino] extra) is missing."""
    ids_predictor.check_packages(flag, "openvino", ("openvino",))


class ModelRunner(ids_predictor.RunnerPool):
    """An OpenVINO IR compiled for the CPU, run on id features from any number of threads:
    a pool of infer requests of one compiled model (each holds one call's tensors; the
    compiled model and its weights are shared).

    Args:
      path: the .xml (its .bin beside it).
      precision: the CPU plugin's INFERENCE_PRECISION_HINT ("f32", "bf16").
      num_threads: INFERENCE_NUM_THREADS (None: OpenVINO's default, every core).
      requests: the most infer requests, hence calls running at once (None: the compiled
        model's OPTIMAL_NUMBER_OF_INFER_REQUESTS, one under its default latency hint).
    """

    pool_argument = "requests"

    def __init__(self, path, precision="f32", num_threads=None, requests=None):
        check_available("OpenVINO")
        import openvino  # pylint: disable=import-outside-toplevel
        config = {"INFERENCE_PRECISION_HINT": precision}
        if num_threads:
            config["INFERENCE_NUM_THREADS"] = int(num_threads)
        self.compiled = openvino.Core().compile_model(str(path), "CPU", config)
        # What the plugin runs the float ops in (bf16 asked of a CPU without it: f32).
        self.precision = self.compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()
        self._outputs = [(o, o.get_any_name()) for o in self.compiled.outputs]
        if requests is None:
            requests = max(1, int(self.compiled.get_property(
                "OPTIMAL_NUMBER_OF_INFER_REQUESTS")))
        super().__init__(requests)
        ids = next(i for i in self.compiled.inputs if i.get_any_name() == "input_ids")
        length = ids.get_partial_shape()[-1]
        self.seq_length = length.get_length() if length.is_static else -1
        self.output_sizes = {name: (o.get_partial_shape()[-1].get_length()
                                    if o.get_partial_shape()[-1].is_static else -1)
                             for o, name in self._outputs}

    def _new_runner(self):
        return self.compiled.create_infer_request()

    def _run(self, runner, chunk):
        results = runner.infer(chunk)
        # The request's output tensors are reused by its next call: copies.
        return {name: np.array(results[o], copy=True) for o, name in self._outputs}


class OpenVINOPredictor(ids_predictor.IdsPredictor):
    """An OpenVINO IR of an export folder, called on raw text, from any number of threads.

    Args:
      export_dir: the folder export_saved_model.py --openvino wrote (openvino/, assets/,
        assets.extra/export_info.json), or a TF Serving version with <version>.openvino
        beside it (--export_base).
      variant: "fp32" (INFERENCE_PRECISION_HINT=f32: the SavedModel's answers), "bf16"
        (the fp32 IR in bf16, the CPU plugin's own choice on AMX) or "int8" (NNCF's).
      num_threads: OpenVINO's INFERENCE_NUM_THREADS (None: its default).
      requests: the most infer requests, hence predict() calls running the model at once
        (None: OpenVINO's optimal number for the compiled model).

    Its contract (predict / batch / answers, their returns and one-line refusals, the
    lifecycle) is LiteRTPredictor's: ids_predictor.IdsPredictor.
    """

    flag = "--openvino"
    variants = VARIANTS
    side_suffix = "." + FOLDER
    report_file = REPORT_FILE
    over_bound_file = OVER_BOUND_FILE
    model_file = staticmethod(model_file)

    def __init__(self, export_dir, variant="fp32", num_threads=None, requests=None):
        super().__init__(export_dir, variant, num_threads=num_threads, requests=requests)

    def _make_runner(self, path, num_threads=None, requests=None):
        """A ModelRunner of the IR at the variant's precision."""
        return ModelRunner(path, PRECISION[self.variant], num_threads, requests)
