"""
part: 2 Allocator
kind: correct
mistake: none: the free "queue" is a heap of (ticket, page): every page gets a ticket when it
    becomes free (pages 0 .. num_pages - 1 get tickets 0 .. num_pages - 1 at the start), and
    allocate pops the smallest tickets, which is first-in first-out. Checks use a Counter before any
    change; refs is a plain list.
good feedback must say: passes (part 2 right).
must not say: any mistake (the order pages come back in is the queue's).
"""
import heapq
from collections import Counter


class Allocator:
    """Pages 0 .. num_pages - 1 of the pool, handed out and given back, each reference-counted.

    refs[p]: how many hold page p (0: free). The free pages form a queue: allocate takes from its
    front, release puts the pages that became free at its back, in the order given. A wrong call
    raises ValueError and changes nothing.
    """

    def __init__(self, num_pages):
        self.refs = [0] * num_pages
        self._free = [(p, p) for p in range(num_pages)]  # (ticket, page): sorted, so a heap already
        self._ticket = num_pages

    @property
    def num_free(self):
        """How many pages are free."""
        return len(self._free)

    def _count(self, p):
        if not (0 <= p < len(self.refs)):
            raise ValueError(f"page {p} is not a page of this pool (0 .. {len(self.refs) - 1})")
        return self.refs[p]

    def allocate(self, n):
        """n free pages (a list), each now held once; ValueError if fewer than n are free."""
        if not 0 <= n <= len(self._free):
            raise ValueError(f"allocate({n}) with {len(self._free)} pages free")
        pages = [heapq.heappop(self._free)[1] for _ in range(n)]
        for p in pages:
            self.refs[p] = 1
        return pages

    def retain(self, pages):
        """One more holder for each page (each must be held already, else ValueError)."""
        pages = list(pages)
        if any(self._count(p) == 0 for p in pages):
            raise ValueError("retain of a free page")
        for p in pages:
            self.refs[p] += 1

    def release(self, pages):
        """One holder fewer for each page; return the pages that became free. ValueError (and nothing
        released) for a free page, a page given more often than it is held, or a page outside the pool."""
        pages = list(pages)
        for p, times in Counter(pages).items():
            if times > self._count(p):
                raise ValueError(f"page {p} released {times} times but held {self.refs[p]} times")
        freed = []
        for p in pages:
            self.refs[p] -= 1
            if self.refs[p] == 0:
                heapq.heappush(self._free, (self._ticket, p))
                self._ticket += 1
                freed.append(p)
        return freed
