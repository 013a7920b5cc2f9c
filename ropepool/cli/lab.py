"""``python -m ropepool lab``: JupyterLab on the learner's copy of the suite, on loopback, behind a token.

The lab never opens the tracked ``notebooks/``: it opens a working copy, ``workspace/`` at the
repository root (git-ignored; ``ROPEPOOL_WORKSPACE`` moves it). The copy sits next to the repo,
where a learner finds their work again, one per clone, at the same depth as ``notebooks/``. It is
made on the first start and kept: a learner's edits are never overwritten, and a notebook added to
the repo later is copied in on the next start. ``--reset NAME`` puts one notebook back to the
original (the learner's version is kept under ``workspace/.reset/``, never over an older one).
The lab writes only files it creates itself (``O_EXCL | O_NOFOLLOW``): a symlink in the workspace,
dangling or not, is never written through, and a ``.reset`` that is not a real folder is refused.

``make lab`` and the end-to-end test both start the server through :func:`lab_command` and
:func:`lab_env`, so what the test checks is what learners run. Authentication is never turned
off: the token is ``$JUPYTER_TOKEN`` when set (a host who wants a fixed one exports it), else a
fresh random one, and is printed in the URL (Jupyter masks a token it was given, so we print the
URL ourselves) once the server answers (:func:`serve` polls its ``/api``): a first visit is never
refused. It reaches the server through its environment, never a command line, which every
local user can read in the process list: ``lab`` has no ``--token`` option for that reason.
A port already in use (another Jupyter, say) moves the lab to the next free one, and the URL printed
is that port's: never a URL that reaches a server that is not this one. The first start opens with
the side bars closed (:data:`FIRST_LAYOUT`); the learner opens the file browser with Ctrl+B.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import signal
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # ropepool/cli/lab.py -> the repository
NOTEBOOKS = REPO / "notebooks"
#: What the working copy holds: the notebooks and the suite's own pages.
COPIED = ("*.ipynb", "*.md")


def workspace_dir() -> Path:
    """The learner's copy: ``$ROPEPOOL_WORKSPACE``, else ``workspace/`` at the repository root."""
    return Path(os.environ.get("ROPEPOOL_WORKSPACE") or REPO / "workspace").resolve()


def _originals(source: Path) -> list[Path]:
    return sorted(p for pattern in COPIED for p in source.glob(pattern))


def sync_workspace(workspace: Path | None = None, source: Path = NOTEBOOKS) -> list[str]:
    """Copy into ``workspace`` each file of ``source`` it lacks; never touch one it has. Also (re)writes
    the lab's settings overrides there (:func:`install_lab_settings`) and, on the first start, its layout
    (:func:`install_lab_layout`).

    Returns the names copied (all of them on the first start, then only new notebooks).
    """
    workspace = workspace or workspace_dir()
    workspace.mkdir(parents=True, exist_ok=True)
    install_lab_settings(workspace)
    install_lab_layout(workspace)
    copied = []
    for original in _originals(source):
        target = workspace / original.name
        if not os.path.lexists(target):  # the learner's file, or a link of any kind: left alone
            _create(target, original)
            copied.append(original.name)
    return copied


def _create(target: Path, original: Path) -> None:
    """``target`` made anew with ``original``'s bytes and times: never over an existing file or link."""
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(original.read_bytes())
    shutil.copystat(original, target)


def _real_folder(folder: Path) -> Path:
    """``folder``, made if missing; refused if it is a link or not a folder."""
    try:
        os.mkdir(folder, 0o755)
    except FileExistsError:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            raise ValueError(
                f"{folder} is a symlink or a file, not a folder: the lab does not write through it; move it away"
            ) from None
    return folder


def _unused(folder: Path, stem: str) -> Path:
    """A name in ``folder`` for a kept copy, ``<stem>-<time>.ipynb``, with ``-2``, ``-3``... if taken."""
    base = f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    n = 1
    while os.path.lexists(kept := folder / f"{base}{f'-{n}' if n > 1 else ''}.ipynb"):
        n += 1
    return kept


def find_notebook(name: str, source: Path = NOTEBOOKS) -> Path:
    """The original notebook ``name`` names: ``03_rotation``, ``03_rotation.ipynb`` or a unique prefix (``03``)."""
    stem = name[: -len(".ipynb")] if name.endswith(".ipynb") else name
    notebooks = sorted(source.glob("*.ipynb"))
    exact = [p for p in notebooks if p.stem == stem]
    matches = exact or [p for p in notebooks if p.stem.startswith(stem)]
    if len(matches) != 1:
        how = "matches several" if matches else "matches none"
        raise ValueError(f"--reset {name!r} {how} of the suite's notebooks: {', '.join(p.stem for p in notebooks)}")
    return matches[0]


