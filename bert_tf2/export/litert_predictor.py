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
import collections
import contextlib
import hashlib
import importlib.util
import json
import os
import threading

import numpy as np

from bert import tokenization  # ours, whatever tokenization.py a user's folder holds
from bert_tf2.base import doors
from bert_tf2.export import head_types
from bert_tf2.export import litert_data
from bert_tf2.export import serving_squad
from bert_tf2.export import tokenization_graph

VARIANTS = ("fp32", "dynamic_int8", "int8")
INFO_FILE = "assets.extra/export_info.json"
VOCAB_FILE = "assets/vocab.txt"
BATCH_SIZE = 32
REPORT_FILE = "litert_report.json"
# A --crf tagger's Viterbi parameters, which its LiteRT models (logits only) need to tag
# as the SavedModel does: {"transitions": [N][N] (the scheme's forbidden ones included),
# "start_penalty": [N] or null}.
CRF_FILE = "litert_crf.json"
# A full-int8 model beyond its own --max_metric_drop bound (after every fallback): written
# under this name, not model_int8.tflite, unless --keep_int8_over_bound.
OVER_BOUND_FILE = "model_int8_over_bound.tflite"


def model_file(variant):
    """The file name of a variant's LiteRT model in the export folder."""
    return "model_%s.tflite" % variant


def export_files():
    """Every file export_saved_model.py --litert may write in an export folder."""
    return tuple(model_file(v) for v in VARIANTS) + (REPORT_FILE, CRF_FILE, OVER_BOUND_FILE)


def _bad_field(path, field, what, value):
    return ValueError("%s: field %r must be %s, got %s" % (path, field, what,
                                                           json.dumps(value)[:80]))


def _is_int(value, least):
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def read_info(export_dir):
    """The export's assets.extra/export_info.json, its fields checked: a missing or
    tampered file (not JSON, a field missing or of another type) is one ValueError naming
    the file and the field."""
    path = os.path.join(export_dir, INFO_FILE)
    if not os.path.isfile(path):
        raise ValueError("%s does not exist: %s is not a folder export_saved_model.py wrote"
                         % (path, export_dir))
    try:
        with open(path, encoding="utf-8") as f:
            info = json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError("%s is not valid JSON: %s" % (path, e)) from None
    if not isinstance(info, dict):
        raise ValueError("%s: expected a JSON object of fields, got %s"
                         % (path, type(info).__name__))
    model_type = info.get("model_type")
    if model_type not in litert_data.MODEL_TYPES:
        raise _bad_field(path, "model_type", "one of " + ", ".join(litert_data.MODEL_TYPES),
                         model_type)
    checks = [("max_seq_length", lambda v: _is_int(v, 3), "an integer >= 3"),
              ("do_lower_case", lambda v: isinstance(v, bool), "true or false")]
    checks += [(field,) + _FIELD_KINDS[kind]
               for field, kind in head_types.find(model_type).litert_info_fields]
    for field, valid, what in checks:
        if field not in info and field not in _OPTIONAL_FIELDS:
            raise ValueError("%s: field %r is missing" % (path, field))
        if not valid(info.get(field)):
            raise _bad_field(path, field, what, info.get(field))
    return info


# The kinds of value of a head's export_info.json fields (its litert_info_fields):
# (valid, what it must be). The optional ones (None) are older exports' (their defaults).
_FIELD_KINDS = {
    "labels": (lambda v: isinstance(v, list) and v and all(
        x is None or isinstance(x, str) for x in v), "a non-empty list of label names"),
    "bool": (lambda v: v is None or isinstance(v, bool), "true or false"),
    "count": (lambda v: v is None or _is_int(v, 1), "an integer >= 1"),
    "number": (lambda v: v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)),
               "a number"),
}

# Fields of export_info.json that older exports lack (their readers take the defaults).
_OPTIONAL_FIELDS = ("crf",) + serving_squad.SETTINGS


def squad_rules(info):
    """The serving_squad.SquadRules an export recorded (run_squad's defaults where absent)."""
    defaults = serving_squad.SquadRules()
    return serving_squad.SquadRules(**{
        name: getattr(defaults, name) if info.get(name) is None else info[name]
        for name in serving_squad.SETTINGS})


