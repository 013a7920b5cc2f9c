"""A recorded run's frames, kept up to date step by step: each step redraws only what it changed.

A frame is a list of parts (:data:`PARTS` names them): strings, and two lists of strings, one square a pool
row and one table row a request. :func:`changes` gives step 0's parts and, for each later step, the parts,
squares and request rows it changed; :func:`frames` the whole HTML of every step (the lab's viewer). Both
follow the recording's changes (:meth:`~ropepool.engine.recording.Recording.replay`), not its whole books:
a step's cost is its requests' new rows and the rows, pages and tree nodes it changed, plus its running and
waiting requests (the queues, and a square per running request's ring row); the prefix tree is drawn
again, whole, at the steps that change it. :func:`frame` draws one step from two states, as a check.
"""

from __future__ import annotations

from html import escape

from ...engine.recording import Decision, Settings, State
from .render import (
    HELP,
    REQUESTS_HEAD,
    changed_nodes,
    key,
    plural,
    pool_cells,
    pool_open,
    request_row,
    ring_cells,
    ring_written,
    said,
    sentence,
    square,
    tree,
)

#: The parts of a frame, in order; the lists are the pool's squares, the rings' squares, the requests' rows.
PARTS = (
    "open",
    "say",
    "pool head",
    "pool open",
    "pool",
    "pool close",
    "ring head",
    "rings",
    "ring close",
    "queues",
    "requests",
    "table close",
    "tree",
    "close",
)
SAY, HEAD, POOL, RING_HEAD, RINGS, RING_CLOSE, QUEUES, REQUESTS, TREE = (
    PARTS.index(x)
    for x in ("say", "pool head", "pool", "ring head", "rings", "ring close", "queues", "requests", "tree")
)


def _parts(state: State, settings: Settings, say: str, squares: list, rings: list, rows: list, tree_html: str) -> list:
    w = settings.window
    ring = bool(state.ring_rows and w)
    return [
        f'<div class="rp-frame" data-step="{state.step}">\n',
        f'<p class="rp-say">{escape(say)}</p>\n',
        _head(state, settings),
        pool_open("pool rows", 32 if state.pool_rows > 256 else 16),
        squares,
        "</div>\n",
        _ring_head(state, w) if ring else "",
        rings if ring else [],
        "</div>\n" if ring else "",
        _queues(state),
        rows,
        "</table>\n",
        tree_html,
        "</div>",
    ]


def _head(state: State, settings: Settings) -> str:
    return (
        f"<h4>The pool: {plural(state.pool_rows, 'row')}, handed out in pages of {plural(state.page_size, 'row')}"
        f'</h4>\n<p class="rp-help">{HELP}</p>\n' + key(state, settings.prefix_cache) + "\n"
    )


def _ring_head(state: State, w: int) -> str:
    return (
        f"<h4>Sliding-window rings: window {w}, {plural(len(state.rings), 'ring')} of at most {w} rows in use, "
        f"{state.ring_rows} ring rows</h4>\n"
        f'<p class="rp-help">A sliding layer reads only the last {w} positions, so each request keeps at most {w} '
        f"rows (its ring, a row per position until it has {w}): position p goes to ring row p mod {w}, over the "
        f"position {w} before it. "
        "Each square shows the position it holds now.</p>\n" + pool_open("ring rows", 16)
    )


def _queues(state: State) -> str:
    return (
        f"<h4>Queues</h4><p>waiting: {', '.join(map(str, state.waiting)) or '&mdash;'} &middot; running: "
        f"{', '.join(map(str, state.running)) or '&mdash;'}</p>\n<h4>Requests</h4>\n<table>"
    )


def _tree_part(state: State, settings: Settings, marked: set[int], decode) -> str:
    if not settings.prefix_cache:
        return ""
    return (
        f"<h4>The prefix tree ({plural(len(state.nodes), 'node')}; highlighted: changed this step)</h4>\n"
        + tree(state, marked, decode)
        + "\n"
    )


