"""Helpers the tests share."""

import mlx.core as mx
import numpy as np

_UINT = {1: mx.uint8, 2: mx.uint16, 4: mx.uint32, 8: mx.uint64}


def bits(a) -> np.ndarray:
    """An array's raw bits as unsigned integers of its item size, in native byte order.

    For bit-for-bit comparisons: bfloat16, NaN payloads and -0.0 included. Takes an ``mx.array``
    or anything NumPy reads (a big-endian NumPy array is read by value, then viewed).

    >>> bits(np.array([1.0, -0.0], np.float32)).tolist()
    [1065353216, 2147483648]
    >>> bits(mx.array([1.0], mx.bfloat16)).tolist()
    [16256]
    >>> bits(np.array([1.0], ">f2")).tolist() == bits(np.array([1.0], "<f2")).tolist()
    True
    """
    if isinstance(a, mx.array):
        return np.array(a.view(_UINT[a.dtype.size]))
    a = np.asarray(a)
    a = np.ascontiguousarray(a, a.dtype.newbyteorder("="))
    return a.view(f"u{a.dtype.itemsize}")


def for_each(cases, check) -> None:
    """Run ``check(case)`` for every case of a table; fail once, naming every case that failed and why.

    One test per behaviour, not one per row: the table's rows are checked in one item, and a
    failure still lists each row it failed for.

    >>> for_each([1, 2, 3], lambda n: None)
    >>> for_each([1, 2, 3], lambda n: float(1 / (n - 2)))
    Traceback (most recent call last):
    AssertionError: 1 of 3 failed:
    2: ZeroDivisionError: division by zero
    """
    cases = list(cases)
    failed = {}
    for case in cases:
        try:
            check(case)
        except Exception as err:  # an AssertionError, or whatever the check ran into
            failed[case] = f"{type(err).__name__}: {err}"
    assert not failed, f"{len(failed)} of {len(cases)} failed:\n" + "\n".join(f"{c}: {m}" for c, m in failed.items())


def drawn_states(state) -> list[str]:
    """What each pool row should show: the recording's row state, "used" rows no running request has written
    yet (positions past its ``num_cached``) drawn as "reserved"."""
    written = {row for rid in state.running for row in state.requests[rid].slot_table[: state.requests[rid].num_cached]}
    return ["reserved" if s == "used" and r not in written else s for r, s in enumerate(state.row_states())]
