"""``python -m ropepool doctor``: versions, the BLAS under MLX, and which backends run here and why the others don't."""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata

PACKAGES = ("numpy", "mlx", "matplotlib", "ipywidgets", "jupyterlab", "ngsolve-openblas")


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def folder_bytes(folder: str) -> int:
    """The bytes of every file under ``folder`` (as ``du -sb`` counts them); links are not followed."""
    total, todo = 0, [folder]
    while todo:
        try:
            entries = list(os.scandir(todo.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    todo.append(entry.path)
                else:
                    total += entry.stat(follow_symlinks=False).st_size
            except OSError:
                continue
    return total


def environment() -> str:
    """The venv (or installation) this Python runs from, and its size on disk."""
    kind = "venv" if sys.prefix != sys.base_prefix else "no venv (the system's or conda's Python)"
    if kind != "venv":
        return f"{kind}: {sys.prefix}"
    return f"venv {sys.prefix}: {folder_bytes(sys.prefix) / 1e6:,.0f} MB on disk"


def findings() -> list[tuple[str, str]]:
    """(item, finding) rows: the environment, then one row per backend."""
    import mlx.core as mx

    from ..backends import available_backends, best_backend
    from ..kernels import build

    rows = [
        ("python", sys.version.split()[0]),
        ("platform", f"{platform.system()} {platform.machine()}"),
        ("environment", environment()),
    ]
    rows += [(name, _version(name)) for name in PACKAGES]
    rows.append(("mlx default device", str(mx.default_device())))
    rows += _blas_rows()
    rows += [
        (f"backend {name}", ("runs: " if s.available else "does not run: ") + s.reason)
        for name, s in available_backends().items()
    ]
    rows.append(("backend='auto' picks", best_backend()))
    rows += _fallen_back_rows()
    rows.append(("kernel CPU check", _cpu_check()))
    try:
        cache = f"{build.cache_dir()} (set ROPEPOOL_KERNEL_CACHE to move it)"
    except RuntimeError as err:
        cache = f"unusable, nothing is built or loaded: {err}"
    rows.append(("kernel cache", cache))
    return rows


def _blas_rows() -> list[tuple[str, str]]:
    """Which library MLX's float32 matmul (``cblas_sgemm``) runs on, and its GF/s beside NumPy's."""
    from .. import blas, blas_threads

    mlx_gf, np_gf = blas.matmul_gflops(1024, repeats=3)  # first: cblas_sgemm binds on the first call
    return [
        ("BLAS under MLX", blas.describe()),
        ("BLAS threads", blas_threads.describe()),
        (
            "float32 1024^3 matmul",
            f"MLX {mlx_gf:.1f} GF/s, NumPy {np_gf:.1f} GF/s ({mlx_gf / np_gf:.2f}x); medians of 3, interleaved",
        ),
    ]


def _fallen_back_rows() -> list[tuple[str, str]]:
    """One row per GPU kernel variant that failed its first check in this process and runs on mlx."""
    from ..backends import resolve
    from ..kernels import FALLEN_BACK, GUARDED, statuses
    from ..kernels.variants import sweep

    here = [name for name in GUARDED if statuses()[name][0]]
    for name in here:
        sweep(resolve(name)[1])  # each dtype, rotation and fusion once, on a small head
    if not FALLEN_BACK:
        return [
            (
                "kernel variants",
                f"every variant checked runs on {', '.join(here)}" if here else "no GPU kernel here to check",
            )
        ]
    return [("fell back to mlx", f"{backend} {variant}: {why}") for (backend, variant), why in FALLEN_BACK.items()]


def _cpu_check() -> str:
    """What the C++ compiler does here: said only after it built (and loaded) the kernel body."""
    from ..kernels import build, host

    cxx = build.compiler()
    if cxx is None:
        return (
            "no C++ compiler (set CXX or install g++): no 'cpu' backend, and the kernel body cannot be "
            "checked on the CPU"
        )
    problem = host.unavailable_reason()
    if problem:
        return f"C++ compiler {cxx} does not build the kernel body here: {problem}"
    return f"C++ compiler {cxx}: builds the kernel body as the 'cpu' backend and, in the tests, under a grid emulator"


def build_kernels() -> None:
    """Build (or find in the kernel cache) the C++ libraries, saying on stdout what is ready.

    A machine without a C++ compiler is not an error: the 'mlx' backend runs there.
    """
    from ..kernels import emulator, host, invariant

    for what, reason in (
        ("kernel for this CPU (the 'cpu' backend)", host.unavailable_reason),
        ("batch-invariant matmul (Engine(deterministic=True), notebook 15)", invariant.unavailable_reason),
        ("kernel grid emulator (the tests)", emulator.unavailable_reason),
    ):
        problem = reason()
        print(f"ropepool: {what}: " + ("ready" if problem is None else f"not built here ({problem})"), flush=True)


def report() -> str:
    rows = findings()
    width = max(len(item) for item, _ in rows)
    return "\n".join(f"{item:<{width}}  {finding}" for item, finding in rows)
