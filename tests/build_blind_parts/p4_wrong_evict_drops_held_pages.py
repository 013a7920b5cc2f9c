# part: 4
# verdict: wrong
# mistake: evict takes the least recently used leaf without checking that only the tree holds its pages
# expect: "refs", "only the tree holds", "held", "== 1"


class _Node:
    def __init__(self, keys, pages, parent, last_used, born):
        self.keys = list(keys)
        self.pages = list(pages)
        self.parent = parent
        self.children = {}
        self.last_used = last_used
        self.born = born


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
        self._born = 0
        self.root = self._new_node([], [], None)

    def _new_node(self, keys, pages, parent):
        node = _Node(keys, pages, parent, self.clock, self._born)
        self._born += 1
        return node

    @staticmethod
    def _common(edge, keys, start):
        m = 0
        while m < len(edge) and start + m < len(keys) and edge[m] == keys[start + m]:
            m += 1
        return m

    def _split(self, node, m):
        upper = self._new_node(node.keys[:m], node.pages[:m], node.parent)
        upper.last_used = node.last_used
        node.parent.children[upper.keys[0]] = upper
        node.keys, node.pages = node.keys[m:], node.pages[m:]
        node.parent = upper
        upper.children[node.keys[0]] = node
        return upper

    def _nodes(self):
        stack = [self.root]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children.values())

    def match(self, keys):
        """The pages of the longest prefix of keys the tree holds."""
        self.clock += 1
        keys = list(keys)
        found = []
        node, i = self.root, 0
        while i < len(keys) and keys[i] in node.children:
            child = node.children[keys[i]]
            child.last_used = self.clock
            m = self._common(child.keys, keys, i)
            found.extend(child.pages[:m])
            i += m
            if m < len(child.keys):
                self._split(child, m)
                break
            node = child
        return found

    def insert(self, keys, pages):
        """Keep keys (whose k and v are in pages, one per key); return the tree's page for each key."""
        self.clock += 1
        keys, pages = list(keys), list(pages)
        out = []
        node, i = self.root, 0
        while i < len(keys) and keys[i] in node.children:
            child = node.children[keys[i]]
            child.last_used = self.clock
            m = self._common(child.keys, keys, i)
            out.extend(child.pages[:m])
            i += m
            if m < len(child.keys):
                child = self._split(child, m)
            node = child
        if i < len(keys):
            new_keys, new_pages = keys[i:], pages[i:]
            self.allocator.retain(new_pages)
            node.children[new_keys[0]] = self._new_node(new_keys, new_pages, node)
            out.extend(new_pages)
        return out

    def num_evictable(self):
        """Pages in the tree that only the tree holds."""
        refs = self.allocator.refs
        return sum(1 for node in self._nodes() for p in node.pages if refs[p] == 1)

    def evict(self, n):
        """Free whole leaves only the tree holds, least recently used first, until at least n pages are
        freed; return the pages (in any order)."""
        freed = []
        while len(freed) < n:
            leaves = [node for node in self._nodes() if node is not self.root and not node.children and node.pages]
            if not leaves:
                break
            leaf = min(leaves, key=lambda node: (node.last_used, node.born))
            del leaf.parent.children[leaf.keys[0]]
            self.allocator.release(leaf.pages)
            freed.extend(leaf.pages)
        return freed
