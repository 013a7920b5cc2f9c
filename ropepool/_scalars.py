"""The op's plain arguments (sizes, flags, numbers), read one way everywhere.

A size is a ``numbers.Integral`` (an int or a NumPy integer), a number a ``numbers.Real`` (ints,
floats, NumPy floats and integers), a flag a ``bool`` or ``numpy.bool_``. A bool is never a
number, a string never either: nothing is parsed or rounded. Like :mod:`ropepool.rope`, this
module loads without MLX (``benchmarks/cuda_check.py`` on a GPU machine without it).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .errors import fail

#: The op's keyword arguments that are flags; its other checked scalars are sizes.
FLAGS = ("check_values", "inplace", "is_neox")


def is_flag(x) -> bool:
    return isinstance(x, (bool, np.bool_))


def is_int(x) -> bool:
    """An integer that is not a bool: int, ``np.int64``, ..."""
    return type(x) is int or (isinstance(x, numbers.Integral) and not is_flag(x))


def finite_float(x) -> float | None:
    """``x`` as a float if it is a finite real number (not a bool, a string, an array or a Decimal); else None.

    >>> finite_float(2), finite_float(np.float32(0.5)), finite_float("2"), finite_float(True), finite_float(10**400)
    (2.0, 0.5, None, None, None)
    """
    if type(x) is float:  # the common case, cheaply
        return x if math.isfinite(x) else None
    if not isinstance(x, numbers.Real) or is_flag(x):
        return None
    try:
        f = float(x)
    except (OverflowError, TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def check_types(**arguments) -> None:
    """Sizes must be ints and flags (:data:`FLAGS`) bools, as SGLang's binding takes them.

    Raises
    ------
    RopePoolError
        ``argument_type``, for the first argument of another type.
    """
    for name, value in arguments.items():
        flag = name in FLAGS
        if type(value) is (bool if flag else int):  # the common call: no ABC checks (a decode-loop cost)
            continue
        if flag:
            ok, kind, hint = is_flag(value), "a bool", f"pass {name}=True or {name}=False."
        else:
            ok, kind = is_int(value), "an int"
            hint = (
                f"pass {name}={int(float(value))}: a float is not rounded for you."
                if _whole(value)
                else f"read {name} from the model's config, as an int."
            )
        if not ok:
            raise fail(
                "argument_type",
                name=name,
                kind=kind,
                expected=f"{name} {kind}",
                got=f"{value!r} ({type(value).__name__})",
                hint=hint,
            )


def _whole(value) -> bool:
    try:
        return float(value).is_integer()
    except (TypeError, ValueError, OverflowError):
        return False
