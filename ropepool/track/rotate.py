"""Part 1: rotate one head with a RoPE table, NeoX or GPT-J pairs, against the float64 reference.

The learner writes ``rotate(x, positions, inv_freq, is_neox) -> [T, D]``: ``x [T, D]`` is one head's
vectors, ``positions [T]`` each token's position, ``inv_freq [D/2]`` the RoPE table's radians per
position of each pair (``ropepool.rope.rope_table(D, base).inv_freq``). Pair ``i`` is
``(i, i + D/2)`` with NeoX pairs, ``(2i, 2i + 1)`` with GPT-J pairs, and turns by
``positions[t] * inv_freq[i]`` (see :mod:`ropepool.reference`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ..reference import rotate as reference_rotate
from ..rope import Rope, plain
from ..tolerance import error_bound, error_ratio, pair_norms
from .feedback import call, passed, showing, wrong_case

PART = 1
FIRST = (
    "look up each token's angles, theta = positions[t] * inv_freq (shape [T, D/2]), then turn each "
    "pair (a, b) to (a cos - b sin, a sin + b cos): NeoX pairs a = x[:, :D/2], b = x[:, D/2:]."
)


def reference(x, positions, inv_freq, is_neox: bool) -> np.ndarray:
    """The float64 oracle: :func:`ropepool.reference.rotate` on one head, ``[T, D]``."""
    x = np.asarray(x, np.float64)
    rope = Rope(x.shape[-1], x.shape[-1], bool(is_neox), tuple(np.asarray(inv_freq, np.float64)), 1.0)
    return reference_rotate(x[:, None, :], positions, rope)[:, 0, :]  # [T, D]


def _mistake(
    x,
    positions,
    inv_freq,
    is_neox,
    *,
    pairs_swapped=False,
    index=False,
    shift=0,
    sign=1.0,
    half_sign=False,
    positions_in=None,
    reuse_turned=False,
    halves=False,
) -> np.ndarray:
    """The rotation with one common mistake in it, to recognise a wrong answer by."""
    pos = np.arange(len(positions)) if index else np.asarray(positions) + shift
    if positions_in is not None:  # positions rounded through a narrow float first
        pos = np.asarray(positions).astype(positions_in).astype(np.float64)
    neox = bool(is_neox) != pairs_swapped
    inv = sign * np.asarray(inv_freq, np.float64)
    out = reference(x, pos, inv, neox)
    if half_sign:  # x1 cos + x2 sin in the first of each pair: rotate_half's minus sign lost
        rope = Rope(len(x[0]), len(x[0]), neox, tuple(inv), 1.0)
        first = rope.pairs()[:, 0]
        out[:, first] = reference_rotate(
            np.asarray(x, np.float64)[:, None, :], pos, replace(rope, inv_freq=tuple(-inv))
        )[:, 0, first]
    if reuse_turned:  # the second of each pair computed from the first already turned, in place
        rope = Rope(len(x[0]), len(x[0]), neox, tuple(inv), 1.0)
        a, b = rope.pairs()[:, 0], rope.pairs()[:, 1]
        theta = np.asarray(pos, np.float64)[:, None] * inv[None, :]
        xb = np.asarray(x, np.float64)[:, b]
        out[:, b] = out[:, a] * np.sin(theta) + xb * np.cos(theta)
    if halves and not neox:  # GPT-J pairs turned right, written back as halves [a' | b']
        out = np.concatenate([out[:, 0::2], out[:, 1::2]], axis=1)
    return out


MISTAKES = {
    "positions_float16": (
        dict(positions_in=np.float16),
        "the positions went through float16, which holds integers exactly only up to 2048: keep them as "
        "integers (or float64) until the angle positions[t] * inv_freq[i] is computed. In the engine every token past 2048 would be turned as its rounded neighbour: long prompts go wrong.",
    ),
    "pairs_swapped": (
        dict(pairs_swapped=True),
        "you paired the other way: NeoX pairs x[i] with x[i + D/2] (the two halves of the head), "
        "GPT-J pairs neighbours x[2i] with x[2i + 1]. Read is_neox. In the engine every q and k would turn the pairs the model never learned: fluent, wrong answers.",
    ),
    "token_index": (
        dict(index=True),
        "you turned token t by its index t, not by positions[t]: in a decode step token 0 may sit at "
        "position 4,000. Index the angles by positions. In the engine every decode token would be turned as position 0: the model forgets where it is.",
    ),
    "position_off_by_one": (
        dict(shift=1),
        "you turned every token one position too far (positions + 1): position 0 must come back unchanged. In the engine every token would sit one place later than it is: the answer drifts.",
    ),
    "rotation_sign": (
        dict(sign=-1.0),
        "you turned the wrong way (by -theta): the pair becomes (a cos - b sin, a sin + b cos). In the engine q and k would turn backwards, as if every position were negative: a different, wrong model.",
    ),
    "reused_turned_a": (
        dict(reuse_turned=True),
        "the second of each pair was computed from the first one already turned (x changed in place, or "
        "out[:, a] read back): compute both from the original a and b (a, b = x[:, a].copy(), x[:, b].copy()). "
        "In the engine every k would be turned by a wrong, stretched rotation and attention would read noise.",
    ),
    "gptj_halves": (
        dict(halves=True),
        "with GPT-J pairs you turned each pair (2i, 2i + 1) right but wrote the results back as two halves "
        "[a' | b']: write each turned pair back where it came from, interleaved: out[:, 0::2] = a', "
        "out[:, 1::2] = b'. In the engine every q and k would come out in NeoX's layout while the model reads "
        "GPT-J's: dimensions swapped, attention reads noise.",
    ),
    "rotate_half_sign": (
        dict(half_sign=True),
        "the first of each pair lost its minus sign: it is a cos - b sin, you computed a cos + b sin. In the engine no two tokens would keep their relative angle: attention loses position.",
    ),
}


def cases() -> list[tuple[str, dict]]:
    """The table the checker runs first: named, smallest first."""
    rng = np.random.default_rng(1)
    smol = plain(64, 100000.0).inv_freq  # SmolLM2's head: D = 64, rope_base 100,000
    return [
        (
            "position 0 turns nothing",
            dict(
                x=rng.standard_normal((2, 4)),
                positions=np.array([0, 0]),
                inv_freq=plain(4, 10000.0).inv_freq,
                is_neox=True,
            ),
        ),
        (
            "one pair (D = 2) at position 1",
            dict(x=np.array([[1.0, 0.0]]), positions=np.array([1]), inv_freq=(1.0,), is_neox=True),
        ),
        (
            "NeoX pairs, D = 8, scattered positions",
            dict(
                x=rng.standard_normal((5, 8)),
                positions=np.array([0, 1, 5, 2, 40]),
                inv_freq=plain(8, 10000.0).inv_freq,
                is_neox=True,
            ),
        ),
        (
            "GPT-J pairs, D = 8",
            dict(
                x=rng.standard_normal((4, 8)),
                positions=np.array([3, 0, 7, 1]),
                inv_freq=plain(8, 10000.0).inv_freq,
                is_neox=False,
            ),
        ),
        (
            "SmolLM2's head (D = 64, base 100,000), NeoX, a decode at position 4,000",
            dict(x=rng.standard_normal((1, 64)), positions=np.array([4000]), inv_freq=smol, is_neox=True),
        ),
        (
            "SmolLM2's head, GPT-J pairs (its GGUF rows)",
            dict(x=rng.standard_normal((3, 64)), positions=np.array([10, 11, 12]), inv_freq=smol, is_neox=False),
        ),
    ]


def workload(n: int = 40, seed: int = 0) -> list[tuple[str, dict]]:
    """``n`` random cases: T 1-6 tokens, D 2-128, positions up to 8,192, either pairing."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        T, D = int(rng.integers(1, 7)), int(rng.choice([2, 4, 8, 16, 64, 128]))
        base = float(rng.choice([10000.0, 100000.0, 500000.0]))
        out.append(
            (
                f"random {i}",
                dict(
                    x=rng.standard_normal((T, D)),
                    positions=rng.integers(0, 8192, T),
                    inv_freq=plain(D, base).inv_freq,
                    is_neox=bool(rng.integers(2)),
                ),
            )
        )
    return out


