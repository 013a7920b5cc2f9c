"""The prefix cache: a radix tree over token ids whose edges hold the pool pages of those tokens.

SGLang's RadixAttention, at its granularity when ``page_size`` is 1: one row per token. A path
from the root spells a token sequence whose k and v some request wrote; each of its pages
(``page_size`` tokens) names the pool page that holds them. A new request looks up its prompt
(:meth:`RadixCache.match`), points its slot table at the pages found, and computes only the
tokens after them. The cache holds one reference to every page in the tree (see
:mod:`.allocator`), so a page stays in the pool after its last request has gone, until
:meth:`RadixCache.evict` gives back the least recently used pages no request holds.

What each operation costs, as in SGLang, whatever the size of the tree or the pool:

- :meth:`~RadixCache.insert` caches only the pages a step added, continuing from the *cursor*
  where the sequence's last match or insert ended (a node and a depth): O(new pages).
- The cache counts its evictable pages (those only it holds) and keeps the set of evictable
  leaves, updated on every change of a page's reference count (the allocator tells it:
  :meth:`~.allocator.Allocator.watch`): :meth:`~RadixCache.num_evictable` is O(1).
- :meth:`~RadixCache.evict` pops leaves from a heap ordered by last use: O(pages freed x log(leaves)).
- Nothing recurses: a tree 100,000 levels deep is walked with loops.

Only whole pages are cached: a request's partly filled last page stays its own. The model and
the op never see the tree; they see slot tables. Every change is recorded in the engine's undo
log (:mod:`.journal`), so a failed step leaves the tree as it was.
"""

from __future__ import annotations

import heapq

from .allocator import Allocator
from .journal import Journal


class Node:
    """An edge of the tree and the node below it.

    Attributes
    ----------
    key : list of tuple    the edge's pages of token ids, ``page_size`` ids each
    pages : list of int    the pool page of each key page
    children : dict        first key page of a child's edge -> child
    parent : Node or None
    last_used : int        the cache's clock when a lookup or insert last passed here
    start : int            the depth (in pages, from the root) where the edge begins; it ends at
                           :attr:`end`
    id : int               the order nodes were made in (ties of ``last_used`` are evicted oldest first)
    """

    def __init__(self, key=(), pages=(), parent: Node | None = None, last_used: int = 0, start: int = 0, id: int = 0):
        self.key, self.pages = list(key), list(pages)
        self.children: dict[tuple, Node] = {}
        self.parent = parent
        self.last_used = last_used
        self.start = start
        self.id = id

    @property
    def end(self) -> int:
        return self.start + len(self.key)


def _common(a: list, i: int, b: list, j: int) -> int:
    """How many entries ``a[i:]`` and ``b[j:]`` have in common at their start (no slices copied)."""
    n, most = 0, min(len(a) - i, len(b) - j)
    while n < most and a[i + n] == b[j + n]:
        n += 1
    return n


