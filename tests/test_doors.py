"""Every Python door (each head's Predictor, masked_lm.Predictor, LiteRTPredictor) shares one
lifecycle, bert_tf2/base/doors.py (issue 91 items 3 and 10): the doors are found by a scan
of the sources, so a new one that skips it fails here; each is refused in one line in a
forked child (the fix for multiprocessing and gunicorn named), built ready (no first call
builds the tokenizer's tables, from any number of threads), answers threads as it answers
one caller, and installs no signal handler."""
import ast
import importlib
import os
import select
import signal
import threading

import numpy as np
import pytest

from bert import tokenization
from bert_tf2.base import doors
from bert_tf2.export import masked_lm
from bert_tf2.text import fast_batch
from conftest import HANG_GUARD_SECONDS, REPO_ROOT, write_text
import registry_lists

# The doors there are today: the scan must find at least these (a scan that finds nothing
# would check nothing).
KNOWN_DOORS = {("run_classifier", "Predictor"), ("run_ner", "Predictor"),
               ("run_squad", "Predictor"), ("run_multiple_choice", "Predictor"),
               ("bert_tf2.export.masked_lm", "Predictor"),
               ("bert_tf2.export.litert_predictor", "LiteRTPredictor"),
               ("bert_tf2.export.openvino_predictor", "OpenVINOPredictor"),
               ("bert_tf2.export.onnx_predictor", "ONNXPredictor")}


def _door_sources():
    """(module name, class name) of every public class named *Predictor in the root's
    faces and the package."""
    found = set()
    for where, tree in registry_lists.parsed_sources():
        module = where[:-len(".py")].replace(os.sep, ".")
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name.endswith("Predictor") and \
                    not node.name.startswith("_"):
                found.add((module, node.name))
    return found


def door_classes(leaves=False):
    """Every door class (the scan's), imported; `leaves`: those users make (not a base of
    others, as model_folder.FolderPredictor is of the runners' Predictors)."""
    found = [getattr(importlib.import_module(module), name)
             for module, name in sorted(_door_sources())]
    if leaves:
        found = [c for c in found if not any(o is not c and issubclass(o, c) for o in found)]
    return found


