"""Part: 2 Allocator.  Kind: correct (unusual).

An unusual but correct allocator: refs is a NumPy int64 array (refs[p] works, as the stub asks), the
free queue is a dict used as an ordered set (dict.fromkeys: front = first key, back = last inserted;
O(1) removal), and every call is checked in full first with np.bincount before anything changes.
The pages it hands out and returns are plain Python ints in lists.

A good feedback message must say: it passes.
It must not say: any mistake; nor fail because refs is an ndarray rather than a list (the stub only
says refs[p]).
"""

import itertools

import numpy as np


class Allocator:
    """Pages 0 .. num_pages - 1 of the pool, handed out and given back, each reference-counted.

    refs[p]: how many hold page p (0: free). The free pages form a queue: allocate takes from its
    front, release puts the pages that became free at its back, in the order given. A wrong call
    raises ValueError and changes nothing.
    """

    def __init__(self, num_pages):
        self.refs = np.zeros(num_pages, dtype=np.int64)
        self._queue = dict.fromkeys(range(num_pages))

    @property
    def num_free(self):
        """How many pages are free."""
        return len(self._queue)

    def _counts(self, pages):
        pages = [int(p) for p in pages]
        if any(p < 0 or p >= len(self.refs) for p in pages):
            raise ValueError(f"a page outside 0 .. {len(self.refs) - 1}: {pages}")
        return pages, np.bincount(np.array(pages, dtype=np.int64), minlength=len(self.refs))

    def allocate(self, n):
        """n free pages (a list), each now held once; ValueError if fewer than n are free."""
        if n > len(self._queue):
            raise ValueError(f"{n} pages asked for, {len(self._queue)} free")
        pages = list(itertools.islice(self._queue, n))
        for p in pages:
            del self._queue[p]
        self.refs[pages] = 1
        return pages

    def retain(self, pages):
        """One more holder for each page (each must be held already, else ValueError)."""
        pages, counts = self._counts(pages)
        if np.any((counts > 0) & (self.refs == 0)):
            raise ValueError(f"retain of a free page: {pages}")
        self.refs += counts

    def release(self, pages):
        """One holder fewer for each page; return the pages that became free. ValueError (and nothing
        released) for a free page, a page given more often than it is held, or a page outside the pool."""
        pages, counts = self._counts(pages)
        if np.any(counts > self.refs):
            raise ValueError(f"released more often than held: {pages}")
        self.refs -= counts
        freed = [p for i, p in enumerate(pages) if self.refs[p] == 0 and p not in pages[i + 1:]]
        for p in freed:
            self._queue[p] = None
        return freed
