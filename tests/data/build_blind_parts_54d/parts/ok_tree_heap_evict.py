"""Part: 4 PrefixTree
Kind: correct

What is unusual:
    none: edges stored as (key, page) pairs, node ids from itertools.count, evict with a heap of
    (last_used, id) that gets a parent pushed when it becomes an evictable leaf.

A good feedback message must say:
    - passes (no mistake named)

It must not say:
    - any mistake / eviction order / split / refs
"""

import heapq
import itertools


class _Edge:
    """A node: its edge as (key, page) pairs; children by first key."""

    def __init__(self, pairs, parent, nid):
        self.pairs, self.parent, self.nid = list(pairs), parent, nid
        self.kids = {}
        self.stamp = 0


class PrefixTree:
    # eviction from a heap of (last_used, node id) that grows as parents become leaves

    def __init__(self, allocator):
        self.allocator = allocator
        self._ids = itertools.count()
        self._clock = 0
        self.root = _Edge([], None, next(self._ids))

    def _descend(self, keys):
        node, done, out = self.root, 0, []
        while done < len(keys):
            child = node.kids.get(keys[done])
            if child is None:
                break
            child.stamp = self._clock
            k = 0
            for key, _ in child.pairs:
                if done + k == len(keys) or keys[done + k] != key:
                    break
                k += 1
            if k < len(child.pairs):
                top = _Edge(child.pairs[:k], node, next(self._ids))
                top.stamp = self._clock
                node.kids[keys[done]] = top
                child.pairs, child.parent = child.pairs[k:], top
                top.kids[child.pairs[0][0]] = child
                return top, done + k, out + [p for _, p in top.pairs]
            out += [p for _, p in child.pairs]
            done += k
            node = child
        return node, done, out

    def match(self, keys):
        self._clock += 1
        return self._descend(list(keys))[2]

    def insert(self, keys, pages):
        keys, pages = list(keys), list(pages)
        self._clock += 1
        node, done, out = self._descend(keys)
        if done < len(keys):
            self.allocator.retain(pages[done:])
            leaf = _Edge(zip(keys[done:], pages[done:]), node, next(self._ids))
            leaf.stamp = self._clock
            node.kids[keys[done]] = leaf
        return out + pages[done:]

    def _all(self):
        todo, out = list(self.root.kids.values()), []
        while todo:
            node = todo.pop()
            out.append(node)
            todo += node.kids.values()
        return out

    def _free_leaf(self, node):
        return node is not self.root and not node.kids and self.allocator.refs[node.pairs[-1][1]] == 1

    def num_evictable(self):
        refs = self.allocator.refs
        return sum(1 for node in self._all() for _, p in node.pairs if refs[p] == 1)

    def evict(self, n):
        heap = [(node.stamp, node.nid, node) for node in self._all() if self._free_leaf(node)]
        heapq.heapify(heap)
        freed = []
        while len(freed) < n and heap:
            _, _, node = heapq.heappop(heap)
            parent = node.parent
            del parent.kids[node.pairs[0][0]]
            freed += self.allocator.release([p for _, p in node.pairs])
            if self._free_leaf(parent):
                heapq.heappush(heap, (parent.stamp, parent.nid, parent))
        return freed
