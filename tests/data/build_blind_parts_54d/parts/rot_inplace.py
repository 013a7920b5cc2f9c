"""Part: 1 rotate
Kind: wrong

The mistake:
    Writes the rotated values into the input array x itself (out = x) and returns it: the values are
    right (tuple assignment computes both halves first; float32 in gives float32 out, within the
    allowed rounding), but the caller's x is overwritten and the returned array is x, not a new one.

A good feedback message must say:
    - the input x was changed (modified in place) / rotate must not write into x
    - return a new [T, D] array (np.empty / a copy)
    - the returned values themselves are right

It must not say:
    - wrong pairs
    - position off by one
    - wrong angle / wrong values
    - float16
"""

import numpy as np


def rotate(x, positions, inv_freq, is_neox):
    x = np.asarray(x)
    T, D = x.shape
    half = D // 2
    theta = np.asarray(positions, dtype=np.float64)[:, None] * np.asarray(inv_freq, dtype=np.float64)[None, :]
    cos, sin = np.cos(theta), np.sin(theta)  # [T, D/2]
    out = x
    if is_neox:
        a, b = x[:, :half], x[:, half:]
        out[:, :half], out[:, half:] = a * cos - b * sin, a * sin + b * cos
    else:
        a, b = x[:, 0::2], x[:, 1::2]
        out[:, 0::2], out[:, 1::2] = a * cos - b * sin, a * sin + b * cos
    return out
