"""``python -m ropepool check CONFIG_OR_PRESET``: a model's shapes for this op, then one real call.

Prints the op's parameters as read from the config (:func:`ropepool.models.from_config`), the
shapes of q, k, v and the pools (symbolic and concrete), the group size and the pool's memory
per layer; then runs ``rope_pool_fused`` once on random data of those shapes on the best
backend here and checks the result. With ``--num-kv-heads N`` that disagrees with the config it
makes the call a misconfigured program makes (k from the config's K projection, ``num_kv_heads=N``)
and prints the op's error, its hint and the fix.

Exit status: 0 the call ran and checked out; 1 the model does not fit the op, the given
``--num-kv-heads`` is wrong, or the call failed; 2 the config could not be read or an option is bad.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

import numpy as np

from ..kv_layout import POOL_BYTES, layout_from_config, mla_op_kwargs
from ..models import ConfigError, RopeParams, beyond_preset_names, from_config, load_config, preset_names, printable
from ..rope import rope_table
from ..shapes import DTYPE_BYTES, Shapes
from ..tolerance import error_ratio


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``check`` subcommand's arguments."""
    parser.add_argument(
        "source",
        metavar="CONFIG_OR_PRESET",
        help="a config.json (or a folder holding one), or a preset: "
        f"{', '.join(preset_names() + beyond_preset_names())}",
    )
    parser.add_argument("--tokens", type=int, default=8, help="T, tokens in the call (default 8)")
    parser.add_argument("--pool", type=int, default=64, help="P, rows in each pool (default 64)")
    parser.add_argument("--dtype", choices=sorted(DTYPE_BYTES), default="float16", help="default float16")
    parser.add_argument(
        "--num-kv-heads",
        type=int,
        default=None,
        metavar="N",
        help="the num_kv_heads your code passes; explained if it disagrees with the config",
    )


def human_bytes(n: int) -> str:
    """A byte count for people.

    >>> human_bytes(1536), human_bytes(8 * 2**20)
    ('1.5 KiB', '8.0 MiB')
    """
    size, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            break
        size /= 1024
    return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"


def _attention_kind(p: RopeParams) -> str:
    if p.num_kv_heads == p.num_qo_heads:
        return "MHA: one KV head per query head"
    if p.num_kv_heads == 1:
        return f"MQA: all {p.num_qo_heads} query heads share one KV head"
    return f"GQA: each KV head serves {p.group_size} query heads"


def describe(p: RopeParams, config: dict, s: Shapes, dtype: str) -> str:
    """The report's first part: parameters, shapes, group size and pool memory."""
    lines = [f"model       {p.name}"]
    if config.get("_source"):
        lines.append(f"source      {printable(str(config['_source']), 1000)}")
    lines += [
        "",
        "parameters",
        f"  num_qo_heads  Hq  = {p.num_qo_heads}",
        f"  num_kv_heads  Hkv = {p.num_kv_heads}",
        f"  head_dim      D   = {p.head_dim}",
        f"  rope_base         = {p.rope_base}",
        f"  group size    G = Hq // Hkv = {p.group_size}  ({_attention_kind(p)})",
    ]
    lines += [f"  note: {n}" for n in p.notes]
    lines += ["", *rotation_lines(p)]
    lines += [f"  WARNING: {w}" for w in p.warnings]
    lines += ["", f"shapes (T = {s.tokens}, P = {s.pool_rows}, {dtype})"]
    lines += [f"  {name:<10}{sym:<14}{shape}" for name, sym, shape in s.table()]
    per_token = 2 * s.num_kv_heads * s.head_dim * DTYPE_BYTES[dtype]  # k and v, [Hkv, D] each
    lines += [
        "",
        f"pool memory per layer (k_pool + v_pool, {dtype})",
        f"  per token     2 x Hkv x D x {DTYPE_BYTES[dtype]} B = 2 x {s.num_kv_heads} x {s.head_dim} x "
        f"{DTYPE_BYTES[dtype]} B = {human_bytes(per_token)}",
        f"  {f'P = {s.pool_rows} rows':<14}{human_bytes(s.pool_bytes(dtype))}",
    ]
    layers = config.get("num_hidden_layers")
    if isinstance(layers, int) and layers > 0:
        lines.append(f"  {f'x {layers} layers':<14}{human_bytes(layers * s.pool_bytes(dtype))}")
    context = config.get("max_position_embeddings")
    if isinstance(context, int) and context > 0:
        lines.append(
            f"  one sequence of max_position_embeddings = {context} tokens: "
            f"{human_bytes(context * per_token)} per layer"
        )
    return "\n".join(lines + layout_lines(config, s.pool_rows, dtype))


