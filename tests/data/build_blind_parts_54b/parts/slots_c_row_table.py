"""
part: 3 (slot_mapping)
kind: correct
mistake: none. Written unusually: no p // page_size at all. Each request's page table is expanded
    into the list of all its rows (page * page_size + 0 .. page_size - 1, page after page) and the
    step's slots are the slice rows[cached : cached + new]; positions are range(cached, cached + new).
    Returned as two lists of ints.
good feedback must say: passed / correct.
must NOT say: from-start, page-offset, off-by-one or order mistakes.
"""
import numpy as np


def slot_mapping(requests, page_size):
    """(positions, slots) of one step: for each request (dict of pages, cached, new), in order,
    positions cached .. cached + new - 1 and the pool row of each."""
    positions, slots = [], []
    for r in requests:
        cached, new = int(r["cached"]), int(r["new"])
        rows = (np.asarray(r["pages"], dtype=np.int64)[:, None] * page_size + np.arange(page_size)).ravel()
        positions += range(cached, cached + new)
        slots += rows[cached: cached + new].tolist()
    return positions, slots
