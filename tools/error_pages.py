"""One page per catalogued error, and their index, generated from ``ropepool.teaching.catalog`` into docs/errors/.

    .venv/bin/python tools/error_pages.py            # (re)write docs/errors/*.md
    .venv/bin/python tools/error_pages.py --check    # exit 1, naming them, when a committed page is stale

Each page reads its error's message, meaning, causes, fix and origin from the catalog (nothing here says them
again), runs the catalog's call that raises it and its fixed call to print the exact message and the change
that fixes it, and runs ``python -m ropepool explain`` on the message to print what that command says. The
errors whose numbers a model explains (shapes, head counts) also get a usual mistake made with a real
model's numbers (:data:`REAL_MISTAKES`), raised and explained the same way.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shlex
import sys
from pathlib import Path
from typing import Callable, NamedTuple

import mlx.core as mx
import numpy as np

from ropepool import errors
from ropepool.cli import main as ropepool_main
from ropepool.errors import RopePoolError
from ropepool.inputs import make_inputs
from ropepool.mla import rope_pool_fused_mla
from ropepool.models import preset
from ropepool.op import rope_pool_fused
from ropepool.shapes import Shapes
from ropepool.teaching.catalog import CATALOG, MLA_CATALOG, ErrorSpec
from ropepool.teaching.widgets.errors import ORIGINS

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "errors"

#: Who raises the error, as a page's "raised by" line says it.
RAISED_BY = {
    "sglang": "SGLang's Python wrapper of `rope_pool_fused` (sgl-kernel), and ropepool with the same message",
    "sglang-c++": "SGLang's C++ extension (PyTorch raises it as a `RuntimeError`), and ropepool with the same "
    "message (a `RopePoolRuntimeError`, also a `RuntimeError`)",
    "ropepool": "ropepool only: SGLang has no such check",
}


class RealMistake(NamedTuple):
    """A usual mistake made with a real model's numbers: the model's preset, the mistake in words, and the
    change it makes to that model's valid call (a function of the model's parameters and the call)."""

    model: str
    said: str
    change: Callable[[object, dict], dict]


def _repeat_heads(name: str) -> Callable[[object, dict], dict]:
    return lambda p, kw: {name: mx.repeat(kw[name], p.num_qo_heads // p.num_kv_heads, axis=1)}


#: The errors whose numbers a model explains, each with one usual mistake on a real model (4 tokens, a pool of
#: 16 rows): the message it raises is read by ``explain --model``, as a learner would paste it.
REAL_MISTAKES: dict[str, RealMistake] = {
    "q_shape": RealMistake(
        "qwen2.5-7b",
        "num_qo_heads and num_kv_heads swapped",
        lambda p, kw: {"num_qo_heads": p.num_kv_heads, "num_kv_heads": p.num_qo_heads},
    ),
    "k_shape": RealMistake(
        "llama-3-8b",
        "num_kv_heads taken from config.num_attention_heads",
        lambda p, kw: {"num_kv_heads": p.num_qo_heads},
    ),
    "v_shape": RealMistake(
        "llama-3-8b", "v repeated to the query heads (repeat_kv) while k was not", _repeat_heads("v")
    ),
    "k_pool_shape": RealMistake(
        "llama-3-8b",
        "the pools allocated with num_attention_heads instead of num_key_value_heads",
        lambda p, kw: {n: mx.repeat(kw[n], p.num_qo_heads // p.num_kv_heads, axis=1) for n in ("k_pool", "v_pool")},
    ),
    "v_pool_shape": RealMistake(
        "mistral-7b", "v_pool allocated with one row fewer than k_pool", lambda p, kw: {"v_pool": kw["v_pool"][:-1]}
    ),
    "group_size": RealMistake(
        "qwen2.5-7b",
        "k, v and the pools built with another model's KV heads (Llama-3-8B's 8)",
        lambda p, kw: {
            **{n: mx.zeros((kw[n].shape[0], 8, p.head_dim), kw[n].dtype) for n in ("k", "v", "k_pool", "v_pool")},
            "num_kv_heads": 8,
        },
    ),
}


def raised(code: str, kw: dict) -> RopePoolError:
    """The error the op (``rope_pool_fused``, or ``rope_pool_fused_mla`` for an MLA code) raises for ``kw``."""
    op = rope_pool_fused_mla if code in MLA_CATALOG else rope_pool_fused
    try:
        op(**kw)
    except RopePoolError as err:
        if err.code != code:
            raise RuntimeError(f"{code}: the call raised {err.code} instead") from err
        return err
    raise RuntimeError(f"{code}: the call raised nothing")


def explained(*argv: str) -> str:
    """What ``python -m ropepool explain ARGV`` prints."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        ropepool_main(["explain", *argv])
    return out.getvalue().rstrip("\n")


