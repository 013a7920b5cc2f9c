"""
part: notebook 13, part 2 `Allocator`
kind: wrong
mistake: release checks and decrements in one pass, page by page, so a release whose list goes bad
  part way (a free page after a held one, or a page listed more often than it is held, e.g.
  release([p, p]) with refs[p] == 1) raises ValueError only after the earlier pages were already
  released and queued: the wrong call changes the allocator's state.
good feedback must say: a release that raises ValueError has already released (freed / queued) the
  pages before the bad one, so the wrong call is not without effect ("changes nothing" broken);
  validate the whole list (count each page's occurrences against refs) before changing anything.
  Valid calls are all right; the error is raised.
wrong feedback: "double free not detected / no ValueError" (it does raise), "leak", "stack order /
  LIFO", "refcount freed too soon" (FreesTooSoon), "allocate doesn't check".
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
        if n > len(self.free):
            raise ValueError(f"asked for {n} pages, {len(self.free)} free")
        pages = [self.free.popleft() for _ in range(n)]
        for p in pages:
            self.refs[p] = 1
        return pages

    def retain(self, pages):
        """One more holder for each page (each must be held already, else ValueError)."""
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
