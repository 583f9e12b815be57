"""Shared pytest fixtures: where ../shared is, and the repo root on sys.path."""
import os
import pathlib
import sys

import pytest

# The suite's processes (both xdist workers and every child they start) import TensorFlow
# with TF_USE_LEGACY_KERAS=1: TF 2.20's own import then loads tf_keras's optimizers, which
# bert-tf2 imports anyway, instead of Keras 3's, which it never uses (about 1.2 CPU s less
# per process; bert-tf2 names tf_keras everywhere, never tf.keras: test_layout checks it).
# What the variable changes, tf.keras / tf.compat.v1.layers, is what a fork sees, so
# the processes that run a fork's or a user's view (tests/*_graph.py,
# reference_fork_runs.py, user_environ() below) take it out again. A value of your own
# (TF_USE_LEGACY_KERAS=0 make test: every process as a user runs it) is kept.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

# Before any test module imports TensorFlow: the process settings every script starts with
# (bert_tf2.startup: oneDNN on x86-64, the BFC allocator), so the tests in this process run
# the kernels a user's run does and those of the scripts the tests start as children. Left
# to the first test module's import, TensorFlow came up without them here and with them in
# every child (a run resumed in this process from a child's checkpoint rounded otherwise).
from bert_tf2 import startup  # noqa: E402,F401  pylint: disable=unused-import


def _find_shared():
    env = os.environ.get("BERT_TF2_SHARED")
    candidates = [pathlib.Path(env)] if env else []
    candidates.append(REPO_ROOT.parent / "shared")
    for path in candidates:
        if (path / "data").is_dir() or (path / "golden").is_dir():
            return path
    return None


SHARED_DIR = _find_shared()

# The project's float32 promise where two paths run other shapes or other kernels (trimmed vs
# full padding, another batch size, XLA or a graph vs eager, fused vs op by op, oneDNN vs
# Eigen, TF vs numpy): GEMM blocking and summation order follow the shape and the CPU's ISA
# (AVX2 / AVX-512 / AMX), so those comparisons use this bound, never a tighter one. A tighter
# bound (or exact equality) stays only where both sides run the same shapes through the same
# kernels, with a comment saying so.
FP32_ATOL = 1e-5


@pytest.fixture(scope="session")
def shared_dir():
    """Path of ../shared (or $BERT_TF2_SHARED); skips the test when it is absent."""
    if SHARED_DIR is None:
        pytest.skip("../shared not found beside the repo (set BERT_TF2_SHARED to run "
                    "the golden and real-data tests)")
    return SHARED_DIR


# `make test` sets BERT_TF2_REQUIRE_DOORS=1 (and builds the torch peer venv first): a test that
# compares a door with its peer (the HF export in transformers, a pytorch_model.bin written by
# torch) then fails instead of skipping when the peer is missing; a plain `pytest` may skip.
REQUIRE_DOORS = os.environ.get("BERT_TF2_REQUIRE_DOORS") == "1"


def user_environ(**extra):
    """os.environ as a user's process has it (no TF_USE_LEGACY_KERAS of the suite's own:
    tf.keras is Keras 3's), with `extra` added: the environment of a child whose point is
    what a user's process does (its notices, a fork's tf.keras, Keras 3 beside bert-tf2)."""
    env = dict(os.environ)
    if env.get("TF_USE_LEGACY_KERAS") == "1":
        env.pop("TF_USE_LEGACY_KERAS")
    env.update(extra)
    return env


def door_peer_missing(reason):
    """Skips the test with `reason`, or fails it under `make test` (BERT_TF2_REQUIRE_DOORS=1)."""
    if REQUIRE_DOORS:
        pytest.fail("make test runs every door's comparison, but %s" % reason)
    pytest.skip(reason)


def peer_python():
    """The torch peer venv's python ($BERT_TF2_PEER_PYTHON, else .venv-reproduce beside the
    repo, which `make peer-venv` makes): transformers, torch, sentence-transformers."""
    path = os.environ.get("BERT_TF2_PEER_PYTHON") or os.path.join(
        str(REPO_ROOT), ".venv-reproduce", "bin", "python")
    if not os.path.exists(path):
        door_peer_missing("no torch peer venv at %s (`make peer-venv` makes it; "
                          "$BERT_TF2_PEER_PYTHON names another)" % path)
    return path


