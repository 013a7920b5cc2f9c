# part: 6
# verdict: correct
# mistake: none: pure Python per value with math.frexp and Python's round() (ties to even), no table
# expect: "passes"

import math

import numpy as np


def _code(v):
    """One float (exactly a float32's value) to its e4m3 code, by arithmetic on the exponent."""
    if math.isnan(v):
        return 0x7F
    sign = 0x80 if math.copysign(1.0, v) < 0 else 0x00
    a = abs(v)
    if a >= 448.0:  # 448 itself, and everything above (infinity too) saturates
        return sign | 0x7E
    if a < 2.0**-6:  # subnormals: steps of 2**-9; round() is round-half-to-even, exact here
        return sign | round(a * 512)  # 8 would be 2**-6, which is code 0x08: it carries by itself
    m, e = math.frexp(a)  # a = m * 2**e with 0.5 <= m < 1, so a = (2m) * 2**(e - 1)
    q = round((2 * m - 1) * 8)  # the 3 mantissa bits, ties to even; 8 carries into the exponent
    return sign | min(((e - 1 + 7) << 3) + q, 0x7E)


def encode_e4m3(x):
    """The e4m3 code (uint8 [n]) of each float32 value of the row x [n]: nearest, ties to even,
    |x| > 448 saturates to 448; bit 0x80 is x's sign; NaN of either sign gives 0x7F."""
    values = np.asarray(x, dtype=np.float32).reshape(-1).tolist()
    return np.array([_code(v) for v in values], dtype=np.uint8)
