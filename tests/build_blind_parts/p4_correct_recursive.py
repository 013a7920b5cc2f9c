# part: 4
# verdict: correct
# mistake: none: recursive match/insert/leaf collection, tuples for edges, evict returns the freed pages end-first (releases them in edge order)
# expect: "passes"


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

    class Node:
        __slots__ = ("keys", "pages", "children", "parent", "last_used", "order")

    def __init__(self, allocator):
        self.allocator = allocator
        self.clock = 0
        self.made = 0
        self.root = self._node((), (), None)

    def _node(self, keys, pages, parent):
        node = PrefixTree.Node()
        node.keys, node.pages, node.children, node.parent = tuple(keys), tuple(pages), {}, parent
        node.last_used, node.order = self.clock, self.made
        self.made += 1
        return node

    @staticmethod
    def _agree(edge, keys):
        n = min(len(edge), len(keys))
        for m in range(n):
            if edge[m] != keys[m]:
                return m
        return n

    def _split(self, node, m):
        upper = self._node(node.keys[:m], node.pages[:m], node.parent)
        upper.last_used = node.last_used
        upper.parent.children[upper.keys[0]] = upper
        node.keys, node.pages, node.parent = node.keys[m:], node.pages[m:], upper
        upper.children[node.keys[0]] = node
        return upper

    # match, recursively
    def match(self, keys):
        """The pages of the longest prefix of keys the tree holds."""
        self.clock += 1
        return self._match(self.root, tuple(keys))

    def _match(self, node, keys):
        if not keys or keys[0] not in node.children:
            return []
        child = node.children[keys[0]]
        child.last_used = self.clock
        m = self._agree(child.keys, keys)
        if m < len(child.keys):
            found = list(child.pages[:m])
            self._split(child, m)
            return found
        return list(child.pages) + self._match(child, keys[m:])

    # insert, recursively
    def insert(self, keys, pages):
        """Keep keys (whose k and v are in pages, one per key); return the tree's page for each key."""
        self.clock += 1
        return self._insert(self.root, tuple(keys), tuple(pages))

    def _insert(self, node, keys, pages):
        if not keys:
            return []
        child = node.children.get(keys[0])
        if child is None:
            self.allocator.retain(list(pages))
            node.children[keys[0]] = self._node(keys, pages, node)
            return list(pages)
        child.last_used = self.clock
        m = self._agree(child.keys, keys)
        if m < len(child.keys):
            child = self._split(child, m)
        return list(child.pages) + self._insert(child, keys[m:], pages[m:])

    def _leaves(self, node):
        if not node.children:
            return [] if node is self.root else [node]
        return [leaf for child in node.children.values() for leaf in self._leaves(child)]

    def _count(self, node, refs):
        return sum(refs[p] == 1 for p in node.pages) + sum(self._count(c, refs) for c in node.children.values())

    def num_evictable(self):
        """Pages in the tree that only the tree holds."""
        return int(self._count(self.root, self.allocator.refs))

    def evict(self, n):
        """Free whole leaves only the tree holds, least recently used first, until at least n pages are
        freed; return the pages (in any order)."""
        freed = []
        while len(freed) < n:
            refs = self.allocator.refs
            candidates = [leaf for leaf in self._leaves(self.root) if leaf.pages and refs[leaf.pages[-1]] == 1]
            if not candidates:
                break
            leaf = min(candidates, key=lambda leaf: (leaf.last_used, leaf.order))
            del leaf.parent.children[leaf.keys[0]]
            self.allocator.release(list(leaf.pages))  # released in the edge's order
            freed.extend(leaf.pages[::-1])  # returned end first: the docstring allows any order
        return freed
