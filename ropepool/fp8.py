"""FP8 e4m3 ("e4m3fn", as vLLM, SGLang and FlashInfer store a KV cache): the format, an MLX encoder, decoding.

A code is one byte ``S EEEE MMM``: sign, a 4-bit exponent of bias 7, a 3-bit mantissa. Exponent 0
holds the subnormals ``M * 2**-9``; the others ``(1 + M/8) * 2**(E - 7)``, up to ``0x7E`` = 448.
There is no infinity: ``S 1111 111`` (``0x7F``, ``0xFF``) is NaN. An FP8 pool is a ``uint8`` array
of such codes.

Encoding ``x`` (float32) rounds to the nearest code, ties to the even code; every ``|x| > 448``
(infinity too) saturates to ``±448``, as vLLM's and FlashInfer's ``SATFINITE`` conversions do; NaN
of either sign gives ``0x7F``, as NVIDIA's ``__nv_cvt_float_to_fp8`` does (``0xFF`` is never written).
:func:`encode` is the MLX form; the kernel body's ``rp_e4m3`` (``kernels/e4m3.inc``) computes the
same bits, and :func:`ropepool.reference.encode_e4m3` is the oracle both are tested against on every
float32 that matters. (MLX's own ``mx.to_fp8`` also
saturates, but turns NaN into 448.)

Example
-------
>>> import mlx.core as mx
>>> [int(c) for c in encode(mx.array([1.0, -448.0, 1000.0, 2.0**-9]))]
[56, 254, 126, 1]
>>> float(decode_table()[56]), float(decode_table()[0x7E])
(1.0, 448.0)
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # annotations only: the float64 reference reads this module without MLX
    import mlx.core as mx

#: The largest finite e4m3 value, ``0x7E``.
MAX = 448.0
#: The code NaN encodes to, whatever the NaN's sign bit.
NAN_CODE = 0x7F


@lru_cache(maxsize=1)
def _table() -> np.ndarray:
    codes = np.arange(256)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    e, m = (codes >> 3) & 0xF, codes & 0x7
    mag = np.where(e == 0, m * 2.0**-9, (1 + m / 8) * 2.0 ** (e - 7))
    out = (sign * mag).astype(np.float32)
    out[(codes & 0x7F) == 0x7F] = np.copysign(np.nan, sign[(codes & 0x7F) == 0x7F])  # 0xFF: a negative NaN
    out.setflags(write=False)
    return out


def decode_table() -> np.ndarray:
    """The value of every code, float32 ``[256]`` (read-only; ``0x7F`` and ``0xFF`` are NaN)."""
    return _table()


@lru_cache(maxsize=1)
def _table_mx() -> mx.array:
    import mlx.core as mx  # here, not at the top: the float64 reference reads this module without MLX

    return mx.array(_table())


def decode(bits: mx.array, scale: float = 1.0, dtype=None) -> mx.array:
    """``bits`` (uint8 codes, any shape) as values times ``scale``, in ``dtype`` (float32 if None): what attention reads."""
    import mlx.core as mx

    dtype = mx.float32 if dtype is None else dtype
    values = _table_mx()[bits.astype(mx.uint32)]  # same shape as bits, float32
    if scale != 1.0:
        values = values * mx.array(scale, mx.float32)
    return values.astype(dtype)


def encode(x: mx.array) -> mx.array:
    """The e4m3 code of each element of ``x`` (converted to float32), uint8, same shape.

    Integer operations on the float32 bits, the same steps as ``rp_e4m3`` in ``kernels/e4m3.inc``.
    """
    import mlx.core as mx

    u = x.astype(mx.float32).view(mx.uint32)
    sign = ((u >> 24) & 0x80).astype(mx.uint32)
    a = u & 0x7FFFFFFF  # |x|'s bits
    # Normal e4m3 (|x| >= 2**-6): rebias the exponent (127 -> 7) and round off 20 mantissa bits.
    b = a - mx.array(120 << 23, mx.uint32)
    normal = (b + 0x7FFFF + ((b >> 20) & 1)) >> 20
    # Subnormal e4m3 (|x| < 2**-6): the integer m * 2**(e - 150) / 2**-9 = m >> (141 - e), rounded.
    e = (a >> 23).astype(mx.int32)
    m = (a & 0x7FFFFF) | 0x800000
    s = mx.clip(141 - e, 1, 31).astype(mx.uint32)
    q = m >> s
    r = m & ((mx.array(1, mx.uint32) << s) - 1)
    half = mx.array(1, mx.uint32) << (s - 1)
    sub = q + ((r > half) | ((r == half) & ((q & 1) == 1))).astype(mx.uint32)
    sub = mx.where((e > 0) & (e >= 117), sub, 0)  # below 2**-10 (e < 117): 0
    mag = mx.where(a >= 0x3C800000, normal, sub)
    mag = mx.where(a > 0x43E00000, 0x7E, mag)  # past 448 (infinity too): saturate
    code = mx.where(a > 0x7F800000, NAN_CODE, sign | mag)  # NaN, either sign: 0x7F
    return code.astype(mx.uint8)
