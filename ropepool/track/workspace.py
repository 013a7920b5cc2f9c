"""The learner's parts carried from notebook to notebook: saved where they pass, loaded where they serve.

Notebooks 12 and 13 save each part that passes its checker (``track.check(n, part, keep=True)``) as a
small Python file; notebook 14 loads parts 1-3 back (``track.kept(n)``) to serve SmolLM2 through all
of them, with no copy and paste. A part's file holds the whole notebook cell it was written in (its
helpers too), less the ``track.use`` line, after the imports a part usually needs. The folder is
``$ROPEPOOL_TRACK_DIR``, else ``~/.cache/ropepool/track`` (private to the user, like the model cache).
"""

from __future__ import annotations

import inspect
import linecache
import os
import re
from pathlib import Path

from ..cache import private_dir, write_file

#: What a part's file starts with: the imports the notebooks' parts use.
HEADER = '''"""Your part {n} ({name}), saved by its notebook's check cell: notebook 14 loads it."""

import math
from collections import Counter, defaultdict, deque

import numpy as np

'''


class WorkspaceRefused(PermissionError):
    """The track's folder is not private to this user (a link, another user's, open to others)."""


def directory() -> Path:
    """The folder the parts are saved in (created, private to the user).

    Raises :class:`WorkspaceRefused` (an OSError) when :func:`ropepool.cache.private_dir` refuses it."""
    default = Path.home() / ".cache" / "ropepool" / "track"
    return private_dir(Path(os.environ.get("ROPEPOOL_TRACK_DIR", default)), "track workspace", WorkspaceRefused)


def _first_code(part):
    """A code object of ``part`` (a function, or a class's first method or property)."""
    if inspect.isfunction(part):
        return part.__code__
    for value in vars(part).values():
        fn = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
        if inspect.isfunction(fn):
            return fn.__code__
    return None


def source(part) -> str:
    """The source of the cell (or file) ``part`` was defined in, less lines that hand it to ``track.use``.

    Raises OSError when the source cannot be found (a part built with ``type(...)``, say)."""
    code = _first_code(part)
    lines = linecache.getlines(code.co_filename) if code is not None else []
    if not lines and code is not None:
        lines = inspect.getsourcelines(code)[0]
    if not lines:
        raise OSError(f"the source of {getattr(part, '__name__', part)!r} cannot be found")
    keep = [line for line in lines if not re.match(r"\s*\w+\s*=\s*track\.use\(", line)]
    return "".join(keep)


def _path(n: int) -> Path:
    return directory() / f"part{n}.py"


def save(n: int, part) -> Path:
    """Write part ``n``'s source to its file (:func:`ropepool.cache.write_file`: never through a link);
    return the file's path. Raises OSError when the folder or the file there is refused."""
    name = getattr(part, "__name__", "part")
    text = HEADER.format(n=n, name=name) + source(part) + f"\n\nPART = {name}\n"
    return write_file(_path(n), text, f"kept part {n}")


def load(n: int) -> tuple[object | None, str]:
    """``(the part saved for n, where it came from)``, or ``(None, why not)``; never raises."""
    try:
        path = _path(n)
    except OSError as e:
        return None, f"the track workspace is unusable ({e})"
    if not path.exists():
        return None, f"no part {n} saved in {path.parent}"
    namespace: dict = {"__name__": f"ropepool_track_part{n}"}
    try:
        exec(compile(path.read_text(), str(path), "exec"), namespace)  # the learner's own code, saved by them
        return namespace["PART"], str(path)
    except Exception as e:  # a file that no longer runs: said, and the caller falls back
        return None, f"{path} does not load ({type(e).__name__}: {e})"
