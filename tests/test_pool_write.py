"""The write plan: which token writes which pool row, against the rule written out token by token."""

import numpy as np
import pytest

from ropepool.pool_write import plan

# (name, slots, P, one block expected)
CASES = [
    ("no tokens", [], 4, False),
    ("decode", [3], 4, True),
    ("decode, skipped", [-1], 4, False),
    ("decode, past the pool", [4], 4, False),
    ("prefill into consecutive rows", [5, 6, 7], 8, True),
    ("consecutive but descending", [7, 6, 5], 8, False),
    ("a skip inside a run", [1, -1, 3], 8, False),
    ("duplicates: the last token wins", [2, 5, 2, 5, 0], 8, False),
    ("out of range and duplicates", [9, 1, 9, 1, -3], 8, False),
    ("an empty pool", [0, -1], 0, False),
]


def token_order(slots, P):
    """The rule itself: every token in order overwrites its row if the row is in [0, P)."""
    rows = {}
    for t, s in enumerate(slots):
        if 0 <= s < P:
            rows[s] = t
    return sorted((t, s) for s, t in rows.items())


@pytest.mark.parametrize("name, slots, P, block", CASES, ids=[c[0] for c in CASES])
def test_plan_is_the_last_writer_rule(name, slots, P, block):
    p = plan(np.array(slots, np.int64), P)
    tokens = range(len(slots)) if p.tokens is None else p.tokens.tolist()
    assert sorted(zip(tokens, p.rows.tolist())) == token_order(slots, P)
    assert (p.start is not None) == block
    if block:
        assert p.rows.tolist() == list(range(p.start, p.start + len(slots)))
