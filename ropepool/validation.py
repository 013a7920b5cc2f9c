"""The validation of both ops, ``rope_pool_fused`` and ``rope_pool_fused_mla``: each check written once.

Each check is one small function here; :func:`validate` (``rope_pool_fused``) and
:func:`ropepool.mla.validate_mla` call them in the order of :data:`ropepool.errors.CODES` and
:data:`ropepool.errors.MLA_ORDER`, so that of two problems in one call the one listed first is
raised:

1. the arguments' types: arrays are arrays (``not_an_array``), sizes ints, flags bools,
   ``rope_scaling`` a dict and ``max_position_embeddings`` an int (``argument_type``);
2. SGLang's own checks, in its order and with its messages (its Python wrapper, then its C++
   extension): ranks, shapes, dtypes;
3. what SGLang leaves unchecked, whose failures are silent wrong answers or out-of-bounds writes in
   its kernel: sizes, the rotation (``rope_base``, then :func:`ropepool.rope.rope_table`'s checks),
   QK-norm, the FP8 scales, the values of positions and slots, pools written in place.

The op then resolves its backend (``unknown_backend``, ``backend_unavailable``: the catalog's last).
Validation returns what it found (:class:`Checked`); the op plans the write from it
(:func:`ropepool.pool_write.plan`). Every failure raises :class:`~ropepool.errors.RopePoolError`;
nothing is written before validation passes.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._arrays import FLOAT_DTYPES, dtype_name, is_array, largest_abs, to_numpy
from ._scalars import check_types, finite_float
from .errors import fail
from .fusion import KV_SCALE_MAX, KV_SCALE_MIN, NORM_EPS_MIN, PLAIN, Fusion, norm_limit
from .inplace import input_overlapping_pools, pool_problem, pools_overlap
from .k_shape import heads, k_shape_case
from .rope import MAX_POSITION, Rope, position_rows, rope_arguments, rope_table


class Checked(NamedTuple):
    """What a call that passed validation is: its slots read on the host, its rotation, its fusions."""

    slots: np.ndarray  # [T] int64: the one read of the slots on the host a call makes
    rope: Rope
    fusion: Fusion


def validate(
    q,
    k,
    v,
    positions,
    slots,
    k_pool,
    v_pool,
    *,
    head_dim,
    num_qo_heads,
    num_kv_heads,
    rope_base,
    rotary_dim=None,
    is_neox=True,
    rope_scaling=None,
    max_position_embeddings=None,
    check_values=True,
    inplace=False,
    q_norm_weight=None,
    k_norm_weight=None,
    norm_eps=1e-6,
    k_scale=1.0,
    v_scale=1.0,
) -> Checked:
    """``rope_pool_fused``'s checks (its arguments, as it takes them), in the catalog's order.

    Raises :class:`RopePoolError` for the first problem found; else the :class:`Checked` call.
    With ``check_values`` the values of positions and slots are checked too (range, duplicates);
    without, a slot outside ``[0, P)`` writes nothing and of tokens naming one row the last wins.
    With ``inplace`` the pools must be writable in place (:mod:`ropepool.inplace`). An mrope
    ``rope_scaling`` also takes positions ``[3, T]``.
    """
    named = dict(q=q, k=k, v=v, positions=positions, slots=slots, k_pool=k_pool, v_pool=v_pool)
    scalars = (head_dim, num_qo_heads, num_kv_heads, rope_base, rotary_dim, is_neox, max_position_embeddings)
    scalars += (check_values, inplace, norm_eps, k_scale, v_scale)
    key = None
    if rope_scaling is None and q_norm_weight is None and k_norm_weight is None:
        key = _signature(named.values(), scalars)
    passed = _PASSED.get(key) if key is not None else None
    if passed is not None:
        rope, fusion = passed
    else:
        rope, fusion = _signature_checks(
            named,
            head_dim=head_dim,
            num_qo_heads=num_qo_heads,
            num_kv_heads=num_kv_heads,
            rope_base=rope_base,
            rotary_dim=rotary_dim,
            is_neox=is_neox,
            rope_scaling=rope_scaling,
            max_position_embeddings=max_position_embeddings,
            check_values=check_values,
            inplace=inplace,
            q_norm_weight=q_norm_weight,
            k_norm_weight=k_norm_weight,
            norm_eps=norm_eps,
            k_scale=k_scale,
            v_scale=v_scale,
        )
        if key is not None:
            if len(_PASSED) >= _PASSED_MAX:
                _PASSED.clear()
            _PASSED[key] = rope, fusion
    host_slots = index_values(positions, slots, k_pool.shape[0], check_values)
    if inplace:
        inplace_pools({"k_pool": k_pool, "v_pool": v_pool}, dict(q=q, k=k, v=v, positions=positions, slots=slots))
    return Checked(host_slots, rope, fusion)


#: ``(rope, fusion)`` per call signature (:func:`_signature`) that :func:`_signature_checks` passed: a
#: model's layers call with one signature step after step. Only calls without QK-norm weights and
#: ``rope_scaling`` are kept (their checks read no array's values and no dict).
_PASSED: dict = {}
_PASSED_MAX = 256


def _signature(arrays, scalars) -> tuple | None:
    """What :func:`_signature_checks` reads of a call: each array's type, shape and dtype, each other
    argument's type and value (so ``1`` and ``True``, ``128`` and ``128.0`` differ); None when something
    in it cannot be a key (not an array, an unhashable argument)."""
    key = []
    try:
        for x in arrays:
            key += (type(x), x.shape, x.dtype)
        for a in scalars:
            key += (type(a), a)
        key = tuple(key)
        hash(key)
    except (AttributeError, TypeError):
        return None
    return key


def _signature_checks(
    named: dict,
    *,
    head_dim,
    num_qo_heads,
    num_kv_heads,
    rope_base,
    rotary_dim,
    is_neox,
    rope_scaling,
    max_position_embeddings,
    check_values,
    inplace,
    q_norm_weight,
    k_norm_weight,
    norm_eps,
    k_scale,
    v_scale,
) -> tuple[Rope, Fusion]:
    """:func:`validate`'s checks up to the values: types, ranks, shapes, dtypes, sizes, the rotation,
    QK-norm and the scales, in the catalog's order; the call's rotation and fusions."""
    arrays(named)
    if q_norm_weight is not None or k_norm_weight is not None:
        arrays(_given(q_norm_weight=q_norm_weight, k_norm_weight=k_norm_weight))
    argument_types(
        head_dim=head_dim,
        num_qo_heads=num_qo_heads,
        num_kv_heads=num_kv_heads,
        check_values=check_values,
        inplace=inplace,
        is_neox=is_neox,
        rope_scaling=rope_scaling,
        max_position_embeddings=max_position_embeddings,
    )
    D, Hq, Hkv = head_dim, num_qo_heads, num_kv_heads
    q, k, v, positions, slots, k_pool, v_pool = named.values()
    _ranks(q, k, v, positions, slots, k_pool, v_pool, position_rows(rope_scaling), D, Hkv)
    _shapes(q, k, v, positions, slots, k_pool, v_pool, D, Hq, Hkv)
    fp8 = _dtypes(named, head_dim)
    _head_counts(D, Hq, Hkv)
    rope = rotation(head_dim, rope_base, rotary_dim, is_neox, rope_scaling, max_position_embeddings)
    fusion = fusion_settings(
        head_dim=head_dim,
        fp8=fp8,
        q_norm_weight=q_norm_weight,
        k_norm_weight=k_norm_weight,
        norm_eps=norm_eps,
        k_scale=k_scale,
        v_scale=v_scale,
        norm_inputs=(q, k) if check_values else None,
    )
    return rope, fusion


def validate_indices(positions, slots, pool_rows: int, *, check_values=True) -> np.ndarray:
    """The checks of :func:`validate` that concern positions ``[T]`` and slots ``[T]`` alone, in its order
    and words; the slots read on the host (int64 ``[T]``)."""
    arrays(dict(positions=positions, slots=slots))
    check_types(check_values=check_values)
    index_ndim(positions, slots)
    index_len(positions, slots, positions.shape[0])
    index_dtype(positions, slots)
    return index_values(positions, slots, pool_rows, check_values)


# --- 1. types ------------------------------------------------------------------------------------------


def _given(**optional) -> dict:
    return {name: x for name, x in optional.items() if x is not None}


#: The hint of ``not_an_array`` where an argument's own words say more than "wrap it".
_ARRAY_HINTS = {
    "q_norm_weight": "Pass the norm's weight array (attn.q_norm.weight).",
    "k_norm_weight": "Pass the norm's weight array (attn.k_norm.weight).",
}


def arrays(named: dict) -> None:
    """``not_an_array`` for the first of ``named`` that is neither an mx.array nor a NumPy array."""
    for name, x in named.items():
        if not is_array(x):
            raise fail(
                "not_an_array",
                name=name,
                kind=type(x).__name__,
                expected="mx.array or np.ndarray",
                got=type(x).__name__,
                hint=_ARRAY_HINTS.get(name, f"Wrap {name} with mx.array(...) or np.asarray(...)."),
            )


def argument_types(*, rope_scaling=None, max_position_embeddings=None, is_neox=True, **sizes_and_flags) -> None:
    """``argument_type``: sizes ints and flags bools (:func:`ropepool._scalars.check_types`), then the RoPE
    keywords' types where given (:func:`ropepool.rope.rope_arguments`)."""
    check_types(**sizes_and_flags, is_neox=is_neox)
    if rope_scaling is not None or max_position_embeddings is not None:
        rope_arguments(is_neox, rope_scaling, max_position_embeddings)


