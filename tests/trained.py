"""Each head's tiny model trained once per test run, for every file and both xdist workers.

The heads are tests/parity_helpers.py's (classifier single label / multi-label / regression,
long text by windows and by head + tail, tagger softmax / CRF, SQuAD v1.1 / v2.0, multiple
choice, and the encoder of the classifier's folder): each trained by its runner's
run(Settings) with do_predict on the parity matrix's inputs; exported by export_saved_model
(with --litert=fp32, and --openvino=fp32 / --onnx=fp32 when their extras are installed,
where its head_types entry carries LiteRT) when first asked for.

Where: a folder under the run's temporary root, `tmp_path_factory.getbasetemp().parent`
under pytest-xdist (the workers of one run share it), the session's own basetemp without
workers (never a folder of another run). One file lock per thing made: the first process
to ask makes it, then writes its marker (<name>.complete) last; any other process waits on
the lock and reuses it. A folder without its marker (a build that died) is made again.

Each training is checked as it ends (parity_helpers.Head.check_not_trivial): do_predict's
answers must decide more than one thing (labels, tags, spans, vectors), or the run fails
there, so a training made cheaper than the matrix can use shows at once.

The folders are shared: a test never writes into one. A test that needs to change a
folder copies it first (shutil.copytree to its tmp_path) and changes the copy.

Fixtures (registered in tests/conftest.py), all session-scoped:
  trained_heads: a TrainedHeads; .head(name) is the trained parity_helpers.Head of that
    name (parity_helpers.HEADS), .exported(name) the same with its export made.
  trained_<name> for classifier, multilabel, regression, tagger, tagger_crf, squad_v1,
    squad_v2, multiple_choice, encoder, ranker: trained_heads.head(name). A Head gives
    .folder (the run's output folder: checkpoint, model_settings.json, label list,
    do_predict's files), .files (vocab_file, bert_config_file settings), .kinds /
    .reference (its inputs and do_predict's answers), .export_dir and .saved_model()
    (exported once per run on first use), .predictor() (a Predictor of the folder).
"""
import contextlib
import json
import os
import pickle
import shutil

import pytest

from conftest import HANG_GUARD_SECONDS
from conftest import write_text

_COMPLETE = ".complete"


