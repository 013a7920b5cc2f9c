"""Feedback for the learner: a passing :class:`Verdict` or an :class:`ExerciseFailed` naming the mistake."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable


class ExerciseFailed(AssertionError):
    """A rejected answer. ``problem`` is a short code for the mistake; ``str(err)`` explains it."""

    def __init__(self, exercise: int | str, problem: str, message: str):
        self.exercise, self.problem = exercise, problem
        super().__init__(f"Exercise {exercise} [{problem}]: {message}")


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check: passed or not, and what the checker said."""

    exercise: int | str  # 1-5 in 06; "03.1" for the end-of-notebook checkers of 00-05
    passed: bool
    message: str
    problem: str | None = None

    def __repr__(self) -> str:
        mark = "PASSED" if self.passed else "NOT YET"
        return f"Exercise {self.exercise} {mark}: {self.message}"

    def _repr_markdown_(self) -> str:
        mark = "**passed**" if self.passed else "**not yet**"
        body = markdown_escape(self.message).replace("\n", "  \n")
        return f"Exercise {self.exercise} {mark}: {body}"


#: Characters Markdown (CommonMark, plus ``$`` for JupyterLab's maths) would read as markup.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+\-.!|~$&])")


def markdown_escape(text: str) -> str:
    r"""``text`` with every character Markdown would read as markup backslash-escaped.

    A checker's message is plain text: ``x1*cos - x2*sin`` must show its asterisks, ``[T, H, D]``
    must not become a link, ``$`` must not start maths.

    >>> markdown_escape("x1*cos - x2*sin")
    'x1\\*cos \\- x2\\*sin'
    """
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def feedback(check: Callable, answer) -> Verdict:
    """Run ``check(answer)`` and return its :class:`Verdict`, passed or not; never raises for a mistake."""
    try:
        return check(answer)
    except ExerciseFailed as err:
        message = str(err).split(": ", 1)[1]
        return Verdict(err.exercise, False, message, err.problem)


def expect_rejection(check: Callable, answer, problem: str | None = None) -> ExerciseFailed:
    """Return the :class:`ExerciseFailed` that ``check(answer)`` raises.

    Raises AssertionError if the answer passes, or if ``problem`` is given and the checker
    found another one: a cell that shows a rejection cannot pass quietly.
    """
    try:
        check(answer)
    except ExerciseFailed as err:
        if problem is not None and err.problem != problem:
            raise AssertionError(f"expected problem {problem!r}, got {err.problem!r}: {err}") from err
        return err
    raise AssertionError("expected the checker to reject this answer, but it passed")


def _call(exercise: int, fn: Callable, *args, what: str, explain: Callable[[Exception], str] = lambda e: ""):
    """``fn(*args)``, with any exception the learner's code raises turned into a verdict."""
    try:
        return fn(*args)
    except NotImplementedError:
        raise ExerciseFailed(
            exercise, "not_implemented", f"{what} raised NotImplementedError: replace the stub's body with your code."
        ) from None
    except Exception as e:  # the learner's bug, reported rather than crashing the checker
        raise ExerciseFailed(exercise, "raised", f"{what} raised {type(e).__name__}: {e}{explain(e)}") from None
