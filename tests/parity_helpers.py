"""The parity matrix's parts (tests/test_parity_matrix.py): the inputs of every kind, the
tiny models of every head trained through their runners' run(Settings), and the doors a
trained folder leaves through, each giving its answers in one comparable form.

An answer is what a door says of one input, reduced to what every door of that head can
say: a classifier's (label, probabilities), a tagger's [(word, tag), ...], a reader's
answer text, a chooser's (choice, probabilities), an encoder's vector. A door that refuses
an input raises ValueError; the matrix records that as "refused" (with the message).
"""
import json
import os
import pathlib
import re
import subprocess

import numpy as np
import pytest

from bert_tf2.export import head_types
from conftest import (FP32_ATOL, HANG_GUARD_SECONDS, REPO_ROOT, SHARED_DIR, peer_python,
                      write_text)

# ---------------------------------------------------------------------------
# The inputs
# ---------------------------------------------------------------------------

KINDS = ("short", "two_windows", "three_windows", "empty", "whitespace", "unicode",
         "mixed", "duplicates")
DOORS = ("predictor", "saved_model", "litert", "openvino", "onnx", "hf")
# The ids-in doors beside LiteRT (export_saved_model --openvino / --onnx, fp32): their
# predictor classes; exported with the heads LiteRT takes, when their extra is installed.
IDS_DOORS = {"openvino": ("bert_tf2.export.openvino_predictor", "OpenVINOPredictor",
                          "bert_tf2.export.openvino_export"),
             "onnx": ("bert_tf2.export.onnx_predictor", "ONNXPredictor",
                      "bert_tf2.export.onnx_export")}


def ids_door_missing(door):
    """The one line of a missing extra of an ids-in door (its export's check), or None."""
    import importlib  # pylint: disable=import-outside-toplevel
    try:
        importlib.import_module(IDS_DOORS[door][2]).check_available()
    except ValueError as e:
        return str(e)
    return None

# Words that are one WordPiece each in the uncased vocabulary (and in the small one below).
_WORDS = ("the a man woman went to store and bought milk house city river john mary paris "
          "london good bad film very not great dull plot was in of it is on at by red blue "
          "green old new big small day night water tree").split()
_NAMES = {"john": "B-PER", "mary": "B-PER", "paris": "B-LOC", "london": "B-LOC"}
_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# Characters of the "unicode" inputs, so that the small vocabulary has their pieces too.
_UNICODE_TEXTS = ["caf\u00e9 na\u00efve r\u00e9sum\u00e9 was good",
                  "\u6771\u4eac \u306f the city \u5927",
                  "great film \U0001F600 \U0001F389 very good",
                  "zero\u200bwidth john \u200b went \u200d to paris",
                  "Stra\u00dfe in K\u00f8benhavn , mary !"]


def _shared_vocab():
    """../shared's uncased vocabulary file, or None (no ../shared, or PARITY_SMALL_VOCAB)."""
    if SHARED_DIR is None or os.environ.get("PARITY_SMALL_VOCAB"):
        return None
    path = SHARED_DIR / "data" / "vocab" / "uncased_vocab.txt"
    return path if path.is_file() else None


def vocab_lines():
    """The uncased vocabulary of ../shared when there is one, else a small one of _WORDS,
    punctuation, the unicode inputs' characters and their accent-stripped forms."""
    path = _shared_vocab()
    if path is not None:
        return path.read_text(encoding="utf-8").splitlines()
    extra = sorted(set("".join(_UNICODE_TEXTS).lower()) - set(" \u200b\u200d"))
    return _SPECIALS + list(_WORDS) + [".", ",", "!", "?", "cafe", "naive", "resume", "zero",
                                       "width", "strasse", "kobenhavn"] + extra


def _sentence(count, start):
    """`count` words of _WORDS, from `start` on, with a period every 9 words."""
    words = []
    for i in range(count):
        words.append(_WORDS[(start + i * 7) % len(_WORDS)])
        if i % 9 == 8:
            words.append(".")
    return " ".join(words)


def texts_by_kind(long_words=(38, 54)):
    """{kind: [text, ...]}: the inputs of every kind (single texts). `long_words`: the
    word counts of the two- and three-window texts (at max_seq_length 32, doc_stride 15)."""
    two, three = long_words
    kinds = {
        "short": [_sentence(3, 1), _sentence(6, 4), "john went to paris ."],
        "two_windows": [_sentence(two, 2), _sentence(two + 3, 9)],
        "three_windows": [_sentence(three, 5), _sentence(three + 2, 11)],
        "empty": [""],
        "whitespace": ["   ", "\t \u3000 "],  # U+3000: a blank to BERT, not to CoNLL
        "unicode": list(_UNICODE_TEXTS),
    }
    mixed = [kinds["three_windows"][0], kinds["short"][0], kinds["unicode"][1],
             kinds["two_windows"][1], kinds["short"][2], kinds["unicode"][3]]
    kinds["mixed"] = mixed
    kinds["duplicates"] = [kinds["short"][1]] * 3 + [kinds["two_windows"][0]] * 2
    return kinds


def tags_of(text):
    """A tag per blank-separated word of `text` (names and places; the rest "O")."""
    return [_NAMES.get(w, "O") for w in text.split()]


def train_texts(count, seed):
    """`count` training texts of 3 to 20 words."""
    rng = np.random.RandomState(seed)
    return [_sentence(int(rng.randint(3, 21)), int(rng.randint(0, 50))) for _ in range(count)]


# ---------------------------------------------------------------------------
# Comparing answers
# ---------------------------------------------------------------------------

