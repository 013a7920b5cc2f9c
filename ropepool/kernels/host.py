"""The "cpu" backend: the kernel body compiled for this machine's CPU, run on MLX's buffers.

MLX has no custom-kernel API for its CPU back-end, so on a machine without Metal or CUDA the
fused kernel runs outside MLX: ``host.cpp`` puts the same ``rope_rows.inc`` that Metal and
CUDA compile into loops over the grid, and g++ builds it with ``-O3 -march=native`` (and
``-ffp-contract=off``: no fused multiply-adds, so results are bit for bit those of the
emulator, which checks the body). The build runs once per machine and source hash, in the
kernel cache (:mod:`ropepool.kernels.build`), announced on stderr: 2-4 s measured here.

Shapes: the build holds a specialisation for the attention shape (Hq, Hkv, D) of every
preset in ``ropepool/presets`` (the compiler sees constant head counts and vectorises the
bfloat16 and float32 loops), plus one build with run-time shapes for everything else, 2-5x
slower. Large calls are split over the machine's cores, by tokens, each worker taking at least
2**18 dimension pairs (two workers from T = 205 for Llama-3-8B; below that, starting a thread
costs more than it saves).

How a call runs (:func:`rope_pool_host`): q, k and positions are evaluated and the kernel
reads their memory through NumPy views (the buffer protocol: no copy). It writes q_rot and
k_rot into NumPy buffers copied once into MLX, or, from 4 MiB on, straight into buffers MLX
allocated (:data:`DIRECT_BYTES` says why). Then :func:`ropepool.mlx_ops.place_rows`, the same
donated O(T) scatter the other backends use, places k_rot and v in the pools: the pools are
not mutated, and a call costs O(T) whatever P is. That scatter is MLX's, and on this CPU it
is the largest part of a call (about 5 ns per 8-byte word: 0.2-0.35 ms at T = 64, 6-10 ms at
T = 2048 for Llama-3-8B's two pools). With ``inplace=True`` (:mod:`ropepool.inplace`) the
C++ side copies each token's rows into the pools itself, after rotating, and MLX is not involved.

Example
-------
>>> from ropepool.kernels import host
>>> host.unavailable_reason() is None or "compiler" in host.unavailable_reason()
True
"""

from __future__ import annotations

import ctypes
import os
from functools import lru_cache

import mlx.core as mx
import numpy as np

from .._arrays import dtype_name
from ..mlx_ops import drop_overwritten, place_rows
from ..rope import Rope, plain
from . import source
from .build import CompileError, shared_library, unavailable
from .emulator import STORAGE

HOST_FILE = "host.cpp"
_DTYPE_CODE = {"float32": 0, "float16": 1, "bfloat16": 2}
_FLAGS = ["-std=c++17", "-O3", "-ffp-contract=off", "--param", "max-unswitch-insns=1000", "-pthread",
          f"-I{source.KERNEL_DIR}"]


@lru_cache(maxsize=1)
def fixed_shapes() -> tuple[tuple[int, int, int], ...]:
    """(Hq, Hkv, D) of every preset: the shapes compiled in."""
    from ..models import preset, preset_names

    shapes = {(p.num_qo_heads, p.num_kv_heads, p.head_dim) for p in map(preset, preset_names())}
    return tuple(sorted(shapes))


@lru_cache(maxsize=None)
def _library() -> ctypes.CDLL:
    text = (source.KERNEL_DIR / HOST_FILE).read_text()
    shapes = " ".join(f"X({hq},{hkv},{d})" for hq, hkv, d in fixed_shapes())
    depends = [source.KERNEL_DIR / source.HEADER_FILES["cpu"], source.KERNEL_DIR / source.BODY_FILE]
    flags = [*_FLAGS, f"-DROPEPOOL_SHAPES={shapes}"]
    announce = "ropepool: compiling the fused kernel for this CPU (the 'cpu' backend)"
    try:
        lib = shared_library("ropepool_host", text, [*flags, "-march=native"], depends, announce)
    except CompileError:  # a compiler without -march=native: a portable build
        lib = shared_library("ropepool_host", text, flags, depends, announce)
    fn = getattr(lib, "ropepool_host_rope", None)
    if fn is None:
        raise RuntimeError("the cached library has no ropepool_host_rope: not the one this source builds")
    p, i = ctypes.c_void_p, ctypes.c_int
    fn.argtypes = [i, i, i, i, i, i, i, p, p, p, p, p, p, p, i, i, i, p, p, p, p, i]
    fn.restype = i
    return lib


