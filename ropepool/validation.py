"""The validation contract of ``rope_pool_fused``.

First SGLang's own checks, in its order and with its messages (its Python wrapper, then
its C++ extension); then the checks SGLang leaves out, whose failures are silent wrong
answers or out-of-bounds writes in its kernel. Every failure raises
:class:`~ropepool.errors.RopePoolError`; nothing is written before validation passes.
"""

from __future__ import annotations

import numpy as np

from ._arrays import FLOAT_DTYPES, dtype_name, is_array, largest_abs, to_numpy
from ._scalars import check_types, finite_float
from .diagnosis import k_shape_case
from .errors import fail
from .fusion import KV_SCALE_MAX, KV_SCALE_MIN, NORM_EPS_MIN, PLAIN, Fusion, norm_limit
from .inplace import input_overlapping_pools, pool_problem, pools_overlap
from .pool_write import Plan, plan
from .rope import MAX_POSITION, plain


def _heads(n: int) -> str:
    return f"{n} head" if n == 1 else f"{n} heads"


def _k_shape_hint(k_shape, T, num_qo_heads, num_kv_heads, head_dim) -> str:
    case = k_shape_case(k_shape, num_qo_heads=num_qo_heads, head_dim=head_dim, tokens=T, passed_kv_heads=num_kv_heads)
    return f"{case.why} Fix: {case.fix}"


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
    check_values=True,
    inplace=False,
    q_norm_weight=None,
    k_norm_weight=None,
    norm_eps=1e-6,
    k_scale=1.0,
    v_scale=1.0,
    position_rows=1,
) -> tuple[Plan, Fusion]:
    """Raise :class:`RopePoolError` for the first problem found; else ``(plan, fusion)``.

    The slots are read on the host (a synchronisation for lazy MLX arrays) and ``plan`` says which
    token writes which pool row (:mod:`ropepool.pool_write`). With ``check_values`` the values of
    positions and slots are checked too (range, duplicates); without, a slot outside ``[0, P)``
    writes nothing and of tokens naming one row the last wins.
    With ``inplace`` the pools must be writable in place (:mod:`ropepool.inplace`).
    ``fusion`` holds the call's QK-norm and FP8 settings (:mod:`ropepool.fusion`).
    ``position_rows`` 3 (mrope) also takes positions ``[3, T]``.
    """
    named = dict(q=q, k=k, v=v, positions=positions, slots=slots, k_pool=k_pool, v_pool=v_pool)
    for name, x in named.items():
        if not is_array(x):
            raise fail(
                "not_an_array",
                name=name,
                kind=type(x).__name__,
                expected="mx.array or np.ndarray",
                got=type(x).__name__,
                hint=f"Wrap {name} with mx.array(...) or np.asarray(...).",
            )
    check_types(
        head_dim=head_dim,
        num_qo_heads=num_qo_heads,
        num_kv_heads=num_kv_heads,
        check_values=check_values,
        inplace=inplace,
    )

    # --- SGLang's Python wrapper, in its order ---------------------------------------------
    if q.ndim != 3 or k.ndim != 3 or v.ndim != 3:
        raise fail(
            "qkv_ndim",
            expected="3-D q, k, v: [T, Hq, D], [T, Hkv, D], [T, Hkv, D]",
            got=f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}",
            hint="A 2-D [T, H*D] array is a projection output whose heads were not split yet: reshape it to [T, H, D].",
        )
    rows3 = position_rows == 3 and positions.ndim == 2  # mrope's (time, height, width) positions
    if (positions.ndim != 1 and not rows3) or slots.ndim != 1:
        raise fail(
            "index_ndim",
            expected="positions [T] and slots [T]" + (" (mrope: positions [3, T] too)" if position_rows == 3 else ""),
            got=f"positions {tuple(positions.shape)}, slots {tuple(slots.shape)}",
            hint="Flatten them with .reshape(-1).",
        )
    if k_pool.ndim != 3 or v_pool.ndim != 3:
        raise fail(
            "pool_ndim",
            expected="k_pool and v_pool of shape [P, Hkv, D]",
            got=f"k_pool {tuple(k_pool.shape)}, v_pool {tuple(v_pool.shape)}",
            hint=f"View each pool as [P, {num_kv_heads}, {head_dim}].",
        )
    T = q.shape[0]
    if tuple(q.shape) != (T, num_qo_heads, head_dim):
        hint = f"q has {_heads(q.shape[1])} of size {q.shape[2]}."
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
        raise fail(
            "k_shape",
            shape=tuple(k.shape),
            expected=f"{(T, num_kv_heads, head_dim)} = [T, Hkv, D]",
            got=tuple(k.shape),
            hint=_k_shape_hint(tuple(k.shape), T, num_qo_heads, num_kv_heads, head_dim),
        )
    if tuple(v.shape) != tuple(k.shape):
        raise fail(
            "v_shape",
            shape=tuple(v.shape),
            k_shape=tuple(k.shape),
            expected=f"{tuple(k.shape)} like k",
            got=tuple(v.shape),
            hint="v must be [T, Hkv, D] exactly like k; do not repeat its heads.",
        )
    if positions.shape[-1] != T or slots.shape[0] != T or (rows3 and positions.shape[0] != 3):
        raise fail(
            "index_len",
            expected=f"{T} positions and {T} slots (one per token)" + (f"; mrope positions [3, {T}]" if rows3 else ""),
            got=f"{tuple(positions.shape) if rows3 else positions.shape[0]} positions, {slots.shape[0]} slots",
            hint="In a decode step pass only the new tokens' positions and slots.",
        )
    if tuple(k_pool.shape[1:]) != (num_kv_heads, head_dim):
        hint = f"each pool row must hold one token's k: [{num_kv_heads}, {head_dim}]."
        if k_pool.shape[1] == num_qo_heads != num_kv_heads:
            hint += " The pool has num_qo_heads heads: allocate it with config.num_key_value_heads."
        raise fail(
            "k_pool_shape",
            shape=tuple(k_pool.shape),
            expected=f"[P, {num_kv_heads}, {head_dim}]",
            got=tuple(k_pool.shape),
            hint=hint,
        )
    if tuple(v_pool.shape) != tuple(k_pool.shape):
        raise fail(
            "v_pool_shape",
            shape=tuple(v_pool.shape),
            k_shape=tuple(k_pool.shape),
            expected=f"{tuple(k_pool.shape)} like k_pool",
            got=tuple(v_pool.shape),
            hint="Allocate v_pool exactly like k_pool.",
        )
    dt = {name: dtype_name(x) for name, x in named.items()}
    if not dt["q"] == dt["k"] == dt["v"]:
        raise fail(
            "qkv_dtype",
            expected="one dtype for q, k, v",
            got=f"q {dt['q']}, k {dt['k']}, v {dt['v']}",
            hint=f"Cast k and v to {dt['q']} (or all three to the pool's dtype).",
        )
    fp8 = "uint8" in (dt["k_pool"], dt["v_pool"])
    if fp8 and not dt["k_pool"] == dt["v_pool"]:
        raise fail(
            "fp8_pool_dtype",
            k_pool=dt["k_pool"],
            v_pool=dt["v_pool"],
            expected="k_pool and v_pool both uint8 (e4m3 codes)",
            got=f"k_pool {dt['k_pool']}, v_pool {dt['v_pool']}",
            hint="An FP8 cache keeps both pools as uint8: allocate v_pool like k_pool.",
        )
    if not fp8 and not dt["k_pool"] == dt["v_pool"] == dt["q"]:
        raise fail(
            "pool_dtype",
            expected=f"pools in {dt['q']}",
            got=f"k_pool {dt['k_pool']}, v_pool {dt['v_pool']}",
            hint="Allocate float pools in the activations' dtype (the op does not convert one float type to "
            "another), or both pools as uint8 for an FP8 cache.",
        )

    # --- SGLang's C++ extension --------------------------------------------------------------
    if dt["positions"] != "int32" or dt["slots"] != "int32":
        raise fail(
            "index_dtype",
            expected="int32 positions and slots",
            got=f"positions {dt['positions']}, slots {dt['slots']}",
            hint="arange defaults to int64: cast with .astype(np.int32) or .astype(mx.int32).",
        )
    if head_dim % 2:
        raise fail(
            "head_dim_odd",
            expected="an even head_dim",
            got=head_dim,
            hint="NeoX RoPE pairs dimension i with i + head_dim/2.",
        )
    if dt["q"] not in FLOAT_DTYPES:
        raise fail(
            "unsupported_dtype",
            expected="float16, bfloat16 or float32",
            got=dt["q"],
            hint="NumPy defaults to float64: cast to float32 (or float16).",
        )

    # --- What SGLang leaves unchecked --------------------------------------------------------
    if not (num_qo_heads > 0 and num_kv_heads > 0 and head_dim > 0):
        got = f"num_qo_heads={num_qo_heads}, num_kv_heads={num_kv_heads}, head_dim={head_dim}"
        raise fail(
            "head_count",
            expected="all three > 0",
            got=got,
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
    base = finite_float(rope_base)
    if base is None or base <= 0:
        raise fail(
            "rope_base",
            expected="a finite rope_base > 0, e.g. 10000.0 or 500000.0",
            got=repr(rope_base),
            hint="Pass config.rope_theta (10000.0 where the config has none).",
        )
    _validate_frequencies(head_dim, base)
    fusion = _validate_fusion(q_norm_weight, k_norm_weight, norm_eps, k_scale, v_scale, head_dim, fp8)
    write = plan_values(positions, slots, k_pool.shape[0], check_values)
    if check_values and (fusion.qnorm or fusion.knorm):
        _validate_norm_range(q if fusion.qnorm else None, k if fusion.knorm else None, head_dim)
    if inplace:
        _validate_inplace(k_pool, v_pool)
        _validate_inplace_inputs(named)
    return write, fusion


def read_slots(slots) -> np.ndarray:
    """The slots ``[T]`` on the host, int64: the one read of them a call (or an engine step) makes.

    For device arrays (Metal, CUDA) this is a synchronisation: a step plans once
    (:func:`ropepool.op.plan_step`), not once per layer.
    """
    return to_numpy(slots, np.int64)


def plan_values(positions, slots, pool_rows: int, check_values: bool) -> Plan:
    """The write of ``slots`` into a pool of ``pool_rows`` rows, their values (and the positions') checked
    first when ``check_values``: the value half of :func:`validate`, which :func:`validate_indices` precedes."""
    host_slots = read_slots(slots)  # [T]
    if check_values:
        pos = to_numpy(positions, np.int64)
        if pos.ndim == 2:  # mrope's [3, T]: each token's worst row (its smallest if negative, else its largest)
            pos = np.where((pos < 0).any(axis=0), pos.min(axis=0, initial=0), pos.max(axis=0, initial=0))
        _validate_values(pos, host_slots, pool_rows)
    return plan(host_slots, pool_rows, checked=check_values)


def validate_indices(positions, slots, *, check_values=True) -> None:
    """The checks of :func:`validate` that concern positions and slots alone, in its order and words."""
    for name, x in (("positions", positions), ("slots", slots)):
        if not is_array(x):
            raise fail(
                "not_an_array",
                name=name,
                kind=type(x).__name__,
                expected="mx.array or np.ndarray",
                got=type(x).__name__,
                hint=f"wrap {name} with mx.array(...) or np.asarray(...).",
            )
    check_types(check_values=check_values)
    if positions.ndim != 1 or slots.ndim != 1:
        raise fail(
            "index_ndim",
            expected="positions [T] and slots [T]",
            got=f"positions {tuple(positions.shape)}, slots {tuple(slots.shape)}",
            hint="flatten them with .reshape(-1).",
        )
    if positions.shape[0] != slots.shape[0]:
        T = positions.shape[0]
        raise fail(
            "index_len",
            expected=f"{T} positions and {T} slots (one per token)",
            got=f"{positions.shape[0]} positions, {slots.shape[0]} slots",
            hint="in a decode step pass only the new tokens' positions and slots.",
        )
    if dtype_name(positions) != "int32" or dtype_name(slots) != "int32":
        raise fail(
            "index_dtype",
            expected="int32 positions and slots",
            got=f"positions {dtype_name(positions)}, slots {dtype_name(slots)}",
            hint="arange defaults to int64: cast with .astype(np.int32) or .astype(mx.int32).",
        )


def fusion_settings(
    *, head_dim: int, fp8: bool, q_norm_weight=None, k_norm_weight=None, norm_eps=1e-6, k_scale=1.0, v_scale=1.0
) -> Fusion:
    """A layer's QK-norm and FP8 settings, checked as :func:`validate` checks them."""
    return _validate_fusion(q_norm_weight, k_norm_weight, norm_eps, k_scale, v_scale, head_dim, fp8)


def _validate_fusion(q_norm_weight, k_norm_weight, norm_eps, k_scale, v_scale, head_dim: int, fp8: bool) -> Fusion:
    """QK-norm's weights and eps, the FP8 scales; the :class:`Fusion` they describe."""
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
    for name, w in (("q_norm_weight", q_norm_weight), ("k_norm_weight", k_norm_weight)):
        if w is None:
            continue
        if not is_array(w):
            raise fail(
                "not_an_array",
                name=name,
                kind=type(w).__name__,
                expected="mx.array or np.ndarray",
                got=type(w).__name__,
                hint=f"Pass the norm's weight array (attn.{name[0]}_norm.weight).",
            )
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
        if dtype_name(w) not in FLOAT_DTYPES:
            raise fail(
                "norm_weight_dtype",
                name=name,
                expected="float16, bfloat16 or float32",
                got=dtype_name(w),
                hint="Cast the weight to float32 (NumPy defaults to float64).",
            )
    eps = finite_float(norm_eps)
    if eps is None or not eps >= NORM_EPS_MIN:
        raise fail(
            "norm_eps",
            expected=f"a finite norm_eps >= {NORM_EPS_MIN:g}, e.g. 1e-6",
            got=repr(norm_eps),
            hint="Pass the model's rms_norm_eps (Qwen3: 1e-6); below 1e-30 float32 cannot keep "
            "the reference's result for a head of zeros or tiny values.",
        )
    for name, scale in (("k_scale", k_scale), ("v_scale", v_scale)):
        x = finite_float(scale)
        if x is None or not KV_SCALE_MIN <= x <= KV_SCALE_MAX:  # 1/scale a normal float32
            raise fail(
                "kv_scale",
                name=name,
                expected=f"{name} in [2**-126, 2**126] (1.0: the values as they are)",
                got=repr(scale),
                hint=f"{name} divides the values before FP8 rounding: use the checkpoint's scale, or 1.0.",
            )
        if not fp8 and x != 1.0:
            raise fail(
                "kv_scale",
                name=name,
                expected=f"{name}=1.0 with float pools",
                got=repr(scale),
                hint="k_scale and v_scale scale an FP8 (uint8) cache; float pools store the values "
                "as they are. Allocate uint8 pools for FP8, or leave the scales at 1.0.",
            )
    return Fusion(q_norm_weight, k_norm_weight, eps, fp8, float(k_scale), float(v_scale))


def _validate_frequencies(head_dim: int, rope_base: float) -> None:
    """The rotation's inverse frequencies must hold in float32 (:func:`ropepool.rope.rope_table` checks)."""
    plain(head_dim, rope_base)


def _validate_inplace_inputs(named: dict) -> None:
    """No input may share memory with a pool written in place (the write would change it mid-call)."""
    inputs = {n: x for n, x in named.items() if n not in ("k_pool", "v_pool")}
    clash = input_overlapping_pools(inputs, named["k_pool"], named["v_pool"])
    if clash:
        name, pool = clash
        raise fail(
            "inplace_unsupported",
            got=f"{name} shares memory with {pool}",
            expected="inputs in buffers of their own",
            hint=f"Pass a copy of {name} (np.array({name}) or mx.array(np.array({name}))): "
            f"writing {pool} in place would change {name} while the call reads it.",
        )


def _validate_inplace(k_pool, v_pool) -> None:
    for name, pool in (("k_pool", k_pool), ("v_pool", v_pool)):
        problem = pool_problem(pool)
        if problem:
            raise fail(
                "inplace_unsupported",
                got=f"{name} is {problem}",
                expected="writable, row-contiguous pools in host memory",
                hint="Pass a contiguous, writable copy (np.ascontiguousarray(pool) or np.array(pool)), "
                "or call without inplace=True and rebind the pools it returns.",
            )
    if pools_overlap(k_pool, v_pool):
        raise fail(
            "inplace_unsupported",
            got="k_pool and v_pool share memory",
            expected="two distinct pool buffers",
            hint="Allocate v_pool separately: writing v's rows would overwrite k's.",
        )


def _validate_norm_range(q, k, head_dim: int) -> None:
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


def _validate_values(pos: np.ndarray, slots: np.ndarray, pool_rows: int) -> None:
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
    if (pos < 0).any():
        t = int(np.argmax(pos < 0))
        raise fail(
            "position_negative",
            expected="positions >= 0",
            got=f"{pos[t]} at token {t}",
            hint="Mark a token that should not be written with slot -1, not position -1.",
        )
    if (pos >= MAX_POSITION).any():
        t = int(np.argmax(pos >= MAX_POSITION))
        raise fail(
            "position_too_large",
            expected=f"positions < {MAX_POSITION}",
            got=f"{pos[t]} at token {t}",
            hint="Float32 angles cannot tell such positions apart; is this a slot or garbage?",
        )
    if (slots >= pool_rows).any():
        t = int(np.argmax(slots >= pool_rows))
        raise fail(
            "slot_out_of_range",
            pool_rows=pool_rows,
            expected=f"slots < P = {pool_rows} (or -1 to skip)",
            got=f"{slots[t]} at token {t}",
            hint=f"The pool has rows 0..{pool_rows - 1}; an out-of-range slot is an out-of-bounds write.",
        )
    written = slots[slots >= 0]
    uniq, first, counts = np.unique(written, return_index=True, return_counts=True)
    if (counts > 1).any():
        row = int(uniq[np.argmax(counts > 1)])
        tokens = np.flatnonzero(slots == row).tolist()
        raise fail(
            "duplicate_slot",
            expected="distinct slots for writing tokens",
            got=f"row {row} from tokens {tokens}",
            hint="Give every token its own slot, or slot -1 to write nothing.",
        )
