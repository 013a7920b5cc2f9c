"""Part 4: prefix match and insert in a radix tree over token ids, with reference counts and LRU eviction.

The learner writes ``PrefixTree(allocator)``: ``match(keys) -> pages``, ``insert(keys, pages) -> pages``,
``num_evictable()`` and ``evict(n) -> pages``. A key is one token id (a page of them, as a tuple, when
``page_size`` > 1); each key's k and v sit in one pool page. The rules are the engine's
(:class:`ropepool.engine.RadixCache`), written out in the stub's docstring. The checker replays table
cases and a random workload of requests (match, compute, insert, finish) and evictions on the learner's
tree and on the engine's, each over its own copy of the engine's allocator, and compares every answer.
:class:`Cached` wraps the learner's tree in the engine's interface (:class:`ropepool.engine.protocols.PrefixCache`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..engine import Allocator as EngineAllocator
from ..engine import RadixCache
from ..engine.errors import ContractError
from ..teaching.feedback import plural
from .feedback import call, history, int_list, is_int, passed, rejected, showing, wrong_case
from .shrink import smallest, without_each

PART = 4
FIRST = (
    "a Node with a key (a list of keys), pages (one per key), children (first key -> child), a parent and "
    "last_used; match(keys) walks from the root while the keys agree and returns the pages it passed."
)


class Cached:
    """The learner's tree behind the engine's prefix cache interface:
    ``Engine(prefix_cache=Cached.factory(PrefixTree))``.

    The cursor a match or insert hands back is the keys and pages of the sequence so far; the next
    insert gives the learner's tree the whole sequence (the tree finds its own pages again). It keeps no
    undo log: the engine copies it at each step.
    """

    enabled = True

    def __init__(self, make: Callable, allocator):
        self.allocator, self.page_size = allocator, allocator.page_size
        self.inner = make(allocator)

    @classmethod
    def factory(cls, make: Callable) -> Callable:
        return lambda allocator: cls(make, allocator)

    def key(self, tokens) -> list:
        s = self.page_size
        if s == 1:
            return [int(t) for t in tokens]
        return [tuple(tokens[i : i + s]) for i in range(0, len(tokens) - s + 1, s)]

    def match(self, tokens):
        keys = self.key(tokens)
        pages = [int(p) for p in self.inner.match(keys)]
        held = [p for p in pages if (self._refs(p) or 0) < 1]
        if len(pages) > len(keys) or held:
            raise ContractError(
                f"your tree's match of {len(keys)} keys returned {plural(len(pages), 'page')} {pages!r:.80}"
                + (f": page {held[0]} is not held by anyone" if held else ": more pages than keys")
            )
        return pages, (keys[: len(pages)], pages)

    def insert(self, tokens, pages, cursor):
        before_keys, before_pages = cursor if cursor is not None else ([], [])
        keys = before_keys + self.key(tokens)
        theirs = [int(p) for p in self.inner.insert(keys, before_pages + list(pages))]
        if len(theirs) != len(keys):
            raise ContractError(
                f"your tree's insert of {len(keys)} keys returned {plural(len(theirs), 'page')}: one page per key"
            )
        return theirs[len(before_keys) :], (keys, theirs)

    def num_evictable(self) -> int:
        return int(self.inner.num_evictable())

    def node_views(self) -> dict:
        """The learner's tree as the engine's viewer draws it (``{id: NodeView}``), read from its nodes laid out
        as the reference's are (``root``; each node's ``children`` mapping, ``keys``, ``pages``,
        ``last_used``); empty where the tree is laid out otherwise."""
        from ..engine.recording import NodeView

        ids = self.__dict__.setdefault("_ids", {})  # id(node) -> (node, its number in the views)

        def number(node) -> int:
            if ids.get(id(node), (None,))[0] is not node:
                ids[id(node)] = (node, len(ids) + 1)
            return ids[id(node)][1]

        views, root = {}, getattr(self.inner, "root", None)
        try:
            stack = [(child, 0) for child in root.children.values()]
            while stack:
                node, parent = stack.pop()
                keys = [t for k in node.keys for t in (k if isinstance(k, tuple) else (k,))]
                nid = number(node)
                views[nid] = NodeView(
                    nid, parent, keys, [int(p) for p in node.pages], int(getattr(node, "last_used", 0))
                )
                stack += [(child, nid) for child in node.children.values()]
        except (AttributeError, TypeError, ValueError):  # a tree of another layout: nothing to draw
            return {}
        return views

    def _refs(self, page: int) -> int | None:
        """The allocator's count of ``page``; None for a page outside the pool."""
        if not 0 <= page < self.allocator.num_pages:
            return None
        refs = self.allocator.refs
        return int(refs.get(page, 0) if hasattr(refs, "get") else refs[page])

    def evict(self, n: int) -> list[int]:
        freed = [int(p) for p in self.inner.evict(n)]
        held = [p for p in freed if self._refs(p) != 0]
        if len(set(freed)) < len(freed) or held:  # more than n is allowed: a whole leaf may go at once
            if held:
                count = self._refs(held[0])
                why = f"page {held[0]} " + ("is not in the pool" if count is None else f"is still held (refs {count})")
            else:
                why = "a page twice"
            raise ContractError(f"your tree's evict({n}) freed {plural(len(freed), 'page')} {freed!r:.80}: {why}")
        return freed


