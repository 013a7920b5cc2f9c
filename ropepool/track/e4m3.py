"""Part 6: the FP8 e4m3 encoder for one row: round to nearest even, saturate, NaN kept.

The learner writes ``encode_e4m3(x) -> uint8 [n]`` for one row ``x`` (float32 ``[n]``): each value's
code ``S EEEE MMM`` (see :mod:`ropepool.fp8`). Checked against :func:`ropepool.reference.encode_e4m3`,
which finds the nearest code by search.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..fp8 import decode_table
from ..reference import encode_e4m3 as reference
from .feedback import call, passed, showing, wrong_case

PART = 6
FIRST = (
    "for each |x|, find the nearest value in ropepool.fp8.decode_table() among codes 0..0x7E (a tie "
    "goes to the even code), clip |x| to 448 first, set bit 0x80 when x is negative, and give NaN 0x7F (either sign)."
)


def cases() -> list[tuple[str, list[float]]]:
    """The table the checker runs first, each a short row."""
    return [
        ("zero and one", [0.0, 1.0]),
        ("negative zero keeps its sign bit", [-0.0]),
        ("a negative value", [-1.0, -2.5]),
        ("the largest finite value, 448", [448.0, -448.0]),
        ("past 448 saturates to 448", [449.0, 464.0, 1000.0, -1e6]),
        ("infinity saturates too", [np.inf, -np.inf]),
        ("NaN stays NaN: 0x7F, whatever its sign", [np.nan, -np.nan]),
        ("a tie between 1.0 and 1.125 goes to the even code (1.0)", [1.0625]),
        ("a tie between 1.125 and 1.25 goes to the even code (1.25)", [1.1875]),
        ("just past a tie rounds up", [float(np.nextafter(np.float32(1.0625), np.float32(2)))]),
        ("the smallest normal, 2**-6", [2.0**-6]),
        ("subnormals: steps of 2**-9", [2.0**-9, 3 * 2.0**-9, 2.0**-7]),
        ("a subnormal tie goes to the even code (0)", [2.0**-10]),
        ("a subnormal tie goes to the even code (2)", [3 * 2.0**-10]),
    ]


def workload(seed: int = 0) -> list[tuple[str, np.ndarray]]:
    """Rows of 64 (a head of SmolLM2): random magnitudes from 2**-12 to 2**10, every midpoint between
    two codes and the float32 values either side of it."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(8):
        mag = 2.0 ** rng.uniform(-12, 10, 64) * rng.choice([-1.0, 1.0], 64)
        rows.append((f"random row {i}", mag.astype(np.float32)))
    values = decode_table()[:0x7F].astype(np.float64)  # codes 0..0x7E
    mids = np.float32((values[:-1] + values[1:]) / 2)
    near = np.concatenate([mids, np.nextafter(mids, np.float32(0)), np.nextafter(mids, np.float32(1000))])
    for i in range(0, len(near), 64):
        rows.append((f"midpoints between codes, row {i // 64}", near[i : i + 64]))
    return rows


def _code(c: int) -> str:
    v = float(decode_table()[c])
    return f"0x{c:02X} ({'NaN' if np.isnan(v) else f'{v:.7g}'})"


def _on_grid(x: np.ndarray, steps: int, rounding) -> np.ndarray:
    """The codes of ``x`` (float32 [n]) rounded by ``rounding`` on a grid of ``steps`` values per power of
    two (subnormal steps of 2**-9 below 2**-6), saturated at 448, signed, NaN 0x7F."""
    with np.errstate(invalid="ignore", over="ignore"):
        mag = np.minimum(np.abs(x.astype(np.float64)), 448.0)
        _, e = np.frexp(mag)
        step = np.where(mag < 2.0**-6, 2.0**-9, np.ldexp(1.0, e - 1 - int(np.log2(steps))))
        on = np.minimum(np.where(np.isnan(x), 0.0, rounding(mag / step) * step), 448.0)
    code = np.searchsorted(decode_table()[:0x7F], on) | (np.signbit(x).astype(np.int64) << 7)
    return np.where(np.isnan(x), 0x7F, code).astype(np.uint8)


