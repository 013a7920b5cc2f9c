"""One step of a recorded run (:mod:`ropepool.engine.recording`) drawn as HTML: the lab's viewer and the page show it.

A frame holds: the step's decision in words; the pool, one square per row, coloured by the request
that holds it (solid: k and v written; pale: reserved for positions not computed yet; grey: only the
prefix tree keeps it; white: free; stripes: rows a shared prefix gives several requests), rows written
this step outlined, rows evicted this step crossed; the sliding-window rings where the run has them,
each ring row labelled with the position it holds; the queues; each request's slot table; the tree.
Every row square carries ``data-row``, ``data-state`` and ``data-owners``, so a test reads what is drawn.
"""

from __future__ import annotations

from html import escape

from ...engine.recording import Decision, Settings, State
from ..feedback import plural
from ..viz.sharing import row_runs

#: Request colours (Okabe-Ito, then Tableau): distinct for the colour-blind, legible on a projector.
COLOURS = ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#8C564B", "#17BECF", "#BCBD22")
CACHED, FREE = "#9E9E9E", "#FFFFFF"

STYLE = """
.rp-frame { font: 14px/1.4 system-ui, sans-serif; color: #111; max-width: 980px; }
.rp-frame h4 { font-size: 15px; margin: 10px 0 4px; }
.rp-say { font-size: 15px; background: #F4F4F4; border-left: 4px solid #0072B2; padding: 6px 10px; }
.rp-pool { display: grid; gap: 2px; margin: 4px 0; }
.rp-pool div { width: 24px; height: 24px; box-sizing: border-box; border: 1px solid #BBB; font-size: 10px;
  text-align: center; line-height: 22px; color: #000; overflow: hidden; }
.rp-pool div.r { opacity: 0.45; border-style: dashed; border-color: #333; }
.rp-pool div.w { border: 3px solid #000; line-height: 18px; opacity: 1; }
.rp-pool div.e { color: #B00; font-weight: bold; font-size: 20px; text-shadow: 0 0 2px #FFF; }
.rp-key span { display: inline-block; padding: 1px 8px; margin: 2px 6px 2px 0; border: 1px solid #BBB; }
.rp-help { color: #333; font-size: 13px; margin: 2px 0 6px; }
.rp-frame table { border-collapse: collapse; }
.rp-frame td, .rp-frame th { padding: 2px 8px; text-align: left; border-bottom: 1px solid #DDD; vertical-align: top; }
.rp-tree ul { margin: 0; padding-left: 18px; }
.rp-tree li.new > span { background: #FFF3B0; }
"""


def colour(rid: int) -> str:
    return COLOURS[rid % len(COLOURS)]


def _fill(owners: list[int], state: str) -> str:
    if state == "free":
        return FREE
    if state == "cached" or not owners:
        return CACHED
    if len(owners) == 1:
        return colour(owners[0])
    stops = ", ".join(
        f"{colour(r)} {100 * i // len(owners)}% {100 * (i + 1) // len(owners)}%" for i, r in enumerate(owners)
    )
    return f"linear-gradient(90deg, {stops})"


def _req(rids) -> str:
    rids = list(rids)
    word = "request" if len(rids) == 1 else "requests"
    return f"{word} {', '.join(map(str, rids[:-1]))}{' and ' if len(rids) > 1 else ''}{rids[-1]}"


def _ran(rid: int, n: int, start: int, after: State, admitted: bool) -> str:
    """What request ``rid`` computed this step: a decode, a prompt (or a chunk of it), or a recomputation."""
    req = after.requests[rid]
    prompt = len(req.prompt)
    found = f", positions 0-{start - 1} found in the tree" if admitted and start else ""
    span = f"position {start}" if n == 1 else f"positions {start}-{start + n - 1}"
    if admitted and start + n > prompt and n > 1:  # back after a preemption: its generated tokens again
        return f"request {rid} computed {span} again (its prompt and the tokens it had generated{found})"
    if start >= prompt:
        return f"request {rid} decoded one token (position {start}{found})"
    what = "prefilled" if start + n >= prompt else "prefilled a chunk:"
    return f"request {rid} {what} {span} of its {prompt}-token prompt{found}"


