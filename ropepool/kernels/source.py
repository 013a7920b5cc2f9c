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
from dataclasses import dataclass
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

#: The FP8 encoder the body calls (``rp_e4m3``), included after each backend's header.
E4M3_FILE = "e4m3.inc"

#: Argument names of the plain kernel, as MLX declares them (the body uses exactly these).
INPUT_NAMES = ("q", "k", "positions", "inv_freq", "cos_sin_scale")
OUTPUT_NAMES = ("q_rot", "k_rot")
#: What QK-norm adds (weights [D] and eps [1], float32), and what an FP8 cache adds.
NORM_INPUTS = ("q_norm_weight", "k_norm_weight", "norm_eps")
FP8_INPUTS = ("v", "kv_scale")
FP8_OUTPUTS = ("k_fp8", "v_fp8")

#: Element type of each input, which MLX writes into the generated signature: "DType" is the
#: kernel's element type (q's dtype), the others are fixed.
INPUT_DTYPES = {
    "q": "DType",
    "k": "DType",
    "positions": "int32",
    "inv_freq": "float32",
    "cos_sin_scale": "float32",
    "q_norm_weight": "float32",
    "k_norm_weight": "float32",
    "norm_eps": "float32",
    "v": "DType",
    "kv_scale": "float32",
}
OUTPUT_DTYPES = {"q_rot": "DType", "k_rot": "DType", "k_fp8": "uint8", "v_fp8": "uint8"}


@dataclass(frozen=True)
class Variant:
    """What a call adds to the plain kernel: QK-norm of q and/or k, an FP8 (e4m3) cache.

    Each variant is its own kernel text: the header starts with the ``#define`` lines the body's
    ``#ifdef RP_QK_NORM`` / ``#ifdef RP_FP8`` blocks read (:func:`defines`), and the signature
    has the inputs and outputs those blocks name (:func:`input_names`, :func:`output_names`).
    """

    qnorm: bool = False
    knorm: bool = False
    fp8: bool = False

    @property
    def norm(self) -> bool:
        return self.qnorm or self.knorm


PLAIN = Variant()


def input_names(variant: Variant = PLAIN) -> tuple[str, ...]:
    return INPUT_NAMES + (NORM_INPUTS if variant.norm else ()) + (FP8_INPUTS if variant.fp8 else ())


def output_names(variant: Variant = PLAIN) -> tuple[str, ...]:
    return OUTPUT_NAMES + (FP8_OUTPUTS if variant.fp8 else ())


def defines(variant: Variant = PLAIN) -> str:
    """The ``#define`` lines that switch the body's QK-norm and FP8 blocks on ("" for the plain kernel)."""
    lines = []
    if variant.norm:
        lines += [
            "#define RP_QK_NORM",
            f"#define RP_QNORM_ON {str(variant.qnorm).lower()}",
            f"#define RP_KNORM_ON {str(variant.knorm).lower()}",
        ]
    if variant.fp8:
        lines += ["#define RP_FP8"]
    return "".join(line + "\n" for line in lines)


#: NumPy storage of each dtype on the host (NumPy has no bfloat16: its bits, as uint16; uint8: FP8
#: pools), and the driver's dtype codes (of q's dtype).
STORAGE = {"float32": np.float32, "float16": np.float16, "bfloat16": np.uint16, "uint8": np.uint8}
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
def header(backend: str, variant: Variant = PLAIN) -> str:
    """The per-backend header text (types, conversions, cos and sin, the e4m3 encoder), after the
    variant's ``#define`` lines. ``cpu.h`` includes ``e4m3.inc`` itself (the driver's build)."""
    _check(backend)
    text = defines(variant) + (KERNEL_DIR / HEADER_FILES[backend]).read_text()
    if backend != "cpu":
        text += "\n" + (KERNEL_DIR / E4M3_FILE).read_text()
    return text


def source_hash(backend: str, variant: Variant = PLAIN) -> str:
    """First 12 hex digits of the SHA-256 of header plus body, as compiled for ``backend``."""
    return hashlib.sha256((header(backend, variant) + "\0" + body(backend)).encode()).hexdigest()[:12]


def kernel_name(backend: str, variant: Variant = PLAIN) -> str:
    """``ropepool_rope_rows_<backend>_<hash>``: a new name whenever the compiled text changes."""
    return f"ropepool_rope_rows_{backend}_{source_hash(backend, variant)}"


def template_args(
    dtype, num_qo_heads: int, num_kv_heads: int, head_dim: int, rotary_dim: int | None = None, is_neox: bool = True
) -> list[tuple[str, object]]:
    """One specialisation's template arguments, in ``mx.fast.*_kernel``'s ``template=`` form:
    DType, Hq, Hkv, D, RD (rotary_dim; None: D) and NEOX (the pairing, see ``rope_rows.inc``).

    ``dtype`` is passed through as given: an ``mx.Dtype`` for MLX, a name such as
    ``"float16"`` for NVRTC (``benchmarks/nvrtc.py``). Every compiler of the kernel
    takes its template from here, so a new argument reaches all of them.
    """
    rd = head_dim if rotary_dim is None else rotary_dim
    return [
        ("DType", dtype),
        ("Hq", int(num_qo_heads)),
        ("Hkv", int(num_kv_heads)),
        ("D", int(head_dim)),
        ("RD", int(rd)),
        ("NEOX", bool(is_neox)),
    ]


def driver_text() -> str:
    """``driver.cpp``'s text; it includes ``cpu.h`` and the body (:func:`driver_depends`)."""
    return (KERNEL_DIR / DRIVER_FILE).read_text()


def driver_depends() -> list[Path]:
    """The files the driver includes: their text goes into every built library's cache key."""
    return [KERNEL_DIR / HEADER_FILES["cpu"], KERNEL_DIR / E4M3_FILE, KERNEL_DIR / BODY_FILE]


def grid_size(tokens: int, num_qo_heads: int, num_kv_heads: int, head_dim: int) -> int:
    """Threads the kernel needs: one per (token, head of q or k, dimension pair), ``T*(Hq+Hkv)*D/2``."""
    return tokens * (num_qo_heads + num_kv_heads) * (head_dim // 2)
