"""Who runs this step: waiting and running queues, ``schedule()`` and ``postprocess()``.

A request is admitted when the pool has rows for its whole life (:attr:`Request.rows_needed`),
so a running request never runs out of rows and nothing is ever preempted. Admission is in
arrival order: a request that does not fit yet waits, and so does everyone behind it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import mlx.core as mx

from .allocator import Allocator
from .errors import PoolTooSmallError
from .request import Request, Status


@dataclass
class Batch:
    """One step's flat, ragged batch of T tokens, request after request.

    Attributes
    ----------
    requests : list of Request   who runs this step, in batch order
    lengths : list of int        each one's new tokens: its whole prompt, or 1 (its last token)
    tokens, positions, slots : list of int ``[T]``  token id, its position, the pool row it writes
    admitted : list of Request   the requests admitted this step (they send their prompt)
    """

    requests: list[Request] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    slots: list[int] = field(default_factory=list)
    admitted: list[Request] = field(default_factory=list)

    def add(self, req: Request, new_tokens: list[int]) -> None:
        start, n = req.num_cached, len(new_tokens)
        self.requests.append(req)
        self.lengths.append(n)
        self.tokens += new_tokens
        self.positions += range(start, start + n)
        self.slots += req.slot_table[start:start + n]


class Scheduler:
    def __init__(self, allocator: Allocator):
        self.allocator = allocator
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.finished: list[Request] = []

    def add(self, req: Request) -> None:
        """Queue ``req``; raise PoolTooSmallError if the whole pool could never hold it."""
        P = self.allocator.pool_rows
        if req.rows_needed > P:
            raise PoolTooSmallError(
                f"request {req.rid} needs {req.rows_needed} pool rows ({len(req.prompt)} prompt tokens + "
                f"{req.max_new_tokens} new - 1) but pool_rows = {P}: it could never run; "
                f"use pool_rows >= {req.rows_needed} or fewer tokens")
        self.waiting.append(req)

    def schedule(self) -> Batch:
        batch = Batch()
        # One decode token of every running request: the token it chose last step.
        for req in self.running:
            batch.add(req, [req.tokens[-1]])
        # Admit waiting requests, first come first served, while the pool has rows for them.
        while self.waiting and self.waiting[0].rows_needed <= self.allocator.num_free:
            req = self.waiting.popleft()
            req.slot_table = self.allocator.allocate(req.rows_needed)  # <- rows are handed out here
            req.status = Status.RUNNING
            batch.admitted.append(req)
            batch.add(req, req.prompt)  # its whole prompt, in this same forward pass
        self.running += batch.admitted
        return batch

    def unschedule(self, batch: Batch) -> None:
        """Undo :meth:`schedule` after a failed forward pass: the state before it, exactly.

        The requests admitted in ``batch`` go back to the head of ``waiting`` in their order,
        their rows back to the head of the free list. The running requests need nothing: their
        tokens and ``num_cached`` change only in :meth:`postprocess`, so a retry sends the same
        tokens to the same slots and rewrites any rows the failed pass had written.
        """
        for req in reversed(batch.admitted):
            self.running.remove(req)
            self.allocator.free(req.slot_table, first=True)
            req.slot_table = []
            req.status = Status.WAITING
            self.waiting.appendleft(req)

    def postprocess(self, batch: Batch, logits: mx.array) -> None:
        """Append each request's new token (greedy, from ``logits [len(batch.requests), vocab]``); free the finished."""
        chosen = mx.argmax(logits, axis=-1).tolist()
        for i, (req, n) in enumerate(zip(batch.requests, batch.lengths)):
            req.num_cached += n
            req.tokens.append(chosen[i])
            req.logits.append(logits[i])
            if req.done:
                self.allocator.free(req.slot_table)  # <- rows come back here
                req.status = Status.FINISHED
                self.running.remove(req)
                self.finished.append(req)

    @property
    def done(self) -> bool:
        return not self.waiting and not self.running
