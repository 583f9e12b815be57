"""One model, one answer: every head x every door x every kind of input.

A trained folder leaves through several doors: its runner's do_predict files, the Python
Predictor (run_classifier / run_ner / run_squad / run_multiple_choice .Predictor,
extract_features.SentenceEncoder), the SavedModel of export_saved_model.py loaded with
tf.saved_model.load (as TF Serving would), LiteRT fp32 (LiteRTPredictor), OpenVINO fp32
(OpenVINOPredictor), ONNX Runtime fp32 (ONNXPredictor) and the
HuggingFace folder of convert_hf_checkpoint.py --direction=to_hf in transformers (the
torch peer venv of tests/hf_peer_check.py; skipped without it). Each door re-implements
the head's windows, decoding and labels; each cell here compares one door with do_predict
on one kind of input (parity_helpers.KINDS: short, two and three windows long, empty,
whitespace only, unicode, a batch mixing lengths, duplicates): the same labels / tags /
answers, scores within conftest.FP32_ATOL. A door may instead refuse: the same refusal as
do_predict's, or a one-line refusal when the model is exported for it.

The matrix is printed at the end of the run (conftest's terminal summary). Its heads are
split over two files (this one and test_parity_matrix_spans.py) so that pytest-xdist's two
workers share the matrix (tests/trained.py trains each head once for both).
"""
import pytest

import parity_helpers as ph

# The classifier family and the encoder here; the taggers, span heads, multiple choice and
# fill-mask in test_parity_matrix_spans.py.
HEADS = ("classifier", "multilabel", "regression", "long_windows", "long_head_tail", "encoder")


@pytest.mark.slow
@pytest.mark.parametrize("head, door, kind", ph.cell_params(HEADS))
def test_door_gives_do_predicts_answer(parity_session, head, door, kind):
    ph.check_cell(parity_session, HEADS, head, door, kind)


def test_the_two_files_cover_every_head_once():
    import test_parity_matrix_spans as spans  # pylint: disable=import-outside-toplevel
    assert sorted(HEADS + spans.HEADS) == sorted(ph.HEADS)


@pytest.mark.parametrize("head_class, one, other", [
    (ph.Classifier, {"label": "pos", "scores": [0.2, 0.3, 0.5]},
     {"label": "neg", "scores": [0.5, 0.3, 0.2]}),
    (ph.Multilabel, {"label": [], "scores": [0.2, 0.3, 0.4]},
     {"label": ["pos"], "scores": [0.2, 0.3, 0.6]}),
    (ph.Regression, {"label": None, "scores": [1.004]}, {"label": None, "scores": [1.5]}),
    (ph.Tagger, [("john", "O"), ("went", "O")], [("john", "B-PER")]),
])
def test_a_reference_that_decides_one_thing_fails_loudly(tmp_path, head_class, one, other):
    head = head_class(tmp_path, {})
    head.reference = {kind: [one, one] for kind in ph.KINDS}
    head.reference["empty"] = ph.Refused("nothing to say")
    with pytest.raises(AssertionError, match=r"answers \[.*\] to every input; train it more"):
        head.check_not_trivial()
    head.reference["unicode"] = [one, other]
    head.check_not_trivial()
