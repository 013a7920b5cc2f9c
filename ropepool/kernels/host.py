"""The "cpu" backend: the kernel body compiled for this machine's CPU, run on MLX's or NumPy's buffers.

MLX has no custom-kernel API for its CPU back-end, so on a machine without Metal or CUDA the
fused kernel runs outside MLX: the C++ driver (``driver.cpp``) runs the same ``rope_rows.inc``
that Metal and CUDA compile as loops over tokens, over a few threads when a call is large,
built by g++ with ``-O3 -march=native -ffp-contract=off`` (no fused multiply-adds: bit for bit
the emulator's results). Libraries live in the private kernel cache (:mod:`ropepool.kernels.build`).

Which shapes are specialised: one library runs every shape with its sizes read at run time;
the first call with a new (Hq, Hkv, D, rotary_dim, pairing) queues a build of a library with
those sizes compiled in (the compiler then vectorises the rows), and calls use it once it is
there (:func:`specialise` builds one and waits). Both give the same bits. One background thread
builds the queue one library at a time, at most :data:`MAX_SPECIALISED` shapes per process (the
rest keep the run-time build; ``ROPEPOOL_MAX_SPECIALISED=0`` builds none); at exit, queued builds are dropped and the one running finishes. ``python -m ropepool build-kernels`` (``make lab``, ``make test``, ``doctor``)
builds the run-time library ahead, so no call waits for a compiler after set-up.

A call (:func:`rope_rows_host`) reads q, k and positions where they are (NumPy arrays, or the
memory of evaluated mx.arrays, through the buffer protocol: no copy) and writes q_rot and k_rot
into fresh buffers. It writes no pool: :func:`rotate_host` is the backend's form, and
:mod:`ropepool.pool_write` places its rows.

Example
-------
>>> from ropepool.kernels import host
>>> host.unavailable_reason() is None or "compiler" in host.unavailable_reason()
True
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import os
import queue
import threading
from functools import lru_cache

import mlx.core as mx
import numpy as np

from .._arrays import dtype_name, host_memory, to_numpy
from ..fusion import PLAIN, Fusion
from ..rope import Rope, plain
from . import source
from .build import CompileError, shared_library, unavailable
from .source import DTYPE_CODE, STORAGE, driver_depends, driver_text

log = logging.getLogger(__name__)

_FLAGS = [
    "-std=c++17",
    "-O3",
    "-ffp-contract=off",
    "--param",
    "max-unswitch-insns=1000",
    "-pthread",
    "-DRP_HOST",
    f"-I{source.KERNEL_DIR}",
]


def build_driver(stem: str, flags: list, announce: str | None = None) -> ctypes.CDLL:
    """``driver.cpp`` built with ``flags`` (``-march=native`` first, else portable); cached."""
    try:
        return shared_library(stem, driver_text(), [*flags, "-march=native"], driver_depends(), announce)
    except CompileError:  # a compiler without -march=native: a portable build
        return shared_library(stem, driver_text(), flags, driver_depends(), announce)


def _entry(lib: ctypes.CDLL):
    fn = getattr(lib, "ropepool_rope", None)
    if fn is None:
        raise RuntimeError("the cached library has no ropepool_rope: not the one this source builds")
    p, i = ctypes.c_void_p, ctypes.c_int
    fn.argtypes = [i, i, i, i, i, i, i, p, p, p, p, p, p, p, i, i, p, p, p, p, i, i, i, p, p, p, i, p, p, p]
    fn.restype = i
    return fn


@lru_cache(maxsize=None)
def _library() -> ctypes.CDLL:
    """The run-time-shape build: every shape, sizes read at run time."""
    lib = build_driver("ropepool_host", _FLAGS, "ropepool: compiling the fused kernel for this CPU (the 'cpu' backend)")
    _entry(lib)
    return lib


#: (Hq, Hkv, D, rotary_dim, is_neox): the specialisation key, the same for every dtype.
ShapeKey = tuple


def shape_key(Hq: int, Hkv: int, D: int, rope: Rope) -> ShapeKey:
    return (Hq, Hkv, D, rope.rotary_dim, rope.is_neox)


def _specialised_library(key: ShapeKey) -> ctypes.CDLL:
    hq, hkv, d, rd, neox = key
    stem = f"ropepool_host_{hq}x{hkv}x{d}_{rd}{'neox' if neox else 'gptj'}"
    fixed = f"-DROPEPOOL_SHAPE={hq},{hkv},{d},{rd},{'true' if neox else 'false'}"
    return build_driver(stem, [*_FLAGS, fixed])


def _max_specialised(default: int = 8) -> int:
    """``$ROPEPOOL_MAX_SPECIALISED`` if it is an integer >= 0 (0: never specialise), else ``default``."""
    try:
        value = int(os.environ.get("ROPEPOOL_MAX_SPECIALISED", ""))
    except ValueError:
        return default
    return value if value >= 0 else default


#: Shapes a process specialises at most (``$ROPEPOOL_MAX_SPECIALISED``, else 8); calls with others run
#: the run-time build.
MAX_SPECIALISED = _max_specialised()

_special: dict = {}  # ShapeKey -> the specialised entry point, once built
_started: set = set()  # ShapeKeys seen by kernel(): queued, built, failed or past MAX_SPECIALISED
_lock = threading.Lock()
_build_lock = threading.Lock()  # one compiler at a time, queued or asked for
_queue: queue.Queue = queue.Queue()  # ShapeKeys to build; None stops the worker
_worker: list = []  # the background builder, once started


def specialise(key: ShapeKey):
    """Build (or load from the cache) the library for ``key`` and use it from now on; waits.

    Returns the entry point. Raises RuntimeError where it cannot build.
    """
    fn = _special.get(key)
    if fn is None:
        with _build_lock:
            fn = _special.get(key) or _entry(_specialised_library(key))
        with _lock:
            _special[key] = fn
            _started.add(key)
    return fn


def specialised(key: ShapeKey) -> bool:
    """Whether calls with ``key`` run a build with its sizes compiled in."""
    return key in _special


def _build_in_background(key: ShapeKey) -> None:
    try:
        specialise(key)  # under _build_lock
        log.info("ropepool: 'cpu' kernel specialised for (Hq, Hkv, D, rotary_dim, neox) = %s", key)
    except Exception as err:  # the run-time build keeps serving this shape
        log.info("ropepool: no specialised 'cpu' kernel for %s: %s", key, err)


def _build_queued() -> None:
    while (key := _queue.get()) is not None:
        try:
            _build_in_background(key)
        finally:
            _queue.task_done()
    _queue.task_done()


def _stop_building() -> None:
    """At exit: drop the queued builds and let the running one finish (its compiler has a timeout)."""
    try:
        while True:
            _queue.get_nowait()
            _queue.task_done()
    except queue.Empty:
        pass
    if _worker:
        _queue.put(None)
        _worker[0].join()


def wait_for_builds() -> None:
    """Wait until every queued specialisation is built (or failed)."""
    _queue.join()


def kernel(key: ShapeKey):
    """The entry point for ``key``: its specialisation once built, else the run-time build, and
    on the first call with ``key`` the specialisation's build is queued (up to :data:`MAX_SPECIALISED`)."""
    fn = _special.get(key)
    if fn is not None:
        return fn
    if key not in _started:
        with _lock:
            queue_it = key not in _started and len(_started) < MAX_SPECIALISED
            _started.add(key)
            if queue_it:
                _queue.put(key)
                if not _worker:
                    _worker.append(threading.Thread(target=_build_queued, name="ropepool-build", daemon=True))
                    _worker[0].start()
                    atexit.register(_stop_building)
    return _library().ropepool_rope


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


