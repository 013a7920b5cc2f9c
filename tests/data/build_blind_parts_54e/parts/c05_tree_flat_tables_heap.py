"""Part: 4 PrefixTree.  Kind: correct (unusual).

An unusual but correct prefix tree: no node objects. Nodes are integers (0 the root, then 1, 2, ...
in the order they are made, so "older" is "smaller id"), and the tree is five dicts: keys, pages,
parent, children (first key -> id) and last_used. The common prefix of an edge and the keys is found
with zip/next; a split gives the upper half a new id and leaves the lower half its old id (it is the
old node). evict keeps a heap of (last_used, id) of the evictable leaves, SGLang's way, pushing a
parent once its last child is gone. It works with keys of any hashable type (token ids, or tuples of
16 ids for pages of 16).

A good feedback message must say: it passes.
It must not say: any mistake.
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

    def __init__(self, allocator):
        self.allocator = allocator
        self.clock = 0
        self.ids = itertools.count(1)
        self.keys, self.pages, self.parent, self.children, self.last_used = {0: ()}, {0: ()}, {0: None}, {0: {}}, {0: 0}

    def _make(self, keys, pages, parent):
        node = next(self.ids)
        self.keys[node], self.pages[node], self.parent[node] = tuple(keys), tuple(pages), parent
        self.children[node], self.last_used[node] = {}, self.clock
        self.children[parent][keys[0]] = node
        return node

    def _descend(self, keys):
        node, at, found = 0, 0, []
        while at < len(keys) and keys[at] in self.children[node]:
            child = self.children[node][keys[at]]
            edge = self.keys[child]
            same = next((j for j, (a, b) in enumerate(zip(edge, keys[at:])) if a != b), min(len(edge), len(keys) - at))
            self.last_used[child] = self.clock
            if same < len(edge):
                upper = self._make(edge[:same], self.pages[child][:same], node)  # replaces child under node
                self.keys[child], self.pages[child] = edge[same:], self.pages[child][same:]
                self.parent[child] = upper
                self.children[upper][edge[same]] = child
                found.extend(self.pages[upper])
                return upper, at + same, found
            found.extend(self.pages[child])
            node, at = child, at + same
        return node, at, found

    def match(self, keys):
        """The pages of the longest prefix of keys the tree holds."""
        self.clock += 1
        return self._descend(tuple(keys))[2]

    def insert(self, keys, pages):
        """Keep keys (whose k and v are in pages, one per key); return the tree's page for each key."""
        self.clock += 1
        keys, pages = tuple(keys), list(pages)
        node, at, found = self._descend(keys)
        if at < len(keys):
            self._make(keys[at:], pages[at:], node)
            self.allocator.retain(pages[at:])
        return found + pages[at:]

    def num_evictable(self):
        """Pages in the tree that only the tree holds."""
        refs = self.allocator.refs
        return sum(1 for node, pages in self.pages.items() if node for p in pages if refs[p] == 1)

    def _evictable_leaf(self, node):
        return node != 0 and not self.children[node] and self.allocator.refs[self.pages[node][-1]] == 1

    def evict(self, n):
        """Free whole leaves only the tree holds, least recently used first, until at least n pages are
        freed; return the pages (in any order)."""
        heap = [(self.last_used[node], node) for node in self.keys if self._evictable_leaf(node)]
        heapq.heapify(heap)
        freed = []
        while len(freed) < n and heap:
            _, node = heapq.heappop(heap)
            parent = self.parent[node]
            del self.children[parent][self.keys[node][0]]
            pages = list(self.pages[node])
            for table in (self.keys, self.pages, self.parent, self.children, self.last_used):
                del table[node]
            self.allocator.release(pages)
            freed.extend(pages)
            if self._evictable_leaf(parent):
                heapq.heappush(heap, (self.last_used[parent], parent))
        return freed
