"""Part 4 PrefixTree -- kind: wrong.

Mistake: when a match or an insert stops inside an edge and splits it, only the node the walk
goes on from (the new upper half) gets last_used = the clock; the lower half (the old node, which
the call entered and only partly matched) keeps its old last_used. The docstring says every node a
call enters, "an edge only partly matched included", gets the clock. The learner moved the
`last_used = clock` line after the split. Example: insert [1, 2, 3] (clock 1), insert [5] (clock 2),
match [1, 2] (clock 3: splits [1, 2 | 3]); evict(1) must free [5] (last_used 2; [3] got 3) and this
part frees [3] (still 1). Differs from a correct tree ONLY in which leaf evict frees after such a
split; match / insert answers and num_evictable are right.

A good feedback message must say: a node entered and only partly matched (the lower half of a
split) must get last_used = the clock too; eviction order wrong after a partial match / split.
It must not say: does not split, matches whole edges, evicts the newest (reversed order), tie
rule, reference counts / retain.
"""

class Node:
    def __init__(self, keys, pages, parent, born, clock):
        self.keys = list(keys)
        self.pages = list(pages)
        self.parent = parent
        self.children = {}  # first key -> Node
        self.born = born  # creation order: the smaller, the older
        self.last_used = clock


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
        self.born = 0
        self.root = self._new([], [], None)

    def _new(self, keys, pages, parent):
        self.born += 1
        return Node(keys, pages, parent, self.born, self.clock)

    def _split(self, node, at):
        """Cut node's edge after `at` keys; the upper half is a new node, returned."""
        upper = self._new(node.keys[:at], node.pages[:at], node.parent)
        node.parent.children[upper.keys[0]] = upper
        node.keys, node.pages = node.keys[at:], node.pages[at:]
        node.parent = upper
        upper.children[node.keys[0]] = node
        return upper

    def _descend(self, keys):
        """Walk down along keys; returns (last node reached, tree pages of the matched prefix, keys matched)."""
        node, found, done = self.root, [], 0
        while done < len(keys) and keys[done] in node.children:
            child = node.children[keys[done]]
            same = 0
            while same < len(child.keys) and done + same < len(keys) and child.keys[same] == keys[done + same]:
                same += 1
            if same < len(child.keys):
                child = self._split(child, same)
            child.last_used = self.clock
            found += child.pages
            done += same
            node = child
        return node, found, done

    def match(self, keys):
        """The pages of the longest prefix of keys the tree holds."""
        self.clock += 1
        return self._descend(list(keys))[1]

    def insert(self, keys, pages):
        """Keep keys (whose k and v are in pages, one per key); return the tree's page for each key."""
        self.clock += 1
        keys, pages = list(keys), list(pages)
        node, found, done = self._descend(keys)
        if done < len(keys):
            leaf = self._new(keys[done:], pages[done:], node)
            node.children[keys[done]] = leaf
            self.allocator.retain(leaf.pages)
            found += leaf.pages
        return found

    def _all(self):
        out, todo = [], list(self.root.children.values())
        while todo:
            node = todo.pop()
            out.append(node)
            todo += node.children.values()
        return out

    def num_evictable(self):
        """Pages in the tree that only the tree holds."""
        return sum(self.allocator.refs[p] == 1 for node in self._all() for p in node.pages)

    def evict(self, n):
        """Free whole leaves only the tree holds, least recently used first, until at least n pages are
        freed; return the pages (in any order)."""
        freed = []
        while len(freed) < n:
            leaves = [x for x in self._all() if not x.children and self.allocator.refs[x.pages[-1]] == 1]
            if not leaves:
                break
            victim = min(leaves, key=lambda x: (x.last_used, x.born))
            del victim.parent.children[victim.keys[0]]
            freed += self.allocator.release(victim.pages)
        return freed
