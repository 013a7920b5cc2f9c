"""NVIDIA's runtime compiler (NVRTC) on the kernel, exactly as ``mx.fast.cuda_kernel`` assembles it.

MLX's CUDA back-end builds one source text per specialisation (``build_kernel`` in
``mlx/backend/cuda/custom_kernel.cpp``, MLX 0.32) and compiles it with NVRTC
(``mlx/backend/cuda/jit_module.cpp``)::

    default header        #include "mlx/backend/cuda/device/utils.cuh", <cooperative_groups.h>
    our header            cuda.h
    namespace mlx::core::cu {
    __global__ void custom_kernel_<name>_<template hash>(
        const <type>* <input>, [const __grid_constant__ Shape <input>_shape,] ...   # shape only where the body names it
        <type>* <output>, ...) {
      using DType = __half; constexpr int Hq = 32; ...     # the template arguments
      <body>
    }
    }

:func:`assemble` reproduces that text from ropepool's own pieces (:mod:`ropepool.kernels.source`:
body, header, argument names and dtypes, template arguments), so whatever the kernel gains is
compiled here too. :func:`compile_cuda` compiles a text with the NVRTC of the ``nvidia-cuda-nvrtc``
wheel (through ctypes, no GPU needed) with MLX's options, ``--gpu-architecture=sm_XX`` (SASS,
a cubin) and the ``nvidia-cuda-runtime`` wheel's headers, plus ``--ptxas-options=-v`` for the
register and spill report.

MLX's device headers are compiled into MLX's CUDA library, and the ``mlx[cpu]`` wheel ships
none of them. Where ``mlx/include/mlx/backend/cuda/device/utils.cuh`` is installed (``mlx[cuda13]``)
it is used, with the CCCL headers MLX ships; otherwise NVRTC is given :data:`UTILS_STAND_IN`
under that name: utils.cuh's includes and the two types a generated signature names
(``Shape``, ``Strides``), as MLX defines them, over the ``nvidia-cuda-cccl`` wheel's CCCL
(``<cooperative_groups.h>`` needs it too).

Nothing in this module imports MLX: ``benchmarks/cuda_check.py`` uses it on a machine without MLX.
"""

from __future__ import annotations

import ctypes
import importlib.util
import re
import sys
import time
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from ropepool.kernels import source

#: The architectures the tests compile for: A100 (sm_80) and H100 (sm_90).
ARCHS = ("sm_80", "sm_90")

#: MLX's ``dtype_to_cuda_type`` (mlx/backend/cuda/utils.cpp), for the dtypes the kernel uses.
CUDA_TYPES = {
    "float32": "float",
    "float16": "__half",
    "bfloat16": "__nv_bfloat16",
    "int32": "int32_t",
    "uint8": "uint8_t",
}

# MLX's get_type_string, used only in the kernel's name (the template hash).
_TYPE_STRINGS = {"float32": "float", "float16": "float16_t", "bfloat16": "bfloat16_t"}

#: ``default_header`` of mlx/backend/cuda/custom_kernel.cpp, verbatim.
DEFAULT_HEADER = """
#include "mlx/backend/cuda/device/utils.cuh"

#include <cooperative_groups.h>

#define inf cuda::std::numeric_limits<float>::infinity()

"""

UTILS_INCLUDE = "mlx/backend/cuda/device/utils.cuh"

#: What NVRTC gets as ``mlx/backend/cuda/device/utils.cuh`` where MLX's own is not installed.
UTILS_STAND_IN = """// ropepool's stand-in for MLX's mlx/backend/cuda/device/utils.cuh, which is not installed
// here: its includes, and the two types a generated signature names, as MLX defines them.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda/std/array>
#include <cuda/std/limits>
#include <cuda/std/tuple>
#define MAX_NDIM 10  // mlx/backend/cuda/device/config.h
namespace mlx::core::cu {
using Shape = cuda::std::array<int32_t, MAX_NDIM>;
using Strides = cuda::std::array<int64_t, MAX_NDIM>;
}  // namespace mlx::core::cu
"""

#: Entries of ``Shape`` passed by value (``MAX_NDIM`` in mlx/backend/cuda/device/config.h).
MAX_NDIM = 10


