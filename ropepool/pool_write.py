"""The one pool writer: a :class:`Plan` of which token writes which pool row, carried out.

Validation reads the slots on the host and makes the plan (:func:`plan`); the backends only
rotate (and, for an FP8 cache, encode) the rows; this module puts the rows ``[T, Hkv, D]``
into the pools ``[P, Hkv, D]``, bit for bit (rows move as unsigned words, whatever their dtype):

- :func:`write`: new MLX pools, O(T) when the caller rebinds the pools (MLX donates their
  buffers): one block copy (``mx.slice_update``) when the rows written are one run of
  consecutive rows (a decode step, a prefill into fresh rows), else one scatter;
- :func:`write_in_place`: the same rows copied into the pools' own host memory (NumPy arrays,
  or mx.arrays on MLX's CPU device), as :mod:`ropepool.inplace` describes.

A slot outside ``[0, P)`` (-1 by convention) writes nothing; of tokens naming one row, the last
one wins it (possible only with ``check_values=False``: validation refuses both otherwise).

Example
-------
>>> import numpy as np
>>> p = plan(np.array([5, -1, 6]), pool_rows=8)
>>> p.rows.tolist(), p.tokens.tolist(), p.start
([5, 6], [0, 2], None)
>>> plan(np.array([3, 4, 5]), pool_rows=8).start
3
"""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx
import numpy as np

from ._arrays import host_memory, to_mx


@dataclass(frozen=True)
class Plan:
    """Token ``tokens[i]`` writes pool row ``rows[i]``.

    rows : int32 ``[W]``, distinct rows in ``[0, P)``
    tokens : int32 ``[W]``, or None when every token writes, in order (W = T)
    start : ``rows[0]`` when ``tokens`` is None and the rows are consecutive (one block), else None
    """

    rows: np.ndarray
    tokens: np.ndarray | None
    start: int | None


NOTHING = Plan(np.zeros(0, np.int32), np.zeros(0, np.int32), None)


def plan(slots: np.ndarray, pool_rows: int, *, checked: bool = False) -> Plan:
    """The write of ``slots`` (integers ``[T]``, read on the host) into a pool of ``pool_rows`` rows.

    ``checked``: the slots passed value validation (none ``>= P``, no two writing tokens on one
    row), so only negative slots can skip.
    """
    T = slots.size
    if T == 1:  # decode: plain Python comparisons beat NumPy's per-call cost
        s = int(slots[0])
        return _one_row(s) if 0 <= s < pool_rows else NOTHING
    s = np.asarray(slots, np.int64)
    writes = (s >= 0) if checked else (s >= 0) & (s < pool_rows)
    if T and writes.all():
        if (np.diff(s) == 1).all():
            return Plan(s.astype(np.int32), None, int(s[0]))
        if checked or np.unique(s).size == T:
            return Plan(s.astype(np.int32), None, None)
        tokens = np.arange(T)
    else:
        tokens = np.flatnonzero(writes)
    if not checked:  # of tokens naming one row, keep the last
        _, last = np.unique(s[tokens][::-1], return_index=True)
        if last.size != tokens.size:
            tokens = np.sort(tokens[::-1][last])
    return Plan(s[tokens].astype(np.int32), tokens.astype(np.int32), None) if tokens.size else NOTHING


_ONE_ROW: dict = {}  # row -> the Plan of one token writing it (a decode step's write), made once


def _one_row(row: int) -> Plan:
    """The plan of one token writing pool row ``row`` (its arrays read-only: the plan is shared)."""
    p = _ONE_ROW.get(row)
    if p is None:
        rows = np.array([row], np.int32)
        rows.setflags(write=False)
        if len(_ONE_ROW) >= 4096:
            _ONE_ROW.clear()
        p = _ONE_ROW[row] = Plan(rows, None, row)
    return p


def row_word(x):
    """The widest unsigned integer type whose size divides a row's last axis (D elements) in bytes.

    The copies move bits, not values, and MLX's CPU scatter costs about the same per element
    whatever its width: a float16 row moved as uint64 words is a quarter as many elements.
    """
    nbytes = x.shape[-1] * x.dtype.size
    return next(
        w for w in (mx.uint64, mx.uint32, mx.uint16, mx.uint8) if nbytes % w.size == 0 and w.size >= x.dtype.size
    )


def write(p: Plan, k_pool: mx.array, v_pool: mx.array, k_rows, v_rows) -> tuple[mx.array, mx.array]:
    """New pools ``[P, Hkv, D]``: ``k_pool``, ``v_pool`` with ``k_rows``, ``v_rows`` ``[T, Hkv, D]`` placed
    as ``p`` says. The caller's pool objects are not mutated; rebind them for O(T)."""
    if p.rows.size == 0:
        return mx.array(k_pool), mx.array(v_pool)  # new objects: the caller's pools keep their values
    k_rows, v_rows = to_mx(k_rows), to_mx(v_rows)
    if p.tokens is not None:
        pick = mx.array(p.tokens)
        k_rows, v_rows = k_rows[pick], v_rows[pick]  # [W, Hkv, D]
    if p.start is not None:
        return _write_block(k_pool, v_pool, k_rows, v_rows, mx.array([p.start], dtype=mx.int32))
    return _write_both(k_pool, v_pool, k_rows, v_rows, mx.array(p.rows))


