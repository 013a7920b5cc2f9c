"""``inplace=True``: the pools written in place, as SGLang's kernel writes them.

By default ``rope_pool_fused`` leaves the pools it is given alone and returns new ones (MLX
reuses their buffers when the caller rebinds them, so that costs O(T) too). With
``inplace=True`` it writes k_rot and v into the rows ``slots[t]`` of the very pools passed and
returns those same objects, the way a serving engine's KV cache works: no MLX scatter into the
pools, and NumPy pools written where they are (the default call copies each once, O(P)). That is
the decode path of a serving loop; ``python -m ropepool bench`` times it against the alternatives
("Decode in place").

What it asks (checked before anything is written: ``inplace_unsupported`` in the catalog):

- pools that are writable, row-contiguous host memory: NumPy arrays, or mx.arrays while MLX's
  default device is the CPU (Metal and CUDA keep theirs elsewhere);
- two distinct buffers for k_pool and v_pool;
- a backend that runs on the host: "cpu" (the kernel body compiled for this CPU; its C++ side
  then copies each token's rows into the pools, skipping slots outside ``[0, P)``) or "mlx"
  (MLX rotates, the rows are then copied in on the host). ``backend="auto"`` picks the first of
  those that runs.

Every other array that shares a pool's memory sees the new rows: a NumPy view of it, or an
mx.array the pool was sliced or reshaped from. The write waits for MLX's queued work first
(``mx.synchronize``), so an evaluation still reading the pool is not raced; but an MLX
expression that reads a pool and is not evaluated yet sees the new rows when it is: evaluate
what must see the old rows before the call.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from ._arrays import dtype_name, to_mx, to_numpy
from .fusion import PLAIN, Fusion
from .mlx_ops import drop_overwritten, encode_kv, rotate_qk

#: The backends that can write pools in place, in ``auto``'s order.
INPLACE_BACKENDS = ("cpu", "mlx")


def pool_problem(pool) -> str | None:
    """Why ``pool`` cannot be written in place, or None if it can."""
    if isinstance(pool, np.ndarray):
        flags = pool.flags  # a new object on every access
        if not flags.writeable:
            return "a read-only NumPy array"
        if not flags.c_contiguous:
            return "a strided (not row-contiguous) NumPy view"
        if not pool.dtype.isnative:
            return f"a NumPy array in non-native byte order ({pool.dtype.str})"
        if not flags.aligned:
            return "a NumPy array whose memory is not aligned to its dtype"
        return None
    if mx.default_device() != mx.cpu:
        return f"an mx.array while MLX's default device is {mx.default_device()}"
    if not memoryview(pool).c_contiguous:  # evaluates the pool
        return "a strided (not row-contiguous) mx.array"
    return None


def _bytes(pool) -> np.ndarray:
    return pool.reshape(-1).view(np.uint8) if isinstance(pool, np.ndarray) else np.frombuffer(pool, np.uint8)


def _owns_memory(x) -> bool:
    """A NumPy array that owns its allocation: no other such array shares any of it."""
    return isinstance(x, np.ndarray) and x.flags.owndata


def pools_overlap(k_pool, v_pool) -> bool:
    """Whether the two (writable, row-contiguous) pools share any memory."""
    if k_pool is not v_pool and _owns_memory(k_pool) and _owns_memory(v_pool):
        return False
    return bool(np.may_share_memory(_bytes(k_pool), _bytes(v_pool)))


_UNSIGNED = {1: mx.uint8, 2: mx.uint16, 4: mx.uint32, 8: mx.uint64}


def _memory(x) -> np.ndarray:
    """A NumPy view of the memory of ``x`` (an evaluated mx.array, any strides), for overlap tests."""
    if isinstance(x, np.ndarray):
        return x
    try:  # a row-contiguous array's bytes, through the buffer protocol: no new graph node to evaluate
        return np.frombuffer(x, np.uint8)
    except (BufferError, ValueError, TypeError):  # strided
        bits = x.view(_UNSIGNED[x.dtype.size])  # same buffer; NumPy has no bfloat16
        mx.eval(bits)
        return np.asarray(memoryview(bits))


def input_overlapping_pools(inputs: dict, k_pool, v_pool) -> tuple[str, str] | None:
    """``(input name, pool name)`` of the first input sharing memory with a pool, or None."""
    mx.eval(*(x for x in (k_pool, v_pool, *inputs.values()) if isinstance(x, mx.array)))  # one evaluation
    pools = {"k_pool": _memory(k_pool), "v_pool": _memory(v_pool)}
    own = _owns_memory(k_pool) and _owns_memory(v_pool)
    for name, x in inputs.items():
        if x.size == 0 or (own and x is not k_pool and x is not v_pool and _owns_memory(x)):
            continue  # separate allocations cannot overlap
        mem = _memory(x)
        for pool_name, pool in pools.items():
            if np.may_share_memory(mem, pool):
                return name, pool_name
    return None


def rope_pool_inplace(backend: str, q, k, v, positions, slots, k_pool, v_pool, *, rope,
                      host_slots: np.ndarray | None, fusion: Fusion = PLAIN):
    """The validated op, writing the pools in place; ``(q_rot, k_rot, k_pool, v_pool)``.

    q_rot and k_rot come in the kind of q; k_pool and v_pool are the objects passed (FP8 pools
    get the code rows, :mod:`ropepool.fusion`).
    """
    from .kernels import host

    if any(isinstance(p, mx.array) for p in (k_pool, v_pool)):
        mx.synchronize()  # queued MLX work that reads a pool finishes before its rows change
    if host_slots is None:  # check_values=False: duplicates possible, the last token wins
        host_slots = drop_overwritten(host.host_memory(slots, np.int32), k_pool.shape[0])
        slots = host_slots.astype(np.int32)
    # else: validation read the slots and refused duplicates: host_slots holds slots' values
    if backend == "cpu":
        rows = (v, slots, k_pool, v_pool)
        q_rot, k_rot = host.rope_rows_host(q, k, positions, rope=rope, pools=rows, fusion=fusion)[:2]
        return q_rot, k_rot, k_pool, v_pool
    q_rot, k_rot = rotate_qk(to_mx(q), to_mx(k), to_mx(positions), rope, fusion)
    k_rows, v_rows = encode_kv(k_rot, to_mx(v), fusion) if fusion.fp8 else (k_rot, v)
    mx.eval(q_rot, k_rot, k_rows, v_rows)
    keep = np.flatnonzero((host_slots >= 0) & (host_slots < k_pool.shape[0]))  # tokens that write
    storage = host.STORAGE[dtype_name(k_pool)]
    for pool, rows in ((k_pool, k_rows), (v_pool, v_rows)):
        target = host.host_memory(pool, storage).reshape(pool.shape)  # a writable view of the pool
        target[host_slots[keep]] = host.host_memory(rows, storage).reshape(rows.shape)[keep]
    if isinstance(q, np.ndarray):
        return to_numpy(q_rot), to_numpy(k_rot), k_pool, v_pool
    return q_rot, k_rot, k_pool, v_pool
