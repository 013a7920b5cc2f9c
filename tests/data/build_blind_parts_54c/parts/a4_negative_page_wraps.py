"""Part 2 Allocator -- kind: wrong.

Mistake: the "outside the pool" test only checks the upper end (`p >= len(self.refs)`), so a
negative page number is used as a Python index from the end: retain([-1]) or release([-1]) acts on
page num_pages - 1 when that page is held, instead of raising ValueError (release([-1]) then
returns [-1] and queues -1 on the free list when the count reaches 0). When page num_pages + p is
free the call still raises ("page is free"). Differs from a correct allocator ONLY on retain /
release of a negative page while page num_pages + p is held. Everything else is right.

A good feedback message must say: a negative page (e.g. -1) is outside the pool and must raise
ValueError (pages are 0 .. num_pages - 1), and change nothing.
It must not say: double free, leak, wrong order, exactly-full refused.
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
        if p >= len(self.refs):
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
