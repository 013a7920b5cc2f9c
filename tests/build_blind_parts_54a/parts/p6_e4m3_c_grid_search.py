"""
part: notebook 12, part 6 `encode_e4m3`
kind: correct
unusual: no bit arithmetic at all: builds the 127 finite non-negative e4m3 values (codes
  0x00..0x7E, which increase with the code), finds each |x|'s two neighbours on that grid with
  np.searchsorted, picks the nearer and, on an exact tie, the even code index (whose last mantissa
  bit is 0); |x| past 448 is clipped to the last code; sign from np.signbit; NaN -> 0x7F.
good feedback must say: passes / correct.
wrong feedback: any named mistake (ties, saturation, NaN, sign, subnormal, -0.0).
"""

import numpy as np


def encode_e4m3(x):
    """The e4m3 code (uint8 [n]) of each float32 value of the row x [n]: nearest, ties to even,
    |x| > 448 saturates to 448; bit 0x80 is x's sign; NaN of either sign gives 0x7F."""
    codes = np.arange(127)
    e, m = codes >> 3, codes & 7
    grid = np.where(e == 0, m / 8 * 2.0**-6, (1 + m / 8) * 2.0 ** (e - 7.0))  # 0 .. 448
    x = np.asarray(x, dtype=np.float32)
    a = np.abs(x.astype(np.float64))
    a = np.where(np.isnan(a), 0.0, np.minimum(a, grid[-1]))
    hi = np.clip(np.searchsorted(grid, a, side="left"), 1, 126)  # grid[hi-1] <= a <= grid[hi]
    lo = hi - 1
    d_lo, d_hi = a - grid[lo], grid[hi] - a
    pick = np.where(d_lo < d_hi, lo, np.where(d_hi < d_lo, hi, np.where(lo % 2 == 0, lo, hi)))
    out = pick | np.where(np.signbit(x), 0x80, 0)
    out = np.where(np.isnan(x), 0x7F, out)
    return out.astype(np.uint8)