def _at_once(function, count):
    """{i: function(i), or the error it raised} of `count` threads started together."""
    start, results = threading.Barrier(count), {}

    def call(index):
        start.wait(HANG_GUARD_SECONDS)
        try:
            results[index] = function(index)
        except Exception as error:  # pylint: disable=broad-except
            results[index] = error

    threads = [threading.Thread(target=call, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HANG_GUARD_SECONDS)
    return results


def test_every_door_class_is_found_and_shares_the_one_lifecycle():
    found = _door_sources()
    assert KNOWN_DOORS <= found, KNOWN_DOORS - found
    outside = [cls.__qualname__ for cls in door_classes() if not issubclass(cls, doors.Door)]
    assert not outside, "doors not built on bert_tf2.base.doors.Door: %s" % outside


# A door's public methods that make no call of its model (the others start with
# check_usable, or model_folder.predict_call, which calls it).
_NOT_CALLS = {"close", "describe_door", "once", "open_door", "ready_tokenizer", "check_usable"}


def test_every_public_call_of_a_door_is_refused_after_close_or_fork():
    """A door's predict (batch, answers, ...) starts with check_usable: a new method that
    skips it, or a door that does, fails here."""
    unchecked = []
    for module, name in sorted(_door_sources()):
        path = REPO_ROOT / (module.replace(".", "/") + ".py")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        door = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
        for method in door.body:
            if not isinstance(method, ast.FunctionDef) or method.name.startswith("_") or \
                    method.name in _NOT_CALLS:
                continue
            decorated = any("predict_call" in ast.unparse(d) for d in method.decorator_list)
            if not decorated and "check_usable" not in ast.unparse(method):
                unchecked.append("%s.%s.%s" % (module, name, method.name))
    assert not unchecked, unchecked


# ---------------------------------------------------------------------------
# Fork: one RuntimeError naming the fix, never a hang
# ---------------------------------------------------------------------------

def in_forked_child(calls):
    """Runs each of `calls` in a child forked from this process; returns what each gave
    ("answered" or "<error type>: <message>") and the child's exit code (0: it ended
    by itself)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only Python, never TensorFlow (it would hang)
        code = 0
        try:
            lines = []
            for call in calls:
                try:
                    call()
                    lines.append("answered")
                except Exception as error:  # pylint: disable=broad-except
                    lines.append("%s: %s" % (type(error).__name__, error))
            os.write(write_end, "\n".join(lines).encode("utf-8"))
        except BaseException:  # pylint: disable=broad-except
            code = 3
        os._exit(code)  # pylint: disable=protected-access
    os.close(write_end)
    try:
        ready, _, _ = select.select([read_end], [], [], HANG_GUARD_SECONDS)
        if not ready:
            os.kill(pid, signal.SIGKILL)
        assert ready, "the forked child hung"
        report = os.read(read_end, 1 << 20).decode("utf-8").splitlines()
    finally:
        os.close(read_end)
        _, status = os.waitpid(pid, 0)
    return report, os.waitstatus_to_exitcode(status)


def _assert_fork_refusals(report, count):
    assert len(report) == count, report
    for line in report:
        assert line.startswith("RuntimeError: "), line
        assert "was forked from pid %d" % os.getpid() in line, line
        for fix in ("'spawn'", "gunicorn", "--preload", "post_fork"):
            assert fix in line, (fix, line)


def test_every_door_is_refused_in_a_forked_child_in_one_line(tmp_path):
    """Issue 91 item 10: each door class made in a child forked after a door was made
    here is one RuntimeError naming the fix (multiprocessing's spawn, gunicorn's
    --preload / post_fork), before it reads anything (before: masked_lm.Predictor and
    LiteRTPredictor went on, and masked_lm's hung in TensorFlow); so is a door made
    here and used there."""
    made_here = doors.Door()
    made_here.open_door("a door of the test")  # TensorFlow "ran" here
    missing = str(tmp_path / "no_such_model")
    calls = [lambda cls=cls: cls(missing) for cls in door_classes(leaves=True)]
    calls.append(made_here.check_usable)
    report, code = in_forked_child(calls)
    assert code == 0
    _assert_fork_refusals(report, len(calls))
    assert all(line.splitlines() == [line] for line in report)


# ---------------------------------------------------------------------------
# Built ready: the first long texts from several threads build nothing
# ---------------------------------------------------------------------------

def test_character_tables_are_built_once_for_threads_asking_at_once(monkeypatch):
    """Issue 91 item 3: 16 threads each sending a first long text built the tables
    (6.6 MB, a second) once each: 10-28 s a call and 1.4 GiB more. Now one builds them,
    the others wait for it."""
    built = []

    class Counting(object):
        def __init__(self, probe):
            del probe
            built.append(threading.get_ident())
            threading.Event().wait(0.2)  # long enough for every thread to ask meanwhile

    monkeypatch.setattr(fast_batch, "_TABLES", None)
    monkeypatch.setattr(fast_batch, "_CharacterTables", Counting)
    got = _at_once(lambda i: fast_batch._character_tables(), 8)  # pylint: disable=protected-access
    assert len(built) == 1 and len({id(t) for t in got.values()}) == 1
    assert isinstance(got[0], Counting)


def test_a_tokenizers_batch_path_is_built_once_and_by_prepare_batch(tmp_path, monkeypatch):
    """One FullTokenizer's first batch calls from threads at once build its batch path
    once (before: each thread built a BatchPath and a FastBatchTokenizer of its own);
    prepare_batch() builds it beforehand, so a later call builds nothing."""
    vocab = write_text(tmp_path / "vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\nfilm\n")
    real_build, builds = fast_batch.build, []

    def slow_build(full_tokenizer):
        builds.append(1)
        threading.Event().wait(0.2)
        return real_build(full_tokenizer)

    monkeypatch.setattr(fast_batch, "build", slow_build)
    monkeypatch.setattr(fast_batch, "SMALL_BATCH_CHARS", 0)
    tokenizer = tokenization.FullTokenizer(vocab)
    results = _at_once(lambda i: tokenizer.tokenize_batch(["the film"] * 3), 6)
    assert len(builds) == 1 and list(results.values()) == [[["the", "film"]] * 3] * 6

    ready = tokenization.FullTokenizer(vocab)
    ready.prepare_batch()
    assert len(builds) == 2

    def refused(full_tokenizer):
        raise AssertionError("built on a call, not when made")

    monkeypatch.setattr(fast_batch, "build", refused)
    assert ready.tokenize_batch(["the film"]) == [["the", "film"]]


# ---------------------------------------------------------------------------
# The doors themselves: masked_lm.Predictor (the shared tiny checkpoint)
# ---------------------------------------------------------------------------

def _handlers():
    """Every catchable signal's handler in this process."""
    return {s: signal.getsignal(s) for s in signal.valid_signals()
            if s not in (signal.SIGKILL, signal.SIGSTOP)}


@pytest.fixture(scope="module")
def fill_mask(shared_dir):
    before = _handlers()
    prefix = str(shared_dir / "data" / "tf1_checkpoints" / "kerasbert_tiny" / "bert_model.ckpt")
    predictor = masked_lm.Predictor(prefix, batch_size=2)
    return {"predictor": predictor, "handlers_before": before}


_MASKED = ["all work and [MASK] play", "[MASK] work", "jack makes a [MASK] play makes jack",
           "a [MASK] boy and [MASK] work", "[MASK]", "play [MASK] all work and no play"]


def test_the_fill_mask_door_serves_threads_as_one_caller(fill_mask):
    """Threads whose first calls come at once (each a new length and mask count) get what
    serial calls give; the step was traced once, when the predictor was made (before:
    traced again per new shape, once per thread at a time)."""
    predictor = fill_mask["predictor"]
    turns = lambda i: predictor.predict(_MASKED[i:] + _MASKED[:i])
    results = _at_once(turns, len(_MASKED))
    assert [results[i] for i in range(len(_MASKED))] == [turns(i) for i in range(len(_MASKED))]


def test_the_fill_mask_door_installs_no_signal_handler(fill_mask):
    fill_mask["predictor"].predict(_MASKED)
    assert _handlers() == fill_mask["handlers_before"]


def test_a_fill_mask_door_used_in_a_forked_child_is_refused_not_hung(fill_mask):
    """Issue 91 item 10: masked_lm.Predictor used in a child forked after it ran hung
    for ever."""
    predictor = fill_mask["predictor"]
    predictor.predict(_MASKED[:2])
    report, code = in_forked_child([lambda: predictor.predict(_MASKED[:2])])
    assert code == 0
    _assert_fork_refusals(report, 1)
    assert "masked_lm.Predictor" in report[0]


# ---------------------------------------------------------------------------
# The fill-mask answers: the k best without sorting the vocabulary (item 12)
# ---------------------------------------------------------------------------

def _old_top(p, k):
    """The ids the fill-mask door gave before issue 91: a stable sort of the vocabulary."""
    return np.argsort(-p, kind="stable")[:k]


def test_top_ids_are_the_whole_sorts_ids_ties_and_order_included():
    rng = np.random.default_rng(7)
    for trial in range(400):
        size = int(rng.integers(1, 60))
        # Few distinct values: ties everywhere, at the k-th place too; zeros of both signs.
        p = rng.integers(0, 4, size).astype(np.float32) / 4
        p[rng.random(size) < 0.1] = -0.0
        if trial % 7 == 0:
            p[rng.integers(0, size)] = np.nan
        for k in (1, 2, 3, 5, size, size + 3):
            assert masked_lm.top_ids(p, k).tolist() == _old_top(p, k).tolist(), (p, k)


def test_top_ids_keep_tf_top_k_order_the_saved_models():
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    p = np.array([0.1, 0.3, 0.3, 0.05, 0.3, 0.25, 0.3], np.float32)
    assert masked_lm.top_ids(p, 3).tolist() == [1, 2, 4]
    assert tf.math.top_k(p, 3).indices.numpy().tolist() == [1, 2, 4]


def test_decode_sorts_no_whole_vocabulary_and_answers_as_before(monkeypatch):
    """Issue 91 item 12: decode sorted the whole vocabulary per [MASK] (8.7x the
    SavedModel's call on 32 texts); its answers (ids, probabilities, order, ties) stay."""
    vocab_size, top_k = 30522, 5
    rng = np.random.default_rng(3)
    probabilities = rng.random((4, 2, vocab_size)).astype(np.float32)
    probabilities[0, 0, [10, 20, 30, 40, 50, 60]] = 2.0  # a tie across the k-th place
    probabilities[1, 1, :] = 0.5  # everything tied

    class Head(object):
        token_of = staticmethod(lambda i: "t%d" % i)

    head = Head()
    head.top_k = top_k
    counts = [2, 2, 1, 0]
    expected = [[[{"token": "t%d" % i, "token_id": int(i), "probability": float(p[i])}
                  for i in _old_top(p, top_k)]
                 for p in probabilities[row, :count]] for row, count in enumerate(counts)]
    real_argsort = np.argsort

    def small_sorts_only(values, *args, **kwargs):
        assert np.size(values) < vocab_size, "the whole vocabulary sorted"
        return real_argsort(values, *args, **kwargs)

    monkeypatch.setattr(np, "argsort", small_sorts_only)
    assert masked_lm.MaskedLM.decode(head, probabilities, counts) == expected


# ---------------------------------------------------------------------------
# A runner's door: run_classifier.Predictor (the run's shared trained classifier)
# ---------------------------------------------------------------------------

# A text of a few hundred characters: the batch tokenizer's path (SMALL_BATCH_CHARS).
_LONG = " ".join("the film was good and %d people liked it" % i for i in range(12))


@pytest.fixture(scope="module")
def classifier(trained_classifier):
    """A Predictor of its own over the run's shared trained classifier (tests/trained.py)."""
    import run_classifier  # pylint: disable=import-outside-toplevel
    before = _handlers()
    predictor = run_classifier.Predictor(trained_classifier.folder, batch_size=4)
    yield {"predictor": predictor, "handlers_before": before,
           "folder": trained_classifier.folder}
    predictor.close()


@pytest.mark.slow
def test_a_runners_door_is_built_ready_and_serves_threads_as_one_caller(classifier,
                                                                       monkeypatch):
    """Issue 91 item 3: the first long texts, from 8 threads at once, build nothing (the
    tokenizer's batch path was built when the predictor was made) and get the answers of
    serial calls."""
    predictor = classifier["predictor"]

    def refused(full_tokenizer):
        raise AssertionError("the batch path built on a call, not when the door was made")

    monkeypatch.setattr(fast_batch, "build", refused)
    texts = ["%s %d" % (_LONG, i) for i in range(8)]
    turns = lambda i: predictor.predict(texts[i:] + texts[:i])
    results = _at_once(turns, 8)  # the first long texts, from 8 threads at once
    assert [results[i] for i in range(8)] == [turns(i) for i in range(8)]


@pytest.mark.slow
def test_a_runners_door_installs_no_signal_handler(classifier):
    """Issue 91 item 10: a Predictor installed its own SIGTERM handler, which ended the
    process with exit code 143 (gunicorn's workers: "exited with code 143" on a normal
    stop). Making and using a door leaves every handler as the program set it."""
    classifier["predictor"].predict(["a good film", _LONG])
    assert _handlers() == classifier["handlers_before"]


@pytest.mark.slow
def test_a_runners_door_used_in_a_forked_child_is_refused_not_hung(classifier):
    predictor = classifier["predictor"]
    report, code = in_forked_child([lambda: predictor.predict(["a good film"])])
    assert code == 0
    _assert_fork_refusals(report, 1)
    assert report[0].startswith("RuntimeError: run_classifier.Predictor: ")


def _served_docs_files():
    """docs/serving.md's gunicorn example, as its two files {name: text}: the block's
    `# gunicorn.conf.py` part and its `# app.py` part."""
    text = (REPO_ROOT / "docs" / "serving.md").read_text(encoding="utf-8")
    (block,) = [b for b in text.split("```python\n")[1:]
                if b.startswith("# gunicorn.conf.py")]
    block = block.split("```")[0]
    conf, app = block.split("# app.py\n")
    return {"gunicorn_conf.py": conf, "app.py": app}


_PREFORK_SERVER = """
import os, sys
sys.path[:0] = [%(here)r, %(repo)r]
import app                   # gunicorn --preload: the master imports the application
import gunicorn_conf
answers = []
for worker in range(2):      # the master forks its workers
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            gunicorn_conf.post_fork(None, None)   # gunicorn calls it in each worker
            os.write(write_end, repr(app.load().predict(%(texts)r)).encode("utf-8"))
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    _, status = os.waitpid(pid, 0)
    answers.append((os.waitstatus_to_exitcode(status), os.read(read_end, 1 << 20).decode()))
print(repr(answers))
"""


@pytest.mark.slow
def test_the_served_docs_prefork_pattern_answers_in_every_worker(classifier, tmp_path):
    """docs/serving.md's gunicorn advice, run as gunicorn runs it (no gunicorn here: its
    master's --preload import, then os.fork per worker and post_fork in each): every
    worker makes its own Predictor after the fork and answers as the folder's Predictor
    in this process does, none hangs."""
    import subprocess  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel
    for name, text in _served_docs_files().items():
        write_text(tmp_path / name, text.replace('"reviews_out"', repr(classifier["folder"])))
    texts = ["a good film", _LONG]
    script = _PREFORK_SERVER % {"here": str(tmp_path), "repo": str(REPO_ROOT), "texts": texts}
    temp = tmp_path / "tmp"  # the workers' Predictors' folders (os._exit leaves them)
    temp.mkdir()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=HANG_GUARD_SECONDS, cwd=str(tmp_path), check=False,
                          env=dict(os.environ, TMPDIR=str(temp)))
    assert done.returncode == 0, done.stderr[-3000:]
    answers = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    expected = repr(classifier["predictor"].predict(texts))
    assert answers == [(0, expected), (0, expected)], done.stderr[-3000:]


# ---------------------------------------------------------------------------
# LiteRTPredictor, OpenVINOPredictor, ONNXPredictor (the shared classifier's export, fp32)
# ---------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("module, name, extra", [
    ("bert_tf2.export.litert_predictor", "LiteRTPredictor", "ai_edge_litert"),
    ("bert_tf2.export.openvino_predictor", "OpenVINOPredictor", "openvino"),
    ("bert_tf2.export.onnx_predictor", "ONNXPredictor", "onnxruntime")])
