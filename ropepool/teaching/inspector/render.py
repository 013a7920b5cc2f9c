"""One step of a recorded run (:mod:`ropepool.engine.recording`) drawn as HTML: the lab's viewer and the page show it.

A frame holds: the step's decision in words; the pool, one square per row, coloured by the request
that holds it (solid: k and v written; pale: reserved for positions not computed yet; grey: only the
prefix tree keeps it; white: free; stripes: rows a shared prefix gives several requests), rows written
this step outlined, rows evicted this step crossed; the sliding-window rings where the run has them,
each ring row labelled with the position it holds; the queues; each request's slot table; the tree.
Every row square carries ``data-row``, ``data-state`` and ``data-owners``, so a test reads what is drawn.
This module draws the pieces; :mod:`.painter` puts them together into frames, step after step.
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
        return said(None, after, settings, (0, 0), [])
    states = before.row_states() if decision.preempted else []
    now = after.row_states()
    returned = [r for r in decision.written if now[r] != "used"]
    return said(decision, after, settings, (states.count("free"), states.count("cached")), returned)


def said(decision: Decision | None, after: State, settings: Settings, free_and_kept: tuple, returned: list) -> str:
    """:func:`sentence` from what it reads of the pool: how many rows were free and kept only by the tree
    before the step (read when it preempts), and the rows it wrote that went back at once."""
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
        free, kept_rows = free_and_kept
        kept = " (its whole pages stay in the tree: it may find them again)" if settings.prefix_cache else ""
        say += (
            f" Preempted {_req(decision.preempted)}, the most recently admitted: the running requests needed rows "
            f"and, before this step, {plural(free, 'row was', 'rows were')} free and the tree kept "
            f"{plural(kept_rows, 'row')} no request held; its rows go back{kept} and it waits first in line."
        )
    if decision.evicted:
        say += (
            f" The tree gave back {plural(len(decision.evicted), 'row')} no request held (least recently used first)."
        )
    if decision.finished:
        kept = ", whole pages kept in the tree" if settings.prefix_cache else ""
        say += f" {_req(decision.finished).capitalize()} finished: rows given back{kept}."
    if returned and settings.prefix_cache and not decision.finished:
        say += (
            f" {plural(len(returned), 'row')} written this step went back at once: the tree already held those "
            "tokens (another request wrote them this step), so the request switched to its rows."
        )
    return say


def square(row: int, cell: tuple, written: bool, evicted: bool, ring: bool) -> str:
    """One row's square: ``cell`` is (state, owners, text) as :func:`pool_cells` or :func:`ring_cells` give it."""
    state, who, text = cell
    if ring:
        held = (
            "free"
            if state == "free"
            else f"request {who[0]}, " + (f"position {text}" if text else "nothing written yet")
        )
        tip = f"ring row {row}: {held}"
    else:
        held = {"free": "free", "cached": "kept by the tree only"}.get(state) or f"request {', '.join(map(str, who))}"
        tip = f"row {row}: {held}{' (reserved, not written yet)' if state == 'reserved' else ''}"
    cls = " ".join(c for c, on in (("r", state == "reserved"), ("w", written), ("e", evicted)) if on)
    tip += ", written this step" if written else ""
    tip += ", evicted this step" if evicted else ""
    return (
        f'<div class="{cls}" data-row="{row}" data-state="{state}" data-owners="{" ".join(map(str, who))}" '
        f'title="{escape(tip)}" style="background: {_fill(list(who), state)}">'
        f"{'&times;' if evicted else escape(text)}</div>"
    )


def pool_open(label: str, columns: int) -> str:
    return f'<div class="rp-pool" aria-label="{escape(label)}" style="grid-template-columns: repeat({columns}, 24px)">'


def pool_cells(state: State) -> list[tuple]:
    """Each pool row's (state, owners, text): "used" (k and v written), "reserved" (held for a position not
    computed yet), "cached" (only the tree keeps it) or "free"."""
    states, owners = state.row_states(), state.row_owners()
    written = set()
    for rid in state.running:
        req = state.requests[rid]
        written.update(req.slot_table[: req.num_cached])
    return [
        ("reserved" if s == "used" and row not in written else s, tuple(who), "")
        for row, (s, who) in enumerate(zip(states, owners))
    ]


def ring_cells(state: State, window: int) -> list[tuple]:
    """Each ring row's (state, owner, the position it holds): "used", "reserved" (nothing written yet), "free"."""
    cells = [("free", (), "")] * state.ring_rows
    for rid, rows in state.rings.items():
        done = state.requests[rid].num_cached
        for j, row in enumerate(rows):
            p = done - 1 - (done - 1 - j) % window  # the newest written position p with p % window == j
            cells[row] = ("used", (rid,), str(p)) if p >= 0 else ("reserved", (rid,), "")
    return cells


def ring_written(state: State, decision: Decision | None, window: int) -> set[int]:
    if decision is None:
        return set()
    out = set()
    for rid, n, start in zip(decision.ran, decision.lengths, decision.starts):
        ring = state.rings.get(rid)
        if ring:
            out.update(ring[p % window] for p in range(max(start, start + n - window), start + n))
    return out


def key(state: State, cache: bool) -> str:
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


REQUESTS_HEAD = (
    "<tr><th>request</th><th>status</th><th>prompt</th><th>positions written</th><th>new tokens</th>"
    "<th>slot table (pool row of each written position)</th></tr>"
)


def request_row(rid: int, r) -> str:
    if r.status == "finished":
        table = "given back"
    elif r.status == "waiting":
        table = "none held" + (" (preempted: computes again when admitted)" if r.tokens else "")
    else:
        table = row_runs(r.slot_table[: r.num_cached]) or "none written yet"
    return (
        f'<tr data-rid="{rid}"><td><span style="background: {colour(rid)}">&nbsp;&nbsp;</span> {rid}</td>'
        f"<td>{r.status}</td><td>{plural(len(r.prompt), 'token')}</td>"
        f"<td>{r.num_cached if r.status == 'running' else '&mdash;'}</td>"
        f"<td>{len(r.tokens)} of {r.max_new_tokens}</td><td>{escape(table)}</td></tr>"
    )


def changed_nodes(state: State, before: State) -> set[int]:
    """The prefix-tree nodes new or changed since ``before``."""
    return {nid for nid, node in state.nodes.items() if nid not in before.nodes or before.nodes[nid] != node}


def tree(state: State, marked: set[int], decode) -> str:
    """The prefix tree as nested lists, the ``marked`` nodes highlighted; ``decode`` reads a node's tokens."""
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
        rows = [p * ps + o for p in node.pages for o in range(ps)]
        label = (
            f"{plural(len(node.tokens), 'token')} &ldquo;{escape(text)}&rdquo; &middot; "
            f"{'row' if len(rows) == 1 else 'rows'} {row_runs(rows)} &middot; "
            f"{plural(holders, 'request holds', 'requests hold')} it &middot; last used at tick {node.last_used}"
        )
        inner = "".join(item(c) for c in sorted(children.get(nid, [])))
        return (
            f'<li data-node="{nid}"{" class=new" if nid in marked else ""}><span>{label}</span>'
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