class RadixCache:
    """Pool pages of token sequences already computed, found by their longest common prefix.

    Example
    -------
    >>> a = Allocator(8)
    >>> cache = RadixCache(a)
    >>> pages = a.allocate(4)                       # a request wrote tokens 5 6 7 8 into pages 0-3
    >>> cache.insert([5, 6, 7, 8], pages, None)[0]
    [0, 1, 2, 3]
    >>> cache.match([5, 6, 9])[0]                   # a new prompt shares tokens 5 6
    [0, 1]
    >>> a.release(pages)                            # the request ends: nothing freed, the cache keeps them
    []
    >>> a.num_free, cache.num_evictable()
    (4, 4)
    >>> cache.evict(3), cache.match([5, 6, 7, 8])[0]   # least recently used first: the tail 6 7 8 goes
    ([1, 2, 3], [0])
    """

    enabled = True

    def __init__(self, allocator: Allocator):
        self.allocator = allocator
        self.page_size = allocator.page_size
        self.root = Node()
        self.clock = 0
        self.journal = Journal()  # the engine's, once it adopts this cache (:mod:`.protocols`)
        self.in_tree = bytearray(allocator.num_pages)  # 1 where the tree holds the page
        self.tails: dict[int, Node] = {}  # each node's last page -> the node
        self.evictable = 0  # pages in the tree that only the tree holds (reference count 1)
        self.leaves: set[Node] = set()  # nodes without children whose last page only the tree holds
        self.heap: list[tuple[int, int, Node]] = []  # (last_used, id, leaf): stale entries skipped on pop
        self.next_id = 1
        allocator.watch(self._refs_changed)

    def key(self, tokens) -> list[tuple]:
        """The whole pages of ``tokens``, as tuples of ``page_size`` ids (a partial last page dropped)."""
        return list(zip(*[iter(tokens)] * self.page_size))  # zip drops the partial last page

    # --- Lookups and inserts ----------------------------------------------------------------------

    def match(self, tokens) -> tuple[list[int], tuple[Node, int]]:
        """``(pages, cursor)``: the pool pages of the longest cached prefix of ``tokens`` (whole pages),
        marked as just used, and where it ends (:meth:`insert` continues from there).

        O(pages matched): the pages of ``tokens`` are made into keys only as far as they match.
        """
        self._tick()
        s, node, pages, i = self.page_size, self.root, [], 0
        whole = len(tokens) // s
        while i < whole:
            child = node.children.get(tuple(tokens[i * s : (i + 1) * s]))
            if child is None:
                break
            node, n = child, 1
            while n < len(node.key) and i + n < whole and node.key[n] == tuple(tokens[(i + n) * s : (i + n + 1) * s]):
                n += 1
            self._use(node)
            pages += node.pages[:n]
            i += n
            if n < len(node.key):
                break
        return pages, (node, i)

    def insert(self, tokens, pages, cursor) -> tuple[list[int], tuple[Node, int]]:
        """Cache the whole pages of ``tokens``, which continue a sequence right after ``cursor`` (None: the
        root) and whose k and v are in ``pages``; return ``(the cache's pages for them, the new cursor)``.

        Where the tree already holds a page for the same tokens, that page is returned, not the one
        given (the caller's is then a duplicate it may give back). Each page newly kept gets one
        reference, the cache's. O(pages given), plus a split's copy where the sequence leaves an edge.
        """
        self._tick()
        key = self.key(tokens)
        node, depth = self._resolve(cursor)
        out, i = [], 0
        while i < len(key):
            if depth < node.end:  # inside node's edge: follow it while the tokens agree
                off = depth - node.start
                n = _common(node.key, off, key, i)
                if n == 0:
                    node = self._split(node, off)  # the sequence leaves the edge here
                    continue
                self._use(node)
                out += node.pages[off : off + n]
                i, depth = i + n, depth + n
                continue
            child = node.children.get(key[i])
            if child is not None:
                node = child
                continue
            new = list(pages[i : len(key)])
            self.allocator.retain(new)
            if node is not self.root and not node.children:  # grow the leaf, not a chain of one-page nodes
                self._extend(node, key[i:], new)
            else:
                node = self._add_child(node, key[i:], new)
            self._use(node)
            out += new
            depth = node.end
            break
        return out, (node, depth)

    def _resolve(self, cursor) -> tuple[Node, int]:
        """The cursor's node, brought up to date: a split since made moved the depth into a new parent."""
        if cursor is None:
            return self.root, 0
        node, depth = cursor
        while node is not self.root and depth <= node.start:
            node = node.parent
        return node, depth

    # --- What may be evicted ------------------------------------------------------------------------

    def nodes(self) -> list[Node]:
        """Every node but the root, parents before children."""
        out, stack = [], list(self.root.children.values())
        while stack:
            node = stack.pop()
            out.append(node)
            stack += node.children.values()
        return out

    def num_evictable(self) -> int:
        """Pages only the cache holds: :meth:`evict` can free this many. O(1): a count kept up to date."""
        return self.evictable

    def evict(self, n: int) -> list[int]:
        """Free up to ``n`` pages no request holds, least recently used first; return them.

        A request holding a page holds every page before it on its path, so the pages only the
        cache holds are the tails of paths: eviction cuts leaves from their end. The pages go back
        to the allocator in one release, the undo log gets one record for the whole eviction.
        """
        refs, tails, leaves, heap, root = self.allocator.refs, self.tails, self.leaves, self.heap, self.root
        drop, removed, trimmed, added = [], [], [], []
        while len(drop) < n:
            while heap and not (heap[0][2] in leaves and heap[0][2].last_used == heap[0][0]):
                heapq.heappop(heap)  # stale: no longer an evictable leaf, or used since
            if not heap:
                break
            leaf = heap[0][2]
            pages = leaf.pages
            if len(pages) <= n - len(drop) and refs[pages[0]] == 1:  # the whole leaf goes
                drop += pages
                removed.append(leaf)
                leaves.discard(leaf)
                del tails[pages[-1]]
                parent = leaf.parent
                del parent.children[leaf.key[0]]
                if parent is not root and not parent.children and refs[parent.pages[-1]] == 1:
                    self._set_leaf(parent, True)
                    added.append(parent)
                continue
            k, most = 0, min(len(pages), n - len(drop))  # its tail goes: a request holds the rest, or enough
            while k < most and refs[pages[-1 - k]] == 1:
                k += 1
            cut = len(pages) - k
            trimmed.append((leaf, leaf.key[cut:], pages[cut:]))
            drop += pages[cut:]
            del tails[pages[-1]]
            del leaf.key[cut:], pages[cut:]
            tails[pages[-1]] = leaf
            if refs[pages[-1]] != 1:
                leaves.discard(leaf)
        if not drop:
            return []
        for p in drop:
            self.in_tree[p] = 0
        self.evictable -= len(drop)
        self.journal.record(self._unevict, removed, trimmed, added)
        return self.allocator.release(drop)

    def _unevict(self, removed: list[Node], trimmed: list, added: list[Node]) -> None:
        """Undo of :meth:`evict`: every leaf it popped back in the leaves, then those it made leaves out."""
        for leaf, key, pages in reversed(trimmed):
            del self.tails[leaf.pages[-1]]
            leaf.key += key
            leaf.pages += pages
            self.tails[leaf.pages[-1]] = leaf
            self._set_leaf(leaf, True)
        for leaf in reversed(removed):  # detached whole, lists untouched
            leaf.parent.children[leaf.key[0]] = leaf
            self.tails[leaf.pages[-1]] = leaf
            self._set_leaf(leaf, True)
        for p in [p for leaf in removed for p in leaf.pages] + [p for _, _, pages in trimmed for p in pages]:
            self.in_tree[p] = 1
        self.evictable += sum(len(leaf.pages) for leaf in removed) + sum(len(pages) for _, _, pages in trimmed)
        for node in added:
            self.leaves.discard(node)

    # --- Changes, each recorded in the undo log -------------------------------------------------------

    def _tick(self) -> None:
        self.journal.record(setattr, self, "clock", self.clock)
        self.clock += 1

    def _use(self, node: Node) -> None:
        if node.last_used != self.clock:
            self.journal.record(self._set_last_used, node, node.last_used)
            self._set_last_used(node, self.clock)

    def _set_last_used(self, node: Node, value: int) -> None:
        node.last_used = value
        if node in self.leaves:
            self._push(node)

    def _push(self, node: Node) -> None:
        if len(self.heap) > 2 * len(self.leaves) + 64:  # mostly stale entries: rebuild, O(leaves)
            self.heap[:] = [(x.last_used, x.id, x) for x in self.leaves]  # in place: evict holds the list
            heapq.heapify(self.heap)
        heapq.heappush(self.heap, (node.last_used, node.id, node))

    def _new_node(self, key, pages, parent: Node, start: int) -> Node:
        self.journal.record(setattr, self, "next_id", self.next_id)
        node = Node(key, pages, parent, self.clock, start, self.next_id)
        self.next_id += 1
        return node

    def _add_child(self, parent: Node, key: list, pages: list[int]) -> Node:
        child = self._new_node(key, pages, parent, parent.end)
        parent.children[key[0]] = child
        self.journal.record(self._remove_child, parent, child)
        self._own(pages)
        self.tails[pages[-1]] = child
        self._check_leaf(child)
        self._check_leaf(parent)
        return child

    def _remove_child(self, parent: Node, child: Node) -> None:
        """Undo of :meth:`_add_child` (the newer records put back the counts and the leaves)."""
        del parent.children[child.key[0]]
        del self.tails[child.pages[-1]]

    def _extend(self, node: Node, key: list, pages: list[int]) -> None:
        old = len(node.key)
        del self.tails[node.pages[-1]]
        node.key += key
        node.pages += pages
        self.tails[node.pages[-1]] = node
        self.journal.record(self._cut, node, old)
        self._own(pages)
        self._check_leaf(node)

    def _cut(self, node: Node, length: int) -> None:
        """Undo of :meth:`_extend`: the edge back to its first ``length`` pages."""
        del self.tails[node.pages[-1]]
        del node.key[length:], node.pages[length:]
        self.tails[node.pages[-1]] = node

    def _split(self, node: Node, n: int) -> Node:
        """Cut ``node``'s edge after ``n`` key pages; return the new upper node (``node`` keeps the rest)."""
        top = self._new_node(node.key[:n], node.pages[:n], node.parent, node.start)
        top.last_used = node.last_used
        node.parent.children[top.key[0]] = top
        del node.key[:n], node.pages[:n]
        node.parent, node.start = top, node.start + n
        top.children[node.key[0]] = node
        self.tails[top.pages[-1]] = top
        self.journal.record(self._unsplit, top, node)
        return top

    def _unsplit(self, top: Node, node: Node) -> None:
        del self.tails[top.pages[-1]]
        node.key[:0], node.pages[:0] = top.key, top.pages
        node.parent, node.start = top.parent, top.start
        node.parent.children[node.key[0]] = node

    def _own(self, pages: list[int]) -> None:
        """The tree now holds ``pages`` (already retained for it)."""
        refs, in_tree, alone = self.allocator.refs, self.in_tree, 0
        for p in pages:
            in_tree[p] = 1
            alone += refs[p] == 1
        self.evictable += alone
        self.journal.record(self._disown, pages)

    def _disown(self, pages: list[int]) -> None:
        """Undo of :meth:`_own`."""
        refs, in_tree = self.allocator.refs, self.in_tree
        for p in pages:
            in_tree[p] = 0
            self.evictable -= refs[p] == 1

    def _refs_changed(self, pages: list[int], delta: int) -> None:
        """The allocator's report: ``pages``' counts changed by ``delta``; keep the evictable count and leaves."""
        refs, in_tree, change, times = self.allocator.refs, self.in_tree, 0, {}
        for p in pages:
            if in_tree[p]:
                times[p] = times.get(p, 0) + 1
        for p, c in times.items():
            after = refs[p]
            if (after - delta * c == 1) != (after == 1):  # the tree's alone before, or after, not both
                change += 1 if after == 1 else -1
                node = self.tails.get(p)
                if node is not None:
                    self._check_leaf(node)
        if change:
            self.evictable += change
            self.journal.record(self._add_evictable, -change)

    def _add_evictable(self, n: int) -> None:
        self.evictable += n

    def _check_leaf(self, node: Node) -> None:
        """Put ``node`` in or out of the evictable leaves, as it now is."""
        evictable = (
            node is not self.root
            and bool(node.pages)
            and not node.children
            and node.parent is not None
            and node.parent.children.get(node.key[0]) is node
            and self.allocator.refs[node.pages[-1]] == 1
        )
        if evictable == (node in self.leaves):
            return
        self._set_leaf(node, evictable)
        self.journal.record(self._set_leaf, node, not evictable)

    def _set_leaf(self, node: Node, evictable: bool) -> None:
        if evictable:
            self.leaves.add(node)
            self._push(node)
        else:
            self.leaves.discard(node)


class NoCache:
    """The prefix cache turned off: nothing is found, nothing kept, nothing to evict."""

    enabled = False

    def __init__(self, allocator: Allocator):
        self.allocator = allocator
        self.journal = Journal()  # nothing to record: it changes nothing

    def match(self, tokens) -> tuple[list[int], None]:
        return [], None

    def insert(self, tokens, pages, cursor) -> tuple[list[int], None]:
        return list(pages[: len(tokens) // self.allocator.page_size]), None

    def nodes(self) -> list[Node]:
        return []

    def num_evictable(self) -> int:
        return 0

    def evict(self, n: int) -> list[int]:
        return []
