"""``rope_pool_fused_mla``'s shape messages, read with the numbers: which part of MLA's projections
went where.

DeepSeek-V3's attention splits two projections (``ropepool.mla``)::

    q  [T, Hq, qk_nope_head_dim + rope_dim]           -> q_nope, q_pe [T, Hq, rope_dim]
    kv_a_proj_with_mqa(x) [T, kv_lora_rank + rope_dim] -> c_kv [T, kv_lora_rank], k_pe -> [T, 1, rope_dim]

and the latent pool holds one row ``[c_kv ‖ rope(k_pe)]`` per token, ``[P, 1, kv_lora_rank + rope_dim]``.
The mistakes that give exactly a rejected shape are the splits left undone (a whole q head, c_kv with
k_pe still on it), k_pe repeated over the heads as GQA's ``repeat_kv`` does, and a pool allocated as if
MLA cached per-head k and v. The sizes come from ropepool's second line (``expected (...)``) or, for the
first line alone, from the model's config (:class:`~ropepool.diagnosis.base.Facts`' ``kv_lora_rank``,
``rope_dim``).

Example
-------
>>> mla_case("q_pe_shape", (3, 128, 192), (3, 128, 64), None).name
'q_pe_whole_head'
"""

from __future__ import annotations

from .base import Case, Facts

MLA_SHAPE_CODES = ("q_pe_shape", "k_pe_shape", "c_kv_shape", "latent_pool_shape")
#: The mistakes :func:`mla_case` names.
MLA_CASES = (
    "q_pe_whole_head",
    "q_pe_heads",
    "k_pe_repeated",
    "k_pe_with_c_kv",
    "c_kv_with_k_pe",
    "latent_pool_per_head",
    "latent_pool_without_rope",
)


def mla_case(code: str, got: tuple | None, expected: tuple | None, facts: Facts | None) -> Case | None:
    """The mistake behind ``code`` with the rejected shape ``got`` and the op's ``expected`` one (None
    where only the first line was pasted), or None where the numbers name none."""
    if not got:
        return None
    f = facts or Facts()
    R, rd, Hq = f.kv_lora_rank, f.rope_dim, f.num_qo_heads
    if code == "q_pe_shape" and len(got) == 3:
        rd = expected[2] if expected else rd
        Hq = expected[1] if expected else Hq
        if rd and got[2] > rd and (Hq is None or got[1] == Hq):
            return Case(
                "q_pe_whole_head",
                f"q_pe's last axis is {got[2]}, the whole query head (qk_nope_head_dim {got[2] - rd} + "
                f"rope_dim {rd}): q was passed before it was split.",
                f"Split q first: q_nope, q_pe = mx.split(q, [{got[2] - rd}], axis=-1); pass q_pe [T, {got[1]}, {rd}].",
            )
        if Hq and got[1] != Hq and (rd is None or got[2] == rd):
            return Case(
                "q_pe_heads",
                f"q_pe has {got[1]} heads where num_qo_heads = {Hq}: a tensor-parallel shard "
                f"({Hq} / {got[1]} = {Hq / got[1]:g} ranks) or another model's q.",
                f"Pass num_qo_heads={got[1]} on a shard of {got[1]} heads, or q_pe with {Hq} heads.",
            )
        return None
    if code == "k_pe_shape" and len(got) == 3:
        rd = expected[2] if expected else rd
        if got[1] > 1 and (rd is None or got[2] == rd):
            return Case(
                "k_pe_repeated",
                f"k_pe has {got[1]} heads: it was repeated over the query heads, as GQA's repeat_kv "
                "does; in MLA every head shares one RoPE key.",
                f"Pass the shared key once: k_pe [T, 1, {got[2]}] (before any repeat: k_pe[:, :1]).",
            )
        if R and rd and got[1] == 1 and got[2] == R + rd:
            return Case(
                "k_pe_with_c_kv",
                f"k_pe's last axis is {got[2]} = kv_lora_rank {R} + rope_dim {rd}: the whole "
                "kv_a_proj_with_mqa output, not its RoPE part.",
                f"Split it: c_kv, k_pe = mx.split(kv, [{R}], axis=-1); pass k_pe.reshape(T, 1, {rd}).",
            )
        return None
    if code == "c_kv_shape" and len(got) == 2:
        R = expected[1] if expected else R
        if R and rd and got[1] == R + rd:
            return Case(
                "c_kv_with_k_pe",
                f"c_kv's last axis is {got[1]} = kv_lora_rank {R} + rope_dim {rd}: k_pe is still on it "
                "(kv_a_proj_with_mqa's output, not split).",
                f"Split it: c_kv, k_pe = mx.split(kv, [{R}], axis=-1); pass kv_a_layernorm(c_kv) [T, {R}].",
            )
        return None
    if code == "latent_pool_shape" and len(got) == 3:
        width = expected[2] if expected else (R + rd if R and rd else None)
        if width is None:
            return None
        if got[1] > 1:
            return Case(
                "latent_pool_per_head",
                f"the latent pool has {got[1]} heads: it was allocated like a per-head k or v pool. MLA caches "
                f"one latent row per token, shared by every head ({got[1]} times less memory).",
                f"Allocate latent_pool as [P, 1, {width}].",
            )
        if R and rd and got[2] == R:
            return Case(
                "latent_pool_without_rope",
                f"the pool rows are {got[2]} = kv_lora_rank wide: room for c_kv but not for the rotated "
                f"k_pe ({rd}), which the row ends with.",
                f"Allocate latent_pool as [P, 1, {R} + {rd}] = [P, 1, {R + rd}].",
            )
        return None
    return None
