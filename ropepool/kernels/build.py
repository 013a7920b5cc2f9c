"""Compile C++ with the system compiler into a shared library: once per source hash, cached on disk.

Used by the CPU emulator (:mod:`ropepool.kernels.emulator`) and the host build of the kernel
(:mod:`ropepool.kernels.host`). Libraries live in a cache directory
(``$ROPEPOOL_KERNEL_CACHE``, else ``~/.cache/ropepool``, else the system temp dir), never in
the repository. Their file name carries a hash of everything that shapes the build (compiler,
flags, source text, the headers it includes, and for ``-march=native`` builds the CPU's
feature flags), so a changed source never loads a stale library. Processes that start at once
(pytest workers) build each library once: the build holds a file lock, and the finished
library appears in the cache atomically.

The cache holds code that gets loaded, so it is guarded: the directory must be owned by this
user and closed to everyone else (created 0700; one that others can write is refused), lock
files are opened without following symlinks, and each library is written with a SHA-256
digest of its bytes beside it (``.sha256``, moved in after the library). A library is loaded
only when its digest matches; otherwise (truncated, foreign, half-written) it is rebuilt. Any
failure to load raises ``RuntimeError``, which :func:`unavailable` turns into the reason
``doctor`` shows, while ``backend="auto"`` falls back to ``mlx``.

The cache is bounded: after a build, the least recently used libraries beyond
:data:`MAX_LIBRARIES` are removed, and so are build folders that a process killed mid-build left
(``tmp*``, untouched for twice the longest a compiler may run). A compiler that runs past ``$ROPEPOOL_BUILD_TIMEOUT`` seconds
(default :data:`BUILD_TIMEOUT`) is killed, and a failed build's error holds the compiler's whole
message.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import math
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

from ..cache import private_dir


#: Libraries the cache keeps (each a few hundred KiB); the least recently used beyond are removed.
MAX_LIBRARIES = 64

#: Seconds a compiler may run before it is killed (``$ROPEPOOL_BUILD_TIMEOUT`` overrides).
BUILD_TIMEOUT = 300.0


class CompileError(RuntimeError):
    """The compiler ran and failed (as opposed to a library that was built but cannot be loaded)."""


def compiler() -> str | None:
    """The C++ compiler to use: ``$CXX`` if set, else g++ or c++ on PATH."""
    cxx = os.environ.get("CXX")
    if cxx:
        return shutil.which(cxx) or None
    return shutil.which("g++") or shutil.which("c++")


def cache_dir() -> Path:
    """The kernel cache: ``$ROPEPOOL_KERNEL_CACHE``, else ``~/.cache/ropepool``, else a per-user
    folder in the system temp dir; always one this user owns and no one else can enter.

    Raises
    ------
    RuntimeError
        The folder cannot be made private to this user (another user owns it, it is a symlink,
        others can write it): nothing in it is loaded.
    """
    env = os.environ.get("ROPEPOOL_KERNEL_CACHE")
    if env:
        return private_dir(Path(env), "kernel cache")
    try:
        return private_dir(Path.home() / ".cache" / "ropepool", "kernel cache")
    except (RuntimeError, KeyError):  # no usable home (KeyError: no HOME and no passwd entry)
        return private_dir(Path(tempfile.gettempdir()) / f"ropepool-kernels-{os.geteuid()}", "kernel cache")


def _cpu_flags() -> str:
    """The CPU's feature flags (Linux), so a ``-march=native`` build is never reused on another CPU."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((line for line in f if line.startswith(("flags", "Features"))), "")
    except OSError:
        return ""


