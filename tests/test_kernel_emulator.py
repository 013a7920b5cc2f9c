"""The kernel body (ropepool/kernels/rope_rows.inc), compiled by g++ under the grid emulator,
against the float64 reference.

This is the same text Metal and CUDA compile; only the header (cpu.h) and the thread-index
line differ. Outputs start poisoned (NaN) and every buffer sits between guard bytes, so an
element the kernel forgets or a byte it writes out of bounds fails a test.

Tolerance: the angle is float32 (``float32(position) * float32(inv_freq)``), so its absolute
error grows like ``position * 2**-23``; a pair of norm r moves by r times that, plus one
output rounding (eps of the dtype). Bound per token: ``r * (2 eps + 2**-22 (position + 1))``.
"""

import numpy as np
import pytest

from ropepool.kernels import emulator, source
from ropepool.reference import rope_pool_reference
from ropepool.tolerance import error_bound

pytestmark = pytest.mark.skipif(emulator.unavailable_reason() is not None, reason=str(emulator.unavailable_reason()))

DTYPES = ["float32", "float16", "bfloat16"]

# (name, T, Hq, Hkv, D, P): why each row is here is in its name.
CASES = [
    ("mha", 5, 4, 4, 8, 9),
    ("gqa-llama3", 3, 32, 8, 128, 6),
    ("mqa", 7, 4, 1, 16, 11),
    ("d2-smallest", 4, 2, 1, 2, 5),
    ("d6-odd-half", 37, 3, 1, 6, 40),  # irregular T, D/2 = 3
    ("d256-largest", 2, 4, 2, 256, 3),
    ("t1-decode", 1, 8, 2, 64, 4),
    ("t0-empty", 0, 4, 2, 8, 3),
]


def make(T, Hq, Hkv, D, P, dtype, *, seed=0, positions=None, slots=None):
    """Emulator inputs (bfloat16 as uint16 bits) and their float64 values, for the reference."""
    rng = np.random.default_rng(seed)
    raw = {"q": (T, Hq, D), "k": (T, Hkv, D), "v": (T, Hkv, D), "k_pool": (P, Hkv, D), "v_pool": (P, Hkv, D)}
    store, values = {}, {}
    for name, shape in raw.items():
        x = rng.standard_normal(shape).astype(np.float32)
        if dtype == "bfloat16":
            store[name] = emulator.float32_to_bfloat16_bits(x)
        else:
            store[name] = x.astype(dtype)
        values[name] = emulator.to_float64(store[name], dtype)
    pos = np.asarray(rng.integers(0, 5000, T) if positions is None else positions, np.int32)
    sl = np.asarray(rng.permutation(P)[:T] if slots is None else slots, np.int32)
    for d in (store, values):
        d["positions"], d["slots"] = pos, sl
    return store, values


ORDER = ("q", "k", "v", "positions", "slots", "k_pool", "v_pool")


def run(store, dtype, **kw):
    return emulator.emulate(*(store[n] for n in ORDER), rope_base=10000.0, dtype=dtype, **kw)


def reference(values):
    return rope_pool_reference(*(values[n] for n in ORDER), rope_base=10000.0)


