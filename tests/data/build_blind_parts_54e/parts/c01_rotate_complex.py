"""Part: 1 rotate.  Kind: correct (unusual).

An unusual but correct rotate: each pair is one complex number a + ib (NeoX: dims i and i + D/2;
GPT-J: dims 2i and 2i + 1), multiplied by exp(i * positions[t] * inv_freq[i]) with np.outer; the
real and imaginary parts are written back into a new float64 array. No cos/sin tables, no slicing
formula, positions may come as a Python list.

A good feedback message must say: it passes (the rotation is right for both pair layouts).
It must not say: any mistake (pairs swapped, position off by one, float16, wrong dtype).
"""

import numpy as np


def rotate(x, positions, inv_freq, is_neox):
    """One head x [T, D] turned by RoPE at positions [T]: pair i turns by positions[t] * inv_freq[i].

    is_neox: pairs (i, i + D/2); otherwise GPT-J pairs (2i, 2i + 1). Return a new [T, D] array.
    """
    x = np.array(x, dtype=np.float64)  # a copy
    D = x.shape[1]
    re = slice(0, D // 2) if is_neox else slice(0, D, 2)
    im = slice(D // 2, D) if is_neox else slice(1, D, 2)
    turned = (x[:, re] + 1j * x[:, im]) * np.exp(1j * np.outer(np.asarray(positions, dtype=np.float64), inv_freq))
    x[:, re], x[:, im] = turned.real, turned.imag
    return x