def shared_library(
    stem: str, text: str, flags: Sequence[str], depends: Sequence[Path] = (), announce: str | None = None
) -> ctypes.CDLL:
    """Compile ``text`` (one C++ translation unit) with ``flags`` and load it; cached.

    Parameters
    ----------
    stem : file name prefix in the cache, e.g. "ropepool_host"
    text : the C++ source
    flags : compiler flags besides ``-shared -fPIC -o``
    depends : files the source includes; their contents go into the hash
    announce : printed to stdout before a build that has to run (it takes seconds), and the
        time it took after; nothing when the library is in the cache

    Raises
    ------
    RuntimeError
        No compiler, the compiler failed or ran past its time (:class:`CompileError`, with its
        whole message), the cache is not private, or the library does not load.
    """
    cxx = compiler()
    if cxx is None:
        raise RuntimeError("no C++ compiler found (set CXX, or install g++)")
    key = [cxx, *_key_flags(flags, depends), text, *(p.read_text() for p in depends)]
    if "-march=native" in flags:
        key.append(_cpu_flags())
    digest = hashlib.sha256("\0".join(key).encode()).hexdigest()[:16]
    out = cache_dir() / f"{stem}_{digest}.so"
    if not verified(out):
        try:  # never through a symlink: it could truncate or lock any file this user can write
            fd = os.open(out.with_suffix(".lock"), os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as err:
            raise RuntimeError(f"cannot open the lock file {out.with_suffix('.lock')}: {err}") from None
        with os.fdopen(fd, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one build per library, whoever asks first
            if not verified(out):  # missing, or not the bytes we built: (re)build
                _compile(cxx, text, flags, out, announce)
                _prune(out.parent, MAX_LIBRARIES)
    try:
        os.utime(digest_path(out))  # its last use, for _prune
    except OSError:
        pass
    try:
        return ctypes.CDLL(str(out))
    except OSError as err:
        raise RuntimeError(f"loading {out.name} failed: {err}") from None


def _key_flags(flags: Sequence[str], depends: Sequence[Path]) -> list[str]:
    """``flags`` as the cache key reads them: an ``-I`` folder holding one of ``depends`` stands for what
    it holds there (their text is in the key), not for where it is, so a checkout elsewhere (another
    clone, a worktree) loads the library this one built."""
    homes = {str(p.parent) for p in depends}
    return ["-I<depends>" if f.startswith("-I") and f[2:] in homes else f for f in flags]


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def digest_path(library: Path) -> Path:
    return library.with_suffix(".sha256")


def verified(library: Path) -> bool:
    """Whether ``library`` is a regular file holding the bytes its ``.sha256`` says were built.
    Never loads it."""
    try:
        if not all(stat.S_ISREG(os.lstat(p).st_mode) for p in (library, digest_path(library))):
            return False
        return digest_path(library).read_text().strip() == _sha256(library)
    except OSError:
        return False


def unavailable(load: Callable[[], object], what: str) -> str | None:
    """None if ``load()`` builds and loads its library here; otherwise one line saying why not.

    ``what`` names what is missing then, e.g. "the CPU emulator cannot build".
    """
    if compiler() is None:
        return f"no C++ compiler on this machine (set CXX or install g++): {what}"
    try:
        load()
    except Exception as err:  # any failure to build or load means "not here", never a crash
        first = (str(err).splitlines() or [""])[0]
        return f"{what}: {first}" if isinstance(err, RuntimeError) else f"{what}: {type(err).__name__}: {first}"
    return None


def _prune(folder: Path, keep: int) -> None:
    """Remove the least recently used libraries of ``folder`` (by their digest's time) beyond ``keep``."""

    def last_use(library: Path) -> float:
        try:
            return os.stat(digest_path(library)).st_mtime
        except OSError:
            return 0.0

    _sweep_builds(folder, 2 * max(build_timeout(), BUILD_TIMEOUT))
    libraries = sorted(folder.glob("*.so"), key=last_use, reverse=True)
    for old in libraries[keep:]:
        for path in (digest_path(old), old, old.with_suffix(".lock")):  # the digest first: never one vouching alone
            try:
                path.unlink()
            except OSError:
                pass


def _sweep_builds(folder: Path, older_than: float) -> None:
    """Remove the build folders (``tmp*``) of ``folder`` untouched for ``older_than`` seconds: a
    process killed while compiling (a restarted Jupyter kernel, Ctrl-C twice) leaves its folder."""
    now = time.time()
    for tmp in folder.glob("tmp*"):
        try:
            st = os.lstat(tmp)
            if stat.S_ISDIR(st.st_mode) and now - st.st_mtime > older_than:  # never through a symlink
                shutil.rmtree(tmp)
        except OSError:
            pass


def build_timeout() -> float:
    """``$ROPEPOOL_BUILD_TIMEOUT`` in seconds if it is a finite number > 0 (at most a day), else
    :data:`BUILD_TIMEOUT`."""
    try:
        value = float(os.environ.get("ROPEPOOL_BUILD_TIMEOUT", ""))
    except ValueError:
        return BUILD_TIMEOUT
    return min(value, 86400.0) if math.isfinite(value) and value > 0 else BUILD_TIMEOUT


def _run_compiler(cmd: list[str], name: str) -> subprocess.CompletedProcess:
    """Run ``cmd``; past :func:`build_timeout` kill it with every process it started."""
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True
    )  # its own process group: cc1plus and as die with it
    try:
        stdout, stderr = proc.communicate(timeout=build_timeout())
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise CompileError(
            f"compiling {name} took over {build_timeout():g} s and was stopped "
            "(set ROPEPOOL_BUILD_TIMEOUT for a slower machine)"
        ) from None
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def _compile(cxx: str, text: str, flags: Sequence[str], out: Path, announce: str | None) -> None:
    if announce:
        print(f"{announce} (once; cached in {out.parent}) ...", flush=True)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:  # same file system as out
        src = Path(tmp) / f"{out.stem}.cpp"
        src.write_text(text)
        built = Path(tmp) / out.name
        cmd = [cxx, *flags, "-shared", "-fPIC", "-o", str(built), str(src)]
        proc = _run_compiler(cmd, out.stem)
        if proc.returncode != 0:
            raise CompileError(
                f"compiling {out.stem} failed (exit status {proc.returncode}):\n{proc.stderr or proc.stdout}"
            )
        digest = Path(tmp) / digest_path(out).name
        digest.write_text(_sha256(built) + "\n")
        os.replace(built, out)  # atomic: a concurrent process sees no file or a whole one
        os.replace(digest, digest_path(out))  # after the library: a digest never vouches for an older file
    if announce:
        print(f"... built in {time.perf_counter() - start:.1f} s", flush=True)
