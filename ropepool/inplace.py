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
- a backend that runs on the host: "cpu" (the kernel body compiled for this CPU) or "mlx"
  (MLX ops). ``backend="auto"`` picks the first of those that runs. The backend rotates, then
  :func:`ropepool.pool_write.write_in_place` copies each token's rows into the pools, skipping
  slots outside ``[0, P)``.

Every other array that shares a pool's memory sees the new rows: a NumPy view of it, or an
mx.array the pool was sliced or reshaped from. The write waits for MLX's queued work first
(``mx.synchronize``), so an evaluation still reading the pool is not raced; but an MLX
expression that reads a pool and is not evaluated yet sees the new rows when it is: evaluate
what must see the old rows before the call.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np

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
    own = _owns_memory(k_pool) and _owns_memory(v_pool)
    if own and all(x.size == 0 or (x is not k_pool and x is not v_pool and _owns_memory(x)) for x in inputs.values()):
        return None  # separate allocations, every one (NumPy arrays that own their memory)
    lazy = [x for x in (k_pool, v_pool, *inputs.values()) if isinstance(x, mx.array)]
    if lazy:
        mx.eval(*lazy)  # one evaluation
    pools = None
    for name, x in inputs.items():
        if x.size == 0 or (own and x is not k_pool and x is not v_pool and _owns_memory(x)):
            continue  # separate allocations cannot overlap
        if pools is None:
            pools = {"k_pool": _memory(k_pool), "v_pool": _memory(v_pool)}
        mem = _memory(x)
        for pool_name, pool in pools.items():
            if np.may_share_memory(mem, pool):
                return name, pool_name
    return None
