"""
part: 1 rotate
kind: correct
mistake: none: each pair (a, b) is taken as the complex number a + ib and multiplied by
    exp(i * theta) (a turn by theta); the real and imaginary parts go back to the pair's columns.
    Returns float64; accepts positions and inv_freq as lists or arrays of any numeric dtype.
good feedback must say: passes (part 1 right).
must not say: any mistake; float16.
"""
import numpy as np


def rotate(x, positions, inv_freq, is_neox):
    """One head x [T, D] turned by RoPE at positions [T]: pair i turns by positions[t] * inv_freq[i].

    is_neox: pairs (i, i + D/2); otherwise GPT-J pairs (2i, 2i + 1). Return a new [T, D] array.
    """
    x = np.array(x, dtype=np.float64)  # a copy: x is never touched
    D = x.shape[1]
    first = np.arange(D // 2) if is_neox else np.arange(0, D, 2)
    second = first + D // 2 if is_neox else first + 1
    z = x[:, first] + 1j * x[:, second]
    turn = np.exp(1j * np.outer(np.asarray(positions, dtype=np.float64), np.asarray(inv_freq, dtype=np.float64)))
    z = z * turn
    x[:, first], x[:, second] = z.real, z.imag
    return x
