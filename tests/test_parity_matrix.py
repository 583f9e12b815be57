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

# The cells that differ on today's main, and what differs (pytest.mark.xfail(strict=True):
# a cell that starts agreeing fails until its entry is deleted here).
# Each entry: what the door does differently (the number of differing inputs on main at
# 5fddf18 is in the matrix the run prints).
_WINDOW = "the SavedModel tagger tags one window: the words past it get 'O'"
_WORDS = ("the SavedModel / LiteRT split a text's words at punctuation and between CJK "
          "characters too (BERT's BasicTokenizer: '\u6771\u4eac' is two words), do_predict "
          "and run_ner.predict at blanks only")
_NO_WORDS = ("a text without words: do_predict cannot take it (a CoNLL file has no empty "
             "sentence) and run_ner.predict refuses it in one line; this door answers [] "
             "(no words)")
_HF_TAGGER = ("transformers sees one window (truncation): the words past it get no tag; a "
              "word without WordPieces (U+200B, U+200D alone) gets none either, do_predict "
              "tags it")
_HF_CRF = _HF_TAGGER + "; and it decodes by argmax, not Viterbi (convert_hf_checkpoint notes it)"
_HF_HEAD_TAIL = ("--long_text=head_tail: transformers' tokenizer truncates (head only), "
                 "convert_hf_checkpoint notes it")
_SQUAD_WINDOW = "the SavedModel's answer() reads one window of the context"
_SQUAD_EMPTY = ("an empty / blank context: the SavedModel answers '' where run_squad gives "
                "'empty' (the reference's text when no span is found)")
_SQUAD_ZW = ("the SavedModel's answer text is cut at a zero-width character: 'zero\u200b' "
             "for run_squad's 'zero\u200bwidth'")
_LITERT_SQUAD_WINDOW = ("LiteRT's answer to a two-window context is the first window's "
                        "(the SavedModel's), not run_squad's")
_LITERT_SQUAD_EMPTY = ("LiteRTPredictor.predict gives no result at all (0 answers for 1 "
                       "question) for an empty / blank context; run_squad gives 'empty'")
_NO_NULL = ("SQuAD 2.0: the SavedModel / LiteRT never answer '' (no null answer, no "
            "null_score_diff_threshold); run_squad does")

