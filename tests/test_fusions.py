"""QK-norm before RoPE and the FP8 (e4m3) cache, in the op, on every backend that runs here.

QK-norm is checked against the float64 reference (``reference.rms_norm`` then ``rotate``) at the
tolerance module's bound with its norm term, and against mlx-lm's own Qwen3 attention. The FP8
pools are checked code for code: all 256 codes, the rounding boundaries between them, saturation
and NaN, against ``reference.encode_e4m3`` (a search over the code table, not bit tricks), MLX's
``mx.to_fp8`` where the two conventions agree, and the kernel body run under the grid emulator.
"""

import mlx.core as mx
import numpy as np
import pytest

import ropepool
from ropepool import Shapes, make_inputs, rope_pool_fused
from ropepool import fp8 as e4m3
from ropepool.kernels import emulator
from ropepool.reference import encode_e4m3, quantize_rows, rms_norm, rope_pool_reference
from ropepool.rope import rope_of
from ropepool.teaching.checks import expect_error
from ropepool.tolerance import allclose_tolerance, error_ratio

BACKENDS = [name for name, s in ropepool.available_backends().items() if s.available]
DTYPES = ["float32", "float16", "bfloat16"]
ARGS = ("q", "k", "v", "positions", "slots", "k_pool", "v_pool")

# (name, T, Hq, Hkv, D, P, the op's RoPE keywords)
NORM_CASES = [
    ("qwen3-0.6b heads", 5, 16, 8, 128, 9, {}),  # Qwen3-0.6B: 16 q heads, 8 kv heads, head_dim 128
    ("mqa", 3, 4, 1, 16, 4, {}),
    ("d2", 2, 2, 1, 2, 3, {}),
    ("partial gptj", 4, 4, 2, 20, 6, {"rotary_dim": 8, "is_neox": False}),  # pass-through dims normalised too
    ("t0", 0, 4, 2, 8, 3, {}),
]


