"""
part: 1 (rotate)
kind: wrong
mistake: The learner updates the pair in place, one component after the other: the first component is
    overwritten with a cos - b sin, and the second is then computed from the already-rotated first
    component (a' sin + b cos) instead of the original a.
good feedback must say: the second element of each pair is wrong (the first, a cos - b sin, is right);
    it uses the already rotated first element instead of the original one (compute both from the input
    before writing, or use a tuple assignment); position 0 (theta = 0) still comes out right.
must NOT say: that the pairs are swapped (NeoX/GPT-J); that the frequencies/inv_freq are wrong; that
    positions are off by one; that the rotation goes the wrong direction (sign of sin).
"""
import numpy as np


def rotate(x, positions, inv_freq, is_neox):
    """One head x [T, D] turned by RoPE at positions [T]: pair i turns by positions[t] * inv_freq[i].

    is_neox: pairs (i, i + D/2); otherwise GPT-J pairs (2i, 2i + 1). Return a new [T, D] array.
    """
    out = np.array(x, dtype=np.float64)  # a copy: x itself is left alone
    D = out.shape[1]
    theta = np.outer(np.asarray(positions, dtype=np.float64), np.asarray(inv_freq, dtype=np.float64))
    cos, sin = np.cos(theta), np.sin(theta)
    if is_neox:
        first, second = np.arange(D // 2), np.arange(D // 2) + D // 2
    else:
        first, second = np.arange(0, D, 2), np.arange(1, D, 2)
    out[:, first] = out[:, first] * cos - out[:, second] * sin
    out[:, second] = out[:, first] * sin + out[:, second] * cos
    return out
