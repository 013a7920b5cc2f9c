"""
part: 2 (Allocator)
kind: correct
mistake: none. Written unusually: there is no deque. Every free page carries a stamp (page p starts
    with stamp p; a page that comes free gets the next stamp from a counter), allocate hands out the n
    free pages with the smallest stamps, which is exactly the front of the queue; release validates
    the whole call with a Counter before touching anything and stamps the pages in the order they
    become free while the call's pages are processed in the order given.
good feedback must say: passed / correct.
must NOT say: a leak, double free, refcount, order (stack/queue) or atomicity mistake.
"""
from collections import Counter


class Allocator:
    """Pages 0 .. num_pages - 1 of the pool, handed out and given back, each reference-counted.

    refs[p]: how many hold page p (0: free). The free pages form a queue: allocate takes from its
    front, release puts the pages that became free at its back, in the order given. A wrong call
    raises ValueError and changes nothing.
    """

    def __init__(self, num_pages):
        self.refs = [0] * num_pages
        self._stamp = {p: p for p in range(num_pages)}   # free page -> when it came free
        self._clock = num_pages

    @property
    def num_free(self):
        """How many pages are free."""
        return len(self._stamp)

    def allocate(self, n):
        """n free pages (a list), each now held once; ValueError if fewer than n are free."""
        if n < 0 or n > len(self._stamp):
            raise ValueError(f"cannot allocate {n} pages: {len(self._stamp)} free")
        pages = sorted(self._stamp, key=self._stamp.__getitem__)[:n]
        for p in pages:
            del self._stamp[p]
            self.refs[p] = 1
        return pages

    def _check(self, pages, verb):
        for p, times in Counter(pages).items():
            if not (0 <= p < len(self.refs)) or self.refs[p] == 0:
                raise ValueError(f"cannot {verb} page {p}: it is free")
            if verb == "release" and times > self.refs[p]:
                raise ValueError(f"page {p} released {times} times but held {self.refs[p]} times")

    def retain(self, pages):
        """One more holder for each page (each must be held already, else ValueError)."""
        pages = list(pages)
        self._check(pages, "retain")
        for p in pages:
            self.refs[p] += 1

    def release(self, pages):
        """One holder fewer for each page; return the pages that became free. ValueError (and nothing
        released) for a free page, or a page given more often than it is held."""
        pages = list(pages)
        self._check(pages, "release")
        freed = []
        for p in pages:
            self.refs[p] -= 1
            if self.refs[p] == 0:
                self._stamp[p] = self._clock
                self._clock += 1
                freed.append(p)
        return freed
