"""Part 6 encode_e4m3 -- kind: wrong.

Mistake: the learner flushes every |x| below the smallest subnormal (2**-9, code 0x01) to zero
("too small to represent"), before rounding. But the values between 2**-10 (the midpoint, which
ties to the even code 0x00) and 2**-9 are nearer to 2**-9 than to 0 and must round UP to 0x01
(0x81 when negative). Differs from a correct encoder ONLY for 2**-10 < |x| < 2**-9, where it gives
0x00 / 0x80 instead of 0x01 / 0x81. Exactly 2**-10 is right (0x00: the tie goes to even), and every
other value, subnormal or normal, saturation, NaN and sign are right.

A good feedback message must say: a value between 2**-10 and 2**-9 (just below the smallest
subnormal) must round to the smallest subnormal 0x01, not flush to zero; round to nearest in the
subnormal range / no flush to zero.
It must not say: ties to even wrong in general / ties away from zero, saturation wrong, NaN wrong,
the sign bit is lost, subnormals not supported at all.
"""
import numpy as np


def encode_e4m3(x):
    """The e4m3 code (uint8 [n]) of each float32 value of the row x [n]: nearest, ties to even,
    |x| > 448 saturates to 448; bit 0x80 is x's sign; NaN of either sign gives 0x7F."""
    x = np.asarray(x, dtype=np.float32)
    a = np.abs(x).astype(np.float64)
    nan = np.isnan(a)
    a = np.where(nan, 0.0, a)
    big = a > 448.0
    a = np.where(big, 448.0, a)
    a = np.where(a < 2.0 ** -9, 0.0, a)  # below the smallest subnormal: zero
    _, ex = np.frexp(a)  # a = m * 2**ex, m in [0.5, 1): the binade is 2**(ex - 1)
    e = np.where(a < 2.0 ** -6, -6, ex - 1)  # below 2**-6 (zero too) the subnormals share the step of [2**-6, 2**-5)
    q = np.rint(a / 2.0 ** (e - 3))  # 8..16 for a normal, 0..8 for a subnormal: ties to even
    code = (e + 7) * 8 + q - 8  # q == 16 carries into the next exponent by itself
    code = np.where(nan, 0x7F, code.astype(np.int64) | (np.signbit(x) * 0x80)).astype(np.uint8)
    return code
