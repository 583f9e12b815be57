"""predict() / Predictor from Python: the shapes users hold (lists, tuples, pandas Series
and DataFrames, numpy arrays), one line for any other, one Predictor shared by threads,
no progress display unless asked; and the ranges of the settings, checked when a
Settings is made (and on the command line) before any folder exists."""
import math
import tempfile
import threading

import numpy as np
import pytest

import run_classifier as rc
import run_ner
from bert_tf2 import flags_common
from conftest import HANG_GUARD_SECONDS
from test_doors import in_forked_child
from test_in_memory import _rows, _sentences, _settings
from test_ner_data import IOB2
from test_training import absl_records  # noqa: F401  pylint: disable=unused-import

try:
    import pandas as pd
except ImportError:  # pandas is optional: its shapes are not tested then
    pd = None
needs_pandas = pytest.mark.skipif(pd is None, reason="pandas is not installed")


def _frame(columns):
    """A DataFrame of `columns` made when a test runs (a table's entry stays plain)."""
    return lambda: pd.DataFrame(columns)


def _made(value):
    """`value`, or what it makes (a _frame), the test skipped without pandas."""
    if callable(value):
        if pd is None:
            pytest.skip("pandas is not installed")
        return value()
    return value

# The classifier is trained on pairs from the columns "review" and "extra".
_COLUMNS = dict(text_a_column="review", text_b_column="extra")


def _pairs(count, offset):
    """(reviews, extras) of `count` rows of test_in_memory's texts."""
    rows = _rows(count, offset, labels=False)
    return [r["text"] for r in rows], [rows[(i + 1) % count]["text"] for i in range(count)]


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    root = tmp_path_factory.mktemp("predict_surface")
    texts, extras = _pairs(12, 0)
    train = [{"review": t, "extra": e, "label": r["label"]}
             for t, e, r in zip(texts, extras, _rows(12, 0))]
    out = root / "classifier"
    rc.run(_settings(root, {"train": train}, out, do_train=True, **_COLUMNS))
    predictor = rc.Predictor(str(out), batch_size=3)
    yield {"folder": str(out), "predictor": predictor}
    predictor.close()


@pytest.fixture(scope="module")
def tagger(trained_tagger):
    """The run's trained run_ner folder (tests/trained.py: shared, only read here) and a
    Predictor of it, batch size 2."""
    predictor = run_ner.Predictor(trained_tagger.folder, batch_size=2)
    yield {"folder": trained_tagger.folder, "predictor": predictor}
    predictor.close()


# ---------------------------------------------------------------------------
# The shapes users hold: the same predictions as the list
# ---------------------------------------------------------------------------

@needs_pandas
def test_the_classifier_reads_frames_series_tuples_and_arrays(classifier):
    predictor = classifier["predictor"]
    texts, extras = _pairs(7, 3)
    expected = predictor.predict(texts, extras)
    assert len(expected) == 7
    labels = ["pos"] * 7
    shapes = {
        "the folder's columns": (pd.DataFrame({"review": texts, "extra": extras,
                                               "label": labels}),),
        "text_a / text_b": (pd.DataFrame({"text_b": extras, "text_a": texts}),),
        "Series": (pd.Series(texts), pd.Series(extras, index=range(10, 17))),
        "tuple": (tuple(texts), tuple(extras)),
        "numpy": (np.array(texts), np.array(extras, dtype=object)),
        "generator": ((t for t in texts), iter(extras)),
        "a frame's columns": (pd.DataFrame({"review": texts})["review"],
                              pd.DataFrame({"extra": extras})["extra"]),
    }
    for name, arguments in shapes.items():
        assert predictor.predict(*arguments) == expected, name
    frame = pd.DataFrame({"review": texts[:3], "extra": extras[:3]})
    assert rc.predict(classifier["folder"], frame, batch_size=3) == expected[:3]
    # A frame of one column is the texts: this model reads pairs.
    with pytest.raises(ValueError, match=r"^the model of .* was trained on pairs "
                                         r"\(--text_b_column=extra\): pass texts_b$"):
        predictor.predict(pd.DataFrame({"review": texts}))


