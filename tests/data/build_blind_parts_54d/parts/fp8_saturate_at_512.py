"""Part: 6 encode_e4m3
Kind: wrong

The mistake:
    Saturates only from 512 (where the exponent field runs out), not for every |x| > 448: values in
    (464, 496) round to mantissa 7 at exponent 8 and come out as 0x7F (NaN; 0xFF when negative),
    values in [496, 512) carry into exponent 9 and come out as 0x80 (-0). 448 < |x| <= 464, >= 512
    and infinities are right.

A good feedback message must say:
    - |x| between 464 and 512 (e.g. 480, 500) must give 0x7E / 448 (0xFE if negative)
    - yours gave 0x7F (NaN) / 0x80 (-0): saturate any |x| > 448, not only past 2^9 / by exponent
    - rounding up from 448 must not reach the NaN code

It must not say:
    - NaN must stay NaN (NaN input handling is right)
    - ties to even / round half away
    - sign bit lost
    - infinities
"""

import math

import numpy as np


def _magnitude_code(v):
    """The 7-bit code of v = |x| (not NaN): exponent bits << 3 | mantissa bits."""
    if v >= 512:
        return 0x7E  # saturate (infinity too): 2^9 is past the last exponent
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