def shared_root(tmp_path_factory):
    """The folder the processes of this run share for the trained heads."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # pytest-N of the run, above each worker's popen-gwN
    root = base / "trained"
    root.mkdir(parents=True, exist_ok=True)
    return root


@contextlib.contextmanager
def _locked(path):
    """An exclusive lock on the file `path` between processes (filelock when installed,
    else fcntl.flock); a hang guard of HANG_GUARD_SECONDS while waiting with filelock."""
    try:
        import filelock  # pylint: disable=import-outside-toplevel
    except ImportError:
        filelock = None
    if filelock is not None:
        with filelock.FileLock(str(path), timeout=HANG_GUARD_SECONDS):
            yield
        return
    import fcntl  # pylint: disable=import-outside-toplevel
    with open(str(path), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def built_once(root, name, build):
    """root/name, made by build(folder) in the first process of the run that asks (under a
    lock): returns (folder, what build returned, kept as JSON). The marker
    root/<name>.complete (holding that JSON) is written last."""
    folder, marker = root / name, root / (name + _COMPLETE)
    with _locked(root / (name + ".lock")):
        if not marker.is_file():
            if folder.exists():  # a build that died half way
                shutil.rmtree(str(folder))
            made = build(folder)
            marker.write_text(json.dumps(made))
        return folder, json.loads(marker.read_text())


class TrainedHeads(object):
    """The trained heads of this run, each made (or found) when first asked for."""

    def __init__(self, root, scratch):
        self.root, self.scratch = root, scratch
        self.heads = {}
        self.failed = {}  # name: the error of its build (raised again, not built again)
        self._files = None

    def files(self):
        """{vocab_file, bert_config_file} of every head (written once per run)."""
        import parity_helpers as ph  # pylint: disable=import-outside-toplevel
        if self._files is None:
            folder, _ = built_once(self.root, "model_files",
                                   lambda folder: sorted(ph.model_files(folder)))
            self._files = dict(vocab_file=str(folder / "vocab.txt"),
                               bert_config_file=str(folder / "bert_config.json"))
        return self._files

    def head(self, name):
        """The trained Head `name` of parity_helpers.HEADS (its reference answers in
        .reference, do_predict's files in .folder; .saved_model() exports it once)."""
        if name in self.failed:  # one failed training, not one per test asking
            raise RuntimeError("the %s head failed to build earlier in this process: %s"
                               % (name, self.failed[name]))
        if name not in self.heads:
            try:
                self.heads[name] = self._make(name)
            except Exception as error:
                self.failed[name] = "%s: %s" % (type(error).__name__, error)
                raise
        return self.heads[name]

    def exported(self, name):
        """head(name) with its SavedModel (+ LiteRT fp32) in .export_dir."""
        head = self.head(name)
        _export_once(head)
        return head

    def _new(self, name):
        import parity_helpers as ph  # pylint: disable=import-outside-toplevel
        if name == "encoder":
            return ph.Encoder(self.root, self.files(), self.head("classifier").folder)
        return ph.make_head_class(name)(self.root, self.files())

    def _make(self, name):
        made = {}

        def build(folder):
            head = self._new(name)
            assert str(head.root) == str(folder), (head.root, folder)
            head.build()
            head.check_not_trivial()  # a training too cheap to tell the doors apart fails here
            with open(str(folder / "reference.pkl"), "wb") as f:
                pickle.dump(head.reference, f)
            made["head"] = head

        folder, _ = built_once(self.root, name, build)
        head = made.get("head")
        if head is None:
            head = self._new(name)
            with open(str(folder / "reference.pkl"), "rb") as f:
                head.reference = pickle.load(f)
        head.scratch = self.scratch / name
        head.exporter = _export_once
        return head

    def close(self):
        for head in self.heads.values():
            head.close()


@contextlib.contextmanager
def conversions_in_process():
    """Exports within convert in this process (native_steps.IN_PROCESS), for the exports
    whose tests check the models, not the child process; the tests of the child itself (a
    crash in a native step, a script without a main guard, --export_base, the fixed cost,
    an odd export folder) keep the real child. Each child's start, TensorFlow's import and
    the load of the function (about 6 s) is saved per export."""
    from bert_tf2.export import native_steps  # pylint: disable=import-outside-toplevel
    before, native_steps.IN_PROCESS = native_steps.IN_PROCESS, True
    try:
        yield
    finally:
        native_steps.IN_PROCESS = before


def _export_once(head):
    """The head's SavedModel (+ LiteRT fp32) made once per run (tests/trained.py's lock);
    sets head.export_error (the --litert refusal of a head without LiteRT)."""
    def build(folder):
        assert str(folder) == head.export_dir, (folder, head.export_dir)
        with conversions_in_process():
            head.export()
        return {"export_error": head.export_error, "export_errors": head.export_errors}

    _, made = built_once(head.root, "export", build)
    head.export_error = made["export_error"]
    head.export_errors = made.get("export_errors", {})


@pytest.fixture(scope="session")
def trained_heads(tmp_path_factory):
    """Every head's tiny model, trained once per run and shared by all files and workers
    (tests/trained.py). The folders are shared: copy one before changing it."""
    made = TrainedHeads(shared_root(tmp_path_factory), tmp_path_factory.mktemp("heads"))
    yield made
    made.close()


def _head_fixture(name):
    def fixture(trained_heads):  # pylint: disable=redefined-outer-name
        return trained_heads.head(name)
    fixture.__name__ = "trained_" + name
    fixture.__doc__ = ("The trained %s head of tests/trained.py (shared across files and "
                       "workers: never write into its folders; copy one to change it)." % name)
    return pytest.fixture(scope="session", name="trained_" + name)(fixture)


trained_classifier = _head_fixture("classifier")
trained_multilabel = _head_fixture("multilabel")
trained_regression = _head_fixture("regression")
trained_tagger = _head_fixture("tagger")
trained_tagger_crf = _head_fixture("tagger_crf")
trained_squad_v1 = _head_fixture("squad_v1")
trained_squad_v2 = _head_fixture("squad_v2")
trained_multiple_choice = _head_fixture("multiple_choice")
trained_encoder = _head_fixture("encoder")
trained_ranker = _head_fixture("ranker")


@pytest.fixture(scope="session")
def parity_session(trained_heads, tmp_path_factory):
    """The parity matrix's heads (trained_heads) and their HuggingFace door's answers, made
    once per process for both matrix files."""
    import parity_helpers as ph  # pylint: disable=import-outside-toplevel
    return ph.Session(trained_heads, tmp_path_factory.mktemp("parity"))


_BEST_WORDS = ["good", "great", "bad", "awful", "the", "screen", "is", "very"]


def classifier_with_best_task(folder):
    """run_classifier's settings of trained_classifier_with_best's tiny csv task in `folder`
    (data/ of 16 train, 4 dev and 4 test rows labelled neg / pos, vocab.txt, bert_config.json
    of one layer of 16 with the exact GELU; output_dir folder/out): the paths only."""
    folder = str(folder)
    return dict(task_name="csv", data_dir=os.path.join(folder, "data"),
                vocab_file=os.path.join(folder, "vocab.txt"),
                bert_config_file=os.path.join(folder, "bert_config.json"), max_seq_length=16,
                train_batch_size=4, seed=1, output_dir=os.path.join(folder, "out"))


def _build_classifier_with_best(folder):
    """Writes the task's files and trains 4 steps, evaluated at steps 2 and 4 by accuracy
    with a learning rate so small that the accuracy stays flat while the weights move: best/
    keeps step 2 (the first of equals), the latest is step 4 and differs from it."""
    import run_classifier  # pylint: disable=import-outside-toplevel
    task = classifier_with_best_task(folder)
    rows = ['%d,"the screen is %s",%s\n' % (i, _BEST_WORDS[i % 4],
                                            "neg" if i % 4 > 1 else "pos") for i in range(24)]
    for name, part in (("train", rows[:16]), ("dev", rows[16:20]), ("test", rows[20:])):
        write_text(os.path.join(task["data_dir"], name + ".csv"),
                   "id,text,label\n" + "".join(part))
    write_text(task["vocab_file"], "".join(
        t + "\n" for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + _BEST_WORDS))
    write_text(task["bert_config_file"], json.dumps({
        "vocab_size": 5 + len(_BEST_WORDS), "hidden_size": 16, "num_hidden_layers": 1,
        "num_attention_heads": 2, "intermediate_size": 32, "max_position_embeddings": 16,
        "type_vocab_size": 2, "hidden_act": "gelu_exact", "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1, "initializer_range": 0.02}))
    result = run_classifier.run(run_classifier.Settings(
        do_train=True, do_eval=True, num_train_epochs=1.0, learning_rate=1e-7,
        eval_every_n_steps=2, best_metric="eval_accuracy", **task))
    return {"global_step": result.global_step,
            "best_checkpoint": os.path.relpath(result.best_checkpoint, str(folder))}


@pytest.fixture(scope="session")
def trained_classifier_with_best(tmp_path_factory):
    """The folder of classifier_with_best_task, trained once per run (shared across files
    and workers: copy it before changing anything)."""
    folder, made = built_once(shared_root(tmp_path_factory), "classifier_with_best",
                              _build_classifier_with_best)
    assert made == {"global_step": 4, "best_checkpoint": "out/best/model.ckpt-2"}, made
    return folder


def _build_ner_crf(folder):
    """run_ner --crf (tests/test_run_ner.py's TINY model, 16-piece windows 8 apart) trained
    40 epochs on test_ner_data's IOB2 sentences given as tables (data_dir a dict: train and
    dev those sentences with their tags, test their words), evaluated and tagging the test
    sentences: folder/vocab.txt, bert_config.json, out/."""
    import run_ner  # pylint: disable=import-outside-toplevel
    from test_ner_data import IOB2, VOCAB  # pylint: disable=import-outside-toplevel
    from test_run_ner import TINY  # pylint: disable=import-outside-toplevel
    sentences = [[tuple(line.split()) for line in block.splitlines()]
                 for block in IOB2.strip().split("\n\n")]
    tables = {"train": sentences, "dev": sentences,
              "test": [[word for word, _ in s] for s in sentences]}
    result = run_ner.run(run_ner.Settings(
        data_dir=tables, output_dir=str(folder / "out"),
        vocab_file=write_text(folder / "vocab.txt", "\n".join(VOCAB) + "\n"),
        bert_config_file=write_text(folder / "bert_config.json", json.dumps(TINY)),
        max_seq_length=16, doc_stride=8, train_batch_size=4, eval_batch_size=3,
        predict_batch_size=3, learning_rate=3e-3, seed=1, save_checkpoints_steps=1000,
        num_train_epochs=40.0, crf=True, do_train=True, do_eval=True, do_predict=True))
    return {"global_step": result.global_step}


@pytest.fixture(scope="session")
def trained_ner_crf(tmp_path_factory):
    """The folder of _build_ner_crf, trained once per run (shared across files and workers:
    never write into it)."""
    folder, made = built_once(shared_root(tmp_path_factory), "ner_crf", _build_ner_crf)
    assert made == {"global_step": 30}, made  # 3 sentences x 40 epochs / 4
    return folder
