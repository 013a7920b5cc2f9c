"""
part: 6 (encode_e4m3)
kind: wrong
mistake: The learner saturates only infinities (turned into +-448 before encoding) and then caps the
    code at 0x7F, "the top code": a finite |x| that rounds past 448 (|x| > 464, e.g. 480, 500 or 1e6)
    comes out as 0x7F / 0xFF, which is NaN in e4m3, instead of saturating to 0x7E / 0xFE (448). Values
    in (448, 464] round (464: tie to even) to 448 and are right.
good feedback must say: large finite values above 448 (e.g. 500, 1000) came back 0x7F/0xFF, a NaN
    code, but must saturate to 448 (0x7E, or 0xFE with the sign); infinities are right; overflow gives
    NaN instead of saturating.
must NOT say: that infinity is wrong; that NaN input handling is wrong; tie or subnormal problems; that
    the sign is lost.
"""
import numpy as np


def encode_e4m3(x):
    """The e4m3 code (uint8 [n]) of each float32 value of the row x [n]: nearest, ties to even,
    |x| > 448 saturates to 448; bit 0x80 is x's sign; NaN of either sign gives 0x7F."""
    x = np.asarray(x, dtype=np.float32).astype(np.float64)
    nan = np.isnan(x)
    x = np.where(np.isinf(x), np.copysign(448.0, x), x)     # infinities saturate to 448
    sign = np.where(np.signbit(x), 0x80, 0x00)
    a = np.abs(np.where(nan, 0.0, x))
    e = np.maximum(np.floor(np.log2(np.where(a > 0, a, 2.0 ** -6))), -6)
    q = np.round(a / 2.0 ** (e - 3))                        # half to even
    code = np.minimum((e + 6) * 8 + q, 0x7F).astype(np.int64)   # the top code
    out = (code | sign).astype(np.uint8)
    out[nan] = 0x7F
    return out
