"""What the engine accepts as a count or a token id: an int, Python's or NumPy's, never a bool.

A float, a string, bytes or a dict is refused, not converted: ``3.9`` is not token 3 and ``"37"``
is not tokens ``[3, 7]``. Each refusal names the argument.
"""

from __future__ import annotations

import numbers

from .errors import EngineArgumentError


def is_int(value) -> bool:
    """True for a Python or NumPy integer; False for a bool (a NumPy bool is no ``Integral``)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_int(name: str, value, low: int, high: int | None = None) -> int:
    """``value`` as a plain int, if it is an int in ``[low, high]``.

    Raises
    ------
    EngineArgumentError
        Naming ``name``, what it must be and what it is.

    Example
    -------
    >>> import numpy as np
    >>> check_int("pool_rows", np.int64(8), 1)
    8
    >>> check_int("pool_rows", 8.0, 1)
    Traceback (most recent call last):
    ...
    ropepool.engine.errors.EngineArgumentError: pool_rows must be an int, got float 8.0
    """
    if not is_int(value):
        raise EngineArgumentError(f"{name} must be an int, got {type(value).__name__} {value!r:.60}")
    value = int(value)
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise EngineArgumentError(f"{name} must be an int {bound}, got {value}")
    return value


def check_token_ids(name: str, ids, vocab: int) -> list[int]:
    """``ids`` as a non-empty list of plain ints in ``[0, vocab)``.

    ``ids``: a list, tuple or range of ints, or a 1-D NumPy array of an integer dtype.

    Raises
    ------
    EngineArgumentError
        ``ids`` is a string, bytes, a dict, a set, not a sequence, empty, or holds a non-int or
        an id outside ``[0, vocab)``.
    """
    if type(ids).__module__ == "numpy" and getattr(ids, "ndim", None) == 1:
        ids = ids.tolist()  # NumPy ints become Python ints; a float array's items stay floats, refused below
    if not isinstance(ids, (list, tuple, range)):
        raise EngineArgumentError(f"{name} must be a list of token ids (ints), got {type(ids).__name__} {ids!r:.60}")
    if len(ids) == 0:
        raise EngineArgumentError(f"{name} is empty: a request needs at least one token")
    for i, t in enumerate(ids):
        if not is_int(t):
            raise EngineArgumentError(f"{name}[{i}] must be a token id (an int), got {type(t).__name__} {t!r:.60}")
        if not 0 <= t < vocab:
            raise EngineArgumentError(f"{name}[{i}]: token id {t} outside [0, {vocab}) (the model's vocab)")
    return [int(t) for t in ids]
