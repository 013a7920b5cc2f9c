"""
part: 6 (encode_e4m3)
kind: wrong
mistake: The learner encodes only the normal range: every |x| below the smallest normal 2**-6
    (0.015625) is flushed to a signed zero (0x00 / 0x80) instead of being rounded onto the subnormal
    codes 0x01..0x07 (multiples of 2**-9); values just below 2**-6 that should round up to 0x08 are
    flushed too.
good feedback must say: a small value (subnormal range, below 2**-6 = 0.015625, e.g. 2**-9 or 0.01)
    came back as 0 (0x00) but should be a subnormal code (0x01..0x07, exponent field 0, steps of 2**-9);
    subnormals are flushed to zero; normal values, ties, saturation and NaN are right.
must NOT say: that ties/round-to-even are wrong; that the sign is lost; saturation/overflow or NaN
    problems.
"""
import numpy as np


def encode_e4m3(x):
    """The e4m3 code (uint8 [n]) of each float32 value of the row x [n]: nearest, ties to even,
    |x| > 448 saturates to 448; bit 0x80 is x's sign; NaN of either sign gives 0x7F."""
    x = np.asarray(x, dtype=np.float32).astype(np.float64)
    sign = np.where(np.signbit(x), 0x80, 0x00)
    a = np.abs(np.nan_to_num(x, nan=0.0, posinf=448.0, neginf=-448.0))
    a = np.minimum(a, 448.0)
    normal = a >= 2.0 ** -6
    e = np.floor(np.log2(np.where(normal, a, 1.0)))        # exponent of each normal value
    q = np.round(a / 2.0 ** (e - 3))                       # 8 .. 16, half to even
    code = np.where(normal, (e + 6) * 8 + q, 0)            # (e + 7) << 3 | (q - 8); 16 rolls over
    code = np.minimum(code, 0x7E).astype(np.int64)
    out = (code | sign).astype(np.uint8)
    out[np.isnan(x)] = 0x7F
    return out
