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

from ._arrays import to_numpy
from .rope import Rope, plain, rope_table


def inverse_frequencies(head_dim: int, rope_base: float) -> np.ndarray:
    """``rope_base**(-2i/D)`` for ``i < D/2``, shape ``[D/2]``, float64: fast to slow."""
    return np.asarray(plain(head_dim, rope_base).inv_freq)


def rotate(x, positions, rope: Rope) -> np.ndarray:
    """Rotate ``x [T, H, D]`` at ``positions [T]`` as ``rope`` says, in float64.

    Pair ``(a, b)`` of :meth:`Rope.pairs` turns by ``theta = position * inv_freq[i]`` and is
    multiplied by ``rope.scale``; dimensions past ``rope.rotary_dim`` are copied.
    """
    x = to_numpy(x, np.float64)
    out = x.copy()
    pos = to_numpy(positions, np.float64)
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


#: The op's keywords that choose the rotation, beyond rope_base (see :func:`ropepool.rope.rope_table`).
ROPE_KEYWORDS = ("rotary_dim", "is_neox", "rope_scaling", "max_position_embeddings")


def rope_of(kw: dict) -> Rope:
    """The :class:`Rope` of an op call's keyword arguments ``kw`` (head_dim, rope_base and the variant keywords)."""
    return rope_table(kw["head_dim"], kw["rope_base"], **{n: kw[n] for n in ROPE_KEYWORDS if n in kw})


def rope_pool_reference(q, k, v, positions, slots, k_pool, v_pool, *, rope_base: float, **variant):
    """Float64 reference of ``rope_pool_fused`` (no validation: give it valid input).

    Parameters
    ----------
    q : array ``[T, Hq, D]``
    k, v : array ``[T, Hkv, D]``
    positions, slots : integer array ``[T]``
    k_pool, v_pool : array ``[P, Hkv, D]``
    rope_base : float
    variant : the op's ``rotary_dim``, ``is_neox``, ``rope_scaling``, ``max_position_embeddings``
        (see :func:`ropepool.rope.rope_table`)

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
    rope = rope_table(np.shape(q)[-1], rope_base, **variant)
    q_rot = rotate(q, positions, rope)  # [T, Hq, D]
    k_rot = rotate(k, positions, rope)  # [T, Hkv, D]
    k_pool_new = write_rows(to_numpy(k_pool, np.float64), k_rot, slots)  # [P, Hkv, D]
    v_pool_new = write_rows(to_numpy(v_pool, np.float64), to_numpy(v, np.float64), slots)
    return q_rot, k_rot, k_pool_new, v_pool_new
