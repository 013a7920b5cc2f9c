"""Part: 6 encode_e4m3
Kind: wrong

The mistake:
    Flushes to zero every |x| below the smallest subnormal 2^-9, but values above half of it (2^-10
    < |x| < 2^-9) are nearer to 2^-9 and must give 0x01 (0x81 if negative). Exactly 2^-10 (a tie, to
    even 0) and everything else are right.

A good feedback message must say:
    - values between 2^-10 and 2^-9 (e.g. 0.0015) must round up to the smallest subnormal 0x01 (0x81
    negative)
    - round to nearest at the bottom of the range too / do not flush below 2^-9 to zero

It must not say:
    - ties to even (2^-10 itself is right)
    - saturation
    - NaN
    - sign bit lost
"""

import math

import numpy as np


def _magnitude_code(v):
    """The 7-bit code of v = |x| (not NaN): exponent bits << 3 | mantissa bits."""
    if v > 448:
        return 0x7E  # saturate (infinity too)
    if v < 2.0 ** -9:
        return 0  # below the smallest subnormal: zero
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
    negative = np.signbit(x)
    codes = np.empty(x.shape, dtype=np.uint8)
    for j in range(x.size):
        v = float(x[j])
        if math.isnan(v):
            codes[j] = 0x7F
        else:
            codes[j] = _magnitude_code(abs(v)) | (0x80 if negative[j] else 0)
    return codes
