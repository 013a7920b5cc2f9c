"""
part: 4 PrefixTree
kind: wrong
mistake: evict lists the tree's leaves once, before it starts evicting, and then takes them least
    recently used first; a parent that becomes a leaf when its last child is evicted is never
    considered in the same call. evict(n) then takes a later-used leaf instead of that parent, or
    stops (frees fewer than n) although the parent could be freed.
good feedback must say: after a leaf is evicted its parent may become a leaf and must be a
    candidate in the same evict call (recompute the leaves / push the parent); here it was skipped
    (a newer leaf evicted instead, or fewer than n pages freed).
must not say: evicts the newest / most recently used first; a tie goes to the wrong node;
    partial leaves evicted; reference counts.
"""


class _Node:
    def __init__(self, keys, pages, parent, now, age):
        self.keys, self.pages, self.parent = list(keys), list(pages), parent
        self.children = {}  # first key -> node
        self.last_used = now
        self.age = age  # the order nodes were made in: a tie goes to the older


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
        self._made = 0
        self._nodes = []  # every node but the root, oldest first
        self.root = _Node([], [], None, 0, -1)

    def _new(self, keys, pages, parent):
        node = _Node(keys, pages, parent, self.clock, self._made)
        self._made += 1
        self._nodes.append(node)
        return node

    def _split(self, node, k):
        """Cut node's edge after k keys; the upper half is a new node, returned."""
        upper = self._new(node.keys[:k], node.pages[:k], node.parent)
        node.parent.children[upper.keys[0]] = upper
        upper.children[node.keys[k]] = node
        node.keys, node.pages, node.parent = node.keys[k:], node.pages[k:], upper
        return upper

    def _remove(self, node):
        del node.parent.children[node.keys[0]]
        self._nodes.remove(node)

    @staticmethod
    def _agree(a, b):
        k = 0
        while k < len(a) and k < len(b) and a[k] == b[k]:
            k += 1
        return k

    def match(self, keys):
        """The pages of the longest prefix of keys the tree holds."""
        keys = list(keys)
        self.clock += 1
        node, i, found = self.root, 0, []
        while i < len(keys) and keys[i] in node.children:
            child = node.children[keys[i]]
            child.last_used = self.clock
            k = self._agree(child.keys, keys[i:])
            if k < len(child.keys):
                found += self._split(child, k).pages
                break
            found += child.pages
            i += k
            node = child
        return found

    def insert(self, keys, pages):
        """Keep keys (whose k and v are in pages, one per key); return the tree's page for each key."""
        keys, pages = list(keys), list(pages)
        self.clock += 1
        node, i, out = self.root, 0, []
        while i < len(keys) and keys[i] in node.children:
            child = node.children[keys[i]]
            child.last_used = self.clock
            k = self._agree(child.keys, keys[i:])
            out += child.pages[:k]
            i += k
            node = self._split(child, k) if k < len(child.keys) else child
        if i < len(keys):
            leaf = self._new(keys[i:], pages[i:], node)
            node.children[keys[i]] = leaf
            self.allocator.retain(pages[i:])
            out += pages[i:]
        return out

    def num_evictable(self):
        """Pages in the tree that only the tree holds."""
        refs = self.allocator.refs
        return sum(1 for node in self._nodes for p in node.pages if refs[p] == 1)

    def evict(self, n):
        """Free whole leaves only the tree holds, least recently used first, until at least n pages are
        freed; return the pages (in any order)."""
        refs = self.allocator.refs
        freed = []
        leaves = [node for node in self._nodes if not node.children]  # the leaves, once
        while len(freed) < n:
            best = None
            for node in leaves:
                if not node.children and refs[node.pages[-1]] == 1:
                    if best is None or node.last_used < best.last_used:
                        best = node
            if best is None:
                break
            leaves.remove(best)
            self._remove(best)
            freed += self.allocator.release(best.pages)
        return freed