def _waits(decision: Decision, waiting: list[int], settings: Settings) -> str:
    if decision.preempted:
        why = "nothing is admitted in a step that preempts"
    elif settings.max_step_tokens and sum(decision.lengths) >= settings.max_step_tokens:
        why = f"the step's budget of {settings.max_step_tokens} tokens is spent"
    elif settings.prefix_cache:
        why = "too few free rows, or its prompt starts like one computed this step (it shares those rows next step)"
    else:
        why = "too few free rows"
    return f" {_req(waiting).capitalize()} {'waits' if len(waiting) == 1 else 'wait'}: {why}."


def sentence(decision: Decision | None, before: State, after: State, settings: Settings | None = None) -> str:
    """The step's decision in words (step 0: what waits before the first step)."""
    settings = settings or Settings(prefix_cache=True, max_step_tokens=None, window=None)
    if decision is None:
        return (
            f"Before the first step: {plural(len(after.waiting), 'request')} waiting, "
            f"{plural(after.pool_rows, 'pool row')}, all free."
        )
    parts = [_ran(*x, after, x[0] in decision.admitted) for x in zip(decision.ran, decision.lengths, decision.starts)]
    say = f"Step {decision.step}: " + "; ".join(parts) + "."
    if decision.admitted:
        say += f" Admitted {_req(decision.admitted)}."
    waiting = [rid for rid in after.waiting if rid not in decision.preempted]
    if waiting:
        say += _waits(decision, waiting, settings)
    if decision.preempted:
        states = before.row_states()
        free, tree = states.count("free"), states.count("cached")
        kept = " (its whole pages stay in the tree: it may find them again)" if settings.prefix_cache else ""
        say += (
            f" Preempted {_req(decision.preempted)}, the most recently admitted: the running requests needed rows "
            f"and, before this step, {plural(free, 'row was', 'rows were')} free and the tree kept "
            f"{plural(tree, 'row')} no request held; its rows go back{kept} and it waits first in line."
        )
    if decision.evicted:
        say += (
            f" The tree gave back {plural(len(decision.evicted), 'row')} no request held (least recently used first)."
        )
    if decision.finished:
        kept = ", whole pages kept in the tree" if settings.prefix_cache else ""
        say += f" {_req(decision.finished).capitalize()} finished: rows given back{kept}."
    now = after.row_states()
    returned = [r for r in decision.written if now[r] != "used"]
    if returned and settings.prefix_cache and not decision.finished:
        say += (
            f" {plural(len(returned), 'row')} written this step went back at once: the tree already held those "
            "tokens (another request wrote them this step), so the request switched to its rows."
        )
    return say


def _pool(cells: list[tuple], written: set[int], evicted: set[int], label: str, columns: int) -> str:
    """Squares for ``cells``: (state, owners, text, tooltip) per row."""
    out = []
    for row, (state, who, text, tip) in enumerate(cells):
        cls = " ".join(c for c, on in (("r", state == "reserved"), ("w", row in written), ("e", row in evicted)) if on)
        tip += ", written this step" if row in written else ""
        tip += ", evicted this step" if row in evicted else ""
        out.append(
            f'<div class="{cls}" data-row="{row}" data-state="{state}" data-owners="{" ".join(map(str, who))}" '
            f'title="{escape(tip)}" style="background: {_fill(who, state)}">'
            f"{'&times;' if row in evicted else escape(text)}</div>"
        )
    return (
        f'<div class="rp-pool" aria-label="{escape(label)}" style="grid-template-columns: repeat({columns}, 24px)">'
        + "".join(out)
        + "</div>"
    )


