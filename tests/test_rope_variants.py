"""RoPE as real models use it: partial rotary, GPT-J pairs and rope scaling, against mlx-lm's own RoPE.

mlx-lm is the real client: ``initialize_rope`` builds the RoPE module its models run for a config
(``Llama3RoPE``, ``YarnRoPE``, ``SuScaledRoPE``, ``nn.RoPE``). Each backend's q_rot must lie within
the tolerance bound of the float64 reference, so must mlx-lm's, and so the two are within twice the
bound of each other. The pools hold k_rot's bits, unrotated dimensions are copied bit for bit, and
the CPU build agrees with the grid emulator bit for bit on every variant.
"""

import mlx.core as mx
import numpy as np
import pytest
from helpers import bits

import ropepool
from ropepool import models
from ropepool.kernels import emulator
from ropepool.kernels.emulator import STORAGE
from ropepool.reference import rotate
from ropepool.tolerance import error_ratio

mlx_lm_rope = pytest.importorskip("mlx_lm.models.rope_utils", reason="mlx-lm is in the test extra")

DTYPES = ["float32", "float16", "bfloat16"]
BACKENDS = [name for name in ("cpu", "mlx") if ropepool.available_backends()[name].available]

# name, config (a preset, or the fields of a real config.json), why it is here
MODELS = [
    ("llama-3.1-8b", "llama-3.1-8b", "llama3 scaling, factor 8 (meta-llama/Llama-3.1-8B)"),
    ("qwen2.5-7b-yarn", "qwen2.5-7b-yarn", "YaRN, factor 4, cos/sin scale 1.139 (Qwen2.5-7B-Instruct)"),
    ("phi-3.5-mini", "phi-3.5-mini", "longrope, 48 long factors, scale 1.19 (microsoft/Phi-3.5-mini-instruct)"),
    ("phi-2", "phi-2", "partial rotary: 32 of 80 dimensions (microsoft/phi-2)"),
    (
        "gpt-j-6b",
        {"model_type": "gptj", "n_head": 16, "n_embd": 4096, "rotary_dim": 64, "rope_theta": 10000.0},
        "GPT-J pairs on 64 of 256 dimensions (EleutherAI/gpt-j-6b config.json)",
    ),
    (
        "linear-x4",
        {
            "num_attention_heads": 8,
            "hidden_size": 512,
            "rope_theta": 10000.0,
            "rope_scaling": {"type": "linear", "factor": 4.0},
        },
        "linear interpolation, the older 'type' key",
    ),
]
OFFSETS = [0, 1000, 31000, 131056]  # 16 positions from each: up to 131,071
L, H = 16, 2


def params(config) -> models.RopeParams:
    return models.preset(config) if isinstance(config, str) else models.from_config(config)


def variant(p: models.RopeParams) -> dict:
    """The op's RoPE keywords beyond rope_base."""
    return {
        k: v for k, v in p.op_kwargs().items() if k not in ("head_dim", "num_qo_heads", "num_kv_heads", "rope_base")
    }


def mlx_lm_module(p: models.RopeParams):
    """The RoPE module mlx-lm runs for this config."""
    rope = p.rope()
    return mlx_lm_rope.initialize_rope(
        rope.rotary_dim, p.rope_base, not rope.is_neox, p.rope_scaling, p.max_position_embeddings
    )


def run_op(p, x, positions, backend):
    """q_rot of the op for x ``[T, H, D]`` (k the same), and the pools it wrote."""
    T = x.shape[0]
    pool = mx.zeros((T, H, p.head_dim), x.dtype)
    slots = mx.array(np.arange(T, dtype=np.int32))
    return ropepool.rope_pool_fused(
        x,
        x,
        x,
        mx.array(positions),
        slots,
        pool,
        pool,
        head_dim=p.head_dim,
        num_qo_heads=H,
        num_kv_heads=H,
        rope_base=p.rope_base,
        backend=backend,
        **variant(p),
    )


def f64(a: mx.array) -> np.ndarray:
    return np.array(a.astype(mx.float32), np.float64)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,config,why", MODELS, ids=[m[0] for m in MODELS])
def test_the_op_computes_what_mlx_lm_computes(name, config, why, dtype, backend):
    p = params(config)
    rope, module = p.rope(), mlx_lm_module(p)
    rng = np.random.default_rng(len(name))
    for offset in OFFSETS:
        x = mx.array(rng.standard_normal((1, H, L, p.head_dim)).astype(np.float32)).astype(getattr(mx, dtype))
        theirs = module(x, offset=offset)[0].transpose(1, 0, 2)  # [L, H, D]
        x_t = x[0].transpose(1, 0, 2)  # [T, H, D]
        positions = np.arange(offset, offset + L, dtype=np.int32)
        q_rot, k_rot, k_pool, _ = run_op(p, x_t, positions, backend)
        want = rotate(f64(x_t), positions, rope)
        ours_ratio = error_ratio(f64(q_rot), want, f64(x_t), positions, dtype, rope)
        theirs_ratio = error_ratio(f64(theirs), want, f64(x_t), positions, dtype, rope)
        assert ours_ratio <= 1, f"{why}: ours off the float64 reference by {ours_ratio:.2f} x bound at {offset}"
        assert theirs_ratio <= 1, f"{why}: mlx-lm off the float64 reference by {theirs_ratio:.2f} x bound"
        assert error_ratio(f64(q_rot), f64(theirs), f64(x_t), positions, dtype, rope) <= 2
        assert np.array_equal(bits(k_pool), bits(k_rot))  # every row written: the pool holds k_rot's bits
        rest = slice(rope.rotary_dim, None)
        assert np.array_equal(bits(q_rot[..., rest]), bits(x_t[..., rest]))  # unrotated: copied bit for bit


