"""``python -m ropepool lab`` (``make lab``): loopback only, a token always, never on the command line."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from ropepool import lab
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
    assert flags["ServerApp.root_dir"] == str(lab.NOTEBOOKS)
    # nothing that would open it to other machines, replace the token or show it in the process list
    assert not any(a.startswith(("--ip", "--ServerApp.allow_remote", "--ServerApp.password", "--ServerApp.token",
                                 "--IdentityProvider", "--NotebookApp", "--ServerApp.disable_check_xsrf"))
                   for a in argv)
    assert ("--no-browser" in argv) == (not open_browser)


@pytest.mark.parametrize("token", ["t0k3n", "x" * 48])
def test_token_goes_in_the_environment(token):
    env = lab.lab_env(token, {"PATH": "/bin", "JUPYTER_TOKEN_FILE": "/tmp/other"})
    assert env == {"PATH": "/bin", "JUPYTER_TOKEN": token}


@pytest.mark.parametrize("token", ["", None])
def test_no_token_no_server(token):
    with pytest.raises(ValueError, match="token"):
        lab.lab_env(token)


def _exec_spy(monkeypatch) -> list[dict]:
    calls = []
    monkeypatch.setattr(lab.os, "execve", lambda path, argv, env: calls.append(dict(path=path, argv=argv, env=env)))
    return calls


def test_cli_passes_port_token_and_no_browser(monkeypatch, capsys):
    calls = _exec_spy(monkeypatch)
    assert main(["lab", "--port", "8765", "--token", "abc", "--no-browser"]) == 0
    (seen,) = calls
    flags = _flags(seen["argv"])
    assert seen["path"] == seen["argv"][0]
    assert flags["ServerApp.port"] == "8765" and seen["env"]["JUPYTER_TOKEN"] == "abc"
    assert not any("abc" in a for a in seen["argv"])
    assert flags["ServerApp.ip"] == "127.0.0.1" and "--no-browser" in seen["argv"]
    assert "http://127.0.0.1:8765/lab?token=abc" in capsys.readouterr().out


def test_cli_makes_a_fresh_token(monkeypatch, capsys):
    calls = _exec_spy(monkeypatch)
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


def test_real_server_takes_the_token_from_the_environment(tmp_path):
    """The server ``make lab`` starts: 403 without the token, 200 with it, token absent from its cmdline."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_hex(24)
    env = lab.lab_env(token, {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"),
                              "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg")})
    proc = subprocess.Popen(lab.lab_command(port, open_browser=False), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}/api/status"
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if _status(f"{base}?token={token}") == 200:
                    break
            except OSError:
                time.sleep(0.3)
        assert _status(f"{base}?token={token}") == 200
        assert _status(base) == 403 and _status(f"{base}?token={'0' * 48}") == 403
        with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
            assert token.encode() not in f.read()
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
