"""The prefix cache: a radix tree over token ids whose edges hold the pool pages of those tokens.

SGLang's ``RadixCache`` (``sglang/srt/mem_cache/radix_cache.py``), checked against it op for op
(``tests/test_sglang_replay.py`` replays what SGLang 0.5.23 answered; the README's table "Where
this engine is SGLang's and where it is not" says where it differs). A path from the root spells a
token sequence whose k and v some request wrote; each of its pages (``page_size`` tokens) names
the pool page that holds them. A new request looks up its prompt (:meth:`RadixCache.match`),
points its slot table at the pages found, and computes only the tokens after them. The cache
holds one reference to every page in the tree (see :mod:`.allocator`), so a page stays in the
pool after its last request has gone, until :meth:`RadixCache.evict` gives back the least
recently used leaves no request holds.

As in SGLang: a match or insert that ends inside an edge splits it there; every node a match or
insert walks is marked used at the cache's clock, and a new node (a new leaf, or the upper half of
a split) is marked when it is made; an insert adds its new pages as a new leaf; eviction frees
whole leaves, oldest first, until at least the pages asked for are freed. SGLang's ``lock_ref``
is here the reference count of the allocator: a request holds every page of its path, so a node
SGLang counts as locked is one whose pages a request holds, and the protected and evictable sizes
are the same.

What each operation costs, as in SGLang, whatever the size of the tree or the pool:

- :meth:`~RadixCache.insert` caches only the pages a step added, continuing from the *cursor*
  where the sequence's last match or insert ended (a node and a depth): O(new pages). (SGLang
  inserts from the root, once a chunk or a request ends, and so marks the whole path used.)
- The cache counts its evictable pages (those only it holds) and keeps the set of evictable
  leaves, updated on every change of a page's reference count (the allocator tells it:
  :meth:`~.allocator.Allocator.watch`): :meth:`~RadixCache.num_evictable` is O(1).
- :meth:`~RadixCache.evict` pops leaves from a heap ordered by last use: O(leaves freed x log(leaves)).
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

    def __lt__(self, other: Node) -> bool:  # the evict heap's entries for one node, pushed twice, compare
        return self.id < other.id


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
    >>> cache.match([5, 6, 9])[0]                   # a new prompt shares tokens 5 6: the edge splits there
    [0, 1]
    >>> a.release(pages)                            # the request ends: nothing freed, the cache keeps them
    []
    >>> a.num_free, cache.num_evictable()
    (4, 4)
    >>> cache.evict(1), cache.match([5, 6, 7, 8])[0]   # a whole leaf goes: 7 8, the least recently used
    ([2, 3], [0, 1])
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

        As SGLang's ``match_prefix``: every node walked is marked used, and a match ending inside an
        edge splits it there (the upper half, new, is marked when made), so the prefix ends at a node.
        O(pages matched).
        """
        now = self._tick()
        s, node, pages, i = self.page_size, self.root, [], 0
        whole = len(tokens) // s
        while i < whole:
            child = node.children.get(tuple(tokens[i * s : (i + 1) * s]))
            if child is None:
                break
            n = 1
            while n < len(child.key) and i + n < whole and child.key[n] == tuple(tokens[(i + n) * s : (i + n + 1) * s]):
                n += 1
            self._use(child, now)
            pages += child.pages[:n]
            i += n
            if n < len(child.key):
                node = self._split(child, n)
                break
            node = child
        return pages, (node, i)

    def insert(self, tokens, pages, cursor) -> tuple[list[int], tuple[Node, int]]:
        """Cache the whole pages of ``tokens``, which continue a sequence right after ``cursor`` (None: the
        root) and whose k and v are in ``pages``; return ``(the cache's pages for them, the new cursor)``.

        Where the tree already holds a page for the same tokens, that page is returned, not the one
        given (the caller's is then a duplicate it may give back). Each page newly kept gets one
        reference, the cache's. As SGLang's ``insert``: every node walked is marked used, an insert
        ending inside an edge splits it, and the new pages are a new leaf (a leaf is never grown in
        place). O(pages given), plus a split's copy.
        """
        now = self._tick()
        key = self.key(tokens)
        node, depth = self._resolve(cursor)
        if depth < node.end:  # a cursor inside an edge: the sequence continues from a node boundary
            node = self._split(node, depth - node.start)
        out, i = [], 0
        while i < len(key):
            child = node.children.get(key[i])
            if child is None:
                new = list(pages[i : len(key)])
                self.allocator.retain(new)
                node = self._add_child(node, key[i:], new)
                out += new
                break
            n = _common(child.key, 0, key, i)
            self._use(child, now)
            out += child.pages[:n]
            i += n
            node = child if n == len(child.key) else self._split(child, n)
        return out, (node, node.end)

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

    def num_cached(self) -> int:
        """Pages the tree holds (SGLang's ``total_size``, in pages). O(pool pages), at C speed."""
        return sum(self.in_tree)

    def num_protected(self) -> int:
        """Pages in the tree that a request holds too (SGLang's ``protected_size``, in pages)."""
        return self.num_cached() - self.evictable

    def evict(self, n: int) -> list[int]:
        """Free whole leaves no request holds, least recently used first, until at least ``n`` pages are
        freed or none is left; return the pages freed, leaf after leaf.

        As SGLang's ``evict``: a leaf goes whole (``evict(1)`` frees a leaf of 5 pages), and a parent
        left without children and held by no request is a leaf now, in the same heap. The pages go back
        to the allocator in one release, in the order SGLang's frees leave its free list in (see
        :class:`~.allocator.Allocator`); the undo log gets one record for the whole eviction.
        """
        refs, tails, leaves, heap, root = self.allocator.refs, self.tails, self.leaves, self.heap, self.root
        groups, removed, added, freed = [], [], [], 0
        while freed < n:
            while heap and not (heap[0][2] in leaves and heap[0][2].last_used == heap[0][0]):
                heapq.heappop(heap)  # stale: no longer an evictable leaf, or used since
            if not heap:
                break
            leaf = heap[0][2]
            held = len(leaf.pages)  # a request holds a head of the leaf (never in SGLang): its tail goes
            while held and refs[leaf.pages[held - 1]] == 1:
                held -= 1
            if held:
                self._split(leaf, held)
            groups.append(leaf.pages)
            freed += len(leaf.pages)
            removed.append(leaf)
            leaves.discard(leaf)
            del tails[leaf.pages[-1]]
            parent = leaf.parent
            del parent.children[leaf.key[0]]
            if parent is not root and not parent.children and refs[parent.pages[-1]] == 1:
                self._set_leaf(parent, True)
                added.append(parent)
        if not groups:
            return []
        drop = [p for g in groups for p in g]
        for p in drop:
            self.in_tree[p] = 0
        self.evictable -= len(drop)
        self.journal.record(self._unevict, removed, added)
        if self.page_size > 1:  # freed pages go to the front of the free list: the last leaf's first
            self.allocator.release([p for g in reversed(groups) for p in g])
        else:
            self.allocator.release(drop)
        return drop

    def _unevict(self, removed: list[Node], added: list[Node]) -> None:
        """Undo of :meth:`evict`: every leaf it popped back in the tree, then those it made leaves out."""
        for leaf in reversed(removed):  # detached whole, lists untouched
            leaf.parent.children[leaf.key[0]] = leaf
            self.tails[leaf.pages[-1]] = leaf
            self._set_leaf(leaf, True)
        for leaf in removed:
            for p in leaf.pages:
                self.in_tree[p] = 1
            self.evictable += len(leaf.pages)
        for node in added:
            self.leaves.discard(node)

    # --- Changes, each recorded in the undo log -------------------------------------------------------

    def _tick(self) -> int:
        """The clock's next value (SGLang's ``time.monotonic()``: each lookup, insert and new node reads it)."""
        self.journal.record(setattr, self, "clock", self.clock)
        self.clock += 1
        return self.clock

    def _use(self, node: Node, now: int) -> None:
        if node.last_used != now:
            self.journal.record(self._set_last_used, node, node.last_used)
            self._set_last_used(node, now)

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
        now = self._tick()  # a new node's last use is when it was made, as SGLang's TreeNode()
        self.journal.record(setattr, self, "next_id", self.next_id)
        node = Node(key, pages, parent, now, start, self.next_id)
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

    def _split(self, node: Node, n: int) -> Node:
        """Cut ``node``'s edge after ``n`` key pages; return the new upper node (``node`` keeps the rest).

        The upper node is new: its last use is now, as SGLang's ``_split_node`` makes it."""
        top = self._new_node(node.key[:n], node.pages[:n], node.parent, node.start)
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
