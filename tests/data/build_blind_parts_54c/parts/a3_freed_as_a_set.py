"""Part 2 Allocator -- kind: wrong.

Mistake: release collects the pages that became free with a set comprehension (to count a page
given twice only once) and queues and returns them in the set's iteration order -- for small ints
in CPython, ascending page number -- instead of "in the order given". release([5, 2]) freeing
both queues 2 then 5 (and returns [2, 5]); the next allocate(1) hands out 2 where the engine's
hands out 5. Differs from a correct allocator ONLY when two or more pages come free in one
release in an order that is not ascending. Counts, refusals and single-page releases are right.

A good feedback message must say: freed pages must go to the back of the queue in the order given
to release (not sorted / not by page number); the returned list / the next allocate gives a
different page.
It must not say: stack / most recently freed first (LIFO), leak, double free, reference counting
wrong, allocate takes from the wrong end.
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
        if not 0 <= n <= len(self.free):
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
        for p in pages:
            self.refs[p] -= 1
        freed = list({p for p in pages if self.refs[p] == 0})
        self.free.extend(freed)
        return freed
