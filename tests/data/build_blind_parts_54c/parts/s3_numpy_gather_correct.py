"""Part 3 slot_mapping -- kind: correct (unusual).

None: vectorised with NumPy. All the step's positions at once: np.repeat of each request's
cached, plus each token's index inside its request (np.arange minus the request's start offset in
the step); then every request's page table is flattened into one array with np.concatenate and each
position's page is gathered through a per-request offset into it. Returns two int64 NumPy arrays
(not lists) of length sum(new). An empty step gives two empty arrays.

A good feedback message must say: passed / correct.
It must not say: any mistake (wrong type / must be a list would be a checker limitation, not a
mistake: the stub does not say lists).
"""
import numpy as np


def slot_mapping(requests, page_size):
    """(positions, slots) of one step: for each request (dict of pages, cached, new), in order,
    positions cached .. cached + new - 1 and the pool row of each."""
    new = np.array([r["new"] for r in requests], dtype=np.int64)
    cached = np.array([r["cached"] for r in requests], dtype=np.int64)
    if new.sum() == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    starts = np.cumsum(new) - new  # where each request's tokens start in the step
    which = np.repeat(np.arange(len(requests)), new)  # the request of each token
    positions = cached[which] + np.arange(new.sum()) - starts[which]
    tables = [np.asarray(r["pages"], dtype=np.int64) for r in requests]
    flat = np.concatenate(tables) if tables else np.zeros(0, np.int64)
    table_start = np.cumsum([len(t) for t in tables]) - [len(t) for t in tables]
    page = flat[np.asarray(table_start, dtype=np.int64)[which] + positions // page_size]
    return positions, page * page_size + positions % page_size
