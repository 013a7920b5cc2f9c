"""The fused kernel run through MLX: ``mx.fast.metal_kernel`` or ``mx.fast.cuda_kernel``.

Same signature as :func:`ropepool.reference.rope_pool_reference` and
:func:`ropepool.mlx_ops.rope_pool_mlx`. The kernel (``rope_rows.inc``) rotates q and k in
one launch; the pools are then placed by :func:`ropepool.mlx_ops.scatter_rows`, the donated
O(T) scatter. See the package docstring (:mod:`ropepool.kernels`) for why.
"""

from __future__ import annotations

from functools import lru_cache

import mlx.core as mx
import numpy as np

from ..mlx_ops import scatter_rows
from ..rope import Rope, plain
from . import source

#: Largest grid one launch takes: the body indexes with 32-bit unsigned integers and the
#: largest flat index it forms is about twice the grid size.
MAX_GRID = 2**31 - 1


@lru_cache(maxsize=None)
def build(backend: str):
    """The MLX kernel object for ``backend`` ("metal" or "cuda"), built once and cached.

    MLX then compiles one specialisation per template (DType, Hq, Hkv, D, RD, NEOX) and caches it too.
    """
    if backend == "metal":
        make = mx.fast.metal_kernel
    elif backend == "cuda":
        make = mx.fast.cuda_kernel
    else:
        raise ValueError(f"the fused kernel runs on 'metal' or 'cuda', not {backend!r}")
    return make(
        name=source.kernel_name(backend),
        input_names=list(source.INPUT_NAMES),
        output_names=list(source.OUTPUT_NAMES),
        source=source.body(backend),
        header=source.header(backend),
        ensure_row_contiguous=True,
    )


@lru_cache(maxsize=64)
def tables(rope: Rope) -> tuple[mx.array, mx.array]:
    """The kernel's ``inv_freq`` float32 ``[RD/2]`` and ``cos_sin_scale`` float32 ``[1]``."""
    return mx.array(rope.inv_freq32()), mx.array(np.array([rope.scale], np.float32))


def rope_rows(q: mx.array, k: mx.array, positions: mx.array, *, rope: Rope, backend: str):
    """``(q_rot [T, Hq, D], k_rot [T, Hkv, D])`` from one launch of the kernel (per chunk of tokens)."""
    T, Hq, D = q.shape  # [T, Hq, D]
    Hkv = k.shape[1]  # k [T, Hkv, D]
    if T == 0:
        return mx.zeros(q.shape, q.dtype), mx.zeros(k.shape, k.dtype)
    per_token = source.grid_size(1, Hq, Hkv, D)
    chunk = max(1, MAX_GRID // per_token)
    if T > chunk:  # never at real sizes; keeps every flat index inside 32 bits
        parts = [rope_rows(q[s:s + chunk], k[s:s + chunk], positions[s:s + chunk], rope=rope, backend=backend)
                 for s in range(0, T, chunk)]
        return (mx.concatenate([p[0] for p in parts]), mx.concatenate([p[1] for p in parts]))
    grid = source.grid_size(T, Hq, Hkv, D)
    q_rot, k_rot = build(backend)(
        inputs=[q, k, positions, *tables(rope)],
        template=source.template_args(q.dtype, Hq, Hkv, rope.head_dim, rope.rotary_dim, rope.is_neox),
        grid=(grid, 1, 1),
        threadgroup=(min(source.BLOCK, grid), 1, 1),
        output_shapes=[q.shape, k.shape],
        output_dtypes=[q.dtype, k.dtype],
    )
    return q_rot, k_rot


def _rope_pool(backend: str):
    def rope_pool(q, k, v, positions, slots, k_pool, v_pool, *, rope_base=None, rope=None, host_slots=None):
        rope = rope or plain(q.shape[-1], rope_base)
        q_rot, k_rot = rope_rows(q, k, positions, rope=rope, backend=backend)
        return q_rot, k_rot, scatter_rows(k_pool, k_rot, slots, host_slots), scatter_rows(v_pool, v, slots, host_slots)

    rope_pool.__name__ = rope_pool.__qualname__ = f"rope_pool_{backend}"
    rope_pool.__doc__ = (f"``rope_pool_fused`` through the {backend} kernel; same arguments as the "
                         "reference, validated mx.arrays; ``rope`` (a :class:`ropepool.rope.Rope`) "
                         "overrides ``rope_base``; ``host_slots`` as in "
                         ":func:`ropepool.mlx_ops.rope_pool_mlx`.")
    return rope_pool


rope_pool_metal = _rope_pool("metal")
rope_pool_cuda = _rope_pool("cuda")
