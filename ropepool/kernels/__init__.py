"""The fused kernel: one source, run as Metal or CUDA through MLX, verified on the CPU.

Files
-----
``rope_rows.inc``
    The kernel body, written once. One thread per (token, head, dimension pair) over q's
    and k's heads together, so q and k rotate in one launch; threads past the grid's edge
    return at once (CUDA launches whole blocks).
``metal.h``, ``cuda.h``, ``cpu.h``
    What differs per backend: type names, float conversions, cos and sin, 1/sqrt.
``e4m3.inc``
    ``rp_e4m3``: float32 to an FP8 e4m3 code by integer operations, the same on every backend.
    The body's QK-norm (``RP_QK_NORM``) and FP8 (``RP_FP8``) blocks make each a kernel text of its
    own (:class:`ropepool.kernels.source.Variant`).
``source.py``
    Composes the text MLX compiles and names it with a hash of that text.
``fused.py``
    ``rotate_metal`` and ``rotate_cuda``: the rotated (and FP8-encoded) rows, through
    ``mx.fast.metal_kernel`` / ``mx.fast.cuda_kernel``, built once and cached.
``driver.cpp``
    The one C++ driver of the body, built by g++: as the grid emulator (``emulator.py``: every
    GPU thread in turn, cos and sin per thread, guard regions around every output; for tests
    without a GPU) and as the "cpu" backend (``host.py``: ``-O3 -march=native``, tokens over a
    few threads, cos and sin from a per-(token, pair) table filled by the same function; the
    backend ``auto`` picks on a machine without Metal or CUDA but with a C++ compiler).
``build.py``
    Compiles C++ once per source hash into the private kernel cache (``python -m ropepool
    build-kernels`` builds ahead).

Where it has run
----------------
Which compiler checked the body, and on what it ran, is "What ran where" in docs/backends.md (NVIDIA's
NVRTC checks the CUDA text from ``benchmarks/nvrtc.py``). On a machine with Metal or CUDA the
backend first runs a self-check against the reference (:func:`self_check`) and reports itself
unavailable, with the reason, if the kernel fails to build or disagrees; each other variant (dtype,
rotation, QK-norm, FP8) is checked on its first call and runs on ``mlx`` if it fails
(:mod:`ropepool.kernels.variants`);
``tests/test_kernel_backends.py`` holds the Metal and CUDA tests (skipped elsewhere).

Design: the kernel rotates, a donated scatter places
----------------------------------------------------
SGLang's Metal kernel writes the pool rows in place. An MLX custom kernel cannot: its
outputs are fresh buffers and its inputs are read-only, so a kernel that produced the new
pools would first copy all P rows, an O(P) cost per call (about 1 GiB per layer per call for
a Llama-3-8B pool of a million rows in float16). So the kernel produces only the rotated
rows, ``q_rot`` and ``k_rot``, and :func:`ropepool.pool_write.write` writes ``k_rot``
and ``v`` into the pools. MLX donates the pool's buffer to that scatter when the caller
rebinds the pool (``k_pool = k_pool_new``), so the call costs O(T) whatever P is, and a
pool row holds exactly the bits of its k_rot row because it is a copy of them.

Safety does not depend on ``check_values``: the kernel writes only ``q_rot`` and ``k_rot``,
inside its grid, and the write plan skips any slot outside ``[0, P)``. The body also holds
the guarded in-kernel pool write (``RP_WRITE_POOL``) that SGLang's in-place design uses; the
CPU emulator compiles it and checks, with guard bytes around each pool, that no slot value
makes it write outside the pool. ``inplace=True`` (:mod:`ropepool.inplace`) is that design on
the CPU: the backend rotates, then :func:`ropepool.pool_write.write_in_place` copies each
token's rows into its pool row, with the same guard (row copies rather than the body's
per-thread write: on a CPU they keep the rotation loop vectorised).
"""

from __future__ import annotations

from functools import lru_cache

import mlx.core as mx
import numpy as np

from . import host
from .fused import rotate_cuda, rotate_metal
from .host import rotate_host
from .variants import FALLEN_BACK, guarded

__all__ = ["statuses", "rotate_metal", "rotate_cuda", "rotate_host", "self_check", "FALLEN_BACK"]

IMPLEMENTATIONS = {"metal": rotate_metal, "cuda": rotate_cuda, "cpu": rotate_host}
#: The GPU kernels: every variant beyond the plain one is checked on its first call (:mod:`.variants`).
GUARDED = ("metal", "cuda")
_API = {
    "metal": "through mx.fast.metal_kernel",
    "cuda": "through mx.fast.cuda_kernel",
    "cpu": "compiled by g++ for this CPU, run on MLX's buffers",
}


def _missing(name: str) -> str | None:
    """Why ``name``'s back-end is not on this machine, or None if it is."""
    if name == "metal":
        return None if mx.metal.is_available() else "no Metal back-end on this machine (needs Apple Silicon)"
    if name == "cuda":
        present = hasattr(mx, "cuda") and mx.cuda.is_available()
        return None if present else "no CUDA back-end on this machine (needs an NVIDIA GPU and mlx[cuda13])"
    if mx.default_device() != mx.cpu:
        return f"MLX's default device is {mx.default_device()}: the host build works on arrays in CPU memory"
    return host.unavailable_reason()


@lru_cache(maxsize=None)
def self_check(name: str) -> str | None:
    """Run the kernel once on a small GQA case against the reference; None if it agrees.

    Otherwise a one-line reason. Cached: it runs once per process, when the back-end exists.
    """
    from ..inputs import make_inputs
    from ..reference import rope_pool_reference
    from ..rope import plain
    from ..shapes import Shapes
    from ..tolerance import error_bound

    kw = make_inputs(
        Shapes(tokens=3, num_qo_heads=4, num_kv_heads=2, head_dim=8, pool_rows=5),
        "float32",
        slots=[4, -1, 0],
        positions=[0, 5, 1000],
    )
    args = [kw[n] for n in ("q", "k", "v", "positions", "slots", "k_pool", "v_pool")]
    try:
        out = IMPLEMENTATIONS[name](*args[:4], rope=plain(8, kw["rope_base"]))[:2]  # q_rot, k_rot
        mx.eval(*out)
    except Exception as err:  # a compile or launch failure: report it, never crash the registry
        return f"the fused kernel failed to build or run: {type(err).__name__}: {str(err).splitlines()[0]}"
    ref = rope_pool_reference(*args, rope_base=kw["rope_base"])
    largest = max(float(np.abs(np.array(kw[n])).max()) for n in ("q", "k"))
    tol = 2 * float(error_bound("float32", 1000, largest))  # a pair is at most sqrt(2) x its largest element
    for label, got, want in zip(("q_rot", "k_rot"), out, ref):
        if not np.abs(np.array(got) - want).max() <= tol:
            return f"the fused kernel disagrees with the reference on {label} (self-check)"
    return None


def statuses():
    """``{name: (runs here, where it runs or why not, implementation or None)}`` for the fused-kernel backends.

    Worked out once per process (the back-ends a process has do not change) and then cached:
    the registry asks on every call of the op.
    """
    return dict(_statuses())


@lru_cache(maxsize=1)
def _statuses():
    out = {}
    for name in IMPLEMENTATIONS:
        problem = _missing(name) or self_check(name)
        if problem is None:
            where = "" if name == "cpu" else f" on {mx.default_device()}"
            impl = guarded(name, IMPLEMENTATIONS[name]) if name in GUARDED else IMPLEMENTATIONS[name]
            out[name] = (True, f"fused kernel {_API[name]}{where}", impl)
        else:
            out[name] = (False, problem, None)
    return out
