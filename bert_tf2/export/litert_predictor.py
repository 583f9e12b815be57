"""LiteRTPredictor: text in, labels / vectors / tags / answers out, from an export folder's
model_<variant>.tflite (export_saved_model.py --litert).

LiteRT cannot run the tokenizer (tensorflow-text's and our in-graph tokenizer use string
ops LiteRT has no kernels for), so the text is tokenized here in Python by
tokenization.FullTokenizer and packed by the runners' own featurization (litert_data), the
ids the SavedModel's in-graph tokenizer gives. Needs the `[litert]` extra (ai-edge-litert),
imported only when a predictor or runner is made.

    from bert_tf2.export.litert_predictor import LiteRTPredictor
    predictor = LiteRTPredictor("/tmp/sst2_export", variant="dynamic_int8")
    predictor.predict(["a great film", "dull"])
    # -> [{"label": "1", "probabilities": {"0": 0.03, "1": 0.97}}, ...]
"""

from bert_tf2.export import ids_predictor

VARIANTS = ("fp32", "dynamic_int8", "int8")
REPORT_FILE = "litert_report.json"
# What every ids-in door shares (ids_predictor), by the names LiteRT's door gave them first.
INFO_FILE = ids_predictor.INFO_FILE
VOCAB_FILE = ids_predictor.VOCAB_FILE
BATCH_SIZE = ids_predictor.BATCH_SIZE
CRF_FILE = ids_predictor.CRF_FILE
read_info = ids_predictor.read_info
squad_rules = ids_predictor.squad_rules
asset_tokenizer = ids_predictor.asset_tokenizer
read_crf = ids_predictor.read_crf
default_interpreters = ids_predictor.default_interpreters
# A full-int8 model beyond its own --max_metric_drop bound (after every fallback): written
# under this name, not model_int8.tflite, unless --keep_int8_over_bound.
OVER_BOUND_FILE = "model_int8_over_bound.tflite"


def model_file(variant):
    """The file name of a variant's LiteRT model in the export folder."""
    return "model_%s.tflite" % variant


def export_files():
    """Every file export_saved_model.py --litert may write in an export folder."""
    return tuple(model_file(v) for v in VARIANTS) + (REPORT_FILE, CRF_FILE, OVER_BOUND_FILE)


def check_available(flag="--litert"):
    """ValueError in one line when the ai-edge-litert package (the [litert] extra) is
    missing."""
    ids_predictor.check_packages(flag, "litert", ("ai_edge_litert",))


class ModelRunner(ids_predictor.RunnerPool):
    """One LiteRT model (a file or bytes) run on id features, BATCH_SIZE rows at a time,
    from any number of threads.

    A LiteRT interpreter holds one call's tensors (each call resizes them to its batch),
    so two threads must never share one: each call borrows an interpreter of a pool for
    its whole run, made when no idle one is left, at most `interpreters` of them (a call
    beyond waits for one to come back). The first is made here (its errors at once).
    LiteRT releases the GIL while it runs a model, so calls on different interpreters run
    in parallel; each interpreter holds its own copy of the packed weights (MiniLM: about
    100 MB fp32, 45 MB dynamic_int8), hence a bound rather than one per thread.

    Args:
      model: a .tflite path or its bytes.
      num_threads: CPU threads of each interpreter (None: LiteRT's default, one).
      interpreters: the most interpreters, hence calls running at once (None:
        default_interpreters(num_threads); 1: the calls one at a time).
    """

    def __init__(self, model, num_threads=None, interpreters=None):
        check_available("LiteRT")
        self._model = model
        self._num_threads = num_threads
        super().__init__(default_interpreters(num_threads) if interpreters is None
                         else interpreters)
        first = self._idle[0]
        details = first.get_input_details()
        # The length the model was converted at (the ids' last axis).
        self.seq_length = int(details["input_ids"]["shape_signature"][-1])
        self.output_sizes = {name: int(d["shape_signature"][-1])
                             for name, d in first.get_output_details().items()}

    def _new_runner(self):
        """A signature runner of a new interpreter of the model."""
        from ai_edge_litert import interpreter  # pylint: disable=import-outside-toplevel
        kwargs = ({"model_content": self._model} if isinstance(self._model, bytes)
                  else {"model_path": str(self._model)})
        return interpreter.Interpreter(num_threads=self._num_threads,
                                       **kwargs).get_signature_runner()

    def _run(self, runner, chunk):
        return runner(**chunk)


class LiteRTPredictor(ids_predictor.IdsPredictor):
    """A LiteRT model of an export folder, called on raw text, from any number of threads.

    Args:
      export_dir: the folder export_saved_model.py --litert wrote (model_<variant>.tflite,
        assets/vocab.txt, assets.extra/export_info.json).
      variant: "fp32", "dynamic_int8" or "int8".
      num_threads: CPU threads of each interpreter (None: LiteRT's default, one).
      interpreters: the most LiteRT interpreters, hence predict() calls running the model
        at once (None: the CPUs this process may use // num_threads, at least 1).

    One predictor may serve any number of threads (a web server's request handlers): each
    call runs the model on an interpreter of a pool, its own until the call ends
    (ModelRunner), and tokenizes and decodes in its own thread, so every call gets the
    answers of its own inputs. Measured on a shared 2-core machine (a MiniLM-shaped
    model, 8 client threads against 1, batches of 1 and 8 texts; docs/litert.md): a lock
    (one interpreter of 1 or 2 threads), a pool of 2 of 1 thread and one interpreter per
    client thread gave the same throughput within the noise, one thread per interpreter
    spent the least CPU per text, and each interpreter adds its weights' memory: hence
    the default, as many single-threaded interpreters as CPUs. Its lifecycle (built ready:
    the tokenizer's batch path built when it is made; refused after fork; no signal
    handler) is doors.Door's.
    """

    flag = "--litert"
    variants = VARIANTS
    side_suffix = ".litert"  # saved_model_dir.LITERT_SUFFIX
    report_file = REPORT_FILE
    over_bound_file = OVER_BOUND_FILE
    model_file = staticmethod(model_file)

    def __init__(self, export_dir, variant="int8", num_threads=None, interpreters=None):
        super().__init__(export_dir, variant, num_threads=num_threads,
                         interpreters=interpreters)

    def _make_runner(self, path, num_threads=None, interpreters=None):
        """A ModelRunner of the .tflite file."""
        return ModelRunner(path, num_threads, interpreters)
