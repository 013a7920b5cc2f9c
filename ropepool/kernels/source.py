"""The kernel's source text: one body (``rope_rows.inc``) plus one small header per backend.

==========  ==========================================  ====================================
backend     thread index (``gid``)                      header: types, conversions, cos/sin
==========  ==========================================  ====================================
metal       ``thread_position_in_grid.x``               ``metal.h``
cuda        ``blockIdx.x * blockDim.x + threadIdx.x``   ``cuda.h``
cpu         ``rp_thread_index``, the C++ driver's      ``cpu.h`` (g++, ``driver.cpp``)
==========  ==========================================  ====================================

The thread-index line is the one thing that cannot live in a header: MLX scans the *body*
for Metal attribute names such as ``thread_position_in_grid`` and only then declares them in
the generated signature, so :func:`body` puts that line in front of the shared body.

The kernel name carries a hash of the exact text compiled (header and body): MLX caches
compiled kernels by name (its CUDA back-end on disk), so a name that outlived its text would
run stale code.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

import numpy as np

KERNEL_DIR = Path(__file__).resolve().parent
BODY_FILE = "rope_rows.inc"
#: The C++ driver of the body: the grid emulator and the "cpu" backend (host.py, emulator.py).
DRIVER_FILE = "driver.cpp"
HEADER_FILES = {"metal": "metal.h", "cuda": "cuda.h", "cpu": "cpu.h"}
THREAD_INDEX = {
    "metal": "thread_position_in_grid.x",
    "cuda": "blockIdx.x * blockDim.x + threadIdx.x",
    "cpu": "rp_thread_index",
}

#: Argument names of the kernel, as MLX declares them (the body uses exactly these).
INPUT_NAMES = ("q", "k", "positions", "inv_freq", "cos_sin_scale")
OUTPUT_NAMES = ("q_rot", "k_rot")

#: Element type of each input, which MLX writes into the generated signature: "DType" is the
#: kernel's element type (q's dtype), the others are fixed.
INPUT_DTYPES = {"q": "DType", "k": "DType", "positions": "int32", "inv_freq": "float32", "cos_sin_scale": "float32"}

#: NumPy storage of each dtype on the host (NumPy has no bfloat16: its bits, as uint16), and the
#: driver's dtype codes.
STORAGE = {"float32": np.float32, "float16": np.float16, "bfloat16": np.uint16}
DTYPE_CODE = {"float32": 0, "float16": 1, "bfloat16": 2}

#: Threads per threadgroup (Metal) or block (CUDA), and what the CPU emulator pretends.
BLOCK = 256


def _check(backend: str) -> None:
    if backend not in HEADER_FILES:
        raise ValueError(f"backend must be one of {sorted(HEADER_FILES)}, got {backend!r}")


@lru_cache(maxsize=None)
def body(backend: str) -> str:
    """The kernel body for ``backend``: its thread-index line, then ``rope_rows.inc``."""
    _check(backend)
    shared = (KERNEL_DIR / BODY_FILE).read_text()
    return f"const rp_uint gid = {THREAD_INDEX[backend]};\n{shared}"


@lru_cache(maxsize=None)
def header(backend: str) -> str:
    """The per-backend header text (types, conversions, cos and sin)."""
    _check(backend)
    return (KERNEL_DIR / HEADER_FILES[backend]).read_text()


def source_hash(backend: str) -> str:
    """First 12 hex digits of the SHA-256 of header plus body, as compiled for ``backend``."""
    return hashlib.sha256((header(backend) + "\0" + body(backend)).encode()).hexdigest()[:12]


def kernel_name(backend: str) -> str:
    """``ropepool_rope_rows_<backend>_<hash>``: a new name whenever the compiled text changes."""
    return f"ropepool_rope_rows_{backend}_{source_hash(backend)}"


def template_args(dtype, num_qo_heads: int, num_kv_heads: int, head_dim: int, rotary_dim: int | None = None,
                  is_neox: bool = True) -> list[tuple[str, object]]:
    """One specialisation's template arguments, in ``mx.fast.*_kernel``'s ``template=`` form:
    DType, Hq, Hkv, D, RD (rotary_dim; None: D) and NEOX (the pairing, see ``rope_rows.inc``).

    ``dtype`` is passed through as given: an ``mx.Dtype`` for MLX, a name such as
    ``"float16"`` for NVRTC (``benchmarks/nvrtc.py``). Every compiler of the kernel
    takes its template from here, so a new argument reaches all of them.
    """
    rd = head_dim if rotary_dim is None else rotary_dim
    return [("DType", dtype), ("Hq", int(num_qo_heads)), ("Hkv", int(num_kv_heads)), ("D", int(head_dim)),
            ("RD", int(rd)), ("NEOX", bool(is_neox))]


def driver_text() -> str:
    """``driver.cpp``'s text; it includes ``cpu.h`` and the body (:func:`driver_depends`)."""
    return (KERNEL_DIR / DRIVER_FILE).read_text()


def driver_depends() -> list[Path]:
    """The files the driver includes: their text goes into every built library's cache key."""
    return [KERNEL_DIR / HEADER_FILES["cpu"], KERNEL_DIR / BODY_FILE]


def grid_size(tokens: int, num_qo_heads: int, num_kv_heads: int, head_dim: int) -> int:
    """Threads the kernel needs: one per (token, head of q or k, dimension pair), ``T*(Hq+Hkv)*D/2``."""
    return tokens * (num_qo_heads + num_kv_heads) * (head_dim // 2)
