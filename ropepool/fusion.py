"""What a call fuses beyond RoPE and the pool write: QK-norm before the rotation, an FP8 cache after it.

``rope_pool_fused(..., q_norm_weight=w_q, k_norm_weight=w_k, norm_eps=1e-6)`` normalises each head of
q (and k) over its D dimensions before rotating it, as Qwen3's attention does
(:func:`ropepool.reference.rms_norm`: ``x / sqrt(mean(x**2) + eps) * w``, in float32, with the
rotation's one rounding). Gemma's ``(1 + w)`` is the caller's to pass as the weight.

uint8 pools are an FP8 cache (:mod:`ropepool.fp8`): each row holds the e4m3 codes of the float32
quotients ``float32(k_rot) / float32(k_scale)`` and ``float32(v) / float32(v_scale)``, correctly rounded
on every backend, as vLLM's ``reshape_and_cache_flash`` computes them (``__nv_cvt_float_to_fp8(x / scale,
__NV_SATFINITE, __NV_E4M3)``). ``k_scale`` and ``v_scale`` are per-tensor floats; q_rot and k_rot keep q's dtype.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: The smallest ``norm_eps`` QK-norm takes. float32 squares below 2**-126 (about 1.2e-38) are lost;
#: with ``eps >= 1e-30`` what is lost is under 1e-8 of eps, so the float32 result keeps the float64
#: reference's (an all-zero head gives 0, never 0/0).
NORM_EPS_MIN = 1e-30

#: The FP8 scales the op takes, ``2**-126`` to ``2**126``: ``1 / scale`` is then a normal float32.
KV_SCALE_MIN, KV_SCALE_MAX = 2.0**-126, 2.0**126


def norm_limit(head_dim: int) -> float:
    """The largest ``|x|`` QK-norm takes for heads of ``head_dim``: ``head_dim`` squares of it sum to
    at most half of float32's largest value, so the mean of squares never overflows to inf (which
    would turn the head into zeros where the reference gives values of size one)."""
    return math.sqrt(float(np.finfo(np.float32).max) / (2 * head_dim))


@dataclass(frozen=True)
class Fusion:
    """A validated call's QK-norm and FP8 settings (weights as given: mx.array or NumPy ``[D]``)."""

    q_norm_weight: object = None
    k_norm_weight: object = None
    norm_eps: float = 1e-6
    fp8: bool = False
    k_scale: float = 1.0
    v_scale: float = 1.0

    @property
    def qnorm(self) -> bool:
        return self.q_norm_weight is not None

    @property
    def knorm(self) -> bool:
        return self.k_norm_weight is not None

    def scales(self) -> np.ndarray:
        """float32 ``[2]``: ``k_scale``, ``v_scale``, as the kernel divides by them."""
        return np.array([self.k_scale, self.v_scale], np.float32)


PLAIN = Fusion()
