"""Edges of the op's newer surface: zero-sized heads, tokens or head_dim; QK-norm at the ends of
float32 (tiny eps, huge values); FP8 scales at the ends of their range. On every backend here."""

import mlx.core as mx
import numpy as np
import pytest

import ropepool
from ropepool import CATALOG, RopePoolError, Shapes, make_inputs, rope_pool_fused
from ropepool.cli.explain import explain
from ropepool.fusion import KV_SCALE_MAX, KV_SCALE_MIN, NORM_EPS_MIN, norm_limit
from ropepool.reference import rope_pool_reference

BACKENDS = [name for name, s in ropepool.available_backends().items() if s.available]
ARGS = ("q", "k", "v", "positions", "slots", "k_pool", "v_pool")


def call(T=6, Hq=32, Hkv=8, D=128, k_shape=None, **changes):
    kw = make_inputs(Shapes(T, Hq, Hkv, D, 8), "float32", slots=list(range(T)))
    if k_shape is not None:
        kw["k"] = kw["v"] = mx.zeros(k_shape, mx.float32)
    kw.update(changes)
    return kw


# 5. Zero-sized k: SGLang's k_shape error, never a ZeroDivisionError ------------------------------------

ZERO_K = [
    ("0 kv heads (tp > Hkv)", (6, 0, 128)),
    ("0 head_dim", (6, 8, 0)),
    ("0 tokens, q has 6", (0, 8, 128)),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name,k_shape", ZERO_K, ids=[c[0] for c in ZERO_K])
def test_zero_sized_k_gives_sglangs_k_shape_error(backend, name, k_shape):
    with pytest.raises(RopePoolError) as err:
        rope_pool_fused(**call(k_shape=k_shape), backend=backend)
    assert err.value.code == "k_shape" and str(err.value).startswith(
        f"k shape must be [num_tokens, num_kv_heads, head_dim], got {k_shape}"), str(err.value)
    report = explain(str(err.value), ropepool.models.preset("qwen2.5-7b"))
    assert report.startswith("check     k_shape, ") and "\ncase      " in report, report


def test_zero_kv_heads_is_explained_as_a_tensor_parallel_split():
    report = explain("k shape must be [num_tokens, num_kv_heads, head_dim], got (6, 0, 128)",
                     ropepool.models.preset("qwen2.5-7b"))
    assert "tensor-parallel split with more ranks than KV heads" in report, report


# 6. QK-norm at the ends of float32; FP8 scales at the ends of their range -----------------------------

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("eps", [NORM_EPS_MIN, 1e-6])
def test_an_all_zero_head_normalises_to_zero_at_the_smallest_eps(backend, eps):
    kw = call(T=2, Hq=4, Hkv=2, D=8)
    kw["q"] = mx.zeros((2, 4, 8), mx.float32)
    q_rot, *_ = rope_pool_fused(**kw, q_norm_weight=mx.ones((8,)), norm_eps=eps, backend=backend)
    assert np.array_equal(np.array(q_rot), np.zeros((2, 4, 8), np.float32)), np.array(q_rot)[0, 0]


@pytest.mark.parametrize("eps", [1e-50, 1e-31, 0.0])
def test_norm_eps_below_the_floor_is_refused(eps):
    with pytest.raises(RopePoolError, match=r"norm_eps must be a finite number >= 1e-30") as err:
        rope_pool_fused(**call(T=2, Hq=4, Hkv=2, D=8), q_norm_weight=mx.ones((8,)), norm_eps=eps)
    assert err.value.code == "norm_eps"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_qk_norm_of_huge_values_matches_the_reference_or_is_refused(backend, dtype):
    """Just below the limit: the reference's values (size one). At 2e19: refused, never zeros."""
    D = 8
    kw = call(T=2, Hq=4, Hkv=2, D=D)
    sign = np.where(np.arange(2 * 4 * D).reshape(2, 4, D) % 3, 1.0, -1.0).astype(np.float32)
    big = mx.array(sign * np.float32(norm_limit(D) * 0.9)).astype(getattr(mx, dtype))
    kw.update(q=big, k=big[:, :2], v=kw["v"].astype(big.dtype),
              k_pool=kw["k_pool"].astype(big.dtype), v_pool=kw["v_pool"].astype(big.dtype))
    w = mx.ones((D,))
    q_rot, k_rot, _, _ = rope_pool_fused(**kw, q_norm_weight=w, k_norm_weight=w, backend=backend)
    ref = rope_pool_reference(*(kw[n] for n in ARGS), rope_base=kw["rope_base"], q_norm_weight=np.ones(D),
                              k_norm_weight=np.ones(D), norm_eps=1e-6)
    for got, want in ((q_rot, ref[0]), (k_rot, ref[1])):
        assert np.abs(np.array(got.astype(mx.float32)) - want).max() < 0.02, (backend, dtype)
    kw["q"] = mx.full((2, 4, D), 2e19).astype(big.dtype)
    with pytest.raises(RopePoolError, match="q is too large for QK-norm in float32") as err:
        rope_pool_fused(**kw, q_norm_weight=w, backend=backend)
    assert err.value.code == "norm_overflow"


def fp8_call(**changes):
    kw = call(T=2, Hq=4, Hkv=2, D=8)
    kw["k_pool"], kw["v_pool"] = mx.zeros((8, 2, 8), mx.uint8), mx.zeros((8, 2, 8), mx.uint8)
    kw.update(changes)
    return kw


@pytest.mark.parametrize("scale", [5e-39, 1e38, 0.0, float("inf")])
def test_kv_scales_outside_the_range_say_the_range(scale):
    with pytest.raises(RopePoolError, match=r"k_scale must be a number from 2\*\*-126 to 2\*\*126") as err:
        rope_pool_fused(**fp8_call(), k_scale=scale)
    assert err.value.code == "kv_scale"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("scale", [KV_SCALE_MIN, KV_SCALE_MAX])
def test_kv_scales_at_the_ends_of_the_range_are_taken(backend, scale):
    kw = fp8_call()
    _, _, k_pool, _ = rope_pool_fused(**kw, k_scale=scale, backend=backend)
    codes = np.array(k_pool)[np.array(kw["slots"])]
    ref = rope_pool_reference(*(kw[n] for n in ARGS), rope_base=kw["rope_base"], k_scale=scale)[2]
    assert np.array_equal(codes, np.array(ref)[np.array(kw["slots"])]), (codes, ref)


def test_the_catalog_holds_the_overflow_lesson():
    spec = CATALOG["norm_overflow"]
    with pytest.raises(RopePoolError) as err:
        rope_pool_fused(**spec.trigger())
    assert err.value.code == "norm_overflow"
    rope_pool_fused(**spec.fixed())