class _Engine:
    """The engine's tree with the learner's interface (whole sequences, no cursor), for the comparison."""

    def __init__(self, allocator):
        self.tree = RadixCache(allocator)

    def match(self, keys):
        return self.tree.match(keys)[0]

    def insert(self, keys, pages):
        return self.tree.insert(keys, pages, None)[0]

    def num_evictable(self):
        return self.tree.num_evictable()

    def evict(self, n):
        return self.tree.evict(n)


# Ops: ("request", rid, keys) matches, holds the pages found, allocates (evicting if it must) and inserts;
# ("compute", rid, keys) the same without the match (two requests computing the same tokens);
# ("finish", rid) gives its pages back; ("match", keys); ("evict", n).
def cases() -> list[tuple[str, int, list]]:
    return [
        ("an empty tree matches nothing", 8, [("match", [1, 2, 3])]),
        ("a sequence inserted is found whole", 8, [("request", "A", [1, 2, 3, 4]), ("match", [1, 2, 3, 4])]),
        (
            "the longest cached prefix, stopping inside an edge",
            8,
            [("request", "A", [1, 2, 3, 4]), ("match", [1, 2, 3, 9, 9])],
        ),
        (
            "a diverging token splits the edge",
            12,
            [
                ("request", "A", [1, 2, 3, 4]),
                ("request", "B", [1, 2, 7, 8]),
                ("match", [1, 2, 7]),
                ("match", [1, 2, 3]),
            ],
        ),
        (
            "insert gives back the tree's own page for keys it holds",
            12,
            [("request", "A", [5, 6, 7]), ("compute", "B", [5, 6, 7, 8])],
        ),
        ("the tree holds one reference per page", 8, [("request", "A", [5, 6, 7]), ("finish", "A"), ("match", [5, 6])]),
        ("pages a request holds are not evicted", 8, [("request", "A", [1, 2, 3]), ("evict", 5)]),
        (
            "the least recently used leaf goes first",
            8,
            [
                ("request", "A", [1, 2, 3]),
                ("finish", "A"),
                ("request", "B", [4, 5, 6]),
                ("finish", "B"),
                ("match", [1, 2, 3]),
                ("evict", 3),
            ],
        ),
        (
            "evicting frees whole leaves, the oldest first, then their parent",
            12,
            [
                ("request", "A", [1, 2, 3, 4]),
                ("finish", "A"),
                ("request", "B", [1, 2, 9]),
                ("finish", "B"),
                ("evict", 1),
                ("evict", 2),
                ("evict", 10),
            ],
        ),
        (
            "a tie goes to the older node, whatever its keys",
            12,
            [
                ("request", "A", [1, 2, 9]),
                ("compute", "B", [1, 2, 3]),
                ("finish", "A"),
                ("finish", "B"),
                ("evict", 1),
            ],
        ),
        (
            "a full pool evicts to make room",
            6,
            [("request", "A", [1, 2, 3]), ("finish", "A"), ("request", "B", [4, 5, 6, 7, 8])],
        ),
    ]