def described(value) -> str:
    """An argument of a call, in a line: an array's kind, dtype and shape; anything else as Python writes it."""
    if isinstance(value, mx.array):
        return f"mx.array {str(value.dtype).removeprefix('mlx.core.')} {tuple(value.shape)}"
    if isinstance(value, np.ndarray):
        flags = "" if value.flags.writeable else ", read-only"
        return f"np.ndarray {value.dtype} {value.shape}{flags}"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    return repr(value)


def _call_lines(kw: dict) -> list[str]:
    return [f"    {name}={described(value)}," for name, value in kw.items()]


def _fence(text: str, lang: str = "") -> list[str]:
    return [f"```{lang}", text, "```"]


def _explain_command(*argv: str) -> str:
    return "python -m ropepool explain " + " ".join(shlex.quote(a) for a in argv)


def _real_mistake(code: str) -> list[str]:
    mistake = REAL_MISTAKES.get(code)
    if mistake is None:
        return []
    p = preset(mistake.model)
    kw = {
        **make_inputs(Shapes(4, p.num_qo_heads, p.num_kv_heads, p.head_dim, 16), "float16"),
        **p.op_kwargs(),
    }
    err = raised(code, {**kw, **mistake.change(p, kw)})
    shape = f"Hq = {p.num_qo_heads}, Hkv = {p.num_kv_heads}, D = {p.head_dim}"
    return [
        f"With a real model's numbers: **{mistake.model}** ({shape}), 4 tokens, {mistake.said}:",
        "",
        *_fence(str(err)),
        "",
        "and what `explain` names from those numbers (the whole text pasted, as ropepool prints it):",
        "",
        *_fence(_explain_command(str(err), "--model", mistake.model), "sh"),
        *_fence(explained(str(err), "--model", mistake.model)),
        "",
    ]


def _changed(trigger: dict, fixed: dict) -> list[str]:
    """The arguments the fix changes, each ``name: before -> after``."""
    names = [n for n in {**trigger, **fixed} if described(trigger.get(n)) != described(fixed.get(n))]
    return [f"- `{n}`: {described(trigger.get(n))} -> {described(fixed.get(n))}" for n in names]


def _position(code: str) -> str:
    if code in MLA_CATALOG:
        order = errors.MLA_ORDER
        return f"check {order.index(code) + 1} of the {len(order)} `rope_pool_fused_mla` runs (`ropepool/mla.py`)"
    order = list(errors.CODES)
    return (
        f"check {order.index(code) + 1} of the {len(order)} `rope_pool_fused` runs, SGLang's first "
        "(`ropepool/validation.py`)"
    )


