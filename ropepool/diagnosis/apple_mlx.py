"""MLX's and mlx-lm's messages (wording of mlx 0.32 and mlx-lm 0.32, as printed).

==================================================================  =======================================
``[reshape] Cannot reshape array of size 7168 into shape (1,7,32,128).``   mlx ``reshape`` (a view)
``[broadcast_shapes] Shapes (1,32,7,128) and (1,8,7,128) cannot be broadcast.``  mlx broadcasting
``[scaled_dot_product_attention] n_heads must be a multiple of n_kv_heads, ...``  mlx.fast SDPA
``[scaled_dot_product_attention] keys, values expected to have matching n_kv_heads; ...``
``[rope] dims must not exceed the input's last dimension (128) but got 256.``   mlx.fast.rope
``Expected shape (1024, 4096) but received shape (4096, 4096) for parameter ...``  mlx.nn load_weights
``Received 32 parameters not in model: model.layers.0.self_attn.rotary_emb.inv_freq, ...``  strict load_weights
``rope_scaling must contain keys {...}``, ``rope_scaling 'type' currently only supports 'linear'``,
``Unsupported RoPE type ...``                                       mlx-lm's model files and rope_utils
==================================================================  =======================================
"""

from __future__ import annotations

import re

from .base import Diagnosis, Facts, ambiguous, heads
from .heads import broadcast_case, fused_qkv_case, head_dim_from_hidden, merged_view_case, view_case, weight_case
from .sizes import one_layout
from .text import after, ints, last_read, on_line, product, shapes
from .pytorch import proj_of

MLX = "MLX (mlx/ops.cpp)"
MLX_LM = "mlx-lm (mlx_lm/models/*.py, rope_utils.py)"

#: mlx's reshape: (the array's size, the shape asked).
_RESHAPE = re.compile(r"Cannot reshape array of size (\d{1,19}) into shape \(([-\d,\s]{1,200})\)")
#: mlx.fast SDPA's head checks: (q's heads, k's), then (k's heads, v's).
_SDPA_HEADS = re.compile(r"found n_heads (\d{1,19}) for n_kv_heads (\d{1,19})")
_SDPA_KV_HEADS = re.compile(r"found keys with n_heads (\d{1,19}) for values with n_heads (\d{1,19})")
#: mlx.fast.rope: (the input's last axis, dims).
_ROPE_DIMS = re.compile(r"last dimension \((\d{1,19})\) but got (\d{1,19})")
#: load_weights' shape check: (the model's shape, the weights', the parameter).
_LOAD_SHAPE = re.compile(
    r"Expected shape \(([\d, ]{1,100})\) but received shape \(([\d, ]{1,100})\) for parameter ([\w.]{1,300})"
)
#: Strict load_weights' extra names, one a line, the last ending in ".": (their count, the names).
#: The older wording has no count and separates the names by spaces: "Received parameters not in model: a b."
_STRICT_EXTRAS = re.compile(
    r"Received (?:(\d{1,9}) )?parameters not in model: ?((?:[\w.]{1,300}(?:, ?| )){0,400}[\w.]{1,300}?)\.(?: |$)"
)
#: mlx-lm's initialize_rope: (the rope_type).
_UNSUPPORTED_ROPE = re.compile(r"Unsupported RoPE type (\w{1,40})")


def _reshape(line: str, f: Facts) -> Diagnosis | None:
    m = _RESHAPE.search(line)
    if not m:
        return None
    numel, dims = int(m.group(1)), ints(m.group(2))
    if len(dims) < 3 or -1 in dims[:-2]:
        return None
    if len(dims) == 3 and -1 not in dims:
        merged = merged_view_case(dims, numel, f)
        if merged is not None:
            return Diagnosis("mlx", MLX + " reshape", m.group(0), *merged)
    fused = fused_qkv_case(dims, numel, f)
    if fused is not None:
        return Diagnosis(
            "mlx", MLX + " reshape", m.group(0), f"{numel} values into {tuple(dims)}: a fused qkv split", *fused
        )
    rows = product(dims[:-2])
    width = numel // rows if rows and numel % rows == 0 else None
    nheads = None if dims[-2] == -1 else dims[-2]
    case, quantity, why, fix = view_case(width, nheads, dims[-1], f, rows=rows, numel=numel)
    read = f"{numel} values into {tuple(dims)}: " + (f"{width} values per row" if width else "not whole rows")
    return Diagnosis("mlx", MLX + " reshape", m.group(0), read, case, quantity, why, fix)


