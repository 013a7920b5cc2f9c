"""The "mlx" backend: the rotation (and QK-norm, FP8 encoding) from MLX ops, on any MLX device.

No custom kernel. The math follows :mod:`ropepool.reference` (NeoX pairing) in float32
with one rounding to the output dtype. The pools are written by :mod:`ropepool.pool_write`.
"""

from __future__ import annotations

from functools import lru_cache

import mlx.core as mx
import numpy as np

from . import fp8
from .fusion import PLAIN, Fusion
from .rope import Rope, plain


def rope_cos_sin(positions: mx.array, head_dim: int, rope_base: float) -> tuple[mx.array, mx.array]:
    """cos and sin of theta, float32 ``[T, 1, D/2]`` each (the 1 broadcasts over heads): plain RoPE."""
    inv_freq = mx.array(plain(head_dim, rope_base).inv_freq32())  # [D/2]
    theta = positions.astype(mx.float32)[:, None] * inv_freq[None, :]  # [T, D/2]
    return mx.cos(theta)[:, None, :], mx.sin(theta)[:, None, :]  # [T, 1, D/2]


def rotate(x: mx.array, cos: mx.array, sin: mx.array) -> mx.array:
    """NeoX-rotate ``x [T, H, D]`` in float32 with cos, sin ``[T, 1, D/2]``; one rounding back to x's dtype.

    The textbook form, for reading; :func:`rotate_qk` computes the same bits faster and for every
    :class:`~ropepool.rope.Rope`.
    """
    half = x.shape[-1] // 2
    x32 = x.astype(mx.float32)
    x1, x2 = x32[..., :half], x32[..., half:]  # [T, H, D/2]
    return mx.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1).astype(x.dtype)  # [T, H, D]


# The fast form, used by every path here. The rotated part of x, viewed so that a pair axis of
# length 2 holds (x_a, x_b), is [T, H, 2, RD/2] for NeoX pairs and [T, H, RD/2, 2] for GPT-J
# pairs; the same view with its pair axis reversed holds (x_b, x_a), rotate_half up to a sign,
# which goes into sin. Then y = x*cos + swapped*sin_signed is one elementwise expression that
# mx.compile fuses (upcast, two products, sum, rounding). Bit for bit the kernel's results:
# x1*cos + x2*(-sin) == x1*cos - x2*sin in IEEE arithmetic, and cos, sin carry the Rope's scale
# as the kernel's do. The tables' shapes tell the pairing: sign [1, 1, 2, 1] is NeoX,
# [1, 1, 1, 2] GPT-J; freq holds inv_freq laid out like the pairs, so its size is RD.


@lru_cache(maxsize=64)
def _pair_tables(rope: Rope) -> tuple[mx.array, mx.array, mx.array]:
    """inv_freq laid out like the pairs (float32, RD elements), the signs (-1, +1) of sin, and the scale ``[1]``."""
    inv_freq = rope.inv_freq32()  # [RD/2]
    if rope.is_neox:
        freq = np.stack([inv_freq, inv_freq])[None, None]  # [1, 1, 2, RD/2]
        sign = np.array([-1.0, 1.0], np.float32).reshape(1, 1, 2, 1)
    else:
        freq = np.stack([inv_freq, inv_freq], axis=-1)[None, None]  # [1, 1, RD/2, 2]
        sign = np.array([-1.0, 1.0], np.float32).reshape(1, 1, 1, 2)
    return mx.array(freq), mx.array(sign), mx.array(np.array([rope.scale], np.float32))