# --- 2. SGLang's checks -----------------------------------------------------------------------------------


def _ranks(q, k, v, positions, slots, k_pool, v_pool, rows: int, head_dim: int, num_kv_heads: int) -> None:
    if q.ndim != 3 or k.ndim != 3 or v.ndim != 3:
        raise fail(
            "qkv_ndim",
            expected="3-D q, k, v: [T, Hq, D], [T, Hkv, D], [T, Hkv, D]",
            got=f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}",
            hint="A 2-D [T, H*D] array is a projection output whose heads were not split yet: reshape it to [T, H, D].",
        )
    index_ndim(positions, slots, rows)
    if k_pool.ndim != 3 or v_pool.ndim != 3:
        raise fail(
            "pool_ndim",
            expected="k_pool and v_pool of shape [P, Hkv, D]",
            got=f"k_pool {tuple(k_pool.shape)}, v_pool {tuple(v_pool.shape)}",
            hint=f"View each pool as [P, {num_kv_heads}, {head_dim}].",
        )


def index_ndim(positions, slots, rows: int = 1) -> None:
    """``index_ndim``: positions ``[T]`` (or mrope's ``[3, T]`` where ``rows`` is 3) and slots ``[T]``."""
    if (positions.ndim != 1 and not (rows == 3 and positions.ndim == 2)) or slots.ndim != 1:
        raise fail(
            "index_ndim",
            expected="positions [T] and slots [T]" + (" (mrope: positions [3, T] too)" if rows == 3 else ""),
            got=f"positions {tuple(positions.shape)}, slots {tuple(slots.shape)}",
            hint="Flatten them with .reshape(-1).",
        )


