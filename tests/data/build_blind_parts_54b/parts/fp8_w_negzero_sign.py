"""
part: 6 (encode_e4m3)
kind: wrong
mistake: The learner takes the sign bit from the comparison x < 0, so -0.0 (which is not < 0) is
    encoded as +0 (0x00) instead of 0x80; every other value, tiny negatives rounding to zero included,
    gets its sign right.
good feedback must say: -0.0 must give 0x80 (negative zero keeps its sign bit) but came back 0x00;
    take the sign with np.signbit (or the float's top bit), not x < 0; all other values are right.
must NOT say: that the sign bit is lost for all negative values (it is kept for every negative
    number); rounding, tie, subnormal, saturation or NaN problems.
"""
import numpy as np


def encode_e4m3(x):
    """The e4m3 code (uint8 [n]) of each float32 value of the row x [n]: nearest, ties to even,
    |x| > 448 saturates to 448; bit 0x80 is x's sign; NaN of either sign gives 0x7F."""
    x = np.asarray(x, dtype=np.float32).astype(np.float64)
    nan = np.isnan(x)
    sign = np.where(x < 0, 0x80, 0x00)
    a = np.minimum(np.abs(np.where(nan, 0.0, x)), 448.0)   # saturate (inf too)
    e = np.maximum(np.floor(np.log2(np.where(a > 0, a, 2.0 ** -6))), -6)  # subnormals share 2**-6's step
    q = np.round(a / 2.0 ** (e - 3))                        # mantissa steps, half to even
    code = np.minimum((e + 6) * 8 + q, 0x7E).astype(np.int64)
    out = (code | sign).astype(np.uint8)
    out[nan] = 0x7F
    return out
