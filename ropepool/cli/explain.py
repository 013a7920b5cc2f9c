"""``python -m ropepool explain "<error text>" [--model PRESET_OR_CONFIG] [--num-kv-heads N]``.

Paste any message ``rope_pool_fused`` raises: SGLang's text alone, ropepool's two lines, or a
traceback's last lines ("-" reads it from stdin). It names the check that failed and reads the
numbers out of the text; with a model it compares them with the model's Hq, Hkv and D and says
which mistake it is, with the fix that changes the outcome (:mod:`ropepool.diagnosis`).

Exit status: 0 explained; 1 the text holds no message of the op's; 2 the model could not be read.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from ..diagnosis import case_of, read_error, read_shape
from ..errors import WRAP_WIDTH, wrap
from ..teaching.catalog import CATALOG, MLA_CATALOG
from ..models import ConfigError, RopeParams, from_config, load_config, preset, preset_names

ORIGIN = {"sglang": "SGLang's Python wrapper", "sglang-c++": "SGLang's C++ extension",
          "ropepool": "ropepool's own check (SGLang has none)"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``explain`` subcommand's arguments."""
    parser.add_argument("text", metavar="ERROR_TEXT", help="the error's text (quote it), or - to read stdin")
    parser.add_argument("--model", metavar="PRESET_OR_CONFIG", default=None,
                        help=f"compare with this model: a config.json, a folder, or a preset: {', '.join(preset_names())}")
    parser.add_argument("--num-kv-heads", type=int, default=None, metavar="N",
                        help="the num_kv_heads your code passed, if the text does not say")


def _field(label: str, text: str) -> str:
    """``label`` and ``text`` wrapped under it, the text indented to line up."""
    body = wrap(text, width=WRAP_WIDTH, indent=" " * 10)
    return f"{label:<10}{body[10:]}"


def others_with_heads(heads: int, head_dim: int, but: str) -> tuple[str, ...]:
    """Presets other than ``but`` whose query or KV head count is ``heads`` at this head_dim."""
    found = []
    for name in preset_names():
        p = preset(name)
        if p.name != but and p.head_dim == head_dim and heads in (p.num_qo_heads, p.num_kv_heads):
            found.append(name)
    return tuple(found)


#: Suffixes of a fine-tuned checkpoint's name that keep its base model's shapes.
VARIANT_SUFFIXES = ("instruct", "chat", "base", "it", "hf")


def variant_of_preset(name: str) -> str | None:
    """The preset ``name`` is a variant of (``Qwen/Qwen2.5-7B-Instruct`` -> ``qwen2.5-7b``): only where
    ``name`` is a preset followed by suffixes such as -instruct, -chat or -base, not merely a near spelling.

    >>> variant_of_preset("Qwen/Qwen2.5-7B-Instruct"), variant_of_preset("qwen2.5-7c")
    ('qwen2.5-7b', None)
    """
    rest = name.lower().rsplit("/", 1)[-1]
    for base in sorted(preset_names(), key=len, reverse=True):  # the longest preset that starts the name
        if rest.startswith(base.lower()):
            tail = rest[len(base):].split("-")
            return base if tail[0] == "" and len(tail) > 1 and all(p in VARIANT_SUFFIXES for p in tail[1:]) else None
    return None


def explain(text: str, params: RopeParams | None = None, num_kv_heads: int | None = None) -> str | None:
    """The explanation of ``text`` (None if it holds no message of the op's), compared with ``params``."""
    catalog = {**CATALOG, **MLA_CATALOG}  # rope_pool_fused's messages and rope_pool_fused_mla's own
    read = read_error(text, catalog)
    if read is None:
        return None
    spec = catalog[read.code]
    lines = [_field("check", f"{read.code}, {ORIGIN[spec.origin]}"), _field("message", read.line)]
    numbers = ", ".join(f"{k} = {read_shape(v) or v}" if "shape" in k else f"{k} = {v}"
                        for k, v in read.fields.items())
    if read.expected:
        numbers += ("; " if numbers else "") + f"the op expected {read.expected}"
    if numbers:
        lines.append(_field("read", numbers))
    lines.append(_field("meaning", spec.meaning))
    case = None
    if params is not None:
        p = params
        lines.append(_field("model", f"{p.name}: Hq = {p.num_qo_heads}, Hkv = {p.num_kv_heads}, D = {p.head_dim} "
                                     f"(G = {p.group_size})"))
        got = read.fields.get("shape", "")
        shape = read_shape(got) if got else None
        others = others_with_heads(shape[1], shape[2], p.name) if shape and len(shape) == 3 else ()
        case = case_of(read, num_qo_heads=p.num_qo_heads, num_kv_heads=p.num_kv_heads, head_dim=p.head_dim,
                       passed_kv_heads=num_kv_heads, others=others)
    if case is not None:
        lines += [_field("case", f"{case.name}: {case.why}"), _field("fix", case.fix)]
    else:
        lines.append(_field("causes", "; ".join(spec.causes)))
        lines.append(_field("fix", spec.fix))
        if params is None and read.code in ("k_shape", "q_shape", "v_shape", "k_pool_shape", "v_pool_shape",
                                            "group_size"):
            lines.append(_field("next", "add --model PRESET_OR_CONFIG to compare these numbers with the "
                                        "model's Hq, Hkv and D and name the mistake"))
    return "\n".join(lines)


def main(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run ``explain`` for parsed ``args``; return the exit status (see the module docstring)."""
    out, err = out or sys.stdout, err or sys.stderr
    prog = "python -m ropepool explain"
    text = sys.stdin.read() if args.text == "-" else args.text
    params = None
    if args.model is not None:
        try:
            params = from_config(load_config(args.model))
        except ConfigError as e:
            base = variant_of_preset(args.model)
            if base is None:
                print(f"{prog}: {e}", file=err)
                return 2
            print(f"{prog}: {args.model} read as the preset {base} (a fine-tuned variant keeps its base "
                  "model's shapes)", file=err)
            params = preset(base)
    report = explain(text, params, args.num_kv_heads)
    if report is None:
        first = text.strip().splitlines()[0] if text.strip() else "(empty)"
        print(f"{prog}: no message of rope_pool_fused in {first[:80]!r}; paste the error's first line "
              "(e.g. 'k shape must be [num_tokens, num_kv_heads, head_dim], got (4, 8, 128)')", file=err)
        return 1
    print(report, file=out)
    return 0
