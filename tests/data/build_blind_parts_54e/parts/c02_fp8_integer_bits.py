"""Part: 6 encode_e4m3.  Kind: correct (unusual).

An unusual but correct encoder that never does float arithmetic: it works on the float32 bit pattern
(x.view(np.uint32)) as hardware converters do. Normal results: add 0x7FFFF plus the kept mantissa's
last bit to the 32-bit pattern and shift right by 20 (round to nearest, ties to even, the carry
running into the exponent by itself), then rebias the exponent (127 -> 7). Subnormal results: the
24-bit significand (implicit bit included) shifted right by 141 - exponent field with an explicit
round-half-even on the remainder. Then saturation above 448 (pattern > 0x43E00000, infinity
included), NaN (pattern > 0x7F800000) -> 0x7F, and the sign from bit 31 (so -0.0 -> 0x80).

A good feedback message must say: it passes.
It must not say: any mistake (ties, subnormals, saturation, NaN, sign).
"""

import numpy as np


def encode_e4m3(x):
    """The e4m3 code (uint8 [n]) of each float32 value of the row x [n]: nearest, ties to even,
    |x| > 448 saturates to 448; bit 0x80 is x's sign; NaN of either sign gives 0x7F."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.int64)
    sign = (bits >> 24) & 0x80
    mag = bits & 0x7FFFFFFF
    field = mag >> 23  # float32's biased exponent
    # normal results (|x| >= 2**-6, field >= 121): keep 3 mantissa bits, nearest, ties to even
    keep = (mag >> 20) & 1
    normal = ((mag + 0x7FFFF + keep) >> 20) - (120 << 3)
    # subnormal results: the significand in units of 2**-9
    significand = np.where(field > 0, (mag & 0x7FFFFF) | 0x800000, mag & 0x7FFFFF)
    shift = np.clip(141 - np.maximum(field, 1), 1, 40)
    q = significand >> shift
    rem = significand & ((np.int64(1) << shift) - 1)
    half = np.int64(1) << (shift - 1)
    sub = q + ((rem > half) | ((rem == half) & (q & 1 == 1)))
    code = np.where(field >= 121, normal, sub)
    code = np.where(mag > 0x43E00000, 0x7E, code) | sign
    code = np.where(mag > 0x7F800000, 0x7F, code)
    return code.astype(np.uint8)
