"""What a part's checker says, through the suite's one feedback core (:mod:`ropepool.teaching.feedback`).

A wrong case is told in plain words: the case's name and input, what was expected, what came back,
and a hint about the likely mistake. A part that still raises ``NotImplementedError`` (the stub) is
told what to write first. Failures are :class:`~ropepool.teaching.feedback.ExerciseFailed` with the
noun "Part"; verdicts are :class:`~ropepool.teaching.feedback.Verdict`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

from ..teaching.feedback import ExerciseFailed, Verdict, case_message, guarded

NOUN = "Part"


def rejected(part: int, problem: str, message: str) -> ExerciseFailed:
    """The failure of part ``part``: ``problem`` a short code for the mistake, ``message`` what to fix."""
    return ExerciseFailed(part, problem, message, noun=NOUN)


def passed(part: int, message: str) -> Verdict:
    return Verdict(part, True, message, noun=NOUN)


def wrong_case(part: int, problem: str, case: str, given: str, expected, got, hint: str) -> ExerciseFailed:
    """The failure of one case, in four plain lines: the input, what was expected, what came back, a hint."""
    return rejected(part, problem, case_message(case, given, expected, got, hint))


def history(start: str, done: list[str], shown: int, empty: str, more: str, now: str) -> str:
    """A case's input line: ``start``, the last ``shown`` of the calls ``done`` (``empty`` when none; ``more``
    after them when earlier ones are left out), then the call ``now``."""
    before = "; ".join(done[-shown:]) or empty
    return f"{start}{before}{more if len(done) > shown else ''}; now {now}"


@contextmanager
def showing(given: Callable[[], str]) -> Iterator[None]:
    """A failure raised inside without an input line (the learner's code raised, or gave back something
    unreadable) gets one: ``given()``, the case's input as the checker describes it."""
    __tracebackhide__ = True  # a failing check shows the learner's frames, not the checker's
    try:
        yield
    except ExerciseFailed as err:
        message = str(err).split(": ", 1)[1]
        if "\n  input:" in message:
            raise
        raise ExerciseFailed(err.exercise, err.problem, f"{message}\n  input:    {given()}", noun=err.noun) from None


def is_int(x) -> bool:
    """True for a Python or numpy integer (a bool is no page or count)."""
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def int_list(part: int, answer, what: str, name: str = "pages") -> list[int]:
    """``answer`` as a list of ints; anything else (no list, a float, a string, a bool) is a verdict
    showing what came back: ``int(2.7)`` would hide a page 2.7, ``int(inf)`` would crash the checker."""
    try:
        items = list(answer)
    except TypeError:
        items = None
    if items is None or isinstance(answer, (str, bytes, dict)) or not all(is_int(p) for p in items):
        raise rejected(part, "not_int", f"{what} returned {answer!r:.200}: {name} are ints, in a list")
    return [int(p) for p in items]


def call(
    part: int,
    fn: Callable,
    *args,
    what: str,
    first: str,
    expected: tuple = (),
    explain: Callable[[Exception], str] = lambda e: "",
):
    """``fn(*args)``, the learner's code: the stub's NotImplementedError becomes "write this first", any
    other error a verdict naming the learner's own line, ``explain(error)`` added (but those in
    ``expected``, raised again)."""
    __tracebackhide__ = True  # IPython and pytest show the learner's frames, not the checker's
    todo = f"the stub is still there. Write this first: {first}"
    return guarded(part, fn, *args, what=what, todo=todo, explain=explain, expected=expected, noun=NOUN)