def index_len(positions, slots, T: int) -> None:
    """``index_len``: one position and one slot per token (mrope's positions ``[3, T]``)."""
    rows3 = positions.ndim == 2
    if positions.shape[-1] != T or slots.shape[0] != T or (rows3 and positions.shape[0] != 3):
        raise fail(
            "index_len",
            expected=f"{T} positions and {T} slots (one per token)" + (f"; mrope positions [3, {T}]" if rows3 else ""),
            got=f"{tuple(positions.shape) if rows3 else positions.shape[0]} positions, {slots.shape[0]} slots",
            hint="In a decode step pass only the new tokens' positions and slots.",
        )


def _shapes(q, k, v, positions, slots, k_pool, v_pool, head_dim: int, num_qo_heads: int, num_kv_heads: int) -> None:
    T = q.shape[0]
    if tuple(q.shape) != (T, num_qo_heads, head_dim):
        hint = f"q has {heads(q.shape[1])} of size {q.shape[2]}."
        if q.shape[1] == num_kv_heads != num_qo_heads and q.shape[2] == head_dim:
            hint += " num_qo_heads and num_kv_heads look swapped: num_qo_heads is config.num_attention_heads."
        elif q.shape[2] != head_dim:
            hint += " head_dim disagrees with q's last axis: use the model's head_dim."
        raise fail(
            "q_shape",
            shape=tuple(q.shape),
            expected=f"{(T, num_qo_heads, head_dim)} = [T, Hq, D]",
            got=tuple(q.shape),
            hint=hint,
        )
    if tuple(k.shape) != (T, num_kv_heads, head_dim):
        case = k_shape_case(
            k.shape, num_qo_heads=num_qo_heads, head_dim=head_dim, tokens=T, passed_kv_heads=num_kv_heads
        )
        raise fail(
            "k_shape",
            shape=tuple(k.shape),
            expected=f"{(T, num_kv_heads, head_dim)} = [T, Hkv, D]",
            got=tuple(k.shape),
            hint=f"{case.why} Fix: {case.fix}",
        )
    _same_shape("v", v, "k", k, "v must be [T, Hkv, D] exactly like k; do not repeat its heads.")
    index_len(positions, slots, T)
    if tuple(k_pool.shape[1:]) != (num_kv_heads, head_dim):
        hint = f"each pool row must hold one token's k: [{num_kv_heads}, {head_dim}]."
        if k_pool.shape[1] == num_qo_heads != num_kv_heads:
            hint += " The pool has num_qo_heads heads: allocate it with config.num_key_value_heads."
        shape = tuple(k_pool.shape)
        raise fail("k_pool_shape", shape=shape, expected=f"[P, {num_kv_heads}, {head_dim}]", got=shape, hint=hint)
    _same_shape("v_pool", v_pool, "k_pool", k_pool, "Allocate v_pool exactly like k_pool.")


