"""``python -m ropepool explain "<error text>" [--model PRESET | --config config.json] [--num-kv-heads N ...]``.

Paste what the framework printed: SGLang's or ropepool's message, PyTorch's (transformers'), MLX's,
mlx-lm's, vLLM's, llama.cpp's or TensorRT-LLM's ("-" reads stdin). It names the message, reads its
numbers, and with the model's numbers (a preset, a config.json or a folder holding one, or the
options) says which quantity is wrong, the mistake that gives exactly those numbers and the fix that
changes the outcome, or which mistakes the numbers fit and what to check to tell them apart.
``--silent SYMPTOM`` prints the checklist of a failure without a message (:mod:`ropepool.diagnosis.silent`).

Exit status: 0 explained; 1 the text holds no message explain reads (or numbers no tensor has);
2 a bad option or a model that could not be read.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import TextIO

from ..diagnosis import CHECKLISTS, FAMILIES, SETUP, Diagnosis, Facts, Unreadable, checklist, diagnose
from ..errors import WRAP_WIDTH, wrap
from ..models import (
    MAX_HEAD_DIM,
    MAX_HEADS,
    ConfigError,
    RopeParams,
    from_config,
    load_config,
    preset,
    preset_names,
    printable,
)
from ..teaching.catalog import CATALOG, MLA_CATALOG

PROG = "python -m ropepool explain"


def _bounded_int(name: str, limit: int):
    def parse(text: str) -> int:
        shown = printable(text, 24)
        if not text.strip().isdigit() or len(text.strip()) > 9:
            raise argparse.ArgumentTypeError(f"{name} must be a positive integer, got {shown!r}")
        value = int(text)
        if not 0 < value <= limit:
            raise argparse.ArgumentTypeError(f"{name} must be in [1, {limit}], got {shown}")
        return value

    return parse


def _theta(text: str) -> float:
    shown = printable(text, 24)
    try:
        value = float(text) if len(text) <= 40 else math.nan
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"--rope-theta must be a finite number > 0, got {shown!r}")
    return value


NUMBER_OPTIONS = (
    ("--num-qo-heads", "num_qo_heads", MAX_HEADS, "the model's Hq (config.num_attention_heads)"),
    ("--num-kv-heads", "num_kv_heads", MAX_HEADS, "the model's Hkv (config.num_key_value_heads)"),
    ("--head-dim", "head_dim", MAX_HEAD_DIM, "the model's D (config.head_dim)"),
    ("--hidden-size", "hidden_size", 1 << 20, "config.hidden_size"),
    ("--rotary-dim", "rotary_dim", MAX_HEAD_DIM, "dimensions that rotate"),
    ("--passed-kv-heads", "passed_kv_heads", MAX_HEADS, "the num_kv_heads the failing call passed (not the model's)"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``explain`` subcommand's arguments."""
    parser.add_argument(
        "text",
        metavar="ERROR_TEXT",
        nargs="?",
        default=None,
        help="the error's text (quote it), or - to read stdin; reads " + ", ".join(FAMILIES),
    )
    parser.add_argument(
        "--model",
        metavar="PRESET_OR_CONFIG",
        default=None,
        help=f"the model: a preset ({', '.join(preset_names())}), a config.json or a folder",
    )
    parser.add_argument("--config", metavar="CONFIG", default=None, help="a config.json, or a folder holding one")
    for flag, dest, limit, what in NUMBER_OPTIONS:
        parser.add_argument(flag, dest=dest, type=_bounded_int(flag, limit), default=None, metavar="N", help=what)
    parser.add_argument("--rope-theta", type=_theta, default=None, metavar="X", help="the model's rope_theta")
    parser.add_argument(
        "--silent",
        metavar="SYMPTOM",
        default=None,
        help="a checklist for a failure without a message: " + ", ".join(CHECKLISTS),
    )


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
            tail = rest[len(base) :].split("-")
            return base if tail[0] == "" and len(tail) > 1 and all(p in VARIANT_SUFFIXES for p in tail[1:]) else None
    return None


def _int_field(config: dict, *keys):
    for k in keys:
        v = config.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and 0 < v < 1 << 31:
            return v
    return None


def facts_of(model, **numbers) -> Facts:
    """The model's :class:`Facts` from a preset name, a config path, a config dict, a
    :class:`~ropepool.models.RopeParams` or None, then ``numbers`` (``num_kv_heads=8``, ...) over them.

    A config the loader refuses (e.g. heads that do not divide hidden_size) is read field by field.

    Raises
    ------
    ConfigError
        no such preset or file, or a file that is not a config.
    """
    config = load_config(model) if isinstance(model, str) else model if isinstance(model, dict) else None
    params = model if isinstance(model, RopeParams) else None
    hidden = _int_field(config, "hidden_size", "n_embd", "d_model") if config else None
    if config is not None:
        try:
            params = from_config(config)
        except ConfigError:
            text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
            raw = dict(
                name=printable(str(config.get("_name_or_path") or "the config")),
                num_qo_heads=_int_field(text, "num_attention_heads", "n_head"),
                num_kv_heads=_int_field(text, "num_key_value_heads", "num_kv_heads"),
                head_dim=_int_field(text, "head_dim"),
                kv_lora_rank=_int_field(text, "kv_lora_rank"),  # MLA (DeepSeek-V2/V3): the latent pool's sizes
                rope_dim=_int_field(text, "qk_rope_head_dim"),
            )
            given = {k: v for k, v in numbers.items() if v is not None}
            return Facts.of(None, **{**raw, "hidden_size": hidden, **given})
    return Facts.of(params, **{"hidden_size": hidden, **{k: v for k, v in numbers.items() if v is not None}})


