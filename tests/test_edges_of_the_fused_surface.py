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
        f"k shape must be [num_tokens, num_kv_heads, head_dim], got {k_shape}"
    ), str(err.value)
    report = explain(str(err.value), ropepool.models.preset("qwen2.5-7b"))
    assert report.startswith("check     k_shape, ") and "\ncase      " in report, report


def test_zero_kv_heads_is_explained_as_a_tensor_parallel_split():
    report = explain(
        "k shape must be [num_tokens, num_kv_heads, head_dim], got (6, 0, 128)", ropepool.models.preset("qwen2.5-7b")
    )
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
    kw.update(
        q=big,
        k=big[:, :2],
        v=kw["v"].astype(big.dtype),
        k_pool=kw["k_pool"].astype(big.dtype),
        v_pool=kw["v_pool"].astype(big.dtype),
    )
    w = mx.ones((D,))
    q_rot, k_rot, _, _ = rope_pool_fused(**kw, q_norm_weight=w, k_norm_weight=w, backend=backend)
    ref = rope_pool_reference(
        *(kw[n] for n in ARGS),
        rope_base=kw["rope_base"],
        q_norm_weight=np.ones(D),
        k_norm_weight=np.ones(D),
        norm_eps=1e-6,
    )
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


# 7. calibrate and the engine's FP8 arguments ---------------------------------------------------------

PROMPTS = [[1, 5, 9, 3], [2, 4], [8, 7, 6, 5]]


def tiny(scale=None):
    from ropepool.loaders.tiny import build

    model = build("llama-gqa")
    if scale is not None:
        for layer in model.model.layers:
            layer.self_attn.k_proj.weight = layer.self_attn.k_proj.weight * scale
            layer.self_attn.v_proj.weight = layer.self_attn.v_proj.weight * scale
    return model


def test_calibrate_takes_a_generator_of_prompts():
    from ropepool.engine.kv_scales import calibrate

    model = tiny()
    from_list = calibrate(model, PROMPTS)
    assert calibrate(model, (p for p in PROMPTS)) == from_list and all(k != 1.0 for k, _ in from_list), from_list


@pytest.mark.parametrize("headroom", [0.0, -1.0, float("nan"), float("inf"), "2", True])
def test_calibrate_refuses_a_bad_headroom_by_name(headroom):
    from ropepool.engine import EngineArgumentError
    from ropepool.engine.kv_scales import calibrate

    with pytest.raises(EngineArgumentError, match="^headroom must be a finite number > 0"):
        calibrate(tiny(), PROMPTS, headroom=headroom)


@pytest.mark.parametrize(
    "prompts,named",
    [
        ([], "^prompts is empty"),
        ("1 5 9", "^prompts must be an iterable"),
        ([[1, 2], "ab"], r"^prompts\[1\] must be a list of token ids"),
    ],
)
def test_calibrate_names_the_argument_it_was_given(prompts, named):
    from ropepool.engine import EngineArgumentError
    from ropepool.engine.kv_scales import calibrate

    with pytest.raises(EngineArgumentError, match=named):
        calibrate(tiny(), prompts)


@pytest.mark.parametrize("weights,headroom", [(1e-38, 2.0), (1.0, 1e300)], ids=["tiny k", "huge headroom"])
def test_calibrated_scales_are_always_taken_by_the_op(weights, headroom):
    from ropepool.engine import generate
    from ropepool.engine.kv_scales import calibrate

    model = tiny(weights)
    scales = calibrate(model, PROMPTS, headroom=headroom)
    assert all(KV_SCALE_MIN <= s <= KV_SCALE_MAX for pair in scales for s in pair), scales
    out = generate(model, PROMPTS, 2, pool_rows=16, kv_dtype="fp8", kv_scales=scales)
    assert [len(r.tokens) for r in out] == [2, 2, 2]


@pytest.mark.parametrize(
    "kw,named",
    [
        (dict(kv_dtype="int8"), "^kv_dtype must be None"),
        (dict(kv_dtype=["fp8"]), "^kv_dtype must be None"),
        (dict(kv_scales=[(1.0, 1.0)] * 2), "^kv_scales scale an FP8 cache"),
        (dict(kv_dtype="fp8", kv_scales=[(1.0, 1.0)]), r"^kv_scales must be one \(k_scale, v_scale\) per layer \(2\)"),
        (dict(kv_dtype="fp8", kv_scales=[(0.0, 1.0), (1.0, 1.0)]), r"^kv_scales\[0\] must be a pair"),
        (dict(kv_dtype="fp8", kv_scales=[(1.0, "1"), (1.0, 1.0)]), r"^kv_scales\[0\] must be a pair"),
        (dict(kv_dtype="fp8", kv_scales=5), "^kv_scales must be one"),
    ],
)
def test_engine_fp8_arguments_are_refused_by_name(kw, named):
    from ropepool.engine import Engine, EngineArgumentError

    with pytest.raises(EngineArgumentError, match=named):
        Engine(tiny(), pool_rows=16, **kw)


def test_engine_takes_kv_scales_from_a_generator():
    from ropepool.engine import Engine

    engine = Engine(tiny(), pool_rows=16, kv_dtype="fp8", kv_scales=((0.5, 0.25) for _ in range(2)))
    assert engine.runner.scales == [dict(k_scale=0.5, v_scale=0.25)] * 2


# 8. Every GPU kernel variant checked on first use; a failing one falls back to mlx -------------------

COMPILER = (
    "[metal::Device] Unable to build metal library from source\n"
    "program_source:12:5: error: unknown type name 'bfloat'\nprogram_source:40: error: later"
)