def random_head_model(head, config, num_labels=None, crf=False, seed=7):
    """Our Keras model of `head` (pretraining, classifier, tagger, squad, multiple_choice, a
    head added since by its room's builder, else the encoder) for the bert_config dict
    `config`, random weights under `seed`, its variables built; a --crf tagger's transitions
    random too (so they matter)."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    import modeling  # pylint: disable=import-outside-toplevel
    from bert_tf2 import heads  # pylint: disable=import-outside-toplevel
    from bert_tf2.export import head_types  # pylint: disable=import-outside-toplevel
    bert_config = modeling.BertConfig.from_dict(config)
    tf.random.set_seed(seed)
    builders = {"pretraining": lambda: heads.BertPretrainer(bert_config),
                "classifier": lambda: heads.BertClassifier(bert_config, num_labels),
                "tagger": lambda: heads.BertTagger(bert_config, num_labels, crf=crf),
                "squad": lambda: heads.BertSquad(bert_config),
                "multiple_choice": lambda: heads.BertMultipleChoice(bert_config)}
    entry = head_types.find(head)
    if head not in builders and entry is not None and entry.build is not None and \
            entry.runner and not entry.served_as:  # a head added since: its room's builder
        return entry.build(bert_config, num_labels=num_labels)
    if head not in builders:
        model = modeling.BertModel(bert_config)
        ids = np.zeros([1, 2], np.int32)
        model(ids, np.ones_like(ids), ids)
        return model
    model = builders[head]()
    model(heads.dummy_features(), training=False)
    if crf:
        model.crf.transitions.assign(tf.random.normal(model.crf.transitions.shape, stddev=2.0))
    return model


def pack_as_reference(tokenizer, length, a, b=None):
    """(ids, mask, segments) of [CLS] a [SEP] (b [SEP]) of `length`, cut as the reference
    cuts (truncate_seq_pair for a pair, the first length - 2 pieces of one text)."""
    from bert_tf2 import input_pipeline  # pylint: disable=import-outside-toplevel
    first = tokenizer.tokenize(a)
    second = tokenizer.tokenize(b) if b is not None else []
    if b is not None:
        input_pipeline.truncate_seq_pair(first, second, length - 3)
    else:
        first = first[:length - 2]
    tokens = ["[CLS]"] + first + ["[SEP]"]
    segments = [0] * len(tokens)
    if b is not None:
        tokens += second + ["[SEP]"]
        segments += [1] * (len(second) + 1)
    ids = tokenizer.convert_tokens_to_ids(tokens)
    pad = length - len(ids)
    return ids + [0] * pad, [1] * len(ids) + [0] * pad, segments + [0] * pad


def features_of_rows(rows):
    """{input_ids, input_mask, segment_ids} int32 arrays of pack_as_reference rows."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    return {"input_ids": np.array([r[0] for r in rows], np.int32),
            "input_mask": np.array([r[1] for r in rows], np.int32),
            "segment_ids": np.array([r[2] for r in rows], np.int32)}