def page(spec: ErrorSpec) -> str:
    """The markdown page of one catalogued error."""
    op = "rope_pool_fused_mla" if spec.code in MLA_CATALOG else "rope_pool_fused"
    trigger, fixed = spec.trigger(), spec.fixed()
    err = raised(spec.code, trigger)
    lines = [
        f"# `{spec.code}`",
        "",
        *_fence(spec.message),
        "",
        f"Raised by {RAISED_BY[spec.origin]}: {_position(spec.code)}, "
        f"as `{type(err).__name__}` with `err.code == {spec.code!r}`.",
        "",
        "## What it means",
        "",
        spec.meaning,
        "",
        "## The usual mistakes",
        "",
        *(f"- {cause}" for cause in spec.causes),
        "",
        *_real_mistake(spec.code),
        "## The fix",
        "",
        spec.fix,
        "",
        "## A call that raises it",
        "",
        f"`CATALOG[{spec.code!r}].trigger()` (`ropepool.teaching.catalog`) gives this call's arguments:",
        "",
        *_fence("\n".join([f"ropepool.{op}(", *_call_lines(trigger), ")"]), "python"),
        "",
        "It raises, word for word:",
        "",
        *_fence(str(err)),
        "",
        f"`CATALOG[{spec.code!r}].fixed()` is the same call with the fix; it changes",
        "",
        *_changed(trigger, fixed),
        "",
        "## Read it with explain",
        "",
        *_fence(_explain_command(err.first_line), "sh"),
        *_fence(explained(err.first_line)),
        "",
        "[All errors](index.md)",
    ]
    return "\n".join(lines) + "\n"


def index() -> str:
    """The index page: every catalogued error, in the order its op checks them."""

    def table(catalog: dict) -> list[str]:
        rows = ["| error | raised by | message |", "|---|---|---|"]
        rows += [
            f"| [`{s.code}`]({s.code}.md) | {ORIGINS[s.origin]} | `{s.message.replace('|', '/')}` |"
            for s in catalog.values()
        ]
        return rows

    return "\n".join(
        [
            "# Every error the op raises",
            "",
            "One page per error of `ropepool.teaching.catalog`, in the order the op checks them: what it means, the "
            "usual mistakes, the fix, a call that raises it and what `python -m ropepool explain` says of it. "
            "`python tools/error_pages.py` writes these pages from the catalog; notebook 02 triggers each one.",
            "",
            "## `rope_pool_fused`",
            "",
            *table(CATALOG),
            "",
            "## `rope_pool_fused_mla`'s own",
            "",
            "Its other checks raise the errors above.",
            "",
            *table(MLA_CATALOG),
            "",
        ]
    )


def pages() -> dict[str, str]:
    """Every page, by file name: one per code of both catalogs, and ``index.md``."""
    out = {f"{code}.md": page(spec) for code, spec in {**CATALOG, **MLA_CATALOG}.items()}
    out["index.md"] = index()
    return out


def stale(folder: Path = OUT, made: dict[str, str] | None = None) -> list[str]:
    """The pages whose file in ``folder`` is missing or differs from ``made`` (default: what the catalog makes
    now, :func:`pages`), and files there no page is made for."""
    made = pages() if made is None else made
    differ = [n for n, text in made.items() if not (folder / n).is_file() or (folder / n).read_text() != text]
    extra = [p.name for p in folder.glob("*.md") if p.name not in made] if folder.is_dir() else []
    return sorted(differ + extra)


def write(folder: Path = OUT) -> list[str]:
    """Write every page into ``folder`` (made if missing), remove pages no code has any more; the names written."""
    folder.mkdir(parents=True, exist_ok=True)
    made = pages()
    for p in folder.glob("*.md"):
        if p.name not in made:
            p.unlink()
    for name, text in made.items():
        (folder / name).write_text(text, encoding="utf-8")
    return sorted(made)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="say which committed pages are stale; write nothing")
    parser.add_argument("--out", type=Path, default=OUT, help="the folder (default docs/errors)")
    args = parser.parse_args(argv)
    if args.check:
        old = stale(args.out)
        if old:
            print(f"stale in {args.out}: {', '.join(old)}; run: python tools/error_pages.py", file=sys.stderr)
            return 1
        print(f"{args.out}: every page is the catalog's")
        return 0
    print(f"wrote {len(write(args.out))} pages into {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
