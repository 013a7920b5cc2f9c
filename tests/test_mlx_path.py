"""The pool write is O(T) on the MLX path and the "cpu" backend (which writes the pools the same way):
MLX reuses (donates) the pool's buffer when nothing else holds it.

Checked without a clock: after the call, the new pool lives in the very buffer of the old one.
"""

import mlx.core as mx
import numpy as np
import pytest

from ropepool import Shapes, make_inputs, rope_pool_fused
from ropepool.pool_write import plan, write


def buffer_address(a: mx.array) -> int:
    view = np.asarray(a)  # zero-copy view of MLX's buffer
    address = view.__array_interface__["data"][0]
    del view  # a live view would pin the buffer and block donation
    return address


@pytest.mark.parametrize(
    "check_values,slots",
    [
        (False, [7, -1, 4095, 0]),  # slots stay on the device: the integer min/max scatters
        (True, [7, -1, 4095, 0]),  # slots read on the host, the skipped token dropped there
        (True, [7, 9, 4095, 0]),  # every token writes: one plain scatter
        (True, [4092, 4093, 4094, 4095]),  # one run of consecutive rows, up to the last: a block copy
        (False, [12, 13, 14, 15]),  # the same, slots read on the host by the cpu backend only
    ],
)
def test_rebound_pool_is_written_in_place(check_values, slots, backend):
    kw = make_inputs(Shapes(4, 8, 2, 16, 4096), "float16", slots=slots)
    k_pool, v_pool = kw.pop("k_pool"), kw.pop("v_pool")
    mx.eval(k_pool, v_pool)
    k_addr, v_addr = buffer_address(k_pool), buffer_address(v_pool)
    for step in range(3):  # decode steps, the pools rebound each time
        q_rot, k_rot, k_pool, v_pool = rope_pool_fused(
            **kw, k_pool=k_pool, v_pool=v_pool, check_values=check_values, backend=backend
        )
        mx.eval(q_rot, k_rot, k_pool, v_pool)
        assert buffer_address(k_pool) == k_addr, f"k_pool copied at step {step}"
        assert buffer_address(v_pool) == v_addr, f"v_pool copied at step {step}"


def test_held_pool_is_copied_not_overwritten(backend):
    kw = make_inputs(Shapes(2, 4, 2, 8, 16), "float32", slots=[3, 5])
    old = np.array(kw["k_pool"])
    _, k_rot, k_pool, _ = rope_pool_fused(**kw, backend=backend)
    mx.eval(k_pool)
    np.testing.assert_array_equal(np.array(kw["k_pool"]), old)  # the caller's pool kept its value
    np.testing.assert_array_equal(np.array(k_pool)[[3, 5]], np.array(k_rot))


def test_pool_write_skips_without_collision():
    """A skipped token next to a writer of row 0 must not clobber it."""
    pool = mx.zeros((4, 1, 2))
    rows = mx.array([[[1.0, 1.0]], [[2.0, 2.0]], [[3.0, 3.0]]])  # [T, Hkv, D]
    out = np.array(write(plan(np.array([-1, 0, 9]), 4), pool, pool, rows, rows)[0])
    np.testing.assert_array_equal(out[:, 0, 0], [2.0, 0.0, 0.0, 0.0])
