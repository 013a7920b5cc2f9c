"""The fused kernel backends (metal, cuda). See the kernel issue: not written yet."""

from __future__ import annotations

import mlx.core as mx


def statuses():
    """``{name: (BackendStatus, implementation or None)}`` for the fused-kernel backends."""
    from ..backends import BackendStatus

    metal = mx.metal.is_available()
    cuda = hasattr(mx, "cuda") and mx.cuda.is_available()
    return {
        "metal": (BackendStatus("metal", False, "fused kernel not written yet" if metal
                                else "no Metal back-end on this machine"), None),
        "cuda": (BackendStatus("cuda", False, "fused kernel not written yet" if cuda
                               else "no CUDA back-end on this machine (needs an NVIDIA GPU and mlx[cuda13])"), None),
    }
