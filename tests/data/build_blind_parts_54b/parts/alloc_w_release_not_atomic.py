"""
part: 2 (Allocator)
kind: wrong
mistake: release checks each page only when it reaches it, after it has already decremented (and
    possibly freed and queued) the pages before it: release([a, a]) of a page held once frees a, then
    raises ValueError on the second a, leaving a free; release([b, c]) with c free releases b, then
    raises. The error is right, but the call is not "all or nothing".
good feedback must say: after the ValueError (a double free / a free page in the list) the allocator's
    state changed: pages before the bad one were already released (refs decremented, page queued as
    free); a wrong call must change nothing, so check every page (with their multiplicity) before
    releasing any.
must NOT say: that the ValueError is missing (it is raised); a leak; a wrong queue order (stack); that
    retain or allocate is wrong.
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

    def allocate(self, n):
        """n free pages (a list), each now held once; ValueError if fewer than n are free."""
        if n < 0 or n > len(self.free):
            raise ValueError(f"asked for {n} pages, {len(self.free)} free")
        pages = [self.free.popleft() for _ in range(n)]
        for p in pages:
            self.refs[p] = 1
        return pages

    def retain(self, pages):
        """One more holder for each page (each must be held already, else ValueError)."""
        pages = list(pages)
        if any(self.refs[p] == 0 for p in pages):
            raise ValueError("retain of a free page")
        for p in pages:
            self.refs[p] += 1

    def release(self, pages):
        """One holder fewer for each page; return the pages that became free. ValueError (and nothing
        released) for a free page, or a page given more often than it is held."""
        freed = []
        for p in pages:
            if self.refs[p] == 0:
                raise ValueError(f"double free of page {p}")
            self.refs[p] -= 1
            if self.refs[p] == 0:
                self.free.append(p)
                freed.append(p)
        return freed
