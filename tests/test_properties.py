"""rope_pool_fused against the float64 reference, as properties over shapes, slots and dtypes,
on each backend that runs on a CPU (the ``backend`` fixture in conftest.py: "mlx" and "cpu").

The "mlx" backend gets every even head_dim from 2 to 256. The "cpu" backend compiles a library per
(Hq, Hkv, D) it meets, so it gets the fixed shapes of :data:`CPU_SHAPES`; the rest (tokens, slots,
positions, dtypes, kinds, bases) is drawn the same for both.

q_rot and k_rot must stay within :mod:`ropepool.tolerance`'s documented bound, which grows
linearly with position (the angle is float32; that module's docstring gives the measured
growth). Pool rows are compared bit for bit with k_rot, and untouched rows with the input pool.
"""

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from helpers import bits
from hypothesis import strategies as st

from ropepool import Shapes, make_inputs, rope_pool_fused, rope_pool_reference
from ropepool.tolerance import error_ratio

# (name, Hq, Hkv): why each row is here is in its name.
HEAD_CONFIGS = [
    ("mha", 4, 4),
    ("gqa", 8, 2),
    ("gqa-llama3", 32, 8),
    ("mqa", 4, 1),
]
# (name, Hq, Hkv, D): the "cpu" backend's shapes.
CPU_SHAPES = [
    ("mha-d2", 4, 4, 2),  # the smallest head: one pair
    ("gqa-d6", 8, 2, 6),  # an odd number of pairs
    ("mha-phi-2", 32, 32, 80),  # Phi-2: D not a power of two
    ("gqa-llama3", 32, 8, 128),  # Llama-3-8B
    ("mqa-d256", 4, 1, 256),  # Gemma's head_dim under one KV head
]
ARGS = ("q", "k", "v", "positions", "slots", "k_pool", "v_pool")


def as_f64(a) -> np.ndarray:
    if isinstance(a, mx.array):
        a = a.astype(mx.float32) if a.dtype == mx.bfloat16 else a
    return np.array(a, dtype=np.float64)


@st.composite
def calls(draw, backend="mlx"):
    """A valid call's keywords (``check_values`` included) and its dtype; shapes as ``backend`` gets them."""
    if backend == "cpu":
        _, hq, hkv, head_dim = draw(st.sampled_from(CPU_SHAPES))
    else:
        _, hq, hkv = draw(st.sampled_from(HEAD_CONFIGS))
        head_dim = 2 * draw(st.integers(1, 128))  # D even, 2..256
    tokens = draw(st.sampled_from([0, 1, draw(st.integers(2, 37))]))  # T in {0, 1, irregular}
    pool_rows = tokens + draw(st.integers(0, 9))
    kind = draw(st.sampled_from(["mlx", "numpy"]))
    dtype = draw(st.sampled_from(["float32", "float16"] + (["bfloat16"] if kind == "mlx" else [])))
    rows = draw(st.permutations(range(pool_rows)))[:tokens]
    skip = draw(st.lists(st.booleans(), min_size=tokens, max_size=tokens))
    check_values = draw(st.booleans())
    # Skipped tokens: -1, or (only unchecked: the op must still write nothing) slots past the pool.
    skipped = st.sampled_from([-1] if check_values else [-1, -7, pool_rows, pool_rows + 5, 2**31 - 1])
    slots = [draw(skipped) if s else r for r, s in zip(rows, skip)]  # a permutation, some skipped
    max_pos = draw(st.sampled_from([16, 4096, 65536]))
    positions = draw(st.lists(st.integers(0, max_pos), min_size=tokens, max_size=tokens))
    base = draw(st.sampled_from([10000.0, 500000.0, 1e6]))
    seed = draw(st.integers(0, 2**16))
    s = Shapes(tokens, hq, hkv, head_dim, pool_rows)
    kw = make_inputs(s, dtype, kind=kind, seed=seed, slots=slots, positions=positions, rope_base=base)
    return {**kw, "check_values": check_values}, dtype


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_matches_reference(backend, data):
    kw, dtype = data.draw(calls(backend), label="call")
    ref = rope_pool_reference(*[kw[n] for n in ARGS], rope_base=kw["rope_base"])
    out = rope_pool_fused(**kw, backend=backend)
    assert all(type(o) is type(kw["q"]) for o in out)  # answers in the kind of q
    positions = as_f64(kw["positions"])
    for name, got, want, x in [("q_rot", out[0], ref[0], kw["q"]), ("k_rot", out[1], ref[1], kw["k"])]:
        assert got.shape == want.shape
        ratio = error_ratio(as_f64(got), want, as_f64(x), positions, dtype)
        assert ratio <= 1, f"{name}: error {ratio:.2f}x the documented bound"


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_pool_rows_exact(backend, data):
    """Written rows hold k_rot's and v's bits; every other row keeps its bits."""
    kw, _ = data.draw(calls(backend), label="call")
    _, k_rot, k_pool, v_pool = rope_pool_fused(**kw, backend=backend)
    slots = np.array(kw["slots"])
    written = (slots >= 0) & (slots < bits(kw["k_pool"]).shape[0])
    for pool_in, pool_out, rows in [(kw["k_pool"], k_pool, k_rot), (kw["v_pool"], v_pool, kw["v"])]:
        b_in, b_out, b_rows = bits(pool_in), bits(pool_out), bits(rows)
        np.testing.assert_array_equal(b_out[slots[written]], b_rows[written])
        untouched = np.setdiff1d(np.arange(b_in.shape[0]), slots[written])
        np.testing.assert_array_equal(b_out[untouched], b_in[untouched])


