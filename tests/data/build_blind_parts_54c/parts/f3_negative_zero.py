"""Part 6 encode_e4m3 -- kind: wrong.

Mistake: the sign bit is set from `x < 0` instead of from the sign bit of x (np.signbit), so -0.0
is encoded 0x00 instead of 0x80. Every negative non-zero value (also one that rounds to zero, like
-1e-6, which gives 0x80) keeps its sign; NaN gives 0x7F either way. Differs from a correct encoder
ONLY at x == -0.0.

A good feedback message must say: -0.0 must encode as 0x80 / keep the sign of negative zero; use the
sign bit (np.signbit), not x < 0.
It must not say: the sign bit is lost for negative values in general, ties, saturation, NaN,
subnormals.
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
    _, ex = np.frexp(a)  # a = m * 2**ex, m in [0.5, 1): the binade is 2**(ex - 1)
    e = np.where(a < 2.0 ** -6, -6, ex - 1)  # below 2**-6 (zero too) the subnormals share the step of [2**-6, 2**-5)
    q = np.rint(a / 2.0 ** (e - 3))  # 8..16 for a normal, 0..8 for a subnormal: ties to even
    code = (e + 7) * 8 + q - 8  # q == 16 carries into the next exponent by itself
    code = np.where(nan, 0x7F, code.astype(np.int64) | ((x < 0) * 0x80)).astype(np.uint8)
    return code
