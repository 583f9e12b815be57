"""The parity matrix's second half (test_parity_matrix.py says what a cell checks): the
taggers, the SQuAD heads, multiple choice, fill-mask and any head added since, each through
every door."""
import pytest

import parity_helpers as ph
import test_parity_matrix as first

# Every head test_parity_matrix.py does not check (parity_helpers' found heads, in their
# order): the taggers, the SQuAD heads, multiple choice, fill-mask, and a head added later.
HEADS = tuple(name for name in ph.HEADS if name not in first.HEADS)


@pytest.mark.slow
@pytest.mark.parametrize("head, door, kind", ph.cell_params(HEADS))
def test_door_gives_do_predicts_answer(parity_session, head, door, kind):
    ph.check_cell(parity_session, HEADS, head, door, kind)
