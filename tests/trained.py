"""Each head's tiny model trained once per test run, for every file and both xdist workers.

The heads are tests/parity_helpers.py's (classifier single label / multi-label / regression,
long text by windows and by head + tail, tagger softmax / CRF, SQuAD v1.1 / v2.0, multiple
choice, and the encoder of the classifier's folder): each is trained by its runner's
run(Settings) with --do_predict on the parity matrix's inputs, then exported once by
export_saved_model (with --litert=fp32 where its head_types entry carries LiteRT).

Where: a folder under the run's temporary root, `tmp_path_factory.getbasetemp().parent`
under pytest-xdist (the workers of one run share it), the session's own basetemp without
workers (never a folder of another run). One file lock per head: the first process to ask
trains it, writes its do_predict answers (reference.pkl) and a `complete` marker last; any
other process waits on the lock and reuses it. A folder without the marker (a build that
died) is removed and made again.

The folders are shared: a test never writes into one. A test that needs to change a
folder copies it first (shutil.copytree to its tmp_path) and changes the copy.

Fixtures (registered in tests/conftest.py):
  trained_heads   session: a TrainedHeads; .head(name) is the trained parity_helpers.Head
  trained_tagger, trained_tagger_crf, trained_classifier, trained_multilabel,
  trained_regression, trained_squad_v1, trained_squad_v2, trained_multiple_choice
                  session: that one Head (its .folder, .export_dir, .files, .reference)
"""
import contextlib
import os
import pickle
import shutil

import pytest

from conftest import HANG_GUARD_SECONDS

_COMPLETE = "complete"


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
    """root/name, made by build(folder) in the first process that asks (under a lock);
    returns (folder, built_here). The `complete` marker is written last."""
    folder = root / name
    with _locked(root / (name + ".lock")):
        if (folder / _COMPLETE).is_file():
            return folder, False
        if folder.exists():  # a build that died half way
            shutil.rmtree(str(folder))
        folder.mkdir(parents=True)
        build(folder)
        (folder / _COMPLETE).write_text("complete\n")
    return folder, True


class TrainedHeads(object):
    """The trained heads of this run, each made (or found) when first asked for."""

    def __init__(self, root, scratch):
        self.root, self.scratch = root, scratch
        self.heads = {}
        self._files = None

    def files(self):
        """{vocab_file, bert_config_file} of every head (written once per run)."""
        import parity_helpers as ph  # pylint: disable=import-outside-toplevel
        if self._files is None:
            folder, _ = built_once(self.root, "model_files", ph.model_files)
            self._files = dict(vocab_file=str(folder / "vocab.txt"),
                               bert_config_file=str(folder / "bert_config.json"))
        return self._files

    def head(self, name):
        """The trained, exported Head `name` of parity_helpers.HEADS (its reference answers
        in .reference, do_predict's files in .folder, the SavedModel in .export_dir)."""
        if name not in self.heads:
            self.heads[name] = self._make(name)
        return self.heads[name]

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
            head.saved_model()  # the SavedModel and LiteRT fp32, or the export's refusal
            with open(str(folder / "reference.pkl"), "wb") as f:
                pickle.dump({"reference": head.reference, "export_error": head.export_error},
                            f)
            made["head"] = head

        folder, _ = built_once(self.root, name, build)
        head = made.get("head")
        if head is None:
            head = self._new(name)
            with open(str(folder / "reference.pkl"), "rb") as f:
                saved = pickle.load(f)
            head.reference, head.export_error = saved["reference"], saved["export_error"]
        head.scratch = self.scratch / name
        return head

    def close(self):
        for head in self.heads.values():
            head.close()


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
