"""Exercise 3: NeoX RoPE in NumPy, against the float64 reference."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

import numpy as np

from ...reference import rotate, rotate_neox
from ...rope import Rope
from ...tolerance import error_bound, error_ratio, pair_norms
from ..feedback import ExerciseFailed, Verdict, guarded


def _variant(
    x, positions, base, *, pairing="neox", exponent=lambda i, D: -2 * i / D, sign=1.0, negate=True, use_index=False
):
    """NeoX RoPE with one knob turned: the mistakes check 3 recognises, computed by the reference's
    one rotation (:func:`ropepool.reference.rotate`) on a :class:`~ropepool.rope.Rope` built wrong."""
    x = np.asarray(x, np.float64)
    T, _, D = x.shape
    pos = np.arange(T) if use_index else positions
    i = np.arange(D // 2, dtype=np.float64)
    inv_freq = sign * float(base) ** exponent(i, D)  # [D/2]; sign -1 turns every pair the other way
    rope = Rope(D, D, pairing == "neox", tuple(inv_freq), 1.0)
    out = rotate(x, pos, rope)  # [T, H, D]
    if not negate:  # rotate_half without its minus: x1*cos + x2*sin, the first of each pair turned by -theta
        first = rope.pairs()[:, 0]
        out[..., first] = rotate(x, pos, replace(rope, inv_freq=tuple(-inv_freq)))[..., first]
    return out


ROPE_MISTAKES = {
    "gptj_pairing": (
        dict(pairing="gptj"),
        "you paired neighbours (x[2i], x[2i+1]): that is GPT-J's interleaved convention. NeoX pairs "
        "x[i] with x[i + D/2], the first half of the head with the second.",
    ),
    "exponent_missing_2": (
        dict(exponent=lambda i, D: -i / D),
        "your frequencies are rope_base**(-i/D): the exponent lost its factor 2. NeoX uses "
        "rope_base**(-2i/D) for i < D/2.",
    ),
    "exponent_over_half": (
        dict(exponent=lambda i, D: -2 * i / (D / 2)),
        "your frequencies are rope_base**(-2i/(D/2)): divide the exponent by D, not by D/2 "
        "(i runs over the D/2 pairs; the exponent 2i/D runs from 0 towards 1).",
    ),
    "exponent_sign": (
        dict(exponent=lambda i, D: 2 * i / D),
        "your frequencies grow with i (rope_base**(+2i/D)); they must shrink: rope_base**(-2i/D), "
        "so pair 0 turns fastest and the last pair slowest.",
    ),
    "rotation_sign": (
        dict(sign=-1.0),
        "you rotate the wrong way (by -theta): the first half is x1*cos - x2*sin and the second "
        "x1*sin + x2*cos; your sin terms have the opposite signs.",
    ),
    "rotate_half_sign": (
        dict(negate=False),
        "rotate_half lost its minus sign: the first half is x1*cos - x2*sin "
        "(rotate_half(x) = [-x2, x1]), you computed x1*cos + x2*sin.",
    ),
    "token_index": (
        dict(use_index=True),
        "you rotated token t by its index t, not by positions[t]: in a decode step token 0 can be at "
        "position 4,000. Use the positions argument.",
    ),
}


def rope_with_mistake(problem: str) -> Callable:
    """A ``rope(x, positions, rope_base)`` that makes one of :data:`ROPE_MISTAKES`, to see check 3 reject it."""
    if problem not in ROPE_MISTAKES:
        raise ValueError(f"unknown mistake {problem!r}: choose one of {sorted(ROPE_MISTAKES)}")
    knobs = ROPE_MISTAKES[problem][0]
    return lambda x, positions, rope_base: _variant(x, positions, rope_base, **knobs)


def exercise_3_cases() -> list[dict]:
    """Inputs check 3 runs: a small head with scattered positions, then Llama-3's D and base."""
    rng = np.random.default_rng(3)
    return [
        dict(x=rng.standard_normal((5, 3, 8)), positions=np.array([0, 1, 5, 2, 40]), rope_base=10000.0),
        dict(x=rng.standard_normal((4, 2, 128)), positions=np.array([4096, 7, 0, 300]), rope_base=500000.0),
    ]


