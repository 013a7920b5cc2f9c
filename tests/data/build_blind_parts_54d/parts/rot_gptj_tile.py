"""Part: 1 rotate
Kind: wrong

The mistake:
    GPT-J branch lays cos/sin out with np.tile (the NeoX layout [c0..c_{D/2-1}, c0..]) instead of
    np.repeat ([c0, c0, c1, c1, ..]): the pairs (2i, 2i+1) are the right pairs, but dimension d
    turns by inv_freq[d mod D/2], so the two members of a pair turn by different angles (pair 0 only
    is right). NeoX is right, and everything is right at position 0.

A good feedback message must say:
    - GPT-J pairs (is_neox=False) only; NeoX is right
    - pair (2i, 2i+1) must turn by ONE angle, positions[t] * inv_freq[i] / both members of pair i by
    inv_freq[i]
    - cos/sin repeated per pair (np.repeat / [c0, c0, c1, c1, ...]), not tiled (np.tile / the NeoX
    layout)

It must not say:
    - the pairs are swapped / use NeoX pairs (or GPT-J pairs) instead
    - position off by one
    - float16 precision
    - wrong rotation direction / sign of sin
"""

import numpy as np


def rotate(x, positions, inv_freq, is_neox):
    x = np.asarray(x, dtype=np.float64)
    half = x.shape[1] // 2
    theta = np.outer(np.asarray(positions, dtype=np.float64), np.asarray(inv_freq, dtype=np.float64))  # [T, D/2]
    if is_neox:
        # x * cos + rotate_half(x) * sin, with cos and sin laid out as [c0 .. c_{D/2-1}, c0 .. c_{D/2-1}]
        cos_full = np.concatenate([np.cos(theta), np.cos(theta)], axis=1)
        sin_full = np.concatenate([np.sin(theta), np.sin(theta)], axis=1)
        turned = np.concatenate([-x[:, half:], x[:, :half]], axis=1)
    else:
        # x * cos + rotate_every_two(x) * sin, with cos and sin laid out as [c0, c0, c1, c1, ...]
        cos_full = np.tile(np.cos(theta), 2)
        sin_full = np.tile(np.sin(theta), 2)
        turned = np.empty_like(x)
        turned[:, 0::2], turned[:, 1::2] = -x[:, 1::2], x[:, 0::2]
    return x * cos_full + turned * sin_full
