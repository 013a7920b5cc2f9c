"""The MLX path: ``rope_pool_fused`` from MLX ops, on any MLX device (the CPU included).

No custom kernel. The math follows :mod:`ropepool.reference` (NeoX pairing) in float32
with one rounding to the output dtype, so a pool row holds exactly the bits of its k_rot row.

Pool writes cost O(T), not O(P): :func:`scatter_rows` scatters into a fresh array object
that shares the pool's graph node, and MLX donates the pool's buffer to the scatter when
nothing else holds it at evaluation time. So the call pattern that keeps it O(T) is::

    q_rot, k_rot, k_pool, v_pool = rope_pool_fused(..., k_pool, v_pool, ...)  # rebind the pools
    mx.eval(q_rot, k_rot, k_pool, v_pool)

If you keep a reference to the old pool, MLX must copy it (O(P)) to honour it.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from .reference import inverse_frequencies


def rope_cos_sin(positions: mx.array, head_dim: int, rope_base: float) -> tuple[mx.array, mx.array]:
    """cos and sin of theta, float32 ``[T, 1, D/2]`` each (the 1 broadcasts over heads)."""
    inv_freq = mx.array(inverse_frequencies(head_dim, rope_base).astype(np.float32))  # [D/2]
    theta = positions.astype(mx.float32)[:, None] * inv_freq[None, :]  # [T, D/2]
    return mx.cos(theta)[:, None, :], mx.sin(theta)[:, None, :]  # [T, 1, D/2]


def rotate(x: mx.array, cos: mx.array, sin: mx.array) -> mx.array:
    """NeoX-rotate ``x [T, H, D]`` in float32; one rounding back to x's dtype."""
    half = x.shape[-1] // 2
    x32 = x.astype(mx.float32)
    x1, x2 = x32[..., :half], x32[..., half:]  # [T, H, D/2]
    return mx.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1).astype(x.dtype)  # [T, H, D]


def scatter_rows(pool: mx.array, rows: mx.array, slots: mx.array) -> mx.array:
    """``pool [P, Hkv, D]`` with ``rows[t]`` written at row ``slots[t]``; O(T) when donated.

    A slot outside ``[0, P)`` writes nothing, without a host synchronisation: such a token
    rewrites the first writing token's row with that token's own bytes (or, if no token
    writes, row 0 with its current bytes), so every duplicate write carries identical data.
    The caller's ``pool`` object is not mutated.
    """
    out = mx.array(pool)  # a new object: the caller's pool keeps its value
    if slots.shape[0] == 0:
        return out
    writes = (slots >= 0) & (slots < pool.shape[0])  # [T]
    first = mx.argmax(writes)  # first writing token, 0 if none
    any_write = writes[first]
    idx = mx.where(writes, slots, mx.where(any_write, slots[first], 0))  # [T]
    fallback = mx.where(any_write, rows[first], pool[0])  # [Hkv, D]
    out[idx] = mx.where(writes[:, None, None], rows, fallback[None])  # [T, Hkv, D] into [P, Hkv, D]
    return out


def rope_pool_mlx(q, k, v, positions, slots, k_pool, v_pool, *, rope_base: float):
    """MLX-ops implementation; same arguments as the reference, validated mx.arrays."""
    cos, sin = rope_cos_sin(positions, q.shape[-1], rope_base)  # shared by all heads of a token
    q_rot = rotate(q, cos, sin)  # [T, Hq, D]
    k_rot = rotate(k, cos, sin)  # [T, Hkv, D]
    return q_rot, k_rot, scatter_rows(k_pool, k_rot, slots), scatter_rows(v_pool, v, slots)
