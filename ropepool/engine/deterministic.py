"""``deterministic=True``: every reduction of a step in one order per token, whatever else the step holds.

A request's logits then come out bit for bit the same whether it is served alone or beside others,
at any place in the batch, prefilled whole or in chunks, with its prefix computed or found in the
radix cache, at any page size and at any OpenBLAS thread count. Where the default path sums:

===============================  =============================  ==============================================
reduction                        default (MLX on the CPU)       deterministic
===============================  =============================  ==============================================
projections, MLP, head           OpenBLAS ``sgemm``: a row's    :func:`~ropepool.kernels.invariant.rowdot`:
(float ``Linear``, experts,      sum changes with M (small-     each element summed in an order fixed by K
MLA's per-head ``MultiLinear``)  matrix and GEMV paths)
quantized layers                 MLX's ``quantized_matmul``,    the same (its sum per row does not depend on
                                 one row at a time              the other rows)
attention over the pool rows     ``scaled_dot_product_attention``  :func:`attention`: key j always in lane
                                 (BLAS over the batch's longest  ``j % 8`` of one fixed split; the keys padded
                                 context, softmax over it)      with zeros, which add nothing
RMSNorm, RoPE, FP8, sampling     one token at a time            the same
===============================  =============================  ==============================================

:func:`invariant_view` gives a layer (or any module) whose float matmuls go through the kernel: a
shallow copy, as the runner's layer views are; the model itself is never changed.
"""

from __future__ import annotations

import copy

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from ..kernels.invariant import LANES, rowdot
from ..kernels.invariant import unavailable_reason as _kernel_unavailable
from .errors import EngineArgumentError


class DeterminismUnavailable(EngineArgumentError):
    """``deterministic=True`` cannot be kept here: off the CPU, or no C++ compiler for the kernel."""


def check_available() -> None:
    """Raise :class:`DeterminismUnavailable` with the reason when the promise cannot be kept here: MLX's
    default device is not the CPU, or the kernel cannot be built."""
    device = mx.default_device()
    if device.type != mx.DeviceType.cpu:
        raise DeterminismUnavailable(
            f"deterministic=True is kept on the CPU only, and MLX's default device is {device}: on a GPU MLX's "
            "quantized matmul and attention pick their kernels by the number of rows; mx.set_default_device(mx.cpu)"
        )
    reason = _kernel_unavailable()
    if reason is not None:
        raise DeterminismUnavailable(f"deterministic=True needs the batch-invariant matmul, and {reason}")


def _promoted(a: mx.Dtype, b: mx.Dtype) -> mx.Dtype:
    """The dtype MLX gives ``a op b`` (what the layer's own matmul returns)."""
    return a if a == b else (mx.zeros((), a) + mx.zeros((), b)).dtype


def _float32(w: mx.array) -> mx.array:
    w = w.astype(mx.float32) if w.dtype != mx.float32 else w
    mx.eval(w)
    return w


class InvariantLinear(nn.Module):
    """``x [..., K]`` -> ``x @ weight.T + bias`` ``[..., N]``, each row summed as alone (see :func:`rowdot`).

    Holds the weight (in float32, ``[1, N, K]``) and bias of a float ``nn.Linear`` or ``nn.Embedding``
    (as its ``as_linear``); the result has the dtype the layer's own would have."""

    def __init__(self, weight: mx.array, bias: mx.array | None = None):
        super().__init__()
        self.dtype = weight.dtype
        self.w = _float32(weight)[None]  # [1, N, K]
        self.b = bias

    def __call__(self, x):
        N, K = self.w.shape[1:]
        y = rowdot(x.reshape(1, -1, K), self.w)[0].reshape(*x.shape[:-1], N)  # float32
        if self.b is not None:
            y = y + self.b
        return y.astype(_promoted(x.dtype, self.dtype))


class InvariantSwitchLinear(nn.Module):
    """A float ``SwitchLinear`` (mlx-lm's experts): ``x [..., M, K]`` with ``indices [...]`` -> ``[..., M, N]``,
    each token's product with its expert summed as alone; sorted or not, the same rows."""

    def __init__(self, layer):
        super().__init__()
        self.dtype = layer["weight"].dtype
        self.w = _float32(layer["weight"])  # [E, N, K]
        self.b = layer["bias"] if "bias" in layer else None

    def __call__(self, x, indices, sorted_indices=False):
        M, K = x.shape[-2:]
        batch = np.broadcast_shapes(tuple(x.shape[:-2]), tuple(indices.shape))
        a = mx.broadcast_to(x, (*batch, M, K)).reshape(-1, M, K)
        idx = np.array(mx.broadcast_to(indices, batch)).reshape(-1)
        y = rowdot(a, self.w, idx).reshape(*batch, M, -1)
        if self.b is not None:
            y = y + mx.expand_dims(self.b[indices], -2)
        return y.astype(_promoted(x.dtype, self.dtype))


