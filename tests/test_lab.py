"""``python -m ropepool lab`` (``make lab``): loopback only, a token always, never on the command line;
the learner's copy as root."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from ropepool.cli import lab
from ropepool.__main__ import main


def _flags(argv: list[str]) -> dict[str, str]:
    return dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)


@pytest.mark.parametrize("port, open_browser", [(8888, True), (9999, False)])
def test_loopback_and_no_token_in_argv(port, open_browser):
    argv = lab.lab_command(port, open_browser)
    flags = _flags(argv)
    assert argv[1:3] == ["-m", "jupyterlab"]
    assert flags["ServerApp.ip"] == "127.0.0.1"
    assert flags["ServerApp.port"] == str(port) and flags["ServerApp.port_retries"] == "0"
    assert flags["ServerApp.root_dir"] == str(lab.workspace_dir()) != str(lab.NOTEBOOKS)
    # nothing that would open it to other machines, replace the token or show it in the process list
    assert not any(
        a.startswith(
            (
                "--ip",
                "--ServerApp.allow_remote",
                "--ServerApp.password",
                "--ServerApp.token",
                "--IdentityProvider",
                "--NotebookApp",
                "--ServerApp.disable_check_xsrf",
            )
        )
        for a in argv
    )
    assert ("--no-browser" in argv) == (not open_browser)


@pytest.mark.parametrize("token", ["t0k3n", "x" * 48])
def test_token_goes_in_the_environment(token):
    env = lab.lab_env(token, {"PATH": "/bin", "JUPYTER_TOKEN_FILE": "/tmp/other"})
    assert env == {"PATH": "/bin", "JUPYTER_TOKEN": token}


@pytest.mark.parametrize("token", ["", None])
def test_no_token_no_server(token):
    with pytest.raises(ValueError, match="token"):
        lab.lab_env(token)


class _Server:
    """Stands in for the JupyterLab process: answers at once, ends with status 0 when waited for."""

    returncode = None

    def poll(self):
        return None

    def wait(self, timeout=None):
        return 0

    def send_signal(self, signum):
        pass


def _exec_spy(monkeypatch) -> list[dict]:
    """The servers the lab starts (path, argv, env), none of them run: each answers at once."""
    calls = []

    def start(argv, env):
        calls.append(dict(path=argv[0], argv=argv, env=env))
        return _Server()

    monkeypatch.setattr(lab.subprocess, "Popen", start)
    monkeypatch.setattr(lab, "answers", lambda port: True)
    return calls


@pytest.fixture(autouse=True)
def workspace(tmp_path, monkeypatch):
    """Every test here gets its own learner's copy: never the repository's workspace/."""
    monkeypatch.setenv("ROPEPOOL_WORKSPACE", str(tmp_path / "ws"))
    return tmp_path / "ws"


def test_cli_passes_port_token_and_no_browser(monkeypatch, capsys):
    calls = _exec_spy(monkeypatch)
    monkeypatch.setenv("JUPYTER_TOKEN", "abc")  # a fixed token comes from the environment only
    assert main(["lab", "--port", "8765", "--no-browser"]) == 0
    (seen,) = calls
    flags = _flags(seen["argv"])
    assert seen["path"] == seen["argv"][0]
    assert flags["ServerApp.port"] == "8765" and seen["env"]["JUPYTER_TOKEN"] == "abc"
    assert not any("abc" in a for a in seen["argv"])
    assert flags["ServerApp.ip"] == "127.0.0.1" and "--no-browser" in seen["argv"]
    assert "http://127.0.0.1:8765/lab?token=abc" in capsys.readouterr().out


def test_a_token_on_the_command_line_is_refused(capsys):
    with pytest.raises(SystemExit):
        main(["lab", "--token", "abc", "--no-browser"])
    assert "unrecognized arguments: --token" in capsys.readouterr().err


def test_cli_makes_a_fresh_token(monkeypatch, capsys):
    calls = _exec_spy(monkeypatch)
    monkeypatch.delenv("JUPYTER_TOKEN", raising=False)
    main(["lab", "--no-browser"])
    main(["lab", "--no-browser"])
    tokens = [c["env"]["JUPYTER_TOKEN"] for c in calls]
    assert len(set(tokens)) == 2 and all(len(t) >= 32 for t in tokens)


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


def test_real_server_on_a_taken_port_moves_and_takes_the_token_from_the_environment(tmp_path):
    """``python -m ropepool lab``, as ``make lab`` runs it, with its port held by another program: it says so,
    takes the next free port, and prints the URL once the server answers: the first visit after it gets 200
    with the token (no retrying), 403 without it or with another; the token is absent from the server's
    command line and from the lab's."""
    token = secrets.token_hex(24)
    env = {
        **os.environ,
        "ROPEPOOL_WORKSPACE": str(tmp_path / "ws"),
        "JUPYTER_TOKEN": token,
        "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"),
        "PYTHONUNBUFFERED": "1",
    }
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.Popen(
            [sys.executable, "-m", "ropepool", "lab", "--port", str(port), "--no-browser"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
            start_new_session=True,
        )
        try:
            lines = []
            while not lines or "/lab?token=" not in lines[-1]:
                lines.append(proc.stdout.readline())
                assert lines[-1], f"the lab ended before printing its URL: {lines}"
            url = lines[-1].split(" at ", 1)[1].strip()
            base = url.split("/lab?")[0] + "/api/status"
            try:
                first_visit = _status(f"{base}?token={token}")
            except OSError as err:  # refused: nothing listens yet
                first_visit = err
            assert first_visit == 200, f"the URL was printed before the server answered: {first_visit}"
            assert lines[-1].startswith("ropepool: JupyterLab answers at http://127.0.0.1:")
            moved = int(url.split(":")[2].split("/")[0])
            assert f"ropepool: port {port} is taken (another Jupyter?); this lab takes {moved}\n" in lines
            assert moved != port and url == f"http://127.0.0.1:{moved}/lab?token={token}"
            assert _status(base) == 403 and _status(f"{base}?token={'0' * 48}") == 403
            for pid in (proc.pid, *_children(proc.pid)):  # the lab and the server it started
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    assert token.encode() not in f.read()
        finally:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()


def _fake_lab(monkeypatch, code: str) -> None:
    """The lab starts ``python -c code`` (``{port}`` filled in) instead of JupyterLab."""
    monkeypatch.setattr(lab, "lab_command", lambda port, *_: [sys.executable, "-c", code.format(port=port)])


FAKE_SERVER = """
import http.server, time
time.sleep(1)  # starting: a visit now would be refused
class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        print("the server answered", self.path, flush=True)  # before the answer leaves
        self.send_response(200 if self.path == "/api" else 404)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", {port}), Answer).handle_request()
"""


def test_the_url_comes_once_the_server_answers(monkeypatch, capfd):
    _fake_lab(monkeypatch, FAKE_SERVER)
    assert main(["lab", "--no-browser"]) == 0
    out = capfd.readouterr().out
    assert out.index("the server answered /api") < out.index("ropepool: JupyterLab answers at http://127.0.0.1:")


def test_a_server_that_ends_before_it_answers_is_said_without_a_url(monkeypatch, capfd):
    _fake_lab(monkeypatch, "import sys; print('no JupyterLab here'); sys.exit(3)")
    assert main(["lab", "--no-browser"]) == 3
    out, err = capfd.readouterr()
    assert "lab?token=" not in out and "no JupyterLab here" in out
    assert err.startswith("python -m ropepool lab: JupyterLab ended (exit status 3) before it answered on port ")


def test_a_server_that_never_answers_is_stopped_after_the_wait(monkeypatch, capfd):
    _fake_lab(monkeypatch, "import time; time.sleep(120)")
    start = time.monotonic()
    assert main(["lab", "--no-browser", "--wait", "1"]) == 1
    assert time.monotonic() - start < 30, "the lab waited for its server to end instead of stopping it"
    out, err = capfd.readouterr()
    assert "lab?token=" not in out and err.count("\n") == 1
    assert "JupyterLab did not answer on http://127.0.0.1:" in err and "/api within 1 s" in err and "--wait" in err


@pytest.mark.parametrize("wait", ["0", "-1", "nan"])
def test_a_wait_that_is_no_positive_time_is_refused(capsys, wait):
    assert main(["lab", "--no-browser", "--wait", wait]) == 2
    assert "--wait must be a positive number of seconds" in capsys.readouterr().err


# --- The learner's copy -----------------------------------------------------------------------


@pytest.fixture
def source(tmp_path):
    """A small suite of notebooks standing in for notebooks/."""
    src = tmp_path / "notebooks"
    src.mkdir()
    for name in ("00_start_here", "01_gqa_shapes", "03_rotation", "03b_rope_scaling"):
        (src / f"{name}.ipynb").write_text(f"original {name}")
    (src / "README.md").write_text("readme")
    return src


def test_first_start_copies_the_suite(source, workspace):
    copied = lab.sync_workspace(workspace, source)
    assert copied == [
        "00_start_here.ipynb",
        "01_gqa_shapes.ipynb",
        "03_rotation.ipynb",
        "03b_rope_scaling.ipynb",
        "README.md",
    ]
    assert (workspace / "03_rotation.ipynb").read_text() == "original 03_rotation"


def test_later_starts_keep_edits_and_add_new_notebooks(source, workspace):
    lab.sync_workspace(workspace, source)
    (workspace / "03_rotation.ipynb").write_text("my answers")
    (source / "03_rotation.ipynb").write_text("a newer original")
    (source / "07_engine.ipynb").write_text("original 07")
    assert lab.sync_workspace(workspace, source) == ["07_engine.ipynb"]
    assert (workspace / "03_rotation.ipynb").read_text() == "my answers"
    assert (workspace / "07_engine.ipynb").read_text() == "original 07"
    assert lab.sync_workspace(workspace, source) == []


@pytest.mark.parametrize("name", ["03_rotation", "03_rotation.ipynb", "03_rot"])
def test_reset_one_notebook_keeps_the_learners_version(source, workspace, name):
    lab.sync_workspace(workspace, source)
    for nb in ("00_start_here", "03_rotation"):
        (workspace / f"{nb}.ipynb").write_text(f"my {nb}")
    kept = lab.reset_notebook(name, workspace, source)
    assert (workspace / "03_rotation.ipynb").read_text() == "original 03_rotation"
    assert kept.parent == workspace / ".reset" and kept.read_text() == "my 03_rotation"
    assert (workspace / "00_start_here.ipynb").read_text() == "my 00_start_here"  # only the one named


@pytest.mark.parametrize("name, why", [("03", "several"), ("09", "none"), ("", "several")])
def test_reset_names_one_notebook(source, workspace, name, why):
    with pytest.raises(ValueError, match=why):
        lab.reset_notebook(name, workspace, source)


def test_cli_reset_then_start(monkeypatch, capsys, workspace):
    calls = _exec_spy(monkeypatch)
    main(["lab", "--no-browser"])
    (workspace / "03_rotation.ipynb").write_text("my edits")
    main(["lab", "--no-browser", "--reset", "03_rotation"])
    assert (workspace / "03_rotation.ipynb").read_bytes() == (lab.NOTEBOOKS / "03_rotation.ipynb").read_bytes()
    assert "back to the original" in capsys.readouterr().out
    assert _flags(calls[-1]["argv"])["ServerApp.root_dir"] == str(workspace)


def test_the_default_copy_is_ignored_by_git(monkeypatch):
    monkeypatch.delenv("ROPEPOOL_WORKSPACE")
    ws = lab.workspace_dir()
    assert ws.parent == lab.REPO
    if not (lab.REPO / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "check-ignore", "-q", str(ws / "00_start_here.ipynb")], cwd=lab.REPO)
    assert out.returncode == 0, "workspace/ must be git-ignored"