_TABLES: dict = {}  # id(rope) -> (rope, tables): hashing a Rope hashes its inv_freq tuple


def _tables(rope: Rope) -> tuple[np.ndarray, np.ndarray, int, int]:
    """inv_freq float32 ``[RD/2]`` and cos_sin_scale float32 ``[1]``, as the kernel reads them,
    and their addresses; kept per Rope object (the op's come from ``rope_table``'s cache)."""
    hit = _TABLES.get(id(rope))
    if hit is not None and hit[0] is rope:
        return hit[1]
    inv_freq, scale = np.ascontiguousarray(rope.inv_freq32()), np.array([rope.scale], np.float32)
    tables = inv_freq, scale, inv_freq.__array_interface__["data"][0], scale.__array_interface__["data"][0]
    if len(_TABLES) >= 64:
        _TABLES.clear()
    _TABLES[id(rope)] = (rope, tables)
    return tables


_WEIGHTS: dict = {}  # id(weight) -> (weight, its float32 copy): a model's norm weights converted once


def _weight32(w) -> np.ndarray:
    """``w`` as a contiguous float32 NumPy array, kept per weight object (an mx.array is immutable)."""
    hit = _WEIGHTS.get(id(w))
    if hit is not None and hit[0] is w:
        return hit[1]
    out = np.ascontiguousarray(to_numpy(w, np.float32))
    if isinstance(w, mx.array):  # a NumPy array can change in place: converted every call
        out.setflags(write=False)
        if len(_WEIGHTS) >= 256:
            _WEIGHTS.clear()
        _WEIGHTS[id(w)] = (w, out)
    return out


