"""
part: 6 encode_e4m3
kind: correct
mistake: none: works on the float32 bit pattern with integer arithmetic only. Normal range:
    round the 23-bit mantissa to 3 bits to nearest even by adding 0x7FFFF plus the kept last bit
    and shifting by 20 (a carry runs into the exponent), then rebias the exponent (127 -> 7).
    Subnormal range: the 24-bit significand shifted right to units of 2**-9 with an explicit
    round-half-even on the remainder. Saturation and NaN by comparing the magnitude's bits.
good feedback must say: passes (part 6 right).
must not say: any mistake.
"""
import numpy as np


def encode_e4m3(x):
    """The e4m3 code (uint8 [n]) of each float32 value of the row x [n]: nearest, ties to even,
    |x| > 448 saturates to 448; bit 0x80 is x's sign; NaN of either sign gives 0x7F."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.int64)
    sign = (bits >> 24) & 0x80
    mag = bits & 0x7FFFFFFF
    exp = mag >> 23
    # normal e4m3 (|x| >= 2**-6, float32 exponent >= 121): round to 3 mantissa bits, ties to even
    normal = ((mag + 0x7FFFF + ((mag >> 20) & 1)) >> 20) - ((127 - 7) << 3)
    # subnormal e4m3: round(|x| * 2**9) half to even, from the significand 1.M * 2**(exp - 127)
    sig = (mag & 0x7FFFFF) | 0x800000
    shift = np.clip(141 - exp, 1, 40)
    q = sig >> shift
    rem = sig & ((np.int64(1) << shift) - 1)
    half = np.int64(1) << (shift - 1)
    q = q + ((rem > half) | ((rem == half) & (q & 1 == 1)))
    q = np.where(exp == 0, 0, q)  # float32 zeros and subnormals: far below 2**-10
    code = np.where(exp >= 121, normal, q)
    code = np.where(mag > 0x43E00000, 0x7E, code)  # above 448 (0x43E00000), infinity included
    code = np.where(mag > 0x7F800000, 0x7F, code | sign)  # NaN, whatever its sign
    return code.astype(np.uint8)
