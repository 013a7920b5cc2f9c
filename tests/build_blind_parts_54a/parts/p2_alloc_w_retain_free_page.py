"""
part: notebook 13, part 2 `Allocator`
kind: wrong
mistake: retain does not check that each page is held: retain of a free page (refs 0) is accepted
  and makes it refs 1 while the page stays in the free queue, so a later allocate hands out a page
  that is already held (refs becomes 1 again, overwritten, or the page has two owners), and
  num_free counts it as free.
good feedback must say: retain of a free page (refs[p] == 0) must raise ValueError and change
  nothing, but is accepted (the page gets a holder while still in the free queue, so it can be handed
  out again / two holders of one row).
wrong feedback: "release double free not detected" (release checks correctly), "leak", "queue
  order", "allocate does not check n", "refcount freed too soon".
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
        self._queue = deque(range(num_pages))

    @property
    def num_free(self):
        """How many pages are free."""
        return len(self._queue)

    def allocate(self, n):
        """n free pages (a list), each now held once; ValueError if fewer than n are free."""
        if n > len(self._queue):
            raise ValueError(f"{n} pages asked for, {len(self._queue)} free")
        pages = [self._queue.popleft() for _ in range(n)]
        for p in pages:
            self.refs[p] = 1
        return pages

    def retain(self, pages):
        """One more holder for each page (each must be held already, else ValueError)."""
        for p in pages:
            self.refs[p] += 1

    def release(self, pages):
        """One holder fewer for each page; return the pages that became free. ValueError (and nothing
        released) for a free page, or a page given more often than it is held."""
        count = {}
        for p in pages:
            count[p] = count.get(p, 0) + 1
        for p, k in count.items():
            if self.refs[p] < k:
                raise ValueError(f"page {p} released {k} times, held {self.refs[p]} times")
        freed = []
        for p in pages:
            self.refs[p] -= 1
            if self.refs[p] == 0:
                freed.append(p)
                self._queue.append(p)
        return freed
