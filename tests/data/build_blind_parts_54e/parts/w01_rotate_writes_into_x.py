"""Part: 1 rotate.  Kind: wrong.

The mistake: the rotation is written into the caller's array. `out = x` where it should be a new
array (np.empty_like / x.astype(float, copy=True)): the returned values are right, but the x the
caller passed in is overwritten with the rotated values (the stub says "Return a new [T, D] array").
A caller that rotates the same head twice, or keeps x (an engine's q and k buffers, a checker that
computes its own expected value from x after calling the part), sees rotated data where the raw
data was; a read-only x makes it raise NumPy's "assignment destination is read-only". The pairs,
the angles, the signs and the positions are all right.

A good feedback message must say: the input x was changed / modified in place; return a new array
(copy) instead of writing into x.
It must not say: the pairs are swapped (NeoX/GPT-J), a position off by one, a wrong sign or
direction, float16 precision, or show an "expected" computed from the already-rotated x as if the
values were wrong.
"""

import numpy as np


def rotate(x, positions, inv_freq, is_neox):
    """One head x [T, D] turned by RoPE at positions [T]: pair i turns by positions[t] * inv_freq[i].

    is_neox: pairs (i, i + D/2); otherwise GPT-J pairs (2i, 2i + 1). Return a new [T, D] array.
    """
    T, D = x.shape
    half = D // 2
    theta = np.asarray(positions, dtype=np.float64)[:, None] * np.asarray(inv_freq, dtype=np.float64)[None, :]
    cos, sin = np.cos(theta), np.sin(theta)
    if is_neox:
        first, second = np.arange(half), np.arange(half) + half
    else:
        first, second = np.arange(0, D, 2), np.arange(1, D, 2)
    a, b = x[:, first].copy(), x[:, second].copy()
    out = x  # the rotated head
    out[:, first] = a * cos - b * sin
    out[:, second] = a * sin + b * cos
    return out