def _broadcast(line: str, f: Facts) -> Diagnosis | None:
    found = shapes(line)
    if len(found) < 2:
        return None
    a, b = found[0], found[1]
    n = max(len(a), len(b))
    pa, pb = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    bad = [i for i in range(n) if pa[i] != pb[i] and 1 not in (pa[i], pb[i])]
    if not bad:
        return None
    dim = bad[-1]
    verdict = _cache_write_or_repeat(pa, pb, dim, f) if len(a) == len(b) == 4 else None
    case, quantity, why, fix = verdict or broadcast_case(pa[dim], pb[dim], dim, f, n, not one_layout(pa, pb, f))
    return Diagnosis(
        "mlx",
        MLX + " broadcasting",
        line.strip()[:300],
        f"{a} against {b}: {pa[dim]} vs {pb[dim]} at axis {dim}",
        case,
        quantity,
        why,
        fix,
    )


def _cache_write_or_repeat(a: tuple, b: tuple, dim: int, f: Facts) -> tuple | None:
    """Two whole [B, H, T, D] arrays of q's and k's head counts: attention without repeat_kv, or a cache
    write of k already repeated; the two give the same numbers. None where the numbers are not those."""
    Hq, Hkv = f.num_qo_heads, f.num_kv_heads
    if not (Hq and Hkv and Hq != Hkv and dim == 1 and {a[1], b[1]} == {Hq, Hkv} and a[3] == b[3]):
        return None
    D, T = a[3], a[2]
    return ambiguous(
        [
            (
                "missing_repeat_kv",
                f"missing repeat_kv: q ({Hq} heads) met k or v ({Hkv}) in attention written for MHA (an "
                f"elementwise op or a hand-written product): repeat k and v with mx.repeat(k, {Hq // Hkv}, axis=1), "
                f"or call mx.fast.scaled_dot_product_attention, which takes {Hkv} KV heads",
            ),
            (
                "repeated_kv_written",
                f"or k (or v) was repeated to the query heads before the cache write: [B, {Hq}, {T}, {D}] written "
                f"into a cache of [B, {Hkv}, ..., {D}] (KVCache.update_and_fetch, keys[..., prev:offset, :] = k): "
                "write the un-repeated k and v; repeat_kv belongs to attention, after the write",
            ),
        ],
        "the traceback's failing line (cache.update_and_fetch or a slice assignment: the cache write; q * k, "
        "q @ k or a where(): attention), or print(q.shape, k.shape, cache.keys.shape) before the write",
    )


_BUFFERS = ("inv_freq", "cos_cached", "sin_cached", "_cos_cached", "_sin_cached")


def _strict_load(text: str, i: int, f: Facts) -> Diagnosis | None:
    window = after(text, i, 4000)
    m = _STRICT_EXTRAS.search(window)
    if not m:
        return None
    names = [n for n in m.group(2).replace(",", " ").split() if n]
    rope = [n for n in names if n.rsplit(".", 1)[-1] in _BUFFERS]
    if not rope:
        return None
    others = [n for n in names if n not in rope]
    theta = f.rope_theta
    base = (f"{int(theta)}" if theta == int(theta) else f"{theta:g}") if theta else "config.rope_theta"
    width = f.rotary_dim or f.head_dim
    per = f" ({width // 2} entries a layer)" if width else ""
    why = (
        f"{rope[0]}{' and the others like it' if len(rope) > 1 else ''} are RoPE buffers, not weights: "
        f"inv_freq = 1 / rope_theta^(2i/d) (rope_theta = {base}){per} is computed from the config, never "
        "learned. Older transformers saved it in checkpoints (a persistent buffer); mlx's strict "
        "load_weights refuses any name the model has no parameter for."
    )
    if others:
        why += (
            f" The other {len(others)} shown ({', '.join(others[:3])}) are not RoPE's: they say the model class or "
            "its config differ from the checkpoint's (lm_head.weight: tie_word_embeddings)."
        )
    fix = (
        "Drop the buffers before loading, as mlx-lm's llama and qwen2 do in sanitize: weights = {k: v for k, v in "
        "weights.items() if 'rotary_emb.inv_freq' not in k}; add the same to the model's sanitize (mlx-lm's phi3 "
        "has none). load_weights(..., strict=False) also loads, but hides every other mismatch."
    )
    return Diagnosis(
        "mlx",
        "mlx.nn.Module.load_weights, strict (python/mlx/nn/layers/base.py)",
        m.group(0)[:300],
        f"{m.group(1) or len(names)} names the model lacks, {len(rope)} of those shown RoPE buffers",
        "rope_buffers_in_weights",
        "layout",
        why,
        fix,
    )


