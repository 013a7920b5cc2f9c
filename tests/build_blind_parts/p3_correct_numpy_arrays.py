# part: 3
# verdict: correct
# mistake: none: vectorised with numpy, returns two int64 arrays instead of lists
# expect: "passes"

import numpy as np


def slot_mapping(requests, page_size):
    """(positions, slots) of one step: for each request (dict of pages, cached, new), in order,
    positions cached .. cached + new - 1 and the pool row of each."""
    pos = [np.arange(r["cached"], r["cached"] + r["new"], dtype=np.int64) for r in requests]
    if not pos:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    tables = [np.asarray(r["pages"], dtype=np.int64).reshape(-1) for r in requests]
    slots = [table[p // page_size] * page_size + p % page_size for table, p in zip(tables, pos)]
    return np.concatenate(pos), np.concatenate(slots)
