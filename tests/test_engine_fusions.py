"""The engine with the op's fusions: Qwen3 (QK-norm in the op) and an FP8 KV cache (kv_dtype="fp8")."""

import mlx.core as mx
import numpy as np
import pytest

import ropepool
from ropepool.engine import Engine, generate
from ropepool.engine.mlx_lm_loop import greedy
from ropepool.loaders.tiny import build
from ropepool.reference import quantize_rows
from ropepool.tolerance import ENGINE_LOGITS_FLOAT32

BACKENDS = [n for n, s in ropepool.available_backends().items() if s.available]
PROMPTS = [[1, 5, 9, 3], [2, 4], [8, 7, 6, 5, 4, 3, 2, 1, 0], [100]]
NEW, POOL_ROWS = [1, 6, 4, 5], 12


@pytest.mark.parametrize("backend", BACKENDS)
def test_qwen3_has_mlx_lm_logits_on_every_backend(backend):
    """mlx-lm's Qwen3 normalises q and k per head (q_norm, k_norm) before RoPE; the engine passes the
    norms' weights to the op, which does both in one call."""
    model = build("qwen3")
    served = generate(model, PROMPTS, NEW, pool_rows=POOL_ROWS, backend=backend)
    alone = greedy(model, PROMPTS, NEW)
    for s, a in zip(served, alone):
        assert s.tokens == a.tokens
        np.testing.assert_allclose(np.array(s.logits), np.array(a.logits), **ENGINE_LOGITS_FLOAT32)


def test_qwen3_norm_weights_matter():
    """Served without its QK-norm the tiny Qwen3 gives other logits: the check above is not vacuous."""
    model = build("qwen3")
    want = generate(model, PROMPTS[:1], 3, pool_rows=8)[0].logits
    for layer in model.model.layers:
        layer.self_attn.q_norm.weight = layer.self_attn.q_norm.weight * 2
    got = generate(model, PROMPTS[:1], 3, pool_rows=8)[0].logits
    assert float(mx.abs(got - want).max()) > 1e-2


@pytest.mark.parametrize("name", ["llama-gqa", "qwen3", "phi3-partial"])
def test_fp8_pools_hold_the_codes_of_what_float_pools_hold(name):
    """After one prefill, every row of layer 0's FP8 pools is the e4m3 code of the float pools' row (scales
    1.0): the FP8 engine writes what the float engine writes, quantised. (Later layers see attention
    over dequantised rows, so their k and v differ.)"""
    model = build(name)
    float_engine, fp8_engine = (Engine(model, pool_rows=POOL_ROWS, kv_dtype=kv) for kv in (None, "fp8"))
    for engine in (float_engine, fp8_engine):
        engine.add_request(PROMPTS[2], 1)
        engine.step()  # one prefill of 9 tokens: the same k, v in both (nothing read back yet)
    assert fp8_engine.runner.k_pools[0].dtype == mx.uint8
    f, q = float_engine.runner, fp8_engine.runner
    assert np.array_equal(np.array(q.k_pools[0]), quantize_rows(f.k_pools[0], 1.0))
    assert np.array_equal(np.array(q.v_pools[0]), quantize_rows(f.v_pools[0], 1.0))
    assert np.array(q.k_pools[0])[:9].any() and not np.array(q.k_pools[0])[9:].any()


@pytest.mark.parametrize("name", ["llama-gqa", "qwen3"])
def test_fp8_cache_logits_near_float_and_pools_a_quarter(name):
    model = build(name)
    runs = {kv: generate(model, PROMPTS, NEW, pool_rows=POOL_ROWS, kv_dtype=kv) for kv in (None, "fp8")}
    diff = max(float(mx.abs(a.logits - b.logits).max()) for a, b in zip(runs[None], runs["fp8"]))
    scale = max(float(mx.abs(a.logits).max()) for a in runs[None])
    assert 0 < diff < 0.1 * scale, f"fp8 logits differ by {diff:.3g} (logits up to {scale:.3g})"
    engines = {kv: Engine(model, pool_rows=POOL_ROWS, kv_dtype=kv) for kv in (None, "fp8")}
    nbytes = {kv: sum(p.nbytes for p in e.runner.k_pools + e.runner.v_pools) for kv, e in engines.items()}
    assert engines[None].runner.k_pools[0].dtype == mx.float32 and nbytes["fp8"] * 4 == nbytes[None]


def test_kv_dtype_refused():
    with pytest.raises(ValueError, match="kv_dtype must be None"):
        generate(build("llama-gqa"), PROMPTS, 1, pool_rows=POOL_ROWS, kv_dtype="int8")


def test_calibrated_scales_map_each_layer_below_448_and_move_logits_less():
    """calibrate: per-layer scales from a float prefill; the FP8 pools then hold codes of k_rot / k_scale
    that never saturate, and the logits stay at least as close to float pools' as with scale 1.0."""
    from ropepool.engine.kv_scales import calibrate

    model = build("llama-gqa")
    for layer in model.model.layers:  # small k and v, as in SmolLM2's first layer: scale 1.0 loses them
        layer.self_attn.k_proj.weight = layer.self_attn.k_proj.weight * 0.01
        layer.self_attn.v_proj.weight = layer.self_attn.v_proj.weight * 0.01
    scales = calibrate(model, PROMPTS, headroom=2.0)
    assert len(scales) == len(model.model.layers) and all(0 < k < 1 and 0 < v < 1 for k, v in scales)
    runs = {
        name: generate(model, PROMPTS, NEW, pool_rows=POOL_ROWS, **kw)
        for name, kw in (
            ("float", {}),
            ("fp8", dict(kv_dtype="fp8")),
            ("fp8 calibrated", dict(kv_dtype="fp8", kv_scales=scales)),
        )
    }
    diff = {
        n: max(float(mx.abs(a.logits - b.logits).max()) for a, b in zip(runs["float"], runs[n]))
        for n in ("fp8", "fp8 calibrated")
    }
    assert diff["fp8 calibrated"] < diff["fp8"] / 2, diff
    with pytest.raises(ValueError, match="one \\(k_scale, v_scale\\) per layer"):
        generate(model, PROMPTS, 1, pool_rows=POOL_ROWS, kv_dtype="fp8", kv_scales=scales[:1])
