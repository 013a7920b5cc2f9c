"""How every checker of the suite answers a learner: a :class:`Verdict`, or an :class:`ExerciseFailed` naming the mistake.

One core for the three exercise systems: the workshop exercises (:mod:`ropepool.teaching.exercises`),
the end-of-notebook exercises (:mod:`ropepool.teaching.notebook_exercises`) and the build-it track's
parts (:mod:`ropepool.track`). Each reports the same way:

- a failure is ``ExerciseFailed(label, problem, message, noun=...)``: ``problem`` a short code for the
  mistake, ``str(err)`` "Exercise 3 [problem]: message" ("Part 2 [...]" for the track);
- a wrong case reads in four plain lines (:func:`case_message`): the input, what was expected, what
  came back, a hint;
- the learner's code is run through :func:`guarded`: the stub's ``NotImplementedError`` says what to
  write first, any other error becomes a failure naming the learner's own line;
- :func:`feedback` turns either outcome into a :class:`Verdict`; :func:`expect_rejection` proves a
  wrong answer is rejected.

Example
-------
>>> v = feedback(lambda x: Verdict(1, True, "right"), 3)
>>> v.passed, repr(v)
(True, 'Exercise 1 PASSED: right')
>>> def check(x):
...     raise ExerciseFailed(2, "sign", "flip it", noun="Part")
>>> feedback(check, 3)
Part 2 NOT YET: flip it
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


class ExerciseFailed(AssertionError):
    """A rejected answer. ``problem`` is a short code for the mistake; ``str(err)`` explains it."""

    def __init__(self, exercise: int | str, problem: str, message: str, *, noun: str = "Exercise"):
        self.exercise, self.problem, self.noun = exercise, problem, noun
        super().__init__(f"{noun} {exercise} [{problem}]: {message}")

    def _render_traceback_(self) -> list[str]:
        """What IPython (a notebook) shows for this failure: the message alone, line by line, none of the
        checker's code (the case, input, expected, got and hint are all the learner needs)."""
        return f"{type(self).__name__}: {self}".splitlines()


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check: passed or not, and what the checker said."""

    exercise: int | str  # 1-5 in 06; "03.1" for the end-of-notebook checkers of 00-05; a part 1-6 of the track
    passed: bool
    message: str
    problem: str | None = None
    noun: str = "Exercise"  # "Part" for the build-it track

    def __repr__(self) -> str:
        mark = "PASSED" if self.passed else "NOT YET"
        return f"{self.noun} {self.exercise} {mark}: {self.message}"

    def _repr_markdown_(self) -> str:
        mark = "**passed**" if self.passed else "**not yet**"
        body = markdown_escape(self.message).replace("\n", "  \n")
        return f"{self.noun} {self.exercise} {mark}: {body}"


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


def plural(n: int, word: str, many: str | None = None) -> str:
    """``n`` and the word, plural but for one: "1 page", "3 pages" (``many``: an irregular plural)."""
    return f"{n} {word if n == 1 else many or word + 's'}"


def case_message(case: str, given: str, expected, got, hint: str) -> str:
    """One wrong case in four plain lines: the input, what was expected, what came back, a hint."""
    return f"case '{case}'\n  input:    {given}\n  expected: {expected}\n  got:      {got}\n  hint:     {hint}"


def feedback(check: Callable, answer) -> Verdict:
    """Run ``check(answer)`` and return its :class:`Verdict`, passed or not; never raises for a mistake."""
    try:
        return check(answer)
    except ExerciseFailed as err:
        message = str(err).split(": ", 1)[1]
        return Verdict(err.exercise, False, message, err.problem, err.noun)


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


def your_line(error: BaseException) -> str:
    """Where in the learner's code ``error`` was raised (the last frame outside ropepool), as one line."""
    package = str(Path(__file__).resolve().parent.parent)
    frames = [
        f for f in traceback.extract_tb(error.__traceback__) if not str(Path(f.filename).resolve()).startswith(package)
    ]
    if not frames:
        return ""
    f = frames[-1]
    where = "your cell" if f.filename.startswith("<") else Path(f.filename).name
    return f"\n  at:       {where}, line {f.lineno}: {(f.line or '').strip()}"


def guarded(
    exercise: int | str,
    fn: Callable,
    *args,
    what: str,
    todo: str = "replace the stub's body with your code.",
    explain: Callable[[Exception], str] = lambda e: "",
    expected: tuple = (),
    noun: str = "Exercise",
):
    """``fn(*args)``, the learner's code: the stub's NotImplementedError becomes ``todo``, any other error
    a failure naming the learner's own line (``explain(e)`` added), except those in ``expected``, raised
    again for the checker to judge, and a checker's own :class:`ExerciseFailed`, passed on."""
    __tracebackhide__ = True  # IPython and pytest show the learner's frames, not the checker's
    try:
        return fn(*args)
    except expected:
        raise
    except NotImplementedError:
        raise ExerciseFailed(
            exercise, "not_implemented", f"{what} raised NotImplementedError: {todo}", noun=noun
        ) from None
    except ExerciseFailed:
        raise
    except Exception as e:  # the learner's bug, reported rather than crashing the checker
        message = f"{what} raised {type(e).__name__}: {e}{explain(e)}{your_line(e)}"
        raise ExerciseFailed(exercise, "raised", message, noun=noun) from None
