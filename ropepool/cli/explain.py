"""``python -m ropepool explain "<error text>" [--model PRESET | --config config.json] [--num-kv-heads N ...]``.

Paste what the framework printed: SGLang's or ropepool's message, PyTorch's (transformers'), MLX's,
mlx-lm's, vLLM's, llama.cpp's or TensorRT-LLM's ("-" reads stdin). It names the message, reads its
numbers, and with the model's numbers (a preset, a config.json or a folder holding one, or the
options) says which quantity is wrong, the mistake that gives exactly those numbers and the fix that
changes the outcome, or which mistakes the numbers fit and what to check to tell them apart.
``--silent SYMPTOM`` prints the checklist of a failure without a message (:mod:`ropepool.diagnosis.silent`).
``--log FILE`` (or ``-``) reads a whole serving log: every distinct error explained once, in order, with
the line it came from; INFO, DEBUG and WARNING lines and repeated tracebacks skipped; the model from
``--model``/``--config`` or, said so, from a log line naming a preset's model (:func:`log_report`).

Exit status: 0 explained; 1 the text holds no message explain reads (or numbers no tensor has);
2 a bad option or a model that could not be read.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from contextlib import nullcontext
from typing import TextIO

from ..diagnosis import CHECKLISTS, FAMILIES, SETUP, Diagnosis, Facts, Unreadable, checklist, clean, diagnose
from ..diagnosis.sizes import config_lines
from ..errors import WRAP_WIDTH, wrap
from ..kv_layout import layout_from_config
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
    ("--tp", "tp", 1 << 16, "the tensor-parallel size the model runs at"),
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
        "--log",
        metavar="FILE",
        default=None,
        help="a whole log (- for stdin): every distinct error in it explained once, in order, with its line",
    )
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
            given = {k: v for k, v in numbers.items() if v is not None}
            return Facts.of(None, **{**_raw_facts(config, hidden), "hidden_size": hidden, **given})
    more = {"hidden_size": hidden, "vocab_size": _int_field(config, "vocab_size") if config else None}
    more["kv_bytes_per_token"] = _kv_bytes_per_token(config)
    more["sliding_window"] = _int_field(config, "sliding_window") if config else None
    more["notes"] = _config_notes(config, params)
    return Facts.of(params, **{**more, **{k: v for k, v in numbers.items() if v is not None}})


def _kv_bytes_per_token(config: dict | None) -> int | None:
    """The KV cache's bytes a token over all layers (bfloat16), from the config's cache layout; None where the
    config does not give one (no layer count, sizes the layout refuses)."""
    if not config:
        return None
    try:
        return layout_from_config(config).bytes_per_token("bfloat16")
    except ConfigError:
        return None


#: The names a config may give the KV-head count under (or one KV head, multi_query).
_KV_KEYS = ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query", "new_decoder_architecture")


def _config_notes(config: dict | None, params) -> tuple:
    """What a config leaves out that changes the model built from it: no KV-head count (MHA is built)."""
    if not config or params is None or params.num_kv_heads != params.num_qo_heads:
        return ()
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    if any(k in text for k in _KV_KEYS) or params.num_qo_heads == 1:
        return ()
    Hq, D = params.num_qo_heads, params.head_dim
    return (
        f"num_key_value_heads is absent: read as MHA, Hkv = Hq = {Hq} (k_proj {Hq} x {D} = {Hq * D} rows); a GQA "
        "checkpoint's k_proj has fewer rows, and a loader that requires the field refuses the config: set it to "
        f"the checkpoint's (k_proj.weight rows / {D})",
    )


def _raw_facts(config: dict, hidden: int | None) -> dict:
    """A config the loader refuses, read field by field: D = hidden_size / Hq where head_dim is absent,
    rotary_dim from rotary_dim or partial_rotary_factor."""
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    Hq = _int_field(text, "num_attention_heads", "n_head")
    D = _int_field(text, "head_dim") or (hidden // Hq if hidden and Hq and hidden % Hq == 0 else None)
    fraction = text.get("partial_rotary_factor")
    rotary = _int_field(text, "rotary_dim")
    if rotary is None and isinstance(fraction, (int, float)) and D and 0 < fraction <= 4:
        rotary = int(fraction * D) if fraction != 1 else None
    return dict(
        name=printable(str(config.get("_name_or_path") or "the config")),
        num_qo_heads=Hq,
        num_kv_heads=_int_field(text, "num_key_value_heads", "num_kv_heads"),
        head_dim=D,
        rotary_dim=rotary,
        max_position_embeddings=_int_field(text, "max_position_embeddings"),
        vocab_size=_int_field(text, "vocab_size"),
        kv_lora_rank=_int_field(text, "kv_lora_rank"),  # MLA (DeepSeek-V2/V3): the latent pool's sizes
        rope_dim=_int_field(text, "qk_rope_head_dim"),
        nope_dim=_int_field(text, "qk_nope_head_dim"),
        kv_bytes_per_token=_kv_bytes_per_token(config),
        sliding_window=_int_field(text, "sliding_window"),
    )


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
    lines = [_field("config", line) for line in config_lines(f)]  # the model's own numbers first
    if spec is not None:
        lines.append(_field("check", f"{d.code}, {d.source}"))
    else:
        lines.append(_field("family", f"{d.family}: {d.source}"))
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
    needs_no_model = d.family in ("transformers", "vllm", "mlx-lm") or d.case in ("engine_argument", "not_mine")
    if not f.known and not d.ambiguous and not needs_no_model:
        lines.append(
            _field(
                "next",
                "add --model PRESET_OR_CONFIG (or --num-kv-heads, --head-dim, ...) to check "
                "these numbers against the model's",
            )
        )
    return "\n".join(lines)


#: A log line that is not an error: a level word at its start (after a timestamp or a logger's name).
_QUIET = re.compile(r"^\W*(?:\S+\s+){0,4}?\[?(?:INFO|DEBUG|WARN|WARNING|TRACE)\b\]?", re.I)
#: A line that may hold an error message (a cheap filter before the recognisers).
_MAYBE = re.compile(
    r"error|exception|must be|mismatch|invalid|cannot|can't|expected|got \(|out of (?:range|bounds)", re.I
)
#: A message line whose body follows on the next lines: it ends in ":" (mlx's strict load_weights prints the
#: names one a line after "Received N parameters not in model:"; PyTorch's load_state_dict, one mismatch a line).
_OPENS = re.compile(r":\s*$")
#: A line of such a body: indented deeper than the message's line, or a bare name ending in "," or ".".
_NAME_LINE = re.compile(r"[\w.]+[,.]?\s*$")
#: A line that is a message of its own (``RuntimeError: ...``, ``| ValueError: ...``): it ends a body.
_RAISED = re.compile(r"\s*[|+]?\s*[\w.]*(?:Error|Exception|Warning)\b:")
#: The most of a body held: a reader reads 4000 characters after its phrase at the most.
_BODY_CHARS = 4000
#: A model named in a log line: a preset's Hugging Face id (``meta-llama/Meta-Llama-3-8B``) or its preset name.
_LOG_PROGRESS_BYTES = 16 << 20


_NAMES: dict = {}  # lower-case preset name, Hugging Face id or id's last part -> preset name, made on first use
_STEMS: list = []  # the words a preset's name starts with (llama, mistral, qwen, ...)


def _model_in(line: str) -> str | None:
    """The preset a log line names: its Hugging Face id, a fine-tuned variant of it, its preset name, or a
    path holding one as a folder (``/models/Meta-Llama-3-8B-Instruct/config.json``, a Hugging Face cache's
    ``models--meta-llama--Meta-Llama-3-8B-Instruct``)."""
    if not _NAMES:
        for name in preset_names():
            hub = preset(name).name.lower()
            _NAMES[name] = _NAMES[hub] = _NAMES.setdefault(hub.rsplit("/", 1)[-1], name)
        stems = {re.match(r"[a-z]*", key.rsplit("/", 1)[-1]).group(0) for key in _NAMES} - {""}
        _STEMS.extend(sorted(stems))
    low = line.lower()
    if not any(stem in low for stem in _STEMS):  # no preset's name starts anywhere in it: most lines
        return None
    for token in _TOKEN.findall(line.replace("--", "/")):
        low = token.lower()
        if low in _NAMES:
            return _NAMES[low]
        parts = low.split("/")[:64]
        for part in [*parts, *(f"{x}/{y}" for x, y in zip(parts, parts[1:]))] if "/" in low else [low]:
            found = _NAMES.get(part) or _variant_in(part)
            if found is not None:
                return found
    return None


def _variant_in(name: str) -> str | None:
    """The preset ``name`` is a fine-tuned variant of (``meta-llama/meta-llama-3-8b-instruct``, or its last part)."""
    for hub, preset_name in _NAMES.items():
        tail = name[len(hub) + 1 :].split("-") if name.startswith(hub + "-") else None
        if tail and all(p in VARIANT_SUFFIXES or _VERSION.fullmatch(p) for p in tail):
            return preset_name
    return variant_of_preset(name) if "/" in name else None


_TOKEN = re.compile(r"[\w.-]+(?:/[\w.-]+)*")
#: The line a Python traceback starts with.
_TRACEBACK = re.compile(r"\s*[|+]?\s*Traceback \(most recent call last\):")
#: A release's version after a model's name (``Mistral-7B-Instruct-v0.3``): the same attention as the preset's.
_VERSION = re.compile(r"v\d+(?:\.\d+)*")
#: A line an exception ends a traceback with (``RuntimeError: ...``, ``| ValueError: ...``), not a warning.
_EXCEPTION = re.compile(r"\s*[|+]?\s*(?:[\w]+\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b:")
#: A JSON record's fields that hold its message, its traceback and its level.
_JSON_MESSAGE, _JSON_TRACE = ("msg", "message", "event"), ("exc", "exc_info", "exception", "traceback", "stack_trace")
_JSON_LEVEL = ("level", "levelname", "severity")


def _json_record(line: str) -> tuple[str, str, bool] | None:
    """``(text to read, the message, whether it is an error)`` of a JSON log line, field by field; None for
    a line that is not a JSON object."""
    body = line.strip()
    if not (body.startswith("{") and body.endswith("}")) or len(body) > 1 << 20:
        return None
    try:
        record = json.loads(body)
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    pick = lambda keys: next((record[k] for k in keys if isinstance(record.get(k), str) and record[k]), "")  # noqa: E731
    message, trace, level = pick(_JSON_MESSAGE), pick(_JSON_TRACE), pick(_JSON_LEVEL).upper()
    names = " ".join(str(v) for v in record.values() if isinstance(v, str) and len(v) < 2000)
    return (trace or message) + "\n" + names, message, bool(trace) or level in ("ERROR", "CRITICAL", "FATAL")


class _LogReader:
    """The state of :func:`log_report`: the model, the errors explained, those not read, the held message."""

    def __init__(self, facts, numbers: dict):
        self.facts, self.numbers, self.said = facts, numbers, None
        self.seen: dict = {}  # a message explained -> its index in ``out``
        self.out: list = []  # [header, body] per error
        self.unread = 0
        self.held, self.held_n, self.held_chars = [], 0, 0
        self.pending = None  # the line read last, read once the next shows whether it heads a traceback

    def name_model(self, n: int, line: str) -> None:
        named = _model_in(line) if self.facts is None and len(line) < 2000 else None
        if named is not None:
            self.facts = facts_of(named, **self.numbers)
            self.said = f"{named} (named on line {n}: {printable(line.strip(), 80)})"

    def explain(self, n: int, text: str) -> bool:
        """Explain ``text`` (from line ``n``) unless its message was explained before (then the line is
        added to that one's); False if nothing in it is read."""
        try:
            d = diagnosis_of(text.strip(), self.facts if self.facts is not None else Facts())
        except Unreadable:
            return False
        if d is None or d.case == "not_mine" and not _EXCEPTION.match(text):
            return False
        if d.line in self.seen:
            self.out[self.seen[d.line]][0].append(n)
            return True
        self.seen[d.line] = len(self.out)
        body = "\n".join("  " + x for x in report(d, self.facts or Facts()).splitlines())
        self.out.append([[n], body])
        return True

    def not_read(self, n: int, text: str) -> None:
        """An error no reader reads: listed as such, with its message (one line, no terminal codes)."""
        self.unread += 1
        first = next((x for x in clean(text).splitlines() if x.strip()), "")
        self.out.append([[n], f"  not read: {printable(first.strip(), 300)}"])

    def message(self, n: int, text: str, error: bool) -> None:
        """``text`` from line ``n``: explained, or listed as not read where it is an error."""
        if not self.explain(n, text) and error:
            self.not_read(n, text)

    def flush(self) -> None:
        """The held message with its body; if that reads as nothing, each of its lines as a message."""
        if not self.held:
            return
        held, n = self.held, self.held_n
        self.held = []
        if self.explain(n, "".join(held)):
            return
        found = False
        for k, line in enumerate(held[1:], n + 1):
            if not _QUIET.match(line) and _MAYBE.search(line):
                found = self.explain(k, line) or found
                if not found and _EXCEPTION.match(line):
                    self.not_read(k, line)
                    found = True
        if not found and _EXCEPTION.match(held[0]):
            self.not_read(n, "".join(held))

    def line(self, n: int, line: str) -> None:
        """Read one line (without terminal codes) one line late: a log record just before a traceback is its
        header (``ERROR ... failed``): the traceback's exception is the error, so the header is not read."""
        before, self.pending = self.pending, (n, line)
        if before is not None and not _TRACEBACK.match(line):
            self._line(*before)

    def end(self) -> None:
        """The last line, then the held message."""
        if self.pending is not None:
            self._line(*self.pending)
            self.pending = None
        self.flush()

    def _line(self, n: int, line: str) -> None:
        """Read one line: held as a message's body, explained, or skipped."""
        if self.held:
            indent = len(self.held[0]) - len(self.held[0].lstrip())
            deeper = len(line) - len(line.lstrip()) > indent and not _RAISED.match(line)
            if (deeper or _NAME_LINE.match(line)) and self.held_chars + len(line) <= _BODY_CHARS:
                self.held.append(line)
                self.held_chars += len(line)
                return
            self.flush()
        record = _json_record(line) if line.lstrip().startswith("{") else None
        if record is not None:
            text, message, error = record
            if error or not _QUIET.match(message):
                self.message(n, text, error)
            return
        if _QUIET.match(line) or not _MAYBE.search(line):
            return
        if _OPENS.search(line) and len(line) < _BODY_CHARS:
            self.held, self.held_n, self.held_chars = [line], n, len(line)
        else:
            self.message(n, line, bool(_EXCEPTION.match(line)))

    def text(self) -> str:
        model = self.said or (self.facts.describe() if self.facts is not None and self.facts.known else None)
        head = [_field("model", model or "none given or named")]
        unread = f", {self.unread} not read" if self.unread else ""
        head.append(_field("errors", f"{len(self.seen)} distinct{unread}, in the order they appear"))
        blocks = []
        for lines, body in self.out:
            again = f" (again on line{'s' if len(lines) > 2 else ''} {', '.join(map(str, lines[1:]))})"
            header = f"line {lines[0]}" + (again if len(lines) > 1 else "")
            blocks.append(header + (": " + body.strip() if body.startswith("  not read") else "\n" + body))
        return "\n".join(head + ["", "\n\n".join(blocks)] if blocks else head)


def log_report(lines, model=None, numbers: dict | None = None, progress: TextIO | None = None) -> tuple[str, int]:
    """``(report, errors explained)`` of a whole log, read once, line by line (linear in its size).

    Each distinct error message is explained where it first appears, as ``line N``, in order (the same message
    again, in a retried or repeated traceback, adds its line: ``line 21 (again on line 42)``); an exception
    no reader reads is listed as ``line N: not read`` with its message. The model is ``model`` (a preset, a
    config, a :class:`Facts`) or, if None, the first preset a log line names (its id, or a path holding it;
    said so). A JSON line is read field by field (its traceback, else its message). ``progress`` (stderr)
    gets a line every 16 MiB read. A message line ending in ":" is read with the body lines after it
    (indented, or one name a line), up to 4000 characters."""
    numbers = numbers or {}
    facts = None if model is None else model if isinstance(model, Facts) else facts_of(model, **numbers)
    reader, read = _LogReader(facts, numbers), 0
    for n, line in enumerate(lines, 1):
        read += len(line)
        if progress is not None and read // _LOG_PROGRESS_BYTES != (read - len(line)) // _LOG_PROGRESS_BYTES:
            print(f"{PROG}: {read >> 20} MiB of the log read, {len(reader.seen)} distinct errors so far", file=progress)
        line = clean(line)
        reader.name_model(n, line)
        reader.line(n, line)
    reader.end()
    return reader.text(), len(reader.seen)


def _overrides(source, numbers: dict) -> list[str]:
    """One line per option that replaces a number the model itself gives (``--num-kv-heads 32`` on a model of 8)."""
    if source is None:
        return []
    try:
        own = facts_of(source)
    except ConfigError:
        return []
    said = []
    for flag, dest, _, what in NUMBER_OPTIONS:
        value, theirs = numbers.get(dest), getattr(own, dest, None)
        if value is not None and theirs is not None and value != theirs:
            extra = " (for the count the failing call passed, use --passed-kv-heads)" if dest == "num_kv_heads" else ""
            said.append(f"{PROG}: {flag} {value} replaces {printable(str(source), 60)}'s {theirs}, {what}{extra}")
    return said


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
    if args.model is not None and args.config is not None:
        print(f"{PROG}: give --model or --config, not both", file=err)
        return 2
    if args.log is not None:
        return _log_main(args, out, err)
    if args.text is None:
        print(
            f"{PROG}: paste the error's text (or -), or ask for a checklist with --silent {{{','.join(CHECKLISTS)}}}",
            file=err,
        )
        return 2
    source, numbers = _model_options(args, err)
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
        for line in config_lines(f):  # the model's own numbers, read even where the message is not
            print(_field("config", line), file=out)
        first = text.strip().splitlines()[0] if text.strip() else "(empty)"
        print(
            f"{PROG}: no message explain reads in {printable(first, 80)!r}; it reads {', '.join(FAMILIES)}: paste "
            "the error's last line as printed",
            file=err,
        )
        return 1
    print(result, file=out)
    return 1 if "\ncase      not_mine" in result else 0


def _model_options(args: argparse.Namespace, err: TextIO) -> tuple:
    """``(source, numbers)``: the model given (--config or --model) and the number options; each option that
    replaces a number the model gives is said on ``err``."""
    source = args.config if args.config is not None else args.model
    numbers = {dest: getattr(args, dest) for _, dest, _, _ in NUMBER_OPTIONS}
    numbers["rope_theta"] = args.rope_theta
    for line in _overrides(source, numbers):
        print(line, file=err)
    return source, numbers


def _log_main(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``explain --log FILE``: the log read line by line; exit 0 if any error was explained, 1 if none."""
    if args.text is not None:
        print(f"{PROG}: give the error's text or --log FILE, not both", file=err)
        return 2
    source, numbers = _model_options(args, err)
    try:
        stream = sys.stdin if args.log == "-" else open(_log_path(args.log), encoding="utf-8", errors="replace")
    except (OSError, ConfigError) as e:
        print(f"{PROG}: --log {printable(args.log, 80)}: cannot read it ({e})", file=err)
        return 2
    try:
        with stream if stream is not sys.stdin else nullcontext(stream):
            text, count = log_report(stream, source, numbers, progress=err)
    except ConfigError as e:
        print(f"{PROG}: {printable(str(e), 300)}", file=err)
        return 2
    print(text, file=out)
    return 0 if count else 1


def _log_path(path: str) -> str:
    """``path`` if it is a regular file (a FIFO or a device would block or never end)."""
    import os
    import stat

    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"{path}: not a regular file (pass - and pipe it in)")
    return path