def same_answer(want, got, atol=FP32_ATOL):
    """Whether two answers agree: equal labels / tags / texts, numbers within atol; a label
    that differs only where its top two scores are within atol counts as the same."""
    if isinstance(want, np.ndarray) or isinstance(got, np.ndarray):
        want, got = np.asarray(want, np.float64), np.asarray(got, np.float64)
        return want.shape == got.shape and bool(np.all(np.abs(want - got) <= atol))
    if isinstance(want, dict) and isinstance(got, dict):
        scores_want, scores_got = want.get("scores"), got.get("scores")
        if scores_want is not None and scores_got is not None:
            a, b = np.asarray(scores_want, np.float64), np.asarray(scores_got, np.float64)
            if a.shape != b.shape or np.any(np.abs(a - b) > atol):
                return False
            if want.get("label") != got.get("label"):
                top = np.sort(a.ravel())[::-1]
                return top.size > 1 and top[0] - top[1] <= 2 * atol
        rest_want = {k: v for k, v in want.items() if k != "scores"}
        rest_got = {k: v for k, v in got.items() if k != "scores"}
        if scores_want is not None and scores_got is not None:
            rest_want.pop("label", None)
            rest_got.pop("label", None)
        return rest_want == rest_got
    return want == got


def count_differing(want, got):
    """How many of the answers differ (lists of one answer per input)."""
    if len(want) != len(got):
        return max(len(want), len(got))
    return sum(not same_answer(w, g) for w, g in zip(want, got))


# ---------------------------------------------------------------------------
# The heads: their training data, run and do_predict answers
# ---------------------------------------------------------------------------

SEQ = 32          # max_seq_length of every head but squad's
DOC_STRIDE = 15   # windows of 30 pieces, 15 apart: 38 words are two, 54 three
SQUAD_SEQ = 32    # squad: a question of <= 8 pieces, windows of >= 21 context pieces
_CONFIG = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
           "intermediate_size": 37, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
           "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 64,
           "type_vocab_size": 2, "initializer_range": 0.2}
_COMMON = dict(train_batch_size=8, learning_rate=3e-3, seed=1, predict_batch_size=4)


class Refused(Exception):
    """A door's refusal of an input kind (its ValueError's message); `at_export`: the
    door's export refused the model (a one-line refusal there is an answer the project
    allows: the door never serves it)."""

    def __init__(self, message, at_export=False):
        super().__init__(message)
        self.at_export = at_export

    def __reduce__(self):  # pickled with its reference answers (tests/trained.py)
        return Refused, (str(self), self.at_export)


def model_files(root):
    """vocab.txt and bert_config.json of the tiny model in `root`: the two settings."""
    words = vocab_lines()
    config = dict(_CONFIG, vocab_size=len(words))
    return dict(vocab_file=write_text(root / "vocab.txt", "\n".join(words) + "\n"),
                bert_config_file=write_text(root / "bert_config.json", json.dumps(config)))


