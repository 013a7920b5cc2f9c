"""Part 1 rotate -- kind: wrong.

Mistake: the rotation's values are right, but the result is written into the caller's x itself
(`out = x` is an alias, not a copy) and x is returned: the stub asks for "a new [T, D] array".
The caller's q/k head is overwritten with its rotated self (rotating twice in a row gives a
double rotation; the input passed in is no longer the input). Differs from a correct part ONLY
in that x is modified in place and the returned array is x itself (np.shares_memory(out, x)).
(Requires x to be a float array; with float32 x the in-place write keeps float32.)

A good feedback message must say: the input x was changed / modified in place; return a new
array (np.array(x, copy) / np.empty_like); the values themselves are right.
It must not say: the pairs are wrong, the angle / positions / inv_freq are wrong, float16 or
precision, the sign of sin is wrong.
"""
import numpy as np


def rotate(x, positions, inv_freq, is_neox):
    """One head x [T, D] turned by RoPE at positions [T]: pair i turns by positions[t] * inv_freq[i].

    is_neox: pairs (i, i + D/2); otherwise GPT-J pairs (2i, 2i + 1). Return a new [T, D] array.
    """
    out = x  # the rotated head, written over the old one
    half = x.shape[1] // 2
    theta = np.outer(np.asarray(positions, dtype=np.float64), np.asarray(inv_freq, dtype=np.float64))
    cos, sin = np.cos(theta), np.sin(theta)
    if is_neox:
        a, b = x[:, :half].copy(), x[:, half:].copy()
        out[:, :half] = a * cos - b * sin
        out[:, half:] = a * sin + b * cos
    else:
        a, b = x[:, 0::2].copy(), x[:, 1::2].copy()
        out[:, 0::2] = a * cos - b * sin
        out[:, 1::2] = a * sin + b * cos
    return out
