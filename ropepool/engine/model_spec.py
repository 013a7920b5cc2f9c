"""What the engine reads off an mlx-lm model, in one place: :func:`read` gives a :class:`ModelSpec`.

Every architecture the engine serves is a stack of decoder layers whose attention the engine replaces
(:mod:`.runner`); the rest of each layer runs as the model wrote it. What differs between them, and
what the runner must know, is read here once: each layer's RoPE table, QK-norm and sliding window,
whether attention has sinks, MLA's latent dimensions, the embedding's scale, and the dtype of k and v
(the pools' dtype: the activations', never a quantized weight's packed uint32).

=============  ============================  ===================================================
module         pool of one layer             read here
=============  ============================  ===================================================
llama, qwen2   k, v ``[P, Hkv, D]``          RoPE (scaled, partial, GPT-J pairs) from the config
phi3           k, v ``[P, Hkv, D]``          the same; q, k, v from one fused ``qkv_proj``
qwen3          k, v ``[P, Hkv, D]``          QK-norm ``w``
gemma3_text    k, v ``[P, Hkv, D]``          QK-norm ``(1 + w)``; 5 of 6 layers slide, with their own
                                             RoPE base; the embedding scaled by sqrt(hidden)
gpt_oss        k, v ``[P, Hkv, D]``          every other layer slides; a sink logit per head
deepseek_v3    latent ``[P, 1, R + rd]``     MLA: kv_lora_rank R, RoPE over ``rd`` dims, GPT-J pairs
=============  ============================  ===================================================
"""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx

from .. import models
from ..rope import rope_of
from .errors import UnsupportedModelError

#: mlx-lm model modules the engine serves (Mistral configs load as ``llama``).
SUPPORTED = ("llama", "qwen2", "phi3", "qwen3", "deepseek_v3", "gemma3_text", "gpt_oss")
_NAMES = "Llama-2/3/3.1, Mistral, Qwen2, Phi-3, Qwen3, DeepSeek-V3, Gemma-3, GPT-OSS"


@dataclass(frozen=True)
class MLA:
    """DeepSeek-V3's latent dimensions: ``kv_lora_rank`` R, RoPE dims ``rd``, ``nope`` and ``v_head_dim`` per head."""

    kv_lora_rank: int
    rope_dim: int
    nope: int
    v_head_dim: int


@dataclass(frozen=True)
class ModelSpec:
    """One mlx-lm model as the engine serves it.

    Attributes
    ----------
    arch : str                 the mlx-lm module (one of :data:`SUPPORTED`)
    head_dim : int             D of q, k and v (MLA: of q_pe and k_pe, ``rd``)
    ropes : list of Rope       each layer's table (layers with equal RoPE share one)
    qk_norms : list of dict    each layer's QK-norm as the op takes it (``{}``: none)
    windows : list             each layer's sliding window (int >= 1), or None for a full layer
    mla : MLA or None          the latent dimensions (DeepSeek-V3), else None
    embed_scale : mx.array or None  what the embedding is multiplied by (Gemma-3: sqrt(hidden) in bfloat16)
    pool_dtype : mx.Dtype      k and v as layer 0 computes them: the pools' dtype (without FP8)
    kv_heads : int             the KV heads layer 0's k projection gives (a tensor-parallel rank's share
                               of the config's; MLA: 1, the latent)
    """

    arch: str
    head_dim: int
    ropes: list
    qk_norms: list
    windows: list
    mla: MLA | None
    embed_scale: mx.array | None
    pool_dtype: mx.Dtype
    kv_heads: int

    @property
    def window(self) -> int | None:
        """The sliding layers' window (one for every sliding layer of these models), or None."""
        return next((w for w in self.windows if w is not None), None)


def architecture(model) -> str:
    """The mlx-lm module of ``model`` (one of :data:`SUPPORTED`).

    Raises
    ------
    UnsupportedModelError
        Another architecture, or a Llama with sliding-window layers.
    """
    module = type(model).__module__
    arch = module.rsplit(".", 1)[-1]
    if not module.startswith("mlx_lm.models.") or arch not in SUPPORTED:
        raise UnsupportedModelError(
            f"the engine serves mlx-lm models of {', '.join(SUPPORTED)} ({_NAMES}); "
            f"got {type(model).__name__} from {module}"
        )
    if arch == "llama" and any(t != "full_attention" for t in (getattr(model.args, "layer_types", None) or [])):
        raise UnsupportedModelError(f"{module}: sliding-window layers (layer_types) are not supported")
    return arch


def hf_config(model) -> dict:
    """``model.args`` as a Hugging Face-style config dict (the fields RoPE and attention need)."""
    a = model.args
    config = dict(
        model_type=a.model_type,
        num_attention_heads=a.num_attention_heads,
        num_key_value_heads=a.num_key_value_heads,
        hidden_size=a.hidden_size,
        rope_theta=float(a.rope_theta),
    )
    for key in (
        "head_dim",
        "rope_scaling",
        "max_position_embeddings",
        "original_max_position_embeddings",
        "partial_rotary_factor",
        "rope_local_base_freq",
    ):
        if getattr(a, key, None) is not None:
            config[key] = getattr(a, key)
    return config