def _check_vocab(vocab, recorded, info_path):
    """ValueError when `vocab` is not the file the export was made with (the size and
    sha256 export_info.json records; exports made before it recorded them: not checked)."""
    if recorded is None:
        return
    if not (isinstance(recorded, dict) and isinstance(recorded.get("sha256"), str)):
        raise _bad_field(info_path, "vocab", '{"size": bytes, "sha256": hex digest}', recorded)
    with open(vocab, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    if digest != recorded["sha256"]:
        raise ValueError("%s is not the vocabulary this model was exported with (its sha256 "
                         "differs from the one %s records): its token ids would not be the "
                         "model's; export the model again" % (vocab, info_path))


def asset_tokenizer(vocab, do_lower_case):
    """tokenization.FullTokenizer of an export's vocabulary asset `vocab`, its placeholder
    lines (" <id>": an id no word can give, tokenization_graph.vocab_asset_lines) naming no
    token, as in the SavedModel's lookup. FullTokenizer alone strips " 17" to the word "17"
    and gives that word id 17 (or takes "17" from the real token's later line)."""
    tokenizer = tokenization.FullTokenizer(vocab, do_lower_case)
    with open(vocab, "r", encoding="utf-8", newline="\n") as f:
        lines = f.read().split("\n")
    held = collections.OrderedDict(
        (line.strip(), index) for index, line in enumerate(lines)
        if line.strip() and line != tokenization_graph.placeholder(index))
    if dict(held) != dict(tokenizer.vocab):  # a placeholder read as a word: not one
        tokenizer.vocab = held
        tokenizer.inv_vocab = {index: token for token, index in held.items()}
        tokenizer.wordpiece_tokenizer.vocab = held
    return tokenizer


def read_crf(export_dir, num_labels):
    """(transitions float32 [N, N], start_penalty float32 [N] or None) of a --crf tagger's
    CRF_FILE; one ValueError naming the file and field when it is missing or wrong."""
    path = os.path.join(export_dir, CRF_FILE)
    if not os.path.isfile(path):
        raise ValueError("%s does not exist: the export's tagger is a --crf one (%s), "
                         "whose LiteRT models need its transitions; export it again with "
                         "--litert" % (path, INFO_FILE))
    try:
        with open(path, encoding="utf-8") as f:
            crf = json.load(f)
        transitions = np.asarray(crf["transitions"], np.float32)
        start = crf.get("start_penalty")
        start = None if start is None else np.asarray(start, np.float32)
    except (ValueError, TypeError, KeyError, UnicodeDecodeError) as e:
        raise ValueError("%s: expected {\"transitions\": [[...]], \"start_penalty\": [...] "
                         "or null}: %s" % (path, str(e).strip("'\""))) from None
    if transitions.shape != (num_labels, num_labels):
        raise ValueError("%s: field 'transitions' must be %d x %d (the labels of %s), got "
                         "shape %s" % (path, num_labels, num_labels, INFO_FILE,
                                       list(transitions.shape)))
    if start is not None and start.shape != (num_labels,):
        raise ValueError("%s: field 'start_penalty' must have %d numbers, got shape %s"
                         % (path, num_labels, list(start.shape)))
    return transitions, start


def check_available(flag="--litert"):
    """ValueError in one line when the ai-edge-litert package (the [litert] extra) is
    missing."""
    if importlib.util.find_spec("ai_edge_litert") is None:
        raise ValueError("%s needs the ai-edge-litert package: pip install "
                         "'bert-tf2[litert]' (or pip install ai-edge-litert)" % flag)


def default_interpreters(num_threads=None):
    """How many interpreters a pool keeps at most by default: the CPUs this process may
    use, shared among interpreters of `num_threads` threads each (None: LiteRT's default,
    one), at least one."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, cpus // max(1, num_threads or 1))


class ModelRunner(object):
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
        if interpreters is None:
            interpreters = default_interpreters(num_threads)
        if not _is_int(interpreters, 1):
            raise ValueError("interpreters must be an integer >= 1 (or None), got %r"
                             % (interpreters,))
        self._model = model
        self._num_threads = num_threads
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(interpreters)
        self.made = 0  # interpreters made so far (at most `interpreters`)
        first = self._new_runner()
        self._idle = [first]
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
        runner = interpreter.Interpreter(num_threads=self._num_threads,
                                         **kwargs).get_signature_runner()
        with self._lock:
            self.made += 1
        return runner

    @contextlib.contextmanager
    def _borrowed(self):
        """An interpreter's signature runner, this thread's alone until the block ends."""
        self._slots.acquire()
        try:
            with self._lock:
                runner = self._idle.pop() if self._idle else None
            if runner is None:
                runner = self._new_runner()
            try:
                yield runner
            finally:
                with self._lock:
                    self._idle.append(runner)
        finally:
            self._slots.release()

    def __call__(self, features, batch_size=BATCH_SIZE):
        """{output name: array} of the model on {ID_KEYS: int32 [N, S]}."""
        num_rows = len(features["input_ids"])
        parts = []
        with self._borrowed() as runner:  # the outputs are copies: theirs after the block
            for start in range(0, num_rows, batch_size):
                parts.append(runner(**{k: np.ascontiguousarray(
                    features[k][start:start + batch_size], np.int32)
                    for k in litert_data.ID_KEYS}))
        if not parts:
            return {}
        return {name: np.concatenate([p[name] for p in parts], axis=0) for name in parts[0]}


class LiteRTPredictor(doors.Door):
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

    def __init__(self, export_dir, variant="int8", num_threads=None, interpreters=None):
        self.open_door("LiteRTPredictor")
        if variant not in VARIANTS:
            raise ValueError("variant must be one of %s, got %r" % (", ".join(VARIANTS),
                                                                   variant))
        beside = str(export_dir).rstrip("/") + ".litert"  # a TF Serving version's (--export_base)
        if (not os.path.isfile(os.path.join(export_dir, model_file(variant)))
                and os.path.isfile(os.path.join(beside, model_file(variant)))):
            export_dir = beside
        path = os.path.join(export_dir, model_file(variant))
        if not os.path.isfile(path):
            if variant == "int8" and os.path.isfile(os.path.join(export_dir, OVER_BOUND_FILE)):
                raise ValueError("%s does not exist: the export's int8 model lost more than its "
                                 "--max_metric_drop (%s, litert_report.json says by how much); "
                                 "export with --keep_int8_over_bound to serve it"
                                 % (path, OVER_BOUND_FILE))
            raise ValueError("%s does not exist: export with --litert=%s" % (path, variant))
        self.info = read_info(export_dir)
        self.model_type = self.info["model_type"]
        self.head = head_types.find(self.model_type)
        self.labels = self.info.get("labels")
        self.max_seq_length = self.info["max_seq_length"]
        self.squad_rules = squad_rules(self.info)  # a squad head's (others: unread)
        # A --crf tagger tags with Viterbi under the SavedModel's transitions and scheme.
        self.crf = read_crf(export_dir, len(self.labels)) if self.info.get("crf") else None
        vocab = os.path.join(export_dir, VOCAB_FILE)
        if not os.path.isfile(vocab):
            raise ValueError("%s does not exist: %s is not a whole export" % (vocab, export_dir))
        _check_vocab(vocab, self.info.get("vocab"), os.path.join(export_dir, INFO_FILE))
        self.tokenizer = asset_tokenizer(vocab, self.info["do_lower_case"])
        self.vocab_file = vocab
        self.model_path = path
        self.run = ModelRunner(path, num_threads, interpreters)
        if self.run.seq_length > 0 and self.run.seq_length != self.max_seq_length:
            raise ValueError("%s: field 'max_seq_length' is %d but %s takes ids of length %d"
                             % (os.path.join(export_dir, INFO_FILE), self.max_seq_length,
                                path, self.run.seq_length))
        self.ready_tokenizer(self.tokenizer)

    def describe_door(self):
        """The refusals' name: the class and its model file."""
        return "LiteRTPredictor of %s" % self.model_path

    def batch(self, texts, texts_b=None):
        """The litert_data.Batch of what predict() is given: read as the runner's
        Predictor.predict reads it (classifier / encoder: run_classifier's texts, texts_b;
        tagger: run_ner's sentences; squad: run_squad's questions, contexts), with its
        one-line ValueErrors naming those arguments (the head's litert_batch)."""
        self.check_usable()
        return self.head.litert_batch(self, texts, texts_b)

    def predict(self, texts, texts_b=None):
        """One call from text to results, per text (or pair).

        What it takes, and its one-line errors, are the runner's Predictor.predict's
        (batch()): a list or tuple, a pandas Series, a numpy array or a generator, or a
        DataFrame (docs/python.md); messages name the runner's arguments.

        Args:
          texts: classifier / encoder: the first texts (one str is one text; a DataFrame
            of text_a / text_b or of one column); tagger: the sentences, each a str or
            a list of words (a DataFrame: a "tokens" column or one column; not one str,
            as run_ner's); squad: the questions (a DataFrame of question / context).
          texts_b: classifier / encoder: second texts of pairs (optional); squad: the
            contexts. As many as texts.

        Returns:
          classifier: [{"label", "probabilities": {label: p}}] (regression:
          [{"prediction": x}]); encoder: float32 [N, D] sentence vectors; tagger:
          [[(word, tag), ...]] per text, each text one sentence split into words at
          blanks (ner_data.split_words, the SavedModel's and run_ner.predict's words) and
          windowed as run_ner --doc_stride (export_info.json's doc_stride) does (a --crf
          tagger: Viterbi's tags, as the SavedModel's); squad: [answer text] per
          question (answers() adds the scores); masked_lm: per text, per [MASK], the
          top-k {"token", "token_id", "probability"} (masked_lm.Predictor's). No texts: no
          results.
        """
        self.check_usable()
        return self.head.litert_predict(self, texts, texts_b)

    def answers(self, questions, contexts):
        """A squad model's answers with their scores: per question run_squad.predict()'s
        {"text", "probability", "nbest"} (squad_results.answer_of), under the export's
        doc_stride, n_best_size, max_answer_length and SQuAD 2.0 rule."""
        self.check_usable()
        return self.head.litert_answers(self, questions, contexts)
