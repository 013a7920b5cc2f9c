"""Compile C++ with the system compiler into a shared library: once per source hash, cached on disk.

Used by the CPU emulator (:mod:`ropepool.kernels.emulator`) and the host build of the kernel
(:mod:`ropepool.kernels.host`). Libraries live in a cache directory
(``$ROPEPOOL_KERNEL_CACHE``, else ``~/.cache/ropepool``, else the system temp dir), never in
the repository. Their file name carries a hash of everything that shapes the build (compiler,
flags, source text, the headers it includes, and for ``-march=native`` builds the CPU's
feature flags), so a changed source never loads a stale library. Processes that start at once
(pytest workers) build each library once: the build holds a file lock, and the finished
library appears in the cache atomically.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence


def compiler() -> str | None:
    """The C++ compiler to use: ``$CXX`` if set, else g++ or c++ on PATH."""
    cxx = os.environ.get("CXX")
    if cxx:
        return shutil.which(cxx) or None
    return shutil.which("g++") or shutil.which("c++")


def cache_dir() -> Path:
    env = os.environ.get("ROPEPOOL_KERNEL_CACHE")
    base = Path(env) if env else Path.home() / ".cache" / "ropepool"
    try:
        base.mkdir(parents=True, exist_ok=True)
        return base
    except OSError:
        path = Path(tempfile.gettempdir()) / "ropepool-kernels"
        path.mkdir(parents=True, exist_ok=True)
        return path


def _cpu_flags() -> str:
    """The CPU's feature flags (Linux), so a ``-march=native`` build is never reused on another CPU."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((line for line in f if line.startswith(("flags", "Features"))), "")
    except OSError:
        return ""


def shared_library(stem: str, text: str, flags: Sequence[str], depends: Sequence[Path] = (),
                   announce: str | None = None) -> ctypes.CDLL:
    """Compile ``text`` (one C++ translation unit) with ``flags`` and load it; cached.

    Parameters
    ----------
    stem : file name prefix in the cache, e.g. "ropepool_host"
    text : the C++ source
    flags : compiler flags besides ``-shared -fPIC -o``
    depends : files the source includes; their contents go into the hash
    announce : printed to stderr before a build that has to run (it takes seconds)

    Raises
    ------
    RuntimeError
        No compiler, or the compiler failed (its last lines included).
    """
    cxx = compiler()
    if cxx is None:
        raise RuntimeError("no C++ compiler found (set CXX, or install g++)")
    key = [cxx, *flags, text, *(p.read_text() for p in depends)]
    if "-march=native" in flags:
        key.append(_cpu_flags())
    digest = hashlib.sha256("\0".join(key).encode()).hexdigest()[:16]
    out = cache_dir() / f"{stem}_{digest}.so"
    if not out.exists():
        with open(out.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one build per library, whoever asks first
            if not out.exists():
                _compile(cxx, text, flags, out, announce)
    return ctypes.CDLL(str(out))


def unavailable(load: Callable[[], object], what: str) -> str | None:
    """None if ``load()`` builds and loads its library here; otherwise one line saying why not.

    ``what`` names what is missing then, e.g. "the CPU emulator cannot build".
    """
    if compiler() is None:
        return f"no C++ compiler on this machine (set CXX or install g++): {what}"
    try:
        load()
    except (RuntimeError, OSError) as err:
        return f"{what}: {str(err).splitlines()[0]}"
    return None


def _compile(cxx: str, text: str, flags: Sequence[str], out: Path, announce: str | None) -> None:
    if announce:
        print(f"{announce} (once; cached in {out.parent}) ...", file=sys.stderr, flush=True)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:  # same file system as out
        src = Path(tmp) / f"{out.stem}.cpp"
        src.write_text(text)
        built = Path(tmp) / out.name
        cmd = [cxx, *flags, "-shared", "-fPIC", "-o", str(built), str(src)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"compiling {out.stem} failed:\n{proc.stderr[-4000:]}")
        os.replace(built, out)  # atomic: a concurrent process sees no file or a whole one
    if announce:
        print(f"... built in {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
