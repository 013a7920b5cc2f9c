"""Reading an error's text in time linear in its length: the last line holding a phrase, its numbers.

A paste may be a megabyte of log with colour codes. Every reader here finds its phrase with
``str.rfind`` (one pass) and then reads at most :data:`WINDOW` characters around it, so no regular
expression ever runs over the whole paste; numbers longer than :data:`MAX_DIGITS` are refused with
:class:`Unreadable` (one line), not converted.

>>> read_shape("torch.Size([6, 32, 128])")
(6, 32, 128)
>>> ints("shape '[1, 7, -1, 128]' is invalid for input of size 7168")
[1, 7, -1, 128, 7168]
"""

from __future__ import annotations

import re

#: Characters read around a phrase: a message and its numbers, never the whole paste.
WINDOW = 2000
#: Digits of the longest number read (2**63 has 19): a longer one is no tensor's size.
MAX_DIGITS = 19

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]{0,200}(?:\x07|\x1b\\)")
_INT = re.compile(r"-?\d+")


class Unreadable(ValueError):
    """A message whose numbers cannot be sizes (one line, for the command line to print)."""


def clean(text: str) -> str:
    """``text`` without terminal colour codes (vLLM's and llama.cpp's logs carry them)."""
    return _ANSI.sub("", text) if "\x1b" in text else text


def line_at(text: str, i: int) -> str:
    """The line of ``text`` holding index ``i``, clipped to :data:`WINDOW` characters around ``i``."""
    start = max(text.rfind("\n", 0, i) + 1, i - WINDOW // 4)
    end = text.find("\n", i)
    end = len(text) if end < 0 else end
    return text[start : min(end, i + WINDOW)]


def after(text: str, i: int, size: int = WINDOW) -> str:
    """At most ``size`` characters of ``text`` from ``i`` on, whitespace runs made one space."""
    return " ".join(text[i : i + size].split())


def last(text: str, *phrases: str) -> tuple[int, str] | None:
    """The position and the phrase of the last occurrence of any of ``phrases``, or None."""
    best = None
    for p in phrases:
        i = text.rfind(p)
        if i >= 0 and (best is None or i > best[0]):
            best = (i, p)
    return best


def last_read(text: str, readers: dict, facts):
    """The last of ``readers``' phrases in ``text``, read: ``(position, what its reader returns)``, or None
    where no phrase occurs or its reader returns None. ``readers`` maps each phrase to its reader, called
    as ``reader(text, position, facts)``; where two phrases stand at one position, the first listed wins."""
    found = last(text, *readers)
    if found is None:
        return None
    i, phrase = found
    read = readers[phrase](text, i, facts)
    return (i, read) if read else None


def on_line(reader):
    """``reader(line, facts)``, a reader of the line holding the phrase, as :func:`last_read` calls one."""
    return lambda text, i, facts: reader(line_at(text, i), facts)


def integer(digits: str) -> int:
    """``digits`` as an int; :class:`Unreadable` past :data:`MAX_DIGITS` digits."""
    n = len(digits.lstrip("-"))
    if n > MAX_DIGITS:
        raise Unreadable(
            f"the message holds a number of {n} digits ({digits[:12]}...): no tensor has a size "
            "like that; paste the error as the framework printed it"
        )
    return int(digits)


def ints(text: str) -> list[int]:
    """Every integer in ``text`` (a bounded window), in order."""
    return [integer(m) for m in _INT.findall(text)]


def read_shape(text: str) -> tuple[int, ...] | None:
    """The integers of the first printed shape in ``text``: ``(6, 32, 128)``, ``[6, 32, 128]``,
    ``torch.Size([6, 32, 128])``, MLX's ``(1,7,32,128)``; None if there is none."""
    m = re.search(r"[(\[]\s*(-?\d+(?:\s*,\s*-?\d+){0,15})\s*,?\s*[)\]]", text[:WINDOW])
    return tuple(ints(m.group(1))) if m else None


def shapes(text: str) -> list[tuple[int, ...]]:
    """Every printed shape in ``text`` (a bounded window), in order."""
    return [tuple(ints(m)) for m in re.findall(r"[(\[]\s*(-?\d+(?:\s*,\s*-?\d+){0,15})\s*,?\s*[)\]]", text[:WINDOW])]


def product(dims) -> int:
    out = 1
    for d in dims:
        out *= d
    return out