def test_two_resets_in_one_second_keep_both_versions(source, workspace, monkeypatch):
    monkeypatch.setattr(lab.time, "strftime", lambda fmt: "20260101-120000")  # both resets in the same second
    lab.sync_workspace(workspace, source)
    kept = []
    for version in ("my first try", "my second try"):
        (workspace / "03_rotation.ipynb").write_text(version)
        kept.append(lab.reset_notebook("03_rotation", workspace, source))
    assert [k.name for k in kept] == ["03_rotation-20260101-120000.ipynb", "03_rotation-20260101-120000-2.ipynb"]
    assert [k.read_text() for k in kept] == ["my first try", "my second try"]


def test_a_dangling_link_in_the_workspace_is_never_written_through(source, workspace, tmp_path):
    workspace.mkdir()
    (workspace / "03_rotation.ipynb").symlink_to(tmp_path / "elsewhere.ipynb")
    assert "03_rotation.ipynb" not in lab.sync_workspace(workspace, source)
    with pytest.raises(ValueError, match="03_rotation.ipynb is a symlink or not a file"):
        lab.reset_notebook("03_rotation", workspace, source)
    assert not (tmp_path / "elsewhere.ipynb").exists()
    assert (workspace / "03_rotation.ipynb").is_symlink()


def test_a_linked_reset_folder_is_refused(source, workspace, tmp_path):
    lab.sync_workspace(workspace, source)
    (tmp_path / "outside").mkdir()
    (workspace / ".reset").symlink_to(tmp_path / "outside")
    (workspace / "03_rotation.ipynb").write_text("my answers")
    with pytest.raises(ValueError, match=r"\.reset is a symlink or a file, not a folder"):
        lab.reset_notebook("03_rotation", workspace, source)
    assert list((tmp_path / "outside").iterdir()) == []
    assert (workspace / "03_rotation.ipynb").read_text() == "my answers"


