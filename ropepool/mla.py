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

from . import fp8, validation
from ._arrays import dtype_name, native, to_mx, to_numpy
from .backends import resolve
from .errors import fail
from .fusion import Fusion
from .op import StepPlan, checked_step, rotate_step
from .pool_write import write_one, write_one_in_place
from .rope import Rope
from .validation import Checked


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
        index dtypes and lengths, the rotation, values, ``kv_scale``, ``inplace`` and the backend;
        of two problems, the one listed first in :data:`ropepool.errors.MLA_ORDER` (the checks' order).

    Example
    -------
    >>> from ropepool.inputs import mla_inputs
    >>> kw = mla_inputs(tokens=2, num_qo_heads=4, kv_lora_rank=8, rope_dim=4, pool_rows=5)
    >>> q_pe_rot, k_pe_rot, pool = rope_pool_fused_mla(**kw)
    >>> pool.shape, bool((pool[kw["slots"][0].item(), 0, :8] == kw["c_kv"][0]).all())
    ((5, 1, 12), True)
    """
    checked = validate_mla(
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
        is_neox=is_neox,
        rope_scaling=rope_scaling,
        max_position_embeddings=max_position_embeddings,
        check_values=check_values,
        inplace=inplace,
        kv_scale=kv_scale,
    )  # the backend is resolved after validation (the catalog's last checks)
    P = latent_pool.shape[0]
    step = checked_step(checked, positions, P, check_values=check_values, backend=backend, inplace=inplace)
    scale = checked.fusion.k_scale if checked.fusion.fp8 else None
    return apply_mla_plan(
        q_pe, k_pe, c_kv, latent_pool, step, rope=checked.rope, kv_scale=scale, backend=backend, inplace=inplace
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
    plan.check_layer("q_pe", q_pe, "latent_pool", latent_pool)
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
    is_neox=True,
    rope_scaling=None,
    max_position_embeddings=None,
    check_values=True,
    inplace=False,
    kv_scale=1.0,
) -> Checked:
    """``rope_pool_fused_mla``'s checks (its arguments, as it takes them), in the order of
    :data:`ropepool.errors.MLA_ORDER`, with :mod:`ropepool.validation`'s checks where the two ops share a
    code. Raises :class:`~ropepool.errors.RopePoolError` for the first problem; else the
    :class:`~ropepool.validation.Checked` call (its fusion: the pool's FP8 flag and ``kv_scale``)."""
    named = dict(q_pe=q_pe, k_pe=k_pe, c_kv=c_kv, positions=positions, slots=slots, latent_pool=latent_pool)
    validation.arrays(named)
    sizes = dict(num_qo_heads=num_qo_heads, kv_lora_rank=kv_lora_rank, rope_dim=rope_dim)
    validation.argument_types(
        **sizes,
        check_values=check_values,
        inplace=inplace,
        is_neox=is_neox,
        rope_scaling=rope_scaling,
        max_position_embeddings=max_position_embeddings,
    )
    _ranks_and_sizes(q_pe, k_pe, c_kv, positions, slots, latent_pool, **sizes)
    _shapes(q_pe, k_pe, c_kv, positions, slots, latent_pool, **sizes)
    fp8_pool = _dtypes(named)
    rope = validation.rotation(rope_dim, rope_base, None, is_neox, rope_scaling, max_position_embeddings)
    scale = validation.scale("kv_scale", kv_scale, fp8_pool)
    host_slots = validation.index_values(positions, slots, latent_pool.shape[0], check_values)
    if inplace:
        validation.inplace_pools({"latent_pool": latent_pool}, {})
    return Checked(host_slots, rope, Fusion(fp8=fp8_pool, k_scale=scale, v_scale=scale))


def _ranks_and_sizes(q_pe, k_pe, c_kv, positions, slots, latent_pool, *, num_qo_heads, kv_lora_rank, rope_dim):
    if q_pe.ndim != 3 or k_pe.ndim != 3 or c_kv.ndim != 2 or latent_pool.ndim != 3:
        raise fail(
            "mla_ndim",
            expected="q_pe [T, Hq, rope_dim], k_pe [T, 1, rope_dim], c_kv [T, kv_lora_rank], "
            "latent_pool [P, 1, kv_lora_rank + rope_dim]",
            got=f"q_pe {tuple(q_pe.shape)}, k_pe {tuple(k_pe.shape)}, c_kv {tuple(c_kv.shape)}, "
            f"latent_pool {tuple(latent_pool.shape)}",
            hint="c_kv is one latent per token, without a head axis; split q into q_nope and q_pe and pass q_pe only.",
        )
    validation.index_ndim(positions, slots)
    if not (num_qo_heads > 0 and kv_lora_rank > 0 and rope_dim > 0 and rope_dim % 2 == 0):
        raise fail(
            "mla_sizes",
            expected="positive sizes and an even rope_dim",
            got=f"num_qo_heads={num_qo_heads}, kv_lora_rank={kv_lora_rank}, rope_dim={rope_dim}",
            hint="read them from the config: num_attention_heads, kv_lora_rank, qk_rope_head_dim.",
        )


def _shapes(q_pe, k_pe, c_kv, positions, slots, latent_pool, *, num_qo_heads, kv_lora_rank, rope_dim) -> None:
    T = q_pe.shape[0]
    if tuple(q_pe.shape) != (T, num_qo_heads, rope_dim):
        hint = f"q_pe has {q_pe.shape[1]} heads of size {q_pe.shape[2]}."
        if q_pe.shape[2] > rope_dim:
            hint += " Pass only q's RoPE part: q_nope, q_pe = split(q, [qk_nope_head_dim], axis=-1)."
        _shape_error("q_pe", q_pe, (T, num_qo_heads, rope_dim), "[T, Hq, rope_dim]", hint)
    if tuple(k_pe.shape) != (T, 1, rope_dim):
        hint = "every head shares one RoPE key in MLA: k_pe is [T, 1, rope_dim]."
        if k_pe.shape[1] == num_qo_heads != 1:
            hint += " Do not repeat it over the heads."
        _shape_error("k_pe", k_pe, (T, 1, rope_dim), "[T, 1, rope_dim]", hint)
    if tuple(c_kv.shape) != (T, kv_lora_rank):
        hint = "c_kv is kv_a_proj_with_mqa's first kv_lora_rank outputs, after kv_a_layernorm."
        if c_kv.shape[-1] == kv_lora_rank + rope_dim:
            hint += " It still holds k_pe: split it off with split(x, [kv_lora_rank], axis=-1)."
        _shape_error("c_kv", c_kv, (T, kv_lora_rank), "[T, kv_lora_rank]", hint)
    validation.index_len(positions, slots, T)
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


def _shape_error(name: str, x, want: tuple, symbols: str, hint: str):
    raise fail(f"{name}_shape", shape=tuple(x.shape), expected=f"{want} = {symbols}", got=tuple(x.shape), hint=hint)


def _dtypes(named: dict) -> bool:
    """``mla_dtype``, ``index_dtype``, ``unsupported_dtype``; whether the pool is FP8 (uint8)."""
    dt = {name: dtype_name(x) for name, x in named.items()}
    pool_dt = dt["latent_pool"]
    if not (dt["q_pe"] == dt["k_pe"] == dt["c_kv"] and pool_dt in (dt["q_pe"], "uint8")):
        raise fail(
            "mla_dtype",
            expected="q_pe, k_pe, c_kv in one dtype, latent_pool in it or uint8",
            got=f"q_pe {dt['q_pe']}, k_pe {dt['k_pe']}, c_kv {dt['c_kv']}, latent_pool {pool_dt}",
            hint=f"cast k_pe and c_kv to {dt['q_pe']}; allocate the pool in it (or uint8 for FP8).",
        )
    validation.index_dtype(named["positions"], named["slots"])
    validation.float_dtype(dt["q_pe"])
    return pool_dt == "uint8"
