"""Part: 6 encode_e4m3
Kind: wrong

The mistake:
    Takes the sign as x < 0 instead of the sign bit: -0.0 is not < 0, so -0.0 encodes to 0x00
    instead of 0x80. Every other value (negative underflows to zero included) is right.

A good feedback message must say:
    - -0.0 must encode to 0x80
    - use the sign bit (np.signbit), not x < 0 / -0.0 is not < 0

It must not say:
    - the sign bit is lost for negative values (in general)
    - NaN
    - ties
    - saturation
    - subnormals
"""

import math

import numpy as np


def _magnitude_code(v):
    """The 7-bit code of v = |x| (not NaN): exponent bits << 3 | mantissa bits."""
    if v > 448:
        return 0x7E  # saturate (infinity too)
    if v < 2.0 ** -6:
        # subnormal: m * 2^-9, m = 0 .. 7; m == 8 is code 0x08, the smallest normal: the carry is free
        return int(round(v / 2.0 ** -9))  # Python's round: ties to even
    m, e = math.frexp(v)  # v = m * 2^e, 0.5 <= m < 1
    e -= 1  # v = (2m) * 2^e, 1 <= 2m < 2
    q = int(round((2 * m - 1) * 8))  # 0 .. 8, ties to even
    if q == 8:
        q, e = 0, e + 1
    return ((e + 7) << 3) | q


def encode_e4m3(x):
    x = np.asarray(x, dtype=np.float32).reshape(-1)
    negative = x < 0
    codes = np.empty(x.shape, dtype=np.uint8)
    for j in range(x.size):
        v = float(x[j])
        if math.isnan(v):
            codes[j] = 0x7F
        else:
            codes[j] = _magnitude_code(abs(v)) | (0x80 if negative[j] else 0)
    return codes
