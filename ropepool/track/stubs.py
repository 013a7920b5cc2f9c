"""The stubs the build notebooks start from: each raises NotImplementedError until the learner writes it.

The notebooks' "your part" cells hold these same definitions (``tests/test_build_notebooks.py``
checks that they have not drifted apart).
"""

from __future__ import annotations


def rotate(x, positions, inv_freq, is_neox):
    """One head x [T, D] turned by RoPE at positions [T]: pair i turns by positions[t] * inv_freq[i].

    is_neox: pairs (i, i + D/2); otherwise GPT-J pairs (2i, 2i + 1). Return a new [T, D] array.
    """
    raise NotImplementedError("part 1: rotate")


def encode_e4m3(x):
    """The e4m3 code (uint8 [n]) of each float32 value of the row x [n]: nearest, ties to even,
    |x| > 448 saturates to 448; bit 0x80 is x's sign; NaN of either sign gives 0x7F."""
    raise NotImplementedError("part 6: encode_e4m3")


def slot_mapping(requests, page_size):
    """(positions, slots) of one step: for each request (dict of pages, cached, new), in order,
    positions cached .. cached + new - 1 and the pool row of each."""
    raise NotImplementedError("part 3: slot_mapping")


class Allocator:
    """Pages 0 .. num_pages - 1 of the pool, handed out and given back, each reference-counted.

    refs[p]: how many hold page p (0: free). The free pages form a queue: allocate takes from its
    front, release puts the pages that became free at its back, in the order given. A wrong call
    raises ValueError and changes nothing.
    """

    def __init__(self, num_pages):
        raise NotImplementedError("part 2: Allocator.__init__")

    @property
    def num_free(self):
        """How many pages are free."""
        raise NotImplementedError("part 2: Allocator.num_free")

    def allocate(self, n):
        """n free pages (a list), each now held once; ValueError if fewer than n are free."""
        raise NotImplementedError("part 2: Allocator.allocate")

    def retain(self, pages):
        """One more holder for each page (each must be held already, else ValueError)."""
        raise NotImplementedError("part 2: Allocator.retain")

    def release(self, pages):
        """One holder fewer for each page; return the pages that became free. ValueError (and nothing
        released) for a free page, a page given more often than it is held, or a page outside the pool."""
        raise NotImplementedError("part 2: Allocator.release")


class PrefixTree:
    """A radix tree over keys (token ids); each key's k and v sit in one pool page.

    Rules (the engine's, which are SGLang's RadixCache's):
    - Each node holds an edge: a list of keys and their pages; its children are found by their first key.
      Where a match or an insert stops inside an edge (the keys differ there, or run out), split the edge
      there: the upper half is a new node. Insert puts the keys the tree lacks in a new leaf.
    - A clock ticks once per match and per insert; every node a call enters (an edge only partly
      matched included, a new node too) gets last_used = the clock; the upper half of a split too.
    - The tree holds one reference to each page it keeps: insert retains (allocator.retain) each page
      it newly keeps; where it already holds those keys it returns its own page instead.
    - evict(n): until at least n pages are freed or none can be: take the leaf whose last page only the
      tree holds (allocator.refs[page] == 1) with the smallest last_used (a tie: the older node), remove
      it whole and release its pages; its parent may now be a leaf.
    """

    def __init__(self, allocator):
        raise NotImplementedError("part 4: PrefixTree.__init__")

    def match(self, keys):
        """The pages of the longest prefix of keys the tree holds."""
        raise NotImplementedError("part 4: PrefixTree.match")

    def insert(self, keys, pages):
        """Keep keys (whose k and v are in pages, one per key); return the tree's page for each key."""
        raise NotImplementedError("part 4: PrefixTree.insert")

    def num_evictable(self):
        """Pages in the tree that only the tree holds."""
        raise NotImplementedError("part 4: PrefixTree.num_evictable")

    def evict(self, n):
        """Free whole leaves only the tree holds, least recently used first, until at least n pages are
        freed; return the pages (in any order)."""
        raise NotImplementedError("part 4: PrefixTree.evict")


def schedule_step(running, waiting, max_step_tokens, free_rows):
    """One step's plan: (run, preempted). run: (rid, n) pairs in batch order; preempted: rids.

    running: in admission order, dicts of rid, uncached (tokens not in the pool yet: 1 when
    decoding), spare (rows held but not written yet) and held (all rows it holds).
    waiting: first in line first, dicts of rid and tokens (its sequence: the rows it needs).
    """
    raise NotImplementedError("part 5: schedule_step")
