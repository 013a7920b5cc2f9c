"""Part: 4 PrefixTree.  Kind: wrong.

The mistake: num_evictable counts the pages with refs == 1 in the leaves only (what one evict
could take right now) instead of in every node of the tree. The stub: "Pages in the tree that only
the tree holds": inner nodes' pages count too (they become leaves, and evictable, once their
children go, and the engine uses this number to know how many rows eviction can give it). E.g.
insert [1, 2, 3] and [1, 2, 4], then release the requests' pages: all 4 pages are the tree's alone;
num_evictable must be 4, this tree says 2. match, insert, evict are all right.

A good feedback message must say: num_evictable is too small / must count pages of inner (non-leaf)
nodes too, every page in the tree with refs == 1.
It must not say: the eviction order, reference counts wrong (retain / release), the split, match
returning too much or too little.
"""


class Node:
    """One edge of the tree: keys, their pages, children by first key."""

    def __init__(self, keys, pages, parent, last_used, order):
        self.keys, self.pages, self.parent = list(keys), list(pages), parent
        self.children = {}
        self.last_used = last_used
        self.order = order  # when it was made: smaller is older


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
        self.made = 0
        self.root = self._new([], [], None)

    def _new(self, keys, pages, parent):
        self.made += 1
        return Node(keys, pages, parent, self.clock, self.made)

    def _split(self, node, at):
        """Cut node's edge after `at` keys: a new upper node takes the first `at`, node keeps the rest."""
        upper = self._new(node.keys[:at], node.pages[:at], node.parent)
        node.parent.children[upper.keys[0]] = upper
        node.keys, node.pages, node.parent = node.keys[at:], node.pages[at:], upper
        upper.children[node.keys[0]] = node
        return upper

    def _walk(self, keys):
        """Follow keys down from the root; return (the last node reached, keys matched, their pages)."""
        node, done, pages = self.root, 0, []
        while done < len(keys) and keys[done] in node.children:
            child = node.children[keys[done]]
            same = 0
            while same < len(child.keys) and done + same < len(keys) and child.keys[same] == keys[done + same]:
                same += 1
            child.last_used = self.clock
            if same < len(child.keys):  # stopped inside the edge: split it there
                upper = self._split(child, same)
                pages += upper.pages
                done += same
                node = upper
                break
            pages += child.pages[:same]
            done += same
            node = child
        return node, done, pages

    def match(self, keys):
        """The pages of the longest prefix of keys the tree holds."""
        self.clock += 1
        return self._walk(list(keys))[2]

    def insert(self, keys, pages):
        """Keep keys (whose k and v are in pages, one per key); return the tree's page for each key."""
        self.clock += 1
        keys, pages = list(keys), list(pages)
        node, done, have = self._walk(keys)
        if done < len(keys):
            node.children[keys[done]] = self._new(keys[done:], pages[done:], node)
            self.allocator.retain(pages[done:])
        return have + pages[done:]

    def _nodes(self):
        found, todo = [], list(self.root.children.values())
        while todo:
            node = todo.pop()
            found.append(node)
            todo.extend(node.children.values())
        return found

    def num_evictable(self):
        """Pages in the tree that only the tree holds."""
        return sum(self.allocator.refs[p] == 1 for node in self._nodes() if not node.children for p in node.pages)

    def evict(self, n):
        """Free whole leaves only the tree holds, least recently used first, until at least n pages are
        freed; return the pages (in any order)."""
        freed = []
        while len(freed) < n:
            leaves = [node for node in self._nodes() if not node.children and self.allocator.refs[node.pages[-1]] == 1]
            if not leaves:
                break
            leaf = min(leaves, key=lambda node: (node.last_used, node.order))
            del leaf.parent.children[leaf.keys[0]]
            self.allocator.release(leaf.pages)
            freed += leaf.pages
        return freed