#: The workload the cache-layout lines size: 8 requests of 32k tokens.
REQUESTS, CONTEXT = 8, 32768


def layout_lines(config: dict, rows: int, dtype: str) -> list[str]:
    """The cache layout (:mod:`ropepool.kv_layout`): pool shapes per layer, sliding layers, bytes; [] without
    ``num_hidden_layers``."""
    try:
        lay = layout_from_config(config)
    except ConfigError:
        return []
    lines = ["", f"cache layout ({lay.kind})"]
    lines += [
        f"  {name:<14}[P, {', '.join(map(str, shape[1:]))}] = {shape} per layer"
        for name, shape in lay.pool_shapes(rows)
    ]
    if lay.sliding_layers:
        lines.append(
            f"  layers        {lay.num_layers}: {lay.full_layers} full, {lay.sliding_layers} sliding "
            f"(window {lay.window}: at most {lay.window} rows per request each)"
        )
    else:
        lines.append(f"  layers        {lay.num_layers}, every one keeps every token")
    if lay.sinks:
        lines.append("  sinks         one learned attention-sink logit per head (no pool row)")
    lines.append(
        f"  per token     {human_bytes(lay.bytes_per_token(dtype))} over all layers "
        f"(FP8: {human_bytes(lay.bytes_per_token('fp8'))})"
    )
    lines.append(
        f"  {REQUESTS} x {CONTEXT} tokens {human_bytes(lay.cache_bytes(REQUESTS, CONTEXT, dtype))} "
        f"(FP8: {human_bytes(lay.cache_bytes(REQUESTS, CONTEXT, 'fp8'))}), windows applied"
    )
    return lines


def describe_mla(config: dict, tokens: int, rows: int, dtype: str) -> str:
    """An MLA model's report: rope_pool_fused_mla's parameters, shapes and the latent pool's memory."""
    kw = mla_op_kwargs(config)
    Hq, R, rd = kw["num_qo_heads"], kw["kv_lora_rank"], kw["rope_dim"]
    lines = [f"model       {printable(str(config.get('_name_or_path') or 'config'))}"]
    if config.get("_source"):
        lines.append(f"source      {printable(str(config['_source']), 1000)}")
    scaling = kw.get("rope_scaling") or {}
    b = POOL_BYTES[dtype]
    lines += [
        "",
        "parameters (multi-head latent attention: ropepool.rope_pool_fused_mla)",
        f"  num_qo_heads  Hq = {Hq}",
        f"  kv_lora_rank  R  = {R}",
        f"  rope_dim      rd = {rd} (qk_rope_head_dim)",
        f"  rope_base        = {kw['rope_base']}, GPT-J pairs, scaling "
        f"{scaling.get('type') or scaling.get('rope_type') or 'none'}",
        "",
        f"shapes (T = {tokens}, P = {rows}, {dtype})",
    ]
    table = [
        ("q_pe", "[T, Hq, rd]", (tokens, Hq, rd)),
        ("k_pe", "[T, 1, rd]", (tokens, 1, rd)),
        ("c_kv", "[T, R]", (tokens, R)),
        ("latent_pool", "[P, 1, R + rd]", (rows, 1, R + rd)),
    ]
    lines += [f"  {name:<12}{sym:<16}{shape}" for name, sym, shape in table]
    lines += [
        "",
        f"pool memory per layer (latent_pool, {dtype})",
        f"  per token     (R + rd) x {b} B = {R + rd} x {b} B = {human_bytes((R + rd) * b)}",
    ]
    return "\n".join(lines + layout_lines(config, rows, dtype))


