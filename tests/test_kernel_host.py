"""The "cpu" backend: the kernel body (rope_rows.inc) run by the C++ driver (driver.cpp), g++ -O3.

Checked against the float64 reference, and bit for bit against the grid emulator (the same
driver built plainly, running one GPU thread at a time): for specialised shapes (sizes compiled
in on first use) and the run-time-shape build, one worker or several, outputs in NumPy or in
MLX's own buffers, contiguous or not. The op-level properties (pools, slots, NumPy inputs) run on this backend in
test_properties.py and test_mlx_path.py through the ``backend`` fixture.
"""

import re
import time

import mlx.core as mx
import numpy as np
import pytest
from helpers import bits

from ropepool.rope import rope_table

import ropepool
from ropepool import Shapes, make_inputs, rope_pool_fused
from ropepool.kernels import emulator, host, source
from ropepool.tolerance import error_ratio

pytestmark = pytest.mark.skipif(host.unavailable_reason() is not None, reason=str(host.unavailable_reason()))

DTYPES = ["float32", "float16", "bfloat16"]
# (name, T, Hq, Hkv, D): why each row is here is in its name; "specialised" rows also run a
# build with their sizes compiled in.
CASES = [
    ("llama3-specialised", 5, 32, 8, 128),
    ("falcon-mqa-specialised", 3, 71, 1, 64),
    ("mha-runtime", 5, 4, 4, 8),
    ("d2-runtime", 4, 2, 1, 2),
    ("d6-odd-half-runtime", 37, 3, 1, 6),
    ("d256-runtime", 2, 4, 2, 256),
    ("t0", 0, 4, 2, 8),
]


def inputs(T, Hq, Hkv, D, dtype, seed=0):
    kw = make_inputs(
        Shapes(T, Hq, Hkv, D, max(T, 1)), dtype, seed=seed, positions=np.random.default_rng(seed).integers(0, 70000, T)
    )
    return kw["q"], kw["k"], kw["positions"]


def emulated(q, k, positions, dtype):
    """The emulator's q_rot and k_rot for the same inputs, as bits."""
    to_store = bits if dtype == "bfloat16" else (lambda a: np.array(a))
    T, _, D = q.shape
    Hkv = k.shape[1]
    pool = np.zeros((1, Hkv, D), emulator.STORAGE[dtype])
    run = emulator.emulate(
        to_store(q),
        to_store(k),
        to_store(k),
        np.array(positions),
        np.full(T, -1),
        pool,
        pool,
        rope_base=10000.0,
        dtype=dtype,
        write_pool=False,
    )
    return bits(run.q_rot), bits(run.k_rot)