@pytest.mark.parametrize("name", ["../../etc/passwd", "\x1b]0;x\x07"], ids=["a path", "terminal escapes"])
def test_cli_reset_of_no_notebook_is_one_line(monkeypatch, capsys, name):
    calls = _exec_spy(monkeypatch)
    assert main(["lab", "--no-browser", "--reset", name]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("python -m ropepool lab: --reset ") and "matches none" in err and err.count("\n") == 1
    assert "\x1b" not in err and calls == []


def test_the_lab_settings_are_never_written_through_a_link(source, workspace, tmp_path):
    workspace.mkdir()
    (tmp_path / "victim.json").write_text("precious")
    (workspace / ".lab-settings").mkdir()
    (workspace / ".lab-settings" / "overrides.json").symlink_to(tmp_path / "victim.json")
    lab.sync_workspace(workspace, source)
    assert (tmp_path / "victim.json").read_text() == "precious"
    overrides = workspace / ".lab-settings" / "overrides.json"
    assert not overrides.is_symlink() and "fetchNews" in overrides.read_text()


def test_a_linked_lab_settings_folder_is_refused(source, workspace, tmp_path):
    workspace.mkdir()
    (tmp_path / "outside").mkdir()
    (workspace / ".lab-settings").symlink_to(tmp_path / "outside")
    with pytest.raises(ValueError, match=r"\.lab-settings is a symlink or a file, not a folder"):
        lab.sync_workspace(workspace, source)
    assert list((tmp_path / "outside").iterdir()) == []
