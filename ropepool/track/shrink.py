"""The smallest failing input: a case on which a part differs from the reference, made as small as it goes.

A checker that found a difference hands the failing case, a function listing the cases one step smaller
(fewer requests or operations, smaller numbers) and the test "does the part still differ here?". The
shrunk case is what the learner is shown: on it, the difference is the mistake and little else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

Case = TypeVar("Case")


def smallest(
    case: Case, smaller: Callable[[Case], Iterable[Case]], differs: Callable[[Case], bool], tries: int = 500
) -> Case:
    """``case`` shrunk greedily: each round takes the first of ``smaller(case)`` on which ``differs`` still
    holds, until none does or ``tries`` candidates were tried. ``differs(case)`` is assumed true."""
    left = tries
    while left > 0:
        for candidate in smaller(case):
            left -= 1
            if differs(candidate):
                case = candidate
                break
            if left <= 0:
                break
        else:
            return case
    return case


def without_each(items: list) -> Iterable[list]:
    """``items`` with one element left out, the last first (later elements usually depend on earlier ones)."""
    for i in reversed(range(len(items))):
        yield items[:i] + items[i + 1 :]