@pytest.mark.parametrize("texts, texts_b, message", [
    ({"review": ["good"]}, None, r"^texts is a dict; expected a list \(or tuple\) of str, a "
                                 r"pandas Series or DataFrame, or a numpy array of str$"),
    ({"good", "bad"}, ["x", "y"], r"^texts is a set; .* \(a set has no order: the answers "
                                  r"could not follow the inputs\)$"),
    (None, None, r"^texts is None; expected a list \(or tuple\) of str"),
    ({"good": 1}.keys(), None, r"^texts is the keys of a dict \(dict\.keys\(\)\); expected a "
                               r"list \(or tuple\) of str, a pandas Series or DataFrame, or a "
                               r"numpy array of str$"),  # was "a dict_keys ... a set has no order"
    (["good", math.nan], ["x", "y"], r"^texts\[1\] is NaN \(a missing value\), not a str$"),
    (3, None, r"^texts is an int; expected a list"),
    (["good"], 7, r"^texts_b is an int; expected a list"),
    (["good"], _frame({"extra": ["x"]}),
     r"^texts_b is a DataFrame; expected a list \(or tuple\) of str, a pandas Series \(one "
     r"column of a frame\) or a numpy array of str$"),
    (_frame({"review": ["good"], "extra": ["x"]}), ["x"],
     r"^texts_b is given beside the DataFrame texts; give it as a column of the frame$"),
    (_frame({"text": ["good"], "label": ["pos"]}), None,
     r"^texts is a DataFrame with the columns 'text', 'label'; expected the column 'review' "
     r"\(and 'extra'\), or the column 'text_a' \(and 'text_b'\), or a frame of one column$"),
    # Before: "texts[0] is a list, not a str" (a frame's .values, a column kept 2-D).
    (np.array([["good"], ["bad"]]), np.array(["x", "y"]),
     r"^texts is a numpy array of shape \(2, 1\); expected one text per item, a "
     r"1-dimensional array \(one column of it: texts\[:, 0\]\)$"),
    # Before: "texts_b[1] is NaN (a missing value), not a str": the None the user wrote is
    # NaN in pandas, and texts_b[1] is not row 1 of a Series indexed otherwise.
    (["good", "bad"], lambda: pd.Series(["x", None], index=[10, 11]),
     r"^texts_b row 1 \(index 11\) is a missing value \(None, NaN or pandas' NA: pandas "
     r"keeps a None as NaN\); give every row a value \('' for an empty text\)$"),
    (_frame({"review": ["good", None], "extra": ["x", "y"]}), None,
     r"^texts column 'review' row 1 \(index 1\) is a missing value \(None, NaN or "),
])
def test_the_classifier_refuses_other_shapes_in_one_line(classifier, texts, texts_b, message):
    with pytest.raises(ValueError, match=message) as refused:
        classifier["predictor"].predict(_made(texts), _made(texts_b))
    assert "\n" not in str(refused.value)


@needs_pandas
def test_the_tagger_reads_frames_series_tuples_and_arrays(tagger):
    predictor = tagger["predictor"]
    words = [[w for w, _ in s] for s in _sentences(IOB2)]
    expected = predictor.predict(words)
    arrays = [np.array(s) for s in words]
    shapes = {
        "one column": pd.DataFrame({"sentence": arrays}),
        "tokens": pd.DataFrame({"id": range(len(words)), "tokens": arrays}),
        "Series": pd.Series(arrays),
        "tuple": tuple(tuple(s) for s in words),
        "strings": np.array([" ".join(s) for s in words]),
    }
    for name, sentences in shapes.items():
        assert predictor.predict(sentences) == expected, name
    with pytest.raises(ValueError, match=r"^sentences is a str; expected a list of sentences"):
        predictor.predict("John lives")  # one sentence or a list of words? Said instead.


