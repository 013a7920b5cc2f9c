"""One checked exercise at the end of each of notebooks 00-05 and 03b, in the style of 06's checkers.

=========  ====================================================  ===============================
 checker    the exercise                                          the answer
=========  ====================================================  ===============================
 ``n00``    00, ex. 1: rows that change with slots [5, -1, 6]     a list of rows
 ``n01``    01, ex. 2: Qwen2.5-7B's query heads on KV head 2       a list of query heads
 ``n02``    02, ex. 1: int64 positions and a k with 4 heads       the error code that fires
 ``n03``    03, ex. 1: first pair (D=128, base 1e4) whose         a pair index i
            wavelength exceeds 8,192 positions
 ``n03b``   03b: first pair whose frequency Qwen2.5-7B's YaRN     a pair index i
            changes
 ``n04``    04, ex. 1: rows of Llama-3-8B's cache in 16 GiB,      a number of rows
            32 layers, bfloat16
 ``n05``    05, ex. 2: threads of one Llama-3-70B decode step     a number of threads
            with 64 requests
=========  ====================================================  ===============================

Each checker computes the right answer from the package (the op, the presets, the reference),
never from a stored constant, and returns a :class:`~ropepool.teaching.exercises.Verdict` or raises
:class:`~ropepool.teaching.exercises.ExerciseFailed` naming the likely mistake. Run one in a notebook with
``exercises.feedback(notebook_exercises.n00, answer)``: the learner's ``None`` reads "not yet".

Example
-------
>>> from ropepool.teaching.exercises import feedback
>>> feedback(n01, list(range(14, 21))).passed
True
>>> feedback(n01, None).problem
'unanswered'
"""

from __future__ import annotations

import numpy as np

from .. import models
from ..errors import CODES, RopePoolError
from .feedback import ExerciseFailed, Verdict
from ..inputs import make_inputs
from ..kernels.source import grid_size
from ..op import rope_pool_fused
from ..reference import inverse_frequencies
from ..shapes import Shapes
from .viz.gqa import kv_head_of


def _answered(label: str, answer):
    if answer is None:
        raise ExerciseFailed(label, "unanswered", "replace None with your answer, then run the cell again.")
    return answer


def _int(label: str, answer) -> int:
    answer = _answered(label, answer)
    if isinstance(answer, bool) or not isinstance(answer, (int, np.integer)):
        raise ExerciseFailed(label, "not_int", f"answer with a whole number, got {answer!r}.")
    return int(answer)


def n00(rows) -> Verdict:
    """00, exercise 1: the pool rows that change with ``slots=[5, -1, 6]`` (00's tiny call)."""
    rows = sorted(int(r) for r in _answered("00.1", rows))
    shapes = Shapes(tokens=3, num_qo_heads=4, num_kv_heads=2, head_dim=8, pool_rows=8)
    kw = make_inputs(shapes, "float32", kind="numpy", slots=[5, -1, 6])
    _, _, k_pool, _ = rope_pool_fused(**kw)
    want = np.flatnonzero(np.any(np.asarray(k_pool) != kw["k_pool"], axis=(1, 2))).tolist()  # [P] -> rows
    if rows == want:
        return Verdict("00.1", True, f"rows {want} change; the token with slot -1 writes nothing.")
    if rows == [1, 5, 6]:
        raise ExerciseFailed(
            "00.1",
            "earlier_call",
            "you said [1, 5, 6]: those are the rows of the call above, "
            "slots [5, 1, 6]. This call has slots [5, -1, 6]: which rows does slot -1 write?",
        )
    if 7 in rows:
        raise ExerciseFailed(
            "00.1",
            "negative_index",
            f"you said {rows}: slot -1 is not Python's last row; the op skips that token, so it writes nothing.",
        )
    raise ExerciseFailed(
        "00.1",
        "wrong_rows",
        f"you said {rows}; token t writes row slots[t], so run the call and look at the 'rows that changed' cell.",
    )


