"""Sliding-window layers on a ring of rows: each request keeps ``window`` rows per sliding layer group.

A sliding layer's query at position ``p`` sees positions ``p - window + 1 .. p``. So position ``p``
can be written into the row position ``p - window`` held: a request's ``window`` rows, used as a ring
(row ``ring[p % window]``), serve a sequence of any length. All sliding layers of a model share the
ring's row numbers (one *group*), each in its own pool ``[rows, Hkv, D]``; the full layers keep the
engine's slot table.

A step writes new tokens ``c .. c + n - 1`` of a request that has ``c`` cached. Only the last
``window`` of them are written (slot -1 for the others: a later one of the same step would take their
row). Attention reads the ring *before* this step's write for the old positions ``c - window + 1 ..
c - 1`` and this step's own k and v for the new ones, so no row still needed is overwritten first.

:class:`Rings` hands the rows out (a free list over a pool that doubles when it runs out), frees a
request's ring when it finishes or is preempted (a preempted request is recomputed from position 0),
and counts the peak. Every change is recorded in the engine's undo log, when it has one.

A ring cannot serve a prefix shared from the radix cache: the cached prefix's last ``window`` rows of
the sliding layers are in another request's ring, perhaps overwritten. So rings are used only with
``prefix_cache=False``; with the cache on, sliding layers keep every row, masked to the window.
"""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx
import numpy as np

from .request import Status
from .scheduler import Batch


@dataclass
class WindowStep:
    """What every sliding layer of one step reads (R requests, N = most new tokens, W = window).

    slots : int32 ``[T]``            ring row each new token writes, or -1 (not among its request's last W)
    old : int32 ``[R, W - 1]``       ring rows of positions ``c - W + 1 .. c - 1`` (padding: any ring row)
    new : int32 ``[R, N]``           each request's new token m in ``[T]`` (padding repeats the last)
    mask : bool ``[R, 1, N, W - 1 + N]``  query i sees old j and new m inside its window
    """

    slots: mx.array
    old: mx.array
    new: mx.array
    mask: mx.array


class Rings:
    """Ring rows of the sliding layer group: ``window`` rows per running request, out of ``capacity``."""

    def __init__(self, window: int, capacity: int):
        self.window = window
        self.capacity = capacity
        self.free = list(range(capacity - 1, -1, -1))  # pop() gives the lowest row first
        self.rings: dict[int, tuple] = {}  # rid -> (request, rows [W])
        self.peak = 0
        self.journal = None

    @property
    def rows_in_use(self) -> int:
        return self.capacity - len(self.free)

    def _take(self, req) -> None:
        if len(self.free) < self.window:
            grown = self.capacity + self.window  # one more ring: never more rows than the rings running need
            self.free = list(range(grown - 1, self.capacity - 1, -1)) + self.free
            self.capacity = grown
        rows = np.array([self.free.pop() for _ in range(self.window)], np.int32)
        self.rings[req.rid] = (req, rows)
        self.peak = max(self.peak, self.rows_in_use)
        if self.journal is not None:
            self.journal.record(self._give, req.rid)

    def _give(self, rid: int) -> None:
        req, rows = self.rings.pop(rid)
        self.free.extend(rows[::-1].tolist())
        if self.journal is not None:
            self.journal.record(self._restore, req, rows)

    def _restore(self, req, rows) -> None:
        taken = set(rows.tolist())
        self.free = [r for r in self.free if r not in taken]
        self.rings[req.rid] = (req, rows)

    def release(self, finished) -> None:
        """Give back the rings of ``finished`` requests."""
        for req in finished:
            if req.rid in self.rings:
                self._give(req.rid)

    def plan(self, batch: Batch) -> WindowStep:
        """Free the rings of requests that stopped or restarted, give the step's newcomers one, and say
        which rows this step writes and reads."""
        admitted = {id(r) for r in batch.admitted}
        for rid, (req, _) in list(self.rings.items()):
            if req.status is not Status.RUNNING or id(req) in admitted:
                self._give(rid)
        W = self.window
        n = np.array(batch.lengths)  # [R]
        R, N = len(n), int(n.max())
        slots = np.full(int(n.sum()), -1, np.int32)
        old = np.zeros((R, max(W - 1, 0)), np.int32)
        new = np.zeros((R, N), np.int32)
        mask = np.zeros((R, 1, N, max(W - 1, 0) + N), bool)
        start = 0
        for r, (req, k) in enumerate(zip(batch.requests, n)):
            c = req.num_cached
            if req.rid not in self.rings:
                if c:
                    raise RuntimeError(
                        f"request {req.rid} starts with {c} cached positions, whose sliding-window "
                        "rows no ring holds: rings need prefix_cache=False"
                    )
                self._take(req)
            ring = self.rings[req.rid][1]
            p = c + np.arange(k)  # the new positions
            slots[start : start + k] = np.where(p >= c + k - W, ring[p % W], -1)
            q = c - W + 1 + np.arange(W - 1)  # the old positions a window can still reach
            old[r] = ring[np.maximum(q, 0) % W]
            new[r] = start + np.minimum(np.arange(N), k - 1)
            i = np.minimum(np.arange(N), k - 1)[:, None]  # [N, 1], padded queries repeat the last
            at = c + i  # each query's position
            mask[r, 0, :, : W - 1] = (q[None, :] >= 0) & (q[None, :] > at - W)
            m = np.arange(N)[None, :]
            mask[r, 0, :, W - 1 :] = (m <= i) & (m < k) & (c + m > at - W)
            start += k
        return WindowStep(mx.array(slots), mx.array(old), mx.array(new), mx.array(mask))
