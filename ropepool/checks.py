"""Helpers that make a notebook's claims checkable: an error cell proves its error fired."""

from __future__ import annotations

from typing import Callable

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