def workload(n: int = 25, seed: int = 0) -> list[tuple[str, int, list]]:
    """``n`` random runs of 30 operations: requests whose keys start with one of three shared prefixes."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        prefixes = [list(rng.integers(0, 6, int(rng.integers(1, 5)))) for _ in range(3)]
        ops, live, rid = [], [], 0
        for _ in range(30):
            r = rng.random()
            if r < 0.45 or not live:
                tail = rng.integers(0, 6, int(rng.integers(1, 4)))
                keys = [int(k) for k in prefixes[int(rng.integers(3))]] + [int(k) for k in tail]
                ops.append(("request" if rng.random() < 0.8 else "compute", rid, keys))
                live.append(rid)
                rid += 1
            elif r < 0.8:
                ops.append(("finish", live.pop(int(rng.integers(len(live))))))
            elif r < 0.9:
                ops.append(("match", [int(k) for k in prefixes[int(rng.integers(3))]] + [int(rng.integers(0, 6))]))
            else:
                ops.append(("evict", int(rng.integers(1, 4))))
        out.append((f"random run {i}", 24, ops))
    return out


def _settle(a: EngineAllocator, evicted) -> None:
    """Sort the pages one evict freed at the back of the free queue: the stub fixes which pages an evict
    frees, not the order it releases them in, and that order decides which pages are handed out next."""
    k = len(evicted or [])
    if k and sorted(list(a.free_pages)[-k:]) == sorted(evicted):
        tail = sorted(a.free_pages.pop() for _ in range(k))
        a.free_pages.extend(tail)


def _run(make: Callable, pages: int, ops: list, *, learner: bool, keep: list | None = None):
    """Replay ``ops`` on a fresh allocator and tree; yield (what, answer, refs, free, evictable) after each op.
    ``keep``, a list, is given the tree and its allocator."""
    __tracebackhide__ = True  # a failing check shows the learner's frames, not the checker's
    a = EngineAllocator(pages)
    tree = call(PART, make, a, what="PrefixTree(allocator)", first=FIRST) if learner else make(a)
    if keep is not None:
        keep += [tree, a]
    held: dict = {}

    def do(fn, *args, what, as_set=False):
        """``fn(*args)``'s pages as ints (sorted with ``as_set``: the stub fixes which pages, not their order)."""
        out = call(PART, fn, *args, what=what, first=FIRST) if learner else fn(*args)
        if out is None:
            return None
        out = int_list(PART, out, what) if learner else [int(p) for p in out]
        return sorted(out) if as_set else out

    def count() -> int:
        """``tree.num_evictable()``, an int."""
        n = call(PART, tree.num_evictable, what="num_evictable()", first=FIRST) if learner else tree.num_evictable()
        if learner and not is_int(n):
            raise rejected(PART, "not_int", f"num_evictable() returned {n!r:.200}: a count of pages is an int")
        return int(n)

    def pool(fn, pages, after: str):
        """The checker's own call on the pool; the pool refusing it means the tree's answer named pages wrongly."""
        try:
            return fn(pages)
        except ValueError as e:
            raise rejected(
                PART,
                "bad_pages",
                f"after {after}, the pool refused {fn.__name__}({pages}) ({e}): a page the tree hands back must "
                "be one it holds, and it releases only the pages it drops. In the engine a request would read "
                "rows nobody wrote.",
            ) from None

    for op in ops:
        kind = op[0]
        if kind in ("request", "compute"):
            _, rid, keys = op
            parts = []
            found = do(tree.match, list(keys), what=f"match({keys})") if kind == "request" else []
            parts.append(f"match {found}" if kind == "request" else "no match")
            pool(a.retain, found or [], f"match({keys}) returned {found}")
            need = len(keys) - len(found or [])
            evicted = []
            if need > a.num_free:
                if need > a.num_free + count():
                    a.release(found or [])
                    yield f"request {rid} {keys}: refused, no room", "refused", list(a.refs), a.num_free, None
                    continue
                said = count()
                evicted = do(tree.evict, need - a.num_free, what=f"evict({need - a.num_free})", as_set=True)
                _settle(a, evicted)
                parts.append(f"evict {evicted}")
                if need > a.num_free:
                    raise rejected(
                        PART,
                        "evict_short",
                        f"request {rid} {keys} needs {need} free pages; num_evictable() said {said}, but evict "
                        f"freed {evicted or []} and {a.num_free} are free: count only the pages evict can free "
                        "(cached, held by nobody else).",
                    )
            mine = (found or []) + a.allocate(need)
            theirs = do(tree.insert, list(keys), list(mine), what=f"insert({keys}, {mine})")
            parts.append(f"insert -> {theirs}")
            if theirs is None or len(theirs) != len(keys):
                yield f"{kind} {rid} {keys}", f"insert returned {theirs}", list(a.refs), a.num_free, None
                return
            for j, (own, cached) in enumerate(zip(mine, theirs)):
                if own != cached:  # the tree had its own page: switch to it, give ours back
                    pool(a.retain, [cached], f"insert({keys}, {mine}) returned {theirs}")
                    pool(a.release, [own], f"insert({keys}, {mine}) returned {theirs}")
                    mine[j] = cached
            held[rid] = mine
            what = f"request {rid} {keys}" if kind == "request" else f"compute {rid} {keys} (no match first)"
            yield what, "; ".join(parts), list(a.refs), a.num_free, count()
        elif kind == "finish":
            pool(a.release, held.pop(op[1], []), f"finish {op[1]}")  # a request refused for room holds nothing
            yield f"finish {op[1]}", None, list(a.refs), a.num_free, count()
        elif kind == "match":
            found = do(tree.match, list(op[1]), what=f"match({op[1]})")
            pool(a.retain, found or [], f"match({op[1]}) returned {found}")  # held for the check, then given back
            pool(a.release, found or [], f"match({op[1]}) returned {found}")
            yield f"match({op[1]})", found, list(a.refs), a.num_free, count()
        else:
            evicted = do(tree.evict, op[1], what=f"evict({op[1]})", as_set=True)
            _settle(a, evicted)
            yield (
                f"evict({op[1]})",
                evicted,
                list(a.refs),
                a.num_free,
                count(),
            )


def _said(answer: str, part: str) -> str | None:
    """The part of a request's answer ("match ...; evict ...; insert -> ...") that starts with ``part``."""
    return next((x for x in answer.split("; ") if x.startswith(part)), None)