def reset_notebook(name: str, workspace: Path | None = None, source: Path = NOTEBOOKS) -> Path | None:
    """Put the learner's copy of one notebook back to the original.

    Returns where the learner's version was kept (``workspace/.reset/<stem>-<time>.ipynb``, or
    ``-2``, ``-3``... after it where that is taken), or None if there was no copy to keep.

    Raises
    ------
    ValueError
        ``name`` names no notebook or several; the learner's copy or ``.reset`` is a symlink.
    """
    workspace = workspace or workspace_dir()
    original = find_notebook(name, source)
    target = workspace / original.name
    workspace.mkdir(parents=True, exist_ok=True)
    kept = None
    if os.path.lexists(target):
        if not stat.S_ISREG(os.lstat(target).st_mode):
            raise ValueError(
                f"{target} is a symlink or not a file: the lab does not write through it; "
                "move it away, then reset again"
            )
        kept = _unused(_real_folder(workspace / ".reset"), original.stem)
        os.rename(target, kept)  # a rename moves the entry, never what a link points to
    _create(target, original)
    return kept


#: Defaults the lab overrides (JupyterLab's ``overrides.json``): no "receive Jupyter news?" pop-up over
#: the first projector screen, and no request to the internet for news or updates.
LAB_OVERRIDES = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}}


def lab_settings_dir(root: Path) -> Path:
    """The server's application settings folder: ``root/.lab-settings`` (hidden in the file browser)."""
    return Path(root) / ".lab-settings"


def install_lab_settings(root: Path) -> Path:
    """Write :data:`LAB_OVERRIDES` as ``overrides.json`` into :func:`lab_settings_dir`; return that folder.

    The file is written new (``mkstemp``) and moved over the old one: a link there is replaced, never
    written through; a folder that is a link is refused (ValueError)."""
    folder = _real_folder(lab_settings_dir(root))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".overrides.", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(LAB_OVERRIDES, indent=1) + "\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, folder / "overrides.json")
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    return folder


def lab_workspaces_dir(root: Path) -> Path:
    """The server's store of layouts (JupyterLab's "workspaces"): ``root/.lab-workspaces``, one per clone."""
    return Path(root) / ".lab-workspaces"


#: The first start's layout (the ``default`` workspace ``/lab`` opens): the side bars closed, so that a
#: notebook and its figures get the whole width of a 1024x768 projector; Ctrl+B opens the file browser.
#: JupyterLab has no setting for it: it opens the file browser when a workspace holds no layout yet.
FIRST_LAYOUT = {
    "layout-restorer:data": {
        "main": {"dock": None},
        "left": {"collapsed": True, "visible": True},
        "right": {"collapsed": True, "visible": True},
    }
}


def install_lab_layout(root: Path) -> Path | None:
    """Write the ``default`` workspace with :data:`FIRST_LAYOUT` into :func:`lab_workspaces_dir`, unless one
    is there (the learner's layout is kept, whatever it is). Returns the file written, or None."""
    from jupyterlab_server.workspaces_handler import WORKSPACE_EXTENSION, slugify

    target = _real_folder(lab_workspaces_dir(root)) / (slugify("default") + WORKSPACE_EXTENSION)
    if os.path.lexists(target):
        return None
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(json.dumps({"data": FIRST_LAYOUT, "metadata": {"id": "default"}}, indent=1) + "\n")
    return target


