"""Tiny mlx-lm models with seeded random weights: one per architecture and RoPE the engine serves.

Each is built from a config dict by mlx-lm's own model class (nothing is downloaded): hidden size
64, two layers, a vocabulary of 160. :data:`ARCHS` is the list ``tests/test_engine.py`` checks
logit for logit against mlx-lm and ``benchmarks/engine_logits.py`` prints the differences of.
mlx-lm is imported when a model is built, not when this module is.
"""

from __future__ import annotations

import importlib

import mlx.core as mx
import mlx.nn as nn

#: The mlx-lm model modules (``mlx_lm.models.<name>``) the tiny models are built with.
MODULES = ("llama", "qwen2", "phi3", "gemma", "qwen3", "deepseek_v3", "gemma3_text", "gpt_oss")
TINY = dict(hidden_size=64, num_hidden_layers=2, intermediate_size=128, rms_norm_eps=1e-5, vocab_size=160)

# Llama-3.1's rope_scaling, as in its config.json (ropepool/presets/llama-3.1-8b.json).
LLAMA3_SCALING = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}
# Phi-3.5-mini's kind of longrope (original_max_position_embeddings at the config's top level, as
# Phi-3 keeps it), with head_dim 16: 8 factors of each kind, growing as its long factors do.
PHI35_LONGROPE = dict(
    max_position_embeddings=131072,
    original_max_position_embeddings=4096,
    rope_scaling={
        "type": "longrope",
        "short_factor": [1.0] * 8,
        "long_factor": [1.0, 1.02, 1.1, 1.4, 2.0, 3.5, 6.0, 9.0],
    },
)

# name: (what it stands for, mlx-lm module, config fields beyond TINY)
ARCHS: dict[str, tuple[str, str, dict]] = {
    "llama-gqa": ("Llama GQA (G = 2)", "llama", dict(num_attention_heads=4, num_key_value_heads=2)),
    "llama-mha": ("Llama MHA, lm_head", "llama", dict(num_attention_heads=4, tie_word_embeddings=False)),
    "mistral": (
        "Mistral (head_dim 16)",
        "llama",  # head_dim set: 8 x 16 = 128 wide, not hidden 64
        dict(model_type="mistral", num_attention_heads=8, num_key_value_heads=2, head_dim=16, rope_theta=1e6),
    ),
    "llama-3.1": (
        "Llama-3.1 scaling",
        "llama",
        dict(
            num_attention_heads=4,
            num_key_value_heads=2,
            rope_theta=500000.0,
            max_position_embeddings=131072,
            rope_scaling=LLAMA3_SCALING,
        ),
    ),
    "llama-gptj": (
        "Llama, GPT-J pairs",
        "llama",
        dict(num_attention_heads=4, num_key_value_heads=2, rope_traditional=True),
    ),
    "qwen2-mqa": ("Qwen2 MQA (biased qkv)", "qwen2", dict(num_attention_heads=4, num_key_value_heads=1)),
    "phi3": ("Phi-3 (fused qkv_proj)", "phi3", dict(num_attention_heads=4, num_key_value_heads=4)),
    "phi3-partial": (
        "Phi-3 partial rotary",
        "phi3",
        dict(num_attention_heads=4, num_key_value_heads=4, partial_rotary_factor=0.5),
    ),
    "phi3.5-longrope": (
        "Phi-3.5 longrope",
        "phi3",
        dict(num_attention_heads=4, num_key_value_heads=4, **PHI35_LONGROPE),
    ),
    "qwen3": (
        "Qwen3 (QK-norm, head_dim 32)",
        "qwen3",
        dict(
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=32,
            max_position_embeddings=40960,
            rope_theta=1e6,
            rms_norm_eps=1e-6,
            tie_word_embeddings=True,
        ),
    ),
    # Beyond GQA: MLA's latent pool, sliding windows of 4 (so that the tests'
    # prompts and generations cross them), GPT-OSS's sinks.
    "deepseek-v3": (
        "DeepSeek-V3 MLA (latent pool 16 + 8, yarn)",
        "deepseek_v3",
        dict(
            num_attention_heads=4,
            num_key_value_heads=4,
            kv_lora_rank=16,
            q_lora_rank=32,
            qk_rope_head_dim=8,
            qk_nope_head_dim=16,
            v_head_dim=16,
            n_routed_experts=4,
            num_experts_per_tok=2,
            n_shared_experts=1,
            moe_intermediate_size=32,
            first_k_dense_replace=1,
            max_position_embeddings=4096,
            rope_scaling={
                "type": "yarn",
                "factor": 4.0,
                "beta_fast": 32,
                "beta_slow": 1,
                "mscale": 1.0,
                "mscale_all_dim": 1.0,
                "original_max_position_embeddings": 1024,
            },
        ),
    ),
    "gemma3": (
        "Gemma-3 (window 4 on 1 of 2 layers, QK-norm)",
        "gemma3_text",
        dict(
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            sliding_window=4,
            sliding_window_pattern=2,
            query_pre_attn_scalar=16,
            rope_theta=1e6,
            rope_local_base_freq=10000.0,
            rope_scaling={"rope_type": "linear", "factor": 8.0},
        ),
    ),
    "gpt-oss": (
        "GPT-OSS (window 4 on 1 of 2 layers, sinks)",
        "gpt_oss",
        dict(
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            sliding_window=4,
            num_local_experts=4,
            num_experts_per_tok=2,
            rope_theta=150000.0,
            rope_scaling={
                "rope_type": "yarn",
                "factor": 32.0,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "original_max_position_embeddings": 4096,
            },
        ),
    ),  # no "truncate": mlx-lm ignores it
}


def tiny(module: str = "llama", seed: int = 0, **fields) -> nn.Module:
    """An mlx-lm ``module.Model`` of :data:`TINY` size with ``fields`` on top, weights from ``seed``."""
    if module not in MODULES:
        raise ValueError(f"module must be one of {', '.join(MODULES)}, got {module!r}")
    mod = importlib.import_module(f"mlx_lm.models.{module}")
    mx.random.seed(seed)
    model = mod.Model(mod.ModelArgs(**{"model_type": module, **TINY, **fields}))
    for layer in model.model.layers:  # QK-norm weights start at ones: random ones, so that they count
        for norm in (getattr(layer.self_attn, n, None) for n in ("q_norm", "k_norm")):
            if norm is not None:
                norm.weight = mx.random.uniform(0.5, 1.5, norm.weight.shape)
        if hasattr(layer.self_attn, "sinks"):  # GPT-OSS's sink logits start at zero: random ones
            layer.self_attn.sinks = mx.random.normal(layer.self_attn.sinks.shape)
    mx.eval(model.parameters())
    return model


def build(name: str, seed: int = 0) -> nn.Module:
    """The tiny model :data:`ARCHS` names ``name``."""
    _, module, fields = ARCHS[name]
    return tiny(module, seed, **fields)
