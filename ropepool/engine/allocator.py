"""A free list over the P rows of the KV pools: allocate rows, free them."""

from __future__ import annotations

from collections import deque


class Allocator:
    """Hands out pool rows one at a time and takes them back.

    Rows are handed out lowest first and return to the end of the list, so a freed row is
    reused once the rows never used have run out.

    Example
    -------
    >>> a = Allocator(4)
    >>> a.allocate(3), a.num_free
    ([0, 1, 2], 1)
    >>> a.free([1]); a.allocate(2)
    [3, 1]
    """

    def __init__(self, pool_rows: int):
        self.pool_rows = pool_rows  # P
        self.free_rows = deque(range(pool_rows))
        self._is_free = [True] * pool_rows

    @property
    def num_free(self) -> int:
        return len(self.free_rows)

    def allocate(self, n: int) -> list[int]:
        """``n`` free rows, taken off the free list.

        Raises
        ------
        ValueError
            Fewer than ``n`` rows are free.
        """
        if n > self.num_free:
            raise ValueError(f"allocate: {n} rows asked for, {self.num_free} free")
        rows = [self.free_rows.popleft() for _ in range(n)]
        for r in rows:
            self._is_free[r] = False
        return rows

    def free(self, rows, *, first: bool = False) -> None:
        """Put ``rows`` back on the free list; every row is checked before any is freed.

        With ``first`` they go to the head of the list, in their order, so the next
        :meth:`allocate` hands them out again: this undoes the latest allocate.

        Raises
        ------
        ValueError
            A row is already free, outside ``[0, P)`` or given twice; then nothing is freed.
        """
        rows = list(rows)
        seen = set()
        for r in rows:
            if not 0 <= r < self.pool_rows or self._is_free[r]:
                raise ValueError(f"free: row {r} is not held (P = {self.pool_rows})")
            if r in seen:
                raise ValueError(f"free: row {r} given twice")
            seen.add(r)
        for r in rows:
            self._is_free[r] = True
        if first:
            self.free_rows.extendleft(reversed(rows))
        else:
            self.free_rows.extend(rows)