def _hint(what: str, want, got, w_refs, g_refs, w_free, g_free, w_ev, g_ev) -> tuple[str, str]:
    both = isinstance(want, str) and isinstance(got, str)
    if want == got and g_refs == w_refs and g_free == w_free and g_ev != w_ev:  # only the count differs
        return "num_evictable", (
            f"num_evictable() says {g_ev}, the tree can free {w_ev}: count the pages in the tree that only the "
            "tree holds (refs[p] == 1). In the engine a count too high makes it evict to make room and still find "
            "too few; too low, it refuses requests it has room for."
        )
    if what.startswith("match") or (both and want.split(";")[0] != got.split(";")[0]):
        return "match", (
            "match returns the pages of the longest prefix the tree holds: keep walking while the keys "
            "agree, into the middle of an edge too, and stop at the first key that differs. In the engine a match "
            "too long hands a request rows of tokens it does not have; one too short recomputes what was cached."
        )
    if both and _said(want, "insert -> ") != _said(got, "insert -> ") and _said(want, "evict ") == _said(got, "evict "):
        return "insert", (
            "insert returns one page per key: the tree's own page where it already holds that prefix "
            "(split an edge where the keys diverge inside it), the page given where it is new. In the engine "
            "a request that computed a cached prefix again would keep its own rows: the sharing is lost."
        )
    if what.startswith("evict") or "evict" in str(want) or "evict" in str(got):
        if g_free < w_free and (got == want or what.startswith("request")):
            return (
                "evict_leak",
                "evict must release each page it drops (allocator.release), so the page is free again. In the engine the pool fills with pages nobody holds, and admission stalls.",
            )
        direct = what.startswith("evict") and isinstance(got, list)  # an evict of its own, not a request's
        held = [p for p in got if 0 <= p < len(g_refs) and g_refs[p] > 0] if direct else []
        if held:
            return "evicted_held", (
                f"evict returned page {held[0]}, which a request still holds (its count was above 1; it is "
                f"{g_refs[held[0]]} after your release): evict takes only leaves whose pages only the tree holds "
                "(refs == 1), and a page a request holds stays in the tree. In the engine the request still "
                "reading those rows would find them handed to another."
            )
        n = int(what[len("evict(") : -1]) if direct else 0
        if direct and set(got) < set(want) and len(got) >= n:
            return "evict_part_of_leaf", (
                f"evict({n}) freed {got} where the reference frees {want}: evict frees whole leaves, never part "
                "of one. It removes the least recently used leaf whose pages only the tree holds and releases all "
                "its pages, and takes the next such leaf only while fewer than n pages are freed, so it may free "
                "more than n (SGLang's evict(1) frees a whole leaf). In the engine the cache would keep other "
                "prefixes than SGLang's, and evict more often."
            )
        if direct and set(got) < set(want) and g_ev and all(g_refs[p] == 1 for p in set(want) - set(got)):
            return "empty_leaf_kept", (
                f"evict({n}) freed {plural(len(got), 'page')} while your tree still counts {g_ev} it could free: "
                "a leaf evicted is removed from its parent, so the parent may become a leaf and be evicted next, "
                "in the same call, until at least n pages are freed. In the engine the cache would keep pages it "
                "could give back, and requests be refused for room the pool has."
            )
        return "eviction_order", (
            "evict takes the least recently used leaf first (smallest last_used; a tie, the older node) among "
            "the leaves whose pages only the tree holds (refs == 1), frees it whole, and goes on, leaf after "
            "leaf, until at least n pages are freed; a parent left without children may be the next leaf. In "
            "the engine the cache would keep what is least likely to be asked again: prompts recomputed."
        )
    if g_refs != w_refs:
        return "refcount", _refs_difference(w_refs, g_refs)
    if g_ev != w_ev:
        return "num_evictable", (
            "num_evictable counts the pages in the tree that only the tree holds (refs[p] == 1). In the engine "
            "a wrong count admits requests the pool cannot hold, or refuses ones it can."
        )
    if isinstance(want, str) and "insert" in want:
        return "insert", (
            "insert returns one page per key: the tree's own page where it already holds that prefix "
            "(split an edge where the keys diverge inside it), the page given where it is new."
        )
    return "wrong_answer", "compare with the rules in the stub's docstring."


def _refs_difference(w_refs: list[int], g_refs: list[int]) -> str:
    """Which pages' counts differ, which way, and what that means of insert's retains."""
    high = [p for p, (w, g) in enumerate(zip(w_refs, g_refs)) if g > w]
    low = [p for p, (w, g) in enumerate(zip(w_refs, g_refs)) if g < w]
    said = []
    if high:
        said.append(
            f"page{'s' if len(high) > 1 else ''} {', '.join(map(str, high))} counted too often (refs "
            f"{', '.join(str(g_refs[p]) for p in high)}, want {', '.join(str(w_refs[p]) for p in high)}): where the "
            "tree already holds the keys, insert returns its own page and retains nothing"
        )
    if low:
        said.append(
            f"page{'s' if len(low) > 1 else ''} {', '.join(map(str, low))} counted too seldom (refs "
            f"{', '.join(str(g_refs[p]) for p in low)}, want {', '.join(str(w_refs[p]) for p in low)}): insert "
            "retains (allocator.retain) each page the tree newly keeps, once, those of a new leaf below a leaf included"
        )
    engine = []
    if high:
        engine.append("a page counted too often is never freed")
    if low:
        engine.append("a page counted too seldom is freed while the tree still hands it out")
    return "; ".join(said) + f". In the engine {' and '.join(engine)}."


