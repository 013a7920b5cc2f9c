"""The float64 NumPy reference: the oracle every test and notebook compares against.

NeoX RoPE (the "rotate half" convention of GPT-NeoX, Llama, Mistral, Qwen, Gemma):
dimension ``i`` is paired with ``i + D/2`` (not with ``i + 1`` as in GPT-J's interleaved
convention). For ``i < D/2`` the pair turns by ``theta_i = position * rope_base**(-2i/D)``::

    (x_i, x_{i+D/2})  ->  (x_i cos - x_{i+D/2} sin,  x_i sin + x_{i+D/2} cos)

Every other docstring in the package points here rather than repeating this.
"""

from __future__ import annotations

import numpy as np

from ._arrays import to_numpy


def inverse_frequencies(head_dim: int, rope_base: float) -> np.ndarray:
    """``rope_base**(-2i/D)`` for ``i < D/2``, shape ``[D/2]``, float64: fast to slow."""
    i = np.arange(head_dim // 2, dtype=np.float64)
    return float(rope_base) ** (-2.0 * i / head_dim)


def rope_angles(positions, head_dim: int, rope_base: float) -> np.ndarray:
    """theta ``[T, D/2]``: the angle each pair of each token turns by, float64."""
    pos = to_numpy(positions, np.float64)
    return pos[:, None] * inverse_frequencies(head_dim, rope_base)[None, :]  # [T, D/2]


def rotate_neox(x, positions, rope_base: float) -> np.ndarray:
    """Rotate ``x [T, H, D]`` by NeoX RoPE at ``positions [T]``, in float64."""
    x = to_numpy(x, np.float64)
    half = x.shape[-1] // 2
    theta = rope_angles(positions, x.shape[-1], rope_base)  # [T, D/2]
    cos, sin = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]  # [T, 1, D/2]
    x1, x2 = x[..., :half], x[..., half:]  # [T, H, D/2] each
    return np.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)  # [T, H, D]


def write_rows(pool, rows, slots) -> np.ndarray:
    """A copy of ``pool [P, Hkv, D]`` with ``rows[t]`` written at ``slots[t]``.

    A slot outside ``[0, P)`` (-1 by convention) writes nothing.
    """
    out = np.array(pool, copy=True)
    slots = to_numpy(slots, np.int64)
    keep = (slots >= 0) & (slots < out.shape[0])  # [T]
    out[slots[keep]] = rows[keep]
    return out


def rope_pool_reference(q, k, v, positions, slots, k_pool, v_pool, *, rope_base: float):
    """Float64 reference of ``rope_pool_fused`` (no validation: give it valid input).

    Parameters
    ----------
    q : array ``[T, Hq, D]``
    k, v : array ``[T, Hkv, D]``
    positions, slots : integer array ``[T]``
    k_pool, v_pool : array ``[P, Hkv, D]``
    rope_base : float

    Returns
    -------
    (q_rot, k_rot, k_pool_new, v_pool_new) : float64 NumPy arrays of the input shapes.

    Example
    -------
    >>> import numpy as np
    >>> q = np.ones((1, 2, 4)); k = v = np.ones((1, 1, 4)); pool = np.zeros((3, 1, 4))
    >>> _, k_rot, kp, vp = rope_pool_reference(q, k, v, np.array([0]), np.array([2]),
    ...                                        pool, pool, rope_base=10000.0)
    >>> bool((kp[2] == k_rot[0]).all()), bool((kp[:2] == 0).all())
    (True, True)
    """
    q_rot = rotate_neox(q, positions, rope_base)  # [T, Hq, D]
    k_rot = rotate_neox(k, positions, rope_base)  # [T, Hkv, D]
    k_pool_new = write_rows(to_numpy(k_pool, np.float64), k_rot, slots)  # [P, Hkv, D]
    v_pool_new = write_rows(to_numpy(v_pool, np.float64), to_numpy(v, np.float64), slots)
    return q_rot, k_rot, k_pool_new, v_pool_new
