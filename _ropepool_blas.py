"""OpenBLAS under MLX's CPU back-end on Linux x86-64: loaded before MLX, in every process of the venv.

The Linux ``mlx[cpu]`` wheel links netlib's reference BLAS. libmlx looks ``cblas_sgemm`` up through
the process's global scope, so a library exporting it that is loaded with ``RTLD_GLOBAL`` before
MLX's first matmul takes over. This module loads the OpenBLAS of the ``ngsolve-openblas`` wheel
that way. That library needs ``libgfortran.so.5`` (found through its ``RPATH $ORIGIN``), which it
does not ship; MLX's wheel bundles one (``mlx_cpu.libs/libgfortran-<hash>.so.5.0.0``, which
needs ``libquadmath-<hash>`` beside it).

How it loads, so that nobody else can feed it a library:

0. The three files are looked for in the interpreter's own site-packages only (:func:`site_dirs`: the
   venv's, where the hook is installed), each checked against the ``RECORD`` of the wheel beside it
   there. Nothing on ``sys.path`` counts: its first entry is the working folder of ``python -c``,
   ``python -m`` and Jupyter kernels, where anyone may have put a library and a matching ``RECORD``.
1. Each of the three files is opened (``O_NONBLOCK``: a FIFO cannot hang it), refused unless it
   is a regular file, and its size and SHA-256 are checked against its wheel's ``RECORD`` (the
   digest once per file: a memo in ``~/.cache/ropepool`` keyed by the file's inode and ctime
   skips it later). The checked descriptors stay open until the load is done.
2. A fresh folder (mode 0700) is made in the temp dir and opened at once; it is refused unless
   it is a directory this user owns, closed to others, and empty (else another is made, twice at
   most, then the load is refused). From then on it is reached only
   through that descriptor (``/proc/self/fd/N``), so whoever renames entries of the temp dir
   cannot swap it.
3. In it, links ``libopenblas.so.0``, ``libgfortran.so.5`` and ``libquadmath-<hash>`` point at
   ``/proc/self/fd/M``: the checked files themselves, whatever their paths now name.
   ``dlopen("/proc/self/fd/N/libopenblas.so.0")`` then maps the checked OpenBLAS, and its
   ``$ORIGIN`` is the private folder. The links and the folder are removed in any case.

Installed with the package, ``ropepool-blas.pth`` runs at every start of the venv's Python: it
defines a small finder and puts it in ``sys.meta_path`` (nothing opened, nothing imported, not even
this module), and the finder imports this module and calls :func:`load` when ``mlx`` is first
imported, from whatever code; if this module cannot be imported it says nothing. ``import ropepool``
calls :func:`load` too, for a Python started without the ``.pth``.

- ``ROPEPOOL_BLAS`` set to ``off``, ``0``, ``false`` or ``no`` keeps MLX's own BLAS.
- Anything but Linux x86-64 is left alone (macOS: MLX uses Accelerate).
- No ``ngsolve-openblas`` installed: MLX's own BLAS, silently (``python -m ropepool doctor`` says so).
- A load refused or failed: MLX's own BLAS, and one line on stderr saying why (none if stderr is closed).
- Threads: OpenBLAS's own default, one per core, unless ``OPENBLAS_NUM_THREADS`` says otherwise.

Stdlib only, never imports ``ropepool`` (whose ``__init__`` imports MLX), and imports nothing at
module level that a bare ``python -c pass`` does not already have.
"""

import os
import sys

#: What :func:`load` did: ``status`` is "loaded", "off", "not here" (platform), "absent" (no wheel),
#: "failed", "loading" (in progress) or "not tried"; ``library`` the OpenBLAS file; ``reason`` one line; ``config``
#: OpenBLAS's own description; ``after_mlx`` True when MLX was imported before the load;
#: ``opened_as`` the (removed) link the loader opened it through.
STATE = {"status": "not tried", "library": None, "reason": "", "config": "", "after_mlx": False, "opened_as": None}
_handle = None

#: Values of ``ROPEPOOL_BLAS`` that keep MLX's own BLAS (any case, spaces ignored).
OFF_WORDS = ("off", "0", "false", "no")


class Refused(Exception):
    """A library file or the private folder failed a check: nothing was opened through it."""


