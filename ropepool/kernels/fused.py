"""The fused kernel run through MLX: ``mx.fast.metal_kernel`` or ``mx.fast.cuda_kernel``.

The kernel (``rope_rows.inc``) rotates q and k in one launch (and encodes the FP8 rows); the
pools are then placed by :mod:`ropepool.pool_write`, MLX's donated O(T) write. See the package
docstring (:mod:`ropepool.kernels`) for why.
"""

from __future__ import annotations

from functools import lru_cache

import mlx.core as mx
import numpy as np

from ..fusion import PLAIN, Fusion
from ..mlx_ops import norm_weight32
from ..rope import Rope
from . import source
from .source import Variant

#: Largest grid one launch takes: the body indexes with 32-bit unsigned integers and the
#: largest flat index it forms is about twice the grid size.
MAX_GRID = 2**31 - 1


@lru_cache(maxsize=None)
def build(backend: str, variant: Variant = source.PLAIN):
    """The MLX kernel object for ``backend`` ("metal" or "cuda") and ``variant`` (QK-norm, FP8),
    built once and cached.

    MLX then compiles one specialisation per template (DType, Hq, Hkv, D, RD, NEOX) and caches it too.
    """
    if backend == "metal":
        make = mx.fast.metal_kernel
    elif backend == "cuda":
        make = mx.fast.cuda_kernel
    else:
        raise ValueError(f"the fused kernel runs on 'metal' or 'cuda', not {backend!r}")
    return make(
        name=source.kernel_name(backend, variant),
        input_names=list(source.input_names(variant)),
        output_names=list(source.output_names(variant)),
        source=source.body(backend),
        header=source.header(backend, variant),
        ensure_row_contiguous=True,
    )


@lru_cache(maxsize=64)
def tables(rope: Rope) -> tuple[mx.array, mx.array]:
    """The kernel's ``inv_freq`` float32 ``[RD/2]`` and ``cos_sin_scale`` float32 ``[1]``."""
    return mx.array(rope.inv_freq32()), mx.array(np.array([rope.scale], np.float32))


def rope_rows(
    q: mx.array,
    k: mx.array,
    positions: mx.array,
    *,
    rope: Rope,
    backend: str,
    fusion: Fusion = PLAIN,
    v: mx.array | None = None,
):
    """``(q_rot [T, Hq, D], k_rot [T, Hkv, D])`` from one launch of the kernel (per chunk of tokens);
    with an FP8 ``fusion`` also the codes ``k_fp8``, ``v_fp8`` (uint8 ``[T, Hkv, D]``; ``v`` needed)."""
    T, Hq, D = q.shape  # [T, Hq, D]
    Hkv = k.shape[1]  # k [T, Hkv, D]
    variant = Variant(fusion.qnorm, fusion.knorm, fusion.fp8)
    shapes, dtypes = [q.shape, k.shape], [q.dtype, k.dtype]
    if variant.fp8:
        shapes, dtypes = shapes + [k.shape, k.shape], dtypes + [mx.uint8, mx.uint8]
    if T == 0:
        return tuple(mx.zeros(sh, dt) for sh, dt in zip(shapes, dtypes))
    per_token = source.grid_size(1, Hq, Hkv, D)
    chunk = max(1, MAX_GRID // per_token)
    if T > chunk:  # never at real sizes; keeps every flat index inside 32 bits
        parts = [
            rope_rows(
                q[s : s + chunk],
                k[s : s + chunk],
                positions[s : s + chunk],
                rope=rope,
                backend=backend,
                fusion=fusion,
                v=None if v is None else v[s : s + chunk],
            )
            for s in range(0, T, chunk)
        ]
        return tuple(mx.concatenate([p[n] for p in parts]) for n in range(len(shapes)))
    inputs = [q, k, positions, *tables(rope)]
    if variant.norm:
        one = mx.array([1.0], mx.float32)  # the side without a norm: never read
        inputs += [
            norm_weight32(fusion.q_norm_weight) if fusion.qnorm else one,
            norm_weight32(fusion.k_norm_weight) if fusion.knorm else one,
            mx.array([fusion.norm_eps], mx.float32),
        ]
    if variant.fp8:
        inputs += [v, mx.array(fusion.scales())]
    grid = source.grid_size(T, Hq, Hkv, D)
    return tuple(
        build(backend, variant)(
            inputs=inputs,
            template=source.template_args(q.dtype, Hq, Hkv, rope.head_dim, rope.rotary_dim, rope.is_neox),
            grid=(grid, 1, 1),
            threadgroup=(min(source.BLOCK, grid), 1, 1),
            output_shapes=shapes,
            output_dtypes=dtypes,
        )
    )


def _rotate(backend: str):
    def rotate(q, k, v, positions, *, rope: Rope, fusion: Fusion = PLAIN):
        out = rope_rows(q, k, positions, rope=rope, backend=backend, fusion=fusion, v=v)
        return out if fusion.fp8 else (out[0], out[1], out[1], v)

    rotate.__name__ = rotate.__qualname__ = f"rotate_{backend}"
    rotate.__doc__ = (
        f"``(q_rot, k_rot, k_rows, v_rows)`` from the {backend} kernel: the rotated rows, and "
        "the rows a pool takes (k_rot and v, or with an FP8 ``fusion`` their e4m3 codes). "
        "Validated mx.arrays; :mod:`ropepool.pool_write` writes the pools."
    )
    return rotate


rotate_metal = _rotate("metal")
rotate_cuda = _rotate("cuda")