def _sdpa(line: str, f: Facts) -> Diagnosis | None:
    Hq, Hkv, D = f.num_qo_heads, f.num_kv_heads, f.head_dim
    m = _SDPA_HEADS.search(line)
    if m:
        nq, nk = int(m.group(1)), int(m.group(2))
        read = f"q has {heads(nq)}, k and v {nk}"
        if Hq and Hkv:
            if nk != Hkv:
                return Diagnosis(
                    "mlx",
                    MLX + " scaled_dot_product_attention",
                    line.strip()[:300],
                    read,
                    "foreign_k",
                    "heads",
                    f"k and v reach attention with {nk} on their head axis, the model has Hkv = {Hkv}: "
                    "k was viewed with another head count, or is still [B, T, H, D] (not transposed to "
                    "[B, H, T, D]).",
                    f"k = k.reshape(B, T, {Hkv}, {D}).transpose(0, 2, 1, 3), the same for v.",
                )
            return Diagnosis(
                "mlx",
                MLX + " scaled_dot_product_attention",
                line.strip()[:300],
                read,
                "foreign_q",
                "heads",
                f"q reaches attention with {nq} on its head axis, the model has Hq = {Hq}"
                + (
                    f": {nq} is no head count of the model, so probably q's tokens: q is still [B, T, H, D] "
                    "(not transposed to [B, H, T, D]), or was viewed with another head count."
                    if nq not in (Hq, Hkv)
                    else "."
                ),
                f"q = q.reshape(B, T, {Hq}, {D}).transpose(0, 2, 1, 3).",
            )
        case, quantity, why, fix = ambiguous(
            [
                ("heads", f"k was viewed with {nk} heads, not the model's num_key_value_heads"),
                ("layout", f"or k is [B, T, H, D] and {nk} is its token count (transpose to [B, H, T, D])"),
            ],
            "k.shape before the call against config.num_key_value_heads (or add --model)",
        )
        return Diagnosis(
            "mlx", MLX + " scaled_dot_product_attention", line.strip()[:300], read, case, quantity, why, fix
        )
    m = _SDPA_KV_HEADS.search(line)
    if not m:
        return None
    nk, nv = int(m.group(1)), int(m.group(2))
    read = f"k has {nk} on its head axis, v {nv}"
    if Hkv and nv == Hkv and nk != Hkv:
        why, fix = (
            f"v has the model's {Hkv} KV heads, k has {nk} on that axis: k was not transposed to "
            f"[B, H, T, D] ({nk} is then its token count) or comes from another projection.",
            f"k = k.reshape(B, T, {Hkv}, {D}).transpose(0, 2, 1, 3), as v.",
        )
        return Diagnosis(
            "mlx", MLX + " scaled_dot_product_attention", line.strip()[:300], read, "k_layout", "layout", why, fix
        )
    case, quantity, why, fix = ambiguous(
        [
            ("layout", "one of k and v was not transposed to [B, H, T, D]"),
            ("heads", "or they come from projections of different head counts"),
        ],
        "k.shape and v.shape before the call (add --model to compare with num_key_value_heads)",
    )
    return Diagnosis("mlx", MLX + " scaled_dot_product_attention", line.strip()[:300], read, case, quantity, why, fix)


def _rope(line: str, f: Facts) -> Diagnosis | None:
    m = _ROPE_DIMS.search(line)
    if not m:
        return None
    last_dim, dims = int(m.group(1)), int(m.group(2))
    read = f"dims = {dims} for an input whose last axis is {last_dim}"
    D, rd = f.head_dim, f.rotary_dim or f.head_dim
    if D and last_dim != D and last_dim == f.naive_head_dim:
        case, quantity, why, fix = head_dim_from_hidden(f, last_dim)
        return Diagnosis(
            "mlx",
            "mx.fast.rope",
            line.strip()[:300],
            read,
            case,
            quantity,
            f"the rope input was viewed with head size {last_dim}: " + why,
            fix,
        )
    if D and last_dim == D:
        return Diagnosis(
            "mlx",
            "mx.fast.rope",
            line.strip()[:300],
            read,
            "rotary_dim",
            "rotary_dim",
            f"mx.fast.rope was asked to rotate {dims} dimensions of a {D}-wide head: dims is the "
            f"rotated width (rotary_dim), at most head_dim.",
            f"Pass dims = {rd} (rotary_dim = int(partial_rotary_factor * head_dim), or head_dim).",
        )
    if D and last_dim != D:
        return Diagnosis(
            "mlx",
            "mx.fast.rope",
            line.strip()[:300],
            read,
            "layout",
            "layout",
            f"the input's last axis is {last_dim}, not head_dim {D}: rope was applied before the "
            "projection was viewed as [B, H, T, head_dim].",
            f"Apply rope to x.reshape(B, T, H, {D}).transpose(0, 2, 1, 3), with dims = {rd}.",
        )
    case, quantity, why, fix = ambiguous(
        [
            ("rotary_dim", f"dims = {dims} is not the rotated width (rotary_dim <= head_dim)"),
            ("layout", f"or the input is not [..., head_dim] ({last_dim} would be another axis)"),
        ],
        "x.shape[-1] against config.head_dim (or add --model)",
    )
    return Diagnosis("mlx", "mx.fast.rope", line.strip()[:300], read, case, quantity, why, fix)


