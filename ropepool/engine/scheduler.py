"""Who runs this step: waiting and running queues, ``schedule()`` and ``postprocess()``.

Admission points a request's slot table at the longest prefix of its prompt the prefix cache
holds (:mod:`.radix`) and gives it rows for the rest of its prompt; decode rows come a page at a
time, as its tokens are written. A step runs at most ``max_step_tokens`` new tokens: a long prompt
goes in chunks over several steps while running requests keep decoding. When a running request
needs a row and none is free, the cache gives back its least recently used rows; if that is not
enough, the most recently admitted request is preempted: it gives its rows back and waits again,
first in line, to be recomputed (vLLM's recompute mode). A waiting request that does not fit yet
does not hold back the ones behind it that do; one whose prompt starts like that of a request admitted
in the same step (by :data:`IN_BATCH_PREFIX` tokens or more than the cache holds) waits a step, then
shares those rows instead of computing them twice.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from dataclasses import dataclass, field

import mlx.core as mx

from .allocator import Allocator
from .errors import ContractError, PoolTooSmallError
from .journal import Journal
from .radix import NoCache, RadixCache
from .request import Request, Status


@dataclass
class Stats:
    """What the engine has done so far.

    Attributes
    ----------
    prefill_tokens : int  prompt tokens the model computed (again, after a preemption)
    cached_tokens : int   prompt tokens served from rows already in the pool (the prefix cache)
    preemptions : int     requests sent back to the queue to free their rows
    peak_rows : int       the most pool rows in use at once, by requests or the cache
    wasted_rows : int     the most rows at once held past the end of a request's sequence (the
                          unused tail of its last page: 0 with ``page_size`` 1)
    steps : int           forward passes run
    """

    prefill_tokens: int = 0
    cached_tokens: int = 0
    preemptions: int = 0
    peak_rows: int = 0
    wasted_rows: int = 0
    steps: int = 0


@dataclass
class Batch:
    """One step's flat, ragged batch of T tokens, request after request.

    Attributes
    ----------
    requests : list of Request   who runs this step, in batch order
    lengths : list of int        each one's new tokens: a chunk of its sequence, or 1 (its last token)
    tokens, positions, slots : list of int ``[T]``  token id, its position, the pool row it writes
    admitted : list of Request   admitted this step (their slot tables may start with shared rows)
    preempted : list of Request  sent back to the queue this step (they hold no rows now)
    finished : list of Request   finished this step (their rows given back)
    reclaimed : list of int      rows this step took from the cache or a preempted request, whose
                                 old k and v matter again if the step is undone
    """

    requests: list[Request] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    slots: list[int] = field(default_factory=list)
    admitted: list[Request] = field(default_factory=list)
    preempted: list[Request] = field(default_factory=list)
    finished: list[Request] = field(default_factory=list)
    reclaimed: list[int] = field(default_factory=list)

    def add(self, req: Request, n: int) -> None:
        """``req``'s next ``n`` tokens: positions ``num_cached`` to ``num_cached + n - 1``; ``n`` is 1 to the
        tokens it has left to compute (a request in a batch computes something), else :class:`ContractError`."""
        start = req.num_cached
        if not 1 <= n <= req.num_uncached:
            raise ContractError(
                f"request {req.rid} put in the batch for {n} tokens: a request runs 1 to its "
                f"{req.num_uncached} tokens not computed yet"
            )
        self.requests.append(req)
        self.lengths.append(n)
        self.tokens += req.seq(start, start + n)
        self.positions += range(start, start + n)
        self.slots += req.slot_table[start : start + n]


#: Tokens a waiting request must gain by sharing with a request admitted in the same step for it to
#: wait one step (until those rows are written and cached) instead of computing them again (SGLang's
#: in-batch prefix caching threshold).
IN_BATCH_PREFIX = 32


def common_prefix(a: Request, b: Request) -> int:
    """Leading prompt tokens ``a`` and ``b`` have in common."""
    n = 0
    for x, y in zip(a.prompt, b.prompt):
        if x != y:
            break
        n += 1
    return n


class Scheduler:
    """Admission, chunked prefill and preemption over an allocator and a prefix cache (:mod:`.protocols`).

    A step's bookkeeping costs O(the step's requests and the pages they touch): the prefix cache
    gets only the pages each request wrote this step, from where its last insert ended
    (``Request.cursor``), and every change is recorded in the engine's undo log (:mod:`.journal`).
    """

    def __init__(self, allocator: Allocator, cache: RadixCache | NoCache, *, max_step_tokens: int = 256):
        self.allocator = allocator
        self.cache = cache
        self.max_step_tokens = max_step_tokens
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []  # in admission order: the last is preempted first
        self.stats = Stats()
        self.journal = Journal()  # the engine's, once it adopts this scheduler (:mod:`.protocols`)

    def add(self, req: Request) -> None:
        """Queue ``req``; raise PoolTooSmallError if the whole pool could never hold it."""
        a = self.allocator
        if a.pages_for(req.rows_needed) > a.num_pages:
            need = a.pages_for(req.rows_needed) * a.page_size
            raise PoolTooSmallError(
                f"request {req.rid} needs {need} pool rows ({len(req.prompt)} prompt tokens + "
                f"{req.max_new_tokens} new - 1{'' if a.page_size == 1 else f', in pages of {a.page_size}'}) but "
                f"pool_rows = {a.pool_rows}: it could never run; use pool_rows >= {need} or fewer tokens"
            )
        self.waiting.append(req)
        self.journal.record(self.waiting.pop)

    def schedule(self) -> Batch:
        """This step's batch: at most ``max_step_tokens`` new tokens, running requests first."""
        self._touch_stats()
        batch, budget = Batch(), self.max_step_tokens
        # Running requests, oldest first: one decode token each, or the next chunk of a prompt.
        for req in list(self.running):
            n = min(req.num_uncached, budget)
            if req.status is Status.RUNNING and n and self.grow(req, req.num_cached + n, batch):
                batch.add(req, n)
                budget -= n
        # Admit waiting requests in order, each that fits now, while the step has room for tokens.
        for req in list(self.waiting):
            if budget == 0 or batch.preempted:
                break
            if self.admit(req, batch):
                n = min(req.num_uncached, budget)
                batch.add(req, n)
                budget -= n
        self.stats.peak_rows = max(self.stats.peak_rows, self.allocator.rows_in_use)
        wasted = sum(max(0, len(r.slot_table) - r.seq_len) for r in self.running)
        self.stats.wasted_rows = max(self.stats.wasted_rows, wasted)
        return batch

    def admit(self, req: Request, batch: Batch) -> bool:
        """Start ``req`` on its cached prefix and rows for the rest of its sequence, if they fit now."""
        a = self.allocator
        shared, cursor = self.cache.match(req.seq(0, req.seq_len - 1))  # leave one token: its logits choose the next
        if self.cache.enabled and any(
            common_prefix(req, other) >= len(shared) * a.page_size + IN_BATCH_PREFIX for other in batch.admitted
        ):
            return False  # a request admitted this step computes a longer prefix of ours: share it next step
        a.retain(shared)
        need = max(0, a.pages_for(req.seq_len) - len(shared))
        if need > a.num_free + self.cache.num_evictable():
            a.release(shared)
            return False
        self.reclaim(need, batch)
        self._touch(req)
        req.slot_table = a.rows(shared) + (a.rows(a.allocate(need)) if need else [])  # <- rows are handed out here
        req.num_cached = len(shared) * a.page_size
        req.num_in_cache, req.cursor = len(shared), cursor
        self.stats.cached_tokens += min(req.num_cached, len(req.prompt))
        req.status = Status.RUNNING
        self._remove(self.waiting, req)
        self.running.append(req)
        self.journal.record(self.running.pop)
        batch.admitted.append(req)
        return True

    def grow(self, req: Request, rows: int, batch: Batch) -> bool:
        """Make ``req``'s slot table ``rows`` rows long, preempting if it must; False if ``req`` was preempted."""
        a = self.allocator
        need = a.pages_for(rows) - len(req.slot_table) // a.page_size
        if need <= 0:  # the table already holds them: nothing is asked of the allocator
            return True
        while need > a.num_free and need > a.num_free + self.cache.num_evictable():
            victim = self.running[-1]  # the most recently admitted
            self.preempt(victim, batch)
            if victim is req:
                return False
        self.reclaim(need, batch)
        self._touch(req)
        req.slot_table += a.rows(a.allocate(need))  # <- and here, a page at a time while decoding
        return True

    def reclaim(self, need: int, batch: Batch) -> None:
        """Evict cached pages until ``need`` pages are free."""
        short = need - self.allocator.num_free
        if short > 0:  # a part is never asked for a count below 1
            batch.reclaimed += self.allocator.rows(self.cache.evict(short))

    def preempt(self, req: Request, batch: Batch) -> None:
        """Take ``req``'s rows back and queue it first: it will compute its sequence again (recompute mode).

        Its whole pages stay in the prefix cache (evictable), so with the cache on it may find them again.
        """
        freed = self.allocator.release(self.pages(req))
        batch.reclaimed += self.allocator.rows(freed)
        self._touch(req)
        req.slot_table, req.num_cached, req.status = [], 0, Status.WAITING
        req.num_in_cache, req.cursor = 0, None
        self._remove(self.running, req)
        self.waiting.appendleft(req)
        self.journal.record(self.waiting.popleft)
        batch.preempted.append(req)
        self.stats.preemptions += 1

    def postprocess(self, batch: Batch, logits: mx.array, *, keep_logits: bool = False) -> None:
        """Advance each request past its new tokens; give it a token (greedy, from ``logits [len(batch.requests),
        vocab]``) if they ended its sequence; share its written rows; give back a finished request's rows."""
        self._touch_stats()
        chosen = mx.argmax(logits, axis=-1).tolist()
        for i, (req, n) in enumerate(zip(batch.requests, batch.lengths)):
            self._touch(req)
            self.stats.prefill_tokens += max(0, min(len(req.prompt), req.num_cached + n) - req.num_cached)
            req.num_cached += n
            if req.num_cached == req.seq_len:  # a decode token, or a prompt's last chunk
                req.tokens.append(chosen[i])
                if keep_logits:
                    req.logits.append(logits[i])
            self.share(req)
            if req.done:
                self.allocator.release(self.pages(req))  # <- rows come back here (the cache keeps its pages)
                req.status = Status.FINISHED
                self._remove(self.running, req)
                batch.finished.append(req)
        self.stats.steps += 1

    def share(self, req: Request) -> None:
        """Put the whole pages ``req`` wrote since its last insert in the prefix cache; where the cache has
        its own for the same tokens (another request computed them too), switch to those and give back
        the duplicates. O(the pages new since the last insert), not O(the sequence)."""
        a, ps = self.allocator, self.allocator.page_size
        start, stop = req.num_in_cache, req.num_cached // ps  # pages
        if stop <= start:
            return
        self._touch(req)
        mine = [req.slot_table[j * ps] // ps for j in range(start, stop)]
        theirs, req.cursor = self.cache.insert(req.seq(start * ps, stop * ps), mine, req.cursor)
        req.num_in_cache = stop
        for j, own, cached in zip(range(start, stop), mine, theirs):
            if own != cached:
                a.retain([cached])
                a.release([own])
                rows = slice(j * ps, (j + 1) * ps)
                self.journal.record(req.slot_table.__setitem__, rows, req.slot_table[rows])
                req.slot_table[rows] = a.rows([cached])

    def pages(self, req: Request) -> list[int]:
        return [row // self.allocator.page_size for row in req.slot_table[:: self.allocator.page_size]]

    # --- The undo log's records for the queues, the requests and the stats ---------------------------

    def _touch(self, req: Request) -> None:
        """Save ``req``'s state in the undo log before this step first changes it (O(1): :meth:`Request.mark`)."""
        if self.journal.first_time(req):
            self.journal.record(req.rewind, req.mark())

    def _touch_stats(self) -> None:
        if self.journal.first_time(self.stats):
            self.journal.record(self._put_stats, dataclasses.replace(self.stats))

    def _put_stats(self, stats: Stats) -> None:
        vars(self.stats).update(vars(stats))

    def _remove(self, queue, req: Request) -> None:
        i = queue.index(req)
        del queue[i]
        self.journal.record(queue.insert, i, req)

    @property
    def done(self) -> bool:
        return not self.waiting and not self.running