def assert_rotated_close(got, want, x, positions, dtype):
    half = x.shape[-1] // 2
    r = np.sqrt(x[..., :half] ** 2 + x[..., half:] ** 2).max(axis=(1, 2), initial=0.0)  # [T]
    tol = error_bound(dtype, positions, r) + 1e-12  # [T]
    err = np.abs(got - want)  # NaN (an unwritten, poisoned element) fails too
    ok = err <= tol[:, None, None]
    assert ok.all(), (
        f"max error {np.nanmax(err, initial=0)} (tolerance {tol.max(initial=0)}), {np.isnan(err).sum()} NaN"
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,T,Hq,Hkv,D,P", CASES, ids=[c[0] for c in CASES])
def test_rotation_matches_reference(name, T, Hq, Hkv, D, P, dtype):
    store, values = make(T, Hq, Hkv, D, P, dtype)
    out = run(store, dtype)
    q_ref, k_ref, _, _ = reference(values)
    assert_rotated_close(emulator.to_float64(out.q_rot, dtype), q_ref, values["q"], values["positions"], dtype)
    assert_rotated_close(emulator.to_float64(out.k_rot, dtype), k_ref, values["k"], values["positions"], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,T,Hq,Hkv,D,P", CASES, ids=[c[0] for c in CASES])
def test_pool_rows_hold_k_rot_and_v_bits(name, T, Hq, Hkv, D, P, dtype):
    store, _ = make(T, Hq, Hkv, D, P, dtype)
    out = run(store, dtype)
    slots = store["slots"]
    np.testing.assert_array_equal(out.k_pool[slots].view(np.uint8), out.k_rot.view(np.uint8))
    np.testing.assert_array_equal(out.v_pool[slots].view(np.uint8), store["v"].view(np.uint8))


@pytest.mark.parametrize("dtype", DTYPES)
def test_untouched_pool_rows_keep_their_bits(dtype):
    store, _ = make(6, 8, 2, 16, 20, dtype, slots=[3, -1, 17, 0, -1, 9])
    out = run(store, dtype)
    untouched = np.setdiff1d(np.arange(20), [3, 17, 0, 9])
    for new, old in ((out.k_pool, store["k_pool"]), (out.v_pool, store["v_pool"])):
        np.testing.assert_array_equal(new[untouched].view(np.uint8), old[untouched].view(np.uint8))


@pytest.mark.parametrize("dtype", DTYPES)
def test_slots_with_minus_one_are_skipped_and_the_rest_written(dtype):
    store, values = make(5, 4, 2, 8, 7, dtype, slots=[-1, 6, -1, 0, 2])
    out = run(store, dtype)
    _, _, kp_ref, vp_ref = reference(values)
    np.testing.assert_array_equal(emulator.to_float64(out.v_pool, dtype), vp_ref)  # v moves exactly
    writes = [1, 3, 4]
    np.testing.assert_array_equal(out.k_pool[store["slots"][writes]].view(np.uint8), out.k_rot[writes].view(np.uint8))


OUT_OF_RANGE = [
    ("just-past-the-end", lambda P: [P, P + 1]),
    ("just-before-the-start", lambda P: [-1, -2]),
    ("int32-extremes", lambda P: [2**31 - 1, -(2**31)]),
    ("far-past-the-end", lambda P: [P + 1000, 4 * P]),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,slots_for", OUT_OF_RANGE, ids=[c[0] for c in OUT_OF_RANGE])
def test_out_of_range_slots_write_nothing_and_guards_hold(name, slots_for, dtype):
    P = 5
    store, _ = make(2, 4, 2, 8, P, dtype, slots=slots_for(P))
    out = run(store, dtype)
    assert out.guards_intact, "the kernel wrote outside a buffer"
    np.testing.assert_array_equal(out.k_pool.view(np.uint8), store["k_pool"].view(np.uint8))
    np.testing.assert_array_equal(out.v_pool.view(np.uint8), store["v_pool"].view(np.uint8))


@pytest.mark.parametrize("dtype", DTYPES)
def test_threads_past_the_grid_edge_write_nothing(dtype):
    # T*(Hq+Hkv)*D/2 = 3*5*3 = 45 threads in a 256-thread block: 211 run past the edge.
    store, _ = make(3, 4, 1, 6, 4, dtype)
    out = run(store, dtype, block=256)
    assert out.launched > out.grid
    assert out.guards_intact


@pytest.mark.parametrize("dtype", DTYPES)
def test_thread_order_does_not_matter(dtype):
    store, _ = make(9, 8, 2, 32, 12, dtype)
    fwd, rev = run(store, dtype), run(store, dtype, reverse=True, block=64)
    for a, b in ((fwd.q_rot, rev.q_rot), (fwd.k_rot, rev.k_rot), (fwd.k_pool, rev.k_pool), (fwd.v_pool, rev.v_pool)):
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_math_is_float32_with_one_rounding(dtype):
    """The half-precision kernel equals the float32 kernel's output rounded once (as MLX rounds)."""
    import mlx.core as mx

    store, _ = make(4, 8, 2, 64, 6, dtype)
    wide = {
        n: (emulator.to_float64(a, dtype).astype(np.float32) if n not in ("positions", "slots") else a)
        for n, a in store.items()
    }
    narrow, f32 = run(store, dtype), run(wide, "float32")
    for got, full in ((narrow.q_rot, f32.q_rot), (narrow.k_rot, f32.k_rot)):
        rounded = mx.array(full).astype(getattr(mx, dtype)).view(mx.uint16)
        np.testing.assert_array_equal(got.view(np.uint16), np.array(rounded))


def test_positions_near_the_float32_limit_stay_within_the_growing_tolerance():
    store, values = make(3, 4, 2, 128, 4, "float32", positions=[2**24 - 3, 2**24 - 2, 2**24 - 1])
    out = run(store, "float32")
    q_ref, k_ref, _, _ = reference(values)
    assert_rotated_close(out.q_rot.astype(np.float64), q_ref, values["q"], values["positions"], "float32")
    assert_rotated_close(out.k_rot.astype(np.float64), k_ref, values["k"], values["positions"], "float32")


def test_bfloat16_bits_helper_rounds_as_mlx():
    import mlx.core as mx

    x = np.array(
        [
            1.0,
            1.00390625,
            1.01171875,
            -3.5e-3,
            65504.0,
            3.0e38,
            np.inf,
            -np.inf,
            np.nan,
            1e-40,
            *np.random.default_rng(1).standard_normal(1000),
        ],
        np.float32,
    )
    ties = ((x.view(np.uint32)[10:20] & 0xFFFF0000) | 0x8000).view(np.float32)  # exactly halfway
    x = np.concatenate([x, ties])
    want = np.array(mx.array(x).astype(mx.bfloat16).view(mx.uint16))
    np.testing.assert_array_equal(emulator.float32_to_bfloat16_bits(x), want)


def test_emulator_compiles_the_same_body_as_the_gpu_backends():
    bodies = {b: source.body(b).split("\n", 1) for b in ("cpu", "metal", "cuda")}
    assert bodies["cpu"][1] == bodies["metal"][1] == bodies["cuda"][1]
    assert "rp_thread_index" in bodies["cpu"][0] and "thread_position_in_grid" in bodies["metal"][0]
    assert "blockIdx.x" in bodies["cuda"][0]
