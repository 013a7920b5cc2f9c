"""Part: 3 slot_mapping.  Kind: correct (unusual).

An unusual but correct slot mapping: no Python loop over tokens. The step's positions come from
np.repeat and np.cumsum; all page tables are concatenated into one array and each position's page is
gathered by a single fancy index (the table's offset in the concatenation + p // page_size). It
returns two int64 NumPy arrays (the op takes positions and slots as arrays), empty ones for an
empty step.

A good feedback message must say: it passes.
It must not say: any mistake; nor refuse the answer because it is a pair of arrays rather than
lists.
"""

import numpy as np


def slot_mapping(requests, page_size):
    """(positions, slots) of one step: for each request (dict of pages, cached, new), in order,
    positions cached .. cached + new - 1 and the pool row of each."""
    requests = list(requests)
    new = np.array([r["new"] for r in requests], dtype=np.int64)
    cached = np.array([r["cached"] for r in requests], dtype=np.int64)
    tables = [np.asarray(r["pages"], dtype=np.int64).reshape(-1) for r in requests]
    total = int(new.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    owner = np.repeat(np.arange(len(requests)), new)  # the request of each new token
    within = np.arange(total) - np.repeat(np.cumsum(new) - new, new)  # 0 .. new - 1 inside each request
    positions = cached[owner] + within
    lengths = np.array([len(t) for t in tables], dtype=np.int64)
    table_start = np.cumsum(lengths) - lengths
    flat = np.concatenate(tables)
    pages = flat[table_start[owner] + positions // page_size]
    return positions, pages * page_size + positions % page_size