def run_mla_once(config: dict, tokens: int, rows: int, dtype: str) -> str:
    """Run rope_pool_fused_mla once on random data on the best backend; check it against the reference."""
    from .._arrays import to_numpy
    from ..backends import available_backends, best_backend
    from ..inputs import mla_inputs
    from ..mla import rope_pool_fused_mla
    from ..reference import rope_pool_mla_reference

    op = mla_op_kwargs(config)
    sizes = {k: op[k] for k in ("num_qo_heads", "kv_lora_rank", "rope_dim")}
    kw = mla_inputs(tokens, *sizes.values(), rows, dtype)
    variant = {k: v for k, v in op.items() if k not in sizes and k != "rope_base"}
    backend = best_backend()
    q_rot, k_rot, pool = rope_pool_fused_mla(**kw, **variant, backend=backend)
    arrays = {k: v for k, v in kw.items() if k not in sizes}
    ref = rope_pool_mla_reference(**arrays, **variant)
    slots = to_numpy(kw["slots"])
    got = to_numpy(pool, np.float64)
    R = sizes["kv_lora_rank"]
    if not (
        np.array_equal(got[slots, 0, :R], to_numpy(kw["c_kv"], np.float64))
        and np.array_equal(got[slots, :, R:], to_numpy(k_rot, np.float64))
    ):
        raise RuntimeError("the written latent rows are not [c_kv ‖ k_pe_rot] bit for bit")
    rope = rope_table(
        sizes["rope_dim"],
        op["rope_base"],
        is_neox=False,
        rope_scaling=op.get("rope_scaling"),
        max_position_embeddings=op.get("max_position_embeddings"),
    )
    pos = to_numpy(kw["positions"])
    worst = max(
        error_ratio(to_numpy(o, np.float64), r, to_numpy(kw[n], np.float64), pos, dtype, rope)
        for o, r, n in ((q_rot, ref[0], "q_pe"), (k_rot, ref[1], "k_pe"))
    )
    if worst > 1:
        raise RuntimeError(f"q_pe_rot or k_pe_rot is {worst:.2f} x the tolerance bound from the reference")
    return (
        f"ran rope_pool_fused_mla once on backend {backend!r} ({available_backends()[backend].reason}): ok\n"
        f"  {tokens} tokens written to {len(slots)} of {rows} latent rows as [c_kv ‖ k_pe_rot], bit for bit; "
        f"q_pe_rot and k_pe_rot within {worst:.2f} of the tolerance bound (ropepool.tolerance)"
    )


def rotation_lines(p: RopeParams, shown: int = 6) -> list[str]:
    """The rotation: which dimensions turn, how they pair, the scaling, and the wavelength of some pairs."""
    rope = p.rope()
    plain = rope_table(p.head_dim, p.rope_base, rotary_dim=p.rotary_dim, is_neox=p.is_neox)
    pairs = f"NeoX (i, i + {rope.rotary_dim // 2})" if rope.is_neox else "GPT-J (2i, 2i + 1)"
    lines = [
        "rotation (passed to the op by RopeParams.op_kwargs())",
        f"  rotary part   {rope.rotary_dim} of {p.head_dim} dimensions per head"
        + ("" if rope.rotary_dim == p.head_dim else f"; the last {p.head_dim - rope.rotary_dim} pass through"),
        f"  pairing       {pairs}",
        f"  scaling       {rope.rope_type}" + (f", cos/sin scale {rope.scale:.4f}" if rope.scale != 1 else ""),
    ]
    half = rope.rotary_dim // 2
    picks = sorted(set(np.linspace(0, half - 1, min(shown, half)).round().astype(int).tolist()))
    before, after = plain.wavelengths(), rope.wavelengths()
    lines.append(
        "  wavelength (positions per turn) of pair i" + ("" if rope.rope_type == "default" else ": plain -> scaled")
    )
    for i in picks:
        scaled = "" if rope.rope_type == "default" else f" -> {after[i]:>13,.1f}  (x{after[i] / before[i]:.2f})"
        lines.append(f"    i = {i:<4} {before[i]:>13,.1f}{scaled}")
    return lines


def run_once(p: RopeParams, s: Shapes, dtype: str) -> str:
    """Run the op once on random data of shapes ``s`` on the best backend; check it; say what ran.

    Raises
    ------
    RuntimeError
        The pools or the rotation disagree with the float64 reference.
    RopePoolError
        The op rejected the call (it should not: the inputs are built from ``s``).
    """
    import numpy as np

    from .._arrays import to_numpy
    from ..backends import available_backends, best_backend
    from ..inputs import make_inputs
    from ..op import rope_pool_fused
    from ..reference import rope_pool_reference
    from ..rope import ROPE_KEYWORDS

    backend = best_backend()
    kw = make_inputs(s, dtype, kind="mlx", rope_base=p.rope_base)
    variant = {n: v for n, v in p.op_kwargs().items() if n in ROPE_KEYWORDS}
    q_rot, k_rot, k_pool, v_pool = rope_pool_fused(**kw, **variant, backend=backend)
    f64 = {n: to_numpy(kw[n], np.float64) for n in ("q", "k", "v", "k_pool", "v_pool")}
    ref = rope_pool_reference(
        f64["q"],
        f64["k"],
        f64["v"],
        to_numpy(kw["positions"]),
        to_numpy(kw["slots"]),
        f64["k_pool"],
        f64["v_pool"],
        rope_base=p.rope_base,
        **variant,
    )
    got = [to_numpy(x, np.float64) for x in (q_rot, k_rot, k_pool, v_pool)]
    slots = to_numpy(kw["slots"]).astype(np.int64)
    others = np.setdiff1d(np.arange(s.pool_rows), slots)
    if not (np.array_equal(got[2][slots], got[1]) and np.array_equal(got[3][slots], f64["v"])):
        raise RuntimeError("the written pool rows are not k_rot and v bit for bit")
    if not (
        np.array_equal(got[2][others], f64["k_pool"][others]) and np.array_equal(got[3][others], f64["v_pool"][others])
    ):
        raise RuntimeError("pool rows no token writes were changed")
    positions = to_numpy(kw["positions"])
    ratio = max(
        error_ratio(got[0], ref[0], f64["q"], positions, dtype, p.rope()),
        error_ratio(got[1], ref[1], f64["k"], positions, dtype, p.rope()),
    )
    if ratio > 1:
        raise RuntimeError(f"q_rot/k_rot differ from the float64 reference by {ratio:.2f}x the tolerance")
    return (
        f"ran rope_pool_fused once on backend {backend!r} ({available_backends()[backend].reason}): ok\n"
        f"  {s.tokens} tokens written to {len(slots)} of {s.pool_rows} pool rows, bit for bit equal to "
        f"k_rot and v; the other rows unchanged\n"
        f"  q_rot and k_rot match the float64 reference: worst error = {ratio:.2f} of the tolerance "
        f"(ropepool.tolerance)"
    )


