# part: 1
# verdict: correct
# mistake: none (boundary probe): every step in float32, angle included; the notebook says float32's rounding is allowed, float16 is not
# expect: "passes"

import numpy as np


def rotate(x, positions, inv_freq, is_neox):
    """One head x [T, D] turned by RoPE at positions [T]: pair i turns by positions[t] * inv_freq[i].

    is_neox: pairs (i, i + D/2); otherwise GPT-J pairs (2i, 2i + 1). Return a new [T, D] array.
    """
    # everything in float32, as the model's own arrays are (the notebook allows float32's rounding)
    x = np.asarray(x, dtype=np.float32)
    T, D = x.shape
    h = D // 2
    theta = np.asarray(positions).astype(np.float32)[:, None] * np.asarray(inv_freq, dtype=np.float32)[None, :]
    cos, sin = np.cos(theta), np.sin(theta)
    if is_neox:
        a, b = x[:, :h], x[:, h:]
        return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=1)
    a, b = x[:, 0::2], x[:, 1::2]
    return np.stack([a * cos - b * sin, a * sin + b * cos], axis=-1).reshape(T, D)
