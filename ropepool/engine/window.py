"""Sliding-window layers on a ring of rows: each request keeps at most ``window`` rows per sliding layer group.

A sliding layer's query at position ``p`` sees positions ``p - window + 1 .. p``. So position ``p``
can be written into the row position ``p - window`` held: a request's ``window`` rows, used as a ring
(row ``ring[p % window]``), serve a sequence of any length. A ring holds only the positions its request
has: it grows by a row per new position (position ``p < window`` is ``ring[p]``) until it has
``window``. So the rings never hold more rows than the running requests' positions, which the
engine's ``pool_rows`` bounds. All sliding layers of a model share the ring's row numbers (one
*group*), each in its own pool ``[rows, Hkv, D]``; the full layers keep the engine's slot table.

A step writes new tokens ``c .. c + n - 1`` of a request that has ``c`` cached. Only the last
``window`` of them are written (slot -1 for the others: a later one of the same step would take their
row). Attention reads the ring *before* this step's write for the old positions ``c - window + 1 ..
c - 1`` and this step's own k and v for the new ones, so no row still needed is overwritten first.

:class:`Rings` hands the rows out (a free list over a pool that doubles when it runs out, up to
``limit`` rows), frees a request's ring when it finishes or is preempted (a preempted request is
recomputed from position 0), and counts the peak. Every change is recorded in the engine's undo log, when it has one.

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
    """Ring rows of the sliding layer group: at most ``window`` rows per running request (as many as its
    positions), out of a pool of ``capacity`` rows that grows, doubling, up to ``limit``."""

    def __init__(self, window: int, limit: int):
        self.window = window
        self.limit = limit
        self.capacity = min(window, limit)
        self.free = list(range(self.capacity - 1, -1, -1))  # pop() gives the lowest row first
        self.rings: dict[int, tuple] = {}  # rid -> (request, rows [at most W])
        self.peak = 0
        self.journal = None

    @property
    def rows_in_use(self) -> int:
        return self.capacity - len(self.free)

    def _grow(self, n: int) -> None:
        """At least ``n`` rows free: the pool doubles (or grows by what is missing), at most to ``limit``."""
        short = n - len(self.free)
        if short <= 0:
            return
        grown = min(self.limit, max(2 * self.capacity, self.capacity + short))
        if grown - self.capacity < short:
            raise RuntimeError(
                f"the sliding-window rings need {self.rows_in_use + n} rows, more than the {self.limit} "
                "pool rows (a ring holds at most its request's positions: the running requests hold more "
                "positions than pool_rows?)"
            )
        self.free = list(range(grown - 1, self.capacity - 1, -1)) + self.free
        self.capacity = grown

    def _take(self, req, n: int) -> None:
        """``n`` more rows at the end of ``req``'s ring (a new ring when it has none)."""
        self._grow(n)
        rows = np.array([self.free.pop() for _ in range(n)], np.int32)
        held = self.rings.get(req.rid)
        self.rings[req.rid] = (req, rows if held is None else np.concatenate([held[1], rows]))
        self.peak = max(self.peak, self.rows_in_use)
        if self.journal is not None:
            self.journal.record(*((self._give, req.rid) if held is None else (self._shrink, req.rid, n)))

    def _shrink(self, rid: int, n: int) -> None:
        """Give back the last ``n`` rows of ring ``rid`` (undoes a :meth:`_take` that grew it)."""
        req, rows = self.rings[rid]
        self.rings[rid] = (req, rows[:-n])
        self.free.extend(rows[-n:][::-1].tolist())

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
        """Free the rings of requests that stopped or restarted, grow each ring to the positions its request
        will have (at most ``window``), and say which rows this step writes and reads."""
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
            if req.rid not in self.rings and c:
                raise RuntimeError(
                    f"request {req.rid} starts with {c} cached positions, whose sliding-window "
                    "rows no ring holds: rings need prefix_cache=False"
                )
            have = len(self.rings[req.rid][1]) if req.rid in self.rings else 0
            if min(W, c + k) > have:  # a row for each new position, up to W
                self._take(req, min(W, c + k) - have)
            ring = self.rings[req.rid][1]  # [min(W, c + k)]: position p in ring[p % W]
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
