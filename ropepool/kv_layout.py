"""Where a model's KV cache goes: what one pool row holds, how many layers keep one, and for how long.

=========  ==========================================  ===============================================
kind       one pool row per token per layer            models
=========  ==========================================  ===============================================
MHA        k and v ``[Hkv = Hq, D]`` each               Llama-2-7B
GQA        k and v ``[Hkv, D]`` each, ``Hkv < Hq``      Llama-3-8B, Gemma-3, GPT-OSS, Qwen2-VL
MQA        k and v ``[1, D]`` each                      Falcon-7B
MLA        one latent ``[1, kv_lora_rank + rope_dim]``  DeepSeek-V2/V3, Kimi K2 (:mod:`ropepool.mla`)
=========  ==========================================  ===============================================

A *sliding-window* layer attends to the last ``window`` tokens only, so it keeps at most ``window``
rows per request whatever the context: the rows leaving the window are reused (a ring of slots).
Gemma-3 slides on 5 of every 6 layers (``sliding_window_pattern``: 6), GPT-OSS on every other
(``layer_types``), the older Gemma-2 on every other too; Qwen2-VL's ``use_sliding_window: false``
turns its ``sliding_window`` off. GPT-OSS's layers also learn an attention sink per head (a logit
with no row in the pool).

Example
-------
>>> from ropepool.models import load_preset
>>> lay = layout_from_config(load_preset("deepseek-v3"))
>>> lay.kind, lay.row_shape, lay.bytes_per_token("bfloat16")
('MLA', (1, 576), 70272)
"""

from __future__ import annotations

from dataclasses import dataclass

from .models import ConfigError, from_config

#: Bytes per element of a pool: the activations' float dtypes, and an FP8 (e4m3) cache.
POOL_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "fp8": 1}


@dataclass(frozen=True)
class CacheLayout:
    """One model's KV cache.

    Attributes
    ----------
    name : str
    kind : str                 "MHA", "GQA", "MQA" or "MLA"
    num_layers : int           layers that keep a cache
    pools : tuple of str       the pools of one layer: ("k_pool", "v_pool"), or ("latent_pool",)
    row_shape : tuple          one pool's row: ``(Hkv, D)`` or ``(1, kv_lora_rank + rope_dim)``
    sliding_layers : int       layers that keep only the last ``window`` tokens
    window : int or None
    sinks : bool               the layers learn an attention sink per head (GPT-OSS)
    """

    name: str
    kind: str
    num_layers: int
    pools: tuple
    row_shape: tuple
    sliding_layers: int = 0
    window: int | None = None
    sinks: bool = False

    @property
    def full_layers(self) -> int:
        return self.num_layers - self.sliding_layers

    def row_bytes(self, dtype: str = "bfloat16") -> int:
        """Bytes one token adds to one layer: every pool's row."""
        n = 1
        for s in self.row_shape:
            n *= s
        return len(self.pools) * n * POOL_BYTES[dtype]

    def bytes_per_token(self, dtype: str = "bfloat16") -> int:
        """Bytes one token adds over all layers, before any window drops it."""
        return self.num_layers * self.row_bytes(dtype)

    def rows_per_layer(self, tokens: int) -> tuple[int, int]:
        """Rows one request of ``tokens`` tokens keeps in a full layer and in a sliding one."""
        return tokens, min(tokens, self.window) if self.sliding_layers else tokens

    def cache_bytes(self, requests: int, tokens: int, dtype: str = "bfloat16") -> int:
        """Bytes of the cache of ``requests`` requests of ``tokens`` tokens each, windows applied."""
        full, sliding = self.rows_per_layer(tokens)
        return requests * self.row_bytes(dtype) * (self.full_layers * full + self.sliding_layers * sliding)

    def pool_shapes(self, rows: int) -> list[tuple[str, tuple]]:
        """``(pool name, shape)`` of one layer's pools of ``rows`` rows: ``[P, Hkv, D]`` or ``[P, 1, R + rope_dim]``."""
        return [(name, (rows, *self.row_shape)) for name in self.pools]