def _norm_args(fusion: Fusion) -> tuple:
    """QK-norm's arguments for ``ropepool_rope``: flags, float32 weights and eps (alive for the call)."""
    if not (fusion.qnorm or fusion.knorm):
        return (0, 0, None, None, None), ()
    keep = [_weight32(w) if w is not None else None for w in (fusion.q_norm_weight, fusion.k_norm_weight)]
    keep.append(np.array([fusion.norm_eps], np.float32))
    return (int(fusion.qnorm), int(fusion.knorm), *(None if x is None else _address(x) for x in keep)), keep


def rope_rows_host(
    q,
    k,
    positions,
    *,
    rope_base: float | None = None,
    rope: Rope | None = None,
    threads: int | None = None,
    allow_fixed: bool = True,
    fusion: Fusion = PLAIN,
    v=None,
):
    """``(q_rot [T, Hq, D], k_rot [T, Hkv, D])`` from one run of the host build, in the kind of q;
    with an FP8 ``fusion`` also ``(k_fp8, v_fp8)``, uint8 ``[T, Hkv, D]`` NumPy arrays (``v`` needed).

    q, k, positions : mx.array or NumPy, in the storage of :data:`STORAGE` (validated by the op)
    rope : the :class:`ropepool.rope.Rope` to apply; default: plain RoPE of ``rope_base``
    fusion : QK-norm and FP8 (:mod:`ropepool.fusion`)
    allow_fixed : False runs the run-time-shape build even where a specialisation exists
        (tests use it to check both).
    """
    T, Hq, D = q.shape  # [T, Hq, D]
    Hkv = k.shape[1]  # k [T, Hkv, D]
    rope = rope or plain(D, rope_base)
    name = dtype_name(q)
    storage = STORAGE[name]
    q_rot, k_rot = _outputs(q, k, storage)
    codes = (np.empty(k.shape, np.uint8), np.empty(k.shape, np.uint8)) if fusion.fp8 else ()
    if T:
        fn = kernel(shape_key(Hq, Hkv, D, rope)) if allow_fixed else _library().ropepool_rope
        arrays = (q, k, positions, v) if fusion.fp8 else (q, k, positions)
        if not isinstance(q, np.ndarray) or not isinstance(k, np.ndarray) or not isinstance(positions, np.ndarray):
            mx.eval(*(x for x in arrays if isinstance(x, mx.array)))
        mem = [_buffer(q, storage), _buffer(k, storage), _buffer(positions, np.int32)]  # alive: the call
        if fusion.fp8:
            mem.append(_buffer(v, storage))
        q_rot_at, k_rot_at = _address(_buffer(q_rot, storage)), _address(_buffer(k_rot, storage))
        v_at = _address(mem[3]) if fusion.fp8 else None  # v read for its codes
        pool_args = (0, v_at, None, None, None, 0)  # the driver writes no pool: pool_write does
        norm_args, alive = _norm_args(fusion)
        scales = fusion.scales() if fusion.fp8 else None
        fp8_args = (1, _address(scales), *map(_address, codes)) if fusion.fp8 else (0, None, None, None)
        _, _, inv_freq_at, scale_at = _tables(rope)
        fn(
            DTYPE_CODE[name],
            T,
            Hq,
            Hkv,
            D,
            rope.rotary_dim,
            rope.is_neox,
            *map(_address, mem[:3]),
            inv_freq_at,
            scale_at,
            q_rot_at,
            k_rot_at,
            threads or default_threads(),
            *pool_args,
            *norm_args,
            *fp8_args,
        )
        del alive, scales
    if isinstance(q, np.ndarray):
        return (q_rot, k_rot, *codes)
    return (_to_mx(q_rot, q.dtype), _to_mx(k_rot, q.dtype), *codes)


