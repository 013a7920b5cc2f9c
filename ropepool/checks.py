"""Helpers that make a notebook's claims checkable and visible: a held claim says so in one line
(:func:`check`), an error cell proves its error fired (:func:`expect_error`)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .errors import CATALOG, RopePoolError


def expect_error(code: str, call: Callable, /, *args, **kwargs) -> RopePoolError:
    """Run ``call(*args, **kwargs)`` and return the :class:`RopePoolError` it raised.

    Raises AssertionError if the call succeeds or raises an error with another code, so a
    notebook cell that should fail cannot pass quietly under nbmake. Any other exception
    propagates unchanged.

    Example
    -------
    >>> import ropepool
    >>> err = expect_error("k_shape", ropepool.rope_pool_fused, **ropepool.CATALOG["k_shape"].trigger())
    >>> err.code
    'k_shape'
    """
    if code not in CATALOG:
        raise ValueError(f"unknown error code {code!r}; codes are {sorted(CATALOG)}")
    try:
        call(*args, **kwargs)
    except RopePoolError as err:
        if err.code != code:
            raise AssertionError(f"expected error {code!r}, got {err.code!r}: {err}") from err
        return err
    raise AssertionError(f"expected error {code!r}, but the call succeeded")


#: What a held claim prints: plain ASCII, legible in any font (no emoji needed).
OK = "[ok]"


def check(condition, claim: str, detail=None) -> None:
    """Assert ``condition`` and say in one line what held: ``[ok] claim``.

    Raises AssertionError with ``claim`` (and ``detail``, when given) if ``condition`` is false,
    so the cell fails under nbmake as a bare ``assert`` would; it never vanishes under ``python -O``.

    Example
    -------
    >>> check(2 + 2 == 4, "2 + 2 == 4")
    [ok] 2 + 2 == 4
    """
    if not condition:
        raise AssertionError(claim if detail is None else f"{claim}: {detail}")
    print(f"{OK} {claim}")


def check_close(actual, desired, claim: str, rtol: float = 1e-7, atol: float = 0.0) -> None:
    """``np.testing.assert_allclose(actual, desired, rtol, atol)``, then ``[ok] claim (tolerances)``."""
    np.testing.assert_allclose(actual, desired, rtol=rtol, atol=atol, err_msg=claim)
    print(f"{OK} {claim} (rtol={rtol:g}, atol={atol:g})")


def check_equal(actual, desired, claim: str) -> None:
    """``np.testing.assert_array_equal(actual, desired)``, then ``[ok] claim``: equal bit for bit."""
    np.testing.assert_array_equal(actual, desired, err_msg=claim)
    print(f"{OK} {claim}")
