"""
part: notebook 12, part 6 `encode_e4m3`
kind: wrong
mistake: subnormals use the exponent -bias = -7 instead of 1 - bias = -6, i.e. a step of
  2**-7 / 8 = 2**-10 instead of 2**-9, so every |x| below 2**-6 (the smallest normal) gets a code
  about twice too large (and those in [2**-7, 2**-6) spill into codes 0x08..0x10, i.e. normal
  values). Normals, ties to even, saturation, sign and NaN are right.
good feedback must say: values below 2**-6 = 0.015625 (subnormals) are encoded too large
  (about 2x: step 2**-10 used where the subnormal step is 2**-9, exponent 1 - bias = -6 not -7);
  normal values are right.
wrong feedback: "ties to even wrong" for normals, "saturation", "NaN", "sign", "bias of normals
  wrong" (normals are right), "rounds toward zero".
"""

import numpy as np


def encode_e4m3(x):
    """The e4m3 code (uint8 [n]) of each float32 value of the row x [n]: nearest, ties to even,
    |x| > 448 saturates to 448; bit 0x80 is x's sign; NaN of either sign gives 0x7F."""
    x = np.asarray(x, dtype=np.float32).astype(np.float64)
    nan = np.isnan(x)
    sign = np.where(np.signbit(x), 0x80, 0x00)
    a = np.abs(np.where(nan, 0.0, x))
    a = np.minimum(a, 1e9)
    bias = 7
    mant, exp = np.frexp(a)
    e = exp - 1
    m = np.rint((2 * mant - 1) * 8)  # ties to even
    e = np.where(m == 8, e + 1, e)
    m = np.where(m == 8, 0, m)
    code_normal = ((e + bias) << 3) + m
    # subnormal: value = m/8 * 2**(-bias)
    code_sub = np.rint(a / (2.0**-bias / 8))
    code = np.where(a >= 2.0 ** (1 - bias), code_normal, code_sub)
    code = np.where(a > 448, 0x7E, code).astype(np.int64) | sign
    return np.where(nan, 0x7F, code).astype(np.uint8)