def _same_shape(name: str, x, like: str, y, hint: str) -> None:
    """``v_shape`` / ``v_pool_shape``: ``x`` shaped exactly like ``y``."""
    if tuple(x.shape) != tuple(y.shape):
        shape, k_shape = tuple(x.shape), tuple(y.shape)
        raise fail(
            f"{name}_shape", shape=shape, k_shape=k_shape, expected=f"{k_shape} like {like}", got=shape, hint=hint
        )


def _dtypes(named: dict, head_dim: int) -> bool:
    """SGLang's dtype checks (its wrapper's, then its extension's, with ``head_dim_odd`` among them in its
    order); whether the pools are FP8 (uint8)."""
    dt = {name: dtype_name(x) for name, x in named.items()}
    if not dt["q"] == dt["k"] == dt["v"]:
        raise fail(
            "qkv_dtype",
            expected="one dtype for q, k, v",
            got=f"q {dt['q']}, k {dt['k']}, v {dt['v']}",
            hint=f"Cast k and v to {dt['q']} (or all three to the pool's dtype).",
        )
    fp8 = "uint8" in (dt["k_pool"], dt["v_pool"])
    if not fp8 and not dt["k_pool"] == dt["v_pool"] == dt["q"]:
        raise fail(
            "pool_dtype",
            expected=f"pools in {dt['q']}",
            got=f"k_pool {dt['k_pool']}, v_pool {dt['v_pool']}",
            hint="Allocate float pools in the activations' dtype (the op does not convert one float type to "
            "another), or both pools as uint8 for an FP8 cache.",
        )
    if fp8 and not dt["k_pool"] == dt["v_pool"]:
        raise fail(
            "fp8_pool_dtype",
            k_pool=dt["k_pool"],
            v_pool=dt["v_pool"],
            expected="k_pool and v_pool both uint8 (e4m3 codes)",
            got=f"k_pool {dt['k_pool']}, v_pool {dt['v_pool']}",
            hint="An FP8 cache keeps both pools as uint8: allocate v_pool like k_pool.",
        )
    index_dtype(named["positions"], named["slots"])
    if head_dim % 2:
        raise fail(
            "head_dim_odd",
            expected="an even head_dim",
            got=head_dim,
            hint="NeoX RoPE pairs dimension i with i + head_dim/2.",
        )
    float_dtype(dt["q"])
    return fp8


