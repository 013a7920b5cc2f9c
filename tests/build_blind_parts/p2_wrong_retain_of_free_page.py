# part: 2
# verdict: wrong
# mistake: retain just adds one to each count, it does not refuse a page that is free
# expect: "retain", "free page"

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
        self._free = deque(range(num_pages))

    @property
    def num_free(self):
        """How many pages are free."""
        return len(self._free)

    def _page(self, p):
        if not 0 <= p < self.num_pages:
            raise ValueError(f"page {p} is not in the pool")
        return p

    def allocate(self, n):
        """n free pages (a list), each now held once; ValueError if fewer than n are free."""
        if n < 0 or n > len(self._free):
            raise ValueError(f"{n} pages asked for, {len(self._free)} free")
        pages = [self._free.popleft() for _ in range(n)]
        for p in pages:
            self.refs[p] = 1
        return pages

    def retain(self, pages):
        """One more holder for each page (each must be held already, else ValueError)."""
        pages = [self._page(p) for p in pages]
        for p in pages:
            self.refs[p] += 1

    def release(self, pages):
        """One holder fewer for each page; return the pages that became free. ValueError (and nothing
        released) for a free page, or a page given more often than it is held."""
        pages = [self._page(p) for p in pages]
        for p, times in Counter(pages).items():
            if self.refs[p] == 0:
                raise ValueError(f"double free of page {p}")
            if times > self.refs[p]:
                raise ValueError(f"page {p} released {times} times, held {self.refs[p]} times")
        freed = []
        for p in pages:
            self.refs[p] -= 1
            if self.refs[p] == 0:
                freed.append(p)
                self._free.append(p)
        return freed
