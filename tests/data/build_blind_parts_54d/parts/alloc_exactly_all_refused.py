"""Part: 2 Allocator
Kind: wrong

The mistake:
    allocate refuses when n equals the number of free pages (off by one: >= instead of >): asking
    for exactly all the free pages, and allocate(0) on a full pool, raise ValueError. Fewer than all
    works.

A good feedback message must say:
    - allocate(n) with n == num_free (all the free pages) must succeed
    - refuse only when fewer than n are free / allocate(0) returns []

It must not say:
    - leak
    - double free
    - refcount
    - queue order / stack
"""

from collections import Counter, deque


class Allocator:
    def __init__(self, num_pages):
        self.num_pages = num_pages
        self.refs = [0] * num_pages
        self.free = deque(range(num_pages))

    @property
    def num_free(self):
        return len(self.free)

    def _in_pool(self, p):
        return 0 <= p < self.num_pages

    def allocate(self, n):
        if n >= len(self.free):
            raise ValueError(f"{n} pages asked for, {len(self.free)} free")
        pages = [self.free.popleft() for _ in range(n)]
        for p in pages:
            self.refs[p] = 1
        return pages

    def retain(self, pages):
        pages = list(pages)
        for p in pages:
            if not self._in_pool(p) or self.refs[p] == 0:
                raise ValueError(f"retain of page {p}, which is not held")
        for p in pages:
            self.refs[p] += 1

    def release(self, pages):
        pages = list(pages)
        for p, times in Counter(pages).items():
            if not self._in_pool(p):
                raise ValueError(f"page {p} is outside the pool")
            if self.refs[p] < times:
                raise ValueError(f"page {p} released {times} times, held {self.refs[p]} times")
        freed = []
        for p in pages:
            self.refs[p] -= 1
            if self.refs[p] == 0:
                freed.append(p)
                self.free.append(p)
        return freed
