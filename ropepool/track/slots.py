"""Part 3: one step's slot mapping: the positions and pool rows of a prefill chunk and of decodes.

The learner writes ``slot_mapping(requests, page_size) -> (positions, slots)``. Each request of the
step is a dict: ``pages`` (its page table: the pool page holding each ``page_size`` positions of its
sequence), ``cached`` (positions already in the pool) and ``new`` (its tokens in this step: a chunk
of its prompt, or 1 when decoding). Position ``p`` lives in row
``pages[p // page_size] * page_size + p % page_size`` (vLLM's slot mapping; with ``page_size`` 1 a
page is a row, SGLang's).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np

from .feedback import call, int_list, passed, rejected, showing, wrong_case
from .solutions import slot_mapping as reference

PART = 3
FIRST = (
    "for each request, in order, its positions run cached .. cached + new - 1; position p's row is "
    "pages[p // page_size] * page_size + p % page_size. Return (positions, slots), two lists."
)


def _slot(r, p, ps):
    return r["pages"][p // ps] * ps + p % ps


# problem: (slot of request r's i-th new token at position p, with page size ps; hint)
MISTAKES = {
    "positions_from_zero": (
        None,
        "positions restart at 0 in every step: a token's position counts its request's "
        "tokens before it, cached ones included (cached .. cached + new - 1). In the engine every decode would be "
        "turned as position 0.",
    ),
    "page_not_scaled": (
        lambda r, i, p, ps: r["pages"][p // ps] + p % ps,
        "a page number is not a row: page g starts at row g * page_size. "
        "slot = pages[p // page_size] * page_size + p % page_size. In the engine pages of 16 rows would overlap: "
        "requests write over each other.",
    ),
    "pages_as_rows": (
        lambda r, i, p, ps: r["pages"][p] * ps if p < len(r["pages"]) else -1,
        "you indexed the page table by position: it has one entry per page of page_size "
        "positions, pages[p // page_size]. In the engine rows would come from pages "
        "the request does not hold.",
    ),
    "offset_in_chunk": (
        lambda r, i, p, ps: r["pages"][p // ps] * ps + i % ps,
        "the offset inside the page is p % page_size, the position's, not the token's index "
        "in this step: a chunk may start mid-page. In the engine a chunk starting mid-page writes over its own earlier rows.",
    ),
    "off_by_one": (
        lambda r, i, p, ps: _slot(r, p + 1, ps) if (p + 1) // ps < len(r["pages"]) else -1,
        "each token got the next position's row: position p writes slot_of(p), not slot_of(p + 1). In the engine each k and v lands one row late: attention reads a row nobody wrote.",
    ),
    "from_start": (
        lambda r, i, p, ps: _slot(r, i, ps),
        "you mapped the step's i-th token to position i's row: a decode token would overwrite the "
        "request's first row. Map position cached + i. In the engine every decode would overwrite the first rows of its request.",
    ),
}


def cases() -> list[tuple[str, int, list[dict]]]:
    """(name, page_size, requests) the checker runs first."""
    return [
        ("a prefill, page_size 1", 1, [dict(pages=[0, 1, 2, 3, 4, 5], cached=0, new=6)]),
        (
            "two decodes on reused rows, page_size 1",
            1,
            [dict(pages=[7, 2, 9, 4], cached=3, new=1), dict(pages=[5, 0, 8, 1, 6, 3], cached=5, new=1)],
        ),
        ("a prefill chunk of 16, page_size 16", 16, [dict(pages=[3, 0, 5], cached=0, new=16)]),
        ("a chunk starting mid-page, page_size 16", 16, [dict(pages=[3, 0, 5], cached=20, new=12)]),
        (
            "decodes at a page's first and last row, page_size 16",
            16,
            [dict(pages=[2, 6], cached=16, new=1), dict(pages=[4, 1], cached=31, new=1)],
        ),
        (
            "decodes, then a prefill chunk, page_size 16",
            16,
            [
                dict(pages=[1], cached=9, new=1),
                dict(pages=[6, 2], cached=20, new=1),
                dict(pages=[0, 7, 3], cached=12, new=20),
            ],
        ),
    ]


def workload(n: int = 40, seed: int = 0) -> list[tuple[str, int, list[dict]]]:
    """``n`` random steps: 1-4 requests, each decoding or prefilling a chunk, pages drawn from a pool of 64."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        ps = int(rng.choice([1, 2, 4, 16]))
        pages = list(rng.permutation(64))
        reqs = []
        for _ in range(int(rng.integers(1, 5))):
            cached = int(rng.integers(0, 40))
            new = 1 if rng.integers(2) else int(rng.integers(1, 24))
            n_pages = -(-(cached + new) // ps)
            if n_pages > len(pages):
                break
            reqs.append(dict(pages=[int(p) for p in pages[:n_pages]], cached=cached, new=new))
            pages = pages[n_pages:]
        out.append((f"random step {i}", ps, reqs))
    return out


def engine_steps(page_size: int, seed: int = 0) -> list[tuple[str, int, list[dict], tuple[list, list]]]:
    """The engine's own steps, with no model: its scheduler (allocator, prefix tree, chunked prefill of
    at most 16 tokens a step) serving six prompts with a shared prefix in a pool of 96 rows; per step
    ``(name, page_size, requests, (batch.positions, batch.slots))``, the requests as part 3 sees them
    and what the engine's scheduler itself gave."""
    import mlx.core as mx

    from ..engine.allocator import Allocator
    from ..engine.radix import RadixCache
    from ..engine.request import Request
    from ..engine.scheduler import Scheduler

    rng = np.random.default_rng(seed)
    allocator = Allocator(96, page_size)
    scheduler = Scheduler(allocator, RadixCache(allocator), max_step_tokens=16)
    shared = [int(t) for t in rng.integers(1, 50, 8)]
    for rid in range(6):
        prompt = shared + [int(t) for t in rng.integers(1, 50, int(rng.integers(1, 12)))]
        scheduler.add(Request(rid, prompt, int(rng.integers(1, 6))))
    out, step = [], 0
    while not scheduler.done:
        batch = scheduler.schedule()
        requests = [
            dict(pages=[row // page_size for row in r.slot_table[::page_size]], cached=r.num_cached, new=n)
            for r, n in zip(batch.requests, batch.lengths)
        ]
        out.append((f"the engine's step {step}", page_size, requests, (list(batch.positions), list(batch.slots))))
        scheduler.postprocess(batch, mx.zeros((len(batch.requests), 50)))
        step += 1
    return out


def _counted_on(requests) -> list[int]:
    """The positions of a step whose requests were taken as one sequence, from the first one's cached."""
    start = requests[0]["cached"]
    return list(range(start, start + sum(r["new"] for r in requests)))


REQUEST_ORDER = (
    "your positions and slots are right, but for the requests in another order: keep the requests in the "
    "order given, request after request (the scheduler already put the decodes first where it wants them). "
    "In the engine token t of the batch is the batch's t-th row of q, k and v: in another order each token "
    "would be turned by another request's positions and written to rows that request does not own."
)


def _reordered(requests, ps, positions, slots) -> bool:
    """True when (positions, slots) is the reference's for the same requests in another order."""
    if len(requests) > 6:  # 720 orders at most: the engine's steps hold up to 6 requests
        return False
    got = (positions, slots)
    return any(reference(list(order), ps) == got for order in itertools.permutations(requests))


def _overran(requests, ps) -> Callable[[Exception], str]:
    """What an IndexError means when some request's pages end exactly at its last new position."""

    def explain(e: Exception) -> str:
        if isinstance(e, IndexError) and any(len(r["pages"]) * ps == r["cached"] + r["new"] for r in requests):
            return (
                " (positions run cached .. cached + new - 1: they start at cached, the first position not yet in "
                "the pool; this step's pages end exactly at the last one, so a position one too far has no page)"
            )
        return ""

    return explain


def _diagnose(requests, ps, positions, slots) -> tuple[str, str]:
    want_pos, _ = reference(requests, ps)
    if _reordered(requests, ps, positions, slots):
        return "request_order", REQUEST_ORDER
    if positions != want_pos:
        if positions == [i for r in requests for i in range(r["new"])]:
            return "positions_from_zero", MISTAKES["positions_from_zero"][1]
        if len(requests) > 1 and positions == _counted_on(requests):
            return "positions_across_requests", (
                "you counted positions on from the previous request, as if the step's requests were one "
                "sequence: each request starts again at its own cached. In the engine the second request's "
                "tokens would be turned by another request's positions and written to rows it does not own."
            )
        return "positions", "each request's positions are cached .. cached + new - 1, request after request."
    for problem, (fn, hint) in MISTAKES.items():
        if fn is not None and slots == [fn(r, i, r["cached"] + i, ps) for r in requests for i in range(r["new"])]:
            return problem, hint
    return "wrong_rows", _difference(requests, ps, slots)


def _difference(requests, ps, slots) -> str:
    """The first wrong slot, located: its request and position, the page of the request's table it is on,
    where the learner's slot lies instead, whether that request's slots simply run on from its first, and
    whose row the learner's slot is (:func:`_landing`)."""
    t = 0
    for j, r in enumerate(requests):
        for i, p in enumerate(range(r["cached"], r["cached"] + r["new"])):
            page, off = divmod(p, ps)
            want = r["pages"][page] * ps + off
            if slots[t] != want:
                g_page, g_off = divmod(slots[t], ps)
                table = r["pages"]
                there = f"page {table.index(g_page)} of its table" if g_page in table else "a page not in its table"
                said = (
                    f"request {j}'s position {p} is on page {page} of its page table (pool page {table[page]}), "
                    f"offset {off}: slot {table[page]} * {ps} + {off} = {want}. Your slot {slots[t]} is pool page "
                    f"{g_page} ({there}), offset {g_off}."
                )
                mine = slots[t - i : t - i + r["new"]]
                if i and mine == list(range(mine[0], mine[0] + r["new"])):
                    said += (
                        f" Your slots for this request run on one row at a time from its first ({mine[0]}), right "
                        f"up to position {p - 1}; position {p} starts page {page} of its table, which can be any "
                        "pool page: look each position's page up in the page table, a chunk crossing a page "
                        "boundary is not in consecutive rows."
                    )
                return said + " " + _landing(requests, j, ps, slots[t])
            t += 1
    return "slot = pages[p // page_size] * page_size + p % page_size, for each position p."


def _landing(requests, j, ps, slot) -> str:
    """Whose row ``slot`` is, from the step's page tables: request ``j``'s own (and which position's),
    another request's of the step, or none of them."""
    page, off = divmod(slot, ps)
    if page in requests[j]["pages"]:
        p = requests[j]["pages"].index(page) * ps + off
        return f"In the engine these k and v would land in another of this request's rows (position {p}'s)."
    others = [k for k, r in enumerate(requests) if k != j and page in r["pages"]]
    if others:
        return f"In the engine these k and v would land in another request's rows (request {others[0]}'s)."
    return "In the engine these k and v would land in a row no request of this step holds."


def check(slot_mapping: Callable) -> object:
    """Run ``slot_mapping`` on the table's steps, random ones (page sizes 1, 2, 4, 16), then the engine's
    own steps (:func:`engine_steps`), compared with the positions and slots its scheduler gave.

    Raises :class:`~ropepool.teaching.feedback.ExerciseFailed` naming the first wrong step and token.
    """
    __tracebackhide__ = True  # a failing check shows the learner's frames, not the checker's
    table, steps = cases(), workload()
    engine = engine_steps(1) + engine_steps(16, seed=1)
    runs = [(name, ps, reqs, reference(reqs, ps)) for name, ps, reqs in table + steps] + engine
    for name, ps, requests, want in runs:
        with showing(lambda: f"page_size {ps}, requests {requests}"):
            given = f"page_size {ps}, requests {requests}"
            got = call(
                PART,
                slot_mapping,
                [dict(r, pages=list(r["pages"])) for r in requests],
                ps,
                what=f"slot_mapping(...) on '{name}'",
                first=FIRST,
                explain=_overran(requests, ps),
            )
            try:
                positions, slots = got
            except (TypeError, ValueError):
                raise rejected(
                    PART,
                    "not_two_lists",
                    f"on '{name}': return two lists of ints, (positions, slots); got {got!r:.200}",
                ) from None
            what = f"slot_mapping(...) on '{name}'"
            positions, slots = int_list(PART, positions, what, "positions"), int_list(PART, slots, what, "slots")
            if (positions, slots) == want:
                continue
            if len(positions) != len(want[0]) or len(slots) != len(want[1]):
                raise wrong_case(
                    PART,
                    "wrong_length",
                    name,
                    given,
                    f"{len(want[0])} positions and slots (the sum of new)",
                    f"{len(positions)} positions, {len(slots)} slots",
                    "one position and one slot per new token.",
                )
            t = next(i for i in range(len(slots)) if (positions[i], slots[i]) != (want[0][i], want[1][i]))
            problem, hint = _diagnose(requests, ps, positions, slots)
            raise wrong_case(
                PART,
                problem,
                name,
                given,
                f"token {t}: position {want[0][t]}, slot {want[1][t]}",
                f"token {t}: position {positions[t]}, slot {slots[t]}",
                hint,
            )
    return passed(
        PART,
        f"slot_mapping gives every token's position and row on {len(table)} table steps, "
        f"{len(steps)} random ones, page_size 1 to 16, chunks starting mid-page included, and the "
        f"{len(engine)} steps of the engine's own scheduler (shared prefixes, chunked prefill, pages of 1 and 16).",
    )