def _rope(c: dict) -> Rope:
    D = c["x"].shape[1]
    return Rope(D, D, bool(c["is_neox"]), tuple(np.asarray(c["inv_freq"], np.float64)), 1.0)


def _close(got, want, c: dict) -> bool:
    """Within :mod:`ropepool.tolerance`'s float32 bound: float32 math passes as well as float64."""
    return (
        error_ratio(got[:, None, :], want[:, None, :], c["x"][:, None, :], c["positions"], "float32", rope=_rope(c))
        <= 1
    )


def _describe(c: dict) -> str:
    T, D = c["x"].shape
    pos = np.asarray(c["positions"]).tolist()
    return (
        f"x [T={T}, D={D}], positions {pos if T <= 6 else pos[:6] + ['...']}, "
        f"is_neox={c['is_neox']} ({'NeoX' if c['is_neox'] else 'GPT-J'} pairs)"
    )


def check(rotate: Callable) -> object:
    """Run ``rotate`` on the table cases, then a random workload, against the float64 reference.

    Raises :class:`~ropepool.teaching.feedback.ExerciseFailed` naming the first wrong case: its input, the
    expected and returned value of its first wrong element, and the likely mistake.
    """
    __tracebackhide__ = True  # a failing check shows the learner's frames, not the checker's
    for name, c in cases() + workload():
        with showing(lambda: _describe(c)):
            x = c["x"].copy()
            got = call(
                PART,
                rotate,
                x,
                np.asarray(c["positions"]).copy(),
                np.array(c["inv_freq"]),
                c["is_neox"],
                what=f"rotate(...) on '{name}'",
                first=FIRST,
            )
            changed = not np.array_equal(x, c["x"])
            if changed and got is None:  # nothing else to compare
                raise _modified(name, c, "x changed in place")
            want = reference(c["x"], c["positions"], c["inv_freq"], c["is_neox"])
            if got is None:
                raise wrong_case(
                    PART,
                    "returned_none",
                    name,
                    _describe(c),
                    f"an array {want.shape}",
                    "None",
                    "did the function forget `return`?",
                )
            try:
                arr = np.asarray(got)
            except (ValueError, TypeError) as e:  # a ragged list, an object numpy cannot read
                arr = None
                reason = f"{type(got).__name__} numpy cannot read ({e})"
            if arr is not None and (np.iscomplexobj(arr) or arr.dtype.kind not in "fiu"):
                reason = f"{arr.dtype} values"
                arr = None
            if arr is None:
                raise wrong_case(
                    PART,
                    "not_real",
                    name,
                    _describe(c),
                    f"a real array {want.shape} (float32 or float64)",
                    reason,
                    "return real numbers: each pair turns to (a cos - b sin, a sin + b cos) on real arrays; a complex "
                    "number's real part is only half of a pair.",
                )
            if arr.dtype == np.float16:
                raise wrong_case(
                    PART,
                    "float16_result",
                    name,
                    _describe(c),
                    "float32 or float64 values",
                    "float16 values",
                    "float16 keeps 11 bits, too few for RoPE at large positions: compute and return float32 or float64.",
                )
            got = arr.astype(np.float64)
            if got.shape != want.shape:
                raise wrong_case(
                    PART,
                    "shape",
                    name,
                    _describe(c),
                    f"shape {want.shape}",
                    f"shape {got.shape}",
                    "the rotated head keeps x's shape [T, D].",
                )
            if _close(got, want, c):
                if changed:
                    raise _modified(name, c, "x changed in place (the values returned are right)")
                continue
            bad = np.argwhere(~(np.abs(got - want) <= _bound(c)))
            t, d = (
                int(a) for a in (bad[0] if len(bad) else np.unravel_index(np.argmax(np.abs(got - want)), got.shape))
            )
            problem, hint = (
                "mismatch",
                (
                    f"element [{t}, {d}] is off; with {'NeoX' if c['is_neox'] else 'GPT-J'} "
                    f"pairs dimension {d} pairs with {_partner(d, c)}."
                ),
            )
            for code, (knobs, message) in MISTAKES.items():
                if _close(got, _mistake(c["x"], c["positions"], c["inv_freq"], c["is_neox"], **knobs), c):
                    problem, hint = code, message
                    break
            else:
                problem, hint = _probe(rotate, c, t) or (problem, hint)
            if changed:
                hint += " Your rotate also changed x in place: return a new array."
            raise wrong_case(
                PART,
                problem,
                name,
                _describe(c),
                f"out[{t}, {d}] = {want[t, d]:.6g}",
                f"out[{t}, {d}] = {got[t, d]:.6g}",
                hint,
            )
    return passed(
        PART,
        f"rotate matches the float64 reference on {len(cases())} table cases and "
        f"{len(workload())} random ones, NeoX and GPT-J pairs.",
    )