def _weights(D, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(0.25, 2.0, D).astype(np.float32), rng.uniform(0.25, 2.0, D).astype(np.float32)


def _call(T, Hq, Hkv, D, P, dtype, slots=None, **kw):
    slots = list(range(P - 1, P - 1 - T, -1)) if slots is None else slots  # reversed, one left unwritten
    return make_inputs(Shapes(T, Hq, Hkv, D, P), dtype, slots=slots, positions=[7 * t + 3 for t in range(T)], **kw)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,T,Hq,Hkv,D,P,variant", NORM_CASES, ids=[c[0] for c in NORM_CASES])
def test_qk_norm_matches_the_reference(backend, dtype, name, T, Hq, Hkv, D, P, variant):
    kw = {**_call(T, Hq, Hkv, D, P, dtype), **variant}
    qw, kw_w = _weights(D)
    q_rot, k_rot, k_pool, v_pool = rope_pool_fused(
        **kw, q_norm_weight=mx.array(qw).astype(kw["q"].dtype), k_norm_weight=kw_w, norm_eps=1e-6, backend=backend
    )
    qw = np.array(mx.array(qw).astype(kw["q"].dtype).astype(mx.float32))  # the weight as the op got it
    ref = rope_pool_reference(
        *(kw[n] for n in ARGS),
        rope_base=kw["rope_base"],
        q_norm_weight=qw,
        k_norm_weight=kw_w,
        norm_eps=1e-6,
        **variant,
    )
    rope, pos = rope_of(kw), np.array(kw["positions"])
    for got, want, x, w in ((q_rot, ref[0], kw["q"], qw), (k_rot, ref[1], kw["k"], kw_w)):
        normed = rms_norm(x, w, 1e-6)  # [T, H, D], what turns
        ratio = error_ratio(np.array(got.astype(mx.float32)), want, normed, pos, dtype, rope, norm_dim=D)
        assert ratio <= 1, f"{backend} {dtype}: {ratio:.2f} x the bound"
    tol = allclose_tolerance(dtype, pos, rms_norm(kw["k"], kw_w, 1e-6), rope=rope, norm_dim=D)
    np.testing.assert_allclose(np.array(k_pool.astype(mx.float32)), ref[2], **tol)
    written = [s for s in np.array(kw["slots"]) if s >= 0]
    np.testing.assert_array_equal(
        np.array(k_pool.astype(mx.float32))[written], np.array(k_rot.astype(mx.float32))
    )  # the pool row is k_rot, bit for bit
    np.testing.assert_array_equal(np.array(v_pool.astype(mx.float32)), ref[3])  # v is written as it is


@pytest.mark.parametrize("backend", BACKENDS)
def test_q_norm_alone_leaves_k_unnormalised(backend):
    kw = _call(3, 4, 2, 16, 5, "float32")
    qw, _ = _weights(16)
    q_rot, k_rot, _, _ = rope_pool_fused(**kw, q_norm_weight=qw, backend=backend)
    plain = rope_pool_fused(**kw, backend=backend)
    np.testing.assert_array_equal(np.array(k_rot), np.array(plain[1]))
    assert not np.allclose(np.array(q_rot), np.array(plain[0]))


def test_qk_norm_matches_mlx_lm_qwen3_attention():
    """mlx-lm's Qwen3 Attention: q_norm/k_norm (mx.fast.rms_norm) then its RoPE; the op on the same
    projections with the norms' weights gives the same q and k, within twice the float32 bound."""
    from mlx_lm.models import qwen3

    mx.random.seed(3)
    args = qwen3.ModelArgs(
        model_type="qwen3",
        hidden_size=64,
        num_hidden_layers=1,
        intermediate_size=128,
        num_attention_heads=4,
        rms_norm_eps=1e-6,
        vocab_size=32,
        num_key_value_heads=2,
        max_position_embeddings=512,
        head_dim=32,
        tie_word_embeddings=True,
        rope_theta=1e6,
    )
    attn = qwen3.Attention(args)
    attn.q_norm.weight = mx.random.uniform(0.5, 1.5, (32,))
    attn.k_norm.weight = mx.random.uniform(0.5, 1.5, (32,))
    T = 6
    x = mx.random.normal((1, T, 64))
    q = attn.q_norm(attn.q_proj(x).reshape(1, T, 4, 32)).transpose(0, 2, 1, 3)
    k = attn.k_norm(attn.k_proj(x).reshape(1, T, 2, 32)).transpose(0, 2, 1, 3)
    want_q, want_k = (attn.rope(a)[0].transpose(1, 0, 2) for a in (q, k))  # [T, H, D]
    q_in, k_in = attn.q_proj(x)[0].reshape(T, 4, 32), attn.k_proj(x)[0].reshape(T, 2, 32)
    v = attn.v_proj(x)[0].reshape(T, 2, 32)
    pool = mx.zeros((T, 2, 32))
    pos = mx.arange(T, dtype=mx.int32)
    for backend in BACKENDS:
        q_rot, k_rot, _, _ = rope_pool_fused(
            q_in,
            k_in,
            v,
            pos,
            pos,
            pool,
            pool,
            head_dim=32,
            num_qo_heads=4,
            num_kv_heads=2,
            rope_base=1e6,
            q_norm_weight=attn.q_norm.weight,
            k_norm_weight=attn.k_norm.weight,
            norm_eps=1e-6,
            backend=backend,
        )
        for got, want, x_in, w in (
            (q_rot, want_q, q_in, attn.q_norm.weight),
            (k_rot, want_k, k_in, attn.k_norm.weight),
        ):
            tol = allclose_tolerance("float32", np.arange(T), rms_norm(x_in, w, 1e-6), norm_dim=32)
            np.testing.assert_allclose(np.array(got), np.array(want), rtol=0, atol=2 * tol["atol"])


# --- FP8 -------------------------------------------------------------------------------------

CODES = np.arange(256, dtype=np.uint8)
VALUES = e4m3.decode_table()  # [256] float32, NaN at 0x7F and 0xFF


def _boundaries() -> np.ndarray:
    """Every midpoint between neighbouring finite codes, and the float32 values just either side."""
    pos = VALUES[:0x7F].astype(np.float64)
    mid = ((pos[1:] + pos[:-1]) / 2).astype(np.float32)  # exact: e4m3 midpoints fit float32
    assert np.array_equal(mid.astype(np.float64), (pos[1:] + pos[:-1]) / 2)
    out = np.concatenate([mid, np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(0))])
    return np.concatenate([out, -out])


def test_reference_encoder_on_every_code():
    finite = (CODES & 0x7F) != 0x7F
    assert np.array_equal(encode_e4m3(VALUES[finite]), CODES[finite]), "every finite code encodes to itself"
    assert list(encode_e4m3(VALUES[~finite])) == [0x7F, 0x7F], "NaN stays NaN: 0x7F whatever its sign (NVIDIA's rule)"
    assert VALUES[0x7E] == 448 and VALUES[0x01] == 2.0**-9 and VALUES[0x08] == 2.0**-6


