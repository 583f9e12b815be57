"""trainer/progress.py and logs.py: the progress display, and what the default log shows."""
import io
import logging
import os
import re
import subprocess
import sys
import types

import numpy as np
import pytest
import tensorflow as tf
from absl import logging as absl_logging

import modeling
import run_classifier
from bert_tf2 import flags_common
from bert_tf2 import heads
from bert_tf2 import logs
from bert_tf2.trainer import progress
from bert_tf2.trainer import training
from conftest import HANG_GUARD_SECONDS, REPO_ROOT
from conftest import write_text


class FakeClock:
    """Seconds that move only when the test says so."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class Terminal(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self):
        return True


@pytest.fixture
def verbosity():
    """Sets absl's verbosity for the test (the log's INFO decides details_shown)."""
    before = absl_logging.get_verbosity()
    yield absl_logging.set_verbosity
    absl_logging.set_verbosity(before)


def test_eta_and_clock_text():
    assert progress.eta_seconds(4, 16, 2.0) == 6.0
    assert progress.eta_seconds(20, 16, 2.0) == 0.0
    assert progress.eta_seconds(4, None, 2.0) is None
    assert progress.eta_seconds(4, 16, 0.0) is None
    assert progress.clock_text(3725.2) == "1:02:06"
    assert progress.clock_text(0) == "0:00:00"


def test_a_terminal_gets_one_line_rewritten_in_place(verbosity):
    verbosity(absl_logging.WARNING)
    clock, tty = FakeClock(), Terminal()
    stage = progress.Stage("train", total=10, every=30.0, stream=tty, clock=clock)
    assert stage.interval == progress.REDRAW_SECONDS
    clock.now = 2.0
    stage.update(2, examples=8, loss=0.5, lr=1e-3)   # from the start: 1 step/s, 4 examples/s
    first = ("\rtrain  [####................]  step 2/10  loss 0.5000  lr 0.001  "
             "4.0 examples/s  ETA 0:00:08")
    assert tty.getvalue() == first
    clock.now = 2.05
    stage.update(3, examples=12, loss=0.4, lr=1e-3)  # within 0.1 s of the last draw: skipped
    assert tty.getvalue() == first
    clock.now = 4.0
    stage.update(4, examples=16, loss=0.25, lr=5e-4)  # from the first update: 2 steps in 2 s
    second = ("\rtrain  [########............]  step 4/10  loss 0.2500  lr 0.0005  "
              "4.0 examples/s  ETA 0:00:06")
    assert tty.getvalue() == first + second
    clock.now = 10.0
    stage.update(10, examples=40, loss=0.125, lr=0.0)
    clock.now = 11.0
    stage.close()
    stage.close()  # once only
    out = tty.getvalue()
    full = "train  [####################]  step 10/10  loss 0.1250  lr 0  4.0 examples/s  ETA 0:00:00"
    last = "train  step 10/10  loss 0.1250  lr 0  4.0 examples/s  took 0:00:11"
    # Each line shorter than the one drawn before: blanks wipe the rest of it.
    assert out == (first + second + "\r" + full + " " * (len(second) - 1 - len(full))
                   + "\r" + last + " " * (len(full) - len(last)) + "\n")


def test_not_a_terminal_gets_a_line_per_interval_and_the_last(verbosity):
    verbosity(absl_logging.WARNING)
    clock, stream = FakeClock(), io.StringIO()
    stage = progress.Stage("train", total=100, every=30.0, stream=stream, clock=clock)
    assert stage.interval is None
    # A step a second, the last one at 120 s: it waits for the stage's last line.
    for step, seconds in [(step, step) for step in range(1, 100)] + [(100, 120)]:
        clock.now = float(seconds)
        stage.update(step, examples=step * 4, loss=1.0 / step)
    stage.close()
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue()
    assert [line.split("  ")[1] for line in lines] == [
        "step 30/100", "step 60/100", "step 90/100", "step 100/100"]
    assert lines[0] == "train  step 30/100  loss 0.0333  4.0 examples/s  ETA 0:01:10"
    assert lines[-1].endswith("  took 0:02:00")


def test_a_stage_of_unknown_length_counts_batches(verbosity):
    verbosity(absl_logging.WARNING)
    clock, tty = FakeClock(), Terminal()
    stage = progress.Stage("eval", total=None, stream=tty, clock=clock)
    clock.now = 1.0
    stage.update(1, examples=8)
    clock.now = 2.0
    stage.update(2, examples=24)
    clock.now = 3.0
    stage.close()
    assert tty.getvalue().split("\r")[1:] == [
        "eval  batch 1  8.0 examples/s  0:00:01",
        "eval  batch 2  16.0 examples/s  0:00:02",
        "eval  batch 2  16.0 examples/s  took 0:00:03\n"]
    # Lines mode at --log_every_seconds=0: the stage's last line only.
    stream = io.StringIO()
    stage = progress.Stage("predict", mode="lines", every=0, stream=stream, clock=clock)
    for batch in range(1, 50):
        stage.update(batch, examples=batch)
    stage.close()
    assert stream.getvalue().count("\n") == 1
    assert stream.getvalue().startswith("predict  batch 49  ")


def test_none_unshown_and_the_log_of_details_show_nothing(verbosity):
    for kwargs in (dict(mode="none"), dict(mode="bar", shown=False)):
        tty = Terminal()
        with progress.Stage("train", total=3, stream=tty, clock=FakeClock(), **kwargs) as stage:
            stage.update(1, examples=4, loss=1.0)
        assert tty.getvalue() == ""
    # auto off a terminal when the log is INFO by choice: the log carries the lines.
    verbosity(absl_logging.INFO)
    stream = io.StringIO()
    with progress.Stage("train", total=3, stream=stream, clock=FakeClock()) as stage:
        stage.update(3, examples=4, loss=1.0)
    assert stream.getvalue() == ""
    with pytest.raises(ValueError, match=r"^--progress=fancy: expected one of auto, bar, "):
        progress.Stage("train", mode="fancy")


def test_a_log_record_clears_the_bar_first(verbosity):
    verbosity(absl_logging.INFO)
    clock, tty = FakeClock(), Terminal()
    handler = logging.StreamHandler(tty)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        stage = progress.Stage("train", total=4, mode="bar", stream=tty, clock=clock)
        clock.now = 1.0
        stage.update(1, examples=2, loss=0.5)
        drawn = tty.getvalue()
        logging.getLogger("bert_tf2.test").warning("Saved checkpoint x")
        assert tty.getvalue() == drawn + "\r" + " " * (len(drawn) - 1) + "\r" + \
            "Saved checkpoint x\n"
        clock.now = 1.05  # within 0.1 s, but a cleared bar is drawn again at once
        stage.update(2, examples=4, loss=0.5)
        # Less than a second after the first update: the rates count from the start.
        assert tty.getvalue().endswith("\rtrain  [##########..........]  step 2/4  loss 0.5000  "
                                       "3.8 examples/s  ETA 0:00:02")
        stage.close()
        assert not handler.filters  # the bar's filter leaves with it
    finally:
        root.removeHandler(handler)


def test_a_notebook_gets_text_updated_in_place(monkeypatch):
    shown = []

    class Handle:
        def update(self, obj):
            shown.append(("update", obj.data))

    display = types.ModuleType("IPython.display")
    display.Pretty = type("Pretty", (), {"__init__": lambda self, data: setattr(self, "data",
                                                                                  data)})
    display.display = lambda obj, display_id=False: shown.append(("display", obj.data)) or (
        Handle() if display_id else None)
    ipython = types.ModuleType("IPython")
    ipython.display = display
    ipython.get_ipython = lambda: types.SimpleNamespace(kernel=object())
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "IPython.display", display)
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # not installed: text
    clock, stream = FakeClock(), io.StringIO()
    stage = progress.Stage("predict", total=2, stream=stream, clock=clock)
    clock.now = 1.0
    stage.update(1, examples=8)
    clock.now = 2.0
    stage.update(2, examples=16)
    stage.close()
    assert stream.getvalue() == ""
    assert shown == [("display", "predict"),
                     ("update", "predict  batch 1/2  8.0 examples/s  ETA 0:00:01"),
                     ("update", "predict  batch 2/2  8.0 examples/s  ETA 0:00:00"),
                     ("update", "predict  batch 2/2  8.0 examples/s  took 0:00:02")]


def test_the_flag_and_the_setting():
    fv = flags_common.parse_flags(flags_common.define_training_flags, ["--progress=none"])
    assert fv.progress == "none"
    assert run_classifier.Settings().progress == "auto"
    with pytest.raises(Exception, match="progress"):
        flags_common.parse_flags(flags_common.define_training_flags, ["--progress=fancy"])
    with pytest.raises(ValueError, match="--progress=fancy"):
        training.RunConfig(output_dir="x", progress="fancy").validate()


def _tiny_features(n):
    rng = np.random.RandomState(0)
    return {"input_ids": rng.randint(0, 30, [n, 6]).astype(np.int32),
            "input_mask": np.ones([n, 6], np.int32),
            "segment_ids": np.zeros([n, 6], np.int32),
            "label_ids": rng.randint(0, 2, [n]).astype(np.int32),
            "is_real_example": np.ones([n], np.int32)}


def test_training_and_prediction_draw_their_bars(tmp_path, monkeypatch, verbosity):
    verbosity(absl_logging.WARNING)
    tty = Terminal()
    monkeypatch.setattr(sys, "stderr", tty)
    config = modeling.BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
                                 num_attention_heads=2, intermediate_size=16,
                                 max_position_embeddings=16)
    runner = training.Runner(
        tf.distribute.get_strategy(), lambda: heads.BertClassifier(config, 2),
        training.RunConfig(output_dir=str(tmp_path), num_train_steps=6, progress="bar",
                           log_every_seconds=1e-3, autograph=False))  # as the faces trace
    data = _tiny_features(8)

    def loss_fn(model, feats, is_training):
        logits = model(feats, training=is_training)["logits"]
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=feats["label_ids"], logits=logits)), {}

    runner.train(lambda ctx=None: tf.data.Dataset.from_tensor_slices(data).batch(4).repeat(),
                 loss_fn, global_batch_size=4)
    out = tty.getvalue()
    assert out.startswith("\rtrain  [") and out.count("\n") == 1
    assert out.endswith("\n") and "train  step 6/6  loss " in out.rsplit("\r", 1)[1]
    # (took H:MM:SS: a minute or more on a loaded machine)
    assert re.search(r"examples/s  took \d+:\d\d:\d\d", out.rsplit("\r", 1)[1]), out
    tty.seek(0)
    tty.truncate()
    rows = list(runner.predict(
        lambda ctx=None: tf.data.Dataset.from_tensor_slices(data).batch(3),
        lambda model, feats: {"is_real_example": feats["is_real_example"]},
        stage="eval", total_steps=3))
    assert len(rows) == 3
    last = tty.getvalue().rsplit("\r", 1)[1]
    assert last.startswith("eval  batch 3/3  ") and last.endswith("\n")


def _tiny_classifier_task(folder):
    """A csv task, a 1-layer 16-wide config and its vocabulary in `folder`; the flags."""
    words = ["good", "great", "fine", "bad", "awful", "poor", "the", "film", "was", "very"]
    write_text(folder / "vocab.txt", "\n".join(
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words) + "\n")
    write_text(folder / "bert_config.json", modeling.BertConfig(
        vocab_size=15, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=32).to_json_string())
    rng = np.random.RandomState(1)
    for split, n in (("train", 8), ("dev", 4), ("test", 4)):
        rows = ["id,text,label"]
        for i in range(n):
            label = i % 2
            rows.append("%d,the film was %s,%s" % (
                i, words[rng.randint(3) + 3 * label], ("positive", "negative")[label]))
        write_text(folder / "data" / ("%s.csv" % split), "\n".join(rows) + "\n")
    return dict(task_name="csv", data_dir=str(folder / "data"),
                vocab_file=str(folder / "vocab.txt"),
                bert_config_file=str(folder / "bert_config.json"), max_seq_length=16,
                train_batch_size=4, num_train_epochs=1.0, do_train=True, do_eval=True,
                do_predict=True)


def _display_lines(text):
    return [line for line in text.splitlines()
            if line.split("  ")[0] in ("train", "eval", "predict")]


def check_stages(text):
    """The display lines of `text` are those of a train, an eval and a predict stage of
    2 steps, 1 batch and 1 batch: each stage's last line and, once --log_every_seconds
    (30 s) have passed, a line after a step or batch (a slow machine may show some; how
    many depends on its speed, so the bound is one per step or batch)."""
    shown = _display_lines(text)
    stages = [line.split("  ")[0] for line in shown]
    assert sorted(set(stages), key=stages.index) == ["train", "eval", "predict"], text
    assert [stages.count(s) <= n + 1 for s, n in (("train", 2), ("eval", 1), ("predict", 1))
            ] == [True] * 3, text
    last = {stage: line for stage, line in zip(stages, shown)}
    assert last["train"].startswith("train  step 2/2  loss ")
    assert last["eval"].startswith("eval  batch 1/1  ")
    assert last["predict"].startswith("predict  batch 1/1  ")
    assert all("examples/s  took 0:" in line for line in last.values()), text


def test_command_line_default_output_is_short(normal_run):
    done = normal_run[2]
    lines = done.stderr.splitlines()
    # Stage headers, a checkpoint, eval results, 3 display lines: ~28 lines, not ~130.
    assert len(lines) <= 35, done.stderr
    assert "*** Example ***" not in done.stderr and "input_ids:" not in done.stderr
    assert "***** Running training *****" in done.stderr and "eval_accuracy = " in done.stderr
    check_stages(done.stderr)
    assert "] step " not in done.stderr  # the log's progress line: a detail


def test_a_log_at_info_by_choice_has_the_dumps_and_progress_none_no_display(
        tmp_path, capsys, caplog, verbosity):
    task = dict(_tiny_classifier_task(tmp_path), do_eval=False, do_predict=False)
    verbosity(absl_logging.INFO)  # Python's logging.set_verbosity(INFO), or --verbosity=0
    absl_logger = absl_logging.get_absl_logger()
    propagate = absl_logger.propagate
    absl_logger.propagate = False  # its records reach caplog once, through its handler
    absl_logger.addHandler(caplog.handler)
    try:
        run_classifier.run(run_classifier.Settings(output_dir=str(tmp_path / "out"),
                                                   progress="none", **task))
    finally:
        absl_logger.removeHandler(caplog.handler)
        absl_logger.propagate = propagate
    messages = [r.getMessage() for r in caplog.records]
    assert messages.count("*** Example ***") == 5  # the first 5 of the 8 training examples
    assert any(m.startswith("step 2/2, loss ") for m in messages)
    assert _display_lines(capsys.readouterr().err) == []
    assert logs.details_shown()


def test_the_command_lines_implicit_info_leaves_the_details_out(verbosity):
    verbosity(absl_logging.INFO)
    try:
        logs.use_command_line_default(verbosity_given=False)  # absl's app.run made it INFO
        assert not logs.details_shown()
        logs.use_command_line_default(verbosity_given=True)   # --verbosity=0
        assert logs.details_shown()
        verbosity(absl_logging.WARNING)
        assert not logs.details_shown()
    finally:
        logs.use_command_line_default(True)


def _run_classifier(folder, task, mode, stderr, stdout=None):
    """run_classifier.py on `task` with --progress=`mode` (None: the default), its stderr
    `stderr` (a file descriptor or subprocess.PIPE) and its stdout `stdout` (the same unless
    given); the CompletedProcess."""
    argv = [sys.executable, str(REPO_ROOT / "run_classifier.py"), "--seed=1",
            "--output_dir=%s" % (folder / "out")]
    argv += ["--progress=%s" % mode] if mode else []
    argv += ["--%s=%s" % (k, v) for k, v in task.items()]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run(argv, stdout=stderr if stdout is None else stdout, stderr=stderr,
                          env=env, cwd=str(folder), text=True, timeout=HANG_GUARD_SECONDS,
                          check=False)


@pytest.fixture(scope="module")
def normal_run(tmp_path_factory):
    """The tiny task, the output folder and the CompletedProcess of a run on the command
    line's defaults (--progress=auto: lines off a terminal), its stderr read whole (the run
    test_command_line_default_output_is_short reads, and the lost streams' yardstick)."""
    folder = tmp_path_factory.mktemp("normal")
    task = _tiny_classifier_task(folder)
    done = _run_classifier(folder, task, None, subprocess.PIPE, subprocess.PIPE)
    assert done.returncode == 0, done.stderr[-3000:]
    return task, folder / "out", done


