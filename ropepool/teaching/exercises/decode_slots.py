"""Exercise 5: choose the slots of a decode step."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..feedback import ExerciseFailed, Verdict, guarded
from .pool_predict import write_numbers


def slot_scenarios() -> dict[str, dict]:
    """Pool occupancy maps (row -> owning request, None where free) and the tokens of one decode step.

    ``needs_slot[t]`` is False for a padding token (a finished request), which must write nothing.
    """
    return {
        "decode": dict(
            occupancy=["A", "A", None, "B", "A", "B", None, None, "C", "B", None, "C"],
            needs_slot=[True, True, False, True],
        ),
        "tight": dict(occupancy=["X", None, "Y", None, None], needs_slot=[True, True, True]),
        "padding first, tight": dict(occupancy=["X", None, "Y", None], needs_slot=[False, True, True]),
        "all padding": dict(occupancy=[None, "A", None], needs_slot=[False, False]),
        "empty step": dict(occupancy=["A", None], needs_slot=[]),
    }


def _slot_mistakes(slots, occupancy, needs_slot) -> list[tuple[str, str]]:
    P, found, owner_of = len(occupancy), [], {}
    for t, (slot, needs) in enumerate(zip(slots, needs_slot)):
        if isinstance(slot, bool) or not isinstance(slot, (int, np.integer)):
            found.append(("not_int", f"token {t}: slot {slot!r} is not an int."))
        elif not needs and slot != -1:
            found.append(
                (
                    "padding_slot",
                    f"token {t} is padding (needs_slot is False): give it -1 so it writes nothing, not row {slot}.",
                )
            )
        elif needs and slot == -1:
            found.append(
                (
                    "missing_slot",
                    f"token {t} needs a slot: -1 would drop its k and v, and the next "
                    "step's attention would miss this token.",
                )
            )
        elif slot >= P or slot < -1:
            found.append(
                (
                    "out_of_range",
                    f"token {t}: slot {slot} is out of range: the pool has rows 0..{P - 1} "
                    "(and -1 for 'write nothing'). In SGLang's kernel that is an out-of-bounds write.",
                )
            )
        elif slot >= 0 and occupancy[slot] is not None:
            found.append(
                (
                    "slot_taken",
                    f"token {t}: slot {slot} is taken by request {occupancy[slot]}; writing "
                    "there overwrites its cached k and v. The op cannot tell: to it a row is a row.",
                )
            )
        elif slot >= 0 and slot in owner_of:
            found.append(
                (
                    "duplicate_slot",
                    f"token {t}: slot {slot} is already token {owner_of[slot]}'s; two "
                    "tokens writing one row race in the kernel.",
                )
            )
        if isinstance(slot, (int, np.integer)) and slot >= 0:
            owner_of.setdefault(int(slot), t)
    return found


def _index_hint(e: Exception) -> str:
    if not isinstance(e, IndexError):
        return ""
    return (
        ". If you index the free rows by token position (free[t]), a padding token before real ones "
        "uses up an index but no row, and a tight pool runs out: count the rows you have handed out "
        "instead."
    )


def check_5(choose: Callable) -> Verdict:
    """Check ``choose(occupancy, needs_slot) -> slots`` on five decode steps (one with padding before
    real tokens in a pool with just enough free rows).

    The message names the scenario and, for each wrong token, whether its slot is taken,
    out of range, duplicated, or wrongly -1 / not -1. Then the op runs with the chosen slots.
    """
    for name, s in slot_scenarios().items():
        slots = guarded(
            5, choose, list(s["occupancy"]), list(s["needs_slot"]), what=f"choose(...) on '{name}'", explain=_index_hint
        )
        if slots is None:
            raise ExerciseFailed(5, "returned_none", "choose returned None: did it forget `return`?")
        slots = list(slots)
        T = len(s["needs_slot"])
        if len(slots) != T:
            raise ExerciseFailed(
                5,
                "wrong_length",
                f"on '{name}' the step has {T} tokens; you returned "
                f"{len(slots)} slots (one per token, -1 for padding).",
            )
        found = _slot_mistakes(slots, s["occupancy"], s["needs_slot"])
        if found:
            raise ExerciseFailed(
                5,
                found[0][0],
                f"on '{name}' (occupancy {s['occupancy']}, needs_slot "
                f"{s['needs_slot']}) you chose {slots}:\n" + "\n".join(m for _, m in found),
            )
    s = slot_scenarios()["decode"]
    chosen = [int(x) for x in choose(list(s["occupancy"]), list(s["needs_slot"]))]
    k_pool = write_numbers(np.ones(len(chosen)), chosen, np.zeros(len(s["occupancy"])))  # [P]: 1 where written
    written = np.flatnonzero(k_pool).tolist()
    return Verdict(
        5,
        True,
        f"free rows only, one per real token, -1 for padding; the op accepts {chosen} and writes rows {written}.",
    )


def solution_5(occupancy: list, needs_slot: list) -> list[int]:
    """Hand the free rows out in order; padding tokens get -1."""
    free = iter([r for r, owner in enumerate(occupancy) if owner is None])
    return [next(free) if needs else -1 for needs in needs_slot]
