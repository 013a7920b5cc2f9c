"""The free list over the KV pools' rows, handed out in pages, each page reference-counted.

Pool row ``page * page_size + offset`` is row ``offset`` of page ``page``. With ``page_size`` 1
(SGLang's default) a page is one row; vLLM hands out pages of 16. A page is held by every request
whose slot table points at it, and by the prefix cache while the cache keeps it: its reference
count says by how many. A page whose count falls to 0 goes back on the free list.

Every operation costs O(pages it is given or hands out): nothing walks the pool or the free list.
Each change is recorded in the engine's undo log (:mod:`.journal`) with its inverse, so a failed
step gives back exactly the pages it took, in the same order.
"""

from __future__ import annotations

from collections import deque

from .arguments import check_int
from .errors import EngineArgumentError
from .journal import Journal

#: Slots reach the op as int32: a pool cannot have more rows than that can number.
MAX_POOL_ROWS = 2**31 - 1


class PageRows:
    """Rows and pages: page ``p`` holds pool rows ``p * page_size .. p * page_size + page_size - 1``.

    A base for allocators that have ``page_size``, ``num_pages`` and ``num_free``.
    """

    page_size: int
    num_pages: int

    @property
    def rows_in_use(self) -> int:
        """Rows of the pages held."""
        return (self.num_pages - self.num_free) * self.page_size

    def pages_for(self, rows: int) -> int:
        """Pages that hold ``rows`` rows."""
        return -(-rows // self.page_size)

    def rows(self, pages) -> list[int]:
        """The pool rows of ``pages``, page after page."""
        s = self.page_size
        if s == 1:
            return list(pages)
        return [p * s + o for p in pages for o in range(s)]


class Allocator(PageRows):
    """Hands out pages of pool rows and takes them back when no one holds them.

    Pages are handed out from the front of the free list, lowest first at the start; a page freed
    goes back as SGLang's allocators put it: to the end of the free list at page size 1 (its
    ``TokenToKVPoolAllocator.free``), to the front at larger page sizes, the pages of one release
    in the order given (its ``PagedTokenToKVPoolAllocator.free_segment``), so a freed page of 16
    rows is the next one handed out. SGLang keeps index 0 (page 0) for the rows padded tokens write
    to and numbers the rest from 1; this engine numbers from 0 and writes padded tokens nowhere
    (slot -1, which the op skips): SGLang's page ``p`` is this engine's page ``p - 1``.

    Where SGLang's ``alloc`` returns None (too few pages free), :meth:`allocate` raises; where a
    page given back twice would be on SGLang's free list twice, :meth:`release` raises. SGLang's
    ``need_sort`` mode (freed pages held apart, merged sorted when the list runs short) is not here.

    Parameters
    ----------
    pool_rows : int, P, the rows of each layer's pool
    page_size : int, rows per page; must divide P

    Example
    -------
    >>> a = Allocator(8, page_size=2)
    >>> a.allocate(3), a.num_free
    ([0, 1, 2], 1)
    >>> a.rows([2, 0])
    [4, 5, 0, 1]
    >>> a.retain([1])                   # a second holder for page 1
    >>> a.release([0, 1])               # page 0 is free again, page 1 still held once
    [0]
    >>> a.release([1]), a.allocate(2)   # freed pages first: page size 2 > 1
    ([1], [1, 0])
    """

    def __init__(self, pool_rows: int, page_size: int = 1):
        self.pool_rows = check_int("pool_rows", pool_rows, 1, MAX_POOL_ROWS)  # P
        self.page_size = check_int("page_size", page_size, 1, self.pool_rows)
        if self.pool_rows % self.page_size:
            raise EngineArgumentError(f"page_size {self.page_size} must divide pool_rows {self.pool_rows}")
        self.num_pages = self.pool_rows // self.page_size
        self.free_pages = deque(range(self.num_pages))
        self.refs = [0] * self.num_pages  # holders of each page: requests, and the prefix cache
        self.journal = Journal()  # the engine's, once it adopts this allocator (:mod:`.protocols`)
        self.listeners = []  # f(pages, delta) after each retain (+1) and release (-1): see watch

    def watch(self, listener) -> None:
        """Call ``listener(pages, delta)`` after every :meth:`retain` (+1) and :meth:`release` (-1)."""
        self.listeners.append(listener)

    @property
    def num_free(self) -> int:
        """Free pages."""
        return len(self.free_pages)

    def allocate(self, n: int) -> list[int]:
        """``n`` free pages, taken off the free list, each held once.

        Raises
        ------
        ValueError
            Fewer than ``n`` pages are free.
        """
        if n > self.num_free:
            raise ValueError(f"allocate: {n} pages asked for, {self.num_free} free")
        take, refs = self.free_pages.popleft, self.refs
        pages = [take() for _ in range(n)]
        for p in pages:
            refs[p] = 1
        self.journal.record(self._unallocate, pages)
        return pages

    def _unallocate(self, pages: list[int]) -> None:
        for p in reversed(pages):
            self.refs[p] = 0
            self.free_pages.appendleft(p)

    def retain(self, pages) -> None:
        """One more holder for each of ``pages`` (all held already)."""
        pages = list(pages)
        self._check_held(pages, "retain")
        for p in pages:
            self.refs[p] += 1
        self.journal.record(self._add, pages, -1)
        for listener in self.listeners:
            listener(pages, 1)

    def _add(self, pages: list[int], delta: int) -> None:
        for p in pages:
            self.refs[p] += delta

    def release(self, pages) -> list[int]:
        """One holder fewer for each of ``pages``; return the pages that became free.

        Every page is checked before any is released.

        Raises
        ------
        ValueError
            A page is not held, outside ``[0, P / page_size)``, or given more often than it is held;
            then nothing is released.
        """
        pages = list(pages)
        self._check_held(pages, "release")
        freed = []
        for p in pages:
            self.refs[p] -= 1
            if self.refs[p] == 0:
                freed.append(p)
        if self.page_size == 1:
            self.free_pages.extend(freed)
        else:
            self.free_pages.extendleft(reversed(freed))
        self.journal.record(self._unrelease, pages, len(freed))
        for listener in self.listeners:
            listener(pages, -1)
        return freed

    def _unrelease(self, pages: list[int], freed: int) -> None:
        take = self.free_pages.pop if self.page_size == 1 else self.free_pages.popleft
        for _ in range(freed):
            take()
        self._add(pages, 1)

    def _check_held(self, pages, what: str) -> None:
        if not pages:
            return
        if (
            set(map(type, pages)) == {int}
            and 0 <= min(pages)
            and max(pages) < self.num_pages
            and all(map(self.refs.__getitem__, pages))
            and (what == "retain" or len(set(pages)) == len(pages))
        ):
            return  # the common call: each page held, none twice (O(pages) at C speed, no dict)
        counts: dict[int, int] = {}
        for p in pages:
            if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < self.num_pages or self.refs[p] == 0:
                raise ValueError(f"{what}: page {p!r} is not held ({self.num_pages} pages)")
            counts[p] = counts.get(p, 0) + 1
            if what == "release" and counts[p] > self.refs[p]:
                raise ValueError(f"release: page {p} given {counts[p]} times, held {self.refs[p]}")