# (auto is lines off a terminal; none writes only the log: test_a_display_whose_stream...)
@pytest.mark.parametrize("mode, stream", [("bar", "full"), ("lines", "closed pipe")])
def test_a_lost_log_stream_stops_nothing(tmp_path, normal_run, mode, stream):
    """stderr on a full device or a pipe nobody reads: the run trains, saves, evaluates
    and predicts as the normal run did (same files), exit 0."""
    task, normal, _ = normal_run
    if stream == "full":
        if not os.path.exists("/dev/full"):
            pytest.skip("no /dev/full")
        with open("/dev/full", "w") as full:
            code = _run_classifier(tmp_path, task, mode, full.fileno()).returncode
    else:
        read_end, write_end = os.pipe()
        os.close(read_end)  # every write: a broken pipe
        try:
            code = _run_classifier(tmp_path, task, mode, write_end).returncode
        finally:
            os.close(write_end)
    assert code == 0
    out = tmp_path / "out"
    assert (out / "model.ckpt-2.index").exists()
    for name in ("test_results.tsv", "test_predictions.jsonl", "eval_results.txt",
                 "label_list.txt"):
        assert (out / name).read_text() == (normal / name).read_text(), name


def test_a_display_whose_stream_fails_turns_off_and_the_log_with_it(verbosity):
    verbosity(absl_logging.WARNING)

    class Full(Terminal):
        writes = 0

        def write(self, text):
            Full.writes += 1
            raise OSError(28, "No space left on device")

    for mode in ("bar", "lines"):
        stream = Full()
        handler = logging.StreamHandler(stream)
        absl_logging.get_absl_logger().addHandler(handler)
        try:
            with progress.Stage("train", 3, mode, every=0, stream=stream,
                                clock=FakeClock()) as stage:
                for step in (1, 2, 3):
                    stage.update(step, loss=0.5)
            absl_logging.warning("a record after the loss")
            assert Full.writes == 1 and handler.stream is logs.NOWHERE
        finally:
            absl_logging.get_absl_logger().removeHandler(handler)
        Full.writes = 0