def _read_jsonl(path):
    with open(str(path), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _scored(label, probabilities):
    """A classifier's answer: its label and its scores in label order."""
    return {"label": label, "scores": [float(p) for p in probabilities]}


def classifier_answer(result):
    """The answer of one predict() / test_predictions.jsonl / LiteRT result."""
    if "prediction" in result:
        return {"label": None, "scores": [float(result["prediction"])]}
    if "probabilities" not in result:  # test_predictions.jsonl of a regression task
        return {"label": None, "scores": [float(result["label"])]}
    probabilities = result["probabilities"]
    if isinstance(probabilities, dict):
        probabilities = list(probabilities.values())
    label = result["label"]
    return _scored(sorted(label) if isinstance(label, list) else label, probabilities)


class Head(object):
    """One trained head: `kinds` {kind: [input, ...]}, `reference` {kind: [answer, ...]
    or Refused}, and its doors' answers (`answers(door, items)`)."""

    name = None
    runner = None           # the runner module's name
    model_type = None       # export_saved_model --model_type
    registry_head = None    # its head in its head_types entry's `heads`

    @property
    def litert(self):
        """Whether --litert=fp32 exports it (its head_types entry says)."""
        return head_types.find(self.model_type).carries_litert(self.registry_head)

    def __init__(self, root, files):
        self.root, self.files = root / self.name, files
        self.scratch = self.root  # where the doors' own outputs go (the HF folder)
        self.folder = str(self.root / "out")
        self.kinds = self.make_kinds()
        self._predictor = None
        self._saved = None
        self._litert = None
        self._ids = {}  # door -> its predictor (openvino, onnx)
        self.export_errors = {}  # door -> its export's refusal of a head LiteRT refuses too
        self._combined = None
        self._hf = None
        self.export_error = None

    # -- to be defined by each head
    def make_kinds(self):
        return texts_by_kind()

    def train(self):
        raise NotImplementedError

    # -- the reference: do_predict of every (non-refused) input in one run
    def reference_items(self):
        """[(kind, item)] of do_predict's test set: every kind's inputs, in order."""
        return [(kind, item) for kind in KINDS for item in self.kinds[kind]
                if kind not in self.refused_by_do_predict()]

    def refused_by_do_predict(self):
        return {}

    def build(self):
        """Trains (with do_predict) and returns {kind: answers, or Refused}."""
        answers = self.train()
        pairs = self.reference_items()
        assert len(answers) == len(pairs), (self.name, len(answers), len(pairs))
        reference = {kind: [] for kind in KINDS}
        for (kind, _), answer in zip(pairs, answers):
            reference[kind].append(answer)
        for kind, message in self.refused_by_do_predict().items():
            reference[kind] = Refused(message)
        self.reference = reference
        return reference

    def decisions(self, answer):
        """What one reference answer decides (hashables): a label, tags, a span's text."""
        return [repr(answer)]

    def check_not_trivial(self):
        """Fails when do_predict's answers decide the same for every input (one label, no
        tag but "O", one span): a model trained too little for the doors' differences to show
        (a door that always answered that one label would agree with it)."""
        found = {d for kind in KINDS if not isinstance(self.reference[kind], Refused)
                 for answer in self.reference[kind] for d in self.decisions(answer)}
        assert len(found) > 1, ("%s: do_predict answers %r to every input; train it more"
                                % (self.name, sorted(found)))

    # -- the doors
    def module(self):
        import importlib  # pylint: disable=import-outside-toplevel
        return importlib.import_module(self.runner)

    def predictor(self):
        if self._predictor is None:
            self._predictor = self.module().Predictor(self.folder, batch_size=8)
        return self._predictor

    def export_settings(self):
        return {}

    @property
    def export_dir(self):
        """The folder's SavedModel (and LiteRT fp32 file when the head has it)."""
        return str(self.root / "export")

    exporter = None  # tests/trained.py's: export() once per run, under its lock

    def export(self):
        """export_saved_model of the folder into export_dir (with LiteRT fp32 when the head
        has it; else .export_error: --litert's refusal, in one line, before any work)."""
        import export_saved_model  # pylint: disable=import-outside-toplevel
        settings = dict(init_checkpoint=self.folder, export_dir=self.export_dir,
                        model_type=self.model_type, **self.export_settings())
        others = [door for door in IDS_DOORS if ids_door_missing(door) is None]
        if self.litert:
            settings["litert"] = "fp32"
            settings.update((door, "fp32") for door in others)
        export_saved_model.run(export_saved_model.Settings(**settings))
        if not self.litert:
            for door in ["litert"] + others:
                try:
                    export_saved_model.run(export_saved_model.Settings(**dict(
                        settings, export_dir=str(self.root / "refused"), **{door: "fp32"})))
                    error = "--%s was not refused" % door
                except ValueError as e:
                    error = str(e)
                if door == "litert":
                    self.export_error = error
                else:
                    self.export_errors[door] = error

    def saved_model(self):
        """The SavedModel of the folder, loaded (exported first: by the exporter when there
        is one, else here)."""
        if self._saved is None:
            import tensorflow as tf  # pylint: disable=import-outside-toplevel
            if self.exporter is not None:
                self.exporter(self)
            else:
                self.export()
            self._saved = tf.saved_model.load(self.export_dir)
        return self._saved

    def litert_predictor(self):
        self.saved_model()
        if not self.litert:
            raise Refused(self.export_error, at_export=True)
        if self._litert is None:
            from bert_tf2.export import litert_predictor  # pylint: disable=import-outside-toplevel
            self._litert = litert_predictor.LiteRTPredictor(self.export_dir, "fp32")
        return self._litert

    def ids_predictor(self, door):
        """The OpenVINO / ONNX Runtime fp32 predictor of the export (Refused when the export
        refuses the head; skipped, or failed under make test, without the extra)."""
        from conftest import door_peer_missing  # pylint: disable=import-outside-toplevel
        missing = ids_door_missing(door)
        if missing:
            door_peer_missing(missing)
        self.saved_model()
        if not self.litert:
            raise Refused(self.export_errors.get(door, "no %s export" % door), at_export=True)
        if door not in self._ids:
            import importlib  # pylint: disable=import-outside-toplevel
            module, name, _ = IDS_DOORS[door]
            self._ids[door] = getattr(importlib.import_module(module), name)(
                self.export_dir, "fp32")
        return self._ids[door]

    hf_head = None  # the head of parity_peer.py (None: no HuggingFace door)

    def hf_export(self):
        """convert_hf_checkpoint.py --direction=to_hf of the folder: the peer's request
        entry, or None when the conversion refuses (self._hf: that Refused)."""
        import convert_hf_checkpoint  # pylint: disable=import-outside-toplevel
        out = str(self.scratch / "hf")
        try:
            convert_hf_checkpoint.run(convert_hf_checkpoint.Settings(
                direction="to_hf", init_checkpoint=self.folder, output_dir=out,
                model_type="encoder" if self.hf_head == "encoder" else None))
        except ValueError as e:
            self._hf = Refused(str(e), at_export=True)
            return None
        with open(os.path.join(self.folder, "model_settings.json"), encoding="utf-8") as f:
            threshold = json.load(f).get("threshold") or 0.5
        return {"dir": out, "head": self.hf_head, "max_length": self.max_seq_length(),
                "threshold": threshold,
                "items": [i for k in KINDS for i in self.kinds[k]]}

    def hf_answers(self, found):
        """Takes the peer's answers to every kind's inputs (in KINDS order)."""
        self._hf = {}
        for kind in KINDS:
            count = len(self.kinds[kind])
            self._hf[kind] = [self.peer_answer(a) for a in found[:count]]
            found = found[count:]

    def peer_answer(self, answer):
        return answer

    def max_seq_length(self):
        return SEQ

    def kind_answers(self, door, kind):
        """The door's answers to the inputs of `kind` (a list, or Refused). The Python
        predictor answers every kind do_predict answers in one call (a batch mixing all
        lengths; a model call per kind would cost more than the rest of the matrix)."""
        if door == "hf":
            return self._hf if isinstance(self._hf, Refused) else self._hf[kind]
        if door == "predictor" and kind not in self.refused_by_do_predict():
            if self._combined is None:
                kinds = [k for k in KINDS if k not in self.refused_by_do_predict()]
                try:
                    found = self.answers(door, [i for k in kinds for i in self.kinds[k]])
                except Refused:  # one kind refused: each on its own
                    found = None
                self._combined = {}
                for k in kinds:
                    count = len(self.kinds[k])
                    self._combined[k] = found[:count] if found is not None else None
                    found = found[count:] if found is not None else None
            if self._combined[kind] is not None:
                return self._combined[kind]
        try:
            return self.answers(door, self.kinds[kind])
        except Refused as e:
            return e

    def answers(self, door, items):
        """The door's answers to `items` (a ValueError of the door: Refused)."""
        try:
            if door == "predictor":
                return self.predictor_answers(items)
            if door == "saved_model":
                return self.saved_model_answers(self.saved_model(), items)
            if door == "litert":
                predictor = self.litert_predictor()  # Refused when the export refuses
                return self.litert_answers(predictor, items)
            if door in IDS_DOORS:  # the same predictor contract as LiteRT's
                predictor = self.ids_predictor(door)  # Refused when the export refuses
                return self.litert_answers(predictor, items)
        except ValueError as e:
            raise Refused(str(e)) from None
        raise KeyError(door)

    def close(self):
        if self._predictor is not None:
            self._predictor.close()


# -- run_classifier: single label, multi-label, regression, long text ------------------



class Classifier(Head):
    name, runner, model_type = "classifier", "run_classifier", "classifier"
    registry_head = "classifier"
    hf_head = "classifier"
    task_type = "classification"
    extra = {}
    # 96 texts seen 4 times (48 steps, about a second): a model that tells the three labels
    # apart on the matrix's inputs (24 texts seen once answered "pos" to all of them). With
    # the small vocabulary (no ../shared) 4 epochs answered "neutral" to all: 8 there.
    train_count = 96
    epochs = 4.0 if _shared_vocab() is not None else 8.0

    def label_of(self, text, index):
        words = text.split()
        return "pos" if "good" in words else ("neg" if "bad" in words else "neutral")

    def train_rows(self):
        return [{"text": t, "label": self.label_of(t, i)}
                for i, t in enumerate(train_texts(self.train_count, 3))]

    def train(self):
        import run_classifier  # pylint: disable=import-outside-toplevel
        test = [{"text": item} for _, item in self.reference_items()]
        run_classifier.run(run_classifier.Settings(
            task_name="jsonl", task_type=self.task_type,
            data_dir={"train": self.train_rows(), "test": test}, output_dir=self.folder,
            max_seq_length=SEQ, do_train=True, do_predict=True, num_train_epochs=self.epochs,
            **dict(_COMMON, **self.files, **self.extra)))
        return [classifier_answer(r) for r in
                _read_jsonl(os.path.join(self.folder, "test_predictions.jsonl"))]

    def decisions(self, answer):
        if answer["label"] is None:  # regression: its value, to a hundredth
            return ["%.2f" % answer["scores"][0]]
        return [json.dumps(answer["label"])]

    def predictor_answers(self, items):
        return [classifier_answer(r) for r in self.predictor().predict(items)]

    def saved_model_answers(self, saved, items):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        out = saved.signatures["serving_text_a"](text_a=tf.constant(items, tf.string))
        if "predictions" in out:
            return [{"label": None, "scores": [float(x)]}
                    for x in out["predictions"].numpy().reshape(-1)]
        probabilities = out["probabilities"].numpy()
        if "predicted_labels" in out:
            names = [x.decode("utf-8") for x in out["predicted_labels"].numpy()]
            return [_scored(sorted(n.split(",")) if n else [], p)
                    for n, p in zip(names, probabilities)]
        names = [x.decode("utf-8") for x in out["predicted_label"].numpy()]
        return [_scored(n, p) for n, p in zip(names, probabilities)]

    def litert_answers(self, predictor, items):
        return [classifier_answer(r) for r in predictor.predict(items)]


class Multilabel(Classifier):
    name, task_type, hf_head = "multilabel", "multilabel", "multilabel"
    registry_head = "multi-label classifier"
    # 96 texts seen 4 times, or 24 seen 20 times, still said [] to every input.
    train_count, epochs = 24, 30.0

    def label_of(self, text, index):
        return [name for name, word in (("neg", "bad"), ("neutral", "the"), ("pos", "good"))
                if word in text.split()]


class Regression(Classifier):
    name, task_type, hf_head = "regression", "regression", "regression"
    registry_head = "regression"
    # Its values differ per input after 3 steps (96 texts seen 4 times gave 1.99 to all).
    train_count, epochs = 24, 1.0

    def label_of(self, text, index):
        return float(len(text.split()) % 5)


class LongWindows(Classifier):
    name, registry_head = "long_windows", "long-text classifier"
    extra = {"long_text": "windows", "doc_stride": DOC_STRIDE}


class LongHeadTail(Classifier):
    name, registry_head = "long_head_tail", "long-text classifier"
    extra = {"long_text": "head_tail", "head_tokens": 10}


# -- run_ner: softmax and --crf ------------------------------------------------------

_CONLL_BLANKS = re.compile("[ \t\r\f\v\n]+")


def conll_words(text):
    """The words of `text` as a CoNLL file's lines would hold them (split at blanks)."""
    return [w for w in _CONLL_BLANKS.split(text) if w]


def _read_tagged(path):
    """test_predictions.txt: [(word, tag), ...] per sentence (first and last column)."""
    with open(str(path), encoding="utf-8") as f:
        blocks = f.read().strip("\n").split("\n\n")
    return [[(line.split(" ")[0], line.split(" ")[-1]) for line in block.split("\n")]
            for block in blocks]


class Tagger(Head):
    name, runner, model_type, hf_head = "tagger", "run_ner", "tagger", "tagger"
    registry_head = "tagger softmax"
    crf = False

    def reference_items(self):
        """do_predict's test set: the texts with words (a CoNLL file cannot hold a sentence
        without words; U+3000 is a word there, as in every door's word rule)."""
        return [(kind, item) for kind, item in super().reference_items() if conll_words(item)]

    def build(self):
        """do_predict's answers; a text without words has nothing to tag: [] (the word rule
        of docs/ner.md, every door's answer)."""
        answers = iter(self.train())
        self.reference = {kind: [next(answers) if conll_words(item) else []
                                 for item in self.kinds[kind]] for kind in KINDS}
        assert next(answers, None) is None, self.name
        return self.reference

    def train(self):
        import run_ner  # pylint: disable=import-outside-toplevel
        # Names every third word, and enough steps to learn them: a tagger that says "O"
        # everywhere would hide every difference of windows and words.
        names = sorted(_NAMES)
        texts = [" ".join(names[(i + j) % 4] if j % 3 == 1 else w
                          for j, w in enumerate(t.split()))
                 for i, t in enumerate(train_texts(32, 5))]
        sentences = [list(zip(t.split(), tags_of(t))) for t in texts]
        test = [conll_words(item) for _, item in self.reference_items()]
        run_ner.run(run_ner.Settings(
            data_dir={"train": sentences, "test": test}, output_dir=self.folder,
            max_seq_length=SEQ, doc_stride=DOC_STRIDE, do_train=True, do_predict=True,
            num_train_epochs=8.0, crf=self.crf, **dict(_COMMON, **self.files)))
        return _read_tagged(os.path.join(self.folder, "test_predictions.txt"))

    def decisions(self, answer):
        return [tag for _, tag in answer]

    def predictor_answers(self, items):
        return [list(s) for s in self.predictor().predict(list(items))]

    def saved_model_answers(self, saved, items):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        out = saved.signatures["serving_default"](text=tf.constant(items, tf.string))
        answers = []
        for row, text in enumerate(items):  # word_start / word_end: code points
            count = int(out["num_words"].numpy()[row])
            starts, ends = out["word_start"].numpy()[row], out["word_end"].numpy()[row]
            tags = out["word_tags"].numpy()[row]
            answers.append([(text[int(s):int(e)], t.decode("utf-8"))
                            for s, e, t in zip(starts[:count], ends[:count], tags[:count])])
        return answers

    def litert_answers(self, predictor, items):
        return [list(s) for s in predictor.predict(items)]

    def peer_answer(self, answer):
        return [tuple(pair) for pair in answer]


class TaggerCrf(Tagger):
    name, crf, registry_head = "tagger_crf", True, "tagger crf"


# -- run_squad: v1 and v2 -----------------------------------------------------------

_QUESTION = "where did john go ?"


def squad_json(questions, contexts, answers=None, impossible=None):
    """A SQuAD object, one paragraph per question; ids "0", "1", ..."""
    data = []
    for i, (question, context) in enumerate(zip(questions, contexts)):
        qa = {"id": str(i), "question": question, "answers": []}
        if answers is not None:
            if impossible and impossible[i]:
                qa["is_impossible"] = True
            else:
                qa["answers"] = [{"text": answers[i], "answer_start": context.index(answers[i])}]
                if impossible is not None:
                    qa["is_impossible"] = False
        data.append({"title": str(i), "paragraphs": [{"context": context, "qas": [qa]}]})
    return {"version": "2.0" if impossible is not None else "1.1", "data": data}


class Squad(Head):
    name, runner, model_type = "squad_v1", "run_squad", "squad"
    registry_head = "squad v1.1"
    v2 = False

    def make_kinds(self):
        return {kind: [(_QUESTION, c) for c in texts]
                for kind, texts in texts_by_kind(long_words=(26, 38)).items()}

    def settings(self):
        return dict(max_seq_length=SQUAD_SEQ, doc_stride=12, max_query_length=8,
                    n_best_size=5, version_2_with_negative=self.v2)

    def train(self):
        import run_squad  # pylint: disable=import-outside-toplevel
        contexts, questions, answers, impossible = [], [], [], []
        for i, text in enumerate(train_texts(16, 7)):
            place = ("paris", "london")[i % 2]
            contexts.append("%s john went to %s ." % (text, place))
            questions.append(_QUESTION if i % 4 else "who was in london ?")
            answers.append(place if i % 4 else "john")
            impossible.append(self.v2 and i % 4 == 0)
        train = squad_json(questions, contexts, answers, impossible if self.v2 else None)
        items = [item for _, item in self.reference_items()]
        test = squad_json([q for q, _ in items], [c for _, c in items])
        common = dict(_COMMON, **self.files)
        common.pop("predict_batch_size")
        run_squad.run(run_squad.Settings(
            train_file=train, predict_file=test, output_dir=self.folder, do_train=True,
            do_predict=True, num_train_epochs=1.0, predict_batch_size=4,
            **dict(common, **self.settings())))
        with open(os.path.join(self.folder, "predictions.json"), encoding="utf-8") as f:
            found = json.load(f)
        return [found[str(i)] for i in range(len(items))]

    def predictor(self):
        if self._predictor is None:
            self._predictor = self.module().Predictor(self.folder, batch_size=8, n_best_size=5)
        return self._predictor

    def export_settings(self):
        return {"n_best_size": 5}

    def predictor_answers(self, items):
        found = self.predictor().predict([q for q, _ in items], [c for _, c in items])
        return [f["text"] for f in found]

    def saved_model_answers(self, saved, items):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        out = saved.signatures["answer"](question=tf.constant([q for q, _ in items]),
                                         context=tf.constant([c for _, c in items]))
        return [a.decode("utf-8") for a in out["answer"].numpy()]

    def litert_answers(self, predictor, items):
        return list(predictor.predict([q for q, _ in items], [c for _, c in items]))


class SquadV2(Squad):
    name, v2, registry_head = "squad_v2", True, "squad v2.0"


# -- run_multiple_choice --------------------------------------------------------------

_ENDINGS = ["went to paris .", "bought milk .", "was very good ."]


class MultipleChoice(Head):
    name, runner, model_type = "multiple_choice", "run_multiple_choice", "multiple_choice"
    registry_head = "multiple choice"
    hf_head = "multiple_choice"

    def make_kinds(self):
        return {kind: [{"context": t, "endings": list(_ENDINGS)} for t in texts]
                for kind, texts in texts_by_kind().items()}

    def train(self):
        import run_multiple_choice  # pylint: disable=import-outside-toplevel
        rows = [{"context": t, "endings": list(_ENDINGS), "label": len(t.split()) % 3}
                for t in train_texts(16, 9)]
        test = [dict(item) for _, item in self.reference_items()]
        run_multiple_choice.run(run_multiple_choice.Settings(
            task_name="jsonl", data_dir={"train": rows, "test": test},
            output_dir=self.folder, max_seq_length=SEQ, do_train=True, do_predict=True,
            num_train_epochs=3.0, **dict(_COMMON, **self.files)))
        return [_scored(r["label"], r["probabilities"]) for r in
                _read_jsonl(os.path.join(self.folder, "test_predictions.jsonl"))]

    def decisions(self, answer):
        return [answer["label"]]

    def predictor_answers(self, items):
        return [_scored(r["label"], r["probabilities"])
                for r in self.predictor().predict([dict(i) for i in items])]

    def saved_model_answers(self, saved, items):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        out = saved.signatures["serving_default"](
            context=tf.constant([i["context"] for i in items]),
            endings=tf.constant([i["endings"] for i in items]))
        return [_scored(int(c), p) for c, p in zip(out["predicted_choice"].numpy(),
                                                   out["probabilities"].numpy())]


# -- run_ranker: a cross-encoder's score per (query, passage) ---------------------------

_RANK_QUERY = "where did john go ?"


class Ranker(Head):
    """run_ranker's folder (--loss=pointwise); each kind's texts are the passages of one query
    (a tab in a text is a blank: test.tsv's fields cannot hold one). Its SavedModel door is
    the `rank` signature (the query and all its candidates), its HF door transformers'
    BertForSequenceClassification with one label (peer head "regression": the raw logit)."""
    name, runner, model_type, registry_head = "ranker", "run_ranker", "ranker", "ranker"
    hf_head = "regression"

    def make_kinds(self):
        return {kind: [[_RANK_QUERY, t.replace("\t", " ")] for t in texts]
                for kind, texts in texts_by_kind().items()}

    def train(self):
        import run_ranker  # pylint: disable=import-outside-toplevel
        data = self.root / "data"
        rows = ["%s\t%s\t%d\n" % (_RANK_QUERY, t, "good" in t.split())
                for t in train_texts(96, 3)]
        write_text(data / "train.tsv", "".join(rows))
        write_text(data / "test.tsv", "".join("%s\t%s\n" % tuple(item)
                                              for _, item in self.reference_items()))
        run_ranker.run(run_ranker.Settings(
            data_dir=str(data), output_dir=self.folder, max_seq_length=SEQ, do_train=True,
            do_predict=True, num_train_epochs=2.0, **dict(_COMMON, **self.files)))
        with open(os.path.join(self.folder, "test_results.tsv"), encoding="utf-8") as f:
            return [{"label": None, "scores": [float(line)]} for line in f]

    def decisions(self, answer):
        return ["%.2f" % answer["scores"][0]]

    def predictor_answers(self, items):
        return [{"label": None, "scores": [s]} for s in self.predictor().predict(
            [q for q, _ in items], [p for _, p in items])]

    def saved_model_answers(self, saved, items):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        queries = {q for q, _ in items}
        assert len(queries) == 1, queries  # one query, its candidates: a `rank` request
        out = saved.signatures["rank"](query=tf.constant(sorted(queries)),
                                       passages=tf.constant([[p for _, p in items]]))
        return [{"label": None, "scores": [float(x)]} for x in out["logits"].numpy()[0]]

    def litert_answers(self, predictor, items):
        return [{"label": None, "scores": [s]}
                for s in predictor.predict([q for q, _ in items], [p for _, p in items])]


# -- the encoder: extract_features of the classifier's folder ----------------------------

class Encoder(Head):
    name, runner, model_type, hf_head = "encoder", "extract_features", "encoder", "encoder"
    registry_head = "sentence embedding"

    def __init__(self, root, files, classifier_folder):
        super().__init__(root, files)
        self.folder = classifier_folder  # its encoder: no training of its own

    def train(self):
        import extract_features  # pylint: disable=import-outside-toplevel
        items = [item for _, item in self.reference_items()]
        assert not any("\n" in t for t in items)
        input_file = write_text(self.root / "input.txt", "".join(t + "\n" for t in items))
        output = str(self.root / "vectors.npy")
        extract_features.run(extract_features.Settings(
            input_file=input_file, output_file=output, init_checkpoint=self.folder,
            pooling="mean", layers="-1", output_format="npy", max_seq_length=SEQ,
            batch_size=4, **self.files))
        return list(np.load(output))

    def export_settings(self):
        return {"pooling": "mean", "layers": "-1"}

    def predictor(self):
        if self._predictor is None:
            import extract_features  # pylint: disable=import-outside-toplevel
            self._predictor = extract_features.SentenceEncoder(
                init_checkpoint=self.folder, pooling_mode="mean", layers=[-1],
                max_seq_length=SEQ, batch_size=8, **self.files)
        return self._predictor

    def decisions(self, answer):
        return [tuple(np.round(np.asarray(answer, np.float64), 3))]

    def predictor_answers(self, items):
        return list(self.predictor().encode(list(items)))

    def saved_model_answers(self, saved, items):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        return list(saved.signatures["embed"](text=tf.constant(items))["sentence_embedding"]
                    .numpy())

    def litert_answers(self, predictor, items):
        return list(predictor.predict(items))

    def peer_answer(self, answer):
        return np.asarray(answer, np.float32)

    def close(self):
        pass


# -- fill-mask: run_pretraining's masked-LM head (bert_tf2/export/masked_lm.py) ---------

def with_masks(text):
    """A fill-mask input of `text`: a [MASK] before it and, in a text of three or more
    blank-separated parts, in place of its second part (every mask within SEQ's cut)."""
    parts = text.split(" ")
    if len(parts) > 2:
        parts[1] = "[MASK]"
    return "[MASK] " + " ".join(parts)


def fill_mask_answer(masks):
    """A text's answer: per [MASK] its top-5 tokens, and their probabilities as scores."""
    return {"tokens": [[a["token"] for a in m] for m in masks],
            "scores": [[float(a["probability"]) for a in m] for m in masks]}


class FillMask(Head):
    """run_pretraining's folder; do_predict: extract_features --fill_mask_top_k's file."""
    name, runner, model_type, hf_head = "fill_mask", "run_pretraining", "masked_lm", "fill_mask"
    registry_head = "masked lm"
    # With --seed: the same answers whatever the process ran before (without, a run after
    # other trainings said "." to every input).
    train_steps = 30

    def make_kinds(self):
        return {kind: [with_masks(t) for t in texts] for kind, texts in texts_by_kind().items()}

    def train(self):
        import create_pretraining_data  # pylint: disable=import-outside-toplevel
        import extract_features  # pylint: disable=import-outside-toplevel
        import run_pretraining  # pylint: disable=import-outside-toplevel
        corpus = "\n\n".join("\n".join(train_texts(4, seed)) for seed in range(8)) + "\n"
        records = str(self.root / "records.tfrecord")
        create_pretraining_data.run(create_pretraining_data.Settings(
            input_file=write_text(self.root / "corpus.txt", corpus), output_file=records,
            vocab_file=self.files["vocab_file"], max_seq_length=SEQ, max_predictions_per_seq=5,
            dupe_factor=2, random_seed=1))
        run_pretraining.run(run_pretraining.Settings(
            input_file=records, output_dir=self.folder, do_train=True,
            num_train_steps=self.train_steps, num_warmup_steps=0, max_seq_length=SEQ,
            max_predictions_per_seq=5,
            bert_config_file=self.files["bert_config_file"], train_batch_size=8,
            learning_rate=3e-3, seed=1, save_checkpoints_steps=self.train_steps,
            iterations_per_loop=self.train_steps))
        # run_pretraining takes no vocabulary: beside its checkpoint, as a release has it.
        with open(self.files["vocab_file"], encoding="utf-8") as f:
            write_text(pathlib.Path(self.folder) / "vocab.txt", f.read())
        items = [item for _, item in self.reference_items()]
        output = str(self.root / "answers.jsonl")
        extract_features.run(extract_features.Settings(
            input_file=write_text(self.root / "input.txt", "".join(t + "\n" for t in items)),
            output_file=output, init_checkpoint=self.folder, fill_mask_top_k=5,
            max_seq_length=SEQ, **self.files))
        return [fill_mask_answer(r["masks"]) for r in _read_jsonl(output)]

    def predictor(self):
        if self._predictor is None:
            from bert_tf2.export import masked_lm  # pylint: disable=import-outside-toplevel
            self._predictor = masked_lm.Predictor(self.folder, max_seq_length=SEQ, batch_size=8,
                                                  **self.files)
        return self._predictor

    def export_settings(self):
        return dict(max_seq_length=SEQ, **self.files)

    def decisions(self, answer):
        return [tokens[0] for tokens in answer["tokens"]]  # each mask's first choice

    def predictor_answers(self, items):
        return [fill_mask_answer(m) for m in self.predictor().predict(list(items))]

    def saved_model_answers(self, saved, items):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        out = saved.signatures["serving_default"](text=tf.constant(items, tf.string))
        tokens, scores = out["tokens"].numpy(), out["probabilities"].numpy()
        return [{"tokens": [[t.decode("utf-8") for t in tokens[row][m]] for m in range(count)],
                 "scores": [[float(p) for p in scores[row][m]] for m in range(count)]}
                for row, count in enumerate(out["num_masks"].numpy())]

    def litert_answers(self, predictor, items):
        return [fill_mask_answer(m) for m in predictor.predict(list(items))]

    def hf_export(self):
        """convert_hf_checkpoint --model_type=masked_lm (BertForMaskedLM) of the folder."""
        import convert_hf_checkpoint  # pylint: disable=import-outside-toplevel
        out = str(self.root / "hf")
        try:
            convert_hf_checkpoint.run(convert_hf_checkpoint.Settings(
                direction="to_hf", init_checkpoint=self.folder, output_dir=out,
                model_type="masked_lm"))
        except ValueError as e:
            self._hf = Refused(str(e), at_export=True)
            return None
        return {"dir": out, "head": self.hf_head, "max_length": SEQ,
                "items": [i for k in KINDS for i in self.kinds[k]]}

    def close(self):
        pass


def head_classes():
    """{name: Head class} of the matrix's heads, in the order this module defines them (found:
    each Head subclass here with a name, a new head's too, with no list to extend)."""
    return {value.name: value for value in list(globals().values())
            if isinstance(value, type) and issubclass(value, Head) and value.name}


HEADS = tuple(head_classes())


def make_head_class(name):
    """The Head class called `name` (all but the encoder, which takes a classifier's folder)."""
    if name == Encoder.name:
        raise KeyError(name)
    return head_classes()[name]


def make_head(name, root, files, classifier=None):
    """The Head called `name` (trained: its reference answers in .reference)."""
    head = (Encoder(root, files, classifier.folder) if name == Encoder.name
            else make_head_class(name)(root, files))
    head.build()
    head.check_not_trivial()
    return head


# ---------------------------------------------------------------------------
# The cells and the matrix
# ---------------------------------------------------------------------------

class Cell(object):
    """What one door does with one kind of input, against do_predict: `value` is "="
    (every answer the same), "refused" (both refuse), "refused here" / "answers here"
    (one of them refuses), or the number of answers that differ; `detail` says more."""

    def __init__(self, value, detail=""):
        self.value, self.detail = value, detail

    @property
    def agrees(self):
        return self.value in ("=", "refused", "export refuses")

    def __str__(self):
        return str(self.value)


def compute_cell(head, door, kind):
    """The Cell of (head, door, kind)."""
    want = head.reference[kind]
    got = head.kind_answers(door, kind)
    if isinstance(got, Refused) and "\n" in str(got).strip():
        return Cell("not one line", str(got))
    if isinstance(got, Refused) and got.at_export:
        return Cell("export refuses", str(got))
    if isinstance(want, Refused) and isinstance(got, Refused):
        return Cell("refused", "do_predict: %s | %s: %s" % (want, door, got))
    if isinstance(want, Refused):
        return Cell("answers here", "do_predict: %s | %s answered %r" % (want, door, got))
    if isinstance(got, Refused):
        return Cell("refused here", "%s: %s" % (door, got))
    differing = count_differing(want, got)
    if differing == 0:
        return Cell("=")
    pairs = [(w, g) for w, g in zip(want, got) if not same_answer(w, g)][:2]
    return Cell(differing, "of %d; e.g. do_predict %r | %s %r" % (
        len(want), pairs[0][0] if pairs else want, door, pairs[0][1] if pairs else got))


MATRIX = {}  # (head, door, kind) -> Cell, filled as the tests run


def matrix_lines():
    """The matrix as text: a block per head, a row per door, a column per kind."""
    if not MATRIX:
        return []
    width = max(len(k) for k in KINDS)
    lines = ["parity matrix (do_predict vs each door; '=' same, 'refused' both refuse, "
             "a number: inputs that differ)"]
    for head in HEADS:
        doors = [d for d in DOORS if any((head, d, k) in MATRIX for k in KINDS)]
        if not doors:
            continue
        lines.append("%-16s" % head + "".join(("%" + str(width) + "s ") % k for k in KINDS))
        for door in doors:
            cells = [str(MATRIX.get((head, door, k), "-")) for k in KINDS]
            lines.append("  %-14s" % door + "".join(("%" + str(width) + "s ") % c
                                                    for c in cells))
    return lines


def run_hf_door(heads, root, python):
    """Converts every head's folder to_hf and has transformers answer all their inputs in
    one peer process; each head keeps its answers (or the conversion's refusal)."""
    request, asked = [], []
    for head in heads:
        if head.hf_head is not None:
            entry = head.hf_export()
            if entry is not None:
                request.append(entry)
                asked.append(head)
    if not request:
        return
    request_file = write_text(pathlib.Path(root) / "peer_request.json",
                              json.dumps({"folders": request}))
    out_file = str(pathlib.Path(root) / "peer_answers.json")
    subprocess.run([python, os.path.join(str(REPO_ROOT), "tests", "parity_peer.py"),
                    request_file, out_file], check=True, timeout=HANG_GUARD_SECONDS,
                   env=dict(os.environ, TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1"))
    with open(out_file, encoding="utf-8") as f:
        for head, found in zip(asked, json.load(f)):
            head.hf_answers(found)


# The cells where a door cannot carry the head's rule and says so in docs/huggingface.md
# (pytest.mark.xfail(strict=True): a cell that starts agreeing fails until its entry is
# deleted here). Every other cell equals do_predict; the SavedModel's and LiteRT's tagger
# and SQuAD cells listed here before the windows moved into those doors are gone.
_HF_TAGGER = ("transformers sees one window (truncation): the words past it get no tag; a "
              "word without WordPieces (U+200B, U+200D, U+3000 alone) gets none either, do_predict "
              "tags it")
_HF_CRF = _HF_TAGGER + "; and it decodes by argmax, not Viterbi (convert_hf_checkpoint notes it)"
_HF_HEAD_TAIL = ("--long_text=head_tail: transformers' tokenizer truncates (head only), "
                 "convert_hf_checkpoint notes it")

# The ranker's empty / blank passage: ours packs [CLS] query [SEP] (the reference's `if
# tokens_b`), transformers' tokenizer [CLS] query [SEP] [SEP] (docs/ranker.md; the HF export
# notes it).
_HF_EMPTY_B = ("an empty or blank second text: ours [CLS] A [SEP], transformers' tokenizer "
               "[CLS] A [SEP] [SEP]")

KNOWN_DIFFERENT = {
    ("ranker", "hf", "empty"): _HF_EMPTY_B,
    ("ranker", "hf", "whitespace"): _HF_EMPTY_B,
    ("long_head_tail", "hf", "two_windows"): _HF_HEAD_TAIL,
    ("long_head_tail", "hf", "three_windows"): _HF_HEAD_TAIL,
    ("long_head_tail", "hf", "mixed"): _HF_HEAD_TAIL,
    ("long_head_tail", "hf", "duplicates"): _HF_HEAD_TAIL,
    ("tagger", "hf", "two_windows"): _HF_TAGGER,
    ("tagger", "hf", "three_windows"): _HF_TAGGER,
    ("tagger", "hf", "unicode"): _HF_TAGGER,
    ("tagger", "hf", "whitespace"): _HF_TAGGER,
    ("tagger", "hf", "mixed"): _HF_TAGGER,
    ("tagger", "hf", "duplicates"): _HF_TAGGER,
    ("tagger_crf", "hf", "two_windows"): _HF_CRF,
    ("tagger_crf", "hf", "three_windows"): _HF_CRF,
    ("tagger_crf", "hf", "unicode"): _HF_CRF,
    ("tagger_crf", "hf", "whitespace"): _HF_CRF,
    ("tagger_crf", "hf", "mixed"): _HF_CRF,
    ("tagger_crf", "hf", "duplicates"): _HF_CRF,
}

# Cells that agree or not by the trained weights alone, with the small vocabulary (no
# ../shared): the HuggingFace door decodes a CRF tagger by argmax, and on the short inputs
# argmax gives Viterbi's tags with the model of ../shared's vocabulary (strict: equal) but not
# with the small one's (one sentence of three). Not strict there: pass or fail, no verdict.
MAY_DIFFER = {} if _shared_vocab() is not None else {("tagger_crf", "hf", "short"): _HF_CRF}


def cell_params(heads):
    """pytest params (head, door, kind) of the cells of `heads` (names), each head's doors
    together (the HuggingFace ones last: one peer process answers them all)."""
    params = []
    for door_group in (("predictor", "saved_model", "litert") + tuple(IDS_DOORS), ("hf",)):
        for head in heads:
            for door in door_group:
                for kind in KINDS:
                    reason = KNOWN_DIFFERENT.get((head, door, kind))
                    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                    if (head, door, kind) in MAY_DIFFER:
                        marks = [pytest.mark.xfail(strict=False,
                                                   reason=MAY_DIFFER[(head, door, kind)])]
                    params.append(pytest.param(head, door, kind, marks=marks,
                                               id="%s-%s-%s" % (head, door, kind)))
    return params


class Session(object):
    """The trained heads of the run (tests/trained.py: each trained once, shared with the
    door tests and the other worker), and the HuggingFace door's answers, made once."""

    def __init__(self, trained, root):
        self.trained, self.root = trained, root
        self.hf_done = set()
        self.hf_failed = {}  # head name -> its peer run's error

    def get(self, name):
        return self.trained.head(name)

    def hf(self, names):
        """The HuggingFace door's answers of the heads `names` (one peer process)."""
        python = peer_python()  # skips, or fails under BERT_TF2_REQUIRE_DOORS=1, without one
        failed = sorted(set(names) & set(self.hf_failed))
        if failed:  # their peer run failed in an earlier cell: the same error, not a NoneType
            pytest.fail("the HuggingFace door's peer run of %s failed: %s"
                        % (", ".join(failed), self.hf_failed[failed[0]]))
        wanted = [name for name in names if name not in self.hf_done]
        if wanted:
            try:
                run_hf_door([self.get(name) for name in wanted], self.root, python)
            except Exception as e:
                self.hf_failed.update((name, "%s: %s" % (type(e).__name__, e)) for name in wanted)
                raise
            self.hf_done.update(wanted)


def check_cell(session, heads, head, door, kind):
    """One cell: `head`'s answer through `door` on inputs of `kind` equals do_predict's (or
    both refuse); `heads`: the names the calling file checks (their HF door runs at once)."""
    if door == "hf":
        session.hf(heads)
        if session.get(head).hf_head is None:
            MATRIX[(head, door, kind)] = Cell("skip")
            pytest.skip("transformers has no span decoding to compare with run_squad's "
                        "(its question-answering pipeline has rules of its own)")
    cell = compute_cell(session.get(head), door, kind)
    MATRIX[(head, door, kind)] = cell
    assert cell.agrees, "%s, %s, %s: %s %s" % (head, door, kind, cell.value, cell.detail)
