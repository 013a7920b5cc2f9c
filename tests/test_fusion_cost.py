"""ropepool.teaching.fusion_cost (notebooks 04 and 10) and the throughput helpers of 07 and 08: the unfused
composition computes the same op, bytes and evaluations are counted right, the pool formula holds."""

import mlx.core as mx
import numpy as np
import pytest

from ropepool import fp8
from ropepool.teaching import fusion_cost as fc
from ropepool.teaching import throughput as tp


@pytest.mark.parametrize("extras", [False, True], ids=["rope+write", "qknorm+rope+fp8+write"])
def test_unfused_computes_what_the_fused_call_computes(extras):
    """Timings mean nothing if the answers differ: same rows written, values within one rounding."""
    a = fc.decode_step(T=3, Hq=4, Hkv=2, D=16, P=8, dtype=mx.float32, fused_extras=extras)
    b = fc.decode_step(T=3, Hq=4, Hkv=2, D=16, P=8, dtype=mx.float32, fused_extras=extras)
    q1, k1, kp1, vp1 = (np.array(x) for x in fc.fused(a))
    evaluations = []
    q2, k2, kp2, vp2 = (np.array(x) for x in fc.unfused(b, evaluations))
    assert len(evaluations) == len(a.steps) == (7 if extras else 4)
    np.testing.assert_allclose(q1, q2, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(k1, k2, rtol=1e-4, atol=1e-4)
    written = np.array(a.slots)
    untouched = np.setdiff1d(np.arange(8), written)
    for p1, p2 in ((kp1, kp2), (vp1, vp2)):
        assert not p1[untouched].any() and not p2[untouched].any()
        if extras:  # e4m3 codes of nearly equal values: the same, or neighbours at a rounding boundary
            v1, v2 = fp8.decode_table()[p1[written]], fp8.decode_table()[p2[written]]
            np.testing.assert_allclose(v1, v2, rtol=1 / 8, atol=2.0**-9)
        else:
            np.testing.assert_allclose(p1[written], p2[written], rtol=1e-4, atol=1e-4)


def test_traffic_from_the_shapes():
    s = fc.decode_step(T=2, Hq=4, Hkv=2, D=8, P=4, dtype=mx.float16, fused_extras=True)
    t = fc.traffic(s)
    q, kv, codes = 2 * 4 * 8 * 2, 2 * 2 * 8 * 2, 2 * 2 * 8  # bytes: float16 q, k (or v), one pool's new codes
    assert t[fc.FUSED] == (q + 2 * kv + 2 * 8 * 2 + 2 * 2 * 4, q + kv + 2 * codes)
    assert t["FP8-encode k, v"] == (2 * kv, 2 * codes) and t["scatter v"] == (codes + 8, codes)
    assert sum(t[fc.UNFUSED]) > 2 * sum(t[fc.FUSED])


def test_measure_counts_and_races():
    cost = fc.measure(fc.decode_step(T=1, Hq=2, Hkv=1, D=8, P=4, fused_extras=False), rounds=2, calls=1)
    assert cost.evaluations == {fc.FUSED: 1, fc.UNFUSED: 4} and len(cost.ratios) == 2
    assert cost.spread[0] <= cost.ratio <= cost.spread[1] and all(v > 0 for v in cost.seconds.values())


@pytest.mark.parametrize(
    "lengths, rows, kw, want",
    [
        ([9, 7, 11], 16, {}, 48.0),  # notebook 07: three short requests, a 16-row pool with reuse
        ([30, 31, 35], 96, {}, 8.0),  # notebook 08: 3 x 256 reserved against 96 rows
        ([256] * 4, None, {}, 1.0),  # exactly a step: nothing wasted
        ([257] * 4, None, {}, 512 / 257),  # one past: a second step
        ([100], None, {"max_len": 4096}, 40.96),  # a static cache
    ],
)
def test_reserve_ratio(lengths, rows, kw, want):
    assert tp.reserve_ratio(lengths, rows, **kw) == pytest.approx(want)


def test_ratio_range_pairs_the_rounds():
    t = tp.Throughput([1, 8], new=4, tokens_per_s={"a": [1.0, 1.0], "b": [1.0, 1.0]})
    t.seconds = {"a": [[1.0, 2.0], [2.0, 2.0]], "b": [[1.0, 1.0], [4.0, 1.0]]}  # method -> per n -> per round
    mid, lo, hi = t.ratio_range("a", 8)  # round 1: (8/2)/(1/1) = 4; round 2: (8/2)/(1/2) = 8
    assert (lo, hi) == (4.0, 8.0) and mid == 6.0
    assert t.ratio_range("a", 8, "b", 8) == (1.25, 0.5, 2.0)  # rounds: (8/2)/(8/4) = 2, (8/2)/(8/1) = 0.5
