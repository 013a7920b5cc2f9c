# part: 1
# verdict: correct
# mistake: none: pure Python loops with math.cos/sin, pairs visited in reverse order, a float64 array at the end
# expect: "passes"

import math

import numpy as np


def rotate(x, positions, inv_freq, is_neox):
    """One head x [T, D] turned by RoPE at positions [T]: pair i turns by positions[t] * inv_freq[i].

    is_neox: pairs (i, i + D/2); otherwise GPT-J pairs (2i, 2i + 1). Return a new [T, D] array.
    """
    T, D = np.shape(x)
    rows = np.asarray(x, dtype=np.float64).tolist()
    freqs = [float(f) for f in np.asarray(inv_freq).tolist()]
    poss = [float(p) for p in np.asarray(positions).tolist()]
    out = [[0.0] * D for _ in range(T)]
    for t in range(T):
        for i in reversed(range(D // 2)):  # any order: the pairs are independent
            j, k = (i, i + D // 2) if is_neox else (2 * i, 2 * i + 1)
            theta = poss[t] * freqs[i]
            c, s = math.cos(theta), math.sin(theta)
            a, b = rows[t][j], rows[t][k]
            out[t][j] = a * c - b * s
            out[t][k] = a * s + b * c
    return np.array(out, dtype=np.float64).reshape(T, D)
