"""Part: 2 Allocator
Kind: correct

What is unusual:
    none: refs is a NumPy int64 array (not a list), the free queue a list read from a moving head
    and compacted now and then, release validated with np.bincount.

A good feedback message must say:
    - passes (no mistake named)

It must not say:
    - any mistake / leak / double free / refcount
"""

import numpy as np


class Allocator:
    # refs is a NumPy array; the free queue is a list read from a moving head (no deque)

    def __init__(self, num_pages):
        self.refs = np.zeros(num_pages, dtype=np.int64)
        self._queue = list(range(num_pages))
        self._head = 0

    @property
    def num_free(self):
        return len(self._queue) - self._head

    def allocate(self, n):
        if not 0 <= n <= self.num_free:
            raise ValueError(f"{n} pages asked for, {self.num_free} free")
        pages = self._queue[self._head:self._head + n]
        self._head += n
        if self._head > 64 and 2 * self._head > len(self._queue):
            self._queue, self._head = self._queue[self._head:], 0
        self.refs[pages] = 1
        return pages

    def _as_pages(self, pages):
        arr = np.asarray(list(pages), dtype=np.int64).reshape(-1)
        if arr.size and (arr.min() < 0 or arr.max() >= len(self.refs)):
            raise ValueError("a page outside the pool")
        return arr

    def retain(self, pages):
        arr = self._as_pages(pages)
        if arr.size and (self.refs[arr] == 0).any():
            raise ValueError("retain of a free page")
        np.add.at(self.refs, arr, 1)

    def release(self, pages):
        arr = self._as_pages(pages)
        if (np.bincount(arr, minlength=len(self.refs)) > self.refs).any():
            raise ValueError("a free page, or a page released more often than it is held")
        freed = []
        for p in arr.tolist():
            self.refs[p] -= 1
            if self.refs[p] == 0:
                freed.append(p)
                self._queue.append(p)
        return freed