def applies() -> bool:
    """True on Linux x86-64, the only place this loader acts."""
    return sys.platform.startswith("linux") and os.uname().machine in ("x86_64", "AMD64")


def site_dirs() -> list:
    """The interpreter's own site-packages folders (the venv's, where the hook is installed), real paths.

    Only these are searched: never ``sys.path``, whose first entry is the working folder of ``python -c``,
    ``python -m`` and every Jupyter kernel, and may be anyone's. The user site (``~/.local``) is left out."""
    import site

    try:
        found = site.getsitepackages()
    except AttributeError:  # a site module without it (an embedded interpreter)
        return []
    out = []
    for d in found:
        real = os.path.realpath(d)
        if real not in out and os.path.isdir(real):
            out.append(real)
    return out


def _package_dirs(name: str) -> list:
    """The folders named ``name`` in :func:`site_dirs`, found without importing anything."""
    return [os.path.join(d, name) for d in site_dirs() if os.path.isdir(os.path.join(d, name))]


def _files(folder: str, *prefixes: str) -> list:
    """The files of ``folder`` whose names start with one of ``prefixes`` and hold ``.so``, sorted.
    By name, never a glob pattern: the folder's path may hold ``[``, ``*`` or ``?``."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(os.path.join(folder, n) for n in names if n.startswith(prefixes) and ".so" in n)


def _openblas():
    for folder in _package_dirs("ngsolve_openblas"):
        libs = _files(folder, "libopenblas")
        if libs:
            return libs[0]
    return None


def _mlx_runtime_libs() -> list:
    """MLX's bundled libgfortran and libquadmath (``mlx_cpu.libs/``), or [] when not found."""
    for folder in _package_dirs("mlx"):  # the venv's own mlx, beside which its wheel put mlx_cpu.libs
        found = _files(
            os.path.join(os.path.dirname(os.path.abspath(folder)), "mlx_cpu.libs"), "libgfortran", "libquadmath"
        )
        if found:
            return found
    return []


def _open_regular(path: str, flags: int = 0) -> int:
    """A read-only descriptor of ``path`` if it is a regular file, else OSError. ``O_NONBLOCK``: a FIFO
    planted there answers at once (and is refused) instead of blocking ``import mlx`` for ever."""
    import stat

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | flags)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path} is not a regular file")
    return fd


def _record_entry(path: str):
    """``(size, urlsafe-base64 sha256)`` the wheel's ``RECORD`` gives for ``path``, or None when it is
    not listed there. The wheel is the ``<name>-*.dist-info`` beside ``path``'s top-level folder, where
    ``name`` is that folder's name up to its first dot (``ngsolve_openblas``, ``mlx_cpu.libs``)."""
    import csv

    folder = os.path.dirname(os.path.abspath(path))
    site, top = os.path.dirname(folder), os.path.basename(folder)
    relative = f"{top}/{os.path.basename(path)}"
    try:
        wheel = top.split(".")[0] + "-"
        infos = sorted(n for n in os.listdir(site) if n.startswith(wheel) and n.endswith(".dist-info"))
    except OSError:
        return None
    for info in infos:
        try:
            with open(_open_regular(os.path.join(site, info, "RECORD")), newline="") as f:
                for row in csv.reader(f):
                    if len(row) >= 3 and row[0] == relative and row[1].startswith("sha256=") and row[2].isdigit():
                        return int(row[2]), row[1][len("sha256=") :]
        except OSError:
            continue
    return None


def _memo_path() -> str:
    return os.path.join(os.path.expanduser("~"), ".cache", "ropepool", "blas-checked.json")


def _memo() -> dict:
    """``{path: [dev, inode, size, mtime_ns, ctime_ns, sha256]}`` of files whose digest matched, from a
    file only this user can write (else {}). Any change to a file changes its ctime, so an entry
    vouches only for the file as it was when hashed; hashing 45 MB at every ``import mlx`` is saved."""
    import json
    import stat

    try:
        fd = _open_regular(_memo_path(), os.O_NOFOLLOW)
    except OSError:
        return {}
    with open(fd, "r") as f:
        st, folder = os.fstat(fd), os.lstat(os.path.dirname(_memo_path()))
        if any(s.st_uid != os.geteuid() or s.st_mode & 0o022 for s in (st, folder)) or not stat.S_ISDIR(folder.st_mode):
            return {}
        try:
            memo = json.loads(f.read(1 << 20))  # a memo is a few hundred bytes; a huge one is not ours
        except (ValueError, RecursionError):  # not JSON, or nested too deep to read: rewritten at the next check
            return {}
    return memo if isinstance(memo, dict) else {}