KNOWN_DIFFERENT = {
    ("long_head_tail", "hf", "two_windows"): _HF_HEAD_TAIL,
    ("long_head_tail", "hf", "three_windows"): _HF_HEAD_TAIL,
    ("long_head_tail", "hf", "mixed"): _HF_HEAD_TAIL,
    ("long_head_tail", "hf", "duplicates"): _HF_HEAD_TAIL,
    ("tagger", "saved_model", "two_windows"): _WINDOW,
    ("tagger", "saved_model", "three_windows"): _WINDOW,
    ("tagger", "saved_model", "empty"): _NO_WORDS,
    ("tagger", "saved_model", "whitespace"): _NO_WORDS,
    ("tagger", "saved_model", "unicode"): _WORDS,
    ("tagger", "saved_model", "mixed"): _WINDOW + "; " + _WORDS,
    ("tagger", "saved_model", "duplicates"): _WINDOW,
    ("tagger", "litert", "empty"): _NO_WORDS,
    ("tagger", "litert", "whitespace"): _NO_WORDS,
    ("tagger", "litert", "unicode"): _WORDS,
    ("tagger", "litert", "mixed"): _WORDS,
    ("tagger", "hf", "two_windows"): _HF_TAGGER,
    ("tagger", "hf", "three_windows"): _HF_TAGGER,
    ("tagger", "hf", "empty"): _NO_WORDS,
    ("tagger", "hf", "whitespace"): _NO_WORDS,
    ("tagger", "hf", "unicode"): _HF_TAGGER,
    ("tagger", "hf", "mixed"): _HF_TAGGER,
    ("tagger", "hf", "duplicates"): _HF_TAGGER,
    ("tagger_crf", "saved_model", "two_windows"): _WINDOW,
    ("tagger_crf", "saved_model", "three_windows"): _WINDOW,
    ("tagger_crf", "saved_model", "empty"): _NO_WORDS,
    ("tagger_crf", "saved_model", "whitespace"): _NO_WORDS,
    ("tagger_crf", "saved_model", "unicode"): _WORDS,
    ("tagger_crf", "saved_model", "mixed"): _WINDOW + "; " + _WORDS,
    ("tagger_crf", "saved_model", "duplicates"): _WINDOW,
    ("tagger_crf", "litert", "empty"): _NO_WORDS,
    ("tagger_crf", "litert", "whitespace"): _NO_WORDS,
    ("tagger_crf", "litert", "unicode"): _WORDS,
    ("tagger_crf", "litert", "mixed"): _WORDS,
    ("tagger_crf", "hf", "two_windows"): _HF_CRF,
    ("tagger_crf", "hf", "three_windows"): _HF_CRF,
    ("tagger_crf", "hf", "empty"): _NO_WORDS,
    ("tagger_crf", "hf", "whitespace"): _NO_WORDS,
    ("tagger_crf", "hf", "unicode"): _HF_CRF,
    ("tagger_crf", "hf", "mixed"): _HF_CRF,
    ("tagger_crf", "hf", "duplicates"): _HF_CRF,
    ("squad_v1", "saved_model", "two_windows"): _SQUAD_WINDOW,
    ("squad_v1", "saved_model", "three_windows"): _SQUAD_WINDOW,
    ("squad_v1", "saved_model", "empty"): _SQUAD_EMPTY,
    ("squad_v1", "saved_model", "whitespace"): _SQUAD_EMPTY,
    ("squad_v1", "saved_model", "unicode"): _SQUAD_ZW,
    ("squad_v1", "saved_model", "mixed"): _SQUAD_WINDOW,
    ("squad_v1", "litert", "two_windows"): _LITERT_SQUAD_WINDOW,
    ("squad_v1", "litert", "empty"): _LITERT_SQUAD_EMPTY,
    ("squad_v1", "litert", "whitespace"): _LITERT_SQUAD_EMPTY,
    ("squad_v1", "litert", "mixed"): _LITERT_SQUAD_WINDOW,
    ("squad_v2", "saved_model", "short"): _NO_NULL,
    ("squad_v2", "saved_model", "two_windows"): _NO_NULL,
    ("squad_v2", "saved_model", "three_windows"): _NO_NULL,
    ("squad_v2", "saved_model", "unicode"): _NO_NULL,
    ("squad_v2", "saved_model", "mixed"): _NO_NULL,
    ("squad_v2", "saved_model", "duplicates"): _NO_NULL,
    ("squad_v2", "litert", "short"): _NO_NULL,
    ("squad_v2", "litert", "two_windows"): _NO_NULL,
    ("squad_v2", "litert", "three_windows"): _NO_NULL,
    ("squad_v2", "litert", "empty"): _LITERT_SQUAD_EMPTY,
    ("squad_v2", "litert", "whitespace"): _LITERT_SQUAD_EMPTY,
    ("squad_v2", "litert", "unicode"): _NO_NULL,
    ("squad_v2", "litert", "mixed"): _NO_NULL,
    ("squad_v2", "litert", "duplicates"): _NO_NULL,
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
    """The trained heads of the session, made when a cell first needs them."""

    def __init__(self, root):
        self.root = root
        self.files = ph.model_files(root)
        self.heads = {}
        self.hf_done = False

    def get(self, name):
        if name not in self.heads:
            classifier = self.get("classifier") if name == "encoder" else None
            self.heads[name] = ph.make_head(name, self.root, self.files, classifier)
        return self.heads[name]

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
def heads(tmp_path_factory):
    made = _Heads(tmp_path_factory.mktemp("parity"))
    yield made
    for head in made.heads.values():
        head.close()


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
