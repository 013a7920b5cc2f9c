"""Part: 1 rotate.  Kind: wrong.

The mistake: the "rotate half" formulation, out = x * cos_full + rot(x) * sin_full, with the angle
table widened to [T, D] by np.concatenate([cos, cos]) (tiling) for BOTH pair layouts. That is right
for NeoX pairs (dims i and i + D/2 both turn by inv_freq[i]) but wrong for GPT-J pairs: there dims
2i and 2i + 1 must both turn by inv_freq[i] (np.repeat(cos, 2, axis=1), interleaved). With tiling,
GPT-J dim 2i takes frequency (2i mod D/2) and dim 2i + 1 takes (2i + 1 mod D/2), so most pairs turn
by the wrong angle, and the two halves of one pair even turn by different angles. The pairs
themselves (which dims go together, the signs) are right; NeoX is right; GPT-J with D = 2 or at
position 0 is right.

A good feedback message must say: with GPT-J pairs, pair (2i, 2i + 1) turns by positions * inv_freq[i]
/ both dims of a pair use the same frequency / interleave (repeat) the angle table, do not tile it;
the failing case is a GPT-J one (is_neox=False).
It must not say: the pairs are swapped / use NeoX pairs instead (the pairing is right), a position
off by one, a sign or direction error, float16, or that x was changed in place.
"""

import numpy as np


def rotate(x, positions, inv_freq, is_neox):
    """One head x [T, D] turned by RoPE at positions [T]: pair i turns by positions[t] * inv_freq[i].

    is_neox: pairs (i, i + D/2); otherwise GPT-J pairs (2i, 2i + 1). Return a new [T, D] array.
    """
    x = np.asarray(x, dtype=np.float64)
    half = x.shape[1] // 2
    theta = np.asarray(positions, dtype=np.float64)[:, None] * np.asarray(inv_freq, dtype=np.float64)[None, :]
    cos_full = np.concatenate([np.cos(theta), np.cos(theta)], axis=1)
    sin_full = np.concatenate([np.sin(theta), np.sin(theta)], axis=1)
    if is_neox:
        rot = np.concatenate([-x[:, half:], x[:, :half]], axis=1)
    else:
        rot = np.empty_like(x)
        rot[:, 0::2] = -x[:, 1::2]
        rot[:, 1::2] = x[:, 0::2]
    return x * cos_full + rot * sin_full