def test_reference_encoder_rounds_to_nearest_even_and_saturates():
    pos = VALUES[:0x7F]
    for c in range(0x7E):  # midpoint of codes c and c+1: to the even one; a float32 ulp away: the nearer
        mid = np.float32((np.float64(pos[c]) + np.float64(pos[c + 1])) / 2)
        assert encode_e4m3(mid) == (c if c % 2 == 0 else c + 1)
        assert encode_e4m3(np.nextafter(mid, np.float32(np.inf))) == c + 1
        assert encode_e4m3(np.nextafter(mid, np.float32(0))) == c
    big = np.array([448, 449, 464, 480, 1e30, np.inf], np.float32)
    assert list(encode_e4m3(big)) == [0x7E] * 6 and list(encode_e4m3(-big)) == [0xFE] * 6
    assert list(encode_e4m3(np.array([0.0, -0.0, 2.0**-10, -(2.0**-10), 1e-45], np.float32))) == [0, 0x80, 0, 0x80, 0]


def test_three_encoders_agree_on_random_float32():
    """ropepool.fp8.encode (MLX integer ops), the reference (table search) and MLX's own mx.to_fp8
    (finite values: MLX turns NaN into 448) on a million random float32 bit patterns."""
    x = np.random.default_rng(0).integers(0, 2**32, 1_000_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    want = encode_e4m3(x)
    assert np.array_equal(np.array(e4m3.encode(mx.array(x))), want)
    finite = ~np.isnan(x)
    assert np.array_equal(np.array(mx.to_fp8(mx.array(x[finite]))), want[finite])


def _fp8_pools(P, Hkv, D):
    return mx.zeros((P, Hkv, D), mx.uint8), mx.zeros((P, Hkv, D), mx.uint8)


def _values_call(values: np.ndarray, D=8):
    """A call whose v rows (and k rows, at position 0: cos 1, sin 0, so k_rot = k) hold ``values``."""
    rows = values.astype(np.float32).reshape(-1, 1, D)  # [T, 1, D]
    T = rows.shape[0]
    k_pool, v_pool = _fp8_pools(T, 1, D)
    return dict(
        q=mx.array(rows),
        k=mx.array(rows),
        v=mx.array(rows),
        positions=mx.zeros(T, mx.int32),
        slots=mx.arange(T, dtype=mx.int32)[::-1],
        k_pool=k_pool,
        v_pool=v_pool,
        head_dim=D,
        num_qo_heads=1,
        num_kv_heads=1,
        rope_base=10000.0,
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("what", ["every code", "boundaries", "saturation and NaN"])
def test_fp8_pools_hold_the_reference_codes(backend, what):
    values = {
        "every code": VALUES,
        "boundaries": _boundaries(),
        "saturation and NaN": np.array([448, 449, 464, 480, 1e30, np.inf, np.nan, -np.nan] * 2, np.float32),
    }[what]
    values = np.concatenate([values, np.zeros((-values.size) % 8, np.float32)])
    kw = _values_call(values)
    _, k_rot, k_pool, v_pool = rope_pool_fused(**kw, backend=backend)
    want = encode_e4m3(values).reshape(-1, 1, 8)[::-1]  # slots reversed
    assert np.array_equal(np.array(v_pool), want), f"{backend}: v_pool codes"
    # k_rot = k at position 0 (cos 1, sin 0), except where a NaN's pair partner turns NaN too (NaN * 0)
    assert np.array_equal(np.array(k_pool), encode_e4m3(np.array(k_rot))[::-1]), f"{backend}: k_pool codes"
    rows = np.array(kw["k"])
    finite = ~np.isnan(rows).any(axis=(1, 2))
    assert np.array_equal(np.array(k_rot)[finite], rows[finite]) and k_rot.dtype == mx.float32


def test_fp8_emulator_runs_the_same_codes():
    """The kernel body's rp_e4m3 under the grid emulator, with its in-kernel pool write."""
    if emulator.unavailable_reason():
        pytest.skip(emulator.unavailable_reason())
    values = np.concatenate([VALUES, _boundaries(), np.array([1e30, np.inf, -np.inf, 1e-45], np.float32)])
    values = np.concatenate([values, np.zeros((-values.size) % 8, np.float32)])
    kw = {n: (np.array(x) if isinstance(x, mx.array) else x) for n, x in _values_call(values).items()}
    run = emulator.emulate(*(kw[n] for n in ARGS), rope_base=10000.0, reverse=True)
    want = encode_e4m3(values).reshape(-1, 1, 8)
    want_k = encode_e4m3(run.k_rot)  # k_rot = k but where a NaN's pair partner turned NaN (NaN * sin 0)
    assert run.guards_intact
    assert np.array_equal(run.v_fp8, want) and np.array_equal(run.k_fp8, want_k)
    assert np.array_equal(run.v_pool, want[::-1]) and np.array_equal(run.k_pool, want_k[::-1])
    assert (want_k == want).mean() > 0.95


def _quotient_not_product(scale: float) -> np.ndarray:
    """float16 values x where e4m3(x / scale) and e4m3(x * float32(1 / scale)) differ (near a midpoint)."""
    x = np.arange(0x0400, 0x7C00, dtype=np.uint16).view(np.float16).astype(np.float32)  # every positive normal
    differ = encode_e4m3(x / np.float32(scale)) != encode_e4m3(x * np.float32(1.0 / scale))
    return x[differ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_fp8_divides_by_the_scale_as_vllm(backend):
    """vLLM's reshape_and_cache_flash writes e4m3(float32(x) / scale) (x = 1.328125, v_scale 1.7: 0x34,
    where the product by float32(1 / 1.7) gives 0x35), and a NaN of either sign as 0x7F."""
    x = _quotient_not_product(1.7)
    assert 1.328125 in x and x.size >= 8
    values = np.concatenate([x[: x.size // 8 * 8], [np.nan, -np.nan, -1.328125, 0, 0, 0, 0, 0]]).astype(np.float32)
    kw = _values_call(values)
    _, _, _, v_pool = rope_pool_fused(**kw, v_scale=1.7, backend=backend)
    got = np.array(v_pool)[::-1].reshape(-1)  # slots reversed
    assert np.array_equal(got, encode_e4m3(values / np.float32(1.7))), backend
    assert got[list(values).index(np.float32(1.328125))] == 0x34 and list(got[-8:-5]) == [0x7F, 0x7F, 0xB4]
    assert not np.array_equal(got[:-8], encode_e4m3(values[:-8] * np.float32(1.0 / 1.7))), "the product's codes differ"


def test_fp8_emulator_divides_by_the_scale():
    """The same quotient in the kernel body's text (rp_div), as every GPU backend compiles it."""
    if emulator.unavailable_reason():
        pytest.skip(emulator.unavailable_reason())
    x = _quotient_not_product(1.7)
    values = np.concatenate([x[: x.size // 8 * 8], [np.nan, -np.nan, 0, 0, 0, 0, 0, 0]]).astype(np.float32)
    kw = {n: (np.array(v) if isinstance(v, mx.array) else v) for n, v in _values_call(values).items()}
    run = emulator.emulate(*(kw[n] for n in ARGS), rope_base=10000.0, v_scale=1.7)
    assert run.guards_intact and np.array_equal(run.v_fp8.reshape(-1), encode_e4m3(values / np.float32(1.7)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_fp8_codes_are_the_same_on_every_backend(dtype):
    """The encoding is bit-exact across backends: v_pool (v unrotated) is the same bytes everywhere, and
    k_pool the reference codes of each backend's own k_rot over k_scale (k_rot itself may differ by an
    ulp between backends, whose cos and sin differ); where two backends' k_rot agree, so do their codes."""
    kw = _call(6, 4, 2, 16, 8, dtype, slots=[7, -1, 0, 3, 5, 1])
    kw.update({n: kw[n] * 40 for n in ("k", "v")})  # spread over e4m3's range, saturating some
    kw["k_pool"], kw["v_pool"] = _fp8_pools(8, 2, 16)
    rows, tokens = [7, 0, 3, 5, 1], [0, 2, 3, 4, 5]
    outs = {}
    for b in BACKENDS:
        _, k_rot, k_pool, v_pool = rope_pool_fused(**kw, k_scale=0.5, v_scale=3.0, backend=b)
        k_pool, v_pool = np.array(k_pool), np.array(v_pool)
        assert np.array_equal(k_pool[rows], quantize_rows(k_rot, 0.5)[tokens]), b
        assert np.array_equal(v_pool[rows], quantize_rows(kw["v"], 3.0)[tokens]), b
        assert not k_pool[[2, 4, 6]].any() and not v_pool[[2, 4, 6]].any(), "unwritten rows keep their bits"
        outs[b] = (np.array(k_rot.astype(mx.float32)), k_pool, v_pool)
    first = outs[BACKENDS[0]]
    for b, (k_rot, k_pool, v_pool) in outs.items():
        assert np.array_equal(v_pool, first[2]), f"{b}: v codes differ from {BACKENDS[0]}'s"
        same = k_rot == first[0]  # [T, Hkv, D]
        assert np.array_equal(k_pool[rows][same[tokens]], first[1][rows][same[tokens]]), b
        assert same.mean() > 0.5


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b in ("cpu", "mlx")])
def test_fp8_inplace_and_numpy(backend):
    kw = _call(3, 4, 2, 8, 5, "float16", kind="numpy", slots=[4, 0, -1])
    kw["k_pool"], kw["v_pool"] = np.zeros((5, 2, 8), np.uint8), np.zeros((5, 2, 8), np.uint8)
    k_pool = kw["k_pool"]
    q_rot, k_rot, kp, vp = rope_pool_fused(**kw, k_scale=0.25, backend=backend, inplace=True)
    assert kp is k_pool and q_rot.dtype == np.float16
    assert np.array_equal(kp[[4, 0]], quantize_rows(k_rot, 0.25)[:2])
    assert np.array_equal(vp[[4, 0]], quantize_rows(kw["v"], 1.0)[:2])


@pytest.mark.parametrize("backend", BACKENDS)
def test_fp8_duplicate_slots_without_value_checks_last_wins(backend):
    kw = _call(3, 2, 1, 8, 4, "float32", slots=[1, 1, 2])
    kw["k_pool"], kw["v_pool"] = _fp8_pools(4, 1, 8)
    _, _, _, v_pool = rope_pool_fused(**kw, check_values=False, backend=backend)
    assert np.array_equal(np.array(v_pool)[1], quantize_rows(kw["v"], 1.0)[1])


def test_qk_norm_and_fp8_together_on_every_backend():
    kw = _call(4, 16, 8, 128, 6, "bfloat16")
    kw["k_pool"], kw["v_pool"] = _fp8_pools(6, 8, 128)
    qw, kw_w = _weights(128, seed=1)
    for b in BACKENDS:
        _, k_rot, k_pool, v_pool = rope_pool_fused(**kw, q_norm_weight=qw, k_norm_weight=kw_w, k_scale=0.1, backend=b)
        rows = np.array(kw["slots"])
        assert np.array_equal(np.array(k_pool)[rows], quantize_rows(k_rot, 0.1)), b
        assert np.array_equal(np.array(v_pool)[rows], quantize_rows(kw["v"], 1.0)), b


# --- errors beyond the catalog's minimal triggers --------------------------------------------

ERROR_CASES = [
    (
        "float pools keep SGLang's message",
        "pool_dtype",
        lambda kw: {"k_pool": kw["k_pool"].astype(mx.float16), "v_pool": kw["v_pool"].astype(mx.float16)},
    ),
    ("uint8 v with float k", "fp8_pool_dtype", lambda kw: {"v_pool": kw["v_pool"].astype(mx.uint8)}),
    ("a scale with float pools", "kv_scale", lambda kw: {"v_scale": 2.0}),
    (
        "a NaN scale",
        "kv_scale",
        lambda kw: {
            "k_pool": kw["k_pool"].astype(mx.uint8),
            "v_pool": kw["v_pool"].astype(mx.uint8),
            "k_scale": float("nan"),
        },
    ),
    ("a weight as a list", "not_an_array", lambda kw: {"k_norm_weight": [1.0] * 8}),
    ("an int weight", "norm_weight_dtype", lambda kw: {"q_norm_weight": mx.ones((8,), mx.int32)}),
    ("a [1, D] weight", "norm_weight_shape", lambda kw: {"q_norm_weight": mx.ones((1, 8))}),
    ("eps as a string", "norm_eps", lambda kw: {"q_norm_weight": mx.ones((8,)), "norm_eps": "1e-6"}),
]


@pytest.mark.parametrize("name,code,change", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_fusion_errors(name, code, change):
    kw = _call(3, 4, 2, 8, 6, "float32")
    kw.update(change(kw))
    err = expect_error(code, rope_pool_fused, **kw)
    if code == "pool_dtype":
        assert str(err).split("\n")[0] == "pool dtypes must match q/k/v dtype"


@pytest.mark.parametrize("backend", BACKENDS)
def test_qk_norm_of_an_all_zero_head_is_zero_not_nan(backend):
    """norm_eps keeps 1 / sqrt(mean(x**2) + eps) finite: a head of zeros stays zeros."""
    kw = _call(2, 2, 1, 8, 3, "float16")
    kw["q"] = mx.zeros_like(kw["q"])
    kw["k"] = mx.concatenate([mx.zeros((1, 1, 8), mx.float16), kw["k"][1:]])
    q_rot, k_rot, _, _ = rope_pool_fused(
        **kw, q_norm_weight=np.ones(8, np.float32), k_norm_weight=np.ones(8, np.float32), backend=backend
    )
    assert not np.array(q_rot).any() and not np.array(k_rot)[0].any()
    assert np.isfinite(np.array(k_rot)).all()


def test_qk_norm_random_shapes_on_the_mlx_path():
    """Random shapes, dtypes, rotations, weights and eps on the mlx path (no compiler build per shape)."""
    rng = np.random.default_rng(11)
    for _ in range(25):
        Hkv = int(rng.integers(1, 4))
        Hq, D = Hkv * int(rng.integers(1, 4)), 2 * int(rng.integers(1, 40))
        T, dtype = int(rng.integers(0, 6)), str(rng.choice(DTYPES))
        variant = (
            {}
            if rng.random() < 0.5
            else {"rotary_dim": 2 * int(rng.integers(1, D // 2 + 1)), "is_neox": bool(rng.random() < 0.5)}
        )
        kw = {**_call(T, Hq, Hkv, D, T + 2, dtype), **variant}
        w = rng.uniform(-2, 2, D).astype(np.float32)
        eps = float(10.0 ** rng.uniform(-8, -1))
        q_rot, k_rot, _, _ = rope_pool_fused(
            **kw, q_norm_weight=w, k_norm_weight=w[::-1].copy(), norm_eps=eps, backend="mlx"
        )
        ref = rope_pool_reference(
            *(kw[n] for n in ARGS),
            rope_base=kw["rope_base"],
            q_norm_weight=w,
            k_norm_weight=w[::-1],
            norm_eps=eps,
            **variant,
        )
        rope, pos = rope_of(kw), np.array(kw["positions"])
        for got, want, x, ww in ((q_rot, ref[0], kw["q"], w), (k_rot, ref[1], kw["k"], w[::-1])):
            ratio = error_ratio(
                np.array(got.astype(mx.float32)), want, rms_norm(x, ww, eps), pos, dtype, rope, norm_dim=D
            )
            assert ratio <= 1, (T, Hq, Hkv, D, dtype, variant, eps, ratio)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_cpu_backend_s_qk_norm_is_the_gpu_grid_s_bit_for_bit(dtype):
    """The "cpu" backend takes each head's 1 / RMS from a table filled once per (token, head); the grid
    emulator computes it in every thread, as a GPU does. Same steps, same order: the same bits."""
    if emulator.unavailable_reason() or not ropepool.available_backends()["cpu"].available:
        pytest.skip("needs g++ (the cpu backend and the grid emulator)")
    kw = _call(5, 16, 8, 128, 6, dtype)
    qw, kw_w = _weights(128, seed=2)
    qw = np.array(mx.array(qw).astype(mx.float32))
    q_rot, k_rot, _, _ = rope_pool_fused(**kw, q_norm_weight=qw, k_norm_weight=kw_w, norm_eps=1e-6, backend="cpu")
    storage = (lambda a: np.array(a.view(mx.uint16))) if dtype == "bfloat16" else (lambda a: np.array(a))
    run = emulator.emulate(
        *(storage(kw[n]) if n in ("q", "k", "v", "k_pool", "v_pool") else np.array(kw[n]) for n in ARGS),
        rope_base=kw["rope_base"],
        dtype=dtype,
        q_norm_weight=qw,
        k_norm_weight=kw_w,
        norm_eps=1e-6,
    )
    assert np.array_equal(storage(q_rot), run.q_rot) and np.array_equal(storage(k_rot), run.k_rot)
