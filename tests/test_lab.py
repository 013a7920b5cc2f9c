"""``python -m ropepool lab`` (``make lab``): loopback only, a token always, the suite as root."""

from __future__ import annotations

import pytest

from ropepool import lab
from ropepool.__main__ import main


def _flags(argv: list[str]) -> dict[str, str]:
    return dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)


@pytest.mark.parametrize("port, token, open_browser", [(8888, "t0k3n", True), (9999, "x" * 48, False)])
def test_loopback_and_a_token_always(port, token, open_browser):
    argv = lab.lab_command(port, token, open_browser)
    flags = _flags(argv)
    assert argv[1:3] == ["-m", "jupyterlab"]
    assert flags["ServerApp.ip"] == "127.0.0.1"
    assert flags["ServerApp.port"] == str(port) and flags["ServerApp.port_retries"] == "0"
    assert flags["IdentityProvider.token"] == token
    assert flags["ServerApp.root_dir"] == str(lab.NOTEBOOKS)
    # nothing that would open it to other machines or replace the token
    assert not any(a.startswith(("--ip", "--ServerApp.allow_remote", "--ServerApp.password", "--ServerApp.token",
                                 "--NotebookApp", "--ServerApp.disable_check_xsrf")) for a in argv)
    assert ("--no-browser" in argv) == (not open_browser)


@pytest.mark.parametrize("token", ["", None])
def test_no_token_no_server(token):
    with pytest.raises(ValueError, match="token"):
        lab.lab_command(8888, token)


def test_cli_passes_port_token_and_no_browser(monkeypatch, capsys):
    seen = {}
    monkeypatch.setattr(lab.os, "execv", lambda path, argv: seen.update(path=path, argv=argv))
    assert main(["lab", "--port", "8765", "--token", "abc", "--no-browser"]) == 0
    flags = _flags(seen["argv"])
    assert seen["path"] == seen["argv"][0]
    assert (flags["ServerApp.port"], flags["IdentityProvider.token"]) == ("8765", "abc")
    assert flags["ServerApp.ip"] == "127.0.0.1" and "--no-browser" in seen["argv"]
    assert "http://127.0.0.1:8765/lab?token=abc" in capsys.readouterr().out


def test_cli_makes_a_fresh_token(monkeypatch, capsys):
    tokens = []
    monkeypatch.setattr(lab.os, "execv", lambda path, argv: tokens.append(_flags(argv)["IdentityProvider.token"]))
    main(["lab", "--no-browser"])
    main(["lab", "--no-browser"])
    assert len(set(tokens)) == 2 and all(len(t) >= 32 for t in tokens)