@pytest.mark.parametrize("kind", ["mlx", "numpy"])
def test_zero_tokens_change_nothing(kind, backend):
    kw = make_inputs(Shapes(0, 8, 2, 16, 5), "float32", kind=kind)
    q_rot, k_rot, k_pool, v_pool = rope_pool_fused(**kw, backend=backend)
    assert q_rot.shape == (0, 8, 16) and k_rot.shape == (0, 2, 16)
    np.testing.assert_array_equal(bits(k_pool), bits(kw["k_pool"]))
    np.testing.assert_array_equal(bits(v_pool), bits(kw["v_pool"]))


def test_all_slots_skipped_change_nothing(backend):
    kw = make_inputs(Shapes(4, 8, 2, 16, 5), "bfloat16", slots=[-1, -1, -1, -1])
    _, _, k_pool, v_pool = rope_pool_fused(**kw, backend=backend)
    np.testing.assert_array_equal(bits(k_pool), bits(kw["k_pool"]))
    np.testing.assert_array_equal(bits(v_pool), bits(kw["v_pool"]))


def test_positions_near_float32_limit_keep_pair_norms(backend):
    """Near 2**24 the angle is inexact, but a rotation still preserves each pair's length."""
    s = Shapes(3, 4, 2, 64, 4)
    kw = make_inputs(s, "float32", positions=[2**24 - 3, 2**24 - 2, 2**24 - 1])
    q_rot = as_f64(rope_pool_fused(**kw, backend=backend)[0])
    q = as_f64(kw["q"])
    norm = lambda x: np.hypot(x[..., :32], x[..., 32:])  # noqa: E731
    np.testing.assert_allclose(norm(q_rot), norm(q), rtol=1e-5)


def test_position_zero_is_identity(backend):
    kw = make_inputs(Shapes(2, 4, 2, 8, 4), "float16", positions=[0, 0])
    q_rot, k_rot, _, _ = rope_pool_fused(**kw, backend=backend)
    np.testing.assert_array_equal(bits(q_rot), bits(kw["q"]))
    np.testing.assert_array_equal(bits(k_rot), bits(kw["k"]))


def test_caller_pool_not_mutated(backend):
    kw = make_inputs(Shapes(2, 4, 2, 8, 4), "float32", slots=[0, 3])
    before = bits(kw["k_pool"]).copy()
    rope_pool_fused(**kw, backend=backend)
    np.testing.assert_array_equal(bits(kw["k_pool"]), before)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_a_run_of_consecutive_slots_lands_exactly(dtype, backend):
    """Consecutive slots take the block copy (mx.slice_update), here up to the pool's last row."""
    kw = make_inputs(Shapes(4, 8, 2, 16, 9), dtype, slots=[5, 6, 7, 8])
    _, k_rot, k_pool, v_pool = rope_pool_fused(**kw, backend=backend)
    np.testing.assert_array_equal(bits(k_pool)[5:], bits(k_rot))
    np.testing.assert_array_equal(bits(v_pool)[5:], bits(kw["v"]))
    np.testing.assert_array_equal(bits(k_pool)[:5], bits(kw["k_pool"])[:5])
    np.testing.assert_array_equal(bits(v_pool)[:5], bits(kw["v_pool"])[:5])
