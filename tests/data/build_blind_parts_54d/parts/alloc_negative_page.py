"""Part: 2 Allocator
Kind: wrong

The mistake:
    The pool bound checks only the top: a negative page such as -1 is taken as Python's negative
    index, the last page: release([-1]) lowers refs[num_pages - 1] (and may put -1 on the free
    queue), retain([-1]) raises refs of the last page, instead of ValueError.

A good feedback message must say:
    - a negative page (-1) is outside the pool: ValueError, nothing changed
    - -1 reached the last page (negative index) / refs[num_pages - 1] changed

It must not say:
    - double free
    - refcount / frees too soon
    - leak
    - queue order
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
        return p < self.num_pages

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
