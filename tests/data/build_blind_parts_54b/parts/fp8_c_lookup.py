"""
part: 6 (encode_e4m3)
kind: correct
mistake: none. Written unusually: no exponent/mantissa arithmetic at all. The 127 non-negative finite
    e4m3 values are built as a table (code -> value), each |x| is placed between two neighbouring codes
    with np.searchsorted, the nearer one is taken, an exact tie takes the code whose last bit is 0;
    |x| above 448 (inf too) is clipped to 448 before the lookup; the sign bit comes from np.signbit
    (so -0.0 gets 0x80); NaN is written as 0x7F last.
good feedback must say: passed / correct.
must NOT say: any rounding, tie, saturation, subnormal, NaN or sign mistake.
"""
import numpy as np


def encode_e4m3(x):
    """The e4m3 code (uint8 [n]) of each float32 value of the row x [n]: nearest, ties to even,
    |x| > 448 saturates to 448; bit 0x80 is x's sign; NaN of either sign gives 0x7F."""
    x = np.asarray(x, dtype=np.float32).astype(np.float64)
    codes = np.arange(0x7F)                       # 0x00 .. 0x7E: every finite non-negative code
    e, m = codes >> 3, codes & 7
    grid = np.where(e == 0, m * 2.0 ** -9, (1 + m / 8) * 2.0 ** (e - 7))  # increasing, 0 .. 448
    a = np.minimum(np.abs(np.nan_to_num(x, nan=0.0)), 448.0)
    hi = np.clip(np.searchsorted(grid, a, side="left"), 1, len(grid) - 1)  # grid[hi-1] < a <= grid[hi]
    lo = hi - 1
    d_lo, d_hi = a - grid[lo], grid[hi] - a
    pick = np.where(d_lo < d_hi, lo, np.where(d_hi < d_lo, hi, np.where(lo % 2 == 0, lo, hi)))
    out = pick.astype(np.uint8) | np.where(np.signbit(x), 0x80, 0).astype(np.uint8)
    out[np.isnan(x)] = 0x7F
    return out.astype(np.uint8)