def broken_metal(calls):
    """A stand-in for the Metal kernel: MLX's ops, except that bfloat16 fails to compile and GPT-J
    pairs come out wrong."""
    from ropepool.mlx_ops import rotate_mlx

    def rotate(q, k, v, positions, *, rope, fusion):
        calls.append(str(q.dtype))
        if q.dtype == mx.bfloat16:
            raise RuntimeError(COMPILER)
        out = rotate_mlx(q, k, v, positions, rope=rope, fusion=fusion)
        return (out[0] * 1.01, *out[1:]) if not rope.is_neox else out

    rotate.__name__ = "rotate_metal"
    return rotate


@pytest.fixture
def fake_metal(monkeypatch):
    """'metal' available here, its implementation guarded as the real one is."""
    from ropepool import backends, kernels
    from ropepool.kernels.variants import FALLEN_BACK, guarded

    FALLEN_BACK.clear()
    calls = []
    impl = guarded("metal", broken_metal(calls))
    reg = dict(backends._registry())
    reg["metal"] = (backends.BackendStatus("metal", True, "a stand-in"), impl)
    monkeypatch.setattr(backends, "_registry", lambda: reg)
    real = kernels.statuses()
    monkeypatch.setattr(kernels, "statuses", lambda: {**real, "metal": (True, "a stand-in", impl)})
    yield calls
    FALLEN_BACK.clear()


def test_a_variant_that_fails_to_compile_falls_back_with_one_line(fake_metal, capsys):
    from ropepool.kernels import FALLEN_BACK

    kw = call(T=3, Hq=4, Hkv=2, D=8)
    bf = {n: kw[n].astype(mx.bfloat16) for n in ("q", "k", "v", "k_pool", "v_pool")}
    got = rope_pool_fused(**{**kw, **bf}, backend="metal")
    want = rope_pool_fused(**{**kw, **bf}, backend="mlx")
    assert all(
        np.array_equal(np.array(a.astype(mx.float32)), np.array(b.astype(mx.float32))) for a, b in zip(got, want)
    )
    rope_pool_fused(**{**kw, **bf}, backend="metal")  # checked once: no second line, no second build
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [
        (
            "ropepool: the metal kernel's variant bfloat16 Hq=4 Hkv=2 D=8 failed its first check and runs "
            "on mlx from now on: RuntimeError: [metal::Device] Unable to build metal library from source: "
            "program_source:12:5: error: unknown type name 'bfloat'"
        )
    ], lines
    assert fake_metal == ["mlx.core.bfloat16"]
    rope_pool_fused(**kw, backend="metal")  # float32 plain still runs on the kernel
    assert fake_metal[1:] == ["mlx.core.float32", "mlx.core.float32"] and len(FALLEN_BACK) == 1


def test_a_variant_that_computes_wrong_falls_back_and_the_answer_is_right(fake_metal, capsys):
    kw = call(T=3, Hq=4, Hkv=2, D=8)
    q_rot, *_ = rope_pool_fused(**kw, is_neox=False, backend="metal")
    ref = rope_pool_reference(*(kw[n] for n in ARGS), rope_base=kw["rope_base"], is_neox=False)
    assert np.abs(np.array(q_rot) - ref[0]).max() < 1e-4
    assert "variant float32 Hq=4 Hkv=2 D=8, GPT-J pairs failed its first check" in capsys.readouterr().err


def test_doctor_lists_the_variants_that_fell_back(fake_metal):
    from ropepool.cli.doctor import _fallen_back_rows

    rows = _fallen_back_rows()  # sweeps each kind once: bfloat16 and GPT-J fail, the rest run
    assert [r[0] for r in rows] == ["fell back to mlx"] * 2, rows
    assert rows[0][1].startswith("metal bfloat16 Hq=4 Hkv=2 D=8: RuntimeError:") and "error: unknown type" in rows[0][1]
    assert rows[1][1].startswith("metal float32 Hq=4 Hkv=2 D=8, GPT-J pairs: q_rot differs from the reference")


# A step's plan applied to a layer of other tokens or other pools: index_len, nothing written ------------


def test_a_layer_with_other_tokens_or_pools_than_the_plan_is_refused():
    from ropepool.mla import apply_mla_plan
    from ropepool.op import apply_plan, plan_step
    from ropepool.rope import rope_table

    kw = make_inputs(Shapes(3, 4, 2, 8, 6), "float32", slots=[0, 2, 4])
    layer = (kw["q"], kw["k"], kw["v"], kw["k_pool"], kw["v_pool"])
    rope = rope_table(8, 10000.0)
    plan = plan_step(kw["positions"][:2], kw["slots"][:2], 6)  # planned for 2 tokens: the layer has 3
    with pytest.raises(RopePoolError) as e:
        apply_plan(*layer, plan, rope=rope)
    assert e.value.code == "index_len" and "q (3, 4, 8)" in e.value.got
    plan = plan_step(kw["positions"], kw["slots"], 7)  # planned for pools of 7 rows: these have 6
    with pytest.raises(RopePoolError) as e:
        apply_plan(*layer, plan, rope=rope)
    assert e.value.code == "index_len" and "k_pool (6, 2, 8)" in e.value.got

    m = ropepool.inputs.mla_inputs(3, 4, 8, 4, 6, slots=[0, 2, 4])
    plan = plan_step(m["positions"][:2], m["slots"][:2], 6)
    with pytest.raises(RopePoolError) as e:
        apply_mla_plan(m["q_pe"], m["k_pe"], m["c_kv"], m["latent_pool"], plan, rope=rope_table(4, 10000.0))
    assert e.value.code == "index_len" and "q_pe (3, 4, 4)" in e.value.got
