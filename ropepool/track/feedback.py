"""What a checker says: a passing :class:`PartVerdict`, or a :class:`PartFailed` naming the first wrong case.

A wrong case is told in plain words: the case's name and input, what was expected, what came back,
and a hint about the likely mistake. A part that still raises ``NotImplementedError`` (the stub) is
told what to write first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..teaching.exercises.feedback import ExerciseFailed, Verdict, markdown_escape


class PartFailed(ExerciseFailed):
    """A part rejected by its checker. ``problem`` is a short code for the mistake; ``str(err)`` explains it."""

    def __init__(self, part: int, problem: str, message: str):
        self.exercise, self.part, self.problem = f"part {part}", part, problem
        AssertionError.__init__(self, f"Part {part} [{problem}]: {message}")


@dataclass(frozen=True, repr=False)
class PartVerdict(Verdict):
    """A part that passed its checker, and what held."""

    def __repr__(self) -> str:
        return f"Part {self.exercise} {'PASSED' if self.passed else 'NOT YET'}: {self.message}"

    def _repr_markdown_(self) -> str:
        mark = "**passed**" if self.passed else "**not yet**"
        return f"Part {self.exercise} {mark}: " + markdown_escape(self.message).replace("\n", "  \n")


def passed(part: int, message: str) -> PartVerdict:
    return PartVerdict(part, True, message)


def wrong_case(part: int, problem: str, case: str, given: str, expected, got, hint: str) -> PartFailed:
    """The failure of one case, in four plain lines: the input, what was expected, what came back, a hint."""
    return PartFailed(
        part,
        problem,
        f"case '{case}'\n  input:    {given}\n  expected: {expected}\n  got:      {got}\n  hint:     {hint}",
    )


def is_int(x) -> bool:
    """True for a Python or numpy integer (a bool is no page or count)."""
    import numpy as np

    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def int_list(part: int, answer, what: str, name: str = "pages") -> list[int]:
    """``answer`` as a list of ints; anything else (no list, a float, a string, a bool) is a verdict
    showing what came back: ``int(2.7)`` would hide a page 2.7, ``int(inf)`` would crash the checker."""
    try:
        items = list(answer)
    except TypeError:
        items = None
    if items is None or isinstance(answer, (str, bytes, dict)) or not all(is_int(p) for p in items):
        raise PartFailed(part, "not_int", f"{what} returned {answer!r:.200}: {name} are ints, in a list")
    return [int(p) for p in items]


def _your_line(error: BaseException) -> str:
    """Where in the learner's code ``error`` was raised (the last frame outside ropepool), as one line."""
    import traceback
    from pathlib import Path

    package = str(Path(__file__).resolve().parent.parent)
    frames = [
        f for f in traceback.extract_tb(error.__traceback__) if not str(Path(f.filename).resolve()).startswith(package)
    ]
    if not frames:
        return ""
    f = frames[-1]
    where = "your cell" if f.filename.startswith("<") else Path(f.filename).name
    return f"\n  at:       {where}, line {f.lineno}: {(f.line or '').strip()}"


def call(part: int, fn: Callable, *args, what: str, first: str, expected: tuple = ()):
    """``fn(*args)``; the stub's NotImplementedError becomes "write this first", any other error a verdict
    naming the learner's own line (but those in ``expected``, raised again for the checker to judge)."""
    __tracebackhide__ = True  # IPython and pytest show the learner's frames, not the checker's
    try:
        return fn(*args)
    except expected:
        raise
    except NotImplementedError:
        raise PartFailed(
            part,
            "not_implemented",
            f"{what} raised NotImplementedError: the stub is still there. Write this first: {first}",
        ) from None
    except PartFailed:
        raise
    except Exception as e:  # the learner's bug, reported rather than crashing the checker
        raise PartFailed(part, "raised", f"{what} raised {type(e).__name__}: {e}{_your_line(e)}") from None


def feedback(check: Callable, answer) -> PartVerdict:
    """Run ``check(answer)`` and return its verdict, passed or not; never raises for a mistake."""
    try:
        return check(answer)
    except PartFailed as err:
        return PartVerdict(err.part, False, str(err).split(": ", 1)[1], err.problem)