class NvrtcError(RuntimeError):
    """NVRTC rejected a program; the message holds its log."""


# ---------------------------------------------------------------------------------------------
# Where the wheels put things


def _nvidia_dirs() -> list[Path]:
    """The ``nvidia`` namespace package's folders (``nvidia/cu13/...`` in CUDA 13's wheels) that lie
    in this interpreter's site-packages: never one found through the current directory or
    ``PYTHONPATH``, since the library found there is loaded into this process."""
    import site
    import sysconfig

    sites = {
        Path(p).resolve()
        for p in (
            *site.getsitepackages(),
            site.getusersitepackages(),
            sysconfig.get_paths()["purelib"],
            sysconfig.get_paths()["platlib"],
        )
    }
    spec = importlib.util.find_spec("nvidia")
    found = [Path(p).resolve() for p in (spec.submodule_search_locations or [])] if spec else []
    return [p for p in found if p.parent in sites]


def library_path() -> Path | None:
    """``libnvrtc.so.*`` from the ``nvidia-cuda-nvrtc`` wheel, or None."""
    for root in _nvidia_dirs():
        for pattern in ("cu*/lib/libnvrtc.so.*", "cuda_nvrtc/lib/libnvrtc.so.*"):
            found = sorted(p for p in root.glob(pattern) if "builtins" not in p.name and "alt" not in p.name)
            if found:
                return found[0]
    return None


def cuda_include_dir() -> Path | None:
    """The CUDA headers (``cuda_fp16.h``, ...) of the ``nvidia-cuda-runtime`` wheel, or None."""
    for root in _nvidia_dirs():
        for pattern in ("cu*/include", "cuda_runtime/include"):
            for path in sorted(root.glob(pattern)):
                if (path / "cuda_fp16.h").exists():
                    return path
    return None


def mlx_include_dir() -> Path | None:
    """MLX's installed ``include`` folder, or None (MLX not installed; MLX is not imported)."""
    try:
        spec = importlib.util.find_spec("mlx")
    except (ImportError, ValueError):  # blocked or half-installed: as if absent
        spec = None
    for loc in (spec.submodule_search_locations or []) if spec else []:
        if (Path(loc) / "include" / "mlx").is_dir():
            return Path(loc) / "include"
    return None


def device_headers() -> dict[str, str]:
    """In-memory headers for NVRTC: the stand-in utils.cuh unless MLX's own is installed."""
    mlx_inc = mlx_include_dir()
    if mlx_inc is not None and (mlx_inc / UTILS_INCLUDE).exists():
        return {}
    return {UTILS_INCLUDE: UTILS_STAND_IN}


def cccl_include_dir() -> Path | None:
    """CCCL's headers (``nv/target``, ``cuda/std/array``): MLX's copy where installed, else the
    ``nvidia-cuda-cccl`` wheel's; None if neither."""
    mlx_inc = mlx_include_dir()
    cuda_inc = cuda_include_dir()
    for path in (mlx_inc / "cccl" if mlx_inc else None, cuda_inc / "cccl" if cuda_inc else None):
        if path is not None and (path / "nv" / "target").exists():
            return path
    return None


def include_dirs() -> list[Path]:
    """NVRTC's include path, in MLX's order (CCCL, then the CUDA headers), MLX's headers first."""
    mlx_inc = mlx_include_dir()
    return [d for d in (mlx_inc, cccl_include_dir(), cuda_include_dir()) if d is not None]


def unavailable_reason() -> str | None:
    """Why NVRTC cannot compile here, or None."""
    if not (sys.platform == "linux" and _machine() == "x86_64"):
        return f"NVRTC's wheels are installed for Linux x86-64 only (this is {sys.platform} {_machine()})"
    if library_path() is None:
        return "libnvrtc not found: pip install -e '.[test]' (nvidia-cuda-nvrtc)"
    if cuda_include_dir() is None:
        return "the CUDA headers (cuda_fp16.h) not found: pip install -e '.[test]' (nvidia-cuda-runtime)"
    if cccl_include_dir() is None:
        return "CCCL's headers (nv/target) not found: pip install -e '.[test]' (nvidia-cuda-cccl)"
    return None


def _machine() -> str:
    import platform

    return platform.machine()


