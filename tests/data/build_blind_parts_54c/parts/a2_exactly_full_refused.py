"""Part 2 Allocator -- kind: wrong.

Mistake: allocate refuses when n equals the number of free pages
(`not 0 <= n < len(self.free)` instead of `not 0 <= n <= len(self.free)`): asking for every free
page (the pool exactly filled, e.g. allocate(4) on a fresh Allocator(4), or allocate(1) with one
page left) raises ValueError, though the docstring says "ValueError if fewer than n are free".
Differs from a correct allocator ONLY on allocate(n) with n == num_free (n >= 1; allocate(0)
with no page free raises too). Everything else is right.

A good feedback message must say: allocate(n) with exactly n pages free must succeed / the last free
page(s) can be handed out / off by one in the "enough pages" test (>= instead of >).
It must not say: leak (pages are not lost, they were never asked for), double free, wrong order,
reference counts wrong.
"""

from collections import Counter, deque


class Allocator:
    """Pages 0 .. num_pages - 1 of the pool, handed out and given back, each reference-counted.

    refs[p]: how many hold page p (0: free). The free pages form a queue: allocate takes from its
    front, release puts the pages that became free at its back, in the order given. A wrong call
    raises ValueError and changes nothing.
    """

    def __init__(self, num_pages):
        self.refs = [0] * num_pages
        self.free = deque(range(num_pages))

    @property
    def num_free(self):
        """How many pages are free."""
        return len(self.free)

    def allocate(self, n):
        """n free pages (a list), each now held once; ValueError if fewer than n are free."""
        if not 0 <= n < len(self.free):
            raise ValueError(f"{n} pages asked for, {len(self.free)} free")
        pages = [self.free.popleft() for _ in range(n)]
        for p in pages:
            self.refs[p] = 1
        return pages

    def _check_held(self, p):
        if not 0 <= p < len(self.refs):
            raise ValueError(f"page {p} is outside the pool")
        if self.refs[p] == 0:
            raise ValueError(f"page {p} is free")

    def retain(self, pages):
        """One more holder for each page (each must be held already, else ValueError)."""
        for p in pages:
            self._check_held(p)
        for p in pages:
            self.refs[p] += 1

    def release(self, pages):
        """One holder fewer for each page; return the pages that became free. ValueError (and nothing
        released) for a free page, a page given more often than it is held, or a page outside the pool."""
        given = Counter(pages)
        for p in pages:
            self._check_held(p)
            if given[p] > self.refs[p]:
                raise ValueError(f"page {p} given {given[p]} times, held {self.refs[p]} times")
        freed = []
        for p in pages:
            self.refs[p] -= 1
            if self.refs[p] == 0:
                freed.append(p)
        self.free.extend(freed)
        return freed