def test_the_body_uses_the_thread_index_only_as_the_driver_supports():
    """driver.cpp's rp_gid defines exactly gid % HALF, gid / HALF and gid >= T * H * HALF."""
    body = (source.KERNEL_DIR / source.BODY_FILE).read_text()
    code = "\n".join(line.split("//")[0] for line in body.splitlines())  # comments dropped
    uses = re.findall(r"\bgid\b[^;)]*", code)
    assert sorted(u.strip() for u in uses) == ["gid % HALF", "gid / HALF", "gid >= T * H * HALF"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,T,Hq,Hkv,D", CASES, ids=[c[0] for c in CASES])
def test_matches_reference_and_emulator_bit_for_bit(name, T, Hq, Hkv, D, dtype):
    q, k, positions = inputs(T, Hq, Hkv, D, dtype)
    want_q, want_k = emulated(q, k, positions, dtype)
    ref_q, ref_k, _, _ = ropepool.rope_pool_reference(
        q,
        k,
        k,
        positions,
        mx.full((T,), -1, mx.int32),
        mx.zeros((1, Hkv, D), q.dtype),
        mx.zeros((1, Hkv, D), q.dtype),
        rope_base=10000.0,
    )
    if "specialised" in name:
        host.specialise(host.shape_key(Hq, Hkv, D, rope_table(D, 10000.0)))
    for allow_fixed in (True, False):  # the specialisation (where built) and the run-time build agree
        q_rot, k_rot = host.rope_rows_host(q, k, positions, rope_base=10000.0, allow_fixed=allow_fixed)
        assert q_rot.dtype == q.dtype and q_rot.shape == q.shape and k_rot.shape == k.shape
        np.testing.assert_array_equal(bits(q_rot), want_q)
        np.testing.assert_array_equal(bits(k_rot), want_k)
        pos = np.array(positions, np.float64)
        f64 = lambda a: np.array(a.astype(mx.float32), np.float64)  # noqa: E731
        assert error_ratio(f64(q_rot), ref_q, f64(q), pos, dtype) <= 1
        assert error_ratio(f64(k_rot), ref_k, f64(k), pos, dtype) <= 1


def _run_entry(fn, Hq, Hkv, D, rope):
    """Call a library's ropepool_rope directly on T = 2 float32 tokens; (its answer, q_rot, k_rot)."""
    arrays = [np.array(a) for a in inputs(2, Hq, Hkv, D, "float32")]  # q, k, positions
    q_rot, k_rot = np.full_like(arrays[0], np.nan), np.full_like(arrays[1], np.nan)
    ptrs = [a.ctypes.data for a in (*arrays, *host._tables(rope)[:2], q_rot, k_rot)]
    ran = fn(
        0,
        2,
        Hq,
        Hkv,
        D,
        rope.rotary_dim,
        int(rope.is_neox),
        *ptrs,
        1,
        0,
        None,
        None,
        None,
        None,
        0,
        0,
        0,
        None,
        None,
        None,
        0,
        None,
        None,
        None,
    )  # no QK-norm, no FP8
    return ran, q_rot, k_rot


# Shapes no other test uses, so that this process has not specialised them yet.
NEW_SHAPES = [
    ("gptj-partial", 5, 1, 12, dict(rotary_dim=8, is_neox=False)),
    ("neox-partial", 3, 3, 20, dict(rotary_dim=12)),
]


@pytest.mark.parametrize("name,Hq,Hkv,D,variant", NEW_SHAPES, ids=[c[0] for c in NEW_SHAPES])
def test_a_new_shape_is_specialised_after_its_first_use_with_the_same_bits(monkeypatch, name, Hq, Hkv, D, variant):
    monkeypatch.setattr(host, "MAX_SPECIALISED", 10**6)  # whatever other tests in this process specialised
    rope = rope_table(D, 10000.0, **variant)
    key = host.shape_key(Hq, Hkv, D, rope)
    assert not host.specialised(key)
    q, k, positions = inputs(4, Hq, Hkv, D, "bfloat16", seed=2)
    first = host.rope_rows_host(q, k, positions, rope=rope)  # the run-time build; starts the specialisation
    deadline = time.monotonic() + 300
    while not host.specialised(key) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert host.specialised(key)
    assert host.kernel(key) is not host._library().ropepool_rope
    again = host.rope_rows_host(q, k, positions, rope=rope)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(bits(a), bits(b))
    assert _run_entry(host.kernel(key), Hq, Hkv, D, rope)[0] == 1  # the sizes compiled in ran


@pytest.mark.parametrize("value,expected", [("0", 0), ("3", 3), ("", 8), ("-1", 8), ("many", 8)])
def test_max_specialised_comes_from_the_environment(monkeypatch, value, expected):
    monkeypatch.setenv("ROPEPOOL_MAX_SPECIALISED", value)
    assert host._max_specialised() == expected


def test_with_max_specialised_zero_a_new_shape_keeps_the_run_time_build(monkeypatch):
    monkeypatch.setattr(host, "MAX_SPECIALISED", 0)
    rope = rope_table(6, 10000.0)
    key = host.shape_key(2, 1, 6, rope)  # a shape no other test uses
    assert host.kernel(key) is host._library().ropepool_rope
    host.wait_for_builds()
    assert not host.specialised(key) and host.kernel(key) is host._library().ropepool_rope


def test_a_specialised_library_runs_its_shape_only():
    # Llama-3-8B's shape, which the llama3-specialised case and notebook 05 specialise too: one build (seconds
    # of g++ on an empty kernel cache) serves them all
    rope = rope_table(128, 10000.0)
    fn = host.specialise(host.shape_key(32, 8, 128, rope))
    ran, q_rot, k_rot = _run_entry(fn, 32, 8, 128, rope)
    want = _run_entry(host._library().ropepool_rope, 32, 8, 128, rope)
    assert ran == 1 and want[0] == 0  # the run-time build says it ran with run-time sizes
    np.testing.assert_array_equal(q_rot, want[1])
    np.testing.assert_array_equal(k_rot, want[2])
    for other in [
        (16, 8, 128, rope),
        (32, 8, 128, rope_table(128, 10000.0, is_neox=False)),
        (32, 8, 128, rope_table(128, 10000.0, rotary_dim=64)),
    ]:
        ran, q_rot, k_rot = _run_entry(fn, *other)
        assert ran == -1 and np.isnan(q_rot).all() and np.isnan(k_rot).all()  # refused, nothing written


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("T", [256, 205])  # 655,360 and 524,800 pairs: split over workers; 205 unevenly
def test_workers_split_tokens_without_changing_a_bit(T, dtype):
    q, k, positions = inputs(T, 32, 8, 128, dtype, seed=3)
    one = host.rope_rows_host(q, k, positions, rope_base=10000.0, threads=1)
    for threads in (2, 3):
        many = host.rope_rows_host(q, k, positions, rope_base=10000.0, threads=threads)
        for a, b in zip(one, many):
            np.testing.assert_array_equal(bits(a), bits(b))
    want_q, want_k = emulated(q, k, positions, dtype)
    np.testing.assert_array_equal(bits(one[0]), want_q)
    np.testing.assert_array_equal(bits(one[1]), want_k)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_is_float32_math_rounded_once_as_mlx_rounds(dtype):
    """1.3 million outputs: about 20 land exactly halfway between two bfloat16 values, so a
    rounding that breaks ties other than to even (as MLX does) shows."""
    q, k, positions = inputs(256, 32, 8, 128, dtype, seed=11)
    narrow = host.rope_rows_host(q, k, positions, rope_base=10000.0)
    wide = host.rope_rows_host(q.astype(mx.float32), k.astype(mx.float32), positions, rope_base=10000.0)
    for got, full in zip(narrow, wide):
        np.testing.assert_array_equal(bits(got), bits(full.astype(got.dtype)))


def test_float16_extremes_convert_as_mlx_converts():
    """Subnormals, the largest float16, sums that overflow to infinity, signed zeros, infinities and
    NaN, through the host's float16 conversions (the CPU's F16C instructions where it has them, the
    bit-exact fallback elsewhere): the bits MLX gives for the same float32 results, NaN for NaN."""
    special = np.array(
        [6e-8, -6e-8, 3.05e-5, 6.1e-5, 65504.0, -65504.0, 60000.0, 0.0, -0.0, 1.0, np.inf, -np.inf, np.nan], np.float16
    )
    rng = np.random.default_rng(4)
    q = mx.array(rng.choice(special, size=(64, 8, 64)))
    k = mx.array(rng.choice(special, size=(64, 2, 64)))
    positions = mx.array(rng.integers(0, 5000, 64).astype(np.int32))
    narrow = host.rope_rows_host(q, k, positions, rope_base=10000.0)
    wide = host.rope_rows_host(q.astype(mx.float32), k.astype(mx.float32), positions, rope_base=10000.0)
    for got, full in zip(narrow, wide):
        want = full.astype(mx.float16)
        nan = np.isnan(np.array(want))
        np.testing.assert_array_equal(np.isnan(np.array(got)), nan)
        assert nan.any() and not nan.all()
        np.testing.assert_array_equal(bits(got)[~nan], bits(want)[~nan])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_numpy_and_mlx_output_buffers_agree(dtype, monkeypatch):
    q, k, positions = inputs(9, 32, 8, 128, dtype, seed=5)
    small = host.rope_rows_host(q, k, positions, rope_base=10000.0)
    monkeypatch.setattr(host, "DIRECT_BYTES", 0)  # write straight into MLX's buffers
    direct = host.rope_rows_host(q, k, positions, rope_base=10000.0)
    for a, b in zip(small, direct):
        np.testing.assert_array_equal(bits(a), bits(b))


def test_non_contiguous_inputs_are_read_correctly():
    q, k, positions = inputs(6, 8, 2, 16, "float16", seed=7)
    q_t = mx.swapaxes(mx.contiguous(mx.swapaxes(q, 0, 1)), 0, 1)  # same values, transposed strides
    k_s = mx.concatenate([k, k], axis=2)[:, :, :16]  # a strided slice
    pos_s = mx.concatenate([positions[:, None], positions[:, None]], axis=1)[:, 0]
    mx.eval(q_t, k_s, pos_s)
    assert not memoryview(q_t).c_contiguous and not memoryview(k_s).c_contiguous
    want = host.rope_rows_host(q, k, positions, rope_base=10000.0)
    got = host.rope_rows_host(q_t, k_s, pos_s, rope_base=10000.0)
    for a, b in zip(want, got):
        np.testing.assert_array_equal(bits(a), bits(b))


def test_lazy_inputs_are_evaluated_first():
    q, k, positions = inputs(4, 8, 2, 16, "float32", seed=8)
    want = host.rope_rows_host(q, k, positions, rope_base=10000.0)
    got = host.rope_rows_host(q + 0, k * 1, positions + 0, rope_base=10000.0)  # unevaluated graphs
    for a, b in zip(want, got):
        np.testing.assert_array_equal(bits(a), bits(b))


def test_unchecked_out_of_range_slots_write_nothing_and_the_rest_lands():
    P = 6
    kw = make_inputs(Shapes(5, 8, 2, 16, P), "bfloat16", slots=[2, 2**31 - 1, -5, P, 0])
    before = [bits(kw["k_pool"]), bits(kw["v_pool"])]
    q_rot, k_rot, k_pool, v_pool = rope_pool_fused(**kw, backend="cpu", check_values=False)
    k_bits, v_bits = bits(k_pool), bits(v_pool)
    np.testing.assert_array_equal(k_bits[[2, 0]], bits(k_rot)[[0, 4]])
    np.testing.assert_array_equal(v_bits[[2, 0]], bits(kw["v"])[[0, 4]])
    for new, old in zip((k_bits, v_bits), before):
        np.testing.assert_array_equal(new[[1, 3, 4, 5]], old[[1, 3, 4, 5]])
    np.testing.assert_array_equal(bits(kw["k_pool"]), before[0])  # the caller's pool is unchanged


def test_auto_picks_it_on_a_cpu_only_machine():
    if mx.metal.is_available() or (hasattr(mx, "cuda") and mx.cuda.is_available()):
        pytest.skip("a GPU back-end is preferred here")
    assert ropepool.best_backend() == "cpu"


def test_a_shape_whose_specialisation_fails_keeps_the_run_time_build(monkeypatch):
    def broken(key):
        raise RuntimeError("compiling failed")

    monkeypatch.setattr(host, "_specialised_library", broken)
    monkeypatch.setattr(host, "MAX_SPECIALISED", 10**6)
    rope = rope_table(10, 10000.0)
    key = host.shape_key(2, 2, 10, rope)
    q, k, positions = inputs(2, 2, 2, 10, "float16", seed=4)
    first = host.rope_rows_host(q, k, positions, rope=rope)
    host.wait_for_builds()
    assert not host.specialised(key) and host.kernel(key) is host._library().ropepool_rope
    for a, b in zip(first, host.rope_rows_host(q, k, positions, rope=rope)):
        np.testing.assert_array_equal(bits(a), bits(b))


def test_a_failed_build_is_reported_not_raised(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("compiling ropepool_host failed:\nhost.cpp:1: error: something")

    monkeypatch.setattr(host, "shared_library", broken)
    host._library.cache_clear()
    try:
        reason = host.unavailable_reason.__wrapped__()
    finally:
        monkeypatch.undo()
        host._library.cache_clear()  # the next call loads the cached library again
    assert reason == "the 'cpu' backend cannot build: compiling ropepool_host failed:"
