"""ONNXPredictor: text in, labels / vectors / tags / answers out, from an export folder's
ONNX model (export_saved_model.py --onnx): onnx/model_<variant>.onnx on ONNX Runtime.

The model is the numeric ids-in graph of every ids-in door (ids_export.ids_function); the
text is tokenized here in Python by our exact tokenizer and each head decodes as
do_predict does (ids_predictor.IdsPredictor, the door LiteRTPredictor shares). Needs the
`[onnx]` extra (onnxruntime), imported only when a predictor or runner is made.

    from bert_tf2.export.onnx_predictor import ONNXPredictor
    predictor = ONNXPredictor("/tmp/sst2_export", variant="fp32")
    predictor.predict(["a great film", "dull"])
"""
import contextlib

from bert_tf2.export import ids_predictor

VARIANTS = ("fp32", "int8")
REPORT_FILE = "onnx_report.json"
FOLDER = "onnx"
# A TF Serving version's model repository (--export_base; ids_export.model_repository):
# <name>-<variant>/config.pbtxt and <name>-<variant>/<version>/model.* (links of the models).
REPOSITORY = FOLDER + "_repository"
# The int8 model beyond its --max_metric_drop bound: written under this name, not
# model_int8.onnx, unless --keep_int8_over_bound.
OVER_BOUND_FILE = FOLDER + "/model_int8_over_bound.onnx"


def model_file(variant):
    """A variant's ONNX model, relative to the export folder."""
    return "%s/model_%s.onnx" % (FOLDER, variant)


def export_files():
    """Every top entry export_saved_model.py --onnx may write in an export folder."""
    return (FOLDER, REPOSITORY, REPORT_FILE, ids_predictor.CRF_FILE)


def check_available(flag="--onnx"):
    """ValueError in one line when the onnxruntime package (the [onnx] extra) is missing."""
    ids_predictor.check_packages(flag, "onnx", ("onnxruntime",))


class ModelRunner(ids_predictor.RunnerPool):
    """An ONNX model on ONNX Runtime's CPU provider, run on id features from any number of
    threads: one InferenceSession, whose run() is thread-safe (no pool to keep).

    Args:
      model: a .onnx path or its bytes.
      num_threads: the session's intra-op threads (None: ONNX Runtime's default, every
        core).
    """

    def __init__(self, model, num_threads=None):
        check_available("ONNX Runtime")
        import onnxruntime  # pylint: disable=import-outside-toplevel
        options = onnxruntime.SessionOptions()
        if num_threads:
            options.intra_op_num_threads = int(num_threads)
        self.session = onnxruntime.InferenceSession(
            model if isinstance(model, bytes) else str(model), options,
            providers=["CPUExecutionProvider"])
        self._names = [o.name for o in self.session.get_outputs()]
        super().__init__(1)
        ids = next(i for i in self.session.get_inputs() if i.name == "input_ids")
        self.seq_length = ids.shape[-1] if isinstance(ids.shape[-1], int) else -1
        self.output_sizes = {o.name: o.shape[-1] if isinstance(o.shape[-1], int) else -1
                             for o in self.session.get_outputs()}

    def _new_runner(self):
        return self.session

    @contextlib.contextmanager
    def _borrowed(self):
        yield self.session  # InferenceSession.run is thread-safe: every call shares it

    def _run(self, runner, chunk):
        return dict(zip(self._names, runner.run(self._names, chunk)))


class ONNXPredictor(ids_predictor.IdsPredictor):
    """An ONNX model of an export folder on ONNX Runtime, called on raw text, from any
    number of threads.

    Args:
      export_dir: the folder export_saved_model.py --onnx wrote (onnx/, assets/,
        assets.extra/export_info.json), or a TF Serving version with <version>.onnx
        beside it (--export_base).
      variant: "fp32" or "int8" (ONNX Runtime's quantizer; onnx_report.json names the
        recipe kept).
      num_threads: the session's intra-op threads (None: ONNX Runtime's default).

    Its contract (predict / batch / answers, their returns and one-line refusals, the
    lifecycle) is LiteRTPredictor's: ids_predictor.IdsPredictor.
    """

    flag = "--onnx"
    variants = VARIANTS
    side_suffix = "." + FOLDER
    report_file = REPORT_FILE
    over_bound_file = OVER_BOUND_FILE
    model_file = staticmethod(model_file)

    def __init__(self, export_dir, variant="fp32", num_threads=None):
        super().__init__(export_dir, variant, num_threads=num_threads)

    def _make_runner(self, path, num_threads=None):
        """A ModelRunner (one ONNX Runtime session) of the model."""
        return ModelRunner(path, num_threads)
