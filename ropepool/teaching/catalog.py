"""The error catalog as the lessons teach it: what each error of :mod:`ropepool.errors` means.

``CATALOG`` maps each error code to an :class:`ErrorSpec`: the contract's message and origin, what
the error means, common causes, the fix, and two functions: ``trigger()`` returns the keyword
arguments of a minimal call that raises exactly that error, ``fixed()`` the same call with the fix
applied. Tests, the error cards and the error-gallery notebook iterate this catalog; nothing lists
the errors a second time.

>>> spec = CATALOG["k_shape"]
>>> spec.message == CODES["k_shape"].message and sorted(spec.trigger()) == sorted(spec.fixed())
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import mlx.core as mx
import numpy as np

from ..errors import CODES, MLA_CODES
from ..inputs import make_inputs, mla_inputs
from ..shapes import Shapes


@dataclass(frozen=True)
class ErrorSpec:
    """One entry of the catalog: an error code of :data:`ropepool.errors.CODES` and its lesson."""

    code: str
    meaning: str
    causes: tuple[str, ...]
    fix: str
    trigger: Callable[[], dict] = field(repr=False)
    fixed: Callable[[], dict] = field(repr=False)

    @property
    def message(self) -> str:
        """The error's first line, a ``str.format`` template (the contract's)."""
        return (CODES.get(self.code) or MLA_CODES[self.code]).message

    @property
    def origin(self) -> str:
        """Where the check comes from: "sglang" (its Python wrapper), "sglang-c++" (its extension) or "ropepool"."""
        return (CODES.get(self.code) or MLA_CODES[self.code]).origin


# The small GQA call every trigger starts from: T=3, Hq=4, Hkv=2 (G=2), D=8, P=6.
BASE = Shapes(tokens=3, num_qo_heads=4, num_kv_heads=2, head_dim=8, pool_rows=6)


def _call(shapes: Shapes = BASE, dtype: str = "float32", **changes) -> dict:
    kw = make_inputs(shapes, dtype, slots=[0, 2, 4][: shapes.tokens])
    kw.update(changes)
    return kw


def _with(fn: Callable[[dict], dict], shapes: Shapes = BASE, dtype: str = "float32") -> Callable[[], dict]:
    """A trigger that starts from a valid call and breaks it with ``fn``."""

    def build() -> dict:
        kw = _call(shapes, dtype)
        kw.update(fn(kw))
        return kw

    return build


def _inplace_call(writable: bool) -> dict:
    """The base call with NumPy pools, inplace=True: read-only pools (the trigger) or writable ones."""
    kw = _call()
    for name in ("k_pool", "v_pool"):
        kw[name] = np.array(kw[name])
        kw[name].setflags(write=writable)
    return {**kw, "inplace": True}


def _fp8_call(**changes) -> dict:
    """The base call with uint8 pools: an FP8 cache."""
    kw = _call(**changes)
    kw["k_pool"], kw["v_pool"] = (mx.zeros(kw[n].shape, mx.uint8) for n in ("k_pool", "v_pool"))
    return kw


def _longrope(n: int) -> dict:
    """A longrope rope_scaling with ``n`` factors in each list (BASE's head of 8 has 4 pairs)."""
    return {
        "rope_type": "longrope",
        "original_max_position_embeddings": 4096,
        "short_factor": [1.0] * n,
        "long_factor": [2.0] * n,
    }


def _unavailable_backend() -> str:
    """A GPU backend that cannot run on this machine: CUDA on a Mac, Metal anywhere else."""
    return "cuda" if mx.metal.is_available() else "metal"


_SPECS = [
    ErrorSpec(
        "not_an_array",
        "An argument is neither an mx.array nor a NumPy array, so it has no shape or dtype to check.",
        ("a Python list or a torch tensor passed directly",),
        "Wrap it: mx.array(x) or np.asarray(x).",
        _with(lambda kw: {"q": np.array(kw["q"]).tolist()}),
        _call,
    ),
    ErrorSpec(
        "argument_type",
        "head_dim, num_qo_heads and num_kv_heads are ints and check_values and inplace bools, as "
        "SGLang's binding takes them; is_neox is a bool too, max_position_embeddings an int > 0 or "
        "None and rope_scaling the config's dict or None. Any integer type counts as an int "
        "(np.int64 too), NumPy's bool as a bool; nothing is rounded or parsed.",
        (
            "a head count computed with / instead of // (4.0)",
            "a config value read as a string",
            "is_neox='False', which as a string would mean True",
            "rope_scaling='linear' instead of the config's dict",
        ),
        "Pass ints (e.g. config.num_attention_heads // tp_size), True or False, and rope_scaling as "
        "the config holds it.",
        lambda: _call(num_qo_heads=4.0),
        _call,
    ),
    ErrorSpec(
        "qkv_ndim",
        "q, k and v must each be [tokens, heads, head_dim].",
        (
            "the projection output passed before splitting heads: [T, H*D] instead of [T, H, D]",
            "a leading batch axis kept: [B, T, H, D]",
        ),
        "Reshape: q.reshape(T, num_qo_heads, head_dim), k and v with num_kv_heads.",
        _with(lambda kw: {"q": kw["q"].reshape(3, 32)}),
        _call,
    ),
    ErrorSpec(
        "index_ndim",
        "positions and slots hold one integer per token: shape [T].",
        ("a batch axis left on: [1, T]", "a column vector [T, 1]"),
        "Flatten them: positions.reshape(-1).",
        _with(lambda kw: {"positions": kw["positions"].reshape(1, 3)}),
        _call,
    ),
    ErrorSpec(
        "pool_ndim",
        "Each pool is [P, num_kv_heads, head_dim]: one row per cache slot.",
        ("a pool allocated flat as [P, Hkv*D]", "a paged pool [pages, page_size, Hkv, D] not flattened"),
        "Allocate or view the pool as [P, num_kv_heads, head_dim].",
        _with(lambda kw: {"k_pool": kw["k_pool"].reshape(6, 16), "v_pool": kw["v_pool"].reshape(6, 16)}),
        _call,
    ),
    ErrorSpec(
        "q_shape",
        "q's heads or head_dim disagree with num_qo_heads and head_dim.",
        (
            "num_qo_heads and num_kv_heads swapped",
            "head_dim computed as hidden_size // num_attention_heads for a model that sets head_dim explicitly (Gemma)",
        ),
        "Pass num_qo_heads=config.num_attention_heads and the model's head_dim.",
        _with(lambda kw: {"num_qo_heads": 2, "num_kv_heads": 4}),
        _call,
    ),
    ErrorSpec(
        "k_shape",
        "k's heads or head_dim disagree with num_kv_heads and head_dim. Under grouped-query "
        "attention k has fewer heads than q.",
        (
            "num_kv_heads taken from config.num_attention_heads instead of config.num_key_value_heads",
            "k already repeated to the query heads (repeat_kv) before the cache write",
            "q, k, v of different token counts",
        ),
        "Pass num_kv_heads=config.num_key_value_heads and the un-repeated k from the K projection.",
        _with(lambda kw: {"num_kv_heads": 4}),
        _call,
    ),
    ErrorSpec(
        "v_shape",
        "v is written to the pool beside k, so it must have k's shape.",
        ("v repeated to the query heads while k was not", "v from another layer or batch"),
        "Pass v as [T, num_kv_heads, head_dim], like k.",
        _with(lambda kw: {"v": mx.repeat(kw["v"], 2, axis=1)}),
        _call,
    ),
    ErrorSpec(
        "index_len",
        "positions[t] and slots[t] belong to token t, so both have T entries.",
        ("positions for the whole sequence passed in a decode step", "slots allocated for fewer tokens"),
        "Give exactly one position and one slot per token of q.",
        _with(lambda kw: {"positions": mx.arange(4, dtype=mx.int32)}),
        _call,
    ),
    ErrorSpec(
        "k_pool_shape",
        "k_pool's rows must hold [num_kv_heads, head_dim], the shape of one token's k.",
        (
            "the pool allocated with num_attention_heads instead of num_key_value_heads",
            "a pool of another model or layer",
        ),
        "Allocate pools as [P, num_kv_heads, head_dim].",
        _with(lambda kw: {"k_pool": mx.repeat(kw["k_pool"], 2, axis=1), "v_pool": mx.repeat(kw["v_pool"], 2, axis=1)}),
        _call,
    ),
    ErrorSpec(
        "v_pool_shape",
        "Token t's k and v go to the same row of two pools of one shape.",
        ("k and v pools allocated with different sizes",),
        "Allocate v_pool exactly like k_pool.",
        _with(lambda kw: {"v_pool": kw["v_pool"][:5]}),
        _call,
    ),
    ErrorSpec(
        "qkv_dtype",
        "q, k and v share one dtype.",
        ("one of them cast (or not cast) after the projection",),
        "Cast them to one dtype, the pool's.",
        _with(lambda kw: {"k": kw["k"].astype(mx.float16)}),
        _call,
    ),
    ErrorSpec(
        "pool_dtype",
        "A float pool stores k and v as they are, so it has their dtype; an FP8 cache is uint8 pools.",
        ("a float32 pool with float16 activations", "an int8 or float8-typed cache: FP8 pools are uint8 (e4m3 codes)"),
        "Allocate float pools in the activations' dtype, or both pools as uint8 for an FP8 cache.",
        _with(
            lambda kw: {"k_pool": kw["k_pool"].astype(mx.float32), "v_pool": kw["v_pool"].astype(mx.float32)},
            dtype="float16",
        ),
        lambda: _call(dtype="float16"),
    ),
    ErrorSpec(
        "fp8_pool_dtype",
        "uint8 pools are an FP8 (e4m3) cache: every row holds the e4m3 codes of k_rot / k_scale and "
        "v / v_scale. k and v are quantised together, so both pools hold codes.",
        ("only k_pool allocated as uint8", "a float v_pool kept from a float cache"),
        "Allocate both pools as uint8 [P, Hkv, D] (or both in the activations' dtype for a float cache).",
        _with(lambda kw: {"k_pool": mx.zeros(kw["k_pool"].shape, mx.uint8)}),
        lambda: _fp8_call(),
    ),
    ErrorSpec(
        "index_dtype",
        "The kernel reads positions and slots as 32-bit integers.",
        ("np.arange or torch.arange default to int64",),
        "Cast: positions.astype(mx.int32) (or np.int32).",
        _with(lambda kw: {"positions": kw["positions"].astype(mx.int64)}),
        _call,
    ),
    ErrorSpec(
        "head_dim_odd",
        "NeoX RoPE pairs dimension i with i + head_dim/2, so head_dim must split in two halves.",
        ("head_dim computed with a rounding division", "a partial rotary dimension passed as head_dim"),
        "Pass the model's real (even) head_dim.",
        lambda: _call(Shapes(3, 4, 2, 7, 6)),
        _call,
    ),
    ErrorSpec(
        "unsupported_dtype",
        "The kernel supports float16, bfloat16 and float32.",
        ("NumPy arrays left in NumPy's default float64",),
        "Cast to float16, bfloat16 or float32.",
        lambda: {**make_inputs(BASE, "float64", kind="numpy", slots=[0, 2, 4])},
        lambda: make_inputs(BASE, "float32", kind="numpy", slots=[0, 2, 4]),
    ),
    ErrorSpec(
        "head_count",
        "A head count or head_dim of zero or less describes no attention at all.",
        ("a config field missing and defaulted to 0",),
        "Read num_attention_heads, num_key_value_heads and head_dim from the model's config.",
        lambda: _call(Shapes(3, 4, 0, 8, 6)),
        _call,
    ),
    ErrorSpec(
        "group_size",
        "Under GQA each KV head serves G = num_qo_heads // num_kv_heads query heads; G must be a whole number.",
        ("num_kv_heads or num_qo_heads of another model or of a tensor-parallel shard",),
        "Use the model's num_key_value_heads (it divides num_attention_heads).",
        lambda: _call(Shapes(3, 4, 3, 8, 6)),
        _call,
    ),
    ErrorSpec(
        "rope_base",
        "rope_base (config.rope_theta) sets the rotation frequencies base**(-2i/D).",
        ("rope_theta missing from the config and passed as None or 0",),
        "Pass config.rope_theta, or 10000.0 where the config has none.",
        lambda: _call(rope_base=0.0),
        _call,
    ),
    ErrorSpec(
        "rotary_dim",
        "rotary_dim is how many leading dimensions of each head RoPE turns (partial rotary: "
        "Phi-2 turns 32 of 80); they pair up, so the count is even.",
        ("partial_rotary_factor * head_dim not rounded to an int", "rotary_dim taken from another model"),
        "Pass int(partial_rotary_factor * head_dim), or None for the whole head.",
        lambda: _call(rotary_dim=3),
        lambda: _call(rotary_dim=4),
    ),
    ErrorSpec(
        "rope_type",
        "rope_scaling's rope_type (older configs: type) names how a model stretches its RoPE.",
        ("a typo", "a type from a newer transformers release"),
        "Use one of default, linear, llama3, yarn, longrope, or rope_scaling=None.",
        lambda: _call(rope_scaling={"rope_type": "llama-3"}),
        lambda: _call(rope_scaling={"rope_type": "llama3", "factor": 8.0}),
    ),
    ErrorSpec(
        "rope_type_refused",
        "dynamic NTK scaling changes the base with the current sequence length: it is not one "
        "inverse-frequency table per call (and mrope, which the op computes, refuses QK-norm).",
        ("a dynamic-NTK config", "rope_scaling type mrope with q_norm_weight or k_norm_weight"),
        "Rotate q and k with the model's own RoPE module and write the pools yourself, or use a "
        "static type (linear, yarn) if the model allows it.",
        lambda: _call(rope_scaling={"rope_type": "dynamic", "factor": 2.0}),
        lambda: _call(rope_scaling={"rope_type": "linear", "factor": 2.0}),
    ),
    ErrorSpec(
        "rope_base_range",
        "The kernel holds rope_base**(-2i/D) in float32 and multiplies it by positions up to 2**24: a base "
        "so small or so large that these overflow or underflow gives NaN or constant angles.",
        ("a scaling factor or a log-base passed as rope_base", "rope_theta read from the wrong config field"),
        "Pass config.rope_theta as it is (10000.0, 500000.0, 1000000.0).",
        lambda: _call(rope_base=1e-300),
        _call,
    ),
    ErrorSpec(
        "rope_factor",
        "linear, llama3 and yarn stretch the rotation by rope_scaling['factor'].",
        ("factor missing from a hand-written rope_scaling", "factor 0 or negative"),
        "Copy rope_scaling from the model's config.json as it is.",
        lambda: _call(rope_scaling={"rope_type": "linear"}),
        lambda: _call(rope_scaling={"rope_type": "linear", "factor": 2.0}),
    ),
    ErrorSpec(
        "longrope_factors",
        "longrope divides each pair's frequency by its own factor: rotary_dim / 2 of them.",
        ("factor lists of another model", "head_dim or rotary_dim not the model's"),
        "Use the config's own short_factor and long_factor with its head_dim.",
        lambda: _call(rope_scaling=_longrope(3), max_position_embeddings=131072),
        lambda: _call(rope_scaling=_longrope(4), max_position_embeddings=131072),
    ),
    ErrorSpec(
        "max_position_missing",
        "longrope picks its long or short factors, and its scale, from max_position_embeddings "
        "against original_max_position_embeddings; yarn needs the original context length.",
        (
            "max_position_embeddings not passed",
            "Phi-3's original_max_position_embeddings left at the config's top level",
        ),
        "Pass max_position_embeddings=config.max_position_embeddings (ropepool.models.from_config does this for you).",
        lambda: _call(rope_scaling=_longrope(4)),
        lambda: _call(rope_scaling=_longrope(4), max_position_embeddings=131072),
    ),
    ErrorSpec(
        "rope_scaling_value",
        "Each scaling type reads numbers from rope_scaling (llama3: low_freq_factor, high_freq_factor, "
        "original_max_position_embeddings; yarn: beta_fast, beta_slow, mscale, mscale_all_dim, "
        "attention_factor; longrope: original_max_position_embeddings, attention_factor), each a finite "
        "int or float in the range its formula needs. yarn also needs rope_base != 1: it finds where its "
        "ramp starts by dividing by log(rope_base), and at base 1 every pair turns at 1 radian per "
        "position, so no pair marks it (transformers and mlx-lm divide by zero there). Plain RoPE and "
        "the other types take base 1.",
        (
            'a number written as a string in a hand-written rope_scaling ("beta_fast": "32")',
            "beta_fast or beta_slow 0 (transformers reads 0 as the default; ropepool refuses it)",
            "longrope with original_max_position_embeddings 1: its scale divides by ln(1) = 0",
            "high_freq_factor not above low_freq_factor",
            "yarn with rope_base 1.0",
        ),
        "Copy rope_scaling from the model's config.json as it is, with the config's rope_theta.",
        lambda: _call(
            rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096, "beta_fast": 0}
        ),
        lambda: _call(
            rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096, "beta_fast": 32}
        ),
    ),
    ErrorSpec(
        "norm_weight_shape",
        "QK-norm (Qwen3, Gemma-3) RMS-normalises each head of q and k over its head_dim and scales it by a "
        "weight of head_dim entries, shared by all heads, before RoPE.",
        (
            "the layer's input_layernorm weight (hidden_size entries) passed instead of q_norm's",
            "the weight of another model's head_dim",
        ),
        "Pass attn.q_norm.weight and attn.k_norm.weight, each [head_dim].",
        lambda: _call(q_norm_weight=mx.ones((32,))),
        lambda: _call(q_norm_weight=mx.ones((8,))),
    ),
    ErrorSpec(
        "norm_weight_dtype",
        "The norm's weight multiplies float values; the kernel reads it as float32.",
        ("a NumPy weight left in float64", "an integer array of ones"),
        "Cast the weight to float32 (or the model's float dtype).",
        lambda: _call(k_norm_weight=np.ones(8)),
        lambda: _call(k_norm_weight=np.ones(8, np.float32)),
    ),
    ErrorSpec(
        "norm_eps",
        "norm_eps keeps QK-norm's 1 / sqrt(mean(x**2) + eps) finite for an all-zero head.",
        ("rms_norm_eps missing from the config and passed as None or 0",),
        "Pass the model's rms_norm_eps (Qwen3: 1e-6).",
        lambda: _call(q_norm_weight=mx.ones((8,)), norm_eps=0.0),
        lambda: _call(q_norm_weight=mx.ones((8,)), norm_eps=1e-6),
    ),
    ErrorSpec(
        "norm_overflow",
        "QK-norm divides each head by sqrt(mean(x**2) + eps), computed in float32: once a square passes "
        "3.4e38 the mean is inf and the head comes out as zeros, where the exact result has size one.",
        ("activations blown up by a wrong weight scale or dtype upstream",),
        "Find where q or k grew that large (real activations stay far below the limit).",
        lambda: _call(q_norm_weight=mx.ones((8,)), q=mx.full((3, 4, 8), 2e19)),
        lambda: _call(q_norm_weight=mx.ones((8,)), q=mx.full((3, 4, 8), 2.0)),
    ),
    ErrorSpec(
        "kv_scale",
        "k_scale and v_scale are per-tensor FP8 scales, as in vLLM: an FP8 pool holds k_rot / k_scale and "
        "v / v_scale in e4m3, whose largest value is 448. Float pools store values as they are.",
        (
            "a scale of 0 (a checkpoint without calibrated scales)",
            "a scale passed with float pools",
            "a scale outside 2**-126 to 2**126, whose reciprocal float32 cannot hold as a normal number",
        ),
        "Use the checkpoint's k_scale and v_scale with uint8 pools, or 1.0.",
        lambda: _fp8_call(k_scale=0.0),
        lambda: _fp8_call(k_scale=2.0),
    ),
    ErrorSpec(
        "position_negative",
        "A position counts tokens from the start of the sequence.",
        ("a padding marker (-1) passed as a position",),
        "Pass real positions; mark tokens to skip with slot -1 instead.",
        lambda: _call(positions=mx.array([0, -1, 2], dtype=mx.int32)),
        _call,
    ),
    ErrorSpec(
        "position_too_large",
        "The kernel turns positions into float32 angles; past 2**24 float32 no longer holds "
        "every integer, so neighbouring positions would get the same rotation.",
        ("an uninitialised or garbage positions buffer", "a slot index passed as a position"),
        "Pass positions below 2**24 (16,777,216).",
        lambda: _call(positions=mx.array([0, 1, 2**24], dtype=mx.int32)),
        _call,
    ),
    ErrorSpec(
        "slot_out_of_range",
        "A slot names a pool row. One past the end would be an out-of-bounds write in SGLang's "
        "kernel, and MLX's own indexing does not bound-check either.",
        ("slots from a larger pool or another layer's allocator", "an off-by-one in the allocator"),
        "Allocate slots in [0, P), or grow the pool.",
        lambda: _call(slots=mx.array([0, 2, 6], dtype=mx.int32)),
        _call,
    ),
    ErrorSpec(
        "duplicate_slot",
        "Two tokens writing one row race in SGLang's kernel: which one lands is undefined there. With "
        "check_values=False ropepool does not look for them, and the last of those tokens "
        "(the highest t) wins the row, on every backend.",
        ("the allocator handed out a slot twice", "a decode step reusing the previous step's slots"),
        "Give every writing token its own slot (use -1 for tokens that write nothing).",
        lambda: _call(slots=mx.array([0, 2, 2], dtype=mx.int32)),
        _call,
    ),
    ErrorSpec(
        "inplace_unsupported",
        "With inplace=True the op writes k_rot and v into the pools themselves, as SGLang's kernel "
        "does: the pools must be writable, row-contiguous, native-order host memory, two distinct buffers "
        "that no input shares, and "
        "the backend one that runs on the host ('cpu' or 'mlx').",
        (
            "a read-only NumPy array (np.frombuffer of bytes, or setflags(write=False))",
            "a strided view such as pool[:, :, ::2] or a transposed array",
            "the same array passed as k_pool and v_pool",
            "q, k, v, positions or slots a view of a pool's rows (v = k_pool[:T])",
            "a NumPy pool in non-native byte order (dtype '>f4'), or not aligned",
            "mx.array pools while MLX's default device is the GPU, or backend='metal'/'cuda'",
        ),
        "Pass writable, contiguous and distinct pools (np.ascontiguousarray makes a copy), use "
        "backend='auto', or call without inplace=True and rebind the pools it returns.",
        lambda: _inplace_call(writable=False),
        lambda: _inplace_call(writable=True),
    ),
    ErrorSpec(
        "unknown_backend",
        "backend names the implementation to run.",
        ("a typo",),
        "Use backend='auto' or a name from ropepool.available_backends().",
        lambda: _call(backend="gpu"),
        lambda: _call(backend="auto"),
    ),
    ErrorSpec(
        "backend_unavailable",
        "The backend exists but this machine cannot run it.",
        ("backend='metal' on a machine without Apple Silicon", "backend='cuda' without an NVIDIA GPU and mlx[cuda13]"),
        "Use backend='auto', which picks the best backend that runs here.",
        lambda: _call(backend=_unavailable_backend()),
        lambda: _call(backend="auto"),
    ),
]

