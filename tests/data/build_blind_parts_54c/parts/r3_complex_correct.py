"""Part 1 rotate -- kind: correct (unusual).

None: each pair (a, b) is taken as the complex number a + ib and multiplied by exp(i theta),
theta = positions[t] * inv_freq[i] in float64 (which is the 2-D rotation
(a cos - b sin, a sin + b cos)); the real and imaginary parts go back into the pair's two
dimensions of a new array. Works for NeoX (i, i + D/2) and GPT-J (2i, 2i + 1) pairs; returns
float64, x untouched.

A good feedback message must say: passed / correct.
It must not say: any mistake (pairs swapped, wrong sign, wrong dtype, precision, complex numbers
not allowed).
"""
import numpy as np


def rotate(x, positions, inv_freq, is_neox):
    """One head x [T, D] turned by RoPE at positions [T]: pair i turns by positions[t] * inv_freq[i].

    is_neox: pairs (i, i + D/2); otherwise GPT-J pairs (2i, 2i + 1). Return a new [T, D] array.
    """
    x = np.asarray(x, dtype=np.float64)
    D = x.shape[1]
    first = np.arange(D // 2) if is_neox else np.arange(0, D, 2)
    second = first + D // 2 if is_neox else first + 1
    z = x[:, first] + 1j * x[:, second]
    z = z * np.exp(1j * np.multiply.outer(np.asarray(positions, dtype=np.float64), np.asarray(inv_freq, dtype=np.float64)))
    out = np.zeros(x.shape, dtype=np.float64)
    out[:, first], out[:, second] = z.real, z.imag
    return out
