"""Part: 1 rotate
Kind: correct

What is unusual:
    none: each pair as a complex number times e^(i theta); returns float64 (NeoX by concatenating
    the real and imaginary halves, GPT-J by interleaving them).

A good feedback message must say:
    - passes (no mistake named)

It must not say:
    - any mistake / pairs / positions / precision
"""

import numpy as np


def rotate(x, positions, inv_freq, is_neox):
    # each pair (a, b) is the complex number a + ib; turning it by theta is a product with e^(i theta)
    x = np.asarray(x, dtype=np.float64)
    T, D = x.shape
    if is_neox:
        z = x[:, : D // 2] + 1j * x[:, D // 2:]
    else:
        z = x[:, 0::2] + 1j * x[:, 1::2]
    theta = np.multiply.outer(np.asarray(positions, dtype=np.float64), np.asarray(inv_freq, dtype=np.float64))
    w = z * np.exp(1j * theta)
    if is_neox:
        return np.concatenate([w.real, w.imag], axis=1)
    out = np.empty((T, D))
    out[:, 0::2], out[:, 1::2] = w.real, w.imag
    return out
