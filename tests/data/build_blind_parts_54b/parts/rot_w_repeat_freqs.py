"""
part: 1 (rotate)
kind: wrong
mistake: The learner builds a full-width frequency row the GPT-J way, np.repeat(inv_freq, 2), and then
    takes its first D/2 entries as the per-pair frequencies, so pair i turns by inv_freq[i // 2]
    instead of inv_freq[i] (an exponent of about i/D instead of 2i/D): pair 0 is right, every higher
    pair turns too fast (pairs 2k and 2k+1 share inv_freq[k]) and the upper half of the table is never used.
good feedback must say: the angle/frequency of pair i is wrong (pair i must use inv_freq[i], here it
    uses inv_freq[i // 2], i.e. higher pairs turn faster than they should); position 0 and a single pair
    (D = 2) are still right, so the difference shows only with D >= 4 and position != 0; it happens for
    both NeoX and GPT-J pairs, so the pairing itself is right.
must NOT say: that the NeoX/GPT-J pairs are swapped; that positions are off by one; that cos and sin
    are swapped; a float16/precision problem.
"""
import numpy as np


def rotate(x, positions, inv_freq, is_neox):
    """One head x [T, D] turned by RoPE at positions [T]: pair i turns by positions[t] * inv_freq[i].

    is_neox: pairs (i, i + D/2); otherwise GPT-J pairs (2i, 2i + 1). Return a new [T, D] array.
    """
    x = np.asarray(x, dtype=np.float64)
    T, D = x.shape
    half = D // 2
    # one frequency per dimension, as the model's cos/sin caches hold them
    freqs = np.repeat(np.asarray(inv_freq, dtype=np.float64), 2)      # [D]
    theta = np.asarray(positions, dtype=np.float64)[:, None] * freqs[None, :half]  # [T, D/2]
    cos, sin = np.cos(theta), np.sin(theta)
    if is_neox:
        a, b = x[:, :half], x[:, half:]
    else:
        a, b = x[:, 0::2], x[:, 1::2]
    ra = a * cos - b * sin
    rb = a * sin + b * cos
    out = np.empty_like(x)
    if is_neox:
        out[:, :half], out[:, half:] = ra, rb
    else:
        out[:, 0::2], out[:, 1::2] = ra, rb
    return out
