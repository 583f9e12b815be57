"""The parity matrix's second half (test_parity_matrix.py says what a cell checks): the
taggers, the SQuAD heads, multiple choice and fill-mask, each through every door."""
import pytest

import parity_helpers as ph

HEADS = ("tagger", "tagger_crf", "squad_v1", "squad_v2", "multiple_choice", "fill_mask")


@pytest.mark.slow
@pytest.mark.parametrize("head, door, kind", ph.cell_params(HEADS))
def test_door_gives_do_predicts_answer(parity_session, head, door, kind):
    ph.check_cell(parity_session, HEADS, head, door, kind)
