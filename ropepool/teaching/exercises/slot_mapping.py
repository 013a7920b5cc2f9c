"""Notebook 07's exercise: write one engine step's flat batch, its positions and its slot mapping."""

from __future__ import annotations

from typing import Callable

from ..feedback import ExerciseFailed, Verdict, guarded


def step_scenarios() -> dict[str, list[dict]]:
    """Steps to map: per request in the batch, its ``slot_table`` (the pool row of each of its positions,
    held for its whole life), ``cached`` (tokens already written) and ``new`` (tokens in this step).

    "reused rows" is a slot table made of rows other requests gave back: not contiguous, not sorted.
    """
    return {
        "prefill": [dict(slot_table=[0, 1, 2, 3, 4, 5, 6, 7, 8], cached=0, new=6)],
        "decode": [
            dict(slot_table=[0, 1, 2, 3, 4, 5, 6, 7, 8], cached=7, new=1),
            dict(slot_table=[9, 10, 11, 12, 13, 14, 15], cached=4, new=1),
        ],
        "mixed, reused rows": [
            dict(slot_table=[9, 10, 11, 12, 13, 14, 15], cached=6, new=1),
            dict(slot_table=[4, 0, 7, 1, 8, 2, 5, 3], cached=0, new=5),
        ],
    }


def solution_slot_mapping(requests: list[dict]) -> tuple[list[int], list[int]]:
    """Each request's new tokens, in batch order: positions ``cached .. cached + new - 1``, and the rows its
    slot table holds for exactly those positions."""
    positions, slots = [], []
    for r in requests:
        start = r["cached"]
        positions += range(start, start + r["new"])
        slots += r["slot_table"][start : start + r["new"]]
    return positions, slots


def _diagnose(requests, positions, slots) -> tuple[str, str]:
    want_pos, want_slots = solution_slot_mapping(requests)
    if positions != want_pos:
        if positions == [p - r["cached"] for r in requests for p in range(r["cached"], r["cached"] + r["new"])]:
            return "positions_from_zero", (
                "positions restart at 0 in every step: a token's position counts the "
                "request's tokens before it, cached ones included (cached .. cached + new - 1)."
            )
        return "positions", f"positions should be {want_pos}, got {positions}."
    if slots == positions:
        return "positions_as_slots", (
            "the slots are the positions: a position says where a token sits in its "
            "sequence, a slot which pool row it writes; look the position up in the "
            "request's slot_table."
        )
    if slots == [r["slot_table"][i] for r in requests for i in range(r["new"])]:
        return "from_start", (
            "slots taken from the start of each slot table: a decode token would overwrite "
            "the request's first cached row. Index the slot table by the token's position."
        )
    if slots == [r["slot_table"][0] + p for r in requests for p in range(r["cached"], r["cached"] + r["new"])]:
        return "contiguous", (
            "slots computed as first row + position: a slot table of reused rows is not "
            "contiguous. Index the slot table by the position."
        )
    if slots == [
        r["slot_table"][p + 1] if p + 1 < len(r["slot_table"]) else None
        for r in requests
        for p in range(r["cached"], r["cached"] + r["new"])
    ]:
        return "off_by_one", "each slot is the next position's row: slot_table[position], not slot_table[position + 1]."
    wrong = [t for t, (a, b) in enumerate(zip(slots, want_slots)) if a != b]
    return "wrong_rows", f"tokens {wrong} of the batch write the wrong rows: should be {want_slots}, got {slots}."


def check_slot_mapping(slot_mapping: Callable) -> Verdict:
    """Check ``slot_mapping(requests) -> (positions, slots)`` on a prefill, a decode and a mixed step whose
    second request runs on reused rows. The message names the mistake."""
    for name, requests in step_scenarios().items():
        got = guarded(
            "07",
            slot_mapping,
            [dict(r, slot_table=list(r["slot_table"])) for r in requests],
            what=f"slot_mapping(...) on '{name}'",
        )
        if got is None:
            raise ExerciseFailed("07", "returned_none", "slot_mapping returned None: did it forget `return`?")
        try:
            positions, slots = ([int(x) for x in part] for part in got)
        except (TypeError, ValueError):
            raise ExerciseFailed(
                "07", "not_two_lists", f"return two lists of ints, (positions, slots); got {got!r}."
            ) from None
        T = sum(r["new"] for r in requests)
        if len(positions) != T or len(slots) != T:
            raise ExerciseFailed(
                "07",
                "wrong_length",
                f"on '{name}' the batch has {T} tokens (the sum of `new`); "
                f"you returned {len(positions)} positions and {len(slots)} slots.",
            )
        if (positions, slots) != solution_slot_mapping(requests):
            problem, message = _diagnose(requests, positions, slots)
            raise ExerciseFailed("07", problem, f"on '{name}': {message}")
    return Verdict(
        "07",
        True,
        "positions count each request's tokens from its start; each slot is "
        "slot_table[position], reused rows included, on all three steps.",
    )
