"""One step of a recorded run (:mod:`ropepool.engine.recording`) drawn as HTML: the lab's viewer and the page show it.

A frame holds: the step's decision in one sentence; the pool, one square per row, coloured by the
request that holds it (grey: only the prefix tree holds it; white: free; two colours: rows a shared
prefix gives several requests), rows written this step outlined, rows evicted this step crossed; the
sliding-window rings where the run has them; the queues; each request's slot table; the prefix tree.
Every row square carries ``data-row``, ``data-state`` and ``data-owners``, so a test reads what is drawn.
"""

from __future__ import annotations

from html import escape

from ...engine.recording import Decision, State
from ..viz.sharing import row_runs

#: Request colours (Okabe-Ito, then Tableau): distinct for the colour-blind, legible on a projector.
COLOURS = ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#8C564B", "#17BECF", "#BCBD22")
CACHED, FREE = "#9E9E9E", "#FFFFFF"

STYLE = """
.rp-frame { font: 14px/1.4 system-ui, sans-serif; color: #111; max-width: 980px; }
.rp-frame h4 { font-size: 15px; margin: 10px 0 4px; }
.rp-say { font-size: 15px; background: #F4F4F4; border-left: 4px solid #0072B2; padding: 6px 10px; }
.rp-pool { display: grid; gap: 2px; margin: 4px 0; }
.rp-pool div { width: 22px; height: 22px; box-sizing: border-box; border: 1px solid #BBB; font-size: 10px;
  text-align: center; line-height: 20px; color: #000; }
.rp-pool div.w { border: 3px solid #000; line-height: 16px; }
.rp-pool div.e { color: #C00; font-weight: bold; font-size: 16px; }
.rp-key span { display: inline-block; padding: 1px 8px; margin: 2px 6px 2px 0; border: 1px solid #BBB; }
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
    return f"linear-gradient(135deg, {stops})"


def _req(rids) -> str:
    rids = list(rids)
    word = "request" if len(rids) == 1 else "requests"
    return f"{word} {', '.join(map(str, rids[:-1]))}{' and ' if len(rids) > 1 else ''}{rids[-1]}"


def sentence(decision: Decision | None, before: State, after: State) -> str:
    """The step's decision in one sentence (step 0: what waits before the first step)."""
    if decision is None:
        return f"Before the first step: {len(after.waiting)} requests wait, the pool's {after.pool_rows} rows are free."
    parts = []
    for rid, n, start in zip(decision.ran, decision.lengths, decision.starts):
        prompt = len(after.requests[rid].prompt)
        if start >= prompt:
            parts.append(f"request {rid} decoded one token (position {start})")
            continue
        what = "prefilled" if start + n >= prompt else "prefilled a chunk:"
        found = f" (positions 0-{start - 1} found in the tree)" if rid in decision.admitted and start else ""
        span = f"position {start}" if n == 1 else f"positions {start}-{start + n - 1}"
        parts.append(f"request {rid} {what} {span} of its {prompt}-token prompt{found}")
    say = f"Step {decision.step}: " + "; ".join(parts) + "."
    if decision.admitted:
        say += f" Admitted {_req(decision.admitted)}."
    waiting = [rid for rid in after.waiting if rid not in decision.preempted]
    if waiting:
        say += f" {_req(waiting).capitalize()} {'waits' if len(waiting) == 1 else 'wait'}."
    if decision.preempted:
        say += (
            f" Preempted {_req(decision.preempted)} for rows: its rows go back, it waits first in line and "
            "will compute its sequence again."
        )
    if decision.evicted:
        say += f" The tree gave back {len(decision.evicted)} rows no request held (least recently used first)."
    if decision.finished:
        say += f" {_req(decision.finished).capitalize()} finished: rows given back, whole pages kept in the tree."
    return say


def _pool(states: list[str], owners: list[list[int]], written: set[int], evicted: set[int], label: str) -> str:
    columns = 32 if len(states) > 256 else 16
    cells = []
    for row, (state, who) in enumerate(zip(states, owners)):
        cls = " ".join(c for c, on in (("w", row in written), ("e", row in evicted)) if on)
        held = f"request {', '.join(map(str, who))}" if who else {"cached": "the tree only", "free": "free"}[state]
        tip = f"row {row}: {held}{', written this step' if row in written else ''}{', evicted this step' if row in evicted else ''}"
        cells.append(
            f'<div class="{cls}" data-row="{row}" data-state="{state}" data-owners="{" ".join(map(str, who))}" '
            f'title="{escape(tip)}" style="background: {_fill(who, state)}">{"&times;" if row in evicted else ""}</div>'
        )
    return (
        f'<div class="rp-pool" aria-label="{escape(label)}" style="grid-template-columns: repeat({columns}, 22px)">'
        + "".join(cells)
        + "</div>"
    )