def pool_cells(state: State) -> list[tuple]:
    """Each pool row's (state, owners, text, tooltip): "used" (k and v written), "reserved" (held for a position
    not computed yet), "cached" (only the tree keeps it) or "free"."""
    states, owners = state.row_states(), state.row_owners()
    written = set()
    for rid in state.running:
        req = state.requests[rid]
        written.update(req.slot_table[: req.num_cached])
    cells = []
    for row, (s, who) in enumerate(zip(states, owners)):
        if s == "used" and row not in written:
            s = "reserved"
        held = {"free": "free", "cached": "kept by the tree only"}.get(s) or f"request {', '.join(map(str, who))}"
        cells.append((s, who, "", f"row {row}: {held}{' (reserved, not written yet)' if s == 'reserved' else ''}"))
    return cells


def ring_cells(state: State, window: int) -> list[tuple]:
    """Each ring row's (state, owner, the position it holds, tooltip): "used", "reserved" (nothing written yet), "free"."""
    cells = [("free", [], "", f"ring row {r}: free") for r in range(state.ring_rows)]
    for rid, rows in state.rings.items():
        done = state.requests[rid].num_cached
        for j, row in enumerate(rows):
            p = done - 1 - (done - 1 - j) % window  # the newest written position p with p % window == j
            held = p >= 0
            text = str(p) if held else ""
            tip = f"ring row {row}: request {rid}, " + (f"position {p}" if held else "nothing written yet")
            cells[row] = ("used" if held else "reserved", [rid], text, tip)
    return cells


def _ring_written(state: State, decision: Decision | None, window: int) -> set[int]:
    if decision is None:
        return set()
    out = set()
    for rid, n, start in zip(decision.ran, decision.lengths, decision.starts):
        ring = state.rings.get(rid)
        if ring:
            out.update(ring[p % window] for p in range(max(start, start + n - window), start + n))
    return out


def _key(state: State, cache: bool) -> str:
    seen = sorted(rid for rid in state.requests if state.requests[rid].status != "finished")
    chips = [f'<span style="background: {colour(r)}">request {r}</span>' for r in seen]
    chips += [
        f'<span style="background: {colour(seen[0]) if seen else CACHED}; opacity: 0.45; border: 1px dashed #333">'
        "reserved, not written yet</span>",
        f'<span style="background: linear-gradient(90deg, {COLOURS[0]} 50%, {COLOURS[1]} 50%)">shared by two</span>'
        if cache
        else "",
        f'<span style="background: {CACHED}">kept by the tree only</span>' if cache else "",
        f'<span style="background: {FREE}">free</span>',
        '<span style="border: 3px solid #000">written this step</span>',
        '<span style="color: #B00; font-weight: bold">&times; evicted this step</span>',
    ]
    return '<div class="rp-key">' + "".join(chips) + "</div>"


def _requests(state: State) -> str:
    rows = [
        "<tr><th>request</th><th>status</th><th>prompt</th><th>positions written</th><th>new tokens</th>"
        "<th>slot table (pool row of each written position)</th></tr>"
    ]
    for rid, r in sorted(state.requests.items()):
        if r.status == "finished":
            table = "given back"
        elif r.status == "waiting":
            table = "none held" + (" (preempted: computes again when admitted)" if r.tokens else "")
        else:
            table = row_runs(r.slot_table[: r.num_cached]) or "none written yet"
        rows.append(
            f'<tr data-rid="{rid}"><td><span style="background: {colour(rid)}">&nbsp;&nbsp;</span> {rid}</td>'
            f"<td>{r.status}</td><td>{plural(len(r.prompt), 'token')}</td>"
            f"<td>{r.num_cached if r.status == 'running' else '&mdash;'}</td>"
            f"<td>{len(r.tokens)} of {r.max_new_tokens}</td><td>{escape(table)}</td></tr>"
        )
    return "<table>" + "".join(rows) + "</table>"


