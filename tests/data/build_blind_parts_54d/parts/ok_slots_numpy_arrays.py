"""Part: 3 slot_mapping
Kind: correct

What is unusual:
    none: vectorised with np.arange and fancy indexing of the page table; returns two int64 NumPy
    arrays (empty arrays for an empty step) instead of lists.

A good feedback message must say:
    - passes (no mistake named)

It must not say:
    - any mistake / from_start / off by one
"""

import numpy as np


def slot_mapping(requests, page_size):
    # vectorised per request; returns two int64 arrays
    positions, slots = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
    for r in requests:
        p = np.arange(r["cached"], r["cached"] + r["new"], dtype=np.int64)
        table = np.asarray(r["pages"], dtype=np.int64).reshape(-1)
        positions.append(p)
        slots.append(table[p // page_size] * page_size + p % page_size)
    return np.concatenate(positions), np.concatenate(slots)