def index_dtype(positions, slots) -> None:
    """``index_dtype``: int32 positions and slots, as SGLang's extension takes them."""
    p, s = dtype_name(positions), dtype_name(slots)
    if p != "int32" or s != "int32":
        raise fail(
            "index_dtype",
            expected="int32 positions and slots",
            got=f"positions {p}, slots {s}",
            hint="arange defaults to int64: cast with .astype(np.int32) or .astype(mx.int32).",
        )


def float_dtype(dtype: str) -> None:
    """``unsupported_dtype``: the activations in float16, bfloat16 or float32."""
    if dtype not in FLOAT_DTYPES:
        raise fail(
            "unsupported_dtype",
            expected="float16, bfloat16 or float32",
            got=dtype,
            hint="NumPy defaults to float64: cast to float32 (or float16).",
        )


# --- 3. what SGLang leaves unchecked ---------------------------------------------------------------------


def _head_counts(head_dim, num_qo_heads, num_kv_heads) -> None:
    if not (num_qo_heads > 0 and num_kv_heads > 0 and head_dim > 0):
        raise fail(
            "head_count",
            expected="all three > 0",
            got=f"num_qo_heads={num_qo_heads}, num_kv_heads={num_kv_heads}, head_dim={head_dim}",
            hint="Read them from the model's config; a missing field is not 0.",
        )
    if num_qo_heads % num_kv_heads:
        raise fail(
            "group_size",
            expected="num_qo_heads % num_kv_heads == 0",
            got=f"{num_qo_heads} and {num_kv_heads}",
            hint=f"{num_qo_heads} query heads cannot be split evenly over {num_kv_heads} KV heads: "
            "take both from the same model's config.",
        )


def rotation(
    head_dim, rope_base, rotary_dim=None, is_neox=True, rope_scaling=None, max_position_embeddings=None
) -> Rope:
    """``rope_base`` (a finite number > 0), then the rotation's own checks (:func:`ropepool.rope.rope_table`:
    ``rotary_dim``, the ``rope_scaling`` codes, ``rope_base_range``); the :class:`Rope`."""
    base = finite_float(rope_base)
    if base is None or base <= 0:
        raise fail(
            "rope_base",
            expected="a finite rope_base > 0, e.g. 10000.0 or 500000.0",
            got=repr(rope_base),
            hint="Pass config.rope_theta (10000.0 where the config has none).",
        )
    return rope_table(
        head_dim,
        base,
        rotary_dim=rotary_dim,
        is_neox=is_neox,
        rope_scaling=rope_scaling,
        max_position_embeddings=max_position_embeddings,
    )


def fusion_settings(
    *,
    head_dim: int,
    fp8: bool,
    q_norm_weight=None,
    k_norm_weight=None,
    norm_eps=1e-6,
    k_scale=1.0,
    v_scale=1.0,
    norm_inputs=None,
) -> Fusion:
    """A layer's QK-norm and FP8 settings, checked in the catalog's order: the norm weights (``[D]``, a float
    dtype), ``norm_eps``, with ``norm_inputs = (q, k)`` their size under QK-norm (``norm_overflow``), then the
    scales (:func:`scale`). The :class:`Fusion` they describe."""
    if (
        q_norm_weight is None
        and k_norm_weight is None
        and not fp8
        and type(norm_eps) is float
        and type(k_scale) is float
        and type(v_scale) is float
        and norm_eps == 1e-6
        and k_scale == 1.0
        and v_scale == 1.0
    ):  # the common call, cheaply
        return PLAIN
    weights = _given(q_norm_weight=q_norm_weight, k_norm_weight=k_norm_weight)
    arrays(weights)
    _norm_weights(weights, head_dim)
    eps = finite_float(norm_eps)
    if eps is None or not eps >= NORM_EPS_MIN:
        raise fail(
            "norm_eps",
            expected=f"a finite norm_eps >= {NORM_EPS_MIN:g}, e.g. 1e-6",
            got=repr(norm_eps),
            hint="Pass the model's rms_norm_eps (Qwen3: 1e-6); below 1e-30 float32 cannot keep "
            "the reference's result for a head of zeros or tiny values.",
        )
    if norm_inputs is not None:
        q, k = norm_inputs
        _norm_range(q if q_norm_weight is not None else None, k if k_norm_weight is not None else None, head_dim)
    return Fusion(
        q_norm_weight, k_norm_weight, eps, fp8, scale("k_scale", k_scale, fp8), scale("v_scale", v_scale, fp8)
    )