@pytest.mark.parametrize("sentences, message", [
    ({"John": "B-PER"}, r"^sentences is a dict; expected a list \(or tuple\) of sentences"),
    ({"John lives"}, r"^sentences is a set; .*a set has no order"),
    (None, r"^sentences is None; expected a list"),
    (5, r"^sentences is an int; expected a list"),
    (_frame({"a": ["x"], "b": ["y"]}),
     r"^sentences is a DataFrame with the columns 'a', 'b'; expected the column 'tokens', "
     r"or a frame of one column$"),
])
def test_the_tagger_refuses_other_shapes_in_one_line(tagger, sentences, message):
    with pytest.raises(ValueError, match=message) as refused:
        tagger["predictor"].predict(_made(sentences))
    assert "\n" not in str(refused.value)


@needs_pandas
def test_pandas_is_told_by_its_type_never_imported():
    from bert_tf2.tasks import predict_inputs  # pylint: disable=import-outside-toplevel
    # A DataFrame's iteration yields its column names: it is never taken as a list.
    assert predict_inputs.is_frame(pd.DataFrame({"review": ["a"]}))
    assert not predict_inputs.is_frame(pd.Series(["a"])) and not predict_inputs.is_frame([])
    source = open(predict_inputs.__file__, encoding="utf-8").read()
    assert "import pandas" not in source


# ---------------------------------------------------------------------------
# One Predictor, many threads
# ---------------------------------------------------------------------------

def _threads_get_their_own(predict, lists):
    """Calls predict(lists[i % 2]) from 6 threads at once; each result is what a call of
    that list alone gives."""
    alone = [predict(items) for items in lists]
    results, start = {}, threading.Barrier(6)

    def call(index):
        start.wait(HANG_GUARD_SECONDS)
        try:
            results[index] = predict(lists[index % 2])
        except Exception as error:  # pylint: disable=broad-except
            results[index] = error

    threads = [threading.Thread(target=call, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HANG_GUARD_SECONDS)
    assert {i: results.get(i) for i in range(6)} == {i: alone[i % 2] for i in range(6)}


def test_one_classifier_predictor_serves_threads(classifier):
    first, second = _pairs(20, 1), _pairs(13, 4)
    _threads_get_their_own(lambda pair: classifier["predictor"].predict(*pair),
                           [first, second])


def test_one_tagger_serves_threads(tagger):
    words = [[w for w, _ in s] for s in _sentences(IOB2)]
    _threads_get_their_own(tagger["predictor"].predict,
                           [words * 4, list(reversed(words)) * 3])


# ---------------------------------------------------------------------------
# Arguments: checked before anything is made; no progress display unless asked
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("batch_size", [0, -1, True, 2.5, "8"])
def test_a_bad_batch_size_is_one_line_and_makes_no_folder(classifier, tmp_path, monkeypatch,
                                                          batch_size):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    texts, extras = _pairs(2, 0)
    with pytest.raises(ValueError, match=r"^batch_size=%s: expected an integer >= 1$"
                       % repr(batch_size).replace(".", r"\.")):
        rc.predict(classifier["folder"], texts, extras, batch_size=batch_size)
    with pytest.raises(ValueError, match=r"^batch_size="):
        run_ner.Predictor(str(tmp_path / "never_read"), batch_size=batch_size)
    assert list(tmp_path.iterdir()) == []  # no temporary folder made


def test_a_predictor_shows_no_progress_unless_asked(classifier, capfd):
    texts, extras = _pairs(4, 2)
    capfd.readouterr()
    classifier["predictor"].predict(texts, extras)
    assert "predict" not in capfd.readouterr().err
    shown = rc.Predictor(classifier["folder"], batch_size=2, progress="lines")
    try:
        shown.predict(texts, extras)
    finally:
        shown.close()
    assert "predict  batch 2/2" in capfd.readouterr().err


@pytest.mark.parametrize("values, message", [
    (dict(num_train_epochs=math.inf), r"^num_train_epochs=inf must be a finite number > 0$"),
    (dict(num_train_epochs=math.nan), r"^num_train_epochs=nan is not a number$"),
    (dict(num_train_epochs="inf"), r"^num_train_epochs=inf must be a finite number > 0$"),
    (dict(num_train_epochs=0.0), r"^num_train_epochs=0\.0 must be > 0$"),
    (dict(num_train_epochs=-1), r"^num_train_epochs=-1\.0 must be > 0$"),
    (dict(learning_rate=-1e-5), r"^learning_rate=-1e-05 must be >= 0$"),
    (dict(learning_rate=math.inf), r"^learning_rate=inf must be a finite number >= 0$"),
    (dict(warmup_proportion=-0.1), r"^warmup_proportion=-0\.1 must be >= 0$"),
    (dict(warmup_proportion=math.nan), r"^warmup_proportion=nan is not a number$"),
    (dict(train_batch_size=-3), r"^train_batch_size=-3 must be >= 1$"),
    (dict(predict_batch_size=0), r"^predict_batch_size=0 must be >= 1$"),
    (dict(num_accumulation_steps=0), r"^num_accumulation_steps=0 must be >= 1$"),
    (dict(threshold=math.nan), r"^threshold=nan is not a number$"),
])
def test_a_setting_out_of_range_is_refused_when_made_and_on_the_command_line(
        tmp_path, values, message):
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=message):
        rc.Settings(do_train=True, output_dir=str(out), **values)
    made = rc.Settings(output_dir=str(out), do_train=True)
    name, value = next(iter(values.items()))
    with pytest.raises(ValueError, match=message):
        setattr(made, name, value)
    assert getattr(made, name) == rc.Settings().default(name) and not made.given(name)
    flag = "--%s=%s" % (name, value)
    with pytest.raises(ValueError, match=message.replace("^", "^--")):
        flags_common.parse_flags(rc.define_flags, ["--do_train", "--output_dir=%s" % out,
                                                   flag])
    assert not out.exists()