def _load_weights(line: str, f: Facts) -> Diagnosis | None:
    m = _LOAD_SHAPE.search(line)
    if not m:
        return None
    want, have, name = ints(m.group(1)), ints(m.group(2)), m.group(3)
    proj = proj_of(name)
    if proj is None or not want or not have:
        return None
    cols = have[1] if len(have) == 2 else None
    built = want[1] if len(want) == 2 else None
    case, quantity, why, fix = weight_case(proj, have[0], want[0], f, cols=cols, built_cols=built, where="the config")
    return Diagnosis(
        "mlx-lm",
        "mlx.nn.Module.load_weights (as mlx_lm.load calls it)",
        m.group(0),
        f"{name}: the weights {tuple(have)}, the model built from config.json {tuple(want)}",
        case,
        quantity,
        why,
        fix,
    )


def _mlx_lm_rope(line: str, f: Facts) -> Diagnosis | None:
    line = line.strip()[:400]
    if "must contain keys" in line or "must contain either" in line:
        return Diagnosis(
            "mlx-lm",
            MLX_LM,
            line,
            "rope_scaling's keys",
            "layout_skew",
            "versions",
            "this mlx-lm model file reads rope_scaling['type'] and the config spells it 'rope_type' "
            "(the layout of transformers >= 4.43, Llama 3.1+): model file and config come from "
            "different sides of the change (mlx-examples #909).",
            "Upgrade mlx-lm (pip install -U mlx-lm: its llama reads rope_type and llama3 scaling); for a "
            "model file that still wants 'type', add \"type\" with the rope_type's value beside it.",
        )
    if "currently only supports" in line:
        return Diagnosis(
            "mlx-lm",
            MLX_LM,
            line,
            "the scaling type",
            "library_older_than_config",
            "versions",
            "this mlx-lm computes only linear scaling for this model, and the config asks for another "
            "type (yarn for Qwen2.5's 128k variants: mlx-examples #1329).",
            "Upgrade mlx-lm: its models build RoPE through rope_utils.initialize_rope, which computes "
            "yarn, llama3 and longrope (Qwen2's model file does in mlx-lm 0.32).",
        )
    m = _UNSUPPORTED_ROPE.search(line)
    if m:
        kind = m.group(1)
        fix = (
            "dynamic NTK changes nothing below original_max_position_embeddings: for prompts shorter than that, "
            "remove rope_scaling; longer contexts need a scaling mlx-lm computes (linear, llama3, yarn, longrope)"
            if kind == "dynamic"
            else "use a scaling mlx-lm computes (default, linear, llama3, yarn, longrope, mrope) or a newer mlx-lm"
        )
        return Diagnosis(
            "mlx-lm",
            MLX_LM,
            line,
            f"rope_type {kind!r}",
            "unsupported_scaling",
            "scaling",
            f"mlx-lm's initialize_rope has no {kind!r} scaling.",
            fix[0].upper() + fix[1:] + ".",
        )
    return None


def _received(text: str, i: int, f: Facts) -> Diagnosis | None:
    """mlx's strict ``load_weights``, read from the "Received N parameters" before the phrase at ``i``."""
    start = text.rfind("Received", max(0, i - 60), i)
    return _strict_load(text, start if start >= 0 else i, f)


#: Each message's phrase, and its reader.
_READERS = {
    "Cannot reshape array of size": on_line(_reshape),
    "[broadcast_shapes]": on_line(_broadcast),
    "[scaled_dot_product_attention]": on_line(_sdpa),
    "[rope] dims must not exceed": on_line(_rope),
    "but received shape": on_line(_load_weights),
    "rope_scaling must contain": on_line(_mlx_lm_rope),
    "rope_scaling 'type' currently only supports": on_line(_mlx_lm_rope),
    "Unsupported RoPE type": on_line(_mlx_lm_rope),
    "parameters not in model:": _received,
}


def diagnose(text: str, f: Facts) -> tuple[int, Diagnosis] | None:
    """The last MLX or mlx-lm message in ``text``, diagnosed; with its position."""
    return last_read(text, _READERS, f)
