"""
part: notebook 12, part 6 `encode_e4m3`
kind: wrong
mistake: the sign bit is taken from `x < 0`, which is False for -0.0 (and the tiny negatives that
  round to zero are still fine), so -0.0 is encoded 0x00 instead of 0x80; everything else (rounding,
  ties to even, subnormals, saturation, NaN -> 0x7F) is right.
good feedback must say: -0.0 gets code 0x00 (positive zero) instead of 0x80: the sign bit is lost
  for negative zero only, because `x < 0` is false for -0.0 (use np.signbit); all other values right.
wrong feedback: "loses the sign bit" for all negatives (the notebook's encode_without_sign case:
  here -1.0 -> 0xB8 is right), "ties", "saturation", "NaN", "subnormals".
"""

import numpy as np


def encode_e4m3(x):
    """The e4m3 code (uint8 [n]) of each float32 value of the row x [n]: nearest, ties to even,
    |x| > 448 saturates to 448; bit 0x80 is x's sign; NaN of either sign gives 0x7F."""
    x = np.asarray(x, dtype=np.float32).astype(np.float64)
    sign = np.where(x < 0, 0x80, 0x00)
    a = np.abs(np.nan_to_num(x, nan=0.0, posinf=1e9, neginf=-1e9))
    mant, exp = np.frexp(a)  # a = mant * 2**exp, mant in [0.5, 1)
    e = exp - 1  # a = (2*mant) * 2**e, 2*mant in [1, 2)
    normal = a >= 2.0**-6
    # normals: 3 mantissa bits, ties to even (np.rint rounds half to even)
    m = np.rint((2 * mant - 1) * 8)
    carry = m == 8
    e_n = np.where(carry, e + 1, e)
    m_n = np.where(carry, 0, m)
    code_n = ((e_n + 7) << 3) + m_n
    # subnormals: multiples of 2**-9
    code_s = np.rint(a / 2.0**-9)  # 8 means 2**-6, which is code 0x08: right
    code = np.where(normal, code_n, code_s)
    code = np.where(a > 448, 0x7E, code).astype(np.int64)
    code = code | sign
    code = np.where(np.isnan(x), 0x7F, code)
    return code.astype(np.uint8)