def _sliding_layers(config: dict, layers: int) -> tuple[int, int | None]:
    """How many layers slide, and over how many tokens, from the config's own fields."""
    window = config.get("sliding_window")
    if not isinstance(window, int) or window <= 0 or config.get("use_sliding_window") is False:
        return 0, None
    kinds = config.get("layer_types")
    if isinstance(kinds, list) and kinds:
        return sum(k == "sliding_attention" for k in kinds), window
    pattern = config.get("sliding_window_pattern")
    if isinstance(pattern, int) and pattern > 0:  # Gemma-3: layer i is full when (i + 1) % pattern == 0
        return layers - layers // pattern, window
    if config.get("model_type") == "gemma2":  # every other layer, from the first
        return (layers + 1) // 2, window
    return layers, window  # Mistral-7B-v0.1: every layer


def layout_from_config(config: dict) -> CacheLayout:
    """The :class:`CacheLayout` of a Hugging Face-style config (a multimodal one read from ``text_config``).

    Raises
    ------
    ConfigError
        ``num_hidden_layers`` missing, what :func:`ropepool.models.from_config` refuses, or for MLA
        what :func:`mla_op_kwargs` refuses (``kv_lora_rank``, ``qk_rope_head_dim`` not a positive int).
    """
    if "num_attention_heads" not in config and isinstance(config.get("text_config"), dict):
        config = config["text_config"]
    name = str(config.get("_name_or_path") or config.get("model_type") or "config")
    layers = config.get("num_hidden_layers")
    if not isinstance(layers, int) or layers <= 0:
        raise ConfigError(
            f"{name}: num_hidden_layers must be a positive int, got {layers!r}", fields=("num_hidden_layers",)
        )
    sliding, window = _sliding_layers(config, layers)
    sinks = config.get("model_type") == "gpt_oss"
    if "kv_lora_rank" in config:  # MLA: its sizes checked as the op's (a positive int each, named if not)
        mla = mla_op_kwargs(config)
        width = mla["kv_lora_rank"] + mla["rope_dim"]
        return CacheLayout(name, "MLA", layers, ("latent_pool",), (1, width), sliding, window, sinks)
    p = from_config(config)
    kind = "MHA" if p.num_kv_heads == p.num_qo_heads else "MQA" if p.num_kv_heads == 1 else "GQA"
    return CacheLayout(p.name, kind, layers, ("k_pool", "v_pool"), (p.num_kv_heads, p.head_dim), sliding, window, sinks)


def mla_op_kwargs(config: dict) -> dict:
    """:func:`ropepool.rope_pool_fused_mla`'s sizes and rotation from an MLA config (DeepSeek-V2/V3):
    ``num_qo_heads``, ``kv_lora_rank``, ``rope_dim`` (``qk_rope_head_dim``), ``rope_base``, GPT-J pairs
    (DeepSeek's interleaved RoPE, mlx-lm's ``traditional=True``), its ``rope_scaling``.

    Raises
    ------
    ConfigError
        A size is missing or not a positive int.
    """
    name = str(config.get("_name_or_path") or config.get("model_type") or "config")
    sizes = {}
    for arg, key in (
        ("num_qo_heads", "num_attention_heads"),
        ("kv_lora_rank", "kv_lora_rank"),
        ("rope_dim", "qk_rope_head_dim"),
    ):
        value = config.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ConfigError(f"{name}: {key} must be a positive int, got {value!r}", fields=(key,))
        sizes[arg] = value
    kw = dict(sizes, rope_base=float(config.get("rope_theta") or 10000.0), is_neox=False)
    if config.get("rope_scaling"):
        kw.update(rope_scaling=config["rope_scaling"], max_position_embeddings=config.get("max_position_embeddings"))
    return kw
