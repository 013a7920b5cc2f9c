"""Notebook 08's exercise: estimate a model's KV memory from its config."""

from __future__ import annotations

from typing import Callable

from ...models import from_config, load_preset
from ..feedback import ExerciseFailed, Verdict, guarded

#: Models whose configs differ where an estimate goes wrong: G = 4 and 7 (GQA), 2 with an explicit
#: head_dim (Gemma-2), MQA written as ``multi_query`` (Falcon), and MHA (Phi-3-mini).
MODELS = ("llama-3-8b", "qwen2.5-7b", "gemma-2-9b", "falcon-7b", "phi-3-mini")


def solution_kv_estimate(config: dict, tokens: int, dtype_bytes: int) -> int:
    """Layers x (k and v) x Hkv x D x bytes, per token, times the tokens; Hkv and D read as
    ``ropepool.models.from_config`` reads them."""
    p = from_config(config)
    return config["num_hidden_layers"] * 2 * p.num_kv_heads * p.head_dim * dtype_bytes * tokens


def _why(config: dict, got: float, want: int, tokens: int, dtype_bytes: int) -> tuple[str, str]:
    p, L = from_config(config), config["num_hidden_layers"]
    ratio = got / want if want else float("inf")
    naive_D = config["hidden_size"] // config["num_attention_heads"]
    if p.group_size > 1 and abs(ratio - p.group_size) < 1e-9:
        return "query_heads", (
            f"{p.group_size}x too much: you counted the {p.num_qo_heads} query heads; k and v have "
            f"{p.num_kv_heads} (G = {p.group_size} query heads share each)."
        )
    if abs(ratio - 0.5) < 1e-9:
        return "k_or_v", "half the answer: every token keeps a key and a value row (x 2)."
    if abs(ratio - 1 / L) < 1e-9:
        return "one_layer", f"{L}x too little: every one of the {L} layers keeps its own k and v."
    if abs(ratio - 8) < 1e-9:
        return "bits", "8x too much: dtype_bytes is already bytes (2 for float16), not bits."
    if naive_D != p.head_dim and abs(ratio - naive_D / p.head_dim) < 1e-9:
        return "head_dim", (
            f"head_dim taken as hidden_size // num_attention_heads = {naive_D}; this config sets "
            f"head_dim = {p.head_dim}."
        )
    return "wrong", f"expected {want:,} bytes, got {got:,}."


def check_kv_estimate(kv_estimate: Callable) -> Verdict:
    """Check ``kv_estimate(config, tokens, dtype_bytes) -> bytes`` on five real configs (presets)."""
    lines = []
    for name in MODELS:
        config = load_preset(name)
        tokens, dtype_bytes = 4096, 2
        got = guarded(
            "08",
            kv_estimate,
            dict(config),
            tokens,
            dtype_bytes,
            what=f"kv_estimate on {name}",
            explain=lambda e: (
                " (Falcon-7B's config has no num_key_value_heads: multi_query: true "
                "means one KV head; ropepool.models.from_config reads it)"
                if isinstance(e, KeyError)
                else ""
            ),
        )
        if got is None:
            raise ExerciseFailed("08", "returned_none", "kv_estimate returned None: did it forget `return`?")
        want = solution_kv_estimate(config, tokens, dtype_bytes)
        if got != want:
            problem, message = _why(config, got, want, tokens, dtype_bytes)
            raise ExerciseFailed("08", problem, f"{name}, 4096 tokens, float16: {message}")
        lines.append(f"{name} {want / 2**30:.2f} GiB")
    return Verdict("08", True, "4096 tokens in float16: " + ", ".join(lines) + ".")
