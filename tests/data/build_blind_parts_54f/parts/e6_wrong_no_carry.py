"""
part: 6 encode_e4m3
kind: wrong
mistake: when a normal value rounds up past the largest mantissa (1.111b rounds to 10.000b) the
    learner clamps the mantissa at 7 "so it fits in 3 bits" instead of carrying into the exponent:
    values in [1.9375, 2) * 2**e (e = -6 .. 7; e.g. 15.5 .. 16, 0.97 .. 1.0) give 1.875 * 2**e
    instead of 2**(e + 1). Subnormals rounding up to 2**-6, saturation, ties elsewhere, NaN and
    signs are right.
good feedback must say: a value just below a power of two must round up to that power of two
    (the next exponent, mantissa 0): the rounding carries into the exponent; it comes back one
    code too low (1.875 * 2**e); e.g. 15.9 -> 16 (0x58), 0.999 -> 1.0 (0x38).
must not say: ties away from zero / round half to even wrong in general; saturation at 448; NaN;
    the sign bit; subnormals.
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
        mantissa = np.minimum(q - 8, 7)          # 3 bits
        code = np.where(a >= 2.0 ** -6, (e + 7) * 8 + mantissa, q)
        code = np.where(a > 448, 0x7E, code)     # infinity too
        code = np.where(np.isnan(a), 0x7F, code).astype(np.int64)
    sign = np.where(np.signbit(x), 0x80, 0)
    code = np.where(np.isnan(x), 0x7F, code | sign)
    return code.astype(np.uint8)