@lru_cache(maxsize=None)
def unavailable_reason() -> str | None:
    """None if the host build compiles and loads here; otherwise why not."""
    return unavailable(_library, "the 'cpu' backend cannot build")


@lru_cache(maxsize=1)
def default_threads() -> int:
    """The cores this process may run on (at most 8)."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        n = os.cpu_count() or 1
    return max(1, min(n, 8))


@lru_cache(maxsize=64)
def _tables(rope: Rope) -> tuple[np.ndarray, np.ndarray]:
    """inv_freq float32 ``[RD/2]`` and cos_sin_scale float32 ``[1]``, as the kernel reads them."""
    return np.ascontiguousarray(rope.inv_freq32()), np.array([rope.scale], np.float32)


def host_memory(x, storage) -> np.ndarray:
    """The memory of ``x`` (mx.array or NumPy) as a flat NumPy array of ``storage``, row-contiguous.

    A view where ``x`` already is row-contiguous (an mx.array is evaluated first), else a copy.
    The view holds a reference to ``x``, and writing it writes ``x``.
    """
    if isinstance(x, np.ndarray):
        return np.ascontiguousarray(x).reshape(-1).view(storage)
    mx.eval(x)
    if not memoryview(x).c_contiguous:
        x = mx.contiguous(x)
        mx.eval(x)
    return np.frombuffer(x, storage)


def rope_rows_host(q, k, positions, *, rope_base: float | None = None, rope: Rope | None = None,
                   threads: int | None = None, allow_fixed: bool = True, pools: tuple | None = None):
    """``(q_rot [T, Hq, D], k_rot [T, Hkv, D])`` from one run of the host build, in the kind of q.

    q, k, positions : mx.array or NumPy
    rope : the :class:`ropepool.rope.Rope` to apply; default: plain RoPE of ``rope_base``
    pools : ``(v, slots, k_pool, v_pool)`` to also copy k_rot and v into the pools' rows
        ``slots[t]``, in place, guarded like the body's own pool write (a slot outside
        ``[0, P)`` writes nothing). The pools must be writable, row-contiguous host memory; see
        :mod:`ropepool.inplace`.
    allow_fixed : False runs the run-time-shape build even where a specialisation exists
        (tests use it to check both).
    """
    T, Hq, D = q.shape  # [T, Hq, D]
    Hkv = k.shape[1]  # k [T, Hkv, D]
    rope = rope or plain(D, rope_base)
    name = dtype_name(q)
    storage = STORAGE[name]
    q_rot, k_rot = _outputs(q, k, storage)
    if T:
        reads = [host_memory(q, storage), host_memory(k, storage), host_memory(positions, np.int32)]
        writes = [host_memory(x, storage) if isinstance(x, mx.array) else x for x in (q_rot, k_rot)]
        pool_args = (0, None, None, None, None, 0)
        if pools is not None:
            v, slots, k_pool, v_pool = pools
            extra = [host_memory(v, storage), host_memory(slots, np.int32)]
            targets = [host_memory(p, storage) for p in (k_pool, v_pool)]
            if not all(t.size == p.size and t.flags.writeable for t, p in zip(targets, (k_pool, v_pool))):
                raise RuntimeError("the pools are not writable in place (validation should have said so)")
            reads += extra + targets  # kept alive until the call returns
            pool_args = (1, extra[0].ctypes.data, extra[1].ctypes.data, targets[0].ctypes.data,
                         targets[1].ctypes.data, k_pool.shape[0])
        inv_freq, scale = _tables(rope)
        _library().ropepool_host_rope(_DTYPE_CODE[name], T, Hq, Hkv, D, rope.rotary_dim, int(rope.is_neox),
                                      *(x.ctypes.data for x in reads[:3]), inv_freq.ctypes.data, scale.ctypes.data,
                                      writes[0].ctypes.data, writes[1].ctypes.data, threads or default_threads(),
                                      int(allow_fixed), *pool_args)
    if isinstance(q, np.ndarray):
        return q_rot, k_rot
    return tuple(_to_mx(x, q.dtype) for x in (q_rot, k_rot))


#: From this size of q_rot on, the kernel writes into buffers MLX allocates rather than copying
#: NumPy buffers into MLX afterwards. Measured here: allocating in MLX costs a graph evaluation
#: (15-170 us, with page faults), the copy about 0.1 ms per MiB (1.75 ms for bfloat16 T=2048's
#: 21 MiB); at 1 MiB (float32, T=64) the allocation was the slower of the two.
DIRECT_BYTES = 4 << 20


def _outputs(q, k, storage):
    """Memory for q_rot and k_rot: NumPy buffers (NumPy q, or small) or MLX's own (large)."""
    if isinstance(q, np.ndarray) or q.nbytes < DIRECT_BYTES:
        return np.empty(q.shape, storage), np.empty(k.shape, storage)
    q_rot, k_rot = mx.zeros(q.shape, q.dtype), mx.zeros(k.shape, k.dtype)
    mx.eval(q_rot, k_rot)
    for x in (q_rot, k_rot):  # a fresh, plain buffer of x.size elements (not a broadcast scalar)
        if not (memoryview(x).c_contiguous and memoryview(x).nbytes == x.nbytes):
            raise RuntimeError("MLX did not allocate q_rot/k_rot as plain buffers; use backend='mlx'")
    return q_rot, k_rot


