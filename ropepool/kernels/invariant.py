"""Batch-invariant dot products on the host: the one reduction of ``Engine(deterministic=True)``.

:func:`rowdot` computes ``c[b, m, n] = sum_k a[b, m, k] * w[index[b], n, k]`` in float32 with
``rowdot.cpp``, whose every element is summed in an order that depends on K alone (eight lanes over
k, then a fixed tree, then the last ``K % 8`` products; each product added with one fused multiply-add
where the CPU has them, :func:`fused`, else a multiply and an add). A row's result is therefore the same bits
whatever else is in the call: how many rows (M), its place among them, the batch, the thread count.
OpenBLAS promises none of that (a row of ``x @ w.T`` changes with M: ``benchmarks/deterministic_cost.py``
and notebook 15 measure it). :func:`rowdot_reference` is the same sum in NumPy, the same order.

Shapes: ``a [B, M, K]``, ``w [E, N, K]``, ``index`` int ``[B]`` in ``[0, E)`` -> ``c [B, M, N]``.
A linear layer is ``B = E = 1``; attention's scores are one entry per (request, query head) with
``index`` naming the request's KV head; a mixture of experts names each token's expert.
"""

from __future__ import annotations

import ctypes
import os
from functools import lru_cache

import mlx.core as mx
import numpy as np

from .._arrays import host_memory
from .build import CompileError, shared_library, unavailable
from .source import KERNEL_DIR

SOURCE = KERNEL_DIR / "rowdot.cpp"
#: The lanes each element is summed over: attention pads its keys to a multiple of this with zeros,
#: which add nothing, so that no key ever falls in the tail.
LANES = 8
_FLAGS = ["-std=c++17", "-O3", "-ffp-contract=off", "-fno-fast-math", "-pthread"]
#: Below this many multiply-adds a call runs on one thread (a thread's start costs more).
THREADED_FROM = 1 << 20


@lru_cache(maxsize=None)
def _library(portable: bool = False) -> ctypes.CDLL:
    """The kernel built for this CPU (``-march=native``), or ``portable`` (the compiler's baseline)."""
    text = SOURCE.read_text()
    announce = "ropepool: compiling the batch-invariant matmul for this CPU (deterministic=True)"
    lib = None
    if not portable:
        try:
            lib = shared_library("ropepool_rowdot", text, [*_FLAGS, "-march=native"], announce=announce)
        except CompileError:  # a compiler without -march=native: a portable build
            lib = None
    if lib is None:
        lib = shared_library("ropepool_rowdot", text, _FLAGS, announce=announce)
    p, i64 = ctypes.c_void_p, ctypes.c_int64
    lib.ropepool_rowdot.argtypes = [p, p, p, p, i64, i64, i64, i64, i64, ctypes.c_int]
    lib.ropepool_rowdot.restype = ctypes.c_int
    lib.ropepool_rowdot_fused.restype = ctypes.c_int
    return lib


def fused() -> bool:
    """Whether this machine's build adds each product with a fused multiply-add (one rounding)."""
    return bool(_library().ropepool_rowdot_fused())


def unavailable_reason() -> str | None:
    """Why :func:`rowdot` cannot run here (no compiler, a failed build), or None."""
    return unavailable(_library, "the batch-invariant matmul")


def threads() -> int:
    """The kernel's threads: the cores this process may use (the result is the same at any count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _host(x) -> np.ndarray:
    if isinstance(x, mx.array) and x.dtype != mx.float32:
        x = x.astype(mx.float32)
    return host_memory(x, np.float32)


def rowdot(a, w, index=None, *, n_threads: int | None = None, portable: bool = False) -> mx.array:
    """``c [B, M, N]`` float32, ``c[b, m, n] = sum_k a[b, m, k] * w[index[b], n, k]``, batch-invariant.

    Parameters
    ----------
    a : mx.array or NumPy ``[B, M, K]`` (cast to float32)
    w : mx.array or NumPy ``[E, N, K]`` (cast to float32)
    index : int ``[B]`` in ``[0, E)``; None: ``b`` (then E must equal B, or be 1)
    n_threads : the threads to split the columns over; None: :func:`threads` for large calls
    portable : run the compiler's baseline build (no fused multiply-add) instead of this CPU's

    Raises
    ------
    ValueError
        Shapes that do not fit, or an index outside ``[0, E)``.
    RuntimeError
        The kernel cannot be built here (:func:`unavailable_reason`).
    """
    if a.ndim != 3 or w.ndim != 3 or a.shape[2] != w.shape[2]:
        raise ValueError(f"rowdot: a [B, M, K] and w [E, N, K] with one K, got {tuple(a.shape)} and {tuple(w.shape)}")
    (B, M, K), (E, N, _) = a.shape, w.shape
    if index is None:
        if E not in (1, B):
            raise ValueError(f"rowdot: without an index w needs 1 or B = {B} entries, got {E}")
        index = np.zeros(B, np.int32) if E == 1 else np.arange(B, dtype=np.int32)
    index = np.ascontiguousarray(np.asarray(index, np.int32).reshape(-1))
    if index.shape[0] != B:
        raise ValueError(f"rowdot: index must hold B = {B} entries, got {index.shape[0]}")
    out = np.empty((B, M, N), np.float32)
    if out.size == 0:
        return mx.array(out)
    a_host, w_host = _host(a), _host(w)
    if n_threads is None:
        n_threads = threads() if B * M * N * K >= THREADED_FROM else 1
    status = _library(portable).ropepool_rowdot(
        a_host.ctypes.data, w_host.ctypes.data, index.ctypes.data, out.ctypes.data, B, M, N, K, E, n_threads
    )
    if status != 0:
        raise ValueError(f"rowdot: index values must lie in [0, {E}), got {index.min()}..{index.max()}")
    return mx.array(out)


def rowdot_reference(a, w, index=None, *, fma: bool | None = None) -> np.ndarray:
    """:func:`rowdot` in NumPy, each element summed in the kernel's order (slow: for tests).

    ``fma`` (default: :func:`fused`) adds each product as one fused multiply-add, emulated in float64:
    the product is exact there, the sum rounded twice (to float64, then float32), which differs from one
    rounding about once in 2**29 sums."""
    fma = fused() if fma is None else fma
    a, w = np.asarray(a, np.float32), np.asarray(w, np.float32)
    B, M, K = a.shape
    index = (np.zeros(B, int) if w.shape[0] == 1 else np.arange(B)) if index is None else np.asarray(index)
    K8 = K - K % LANES
    x, y = a[:, :, None, :], w[index][:, None, :, :]  # [B, M, 1, K], [B, 1, N, K]

    def madd(acc, k):
        if fma:
            exact = x[..., k].astype(np.float64) * y[..., k].astype(np.float64)
            return (acc.astype(np.float64) + exact).astype(np.float32)
        return acc + x[..., k] * y[..., k]

    lanes = np.zeros((B, M, w.shape[1], LANES), np.float32)
    for k in range(0, K8, LANES):
        lanes = madd(lanes, slice(k, k + LANES))
    s = ((lanes[..., 0] + lanes[..., 1]) + (lanes[..., 2] + lanes[..., 3])) + (
        (lanes[..., 4] + lanes[..., 5]) + (lanes[..., 6] + lanes[..., 7])
    )
    for k in range(K8, K):
        s = madd(s, k)
    return s
