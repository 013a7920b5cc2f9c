"""What the engine reads off an mlx-lm model: its architecture, its RoPE parameters and its QK-norm.

:func:`rope_kwargs` is the one place the model's RoPE reaches the op: it writes the model's
``args`` as a Hugging Face-style config and lets :func:`ropepool.models.from_config` read it,
as it reads any ``config.json``.
"""

from __future__ import annotations

from .. import models
from .errors import UnsupportedModelError

#: mlx-lm model modules the engine serves (Mistral configs load as ``llama``).
SUPPORTED = ("llama", "qwen2", "phi3", "qwen3")
#: Served through their own decoder layers (:mod:`.layered`): MLA, sliding windows, sinks.
LAYERED = ("deepseek_v3", "gemma3_text", "gpt_oss")


def architecture(model) -> str:
    """The mlx-lm module of ``model`` (``llama``, ``qwen2``, ``phi3`` or ``qwen3``).

    Raises
    ------
    UnsupportedModelError
        Another architecture, or a Llama with sliding-window layers.
    """
    module = type(model).__module__
    arch = module.rsplit(".", 1)[-1]
    if module.startswith("mlx_lm.models.") and arch in LAYERED:
        return arch
    if not module.startswith("mlx_lm.models.") or arch not in SUPPORTED:
        raise UnsupportedModelError(
            f"the engine serves mlx-lm models of {', '.join(SUPPORTED + LAYERED)} (Llama-2/3/3.1, Mistral, Qwen2, "
            "Phi-3, Qwen3, DeepSeek-V3, Gemma-3, GPT-OSS); "
            f"got {type(model).__name__} from {module}"
        )
    if any(t != "full_attention" for t in (getattr(model.args, "layer_types", None) or [])):
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
    ):
        if getattr(a, key, None) is not None:
            config[key] = getattr(a, key)
    return config


def rope_kwargs(model) -> dict:
    """The RoPE keyword arguments of ``rope_pool_fused`` for ``model``.

    Raises
    ------
    UnsupportedModelError
        The model's config does not fit the op (e.g. dynamic or multimodal RoPE scaling).
    """
    name = f"{architecture(model)} model"
    config = hf_config(model)
    try:
        params = models.from_config(config)
    except models.ConfigError as e:
        raise UnsupportedModelError(f"{name}: {e}") from e
    kwargs = params.op_kwargs()
    if getattr(model.args, "rope_traditional", False):
        kwargs["is_neox"] = False  # mlx-lm's traditional RoPE pairs (2i, 2i + 1), not (i, i + D/2)
    return kwargs


def qk_norm_kwargs(attn) -> dict:
    """``q_norm_weight``, ``k_norm_weight`` and ``norm_eps`` of ``rope_pool_fused`` for a layer's attention
    module with per-head QK-norm (Qwen3's ``q_norm``/``k_norm``, each ``[D]``); ``{}`` without one."""
    if not hasattr(attn, "q_norm"):
        return {}
    return dict(q_norm_weight=attn.q_norm.weight, k_norm_weight=attn.k_norm.weight, norm_eps=float(attn.q_norm.eps))
