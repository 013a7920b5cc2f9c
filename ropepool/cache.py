"""Private per-user directories, for what ropepool writes and later trusts: compiled kernels, model files.

A directory is used only when it is a real directory (not a link), owned by this user, and nobody
else can write it; one only others can read is narrowed to mode 0700. Anything else is refused, so
no other local user can plant a library or a model file that this user then loads.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def private_dir(path: Path, what: str, error: type[Exception] = RuntimeError) -> Path:
    """``path``, created with mode 0700 if missing, else checked; ``what`` names it in messages
    ("kernel cache", "model cache") and ``error`` is the exception raised when it is refused."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError as err:
        raise error(f"{what} {path} is unusable: {err}") from None
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise error(f"{what} {path} is not a directory (a symlink or a file): refused")
    if st.st_uid != os.geteuid():
        raise error(f"{what} {path} is owned by uid {st.st_uid}, not this user ({os.geteuid()}): refused, "
                    "what it holds could be anyone's")
    if st.st_mode & 0o022:
        raise error(f"{what} {path} can be written by others (mode {stat.S_IMODE(st.st_mode):o}): refused; "
                    "remove it or chmod 700 it")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path
