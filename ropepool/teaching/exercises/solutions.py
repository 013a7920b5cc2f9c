"""The reference solutions, kept out of the way, and how to show one."""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from .heads import check_1, solution_1
from .fix_call import check_2, solution_2
from .rope_numpy import check_3, solution_3
from .pool_predict import check_4, solution_4
from .decode_slots import check_5, solution_5


SOLUTIONS = {1: solution_1, 2: solution_2, 3: solution_3, 4: solution_4, 5: solution_5}
CHECKS = {1: check_1, 2: check_2, 3: check_3, 4: check_4, 5: check_5}


@dataclass(frozen=True)
class Solution:
    """The source of one reference solution; Jupyter shows it as a code block."""

    exercise: int
    source: str

    def __repr__(self) -> str:
        return self.source

    def _repr_markdown_(self) -> str:
        return f"Solution to exercise {self.exercise}:\n\n```python\n{self.source}```"


def show_solution(n: int) -> Solution:
    """The reference solution of exercise ``n`` (1 to 5), to display when you are stuck."""
    if n not in SOLUTIONS:
        raise ValueError(f"exercise {n!r} does not exist: choose one of {sorted(SOLUTIONS)}")
    return Solution(n, inspect.getsource(SOLUTIONS[n]))