def diagnosis_of(text: str, model=None, **numbers) -> Diagnosis | None:
    """The :class:`~ropepool.diagnosis.Diagnosis` of ``text`` for ``model`` (see :func:`facts_of`; a
    :class:`~ropepool.diagnosis.Facts` is used as is) and ``numbers``, naming presets of a foreign k's
    head count; None if no family's message is in it.

    Example
    -------
    >>> diagnosis_of("RuntimeError: shape '[1, 7, 32, 128]' is invalid for input of size 7168", "llama-3-8b").case
    'kv_viewed_with_hq'
    """
    f = model if isinstance(model, Facts) else facts_of(model, **numbers)
    return diagnose(text, f, lambda h, dim: others_with_heads(h, dim, f.name))


def explain(text: str, model=None, **numbers) -> str | None:
    """The explanation of ``text`` as the command line prints it (None if no family's message is in
    it), for ``model`` and ``numbers`` as :func:`diagnosis_of` takes them.

    Raises :class:`~ropepool.diagnosis.Unreadable` for numbers no tensor has.
    """
    f = model if isinstance(model, Facts) else facts_of(model, **numbers)
    d = diagnosis_of(text, f)
    return None if d is None else report(d, f)


def report(d: Diagnosis, f: Facts) -> str:
    """A diagnosis as the command line prints it: one labelled field a paragraph."""
    spec = (CATALOG.get(d.code) or MLA_CATALOG.get(d.code)) if d.code else None
    if spec is not None:
        lines = [_field("check", f"{d.code}, {d.source}")]
    else:
        lines = [_field("family", f"{d.family}: {d.source}")]
    lines.append(_field("message", printable(d.line, 600)))
    if d.read:
        lines.append(_field("read", printable(d.read, 600)))
    if spec is not None:
        lines.append(_field("meaning", spec.meaning))
    if f.known:
        lines.append(_field("model", f.describe()))
    if d.case in ("catalog", "needs_model") and spec is not None:
        lines.append(_field("causes", "; ".join(spec.causes)))
        lines.append(_field("fix", spec.fix))
        if d.case == "needs_model":
            lines.append(
                _field(
                    "next",
                    "add --model PRESET_OR_CONFIG (or all of --num-qo-heads, --num-kv-heads and "
                    "--head-dim) to compare these numbers with the model's Hq, Hkv and D and "
                    "name the mistake",
                )
            )
        return "\n".join(lines)
    named = f"{d.case} ({d.quantity})" if d.quantity and d.quantity != d.case else d.case
    lines.append(_field("case", f"{named}: {d.why}"))
    lines.append(_field("fix", d.fix))
    needs_no_model = d.family in ("transformers", "vllm", "mlx-lm") or d.case == "engine_argument"
    if not f.known and not d.ambiguous and not needs_no_model:
        lines.append(
            _field(
                "next",
                "add --model PRESET_OR_CONFIG (or --num-kv-heads, --head-dim, ...) to check "
                "these numbers against the model's",
            )
        )
    return "\n".join(lines)


def silent_report(symptom: str) -> str | None:
    """The checklist of ``symptom`` as printed, or None for an unknown symptom."""
    c = checklist(symptom)
    if c is None:
        return None
    lines = [_field("symptom", c.title), _field("likely", c.likely), _field("setup", SETUP)]
    for n, check in enumerate(c.checks, 1):
        lines += [_field(f"check {n}", check.what), f"{'':10}>>> {check.code}"]
    return "\n".join(lines)


def main(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run ``explain`` for parsed ``args``; return the exit status (see the module docstring)."""
    out, err = out or sys.stdout, err or sys.stderr
    if args.silent is not None:
        text = silent_report(args.silent)
        if text is None:
            print(
                f"{PROG}: unknown symptom {printable(args.silent, 40)!r}: choose one of {', '.join(CHECKLISTS)}",
                file=err,
            )
            return 2
        print(text, file=out)
        return 0
    if args.text is None:
        print(
            f"{PROG}: paste the error's text (or -), or ask for a checklist with --silent {{{','.join(CHECKLISTS)}}}",
            file=err,
        )
        return 2
    if args.model is not None and args.config is not None:
        print(f"{PROG}: give --model or --config, not both", file=err)
        return 2
    source = args.config if args.config is not None else args.model
    numbers = {dest: getattr(args, dest) for _, dest, _, _ in NUMBER_OPTIONS}
    numbers["rope_theta"] = args.rope_theta
    try:
        f = facts_of(source, **numbers)
    except ConfigError as e:
        base = variant_of_preset(source) if args.config is None else None
        if base is None:
            print(f"{PROG}: {printable(str(e), 300)}", file=err)
            return 2
        print(
            f"{PROG}: {printable(source, 80)} read as the preset {base} (a fine-tuned variant keeps its base "
            "model's shapes)",
            file=err,
        )
        f = facts_of(base, **numbers)
    text = sys.stdin.read() if args.text == "-" else args.text
    try:
        result = explain(text, f)
    except Unreadable as e:
        print(f"{PROG}: {e}", file=err)
        return 1
    if result is None:
        first = text.strip().splitlines()[0] if text.strip() else "(empty)"
        print(
            f"{PROG}: no message explain reads in {printable(first, 80)!r}; it reads {', '.join(FAMILIES)}: paste "
            "the error's last line as printed",
            file=err,
        )
        return 1
    print(result, file=out)
    return 0