CATALOG: dict[str, ErrorSpec] = {spec.code: spec for spec in _SPECS}


# --- rope_pool_fused_mla's own shape errors (ropepool.errors.MLA_CODES) ---------------------------------

# The small MLA call every MLA trigger starts from: T=3, Hq=4, kv_lora_rank=8, rope_dim=4, P=6.
MLA_BASE = dict(tokens=3, num_qo_heads=4, kv_lora_rank=8, rope_dim=4, pool_rows=6)


def _mla_call(**changes) -> dict:
    kw = mla_inputs(**MLA_BASE, slots=[0, 2, 4])
    kw.update(changes)
    return kw


def _mla_with(fn: Callable[[dict], dict]) -> Callable[[], dict]:
    def build() -> dict:
        kw = _mla_call()
        kw.update(fn(kw))
        return kw

    return build


_MLA_SPECS = [
    ErrorSpec(
        "mla_ndim",
        "MLA's arrays: q_pe [T, Hq, rope_dim], k_pe [T, 1, rope_dim], c_kv [T, kv_lora_rank] (no head axis), "
        "latent_pool [P, 1, kv_lora_rank + rope_dim].",
        ("c_kv given a head axis [T, 1, R]", "the latent pool allocated flat as [P, R + rope_dim]"),
        "Reshape: c_kv to [T, kv_lora_rank], the pool to [P, 1, kv_lora_rank + rope_dim].",
        _mla_with(lambda kw: {"c_kv": kw["c_kv"][:, None, :]}),
        _mla_call,
    ),
    ErrorSpec(
        "mla_sizes",
        "num_qo_heads, kv_lora_rank and rope_dim size the arrays; rope_dim holds whole rotated pairs.",
        ("rope_dim read from qk_nope_head_dim (128 for DeepSeek-V3) instead of qk_rope_head_dim, or a size 0",),
        "Read num_attention_heads, kv_lora_rank and qk_rope_head_dim from the config.",
        lambda: _mla_call(rope_dim=0),
        _mla_call,
    ),
    ErrorSpec(
        "q_pe_shape",
        "q_pe is the RoPE part of every query head: [T, Hq, rope_dim].",
        ("the whole q head [T, Hq, qk_nope_head_dim + rope_dim] passed", "num_qo_heads from another model"),
        "Split q first: q_nope, q_pe = mx.split(q, [qk_nope_head_dim], axis=-1); pass q_pe.",
        _mla_with(lambda kw: {"q_pe": mx.concatenate([kw["q_pe"], kw["q_pe"]], axis=-1)}),
        _mla_call,
    ),
    ErrorSpec(
        "k_pe_shape",
        "MLA has one RoPE key per token, shared by every head: k_pe is [T, 1, rope_dim].",
        ("k_pe repeated over the query heads", "k_pe left [T, rope_dim] without its head axis of 1"),
        "Pass k_pe once per token: k_pe.reshape(T, 1, rope_dim).",
        _mla_with(lambda kw: {"k_pe": mx.repeat(kw["k_pe"], 4, axis=1)}),
        _mla_call,
    ),
    ErrorSpec(
        "c_kv_shape",
        "c_kv is the latent the pool keeps: [T, kv_lora_rank], kv_a_proj_with_mqa's first kv_lora_rank outputs "
        "after kv_a_layernorm.",
        ("kv_a_proj_with_mqa's whole output [T, kv_lora_rank + rope_dim] passed, k_pe still in it",),
        "Split it: c_kv, k_pe = mx.split(x, [kv_lora_rank], axis=-1), then normalise c_kv.",
        _mla_with(lambda kw: {"c_kv": mx.zeros((3, 12))}),
        _mla_call,
    ),
    ErrorSpec(
        "latent_pool_shape",
        "The latent pool holds one row per token of kv_lora_rank + rope_dim values, as one 'head'.",
        ("a pool of only kv_lora_rank (the k_pe part forgotten)", "a GQA-shaped pool [P, Hkv, D]"),
        "Allocate the pool as [P, 1, kv_lora_rank + rope_dim] (576 for DeepSeek-V3).",
        _mla_with(lambda kw: {"latent_pool": kw["latent_pool"][..., :8]}),
        _mla_call,
    ),
    ErrorSpec(
        "mla_dtype",
        "q_pe, k_pe and c_kv share a dtype; the pool is in it, or uint8 for an FP8 latent cache.",
        ("c_kv kept in float32 after its norm while q_pe is bfloat16", "a float32 pool with float16 activations"),
        "Cast c_kv and k_pe to q_pe's dtype; allocate the pool in it (or uint8).",
        _mla_with(lambda kw: {"c_kv": kw["c_kv"].astype(mx.float16)}),
        _mla_call,
    ),
]

#: The lessons of :data:`ropepool.errors.MLA_CODES`, in their order; triggers call ``rope_pool_fused_mla``.
MLA_CATALOG: dict[str, ErrorSpec] = {spec.code: spec for spec in _MLA_SPECS}
