"""A recorded run: each step's decision and what it changed, read from the step's undo records.

:func:`record` attaches a :class:`Recording` to an :class:`~.generate.Engine` (:meth:`Engine.watch`).
It reads the engine's books once, in full (:func:`snapshot`: every page's reference count, the
requests, the queues, the prefix tree, the sliding-window rings); then, after every step that
commits, it keeps the step's decision (:class:`Decision`: who ran, chunk sizes, admissions,
preemptions, finished, rows written, rows evicted) and what changed (:class:`Change`), found from the
step's undo log (:mod:`.journal`): the pages, requests and tree nodes the log names, read again, and
of a slot table or an edge only what was appended, with the queues' request ids. A step's record
costs what the step changed and the queues' length, not the pool's size. A failed step is undone and leaves no record.

Where a part keeps no undo log, or logs changes of its own kind (a part of your own,
:mod:`.protocols`), the record is a full :func:`snapshot` instead, marked as such.

A step the recording missed (the recorder cut short by a Ctrl-C or an error of its own) is never
skipped silently: :attr:`Recording.missed` names it, as it names steps the engine committed after the
last one recorded, and the next step recorded is a full :func:`snapshot`, so that the books replay
right again from there. A recording with a step missed is no exact replay of the run
(:attr:`Recording.complete`).

:meth:`Recording.states` replays the records: the engine's books after step 0 (before the first), 1,
2, ...; the state after step ``k`` equals :func:`snapshot` of a fresh engine given the same requests
and stopped after ``k`` steps (tests/test_recording.py).
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field

from .allocator import Allocator
from .radix import NoCache, RadixCache
from .request import Request
from .runner import Runner
from .scheduler import Scheduler
from .window import Rings


@dataclass
class RequestView:
    """One request's books: ``slot_table[p]`` is the pool row of position ``p``; ``tokens`` its new token ids."""

    rid: int
    prompt: list[int]
    max_new_tokens: int
    status: str  # "waiting", "running", "finished"
    slot_table: list[int]
    num_cached: int
    tokens: list[int]


@dataclass
class NodeView:
    """A prefix-tree node: the edge's ``tokens`` (``page_size`` per page), its ``pages``, its parent (0: the root)."""

    id: int
    parent: int
    tokens: list[int]
    pages: list[int]
    last_used: int