def _tree(state: State, before: State, decode) -> str:
    if not state.nodes:
        return "<p>(empty)</p>"
    children: dict[int, list[int]] = {}
    for nid, node in state.nodes.items():
        children.setdefault(node.parent, []).append(nid)
    refs, ps = state.refs, state.page_size

    def item(nid: int) -> str:
        node = state.nodes[nid]
        if decode:
            text = decode(node.tokens)
        else:
            text = "token ids " + " ".join(map(str, node.tokens[:8])) + (" ..." if len(node.tokens) > 8 else "")
        text = text if len(text) <= 60 else text[:57] + "..."
        holders = max(refs[p] for p in node.pages) - 1 if node.pages else 0
        new = nid not in before.nodes or before.nodes[nid] != node
        rows = [p * ps + o for p in node.pages for o in range(ps)]
        label = (
            f"{plural(len(node.tokens), 'token')} &ldquo;{escape(text)}&rdquo; &middot; "
            f"{'row' if len(rows) == 1 else 'rows'} {row_runs(rows)} &middot; "
            f"{plural(holders, 'request holds', 'requests hold')} it &middot; last used at tick {node.last_used}"
        )
        inner = "".join(item(c) for c in sorted(children.get(nid, [])))
        return (
            f'<li data-node="{nid}"{" class=new" if new else ""}><span>{label}</span>'
            + (f"<ul>{inner}</ul>" if inner else "")
            + "</li>"
        )

    return '<div class="rp-tree"><ul>' + "".join(item(c) for c in sorted(children.get(0, []))) + "</ul></div>"


HELP = (
    "A <b>pool row</b> holds one position's k and v in every layer; a <b>slot table</b> says which row holds each "
    "position of a request. <b>Prefill</b> computes a prompt (in <b>chunks</b> when it is longer than the step's "
    "budget), <b>decode</b> one new token a step. The <b>prefix tree</b> keeps written rows by their tokens, so a "
    "prompt that starts the same way reuses them; its clock ticks at every lookup and insert."
)


def frame(state: State, before: State, decision: Decision | None, decode=None, settings: Settings | None = None) -> str:
    """The HTML of one step: ``state`` after it, ``before`` it (for what changed), ``decision`` (None: step 0)."""
    settings = settings or Settings(prefix_cache=True, max_step_tokens=None, window=None)
    written = set(decision.written) if decision else set()
    evicted = set(decision.evicted) if decision else set()
    columns = 32 if state.pool_rows > 256 else 16
    parts = [
        f'<div class="rp-frame" data-step="{state.step}">',
        f'<p class="rp-say">{escape(sentence(decision, before, state, settings))}</p>',
        f"<h4>The pool: {plural(state.pool_rows, 'row')}, handed out in pages of {plural(state.page_size, 'row')}</h4>",
        f'<p class="rp-help">{HELP}</p>',
        _key(state, settings.prefix_cache),
        _pool(pool_cells(state), written, evicted, "pool rows", columns),
    ]
    if state.ring_rows and settings.window:
        w = settings.window
        cells = ring_cells(state, w)
        parts += [
            f"<h4>Sliding-window rings: window {w}, {plural(len(state.rings), 'ring')} of {w} rows in use, "
            f"{state.ring_rows} ring rows</h4>",
            f'<p class="rp-help">A sliding layer reads only the last {w} positions, so each request keeps {w} rows '
            f"(its ring): position p goes to ring row p mod {w}, over the position {w} before it. "
            "Each square shows the position it holds now.</p>",
            _pool(cells, _ring_written(state, decision, w), set(), "ring rows", 16),
        ]
    parts += [
        f"<h4>Queues</h4><p>waiting: {', '.join(map(str, state.waiting)) or '&mdash;'} &middot; running: "
        f"{', '.join(map(str, state.running)) or '&mdash;'}</p>",
        "<h4>Requests</h4>",
        _requests(state),
    ]
    if settings.prefix_cache:
        parts += [
            f"<h4>The prefix tree ({plural(len(state.nodes), 'node')}; highlighted: changed this step)</h4>",
            _tree(state, before, decode),
        ]
    parts.append("</div>")
    return "\n".join(parts)


def frames(recording, decode=None) -> list[str]:
    """Every step's HTML, step 0 (before the first) to the last."""
    out, before = [], None
    decisions = [None, *recording.decisions]
    for state, decision in zip(recording.states(), decisions):
        out.append(frame(state, before or state, decision, decode, recording.settings))
        before = state
    return out
