"""mrope (Qwen2-VL): positions [3, T] and mrope_section, in the table, the reference and the op on every
backend, against transformers' Qwen2-VL formula reproduced here as an independent oracle."""

import mlx.core as mx
import numpy as np
import pytest

from ropepool import RopePoolError, Shapes, available_backends, make_inputs, rope_pool_fused
from ropepool.reference import rope_pool_reference
from ropepool.rope import rope_table
from ropepool.tolerance import error_ratio

BACKENDS = [n for n, s in available_backends().items() if s.available]
QWEN2_VL = {"type": "mrope", "mrope_section": [2, 3, 3]}  # Qwen2-VL's [16, 24, 24] scaled to D = 16


def qwen2_vl_oracle(x, positions3, section, base=10000.0):
    """transformers' Qwen2VLRotaryEmbedding + apply_multimodal_rotary_pos_emb in float64 NumPy:
    freqs [3, T, D/2] from each axis's positions; the D/2 columns split by mrope_section, chunk i
    taken from axis i % 3; cos, sin = cat(f, f); x * cos + rotate_half(x) * sin."""
    x = np.asarray(x, np.float64)  # [T, H, D]
    D = x.shape[-1]
    inv_freq = 1.0 / base ** (np.arange(0, D, 2) / D)  # [D/2]
    freqs = np.asarray(positions3, np.float64)[..., None] * inv_freq  # [3, T, D/2]
    chunks = np.split(freqs, np.cumsum(section)[:-1], axis=-1)
    f = np.concatenate([c[i % 3] for i, c in enumerate(chunks)], axis=-1)  # [T, D/2]
    cos, sin = np.cos(np.concatenate([f, f], -1))[:, None], np.sin(np.concatenate([f, f], -1))[:, None]
    rotate_half = np.concatenate([-x[..., D // 2 :], x[..., : D // 2]], axis=-1)
    return x * cos + rotate_half * sin


POSITIONS3 = np.array([[0, 4, 4, 4, 9], [0, 0, 0, 1, 9], [0, 0, 1, 0, 9]], np.int32)  # text, 3 patches, text


def test_the_table_splits_the_pairs_into_sections():
    r = rope_table(16, 10000.0, rope_scaling=QWEN2_VL)
    assert r.mrope_section == (2, 3, 3) and r.pair_axes().tolist() == [0, 0, 1, 1, 1, 2, 2, 2]
    with pytest.raises(RopePoolError, match="mrope_section three ints summing to rotary_dim / 2 = 8"):
        rope_table(16, 10000.0, rope_scaling={"type": "mrope", "mrope_section": [2, 3]})


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_op_matches_qwen2_vl_formula(backend, dtype):
    kw = make_inputs(Shapes(5, 4, 2, 16, 7), dtype)
    kw["positions"] = mx.array(POSITIONS3)
    q_rot, k_rot, k_pool, _ = rope_pool_fused(**kw, rope_scaling=QWEN2_VL, backend=backend)
    rope = rope_table(16, 10000.0, rope_scaling=QWEN2_VL)
    worst = POSITIONS3.max(axis=0)
    for got, x in ((q_rot, kw["q"]), (k_rot, kw["k"])):
        x64 = np.array(x.astype(mx.float32), np.float64)
        want = qwen2_vl_oracle(x64, POSITIONS3, QWEN2_VL["mrope_section"])
        assert error_ratio(np.array(got.astype(mx.float32)), want, x64, worst, dtype, rope) <= 1
    np.testing.assert_array_equal(
        np.array(k_pool.astype(mx.float32))[np.array(kw["slots"])], np.array(k_rot.astype(mx.float32))
    )
    ref = rope_pool_reference(
        *(kw[n] for n in ("q", "k", "v", "positions", "slots", "k_pool", "v_pool")),
        rope_base=10000.0,
        rope_scaling=QWEN2_VL,
    )
    np.testing.assert_allclose(
        ref[0], qwen2_vl_oracle(np.array(kw["q"].astype(mx.float32)), POSITIONS3, [2, 3, 3]), rtol=0, atol=1e-12
    )


def test_text_positions_are_plain_rope_and_errors():
    """[T] positions under mrope: every axis the same, so plain RoPE bit for bit; bad position shapes refused."""
    kw = make_inputs(Shapes(3, 2, 1, 16, 4), "float16")
    plain = rope_pool_fused(**kw)
    for a, b in zip(rope_pool_fused(**kw, rope_scaling=QWEN2_VL), plain):
        np.testing.assert_array_equal(np.array(a), np.array(b))
    with pytest.raises(RopePoolError, match="positions/slots must have one entry per token"):
        rope_pool_fused(**{**kw, "positions": mx.zeros((2, 3), mx.int32)}, rope_scaling=QWEN2_VL)
    with pytest.raises(RopePoolError, match="expects positions/slots to be 1-D"):
        rope_pool_fused(**{**kw, "positions": mx.zeros((3, 3), mx.int32)})  # [3, T] without mrope
    with pytest.raises(RopePoolError, match="positions must be >= 0"):
        rope_pool_fused(
            **{**kw, "positions": mx.array([[0, 1, 2], [0, -1, 0], [0, 0, 0]], mx.int32)}, rope_scaling=QWEN2_VL
        )


def test_fp8_pool_from_the_final_rotation_and_qk_norm_refused():
    from ropepool.reference import quantize_rows

    kw = make_inputs(Shapes(5, 2, 1, 16, 6), "float16")
    pools = {n: mx.zeros((6, 1, 16), mx.uint8) for n in ("k_pool", "v_pool")}
    kw.update(positions=mx.array(POSITIONS3), **pools)
    _, k_rot, k_pool, v_pool = rope_pool_fused(**kw, rope_scaling=QWEN2_VL, k_scale=0.5)
    slots = np.array(kw["slots"])
    np.testing.assert_array_equal(np.array(k_pool)[slots], quantize_rows(np.array(k_rot), 0.5))
    np.testing.assert_array_equal(np.array(v_pool)[slots], quantize_rows(np.array(kw["v"]), 1.0))
    with pytest.raises(RopePoolError, match="'mrope' cannot be computed by this op"):
        rope_pool_fused(**kw, rope_scaling=QWEN2_VL, q_norm_weight=mx.ones((16,)))


def test_a_resaved_config_with_rope_type_default_and_sections_is_still_mrope():
    """transformers writes Qwen2-VL's {"type": "mrope"} back as {"rope_type": "default", "mrope_section": ...}:
    still three sections, not plain RoPE."""
    from ropepool.models import from_config, load_preset

    config = load_preset("qwen2-vl-7b")
    config["rope_scaling"] = {"rope_type": "default", "mrope_section": [16, 24, 24]}
    spec = from_config(config)
    assert rope_table(128, 1e6, rope_scaling=spec.rope_scaling).mrope_section == (16, 24, 24)
    assert rope_table(128, 1e6, rope_scaling={"type": "mrope", "mrope_section": [16, 24, 24]}).mrope_section == (
        16,
        24,
        24,
    )


def test_interleaved_sections_are_refused_not_computed_as_contiguous():
    with pytest.raises(RopePoolError, match="mrope_interleaved") as e:
        rope_table(
            128, 1e6, rope_scaling={"rope_type": "default", "mrope_section": [24, 20, 20], "mrope_interleaved": True}
        )
    assert e.value.code == "rope_scaling_value"
