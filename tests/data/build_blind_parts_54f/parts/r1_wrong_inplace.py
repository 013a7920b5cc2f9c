"""
part: 1 rotate
kind: wrong
mistake: the rotation is written back into the caller's x (out = x, no copy) and x itself is
    returned; every value returned is right, but the input array is overwritten, so the caller's
    q or k (and any later use of it, e.g. the same head rotated for another purpose) is changed.
good feedback must say: x (the input) was changed / modified in place; return a new array
    (np.empty_like / x.copy()) and leave x as it was.
must not say: that the values, the pairs, the positions or the angle are wrong; anything about
    NeoX against GPT-J or float16.
"""
import numpy as np


def rotate(x, positions, inv_freq, is_neox):
    """One head x [T, D] turned by RoPE at positions [T]: pair i turns by positions[t] * inv_freq[i].

    is_neox: pairs (i, i + D/2); otherwise GPT-J pairs (2i, 2i + 1). Return a new [T, D] array.
    """
    T, D = x.shape
    h = D // 2
    theta = np.asarray(positions, dtype=np.float64)[:, None] * np.asarray(inv_freq, dtype=np.float64)[None, :]
    cos, sin = np.cos(theta), np.sin(theta)
    if is_neox:
        i, j = np.arange(h), np.arange(h) + h
    else:
        i, j = np.arange(0, D, 2), np.arange(1, D, 2)
    a, b = x[:, i], x[:, j]  # fancy indexing: copies of the two halves of each pair
    out = x
    out[:, i] = a * cos - b * sin
    out[:, j] = a * sin + b * cos
    return out