def _match_changes_tree(make: Callable) -> bool:
    """True when matching the same keys twice gives two answers: the learner's match extended a list the
    tree keeps (``pages = node.pages`` then ``pages += ...``) instead of a new one. False if it cannot tell."""
    try:
        a = EngineAllocator(16)
        tree = make(a)
        first = a.allocate(4)
        tree.insert([1, 2, 3, 4], list(first))
        tree.insert([1, 2, 7, 8], first[:2] + a.allocate(2))
        answers = [[int(p) for p in tree.match(k)] for k in ([1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 7, 8], [1, 2])]
    except Exception:  # judged already on the case that failed; here only a better hint is sought
        return False
    return answers[0] == first and answers[1:] != [first, answers[2], first[:2]]


def _match_keeps_clock(make: Callable) -> bool:
    """True when a match does not count as a use: of two leaves inserted in turn (the first the smaller,
    then the larger), evict takes the first one inserted whether or not a match walked it since (after a
    match the other one goes). False if it cannot tell."""
    try:
        for first, second in (([1, 2], [4, 5, 6]), ([1, 2, 3], [4, 5])):
            for touch in (False, True):
                a = EngineAllocator(8)
                tree = make(a)
                for keys in (first, second):
                    pages = a.allocate(len(keys))
                    tree.insert(keys, list(pages))
                    a.release(pages)  # the request finishes: only the tree holds them
                if touch:
                    tree.match(first)
                if sorted(int(p) for p in tree.evict(len(first))) != list(range(len(first))):
                    return False
    except Exception:  # judged already on the case that failed; here only a better hint is sought
        return False
    return True


def _evict_stops_after_one_leaf(make: Callable) -> bool:
    """True when evict frees one leaf per call: with [1, 2, 3] and [1, 2, 4] cached (an edge [1, 2] and two
    leaves), three calls of evict(3) free one leaf's pages each (1, 1, then the 2 of [1, 2], which became a
    leaf once both leaves were removed). False if it cannot tell."""
    try:
        a = EngineAllocator(8)
        tree = make(a)
        for keys in ([1, 2, 3], [1, 2, 4]):
            found = [int(p) for p in tree.match(keys)]
            a.retain(found)
            pages = found + a.allocate(len(keys) - len(found))
            tree.insert(keys, list(pages))
            a.release(pages)  # the request finishes: only the tree holds them
        freed = [sorted(int(p) for p in tree.evict(3)) for _ in range(3)]
    except Exception:  # judged already on the case that failed; here only a better hint is sought
        return False
    return [len(f) for f in freed] == [1, 1, 2] and sorted(sum(freed, [])) == [0, 1, 2, 3]


EVICT_ONE_LEAF = (
    "evict(n) stopped after one leaf: with [1, 2, 3] and [1, 2, 4] cached and nobody else holding them, each "
    "evict(3) of yours freed one leaf's pages (1, then 1, then the 2 of [1, 2]). Keep taking the least "
    "recently used leaf, whole (a parent left without children may be next), until at least n pages are "
    "freed or no leaf is left. In the engine a request would be refused for room the cache could have given back."
)


def _partial_match_keeps_clock(make: Callable) -> bool:
    """True when a match marks the edges it walks whole but not one it ends inside: of two leaves inserted
    in turn, after a match walking the first leaf's whole edge evict takes the other leaf, after a match
    ending inside it evict still takes the first. False if it cannot tell."""

    def evicted_after(touch: list[int]) -> list[int]:
        a = EngineAllocator(8)
        tree = make(a)
        for keys in ([1, 2, 3], [4, 5, 6]):
            pages = a.allocate(len(keys))
            tree.insert(keys, list(pages))
            a.release(pages)  # the request finishes: only the tree holds them
        tree.match(touch)
        return sorted(int(p) for p in tree.evict(3))

    try:
        return evicted_after([1, 2, 3]) == [3, 4, 5] and evicted_after([1, 2]) == [0, 1, 2]
    except Exception:  # judged already on the case that failed; here only a better hint is sought
        return False


MATCH_PARTIAL_CLOCK = (
    "with two leaves [1, 2, 3] and [4, 5, 6] inserted in turn, then match([1, 2]), your evict(3) took the "
    "leaf that match ended inside: your match marks the edges it walks whole (last_used = the clock) but not "
    "the last one, matched only in part (a match of [1, 2, 3] does mark it). Every node a match enters "
    "is used, an edge only partly matched included. In the engine the prefix a request just shared would be "
    "evicted first, and recomputed by the next request that asks."
)