def _norm_weights(weights: dict, head_dim: int) -> None:
    """``norm_weight_shape`` for every weight, then ``norm_weight_dtype``."""
    for name, w in weights.items():
        if tuple(w.shape) != (head_dim,):
            raise fail(
                "norm_weight_shape",
                name=name,
                head_dim=head_dim,
                expected=f"[{head_dim}] = [D]",
                got=tuple(w.shape),
                hint="QK-norm normalises each head over head_dim: pass the per-head RMSNorm weight "
                "(Qwen3's q_norm.weight), not a norm over the whole hidden size.",
            )
    for name, w in weights.items():
        if dtype_name(w) not in FLOAT_DTYPES:
            raise fail(
                "norm_weight_dtype",
                name=name,
                expected="float16, bfloat16 or float32",
                got=dtype_name(w),
                hint="Cast the weight to float32 (NumPy defaults to float64).",
            )


def _norm_range(q, k, head_dim: int) -> None:
    """QK-norm's inputs small enough that their mean of squares stays finite in float32."""
    limit = norm_limit(head_dim)
    for name, x in (("q", q), ("k", k)):
        if x is None or dtype_name(x) == "float16":  # float16 holds nothing near the limit
            continue
        largest = largest_abs(x)
        if largest >= limit:
            raise fail(
                "norm_overflow",
                name=name,
                limit=f"{limit:.3g}",
                expected=f"|{name}| < {limit:.3g}",
                got=f"{largest:.3g}",
                hint=f"{name}'s squares overflow float32, and the head would come "
                "out as zeros; values this size mean the projection went wrong upstream (check the "
                "weights' dtype and scale).",
            )


def scale(name: str, value, fp8: bool) -> float:
    """``kv_scale``: an FP8 scale (``k_scale``, ``v_scale``, MLA's ``kv_scale``) in ``[2**-126, 2**126]``,
    where ``1 / scale`` is a normal float32; 1.0 unless the pool is FP8. The scale as a float."""
    x = finite_float(value)
    if x is None or not KV_SCALE_MIN <= x <= KV_SCALE_MAX:
        expected = f"{name} in [2**-126, 2**126] (1.0: the values as they are)"
        hint = f"{name} divides the values before FP8 rounding: use the checkpoint's scale, or 1.0."
    elif not fp8 and x != 1.0:
        expected = f"{name}=1.0 with float pools"
        hint = (
            f"{name} scales an FP8 (uint8) cache; float pools store the values as they are. "
            f"Allocate uint8 pools for FP8, or leave {name} at 1.0."
        )
    else:
        return x
    raise fail("kv_scale", name=name, expected=expected, got=repr(value), hint=hint)


def read_slots(slots) -> np.ndarray:
    """The slots ``[T]`` on the host, int64: the one read of them a call (or an engine step) makes.

    For device arrays (Metal, CUDA) this is a synchronisation: a step reads them once
    (:func:`ropepool.op.plan_step`), not once per layer.
    """
    return to_numpy(slots, np.int64)


