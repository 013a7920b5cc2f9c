"""Exercise 4: predict the pool after one call."""

from __future__ import annotations

import numpy as np

from ...op import rope_pool_fused
from ..feedback import ExerciseFailed, Verdict, guarded


def pool_scenario() -> dict:
    """Exercise 4's call: 8 pool rows, row r holding ``100 + r``; token t carrying the value t.

    ``slots[t]`` is the row token t writes; -1 writes nothing.
    """
    return dict(pool_before=[100 + r for r in range(8)], slots=[5, 2, -1, 6, 0, -1], token_values=list(range(6)))


def write_numbers(numbers, slots, pool_before) -> np.ndarray:
    """Run the real op with token t carrying ``numbers[t]`` and return the k pool after it, one number per row.

    ``numbers`` and ``slots`` are ``[T]``, ``pool_before`` is ``[P]``; returns float32 ``[P]``. Each row
    is ``[Hkv=1, D=2]`` holding its number twice, and every token sits at position 0, where RoPE turns
    nothing, so row ``slots[t]`` receives exactly ``numbers[t]``; slot -1 writes nothing.
    """
    T, P = len(slots), len(pool_before)
    values = np.repeat(np.asarray(numbers, np.float32), 2).reshape(T, 1, 2)  # [T, Hkv, D]
    pool = np.repeat(np.asarray(pool_before, np.float32), 2).reshape(P, 1, 2)  # [P, Hkv, D]
    _, _, k_pool, _ = rope_pool_fused(
        values,
        values,
        values,
        np.zeros(T, np.int32),
        np.asarray(slots, np.int32),
        pool,
        pool.copy(),
        head_dim=2,
        num_qo_heads=1,
        num_kv_heads=1,
        rope_base=10000.0,
    )
    return np.asarray(k_pool[:, 0, 0])  # [P]


def run_pool_scenario(slots=None) -> list[int]:
    """Run the real op on exercise 4's call (:func:`write_numbers`) and return the pool after it, one number per row."""
    s = pool_scenario()
    slots = s["slots"] if slots is None else slots
    return [int(x) for x in write_numbers(s["token_values"][: len(slots)], slots, s["pool_before"])]


def _row_mistake(r: int, a, want: int, s: dict) -> tuple[str, str]:
    slots, old = s["slots"], s["pool_before"][r]
    skipped = [t for t, slot in enumerate(slots) if slot < 0]
    if a is None:
        return "unanswered", f"row {r}: still None; write the number it holds after the call."
    if r == len(s["pool_before"]) - 1 and a in skipped:
        return "negative_index", (
            f"row {r}: you put token {a} here, but its slot is -1, which writes nothing. "
            "-1 is not Python's 'last row' here: the op skips that token; row "
            f"{r} holds {want}."
        )
    if want != old:  # a token writes this row
        t = slots.index(r)
        if a == old:
            return "write_missed", (
                f"row {r}: token {t} writes it (slots[{t}] = {r}), so it holds {t} now, not its old {old}."
            )
        return "wrong_token", f"row {r}: slots[{t}] = {r}, so it holds token {t}'s value {t}, not {a!r}."
    if a == -1:
        return "untouched_changed", (
            f"row {r}: no token writes it, so it keeps its old value {old}; -1 is a "
            "slot meaning 'write nothing', not a row's value."
        )
    return "untouched_changed", (
        f"row {r}: no token writes it, so it keeps its old value {old} (rows no "
        f"token names keep their bits), not {a!r}."
    )


_ROW_PRIORITY = ("negative_index", "write_missed", "untouched_changed", "wrong_token", "unanswered")


def check_4(answer) -> Verdict:
    """Check a predicted pool (a list of 8 numbers, or a function returning it) against the real op."""
    s = pool_scenario()
    if callable(answer):
        answer = guarded(4, answer, what="your function")
    answer = list(answer) if isinstance(answer, (list, tuple, np.ndarray)) else answer
    P = len(s["pool_before"])
    if not isinstance(answer, list) or len(answer) != P:
        size = len(answer) if isinstance(answer, list) else type(answer).__name__
        raise ExerciseFailed(
            4, "wrong_length", f"the pool has {P} rows: answer with a list of {P} numbers, got {size}."
        )
    if all(a is None for a in answer):
        raise ExerciseFailed(
            4, "unanswered", "every row is still None: replace each with the number row r holds after the call."
        )
    want = run_pool_scenario()
    slots = s["slots"]
    if all(answer[t] == slots[t] for t in range(len(slots))) and answer[: len(slots)] != want[: len(slots)]:
        raise ExerciseFailed(
            4,
            "indexed_by_token",
            "you wrote slots[t] into row t. The op does the opposite: it writes token t's k and v INTO row slots[t].",
        )
    found = [_row_mistake(r, a, w, s) for r, (a, w) in enumerate(zip(answer, want)) if a != w]
    if found:
        problem = min((p for p, _ in found), key=_ROW_PRIORITY.index)
        wrong = [str(r) for r, (a, w) in enumerate(zip(answer, want)) if a != w]
        head = f"row {wrong[0]} is wrong" if len(wrong) == 1 else f"rows {', '.join(wrong)} are wrong"
        raise ExerciseFailed(4, problem, f"{head}:\n" + "\n".join(m for _, m in found))
    changed = sum(w != b for w, b in zip(want, s["pool_before"]))
    return Verdict(
        4,
        True,
        f"the op agrees: {want}. {changed} rows changed, one per slot >= 0; slot -1 wrote "
        "nothing, and every other row kept its value.",
    )


def solution_4() -> list[int]:
    """The pool after exercise 4's call."""
    s = pool_scenario()
    pool = list(s["pool_before"])
    for t, slot in enumerate(s["slots"]):
        if slot >= 0:  # -1 writes nothing (it is not Python's "last row")
            pool[slot] = s["token_values"][t]
    return pool
