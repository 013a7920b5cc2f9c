"""
part: 2 Allocator
kind: wrong
mistake: the "page outside the pool" test is only `p >= num_pages`; a negative page passes and
    Python's negative indexing makes refs[-1] the last page's count. release([-1]) while the
    last page is held lowers the last page's count (and, at 0, queues -1 itself as a free page,
    which allocate later hands out); retain([-1]) raises the last page's count (a page below
    -num_pages raises IndexError, not ValueError). Free pages, double frees, pages >= num_pages and allocate
    are all right.
good feedback must say: a negative page (e.g. -1) is outside the pool and must raise ValueError;
    here it was taken as the last page (Python's negative index) / refs[-1]; check 0 <= p < num_pages.
must not say: a double free is accepted; a leak; the free queue order; pages freed on the
    first release (refcount); allocate wrong.
"""
from collections import Counter, deque


class Allocator:
    """Pages 0 .. num_pages - 1 of the pool, handed out and given back, each reference-counted.

    refs[p]: how many hold page p (0: free). The free pages form a queue: allocate takes from its
    front, release puts the pages that became free at its back, in the order given. A wrong call
    raises ValueError and changes nothing.
    """

    def __init__(self, num_pages):
        self.num_pages = num_pages
        self.refs = [0] * num_pages
        self.free = deque(range(num_pages))

    @property
    def num_free(self):
        """How many pages are free."""
        return len(self.free)

    def _check_held(self, p, times=1):
        if p >= self.num_pages:
            raise ValueError(f"page {p} is outside the pool of {self.num_pages} pages")
        if self.refs[p] < times:
            raise ValueError(f"page {p} is held {self.refs[p]} times, given {times}")

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
            self._check_held(p)
        for p in pages:
            self.refs[p] += 1

    def release(self, pages):
        """One holder fewer for each page; return the pages that became free. ValueError (and nothing
        released) for a free page, a page given more often than it is held, or a page outside the pool."""
        pages = list(pages)
        for p, times in Counter(pages).items():
            self._check_held(p, times)
        freed = []
        for p in pages:
            self.refs[p] -= 1
            if self.refs[p] == 0:
                freed.append(p)
                self.free.append(p)
        return freed
