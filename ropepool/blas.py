"""Which BLAS MLX's float32 matmul runs on, and how fast: the evidence ``doctor`` and the notebooks show.

The loading itself happens before MLX is imported, in the start-up hook ``_ropepool_blas`` (a
top-level module, so that it runs without importing this package or MLX). Here:

- :func:`sgemm_library` reads libmlx's own GOT entry for ``cblas_sgemm``: the library its calls
  are bound to, after one float32 matmul has run (binding is lazy);
- :func:`matmul_gflops` races MLX's and NumPy's float32 ``[n, n] @ [n, n]``, call by call;
- :func:`blas_line` says both in one line.
"""

from __future__ import annotations

import ctypes
import os
import struct
import time

import _ropepool_blas
import mlx.core as mx
import numpy as np

_SHT_RELA = 4
_RTLD_DI_LINKMAP = 2


def _got_offset(path: str, symbol: str) -> int | None:
    """The address (relative to the load base) of ``symbol``'s GOT slot in the ELF64 file ``path``."""
    with open(path, "rb") as f:
        header = f.read(64)
        if header[:4] != b"\x7fELF" or header[4] != 2:  # ELF, 64-bit
            return None
        (shoff,) = struct.unpack_from("<Q", header, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", header, 0x3A)
        f.seek(shoff)
        raw = f.read(shentsize * shnum)
        # (type, offset, size, link, entsize) of every section header
        sections = [struct.unpack_from("<4xI16xQQI12xQ", raw, i * shentsize) for i in range(shnum)]

        def read(section):
            f.seek(section[1])
            return f.read(section[2])

        for kind, _, size, link, entsize in sections:
            if kind != _SHT_RELA or not entsize:
                continue
            symtab = sections[link]
            syms, names = read(symtab), read(sections[symtab[3]])
            relocs = read((kind, _, size, link, entsize))
            for i in range(0, len(relocs), entsize):
                r_offset, r_info = struct.unpack_from("<QQ", relocs, i)
                (name_at,) = struct.unpack_from("<I", syms, (r_info >> 32) * 24)
                if names[name_at : names.index(b"\0", name_at)] == symbol.encode():
                    return r_offset
    return None


def sgemm_library() -> str | None:
    """The file libmlx's ``cblas_sgemm`` calls go to, read from its GOT; None if it cannot tell.

    Before the first float32 matmul the slot still points into libmlx's own PLT (lazy binding):
    :func:`blas_line` runs one first.
    """
    libmlx = os.path.join(os.path.dirname(mx.__file__), "lib", "libmlx.so")
    if not os.path.exists(libmlx):
        return None
    try:
        offset = _got_offset(libmlx, "cblas_sgemm")
        libdl = ctypes.CDLL(None)
        handle = ctypes.CDLL(libmlx, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)._handle
        link_map = ctypes.c_void_p()
        if offset is None or libdl.dlinfo(ctypes.c_void_p(handle), _RTLD_DI_LINKMAP, ctypes.byref(link_map)) != 0:
            return None
        base = ctypes.c_size_t.from_address(link_map.value).value  # link_map.l_addr, its first field
        target = ctypes.c_void_p.from_address(base + offset).value

        class DlInfo(ctypes.Structure):
            _fields_ = [
                ("dli_fname", ctypes.c_char_p),
                ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p),
                ("dli_saddr", ctypes.c_void_p),
            ]

        info = DlInfo()
        if not libdl.dladdr(ctypes.c_void_p(target), ctypes.byref(info)) or not info.dli_fname:
            return None
        return os.fsdecode(info.dli_fname)
    except (OSError, AttributeError, ValueError, struct.error):
        return None


def matmul_gflops(n: int = 1024, repeats: int = 5) -> tuple[float, float]:
    """(MLX, NumPy) float32 ``[n, n] @ [n, n]`` in GF/s: medians, the two interleaved call by call."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), np.float32), rng.standard_normal((n, n), np.float32)
    ma, mb = mx.array(a), mx.array(b)
    mx.eval(ma @ mb)  # warm-up (and binds cblas_sgemm)
    a @ b
    times = {"mlx": [], "numpy": []}
    for _ in range(repeats):
        t0 = time.perf_counter()
        mx.eval(ma @ mb)
        t1 = time.perf_counter()
        a @ b
        t2 = time.perf_counter()
        times["mlx"].append(t1 - t0)
        times["numpy"].append(t2 - t1)
    flop = 2 * n**3
    return tuple(flop / float(np.median(times[k])) / 1e9 for k in ("mlx", "numpy"))


def describe() -> str:
    """What the start-up hook did, and which library ``cblas_sgemm`` binds to in libmlx."""
    state = _ropepool_blas.STATE
    bound = sgemm_library()
    if bound and bound == state["opened_as"]:
        bound = state["library"]  # the link it was opened through is gone; it pointed there
    where = f"cblas_sgemm -> {os.path.basename(bound)}" if bound else "cblas_sgemm binding unknown"
    if state["status"] == "loaded":
        threads = _ropepool_blas.num_threads()
        return f"{where} ({state['config']}, {threads} threads; {state['reason']})"
    return f"{where} ({state['reason'] or state['status']})"


def blas_line(n: int = 1024, repeats: int = 3) -> str:
    """One line: the BLAS under MLX's float32 matmul and its GF/s beside NumPy's, measured now."""
    mlx_gf, np_gf = matmul_gflops(n, repeats)  # first, so that cblas_sgemm is bound when read
    return (
        f"BLAS under MLX: {describe()}; float32 {n}^3 matmul {mlx_gf:.1f} GF/s, "
        f"NumPy {np_gf:.1f} GF/s ({mlx_gf / np_gf:.2f}x)"
    )
