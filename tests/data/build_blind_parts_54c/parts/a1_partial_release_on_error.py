"""Part 2 Allocator -- kind: wrong.

Mistake: release checks each page and drops its holder in the same loop (queueing a page the
moment its count reaches 0), so a release whose later page is wrong (a free page, a page given more
often than it is held, a page outside the pool) raises ValueError AFTER the earlier pages of the
same call were already released: their counts dropped, a page that reached 0 is already at the back
of the free queue. The docstring asks "ValueError (and nothing released)" / "changes nothing".
Differs from a correct allocator ONLY on a release call that raises and has a good page before the
bad one (e.g. release([a, a]) with a held once: the first a is released, then the second raises).
Every call that succeeds, and allocate / retain, are exactly right.

A good feedback message must say: a release that raises must change nothing / check every page
before releasing any; after the ValueError, page P's count (refs) or the free queue had changed.
It must not say: a double free is not refused (it is refused), leak, frees on first release /
reference count ignored, wrong queue order / stack.
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
        freed = []
        for p in pages:
            self._check_held(p)  # a free page, or one given more often than held (its count is 0 by now)
            self.refs[p] -= 1
            if self.refs[p] == 0:
                freed.append(p)
                self.free.append(p)
        return freed