def frame(state: State, before: State, decision: Decision | None, decode=None, settings: Settings | None = None) -> str:
    """The HTML of one step, drawn whole: ``state`` after it, ``before`` it (for what changed), ``decision``
    (None: step 0). :func:`frames` draws the same, following each step's changes."""
    settings = settings or Settings(prefix_cache=True, max_step_tokens=None, window=None)
    written = set(decision.written) if decision else set()
    evicted = set(decision.evicted) if decision else set()
    squares = [square(r, c, r in written, r in evicted, False) for r, c in enumerate(pool_cells(state))]
    rings = []
    if state.ring_rows and settings.window:
        marked = ring_written(state, decision, settings.window)
        rings = [square(r, c, r in marked, False, True) for r, c in enumerate(ring_cells(state, settings.window))]
    rows = [REQUESTS_HEAD] + [request_row(rid, r) for rid, r in sorted(state.requests.items())]
    say = sentence(decision, before, state, settings)
    return _joined(
        _parts(
            state,
            settings,
            say,
            squares,
            rings,
            rows,
            _tree_part(state, settings, changed_nodes(state, before), decode),
        )
    )


def _joined(parts: list) -> str:
    return "".join(p if isinstance(p, str) else "".join(p) for p in parts)


class _Painter:
    """The frame of the step the replay is at, and what each step changed in it.

    It keeps, beside the parts: each row's cell (state, owners, text) and the rows each running request holds
    and has written (from which a row's owners and whether it is written follow), each ring row's request,
    and a signature of each tree node, so that a step reads only the requests, pages and nodes it changed.
    """

    def __init__(self, recording, decode=None):
        self.recording, self.decode, self.settings = recording, decode, recording.settings

    def steps(self):
        """``(parts, changed)`` for step 0, 1, ...: the frame's parts (one list, changed in place) and what the
        step changed in them, as :func:`changes` gives it (step 0: [])."""
        for state, decision, change in self.recording.replay():
            if change is None or change.full is not None:
                old = getattr(self, "parts", None)
                self._draw_whole(state, decision)
                yield self.parts, [] if old is None else _difference(old, self.parts)
            else:
                yield self.parts, self._follow(state, decision, change)

    # -- whole: step 0, and a step whose recording holds the whole books -------------------------------

    def _draw_whole(self, state: State, decision: Decision | None) -> None:
        P, w = state.pool_rows, self.settings.window
        counts = (self.free, self.kept) if hasattr(self, "free") else (0, 0)  # before this step
        self.owners = [set() for _ in range(P)]
        self.written_by = [0] * P
        self.held: dict[int, tuple[list[int], int]] = {}
        self.order = {rid: i for i, rid in enumerate(state.running)}
        for rid in state.running:
            self._hold(state, rid)
        self.cells = [self._cell(state, r) for r in range(P)]
        self.free = sum(c[0] == "free" for c in self.cells)
        self.kept = sum(c[0] == "cached" for c in self.cells)
        self.ring_of = {row: (rid, j) for rid, rows in state.rings.items() for j, row in enumerate(rows)}
        self.rings_held = {rid: list(rows) for rid, rows in state.rings.items()}
        self.ring_cells = ring_cells(state, w) if state.ring_rows and w else []
        self.live = {rid for rid, r in state.requests.items() if r.status != "finished"}
        self.index = {rid: i + 1 for i, rid in enumerate(sorted(state.requests))}
        signs = {nid: _sign(node) for nid, node in state.nodes.items()}
        marked = {nid for nid, s in signs.items() if nid not in getattr(self, "signs", signs) or self.signs[nid] != s}
        self.signs, self.marked = signs, marked
        self.tree_pages = {p for node in state.nodes.values() for p in node.pages}
        written, evicted = (set(decision.written), set(decision.evicted)) if decision else (set(), set())
        ring_marks = ring_written(state, decision, w) if self.ring_cells else set()
        self.marks, self.ring_marks = written | evicted, ring_marks
        returned = [r for r in written if self.cells[r][0] in ("free", "cached")]
        self.parts = _parts(
            state,
            self.settings,
            said(decision, state, self.settings, counts, returned),
            [square(r, c, r in written, r in evicted, False) for r, c in enumerate(self.cells)],
            [square(r, c, r in ring_marks, False, True) for r, c in enumerate(self.ring_cells)],
            [REQUESTS_HEAD] + [request_row(rid, r) for rid, r in sorted(state.requests.items())],
            _tree_part(state, self.settings, marked, self.decode),
        )

    # -- a step that names what it changed ------------------------------------------------------------

    def _follow(self, state: State, decision: Decision, change) -> list[dict]:
        ps, P = state.page_size, state.pool_rows
        counts = (self.free, self.kept)  # before this step: what a preemption's sentence says
        touched_rids = set(change.requests) | (set(self.order) ^ set(state.running))
        self.order = {rid: i for i, rid in enumerate(state.running)}
        rows = set()
        for p in change.pages:
            rows.update(range(p * ps, min(p * ps + ps, P)))
        for rid in touched_rids:
            rows |= self._update(state, rid, change.requests.get(rid))
        written, evicted = set(decision.written), set(decision.evicted)
        rows |= written | evicted | self.marks
        self.marks = written | evicted
        out = []
        squares = self.parts[POOL]
        changed = []
        for r in sorted(rows):
            cell = self._cell(state, r)
            if cell != self.cells[r]:
                self._count(self.cells[r], -1)
                self._count(cell, +1)
                self.cells[r] = cell
            html = square(r, cell, r in written, r in evicted, False)
            if html != squares[r]:
                squares[r] = html
                changed.append([r, html])
        if changed:
            out.append({"i": POOL, "d": changed})
        out += self._follow_rings(state, decision, change, touched_rids)
        out += self._follow_requests(state, touched_rids)
        out += self._follow_tree(state, change)
        returned = [r for r in written if self.cells[r][0] in ("free", "cached")]
        strings = {
            0: f'<div class="rp-frame" data-step="{state.step}">\n',
            SAY: f'<p class="rp-say">{escape(said(decision, state, self.settings, counts, returned))}</p>\n',
            QUEUES: _queues(state),
        }
        live = {rid for rid in self.live | touched_rids if state.requests[rid].status != "finished"}
        if live != self.live:
            self.live, strings[HEAD] = live, _head(state, self.settings)
        for i, html in strings.items():
            if html != self.parts[i]:
                self.parts[i] = html
                out.append({"i": i, "s": html})
        return out

    def _hold(self, state: State, rid: int) -> set[int]:
        req = state.requests[rid]
        table, done = list(req.slot_table), req.num_cached
        for r in set(table):
            self.owners[r].add(rid)
        for r in table[:done]:
            self.written_by[r] += 1
        self.held[rid] = (table, done)
        return set(table)

    def _unhold(self, rid: int) -> set[int]:
        table, done = self.held.pop(rid, ([], 0))
        for r in set(table):
            self.owners[r].discard(rid)
        for r in table[:done]:
            self.written_by[r] -= 1
        return set(table)

    def _update(self, state: State, rid: int, c) -> set[int]:
        """The rows whose owners or written state ``rid``'s change moved: its new rows when it only grew."""
        running = rid in self.order
        if running and rid in self.held and isinstance(c, tuple):
            status, done, (start, new), edits, _ = c
            table, was = self.held[rid]
            if not edits and start == len(table) and done >= was:
                for r in new:
                    self.owners[r].add(rid)
                table += new
                for r in table[was:done]:
                    self.written_by[r] += 1
                self.held[rid] = (table, done)
                return set(new) | set(table[was:done])
        rows = self._unhold(rid)
        return rows | self._hold(state, rid) if running else rows

    def _cell(self, state: State, r: int) -> tuple:
        if not state.refs[r // state.page_size]:
            return ("free", (), "")
        who = self.owners[r]
        if not who:
            return ("cached", (), "")
        order = self.order
        return ("used" if self.written_by[r] else "reserved", tuple(sorted(who, key=order.__getitem__)), "")

    def _count(self, cell: tuple, n: int) -> None:
        if cell[0] == "free":
            self.free += n
        elif cell[0] == "cached":
            self.kept += n

    def _follow_rings(self, state: State, decision: Decision, change, touched: set[int]) -> list[dict]:
        w = self.settings.window
        if not (state.ring_rows and w):
            return []
        if state.ring_rows != len(self.ring_cells):  # the rings' pool grew: drawn whole
            old = (self.parts[RING_HEAD], self.parts[RINGS])
            self.ring_of = {row: (rid, j) for rid, rows in state.rings.items() for j, row in enumerate(rows)}
            self.rings_held = {rid: list(rows) for rid, rows in state.rings.items()}
            self.ring_cells = ring_cells(state, w)
            self.ring_marks = ring_written(state, decision, w)
            marks = self.ring_marks
            self.parts[RING_HEAD], self.parts[RINGS] = (
                _ring_head(state, w),
                [square(r, c, r in marks, False, True) for r, c in enumerate(self.ring_cells)],
            )
            self.parts[RING_CLOSE] = "</div>\n"
            return [{"i": RING_HEAD, "s": self.parts[RING_HEAD]}, {"i": RINGS, "a": self.parts[RINGS]}] + (
                [{"i": RING_CLOSE, "s": "</div>\n"}] if old[0] == "" else []
            )
        rows = set()
        for rid in set(change.rings) | (touched & (set(state.rings) | set(self.rings_held))):
            for row in self.rings_held.pop(rid, []):
                self.ring_of.pop(row, None)
                rows.add(row)
            for j, row in enumerate(state.rings.get(rid, [])):
                self.ring_of[row] = (rid, j)
                rows.add(row)
            if rid in state.rings:
                self.rings_held[rid] = list(state.rings[rid])
        marks = ring_written(state, decision, w)
        rows |= marks | self.ring_marks
        self.ring_marks = marks
        changed, squares = [], self.parts[RINGS]
        for row in sorted(rows):
            cell = ("free", (), "")
            if row in self.ring_of:
                rid, j = self.ring_of[row]
                done = state.requests[rid].num_cached
                p = done - 1 - (done - 1 - j) % w
                cell = ("used", (rid,), str(p)) if p >= 0 else ("reserved", (rid,), "")
            self.ring_cells[row] = cell
            html = square(row, cell, row in marks, False, True)
            if html != squares[row]:
                squares[row] = html
                changed.append([row, html])
        head = _ring_head(state, w)
        out = [{"i": RINGS, "d": changed}] if changed else []
        if head != self.parts[RING_HEAD]:
            self.parts[RING_HEAD] = head
            out.append({"i": RING_HEAD, "s": head})
        return out

    def _follow_requests(self, state: State, touched: set[int]) -> list[dict]:
        rows, changed = self.parts[REQUESTS], []
        new = sorted(rid for rid in touched if rid not in self.index)
        if new and (not self.index or new[0] > max(self.index)):
            for rid in new:
                self.index[rid] = len(rows)
                rows.append(request_row(rid, state.requests[rid]))
            return [{"i": REQUESTS, "a": list(rows)}]
        if new:  # a request older than one shown: the table drawn whole
            self.parts[REQUESTS] = [REQUESTS_HEAD] + [request_row(rid, r) for rid, r in sorted(state.requests.items())]
            self.index = {rid: i + 1 for i, rid in enumerate(sorted(state.requests))}
            return [{"i": REQUESTS, "a": list(self.parts[REQUESTS])}]
        for rid in sorted(touched):
            html = request_row(rid, state.requests[rid])
            if html != rows[self.index[rid]]:
                rows[self.index[rid]] = html
                changed.append([self.index[rid], html])
        return [{"i": REQUESTS, "d": changed}] if changed else []

    def _follow_tree(self, state: State, change) -> list[dict]:
        if not self.settings.prefix_cache:
            return []
        moved = change.nodes or change.gone or self.marked or not self.tree_pages.isdisjoint(change.pages)
        if not moved:
            return []
        marked = set()
        for nid in change.gone:
            self.signs.pop(nid, None)
        for nid in change.nodes:
            sign = _sign(state.nodes[nid])
            if self.signs.get(nid) != sign:
                marked.add(nid)
            self.signs[nid] = sign
        self.marked = marked
        if change.nodes or change.gone:
            self.tree_pages = {p for node in state.nodes.values() for p in node.pages}
        html = _tree_part(state, self.settings, marked, self.decode)
        if html == self.parts[TREE]:
            return []
        self.parts[TREE] = html
        return [{"i": TREE, "s": html}]


def _sign(node) -> tuple:
    return (node.parent, tuple(node.tokens), tuple(node.pages), node.last_used)


def _difference(old: list, new: list) -> list[dict]:
    out = []
    for i, (a, b) in enumerate(zip(old, new)):
        if a == b:
            continue
        if isinstance(b, str):
            out.append({"i": i, "s": b})
        elif isinstance(a, list) and len(a) == len(b):
            out.append({"i": i, "d": [[j, y] for j, (x, y) in enumerate(zip(a, b)) if x != y]})
        else:
            out.append({"i": i, "a": list(b)})
    return out


def frames(recording, decode=None) -> list[str]:
    """Every step's HTML, step 0 (before the first) to the last."""
    return [_joined(parts) for parts, _ in _Painter(recording, decode).steps()]


def changes(recording, decode=None) -> tuple[list, list[list[dict]]]:
    """Step 0's parts (:data:`PARTS`) and, for each later step, what it changed in them: a list of
    ``{"i": part, "s": its new string}``, ``{"i": part, "a": its new list}`` or ``{"i": part, "d": [[item,
    new string], ...]}`` (the squares and request rows that changed). Applied in order to step 0's parts they
    give :func:`frames`."""
    first, steps = None, []
    for parts, changed in _Painter(recording, decode).steps():
        if first is None:
            first = [list(p) if isinstance(p, list) else p for p in parts]
        else:
            steps.append(changed)
    return first, steps
