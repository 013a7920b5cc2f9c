"""Random, valid inputs for ``rope_pool_fused``: for examples, tests, notebooks and the benchmark."""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from .shapes import Shapes


def _of_kind(arrays: dict, positions, slots, dtype: str, kind: str) -> dict:
    """``arrays`` (float NumPy) in ``dtype``, with ``positions`` and ``slots`` as int32: mx.array for
    ``kind="mlx"`` (through float32), NumPy arrays for ``kind="numpy"``."""
    index = {"positions": np.asarray(positions, np.int32), "slots": np.asarray(slots, np.int32)}
    if kind == "mlx":
        out = {name: mx.array(a.astype(np.float32)).astype(getattr(mx, dtype)) for name, a in arrays.items()}
        out.update({name: mx.array(a) for name, a in index.items()})
    else:
        out = {name: a.astype(dtype) for name, a in arrays.items()}
        out.update(index)
    return out


def make_inputs(
    shapes: Shapes,
    dtype: str = "float32",
    *,
    kind: str = "mlx",
    seed: int = 0,
    positions=None,
    slots=None,
    rope_base: float = 10000.0,
) -> dict:
    """Keyword arguments of one valid ``rope_pool_fused`` call of the given shapes.

    q, k, v and both pools hold standard-normal values (pools too, so that a row the op
    must leave alone is not zero). ``positions`` default to ``0..T-1``; ``slots`` to ``T``
    distinct pool rows in random order (so ``T <= P`` unless you pass slots).

    Parameters
    ----------
    shapes : Shapes
    dtype : "float16", "bfloat16" or "float32" (bfloat16 only with ``kind="mlx"``)
    kind : "mlx" for mx.array inputs, "numpy" for NumPy arrays
    seed : int
    positions, slots : optional integer sequences of length T (stored as int32)
    rope_base : float

    Example
    -------
    >>> from ropepool.shapes import Shapes
    >>> kw = make_inputs(Shapes(tokens=2, num_qo_heads=4, num_kv_heads=2, head_dim=8, pool_rows=5))
    >>> kw["q"].shape, kw["k_pool"].shape
    ((2, 4, 8), (5, 2, 8))
    """
    if kind not in ("mlx", "numpy"):
        raise ValueError(f"kind must be 'mlx' or 'numpy', got {kind!r}")
    if kind == "numpy" and dtype == "bfloat16":
        raise ValueError("NumPy has no bfloat16: use kind='mlx' for bfloat16 inputs")
    rng = np.random.default_rng(seed)
    s = shapes
    if positions is None:
        positions = np.arange(s.tokens)
    if slots is None:
        if s.tokens > s.pool_rows:
            raise ValueError(f"{s.tokens} tokens need distinct slots but the pool has {s.pool_rows} rows")
        slots = rng.permutation(s.pool_rows)[: s.tokens]
    arrays = {
        "q": rng.standard_normal(s.q),  # [T, Hq, D]
        "k": rng.standard_normal(s.kv),  # [T, Hkv, D]
        "v": rng.standard_normal(s.kv),  # [T, Hkv, D]
        "k_pool": rng.standard_normal(s.pool),  # [P, Hkv, D]
        "v_pool": rng.standard_normal(s.pool),  # [P, Hkv, D]
    }
    out = _of_kind(arrays, positions, slots, dtype, kind)
    ordered = {n: out[n] for n in ("q", "k", "v", "positions", "slots", "k_pool", "v_pool")}
    ordered.update(
        head_dim=s.head_dim,
        num_qo_heads=s.num_qo_heads,
        num_kv_heads=s.num_kv_heads,
        rope_base=rope_base,
    )
    return ordered


MLA_ARRAYS = ("q_pe", "k_pe", "c_kv", "positions", "slots", "latent_pool")


def mla_inputs(
    tokens: int,
    num_qo_heads: int,
    kv_lora_rank: int,
    rope_dim: int,
    pool_rows: int,
    dtype: str = "float32",
    *,
    kind: str = "mlx",
    seed: int = 0,
    positions=None,
    slots=None,
    rope_base: float = 10000.0,
    fp8_pool: bool = False,
) -> dict:
    """Keyword arguments of one valid :func:`rope_pool_fused_mla` call: standard-normal arrays (the pool too,
    or random codes of finite values if ``fp8_pool``), positions ``0..T-1``, distinct random slots."""
    rng = np.random.default_rng(seed)
    T = tokens
    positions = np.arange(T) if positions is None else positions
    slots = rng.permutation(pool_rows)[:T] if slots is None else slots
    arrays = {
        "q_pe": rng.standard_normal((T, num_qo_heads, rope_dim)),  # [T, Hq, rd]
        "k_pe": rng.standard_normal((T, 1, rope_dim)),  # [T, 1, rd]
        "c_kv": rng.standard_normal((T, kv_lora_rank)),  # [T, R]
    }
    pool_shape = (pool_rows, 1, kv_lora_rank + rope_dim)  # [P, 1, R + rd]
    arrays["latent_pool"] = rng.standard_normal(pool_shape)
    out = _of_kind(arrays, positions, slots, dtype, kind)
    if fp8_pool:  # e4m3 codes of finite values instead, drawn after the floats
        codes = rng.integers(0, 0x7F, pool_shape).astype(np.uint8)
        out["latent_pool"] = mx.array(codes) if kind == "mlx" else codes
    ordered = {n: out[n] for n in MLA_ARRAYS}
    ordered.update(num_qo_heads=num_qo_heads, kv_lora_rank=kv_lora_rank, rope_dim=rope_dim, rope_base=rope_base)
    return ordered
