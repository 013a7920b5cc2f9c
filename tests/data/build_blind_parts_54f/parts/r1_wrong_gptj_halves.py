"""
part: 1 rotate
kind: wrong
mistake: with GPT-J pairs the learner reads the pairs right (a = x[:, 0::2], b = x[:, 1::2])
    and turns them right, but writes the result back as two halves (np.concatenate([a', b']))
    as for NeoX, so out[:, i] holds pair i's first value and out[:, D/2 + i] its second instead of
    out[:, 2i], out[:, 2i + 1]. NeoX is right; GPT-J is wrong even at position 0 (a permutation of x).
good feedback must say: with GPT-J pairs (is_neox=False) the output is laid out wrong: the
    turned pair must go back to columns 2i and 2i + 1 (interleaved), not to the halves i and
    i + D/2; NeoX is right; even position 0 (no turn) comes back reordered.
must not say: use the other pairs / is_neox the other way round / pairs swapped (the pairs it
    turns are the right ones); positions or angles wrong.
"""
import numpy as np


def rotate(x, positions, inv_freq, is_neox):
    """One head x [T, D] turned by RoPE at positions [T]: pair i turns by positions[t] * inv_freq[i].

    is_neox: pairs (i, i + D/2); otherwise GPT-J pairs (2i, 2i + 1). Return a new [T, D] array.
    """
    x = np.asarray(x, dtype=np.float64)
    h = x.shape[1] // 2
    theta = np.asarray(positions, dtype=np.float64)[:, None] * np.asarray(inv_freq, dtype=np.float64)[None, :]
    cos, sin = np.cos(theta), np.sin(theta)
    if is_neox:
        a, b = x[:, :h], x[:, h:]
    else:
        a, b = x[:, 0::2], x[:, 1::2]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=1)
