"""One step of a recorded run (:mod:`ropepool.engine.recording`) drawn as HTML: the lab's viewer and the page show it.

A frame holds: the step's decision in words; the pool, one square per row, coloured by the request
that holds it (solid: written; pale: reserved for positions not computed yet; grey: only the
prefix tree keeps it; white: free; stripes: rows a shared prefix gives several requests), rows written
this step outlined, rows evicted this step crossed; the sliding-window rings where the run has them,
each ring row labelled with the position it holds; the queues; each request's slot table; the tree.
Every row square carries ``data-row``, ``data-state`` and ``data-owners``, so a test reads what is drawn.
This module draws the pieces; :mod:`.painter` puts them together into frames, step after step.
"""

from __future__ import annotations

from html import escape

from ...engine.recording import Decision, Settings, State
from ...engine.scheduler import IN_BATCH_PREFIX, common_prefix
from ..feedback import plural
from ..viz.sharing import row_runs

#: Request colours (Okabe-Ito, then Tableau): distinct for the colour-blind, legible on a projector.
COLOURS = ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#8C564B", "#17BECF", "#BCBD22")
CACHED, FREE = "#9E9E9E", "#FFFFFF"

STYLE = """
.rp-frame { font: 14px/1.4 system-ui, sans-serif; color: #111; max-width: 980px; min-width: 0; }
.rp-frame h4 { font-size: 15px; margin: 10px 0 4px; }
.rp-say { font-size: 15px; background: #F4F4F4; border-left: 4px solid #0072B2; padding: 6px 10px; }
.rp-pool { display: grid; gap: 2px; margin: 4px 0; }
.rp-pool div { width: 24px; height: 24px; box-sizing: border-box; border: 1px solid #BBB; font-size: 10px;
  text-align: center; line-height: 22px; color: #000; overflow: hidden; }
.rp-pool div.r { opacity: 0.45; border-style: dashed; border-color: #333; }
.rp-pool div.w { border: 3px solid #000; line-height: 18px; opacity: 1; }
.rp-pool div.e { color: #B00; font-weight: bold; font-size: 20px; text-shadow: 0 0 2px #FFF; }
.rp-row { display: flex; max-width: 560px; margin: 2px 0 6px; font-size: 12px; }
.rp-row span { border: 1px solid #555; padding: 1px 6px; background: #E8F1FA; white-space: nowrap; overflow: hidden; }
.rp-row span + span { background: #FBE9D9; border-left: none; }
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


def _matched(tree: dict, tokens: list[int], page_size: int) -> int:
    """Leading ``tokens`` the prefix tree holds, in whole pages, as the scheduler's lookup finds them; ``tree``:
    node id -> (parent id, edge tokens)."""
    children: dict[int, dict[tuple, tuple]] = {}
    for nid, (parent, edge) in tree.items():
        children.setdefault(parent, {})[tuple(edge[:page_size])] = (nid, edge)
    node, i, whole = 0, 0, len(tokens) // page_size * page_size
    while i < whole:
        child = children.get(node, {}).get(tuple(tokens[i : i + page_size]))
        if child is None:
            break
        node, edge = child
        n = 0
        while n < len(edge) and i + n < whole and edge[n : n + page_size] == tokens[i + n : i + n + page_size]:
            n += page_size
        i += n
        if n < len(edge):
            break
    return i


def why_waiting(decision: Decision, queue: list[int], tree, after: State, settings: Settings) -> dict[int, tuple]:
    """Why each request still waiting after the step (not preempted by it) was not admitted, the one reason the
    scheduler's rules give (:mod:`ropepool.engine.scheduler`): a step that preempts admits nothing; the step's
    token budget was spent before its turn; a request admitted before it this step computes
    :data:`~ropepool.engine.scheduler.IN_BATCH_PREFIX` or more tokens of its prompt beyond what the tree holds
    (it shares them next step); else its rows do not fit. ``queue``: the waiting queue before the step;
    ``tree()``: the prefix tree before the step, node id -> (parent id, edge tokens). Each reason is
    ``(said of one request, said of several)``."""
    waiting = [rid for rid in after.waiting if rid not in decision.preempted]
    if decision.preempted:
        return dict.fromkeys(waiting, ("nothing is admitted in a step that preempts",) * 2)
    budget = settings.max_step_tokens
    if budget is not None:
        budget -= sum(n for rid, n in zip(decision.ran, decision.lengths) if rid not in decision.admitted)
    ran = dict(zip(decision.ran, decision.lengths))
    later = sorted(rid for rid in [*decision.admitted, *waiting] if rid not in queue)  # added since the last step
    admitted, why, nodes = [], {}, None
    for rid in [*queue, *later]:
        if rid in decision.admitted:
            admitted.append(rid)
            budget = None if budget is None else budget - ran.get(rid, 0)
            continue
        if rid not in waiting:
            continue
        if budget is not None and budget <= 0:
            why[rid] = (f"the step's budget of {settings.max_step_tokens} tokens is spent",) * 2
            continue
        req = after.requests[rid]
        common = {o: common_prefix(req, after.requests[o]) for o in admitted}
        if settings.prefix_cache and common and max(common.values()) >= IN_BATCH_PREFIX:
            nodes = tree() if nodes is None else nodes
            held = _matched(nodes, (req.prompt + req.tokens)[:-1], after.page_size)
            sharer = next((o for o, n in common.items() if n >= held + IN_BATCH_PREFIX), None)
            if sharer is not None:
                same = f"the same {common[sharer]} tokens as request {sharer}'s, whose rows request {sharer} writes"
                why[rid] = (
                    f"its prompt starts with {same} this step (it shares them next step instead of computing them "
                    "again)",
                    f"their prompts start with {same} this step (they share them next step instead of computing "
                    "them again)",
                )
                continue
        why[rid] = ("too few free rows for it", "too few free rows for them")
    return why


def _waits(why: dict[int, tuple]) -> str:
    """The waiting requests, grouped by their reason (:func:`why_waiting`)."""
    groups: dict[tuple, list[int]] = {}
    for rid, reason in sorted(why.items()):
        groups.setdefault(reason, []).append(rid)
    return "".join(
        f" {_req(rids).capitalize()} {'waits' if len(rids) == 1 else 'wait'}: {reason[len(rids) > 1]}."
        for reason, rids in groups.items()
    )


def sentence(decision: Decision | None, before: State, after: State, settings: Settings | None = None) -> str:
    """The step's decision in words (step 0: what waits before the first step)."""
    settings = settings or Settings(prefix_cache=True, max_step_tokens=None, window=None)
    if decision is None:
        return said(None, after, settings, (0, 0), [], {})
    states = before.row_states() if decision.preempted else []
    now = after.row_states()
    returned = [r for r in decision.written if now[r] != "used"]
    why = why_waiting(
        decision, before.waiting, lambda: {n.id: (n.parent, n.tokens) for n in before.nodes.values()}, after, settings
    )
    return said(decision, after, settings, (states.count("free"), states.count("cached")), returned, why)


