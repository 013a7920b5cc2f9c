"""Part 6 encode_e4m3 -- kind: wrong.

Mistake: the learner takes 0x7F's bit pattern (S 1111 111 = 1.875 * 2**8 = 480) as the largest
finite e4m3 value, so instead of saturating |x| > 448 to 448 it clamps |x| to 480 and rounds:
448 < |x| <= 464 still comes out 0x7E (464 is the tie, and 448's code is the even one), but every
|x| > 464, the infinities included, comes out 0x7F / 0xFF -- the NaN code. Differs from a correct
encoder ONLY for |x| > 464 (finite or infinite), where it writes a NaN code instead of 0x7E|sign.
Everything else (ties to even, subnormals, NaN -> 0x7F, sign, -0.0) is right.

A good feedback message must say: values above 448 (e.g. 500 or inf) must saturate to 448 / 0x7E,
not 0x7F; 0x7F (S.1111.111) is NaN in e4m3fn, the largest finite is 448 (0x7E).
It must not say: ties / round half even are wrong, NaN should be 0x7F (it already is for NaN input),
the sign bit is lost, subnormals wrong.
"""
import numpy as np


def encode_e4m3(x):
    """The e4m3 code (uint8 [n]) of each float32 value of the row x [n]: nearest, ties to even,
    |x| > 448 saturates to 448; bit 0x80 is x's sign; NaN of either sign gives 0x7F."""
    x = np.asarray(x, dtype=np.float32)
    a = np.abs(x).astype(np.float64)
    nan = np.isnan(a)
    a = np.where(nan, 0.0, a)
    big = a > 480.0  # the largest code, 0x7F = 1.875 * 2**8
    a = np.where(big, 480.0, a)
    _, ex = np.frexp(a)  # a = m * 2**ex, m in [0.5, 1): the binade is 2**(ex - 1)
    e = np.where(a < 2.0 ** -6, -6, ex - 1)  # below 2**-6 (zero too) the subnormals share the step of [2**-6, 2**-5)
    q = np.rint(a / 2.0 ** (e - 3))  # 8..16 for a normal, 0..8 for a subnormal: ties to even
    code = (e + 7) * 8 + q - 8  # q == 16 carries into the next exponent by itself
    code = np.where(nan, 0x7F, code.astype(np.int64) | (np.signbit(x) * 0x80)).astype(np.uint8)
    return code
