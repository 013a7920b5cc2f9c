"""
part: 4 PrefixTree
kind: correct
mistake: none: no node objects; a node is an integer id (made in increasing order, so a smaller id
    is the older node; the root is 0) and its edge, pages, parent, children and last use live in
    dicts keyed by id. match and insert share one walk (which splits where it stops inside an edge
    and stamps every node it enters). evict uses a heap of (last_used, id) over the evictable
    leaves, pushing a parent when it becomes one. match and insert return lists.
good feedback must say: passes (part 4 right).
must not say: any mistake.
"""
import heapq
import itertools


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

    ROOT = 0

    def __init__(self, allocator):
        self.allocator = allocator
        self.clock = 0
        self._ids = itertools.count(1)
        self.edge = {0: []}
        self.pages = {0: []}
        self.parent = {0: None}
        self.kids = {0: {}}
        self.used = {0: 0}

    def _make(self, edge, pages, parent):
        nid = next(self._ids)
        self.edge[nid], self.pages[nid], self.parent[nid] = edge, pages, parent
        self.kids[nid], self.used[nid] = {}, self.clock
        self.kids[parent][edge[0]] = nid
        return nid

    def _walk(self, keys):
        """Follow keys from the root: (the node where they stop, how many matched, the pages on the way)."""
        self.clock += 1
        nid, i, found = self.ROOT, 0, []
        while i < len(keys) and keys[i] in self.kids[nid]:
            child = self.kids[nid][keys[i]]
            self.used[child] = self.clock
            edge = self.edge[child]
            k = next((j for j, (a, b) in enumerate(zip(edge, keys[i:])) if a != b), min(len(edge), len(keys) - i))
            if k < len(edge):  # stops inside the edge: split it, the upper half is new
                upper = self._make(edge[:k], self.pages[child][:k], nid)
                self.kids[upper][edge[k]] = child
                self.edge[child], self.pages[child], self.parent[child] = edge[k:], self.pages[child][k:], upper
                return upper, i + k, found + self.pages[upper]
            found += self.pages[child]
            nid, i = child, i + k
        return nid, i, found

    def match(self, keys):
        """The pages of the longest prefix of keys the tree holds."""
        return self._walk(list(keys))[2]

    def insert(self, keys, pages):
        """Keep keys (whose k and v are in pages, one per key); return the tree's page for each key."""
        keys, pages = list(keys), list(pages)
        nid, i, found = self._walk(keys)
        if i < len(keys):
            self._make(keys[i:], pages[i:], nid)
            self.allocator.retain(pages[i:])
        return found + pages[i:]

    def num_evictable(self):
        """Pages in the tree that only the tree holds."""
        refs = self.allocator.refs
        return sum(refs[p] == 1 for nid, pages in self.pages.items() for p in pages)

    def _evictable_leaf(self, nid):
        return nid != self.ROOT and not self.kids[nid] and self.allocator.refs[self.pages[nid][-1]] == 1

    def evict(self, n):
        """Free whole leaves only the tree holds, least recently used first, until at least n pages are
        freed; return the pages (in any order)."""
        heap = [(self.used[nid], nid) for nid in self.edge if self._evictable_leaf(nid)]
        heapq.heapify(heap)
        freed = []
        while len(freed) < n and heap:
            _, nid = heapq.heappop(heap)
            parent = self.parent[nid]
            del self.kids[parent][self.edge[nid][0]]
            pages = self.pages.pop(nid)
            for table in (self.edge, self.parent, self.kids, self.used):
                del table[nid]
            freed += self.allocator.release(pages)
            if self._evictable_leaf(parent):
                heapq.heappush(heap, (self.used[parent], parent))
        return freed