def said(
    decision: Decision | None, after: State, settings: Settings, free_and_kept: tuple, returned: list, why: dict
) -> str:
    """:func:`sentence` from what it reads of the pool: how many rows were free and kept only by the tree
    before the step (read when it preempts), the rows it wrote that went back at once, and why each waiting
    request waits (:func:`why_waiting`)."""
    if decision is None:
        return (
            f"Before the first step: {plural(len(after.waiting), 'request')} waiting, "
            f"{plural(after.pool_rows, 'pool row')}, all free."
        )
    parts = [_ran(*x, after, x[0] in decision.admitted) for x in zip(decision.ran, decision.lengths, decision.starts)]
    say = f"Step {decision.step}: " + "; ".join(parts) + "."
    if decision.admitted:
        say += f" Admitted {_req(decision.admitted)}."
    say += _waits(why)
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
    """A grid of 24-px squares, ``columns`` a line where there is room, fewer (as many as fit) where there is not:
    every square stays in view, none clipped at the right."""
    width = columns * 24 + (columns - 1) * 2  # the squares and the 2-px gaps between them
    return (
        f'<div class="rp-pool" aria-label="{escape(label)}" '
        f'style="grid-template-columns: repeat(auto-fill, 24px); max-width: {width}px">'
    )


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


def row_said(row: tuple) -> str:
    """What one pool row holds, in words, its parts' widths from the model (:attr:`Settings.row`: ``(name, heads,
    values per head)`` per part; empty: said without widths)."""
    parts = {name: (heads, n) for name, heads, n in row}
    if "c_kv" in parts:
        (_, r), (_, rd) = parts["c_kv"], parts["k_pe"]
        return (
            "A <b>pool row</b> holds one position's <b>latent</b> in every layer (MLA), not each head's k and v: "
            f"<b>c_kv</b>, the compressed k and v ({plural(r, 'value')}), and <b>k_pe</b>, the rotary part of k "
            f"shared by every head ({plural(rd, 'value')}, RoPE applied): {r + rd} values in all. Attention expands "
            "c_kv into each head's k and v as it reads the row."
        )
    if row:
        heads, n = parts["k"]
        return (
            "A <b>pool row</b> holds one position's <b>k</b> (RoPE applied) and <b>v</b> in every layer, each "
            f"{plural(heads, 'KV head')} of {n} values = {heads * n} values."
        )
    return "A <b>pool row</b> holds one position's k and v in every layer."


def row_bar(row: tuple) -> str:
    """One pool row of one layer as a bar, a part's width its number of values (nothing when not known)."""
    if not row:
        return ""
    bar = "".join(
        f'<span data-part="{escape(name)}" data-values="{heads * n}" style="flex: {heads * n} 1 0">'
        f"{escape(name)}: {plural(heads * n, 'value')}</span>"
        for name, heads, n in row
    )
    return f'<div class="rp-row" aria-label="one pool row in one layer">{bar}</div>\n'


HELP = (
    "A <b>slot table</b> says which row holds each "
    "position of a request. <b>Prefill</b> computes a prompt (in <b>chunks</b> when it is longer than the step's "
    "budget), <b>decode</b> one new token a step. The <b>prefix tree</b> keeps written rows by their tokens, so a "
    "prompt that starts the same way reuses them; its clock ticks at every lookup and insert."
)
