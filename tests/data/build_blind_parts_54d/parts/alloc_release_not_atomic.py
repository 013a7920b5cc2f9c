"""Part: 2 Allocator
Kind: wrong

The mistake:
    release checks each page as it goes: a release refused at a bad page (free, outside the pool, or
    given more often than held) raises ValueError, but the pages before it in the list are already
    released (their refs lowered, pages that reached 0 put on the free queue). The docstring says
    nothing is released when it raises. Every accepted call is right.

A good feedback message must say:
    - a refused release must change nothing / nothing released when ValueError
    - pages before the bad one were already released (refs lowered / put back on the free queue)
    - check every page first, then release

It must not say:
    - a double free is not refused / no ValueError raised
    - leak
    - refcount: frees too soon
    - free queue order (stack)
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
        if n > len(self.free):
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
        freed = []
        for p in pages:
            if not self._in_pool(p) or self.refs[p] == 0:
                raise ValueError(f"page {p} is free or outside the pool")
            self.refs[p] -= 1
            if self.refs[p] == 0:
                freed.append(p)
                self.free.append(p)
        return freed