def _close(got, want, x, positions) -> bool:
    """Within :mod:`ropepool.tolerance`'s float32 bound, so float32 math passes as well as float64."""
    return error_ratio(got, want, x, positions, "float32") <= 1


def _locate(x, got, want, positions) -> str:
    """Where ``got`` first departs from ``want``, and which half of the head is off."""
    bound = error_bound("float32", positions, pair_norms(x).max(axis=(1, 2)))  # [T]
    bad = ~(np.abs(got - want) <= bound[:, None, None])  # NaN counts as bad
    t, h, d = (int(a) for a in np.argwhere(bad)[0])
    D = want.shape[-1]
    halves = [name for name, sl in (("first", slice(0, D // 2)), ("second", slice(D // 2, D))) if bad[..., sl].any()]
    where = "both halves" if len(halves) == 2 else f"the {halves[0]} half"
    zero = np.flatnonzero(np.asarray(positions) == 0)
    at_zero = ""
    if zero.size and bad[zero].any():
        at_zero = " At position 0 the output must equal x (nothing turns), and yours does not."
    return (
        f"first difference at token {t} (position {positions[t]}), head {h}, dim {d}: expected "
        f"{want[t, h, d]:.6g}, got {got[t, h, d]:.6g}; wrong values in {where} of the head.{at_zero}"
    )


def check_3(rope: Callable) -> Verdict:
    """Check ``rope(x [T, H, D], positions [T], rope_base) -> [T, H, D]`` against the float64 reference.

    A wrong answer is compared with the common mistakes (GPT-J pairing, a wrong frequency
    exponent, a sign error, the token index for the position) and the message names the one it matches.
    """
    for n, case in enumerate(exercise_3_cases()):
        x = case["x"]
        x_in = x.copy()
        got = guarded(3, rope, x_in, case["positions"].copy(), case["rope_base"], what=f"rope(x {x.shape}, ...)")
        if not np.array_equal(x_in, x):
            raise ExerciseFailed(3, "modified_input", "your function changed x in place; return a new array.")
        if got is None:
            raise ExerciseFailed(3, "returned_none", "rope returned None: did it forget `return`?")
        got = np.asarray(got, np.float64)
        if got.shape != x.shape:
            raise ExerciseFailed(
                3,
                "shape",
                f"rope returned shape {got.shape} for x of shape {x.shape}: the rotated x keeps x's shape [T, H, D].",
            )
        want = rotate_neox(x, case["positions"], case["rope_base"])
        if _close(got, want, x, case["positions"]):
            continue
        for problem, (knobs, message) in ROPE_MISTAKES.items():
            if _close(got, _variant(x, case["positions"], case["rope_base"], **knobs), x, case["positions"]):
                raise ExerciseFailed(3, problem, message)
        raise ExerciseFailed(
            3,
            "mismatch",
            f"on case {n} (D = {x.shape[-1]}, rope_base = {case['rope_base']}) "
            + _locate(x, got, want, case["positions"]),
        )
    return Verdict(3, True, "matches ropepool.reference.rotate_neox on both cases (D = 8 and D = 128).")


def solution_3(x, positions, rope_base):
    """NeoX RoPE, ``x [T, H, D]`` at ``positions [T]``."""
    x = np.asarray(x, np.float64)
    D = x.shape[-1]
    inv_freq = rope_base ** (-2.0 * np.arange(D // 2) / D)  # [D/2], fast to slow
    theta = np.asarray(positions, np.float64)[:, None] * inv_freq  # [T, D/2]
    cos, sin = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]  # [T, 1, D/2]: shared by every head
    x1, x2 = x[..., : D // 2], x[..., D // 2 :]  # [T, H, D/2]
    return np.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)  # [T, H, D]
