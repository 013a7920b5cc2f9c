"""Part: 6 encode_e4m3
Kind: correct

What is unusual:
    none: vectorised nearest point of the 127-value e4m3 grid by np.searchsorted, tie to the even
    code, saturation by np.minimum before the search, NaN and sign by masks.

A good feedback message must say:
    - passes (no mistake named)

It must not say:
    - any mistake / ties / saturation / NaN / sign
"""

import numpy as np


def _grid():
    """The value of each non-negative finite code 0x00 .. 0x7E, increasing."""
    c = np.arange(0x7F)
    e, m = c >> 3, c & 7
    return np.where(e == 0, m * 2.0 ** -9, (1 + m / 8) * 2.0 ** (e - 7))


_GRID = _grid()


def encode_e4m3(x):
    # nearest point of the grid by search, not by bit arithmetic: a tie takes the even code
    x = np.asarray(x, dtype=np.float32)
    a = np.minimum(np.abs(x.astype(np.float64)), 448.0)  # saturation (and infinity) first
    a = np.where(np.isnan(a), 0.0, a)
    hi = np.clip(np.searchsorted(_GRID, a, side="left"), 1, 0x7E)
    lo = hi - 1
    below, above = a - _GRID[lo], _GRID[hi] - a
    code = np.where(below < above, lo, np.where(above < below, hi, np.where(lo % 2 == 0, lo, hi)))
    code = code | np.where(np.signbit(x), 0x80, 0)
    return np.where(np.isnan(x), 0x7F, code).astype(np.uint8)
