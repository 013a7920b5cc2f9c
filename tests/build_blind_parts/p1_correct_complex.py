# part: 1
# verdict: correct
# mistake: none: each pair as a complex number a + ib multiplied by exp(i theta), in complex128
# expect: "passes"

import numpy as np


def rotate(x, positions, inv_freq, is_neox):
    """One head x [T, D] turned by RoPE at positions [T]: pair i turns by positions[t] * inv_freq[i].

    is_neox: pairs (i, i + D/2); otherwise GPT-J pairs (2i, 2i + 1). Return a new [T, D] array.
    """
    x = np.asarray(x)
    T, D = x.shape
    h = D // 2
    if is_neox:
        re, im = x[:, :h], x[:, h:]
    else:
        re, im = x[:, 0::2], x[:, 1::2]
    # each pair (a, b) is the complex number a + ib; turning it by theta is multiplying by e^(i theta)
    z = re.astype(np.float64) + 1j * im.astype(np.float64)
    z = z * np.exp(1j * np.outer(np.asarray(positions, dtype=np.float64), np.asarray(inv_freq, dtype=np.float64)))
    out = np.empty((T, D), dtype=np.float64)
    if is_neox:
        out[:, :h], out[:, h:] = z.real, z.imag
    else:
        out[:, 0::2], out[:, 1::2] = z.real, z.imag
    return out
