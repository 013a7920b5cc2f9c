"""The prefix cache: a radix tree over token ids whose edges hold the pool pages of those tokens.

SGLang's RadixAttention, at its granularity when ``page_size`` is 1: one row per token. A path
from the root spells a token sequence whose k and v some request wrote; each of its pages
(``page_size`` tokens) names the pool page that holds them. A new request looks up its prompt
(:meth:`RadixCache.match`), points its slot table at the pages found, and computes only the
tokens after them. The cache holds one reference to every page in the tree (see
:mod:`.allocator`), so a page stays in the pool after its last request has gone, until
:meth:`RadixCache.evict` gives back the least recently used pages no request holds.

Only whole pages are cached: a request's partly filled last page stays its own. The model and
the op never see the tree; they see slot tables.
"""

from __future__ import annotations

from .allocator import Allocator


class Node:
    """An edge of the tree and the node below it.

    Attributes
    ----------
    key : list of tuple    the edge's pages of token ids, ``page_size`` ids each
    pages : list of int    the pool page of each key page
    children : dict        first key page of a child's edge -> child
    parent : Node or None
    last_used : int        the cache's clock when a lookup or insert last passed here
    """

    def __init__(self, key=(), pages=(), parent: Node | None = None, last_used: int = 0):
        self.key, self.pages = list(key), list(pages)
        self.children: dict[tuple, Node] = {}
        self.parent = parent
        self.last_used = last_used


def _common(a: list, b: list) -> int:
    n = 0
    while n < len(a) and n < len(b) and a[n] == b[n]:
        n += 1
    return n


class RadixCache:
    """Pool pages of token sequences already computed, found by their longest common prefix.

    Example
    -------
    >>> a = Allocator(8)
    >>> cache = RadixCache(a)
    >>> pages = a.allocate(4)                       # a request wrote tokens 5 6 7 8 into pages 0-3
    >>> cache.insert([5, 6, 7, 8], pages)
    [0, 1, 2, 3]
    >>> cache.match([5, 6, 9])                      # a new prompt shares tokens 5 6
    [0, 1]
    >>> a.release(pages)                            # the request ends: nothing freed, the cache keeps them
    []
    >>> a.num_free, cache.num_evictable()
    (4, 4)
    >>> cache.evict(3), cache.match([5, 6, 7, 8])   # least recently used first: the tail 6 7 8 goes
    ([1, 2, 3], [0])
    """

    enabled = True

    def __init__(self, allocator: Allocator):
        self.allocator = allocator
        self.page_size = allocator.page_size
        self.root = Node()
        self.clock = 0

    def key(self, tokens) -> list[tuple]:
        """The whole pages of ``tokens``, as tuples of ``page_size`` ids (a partial last page dropped)."""
        s = self.page_size
        return [tuple(tokens[i:i + s]) for i in range(0, len(tokens) - s + 1, s)]

    def match(self, tokens) -> list[int]:
        """The pool pages of the longest cached prefix of ``tokens`` (whole pages), marked as just used."""
        self.clock += 1
        node, key, pages = self.root, self.key(tokens), []
        while key and key[0] in node.children:
            node = node.children[key[0]]
            n = _common(node.key, key)
            node.last_used = self.clock
            pages += node.pages[:n]
            if n < len(node.key):
                break
            key = key[n:]
        return pages

    def insert(self, tokens, pages) -> list[int]:
        """Cache the whole pages of ``tokens``, whose k and v are in ``pages``; return the cache's pages for them.

        Where the tree already holds a page for the same tokens, that page is returned, not the one
        given (the caller's is then a duplicate it may give back). Each page newly kept gets one
        reference, the cache's.
        """
        self.clock += 1
        key = self.key(tokens)
        node, out, i = self.root, [], 0
        while i < len(key):
            child = node.children.get(key[i])
            if child is None:
                new_pages = list(pages[i:len(key)])
                self.allocator.retain(new_pages)
                if node is not self.root and not node.children:  # grow the leaf, not a chain of one-page nodes
                    node.key += key[i:]
                    node.pages += new_pages
                else:
                    node.children[key[i]] = Node(key[i:], new_pages, node, self.clock)
                return out + new_pages
            n = _common(child.key, key[i:])
            if n < len(child.key):
                child = self._split(child, n)
            child.last_used = self.clock
            out += child.pages
            i += n
            node = child
        return out

    def _split(self, node: Node, n: int) -> Node:
        """Cut ``node``'s edge after ``n`` key pages; return the new upper node."""
        top = Node(node.key[:n], node.pages[:n], node.parent, node.last_used)
        node.parent.children[top.key[0]] = top
        node.key, node.pages, node.parent = node.key[n:], node.pages[n:], top
        top.children[node.key[0]] = node
        return top

    def nodes(self) -> list[Node]:
        """Every node but the root, parents before children."""
        out, stack = [], list(self.root.children.values())
        while stack:
            node = stack.pop()
            out.append(node)
            stack += node.children.values()
        return out

    def num_evictable(self) -> int:
        """Pages only the cache holds: :meth:`evict` can free this many."""
        refs = self.allocator.refs
        return sum(refs[p] == 1 for node in self.nodes() for p in node.pages)

    def evict(self, n: int) -> list[int]:
        """Free up to ``n`` pages no request holds, least recently used first; return them.

        A request holding a page holds every page before it on its path, so the pages only the
        cache holds are the tails of paths: eviction cuts leaves from their end.
        """
        refs, freed = self.allocator.refs, []
        while len(freed) < n:
            leaves = [x for x in self.nodes() if not x.children and refs[x.pages[-1]] == 1]
            if not leaves:
                break
            leaf = min(leaves, key=lambda x: x.last_used)
            k = 0
            while k < len(leaf.pages) and k < n - len(freed) and refs[leaf.pages[-1 - k]] == 1:
                k += 1
            first = leaf.key[0]
            drop = leaf.pages[len(leaf.pages) - k:]
            del leaf.key[len(leaf.key) - k:], leaf.pages[len(leaf.pages) - k:]
            if not leaf.key:
                del leaf.parent.children[first]
            freed += self.allocator.release(drop)
        return freed


class NoCache:
    """The prefix cache turned off: nothing is found, nothing kept, nothing to evict."""

    enabled = False

    def __init__(self, allocator: Allocator):
        self.allocator = allocator

    def match(self, tokens) -> list[int]:
        return []

    def insert(self, tokens, pages) -> list[int]:
        return list(pages[:len(tokens) // self.allocator.page_size])

    def nodes(self) -> list[Node]:
        return []

    def num_evictable(self) -> int:
        return 0

    def evict(self, n: int) -> list[int]:
        return []
