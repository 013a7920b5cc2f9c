"""Run the kernel body on the CPU: compiled by g++ under a small grid emulator, called with ctypes.

This verifies the very text that Metal and CUDA compile (``rope_rows.inc``), on a machine
with neither. ``cpu.h`` maps the names (float16 is ``_Float16``; bfloat16 is bit
manipulation with round-to-nearest-even, as MLX rounds), and a loop over thread ids plays
the grid: whole blocks of :data:`ropepool.kernels.source.BLOCK` threads, as CUDA launches
them, so the edge guard is exercised; optionally in reverse order, since a race-free kernel
must not care.

Every output buffer sits between two guard regions of known bytes
(:data:`GUARD_BYTE`), and q_rot/k_rot start poisoned (all bits set: NaN), so an element
the kernel forgets, or a byte it writes outside its buffer, shows.

The shared library is built once per source hash in a cache directory
(:mod:`ropepool.kernels.build`), never in the repository.

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

GUARD_BYTE = 0xA5
GUARD_BYTES = 256
POISON_BYTE = 0xFF  # all bits set: NaN in every float format

#: NumPy storage of each dtype in the emulator (NumPy has no bfloat16: its bits, as uint16).
STORAGE = {"float32": np.float32, "float16": np.float16, "bfloat16": np.uint16}
_CPP_TYPE = {"float32": "float", "float16": "_Float16", "bfloat16": "rp_bfloat16"}

_SIGNATURE = """(rp_uint rp_thread_index, const DType* q, const DType* k, const DType* v,
    const int32_t* positions, const int32_t* slots, const float* inv_freq, const float* cos_sin_scale,
    const int* positions_shape, const int* k_pool_shape, DType* q_rot, DType* k_rot,
    DType* k_pool, DType* v_pool, const int Hq, const int Hkv, const int D, const int RD, const bool NEOX)"""


def _wrapper() -> str:
    """The C++ translation unit: cpu.h, the body twice (with and without the pool write), a grid loop."""
    body = source.body("cpu")
    parts = [source.header("cpu"), "\n// ---- the kernel body, exactly as the GPU backends compile it ----\n"]
    parts.append(f"template <typename DType>\nstatic void rope_rows{_SIGNATURE} {{\n{body}\n}}\n")
    parts.append("#define RP_WRITE_POOL\n")
    parts.append(f"template <typename DType>\nstatic void rope_rows_pool{_SIGNATURE} {{\n{body}\n}}\n")
    parts.append("#undef RP_WRITE_POOL\n")
    for name, ctype in _CPP_TYPE.items():
        parts.append(f"""
extern "C" void ropepool_emulate_{name}(int write_pool, int reverse, rp_uint grid, rp_uint block,
    const void* q, const void* k, const void* v, const int32_t* positions, const int32_t* slots,
    const float* inv_freq, const float* cos_sin_scale, const int* positions_shape, const int* k_pool_shape,
    void* q_rot, void* k_rot, void* k_pool, void* v_pool, int Hq, int Hkv, int D, int RD, int NEOX) {{
  typedef {ctype} DType;
  const rp_uint launched = (grid + block - 1) / block * block;  // whole blocks, as CUDA launches
  for (rp_uint n = 0; n < launched; ++n) {{
    const rp_uint g = reverse ? launched - 1 - n : n;
    auto f = write_pool ? rope_rows_pool<DType> : rope_rows<DType>;
    f(g, (const DType*)q, (const DType*)k, (const DType*)v, positions, slots, inv_freq, cos_sin_scale,
      positions_shape, k_pool_shape, (DType*)q_rot, (DType*)k_rot, (DType*)k_pool, (DType*)v_pool,
      Hq, Hkv, D, RD, NEOX != 0);
  }}
}}
""")
    return "".join(parts)


@lru_cache(maxsize=None)
def _library() -> ctypes.CDLL:
    lib = shared_library("ropepool_emulator", _wrapper(), ["-std=c++17", "-O1"])
    missing = [name for name in _CPP_TYPE if not hasattr(lib, f"ropepool_emulate_{name}")]
    if missing:
        raise RuntimeError(f"the cached library has no ropepool_emulate_{missing[0]}: not the one this source builds")
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
        self.inner = self.raw[self.guard:self.guard + n].view(np_dtype).reshape(shape)
        if fill is None:
            self.raw[self.guard:self.guard + n] = POISON_BYTE
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


def emulate(q, k, v, positions, slots, k_pool, v_pool, *, rope_base: float, dtype: str | None = None,
            write_pool: bool = True, reverse: bool = False, block: int = source.BLOCK, **variant) -> EmulatorRun:
    """Run the kernel body once over the whole grid, on NumPy buffers.

    Parameters
    ----------
    q : ``[T, Hq, D]``; k, v : ``[T, Hkv, D]``; k_pool, v_pool : ``[P, Hkv, D]``
        NumPy arrays in :data:`STORAGE` form for ``dtype`` (bfloat16 as uint16 bits).
    positions, slots : integer ``[T]`` (int32 on the way in)
    rope_base : float
    variant : the op's ``rotary_dim``, ``is_neox``, ``rope_scaling``, ``max_position_embeddings``
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
    kp = _Guarded(k_pool.shape, np_dtype, np.asarray(k_pool, np_dtype))
    vp = _Guarded(v_pool.shape, np_dtype, np.asarray(v_pool, np_dtype))
    positions_shape = np.array([T], np.int32)
    k_pool_shape = np.array([P, Hkv, D], np.int32)
    grid = source.grid_size(T, Hq, Hkv, D)
    fn = getattr(_library(), f"ropepool_emulate_{dtype}")
    p = ctypes.c_void_p
    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_uint, ctypes.c_uint] + [p] * 13 + [ctypes.c_int] * 5
    fn.restype = None
    fn(int(write_pool), int(reverse), grid, block, q.ctypes.data, k.ctypes.data, v.ctypes.data,
       positions.ctypes.data, slots.ctypes.data, inv_freq.ctypes.data, scale.ctypes.data,
       positions_shape.ctypes.data, k_pool_shape.ctypes.data, q_rot.ptr(), k_rot.ptr(), kp.ptr(), vp.ptr(),
       Hq, Hkv, D, rope.rotary_dim, int(rope.is_neox))
    intact = all(b.guards_intact() for b in (q_rot, k_rot, kp, vp))
    launched = -(-grid // block) * block
    return EmulatorRun(q_rot.inner.copy(), k_rot.inner.copy(), kp.inner.copy(), vp.inner.copy(), intact,
                       grid, launched)
