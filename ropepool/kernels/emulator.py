"""Run the kernel body on the CPU as a GPU would: the C++ driver's grid emulator, called with ctypes.

This verifies the very text that Metal and CUDA compile (``rope_rows.inc``), on a machine
with neither. The C++ driver (``driver.cpp``, the same file that is the "cpu" backend; see
:mod:`ropepool.kernels.host`) is built here plainly (``-O1``, 32-bit indices as on the GPUs)
and its ``ropepool_emulate`` runs every thread of the grid one at a time, cos and sin computed
per thread as the GPUs do: whole blocks of :data:`ropepool.kernels.source.BLOCK` threads, as
CUDA launches them, so the edge guard is exercised; optionally in reverse order, since a
race-free kernel must not care. ``cpu.h`` maps the names (float16 and bfloat16 are their bits, converted with
round-to-nearest-even, as MLX rounds).

Every output buffer sits between two guard regions of known bytes
(:data:`GUARD_BYTE`), and q_rot/k_rot start poisoned (all bits set: NaN), so an element
the kernel forgets, or a byte it writes outside its buffer, shows.

Example
-------
>>> import numpy as np
>>> from ropepool.kernels.emulator import emulate, unavailable_reason
>>> if unavailable_reason() is None:
...     q = np.ones((1, 2, 4), np.float32); k = v = np.ones((1, 1, 4), np.float32)
...     pool = np.zeros((3, 1, 4), np.float32)
...     run = emulate(q, k, v, np.array([0]), np.array([2]), pool, pool, rope_base=10000.0)
...     assert run.guards_intact and (run.k_pool[2] == run.k_rot[0]).all()
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..rope import rope_table
from . import source
from .build import compiler, shared_library, unavailable
from .source import DTYPE_CODE, STORAGE, driver_depends, driver_text

GUARD_BYTE = 0xA5
GUARD_BYTES = 256
POISON_BYTE = 0xFF  # all bits set: NaN in every float format

__all__ = ["emulate", "EmulatorRun", "STORAGE", "unavailable_reason", "compiler"]


@lru_cache(maxsize=None)
def _library() -> ctypes.CDLL:
    lib = shared_library(
        "ropepool_emulator",
        driver_text(),
        ["-std=c++17", "-O1", f"-I{source.KERNEL_DIR}"],
        driver_depends(),
        "ropepool: compiling the kernel's grid emulator (for the tests)",
    )
    if not hasattr(lib, "ropepool_emulate"):
        raise RuntimeError("the cached library has no ropepool_emulate: not the one this source builds")
    fn = lib.ropepool_emulate
    p, i = ctypes.c_void_p, ctypes.c_int
    fn.argtypes = [i, i, i, ctypes.c_uint, ctypes.c_uint] + [p] * 13 + [i] * 7 + [p] * 3 + [i] + [p] * 3
    fn.restype = None
    return lib


@lru_cache(maxsize=None)
def unavailable_reason() -> str | None:
    """None if the emulator builds here; otherwise why not (for ``pytest.skip``)."""
    return unavailable(_library, "the CPU emulator cannot build")


def float32_to_bfloat16_bits(x) -> np.ndarray:
    """Round float32 to bfloat16 (nearest, ties to even, NaN -> 0x7FC0, as MLX), as uint16 bits."""
    x = np.ascontiguousarray(x, np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), r)


def bfloat16_bits_to_float32(bits) -> np.ndarray:
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def to_float64(x, dtype: str) -> np.ndarray:
    """Values of an emulator array (bfloat16 given as bits) as float64."""
    if dtype == "bfloat16":
        return bfloat16_bits_to_float32(x).astype(np.float64)
    return np.asarray(x, np.float64)


class _Guarded:
    """A C-contiguous array of ``shape`` between two guard regions of GUARD_BYTE.

    Each guard is at least GUARD_BYTES and at least two rows (``shape[1:]``), so a write to
    row -2, -1, P or P+1 lands in a guard.
    """

    def __init__(self, shape, np_dtype, fill: np.ndarray | None):
        itemsize = np.dtype(np_dtype).itemsize
        n = int(np.prod(shape)) * itemsize
        self.guard = max(GUARD_BYTES, 2 * int(np.prod(shape[1:])) * itemsize)
        self.raw = np.full(n + 2 * self.guard, GUARD_BYTE, np.uint8)
        self.inner = self.raw[self.guard : self.guard + n].view(np_dtype).reshape(shape)
        if fill is None:
            self.raw[self.guard : self.guard + n] = POISON_BYTE
        else:
            self.inner[...] = fill

    def guards_intact(self) -> bool:
        g = self.guard
        return bool((self.raw[:g] == GUARD_BYTE).all() and (self.raw[-g:] == GUARD_BYTE).all())

    def ptr(self):
        return self.raw.ctypes.data + self.guard


@dataclass
class EmulatorRun:
    """What one emulated launch produced (arrays in :data:`STORAGE` form) and whether guards held."""

    q_rot: np.ndarray  # [T, Hq, D]
    k_rot: np.ndarray  # [T, Hkv, D]
    k_pool: np.ndarray  # [P, Hkv, D]; the input pool unless write_pool
    v_pool: np.ndarray  # [P, Hkv, D]
    guards_intact: bool
    grid: int
    launched: int
    k_fp8: np.ndarray | None = None  # [T, Hkv, D] uint8, the codes (FP8 pools only)
    v_fp8: np.ndarray | None = None


def emulate(
    q,
    k,
    v,
    positions,
    slots,
    k_pool,
    v_pool,
    *,
    rope_base: float,
    dtype: str | None = None,
    write_pool: bool = True,
    reverse: bool = False,
    block: int = source.BLOCK,
    q_norm_weight=None,
    k_norm_weight=None,
    norm_eps: float = 1e-6,
    k_scale: float = 1.0,
    v_scale: float = 1.0,
    **variant,
) -> EmulatorRun:
    """Run the kernel body once over the whole grid, on NumPy buffers.

    Parameters
    ----------
    q : ``[T, Hq, D]``; k, v : ``[T, Hkv, D]``; k_pool, v_pool : ``[P, Hkv, D]``
        NumPy arrays in :data:`STORAGE` form for ``dtype`` (bfloat16 as uint16 bits).
    positions, slots : integer ``[T]`` (int32 on the way in)
    rope_base : float
    variant : the op's ``rotary_dim``, ``is_neox``, ``rope_scaling``, ``max_position_embeddings``
    q_norm_weight, k_norm_weight, norm_eps : QK-norm, as the op takes them (weights ``[D]``)
    k_scale, v_scale : FP8 scales; uint8 pools make the launch the FP8 kernel (codes in ``k_fp8``, ``v_fp8``)
    dtype : "float32", "float16" or "bfloat16"; default from q's NumPy dtype (uint16 = bfloat16)
    write_pool : also run the guarded in-kernel pool write (``RP_WRITE_POOL``)
    reverse : run the threads in reverse order
    block : threads per block; the emulator runs whole blocks past the grid's edge

    Returns
    -------
    EmulatorRun
    """
    if dtype is None:
        dtype = {np.dtype(v_): k_ for k_, v_ in STORAGE.items()}[np.dtype(q.dtype)]
    np_dtype = STORAGE[dtype]
    q, k, v = (np.ascontiguousarray(a, np_dtype) for a in (q, k, v))
    T, Hq, D = q.shape  # [T, Hq, D]
    Hkv = k.shape[1]
    P = k_pool.shape[0]
    positions = np.ascontiguousarray(positions, np.int32)
    slots = np.ascontiguousarray(slots, np.int32)
    rope = rope_table(D, rope_base, **variant)
    inv_freq = np.ascontiguousarray(rope.inv_freq32())  # [RD/2]
    scale = np.array([rope.scale], np.float32)
    q_rot = _Guarded(q.shape, np_dtype, None)
    k_rot = _Guarded(k.shape, np_dtype, None)
    fp8 = np.asarray(k_pool).dtype == np.uint8
    pool_dtype = np.uint8 if fp8 else np_dtype
    kp = _Guarded(k_pool.shape, pool_dtype, np.asarray(k_pool, pool_dtype))
    vp = _Guarded(v_pool.shape, pool_dtype, np.asarray(v_pool, pool_dtype))
    codes = [_Guarded(k.shape, np.uint8, None) for _ in range(2)] if fp8 else []
    weights = [None if w is None else np.ascontiguousarray(w, np.float32) for w in (q_norm_weight, k_norm_weight)]
    eps = np.array([norm_eps], np.float32)
    kv_scale = np.array([k_scale, v_scale], np.float32)
    at = [0 if w is None else w.ctypes.data for w in weights]
    positions_shape = np.array([T], np.int32)
    k_pool_shape = np.array([P, Hkv, D], np.int32)
    grid = source.grid_size(T, Hq, Hkv, D)
    _library().ropepool_emulate(
        DTYPE_CODE[dtype],
        int(write_pool),
        int(reverse),
        grid,
        block,
        q.ctypes.data,
        k.ctypes.data,
        v.ctypes.data,
        positions.ctypes.data,
        slots.ctypes.data,
        inv_freq.ctypes.data,
        scale.ctypes.data,
        positions_shape.ctypes.data,
        k_pool_shape.ctypes.data,
        q_rot.ptr(),
        k_rot.ptr(),
        kp.ptr(),
        vp.ptr(),
        Hq,
        Hkv,
        D,
        rope.rotary_dim,
        int(rope.is_neox),
        int(weights[0] is not None),
        int(weights[1] is not None),
        at[0] or None,
        at[1] or None,
        eps.ctypes.data,
        int(fp8),
        kv_scale.ctypes.data,
        *((c.ptr() for c in codes) if fp8 else (None, None)),
    )
    intact = all(b.guards_intact() for b in (q_rot, k_rot, kp, vp, *codes))
    launched = -(-grid // block) * block
    fp8_out = [c.inner.copy() for c in codes] if fp8 else [None, None]
    return EmulatorRun(
        q_rot.inner.copy(), k_rot.inner.copy(), kp.inner.copy(), vp.inner.copy(), intact, grid, launched, *fp8_out
    )