def rope_kwargs(model, sliding: bool = False) -> dict:
    """The RoPE keyword arguments of ``rope_pool_fused`` for ``model`` (its sliding layers' with ``sliding``:
    Gemma-3 turns them with ``rope_local_base_freq``, unscaled). MLA's are those of its ``rd`` RoPE dims.

    Raises
    ------
    UnsupportedModelError
        The model's config does not fit the op (e.g. dynamic or multimodal RoPE scaling, a DeepSeek
        ``qk_rope_head_dim`` that is no positive even int: named with its value).
    """
    arch, a = architecture(model), model.args
    if arch == "deepseek_v3":  # mlx-lm: traditional=True, over qk_rope_head_dim
        rd = a.qk_rope_head_dim
        if not isinstance(rd, int) or isinstance(rd, bool) or rd <= 0 or rd % 2:
            raise UnsupportedModelError(
                f"{arch} model: qk_rope_head_dim (the RoPE part of each head) must be a positive even int, got {rd!r}"
            )
        kw = dict(head_dim=a.qk_rope_head_dim, rope_base=float(a.rope_theta), is_neox=False)
        if a.rope_scaling:
            kw.update(rope_scaling=a.rope_scaling, max_position_embeddings=a.max_position_embeddings)
        return kw
    layer_type = None
    if arch == "gemma3_text":  # one RoPE per layer type: the sliding layers' base is rope_local_base_freq
        layer_type = "sliding_attention" if sliding else "full_attention"
    try:
        kwargs = models.from_config(hf_config(model), layer_type).op_kwargs()
    except models.ConfigError as e:
        raise UnsupportedModelError(f"{arch} model: {e}") from e
    if getattr(a, "rope_traditional", False):
        kwargs["is_neox"] = False  # mlx-lm's traditional RoPE pairs (2i, 2i + 1), not (i, i + D/2)
    return kwargs


def qk_norm_kwargs(attn, arch: str = "qwen3") -> dict:
    """``q_norm_weight``, ``k_norm_weight`` and ``norm_eps`` of ``rope_pool_fused`` for a layer's attention
    module with per-head QK-norm (``q_norm``/``k_norm``, each ``[D]``); ``{}`` without one. Gemma-3's
    RMSNorm scales by ``(1 + w)``, Qwen3's by ``w``."""
    if not hasattr(attn, "q_norm"):
        return {}
    shift = 1.0 if arch == "gemma3_text" else 0.0
    q, k = attn.q_norm.weight, attn.k_norm.weight
    return dict(
        q_norm_weight=q + shift if shift else q,
        k_norm_weight=k + shift if shift else k,
        norm_eps=float(attn.q_norm.eps),
    )


def _windows(arch: str, a, layers: int) -> list:
    """Each layer's sliding window or None, the window checked: a positive int."""
    if arch == "gemma3_text":
        sliding = [(i + 1) % a.sliding_window_pattern != 0 for i in range(layers)]
    elif arch == "gpt_oss":
        kinds = a.layer_types or ["sliding_attention", "full_attention"] * (layers // 2)
        sliding = [kind == "sliding_attention" for kind in kinds]
    else:
        return [None] * layers
    w = getattr(a, "sliding_window", None)
    if any(sliding) and not (isinstance(w, int) and not isinstance(w, bool) and w >= 1):
        raise UnsupportedModelError(
            f"{arch} model: sliding_window must be an int >= 1 (the positions a sliding layer sees), got {w!r:.60}"
        )
    return [w if s else None for s in sliding]


def probe_kv(model, spec_arch: str, embed_scale, head_dim: int) -> tuple[mx.Dtype, int]:
    """The dtype of k and v (MLA: the latent) as layer 0 computes them from one token, and k's heads (k's
    width over ``head_dim``: all of the config's, or a tensor-parallel rank's share; MLA: 1). No collective
    runs: a sharded model's k projection is all-to-sharded."""
    inner = model.model
    h = inner.embed_tokens(mx.array([0]))  # [1, hidden]: float, also from a quantized embedding
    if embed_scale is not None:
        h = h * embed_scale.astype(h.dtype)
    layer = inner.layers[0]
    x, attn = layer.input_layernorm(h), layer.self_attn
    if spec_arch == "deepseek_v3":
        c_kv = attn.kv_a_proj_with_mqa(x)[:, : model.args.kv_lora_rank]  # [1, R] of [c_kv ‖ k_pe]
        return attn.kv_a_layernorm(c_kv).dtype, 1
    if hasattr(attn, "qkv_proj"):  # Phi-3: q, k, v in one projection
        return attn.qkv_proj(x).dtype, attn.n_kv_heads
    k = attn.k_proj(x)  # [1, Hkv * D]
    return k.dtype, k.shape[-1] // head_dim


def read(model) -> ModelSpec:
    """The :class:`ModelSpec` of ``model``; nothing of ``model`` is changed.

    Raises
    ------
    UnsupportedModelError
        Another architecture, RoPE the op does not compute, or a sliding window that is no int >= 1.
    """
    arch, a = architecture(model), model.args
    layers = model.model.layers
    windows = _windows(arch, a, len(layers))
    full = rope_kwargs(model)
    sliding = rope_kwargs(model, sliding=True) if arch == "gemma3_text" else full
    ropes = [rope_of(full if w is None else sliding) for w in windows]  # equal tables: one object (cached)
    mla = None
    if arch == "deepseek_v3":
        mla = MLA(a.kv_lora_rank, a.qk_rope_head_dim, a.qk_nope_head_dim, a.v_head_dim)
    embed_scale = mx.array(a.hidden_size**0.5, mx.bfloat16) if arch == "gemma3_text" else None
    dtype, kv_heads = probe_kv(model, arch, embed_scale, full["head_dim"])
    return ModelSpec(
        arch=arch,
        head_dim=full["head_dim"],
        ropes=ropes,
        qk_norms=[qk_norm_kwargs(layer.self_attn, arch) for layer in layers],
        windows=windows,
        mla=mla,
        embed_scale=embed_scale,
        pool_dtype=dtype,
        kv_heads=kv_heads,
    )