_c_char_from_buffer, _addressof = ctypes.c_char.from_buffer, ctypes.addressof


def _address(x: np.ndarray) -> int:
    """The address of ``x``'s first byte (row-contiguous ``x``)."""
    try:
        return _addressof(_c_char_from_buffer(x))  # a third of __array_interface__'s cost
    except (TypeError, ValueError):  # read-only or empty
        return x.__array_interface__["data"][0]


def _buffer(x, storage) -> np.ndarray:
    """``x``'s memory, row-contiguous, as a NumPy array the kernel reads (see :func:`host_memory`)."""
    if isinstance(x, np.ndarray):
        return np.ascontiguousarray(x)  # x itself when it is row-contiguous
    return host_memory(x, storage)


#: From this size of q_rot on, the kernel writes into buffers MLX allocates rather than copying
#: NumPy buffers into MLX afterwards: allocating in MLX costs a graph evaluation (a fixed cost),
#: the copy a cost per byte, so small outputs are copied and large ones written in place.
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
    it alone costs a wake-up of MLX's worker thread (nothing when it joins the caller's next
    evaluation). Small outputs (decode) are therefore widened to the float32 of the same values,
    which ``mx.array`` rounds back exactly while it copies (every bfloat16 but a NaN with a
    payload, which the kernel never writes: its NaN is 0x7FC0): evaluated at once, at a cost per
    element, hence only up to :data:`EAGER_BF16` elements.
    """
    if isinstance(x, mx.array):
        return x
    if dtype != mx.bfloat16:
        return mx.array(x)
    if x.size <= EAGER_BF16:
        return mx.array((x.astype(np.uint32) << 16).view(np.float32), dtype=mx.bfloat16)
    return mx.array(x).view(mx.bfloat16)


def rotate_host(q, k, v, positions, *, rope: Rope, fusion: Fusion = PLAIN):
    """``(q_rot, k_rot, k_rows, v_rows)`` through the host build: the rotated rows, and the rows a
    pool takes (k_rot and v, or with an FP8 ``fusion`` their e4m3 codes as uint8 NumPy arrays).
    q, k, v, positions validated (mx.arrays or NumPy); :mod:`ropepool.pool_write` writes the pools."""
    out = rope_rows_host(q, k, positions, rope=rope, fusion=fusion, v=v)
    return out if fusion.fp8 else (out[0], out[1], out[1], v)
