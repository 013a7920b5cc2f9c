# part: 6
# verdict: wrong
# mistake: I gave exponent 0 the normal formula (1 + m/8) * 2**-7 instead of the subnormal m/8 * 2**-6
# expect: "subnormal", "exponent 0", "small"

import numpy as np


def _positive_codes():
    """The value of each code 0x00 .. 0x7E (0x7F is NaN): S=0, EEEE of bias 7, MMM."""
    values = []
    for code in range(0x7F):
        e, m = code >> 3, code & 7
        if e == 0:
            values.append((1 + m / 8) * 2.0 ** (e - 7))
        else:
            values.append((1 + m / 8) * 2.0 ** (e - 7))
    return np.array(values)


_VALUES = _positive_codes()


def encode_e4m3(x):
    """The e4m3 code (uint8 [n]) of each float32 value of the row x [n]: nearest, ties to even,
    |x| > 448 saturates to 448; bit 0x80 is x's sign; NaN of either sign gives 0x7F."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(invalid="ignore"):
        v = np.minimum(np.abs(x.astype(np.float64)), 448.0)  # saturate, infinity too
        hi = np.clip(np.searchsorted(_VALUES, v, side="left"), 0, 0x7E)  # first code >= v
        lo = np.maximum(hi - 1, 0)
        d_lo, d_hi = v - _VALUES[lo], _VALUES[hi] - v
        pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
        code = np.where(pick_hi, hi, lo).astype(np.int64)
    sign = np.signbit(x).astype(np.int64)
    code = code | (sign << 7)
    code = np.where(np.isnan(x), 0x7F, code)
    return code.astype(np.uint8)
