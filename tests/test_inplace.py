"""``inplace=True``: the pools passed are written where they are, with the same result as the default.

The default (functional) call is the oracle: it is checked against the float64 reference in
test_properties.py. Here every in-place call must give the same bits, in the very pools passed,
and write nothing else: not a skipped token's row, not a byte outside the pool.
"""

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from helpers import bits
from test_properties import calls

from ropepool import Shapes, make_inputs, rope_pool_fused
from ropepool.teaching.catalog import BASE
from ropepool.teaching.checks import expect_error


def snapshot(outs) -> list[np.ndarray]:
    mx.eval(*[o for o in outs if isinstance(o, mx.array)])
    return [bits(o).copy() for o in outs]


def writable_copy(pool):
    """A fresh copy of a pool, bit for bit, that nothing else references."""
    if isinstance(pool, np.ndarray):
        return pool.copy()
    return mx.array(bits(pool)).view(pool.dtype)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_same_bits_as_the_default_call_in_the_pools_passed(backend, data):
    kw, _ = data.draw(calls(backend), label="call")
    want = snapshot(rope_pool_fused(**kw, backend=backend))  # evaluated before any pool changes
    pools = {"k_pool": writable_copy(kw["k_pool"]), "v_pool": writable_copy(kw["v_pool"])}
    out = rope_pool_fused(**{**kw, **pools}, backend=backend, inplace=True)
    assert out[2] is pools["k_pool"] and out[3] is pools["v_pool"]
    assert type(out[0]) is type(kw["q"])
    for got, w in zip(snapshot(out), want):
        np.testing.assert_array_equal(got, w)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_numpy_pools_inside_a_larger_buffer_write_only_their_rows(dtype, backend):
    """The pools are views into a buffer with a guard row on each side; no slot value reaches them."""
    P = 6
    store = {n: np.random.default_rng(1).standard_normal((P + 2, 2, 8)).astype(dtype) for n in ("k", "v")}
    before = {n: a.copy() for n, a in store.items()}
    kw = make_inputs(Shapes(6, 4, 2, 8, P), dtype, kind="numpy", slots=[5, -1, P, 0, -2, 2**31 - 1])
    kw.update(k_pool=store["k"][1:-1], v_pool=store["v"][1:-1])
    _, k_rot, _, _ = rope_pool_fused(**kw, backend=backend, inplace=True, check_values=False)
    for n, rows in (("k", k_rot), ("v", kw["v"])):
        np.testing.assert_array_equal(store[n][[0, -1]], before[n][[0, -1]])  # the guard rows
        np.testing.assert_array_equal(store[n][1 + 5], rows[0])
        np.testing.assert_array_equal(store[n][1 + 0], rows[3])
        untouched = [1 + r for r in (1, 2, 3, 4)]
        np.testing.assert_array_equal(store[n][untouched], before[n][untouched])


def test_mx_pools_keep_their_buffer(backend):
    kw = make_inputs(Shapes(2, 8, 2, 16, 64), "bfloat16", slots=[7, 8])
    k_pool, v_pool = kw["k_pool"], kw["v_pool"]
    mx.eval(k_pool, v_pool)
    address = np.frombuffer(k_pool, np.uint16).ctypes.data
    for step in range(3):
        kw.update(
            positions=mx.array([10 + step, 20 + step], mx.int32), slots=mx.array([7 + 2 * step, 8 + 2 * step], mx.int32)
        )
        _, k_rot, k_pool, v_pool = rope_pool_fused(**kw, backend=backend, inplace=True)
        assert np.frombuffer(k_pool, np.uint16).ctypes.data == address
        np.testing.assert_array_equal(bits(k_pool)[[7 + 2 * step, 8 + 2 * step]], bits(k_rot))


@pytest.mark.parametrize(
    "case,change",
    [
        (
            "strided NumPy view",
            lambda kw: {
                "k_pool": np.repeat(np.array(kw["k_pool"]), 2, axis=2)[:, :, ::2],
                "v_pool": np.array(kw["v_pool"]),
            },
        ),
        ("one array as both pools", lambda kw: {"k_pool": (p := np.array(kw["k_pool"])), "v_pool": p}),
        ("strided mx.array", lambda kw: {"k_pool": mx.concatenate([kw["k_pool"], kw["k_pool"]], axis=2)[:, :, :8]}),
    ],
    ids=lambda c: c if isinstance(c, str) else "",
)
def test_pools_that_cannot_be_written_in_place_are_refused_untouched(case, change):
    kw = make_inputs(BASE, slots=[0, 2, 4])
    kw.update(change(kw))
    before = [np.array(p).copy() for p in (kw["k_pool"], kw["v_pool"])]
    err = expect_error("inplace_unsupported", rope_pool_fused, **kw, inplace=True)
    assert ("share memory" in err.got) == (case == "one array as both pools")
    for p, b in zip((kw["k_pool"], kw["v_pool"]), before):
        np.testing.assert_array_equal(np.array(p), b)


def test_a_gpu_kernel_backend_is_refused_for_inplace(monkeypatch):
    """Metal and CUDA produce new rows for a scatter; asked for by name with inplace, they are refused."""
    from ropepool import backends

    reg = dict(backends._registry())
    status = backends.BackendStatus("metal", True, "pretend")
    monkeypatch.setattr(backends, "_registry", lambda: {**reg, "metal": (status, reg["mlx"][1])})
    kw = make_inputs(BASE, slots=[0, 2, 4])
    err = expect_error("inplace_unsupported", rope_pool_fused, **kw, backend="metal", inplace=True)
    assert err.got == "backend 'metal'"
    assert backends.resolve("auto", inplace=True)[0] in ("cpu", "mlx")  # auto skips it


def test_numpy_pools_are_written_not_copied():
    """The default call copies NumPy pools once (O(P)); in place they stay where they are."""
    kw = make_inputs(Shapes(1, 32, 8, 128, 4096), "float16", kind="numpy", slots=[4095])
    k_pool = kw["k_pool"]
    _, k_rot, out, _ = rope_pool_fused(**kw, inplace=True)
    assert out is k_pool and np.shares_memory(out, k_pool)
    np.testing.assert_array_equal(k_pool[4095], k_rot[0])


def test_the_default_call_on_numpy_pools_returns_new_pools_and_leaves_the_passed_ones(backend):
    kw = make_inputs(Shapes(3, 8, 2, 16, 10), "float16", kind="numpy", slots=[4, -1, 9])
    before = [kw["k_pool"].copy(), kw["v_pool"].copy()]
    _, k_rot, k_pool, v_pool = rope_pool_fused(**kw, backend=backend)
    for new, old, passed in zip((k_pool, v_pool), before, (kw["k_pool"], kw["v_pool"])):
        assert isinstance(new, np.ndarray) and not np.shares_memory(new, passed)
        np.testing.assert_array_equal(passed, old)  # not mutated
        np.testing.assert_array_equal(new[[0, 1, 2, 3, 5, 6, 7, 8]], old[[0, 1, 2, 3, 5, 6, 7, 8]])
    np.testing.assert_array_equal(k_pool[[4, 9]], k_rot[[0, 2]])
    np.testing.assert_array_equal(v_pool[[4, 9]], kw["v"][[0, 2]])
