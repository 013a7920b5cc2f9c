"""Fixtures of the end-to-end test: one JupyterLab server and one headless Chromium per worker.

The server is started with :func:`ropepool.cli.lab.lab_command`, the argv ``make lab`` runs, on a
free port, with a fresh token in its environment (:func:`ropepool.cli.lab.lab_env`). Nothing is added
to that argv; what the test needs differently from a learner's first start lives in environment
variables pointing into a temporary folder:

* ``JUPYTERLAB_SETTINGS_DIR``: user settings with

  - ``windowingMode: "none"``. JupyterLab 4 virtualises long notebooks: in "full" (or "defer")
    mode cells outside the viewport are not attached to the DOM, and the default
    "contentVisibility" leaves them in the DOM but unpainted, so a full-page screenshot shows
    blanks. "none" attaches and paints every cell, so the test can map cells on the page to the
    .ipynb's cells by index and see every output, without scrolling cell by cell.
  - ``autosave: false``. The server's root is a learner's copy in the temporary folder, made by
    :func:`ropepool.cli.lab.sync_workspace` as ``make lab`` makes ``workspace/``; running the cells
    writes nothing back (the test checks the server saved nothing, unless a test saves on purpose).
  - ``fetchNews: "false"``, ``checkForUpdates: false``: no "receive Jupyter news?" toast over
    the cells and no request to the internet.
* The workspace store (layouts) is the learner's copy's ``.lab-workspaces``, as ``make lab`` has it
  (the argv names it; ``JUPYTERLAB_WORKSPACES_DIR`` is kept only for a server started without it): the
  copy is new in a temporary folder, so a notebook opens alone, not next to what a last session left open.
* ``JUPYTER_CONFIG_DIR`` and ``JUPYTER_RUNTIME_DIR``: no user config from ``~/.jupyter`` changes
  what is tested, and the server's and kernels' connection files stay in the temp folder. The one
  config file there puts the checkpoints JupyterLab makes when it opens a notebook in the temp
  folder, not in ``notebooks/.ipynb_checkpoints``: the test leaves the working tree as it found it.

Chromium is Debian's (``/usr/bin/chromium``); Playwright never downloads a browser here.
Where it is missing every browser test is skipped with one reason (``pytest -rs`` prints it).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ropepool.cli.lab import NOTEBOOKS, lab_command, lab_env, sync_workspace

os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-dev-shm-usage",  # containers often give /dev/shm 64 MB: tall screenshots would crash the tab
]
REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "artifacts" / "screenshots"

# For work on this test only: run it against another folder of notebooks (e.g. scratch ones in
# /tmp), copied into the learner's copy instead of notebooks/. Unset (always, in make test and CI):
# the suite's notebooks/ folder, copied exactly as ``make lab`` copies it.
ROOT = Path(os.environ.get("ROPEPOOL_E2E_ROOT", NOTEBOOKS)).resolve()

USER_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False},
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((host, port)) == 0


PROC = Path("/proc")  # Linux; elsewhere (macOS) ps and lsof answer the same questions


def _parents() -> dict[int, int]:
    """{pid: ppid} of every process."""
    if not (PROC / "self").exists():
        out = subprocess.run(["ps", "-A", "-o", "pid=,ppid="], capture_output=True, text=True, check=True).stdout
        return {int(a): int(b) for a, b in (line.split() for line in out.splitlines() if line.strip())}
    parents = {}
    for d in PROC.iterdir():
        if d.name.isdigit():
            try:
                parents[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return parents


def descendants(pid: int) -> set[int]:
    """PIDs of all live descendants of ``pid`` (kernels run in sessions of their own: not the group)."""
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    found: set[int] = set()
    todo = [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in found:
                found.add(c)
                todo.append(c)
    return found


def started(pid: int) -> str | None:
    """When process ``pid`` started (an opaque stamp), or None: tells a PID from its reuse."""
    if (PROC / "self").exists():
        try:
            return (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[19]
        except (OSError, IndexError):
            return None
    out = subprocess.run(["ps", "-o", "lstart=", "-p", str(pid)], capture_output=True, text=True).stdout.strip()
    return out or None


def alive(pid: int) -> bool:
    """True while process ``pid`` exists and is not a zombie."""
    if (PROC / "self").exists():
        try:
            return (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    state = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True).stdout.strip()
    return bool(state) and not state.startswith("Z")


@dataclass
class Lab:
    """A running JupyterLab: its process, address and token, and the kernels it started."""

    proc: subprocess.Popen
    port: int
    token: str
    argv: list[str]
    log: Path
    root: Path  # the learner's copy the server serves
    kernel_pids: dict[int, str | None] = field(default_factory=dict)  # PID: start stamp

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def request(self, method: str, path: str, token: str | None = "auth", timeout: float = 10):
        """(status, parsed JSON or None) of an API call; ``token=None`` sends none."""
        token = self.token if token == "auth" else token
        url = self.base + path
        if token is not None:
            url += ("&" if "?" in url else "?") + f"token={token}"
        req = urllib.request.Request(url, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                body = r.read()
                return r.status, (json.loads(body) if body else None)
        except urllib.error.HTTPError as e:
            return e.code, None
        except (urllib.error.URLError, OSError):  # not listening (yet, or any more)
            return 0, None

    def api(self, path: str, method: str = "GET"):
        status, data = self.request(method, path)
        assert status < 300, f"{method} {path}: HTTP {status}\n{self.log_tail()}"
        return data

    def remember_kernels(self) -> None:
        for pid in descendants(self.pid):
            self.kernel_pids.setdefault(pid, started(pid))

    def kernels_alive(self) -> list[int]:
        """The remembered kernel processes still running (the same processes, not reused PIDs)."""
        return sorted(p for p, t in self.kernel_pids.items() if alive(p) and started(p) == t)

    def log_since(self, offset: int) -> str:
        with open(self.log, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")

    def log_tail(self, n: int = 40) -> str:
        try:
            return "server log, last lines:\n" + "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def _start(tmp: Path) -> Lab:
    for rel, values in USER_SETTINGS.items():
        path = tmp / "settings" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    # JupyterLab makes a checkpoint of each notebook it opens: keep those out of notebooks/ too.
    (tmp / "config").mkdir(exist_ok=True)
    (tmp / "config" / "jupyter_server_config.json").write_text(
        json.dumps({"FileCheckpoints": {"checkpoint_dir": str(tmp / "checkpoints")}})
    )
    env = dict(
        os.environ,
        JUPYTERLAB_SETTINGS_DIR=str(tmp / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp / "workspaces"),
        JUPYTER_CONFIG_DIR=str(tmp / "config"),
        JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
        PYTHONUNBUFFERED="1",
    )
    workspace = tmp / "workspace"  # the learner's copy; the repository's notebooks/ is never served
    sync_workspace(workspace, ROOT)
    last_error = ""
    for attempt in range(3):  # a free port can be taken between free_port() and the bind
        port, token = free_port(), secrets.token_hex(24)
        argv = lab_command(port=port, open_browser=False, root_dir=workspace)
        log = tmp / f"server-{attempt}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=lab_env(token, env),
                cwd=REPO,
                start_new_session=True,
            )
        lab = Lab(proc, port, token, argv, log, workspace)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and proc.poll() is None:
                if lab.request("GET", "/api/status", timeout=2)[0] == 200:
                    return lab
                time.sleep(0.3)
        except BaseException:  # Ctrl-C or a bug here: the server must not outlive the test
            _stop(lab)
            raise
        last_error = lab.log_tail()
        _stop(lab)
    raise RuntimeError(f"JupyterLab did not come up: {lab.argv}\n{last_error}")


def _stop(lab: Lab) -> list[str]:
    """End the server (SIGTERM, then SIGKILL to its process group) and the kernels it started.

    Returns what was still running and had to be killed; empty when everything ended cleanly.
    """
    problems = []
    if lab.proc.poll() is None:
        lab.remember_kernels()
        lab.proc.terminate()  # Jupyter Server shuts its kernels down on SIGTERM
        try:
            lab.proc.wait(30)
        except subprocess.TimeoutExpired:
            problems.append(f"server PID {lab.pid} ignored SIGTERM for 30 s; killed its process group")
            os.killpg(lab.pid, signal.SIGKILL)
            lab.proc.wait(10)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and lab.kernels_alive():
        time.sleep(0.2)
    for p in lab.kernels_alive():
        problems.append(f"kernel process {p} outlived the server; killed it")
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return problems


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """The JupyterLab server, started as ``make lab`` starts it; stopped and checked at the end."""
    lab = _start(tmp_path_factory.mktemp("jupyterlab"))
    yield lab
    problems = _stop(lab)
    assert lab.proc.returncode is not None and not alive(lab.pid), f"server PID {lab.pid} still running"
    assert not port_open(lab.port), f"port {lab.port} still accepts connections after the server ended"
    assert not problems, "; ".join(problems)


@pytest.fixture(scope="session")
def browser():
    """Debian's headless Chromium driven by Playwright (sync API); one per worker."""
    if not CHROMIUM.exists():
        pytest.skip(
            f"browser test: {CHROMIUM} not found: apt-get install chromium (Playwright must not download a browser)"
        )
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed: pip install -e '.[test]'"
    )
    pw = sync_api.sync_playwright().start()
    try:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()
    finally:
        pw.stop()


def wait_for(what: str, predicate, timeout: float, lab: Lab, poll: float = 0.3):
    """``predicate()``'s first truthy value within ``timeout`` s; else fail naming ``what``, with the server's log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{lab.log_tail(15)}")