def test_what_the_reference_takes_is_taken(absl_records):  # noqa: F811  pylint: disable=redefined-outer-name
    # A fraction of an epoch, a learning rate of 0, a warmup over 1 (warned), and without
    # do_train the training settings are not read at all.
    for values in (dict(do_train=True, num_train_epochs=0.5),
                   dict(do_train=True, learning_rate=0.0),
                   dict(do_train=False, num_train_epochs=0.0, learning_rate=math.nan,
                        warmup_proportion=-1.0)):
        rc.Settings(**values).check_common()
    absl_records.clear()
    rc.Settings(do_train=True, warmup_proportion=2.0).check_common()
    assert [r.getMessage() for r in absl_records.records if "warmup" in r.getMessage()] == [
        "--warmup_proportion=2.0 is over 1: the learning rate rises over every step and "
        "never reaches --learning_rate (as in the reference)"]
    fv = flags_common.parse_flags(rc.define_flags, ["--num_train_epochs=0", "--do_predict"])
    assert fv.num_train_epochs == 0.0


def test_a_training_run_of_infinite_epochs_leaves_no_folder(tmp_path):
    out = tmp_path / "out"
    texts, extras = _pairs(4, 0)
    train = [{"review": t, "extra": e, "label": "pos"} for t, e in zip(texts, extras)]
    with pytest.raises(ValueError, match="num_train_epochs=inf must be a finite number"):
        rc.run(_settings(tmp_path, {"train": train}, out, do_train=True,
                         num_train_epochs=math.inf, **_COLUMNS))
    assert not out.exists()


def test_eight_threads_of_mixed_batch_sizes_get_the_single_threaded_answers(classifier, tagger):
    # No lock: each call's features stay in memory of its own and the traced steps are
    # shared; sizes 1..13 make batches of 1, 2, 4 rows and of the batch size (3 / 2).
    pairs = [_pairs(size, size) for size in (1, 2, 3, 5, 7, 13)]
    words = [[w for w, _ in s] for s in _sentences(IOB2)]
    sentences = [words[:1], words[:2], words * 2, list(reversed(words))]
    calls = [(classifier["predictor"].predict, pair) for pair in pairs] + [
        (lambda s: tagger["predictor"].predict(s), (s,)) for s in sentences]
    alone = [predict(*arguments) for predict, arguments in calls]
    results, start = {}, threading.Barrier(8)

    def work(thread):
        start.wait(HANG_GUARD_SECONDS)
        for turn in range(6):
            index = (thread * 3 + turn) % len(calls)
            predict, arguments = calls[index]
            try:
                results[thread, turn] = (index, predict(*arguments))
            except Exception as error:  # pylint: disable=broad-except
                results[thread, turn] = (index, error)

    threads = [threading.Thread(target=work, args=(t,), daemon=True) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HANG_GUARD_SECONDS)
    assert len(results) == 48
    for (index, got) in results.values():
        assert got == alone[index], index


