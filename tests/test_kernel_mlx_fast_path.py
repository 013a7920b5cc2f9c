"""The MLX path's speed-ups keep its results: the fused rotation is bit-identical to the plain
``rotate``, and the pool writer's wide-word copies move exact bits (NaN payloads and -0.0 included)."""

import mlx.core as mx
import numpy as np
import pytest
from helpers import bits

from ropepool import Shapes, make_inputs
from ropepool.mlx_ops import rope_cos_sin, rotate, rotate_qk
from ropepool.pool_write import plan, row_word, write, write_in_place
from ropepool.rope import plain

DTYPES = ["float32", "float16", "bfloat16"]
WORD = {"float32": mx.uint32, "float16": mx.uint16, "bfloat16": mx.uint16}

# (name, T, Hq, Hkv, D, positions)
CASES = [
    ("gqa-llama3", 3, 32, 8, 128, [0, 1, 4097]),
    ("d2", 4, 2, 1, 2, [1, 2, 3, 4]),
    ("d6-odd-half", 5, 3, 1, 6, [9, 8, 7, 6, 5]),
    ("near-float32-limit", 2, 4, 2, 64, [2**24 - 2, 2**24 - 1]),
    ("t0", 0, 4, 2, 8, []),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,T,Hq,Hkv,D,positions", CASES, ids=[c[0] for c in CASES])
def test_fused_rotation_is_bit_identical_to_rotate(name, T, Hq, Hkv, D, positions, dtype):
    kw = make_inputs(Shapes(T, Hq, Hkv, D, max(T, 1)), dtype, positions=positions)
    cos, sin = rope_cos_sin(kw["positions"], D, kw["rope_base"])
    fast = rotate_qk(kw["q"], kw["k"], kw["positions"], plain(D, kw["rope_base"]))
    for x, got in zip((kw["q"], kw["k"]), fast):
        np.testing.assert_array_equal(bits(got), bits(rotate(x, cos, sin)))


@pytest.mark.parametrize(
    "dtype,D,word",
    [
        ("float16", 128, mx.uint64),
        ("float16", 2, mx.uint32),
        ("float16", 6, mx.uint32),
        ("float16", 4, mx.uint64),
        ("bfloat16", 2, mx.uint32),
        ("float32", 2, mx.uint64),
        ("float32", 6, mx.uint64),
        ("float32", 128, mx.uint64),
    ],
)
def test_row_word_is_the_widest_that_divides_a_row(dtype, D, word):
    assert row_word(mx.zeros((3, 1, D), getattr(mx, dtype))) == word


def _odd_rows(T, Hkv, D, dtype):
    """Rows whose bits a value-based copy might not keep: NaN payloads, -0.0, subnormals."""
    word = WORD[dtype]
    raw = np.random.default_rng(3).integers(
        0, np.iinfo(np.dtype(str(word).rsplit(".", 1)[-1])).max, (T, Hkv, D), dtype=np.uint64
    )
    raw.reshape(-1)[:3] = {mx.uint16: [0x7C01, 0x8000, 0x0001], mx.uint32: [0x7F800001, 0x80000000, 1]}[word]
    return mx.array(raw.astype(str(word).rsplit(".", 1)[-1])).view(getattr(mx, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("D", [2, 6, 128])
@pytest.mark.parametrize("where", ["mlx", "in-place"])
def test_pool_write_moves_exact_bits_and_skips(dtype, D, where):
    P, Hkv = 7, 2
    if where == "in-place" and mx.default_device() != mx.cpu:
        pytest.skip("in-place mx.array pools need MLX's CPU device")
    k_pool, v_pool = _odd_rows(P, Hkv, D, dtype), _odd_rows(P, Hkv, D, dtype)  # two buffers, the same bits
    rows = mx.contiguous(_odd_rows(5, Hkv, D, dtype)[::-1])  # a different pattern
    slots = np.array([6, -1, 0, 9, 3], np.int32)
    before = bits(k_pool)
    if where == "mlx":
        out = write(plan(slots, P), k_pool, v_pool, rows, rows)[0]
    else:
        write_in_place(plan(slots, P), k_pool, v_pool, rows, rows)
        out = k_pool
    got = bits(out)
    want = before.copy()
    for t, s in enumerate(slots):
        if 0 <= s < P:
            want[s] = bits(rows)[t]
    np.testing.assert_array_equal(got, want)
