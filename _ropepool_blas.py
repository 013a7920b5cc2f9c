"""OpenBLAS under MLX's CPU back-end on Linux x86-64: loaded before MLX, in every process of the venv.

The Linux ``mlx[cpu]`` wheel links netlib's reference BLAS. libmlx looks ``cblas_sgemm`` up through
the process's global scope, so a library exporting it that is loaded with ``RTLD_GLOBAL`` before
MLX's first matmul takes over. This module loads the OpenBLAS of the ``ngsolve-openblas`` wheel
that way. That library needs ``libgfortran.so.5``, which it does not ship; MLX's wheel bundles one
(``mlx_cpu.libs/libgfortran-<hash>.so.5.0.0``). A fresh private folder (``tempfile.mkdtemp``,
mode 0700) gets links named ``libopenblas.so.0``, ``libgfortran.so.5`` and MLX's
``libquadmath-<hash>``; OpenBLAS is opened through its link, so that its ``RPATH $ORIGIN`` finds
the other two there; the folder is removed once the libraries are mapped.

Installed with the package, ``ropepool-blas.pth`` calls :func:`install_hook` at every start of the
venv's Python: it only puts a finder in ``sys.meta_path`` (no library is opened), and the finder
calls :func:`load` when ``mlx`` is first imported, from whatever code (a notebook's first cell,
pytest, nbmake, ``python -m ropepool``). ``import ropepool`` calls :func:`load` too, for a Python
started without the ``.pth`` (``-S``, or another venv with ``PYTHONPATH``).

- ``ROPEPOOL_BLAS=off`` keeps MLX's own BLAS.
- Anything but Linux x86-64 is left alone (macOS: MLX uses Accelerate).
- No ``ngsolve-openblas`` installed: MLX's own BLAS, silently (``python -m ropepool doctor`` says so).
- A load that fails: MLX's own BLAS, and one line on stderr saying why.
- Threads: OpenBLAS's own default, one per core, unless ``OPENBLAS_NUM_THREADS`` says otherwise.
  Where other processes already fill the cores (``make test`` runs two workers), set it to 1: an
  OpenBLAS worker that spins after a call takes a core from MLX's CPU stream thread.

Stdlib only, and never imports ``ropepool`` (whose ``__init__`` imports MLX).
"""

from __future__ import annotations

import ctypes
import glob
import os
import platform
import sys

#: What :func:`load` did: ``status`` is "loaded", "off", "not here" (platform), "absent" (no wheel),
#: "failed" or "not tried"; ``library`` the OpenBLAS file; ``reason`` one line; ``config``
#: OpenBLAS's own description; ``after_mlx`` True when MLX was imported before the load;
#: ``opened_as`` the (removed) link the loader knows it by.
STATE = {"status": "not tried", "library": None, "reason": "", "config": "", "after_mlx": False, "opened_as": None}
_handle = None


def applies() -> bool:
    """True on Linux x86-64, the only place this loader acts."""
    return sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64")


def _package_dirs(name: str) -> list[str]:
    """The folders of top-level package ``name`` (several for a namespace package), found without importing it."""
    from importlib.util import find_spec

    try:
        spec = find_spec(name)
    except (ImportError, ValueError):
        return []
    return list(spec.submodule_search_locations or []) if spec else []


def _openblas() -> str | None:
    for folder in _package_dirs("ngsolve_openblas"):
        libs = sorted(glob.glob(os.path.join(folder, "libopenblas*.so*")))
        if libs:
            return libs[0]
    return None


def _mlx_runtime_libs() -> list[str]:
    """MLX's bundled libgfortran and libquadmath (``mlx_cpu.libs/``), or [] when not found."""
    for folder in _package_dirs("mlx"):  # mlx is a namespace package: any folder named mlx on sys.path
        libs = os.path.join(os.path.dirname(os.path.abspath(folder)), "mlx_cpu.libs")
        found = glob.glob(os.path.join(libs, "libgfortran*.so*")) + glob.glob(os.path.join(libs, "libquadmath*.so*"))
        if found:
            return sorted(found)
    return []


def _open(library: str) -> ctypes.CDLL:
    """``library`` opened RTLD_GLOBAL through links in a private folder that also holds MLX's libgfortran."""
    import tempfile

    folder = tempfile.mkdtemp(prefix="ropepool-blas-")
    links = {"libopenblas.so.0": library}
    for path in _mlx_runtime_libs():
        name = os.path.basename(path)
        links["libgfortran.so.5" if name.startswith("libgfortran") else name] = path
    STATE["opened_as"] = os.path.join(folder, "libopenblas.so.0")
    try:
        for name, target in links.items():
            os.symlink(target, os.path.join(folder, name))
        return ctypes.CDLL(STATE["opened_as"], mode=ctypes.RTLD_GLOBAL)
    finally:
        for name in links:
            try:
                os.unlink(os.path.join(folder, name))
            except OSError:
                pass
        os.rmdir(folder)


def load() -> dict:
    """Load OpenBLAS with ``RTLD_GLOBAL`` once per process, if it applies; return :data:`STATE`.

    Never raises: a failure leaves MLX's own BLAS in place and prints one line on stderr.
    """
    global _handle
    if STATE["status"] != "not tried":
        return STATE
    uninstall_hook()  # once: finding MLX's folder below must not come back here
    if os.environ.get("ROPEPOOL_BLAS", "").strip().lower() == "off":
        STATE.update(status="off", reason="ROPEPOOL_BLAS=off: MLX's own BLAS")
        return STATE
    if not applies():
        STATE.update(status="not here", reason=f"{platform.system()} {platform.machine()}: MLX's own BLAS")
        return STATE
    library = _openblas()
    if library is None:
        STATE.update(status="absent", reason="ngsolve-openblas is not installed: MLX's own (reference) BLAS")
        return STATE
    STATE["after_mlx"] = "mlx.core" in sys.modules
    try:
        _handle = _open(library)
        _handle.openblas_get_config.restype = ctypes.c_char_p
        STATE["config"] = _handle.openblas_get_config().decode(errors="replace")
    except (OSError, AttributeError) as err:
        reason = " ".join(str(err).split())
        STATE.update(status="failed", library=library, reason=reason)
        print(f"ropepool: OpenBLAS not loaded, MLX keeps its own BLAS ({reason}); ROPEPOOL_BLAS=off silences this",
              file=sys.stderr)
        return STATE
    STATE.update(status="loaded", library=library, reason="loaded before MLX" if not STATE["after_mlx"]
                 else "loaded after MLX was imported: binds only if no float32 matmul ran before")
    return STATE


def num_threads() -> int | None:
    """OpenBLAS's thread count, or None when it is not loaded."""
    return _handle.openblas_get_num_threads() if _handle is not None else None


def set_num_threads(n: int) -> None:
    """Set OpenBLAS's thread count (no-op when it is not loaded)."""
    if _handle is not None:
        _handle.openblas_set_num_threads(int(n))


class _BeforeMlx:
    """A ``sys.meta_path`` finder that only watches: the first import of ``mlx`` calls :func:`load`."""

    def find_spec(self, name, path=None, target=None):
        if name == "mlx" or name.startswith("mlx."):
            load()
        return None  # the import goes on through the usual finders


def install_hook() -> None:
    """Call :func:`load` when MLX is first imported (what ``ropepool-blas.pth`` runs at start-up)."""
    if applies() and STATE["status"] == "not tried" and not any(isinstance(f, _BeforeMlx) for f in sys.meta_path):
        sys.meta_path.insert(0, _BeforeMlx())


def uninstall_hook() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _BeforeMlx)]
