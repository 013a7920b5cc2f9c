"""
part: notebook 12, part 1 `rotate`
kind: wrong
mistake: the NeoX branch writes the rotated first half back into the result through a view of x
  (out = x, no copy), so the second half is computed from the already-rotated first half (a'),
  not from the original a; and x itself is overwritten. GPT-J pairs are handled correctly.
good feedback must say: with NeoX pairs (is_neox=True) the second half of each pair,
  a*sin + b*cos, is wrong at any nonzero position (the first half a*cos - b*sin is right,
  position 0 is right), because the first half is overwritten before the second half is computed
  (an in-place update through a view / no copy). GPT-J pairs are right. (Secondary, may be said:
  for a float64 x the caller's array is overwritten instead of a new one returned.)
wrong feedback: "pairs swapped / uses GPT-J pairs", "position off by one", "float16",
  "rotates the wrong way / sign of sin", or saying GPT-J is wrong.
"""

import numpy as np


def rotate(x, positions, inv_freq, is_neox):
    """One head x [T, D] turned by RoPE at positions [T]: pair i turns by positions[t] * inv_freq[i].

    is_neox: pairs (i, i + D/2); otherwise GPT-J pairs (2i, 2i + 1). Return a new [T, D] array.
    """
    x = np.asarray(x, dtype=np.float64) if np.asarray(x).dtype != np.float64 else x
    theta = np.outer(np.asarray(positions, dtype=np.float64), np.asarray(inv_freq, dtype=np.float64))
    cos, sin = np.cos(theta), np.sin(theta)
    if is_neox:
        half = x.shape[1] // 2
        out = x  # "the result": same array
        a, b = out[:, :half], out[:, half:]
        out[:, :half] = a * cos - b * sin
        out[:, half:] = a * sin + b * cos  # a is already the rotated half here
        return out
    out = np.empty(x.shape, dtype=np.float64)
    a, b = x[:, 0::2], x[:, 1::2]
    out[:, 0::2] = a * cos - b * sin
    out[:, 1::2] = a * sin + b * cos
    return out
