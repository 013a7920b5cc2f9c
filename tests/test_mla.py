"""``rope_pool_fused_mla``: MLA's latent write, every dtype and backend against the float64 reference;
the FP8 latent pool bit for bit; each of its shape errors from the catalog, and ``explain`` reading them."""

import mlx.core as mx
import numpy as np
import pytest

from ropepool import available_backends, rope_pool_fused_mla
from ropepool.cli.explain import diagnosis_of, explain
from ropepool.diagnosis.mla import MLA_CASES
from ropepool.errors import MLA_CODES, RopePoolError
from ropepool.inputs import mla_inputs
from ropepool.reference import encode_e4m3, rope_pool_mla_reference
from ropepool.rope import rope_table
from ropepool.teaching.catalog import MLA_CATALOG
from ropepool.teaching.checks import expect_error
from ropepool.tolerance import error_ratio

BACKENDS = [n for n, s in available_backends().items() if s.available]
SIZES = ("num_qo_heads", "kv_lora_rank", "rope_dim")

# (label, T, Hq, kv_lora_rank, rope_dim, P, is_neox, positions)
CASES = [
    ("deepseek-like, GPT-J pairs", 5, 4, 16, 8, 9, False, [0, 3, 100, 7, 9000]),
    ("neox pairs, one token", 1, 2, 8, 4, 3, True, [70000]),
    ("rope_dim 2, MQA-like Hq 1", 3, 1, 4, 2, 4, False, [1, 2, 3]),
    ("no tokens", 0, 4, 8, 4, 3, False, []),
]


def _ref(kw, **variant):
    return rope_pool_mla_reference(**{k: v for k, v in kw.items() if k not in SIZES}, **variant)


def _f64(x):
    return np.array(x.astype(mx.float32) if isinstance(x, mx.array) else x, np.float64)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_mla_matches_the_reference(backend, dtype, case):
    """q_pe and k_pe within the tolerance bound; the pool row is c_kv bit for bit, then k_pe_rot bit for bit;
    rows no token writes keep their bits."""
    _, T, Hq, R, rd, P, neox, positions = case
    kw = mla_inputs(T, Hq, R, rd, P, dtype, positions=positions, seed=T + rd)
    before = _f64(kw["latent_pool"])
    q_rot, k_rot, pool = rope_pool_fused_mla(**kw, is_neox=neox, backend=backend)
    want_q, want_k, _ = _ref(kw, is_neox=neox)
    rope = rope_table(rd, 10000.0, is_neox=neox)
    for got, want, x in ((q_rot, want_q, kw["q_pe"]), (k_rot, want_k, kw["k_pe"])):
        assert error_ratio(_f64(got), want, _f64(x), positions, dtype, rope) <= 1
    pool, slots = _f64(pool), np.array(kw["slots"])
    assert pool.shape == (P, 1, R + rd)
    np.testing.assert_array_equal(pool[slots, 0, :R], _f64(kw["c_kv"]))
    np.testing.assert_array_equal(pool[slots, :, R:], _f64(k_rot))
    untouched = np.setdiff1d(np.arange(P), slots)
    np.testing.assert_array_equal(pool[untouched], before[untouched])


@pytest.mark.parametrize("backend", BACKENDS)
def test_fp8_latent_pool_is_bit_exact(backend):
    """uint8 pool: each written row holds e4m3([c_kv ‖ k_pe_rot] * float32(1/kv_scale)), bit for bit; the
    reference agrees wherever the op's k_pe_rot equals its own rounding."""
    kw = mla_inputs(4, 4, 16, 8, 6, "bfloat16", fp8_pool=True, positions=[0, 5, 50, 500])
    before = np.array(kw["latent_pool"])
    q_rot, k_rot, pool = rope_pool_fused_mla(**kw, is_neox=False, kv_scale=0.25, backend=backend)
    slots = np.array(kw["slots"])
    rows = np.concatenate([_f64(kw["c_kv"])[:, None, :], _f64(k_rot)], axis=-1).astype(np.float32)
    want = encode_e4m3(rows * np.float32(1 / 0.25))
    pool = np.array(pool)
    assert pool.dtype == np.uint8
    np.testing.assert_array_equal(pool[slots], want)
    np.testing.assert_array_equal(np.delete(pool, slots, axis=0), np.delete(before, slots, axis=0))
    ref_pool = _ref(kw, is_neox=False, kv_scale=0.25)[2]
    assert (ref_pool[slots] == pool[slots]).mean() > 0.95  # the same codes but where k_rot rounds the other way