def _evict_frees_held(make: Callable) -> list[int]:
    """The pages evict frees that a request still holds, with [1, 2, 3] cached and a request holding the
    pages of [1, 2] (it matched them): a match ending inside the edge splits it, so the reference frees only
    the page of [3]. [] when none is held, or if it cannot tell."""
    try:
        a = EngineAllocator(8)
        tree = make(a)
        pages = a.allocate(3)
        tree.insert([1, 2, 3], list(pages))
        a.release(pages)  # the request finishes: only the tree holds them
        a.retain([int(p) for p in tree.match([1, 2])])  # a new request holds the prefix it matched
        freed = {int(p) for p in tree.evict(3)}
        return sorted(p for p in freed if 0 <= p < a.num_pages and a.refs[p] > 0)
    except Exception:  # judged already on the case that failed; here only a better hint is sought
        return []


def _evict_held_hint(held: list[int]) -> str:
    return (
        f"with [1, 2, 3] cached (pages 0, 1, 2) and a request holding the pages of [1, 2] (it matched them), "
        f"your evict(3) freed page{'s' if len(held) > 1 else ''} {', '.join(map(str, held))}, which that request "
        "still holds (refs 2 before your release): a match ending inside an edge splits it there, and evict "
        "takes only leaves whose pages only the tree holds (refs == 1), so here only the page of [3] goes. In "
        "the engine the request still reading those rows would find them handed to another."
    )


MATCH_CLOCK = (
    "evict took a leaf a match had just walked: match must mark every node it walks as used (last_used = the "
    "clock, ticked once per match), as insert does; a match is a use. In the engine the prefix a request just "
    "asked for would be the first evicted, and recomputed by the next request that asks."
)


MATCH_REFERENCE = (
    "match changed the tree: matching the same keys twice gave two answers. Your match builds its answer "
    "in a list the tree keeps (pages = node.pages, then pages += ... extends the node's own edge); start "
    "from a new list (pages = []) and add copies. In the engine the next request would be handed pages of "
    "tokens it does not have, and read another request's rows."
)


def _probe_eviction(make: Callable, problem: str, hint: str) -> tuple[str, str]:
    """(problem, hint) for an evict that differs: a probe's finding where one finds the mistake behind it
    (held pages freed, a match that is not a use), after the case's own hint when that says another thing."""
    held = _evict_frees_held(make)
    if held:
        found = "evicted_held", _evict_held_hint(held)
    elif _match_keeps_clock(make):
        found = "match_clock", MATCH_CLOCK
    elif _partial_match_keeps_clock(make):
        found = "partial_match_clock", MATCH_PARTIAL_CLOCK
    else:
        return problem, hint
    return found[0], found[1] if problem == "eviction_order" else f"{hint} Besides: {found[1]}"


def mine_theirs(mine, theirs) -> tuple:
    """The rest of :func:`_hint`'s arguments from one op's two replays: got, refs, free and evictable counts."""
    return mine[1], theirs[2], mine[2], theirs[3], mine[3], theirs[4], mine[4]


def _first_difference(make: Callable, pages: int, ops: list):
    """(the ops before, mine, theirs) at the first op whose replays differ, or None (a refusal or an error
    of the learner's code is no difference here: the checker's own replay reports those)."""
    done = []
    try:
        for mine, theirs in zip(_run(make, pages, ops, learner=True), _run(_Engine, pages, ops, learner=False)):
            if mine[1:] != theirs[1:]:
                return done, mine, theirs
            done.append(mine[0])
    except Exception:  # ExerciseFailed included
        return None
    return None


def _shrunk(make: Callable, pages: int, ops: list, problem: str):
    """(pages, ops before, mine, theirs) of the smallest pool and fewest ops on which the tree still differs
    the same way (``problem``), or None where nothing smaller does."""

    def differs(case) -> bool:
        found = _first_difference(make, *case)
        return found is not None and _hint(found[1][0], found[2][1], *mine_theirs(found[1], found[2]))[0] == problem

    def smaller(case):
        n, xs = case
        yield from ((n, ys) for ys in without_each(xs))
        if n > 1:
            yield n - 1, xs

    small = smallest((pages, ops), smaller, differs, tries=300)
    if small == (pages, ops):
        return None
    done, mine, theirs = _first_difference(make, *small)
    return small[0], small[1][: len(done) + 1], done, mine, theirs


def _replayed(make: Callable, pages: int, ops: list, keys=None, *, learner: bool):
    """(tree, allocator) after ``ops`` replayed as :func:`_run` does, and a request's match of ``keys``."""
    keep: list = []
    for _ in _run(make, pages, ops, learner=learner, keep=keep):
        pass
    tree, allocator = keep
    if keys is not None:  # the match a request makes before its evict: the pages found are held
        allocator.retain(tree.match(list(keys)) or [])
    return tree, allocator


def _walk(root):
    """Each node under ``root`` (laid out as the stub's: ``children``, ``pages``) with its parent's pages."""
    stack = [(child, ()) for child in root.children.values()]
    while stack:
        node, above = stack.pop()
        yield node, above
        here = tuple(int(p) for p in node.pages)
        stack += [(child, here) for child in node.children.values()]