def _modified(name: str, c: dict, got: str):
    return wrong_case(
        PART,
        "modified_input",
        name,
        _describe(c),
        "x unchanged",
        got,
        "return a new array: the model still needs its k after you rotate it.",
    )


def _bound(c) -> np.ndarray:
    x = np.asarray(c["x"], np.float64)[:, None, :]
    r = np.maximum(pair_norms(x, _rope(c)).max(axis=(1, 2)), np.abs(x).max(axis=(1, 2)))  # [T]
    return error_bound("float32", c["positions"], r)[:, None]  # [T, 1]


#: problem codes of :func:`_probe`: where a rotation first differs on unit vectors, said with its numbers
DIFFERENCES = ("untouched", "wrong_frequency", "differs")


def _linear_map(rotate: Callable, c: dict, position: int) -> np.ndarray | None:
    """``M [D, D]``, ``M[d]`` = what ``rotate`` makes of the unit vector e_d at ``position`` (one token each);
    None if the learner's code raises or returns something else."""
    D = c["x"].shape[1]
    try:
        out = rotate(np.eye(D), np.full(D, position), np.array(c["inv_freq"]), c["is_neox"])
        out = np.asarray(out, np.float64)
    except Exception:  # judged already on the case that failed; here only a finer description is sought
        return None
    return out if out.shape == (D, D) else None