@dataclass
class State:
    """The engine's books between two steps.

    refs : list of int ``[P / page_size]``  holders of each page (requests, and the tree)
    requests : rid -> RequestView        every request seen so far, finished ones with their last books
    waiting, running : list of rid       the queues, in order
    nodes : id -> NodeView               the prefix tree (empty without one)
    clock : int                          the tree's clock (``last_used`` counts in it)
    rings : rid -> list of int           each request's sliding-window ring rows (only with rings)
    ring_rows : int                      rows of the rings' pool
    """

    step: int
    pool_rows: int
    page_size: int
    refs: list[int]
    requests: dict[int, RequestView]
    waiting: list[int]
    running: list[int]
    nodes: dict[int, NodeView] = field(default_factory=dict)
    clock: int = 0
    rings: dict[int, list[int]] = field(default_factory=dict)
    ring_rows: int = 0

    def row_owners(self) -> list[list[int]]:
        """``[P]``: the running requests whose slot tables hold each row (two or more: a shared prefix)."""
        owners: list[list[int]] = [[] for _ in range(self.pool_rows)]
        for rid in self.running:
            for row in set(self.requests[rid].slot_table):
                owners[row].append(rid)
        return owners

    def row_states(self) -> list[str]:
        """``[P]``: "free" (no holder), "used" (a running request holds it), "cached" (only the tree holds it)."""
        owners, ps = self.row_owners(), self.page_size
        return ["free" if not self.refs[r // ps] else "used" if owners[r] else "cached" for r in range(self.pool_rows)]


@dataclass
class Settings:
    """What the recorded engine was made with: the prefix cache on or off, the step's token budget, the
    sliding window of its rings (None: no rings), and what one pool row holds in each layer: ``row``, its
    parts as ``(name, heads, values per head)``: k and v ``[Hkv, D]`` each, or MLA's latent c_kv ``[1, R]``
    and k_pe ``[1, rd]`` (empty: not known)."""

    prefix_cache: bool
    max_step_tokens: int | None
    window: int | None
    row: tuple = ()


def row_parts(spec) -> tuple:
    """What one pool row holds in each layer of the model ``spec`` (:class:`.model_spec.ModelSpec`) describes:
    ``(name, heads, values per head)`` per part."""
    if spec.mla is not None:
        return (("c_kv", 1, spec.mla.kv_lora_rank), ("k_pe", 1, spec.mla.rope_dim))
    return (("k", spec.kv_heads, spec.head_dim), ("v", spec.kv_heads, spec.head_dim))


@dataclass
class Decision:
    """What one step did (rids, and ``[T]`` rows for ``written``).

    step : int             the step's number, from 1
    ran, lengths : list    the requests in the batch, in order, and each one's new tokens
    starts : list of int   each one's first position this step (0 < start < prompt: a later chunk)
    admitted, preempted, finished : list of rid
    written : list of int  the rows the step wrote (``Batch.slots``)
    evicted : list of int  rows the prefix tree gave back this step
    shared : rid -> int    rows an admitted request found in the tree
    """

    step: int
    ran: list[int]
    lengths: list[int]
    starts: list[int]
    admitted: list[int]
    preempted: list[int]
    finished: list[int]
    written: list[int]
    evicted: list[int]
    shared: dict[int, int]


@dataclass
class Change:
    """What a step changed: only what its undo records name (or, ``full``, the whole books when it cannot tell).

    pages : page -> reference count
    requests : rid -> (status, num_cached, table, edits, tokens) where ``table`` and ``tokens`` are
        ``(start, values)``: the list from ``start`` on (0: all of it); ``edits``: ``(start, values)``
        overwritten in place; a new request is a whole :class:`RequestView` instead
    nodes : id -> NodeView, or ``(length, tokens, pages, last_used)`` (an edge grown from ``length`` pages),
        or an int (only ``last_used``)
    gone : ids of nodes no longer in the tree
    """

    pages: dict[int, int] = field(default_factory=dict)
    requests: dict[int, object] = field(default_factory=dict)
    waiting: list[int] = field(default_factory=list)
    running: list[int] = field(default_factory=list)
    nodes: dict[int, object] = field(default_factory=dict)
    gone: list[int] = field(default_factory=list)
    clock: int = 0
    rings: dict[int, list[int] | None] = field(default_factory=dict)
    ring_rows: int = 0
    full: State | None = None


def _status(req) -> str:
    return getattr(req.status, "value", str(req.status))


def request_view(req) -> RequestView:
    return RequestView(
        req.rid,
        list(req.prompt),
        req.max_new_tokens,
        _status(req),
        list(req.slot_table),
        req.num_cached,
        list(req.tokens),
    )


def node_view(node) -> NodeView:
    parent = node.parent
    return NodeView(
        node.id,
        0 if parent is None else parent.id,
        [t for page in node.key for t in page],
        list(node.pages),
        node.last_used,
    )


def snapshot(engine, requests=None, step: int | None = None) -> State:
    """The engine's books read in full: O(the pool and the tree). ``requests``: those to include (default: the
    ones the engine still holds, :attr:`Engine.requests`)."""
    a, s = engine.allocator, engine.scheduler
    refs = a.refs  # a list, or any mapping page -> holders (a part of one's own)
    if isinstance(refs, Mapping):
        refs = {p: refs.get(p, 0) for p in range(a.num_pages)}
    refs = [int(refs[p]) for p in range(a.num_pages)]
    reqs = engine.requests if requests is None else requests
    cache = s.cache
    if isinstance(cache, RadixCache):
        nodes = {n.id: node_view(n) for n in cache.nodes()}
    else:  # a plugged tree draws itself, where it can (ropepool.track.tree.Cached)
        nodes = cache.node_views() if hasattr(cache, "node_views") else {}
    rings = getattr(engine.runner, "rings", None)
    return State(
        step=engine.steps if step is None else step,
        pool_rows=a.pool_rows,
        page_size=a.page_size,
        refs=refs,
        requests={r.rid: request_view(r) for r in reqs},
        waiting=[r.rid for r in s.waiting],
        running=[r.rid for r in s.running],
        nodes=nodes,
        clock=getattr(cache, "clock", 0),
        rings={} if rings is None else {rid: rows.tolist() for rid, (_, rows) in rings.rings.items()},
        ring_rows=0 if rings is None else rings.capacity,
    )


#: Undo records that change nothing a recording shows (statistics, counters, the pool's contents).
_SILENT = {
    RadixCache._set_leaf,
    RadixCache._add_evictable,
    Scheduler._put_stats,
}


class Recording:
    """The start of a run (:func:`snapshot`), the engine's :class:`Settings`, and per committed step a
    :class:`Decision` and a :class:`Change`."""

    def __init__(self, engine):
        self.start = snapshot(engine, requests=list(engine.scheduler.waiting) + list(engine.scheduler.running))
        self.decisions: list[Decision] = []
        self.changes: list[Change] = []
        rings = getattr(engine.runner, "rings", None)
        self.settings = Settings(
            prefix_cache=bool(getattr(engine.scheduler.cache, "enabled", True)),
            max_step_tokens=getattr(engine.scheduler, "max_step_tokens", None),
            window=None if rings is None else rings.window,
            row=row_parts(engine.runner.spec),
        )
        self._known = set(self.start.requests)
        own = (
            type(engine.allocator) is Allocator
            and type(engine.scheduler) is Scheduler
            and type(engine.scheduler.cache) in (RadixCache, NoCache)
        )
        self.journaled = own  # False: every step is recorded as a full snapshot
        self._engine = weakref.ref(engine)
        self._seen = self.start.step  # the latest step this recording was called for

    def __len__(self) -> int:
        return len(self.decisions)

    @property
    def missed(self) -> list[int]:
        """The steps the engine committed that this recording does not hold (those after the last one recorded
        too, while the engine lives)."""
        engine = self._engine()
        last = max(self._seen, engine.steps if engine is not None else 0)
        recorded = {d.step for d in self.decisions}
        return [k for k in range(self.start.step + 1, last + 1) if k not in recorded]

    @property
    def complete(self) -> bool:
        """True when every step committed since recording began is recorded: the replay is the run's."""
        return not self.missed

    def __call__(self, engine, batch, records) -> None:
        """The engine's watcher: keep the step just committed (in full after a step missed)."""
        step, kept = engine.steps, len(self.decisions)
        self._seen = max(self._seen, step)
        try:
            self._keep(engine, batch, records)
        except BaseException:  # cut short: no half record (the step shows in missed)
            del self.decisions[kept:], self.changes[kept:]
            raise

    def _keep(self, engine, batch, records) -> None:
        evicted: list[int] = []
        previous = self.decisions[-1].step if self.decisions else self.start.step
        follows = previous == engine.steps - 1  # else a step was missed: its changes are not in these records
        change = self._read(engine, batch, records, evicted) if self.journaled and follows else None
        if change is None:
            before = self._before()
            change = Change(full=snapshot(engine, requests=self._requests(engine, batch)))
            for rid, view in before.requests.items():  # finished before, let go by the caller: kept as they ended
                change.full.requests.setdefault(rid, copy.deepcopy(view))
            evicted = _evicted(batch, before)
        for rid in change.requests:
            self._known.add(rid)
        if change.full is not None:
            self._known |= set(change.full.requests)
        self.decisions.append(_decision(engine, batch, evicted))
        self.changes.append(change)

    def _before(self) -> State:
        """The books after the last step recorded: its full snapshot, or else the replay."""
        if not self.changes:
            return self.start
        if self.changes[-1].full is not None:
            return self.changes[-1].full
        return self.state(len(self))

    def _requests(self, engine, batch) -> list:
        """Every request this recording has seen that the engine or the step still names."""
        s = engine.scheduler
        seen = {r.rid: r for r in (*s.waiting, *s.running, *batch.finished, *batch.preempted, *batch.requests)}
        held = {r.rid: r for r in engine.requests}
        return [r for rid, r in sorted({**held, **seen}.items())]

    def _read(self, engine, batch, records, evicted: list) -> Change | None:
        """The step's changes, from its undo records; None if a record is of a kind this does not know."""
        a, s = engine.allocator, engine.scheduler
        pages: set[int] = set()
        marks: dict[int, tuple] = {}
        nodes: dict[int, tuple] = {}  # id -> (node, "all" | "used" | grown-from length)
        edits = []  # (list, slice) overwritten in place
        rings: set[int] = set()

        def touch(node, how) -> None:
            old = nodes.get(node.id, (node, "used"))[1]
            if old == "all" or how == "all":
                how = "all"
            elif isinstance(old, int) or isinstance(how, int):
                how = min(x for x in (old, how) if isinstance(x, int))
            nodes[node.id] = (node, how)

        for undo, args in records:
            f, owner = getattr(undo, "__func__", undo), getattr(undo, "__self__", None)
            if f in (Allocator._unallocate, Allocator._add, Allocator._unrelease, RadixCache._disown):
                pages.update(args[0])
            elif f is RadixCache._set_last_used:
                touch(args[0], "used")
            elif f is RadixCache._remove_child:
                touch(args[1], "all")
            elif f is RadixCache._unsplit:
                touch(args[0], "all")
                touch(args[1], "all")
            elif f is RadixCache._unevict:
                for leaf in args[0]:
                    touch(leaf, "all")
                    evicted += a.rows(leaf.pages)
            elif f is Request.rewind:
                marks.setdefault(owner.rid, (owner, args[0]))
            elif f in (Rings._give, Rings._shrink, Rings._restore):
                rings.add(args[0].rid if f is Rings._restore else args[0])
            elif owner is s.waiting or owner is s.running or f in _SILENT or f is setattr:
                pass
            elif getattr(undo, "__name__", "") == "__setitem__" and isinstance(owner, list):
                edits.append((owner, args[0]))
            elif f is Runner.restore_rows:  # the pool's contents: not part of the books
                pass
            else:
                return None
        refs = a.refs
        change = Change(
            pages={p: refs[p] for p in pages},
            waiting=[r.rid for r in s.waiting],
            running=[r.rid for r in s.running],
            clock=getattr(s.cache, "clock", 0),
        )
        for req in (*s.waiting, *batch.requests):  # a request added since the last step is in one of them
            if req.rid not in self._known:
                change.requests[req.rid] = request_view(req)
        for rid, (req, mark) in marks.items():
            if rid not in change.requests:
                change.requests[rid] = _request_change(req, mark, edits)
        for nid, (node, how) in nodes.items():
            attached = node.parent is not None and node.parent.children.get(node.key[0]) is node
            if not attached:
                change.gone.append(nid)
            elif how == "all":
                change.nodes[nid] = node_view(node)
            elif how == "used":
                change.nodes[nid] = node.last_used
            else:
                grown = node.key[how:]
                change.nodes[nid] = (how, [t for page in grown for t in page], node.pages[how:], node.last_used)
        ring_keeper = getattr(engine.runner, "rings", None)
        if ring_keeper is not None:
            change.ring_rows = ring_keeper.capacity
            for rid in rings:
                held = ring_keeper.rings.get(rid)
                change.rings[rid] = None if held is None else held[1].tolist()
        return change

    def states(self):
        """The books after step 0 (the start), 1, 2, ...: each a new :class:`State` (replayed, not shared)."""
        state = copy.deepcopy(self.start)
        yield copy.deepcopy(state)
        for decision, change in zip(self.decisions, self.changes):
            state = _apply(state, change)
            state.step = decision.step
            yield copy.deepcopy(state)

    def replay(self):
        """``(state, decision, change)`` after step 0 (``None, None``), 1, 2, ...: one :class:`State` changed in
        place from step to step (nothing copied: read it before asking for the next), for a reader whose work
        follows what each step changed."""
        state = copy.deepcopy(self.start)
        yield state, None, None
        for decision, change in zip(self.decisions, self.changes):
            state = _apply(state, change)
            state.step = decision.step
            yield state, decision, change

    def state(self, k: int) -> State:
        """The books after step ``k`` (0: before the first step)."""
        if not 0 <= k <= len(self):
            raise IndexError(f"step {k}: this recording has steps 0 to {len(self)}")
        for i, state in enumerate(self.states()):
            if i == k:
                return state
        raise AssertionError("unreachable")


def _request_change(req, mark: tuple, edits: list) -> tuple:
    """``req``'s change since ``mark`` (:meth:`Request.mark`): appended table and tokens, and in-place edits."""
    _, _, _, _, table, n_table, tokens, n_tokens, _, _ = mark
    same = req.slot_table is table
    grown = (n_table, req.slot_table[n_table:]) if same else (0, list(req.slot_table))
    fixed = [(k.start, req.slot_table[k]) for lst, k in edits if same and lst is req.slot_table]
    new = (n_tokens, req.tokens[n_tokens:]) if req.tokens is tokens else (0, list(req.tokens))
    return (_status(req), req.num_cached, grown, fixed, new)


def _apply(state: State, change: Change) -> State:
    """``state`` (changed in place) with ``change`` applied."""
    if change.full is not None:
        return copy.deepcopy(change.full)
    for p, n in change.pages.items():
        state.refs[p] = n
    for rid, c in change.requests.items():
        if isinstance(c, RequestView):
            state.requests[rid] = copy.deepcopy(c)
            continue
        view = state.requests[rid]
        view.status, view.num_cached, (start, rows), edits, (t0, toks) = c
        view.slot_table[start:] = rows
        for at, values in edits:
            view.slot_table[at : at + len(values)] = values
        view.tokens[t0:] = toks
    state.waiting, state.running = list(change.waiting), list(change.running)
    for nid in change.gone:
        state.nodes.pop(nid, None)
    for nid, c in change.nodes.items():
        if isinstance(c, NodeView):
            state.nodes[nid] = copy.deepcopy(c)
        elif isinstance(c, int):
            state.nodes[nid].last_used = c
        else:
            length, tokens, pages, used = c
            node = state.nodes[nid]
            ps = state.page_size
            node.tokens[length * ps :] = tokens
            node.pages[length:] = pages
            node.last_used = used
    state.clock = change.clock
    for rid, rows in change.rings.items():
        if rows is None:
            state.rings.pop(rid, None)
        else:
            state.rings[rid] = list(rows)
    if change.ring_rows:
        state.ring_rows = change.ring_rows
    return state


def _evicted(batch, before: State) -> list[int]:
    """Rows the step took back from the tree: those it reclaimed that no request it preempted held (the full
    books before the step say which those held)."""
    theirs = {
        row
        for rid in (r.rid for r in batch.preempted)
        if rid in before.requests
        for row in before.requests[rid].slot_table
    }
    return sorted(set(batch.reclaimed) - theirs)


def _decision(engine, batch, evicted: list[int]) -> Decision:
    admitted = [r.rid for r in batch.admitted]
    starts, pos = [], 0
    for n in batch.lengths:
        starts.append(batch.positions[pos] if n else 0)
        pos += n
    return Decision(
        step=engine.steps,
        ran=[r.rid for r in batch.requests],
        lengths=list(batch.lengths),
        starts=starts,
        admitted=admitted,
        preempted=[r.rid for r in batch.preempted],
        finished=[r.rid for r in batch.finished],
        written=list(batch.slots),
        evicted=sorted(evicted),
        shared={rid: start for rid, start in zip((r.rid for r in batch.requests), starts) if rid in admitted},
    )


#: What two recordings are compared on, per step: the decision's fields, then the books'.
_DECIDED = {
    "ran": "the requests run",
    "lengths": "the tokens each ran",
    "admitted": "admitted",
    "preempted": "preempted",
    "finished": "finished",
    "written": "the rows written",
    "evicted": "the rows evicted",
}
_KEPT = ("status", "slot_table", "num_cached", "tokens")


def first_difference(mine: Recording, theirs: Recording) -> tuple[int, str] | None:
    """The first step where two recordings of the same requests differ, and how, in words; None if none.

    Compared per step: the decision (who ran and how many tokens, admitted, preempted, finished, rows
    written and evicted), then the books (each page's holders, each request's status, slot table,
    tokens, the queues). The prefix trees' shapes are not compared (a tree of one's own may be built
    another way); what they hand out is, through the slot tables and the holders.
    """
    ours, others = list(mine.states()), list(theirs.states())
    decided = [None, *mine.decisions], [None, *theirs.decisions]
    for k in range(max(len(ours), len(others))):
        if k >= len(ours) or k >= len(others):
            short = "yours" if k >= len(ours) else "theirs"
            return k, f"step {k}: {short} ended after step {k - 1}, the other went on"
        a, b = decided[0][k], decided[1][k]
        for name, words in _DECIDED.items() if a is not None else ():
            if getattr(a, name) != getattr(b, name):
                return k, f"step {k}: {words} (requests {a.ran}): yours {getattr(a, name)}, theirs {getattr(b, name)}"
        x, y = ours[k], others[k]
        for rid in sorted(set(x.requests) | set(y.requests)):
            if rid not in x.requests or rid not in y.requests:
                return k, f"step {k}: request {rid} is in one recording only"
            for name in _KEPT:
                u, v = getattr(x.requests[rid], name), getattr(y.requests[rid], name)
                if u != v:
                    return k, f"step {k}: request {rid}'s {name.replace('_', ' ')}: yours {u}, theirs {v}"
        for name in ("waiting", "running", "refs"):
            u, v = getattr(x, name), getattr(y, name)
            if u != v:
                where = [p for p, (i, j) in enumerate(zip(u, v)) if i != j] if name == "refs" else None
                what = (
                    f"pages {where[:8]} held by {[u[p] for p in where[:8]]} against {[v[p] for p in where[:8]]}"
                    if where
                    else f"yours {u}, theirs {v}"
                )
                return k, f"step {k}: {'holders of pages' if name == 'refs' else name}: {what}"
    return None


def record(engine) -> Recording:
    """Start recording ``engine``'s steps: returns the :class:`Recording`, which grows after each step."""
    rec = Recording(engine)
    engine.watch(rec)
    return rec
