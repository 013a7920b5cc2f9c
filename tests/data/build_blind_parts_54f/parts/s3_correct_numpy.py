"""
part: 3 slot_mapping
kind: correct
mistake: none: vectorised with NumPy, returns two int64 arrays (not lists): all positions at
    once with np.concatenate of aranges, each request's page table indexed with positions //
    page_size (np.divmod). An empty step gives two empty int64 arrays.
good feedback must say: passes (part 3 right).
must not say: any mistake; that the result must be lists.
"""
import numpy as np


def slot_mapping(requests, page_size):
    """(positions, slots) of one step: for each request (dict of pages, cached, new), in order,
    positions cached .. cached + new - 1 and the pool row of each."""
    positions, slots = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
    for r in requests:
        p = np.arange(r["cached"], r["cached"] + r["new"], dtype=np.int64)
        page, row = np.divmod(p, page_size)
        table = np.asarray(r["pages"], dtype=np.int64)
        positions.append(p)
        slots.append(table[page] * page_size + row if p.size else p)
    return np.concatenate(positions), np.concatenate(slots)
