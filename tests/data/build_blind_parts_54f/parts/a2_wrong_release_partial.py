"""
part: 2 Allocator
kind: wrong
mistake: release checks each page inside the loop that releases them, so a refused call
    (a free page, a page given more often than it is held, a page outside the pool) raises
    ValueError only after the pages before the bad one were already released (their counts
    lowered, the ones at 0 queued as free). The error itself is raised; the books are changed.
    allocate and retain are right (they check before they change anything).
good feedback must say: a release that raises ValueError must change nothing: check every page
    (counting repeats) before releasing any; here the pages before the bad one were released /
    their refs lowered / queued as free.
must not say: the ValueError is missing / not raised; a double free is accepted; a leak; the free
    queue order (stack / LIFO); pages freed on the first release (refcount).
"""
from collections import deque


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

    def _held(self, p):
        return 0 <= p < len(self.refs) and self.refs[p] > 0

    def allocate(self, n):
        """n free pages (a list), each now held once; ValueError if fewer than n are free."""
        if n > len(self.free):
            raise ValueError(f"allocate({n}): only {len(self.free)} pages are free")
        pages = [self.free.popleft() for _ in range(n)]
        for p in pages:
            self.refs[p] = 1
        return pages

    def retain(self, pages):
        """One more holder for each page (each must be held already, else ValueError)."""
        pages = list(pages)
        for p in pages:
            if not self._held(p):
                raise ValueError(f"retain of page {p}, which nobody holds")
        for p in pages:
            self.refs[p] += 1

    def release(self, pages):
        """One holder fewer for each page; return the pages that became free. ValueError (and nothing
        released) for a free page, a page given more often than it is held, or a page outside the pool."""
        freed = []
        for p in pages:
            if not self._held(p):
                raise ValueError(f"release of page {p}, which nobody holds (a double free?)")
            self.refs[p] -= 1
            if self.refs[p] == 0:
                freed.append(p)
                self.free.append(p)
        return freed
