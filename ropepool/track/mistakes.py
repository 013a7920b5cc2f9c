"""Wrong parts, one mistake each: what the notebooks break on purpose and what the tests prove each checker names.

Each is the reference part (:mod:`.solutions`) with one thing changed: where that is a line of its
source, the mistake is a stub under :func:`edit_of`, which names the reference and the edit. :data:`BY_PART`
maps a part to ``{problem code the checker must name: the wrong part}``, the mistakes notebooks 12-14 also
serve; the few outside it (found by a checker's probe, not shown served) are named in the tests.
"""

from __future__ import annotations

import inspect
import linecache
import textwrap

import numpy as np

from . import solutions as S


def edit_of(part, *edits: tuple[str, str]):
    """A decorator: the function it decorates (a signature and a docstring: its body is never run) becomes
    ``part``, a reference function or method of :mod:`.solutions`, with each ``(old, new)`` text of its
    source replaced (``old`` must stand once).

    The edited source is compiled beside a copy of :mod:`.solutions`' globals (the module is not changed)
    and registered with :mod:`linecache` under a file name of its own inside this package: tracebacks and
    ``inspect`` show its lines, and the checkers do not take them for the learner's. A method is compiled
    outside its class, so it must not use zero-argument ``super()`` or private (``__x``) names.
    """
    source = textwrap.dedent(inspect.getsource(part))
    for old, new in edits:
        if source.count(old) != 1:
            raise ValueError(f"{old!r} stands {source.count(old)} times in {part.__qualname__}, not once")
        source = source.replace(old, new)

    def make(stub):
        if inspect.signature(stub) != inspect.signature(part):
            raise TypeError(f"{stub.__qualname__}{inspect.signature(stub)} is not {part.__qualname__}'s signature")
        filename = f"{__file__}:{stub.__qualname__} (edited)"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        namespace = dict(vars(S))
        exec(compile(source, filename, "exec"), namespace)
        fn = namespace[part.__name__]
        fn.__name__, fn.__qualname__, fn.__module__ = stub.__name__, stub.__qualname__, stub.__module__
        fn.__doc__ = stub.__doc__
        return fn

    return make


# --- Part 1: rotate ---------------------------------------------------------------------------------


def rotate_pairs_swapped(x, positions, inv_freq, is_neox):
    return S.rotate(x, positions, inv_freq, not is_neox)


def rotate_token_index(x, positions, inv_freq, is_neox):
    return S.rotate(x, np.arange(len(positions)), inv_freq, is_neox)


def rotate_one_late(x, positions, inv_freq, is_neox):
    return S.rotate(x, np.asarray(positions) + 1, inv_freq, is_neox)


def rotate_backwards(x, positions, inv_freq, is_neox):
    return S.rotate(x, positions, -np.asarray(inv_freq, np.float64), is_neox)


# --- Part 2: the allocator ---------------------------------------------------------------------------


class AllocatorLeak(S.Allocator):
    """Pages that come free are counted free but never queued again."""

    def release(self, pages):
        freed = super().release(pages)
        for _ in freed:
            self.free.pop()
        return freed


class AllocatorNoDoubleFreeError(S.Allocator):
    """Releasing a free page is ignored instead of refused."""

    def release(self, pages):
        return super().release([p for p in pages if 0 <= p < len(self.refs) and self.refs[p] > 0])


class AllocatorNegativePages(S.Allocator):
    """Checks only p < num_pages: a negative page is Python's index from the end, the last pages."""

    def release(self, pages):
        return super().release([p % len(self.refs) if p < 0 else p for p in pages])  # refs[-1]: the last page


class AllocatorStack(S.Allocator):
    """The free list used as a stack: the most recently freed page is handed out first."""

    @edit_of(S.Allocator.allocate, ("self.free.popleft()", "self.free.pop()"))
    def allocate(self, n): ...


class AllocatorOffByOne(S.Allocator):
    """Refuses to hand out the last free page (n >= free instead of n > free)."""

    def allocate(self, n):
        if n and n >= len(self.free):
            raise ValueError(f"allocate({n}): only {len(self.free)} pages are free")
        return super().allocate(n)


class AllocatorFreesTooSoon(S.Allocator):
    """A release frees the page whatever its count."""

    def release(self, pages):
        for p in pages:
            if not 0 <= p < len(self.refs) or self.refs[p] == 0:
                raise ValueError(f"release: page {p} is not held")
        freed = []
        for p in pages:
            if self.refs[p]:
                self.refs[p] = 0
                freed.append(p)
        self.free.extend(freed)
        return freed