def test_plain_rope_on_a_llama3_config_is_right_at_zero_and_off_far_away():
    """Llama-3.1's config run as plain RoPE: right at position 0, far off at long positions."""
    p = models.preset("llama-3.1-8b")
    module = mlx_lm_module(p)
    x = mx.array(np.random.default_rng(0).standard_normal((1, 1, 1, p.head_dim)).astype(np.float32))
    errors = []
    for offset in (0, 15, 2047, 32767):
        theirs = np.array(module(x, offset=offset))[0, :, 0]  # [1, D]
        positions = np.array([offset], np.int32)
        q = x[0].transpose(1, 0, 2)  # [1, 1, D]
        plain = ropepool.rope_pool_fused(
            q,
            q,
            q,
            mx.array(positions),
            mx.array([0], dtype=mx.int32),
            mx.zeros((1, 1, p.head_dim)),
            mx.zeros((1, 1, p.head_dim)),
            head_dim=p.head_dim,
            num_qo_heads=1,
            num_kv_heads=1,
            rope_base=p.rope_base,
        )[0]
        errors.append(float(np.abs(np.array(plain)[0] - theirs).max()))
    assert errors[0] < 1e-6 and errors[1] > 1e-3 and errors[3] > 0.5, errors


@pytest.mark.skipif(emulator.unavailable_reason() is not None, reason=str(emulator.unavailable_reason()))
@pytest.mark.skipif("cpu" not in BACKENDS, reason="no 'cpu' backend here")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,config,why", MODELS, ids=[m[0] for m in MODELS])
def test_cpu_build_and_emulator_agree_bit_for_bit(name, config, why, dtype):
    p = params(config)
    T, P = 5, 8
    rng = np.random.default_rng(1)
    x = mx.array(rng.standard_normal((T, H, p.head_dim)).astype(np.float32)).astype(getattr(mx, dtype))
    positions = np.array([0, 7, 4095, 65536, 131071], np.int32)
    slots = np.array([3, -1, 0, 7, 5], np.int32)
    pool = mx.array(rng.standard_normal((P, H, p.head_dim)).astype(np.float32)).astype(getattr(mx, dtype))
    q_rot, k_rot, k_pool, v_pool = ropepool.rope_pool_fused(
        x,
        x,
        x,
        mx.array(positions),
        mx.array(slots),
        pool,
        pool,
        head_dim=p.head_dim,
        num_qo_heads=H,
        num_kv_heads=H,
        rope_base=p.rope_base,
        backend="cpu",
        **variant(p),
    )
    store = lambda a: bits(a).view(STORAGE[dtype]) if dtype != "bfloat16" else bits(a)  # noqa: E731
    run = emulator.emulate(
        store(x),
        store(x),
        store(x),
        positions,
        slots,
        store(pool),
        store(pool),
        rope_base=p.rope_base,
        dtype=dtype,
        **variant(p),
    )
    assert run.guards_intact
    for got, emulated in zip((q_rot, k_rot, k_pool, v_pool), (run.q_rot, run.k_rot, run.k_pool, run.v_pool)):
        assert np.array_equal(bits(got), emulated.view(bits(got).dtype))


@pytest.mark.parametrize("backend", BACKENDS)
def test_explicit_defaults_are_todays_call_bit_for_bit(backend):
    kw = ropepool.make_inputs(ropepool.Shapes(6, 8, 2, 16, 12), "bfloat16", positions=[0, 1, 2, 900, 5000, 70000])
    today = ropepool.rope_pool_fused(**kw, backend=backend)
    spelled = ropepool.rope_pool_fused(
        **kw,
        backend=backend,
        rotary_dim=16,
        is_neox=True,
        rope_scaling={"rope_type": "default"},
        max_position_embeddings=4096,
    )
    for a, b in zip(today, spelled):
        assert np.array_equal(bits(a), bits(b))


def test_longrope_picks_short_factors_within_the_original_context():
    scaling = {
        "rope_type": "longrope",
        "original_max_position_embeddings": 4096,
        "short_factor": [1.0] * 4,
        "long_factor": [4.0] * 4,
    }
    short = ropepool.rope.rope_table(8, 10000.0, rope_scaling=scaling, max_position_embeddings=4096)
    long = ropepool.rope.rope_table(8, 10000.0, rope_scaling=scaling, max_position_embeddings=16384)
    plain = ropepool.rope.plain(8, 10000.0)
    assert short.inv_freq == plain.inv_freq and short.scale == 1.0
    assert np.allclose(np.array(long.inv_freq) * 4, plain.inv_freq) and long.scale == pytest.approx(
        np.sqrt(1 + np.log(4) / np.log(4096))
    )
