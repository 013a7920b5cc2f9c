"""How close ``rope_pool_fused`` comes to the float64 reference: the one documented bound.

The op computes ``theta = float32(position) * float32(rope_base**(-2i/D))`` and rotates in
float32, rounding once to the output dtype. So a token at position ``p`` whose largest NeoX
pair has length ``r`` differs from the reference by at most about::

    r * (2 * eps + 2**-22 * (p + 1))

- ``2 eps``: one rounding to the output dtype (eps: float32 2**-23, float16 2**-10,
  bfloat16 2**-7), doubled for safety;
- ``2**-22 * (p + 1)``: the float32 angle carries a few ulps of relative error, an absolute
  error of about ``p * 2**-24`` radians, which moves the pair by ``r`` times as much. It grows
  linearly with position: for float32 it dominates from the start, for float16 past about
  8,192 and for bfloat16 past about 65,536 positions. Near 2**24 the angle is meaningless.

A scaled rotation (:class:`ropepool.rope.Rope` with a cos/sin scale) multiplies ``r`` by the
scale.

QK-norm (``q_norm_weight``, ``k_norm_weight``) rotates ``n = x * s * w`` with
``s = 1 / sqrt(mean(x**2) + eps)``, all in float32, so ``r`` is a pair length of ``n`` (the float64
:func:`ropepool.reference.rms_norm` of the input) and ``n`` itself carries a relative error: the sum
of D positive squares up to ``D/2`` float32 ulps (``D * 2**-24``, whatever order it is summed in),
then about six more roundings (the division by D, + eps, sqrt, 1/x, the two products), each
``2**-24``. Hence one more term, ``r * (D + 16) * 2**-24`` (:func:`norm_term`), a little over
twice that: at D = 128 about ``2**-17``, below float16's rounding and above float32's. Two float32 implementations of one rotation (ropepool and mlx-lm) each lie within the
bound of the float64 reference, so within twice the bound of each other.
``tests/test_properties.py`` measures how the error grows with position. Tests, the check CLI,
the widgets, the notebooks and the benchmarks take their tolerances from this module.
"""

from __future__ import annotations

import numpy as np

#: Machine epsilon of each output dtype.
EPS = {"float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}


def pair_norms(x, rope=None) -> np.ndarray:
    """The length of every rotated pair of ``x [..., D]``: ``[..., D/2]`` (NeoX halves), or
    ``[..., rotary_dim/2]`` times the cos/sin scale for a :class:`~ropepool.rope.Rope`."""
    x = np.asarray(x, np.float64)
    if rope is None:
        half = x.shape[-1] // 2
        return np.hypot(x[..., :half], x[..., half:])
    a, b = rope.pairs().T
    return np.hypot(x[..., a], x[..., b]) * max(rope.scale, 1.0)


def norm_term(head_dim: int) -> float:
    """QK-norm's relative error bound in float32 over a head of ``head_dim``: ``(D + 16) * 2**-24``
    (0 for ``head_dim=0``: no norm)."""
    return (head_dim + 16) * 2.0**-24 if head_dim else 0.0


def error_bound(dtype: str, positions, scale=1.0, norm_dim: int = 0) -> np.ndarray:
    """``scale * (2 eps + 2**-22 * (p + 1))`` at each position ``p``; ``scale`` is the pair length r.
    With ``norm_dim`` (QK-norm over heads of that size) plus ``scale * norm_term(norm_dim)``.

    Example
    -------
    >>> float(error_bound("float32", 0)) == 2 * 2.0**-23 + 2.0**-22
    True
    """
    p = np.asarray(positions, np.float64)
    return np.asarray(scale, np.float64) * (2 * EPS[dtype] + 2.0**-22 * (p + 1) + norm_term(norm_dim))


def allclose_tolerance(dtype: str, positions, *rotated, rope=None, norm_dim: int = 0) -> dict:
    """``{"rtol": 0, "atol": bound}`` for comparing a call's outputs with the float64 reference
    elementwise (``check_close(got, want, **allclose_tolerance(...))``): the bound at the largest
    of ``positions`` for the longest pair in ``rotated`` (the q and k the call rotated, ``[..., D]``).
    One number for every element, so looser than :func:`error_ratio`'s bound per token. Under
    QK-norm pass the normalised inputs (:func:`ropepool.reference.rms_norm`) and ``norm_dim=D``.

    Example
    -------
    >>> allclose_tolerance("float32", [0, 3], np.array([[3.0, 0.0, 4.0, 0.0]]))["atol"] == 5 * (2**-22 + 2**-22 * 4)
    True
    """
    r = max((float(pair_norms(x, rope).max(initial=0.0)) for x in rotated), default=0.0)
    p = float(np.max(np.asarray(positions, np.float64), initial=0.0))
    return {"rtol": 0.0, "atol": float(error_bound(dtype, p, r, norm_dim))}


def error_ratio(got, want, x, positions, dtype: str, rope=None, norm_dim: int = 0) -> float:
    """The worst ``|got - want| / bound`` over a rotated ``[T, H, D]`` output; <= 1 is within tolerance.

    ``x`` is the input that was rotated (its pair lengths set the bound of each token), ``want``
    the float64 reference, ``rope`` the rotation applied (default: plain NeoX). Under QK-norm ``x``
    is the normalised input and ``norm_dim`` the head size (:func:`norm_term`). NaN anywhere gives
    ``inf``.
    """
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.size == 0:
        return 0.0
    norms = pair_norms(x, rope)  # [T, H, pairs]
    r = np.maximum(norms.max(axis=(1, 2)), np.abs(x).max(axis=(1, 2)))  # [T]: largest pair, or copied element
    bound = error_bound(dtype, positions, r, norm_dim) + 1e-12  # [T]
    err = np.abs(got - want).max(axis=(1, 2))  # [T]
    if np.isnan(err).any():
        return float("inf")
    return float((err / bound).max())


#: ``np.testing.assert_allclose`` bounds for :mod:`ropepool.engine`'s float32 logits against
#: mlx-lm's own forward of the same sequence (same weights, its own RoPE and KV cache). The two
#: differ only in rounding: RoPE angles, and the order attention and the matmuls sum in.
ENGINE_LOGITS_FLOAT32 = dict(rtol=1e-5, atol=1e-5)

#: The same comparison on SmolLM2-135M-Instruct (quantized Q4_1/Q8_0 weights, float32 activations,
#: 30 layers, logits up to about 30): both sides run the same quantized matmuls, but rounding
#: differences (RoPE angles, attention over gathered pool rows against mlx-lm's cache, the
#: order sums run in) grow over 30 layers and are read on larger logits
#: (``benchmarks/engine_logits.py --smollm2`` prints the largest difference).
ENGINE_LOGITS_SMOLLM2 = dict(rtol=0, atol=5e-4)
