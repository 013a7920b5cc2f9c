# part: 1
# verdict: wrong
# mistake: I used the row number t as the position (np.arange(T)) instead of positions[t]
# expect: "positions", "row", "index"

import numpy as np


def rotate(x, positions, inv_freq, is_neox):
    """One head x [T, D] turned by RoPE at positions [T]: pair i turns by positions[t] * inv_freq[i].

    is_neox: pairs (i, i + D/2); otherwise GPT-J pairs (2i, 2i + 1). Return a new [T, D] array.
    """
    x = np.asarray(x, dtype=np.float64)
    T, D = x.shape
    half = D // 2
    theta = np.arange(T, dtype=np.float64)[:, None] * np.asarray(inv_freq, dtype=np.float64)[None, :]
    cos, sin = np.cos(theta), np.sin(theta)
    if is_neox:
        first, second = np.arange(half), np.arange(half) + half
    else:
        first, second = 2 * np.arange(half), 2 * np.arange(half) + 1
    a, b = x[:, first], x[:, second]
    out = np.empty_like(x)
    out[:, first] = a * cos - b * sin
    out[:, second] = a * sin + b * cos
    return out