# ---------------------------------------------------------------------------------------------
# The source text


@dataclass(frozen=True)
class KernelText:
    """One specialisation's source, as MLX compiles it: ``prologue + kernel`` is the full text.

    ``prologue`` is MLX's default header plus ours, the same for every specialisation;
    ``kernel`` is the ``namespace mlx::core::cu { __global__ void ... }`` block.
    ``params`` are ``(name, kind)`` with kind ``"input"``, ``"shape"`` (a ``Shape`` by value)
    or ``"output"``: what a launcher passes, in this order.
    """

    name: str
    prologue: str
    kernel: str
    params: tuple[tuple[str, str], ...]

    @property
    def text(self) -> str:
        return self.prologue + self.kernel

    @property
    def qualified_name(self) -> str:
        return "mlx::core::cu::" + self.name


def _template_hash(template) -> str:
    parts = []
    for _, value in template:
        if isinstance(value, bool):
            parts.append("_t" if value else "_f")
        elif isinstance(value, int):
            parts.append(f"_{value}")
        else:
            parts.append("_" + _TYPE_STRINGS[value])
    return "".join(parts)


def _template_lines(template) -> str:
    lines = []
    for name, value in template:
        if isinstance(value, bool):
            lines.append(f"  constexpr bool {name} = {'true' if value else 'false'};\n")
        elif isinstance(value, int):
            lines.append(f"  constexpr int {name} = {value};\n")
        else:
            lines.append(f"  using {name} = {CUDA_TYPES[value]};\n")
    return "".join(lines) + "\n" if lines else ""


def assemble(
    name: str,
    input_names,
    input_dtypes,
    output_names,
    output_dtypes,
    body: str,
    header: str,
    template,
    *,
    extra_shapes=(),
) -> KernelText:
    """The text ``mx.fast.cuda_kernel`` compiles, as ``build_kernel`` writes it.

    Dtypes are names ("float16", "int32", ...). A ``<name>_shape`` parameter follows an input
    whose name plus ``_shape`` occurs in the body, as in MLX. ``extra_shapes`` adds ``Shape``
    parameters after the outputs: MLX has no such thing; the pool-writing variant needs one.
    """
    full_name = "custom_kernel_" + name + _template_hash(template)
    lines, params = [], []
    for n, dt in zip(input_names, input_dtypes):
        lines.append(f"    const {CUDA_TYPES[dt]}* {n}")
        params.append((n, "input"))
        if f"{n}_shape" in body:
            lines.append(f"    const __grid_constant__ Shape {n}_shape")
            params.append((f"{n}_shape", "shape"))
        for suffix in ("strides", "ndim"):
            if f"{n}_{suffix}" in body:
                raise ValueError(f"the body uses {n}_{suffix}; ropepool's kernels pass only shapes")
    for n, dt in zip(output_names, output_dtypes):
        lines.append(f"    {CUDA_TYPES[dt]}* {n}")
        params.append((n, "output"))
    for n in extra_shapes:
        lines.append(f"    const __grid_constant__ Shape {n}")
        params.append((n, "shape"))
    kernel = (
        "namespace mlx::core::cu {\n\nnamespace cg = cooperative_groups;\n\n"
        + f"__global__ void {full_name}(\n"
        + ",\n".join(lines)
        + ") {\n"
        + _template_lines(template)
        + body
        + "\n}\n\n} // namespace mlx::core::cu\n"
    )
    return KernelText(full_name, DEFAULT_HEADER + header, kernel, tuple(params))