def _remember(memo: dict, path: str, identity: list) -> None:
    """Add ``path``'s entry to the memo (best effort: written whole, then moved in)."""
    import json

    import stat

    folder = os.path.dirname(_memo_path())
    here = os.path.sep
    for part in folder.split(os.path.sep)[1:]:  # a link another user made on the way: not followed
        here = os.path.join(here, part)
        try:
            st = os.lstat(here)
        except OSError:
            break
        if stat.S_ISLNK(st.st_mode) and st.st_uid not in (0, os.geteuid()):
            return
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        tmp = os.path.join(folder, f".blas-checked-{os.urandom(4).hex()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with open(fd, "w") as f:
            json.dump({**{p: v for p, v in memo.items() if os.path.exists(p)}, path: identity}, f)  # gone ones dropped
        os.replace(tmp, _memo_path())
    except OSError:
        pass


def _open_checked(path: str) -> int:
    """A descriptor of ``path``, a regular file whose size and SHA-256 match its wheel's RECORD.

    Opened ``O_NONBLOCK`` (a FIFO answers at once and is refused), checked before anything maps it.
    """
    import stat

    expected = _record_entry(path)
    if expected is None:
        raise Refused(f"{path} is not listed in its wheel's RECORD, so it cannot be checked")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        raise Refused(f"{path} cannot be opened: {err.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Refused(f"{path} is not a regular file")
        size, digest = expected
        if st.st_size != size:
            raise Refused(f"{path} holds {st.st_size} bytes, its wheel's RECORD says {size}: damaged or replaced")
        identity = [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, digest]
        memo = _memo()
        if memo.get(path) == identity:  # this very file, unchanged since its digest was checked
            return fd
        import base64
        import hashlib

        sha = hashlib.sha256()
        with open(fd, "rb", closefd=False) as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                sha.update(block)
        if base64.urlsafe_b64encode(sha.digest()).rstrip(b"=").decode() != digest:
            raise Refused(f"{path} does not match the SHA-256 its wheel's RECORD gives: damaged or replaced")
        _remember(memo, path, identity)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _private_folder():
    """``(parent, name, fd)``: a fresh folder in the temp dir, opened, checked to be this user's own,
    closed to others and empty. Used only through ``fd`` from then on."""
    import stat
    import tempfile

    parent = tempfile.gettempdir()
    name = f"ropepool-blas-{os.urandom(8).hex()}"
    os.mkdir(os.path.join(parent, name), 0o700)
    try:
        fd = os.open(os.path.join(parent, name), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as err:
        raise Refused(f"the private folder {name} in {parent} was replaced before it could be opened ({err.strerror})")
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) & 0o077 or os.listdir(fd):
        os.close(fd)
        raise Refused(
            f"the private folder {name} in {parent} was replaced by someone else's; "
            "another user can rename entries there (set TMPDIR to a folder of your own)"
        )
    return parent, name, fd


def _remove(parent: str, name: str, fd: int, links) -> None:
    """Remove ``links`` from the folder ``fd``, and the folder, if ``parent/name`` is still that folder."""
    for link in links:
        try:
            os.unlink(link, dir_fd=fd)
        except OSError:
            pass
    try:
        here, mine = os.lstat(os.path.join(parent, name)), os.fstat(fd)
        if (here.st_dev, here.st_ino) == (mine.st_dev, mine.st_ino):
            os.rmdir(os.path.join(parent, name))
    except OSError:
        pass  # renamed away by someone else: it is empty, and theirs to remove
    os.close(fd)


def _open(library: str):
    """``library`` checked and opened RTLD_GLOBAL through a private folder beside MLX's libgfortran."""
    import ctypes

    wanted = {"libopenblas.so.0": library}
    for path in _mlx_runtime_libs():
        name = os.path.basename(path)
        wanted["libgfortran.so.5" if name.startswith("libgfortran") else name] = path
    fds = {}
    try:
        for link, path in wanted.items():
            fds[link] = _open_checked(path)
        for attempt in range(3):  # a folder swapped before it was opened: a new one, twice at most
            try:
                parent, name, folder = _private_folder()
                break
            except Refused:
                if attempt == 2:
                    raise
        try:
            for link, fd in fds.items():
                os.symlink(f"/proc/self/fd/{fd}", link, dir_fd=folder)
            STATE["opened_as"] = f"/proc/self/fd/{folder}/libopenblas.so.0"
            return ctypes.CDLL(STATE["opened_as"], mode=ctypes.RTLD_GLOBAL)
        finally:
            _remove(parent, name, folder, fds)
    finally:
        for fd in fds.values():
            os.close(fd)


def _say(line: str) -> None:
    """``line`` on stderr; nothing when there is no stderr (never on stdout)."""
    stream = sys.stderr
    if stream is None:
        return
    try:
        print(line, file=stream, flush=True)
    except (OSError, ValueError):
        pass


def load() -> dict:
    """Load OpenBLAS with ``RTLD_GLOBAL`` once per process, if it applies; return :data:`STATE`.

    Never raises: a refusal or failure leaves MLX's own BLAS in place and says why in one line on stderr.
    """
    global _handle
    if STATE["status"] != "not tried":  # done, or in progress (finding MLX's folder below imports nothing)
        return STATE
    STATE["status"] = "loading"
    uninstall_hook()
    setting = os.environ.get("ROPEPOOL_BLAS", "")
    if setting.strip().lower() in OFF_WORDS:
        STATE.update(status="off", reason=f"ROPEPOOL_BLAS={setting.strip()}: MLX's own BLAS")
        return STATE
    if not applies():
        STATE.update(status="not here", reason=f"{sys.platform} {os.uname().machine}: MLX's own BLAS")
        return STATE
    library = None
    try:
        library = _openblas()
        if library is None:
            STATE.update(status="absent", reason="ngsolve-openblas is not installed: MLX's own (reference) BLAS")
            return STATE
        STATE["after_mlx"] = "mlx.core" in sys.modules
        _handle = _open(library)
    except Exception as err:  # Refused, OSError, anything: MLX's own BLAS, never a crash in `import mlx`
        reason = " ".join(str(err).split()) or type(err).__name__
        STATE.update(status="failed", library=library, reason=reason)
        _say(f"ropepool: OpenBLAS not loaded, MLX keeps its own BLAS ({reason}); ROPEPOOL_BLAS=off silences this")
        return STATE
    STATE.update(
        status="loaded",
        library=library,
        reason="loaded before MLX"
        if not STATE["after_mlx"]
        else "loaded after MLX was imported: binds only if no float32 matmul ran before",
    )
    try:
        import ctypes

        _handle.openblas_get_config.restype = ctypes.c_char_p
        STATE["config"] = _handle.openblas_get_config().decode(errors="replace")
    except AttributeError:
        STATE["config"] = "no openblas_get_config in it"
    return STATE


def num_threads():
    """OpenBLAS's thread count, or None when it is not loaded (or does not say)."""
    try:
        return _handle.openblas_get_num_threads() if _handle is not None else None
    except AttributeError:
        return None


def set_num_threads(n: int) -> None:
    """Set OpenBLAS's thread count (no-op when it is not loaded)."""
    if _handle is not None and hasattr(_handle, "openblas_set_num_threads"):
        _handle.openblas_set_num_threads(int(n))


def install_hook() -> None:
    """Put ``ropepool-blas.pth``'s import watcher in ``sys.meta_path`` (once), by running that file,
    which lies beside this module. What an older ``.pth`` (``_ropepool_blas.install_hook()``) calls,
    and a way to get the hook in a Python started without it. Never raises."""
    try:
        if not any(type(f).__name__ == "_RopepoolBlasHook" for f in sys.meta_path):
            with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ropepool-blas.pth")) as f:
                exec(f.read(), {})
    except Exception:
        pass


def uninstall_hook() -> None:
    """Remove the import watcher ``ropepool-blas.pth`` put in ``sys.meta_path``, if it is there."""
    sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "_RopepoolBlasHook"]
