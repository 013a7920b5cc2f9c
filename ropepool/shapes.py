"""The shape vocabulary, declared once and used everywhere.

=====  ===============================================================
T      tokens in this call (prefill: many, decode: one per request)
Hq     query heads (``num_qo_heads``; a config's ``num_attention_heads``)
Hkv    key/value heads (``num_kv_heads``; ``num_key_value_heads``)
G      group size, ``Hq // Hkv``: query heads that share one KV head
D      head dimension (``head_dim``); RoPE pairs ``i`` with ``i + D/2``
P      pool rows (KV-cache slots); one row holds one token's ``[Hkv, D]``
=====  ===============================================================

Shapes: q ``[T, Hq, D]``; k, v ``[T, Hkv, D]``; positions, slots ``[T]``;
k_pool, v_pool ``[P, Hkv, D]``. MHA is ``Hkv == Hq`` (G = 1), MQA is ``Hkv == 1``,
GQA anything in between.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Bytes per element of each float dtype the op accepts.
DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}


@dataclass(frozen=True)
class Shapes:
    """The sizes of one ``rope_pool_fused`` call: ``T, Hq, Hkv, D, P``."""

    tokens: int  # T
    num_qo_heads: int  # Hq
    num_kv_heads: int  # Hkv
    head_dim: int  # D
    pool_rows: int  # P

    @property
    def group_size(self) -> int:
        """G = Hq // Hkv, query heads per KV head."""
        return self.num_qo_heads // self.num_kv_heads

    @property
    def q(self) -> tuple[int, int, int]:
        return (self.tokens, self.num_qo_heads, self.head_dim)  # [T, Hq, D]

    @property
    def kv(self) -> tuple[int, int, int]:
        return (self.tokens, self.num_kv_heads, self.head_dim)  # [T, Hkv, D]

    @property
    def pool(self) -> tuple[int, int, int]:
        return (self.pool_rows, self.num_kv_heads, self.head_dim)  # [P, Hkv, D]

    def pool_bytes(self, dtype: str = "float16") -> int:
        """Bytes of k_pool plus v_pool (one layer's KV cache)."""
        return 2 * self.pool_rows * self.num_kv_heads * self.head_dim * DTYPE_BYTES[dtype]

    def table(self) -> list[tuple[str, str, tuple[int, ...]]]:
        """Rows of (argument, symbolic shape, concrete shape), for display."""
        return [
            ("q", "[T, Hq, D]", self.q),
            ("k", "[T, Hkv, D]", self.kv),
            ("v", "[T, Hkv, D]", self.kv),
            ("positions", "[T]", (self.tokens,)),
            ("slots", "[T]", (self.tokens,)),
            ("k_pool", "[P, Hkv, D]", self.pool),
            ("v_pool", "[P, Hkv, D]", self.pool),
        ]