def _probe(rotate: Callable, c: dict, t: int) -> tuple[str, str] | None:
    """(problem, the difference) shrunk to one token and unit vectors: which output dimensions are wrong,
    which right, and for a wrong one the angle it turns by (the inv_freq entry it matches); None if the
    part agrees with the reference on unit vectors (its mistake needs the case's own x)."""
    D, neox = c["x"].shape[1], bool(c["is_neox"])
    inv = np.asarray(c["inv_freq"], np.float64)
    kind = "NeoX" if neox else "GPT-J"
    for position in sorted({1, int(np.asarray(c["positions"])[t])}):
        got = _linear_map(rotate, c, position)
        want = reference(np.eye(D), np.full(D, position), inv, neox)
        if got is None:
            return None
        wrong = [j for j in range(D) if not np.allclose(got[:, j], want[:, j], atol=1e-5)]
        if wrong:
            break
    else:
        return None
    pair = (lambda j: j % (D // 2)) if neox else (lambda j: j // 2)

    def where(j: int) -> str:
        first = j < D // 2 if neox else j % 2 == 0
        return f"out[:, {j}] (pair {pair(j)}, {'first' if first else 'second'})"

    right = [j for j in range(D) if j not in wrong]
    said = (
        f"with {kind} pairs at position {position}, unit vectors x = e_d: {_dims(wrong)} wrong, "
        f"{_dims(right) if right else 'none'} right."
    )
    untouched = [j for j in wrong if np.allclose(got[:, j], np.eye(D)[:, j], atol=1e-5)]
    if untouched:
        return (
            "untouched",
            f"{said} Left untouched (out = x there): {_dims(untouched)}; each pair turns, both its dims.",
        )
    j = wrong[0]
    angle = np.arccos(np.clip(got[j, j], -1, 1))
    k = [i for i in range(D // 2) if abs(position * inv[i] - angle) < 1e-6]
    said += f" {where(j)} = {_combination(got[:, j])}; want {_combination(want[:, j])}."
    if k and k[0] != pair(j):
        uses = [
            next(
                (i for i in range(D // 2) if abs(position * inv[i] - np.arccos(np.clip(got[d, d], -1, 1))) < 1e-6), None
            )
            for d in range(D)
        ]
        said += f" It turns by inv_freq[{k[0]}]'s angle, not its pair's inv_freq[{pair(j)}]: the frequency is wrong."
        if uses == [d % (D // 2) for d in range(D)] and not neox:
            said += (
                " Your dimension d turns at inv_freq[d % (D/2)] (inv_freq tiled, as NeoX's halves use it); with "
                "GPT-J pairs dims 2i and 2i + 1 share inv_freq[i]: np.repeat(inv_freq, 2)."
            )
        return "wrong_frequency", said
    return "differs", said


def _dims(ds: list[int]) -> str:
    """Dimensions as runs: "dims 0-3, 6"."""
    runs, start = [], None
    for i, d in enumerate(ds):
        if start is None:
            start = d
        if i + 1 == len(ds) or ds[i + 1] != d + 1:
            runs.append(f"{start}-{d}" if d > start else f"{d}")
            start = None
    return ("dim " if len(ds) == 1 else "dims ") + ", ".join(runs)


def _combination(col: np.ndarray) -> str:
    """A column of a linear map as "0.54 x[0] - 0.84 x[4]" (terms under 1e-6 left out)."""
    terms = [f"{'-' if v < 0 else '+'} {abs(v):.3g} x[{d}]" for d, v in enumerate(col) if abs(v) > 1e-6]
    return (" ".join(terms) or "0").lstrip("+ ")


def _partner(d: int, c) -> int:
    D = c["x"].shape[1]
    if c["is_neox"]:
        return d + D // 2 if d < D // 2 else d - D // 2
    return d ^ 1
