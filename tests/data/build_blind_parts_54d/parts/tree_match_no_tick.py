"""Part: 4 PrefixTree
Kind: wrong

The mistake:
    The clock ticks on insert only, not on match: nodes a match enters get the clock of the last
    insert, so they tie with (or look no newer than) what that insert touched, and the tie goes to
    the older node: eviction after a match can free the prefix just matched instead of the one
    inserted before it.

A good feedback message must say:
    - the clock must tick on every match too (once per match and per insert)
    - a node a match used got the same last_used as the last insert / looked older than it is
    - so evict freed the wrong (recently matched) leaf

It must not say:
    - evicts the most recently used / newest (in general)
    - whole leaves
    - split
"""

class Node:
    def __init__(self, keys, pages, parent, nid):
        self.keys, self.pages, self.parent, self.id = list(keys), list(pages), parent, nid
        self.children = {}  # first key -> Node
        self.last_used = 0


class PrefixTree:
    def __init__(self, allocator):
        self.allocator = allocator
        self.clock = 0
        self.made = 0
        self.root = self._node([], [], None)

    def _node(self, keys, pages, parent):
        self.made += 1
        return Node(keys, pages, parent, self.made)

    def _split(self, node, k):
        """Cut node's edge after k keys: the upper half is a new node, node keeps the lower half."""
        upper = self._node(node.keys[:k], node.pages[:k], node.parent)
        upper.last_used = node.last_used
        node.parent.children[upper.keys[0]] = upper
        node.keys, node.pages, node.parent = node.keys[k:], node.pages[k:], upper
        upper.children[node.keys[0]] = node
        return upper

    def _walk(self, keys, split):
        """Down the tree along keys: (the last node entered, keys matched, their pages)."""
        node, i, pages = self.root, 0, []
        while i < len(keys) and keys[i] in node.children:
            child = node.children[keys[i]]
            child.last_used = self.clock
            k = 0
            while k < len(child.keys) and i + k < len(keys) and child.keys[k] == keys[i + k]:
                k += 1
            if k < len(child.keys):  # stopped inside the edge
                if not split:
                    return child, i + k, pages + child.pages[:k]
                upper = self._split(child, k)
                return upper, i + k, pages + upper.pages
            pages += child.pages
            i += k
            node = child
        return node, i, pages

    def match(self, keys):
        return self._walk(list(keys), split=True)[2]

    def insert(self, keys, pages):
        keys, pages = list(keys), list(pages)
        self.clock += 1
        node, i, mine = self._walk(keys, split=True)
        if i < len(keys):
            leaf = self._node(keys[i:], pages[i:], node)
            leaf.last_used = self.clock
            self.allocator.retain(pages[i:])
            node.children[keys[i]] = leaf
        return mine + pages[i:]

    def _nodes(self):
        stack, seen = [self.root], []
        while stack:
            node = stack.pop()
            seen.append(node)
            stack.extend(node.children.values())
        return seen[1:]  # not the root

    def num_evictable(self):
        return sum(self.allocator.refs[p] == 1 for node in self._nodes() for p in node.pages)

    def _evictable_leaves(self):
        return [node for node in self._nodes() if not node.children and self.allocator.refs[node.pages[-1]] == 1]

    def evict(self, n):
        freed = []
        while len(freed) < n:
            leaves = self._evictable_leaves()
            if not leaves:
                break
            victim = min(leaves, key=lambda node: (node.last_used, node.id))
            del victim.parent.children[victim.keys[0]]
            freed += self.allocator.release(victim.pages)
        return freed