def index_values(positions, slots, pool_rows: int, check_values: bool) -> np.ndarray:
    """The slots read on the host (:func:`read_slots`), and with ``check_values`` the values of positions
    and slots checked against a pool of ``pool_rows`` rows: ``position_negative``, ``position_too_large``,
    ``slot_out_of_range``, ``duplicate_slot``. Returns the slots, int64 ``[T]``."""
    host_slots = read_slots(slots)  # [T]
    if check_values:
        pos = to_numpy(positions, np.int64)
        if pos.ndim == 2:  # mrope's [3, T]: each token's worst row (its smallest if negative, else its largest)
            pos = np.where((pos < 0).any(axis=0), pos.min(axis=0, initial=0), pos.max(axis=0, initial=0))
        _values(pos, host_slots, pool_rows)
    return host_slots


_NEGATIVE = "Mark a token that should not be written with slot -1, not position -1."
_TOO_LARGE = "Float32 angles cannot tell such positions apart; is this a slot or garbage?"


def _values(pos: np.ndarray, slots: np.ndarray, pool_rows: int) -> None:
    if pos.size == 0:
        return
    if pos.size == 1:  # decode: plain Python comparisons beat NumPy's per-call cost
        if 0 <= int(pos[0]) < MAX_POSITION and int(slots[0]) < pool_rows:
            return
    # Fast path, one pass of min/max and a sort (the common decode call pays only this).
    written = np.sort(slots[slots >= 0])
    if (
        pos.min() >= 0
        and pos.max() < MAX_POSITION
        and slots.max() < pool_rows
        and not (written[1:] == written[:-1]).any()
    ):
        return
    last_row = f"The pool has rows 0..{pool_rows - 1}; an out-of-range slot is an out-of-bounds write."
    ranges = (  # code, the tokens at fault, their values, what was expected, the hint, the message's fields
        ("position_negative", pos < 0, pos, "positions >= 0", _NEGATIVE, {}),
        ("position_too_large", pos >= MAX_POSITION, pos, f"positions < {MAX_POSITION}", _TOO_LARGE, {}),
        (
            "slot_out_of_range",
            slots >= pool_rows,
            slots,
            f"slots < P = {pool_rows} (or -1 to skip)",
            last_row,
            {"pool_rows": pool_rows},
        ),
    )
    for code, bad, x, expected, hint, fields in ranges:
        if bad.any():
            t = int(np.argmax(bad))
            raise fail(code, expected=expected, got=f"{x[t]} at token {t}", hint=hint, **fields)
    written = slots[slots >= 0]
    uniq, counts = np.unique(written, return_counts=True)
    if (counts > 1).any():
        row = int(uniq[np.argmax(counts > 1)])
        raise fail(
            "duplicate_slot",
            expected="distinct slots for writing tokens",
            got=f"row {row} from tokens {np.flatnonzero(slots == row).tolist()}",
            hint="Give every token its own slot, or slot -1 to write nothing.",
        )


def inplace_pools(pools: dict, inputs: dict) -> None:
    """``inplace_unsupported``: each pool writable in place (:func:`ropepool.inplace.pool_problem`), two pools
    apart, and no input sharing memory with a pool (the write would change it mid-call)."""
    problems = [f"{name} is {why}" for name, pool in pools.items() if (why := pool_problem(pool))]
    if problems:
        got, expected = problems[0], "writable, row-contiguous pools in host memory"
        hint = (
            "Pass a contiguous, writable copy (np.ascontiguousarray(pool) or np.array(pool)), "
            "or call without inplace=True and rebind the pools it returns."
        )
    elif len(pools) == 2 and pools_overlap(*pools.values()):
        got, expected = "k_pool and v_pool share memory", "two distinct pool buffers"
        hint = "Allocate v_pool separately: writing v's rows would overwrite k's."
    elif len(pools) == 2 and (clash := input_overlapping_pools(inputs, *pools.values())):
        name, pool = clash
        got, expected = f"{name} shares memory with {pool}", "inputs in buffers of their own"
        hint = (
            f"Pass a copy of {name} (np.array({name}) or mx.array(np.array({name}))): "
            f"writing {pool} in place would change {name} while the call reads it."
        )
    else:
        return
    raise fail("inplace_unsupported", got=got, expected=expected, hint=hint)