def kernel_text(
    dtype: str,
    num_qo_heads: int,
    num_kv_heads: int,
    head_dim: int,
    *,
    rotary_dim: int | None = None,
    is_neox: bool = True,
    write_pool: bool = False,
    variant: source.Variant = source.PLAIN,
) -> KernelText:
    """ropepool's CUDA kernel for one specialisation, from :mod:`ropepool.kernels.source`.

    ``rotary_dim`` and ``is_neox`` are the RoPE variant's template arguments (RD, NEOX);
    ``variant`` the QK-norm and FP8 kernel (:class:`ropepool.kernels.source.Variant`).

    ``write_pool=True`` is the body's guarded in-kernel pool write (``RP_WRITE_POOL``), which
    MLX never compiles (its outputs are fresh buffers): inputs ``v`` and ``slots`` added,
    ``k_pool`` and ``v_pool`` written in place, ``k_pool_shape`` last.
    """
    inputs = list(source.input_names(variant))
    missing = [n for n in inputs if n not in source.INPUT_DTYPES]
    if missing:
        raise ValueError(f"source.INPUT_DTYPES has no dtype for input(s) {missing}")
    outputs = list(source.output_names(variant))
    extra = ()
    dtypes = {
        **source.INPUT_DTYPES,
        "v": "DType",
        "slots": "int32",
        **source.OUTPUT_DTYPES,
        "k_pool": "uint8" if variant.fp8 else "DType",
        "v_pool": "uint8" if variant.fp8 else "DType",
    }
    if write_pool:
        inputs += [n for n in ("v", "slots") if n not in inputs]
        outputs += ["k_pool", "v_pool"]
        extra = ("k_pool_shape",)
    in_dtypes = [dtype if dtypes[n] == "DType" else dtypes[n] for n in inputs]
    out_dtypes = [dtype if dtypes[n] == "DType" else dtypes[n] for n in outputs]
    text = assemble(
        source.kernel_name("cuda", variant) + ("_pool" if write_pool else ""),
        inputs,
        in_dtypes,
        outputs,
        out_dtypes,
        source.body("cuda"),
        source.header("cuda", variant),
        source.template_args(dtype, num_qo_heads, num_kv_heads, head_dim, rotary_dim, is_neox),
        extra_shapes=extra,
    )
    if write_pool:  # around the kernel block, not the headers (which never read it): one prologue for all
        text = replace(text, kernel="#define RP_WRITE_POOL\n" + text.kernel + "#undef RP_WRITE_POOL\n")
    return text


# ---------------------------------------------------------------------------------------------
# NVRTC through ctypes


@dataclass(frozen=True)
class Resources:
    """ptxas's report for one kernel of a compile."""

    kernel: str
    lowered_name: str
    registers: int
    stack_bytes: int
    spill_stores: int
    spill_loads: int

    @property
    def spills(self) -> int:
        return self.spill_stores + self.spill_loads


@dataclass(frozen=True)
class Compiled:
    """One NVRTC program: the cubin (SASS) for ``arch``, NVRTC's log, each kernel's resources."""

    arch: str
    cubin: bytes
    log: str
    seconds: float
    resources: dict  # kernel name -> Resources

    @property
    def warnings(self) -> list[str]:
        """Lines of the log that warn (NVRTC's front end or ptxas)."""
        return [line for line in self.log.splitlines() if "warning" in line.lower()]


@lru_cache(maxsize=1)
def _lib() -> ctypes.CDLL:
    reason = unavailable_reason()
    if reason is not None:
        raise NvrtcError(reason)
    lib = ctypes.CDLL(str(library_path()))
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    return lib


def version() -> tuple[int, int]:
    """NVRTC's (major, minor)."""
    major, minor = ctypes.c_int(), ctypes.c_int()
    _lib().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return major.value, minor.value


def _check(result: int, what: str, log: str = "") -> None:
    if result != 0:
        raise NvrtcError(f"{what}: {_lib().nvrtcGetErrorString(result).decode()}\n{log}")


def _parse_resources(log: str, kernel: str, lowered: str) -> Resources:
    """ptxas -v's report for the kernel whose mangled name is ``lowered``."""
    at = log.find(f"Function properties for {lowered}")
    if at < 0:
        raise NvrtcError(f"no ptxas resource report for {lowered} in the log:\n{log}")
    part = log[at:]
    frame = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", part)
    used = re.search(r"Used (\d+) registers", part)
    if frame is None or used is None:
        raise NvrtcError(f"could not read ptxas's report for {lowered}:\n{part}")
    return Resources(kernel, lowered, int(used.group(1)), *(int(g) for g in frame.groups()))


