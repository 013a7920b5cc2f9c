"""Part 2 Allocator -- kind: correct (unusual).

None: the free queue is a fixed-size ring buffer (a list of num_pages slots with a head index and
a count) instead of a deque -- at most num_pages pages are ever free, so it never overflows;
refs is a plain list. release validates the whole call first by simulating it on a dict of the
counts it touches (so a page given twice is checked against its count), then applies it; a page
that comes free goes to the ring's back in the order given. Pages must be ints
0 .. num_pages - 1 (numpy ints accepted via operator.index).

A good feedback message must say: passed / correct.
It must not say: any mistake (leak, order, double free).
"""
import operator


class Allocator:
    """Pages 0 .. num_pages - 1 of the pool, handed out and given back, each reference-counted.

    refs[p]: how many hold page p (0: free). The free pages form a queue: allocate takes from its
    front, release puts the pages that became free at its back, in the order given. A wrong call
    raises ValueError and changes nothing.
    """

    def __init__(self, num_pages):
        self.refs = [0] * num_pages
        self._ring = list(range(num_pages))
        self._head = 0
        self._count = num_pages

    @property
    def num_free(self):
        """How many pages are free."""
        return self._count

    def allocate(self, n):
        """n free pages (a list), each now held once; ValueError if fewer than n are free."""
        if n < 0 or n > self._count:
            raise ValueError(f"cannot allocate {n} pages: {self._count} free")
        size = len(self._ring)
        out = [self._ring[(self._head + i) % size] for i in range(n)]
        if size:
            self._head = (self._head + n) % size
        self._count -= n
        for p in out:
            self.refs[p] = 1
        return out

    def _page(self, p):
        try:
            p = operator.index(p)
        except TypeError:
            raise ValueError(f"{p!r} is not a page") from None
        if p < 0 or p >= len(self.refs):
            raise ValueError(f"page {p} is outside the pool of {len(self.refs)} pages")
        return p

    def retain(self, pages):
        """One more holder for each page (each must be held already, else ValueError)."""
        pages = [self._page(p) for p in pages]
        if any(self.refs[p] == 0 for p in pages):
            raise ValueError("retain of a free page")
        for p in pages:
            self.refs[p] += 1

    def release(self, pages):
        """One holder fewer for each page; return the pages that became free. ValueError (and nothing
        released) for a free page, a page given more often than it is held, or a page outside the pool."""
        pages = [self._page(p) for p in pages]
        left = {}
        for p in pages:
            left[p] = left.get(p, self.refs[p]) - 1
            if left[p] < 0:
                raise ValueError(f"page {p} released more often than it is held")
        freed = []
        size = len(self._ring)
        for p in pages:
            self.refs[p] -= 1
            if self.refs[p] == 0:
                self._ring[(self._head + self._count) % size] = p
                self._count += 1
                freed.append(p)
        return freed
