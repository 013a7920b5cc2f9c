"""The interfaces of the engine's three bookkeeping parts: allocator, prefix cache, scheduler.

The engine uses its own parts (:class:`~.allocator.Allocator`, :class:`~.radix.RadixCache` or
:class:`~.radix.NoCache`, :class:`~.scheduler.Scheduler`) only through these methods, so a part
of your own that has them plugs in the same way::

    Engine(model, pool_rows=64, allocator=MyAllocator, prefix_cache=MyCache, scheduler=MyScheduler)

Each keyword takes a factory (a class, or any callable) the engine calls once, in this order:

- ``allocator(pool_rows, page_size) -> Allocator``
- ``prefix_cache(allocator) -> PrefixCache`` (or ``True``: :class:`~.radix.RadixCache`; ``False``:
  :class:`~.radix.NoCache`)
- ``scheduler(allocator, cache, max_step_tokens=...) -> Scheduler``

Pages and rows: the allocator hands out pages of ``page_size`` pool rows; page ``p`` holds rows
``p * page_size .. p * page_size + page_size - 1``. A request's slot table lists rows; the
allocator and the cache speak pages.

Undo log (what a step's rollback needs from a part). A step is a transaction
(:meth:`Engine.step`): if it fails, every part must be as it was before it. Two ways to meet that:

1. **Journal** (what the engine's own parts do: the cost of a step is the cost of its changes).
   A part with an attribute ``journal`` gets the engine's :class:`~.journal.Journal` assigned to
   it once, when the engine is made; after each change it calls
   ``self.journal.record(undo, *args)`` with a function that undoes that change. Outside a step
   ``record`` does nothing. The records are undone newest first, so each one may assume the
   part is exactly as it was right after its change. A scheduler that journals also saves the
   state of each request before it first changes it in a step
   (``if journal.first_time(req): journal.record(req.rewind, req.mark())``), and its queues
   and stats.
2. **Snapshot** (the fallback: correct, but O(the part's size) every step). A part without a
   ``journal`` attribute is copied at the start of every step (``copy.deepcopy`` of its
   attributes, the other parts and the requests shared, not copied) and put back on rollback; for
   a scheduler without one, every waiting and running request's state is saved too. A part
   you are writing can start there and journal later.

Pool rows a failed step overwrote are the engine's to save and put back (through
:mod:`ropepool.pool_write`, the one pool writer): a part only reports, in ``Batch.reclaimed``,
the rows it took from the cache or from a preempted request this step.

Shapes are Python lists of ints unless said otherwise; ``T`` is the step's new tokens.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import mlx.core as mx

from .journal import Journal
from .request import Request

#: Where a prefix cache's last match or insert of a sequence ended, as that cache understands it
#: (for :class:`~.radix.RadixCache`: a node and a depth). Opaque to the scheduler, which keeps it
#: in ``Request.cursor`` and hands it back; None means "at the root": nothing of it is cached yet.
Cursor = Any


@runtime_checkable
class Allocator(Protocol):
    """Pages of pool rows, handed out and taken back, each reference-counted.

    Attributes
    ----------
    pool_rows : int           P, the rows of each layer's pool
    page_size : int           rows per page (divides P)
    num_pages : int           P / page_size
    refs : Sequence[int]      ``refs[p]``: how many hold page ``p`` (requests, and the cache); 0: free
    num_free : int            pages free now (a property: O(1))
    rows_in_use : int         rows of the pages held now (a property: O(1))
    """

    pool_rows: int
    page_size: int
    num_pages: int
    refs: Sequence[int]

    @property
    def num_free(self) -> int: ...

    @property
    def rows_in_use(self) -> int: ...

    def pages_for(self, rows: int) -> int:
        """Pages that hold ``rows`` rows (rounded up)."""

    def rows(self, pages: Sequence[int]) -> list[int]:
        """The pool rows of ``pages``, page after page: ``len(pages) * page_size`` rows."""

    def allocate(self, n: int) -> list[int]:
        """``n`` free pages, each now held once; ValueError (and nothing taken) if fewer are free. The engine
        asks for ``n >= 1`` only."""

    def retain(self, pages: Sequence[int]) -> None:
        """One more holder for each of ``pages`` (each held already)."""

    def release(self, pages: Sequence[int]) -> list[int]:
        """One holder fewer for each of ``pages``; return those whose count fell to 0 (free again).
        ValueError (and nothing released) for a page not held, or given more often than held."""

    def watch(self, listener: Callable[[list[int], int], None]) -> None:
        """Call ``listener(pages, delta)`` after every :meth:`retain` (delta +1) and :meth:`release` (-1)
        with the pages whose counts changed. The radix cache keeps its count of evictable pages this
        way (it is the only user: an allocator without ``watch`` serves with ``prefix_cache=False`` or a
        cache of your own). Undoing a change (the journal) does not call it: each listener journals its
        own changes."""


@runtime_checkable
class PrefixCache(Protocol):
    """Pages of token sequences already computed, found by their longest cached prefix.

    The cache holds one reference (the allocator's ``refs``) to each page it keeps; a page only
    the cache holds is *evictable*. Only whole pages are cached (``page_size`` tokens each).

    Attributes
    ----------
    enabled : bool   False for the cache that keeps nothing (the engine's ``prefix_cache=False``)
    """

    enabled: bool

    def match(self, tokens: Sequence[int]) -> tuple[list[int], Cursor]:
        """``(pages, cursor)``: the pages of the longest cached prefix of ``tokens`` (whole pages,
        ``len(pages) * page_size`` tokens), marked as just used, and where that prefix ends. The
        caller retains the pages it uses."""

    def insert(self, tokens: Sequence[int], pages: Sequence[int], cursor: Cursor) -> tuple[list[int], Cursor]:
        """Cache ``tokens`` (whole pages of a sequence, continuing it right after ``cursor``, the
        cursor of this sequence's last :meth:`match` or :meth:`insert`), whose k and v are in
        ``pages`` (one per page of tokens). Return ``(theirs, cursor)``: the cache's page for each
        page of tokens (the one given where it was new, then retained once by the cache; the
        cache's own where it already held those tokens: the caller may switch to it and give its
        own back) and where the sequence now ends. Cost: O(pages given), not O(sequence)."""

    def num_evictable(self) -> int:
        """Pages only the cache holds: :meth:`evict` can free this many. O(1)."""

    def evict(self, n: int) -> list[int]:
        """Free evictable pages, least recently used first, until ``n`` are freed or none is left; return
        them (released to the allocator), in any order. The radix cache frees whole leaves, as SGLang's
        does, so it may free more than ``n``. O(leaves freed x log(leaves)). The engine asks for
        ``n >= 1`` only."""


@runtime_checkable
class Scheduler(Protocol):
    """Who runs each step.

    Attributes
    ----------
    allocator : Allocator
    cache : PrefixCache
    waiting : deque of Request    queued, not holding rows (first in line first)
    running : list of Request     holding rows, in admission order
    stats : Stats                 what has been done so far (:class:`~.scheduler.Stats`)
    done : bool                   nothing waiting or running (a property)
    """

    allocator: Allocator
    cache: PrefixCache
    waiting: deque[Request]
    running: list[Request]
    stats: Any

    @property
    def done(self) -> bool: ...

    def add(self, req: Request) -> None:
        """Queue ``req``; raise :class:`~.errors.PoolTooSmallError` if the pool could never hold it."""

    def schedule(self) -> Any:
        """This step's :class:`~.scheduler.Batch`: who runs which tokens at which positions and slots
        (``[T]`` each), the rows handed out for them, and what was admitted, preempted or reclaimed."""

    def postprocess(self, batch: Any, logits: mx.array, *, keep_logits: bool = False) -> None:
        """After the forward pass: ``logits [len(batch.requests), vocab]`` float32 at each request's
        last new token. Advance each request, choose its next token where its sequence ended, cache
        what it wrote, give back a finished request's pages and list it in ``batch.finished``."""


@dataclass(frozen=True)
class RunnerParts:
    """Functions of your own the runner calls in place of its own (``Engine(..., parts=RunnerParts(...))``);
    None: the engine's. Every pool write still goes through :mod:`ropepool.pool_write`.

    rotate : ``(x [T, H, D], positions [T] int32, rope) -> [T, H, D]``: RoPE of q or k with the layer's
        :class:`~ropepool.rope.Rope` table, in place of the op's; models without QK-norm or MLA
    encode_e4m3 : ``(x float32, any shape) -> uint8 codes, same shape``: the FP8 pools' codes of k_rot and v
        (already divided by the layer's scale), in place of the op's; with ``kv_dtype="fp8"``
    slot_mapping : ``(batch) -> (positions [T], slots [T])``: each step's positions and pool rows from its
        :class:`~.scheduler.Batch`, in place of the scheduler's
    """

    rotate: Callable | None = None
    encode_e4m3: Callable | None = None
    slot_mapping: Callable | None = None


#: The factories :class:`~.generate.Engine` takes (see the module's docstring).
AllocatorFactory = Callable[[int, int], Allocator]  # (pool_rows, page_size)
CacheFactory = Callable[[Allocator], PrefixCache]  # (allocator)
SchedulerFactory = Callable[..., Scheduler]  # (allocator, cache, *, max_step_tokens)

__all__ = [
    "Allocator",
    "AllocatorFactory",
    "CacheFactory",
    "Cursor",
    "Journal",
    "PrefixCache",
    "RunnerParts",
    "Scheduler",
    "SchedulerFactory",
]