def _in_thread(function, seconds=120):
    """function()'s result, run in a daemon thread; AssertionError when it has not
    returned within `seconds` (a deadlock)."""
    box = {}

    def run():
        try:
            box["value"] = function()
        except Exception as error:  # pylint: disable=broad-except
            box["value"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "still running after %d s: a deadlock" % seconds
    return box["value"]


def test_an_input_generator_may_call_the_same_predictor(classifier):
    # Inputs used to be read under the predictor's lock: this call deadlocked.
    predictor = classifier["predictor"]
    texts, extras = _pairs(5, 2)
    expected = predictor.predict(texts, extras)
    inner = []

    def reading():
        for text in texts:
            inner.append(predictor.predict([text], [extras[0]]))
            yield text

    assert _in_thread(lambda: predictor.predict(reading(), extras)) == expected
    assert inner == [predictor.predict([t], [extras[0]]) for t in texts]


def test_a_slow_generator_holds_up_no_other_thread(classifier):
    predictor = classifier["predictor"]
    texts, extras = _pairs(4, 1)
    expected = predictor.predict(texts, extras)
    release = threading.Event()

    def slow():
        release.wait(HANG_GUARD_SECONDS)
        yield from texts

    waiting = threading.Thread(target=lambda: predictor.predict(slow(), extras), daemon=True)
    waiting.start()
    try:
        assert _in_thread(lambda: predictor.predict(texts, extras), 120) == expected
    finally:
        release.set()
        waiting.join(HANG_GUARD_SECONDS)


def test_a_forked_child_is_refused_in_one_line_not_hung(classifier):
    predictor = classifier["predictor"]
    texts, extras = _pairs(2, 0)
    predictor.predict(texts, extras)
    # the child reports each door's refusal, never running TensorFlow
    report, code = in_forked_child([lambda: predictor.predict(texts, extras),
                                    lambda: rc.Predictor(classifier["folder"], batch_size=2)])
    assert code == 0 and len(report) == 2
    for line in report:
        assert line.startswith("RuntimeError: run_classifier.Predictor: this process "), line
        assert "TensorFlow cannot run in a forked child" in line and "'spawn'" in line, line


def test_after_close_a_predictor_refuses_and_leaves_no_folder(classifier, tmp_path,
                                                               monkeypatch):
    import os  # pylint: disable=import-outside-toplevel
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    predictor = rc.Predictor(classifier["folder"], batch_size=2)
    folder = predictor.settings.output_dir
    assert oct(os.stat(folder).st_mode & 0o777) == "0o700"  # private: token ids
    texts, extras = _pairs(3, 0)
    predictor.predict(texts, extras)
    assert os.listdir(folder) == []  # the features never touch the disk
    predictor.close()
    with pytest.raises(RuntimeError, match=r"^run_classifier\.Predictor of .* is closed "
                                           r"\(close\(\) was called\): make a new one$"):
        predictor.predict(texts, extras)
    assert list(tmp_path.iterdir()) == []  # it used to make the folder again


def test_a_call_builds_no_input_pipeline_and_cuts_the_batch_to_the_data(classifier,
                                                                         monkeypatch):
    from bert_tf2 import input_pipeline  # pylint: disable=import-outside-toplevel
    from bert_tf2.trainer import memory_batches  # pylint: disable=import-outside-toplevel
    texts, extras = _pairs(2, 3)
    expected = classifier["predictor"].predict(texts, extras)
    huge = rc.Predictor(classifier["folder"], batch_size=2 ** 20)
    shapes = []
    made = memory_batches.batches

    def counted(found, source, **kwargs):
        for batch in made(found, source, **kwargs):
            shapes.append(batch["input_ids"].shape[0])
            yield batch

    def never(*args, **kwargs):
        raise AssertionError("a tf.data pipeline was built for a Predictor's call")

    monkeypatch.setattr(memory_batches, "batches", counted)
    monkeypatch.setattr(input_pipeline, "make_dataset", never)
    try:
        assert huge.predict(texts, extras) == expected  # padded to 2**20 rows before
    finally:
        huge.close()
    assert shapes == [2]


def test_a_call_runs_the_traced_step_without_binding_its_inputs(classifier, monkeypatch):
    """Each batch of a call goes to the step's concrete function as tensors (FlatStep):
    the answers of the tf.function's own call, to the bit."""
    from bert_tf2.trainer import prediction  # pylint: disable=import-outside-toplevel
    predictor = classifier["predictor"]
    texts, extras = _pairs(5, 2)  # batch_size 3: two batches
    fits, real_fits = [], prediction.FlatStep._fits  # pylint: disable=protected-access
    monkeypatch.setattr(prediction.FlatStep, "_fits",
                        lambda self, batch: fits.append(real_fits(self, batch)) or fits[-1])
    direct = predictor.predict(texts, extras)
    assert fits == [True, True]
    monkeypatch.setattr(prediction.FlatStep, "_flat_call", lambda self: None)
    assert predictor.predict(texts, extras) == direct  # through the tf.function


def test_a_batch_off_the_steps_signature_goes_through_the_tf_function():
    """FlatStep runs only batches of the signature's names, dtypes and fixed sizes; any
    other goes to the tf.function, which converts it or refuses it as before."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    from bert_tf2.trainer import prediction  # pylint: disable=import-outside-toplevel
    spec = {"a": tf.TensorSpec([2, None], tf.int32), "b": tf.TensorSpec([2], tf.float32)}
    function = tf.function(lambda f: {"s": tf.reduce_sum(f["a"], axis=1), "b": f["b"] * 2},
                           input_signature=[spec])
    step = prediction.FlatStep(function, spec)
    b = np.array([0.5, 1.5], np.float32)
    for a in (np.array([[1, 2, 3], [4, 5, 6]], np.int32),  # the flat call
              np.array([[1, 2, 3], [4, 5, 6]], np.int64),  # the tf.function's conversions
              np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)):
        got = step({"a": a, "b": b})
        assert got["s"].numpy().tolist() == [6, 15] and got["b"].numpy().tolist() == [1.0, 3.0]
    for batch in ({"a": np.zeros([3, 4], np.int32), "b": np.zeros([3], np.float32)},
                  {"a": np.zeros([2], np.int32), "b": np.zeros([2], np.float32)},
                  {"a": np.zeros([2, 4], np.int32)}):
        with pytest.raises(TypeError, match="Binding inputs to tf.function failed"):
            step(batch)


def test_the_batches_of_a_call_are_make_datasets():
    from bert_tf2 import input_pipeline  # pylint: disable=import-outside-toplevel
    from bert_tf2.trainer import memory_batches  # pylint: disable=import-outside-toplevel
    spec = input_pipeline.classifier_features(8)
    source = input_pipeline.PredictSource(["x"], spec, 4, True, 4)
    # 6 examples, lengths 5, 2, 8, 1, 3, 6: sorted longest first, batches of 4, the last
    # one padded (index -1), each cut to its longest rounded up to 4.
    lengths = [5, 2, 8, 1, 3, 6]
    mask = np.array([[1] * n + [0] * (8 - n) for n in lengths], np.int32)
    found = {"input_ids": mask * 7, "input_mask": mask, "segment_ids": 0 * mask,
             "label_ids": np.arange(6, dtype=np.int32),
             "is_real_example": np.ones(6, np.int32)}
    got = list(memory_batches.batches(found, source))
    assert [b[input_pipeline.EXAMPLE_INDEX].tolist() for b in got] == [[2, 5, 0, 4],
                                                                       [1, 3, -1, -1]]
    assert [b["input_mask"].shape for b in got] == [(4, 8), (4, 4)]
    assert got[1]["is_real_example"].tolist() == [1, 1, 0, 0]
    # Fewer examples than the batch size: a power of two rows, not the batch size.
    assert [memory_batches.batch_size(source._replace(batch_size=2 ** 20), n)
            for n in (1, 2, 3, 5, 2 ** 20 + 1)] == [1, 2, 4, 8, 2 ** 20]


def test_output_dir_given_to_a_predictor_is_one_line(classifier):
    texts, extras = _pairs(1, 0)
    with pytest.raises(ValueError, match=r"^output_dir='/tmp/x': a Predictor \(and predict\(\)\) "
                                         r"reads the model of its model_folder and returns the "
                                         r"answers, writing no files; leave output_dir out"):
        rc.predict(classifier["folder"], texts, extras, output_dir="/tmp/x")


_PREDICTING_IN_A_LOOP = """
import sys
import run_classifier
folder, ready = sys.argv[1], sys.argv[2]
predictor = run_classifier.Predictor(folder, batch_size=2)
answer = predictor.predict(["a dog ."], ["the cat sat ."])
with open(ready + ".part", "w") as f:
    f.write(repr(answer))
import os
os.rename(ready + ".part", ready)  # whole when it appears
import time
import tensorflow as tf
class Slow(object):  # a sequence whose items TensorFlow's C conversion asks Python for
    def __len__(self):
        return 2
    def __getitem__(self, i):
        if i >= 2:
            raise IndexError(i)
        time.sleep(0.01)  # where the handler mostly runs (a SystemExit there was lost)
        return 1.0
while True:
    predictor.predict(["a dog ."], ["the cat sat ."])
    for _ in range(20):
        tf.constant([Slow(), Slow()])
"""


def test_a_predicting_process_keeps_sigterms_default_and_leaves_no_token_ids(classifier,
                                                                              tmp_path):
    """Issue 91 item 10 (after issue 72 item 4): a plain Python process predicting in a loop
    (no handler of its own) that gets SIGTERM ends as SIGTERM's default ends it, by the
    signal: a Predictor installs no signal handler (its handler, which ended the process
    with 143, made gunicorn log every worker holding one as "exited with code 143"). What
    it leaves in /tmp is its Predictor's private 0700 folder, empty: the features stay in
    memory (issue 72's worry was token ids left there). The process boundary is what is
    tested: a subprocess, signalled once it has answered (the file it writes), while it
    predicts on and converts Python sequences whose items TensorFlow's C code asks for."""
    import os  # pylint: disable=import-outside-toplevel
    import subprocess  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel
    import time  # pylint: disable=import-outside-toplevel
    temp = tmp_path / "tmp"
    temp.mkdir()
    ready = tmp_path / "ready"
    child = subprocess.Popen(
        [sys.executable, "-c", _PREDICTING_IN_A_LOOP, classifier["folder"], str(ready)],
        env=dict(os.environ, TMPDIR=str(temp)), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE)
    try:
        deadline = time.time() + HANG_GUARD_SECONDS
        while not ready.exists() and child.poll() is None and time.time() < deadline:
            time.sleep(0.1)  # waiting for the child's file, not for a guessed time
        assert ready.exists(), child.communicate(timeout=60)[1].decode()[-2000:]
        # Its answer is the shared predictor's; its temporary folder is there while it runs.
        expected = classifier["predictor"].predict(["a dog ."], ["the cat sat ."])
        assert ready.read_text() == repr(expected)
        made = [p.name for p in temp.iterdir()]
        assert len(made) == 1 and made[0].startswith("run_classifier_predict_"), made
        child.send_signal(15)
        _, err = child.communicate(timeout=HANG_GUARD_SECONDS)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -15, err.decode()[-2000:]
    assert [list(p.iterdir()) for p in temp.iterdir()] == [[]]
    assert b"Traceback" not in err