def _key(state: State) -> str:
    seen = sorted(rid for rid in state.requests if state.requests[rid].status != "finished")
    chips = [f'<span style="background: {colour(r)}">request {r}</span>' for r in seen]
    chips += [
        f'<span style="background: {CACHED}">only the tree</span>',
        f'<span style="background: {FREE}">free</span>',
        '<span style="border: 3px solid #000">written this step</span>',
        '<span style="color: #C00; font-weight: bold">&times; evicted this step</span>',
    ]
    return '<div class="rp-key">' + "".join(chips) + "</div>"


def _requests(state: State) -> str:
    rows = [
        "<tr><th>request</th><th>status</th><th>prompt</th><th>in the pool</th><th>new tokens</th><th>slot table</th></tr>"
    ]
    for rid, r in sorted(state.requests.items()):
        table = row_runs(r.slot_table[: max(r.num_cached, 0)] or r.slot_table) if r.status != "finished" else ""
        rows.append(
            f'<tr data-rid="{rid}"><td><span style="background: {colour(rid)}">&nbsp;&nbsp;</span> {rid}</td>'
            f"<td>{r.status}</td><td>{len(r.prompt)}</td><td>{r.num_cached}</td>"
            f"<td>{len(r.tokens)} of {r.max_new_tokens}</td><td>{escape(table) or '&mdash;'}</td></tr>"
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
        text = (
            decode(node.tokens)
            if decode
            else " ".join(map(str, node.tokens[:8])) + (" ..." if len(node.tokens) > 8 else "")
        )
        text = text if len(text) <= 60 else text[:57] + "..."
        holders = max(refs[p] for p in node.pages) - 1 if node.pages else 0
        new = nid not in before.nodes or before.nodes[nid] != node
        label = (
            f"{len(node.tokens)} tokens &ldquo;{escape(text)}&rdquo; &middot; rows {row_runs([p * ps + o for p in node.pages for o in range(ps)])}"
            f" &middot; {holders} request{'s' if holders != 1 else ''} hold it &middot; last used {node.last_used}"
        )
        inner = "".join(item(c) for c in sorted(children.get(nid, [])))
        return (
            f'<li data-node="{nid}"{" class=new" if new else ""}><span>{label}</span>'
            + (f"<ul>{inner}</ul>" if inner else "")
            + "</li>"
        )

    return '<div class="rp-tree"><ul>' + "".join(item(c) for c in sorted(children.get(0, []))) + "</ul></div>"


def frame(state: State, before: State, decision: Decision | None, decode=None) -> str:
    """The HTML of one step: ``state`` after it, ``before`` it (for what changed), ``decision`` (None: step 0)."""
    written = set(decision.written) if decision else set()
    evicted = set(decision.evicted) if decision else set()
    parts = [
        f'<div class="rp-frame" data-step="{state.step}">',
        f'<p class="rp-say">{escape(sentence(decision, before, state))}</p>',
        f"<h4>The pool: {state.pool_rows} rows (page size {state.page_size})</h4>",
        _key(state),
        _pool(state.row_states(), state.row_owners(), written, evicted, "pool rows"),
    ]
    if state.ring_rows:
        owners = [[] for _ in range(state.ring_rows)]
        for rid, rows in state.rings.items():
            for row in rows:
                owners[row].append(rid)
        states = ["used" if o else "free" for o in owners]
        parts += [
            f"<h4>Sliding-window rings: {state.ring_rows} rows, {len(state.rings)} rings in use</h4>",
            _pool(states, owners, set(), set(), "ring rows"),
        ]
    parts += [
        f"<h4>Queues</h4><p>waiting: {', '.join(map(str, state.waiting)) or '&mdash;'} &middot; running: "
        f"{', '.join(map(str, state.running)) or '&mdash;'}</p>",
        "<h4>Requests</h4>",
        _requests(state),
        f"<h4>The prefix tree ({len(state.nodes)} nodes; highlighted: changed this step)</h4>",
        _tree(state, before, decode),
        "</div>",
    ]
    return "\n".join(parts)


def frames(recording, decode=None) -> list[str]:
    """Every step's HTML, step 0 (before the first) to the last."""
    out, before = [], None
    decisions = [None, *recording.decisions]
    for state, decision in zip(recording.states(), decisions):
        out.append(frame(state, before or state, decision, decode))
        before = state
    return out
