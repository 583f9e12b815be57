"""What every ids-in door shares (LiteRTPredictor, OpenVINOPredictor, ONNXPredictor): an
export folder's files read and checked, our exact tokenizer in Python, a pool of model
runners safe from threads, and the door itself (IdsPredictor: predict / batch / answers).

The three runtimes run the same numeric graph, the SavedModel's model on ids
(ids_export.ids_function: input_ids, input_mask, segment_ids int32 [batch, S] in, the
head's numeric outputs out), none of them the in-graph tokenizer's string ops. So the text
is tokenized here by tokenization.FullTokenizer and packed by the runners' own
featurization (litert_data), the ids the SavedModel's in-graph tokenizer gives, and each
head decodes the outputs as do_predict does through its litert_* hooks (head_classes),
which call `predictor.run(features)`. Only the runner (the object that runs the model on
id features) is a runtime's own: a subclass of IdsPredictor says which runner, which files
and which flag. Nothing here imports a runtime.
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

INFO_FILE = "assets.extra/export_info.json"
VOCAB_FILE = "assets/vocab.txt"
BATCH_SIZE = 32
# A --crf tagger's Viterbi parameters, which its ids-in models (logits only) need to tag
# as the SavedModel does: {"transitions": [N][N] (the scheme's forbidden ones included),
# "start_penalty": [N] or null}. Written by every ids-in export (--litert, --openvino,
# --onnx), under the name LiteRT's export gave it first.
CRF_FILE = "litert_crf.json"


def check_packages(flag, extra, packages):
    """ValueError in one line when a package of `packages` (the [extra] extra a door or its
    export needs) is missing, naming them and the pip command; the runtimes' one rule."""
    missing = [name for name in packages if importlib.util.find_spec(name) is None]
    if missing:
        raise ValueError("%s needs the %s package%s: pip install 'bert-tf2[%s]' (or pip install "
                         "%s)" % (flag, ", ".join(n.replace("_", "-") for n in missing),
                                  "s" if len(missing) > 1 else "", extra,
                                  " ".join(n.replace("_", "-") for n in missing)))


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
                         "whose ids-in models (LiteRT, OpenVINO, ONNX) need its transitions; "
                         "export it again with --litert, --openvino or --onnx"
                         % (path, INFO_FILE))
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


def default_interpreters(num_threads=None):
    """How many runners a pool keeps at most by default: the CPUs this process may use,
    shared among runners of `num_threads` threads each (None: one), at least one."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, cpus // max(1, num_threads or 1))


class RunnerPool(object):
    """A model run on id features, BATCH_SIZE rows at a time, from any number of threads.

    A runtime's runner (a LiteRT interpreter, an OpenVINO infer request) holds one call's
    tensors, so two threads must never share one: each call borrows a runner of a pool for
    its whole run, made when no idle one is left, at most `runners` of them (a call beyond
    waits for one to come back). The first is made here (its errors at once). The
    runtimes release the GIL while they run a model, so calls on different runners run
    in parallel. A subclass gives _new_runner() and _run(runner, chunk); after the first
    runner is made, it sets seq_length (the ids' length the model takes; <= 0: any) and
    output_sizes ({output: last dimension}).
    """

    seq_length = -1
    output_sizes = None
    pool_argument = "interpreters"  # what the door's argument bounding the pool is called

    def __init__(self, runners):
        if not _is_int(runners, 1):
            raise ValueError("%s must be an integer >= 1 (or None), got %r"
                             % (self.pool_argument, runners))
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(runners)
        self.made = 0  # runners made so far (at most `runners`)
        self._idle = [self._made_runner()]

    def _made_runner(self):
        runner = self._new_runner()
        with self._lock:
            self.made += 1
        return runner

    def _new_runner(self):
        raise NotImplementedError

    def _run(self, runner, chunk):
        """{output name: array (the caller's own)} of `runner` on one chunk of features."""
        raise NotImplementedError

    @contextlib.contextmanager
    def _borrowed(self):
        """A runner, this thread's alone until the block ends."""
        self._slots.acquire()
        try:
            with self._lock:
                runner = self._idle.pop() if self._idle else None
            if runner is None:
                runner = self._made_runner()
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
                parts.append(self._run(runner, {k: np.ascontiguousarray(
                    features[k][start:start + batch_size], np.int32)
                    for k in litert_data.ID_KEYS}))
        if not parts:
            return {}
        return {name: np.concatenate([p[name] for p in parts], axis=0) for name in parts[0]}


class IdsPredictor(doors.Door):
    """An ids-in model of an export folder, called on raw text, from any number of threads:
    the door LiteRTPredictor, OpenVINOPredictor and ONNXPredictor share (each says its
    runtime in the class attributes below and makes its runner in _make_runner).

    Args of every subclass: export_dir (the folder export_saved_model.py wrote: the model
    files, assets/vocab.txt, assets.extra/export_info.json; or a TF Serving version whose
    ids-in files are beside it, <version><side_suffix>), variant (one of `variants`), and
    the runner's own (threads, pool size).

    One predictor serves any number of threads: each call runs the model on a runner of
    a pool (RunnerPool), or on a runtime's session that is thread-safe itself, and
    tokenizes and decodes in its own thread, so every call gets the answers of its own
    inputs. Its lifecycle (built ready; refused after fork and after close; no signal
    handler) is doors.Door's.
    """

    flag = None          # the export flag that writes the models, e.g. "--litert"
    variants = ()        # the variants a predictor may load
    side_suffix = None   # a TF Serving version's folder of these files: <version> + this
    report_file = None   # the export's agreement report

    # staticmethod(variant -> its model file, relative to the export folder)
    model_file = None
    over_bound_file = None  # the int8 model over its --max_metric_drop bound (relative)

    def _make_runner(self, path, **options):
        """The runner of the model file `path` (a RunnerPool or a callable alike)."""
        raise NotImplementedError

    def __init__(self, export_dir, variant, **options):
        name = type(self).__name__
        self.open_door(name)
        if variant not in self.variants:
            raise ValueError("variant must be one of %s, got %r" % (", ".join(self.variants),
                                                                   variant))
        self.variant = variant
        relative = self.model_file(variant)
        beside = str(export_dir).rstrip("/") + self.side_suffix  # a version's (--export_base)
        if (not os.path.isfile(os.path.join(export_dir, relative))
                and os.path.isfile(os.path.join(beside, relative))):
            export_dir = beside
        path = os.path.join(export_dir, relative)
        if not os.path.isfile(path):
            if variant == "int8" and os.path.isfile(os.path.join(export_dir,
                                                                 self.over_bound_file)):
                raise ValueError("%s does not exist: the export's int8 model lost more than its "
                                 "--max_metric_drop (%s, %s says by how much); export with "
                                 "--keep_int8_over_bound to serve it"
                                 % (path, self.over_bound_file, self.report_file))
            raise ValueError("%s does not exist: export with %s=%s" % (path, self.flag, variant))
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
        self.run = self._make_runner(path, **options)
        seq_length = getattr(self.run, "seq_length", -1)
        if seq_length > 0 and seq_length != self.max_seq_length:
            raise ValueError("%s: field 'max_seq_length' is %d but %s takes ids of length %d"
                             % (os.path.join(export_dir, INFO_FILE), self.max_seq_length,
                                path, seq_length))
        self.ready_tokenizer(self.tokenizer)

    def describe_door(self):
        """The refusals' name: the class and its model file."""
        return "%s of %s" % (type(self).__name__, self.model_path)

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