def _units(pages: int, ops: list, keys=None) -> list[tuple[int, int, list[int]]]:
    """What the engine's tree could evict after ``ops`` (and a request's match of ``keys``): per leaf,
    (last_used, id, its trailing pages only the tree holds), in the order evict takes them (least recently
    used first, a tie to the older node)."""
    tree, allocator = _replayed(_Engine, pages, ops, keys, learner=False)
    refs, out = allocator.refs, []
    for leaf in tree.tree.leaves:
        k = len(leaf.pages)
        while k and refs[leaf.pages[k - 1]] == 1:
            k -= 1
        if k < len(leaf.pages):
            out.append((leaf.last_used, leaf.id, [int(p) for p in leaf.pages[k:]]))
    return sorted(out)


def _evict_said(make: Callable, pages: int, ops: list, want, got, problem: str, hint: str) -> tuple[str, str]:
    """(problem, hint) for an ``evict(n)`` (the last of ``ops``) whose pages differ, from the engine's tree
    just before it: part of a leaf taken is said only where a leaf was taken in part; whole leaves taken in
    another order are named, with their clocks (a tie: the older node goes first)."""
    last = ops[-1]
    keys = last[2] if last[0] == "request" else None
    if keys is not None:  # the evict a request made room with: its pages, from the answers' "evict [...]"
        want, got = (_pages_said(x) for x in (want, got))
        if want is None or got is None:
            return problem, hint
    n = int(last[1]) if keys is None else len(want)
    call_said = f"evict({n})" if keys is None else f"the evict making room for request {last[1]}"
    split = _missing_split(make, pages, ops[:-1], keys)
    if split is not None:
        return "missing_split", f"{call_said} freed {got} where the reference frees {want}: {split}"
    units, got_set = _units(pages, ops[:-1], keys), set(got or [])
    if any(got_set & set(u[2]) and not set(u[2]) <= got_set for u in units):
        return problem, hint
    theirs, freed = [], 0
    for u in units:
        if freed >= n:
            break
        theirs.append(u)
        freed += len(u[2])
    mine = [u for u in units if u[2] and set(u[2]) <= got_set]
    skipped = next((u for u in theirs if u not in mine), None)
    took = next((u for u in mine if skipped is not None and u > skipped), None)  # taken though after it
    if skipped is None or took is None:
        return problem, hint
    clocks = _learner_clocks(make, pages, ops[:-1], [took[2][-1], skipped[2][-1]], keys)
    if took[0] == skipped[0] or (None not in clocks and clocks[0] == clocks[1] and took[1] > skipped[1]):
        at = clocks[0] if None not in clocks and clocks[0] == clocks[1] else took[0]
        return "eviction_tie", (
            f"{call_said} took the leaf of pages {took[2]} before the leaf of pages {skipped[2]}: both were last "
            f"used at the same clock ({at}{' in your tree' if at != took[0] else ''}), and a tie goes to the older "
            f"node, the one made first (the leaf of {skipped[2]}). Order leaves by (last_used, age), not last_used "
            "alone. In the engine the cache would evict other prefixes than SGLang's."
        )
    if None in clocks:
        yours = "your tree gives one of them another last_used, or compares them otherwise"
    elif clocks[0] == clocks[1]:  # tied in the learner's tree and broken to the older: its clocks are off
        yours = (
            f"in your tree both were last used at {clocks[0]}, a tie, broken to the older node as it should be; "
            f"but they are no tie: the leaf of {skipped[2]} was used before the leaf of {took[2]} was last, so "
            "an operation did not give the clock to the nodes it entered (every match and insert ticks the clock "
            "once and gives it to each node it enters)"
        )
    elif clocks[0] < clocks[1]:
        yours = f"your tree gives them {clocks[0]} and {clocks[1]}: the other way round, so its last_used differs"
    else:
        yours = f"your tree gives them {clocks[0]} and {clocks[1]}, the same order, yet took the more recent"
    return "eviction_order", (
        f"{call_said} took the leaf of pages {took[2]} (last used at clock {took[0]} in the engine's tree) before "
        f"the leaf of pages {skipped[2]} (last used at {skipped[0]}, earlier); {yours}. Every node a match or an "
        "insert enters gets last_used = the clock, both halves of an edge it splits included; evict takes the "
        "smallest first, a tie the older node. In the engine the cache would keep what is least likely to be "
        "asked again."
    )


def _missing_split(make: Callable, pages: int, ops: list, keys=None) -> str | None:
    """Where the learner's tree after ``ops`` (and a request's match of ``keys``) keeps in one node pages the
    engine's tree holds in a parent and its child: the split it did not make and the operation that made it
    in the engine's; None where the learner's nodes are laid out otherwise or no split is missing."""
    try:
        mine = _nodes(make, pages, ops, keys, learner=True)
    except Exception:  # a tree of another layout: no nodes to compare
        return None
    theirs = _nodes(_Engine, pages, ops, keys, learner=False)
    where = {p: node for node in mine for p in node}
    for parent, child in theirs:
        node = where.get(child[0])
        if parent and node is not None and parent[-1] in node:
            k = next(
                (
                    i
                    for i in range(1, len(ops) + 1)
                    if (parent, child) in _nodes(_Engine, pages, ops[:i], None, learner=False)
                ),
                None,
            )
            op = ops[k - 1] if k else ("match", keys)
            said = f"{op[0]} {op[1]} {op[2]}" if op[0] in ("request", "compute") else f"{op[0]}({op[1]})"
            how = (
                "a match that stops inside an edge splits it there"
                if op[0] in ("request", "match")
                else "an insert whose keys part from an edge inside it splits it there"
            )
            return (
                f"your tree keeps pages {list(node)} in one node where the engine's tree holds {parent} and {child} "
                f"apart since {said}: {how}, so evict can free {child} alone. In the engine a prefix a request "
                "just matched would be evicted with the rest of its edge."
            )
    return None


