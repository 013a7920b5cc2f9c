"""A GGUF Llama as an mlx-lm ``llama.Model`` and a tokenizer, from the file alone.

``mx.load(path, return_metadata=True)`` reads GGUF natively: float tensors as arrays, Q4_0/Q4_1/Q8_0
tensors as MLX affine-quantized triples (``name.weight`` packed uint32, ``name.scales``,
``name.biases``; group size 32), and the metadata (config, vocabulary, merges, chat template)
as a dict. This module maps those onto what mlx-lm and ``tokenizers`` expect; nothing else is
read, and no Hugging Face config or tokenizer file is needed.

The pairing (read this once)
----------------------------
llama.cpp's converter permutes the rows of every Q and K projection, head by head: the
Hugging Face row order puts the two halves of each RoPE pair D/2 rows apart (NeoX pairs,
``nn.RoPE(traditional=False)``, ``rope_pool_fused``'s default); the GGUF order puts them on
adjacent rows (GPT-J pairs, ``traditional=True``, the op's ``is_neox=False``). Both are the same model:

    GGUF rows + traditional=True  ==  un-permuted rows + traditional=False

:func:`halves_from_pairs` un-permutes. It only reorders output rows, and a quantized matrix is
quantized along its input dimension, so it is exact on the packed weights too: no
dequantize-requantize round trip.

Shapes: Hq query heads, Hkv KV heads, D head_dim; a projection's rows are ``[H * D]``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx.utils import tree_unflatten

from .._scalars import finite_float, is_int
from ..models import RopeParams, from_config, printable

# GGUF tensor name -> mlx-lm llama.Model parameter path (per block: blk.N. -> model.layers.N.)
_BLOCK = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}
_TOP = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}


class GGUFError(ValueError):
    """A GGUF file this loader cannot turn into a Llama (names the field or tensor)."""


@dataclass(frozen=True)
class RopeInfo:
    """How a loaded model rotates: the op's parameters and the pairing its Q/K rows need.

    Attributes
    ----------
    params : RopeParams   Hq, Hkv, D, rope_base (``rope_pool_fused``'s keyword arguments)
    traditional : bool    True: GPT-J pairs (GGUF row order); False: NeoX pairs (Hugging Face
                          row order, ``rope_pool_fused``'s default)
    """

    params: RopeParams
    traditional: bool

    @property
    def pairs(self) -> str:
        return "GPT-J (adjacent)" if self.traditional else "NeoX (halves)"


def config_from_metadata(metadata: dict, weights: dict) -> dict:
    """A Hugging Face-style ``config.json`` dict for a GGUF Llama (what ``llama.ModelArgs`` reads).

    ``rope_traditional`` is True: the GGUF rows need GPT-J pairs.

    Raises
    ------
    GGUFError
        Not a Llama, a field is missing, a count is not an integer > 0 or a number not a finite
        number > 0 (naming the field), or the file asks for RoPE scaling (not handled here).
    """
    arch = metadata.get("general.architecture")
    if arch != "llama":
        raise GGUFError(f"general.architecture is {arch!r}, expected 'llama'")

    def field(key: str, default=None, count: bool = True):
        """``llama.<key>``: an integer > 0 (``count``) or a finite number > 0, else a GGUFError naming it."""
        value = metadata.get(f"llama.{key}", default)
        if value is None:
            raise GGUFError(f"GGUF metadata has no llama.{key}")
        value = value.item() if isinstance(value, mx.array) and value.ndim == 0 else value
        number = finite_float(value)
        if (not is_int(value) if count else number is None) or number is None or number <= 0:
            kind = "an integer > 0" if count else "a finite number > 0"
            raise GGUFError(f"GGUF metadata llama.{key} must be {kind}, got {printable(repr(value), 80)}")
        return int(value) if count else number

    if "llama.rope.scaling.type" in metadata and metadata["llama.rope.scaling.type"] != "none":
        raise GGUFError(f"llama.rope.scaling.type is {metadata['llama.rope.scaling.type']!r}: not handled")
    heads = field("attention.head_count")
    hidden = field("embedding_length")
    return {
        "_name_or_path": str(metadata.get("general.name", "gguf")),
        "model_type": "llama",
        "hidden_size": hidden,
        "num_hidden_layers": field("block_count"),
        "intermediate_size": field("feed_forward_length"),
        "num_attention_heads": heads,
        "num_key_value_heads": field("attention.head_count_kv", heads),
        "head_dim": field("rope.dimension_count", hidden // heads),
        "rms_norm_eps": field("attention.layer_norm_rms_epsilon", count=False),
        "vocab_size": field("vocab_size", len(metadata.get("tokenizer.ggml.tokens", ()))),
        "max_position_embeddings": field("context_length"),
        "rope_theta": field("rope.freq_base", 10000.0, count=False),
        "rope_traditional": True,
        "tie_word_embeddings": "output.weight" not in weights,
    }


def rename(weights: dict) -> dict:
    """GGUF tensor names -> mlx-lm ``llama.Model`` parameter paths (``.scales``/``.biases`` kept).

    Raises
    ------
    GGUFError
        A tensor this mapping does not know (so nothing is silently dropped).
    """
    out = {}
    for name, value in weights.items():
        m = re.fullmatch(r"blk\.(\d+)\.(\w+)\.(weight|scales|biases|bias)", name)
        if m and m.group(2) in _BLOCK:
            out[f"model.layers.{m.group(1)}.{_BLOCK[m.group(2)]}.{m.group(3)}"] = value
            continue
        m = re.fullmatch(r"(\w+)\.(weight|scales|biases)", name)
        if m and m.group(1) in _TOP:
            out[f"{_TOP[m.group(1)]}.{m.group(2)}"] = value
            continue
        raise GGUFError(f"unknown GGUF tensor {name!r}")
    return out


def quantization(weights: dict, model: nn.Module) -> dict:
    """``{module path: {"group_size": g, "bits": b}}`` for every quantized tensor in ``weights``.

    Read from the shapes: a ``[rows, in]`` matrix packs ``in * bits / 32`` uint32 words per row
    and has ``in / g`` scales per row.
    """
    modules = dict(model.named_modules())
    out = {}
    for name, scales in weights.items():
        if not name.endswith(".scales"):
            continue
        path = name.removesuffix(".scales")
        packed = weights[f"{path}.weight"]
        module = modules[path]
        cols = module.weight.shape[1]  # in_features (Linear) or hidden size (Embedding)
        out[path] = {"group_size": cols // scales.shape[1], "bits": packed.shape[1] * 32 // cols}
    return out


def head_row_order(num_heads: int, head_dim: int) -> np.ndarray:
    """Row indices that take GGUF (GPT-J pair) rows to Hugging Face (NeoX halves) rows.

    Within each head, NeoX row ``i < D/2`` is GGUF row ``2 i`` and NeoX row ``i + D/2`` is
    GGUF row ``2 i + 1``: ``new = old[order]``.

    Example
    -------
    >>> head_row_order(1, 8).tolist()
    [0, 2, 4, 6, 1, 3, 5, 7]
    """
    half = head_dim // 2
    within = np.concatenate([np.arange(half) * 2, np.arange(half) * 2 + 1])  # [D]
    return (np.arange(num_heads)[:, None] * head_dim + within[None, :]).reshape(-1)  # [H * D]


def halves_from_pairs(weights: dict, num_qo_heads: int, num_kv_heads: int, head_dim: int) -> dict:
    """A copy of ``weights`` (mlx-lm names) with every q_proj/k_proj row un-permuted to NeoX order.

    Applies to ``weight``, ``scales`` and ``biases`` alike: a row permutation of a quantized
    matrix is exact. Use with ``rope_traditional=False``.
    """
    orders = {
        "q_proj": mx.array(head_row_order(num_qo_heads, head_dim)),
        "k_proj": mx.array(head_row_order(num_kv_heads, head_dim)),
    }
    out = dict(weights)
    for name, value in weights.items():
        proj = name.split(".")[-2]
        if proj in orders:
            out[name] = mx.take(value, orders[proj], axis=0)
    return out


def build_model(weights: dict, metadata: dict, *, pairs: str = "gptj", dequantize: bool = False):
    """An mlx-lm ``llama.Model`` with the GGUF's weights, and its :class:`RopeInfo`.

    Parameters
    ----------
    weights, metadata : what ``mx.load(path, return_metadata=True)`` returns
    pairs : "gptj" keeps the GGUF rows (``rope_traditional=True``); "neox" un-permutes the Q/K
        rows (:func:`halves_from_pairs`, ``rope_traditional=False``). Same logits either way.
    dequantize : False keeps quantized layers as shipped; True makes them float32

    Raises
    ------
    GGUFError
        See :func:`config_from_metadata`, :func:`rename`; or ``pairs`` is neither choice.
    """
    from mlx_lm.models import llama  # mlx-lm: imported when used

    if pairs not in ("gptj", "neox"):
        raise GGUFError(f"pairs must be 'gptj' or 'neox', got {pairs!r}")
    config = config_from_metadata(metadata, weights)
    params = from_config(config)
    named = rename(weights)
    if pairs == "neox":
        named = halves_from_pairs(named, params.num_qo_heads, params.num_kv_heads, params.head_dim)
        config["rope_traditional"] = False
    model = llama.Model(llama.ModelArgs.from_dict(config))
    quant = quantization(named, model)
    nn.quantize(model, class_predicate=lambda path, _: quant.get(path, False))
    model.load_weights(list(named.items()), strict=True)
    if dequantize:
        dequantize_model(model, mx.float32)
    mx.eval(model.parameters())
    return model, RopeInfo(params, traditional=config["rope_traditional"])


def dequantize_model(model: nn.Module, dtype=mx.float32) -> nn.Module:
    """Replace every QuantizedLinear/QuantizedEmbedding of ``model`` by a float one, in place.

    Each weight is ``q * scale + bias`` computed in float32 (the scales and biases cast first:
    ``mx.dequantize`` computes and returns in their dtype, float16 in a GGUF), then cast to ``dtype``.
    """
    swaps = []
    for path, m in model.named_modules():
        if isinstance(m, (nn.QuantizedLinear, nn.QuantizedEmbedding)):
            scales, biases = m.scales.astype(mx.float32), m.biases.astype(mx.float32)
            w = mx.dequantize(m.weight, scales, biases, m.group_size, m.bits).astype(dtype)
            if isinstance(m, nn.QuantizedLinear):
                new = nn.Linear(w.shape[1], w.shape[0], bias="bias" in m)
                if "bias" in m:
                    new.bias = m.bias.astype(dtype)
            else:
                new = nn.Embedding(w.shape[0], w.shape[1])
            new.weight = w
            swaps.append((path, new))
    model.update_modules(tree_unflatten(swaps))  # "model.layers.0.mlp.up_proj" -> nested dicts and lists
    return model