def write_text(path, text):
    """Writes `text` (UTF-8, as given) to `path`, making its folder; returns the path as str."""
    path = str(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    return path


def isa_line():
    """"CPU ISA: ..." (bert_tf2.machine): float32 rounding of matmuls depends on it."""
    from bert_tf2 import machine  # pylint: disable=import-outside-toplevel
    return "CPU ISA: %s" % machine.isa_summary()


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    """The CPU's instruction sets at the top of the output, even under -q (which hides
    pytest_report_header's lines); pytest-xdist's workers have no terminal and print none."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(isa_line())


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: trains, exports, or starts a whole-script "
                            "process or a child that imports TensorFlow; `make test` runs it, "
                            "`make test-quick` (-m 'not slow') not")
    # pytest-xdist's controller: hand the files out in the workers' collection order (see
    # pytest_collection_modifyitems), not sorted by their number of tests.
    if getattr(config.option, "loadscopereorder", False) and _file_seconds():
        config.option.loadscopereorder = False


def check_test_predictions(output_dir, ids, labels=None, kind="classification",
                           threshold=0.5):
    """Asserts test_predictions.jsonl says what test_results.tsv says, line by line.

    Args:
      ids: the examples' ids, in test order.
      labels: the label list (classification / multilabel); None for regression and
        multiple choice.
      kind: "classification", "multilabel", "regression" or "choice".
    Returns:
      the JSON objects of test_predictions.jsonl.
    """
    import json  # pylint: disable=import-outside-toplevel
    import numpy as np  # pylint: disable=import-outside-toplevel
    folder = pathlib.Path(str(output_dir))
    rows = [np.array([np.float32(v) for v in line.split("\t")])
            for line in (folder / "test_results.tsv").read_text().splitlines()]
    records = [json.loads(line) for line in
               (folder / "test_predictions.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(records) == len(rows) == len(ids)
    assert [r["id"] for r in records] == list(ids)
    for record, row in zip(records, rows):
        if kind == "regression":
            assert sorted(record) == ["id", "label"]
            assert abs(np.float32(record["label"]) - row[0]) <= 1e-7
            continue
        assert sorted(record) == ["id", "label", "probabilities"]
        if kind == "choice":
            got = np.float32(record["probabilities"])
            assert record["label"] == int(np.argmax(row))
        else:
            assert list(record["probabilities"]) == list(labels)
            got = np.float32(list(record["probabilities"].values()))
            assert record["label"] == ([l for l, p in zip(labels, row) if p >= threshold]
                                       if kind == "multilabel" else labels[int(np.argmax(row))])
        # The same float32 numbers in two files (JSON's repr vs the TSV's): only the text differs.
        np.testing.assert_allclose(got, row, atol=1e-7, rtol=0)
    return records


# Hang guards, never speed bounds: a wait or a child process that takes longer than this is
# hung, on any CPU (an AVX2 machine under `make test`'s load runs a step several times slower
# than an idle AVX-512 one). A test that needs "after X happened" waits for X itself.
HANG_GUARD_SECONDS = 1200


def wait_until(condition, proc=None, what="the condition", timeout=HANG_GUARD_SECONDS):
    """Polls `condition()` until it is true; fails if `proc` (a Popen) ended first (with
    the end of its stderr when it was piped) or after `timeout` seconds (a hang guard)."""
    import time  # pylint: disable=import-outside-toplevel
    deadline = time.monotonic() + timeout
    while not condition():
        if proc is not None and proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr else ""
            raise AssertionError("the process ended (%s) before %s: %s"
                                 % (proc.returncode, what, err[-3000:]))
        assert time.monotonic() < deadline, "hung: no %s after %d s" % (what, timeout)
        time.sleep(0.1)


class StderrLines:
    """Reads a Popen's piped (text) stderr in a thread, so that a test can wait for a line
    the process prints (an event, whatever the CPU's speed) and still read all of it."""

    def __init__(self, proc):
        import threading  # pylint: disable=import-outside-toplevel
        self.proc, self.lines = proc, []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self):
        for line in self.proc.stderr:
            with self._lock:
                self.lines.append(line)

    def wait_for(self, pattern, what=None):
        """Waits until a line matches the regular expression `pattern`; returns the match."""
        import re  # pylint: disable=import-outside-toplevel
        found = []

        def seen():
            with self._lock:
                found[:] = [m for m in map(re.compile(pattern).search, self.lines) if m][:1]
            if not found and not self._thread.is_alive():
                raise AssertionError("the process ended (%s) before a line matching %r: %s"
                                     % (self.proc.wait(), pattern, self.text()[-3000:]))
            return bool(found)
        wait_until(seen, what=what or "a line matching %r" % pattern)
        return found[0]

    def text(self):
        """All of stderr once the process has ended (waits for it, a hang guard)."""
        self.proc.wait(timeout=HANG_GUARD_SECONDS)
        self._thread.join(HANG_GUARD_SECONDS)
        return "".join(self.lines)


def read_eval_results(path):
    """eval_results.txt's "key = value" lines as a dict of strings."""
    with open(str(path), encoding="utf-8") as f:
        return dict(line.rstrip("\n").split(" = ", 1) for line in f)


def read_tsv_floats(path):
    """A test_results.tsv (tab-separated numbers, a row per line) as a float64 array."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    with open(str(path), encoding="utf-8") as f:
        return np.array([[float(x) for x in line.rstrip("\n").split("\t")] for line in f])


# pytest-xdist's --dist loadfile hands out whole files; by default the files with the most
# tests go first, and the slow files with few tests (a notebook, a forked reference, two
# worker processes) come last, one worker finishing them while the other waits. With the
# files' seconds measured in a full run (file_seconds.json, refreshed by file_seconds.py
# from a --junitxml report) the longest go first and the short ones fill the end.
FILE_SECONDS = pathlib.Path(__file__).with_name("file_seconds.json")


def _file_seconds():
    import json  # pylint: disable=import-outside-toplevel
    try:
        with open(str(FILE_SECONDS), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


# Files marked slow as a whole (`make test-quick` leaves them out): nearly every test in them
# trains a model, exports one, starts a whole-script process, or reads a module fixture that
# does. Elsewhere a test is marked @pytest.mark.slow itself.
SLOW_FILES = frozenset("tests/%s.py" % name for name in (
    "test_training", "test_dynamic_padding", "test_keep_checkpoints", "test_pretraining_beam",
    "test_reference_fork", "test_fused_optimizer", "test_litert", "test_predict_surface",
    "test_squad_doors", "test_tagger_doors", "test_keras_hub", "test_safe_removal",
    "test_startup", "test_progress", "test_packed_sequences", "test_periodic_eval",
    "test_serving", "test_repeated_runs", "test_pretraining_shards", "test_notebook",
    "test_training_record", "test_run_ner", "test_in_memory", "test_multilabel",
    "test_long_text", "test_export_saved_model", "test_export_tasks", "test_parity_matrix",
    "test_parity_matrix_spans",
    "test_fork_checkpoints"))


def pytest_collection_modifyitems(items):
    """The tests of SLOW_FILES marked slow. Under pytest-xdist, the files in the order of
    their measured seconds, longest first (a file not measured yet: as long as the median
    one); the tests of a file in their order. A run without workers keeps pytest's order."""
    for item in items:
        if os.path.relpath(str(item.fspath), str(REPO_ROOT)).replace(os.sep, "/") in SLOW_FILES:
            item.add_marker(pytest.mark.slow)
    seconds = _file_seconds() if os.environ.get("PYTEST_XDIST_WORKER") else {}
    if not seconds:
        return
    median = sorted(seconds.values())[len(seconds) // 2]
    first_seen = {}
    for item in items:
        first_seen.setdefault(item.nodeid.split("::")[0], len(first_seen))
    items.sort(key=lambda item: (-seconds.get(item.nodeid.split("::")[0], median),
                                 first_seen[item.nodeid.split("::")[0]]))


# The parity matrix of tests/test_parity_matrix.py (heads x doors x inputs), printed after
# the run's results even under -q. A pytest-xdist worker hands its lines to the controller
# (workeroutput), which prints them.
def _parity_lines():
    helpers = sys.modules.get("parity_helpers")
    return helpers.matrix_lines() if helpers is not None else []


def pytest_sessionfinish(session):
    lines = _parity_lines()
    if lines and hasattr(session.config, "workeroutput"):
        session.config.workeroutput["parity_matrix"] = "\n".join(lines)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):  # pylint: disable=unused-argument
    text = getattr(node, "workeroutput", {}).get("parity_matrix")
    if text:
        node.config.stash.setdefault(_PARITY_KEY, []).extend(text.split("\n"))


_PARITY_KEY = pytest.StashKey()


def pytest_terminal_summary(terminalreporter, config):
    lines = config.stash.get(_PARITY_KEY, []) + _parity_lines()
    for line in lines:
        terminalreporter.write_line(line)


# Each head's tiny model trained once per run, shared by every file and both pytest-xdist
# workers (tests/trained.py says which fixtures there are and what each gives). Only where
# pytest loads this file (as `conftest`, tests/ on sys.path): a script that imports
# `tests.conftest` for its constants (test_tf1_estimator's graph-mode process) needs none.
if __name__ == "conftest":
    from trained import (  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import
        trained_heads, trained_classifier, trained_multilabel, trained_regression, trained_tagger,
        trained_tagger_crf, trained_squad_v1, trained_squad_v2, trained_multiple_choice,
        trained_encoder, trained_ranker, parity_session, trained_classifier_with_best,
        trained_ner_crf)