def _nodes(make: Callable, pages: int, ops: list, keys, *, learner: bool) -> list:
    """The tree's nodes after ``ops`` (and a match of ``keys``): for the engine's, (parent's pages, pages) per
    node as tuples; for the learner's (laid out as the stub's), each node's pages as a tuple."""
    tree, _ = _replayed(make, pages, ops, keys, learner=learner)
    out = []
    for node, above in _walk(tree.root if learner else tree.tree.root):
        here = tuple(int(p) for p in node.pages)
        out.append(here if learner else (above, here))
    return out


def _pages_said(answer) -> list[int] | None:
    """The pages of the "evict [...]" part of a request's answer, or None."""
    said = _said(answer, "evict ") if isinstance(answer, str) else None
    if said is None:
        return None
    return [int(p) for p in said[len("evict [") : -1].split(",") if p.strip()]


def _learner_clocks(make: Callable, pages: int, ops: list, of: list[int], keys=None) -> list[int | None]:
    """The learner's ``last_used`` of the nodes holding each page of ``of`` after ``ops`` (and a request's
    match of ``keys``), read where its nodes are laid out as the stub's (``root``, ``children``, ``pages``,
    ``last_used``); None elsewhere."""
    try:
        tree, _ = _replayed(make, pages, ops, keys, learner=True)
        found = {int(p): int(node.last_used) for node, _ in _walk(tree.root) for p in node.pages}
    except Exception:  # another layout, or a tree that fails on these ops: no clocks to show
        return [None for _ in of]
    return [found.get(p) for p in of]


def check(make: Callable) -> object:
    """Replay table cases and random runs on ``make`` (the learner's class) and the engine's radix tree.

    Raises :class:`~ropepool.teaching.feedback.ExerciseFailed` naming the first operation whose answer,
    reference counts, free pages or evictable count differ, with the operations before it.
    """
    __tracebackhide__ = True  # a failing check shows the learner's frames, not the checker's
    table, runs = cases(), workload()
    for name, pages, ops in table + runs:
        done = []
        with showing(lambda: f"a pool of {pages} pages; {'; '.join(done[-5:]) or 'an empty tree'}"):
            for mine, theirs in zip(_run(make, pages, ops, learner=True), _run(_Engine, pages, ops, learner=False)):
                what, got, g_refs, g_free, g_ev = mine
                _, want, w_refs, w_free, w_ev = theirs
                if (got, g_refs, g_free, g_ev) != (want, w_refs, w_free, w_ev):
                    case_ops = ops[: len(done) + 1]
                    small = _shrunk(make, pages, case_ops, _hint(what, want, *mine_theirs(mine, theirs))[0])
                    if small is not None:
                        name = f"{name}, made smallest (the fewest operations on which your tree still differs)"
                        pages, case_ops, done, mine, theirs = small
                        what, got, g_refs, g_free, g_ev = mine
                        _, want, w_refs, w_free, w_ev = theirs
                    problem, hint = _hint(what, want, got, w_refs, g_refs, w_free, g_free, w_ev, g_ev)
                    if problem in ("evict_part_of_leaf", "eviction_order") and case_ops[-1][0] in ("evict", "request"):
                        problem, hint = _evict_said(make, pages, case_ops, want, got, problem, hint)
                    if problem in ("match", "insert", "refcount", "wrong_answer") and _match_changes_tree(make):
                        problem, hint = "match_reference", MATCH_REFERENCE
                    if problem == "empty_leaf_kept" and _evict_stops_after_one_leaf(make):
                        problem, hint = "evict_one_leaf", EVICT_ONE_LEAF
                    elif problem in ("eviction_order", "evict_part_of_leaf"):
                        problem, hint = _probe_eviction(make, problem, hint)
                    shown = len(done) if small is not None and len(done) <= 12 else 5  # a shrunk case whole, to replay
                    given = history(f"a pool of {pages} pages; ", done, shown, "an empty tree", " (and before)", what)
                    expected = f"{want} (refs {w_refs}, {w_free} free, {w_ev} evictable)"
                    raise wrong_case(
                        PART,
                        problem,
                        name,
                        given,
                        expected,
                        f"{got} (refs {g_refs}, {g_free} free, {g_ev} evictable)",
                        hint,
                    )
                done.append(what)
    return passed(
        PART,
        f"PrefixTree answers as the engine's radix tree on {len(table)} table cases and {len(runs)} "
        "random runs: same pages matched, inserted and evicted, same reference counts.",
    )