class InvariantMultiLinear(nn.Module):
    """A float ``MultiLinear`` (MLA's per-head matrices ``[H, out, in]``): ``x [..., H, M, in]`` ->
    ``[..., H, M, out]`` (``transpose=False``: ``x [..., H, M, out]`` -> ``[..., H, M, in]``)."""

    def __init__(self, layer):
        super().__init__()
        self.dtype = layer.weight.dtype
        self.w = _float32(layer.weight)  # [H, out, in]
        self.wt = _float32(mx.contiguous(layer.weight.swapaxes(-1, -2)))  # [H, in, out]

    def __call__(self, x, transpose=True):
        w = self.w if transpose else self.wt
        H, M, K = x.shape[-3:]
        lead = x.shape[:-3]
        a = x.reshape(-1, M, K)  # [B * H, M, K]
        idx = np.tile(np.arange(H, dtype=np.int32), a.shape[0] // H)
        y = rowdot(a, w, idx).reshape(*lead, H, M, w.shape[1])
        return y.astype(_promoted(x.dtype, self.dtype))


def _swapped(child):
    """``child`` with its float matmuls through the kernel (a new object), or ``child`` itself."""
    kind = type(child).__name__
    if isinstance(child, nn.Linear):
        return InvariantLinear(child.weight, child["bias"] if "bias" in child else None)
    if kind == "SwitchLinear":
        return InvariantSwitchLinear(child)
    if kind == "MultiLinear":
        return InvariantMultiLinear(child)
    if isinstance(child, nn.Module):
        return invariant_view(child)
    if isinstance(child, list):
        new = [_swapped(c) for c in child]
        return new if any(a is not b for a, b in zip(new, child)) else child
    return child


def invariant_view(module: nn.Module) -> nn.Module:
    """A shallow copy of ``module`` (recursively, where needed) whose float ``Linear``, ``SwitchLinear`` and
    ``MultiLinear`` layers sum each row as alone; quantized layers and everything else are the very same
    objects. ``module`` itself is untouched."""
    view = None
    for name, child in module.items():
        new = _swapped(child)
        if new is not child:
            view = view if view is not None else copy.copy(module)
            view[name] = new
    return module if view is None else view


def invariant_head(head):
    """The runner's head (``lm_head`` or the embedding's ``as_linear``) with a float matrix through the kernel."""
    owner = getattr(head, "__self__", None)  # a bound as_linear
    if isinstance(owner, nn.Embedding):
        return InvariantLinear(owner.weight)
    return _swapped(head)


def scores(q: mx.array, k: mx.array) -> mx.array:
    """``q [R, Hq, N, D]`` against ``k [R, Hkv, L, D]`` -> float32 ``[R, Hq, N, L]``; query head h reads
    KV head ``h // (Hq / Hkv)``, each dot product summed as alone."""
    R, Hq, N, D = q.shape
    Hkv, L = k.shape[1], k.shape[2]
    kv = (np.arange(R)[:, None] * Hkv + np.arange(Hq)[None, :] // (Hq // Hkv)).reshape(-1)  # [R * Hq]
    return rowdot(q.reshape(R * Hq, N, D), k.reshape(R * Hkv, L, D), kv).reshape(R, Hq, N, L)


def attention(q, k, v, *, scale: float, mask=None, sinks=None) -> mx.array:
    """Softmax attention with one fixed split of the keys: ``[R, Hq, N, D]`` in q's dtype.

    ``q [R, Hq, N, D]``, ``k [R, Hkv, L, D]``, ``v [R, Hkv, L, Dv]``; ``mask`` bool ``[R, 1, N, L]`` (True:
    seen) or float (added to the scores), or None; ``sinks [Hq]``: a logit per head that joins every
    softmax's denominator (GPT-OSS). What :func:`mlx.core.fast.scaled_dot_product_attention` computes.

    Key j is summed in lane ``j % 8`` of every dot product over the keys, and the keys are padded to a
    multiple of 8 with zero rows the mask hides (their weight is exactly 0): a query's sum over the keys
    it sees is the same whatever L is, that is, however long the other requests of the step are and
    however many of its own keys are new this step.
    """
    R, Hq, N, _ = q.shape
    Hkv, L, Dv = k.shape[1], k.shape[2], v.shape[3]
    pad = -L % LANES
    seen = mx.ones((R, 1, N, L), mx.bool_) if mask is None or mask.dtype != mx.bool_ else mask
    if pad:
        k = mx.concatenate([k, mx.zeros((R, Hkv, pad, k.shape[3]), k.dtype)], axis=2)
        v = mx.concatenate([v, mx.zeros((R, Hkv, pad, Dv), v.dtype)], axis=2)
        seen = mx.concatenate([mx.broadcast_to(seen, (R, 1, N, L)), mx.zeros((R, 1, N, pad), mx.bool_)], axis=-1)
    s = scores(q.astype(mx.float32) * mx.array(scale, mx.float32), k)  # [R, Hq, N, L + pad]
    if mask is not None and mask.dtype != mx.bool_:
        s = s + mx.pad(mask.astype(mx.float32), [(0, 0)] * 3 + [(0, pad)])
    s = mx.where(seen, s, mx.array(-np.inf, mx.float32))
    top = mx.max(s, axis=-1, keepdims=True)  # [R, Hq, N, 1]: a max is the same in any order
    if sinks is not None:
        sink = sinks.astype(mx.float32)[None, :, None, None]
        top = mx.maximum(top, sink)
    p = mx.exp(s - top)  # [R, Hq, N, L + pad]
    ones = mx.ones((R, Hkv, 1, L + pad), mx.float32)
    vt = mx.concatenate([v.astype(mx.float32).swapaxes(-1, -2), ones], axis=2)  # [R, Hkv, Dv + 1, L + pad]
    out = scores(p, vt)  # [R, Hq, N, Dv + 1]: sum_j p_j v_j and, last, sum_j p_j
    total = out[..., Dv:]
    if sinks is not None:
        total = total + mx.exp(sink - top)
    return (out[..., :Dv] / total).astype(q.dtype)
