"""
part: 6 encode_e4m3
kind: wrong
mistake: the sign bit comes from `x < 0` instead of np.signbit(x): -0.0 is not < 0, so -0.0
    encodes as 0x00 instead of 0x80. Every other value (negative values that round to zero
    included: they are < 0) is right.
good feedback must say: -0.0 must keep its sign: 0x80, not 0x00; take the sign bit from the
    sign (np.signbit / the float's top bit), not from x < 0.
must not say: the sign bit is lost for negative values in general / every negative value turns
    positive; rounding, ties, saturation, subnormals or NaN are wrong.
"""
import numpy as np


def encode_e4m3(x):
    """The e4m3 code (uint8 [n]) of each float32 value of the row x [n]: nearest, ties to even,
    |x| > 448 saturates to 448; bit 0x80 is x's sign; NaN of either sign gives 0x7F."""
    x = np.asarray(x, dtype=np.float32)
    a = np.abs(x).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        _, e = np.frexp(a)                       # a = m * 2**e with 0.5 <= m < 1
        e = np.maximum(e - 1, -6)                # the leading bit's exponent; below 2**-6, subnormals
        q = np.round(a / np.ldexp(1.0, e - 3))   # numpy rounds half to even: 8..16 (normal), 0..8 below
        code = np.where(a >= 2.0 ** -6, (e + 7) * 8 + (q - 8), q)
        code = np.where(a > 448, 0x7E, code)     # infinity too
        code = np.where(np.isnan(a), 0x7F, code).astype(np.int64)
    sign = np.where(x < 0, 0x80, 0)
    code = np.where(np.isnan(x), 0x7F, code | sign)
    return code.astype(np.uint8)
