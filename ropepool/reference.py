"""The float64 NumPy reference: the oracle every test and notebook compares against.

NeoX RoPE (the "rotate half" convention of GPT-NeoX, Llama, Mistral, Qwen, Gemma):
dimension ``i`` is paired with ``i + D/2`` (not with ``i + 1`` as in GPT-J's interleaved
convention). For ``i < D/2`` the pair turns by ``theta_i = position * rope_base**(-2i/D)``::

    (x_i, x_{i+D/2})  ->  (x_i cos - x_{i+D/2} sin,  x_i sin + x_{i+D/2} cos)

Every other docstring in the package points here rather than repeating this. Models that
rotate part of the head, pair neighbours (GPT-J) or scale their frequencies are described by a
:class:`~ropepool.rope.Rope`; :func:`rotate` computes any of them.
"""

from __future__ import annotations

import numpy as np

from ._arrays import dtype_name, to_numpy
from .fp8 import MAX as E4M3_MAX
from .fp8 import NAN_CODE, decode_table
from .rope import Rope, plain, rope_table


def inverse_frequencies(head_dim: int, rope_base: float) -> np.ndarray:
    """``rope_base**(-2i/D)`` for ``i < D/2``, shape ``[D/2]``, float64: fast to slow."""
    return np.asarray(plain(head_dim, rope_base).inv_freq)


def rotate(x, positions, rope: Rope) -> np.ndarray:
    """Rotate ``x [T, H, D]`` at ``positions [T]`` (mrope: ``[3, T]`` too) as ``rope`` says, in float64.

    Pair ``(a, b)`` of :meth:`Rope.pairs` turns by ``theta = position * inv_freq[i]`` and is
    multiplied by ``rope.scale``; dimensions past ``rope.rotary_dim`` are copied.
    """
    x = to_numpy(x, np.float64)
    out = x.copy()
    pos = to_numpy(positions, np.float64)
    if pos.ndim == 2:  # mrope's [3, T]: pair i reads the row of its section
        theta = pos[rope.pair_axes()].T * np.asarray(rope.inv_freq)[None, :]  # [T, rd/2]
    else:
        theta = pos[:, None] * np.asarray(rope.inv_freq)[None, :]  # [T, rd/2]
    cos = np.cos(theta)[:, None, :] * rope.scale  # [T, 1, rd/2]
    sin = np.sin(theta)[:, None, :] * rope.scale
    a, b = rope.pairs().T  # [rd/2] each
    x1, x2 = x[..., a], x[..., b]  # [T, H, rd/2] each
    out[..., a] = x1 * cos - x2 * sin
    out[..., b] = x1 * sin + x2 * cos
    return out  # [T, H, D]


def rotate_neox(x, positions, rope_base: float) -> np.ndarray:
    """Rotate ``x [T, H, D]`` by plain NeoX RoPE (whole head, unscaled) at ``positions [T]``, in float64."""
    return rotate(x, positions, plain(np.shape(x)[-1], rope_base))


def write_rows(pool, rows, slots) -> np.ndarray:
    """A copy of ``pool [P, Hkv, D]`` with ``rows[t]`` written at ``slots[t]``.

    A slot outside ``[0, P)`` (-1 by convention) writes nothing.
    """
    out = np.array(pool, copy=True)
    slots = to_numpy(slots, np.int64)
    keep = (slots >= 0) & (slots < out.shape[0])  # [T]
    out[slots[keep]] = rows[keep]
    return out


def rms_norm(x, weight, eps: float) -> np.ndarray:
    """Qwen3's per-head RMSNorm of ``x [T, H, D]`` over D, times ``weight [D]``, in float64:
    ``x / sqrt(mean(x**2) + eps) * weight``."""
    x = to_numpy(x, np.float64)
    w = to_numpy(weight, np.float64)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w  # [T, H, D]


def encode_e4m3(x) -> np.ndarray:
    """The e4m3 code (uint8, same shape) of each float32 value of ``x``, by search, not bit tricks.

    The nearest of the 127 non-negative finite codes to ``|x|`` (float64 midpoints, exact for float32
    input), a tie going to the even code; ``|x| > 448`` saturates to 448; NaN of either sign gives
    ``0x7F``; otherwise the sign bit is ``x``'s (see :mod:`ropepool.fp8`).
    """
    x = np.asarray(x, np.float32)
    with np.errstate(invalid="ignore"):  # NaN compares false: its code is set below
        return _encode_e4m3(x)


def _encode_e4m3(x: np.ndarray) -> np.ndarray:
    values = decode_table()[:0x7F].astype(np.float64)  # codes 0..0x7E, increasing
    mag = np.minimum(np.abs(x.astype(np.float64)), E4M3_MAX)
    hi = np.clip(np.searchsorted(values, mag), 1, 0x7E)  # values[hi - 1] < mag <= values[hi] (or the ends)
    lo = hi - 1
    d_lo, d_hi = mag - values[lo], values[hi] - mag
    code = np.where(d_lo < d_hi, lo, np.where(d_hi < d_lo, hi, np.where(lo % 2 == 0, lo, hi)))
    sign = np.signbit(x).astype(np.int64) << 7
    return np.where(np.isnan(x), NAN_CODE, code | sign).astype(np.uint8)


def quantize_rows(rows, scale: float) -> np.ndarray:
    """An FP8 pool's bits for ``rows`` (any float dtype): e4m3 of the float32 quotient
    ``float32(rows) / float32(scale)``, as vLLM's ``reshape_and_cache_flash`` writes them."""
    return encode_e4m3(to_numpy(rows, np.float32) / np.float32(scale))