class AllocatorFreesListedTwice(S.Allocator):
    """A page listed twice in one release (held twice) is returned and queued twice: freed is found after the loop."""

    @edit_of(
        S.Allocator.release,
        ("freed.append(p)", "pass"),
        ("self.free.extend(freed)", "freed = [p for p in pages if self.refs[p] == 0]\n    self.free.extend(freed)"),
    )
    def release(self, pages): ...


# --- Part 3: the slot mapping ------------------------------------------------------------------------


def slots_from_start(requests, page_size):
    positions, _ = S.slot_mapping(requests, page_size)
    return positions, S.slot_mapping([dict(r, cached=0) for r in requests], page_size)[1]


def slots_page_not_scaled(requests, page_size):
    positions, slots = [], []
    for r in requests:
        for p in range(r["cached"], r["cached"] + r["new"]):
            positions.append(p)
            slots.append(r["pages"][p // page_size] + p % page_size)
    return positions, slots


def slots_positions_from_zero(requests, page_size):
    _, slots = S.slot_mapping(requests, page_size)
    return [i for r in requests for i in range(r["new"])], slots


def slots_offset_in_chunk(requests, page_size):
    positions, slots = [], []
    for r in requests:
        for i, p in enumerate(range(r["cached"], r["cached"] + r["new"])):
            positions.append(p)
            slots.append(r["pages"][p // page_size] * page_size + i % page_size)
    return positions, slots


# --- Part 4: the prefix tree -------------------------------------------------------------------------


class TreeEvictsNewest(S.PrefixTree):
    """Evicts the most recently used leaf first."""

    @edit_of(S.PrefixTree.evict, ("leaf = min(", "leaf = max("))
    def evict(self, n): ...


class TreeEvictLeak(S.PrefixTree):
    """Drops evicted pages from the tree without releasing them: they never come free."""

    def evict(self, n):
        release, self.allocator.release = self.allocator.release, lambda pages: list(pages)
        try:
            return super().evict(n)
        finally:
            self.allocator.release = release


class TreeRetainsAgain(S.PrefixTree):
    """Retains the tree's own pages again on every insert that passes them."""

    def insert(self, keys, pages):
        before = self.match(keys)
        self.clock -= 1  # the match above was not the caller's
        out = super().insert(keys, pages)
        self.allocator.retain(before)
        return out


class TreeNoPartialMatch(S.PrefixTree):
    """match stops before an edge that agrees only in part: it never finds a prefix ending inside an edge."""

    @edit_of(S.PrefixTree.match, ("pages += node.pages[:n]", "pages += node.pages if n == len(node.keys) else []"))
    def match(self, keys): ...


class TreeMatchSharesList(S.PrefixTree):
    """match builds its answer in the root's own list (``pages = self.root.pages``): each match extends it."""

    def match(self, keys):
        pages = self.root.pages  # the root's own list, extended in place
        pages += super().match(keys)
        return pages


class TreeMatchesWholeEdges(S.PrefixTree):
    """match takes a whole edge once its first key agrees: rows of tokens the request does not have."""

    @edit_of(S.PrefixTree.match, ("pages += node.pages[:n]", "pages += node.pages[: len(keys) - i]"))
    def match(self, keys): ...


class TreePartialMatchKeepsClock(S.PrefixTree):
    """match marks the edges it walks whole as used, but not the last one when it ends inside it."""

    @edit_of(
        S.PrefixTree.match,
        (
            "node.last_used = self.clock",
            "node.last_used = self.clock if _common(node.keys, keys[i:]) == len(node.keys) else node.last_used",
        ),
    )
    def match(self, keys): ...


class TreeEvictsOneLeaf(S.PrefixTree):
    """evict(n) frees the pages of one leaf at most, however many n asks for."""

    @edit_of(S.PrefixTree.evict, ("while len(freed) < n:", "for _once in range(1):"))
    def evict(self, n): ...


class TreeEvictsLeafTails(S.PrefixTree):
    """evict(n) frees exactly n pages, cut from the least recently used leaf's end, not whole leaves."""

    def evict(self, n):
        refs, freed = self.allocator.refs, []
        while len(freed) < n:
            leaves = [x for x in self._nodes() if not x.children and refs[x.pages[-1]] == 1]
            if not leaves:
                break
            leaf = min(leaves, key=lambda x: (x.last_used, x.order))
            first = leaf.keys[0]
            while leaf.pages and refs[leaf.pages[-1]] == 1 and len(freed) < n:
                leaf.keys.pop()
                freed += self.allocator.release([leaf.pages.pop()])
            if not leaf.pages:
                del leaf.parent.children[first]
        return freed


class TreeMatchDoesNotSplit(S.PrefixTree):
    """match returns the right pages but leaves the edge it stops inside whole: evict takes all of it later."""

    @edit_of(S.PrefixTree.match, ("self._split(node, n)", "pass"))
    def match(self, keys): ...


class TreeEvictsTiesNewest(S.PrefixTree):
    """Orders leaves by last_used alone: of two leaves used at the same clock, the newer may go first."""

    @edit_of(S.PrefixTree.evict, ("key=lambda x: (x.last_used, x.order)", "key=lambda x: (x.last_used, -x.order)"))
    def evict(self, n): ...


# --- Part 5: the scheduler's step --------------------------------------------------------------------


@edit_of(S.schedule_step, ("victim = alive.pop()", "victim = alive.pop(0)"))
def plan_preempts_oldest(running, waiting, max_step_tokens, free_rows):
    """Preempts the oldest running request instead of the newest."""


@edit_of(
    S.schedule_step,
    ('n = min(r["uncached"], budget)', 'n = r["uncached"] if r["uncached"] <= budget else 0'),
    ('if w["tokens"] <= free_rows:', 'if w["tokens"] <= min(free_rows, budget):'),
)
def plan_no_chunks(running, waiting, max_step_tokens, free_rows):
    """A prompt longer than the budget left waits for a step with room for all of it."""


def plan_over_budget(running, waiting, max_step_tokens, free_rows):
    """Each request runs all its uncached tokens, whatever the budget."""
    run, preempted = S.schedule_step(running, waiting, max_step_tokens, free_rows)
    size = {r["rid"]: r["uncached"] for r in running} | {w["rid"]: w["tokens"] for w in waiting}
    return [(rid, size[rid]) for rid, _ in run], preempted


@edit_of(S.schedule_step, ("if budget == 0 or preempted:", 'if budget == 0 or preempted or w["tokens"] > free_rows:'))
def plan_blocked_queue(running, waiting, max_step_tokens, free_rows):
    """A waiting request that does not fit stops the queue: the ones behind it wait too."""


@edit_of(S.schedule_step, ("if budget == 0 or preempted:", "if budget == 0:"))
def plan_admits_after_preemption(running, waiting, max_step_tokens, free_rows):
    """Admits waiting requests in a step that preempted: the preempted may be readmitted at once."""


def plan_ignores_spare(running, waiting, max_step_tokens, free_rows):
    """Each running request's n tokens counted as n new rows, the rows it holds unwritten (spare) ignored."""
    return S.schedule_step([dict(r, spare=0) for r in running], waiting, max_step_tokens, free_rows)


def plan_waiting_first(running, waiting, max_step_tokens, free_rows):
    run, preempted = S.schedule_step(running, waiting, max_step_tokens, free_rows)
    ids = {r["rid"] for r in running}
    return [x for x in run if x[0] not in ids] + [x for x in run if x[0] in ids], preempted


# --- Part 6: the e4m3 encoder ------------------------------------------------------------------------


def encode_nan_as_448(x):
    codes = S.encode_e4m3(x)
    return np.where(np.isnan(np.asarray(x, np.float32)), 0x7E | (codes & 0x80), codes).astype(np.uint8)


def encode_no_saturation(x):
    x = np.asarray(x, np.float32)
    codes = S.encode_e4m3(x)
    return np.where(np.abs(x) > 464, 0x7F | (codes & 0x80), codes).astype(np.uint8)


def encode_ties_away(x):
    x = np.asarray(x, np.float32)
    nudged = np.nextafter(x, np.copysign(np.float32(np.inf), x))  # a tie now lies just past halfway
    return S.encode_e4m3(np.where(np.isfinite(x) & (x != 0), nudged, x))


def encode_truncates(x):
    x = np.asarray(x, np.float32)
    from ..fp8 import decode_table

    values = decode_table()[:0x7F].astype(np.float64)
    with np.errstate(invalid="ignore"):
        mag = np.minimum(np.abs(x.astype(np.float64)), 448.0)
        code = np.clip(np.searchsorted(values, mag, side="right") - 1, 0, 0x7E)
    code = code | (np.signbit(x).astype(np.int64) << 7)
    return np.where(np.isnan(x), 0x7F, code).astype(np.uint8)  # NaN of either sign: 0x7F


def encode_through_float16(x):
    """Rounded to float16 first, then to e4m3: a double rounding."""
    with np.errstate(over="ignore"):
        return S.encode_e4m3(np.asarray(x, np.float32).astype(np.float16).astype(np.float32))


def encode_fnuz_240(x):
    """Saturates at 240, as AMD's e4m3fnuz does."""
    x = np.asarray(x, np.float32)
    return S.encode_e4m3(np.clip(x, np.float32(-240), np.float32(240)))


def encode_two_mantissa_bits(x):
    """Rounds to 4 steps per power of two (two mantissa bits) instead of 8."""
    x = np.asarray(x, np.float32)
    from ..fp8 import decode_table

    with np.errstate(invalid="ignore"):
        mag = np.minimum(np.abs(x.astype(np.float64)), 448.0)
        _, e = np.frexp(mag)
        step = np.where(mag < 2.0**-6, 2.0**-9, np.ldexp(1.0, e - 3))
        on = np.minimum(np.where(np.isnan(x), 0.0, np.rint(mag / step) * step), 448.0)
    code = np.searchsorted(decode_table()[:0x7F], on) | (np.signbit(x).astype(np.int64) << 7)
    return np.where(np.isnan(x), 0x7F, code).astype(np.uint8)


def encode_sign_last(x):
    """The sign put back after NaN's code: a negative NaN gets 0xFF (np.signbit is True for it)."""
    x = np.asarray(x, np.float32)
    return (S.encode_e4m3(np.abs(x)) | (np.signbit(x).astype(np.uint8) << 7)).astype(np.uint8)


def encode_sign_dropped(x):
    return (S.encode_e4m3(np.abs(np.asarray(x, np.float32)))).astype(np.uint8)


def encode_flushes_subnormals(x):
    x = np.asarray(x, np.float32)
    return np.where(np.abs(x) < 2.0**-6, np.signbit(x).astype(np.uint8) << 7, S.encode_e4m3(x)).astype(np.uint8)


BY_PART = {
    1: {
        "pairs_swapped": rotate_pairs_swapped,
        "token_index": rotate_token_index,
        "position_off_by_one": rotate_one_late,
        "rotation_sign": rotate_backwards,
    },
    2: {
        "leak": AllocatorLeak,
        "no_double_free_error": AllocatorNoDoubleFreeError,
        "wrong_order": AllocatorStack,
        "off_by_one": AllocatorOffByOne,
        "refcount": AllocatorFreesTooSoon,
        "outside_pool": AllocatorNegativePages,
        "freed_twice": AllocatorFreesListedTwice,
    },
    3: {
        "from_start": slots_from_start,
        "page_not_scaled": slots_page_not_scaled,
        "positions_from_zero": slots_positions_from_zero,
        "offset_in_chunk": slots_offset_in_chunk,
    },
    4: {
        "eviction_order": TreeEvictsNewest,
        "evict_leak": TreeEvictLeak,
        "refcount": TreeRetainsAgain,
        "match": TreeNoPartialMatch,
        "match_reference": TreeMatchSharesList,
        "evict_part_of_leaf": TreeEvictsLeafTails,
        "eviction_tie": TreeEvictsTiesNewest,
        "missing_split": TreeMatchDoesNotSplit,
    },
    5: {
        "wrong_victim": plan_preempts_oldest,
        "no_chunking": plan_no_chunks,
        "over_budget": plan_over_budget,
        "blocked_queue": plan_blocked_queue,
        "admitted_after_preemption": plan_admits_after_preemption,
        "waiting_first": plan_waiting_first,
        "ignores_spare": plan_ignores_spare,
    },
    6: {
        "nan_lost": encode_nan_as_448,
        "no_saturation": encode_no_saturation,
        "tie_not_even": encode_ties_away,
        "truncates": encode_truncates,
        "sign": encode_sign_dropped,
        "subnormals_flushed": encode_flushes_subnormals,
        "float16_first": encode_through_float16,
        "fnuz_240": encode_fnuz_240,
        "two_mantissa_bits": encode_two_mantissa_bits,
        "nan_sign": encode_sign_last,
    },
}