#: How many ports from the one asked for the lab tries when it is taken (Jupyter's own default is 50).
PORT_TRIES = 50


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing holds ``port`` on ``host``: a bind there succeeds (then is let go)."""
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port_from(port: int, tries: int = PORT_TRIES) -> int:
    """``port`` if free on 127.0.0.1, else the next free one within ``tries`` ports.

    Raises
    ------
    ValueError
        ``port`` is not a TCP port, or every port tried is taken.
    """
    if not 1 <= port <= 65535:
        raise ValueError(f"--port must be a TCP port, 1 to 65535, got {port}")
    last = min(port + tries - 1, 65535)
    for candidate in range(port, last + 1):
        if port_free(candidate):
            return candidate
    raise ValueError(f"ports {port} to {last} on 127.0.0.1 are all taken: pick another, e.g. make lab PORT={last + 1}")


def lab_command(port: int, open_browser: bool = True, root_dir: Path | None = None) -> list[str]:
    """argv of the JupyterLab server: 127.0.0.1 only, the learner's copy as root, its settings overrides
    and layouts read from there (:func:`sync_workspace` installs them); the token is not in it (see :func:`lab_env`)."""
    root = Path(root_dir or workspace_dir())
    argv = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        f"--ServerApp.root_dir={root}",
        "--ServerApp.port_retries=0",  # the printed URL must be the real one
        f"--LabApp.app_settings_dir={lab_settings_dir(root)}",
        f"--LabApp.workspaces_dir={lab_workspaces_dir(root)}",
    ]
    if not open_browser:
        argv.append("--no-browser")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--allow-root")  # JupyterLab refuses root otherwise (containers, CI)
    return argv


def lab_env(token: str, base: dict | None = None) -> dict[str, str]:
    """The server's environment: ``base`` (default ``os.environ``) with ``JUPYTER_TOKEN`` set, and
    any ``JUPYTER_TOKEN_FILE`` dropped so that this token is the one in force."""
    if not token:
        raise ValueError("lab_env needs a non-empty token: authentication is never turned off")
    env = {k: v for k, v in (os.environ if base is None else base).items() if k != "JUPYTER_TOKEN_FILE"}
    env["JUPYTER_TOKEN"] = token
    return env


#: Seconds the lab waits for a starting server to answer before it stops it (``--wait``).
WAIT = 120.0


def answers(port: int) -> bool:
    """True when the server on ``port`` answers ``GET /api`` (Jupyter's version, needing no token) with 200."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api", timeout=2) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError, ValueError):  # not listening yet, or not Jupyter
        return False


def serve(server: subprocess.Popen, port: int, url: str, wait: float = WAIT) -> int:
    """Print ``url`` once ``server`` answers on ``port``, then wait for it to end; its exit status.

    A server that ends first, or that has not answered after ``wait`` seconds (then stopped), is said in one
    line on stderr, and no URL is printed. While it runs, Ctrl-C reaches it from the terminal (its own
    question, "Shutdown this Jupyter server?"); a SIGTERM or SIGHUP sent here is passed on to it.
    """
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda signum, _: server.send_signal(signum))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal sends Ctrl-C to the server too: it decides
    try:
        failed = _unanswered(server, port, wait)
        if failed is not None:
            return failed
        print(f"ropepool: JupyterLab answers at {url}", flush=True)
        return _status(server.wait())
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)


def _unanswered(server: subprocess.Popen, port: int, wait: float) -> int | None:
    """Poll ``server`` until it answers (None); the lab's exit status, said on stderr, when it ends first (its
    own, or 1) or has not answered after ``wait`` s (1; then stopped)."""
    deadline = time.monotonic() + wait
    while not answers(port):
        if server.poll() is not None:
            print(
                f"python -m ropepool lab: JupyterLab ended (exit status {server.returncode}) before it answered on "
                f"port {port}: its messages are above",
                file=sys.stderr,
            )
            return _status(server.returncode) or 1
        if time.monotonic() > deadline:
            print(
                f"python -m ropepool lab: JupyterLab did not answer on http://127.0.0.1:{port}/api within {wait:g} s "
                "(its messages are above); stopped it. A busy machine? make lab LAB_FLAGS='--wait 300'",
                file=sys.stderr,
            )
            server.terminate()
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
            return 1
        time.sleep(0.25)
    return None


def _status(code: int) -> int:
    """A child's exit status as a shell gives it: 128 + N for a process ended by signal N."""
    return code if code >= 0 else 128 - code


def main(port: int, open_browser: bool, reset: str | None = None, wait: float = WAIT) -> int:
    """Copy, reset, then start the server on ``port``, or the next free port when it is taken; print its URL
    once it answers and run until it ends (:func:`serve`); 2 with one line on stderr if the workspace cannot
    be prepared or no port is free."""
    if not wait > 0:
        print(f"python -m ropepool lab: --wait must be a positive number of seconds, got {wait}", file=sys.stderr)
        return 2
    workspace = workspace_dir()
    try:
        copied = sync_workspace(workspace)
        if copied:
            print(f"ropepool: copied {', '.join(copied)} into {workspace} (your working copy; notebooks/ stays clean)")
        if reset is not None:
            kept = reset_notebook(reset, workspace)
            where = f"; your version is kept as {kept}" if kept else ""
            print(f"ropepool: {find_notebook(reset).name} is back to the original{where}", flush=True)
        free = free_port_from(port)
    except (ValueError, OSError) as err:
        print(f"python -m ropepool lab: {err}", file=sys.stderr)
        return 2
    if free != port:
        print(f"ropepool: port {port} is taken (another Jupyter?); this lab takes {free}", flush=True)
    token = os.environ.get("JUPYTER_TOKEN") or secrets.token_hex(24)
    argv = lab_command(free, open_browser, workspace)
    print(f"ropepool: starting JupyterLab on {workspace}, port {free}; its URL follows once it answers", flush=True)
    server = subprocess.Popen(argv, env=lab_env(token))
    return serve(server, free, f"http://127.0.0.1:{free}/lab?token={token}", wait)