def compile_cuda(kernels, arch: str) -> Compiled:
    """Compile specialisations for ``arch`` ("sm_90", ...) to one cubin, with MLX's options.

    One kernel: exactly the text MLX compiles. Several: their shared prologue once, then each
    kernel block, so that NVRTC parses the headers once (CCCL's cost 2-5 s a program here);
    each kernel's code is the same as alone. Raises :class:`NvrtcError` with NVRTC's log if
    the program does not compile.
    """
    kernels = list(kernels)
    prologues = {k.prologue for k in kernels}
    if len(prologues) != 1:
        raise ValueError(f"one program takes specialisations with one prologue, got {len(prologues)}")
    text = kernels[0].prologue + "".join(k.kernel for k in kernels)
    lib = _lib()
    headers = device_headers()
    names = (ctypes.c_char_p * len(headers))(*[n.encode() for n in headers])
    texts = (ctypes.c_char_p * len(headers))(*[t.encode() for t in headers.values()])
    prog = ctypes.c_void_p()
    _check(
        lib.nvrtcCreateProgram(
            ctypes.byref(prog), text.encode(), f"{kernels[0].name}.cu".encode(), len(headers), texts, names
        ),
        "nvrtcCreateProgram",
    )
    try:
        for k in kernels:
            _check(lib.nvrtcAddNameExpression(prog, k.qualified_name.encode()), "nvrtcAddNameExpression")
        # MLX's options, then ptxas's reports (they do not change the code).
        opts = [f"--gpu-architecture={arch}"] + [f"--include-path={d}" for d in include_dirs()]
        opts += ["--ptxas-options=-v", "--ptxas-options=--warn-on-spills"]
        argv = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        start = time.perf_counter()
        result = lib.nvrtcCompileProgram(prog, len(opts), argv)
        seconds = time.perf_counter() - start
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value + 1)
        lib.nvrtcGetProgramLog(prog, buf)
        log = buf.value.decode(errors="replace")
        _check(result, f"NVRTC could not compile {kernels[0].name} (and {len(kernels) - 1} more) for {arch}", log)
        lowered = {}
        for k in kernels:
            out = ctypes.c_char_p()
            _check(lib.nvrtcGetLoweredName(prog, k.qualified_name.encode(), ctypes.byref(out)), "nvrtcGetLoweredName")
            lowered[k.name] = out.value.decode()
        _check(lib.nvrtcGetCUBINSize(prog, ctypes.byref(size)), "nvrtcGetCUBINSize")
        cubin = ctypes.create_string_buffer(size.value)
        _check(lib.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
    resources = {name: _parse_resources(log, name, low) for name, low in lowered.items()}
    return Compiled(arch, cubin.raw, log, seconds, resources)


@lru_cache(maxsize=None)
def compile_specialisations(specs: tuple, arch: str) -> tuple[Compiled, ...]:
    """Every ``(dtype, Hq, Hkv, D, RD, NEOX, write_pool[, variant])`` in ``specs`` through :func:`kernel_text`,
    compiled for ``arch``: one program per prologue (one per :class:`~ropepool.kernels.source.Variant`),
    cached per process."""
    groups: dict[str, dict[str, KernelText]] = {}
    for dtype, hq, hkv, d, rd, neox, write_pool, *variant in specs:
        k = kernel_text(
            dtype,
            hq,
            hkv,
            d,
            rotary_dim=rd,
            is_neox=neox,
            write_pool=write_pool,
            variant=variant[0] if variant else source.PLAIN,
        )
        groups.setdefault(k.prologue, {})[k.name] = k
    return tuple(compile_cuda(g.values(), arch) for g in groups.values())


def resource_table(rows) -> str:
    """A text table of ``(arch, dtype, variant, [Resources, ...])`` rows: registers per thread
    (min to max over the shapes) and spill bytes, for the test's report."""
    lines = [
        f"{'arch':<6} {'dtype':<9} {'variant':<8} {'registers/thread':>16} {'spill bytes':>11} {'stack':>6} "
        f"{'kernels':>7}"
    ]
    for arch, dtype, variant, res in rows:
        regs = sorted({r.registers for r in res})
        span = f"{regs[0]}" if len(regs) == 1 else f"{regs[0]}-{regs[-1]}"
        lines.append(
            f"{arch:<6} {dtype:<9} {variant:<8} {span:>16} {sum(r.spills for r in res):>11} "
            f"{max(r.stack_bytes for r in res):>6} {len(res):>7}"
        )
    return "\n".join(lines)
