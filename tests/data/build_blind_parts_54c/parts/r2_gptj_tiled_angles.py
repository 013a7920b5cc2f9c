"""Part 1 rotate -- kind: wrong.

Mistake: the learner builds full-width cos/sin tables once, HF-style, as
`np.concatenate([theta, theta], axis=1)` (dimension j turns by inv_freq[j % (D/2)]), and uses the
same tables for both pairings. That layout is right for NeoX pairs (i, i + D/2), but for GPT-J
pairs (2i, 2i + 1) the two members of a pair need the SAME angle inv_freq[i]
(`np.repeat(theta, 2, axis=1)`); here dim 2i gets inv_freq[2i mod D/2] and dim 2i+1 gets
inv_freq[(2i+1) mod D/2]. NeoX results are exactly right; GPT-J results are wrong wherever
position != 0 and D > 2 (with one pair, D = 2, tile and repeat agree; pair 0's first member
is always right). Differs from a correct part
ONLY in the GPT-J branch's angle layout (tile/concatenate instead of repeat).

A good feedback message must say: GPT-J pairs are wrong while NeoX is right / the angle (frequency)
used for a GPT-J pair is wrong / both members of pair i must turn by positions * inv_freq[i];
use repeat (interleave) for the GPT-J angle table, not tile (concatenate).
It must not say: the pairs are swapped (NeoX used for GPT-J) / use the other pairing, positions off
by one, the input was modified, float16 or precision.
"""
import numpy as np


def rotate(x, positions, inv_freq, is_neox):
    """One head x [T, D] turned by RoPE at positions [T]: pair i turns by positions[t] * inv_freq[i].

    is_neox: pairs (i, i + D/2); otherwise GPT-J pairs (2i, 2i + 1). Return a new [T, D] array.
    """
    x = np.asarray(x, dtype=np.float64)
    theta = np.outer(np.asarray(positions, dtype=np.float64), np.asarray(inv_freq, dtype=np.float64))
    full = np.concatenate([theta, theta], axis=1)  # [T, D]: the angle of each dimension
    cos, sin = np.cos(full), np.sin(full)
    if is_neox:
        half = x.shape[1] // 2
        partner = np.concatenate([-x[:, half:], x[:, :half]], axis=1)  # rotate_half
    else:
        partner = np.empty_like(x)  # rotate_every_two
        partner[:, 0::2] = -x[:, 1::2]
        partner[:, 1::2] = x[:, 0::2]
    return x * cos + partner * sin