def n01(heads) -> Verdict:
    """01, exercise 2: the query heads of Qwen2.5-7B that share KV head 2."""
    heads = sorted(int(h) for h in _answered("01.2", heads))
    p = models.preset("qwen2.5-7b")
    kv_of = kv_head_of(p.num_qo_heads, p.num_kv_heads)  # [Hq]
    want = np.flatnonzero(kv_of == 2).tolist()
    if heads == want:
        return Verdict(
            "01.2",
            True,
            f"query heads {want[0]}..{want[-1]}: G = {p.group_size}, so KV head 2 serves heads 2*G to 3*G - 1.",
        )
    G = p.group_size
    for g in (4, 8):  # a group size remembered from another model
        if g != G and heads == list(range(2 * g, 3 * g)):
            raise ExerciseFailed(
                "01.2",
                "wrong_group_size",
                f"you used G = {g}: Qwen2.5-7B has Hq = "
                f"{p.num_qo_heads} and Hkv = {p.num_kv_heads}, so G = {p.num_qo_heads} // "
                f"{p.num_kv_heads} = {G}.",
            )
    for kv in (1, 3):
        if heads == list(range(kv * G, (kv + 1) * G)):
            raise ExerciseFailed(
                "01.2",
                "off_by_one",
                f"those are the heads of KV head {kv}: KV heads count from "
                f"0, so KV head 2 serves heads 2*G = {2 * G} to 3*G - 1 = {3 * G - 1}.",
            )
    if heads and heads[0] in (2 * G, 2 * G + 1, 2 * G - 1) and len(heads) in (G - 1, G + 1):
        raise ExerciseFailed(
            "01.2",
            "off_by_one",
            f"you listed {len(heads)} heads: a group has exactly G = {G}, "
            f"heads 2*G = {2 * G} up to 3*G - 1 = {3 * G - 1} (range(14, 21) stops before 21).",
        )
    if heads == [h for h in range(p.num_qo_heads) if h % p.num_kv_heads == 2]:
        raise ExerciseFailed(
            "01.2",
            "interleaved",
            f"you picked every {p.num_kv_heads}th head (h % Hkv == 2): "
            "groups are contiguous, query head h reads KV head h // G.",
        )
    raise ExerciseFailed(
        "01.2",
        "wrong_heads",
        f"you said {heads}; query head h reads KV head h // G with "
        f"G = {p.group_size}: check with kv_head_of({p.num_qo_heads}, {p.num_kv_heads}).",
    )


def n02(code) -> Verdict:
    """02, exercise 1: the error code of a call with int64 positions and a k with 4 heads (Hkv = 2)."""
    code = _answered("02.1", code)
    shapes = Shapes(tokens=3, num_qo_heads=4, num_kv_heads=2, head_dim=8, pool_rows=6)
    kw = make_inputs(shapes, "float32", kind="numpy", slots=[0, 2, 4])
    kw["positions"] = np.asarray(kw["positions"]).astype(np.int64)
    kw["k"] = np.concatenate([kw["k"], kw["k"]], axis=1)  # [T, 4, D]: twice the KV heads
    try:
        rope_pool_fused(**kw)
    except RopePoolError as err:
        want = err.code
    else:  # pragma: no cover - the call is built to fail
        raise AssertionError("the exercise's call did not raise")
    if code == want:
        return Verdict(
            "02.1",
            True,
            f"{want}: the shapes are checked before the dtypes, in SGLang's order, "
            "so the first rule broken in that order is the one reported.",
        )
    if code not in CODES:
        raise ExerciseFailed(
            "02.1",
            "not_a_code",
            f"{code!r} is not an error code: answer with one from the "
            "table's code column, as a string (e.g. 'index_dtype').",
        )
    if code == "index_dtype":
        raise ExerciseFailed(
            "02.1",
            "second_rule",
            "int64 positions do break index_dtype, but the shapes are "
            "checked first, in SGLang's order: which shape rule does the call break?",
        )
    if code.endswith("_shape"):
        raise ExerciseFailed(
            "02.1",
            "wrong_array",
            f"{code}'s array is well formed here (q is [3, 4, 8]: Hq = 4 "
            "heads); look at the array the exercise changed: its heads against num_kv_heads = 2.",
        )
    raise ExerciseFailed(
        "02.1",
        "wrong_code",
        f"you said {code!r}; run the call: the checks run in the order "
        "of the catalog table (shapes before dtypes), and the first one that fails raises.",
    )


def _pair_verdict(label: str, pair: int, want: int, *, right: str, neighbour: str, wrong: str) -> Verdict:
    """The verdict on an answer that is a pair index: ``want`` passes with the message ``right``, its
    neighbours ``want - 1`` and ``want + 1`` fail as ``off_by_one`` with ``neighbour``, any other pair
    fails as ``wrong_pair`` with ``wrong``."""
    if pair == want:
        return Verdict(label, True, right)
    if abs(pair - want) == 1:
        raise ExerciseFailed(label, "off_by_one", neighbour)
    raise ExerciseFailed(label, "wrong_pair", wrong)


def n03(pair) -> Verdict:
    """03, exercise 1: the first pair i (D = 128, base 10,000) whose wavelength exceeds 8,192 positions."""
    pair = _int("03.1", pair)
    wavelength = 2 * np.pi / inverse_frequencies(128, 10000.0)  # [D/2]
    want = int(np.argmax(wavelength > 8192))
    if not 0 <= pair < len(wavelength):
        raise ExerciseFailed(
            "03.1",
            "out_of_range",
            f"there is no pair {pair}: D = 128 has the pairs i = 0..{len(wavelength) - 1}.",
        )
    return _pair_verdict(
        "03.1",
        pair,
        want,
        right=f"pair {want}: wavelength {wavelength[want]:,.0f} positions, pair "
        f"{want - 1}'s is {wavelength[want - 1]:,.0f}.",
        neighbour=f"pair {pair} has wavelength {wavelength[pair]:,.0f}: "
        "close, but the first pair over 8,192 is its neighbour.",
        wrong=f"pair {pair} has wavelength {wavelength[pair]:,.0f} positions; "
        "compute 2 * pi / inverse_frequencies(128, 10000.0) and find the first over 8,192.",
    )


