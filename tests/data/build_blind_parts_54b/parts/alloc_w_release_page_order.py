"""
part: 2 (Allocator)
kind: wrong
mistake: release goes over the distinct pages in page-number order (sorted(set(pages)), each
    decremented by how often it was given) instead of in the order given, so the pages that come free
    are queued (and returned) in ascending page order: release([7, 3]) queues 3 then 7, and the next
    allocations hand them out in that wrong order. Validation, refcounts and errors are right.
good feedback must say: the pages freed by one release call are queued in the wrong order: they must
    go to the back of the free queue in the order given (e.g. [7, 3] -> 7 before 3), yours sorts them
    by page number, so a later allocate returns them in a different order (and release's returned list
    is in that order too).
must NOT say: that it is a stack / most recently freed first (pages still go to the back); a leak; a
    double free; a refcount error.
"""
from collections import Counter, deque


class Allocator:
    """Pages 0 .. num_pages - 1 of the pool, handed out and given back, each reference-counted.

    refs[p]: how many hold page p (0: free). The free pages form a queue: allocate takes from its
    front, release puts the pages that became free at its back, in the order given. A wrong call
    raises ValueError and changes nothing.
    """

    def __init__(self, num_pages):
        self.refs = [0] * num_pages
        self.queue = deque(range(num_pages))

    @property
    def num_free(self):
        """How many pages are free."""
        return len(self.queue)

    def allocate(self, n):
        """n free pages (a list), each now held once; ValueError if fewer than n are free."""
        if not 0 <= n <= len(self.queue):
            raise ValueError(f"{n} pages asked for, {len(self.queue)} free")
        out = [self.queue.popleft() for _ in range(n)]
        for p in out:
            self.refs[p] += 1
        return out

    def retain(self, pages):
        """One more holder for each page (each must be held already, else ValueError)."""
        for p in pages:
            if self.refs[p] <= 0:
                raise ValueError(f"page {p} is free: it cannot be retained")
        for p in pages:
            self.refs[p] += 1

    def release(self, pages):
        """One holder fewer for each page; return the pages that became free. ValueError (and nothing
        released) for a free page, or a page given more often than it is held."""
        times = Counter(pages)
        for p, k in times.items():
            if self.refs[p] == 0:
                raise ValueError(f"page {p} is already free (double free)")
            if k > self.refs[p]:
                raise ValueError(f"page {p} released {k} times, held {self.refs[p]} times")
        freed = []
        for p in sorted(set(pages)):          # each page once, in page order
            self.refs[p] -= times[p]
            if self.refs[p] == 0:
                self.queue.append(p)
                freed.append(p)
        return freed