#: bfloat16 outputs of up to this many elements are handed to MLX evaluated (see :func:`_to_mx`).
EAGER_BF16 = 1 << 16


def _to_mx(x, dtype) -> mx.array:
    """q_rot or k_rot as an mx.array: MLX's own buffer as is, a NumPy buffer copied once.

    bfloat16 comes as its bits. ``mx.array(bits).view(mx.bfloat16)`` is lazy, and evaluating
    it alone costs a wake-up of MLX's worker thread (100-200 us measured here; nothing when it
    joins the caller's next evaluation). Small outputs (decode) are therefore widened to the
    float32 of the same values, which ``mx.array`` rounds back exactly while it copies (every
    bfloat16 but a NaN with a payload, which the kernel never writes: its NaN is 0x7FC0):
    evaluated at once, 7 us for one Llama-3-8B token, but about 0.5 ns per element.
    """
    if isinstance(x, mx.array):
        return x
    if dtype != mx.bfloat16:
        return mx.array(x)
    if x.size <= EAGER_BF16:
        return mx.array((x.astype(np.uint32) << 16).view(np.float32), dtype=mx.bfloat16)
    return mx.array(x).view(mx.bfloat16)


def rope_pool_host(q, k, v, positions, slots, k_pool, v_pool, *, rope_base=None, rope=None, host_slots=None):
    """``rope_pool_fused`` through the host build; same arguments as the reference, validated
    mx.arrays; ``host_slots`` as in :func:`ropepool.mlx_ops.rope_pool_mlx`.

    This backend synchronises anyway (the kernel reads q and k on the host), so it reads the
    slots on the host too when validation did not: skipped tokens are then dropped before the
    write, and the pools take one plain scatter each, with or without ``check_values``.
    """
    q_rot, k_rot = rope_rows_host(q, k, positions, rope_base=rope_base, rope=rope)
    if host_slots is None:  # check_values=False: duplicates possible, the last token wins
        host_slots = drop_overwritten(host_memory(slots, np.int32), k_pool.shape[0])
    return (q_rot, k_rot, *place_rows(k_pool, v_pool, k_rot, v, slots, host_slots))
