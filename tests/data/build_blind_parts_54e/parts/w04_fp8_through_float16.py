"""Part: 6 encode_e4m3.  Kind: wrong.

The mistake: the row is first converted to float16 (as a GPU path fp32 -> fp16 -> fp8 would), and
the float16 values are encoded; the encoder after that line is right. Rounding twice is not rounding
once: a float32 value a little above or below a midpoint between two e4m3 codes (within half a
float16 step of it) becomes exactly the midpoint in float16, and then ties-to-even may send it to
the other code. Example: 1.0625 + 2**-23 (just above the midpoint of 1.0 and 1.125) must give 0x39
(1.125); through float16 it becomes 1.0625 exactly and gives 0x38 (1.0). Likewise -1.1875 + 2**-23
gives 0xBA instead of 0xB9. Values far from a midpoint, exact midpoints, subnormals, saturation
(float16's inf saturates too), NaN, signs and -0.0 are all right.

A good feedback message must say: a value just beside a midpoint (within float32's precision, not
float16's) is rounded the wrong way / double rounding; round the float32 value once, directly, do
not go through float16 (or any narrower type) first.
It must not say: ties are rounded away from zero / use ties to even (exact ties are right), NaN,
saturation, the sign bit, subnormals.
"""

import numpy as np


def encode_e4m3(x):
    """The e4m3 code (uint8 [n]) of each float32 value of the row x [n]: nearest, ties to even,
    |x| > 448 saturates to 448; bit 0x80 is x's sign; NaN of either sign gives 0x7F."""
    with np.errstate(over="ignore"):
        x = np.asarray(x, dtype=np.float32).astype(np.float16)
    a = np.abs(x).astype(np.float64)
    a = np.where(np.isfinite(a) & (a <= 448), a, 1.0)  # the others are set below
    _, e2 = np.frexp(a)  # a = f * 2**e2, 0.5 <= f < 1
    e = np.maximum(e2 - 1, -6)  # 2**e <= a < 2**(e + 1); -6 for the subnormals
    steps = np.rint(a / np.exp2(e - 3)).astype(np.int64)  # a in mantissa steps, nearest, ties to even
    normal = a >= 2.0**-6
    code = np.where(normal, ((e + 7) << 3) + (steps - 8), steps)
    code = np.where(np.abs(x) > 448, 0x7E, code)
    code = code | np.where(np.signbit(x), 0x80, 0)
    code = np.where(np.isnan(x), 0x7F, code)
    return code.astype(np.uint8)
