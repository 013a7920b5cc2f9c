"""Part: 6 encode_e4m3.  Kind: wrong.

The mistake: the code of a normal value is put together as (exponent << 3) | mantissa, with the
mantissa rounded to nearest even in steps of 2**(e - 3). When the rounding carries out of the 3
mantissa bits (mantissa rounds to 8: a value in [1.9375 * 2**e, 2**(e + 1)) rounds UP to the next
power of two) the carry should go into the exponent, as + does. With | it only does when the biased
exponent is even; when it is odd (e = -6, -4, -2, 0, 2, 4, 6) bit 3 is already set and the carry is
lost: the code is 2**e instead of 2**(e + 1), half the right value. Example: 1.97 gives 0x38 (1.0)
instead of 0x40 (2.0); 0.49 gives 0x28 (0.25) instead of 0x30 (0.5); -7.9 gives 0xC8 (-4.0)
instead of 0xD0 (-8.0). Ties, subnormals, saturation, NaN, the sign and -0.0 are all right, and so
are the carries where the biased exponent is even (e.g. 0.97 -> 1.0, 3.9 -> 4.0).

A good feedback message must say: a value just below a power of two (that rounds up to it) comes out
at half its value / one exponent too small; the mantissa's carry must go into the exponent (add,
do not OR) / the case is rounding up across a power of two (binade).
It must not say: ties to even / round half away from zero, subnormals, saturation at 448, NaN,
the sign bit / -0.0.
"""

import numpy as np


def encode_e4m3(x):
    """The e4m3 code (uint8 [n]) of each float32 value of the row x [n]: nearest, ties to even,
    |x| > 448 saturates to 448; bit 0x80 is x's sign; NaN of either sign gives 0x7F."""
    x = np.asarray(x, dtype=np.float32)
    a = np.abs(x).astype(np.float64)
    a = np.where(np.isfinite(a) & (a <= 448), a, 1.0)  # the others are set below
    _, e2 = np.frexp(a)  # a = f * 2**e2, 0.5 <= f < 1
    e = np.maximum(e2 - 1, -6)  # 2**e <= a < 2**(e + 1); -6 for the subnormals
    steps = np.rint(a / np.exp2(e - 3)).astype(np.int64)  # a in mantissa steps, nearest, ties to even
    normal = a >= 2.0**-6
    code = np.where(normal, ((e + 7) << 3) | (steps - 8), steps)
    code = np.where(np.abs(x) > 448, 0x7E, code)
    code = code | np.where(np.signbit(x), 0x80, 0)
    code = np.where(np.isnan(x), 0x7F, code)
    return code.astype(np.uint8)
