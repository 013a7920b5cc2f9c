"""
part: notebook 14, part 4 `PrefixTree`
kind: wrong
mistake: evict checks only a leaf's LAST page (refs == 1) and then drops pages from its end without
  checking each one, so when a request still holds the start of that leaf's edge (it matched a prefix
  ending inside the edge), those pages are dropped from the tree, released (refs 2 -> 1, not free)
  and reported as freed: it evicts pages a request still holds (a locked part of a node).
good feedback must say: evict drops / releases pages that a request still holds (refs > 1) at the
  start of a leaf's edge: it must stop dropping from the leaf's end at the first page not held by the
  tree alone; it returns (counts as freed) pages that are not free. Eviction order (LRU) is right.
wrong feedback: "eviction order wrong / evicts newest", "leak", "no split", "match wrong",
  "num_evictable wrong" (it is right).
"""

import itertools


class _Node:
    def __init__(self, keys, pages, parent, last_used, age):
        self.keys, self.pages = list(keys), list(pages)
        self.children = {}  # first key -> node
        self.parent, self.last_used, self.age = parent, last_used, age


class PrefixTree:
    """A radix tree over keys (token ids); each key's k and v sit in one pool page.

    Rules (the engine's):
    - Each node holds an edge: a list of keys and their pages; its children are found by their first key.
      Where a new sequence leaves an edge in its middle, split the edge there (a sequence that merely
      ends inside an edge splits nothing). Below a leaf (not the root), insert grows the leaf's edge.
    - A clock ticks once per match and per insert; every node a call enters (an edge only partly
      matched included, a new node too) gets last_used = the clock; the upper half of a split keeps
      the node's last_used.
    - The tree holds one reference to each page it keeps: insert retains (allocator.retain) each page
      it newly keeps; where it already holds those keys it returns its own page instead.
    - evict(n): until n pages are freed or none can be: take the leaf whose last page only the tree
      holds (allocator.refs[page] == 1) with the smallest last_used (a tie: the older node), drop pages
      from its end while only the tree holds them, release them; a leaf left empty is removed.
    """

    def __init__(self, allocator):
        self.allocator = allocator
        self.clock = 0
        self._ages = itertools.count()
        self.root = _Node([], [], None, 0, next(self._ages))

    def _nodes(self):
        stack = list(self.root.children.values())
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children.values())

    @staticmethod
    def _common(edge, keys, i):
        k = 0
        while k < len(edge) and i + k < len(keys) and edge[k] == keys[i + k]:
            k += 1
        return k

    def match(self, keys):
        """The pages of the longest prefix of keys the tree holds."""
        keys = list(keys)
        self.clock += 1
        node, i, out = self.root, 0, []
        while i < len(keys):
            child = node.children.get(keys[i])
            if child is None:
                break
            k = self._common(child.keys, keys, i)
            child.last_used = self.clock
            out += child.pages[:k]
            i += k
            if k < len(child.keys):
                break
            node = child
        return out

    def _split(self, node, k):
        """Cut node's edge after k keys: a new upper node holds the first k, node keeps the rest."""
        upper = _Node(node.keys[:k], node.pages[:k], node.parent, node.last_used, next(self._ages))
        node.parent.children[node.keys[0]] = upper
        node.keys, node.pages = node.keys[k:], node.pages[k:]
        node.parent = upper
        upper.children[node.keys[0]] = node
        return upper

    def insert(self, keys, pages):
        """Keep keys (whose k and v are in pages, one per key); return the tree's page for each key."""
        keys, pages = list(keys), list(pages)
        self.clock += 1
        node, i, out = self.root, 0, []
        while i < len(keys):
            child = node.children.get(keys[i])
            if child is None:
                new_keys, new_pages = keys[i:], pages[i:]
                self.allocator.retain(new_pages)
                if node is not self.root and not node.children:
                    node.keys += new_keys
                    node.pages += new_pages
                    node.last_used = self.clock
                else:
                    node.children[keys[i]] = _Node(new_keys, new_pages, node, self.clock, next(self._ages))
                out += new_pages
                break
            child.last_used = self.clock
            k = self._common(child.keys, keys, i)
            out += child.pages[:k]
            i += k
            if k < len(child.keys):
                if i == len(keys):
                    break  # ends inside the edge: nothing to split
                child = self._split(child, k)
            node = child
        return out

    def num_evictable(self):
        """Pages in the tree that only the tree holds."""
        refs = self.allocator.refs
        return sum(1 for node in self._nodes() for p in node.pages if refs[p] == 1)

    def evict(self, n):
        """Free up to n pages only the tree holds, least recently used first; return them (in any order)."""
        refs = self.allocator.refs
        freed = []
        while len(freed) < n:
            leaves = [nd for nd in self._nodes() if not nd.children and nd.pages and refs[nd.pages[-1]] == 1]
            if not leaves:
                break
            leaf = min(leaves, key=lambda nd: (nd.last_used, nd.age))
            while leaf.pages and len(freed) < n:  # the leaf is evictable: drop its pages
                page = leaf.pages.pop()
                leaf.keys.pop()
                self.allocator.release([page])
                freed.append(page)
            if not leaf.pages:
                del leaf.parent.children[next(k for k, c in leaf.parent.children.items() if c is leaf)]
        return freed
