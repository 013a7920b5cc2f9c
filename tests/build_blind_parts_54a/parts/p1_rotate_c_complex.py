"""
part: notebook 12, part 1 `rotate`
kind: correct
unusual: treats each pair as a complex number a + ib and multiplies by exp(i*theta) (one complex
  multiply per pair instead of the cos/sin formulas), then unpacks real/imag back into the pair's
  two dimensions; the pairing is selected by two index arrays.
good feedback must say: passes / correct for NeoX and GPT-J pairs (float64 result).
wrong feedback: any named mistake (pairs swapped, sign, off by one, float16, precision).
"""

import numpy as np


def rotate(x, positions, inv_freq, is_neox):
    """One head x [T, D] turned by RoPE at positions [T]: pair i turns by positions[t] * inv_freq[i].

    is_neox: pairs (i, i + D/2); otherwise GPT-J pairs (2i, 2i + 1). Return a new [T, D] array.
    """
    x = np.asarray(x, dtype=np.float64)
    half = x.shape[-1] // 2
    first = np.arange(half) if is_neox else 2 * np.arange(half)
    second = first + half if is_neox else first + 1
    z = x[:, first] + 1j * x[:, second]
    z = z * np.exp(
        1j * np.multiply.outer(np.asarray(positions, dtype=np.float64), np.asarray(inv_freq, dtype=np.float64))
    )
    out = np.empty_like(x)
    out[:, first], out[:, second] = z.real, z.imag
    return out
