"""
part: notebook 13, part 2 `Allocator`
kind: correct
unusual: the free queue is a plain dict used as an insertion-ordered set (dict.fromkeys), taken from
  its front with next(iter(...)) and appended at its back by insertion; refs is a list; release
  validates with collections.Counter against a copy of the counts before touching anything;
  num_free is computed from the dict's length.
good feedback must say: passes / correct.
wrong feedback: any named mistake (leak, order, double free, refcount, atomicity).
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
        self._free = dict.fromkeys(range(num_pages))  # insertion order is the queue's order

    @property
    def num_free(self):
        """How many pages are free."""
        return len(self._free)

    def allocate(self, n):
        """n free pages (a list), each now held once; ValueError if fewer than n are free."""
        if not 0 <= n <= len(self._free):
            raise ValueError(f"cannot allocate {n} pages: {len(self._free)} free")
        taken = []
        for _ in range(n):
            p = next(iter(self._free))
            del self._free[p]
            taken.append(p)
        for p in taken:
            self.refs[p] += 1
        return taken

    def retain(self, pages):
        """One more holder for each page (each must be held already, else ValueError)."""
        pages = list(pages)
        if not all(self.refs[p] > 0 for p in pages):
            raise ValueError("retain of a page nobody holds")
        for p in pages:
            self.refs[p] += 1

    def release(self, pages):
        """One holder fewer for each page; return the pages that became free. ValueError (and nothing
        released) for a free page, or a page given more often than it is held."""
        pages = list(pages)
        over = [p for p, k in Counter(pages).items() if k > self.refs[p]]
        if over:
            raise ValueError(f"release of page(s) {over} more often than held (a double free)")
        freed = []
        for p in pages:
            self.refs[p] -= 1
            if not self.refs[p]:
                self._free[p] = None
                freed.append(p)
        return freed