def _scatter(pool: mx.array, rows: mx.array, slots: mx.array) -> mx.array:
    word = row_word(pool)
    out = pool.view(word)  # a new object (the caller's pool keeps its value), same buffer; [P, Hkv, W]
    out[slots] = rows.view(word)  # [W, Hkv, words] into [P, Hkv, words], bit for bit
    return out.view(pool.dtype)


def _copy_block(pool: mx.array, rows: mx.array, start: mx.array) -> mx.array:
    """``rows [W, Hkv, D]`` copied over pool rows ``start .. start + W - 1``, bit for bit."""
    word = row_word(pool)
    return mx.slice_update(pool.view(word), rows.view(word), start, axes=(0,)).view(pool.dtype)


@mx.compile
def _write_both(k_pool, v_pool, k_rows, v_rows, slots):
    return _scatter(k_pool, k_rows, slots), _scatter(v_pool, v_rows, slots)


@mx.compile
def _write_block(k_pool, v_pool, k_rows, v_rows, start):
    return _copy_block(k_pool, k_rows, start), _copy_block(v_pool, v_rows, start)


#: A row's size in bytes modulo 8 -> the widest unsigned word that divides it.
_WORD_OF = {0: np.uint64, 4: np.uint32, 2: np.uint16, 6: np.uint16}


def _host_rows(x) -> np.ndarray:
    """The memory of ``x`` ``[N, Hkv, D]`` (row-contiguous) as ``[N, words]`` of the widest word that divides a row."""
    n = x.shape[0]
    if n and isinstance(x, np.ndarray) and x.flags.c_contiguous:  # a view of x's rows as they are
        return x.reshape(n, -1).view(np.uint8).view(_WORD_OF.get(x.nbytes // n % 8, np.uint8))
    mem = host_memory(x, np.uint8)
    row_bytes = mem.size // n if n else 1
    return mem.view(_WORD_OF.get(row_bytes % 8, np.uint8)).reshape(n, -1)


def write_in_place(p: Plan, k_pool, v_pool, k_rows, v_rows) -> None:
    """Copy ``k_rows``, ``v_rows`` ``[T, Hkv, D]`` into the pools' own memory as ``p`` says.

    The pools must be writable, row-contiguous host memory (:mod:`ropepool.inplace`). MLX's queued
    work finishes first (``mx.synchronize``), so an evaluation still reading a pool is not raced.
    """
    if p.rows.size == 0:
        return
    k_src, v_src = _host_rows(k_rows), _host_rows(v_rows)  # evaluates mx.array rows
    if isinstance(k_pool, mx.array) or isinstance(v_pool, mx.array):
        mx.synchronize()  # queued MLX work that reads a pool finishes before its rows change
    _copy_host_rows(p, k_pool, k_src)
    _copy_host_rows(p, v_pool, v_src)


def _copy_host_rows(p: Plan, pool, src: np.ndarray) -> None:
    target = _host_rows(pool)  # a writable view of the pool, [P, words]
    if p.tokens is not None:
        src = src[p.tokens]
    if p.start is not None:
        target[p.start : p.start + src.shape[0]] = src
    else:
        target[p.rows] = src


# One pool: MLA's latent pool [P, 1, kv_lora_rank + rope_dim] (:mod:`ropepool.mla`), same plan, same rules.


def write_one(p: Plan, pool: mx.array, rows) -> mx.array:
    """A new pool ``[P, H, W]``: ``pool`` with ``rows [T, H, W]`` placed as ``p`` says (rebind it for O(T))."""
    if p.rows.size == 0:
        return mx.array(pool)
    rows = to_mx(rows)
    if p.tokens is not None:
        rows = rows[mx.array(p.tokens)]  # [W, H, W]
    if p.start is not None:
        return _write_block_one(pool, rows, mx.array([p.start], dtype=mx.int32))
    return _write_one(pool, rows, mx.array(p.rows))


@mx.compile
def _write_one(pool, rows, slots):
    return _scatter(pool, rows, slots)


@mx.compile
def _write_block_one(pool, rows, start):
    return _copy_block(pool, rows, start)


def write_one_in_place(p: Plan, pool, rows) -> None:
    """Copy ``rows [T, H, W]`` into ``pool``'s own memory as ``p`` says (:func:`write_in_place`'s rules)."""
    if p.rows.size == 0:
        return
    src = _host_rows(rows)
    if isinstance(pool, mx.array):
        mx.synchronize()
    _copy_host_rows(p, pool, src)
