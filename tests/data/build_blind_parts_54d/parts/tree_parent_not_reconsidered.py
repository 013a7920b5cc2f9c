"""Part: 4 PrefixTree
Kind: wrong

The mistake:
    evict gathers the evictable leaves once, before its loop: a parent that becomes a leaf when its
    last child is removed is never considered, so evict(n) stops early with fewer than n pages freed
    though more could be (and never takes a parent that is older than the remaining leaves).

A good feedback message must say:
    - after a leaf is removed its parent may become a leaf and can be evicted in the same call
    - evict(n) freed fewer than n pages although the tree had more evictable pages

It must not say:
    - evicts the newest / order reversed
    - removes partial leaves
    - clock
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
        self.clock += 1
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
        leaves = self._evictable_leaves()  # gathered once
        while len(freed) < n:
            if not leaves:
                break
            victim = min(leaves, key=lambda node: (node.last_used, node.id))
            leaves.remove(victim)
            del victim.parent.children[victim.keys[0]]
            freed += self.allocator.release(victim.pages)
        return freed