def test_a_notebook_widget_keeps_the_last_line_as_its_text(monkeypatch):
    # A saved notebook (nbviewer, GitHub, no kernel) shows an output's text/plain, not the
    # widget: that text is the stage's last line, and the widget view stays in the output.
    shown = []

    class Handle:
        def update(self, obj, raw=False):
            shown.append(("update", dict(obj), raw))

    def show(obj, raw=False, display_id=False):
        shown.append(("display", dict(obj) if isinstance(obj, dict) else obj, raw))
        return Handle() if display_id else None

    class Widget:
        def __init__(self, *args, **kwargs):
            self.model_id = "m%d" % len(made)
            made.append(self)
            self.__dict__.update(kwargs)

    made = []
    display = types.ModuleType("IPython.display")
    display.display = show
    ipython = types.ModuleType("IPython")
    ipython.display = display
    ipython.get_ipython = lambda: types.SimpleNamespace(kernel=object())
    widgets = types.ModuleType("ipywidgets")
    widgets.IntProgress = widgets.Label = widgets.HBox = Widget
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "IPython.display", display)
    monkeypatch.setitem(sys.modules, "ipywidgets", widgets)
    clock = FakeClock()
    stage = progress.Stage("eval", total=2, stream=io.StringIO(), clock=clock)
    clock.now = 1.0
    stage.update(1, examples=8)
    clock.now = 2.0
    stage.update(2, examples=16)
    stage.close()
    view = {"application/vnd.jupyter.widget-view+json": {
        "version_major": 2, "version_minor": 0, "model_id": made[-1].model_id}}
    assert shown[0] == ("display", dict(view, **{"text/plain": "eval"}), True)
    last = "eval  batch 2/2  8.0 examples/s  took 0:00:02"
    assert shown[-1] == ("update", dict(view, **{"text/plain": last}), True)
    assert made[1].value == last  # the live label shows it too
    assert made[0].value == 2 and made[0].bar_style == "success"
