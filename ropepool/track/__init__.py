"""Build it yourself: the learner writes the engine's parts, a checker names the first wrong case,
then the real model (SmolLM2-135M) is served through the learner's code.

====  ================================================  ==================  ============
part  the learner writes                                checked against     notebook
====  ================================================  ==================  ============
1     ``rotate(x, positions, inv_freq, is_neox)``       float64 reference   12
2     ``Allocator``: pages, reference counts            the engine's own    13
3     ``slot_mapping(requests, page_size)``             vLLM's formula      13
4     ``PrefixTree``: match, insert, evict              the engine's own    14
5     ``schedule_step(...)``: one step of the scheduler     the engine's own    14
6     ``encode_e4m3(x)``                                float64 reference   12
====  ================================================  ==================  ============

``check(n, part)`` runs part ``n``'s table cases and a random workload and returns a passing verdict
or raises :class:`~ropepool.teaching.feedback.ExerciseFailed` ("Part n [problem]: ...") naming the first wrong case (input, expected, got, hint); a stub is
told what to write first. ``hint(n)`` gives the next hint, and after the last one
``show_solution(n)`` prints the reference. ``check(n, part, keep=True)`` saves a passing part for
notebook 14, which loads it with ``kept(n)`` (:mod:`.workspace`). ``use(n, part)`` is the learner's part,
or, with the demo switch on (``ROPEPOOL_TRACK=solutions`` in the environment, or :func:`demo`), the
reference answer from :mod:`.solutions`: a facilitator runs every notebook that way, and so does
nbmake. :mod:`.serve` runs the engine with the parts plugged in.

Example
-------
>>> from ropepool import track
>>> track.check(6, track.solutions.encode_e4m3).passed
True
>>> track.feedback(6, track.stubs.encode_e4m3).problem
'not_implemented'
"""

from __future__ import annotations

import inspect
import os
import re

from . import allocator, e4m3, rotate, schedule, slots, solutions, stubs, tree, workspace
from ..teaching.feedback import ExerciseFailed, Verdict
from ..teaching.feedback import feedback as _feedback
from .hints import HINTS

#: part -> (its checker, its name in the notebooks)
PARTS = {
    1: (rotate.check, "rotate"),
    2: (allocator.check, "Allocator"),
    3: (slots.check, "slot_mapping"),
    4: (tree.check, "PrefixTree"),
    5: (schedule.check, "schedule_step"),
    6: (e4m3.check, "encode_e4m3"),
}

_demo = False


def demo(on: bool = True) -> None:
    """Turn the demo switch on (every :func:`use` gives the reference part) or off."""
    global _demo
    _demo = bool(on)


def demo_on() -> bool:
    """True when :func:`demo` was called or ``ROPEPOOL_TRACK=solutions`` is set."""
    return _demo or os.environ.get("ROPEPOOL_TRACK", "") == "solutions"


def use(n: int, yours):
    """Your part ``n``, or the reference one when the demo switch is on (and a line saying so)."""
    _, name = _part(n)
    if demo_on():
        print(f"[demo] part {n}: the reference {name}, not yours (ROPEPOOL_TRACK=solutions or track.demo())")
        return getattr(solutions, name)
    return yours


def check(n: int, part, keep: bool = False) -> Verdict:
    """Check part ``n``: a passing verdict, or :class:`ExerciseFailed` naming the first wrong case.

    ``keep=True``: a part that passes is saved for notebook 14 (:mod:`.workspace`), and a line says where."""
    __tracebackhide__ = True  # a failing check shows the learner's frames, not the checker's
    try:
        verdict = _part(n)[0](part)
    except ExerciseFailed as err:  # its message says it all: a traceback keeps the learner's line, and this one
        raise err.with_traceback(None) from None
    if keep:
        _keep(n, part)
    return verdict


def _keep(n: int, part) -> None:
    name = _part(n)[1]
    if demo_on():
        print(f"[demo] part {n}: the reference {name} is not saved; notebook 14 uses the reference anyway")
        return
    try:
        print(f"part {n} kept for notebook 14: {workspace.save(n, part)}")
    except OSError as e:
        print(f"part {n} could not be kept ({e}): notebook 14 will use the reference {name}")


def kept(n: int):
    """Your part ``n`` as its notebook saved it (``check(n, part, keep=True)``), or the reference one, with
    a line saying which: with the demo switch on, or when none was saved or it no longer loads."""
    _, name = _part(n)
    if demo_on():
        return use(n, None)
    part, where = workspace.load(n)
    if part is None:
        print(f"part {n}: {where}; the reference {name} stands in (run its notebook's check cell to keep yours)")
        return getattr(solutions, name)
    print(f"part {n}: your {name}, from {where}")
    return part


#: part -> the objects of :mod:`.solutions` its reference is made of, in reading order
_SOLUTION = {4: ("_Node", "_common", "PrefixTree")}


#: the imports of :mod:`.solutions`, as a learner's cell writes them: (the line, the names it gives)
_IMPORTS = (
    ("from collections import Counter, deque", ("Counter", "deque")),
    ("import numpy as np", ("np",)),
    ("from ropepool.fp8 import decode_table", ("decode_table",)),
)


def show_solution(n: int) -> str:
    """Print part ``n``'s reference (the source in :mod:`.solutions`, headed by the imports it uses: it runs
    as a cell) and return it: for after the last hint."""
    names = _SOLUTION.get(n, (_part(n)[1],))
    body = "\n\n".join(inspect.getsource(getattr(solutions, x)) for x in names)
    imports = [line for line, given in _IMPORTS if any(re.search(rf"\b{g}\b", body) for g in given)]
    text = "\n".join(imports) + ("\n\n\n" if imports else "") + body
    print(f"# part {n}: the reference {_part(n)[1]} (ropepool/track/solutions.py)\n\n{text}")
    return text


class Hint(str):
    """A hint: a notebook shows it as text, not as a quoted Python string."""

    def __repr__(self) -> str:
        return str(self)


def feedback(n: int, part) -> Verdict:
    """Like :func:`check`, but a wrong part gives a "not yet" verdict instead of raising."""
    return _feedback(_part(n)[0], part)


_given: dict[int, int] = {}


def hint(n: int) -> Hint:
    """The next hint for part ``n`` (each call gives one more, then the last again)."""
    _part(n)
    i = _given.get(n, 0)
    _given[n] = min(i + 1, len(HINTS[n]) - 1)
    last = i == len(HINTS[n]) - 1
    more = f" (Still stuck: track.show_solution({n}) prints the reference.)" if last else ""
    return Hint(f"Hint {i + 1} of {len(HINTS[n])} for part {n}: {HINTS[n][i]}{more}")


def _part(n: int):
    if n not in PARTS:
        raise ValueError(f"part {n!r} does not exist: choose one of {sorted(PARTS)}")
    return PARTS[n]


__all__ = [
    "HINTS",
    "PARTS",
    "ExerciseFailed",
    "Verdict",
    "check",
    "demo",
    "demo_on",
    "feedback",
    "hint",
    "kept",
    "show_solution",
    "solutions",
    "stubs",
    "use",
]
