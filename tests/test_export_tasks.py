"""Exports served in a fresh process equal their runner's do_predict.

The classifier, multiple-choice and tagger (softmax and CRF) folders of tests/trained.py
(trained once per test run by their runners, do_predict's answers kept; exported there
once, shared with the parity matrix) are loaded in one fresh Python process that imports no
module of the project and called on raw text; the classifier's export also through
TensorFlow's saved_model_cli (the code its command runs, in that same process: one
TensorFlow start-up for all). Every other door of the taggers: tests/test_tagger_doors.py.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import parity_helpers as ph
from conftest import FP32_ATOL
from conftest import HANG_GUARD_SECONDS
from conftest import write_text
from test_tagger_doors import expected_entities

_SERVE = """
import json, sys
import tensorflow as tf
request_file, output = sys.argv[1:]
with open(request_file, encoding="utf-8") as f:
    request = json.load(f)
found = []
for export_dir, signature, args in request["jobs"]:
    model = tf.saved_model.load(export_dir)
    out = model.signatures[signature](**{k: tf.constant(v) for k, v in args.items()})
    found.append({k: v.numpy().tolist() for k, v in out.items()})
if request["saved_model_cli"]:  # what the saved_model_cli command runs, in this process
    from tensorflow.python.tools import saved_model_cli
    sys.argv = ["saved_model_cli"] + request["saved_model_cli"]
    try:
        saved_model_cli.main()
    except SystemExit as e:
        assert not e.code, e.code
ours = sorted(m for m in sys.modules if m.split(".")[0] in ("bert_tf2", "modeling",
              "tokenization", "export_saved_model", "run_classifier", "run_multiple_choice"))
json.dump({"outputs": found, "project_modules": ours}, open(output, "w"),
          default=lambda b: b.decode("utf-8"))
"""


def serve_all_in_fresh_process(tmp_path, jobs, saved_model_cli=None):
    """Each (export_dir, signature, {input: list}) of `jobs` called in one fresh Python
    process (PYTHONPATH emptied) that imports no module of the project, then (given its
    arguments) TensorFlow's saved_model_cli command in the same process: the outputs of
    each job as lists."""
    request = write_text(tmp_path / "request.json", json.dumps({
        "jobs": [[str(export_dir), signature, inputs] for export_dir, signature, inputs in jobs],
        "saved_model_cli": saved_model_cli}))
    output = str(tmp_path / "served.json")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH="")
    subprocess.run([sys.executable, "-c", _SERVE, request, output],
                   check=True, env=env, cwd=str(tmp_path), timeout=HANG_GUARD_SECONDS,
                   stdout=subprocess.DEVNULL)
    with open(output, encoding="utf-8") as f:
        found = json.load(f)
    assert found["project_modules"] == []
    return found["outputs"]


def serve_in_fresh_process(tmp_path, export_dir, inputs):
    """serving_default of the SavedModel in `export_dir` called on `inputs` ({name: list})
    in a fresh Python process that imports no module of the project: its outputs as lists."""
    return serve_all_in_fresh_process(tmp_path, [(export_dir, "serving_default", inputs)])[0]


def _reference(head):
    """do_predict's answers to head.reference_items(), in their order."""
    return [answer for kind in ph.KINDS if not isinstance(head.reference[kind], ph.Refused)
            for answer in head.reference[kind]]


def _assert_same_answers(want, got, what):
    differing = [(i, w, g) for i, (w, g) in enumerate(zip(want, got))
                 if not ph.same_answer(w, g, atol=FP32_ATOL)]
    assert len(want) == len(got) and not differing, (what, differing[:3])


_TAGGERS = {"softmax": "tagger", "crf": "tagger_crf"}


def _tagger_texts(head):
    """do_predict's tagged sentences of the head (the parity inputs with words) and their
    words joined by blanks: the texts to serve."""
    want = [s for kind in ph.KINDS for s in head.reference[kind] if s]
    return want, [" ".join(w for w, _ in s) for s in want]