def _through_float16(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return reference(x.astype(np.float16).astype(np.float32))


#: problem -> (what the mistake's encoder gives for a row, its hint), in the order they are tried.
MISTAKES = {
    "fnuz_240": (
        lambda x: reference(np.clip(x, np.float32(-240), np.float32(240))),
        "you saturated at 240, the largest value of AMD's e4m3fnuz; this pool's e4m3 (OCP, NVIDIA's, vLLM's "
        "fp8_e4m3) goes up to 448 (code 0x7E). In the engine every k and v beyond 240 would be stored as 240: "
        "the large outlier channels cut to about half.",
    ),
    "float16_first": (
        _through_float16,
        "you rounded through float16 first: a value just past halfway between two codes lands exactly on the "
        "midpoint in float16, then goes to the even code, one code off (a double rounding). Round the float32 "
        "value itself. In the engine about one value in a few hundred would be one code (up to 12%) off.",
    ),
    "two_mantissa_bits": (
        lambda x: _on_grid(x, 4, np.rint),
        "you rounded to two mantissa bits (4 steps per power of two, e5m2's grid): e4m3 has three (8 steps, "
        "codes 0..7 in the low bits). In the engine half the codes would go unused and every k and v would "
        "carry up to twice the rounding error e4m3 allows.",
    ),
    "tie_to_smaller": (
        lambda x: _on_grid(x, 8, lambda y: np.ceil(y - 0.5)),
        "your codes differ from the right ones only where |x| lies exactly halfway between two codes, and "
        "there you took the smaller: a tie goes to the even code (mantissa's last bit 0), which is the larger "
        "one half the time (np.argmin and a strict < both keep the first, smaller one). In the engine the "
        "pool's bytes would differ from vLLM's and NVIDIA's at every tie, and values drift toward zero.",
    ),
    "truncates": (
        lambda x: _on_grid(x, 8, np.floor),
        "you rounded toward zero (dropped the low bits): round to the nearest code, a tie going to the even "
        "one. In the engine every k and v would shrink toward zero by half a step on average: a bias, not noise.",
    ),
}


def _recognise(encode_e4m3: Callable, rows: list[np.ndarray]) -> tuple[str, str] | None:
    """The mistake in :data:`MISTAKES` whose encoder gives the learner's codes on every value of ``rows`` the
    learner gets wrong, and is wrong itself mostly there (at least half its wrong codes are the learner's:
    a mistake that would also get many values wrong that the learner gets right is another mistake); None
    if none fits (or the learner's code raises)."""
    for problem, (encode, hint) in MISTAKES.items():
        if behaves_as(encode, encode_e4m3, rows):
            return problem, hint
    return None


def behaves_as(mistake: Callable, encode_e4m3: Callable, rows: list[np.ndarray]) -> bool:
    """True where ``mistake``'s encoder gives the learner's codes on every value of ``rows`` the learner gets
    wrong, and is wrong itself mostly there (at least half its wrong codes are the learner's)."""
    x = np.concatenate(rows).astype(np.float32)
    try:
        got = np.asarray(encode_e4m3(x.copy()))
    except Exception:  # judged already on the row that failed; here only a better hint is sought
        return False
    want = reference(x)
    if got.shape != want.shape:
        return False
    wrong, theirs = got != want, mistake(x)
    return bool(wrong.any()) and np.array_equal(theirs[wrong], got[wrong]) and 2 * wrong.sum() >= (theirs != want).sum()


#: ranges of |x| the difference is told by: (name, lowest |x|, highest |x|)
RANGES = (
    ("zero", 0.0, 0.0),
    ("the subnormal range (0 < |x| < 2**-6 = 0.015625: codes 1-7, steps of 2**-9)", 1e-45, 2.0**-6 * (1 - 2**-24)),
    ("the normal range (2**-6 <= |x| <= 448)", 2.0**-6, 448.0),
    ("beyond 448 (saturating to 448)", 448.0 * (1 + 2**-23), np.inf),
)


def _difference(encode_e4m3: Callable, rows: list[np.ndarray]) -> str | None:
    """Where and which way the learner's codes differ from the reference on every value of ``rows``: the
    ranges of |x| with wrong codes, too large or too small and by about what factor, and the ranges right."""
    x = np.concatenate(rows).astype(np.float32)
    try:
        got = np.asarray(encode_e4m3(x.copy())).astype(np.int64)
    except Exception:  # judged already on the row that failed; here only a finer description is sought
        return None
    want = reference(x).astype(np.int64)
    if got.shape != want.shape:
        return None
    table = decode_table().astype(np.float64)
    a = np.abs(x.astype(np.float64))
    said, right = [], []
    for name, lo, hi in RANGES:
        inside = (a >= lo) & (a <= hi) & ~np.isnan(a)
        wrong = inside & (got != want)
        if not inside.any():
            continue
        if not wrong.any():
            right.append(name)
            continue
        g, w = np.abs(table[got[wrong] & 0xFF]), np.abs(table[want[wrong]])
        if not g.any():
            j = int(np.argmax(a[wrong]))
            said.append(
                f"{int(wrong.sum())} of the {int(inside.sum())} values in {name} are flushed to 0: |x| from "
                f"{a[wrong].min():.7g} to {a[wrong][j]:.7g} (|x| = {a[wrong][j]:.7g} wants {w[j]:.7g}), while "
                f"{int((inside & ~wrong & (want & 0x7F > 0)).sum())} values there keep their codes"
            )
            continue
        bigger, smaller = int((g > w).sum()), int((g < w).sum())
        way = "too large" if bigger and not smaller else "too small" if smaller and not bigger else "off both ways"
        i = int(np.argmin(np.where(w > 0, a[wrong], np.inf))) if (w > 0).any() else int(np.argmin(a[wrong]))
        ratio = g[i] / w[i] if w[i] else np.inf
        factor = f", about {ratio:.3g}x" if np.isfinite(ratio) and way != "off both ways" else ""
        said.append(
            f"{int(wrong.sum())} of the {int(inside.sum())} values in {name} get codes {way}{factor} "
            f"(the smallest: |x| = {a[wrong][i]:.7g} gets {g[i]:.7g}, want {w[i]:.7g})"
        )
    if not said:
        return None
    every = (got != want) & ~np.isnan(x)  # each wanted code a power of two above the subnormals: a lost carry
    if every.any() and ((want[every] & 0x7F) > 0x07).all() and not (want[every] & 0x07).any():
        said.append(
            "every one of them should round up to a power of two (mantissa 0, the exponent one higher): a "
            "mantissa that rounds up to 8 must carry into the exponent, not stop at 7 or vanish (round the value "
            "on its exponent's grid, then read the code of the result)"
        )
    engine = (
        " In the engine those k and v values would be stored as 0."
        if all("flushed to 0" in x for x in said)
        else " In the engine those k and v values would be stored off by that much: a bias in every attention score that reads them."
    )
    return "; ".join(said) + (f". Right: {', '.join(right)}." if right else ".") + engine


def _rule_fits(problem: str, encode_e4m3: Callable, rows: list[np.ndarray]) -> bool:
    """True where the catalogued mistake of the hint a value's rule chose (``mistakes.BY_PART``) behaves as the
    learner's encoder on ``rows`` (:func:`behaves_as`); a code with no catalogued encoder (``not_nearest``)
    never does: its difference is said instead."""
    from .mistakes import BY_PART

    mistake = BY_PART[PART].get(problem)
    return mistake is not None and behaves_as(mistake, encode_e4m3, rows)


def _sign_impact(encode_e4m3: Callable, rows: list[np.ndarray]) -> str:
    """What the learner's wrong sign bits do in the engine, from its codes for every value of ``rows``:
    nonzero values stored with the other sign flip attention scores; a zero's sign alone changes no value,
    only the byte. Empty when the encoder cannot be run on them all at once."""
    x = np.concatenate(rows).astype(np.float32)
    try:
        got = np.asarray(encode_e4m3(x.copy())).astype(np.int64)
    except Exception:  # judged already on the row that failed; here only the consequence is sought
        return ""
    want = reference(x).astype(np.int64)
    if got.shape != want.shape:
        return ""
    flipped = ((got ^ want) & 0x80).astype(bool) & ~np.isnan(x)
    nonzero = (want & 0x7F) != 0
    negative = nonzero & (want >= 0x80)
    said = []
    for name, which in (("negative", negative), ("positive", nonzero & ~negative)):
        n = int((flipped & which).sum())
        if n:
            other = "positive" if name == "negative" else "negative"
            said.append(f"{n} of the {int(which.sum())} nonzero {name} values here are stored {other}")
    if said:
        return f"In the engine {' and '.join(said)}: their k or v changes sign, and so do attention scores."
    zeros = flipped & ~nonzero
    lost, gained = int((zeros & (want >= 0x80)).sum()), int((zeros & (want < 0x80)).sum())
    which = [
        f"{n} value{'s' * (n != 1)} whose code is {w} stored as {g}"
        for n, w, g in ((lost, "-0 (0x80)", "+0 (0x00)"), (gained, "+0 (0x00)", "-0 (0x80)"))
        if n
    ]
    return (
        f"Only zero's sign is wrong: {' and '.join(which)}; all {int(nonzero.sum())} nonzero values here keep "
        "their sign. In the engine no attention score changes value (+0 and -0 are the same 0): only the pool's "
        "byte for zero differs from vLLM's and NVIDIA's."
    )


def _hint(x: float, want: int, got: int, bits: int) -> tuple[str, str]:
    """(problem, hint) for the first wrong element; ``bits`` is x's float32 bit pattern."""
    table = decode_table()
    a, g, w = abs(x), float(table[got]) if got < 256 else np.nan, float(table[want])
    if np.isnan(x) and got == 0xFF and np.signbit(x):
        return "nan_sign", (
            f"this NaN has its sign bit set (bits 0x{bits:08X}; it prints as plain 'nan', the sign does not "
            "show): np.signbit is True for it, so putting the sign back gave 0xFF. NaN of either sign is 0x7F: "
            "set NaN's code after the sign. In the engine the pool's byte would differ from vLLM's and NVIDIA's."
        )
    if np.isnan(x):
        return "nan_lost", (
            "NaN must stay NaN: code 0x7F, whatever its sign (NVIDIA's conversion and vLLM write 0x7F). "
            "(MLX's own mx.to_fp8 turns NaN into 448: that hides a bug upstream.) In the engine a NaN from a "
            "broken layer would be stored as a number and go unseen."
        )
    if (got & 0x80) != (want & 0x80):
        return "sign", "the sign bit (0x80) must be x's sign bit, -0.0 included (np.signbit)."
    if got == want | 0x7F and a > 448:  # 0x7F or 0xFF: NaN given for a big value
        return "no_saturation", (
            "beyond 448 (infinity too) e4m3 saturates to 448, code 0x7E (0xFE negative): "
            "clip |x| to 448 before rounding; 0x7F is NaN, not a bigger number. In the engine a large k or v "
            "would become NaN and spread through attention."
        )
    if a > 448:
        return "no_saturation", (
            "beyond 448 (infinity too) e4m3 saturates to 448, code 0x7E (0xFE negative): clip |x| to 448 "
            "before rounding; 0x7F is NaN, not a bigger number."
        )
    if a < 2.0**-6 and got & 0x7F == 0 and want & 0x7F:
        return "subnormals_flushed", (
            "below 2**-6 e4m3 still has subnormal codes 1..7 (M * 2**-9): don't flush them to zero. In the "
            "engine small k and v values would become 0."
        )
    lo, hi = sorted((abs(g), abs(w)))
    if lo < a < hi and a - lo == hi - a and abs(g) > abs(w):
        return "tie_not_even", (
            f"|x| = {a:.7g} lies exactly halfway between two codes: a tie goes to the even "
            "code (mantissa's last bit 0), not away from zero. In the engine the pool's bytes would differ "
            "from vLLM's and NVIDIA's at every tie, and values drift away from zero."
        )
    return "not_nearest", f"the nearest code to |x| = {a:.7g} is {_code(want & 0x7F)}."


def check(encode_e4m3: Callable) -> object:
    """Run ``encode_e4m3`` on the table's rows, then on rows of random values and of midpoints between codes.

    Raises :class:`~ropepool.teaching.feedback.ExerciseFailed` naming the first wrong element: the value, the
    code expected, the code returned, and the likely mistake.
    """
    __tracebackhide__ = True  # a failing check shows the learner's frames, not the checker's
    table, rows = cases(), workload()
    for name, row in [(n, np.array(r, np.float32)) for n, r in table] + rows:
        with showing(
            lambda: (
                f"x = {np.array2string(row[:6], precision=7)}{' ...' if len(row) > 6 else ''} (float32 [{len(row)}])"
            )
        ):
            x = row.copy()
            got = call(PART, encode_e4m3, x, what=f"encode_e4m3(...) on '{name}'", first=FIRST)
            given = (
                f"x = {np.array2string(row[:6], precision=7)}{' ...' if len(row) > 6 else ''} (float32 [{len(row)}])"
            )
            want = reference(row)
            if not np.array_equal(x, row, equal_nan=True):
                raise wrong_case(
                    PART,
                    "modified_input",
                    name,
                    given,
                    "x unchanged",
                    "x changed in place",
                    "return a new uint8 array; the row is still the model's.",
                )
            if got is None:
                raise wrong_case(
                    PART,
                    "returned_none",
                    name,
                    given,
                    f"uint8 codes {want.tolist()[:6]}",
                    "None",
                    "did the function forget `return`?",
                )
            try:
                got = np.asarray(got)
            except (TypeError, ValueError):  # ragged or unreadable: shown below as what came back
                got = np.asarray(None, object)
            if got.shape != want.shape or got.dtype != np.uint8:
                raise wrong_case(
                    PART,
                    "dtype_or_shape",
                    name,
                    given,
                    f"uint8 [{len(row)}]",
                    f"{got.dtype} {list(got.shape)}",
                    "one uint8 code per value: .astype(np.uint8).",
                )
            bad = np.flatnonzero(got != want)
            if bad.size:
                i = int(bad[0])
                bits = int(row.view(np.uint32)[i])
                problem, hint = _hint(float(row[i]), int(want[i]), int(got[i]), bits)
                if problem not in ("nan_sign", "nan_lost", "sign"):
                    seen = [r for _, r in rows] + [row]
                    found = _recognise(encode_e4m3, seen)
                    if found is not None:
                        problem, hint = found
                    elif not _rule_fits(problem, encode_e4m3, seen):  # the rule's mistake is not this part's
                        hint = _difference(encode_e4m3, seen) or hint
                if problem == "sign":
                    hint += " " + _sign_impact(encode_e4m3, [np.array(r, np.float32) for _, r in table + rows])
                shown = f"{float(row[i])!r}" + (
                    f" (bits 0x{bits:08X}, sign bit {bits >> 31})" if np.isnan(row[i]) else ""
                )
                raise wrong_case(
                    PART,
                    problem,
                    name,
                    given + f", element {i}: x[{i}] = {shown}",
                    _code(int(want[i])),
                    _code(int(got[i])),
                    hint,
                )
    n = sum(len(r) for _, r in table) + sum(len(r) for _, r in rows)
    return passed(
        PART,
        f"encode_e4m3 gives the reference's code for all {n} values: {len(table)} table rows "
        f"(ties, subnormals, 448, infinity, NaN) and {len(rows)} rows of random values and midpoints.",
    )