def test_numpy_in_numpy_out_and_in_place():
    """NumPy inputs give NumPy outputs and leave the pool passed alone; inplace=True writes that pool itself."""
    kw = mla_inputs(3, 2, 8, 4, 5, "float32", kind="numpy", slots=[4, -1, 0])
    pool = kw["latent_pool"].copy()
    q_rot, k_rot, new = rope_pool_fused_mla(**kw)
    assert isinstance(new, np.ndarray) and isinstance(q_rot, np.ndarray)
    np.testing.assert_array_equal(kw["latent_pool"], pool)  # not mutated
    np.testing.assert_array_equal(new[[1, 2, 3]], pool[[1, 2, 3]])  # slot -1 wrote nothing
    _, _, same = rope_pool_fused_mla(**kw, inplace=True)
    assert same is kw["latent_pool"]
    np.testing.assert_array_equal(same, new)


def test_deepseek_v3_yarn_rotation_matches_mlx_lm():
    """DeepSeek-V3's own rope (mlx-lm's initialize_rope: yarn, traditional pairs) on q_pe and k_pe, within
    twice the bound (two float32 implementations of one rotation)."""
    rope_utils = pytest.importorskip("mlx_lm.models.rope_utils")
    scaling = {
        "type": "yarn",
        "factor": 40,
        "beta_fast": 32,
        "beta_slow": 1,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
        "original_max_position_embeddings": 4096,
    }
    positions = [0, 1, 1000, 4095]
    kw = mla_inputs(4, 2, 8, 64, 6, "float32", positions=positions)
    q_rot, k_rot, _ = rope_pool_fused_mla(**kw, is_neox=False, rope_scaling=scaling, max_position_embeddings=163840)
    theirs = rope_utils.initialize_rope(64, 10000.0, True, scaling, 163840)
    for ours, x in ((q_rot, kw["q_pe"]), (k_rot, kw["k_pe"])):
        want = mx.concatenate(
            [
                theirs(x[t : t + 1].transpose(1, 0, 2)[None], offset=p)[0].transpose(1, 0, 2)
                for t, p in enumerate(positions)
            ]
        )
        rope = rope_table(64, 10000.0, is_neox=False, rope_scaling=scaling, max_position_embeddings=163840)
        assert error_ratio(np.array(ours), np.array(want), np.array(x), positions, "float32", rope) <= 2


@pytest.mark.parametrize("code", list(MLA_CODES))
def test_every_mla_trigger_raises_its_error_and_the_fix_runs(code):
    spec = MLA_CATALOG[code]
    kw = spec.trigger()
    before = np.array(kw["latent_pool"])
    err = expect_error(code, rope_pool_fused_mla, **kw)
    assert str(err).split("\n")[0] == spec.message.format(**err.details, got=err.got)
    np.testing.assert_array_equal(np.array(kw["latent_pool"]), before)  # nothing written
    rope_pool_fused_mla(**spec.fixed())
    report, d = " ".join(explain(str(err)).split()), diagnosis_of(str(err))
    assert report.startswith(f"check {code}, ")
    if d.case == "catalog":  # the numbers name no one mistake: the catalog's fix
        assert " ".join(spec.fix.split()) in report
    else:  # the mistake the numbers show (ropepool.diagnosis.mla), with its own fix
        assert d.case in MLA_CASES and f"case {d.case}" in report and " ".join(d.fix.split()) in report


def test_mla_catalog_covers_its_codes_and_the_shared_checks_still_apply():
    assert list(MLA_CATALOG) == list(MLA_CODES)
    kw = mla_inputs(2, 2, 8, 4, 4)
    with pytest.raises(RopePoolError, match="positions/slots must be int32"):
        rope_pool_fused_mla(**{**kw, "slots": kw["slots"].astype(mx.int64)})
    with pytest.raises(RopePoolError, match="two tokens write the same pool row"):
        rope_pool_fused_mla(**{**kw, "slots": mx.array([1, 1], mx.int32)})
    with pytest.raises(RopePoolError, match="kv_scale must be"):
        rope_pool_fused_mla(**kw, kv_scale=2.0)  # a float pool stores values as they are