def n03b(pair) -> Verdict:
    """03b, exercise: the first pair whose inverse frequency Qwen2.5-7B's YaRN scaling changes."""
    from ..rope import plain

    pair = _int("03b.1", pair)
    p = models.preset("qwen2.5-7b-yarn")
    changed = np.asarray(p.rope().inv_freq) != np.asarray(plain(p.head_dim, p.rope_base).inv_freq)  # [D/2]
    want = int(np.argmax(changed))
    if pair == 0 and want > 0:
        raise ExerciseFailed(
            "03b.1",
            "pair_zero",
            "pair 0 turns fastest, once every 2*pi positions: it has seen "
            "every angle many times in training, and YaRN keeps it as it was.",
        )
    return _pair_verdict(
        "03b.1",
        pair,
        want,
        right=f"pair {want}: pairs 0..{want - 1} turn more than 32 times (YaRN's "
        "beta_fast) within the training context, so YaRN leaves them as they were.",
        neighbour=f"pair {pair} is next to it: compare rope().inv_freq with "
        "plain(...).inv_freq and take the first index where they differ.",
        wrong=f"pair {pair}: compare models.preset('qwen2.5-7b-yarn').rope()"
        ".inv_freq with plain(128, 1e6).inv_freq and find the first index where they differ.",
    )


def n04(rows) -> Verdict:
    """04, exercise 1: pool rows (tokens) of Llama-3-8B's cache that fit in 16 GiB, 32 layers, bfloat16."""
    rows = _int("04.1", rows)
    p = models.preset("llama-3-8b")
    per_row = p.shapes(1, 1).pool_bytes("bfloat16")  # one row of the k and the v pool: 2 x [Hkv, D]
    want = 16 * 2**30 // (32 * per_row)  # 32 layers
    if rows == want:
        return Verdict("04.1", True, f"{want:,} rows: a row costs {per_row:,} bytes (k and v) in each of 32 layers.")
    if rows == 32 * want or rows == 16 * 10**9 // per_row:
        raise ExerciseFailed(
            "04.1",
            "one_layer",
            f"{rows:,} rows fit one layer's pools: each of the 32 layers has "
            "its own k and v pool, so divide by 32 as well.",
        )
    if rows == 16 * 10**9 // (32 * per_row):
        raise ExerciseFailed(
            "04.1",
            "gb_not_gib",
            f"{rows:,} uses 16 GB = 16 * 10**9 bytes: 16 GiB is 16 * 2**30 = {16 * 2**30:,} bytes.",
        )
    if rows == 2 * want:
        raise ExerciseFailed("04.1", "one_pool", f"{rows:,} counts only the k pool: v has a pool of the same size.")
    if rows == want // p.group_size:
        raise ExerciseFailed("04.1", "query_heads", "you sized rows with the query heads: a row holds Hkv heads.")
    raise ExerciseFailed(
        "04.1",
        "wrong_rows",
        f"{rows:,} rows; a row is [Hkv, D] = [{p.num_kv_heads}, "
        f"{p.head_dim}] bfloat16 (2 bytes), in a k and a v pool, in each of 32 layers.",
    )


def n05(threads) -> Verdict:
    """05, exercise 2: threads of one decode step of Llama-3-70B with 64 requests (one token each)."""
    threads = _int("05.2", threads)
    p = models.preset("llama-3-70b")
    want = grid_size(64, p.num_qo_heads, p.num_kv_heads, p.head_dim)
    if threads == want:
        return Verdict(
            "05.2",
            True,
            f"{want:,} threads: T = 64 tokens x (Hq + Hkv) = {p.num_qo_heads + p.num_kv_heads}"
            f" heads x D/2 = {p.head_dim // 2} pairs.",
        )
    if threads == 64 * p.num_qo_heads * p.head_dim // 2:
        raise ExerciseFailed("05.2", "q_only", "that counts q's heads only: k is rotated in the same launch.")
    if threads == 64 * (p.num_qo_heads + p.num_kv_heads) * p.head_dim:
        raise ExerciseFailed("05.2", "per_element", "one thread per element: a thread rotates a pair (i, i + D/2).")
    raise ExerciseFailed(
        "05.2",
        "wrong_count",
        f"{threads:,}; the grid is T * (Hq + Hkv) * D/2 with one token per request in a decode step.",
    )


CHECKS = {"00": n00, "01": n01, "02": n02, "03": n03, "03b": n03b, "04": n04, "05": n05}
