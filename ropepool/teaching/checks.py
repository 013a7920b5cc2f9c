"""Helpers that make a notebook's claims checkable and visible: a held claim says so in one line
(:func:`check`), an error cell proves its error fired (:func:`expect_error`)."""

from __future__ import annotations

import ast
import re
import sys
import textwrap
from typing import Callable

import numpy as np

from ..errors import CODES, MLA_CODES, RopePoolError


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
    if code not in CODES and code not in MLA_CODES:
        raise ValueError(f"unknown error code {code!r}; codes are {sorted(CODES) + sorted(MLA_CODES)}")
    try:
        call(*args, **kwargs)
    except RopePoolError as err:
        if err.code != code:
            raise AssertionError(f"expected error {code!r}, got {err.code!r}: {err}") from err
        return err
    raise AssertionError(f"expected error {code!r}, but the call succeeded")


#: What a held claim prints: plain ASCII, legible in any font (no emoji needed).
OK = "[ok]"
#: Columns of a printed claim: JupyterLab breaks longer output lines anywhere, even mid-word.
WIDTH = 66


def _say(claim: str) -> None:
    """Print ``[ok] claim``, wrapped at word boundaries to :data:`WIDTH` columns."""
    print(
        textwrap.fill(
            f"{OK} {claim}",
            WIDTH,
            subsequent_indent=" " * (len(OK) + 1),
            break_long_words=False,
            break_on_hyphens=False,
        )
    )


def _source_claim(depth: int, op: str | None = None) -> str:
    """The caller's arguments as written (``a == b``, or ``a ~= b`` for two with ``op``), and the
    comment ending its line; "(claim)" where the source cannot be read.

    Uses ``executing`` (a dependency of IPython) to find the call in the cell's source.
    """
    try:
        import executing

        frame = sys._getframe(depth + 1)
        node = executing.Source.executing(frame).node
        source = executing.Source.for_frame(frame)
        text = source.text
        args = [" ".join(ast.get_source_segment(text, a).split()) for a in node.args[: 2 if op else 1]]
        claim = f" {op} ".join(args)
        line = source.lines[node.end_lineno - 1]
        comment = re.search(r"\)\s*#\s*(.+)$", line)
        return f"{claim}  # {comment.group(1).strip()}" if comment else claim
    except Exception:  # no source (an exec'd string, a frozen module): still say something held
        return "(claim)"


def check(condition, claim: str | None = None, detail=None) -> None:
    """Assert ``condition`` and say in one line what held: ``[ok] claim``.

    ``claim`` defaults to the condition as written in the cell (and the comment ending the
    line). Raises AssertionError with the claim (and ``detail``, when given) if ``condition`` is
    false, so the cell fails under nbmake as a bare ``assert`` would, and never vanishes under
    ``python -O``.

    Example
    -------
    >>> check(2 + 2 == 4, "2 + 2 == 4")
    [ok] 2 + 2 == 4
    """
    claim = claim if claim is not None else _source_claim(1)
    if not condition:
        raise AssertionError(claim if detail is None else f"{claim}: {detail}")
    _say(claim)


#: ``$ROPEPOOL_TIMING_CLAIMS=report``: :func:`check_timing` reports instead of asserting (tests/conftest.py sets it).
TIMING_ENV = "ROPEPOOL_TIMING_CLAIMS"


def check_timing(condition, claim: str, detail=None) -> None:
    """A claim about time (a ratio of medians this run measured): :func:`check`, in the lab.

    Under the test suite (``$ROPEPOOL_TIMING_CLAIMS`` = ``report``, which tests/conftest.py sets) it
    prints ``[timing] claim: held this run`` or ``... did not hold this run`` and asserts nothing: the
    suite's two workers share the machine, and no speed claim is asserted in a timed test. Each range
    is asserted over five runs by ``python -m pytest -m claims tests/test_speed_claims.py``.

    Example
    -------
    >>> import os
    >>> os.environ[TIMING_ENV] = "report"
    >>> check_timing(1.4 > 1, "faster")
    [timing] faster: held this run
    >>> del os.environ[TIMING_ENV]
    """
    import os

    if os.environ.get(TIMING_ENV) != "report":
        check(condition, claim, detail)
        return
    said = "held this run" if condition else "did not hold this run (asserted over five runs by -m claims)"
    print(textwrap.fill(f"[timing] {claim}: {said}", WIDTH, subsequent_indent="         ", break_long_words=False))


def check_close(actual, desired, claim: str | None = None, rtol: float = 1e-7, atol: float = 0.0, detail=None) -> None:
    """``np.testing.assert_allclose(actual, desired, rtol, atol)``, then ``[ok] actual ~= desired (tolerances)``."""
    claim = claim if claim is not None else _source_claim(1, "~=")
    if detail is not None:
        claim = f"{claim}: {detail}"
    np.testing.assert_allclose(actual, desired, rtol=rtol, atol=atol, err_msg=claim)
    _say(f"{claim} (rtol={rtol:g}, atol={atol:g})")


def check_equal(actual, desired, claim: str | None = None, detail=None) -> None:
    """``np.testing.assert_array_equal(actual, desired)``, then ``[ok] actual == desired``: bit for bit."""
    claim = claim if claim is not None else _source_claim(1, "==")
    if detail is not None:
        claim = f"{claim}: {detail}"
    np.testing.assert_array_equal(actual, desired, err_msg=claim)
    _say(claim)
