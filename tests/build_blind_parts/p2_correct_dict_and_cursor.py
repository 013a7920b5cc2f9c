# part: 2
# verdict: correct
# mistake: none: refs is a dict {page: count}, the free queue a list with a moving head index, release validated by a dry run on a copy of the counts
# expect: "passes"


class Allocator:
    """Pages 0 .. num_pages - 1 of the pool, handed out and given back, each reference-counted.

    refs[p]: how many hold page p (0: free). The free pages form a queue: allocate takes from its
    front, release puts the pages that became free at its back, in the order given. A wrong call
    raises ValueError and changes nothing.
    """

    def __init__(self, num_pages):
        self.refs = {p: 0 for p in range(num_pages)}  # a dict: refs[p] works the same
        self._queue = list(range(num_pages))  # the free queue is _queue[_head:]
        self._head = 0

    @property
    def num_free(self):
        """How many pages are free."""
        return len(self._queue) - self._head

    def allocate(self, n):
        """n free pages (a list), each now held once; ValueError if fewer than n are free."""
        if not 0 <= n <= self.num_free:
            raise ValueError(f"cannot allocate {n} pages: {self.num_free} free")
        pages = self._queue[self._head : self._head + n]
        self._head += n
        if self._head > 64 and self._head * 2 > len(self._queue):  # drop the consumed front now and then
            self._queue, self._head = self._queue[self._head :], 0
        for p in pages:
            self.refs[p] += 1
        return pages

    def retain(self, pages):
        """One more holder for each page (each must be held already, else ValueError)."""
        pages = list(pages)
        if any(self.refs.get(p, 0) == 0 for p in pages):
            raise ValueError(f"retain of a free (or unknown) page in {pages}")
        for p in pages:
            self.refs[p] += 1

    def release(self, pages):
        """One holder fewer for each page; return the pages that became free. ValueError (and nothing
        released) for a free page, or a page given more often than it is held."""
        pages = list(pages)
        trial = {}  # a dry run on the counts first, so that a bad call changes nothing
        for p in pages:
            left = trial.get(p, self.refs.get(p, 0))
            if left == 0:
                raise ValueError(f"page {p} released but not held (double free)")
            trial[p] = left - 1
        freed = []
        for p in pages:
            self.refs[p] -= 1
            if self.refs[p] == 0:
                freed.append(p)
        self._queue.extend(freed)
        return freed
