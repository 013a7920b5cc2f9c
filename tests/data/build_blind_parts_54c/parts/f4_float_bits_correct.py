"""Part 6 encode_e4m3 -- kind: correct (unusual).

None: works on the float32 bit patterns with integer arithmetic. For |x| >= 2**-6 (e4m3's normal
range) the 23-bit mantissa is rounded to 3 bits, ties to even, by adding 0x7FFFF plus the lowest
kept bit and shifting right by 20 (a carry moves into the exponent by itself); re-biasing the
exponent from 127 to 7 is subtracting 120 << 3. Below 2**-6 the value times 2**9 is rounded to
an integer 0..8 (np.rint: ties to even) -- that integer is the subnormal code (8 is 2**-6's code).
|x| > 448 (bits above 0x43E00000) gives 0x7E, NaN (bits above 0x7F800000) 0x7F, and the sign is
bit 31 of x, -0.0 included.

A good feedback message must say: passed / correct.
It must not say: any mistake.
"""
import numpy as np


def encode_e4m3(x):
    """The e4m3 code (uint8 [n]) of each float32 value of the row x [n]: nearest, ties to even,
    |x| > 448 saturates to 448; bit 0x80 is x's sign; NaN of either sign gives 0x7F."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.int64)
    sign = (bits >> 31) << 7
    mag = bits & 0x7FFFFFFF
    normal = (mag + 0x7FFFF + ((mag >> 20) & 1)) >> 20  # float32 exponent and 3 mantissa bits, rounded
    normal = normal - (120 << 3)
    tiny = np.minimum(mag, 0x3C800000).astype(np.uint32).view(np.float32)  # |x| up to 2**-6
    small = np.rint(tiny.astype(np.float64) * 512.0).astype(np.int64)  # 0..8: the subnormal's code
    code = np.where(mag < 0x3C800000, small, normal)  # 0x3C800000 is 2**-6
    code = np.where(mag > 0x43E00000, 0x7E, code)  # 0x43E00000 is 448
    code = code | sign
    code = np.where(mag > 0x7F800000, 0x7F, code)
    return code.astype(np.uint8)
