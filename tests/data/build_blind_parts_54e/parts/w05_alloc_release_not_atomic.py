"""Part: 2 Allocator.  Kind: wrong.

The mistake: release checks each page as it goes instead of checking them all first. It walks the
pages, and for each one raises ValueError if it is outside the pool or free, else takes one holder
off (and queues it if it became free). So a call with a bad page after good ones, e.g.
release([a, b]) with a held and b free, or release([a, a]) with a held once, raises ValueError but
has already released the pages before the bad one: a's count dropped (to 0: a is queued as free
while its holder still thinks it owns it). The stub says a wrong call "raises ValueError and changes
nothing" / "ValueError (and nothing released)". Every call that does not raise is right, and so is
the error itself (type and moment); allocate and retain are right.

A good feedback message must say: after the ValueError the allocator had changed / a page before
the bad one was released anyway / refs or the free queue differ after a refused release; check
every page before changing anything.
It must not say: a leak, a missing ValueError / double free not refused, the queue order (LIFO/FIFO),
freeing on the first release (reference counts ignored).
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
        freed = []
        for p in pages:
            if self._outside(p) or self.refs[p] == 0:
                raise ValueError(f"release({p}): not a held page (double free?)")
            self.refs[p] -= 1
            if self.refs[p] == 0:
                freed.append(p)
                self.free.append(p)
        return freed