def explain_mismatch(p: RopeParams, s: Shapes, dtype: str, num_kv_heads: int) -> str:
    """Make the call with k and the pools from the config and ``num_kv_heads``; return the explanation.

    The message and hint are the op's own (:mod:`ropepool.validation`), not a second copy.
    """
    from ..errors import RopePoolError
    from ..inputs import make_inputs
    from ..op import rope_pool_fused

    kw = make_inputs(s, dtype, kind="mlx", rope_base=p.rope_base)
    kw["num_kv_heads"] = num_kv_heads
    lines = [
        f"mismatch: num_kv_heads = {num_kv_heads}, but this config gives {p.num_kv_heads}",
        f"  with k, v and the pools built from the config ([T, {p.num_kv_heads}, {p.head_dim}]) and "
        f"num_kv_heads={num_kv_heads}, rope_pool_fused says:",
    ]
    try:
        rope_pool_fused(**kw)
    except RopePoolError as e:
        lines += [f"    {line}" for line in str(e).splitlines()]
    else:  # pragma: no cover - the k shape check always fires
        lines.append("    nothing: the call passed")
    how = next((n for n in p.notes if "KV head" in n), "config.num_key_value_heads")
    lines.append(f"fix: pass num_kv_heads={p.num_kv_heads}, the heads of the K projection ({how})")
    return "\n".join(lines)


def main(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run ``check`` for parsed ``args``; return the exit status (see the module docstring)."""
    out = out or sys.stdout
    err = err or sys.stderr
    prog = "python -m ropepool check"
    if args.tokens < 0 or args.pool < args.tokens:
        print(
            f"{prog}: need 0 <= --tokens <= --pool (each token writes its own row), "
            f"got --tokens {args.tokens} --pool {args.pool}",
            file=err,
        )
        return 2
    if args.num_kv_heads is not None and args.num_kv_heads <= 0:
        print(f"{prog}: --num-kv-heads must be > 0, got {args.num_kv_heads}", file=err)
        return 2
    try:
        config = load_config(args.source)
    except ConfigError as e:
        print(f"{prog}: {printable(str(e), 2000)}", file=err)
        return 2
    if args.source not in preset_names():
        path = Path(args.source)
        config.setdefault("_source", str(path / "config.json" if path.is_dir() else path))
    try:
        params = from_config(config)
    except ConfigError as e:
        if "kv_lora_rank" not in e.fields:
            print(f"{prog}: {printable(str(e), 2000)}", file=err)
            return 1
        return _check_mla(prog, config, args, out, err)
    shapes = params.shapes(args.tokens, args.pool)
    print(describe(params, config, shapes, args.dtype), file=out)
    print(file=out)
    if args.num_kv_heads is not None and args.num_kv_heads != params.num_kv_heads:
        print(explain_mismatch(params, shapes, args.dtype, args.num_kv_heads), file=out)
        return 1
    try:
        print(run_once(params, shapes, args.dtype), file=out)
    except Exception as e:  # the op or its check failed: say so on one line, no traceback
        print(f"{prog}: the call failed: {type(e).__name__}: {str(e).splitlines()[0]}", file=err)
        return 1
    return 0


def _check_mla(prog: str, config: dict, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``check`` of an MLA config: its own op, shapes and latent pool, then one call."""
    try:
        print(describe_mla(config, args.tokens, args.pool, args.dtype), file=out)
        print(file=out)
        print(run_mla_once(config, args.tokens, args.pool, args.dtype), file=out)
    except Exception as e:  # a bad size, or the op or its check failed: one line, no traceback
        print(f"{prog}: {type(e).__name__}: {printable(str(e).splitlines()[0], 2000)}", file=err)
        return 1
    return 0
