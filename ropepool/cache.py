"""Private per-user directories, for what ropepool writes and later trusts: compiled kernels, model files.

A directory is used only when nobody else can change what it holds, the way ssh's StrictModes
checks a home directory: no symbolic link on the way to it was made by another user, the folder itself is a real directory (not a link) owned by this user
and closed to everyone else (one only others can read is narrowed to mode 0700), and every
folder above it, links resolved, is owned by this user or root and writable by no one else,
except a sticky folder such as ``/tmp``, where nobody can rename what another user made.
Otherwise another user could swap the folder, or one above it, between the check and the load.
Anything else is refused with the reason, and the path returned has its links resolved.

A file written for a user (a page, a kept part, a benchmark's results) follows the same rules for its
folder (:func:`writable_file`: no foreign link on the way, no folder others can swap entries of), and
the file itself, if there, must be a regular file of this user's: never a symbolic link, a FIFO, a
device or another user's file. :func:`write_file` checks again, writes a temporary file in the same
folder and moves it into place with ``os.replace``, which never writes through what is at the name.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


class UnsafeFile(PermissionError):
    """A file ropepool was asked to write is refused; ``str(err)`` is one line saying why."""


def private_dir(path: Path, what: str, error: type[Exception] = RuntimeError) -> Path:
    """``path``, created with mode 0700 if missing, else checked; ``what`` names it in messages
    ("kernel cache", "model cache") and ``error`` is the exception raised when it is refused.

    Returns the folder's real path (no links in it), which callers use from then on.
    """
    path = Path(os.path.abspath(path))
    link = foreign_link(path)
    if link is not None:
        raise error(
            f"{what} {path} is refused: {link} on the way to it is a symbolic link another user made "
            f"(uid {os.lstat(link).st_uid}), which could lead anywhere; use a folder under your home"
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError as err:
        raise error(f"{what} {path} is unusable: {err}") from None
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise error(f"{what} {path} is not a directory (a symlink or a file): refused")
    if st.st_uid != os.geteuid():
        raise error(
            f"{what} {path} is owned by uid {st.st_uid}, not this user ({os.geteuid()}): refused, "
            "what it holds could be anyone's"
        )
    if st.st_mode & 0o022:
        raise error(
            f"{what} {path} can be written by others (mode {stat.S_IMODE(st.st_mode):o}): refused; "
            "remove it or chmod 700 it"
        )
    real = Path(os.path.realpath(path))
    for folder in real.parents:
        reason = _unsafe_ancestor(folder)
        if reason:
            raise error(
                f"{what} {path} is refused: {folder} above it {reason}, so another user could swap "
                "the cache for her own; use a folder under your home"
            )
    if st.st_mode & 0o077:
        os.chmod(real, 0o700)
    return real


def foreign_link(path: Path) -> Path | None:
    """The first symbolic link on the way to ``path`` made by someone else than this user or root (None:
    none). Such a link (``~/.cache`` of a user whose HOME root runs with) can point root's writes anywhere."""
    here = Path(path.anchor)
    for part in path.parts[1:]:
        here = here / part
        try:
            st = os.lstat(here)
        except OSError:
            return None  # not there yet: made by us below
        if stat.S_ISLNK(st.st_mode) and st.st_uid not in (0, os.geteuid()):
            return here
    return None


def _unsafe_ancestor(folder: Path) -> str | None:
    """Why another user could rename entries of ``folder`` (None: nobody but this user and root can)."""
    try:
        st = os.stat(folder)
    except OSError as err:
        return f"cannot be checked ({err})"
    if st.st_uid not in (0, os.geteuid()):
        return f"is owned by uid {st.st_uid}"
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        return f"can be written by others (mode {stat.S_IMODE(st.st_mode):o}, not sticky)"
    return None


def writable_file(path: Path | str, what: str) -> Path:
    """Where ``path`` can be written safely (its folder's links resolved), checked without opening it.

    ``what`` names the file in messages ("--out", "kept part 3").

    Raises
    ------
    UnsafeFile
        The folder is missing, not writable, reached through another user's link or swappable by
        others (:func:`private_dir`'s rules for the folders above a cache), or the file there is a
        symbolic link, not a regular file (a FIFO, a device, a folder) or another user's.
    """
    path = Path(os.path.abspath(path))
    link = foreign_link(path.parent)
    if link is not None:
        raise UnsafeFile(f"{what} {path}: {link} on the way is a symbolic link another user made: refused")
    folder = Path(os.path.realpath(path.parent))
    if not folder.is_dir():
        raise UnsafeFile(f"{what} {path}: {path.parent} is not an existing folder")
    for above in (folder, *folder.parents):
        reason = _unsafe_ancestor(above)
        if reason:
            raise UnsafeFile(
                f"{what} {path}: the folder {above} {reason}, so another user could swap the file: refused"
            )
    target = folder / path.name
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        st = None
    except OSError as err:
        raise UnsafeFile(f"{what} {path}: cannot be checked ({err.strerror})") from None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise UnsafeFile(f"{what} {path} is a symbolic link: never written through; remove it or name a file")
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile(f"{what} {path} is not a regular file (a folder, a FIFO, a device): refused")
        if st.st_uid != os.geteuid():
            raise UnsafeFile(f"{what} {path} belongs to uid {st.st_uid}, not this user: refused")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UnsafeFile(f"{what} {path}: the folder {folder} is not writable by this user")
    return target


def write_file(path: Path | str, data: bytes | str, what: str) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` whole or not at all, as :func:`writable_file` allows;
    return the path written. A file replaced keeps its mode; a new one gets 0666 less the umask.

    Raises :class:`UnsafeFile` (what is at ``path`` is refused, checked again just before the move),
    or OSError (the disk is full, say); the temporary file is removed either way."""
    target = writable_file(path, what)
    try:
        mode = stat.S_IMODE(os.lstat(target).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            os.fchmod(f.fileno(), mode)
        writable_file(target, what)  # a link or FIFO planted meanwhile is refused, not replaced
        os.replace(tmp, target)  # replaces the name: never writes through what is there
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    return target


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
