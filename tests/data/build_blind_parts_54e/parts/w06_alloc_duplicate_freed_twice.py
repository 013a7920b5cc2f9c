"""Part: 2 Allocator.  Kind: wrong.

The mistake: release decides which pages became free AFTER taking all holders off, with
freed = [p for p in pages if refs[p] == 0]. When a page is given more than once in one call and is
held exactly that often (release([p, p]) with refs[p] == 2, a legal call), refs[p] reaches 0 once,
but p is listed twice: release returns [p, p], the queue gets p twice, num_free is one too many, and
two later allocations hand out the same page p (to two requests: one row written by both).
Validation is right (a page given more often than it is held is refused, nothing changed), every
call without a repeated page is right, and a repeated page that stays held is right.

A good feedback message must say: a page given twice in one release (and held twice) comes back
twice / is returned and queued twice; num_free one too high; the same page handed out twice later.
It must not say: a double free not refused / missing ValueError (nothing was over-released), a
leak (it is the opposite: a page too many), the queue order (FIFO/LIFO), freeing on the first
release.
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
        return not 0 <= p < self.num_pages

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
        pages = list(pages)
        for p in pages:
            if self._outside(p) or pages.count(p) > self.refs[p]:
                raise ValueError(f"release({p}): given {pages.count(p)} times, held {self.refs[p] if not self._outside(p) else 0}")
        for p in pages:
            self.refs[p] -= 1
        freed = [p for p in pages if self.refs[p] == 0]
        self.free.extend(freed)
        return freed
