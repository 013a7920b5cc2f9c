"""
part: 1 rotate
kind: wrong
mistake: the angle uses the row number t (np.arange(T)) instead of positions[t]: the learner
    assumed a head's rows sit at positions 0 .. T-1. Right whenever positions == arange(T)
    (a prefill from 0), wrong for a decode, a chunk starting later, or any other positions.
good feedback must say: the angle must use positions[t], not the row index t / 0..T-1; the
    case that fails has positions that do not start at 0 (or are not consecutive).
must not say: pairs swapped / NeoX against GPT-J; off by one (positions + 1); float16; the
    rotation direction or sign.
"""
import numpy as np


def rotate(x, positions, inv_freq, is_neox):
    """One head x [T, D] turned by RoPE at positions [T]: pair i turns by positions[t] * inv_freq[i].

    is_neox: pairs (i, i + D/2); otherwise GPT-J pairs (2i, 2i + 1). Return a new [T, D] array.
    """
    x = np.asarray(x, dtype=np.float64)
    T, D = x.shape
    h = D // 2
    t = np.arange(T, dtype=np.float64)
    theta = t[:, None] * np.asarray(inv_freq, dtype=np.float64)[None, :]
    cos, sin = np.cos(theta), np.sin(theta)
    out = np.empty_like(x)
    if is_neox:
        a, b = x[:, :h], x[:, h:]
        out[:, :h] = a * cos - b * sin
        out[:, h:] = a * sin + b * cos
    else:
        a, b = x[:, 0::2], x[:, 1::2]
        out[:, 0::2] = a * cos - b * sin
        out[:, 1::2] = a * sin + b * cos
    return out
