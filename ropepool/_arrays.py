"""Array kinds: the op takes ``mx.array`` or NumPy arrays and answers in the kind of q."""

from __future__ import annotations

import numpy as np

try:
    import mlx.core as mx
except ImportError:  # benchmarks/cuda_check.py on a GPU machine without MLX: NumPy arrays only
    mx = None

# What isinstance() takes for "an mx.array": nothing matches where MLX is absent.
_MX_ARRAY = mx.array if mx is not None else ()

FLOAT_DTYPES = ("float16", "bfloat16", "float32")


def is_array(x) -> bool:
    return isinstance(x, (_MX_ARRAY, np.ndarray))


_MX_DTYPE_NAMES: dict = {}
_NP_DTYPE_NAMES: dict = {}  # NumPy's dtype.name is computed in Python on every access


def dtype_name(x) -> str:
    """'float16', 'bfloat16', 'int32', ... for an mx.array or a NumPy array."""
    if isinstance(x, _MX_ARRAY):
        name = _MX_DTYPE_NAMES.get(x.dtype)
        if name is None:  # first sight of this dtype: remember its name (a per-call cost at decode)
            name = _MX_DTYPE_NAMES[x.dtype] = str(x.dtype).rsplit(".", 1)[-1]
        return name
    name = _NP_DTYPE_NAMES.get(x.dtype)
    if name is None:
        name = _NP_DTYPE_NAMES[x.dtype] = x.dtype.name
    return name


def native(x):
    """``x`` as the op reads it: a NumPy array in native byte order, row-contiguous and aligned
    (a copy when it is not: ``x[::-1]``, ``np.broadcast_to``, dtype ``'>f4'``); an mx.array as is.
    Never a reinterpretation of the bytes."""
    if isinstance(x, np.ndarray):
        flags = x.flags  # a new object on every access
        if not (x.dtype.isnative and flags.c_contiguous and flags.aligned):
            return np.ascontiguousarray(x, dtype=x.dtype.newbyteorder("="))
    return x


def to_mx(x) -> mx.array:
    return x if isinstance(x, mx.array) else mx.array(x)


def to_numpy(x, dtype=None) -> np.ndarray:
    """A NumPy copy; bfloat16 (which NumPy lacks) goes through float32 exactly."""
    if isinstance(x, _MX_ARRAY):
        if x.dtype == mx.bfloat16:
            x = x.astype(mx.float32)
        x = np.array(x)
    return np.asarray(x, dtype=dtype)


def largest_abs(x) -> float:
    """``max |x|`` over all elements (0.0 for an empty array), of an mx.array or a NumPy array."""
    if x.size == 0:
        return 0.0
    if isinstance(x, _MX_ARRAY):
        return float(mx.max(mx.abs(x)))
    return float(np.max(np.abs(x)))


def host_memory(x, storage) -> np.ndarray:
    """The memory of ``x`` (mx.array or NumPy) as a flat NumPy array of ``storage``, row-contiguous.

    A view where ``x`` already is row-contiguous (an mx.array is evaluated first), else a copy.
    The view holds a reference to ``x``, and writing it writes ``x``.
    """
    if isinstance(x, np.ndarray):
        return np.ascontiguousarray(x).reshape(-1).view(storage)
    mx.eval(x)
    if not memoryview(x).c_contiguous:
        x = mx.contiguous(x)
        mx.eval(x)
    return np.frombuffer(x, storage)
