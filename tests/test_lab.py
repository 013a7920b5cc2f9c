"""``python -m ropepool lab`` (``make lab``): loopback only, a token always, the learner's copy as root."""

from __future__ import annotations

import subprocess

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
    assert flags["ServerApp.root_dir"] == str(lab.workspace_dir()) != str(lab.NOTEBOOKS)
    # nothing that would open it to other machines or replace the token
    assert not any(a.startswith(("--ip", "--ServerApp.allow_remote", "--ServerApp.password", "--ServerApp.token",
                                 "--NotebookApp", "--ServerApp.disable_check_xsrf")) for a in argv)
    assert ("--no-browser" in argv) == (not open_browser)


@pytest.mark.parametrize("token", ["", None])
def test_no_token_no_server(token):
    with pytest.raises(ValueError, match="token"):
        lab.lab_command(8888, token)


@pytest.fixture(autouse=True)
def workspace(tmp_path, monkeypatch):
    """Every test here gets its own learner's copy: never the repository's workspace/."""
    monkeypatch.setenv("ROPEPOOL_WORKSPACE", str(tmp_path / "ws"))
    return tmp_path / "ws"


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
    assert copied == ["00_start_here.ipynb", "01_gqa_shapes.ipynb", "03_rotation.ipynb",
                      "03b_rope_scaling.ipynb", "README.md"]
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
    seen = {}
    monkeypatch.setattr(lab.os, "execv", lambda path, argv: seen.update(argv=argv))
    main(["lab", "--no-browser"])
    (workspace / "03_rotation.ipynb").write_text("my edits")
    main(["lab", "--no-browser", "--reset", "03_rotation"])
    assert (workspace / "03_rotation.ipynb").read_bytes() == (lab.NOTEBOOKS / "03_rotation.ipynb").read_bytes()
    assert "back to the original" in capsys.readouterr().out
    assert _flags(seen["argv"])["ServerApp.root_dir"] == str(workspace)


def test_the_default_copy_is_ignored_by_git(monkeypatch):
    monkeypatch.delenv("ROPEPOOL_WORKSPACE")
    ws = lab.workspace_dir()
    assert ws.parent == lab.REPO
    if not (lab.REPO / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "check-ignore", "-q", str(ws / "00_start_here.ipynb")], cwd=lab.REPO)
    assert out.returncode == 0, "workspace/ must be git-ignored"
