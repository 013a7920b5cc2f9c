"""Part: 2 Allocator.  Kind: wrong.

The mistake: "a page outside the pool" is tested as p >= num_pages only. A negative page is not
refused: refs[-1] is Python's last element, so release([-1]) while the last page is held takes a
holder off page num_pages - 1 and, if that freed it, returns [-1] and queues -1, which a later
allocate hands out as a page; retain([-1]) adds a holder to the last page; and since -1 and
num_pages - 1 are counted as two different pages, release([n - 1, -1]) of a page held once passes
the check and leaves refs[n - 1] == -1. The stub says a page outside the pool raises ValueError and
changes nothing. Every call with pages in 0 .. num_pages - 1 (and pages >= num_pages) is right.

A good feedback message must say: a negative page (-1) was accepted / must raise ValueError: it is
outside the pool; Python's negative indexing touched the last page.
It must not say: a double free / free page not refused, a leak, the queue order, reference counts.
"""


class Allocator:
    """Pages 0 .. num_pages - 1 of the pool, handed out and given back, each reference-counted.

    refs[p]: how many hold page p (0: free). The free pages form a queue: allocate takes from its
    front, release puts the pages that became free at its back, in the order given. A wrong call
    raises ValueError and changes nothing.
    """

    def __init__(self, num_pages):
        self.num_pages = num_pages
        self.refs = [0] * num_pages
        self.free = list(range(num_pages))

    @property
    def num_free(self):
        """How many pages are free."""
        return len(self.free)

    def _outside(self, p):
        return p >= self.num_pages

    def allocate(self, n):
        """n free pages (a list), each now held once; ValueError if fewer than n are free."""
        if n > len(self.free):
            raise ValueError(f"allocate({n}): only {len(self.free)} pages free")
        pages, self.free = self.free[:n], self.free[n:]
        for p in pages:
            self.refs[p] = 1
        return pages

    def retain(self, pages):
        """One more holder for each page (each must be held already, else ValueError)."""
        for p in pages:
            if self._outside(p) or self.refs[p] == 0:
                raise ValueError(f"retain({p}): not a held page")
        for p in pages:
            self.refs[p] += 1

    def release(self, pages):
        """One holder fewer for each page; return the pages that became free. ValueError (and nothing
        released) for a free page, a page given more often than it is held, or a page outside the pool."""
        for p in set(pages):
            if self._outside(p) or list(pages).count(p) > self.refs[p]:
                raise ValueError(f"release({p}): not held that often (double free?)")
        freed = []
        for p in pages:
            self.refs[p] -= 1
            if self.refs[p] == 0:
                freed.append(p)
        self.free.extend(freed)
        return freed