def _rotate_pairs(x: mx.array, cos: mx.array, sin_signed: mx.array, dtype=None) -> mx.array:
    """``x [T, H, D]`` rotated, rounded once to ``dtype`` (default x's; a float32 x normalised by QK-norm
    is rounded to the input's dtype here, with its pass-through dimensions)."""
    dtype = dtype or x.dtype
    T, H, D = x.shape
    RD = cos.shape[2] * cos.shape[3]  # rotated dimensions
    pair_shape = (T, H, 2, RD // 2) if sin_signed.shape[2] == 2 else (T, H, RD // 2, 2)  # NeoX or GPT-J
    pair_axis = 2 if sin_signed.shape[2] == 2 else 3
    x4 = x[..., :RD].reshape(pair_shape)  # (x_a, x_b) along the pair axis
    swapped = x4[:, :, ::-1, :] if pair_axis == 2 else x4[..., ::-1]  # (x_b, x_a)
    y = x4.astype(mx.float32) * cos + swapped.astype(mx.float32) * sin_signed  # float32
    y = y.astype(dtype).reshape(T, H, RD)  # one rounding
    return y if RD == D else mx.concatenate([y, x[..., RD:].astype(dtype)], axis=-1)  # [T, H, D]; the rest copied


def angles(positions: mx.array, rope: Rope) -> tuple[mx.array, mx.array]:
    """The RoPE table rows of ``positions [T]``: ``(cos, sin_signed)``, float32, scaled by the Rope's
    scale, laid out like its pairs: ``[T, 1, 2, RD/2]`` (NeoX) or ``[T, 1, RD/2, 2]`` (GPT-J).

    Made once per step and RoPE (:meth:`ropepool.op.StepPlan.angles`) and read by every layer that
    turns with it; :func:`rotate_qk` makes them itself when it is not given them.
    """
    return _angles(positions, *_pair_tables(rope))


@mx.compile
def _angles(positions, freq, sign, scale):
    theta = positions.astype(mx.float32)[:, None, None, None] * freq  # [T, 1, 2, RD/2] or [T, 1, RD/2, 2]
    return mx.cos(theta) * scale, (mx.sin(theta) * scale) * sign  # (c, c), (-s, s), scaled


def rotate_qk(
    q: mx.array, k: mx.array, positions: mx.array, rope: Rope, fusion: Fusion = PLAIN, table=None
) -> tuple[mx.array, mx.array]:
    """``(q_rot [T, Hq, D], k_rot [T, Hkv, D])``: the rotation alone (after ``fusion``'s QK-norm).

    ``table``: :func:`angles` of ``positions`` and ``rope``, when the caller has made them already.
    """
    cos, sin_signed = angles(positions, rope) if table is None else table
    if not (fusion.qnorm or fusion.knorm):
        return _rope_qk(q, k, cos, sin_signed)
    one = _ONE()
    qw = norm_weight32(fusion.q_norm_weight) if fusion.qnorm else one
    kw = norm_weight32(fusion.k_norm_weight) if fusion.knorm else one
    eps = mx.array([fusion.norm_eps], mx.float32)
    return _normed_rope_qk(fusion.qnorm, fusion.knorm)(q, k, cos, sin_signed, qw, kw, eps)


@lru_cache(maxsize=1)
def _ONE() -> mx.array:
    return mx.array([1.0], mx.float32)


def norm_weight32(w) -> mx.array:
    """A QK-norm weight ``[D]`` as float32 (exact from float16 and bfloat16)."""
    return (w if isinstance(w, mx.array) else mx.array(np.asarray(w, np.float32))).astype(mx.float32)


def rms_normed(x: mx.array, w: mx.array, eps: mx.array) -> mx.array:
    """QK-norm of ``x [T, H, D]`` over D, float32: ``x * (1 / sqrt(mean(x**2) + eps)) * w`` (w float32 ``[D]``)."""
    x32 = x.astype(mx.float32)
    ss = mx.sum(x32 * x32, axis=-1, keepdims=True)  # [T, H, 1]
    return (x32 * (1.0 / mx.sqrt(ss / x.shape[-1] + eps))) * w  # [T, H, D]


@lru_cache(maxsize=4)
def _normed_rope_qk(qnorm: bool, knorm: bool):
    """The compiled QK-norm + rotation for one choice of which sides are normalised."""

    def f(q, k, cos, sin_signed, qw, kw, eps):
        qx = rms_normed(q, qw, eps) if qnorm else q
        kx = rms_normed(k, kw, eps) if knorm else k
        return _rotate_pairs(qx, cos, sin_signed, q.dtype), _rotate_pairs(kx, cos, sin_signed, k.dtype)

    return mx.compile(f)


def encode_kv(k_rot: mx.array, v: mx.array, fusion: Fusion) -> tuple[mx.array, mx.array]:
    """An FP8 cache's rows: the e4m3 codes (uint8 ``[T, Hkv, D]``) of ``k_rot / k_scale`` and ``v / v_scale``."""
    return _encode_kv(k_rot, v, mx.array(fusion.scales()))


@mx.compile
def _encode_kv(k_rot, v, scales):
    return fp8.encode(k_rot.astype(mx.float32) / scales[0]), fp8.encode(v.astype(mx.float32) / scales[1])


@mx.compile
def _rope_qk(q, k, cos, sin_signed):
    return _rotate_pairs(q, cos, sin_signed), _rotate_pairs(k, cos, sin_signed)


def rotate_mlx(q, k, v, positions, *, rope: Rope, fusion: Fusion = PLAIN, table=None):
    """``(q_rot [T, Hq, D], k_rot [T, Hkv, D], k_rows, v_rows)``: the MLX backend. The rows a pool
    takes are k_rot and v, or with an FP8 ``fusion`` their e4m3 codes (uint8 ``[T, Hkv, D]``).
    Validated mx.arrays; :mod:`ropepool.pool_write` writes the pools. ``table``: the step's
    :func:`angles` for ``rope``, made once for every layer (None: made here)."""
    q_rot, k_rot = rotate_qk(q, k, positions, rope, fusion, table)  # [T, Hq, D], [T, Hkv, D]
    k_rows, v_rows = encode_kv(k_rot, v, fusion) if fusion.fp8 else (k_rot, v)
    return q_rot, k_rot, k_rows, v_rows
