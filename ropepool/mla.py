"""``rope_pool_fused_mla``: the cache write of multi-head latent attention (DeepSeek-V2/V3, Kimi K2).

MLA caches no per-head k and v. Each token keeps one latent row: ``c_kv``, the normalised low-rank
projection of the hidden state (``kv_lora_rank`` values, 512 in DeepSeek-V3), followed by ``k_pe``,
one RoPE key shared by every head (``rope_dim`` values, 64), rotated. The pool is one "head" wide::

    latent_pool [P, 1, kv_lora_rank + rope_dim]      row slots[t] = [c_kv[t] ‖ rope(k_pe[t])]

and q's RoPE part ``q_pe [T, Hq, rope_dim]`` turns at the same positions (its other part, q_nope, is
absorbed into the latent space by the model and never rotates). This is the op engines fuse for MLA:
AITER's ``fused_qk_rope_cat_and_cache_mla``, FlashInfer's MLA path of
``rope_quantize_fp8_append_paged_kv_cache``, vLLM's MLA cache write.

How it runs: the chosen backend rotates ``q_pe`` and ``k_pe`` exactly as it rotates q and k for
:func:`ropepool.rope_pool_fused` (one KV head of ``D = rope_dim``: the same kernel text, compiled
for that shape); the latent rows ``[c_kv ‖ k_pe_rot]`` are joined (and FP8-encoded by
:func:`ropepool.fp8.encode`) and :mod:`ropepool.pool_write` places them. ``rope_pool_fused``'s own
contract is untouched: this is a sibling op with its own shape errors
(:data:`ropepool.errors.MLA_CODES`).
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from . import fp8
from ._arrays import FLOAT_DTYPES, dtype_name, is_array, native, to_mx, to_numpy
from ._scalars import check_types, finite_float
from .backends import resolve
from .errors import fail
from .inplace import pool_problem
from .pool_write import Plan, write_one, write_one_in_place
from .op import StepPlan, rotate_step
from .rope import Rope, rope_table
from .validation import plan_values


def rope_pool_fused_mla(
    q_pe,
    k_pe,
    c_kv,
    positions,
    slots,
    latent_pool,
    *,
    num_qo_heads,
    kv_lora_rank,
    rope_dim,
    rope_base,
    is_neox=True,
    rope_scaling=None,
    max_position_embeddings=None,
    backend="auto",
    check_values=True,
    inplace=False,
    kv_scale=1.0,
):
    """Rotate q's RoPE part and the shared RoPE key, and write ``[c_kv ‖ k_pe_rot]`` into the latent pool.

    Parameters
    ----------
    q_pe : ``[T, Hq, rope_dim]``, float16, bfloat16 or float32: the RoPE part of each query head
    k_pe : ``[T, 1, rope_dim]``, q_pe's dtype: the RoPE key all heads share
    c_kv : ``[T, kv_lora_rank]``, q_pe's dtype: the (already normalised) latent
    positions : int32 ``[T]``; slots : int32 ``[T]`` (``slots[t] < 0`` writes nothing)
    latent_pool : ``[P, 1, kv_lora_rank + rope_dim]``, q_pe's dtype, or uint8: an FP8 e4m3 latent cache
    num_qo_heads, kv_lora_rank, rope_dim : int, Hq, the config's ``kv_lora_rank`` and ``qk_rope_head_dim``
    rope_base, is_neox, rope_scaling, max_position_embeddings : the rotation, as for
        :func:`ropepool.rope_pool_fused` (DeepSeek pairs neighbours: ``is_neox=False``; its yarn
        scaling applies to the rope_dim dimensions)
    backend, check_values, inplace : as for :func:`ropepool.rope_pool_fused`
    kv_scale : float > 0, with a uint8 pool each row holds the e4m3 codes of
        ``[c_kv ‖ k_pe_rot] / float32(kv_scale)`` (:mod:`ropepool.fp8`); 1.0 with a float pool

    Returns
    -------
    (q_pe_rot ``[T, Hq, rope_dim]``, k_pe_rot ``[T, 1, rope_dim]``, latent_pool_new), in the kind of q_pe.
    Pool rows no token writes keep their bits; the pool passed is not mutated unless ``inplace``.

    Raises
    ------
    RopePoolError
        ``mla_ndim``, ``mla_sizes``, ``q_pe_shape``, ``k_pe_shape``, ``c_kv_shape``, ``latent_pool_shape``,
        ``mla_dtype`` (:data:`ropepool.errors.MLA_CODES`), and rope_pool_fused's codes for the arrays,
        index dtypes and lengths, the rotation, values, ``kv_scale``, ``inplace`` and the backend.

    Example
    -------
    >>> from ropepool.inputs import mla_inputs
    >>> kw = mla_inputs(tokens=2, num_qo_heads=4, kv_lora_rank=8, rope_dim=4, pool_rows=5)
    >>> q_pe_rot, k_pe_rot, pool = rope_pool_fused_mla(**kw)
    >>> pool.shape, bool((pool[kw["slots"][0].item(), 0, :8] == kw["c_kv"][0]).all())
    ((5, 1, 12), True)
    """
    p, fp8_pool = validate_mla(
        q_pe,
        k_pe,
        c_kv,
        positions,
        slots,
        latent_pool,
        num_qo_heads=num_qo_heads,
        kv_lora_rank=kv_lora_rank,
        rope_dim=rope_dim,
        rope_base=rope_base,
        check_values=check_values,
        inplace=inplace,
        kv_scale=kv_scale,
    )
    rope = rope_table(
        rope_dim, rope_base, is_neox=is_neox, rope_scaling=rope_scaling, max_position_embeddings=max_position_embeddings
    )
    resolve(backend, inplace)  # after the inputs, as rope_pool_fused checks it
    return apply_mla_plan(
        q_pe,
        k_pe,
        c_kv,
        latent_pool,
        StepPlan(native(positions), p, latent_pool.shape[0]),
        rope=rope,
        kv_scale=kv_scale if fp8_pool else None,
        backend=backend,
        inplace=inplace,
    )


def apply_mla_plan(
    q_pe, k_pe, c_kv, latent_pool, plan: StepPlan, *, rope: Rope, kv_scale=None, backend="auto", inplace=False
):
    """The layer's half of :func:`rope_pool_fused_mla`, as :func:`ropepool.op.apply_plan` is
    rope_pool_fused's: q_pe ``[T, Hq, rd]`` and k_pe ``[T, 1, rd]`` turned with ``rope`` (a
    :func:`ropepool.rope.rope_table` of ``rd`` dimensions), ``[c_kv ‖ k_pe_rot]`` written into
    ``latent_pool [P, 1, R + rd]`` as the step's ``plan`` (:func:`ropepool.op.plan_step`) says; a uint8
    pool takes e4m3 codes of the rows divided by ``kv_scale`` (None: a float pool). Shapes are the
    caller's to get right (rope_pool_fused_mla checks them); only T and P are checked against the plan.
    Returns what rope_pool_fused_mla returns.
    """
    if q_pe.shape[0] != plan.tokens or latent_pool.shape[0] != plan.pool_rows:
        raise fail(
            "index_len",
            expected=f"q_pe for the plan's {plan.tokens} tokens, a pool of its {plan.pool_rows} rows",
            got=f"q_pe {tuple(q_pe.shape)}, latent_pool {tuple(latent_pool.shape)}",
            hint="make the plan (plan_step) from this step's positions and slots and this pool's rows.",
        )
    name, rotate_fn = resolve(backend, inplace)
    numpy_out = isinstance(q_pe, np.ndarray)
    q_pe, k_pe, c_kv = (native(x) for x in (q_pe, k_pe, c_kv))
    positions = plan.positions
    if name != "cpu":
        q_pe, k_pe, positions = (to_mx(x) for x in (q_pe, k_pe, positions))
    q_rot, k_rot = rotate_step(rotate_fn, q_pe, k_pe, k_pe, plan, rope=rope, positions=positions)[:2]
    rows = latent_rows(c_kv, k_rot, kv_scale)  # [T, 1, R + rd]
    host_write = inplace or (name == "cpu" and isinstance(q_pe, np.ndarray) and isinstance(latent_pool, np.ndarray))
    if host_write:
        if not inplace:
            latent_pool = np.array(native(latent_pool), copy=True)
        write_one_in_place(plan.write, latent_pool, rows)
    else:
        latent_pool = write_one(plan.write, to_mx(native(latent_pool)), rows)
        if numpy_out:
            latent_pool = to_numpy(latent_pool)
    if numpy_out:
        q_rot, k_rot = to_numpy(q_rot), to_numpy(k_rot)
    return q_rot, k_rot, latent_pool


def latent_rows(c_kv, k_pe_rot, kv_scale: float | None = None) -> mx.array:
    """``[c_kv ‖ k_pe_rot]`` ``[T, 1, R + rd]`` (c_kv ``[T, R]``, k_pe_rot ``[T, 1, rd]``), bit for bit;
    with ``kv_scale`` their e4m3 codes (uint8) of ``x / float32(kv_scale)``."""
    c_kv, k_pe_rot = to_mx(c_kv), to_mx(k_pe_rot)
    rows = mx.concatenate([c_kv[:, None, :], k_pe_rot], axis=-1)  # [T, 1, R + rd]
    if kv_scale is None:
        return rows
    return fp8.encode(rows.astype(mx.float32) / mx.array(np.float32(kv_scale)))


def validate_mla(
    q_pe,
    k_pe,
    c_kv,
    positions,
    slots,
    latent_pool,
    *,
    num_qo_heads,
    kv_lora_rank,
    rope_dim,
    rope_base,
    check_values=True,
    inplace=False,
    kv_scale=1.0,
) -> tuple[Plan, bool]:
    """Raise :class:`~ropepool.errors.RopePoolError` for the first problem; else ``(plan, fp8_pool)``."""
    named = dict(q_pe=q_pe, k_pe=k_pe, c_kv=c_kv, positions=positions, slots=slots, latent_pool=latent_pool)
    for name, x in named.items():
        if not is_array(x):
            raise fail(
                "not_an_array",
                name=name,
                kind=type(x).__name__,
                expected="mx.array or np.ndarray",
                got=type(x).__name__,
                hint=f"wrap {name} with mx.array(...) or np.asarray(...).",
            )
    check_types(
        num_qo_heads=num_qo_heads,
        kv_lora_rank=kv_lora_rank,
        rope_dim=rope_dim,
        check_values=check_values,
        inplace=inplace,
    )
    if q_pe.ndim != 3 or k_pe.ndim != 3 or c_kv.ndim != 2 or latent_pool.ndim != 3:
        raise fail(
            "mla_ndim",
            expected="q_pe [T, Hq, rope_dim], k_pe [T, 1, rope_dim], c_kv [T, kv_lora_rank], "
            "latent_pool [P, 1, kv_lora_rank + rope_dim]",
            got=f"q_pe {tuple(q_pe.shape)}, k_pe {tuple(k_pe.shape)}, c_kv {tuple(c_kv.shape)}, "
            f"latent_pool {tuple(latent_pool.shape)}",
            hint="c_kv is one latent per token, without a head axis; split q into q_nope and q_pe and pass q_pe only.",
        )
    if positions.ndim != 1 or slots.ndim != 1:
        raise fail(
            "index_ndim",
            expected="positions [T] and slots [T]",
            got=f"positions {tuple(positions.shape)}, slots {tuple(slots.shape)}",
            hint="flatten them with .reshape(-1).",
        )
    if not (num_qo_heads > 0 and kv_lora_rank > 0 and rope_dim > 0 and rope_dim % 2 == 0):
        raise fail(
            "mla_sizes",
            expected="positive sizes and an even rope_dim",
            got=f"num_qo_heads={num_qo_heads}, kv_lora_rank={kv_lora_rank}, rope_dim={rope_dim}",
            hint="read them from the config: num_attention_heads, kv_lora_rank, qk_rope_head_dim.",
        )
    T = q_pe.shape[0]
    if tuple(q_pe.shape) != (T, num_qo_heads, rope_dim):
        hint = f"q_pe has {q_pe.shape[1]} heads of size {q_pe.shape[2]}."
        if q_pe.shape[2] > rope_dim:
            hint += " Pass only q's RoPE part: q_nope, q_pe = split(q, [qk_nope_head_dim], axis=-1)."
        raise fail(
            "q_pe_shape",
            shape=tuple(q_pe.shape),
            expected=f"{(T, num_qo_heads, rope_dim)} = [T, Hq, rope_dim]",
            got=tuple(q_pe.shape),
            hint=hint,
        )
    if tuple(k_pe.shape) != (T, 1, rope_dim):
        hint = "every head shares one RoPE key in MLA: k_pe is [T, 1, rope_dim]."
        if k_pe.shape[1] == num_qo_heads != 1:
            hint += " Do not repeat it over the heads."
        raise fail(
            "k_pe_shape",
            shape=tuple(k_pe.shape),
            expected=f"{(T, 1, rope_dim)} = [T, 1, rope_dim]",
            got=tuple(k_pe.shape),
            hint=hint,
        )
    if tuple(c_kv.shape) != (T, kv_lora_rank):
        hint = "c_kv is kv_a_proj_with_mqa's first kv_lora_rank outputs, after kv_a_layernorm."
        if c_kv.shape[-1] == kv_lora_rank + rope_dim:
            hint += " It still holds k_pe: split it off with split(x, [kv_lora_rank], axis=-1)."
        raise fail(
            "c_kv_shape",
            shape=tuple(c_kv.shape),
            expected=f"{(T, kv_lora_rank)} = [T, kv_lora_rank]",
            got=tuple(c_kv.shape),
            hint=hint,
        )
    if positions.shape[0] != T or slots.shape[0] != T:
        raise fail(
            "index_len",
            expected=f"{T} positions and {T} slots (one per token)",
            got=f"{positions.shape[0]} positions, {slots.shape[0]} slots",
            hint="in a decode step pass only the new tokens' positions and slots.",
        )
    width = kv_lora_rank + rope_dim
    if tuple(latent_pool.shape[1:]) != (1, width):
        raise fail(
            "latent_pool_shape",
            shape=tuple(latent_pool.shape),
            expected=f"[P, 1, {width}]",
            got=tuple(latent_pool.shape),
            hint=f"one latent row per token: kv_lora_rank + rope_dim = {kv_lora_rank} + {rope_dim} values, "
            "one 'head' (not Hq heads, not a k and a v pool).",
        )
    dt = {name: dtype_name(x) for name, x in named.items()}
    pool_dt = dt["latent_pool"]
    if not (dt["q_pe"] == dt["k_pe"] == dt["c_kv"] and pool_dt in (dt["q_pe"], "uint8")):
        raise fail(
            "mla_dtype",
            expected="q_pe, k_pe, c_kv in one dtype, latent_pool in it or uint8",
            got=f"q_pe {dt['q_pe']}, k_pe {dt['k_pe']}, c_kv {dt['c_kv']}, latent_pool {pool_dt}",
            hint=f"cast k_pe and c_kv to {dt['q_pe']}; allocate the pool in that dtype (or uint8 for FP8).",
        )
    if dt["positions"] != "int32" or dt["slots"] != "int32":
        raise fail(
            "index_dtype",
            expected="int32 positions and slots",
            got=f"positions {dt['positions']}, slots {dt['slots']}",
            hint="arange defaults to int64: cast with .astype(np.int32) or .astype(mx.int32).",
        )
    if dt["q_pe"] not in FLOAT_DTYPES:
        raise fail(
            "unsupported_dtype",
            expected="float16, bfloat16 or float32",
            got=dt["q_pe"],
            hint="NumPy defaults to float64: cast to float32 (or float16).",
        )
    base = finite_float(rope_base)
    if base is None or base <= 0:
        raise fail(
            "rope_base",
            expected="a finite rope_base > 0, e.g. 10000.0",
            got=repr(rope_base),
            hint="pass config.rope_theta (10000.0 where the config has none).",
        )
    fp8_pool = pool_dt == "uint8"
    x = finite_float(kv_scale)
    if x is None or x <= 0 or not 2.0**-126 <= 1.0 / x < 2.0**127 or (not fp8_pool and x != 1.0):
        raise fail(
            "kv_scale",
            name="kv_scale",
            expected="a finite kv_scale > 0 (1.0 with a float pool)",
            got=repr(kv_scale),
            hint="kv_scale divides the latent rows before FP8 rounding: use the "
            "checkpoint's scale, or 1.0; a float pool stores the values as they are.",
        )
    p = plan_values(positions, slots, latent_pool.shape[0], check_values)  # the one host read of the slots
    if inplace:
        problem = pool_problem(latent_pool)
        if problem:
            raise fail(
                "inplace_unsupported",
                got=f"latent_pool is {problem}",
                expected="a writable, row-contiguous pool in host memory",
                hint="pass a contiguous, writable copy (np.array(pool)), or call without inplace=True "
                "and rebind the pool it returns.",
            )
    return p, fp8_pool