#: The op's keywords for QK-norm and the FP8 cache (:mod:`ropepool.fusion`), which the reference takes too.
FUSION_KEYWORDS = ("q_norm_weight", "k_norm_weight", "norm_eps", "k_scale", "v_scale")


def _rounded(x: np.ndarray, dtype: str) -> np.ndarray:
    """float64 ``x`` rounded to ``dtype`` (float16, bfloat16 or float32), as float32."""
    if dtype == "bfloat16":
        import mlx.core as mx

        return np.array(mx.array(x.astype(np.float32)).astype(mx.bfloat16).astype(mx.float32))
    return x.astype(dtype).astype(np.float32)


def rope_pool_reference(
    q,
    k,
    v,
    positions,
    slots,
    k_pool,
    v_pool,
    *,
    rope_base: float,
    q_norm_weight=None,
    k_norm_weight=None,
    norm_eps: float = 1e-6,
    k_scale: float = 1.0,
    v_scale: float = 1.0,
    **variant,
):
    """Float64 reference of ``rope_pool_fused`` (no validation: give it valid input).

    Parameters
    ----------
    q : array ``[T, Hq, D]``
    k, v : array ``[T, Hkv, D]``
    positions, slots : integer array ``[T]``
    k_pool, v_pool : array ``[P, Hkv, D]``
    rope_base : float
    q_norm_weight, k_norm_weight : array ``[D]`` or None; given, q (k) is first normalised per
        head by :func:`rms_norm` with ``norm_eps``, then rotated
    variant : the op's ``rotary_dim``, ``is_neox``, ``rope_scaling``, ``max_position_embeddings``
        (see :func:`ropepool.rope.rope_table`)

    Returns
    -------
    (q_rot, k_rot, k_pool_new, v_pool_new) : float64 NumPy arrays of the input shapes. uint8 pools
    (FP8) come back as uint8 codes: :func:`quantize_rows` of k_rot rounded to q's dtype (over
    ``k_scale``) and of v (over ``v_scale``). The op's own k_rot may round the other way where it
    lies within its bound of a rounding boundary, so tests compare the op's FP8 pool with
    :func:`quantize_rows` of the op's k_rot.

    Example
    -------
    >>> import numpy as np
    >>> q = np.ones((1, 2, 4)); k = v = np.ones((1, 1, 4)); pool = np.zeros((3, 1, 4))
    >>> _, k_rot, kp, vp = rope_pool_reference(q, k, v, np.array([0]), np.array([2]),
    ...                                        pool, pool, rope_base=10000.0)
    >>> bool((kp[2] == k_rot[0]).all()), bool((kp[:2] == 0).all())
    (True, True)
    """
    rope = rope_table(np.shape(q)[-1], rope_base, **variant)
    if q_norm_weight is not None:
        q = rms_norm(q, q_norm_weight, norm_eps)  # [T, Hq, D]
    if k_norm_weight is not None:
        k = rms_norm(k, k_norm_weight, norm_eps)  # [T, Hkv, D]
    q_rot = rotate(q, positions, rope)  # [T, Hq, D]
    k_rot = rotate(k, positions, rope)  # [T, Hkv, D]
    if dtype_name(k_pool) == "uint8":  # an FP8 cache
        k_codes = quantize_rows(_rounded(k_rot, dtype_name(q)), k_scale)
        return (
            q_rot,
            k_rot,
            write_rows(to_numpy(k_pool), k_codes, slots),
            write_rows(to_numpy(v_pool), quantize_rows(v, v_scale), slots),
        )
    k_pool_new = write_rows(to_numpy(k_pool, np.float64), k_rot, slots)  # [P, Hkv, D]
    v_pool_new = write_rows(to_numpy(v_pool, np.float64), to_numpy(v, np.float64), slots)
    return q_rot, k_rot, k_pool_new, v_pool_new


def rope_pool_mla_reference(q_pe, k_pe, c_kv, positions, slots, latent_pool, *, rope_base, kv_scale=1.0, **variant):
    """Float64 reference of :func:`rope_pool_fused_mla` (no validation): ``(q_pe_rot, k_pe_rot, pool)``.

    ``variant``: ``is_neox``, ``rope_scaling``, ``max_position_embeddings``. A float pool comes back
    float64; a uint8 pool as the e4m3 codes of ``[c_kv ‖ k_pe_rot rounded to q_pe's dtype] / kv_scale``.
    """
    rope = rope_table(np.shape(q_pe)[-1], rope_base, **variant)
    q_rot, k_rot = rotate(q_pe, positions, rope), rotate(k_pe, positions, rope)  # [T, Hq, rd], [T, 1, rd]
    c = to_numpy(c_kv, np.float64)[:, None, :]  # [T, 1, R]
    if dtype_name(latent_pool) == "uint8":
        k32 = _rounded(k_rot, dtype_name(q_pe))
        rows = np.concatenate([c.astype(np.float32), k32], axis=-1)  # [T, 1, R + rd]
        return q_rot, k_rot, write_rows(to_numpy(latent_pool), quantize_rows(rows, kv_scale), slots)
    rows = np.concatenate([c, k_rot], axis=-1)  # [T, 1, R + rd]
    return q_rot, k_rot, write_rows(to_numpy(latent_pool, np.float64), rows, slots)