def test_the_runtime_doors_are_built_ready_serve_threads_and_refuse_a_fork(
        trained_heads, monkeypatch, module, name, extra):
    """Issues 91 (items 3, 10) and 92: the LiteRT, OpenVINO and ONNX Runtime doors (one base,
    ids_predictor.IdsPredictor): 8 threads' first long texts at once build nothing and get
    serial calls' answers, no signal handler is installed, a forked child's calls are one
    RuntimeError each."""
    pytest.importorskip(extra)
    door = getattr(importlib.import_module(module), name)
    before = _handlers()
    predictor = door(trained_heads.exported("classifier").export_dir, variant="fp32")

    def refused(full_tokenizer):
        raise AssertionError("the batch path built on a call, not when the door was made")

    monkeypatch.setattr(fast_batch, "build", refused)
    texts = ["%s %d" % (_LONG, i) for i in range(8)]
    turns = lambda i: predictor.predict(texts[i:] + texts[:i])
    results = _at_once(turns, 8)
    assert [results[i] for i in range(8)] == [turns(i) for i in range(8)]
    assert _handlers() == before
    report, code = in_forked_child([lambda: predictor.predict(["a good film"])])
    assert code == 0
    _assert_fork_refusals(report, 1)
    assert report[0].startswith("RuntimeError: %s: " % name)
    predictor.close()
    with pytest.raises(RuntimeError, match=r"^%s of \S+ is closed \(close\(\) was called\)"
                                           % name):
        predictor.batch(["a good film"])
