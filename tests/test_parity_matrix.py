"""One model, one answer: every head x every door x every kind of input.

A trained folder leaves through several doors: its runner's do_predict files, the Python
Predictor (run_classifier / run_ner / run_squad / run_multiple_choice .Predictor,
extract_features.SentenceEncoder), the SavedModel of export_saved_model.py loaded with
tf.saved_model.load (as TF Serving would), LiteRT fp32 (LiteRTPredictor) and the
HuggingFace folder of convert_hf_checkpoint.py --direction=to_hf in transformers (the
torch peer venv of tests/hf_peer_check.py; skipped without it). Each door re-implements
the head's windows, decoding and labels; each cell here compares one door with do_predict
on one kind of input (parity_helpers.KINDS: short, two and three windows long, empty,
whitespace only, unicode, a batch mixing lengths, duplicates): the same labels / tags /
answers, scores within conftest.FP32_ATOL. A door may instead refuse: the same refusal as
do_predict's, or a one-line refusal when the model is exported for it.

The matrix is printed at the end of the run (conftest's terminal summary).
"""
import pytest

import parity_helpers as ph

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

KNOWN_DIFFERENT = {
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


def _params():
    """(head, door, kind) of every cell, each head's doors together (the HuggingFace ones
    last: one peer process answers them all)."""
    params = []
    for door_group in (("predictor", "saved_model", "litert"), ("hf",)):
        for head in ph.HEADS:
            for door in door_group:
                for kind in ph.KINDS:
                    reason = KNOWN_DIFFERENT.get((head, door, kind))
                    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                    params.append(pytest.param(head, door, kind, marks=marks,
                                               id="%s-%s-%s" % (head, door, kind)))
    return params


class _Heads(object):
    """The trained heads of the run (tests/trained.py: each trained once, shared with the
    door tests and the other worker), and the HuggingFace door's answers, made once."""

    def __init__(self, trained, root):
        self.trained, self.root = trained, root
        self.hf_done = False

    def get(self, name):
        return self.trained.head(name)

    def hf(self):
        python = ph.peer_python()
        if python is None:
            pytest.skip("no torch peer venv (`make peer-venv` makes .venv-reproduce; "
                        "$BERT_TF2_PEER_PYTHON names another): transformers is not installed "
                        "here")
        if not self.hf_done:
            self.hf_done = True
            ph.run_hf_door([self.get(name) for name in ph.HEADS], self.root, python)


@pytest.fixture(scope="session")
def heads(trained_heads, tmp_path_factory):
    return _Heads(trained_heads, tmp_path_factory.mktemp("parity"))


@pytest.mark.slow
@pytest.mark.parametrize("head, door, kind", _params())
def test_door_gives_do_predicts_answer(heads, head, door, kind):
    if door == "hf":
        heads.hf()
        if heads.get(head).hf_head is None:
            ph.MATRIX[(head, door, kind)] = ph.Cell("skip")
            pytest.skip("transformers has no span decoding to compare with run_squad's "
                        "(its question-answering pipeline has rules of its own)")
    cell = ph.compute_cell(heads.get(head), door, kind)
    ph.MATRIX[(head, door, kind)] = cell
    assert cell.agrees, "%s, %s, %s: %s %s" % (head, door, kind, cell.value, cell.detail)