@pytest.fixture(scope="module")
def served(trained_heads, tmp_path_factory):
    """The four shared exports called in one fresh process (serve_all_in_fresh_process):
    {"classifier", "multiple_choice", "softmax", "crf": its outputs; "cli": the folder of
    saved_model_cli's run (the classifier's serving_text_a on texts[index]), "index"}."""
    tmp_path = tmp_path_factory.mktemp("served")
    classifier = trained_heads.exported("classifier")
    chooser = trained_heads.exported("multiple_choice")
    texts = [item for _, item in classifier.reference_items()]
    rows = [item for _, item in chooser.reference_items()]
    index = texts.index(classifier.kinds["short"][2])  # "john went to paris ."
    jobs = [(classifier.export_dir, "serving_default",
             {"text_a": texts, "text_b": [""] * len(texts)}),
            (chooser.export_dir, "serving_default",
             {"context": [r["context"] for r in rows], "endings": [r["endings"] for r in rows]})]
    for name in _TAGGERS.values():
        tagger = trained_heads.exported(name)
        jobs.append((tagger.export_dir, "serving_default", {"text": _tagger_texts(tagger)[1]}))
    outdir = tmp_path / "cli"
    outputs = serve_all_in_fresh_process(
        tmp_path, jobs,
        saved_model_cli=["run", "--dir", classifier.export_dir, "--tag_set", "serve",
                         "--signature_def", "serving_text_a", "--outdir", str(outdir),
                         "--input_exprs", "text_a=[%r]" % texts[index]])
    made = dict(zip(["classifier", "multiple_choice"] + list(_TAGGERS), outputs))
    made.update(cli=outdir, index=index)
    return made


@pytest.mark.slow
def test_served_classifier_and_multiple_choice_equal_their_runners(trained_heads, served):
    """run_classifier's and run_multiple_choice's folders (TF2 runs), exported, answer in a
    fresh process (no project code) as their do_predict did: the classifier's
    serving_default (text_b empty) and the chooser's (context, endings); and saved_model_cli
    run (serving_text_a, one text) gives do_predict's probabilities; one process for all."""
    classifier = trained_heads.head("classifier")
    chooser = trained_heads.head("multiple_choice")
    chosen, index, cli = served["multiple_choice"], served["index"], served["cli"]
    served = served["classifier"]
    want = _reference(classifier)
    _assert_same_answers(want, [{"label": label, "scores": p} for label, p in zip(
        served["predicted_label"], served["probabilities"])], "classifier")
    _assert_same_answers(_reference(chooser), [{"label": int(c), "scores": p} for c, p in zip(
        chosen["predicted_choice"], chosen["probabilities"])], "multiple choice")
    # The answers differ from text to text (a comparison that sees the inputs).
    assert np.ptp([a["scores"][0] for a in want]) > 1e-3
    np.testing.assert_allclose(np.load(str(cli / "probabilities.npy")),
                               [want[index]["scores"]], atol=FP32_ATOL)


@pytest.mark.slow
def test_served_in_a_fresh_process_tags_and_finds_entities_as_run_ner(trained_heads, served):
    """Both tagger exports (no --crf flag: read from the folder's model_settings.json; an
    IOB2 training file, so --crf_tag_scheme=auto took iob2) loaded in the fresh process
    that imports none of the project: do_predict's tags, and the entities read from them
    with conlleval's rules, their text and code-point offsets."""
    for head, name in _TAGGERS.items():
        tagger = trained_heads.exported(name)
        with open(os.path.join(tagger.export_dir, "assets.extra", "export_info.json")) as f:
            info = json.load(f)
        assert info["crf"] is (head == "crf")
        assert info["crf_tag_scheme"] == ("iob2" if head == "crf" else "none")
        want, texts = _tagger_texts(tagger)
        out = served[head]
        got = [row[:n] for row, n in zip(out["word_tags"], out["num_words"])]
        assert got == [[t for _, t in s] for s in want], head
        assert sum(out["num_entities"]) >= 3, head  # the model has learned some entities
        for text, tags, types, names, starts, ends, n in zip(
                texts, got, out["entity_type"], out["entity_text"],
                out["entity_start"], out["entity_end"], out["num_entities"]):
            assert list(zip(types[:n], names[:n])) == expected_entities(
                text.split(" "), tags), head
            for name_, start, end in zip(names[:n], starts[:n], ends[:n]):
                assert text[start:end] == name_
