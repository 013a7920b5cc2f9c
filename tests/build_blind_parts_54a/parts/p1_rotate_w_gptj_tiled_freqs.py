"""
part: notebook 12, part 1 `rotate`
kind: wrong
mistake: builds full-width cos/sin tables the NeoX way (inv_freq concatenated with itself,
  [f0..f_{D/2-1}, f0..f_{D/2-1}]) and reuses them for GPT-J pairs, so dimension 2i+1 (and 2i for
  i > 0) gets the wrong frequency: in GPT-J mode pair i should turn by inv_freq[i] but its two
  halves turn by inv_freq[2i mod D/2] and inv_freq[(2i+1) mod D/2].
good feedback must say: NeoX pairs are right; with GPT-J pairs (is_neox=False) the angle of pair i
  is wrong as soon as D > 2, only dimension 0 and the last keep their frequency (frequency table laid out for NeoX / tiled
  instead of repeated: each GPT-J pair (2i, 2i+1) must turn by inv_freq[i], e.g. np.repeat, not
  np.concatenate/tile); a single pair (D = 2) and position 0 are right.
wrong feedback: "pairs swapped" (the pairs (2i, 2i+1) are the right ones), "NeoX wrong",
  "position off by one", "float16", "sign".
"""

import numpy as np


def rotate(x, positions, inv_freq, is_neox):
    """One head x [T, D] turned by RoPE at positions [T]: pair i turns by positions[t] * inv_freq[i].

    is_neox: pairs (i, i + D/2); otherwise GPT-J pairs (2i, 2i + 1). Return a new [T, D] array.
    """
    x = np.asarray(x, dtype=np.float64)
    freqs = np.concatenate([inv_freq, inv_freq]).astype(np.float64)  # [D]
    theta = np.asarray(positions, dtype=np.float64)[:, None] * freqs[None, :]
    cos, sin = np.cos(theta), np.sin(theta)
    if is_neox:
        half = x.shape[1] // 2
        rotated_half = np.concatenate([-x[:, half:], x[:, :half]], axis=1)
    else:
        rotated_half = np.empty_like(x)
        rotated_half[:, 0::2] = -x[:, 1::2]
        rotated_half[:, 1::2] = x[:, 0::2]
    return x * cos + rotated_half * sin
