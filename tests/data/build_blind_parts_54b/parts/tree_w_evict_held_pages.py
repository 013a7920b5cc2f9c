"""
part: 4 (PrefixTree)
kind: wrong
mistake: evict picks the right leaf (smallest last_used among leaves whose LAST page only the tree
    holds) but then drops pages from its end until n are freed or the leaf is empty, without checking
    each page: pages further up the edge that a running request still holds (refs > 1) are released
    too and their keys leave the tree. allocator.release does not free them (the request still holds
    them), so evict's return value looks right, but the tree gave up its reference to pages in use:
    a later match misses those keys, num_evictable drops, and when the request finishes the page goes
    free instead of staying cached.
good feedback must say: evict dropped (released) a page a request still holds (refs > 1): it must
    stop at the first page from the leaf's end that is not only the tree's (refs[page] == 1 for each
    page, not just the last); afterwards the tree no longer holds those keys (a match returns fewer
    pages / refs one too low).
must NOT say: a wrong eviction order (LRU vs newest); that evict returns pages still held; an insert
    or match mistake.
"""


class _Node:
    """One edge of the tree: keys and their pages, children by first key."""

    def __init__(self, keys, pages, parent, last_used, born):
        self.keys, self.pages = list(keys), list(pages)
        self.children = {}
        self.parent = parent
        self.last_used = last_used
        self.born = born  # creation order: a tie in last_used goes to the older node


def _common(a, b):
    n = 0
    while n < len(a) and n < len(b) and a[n] == b[n]:
        n += 1
    return n


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
        self.born = 0
        self.root = self._new([], [], None)

    def _new(self, keys, pages, parent):
        node = _Node(keys, pages, parent, self.clock, self.born)
        self.born += 1
        return node

    def _nodes(self):
        stack = [self.root]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children.values())

    def _split(self, node, at):
        """Cut node's edge after `at` keys: a new upper node takes the first `at`, node keeps the rest."""
        upper = self._new(node.keys[:at], node.pages[:at], node.parent)
        upper.last_used = node.last_used
        node.parent.children[node.keys[0]] = upper
        node.keys, node.pages = node.keys[at:], node.pages[at:]
        node.parent = upper
        upper.children[node.keys[0]] = node
        return upper

    def match(self, keys):
        """The pages of the longest prefix of keys the tree holds."""
        self.clock += 1
        keys = list(keys)
        found, node, i = [], self.root, 0
        while i < len(keys):
            child = node.children.get(keys[i])
            if child is None:
                break
            child.last_used = self.clock
            same = _common(child.keys, keys[i:])
            found += child.pages[:same]
            i += same
            if same < len(child.keys):
                break
            node = child
        return found

    def insert(self, keys, pages):
        """Keep keys (whose k and v are in pages, one per key); return the tree's page for each key."""
        self.clock += 1
        keys, pages = list(keys), list(pages)
        out, node, i = [], self.root, 0
        while i < len(keys):
            child = node.children.get(keys[i])
            if child is None:
                rest_keys, rest_pages = keys[i:], pages[i:]
                self.allocator.retain(rest_pages)
                if node is not self.root and not node.children:
                    node.keys += rest_keys  # below a leaf: grow its edge
                    node.pages += rest_pages
                    node.last_used = self.clock
                else:
                    node.children[rest_keys[0]] = self._new(rest_keys, rest_pages, node)
                out += rest_pages
                break
            child.last_used = self.clock
            same = _common(child.keys, keys[i:])
            out += child.pages[:same]
            i += same
            if same < len(child.keys):
                if i == len(keys):
                    break  # ends inside the edge: nothing to split
                node = self._split(child, same)
                continue
            node = child
        return out

    def num_evictable(self):
        """Pages in the tree that only the tree holds."""
        refs = self.allocator.refs
        return sum(refs[p] == 1 for node in self._nodes() for p in node.pages)

    def evict(self, n):
        """Free up to n pages only the tree holds, least recently used first; return them (in any order)."""
        refs = self.allocator.refs
        freed = []
        while len(freed) < n:
            leaves = [node for node in self._nodes()
                      if node is not self.root and not node.children and node.pages and refs[node.pages[-1]] == 1]
            if not leaves:
                break
            leaf = min(leaves, key=lambda node: (node.last_used, node.born))
            first_key = leaf.keys[0]
            drop = []
            while leaf.pages and len(freed) + len(drop) < n:  # its last page is the tree's: the edge goes
                drop.append(leaf.pages.pop())
                leaf.keys.pop()
            freed += self.allocator.release(drop)
            if not leaf.pages:
                del leaf.parent.children[first_key]
        return freed
