"""Set-up on a learner's laptop: the Python make picks (tools/venv.sh), the lab's port, the CLI from a notebook
cell, the size doctor reports (a taken port with a real server: tests/test_lab.py). Interpreters are faked by tiny scripts that report a version; nothing is installed."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ropepool.cli import doctor, lab

ROOT = Path(__file__).resolve().parent.parent
VENV_SH = ROOT / "tools" / "venv.sh"
SH = shutil.which("sh") or "/bin/sh"


def fake_python(folder: Path, name: str, version: str, ensurepip: bool = True, pip: bool = True) -> Path:
    """A script named ``name`` that answers tools/venv.sh's probe as Python ``version`` at its own path
    (``ensurepip``, ``pip``: whether importing them works)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(
        "#!/bin/sh\n"
        f'case "$*" in *ensurepip*) exit {0 if ensurepip else 1} ;; '
        f'"-c import pip") exit {0 if pip else 1} ;; esac\n'
        f'echo "{version} {path}"\n'
    )
    path.chmod(0o755)
    return path


def fake_venv(folder: Path, python: Path | None) -> Path:
    """A folder that looks like a venv whose bin/python is ``python`` (None: a dangling link, a broken venv)."""
    (folder / "bin").mkdir(parents=True)
    (folder / "pyvenv.cfg").write_text("home = /nowhere\n")
    (folder / "bin" / "python").symlink_to(python or folder / "gone" / "python3")
    return folder


def venv_sh(venv: Path, path: str | None = None, **env) -> subprocess.CompletedProcess:
    """tools/venv.sh in dry-run mode (it says what it would do and does nothing)."""
    environ = {k: v for k, v in os.environ.items() if k != "PYTHON"}
    environ.update(ROPEPOOL_VENV_DRY_RUN="1", **env)
    if path is not None:
        environ["PATH"] = path
    return subprocess.run([SH, str(VENV_SH), str(venv), "lab"], capture_output=True, text=True, env=environ, timeout=60)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_refuses_a_too_old_python_in_one_line(tmp_path):
    """make lab with PYTHON= a 3.9 (macOS's python3): one line, what is wrong and how to get a newer one."""
    old = fake_python(tmp_path / "bin", "python3.9", "3.9")
    venv = tmp_path / "venv"
    out = subprocess.run(
        ["make", "-s", "-C", str(ROOT), "venv", f"PYTHON={old}", f"VENV={venv}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert lines[0].startswith(f"make: PYTHON={old} is Python 3.9; ropepool needs 3.10 or newer: install one (macOS")
    assert "brew install python@3.12" in lines[0] and "sudo apt install python3 python3-venv" in lines[0]
    assert not venv.exists()


def test_no_python_new_enough_on_path(tmp_path):
    fake_python(tmp_path / "bin", "python3", "3.9")
    out = venv_sh(tmp_path / "venv", path=str(tmp_path / "bin"))
    assert out.returncode == 1
    assert out.stderr.startswith(
        "make: no Python 3.10 or newer on PATH (tried python3, python3.13 ... python3.10, python3 is 3.9): install one"
    )


def test_the_first_new_enough_python_is_taken_and_named(tmp_path):
    """python3 is 3.9: python3.13 is taken, and the line says why."""
    fake_python(tmp_path / "bin", "python3", "3.9")
    new = fake_python(tmp_path / "bin", "python3.13", "3.13")
    out = venv_sh(tmp_path / "venv", path=str(tmp_path / "bin"))
    assert out.returncode == 0, out.stderr
    assert out.stdout == (
        f"make: would make {tmp_path / 'venv'} with python3.13 (Python 3.13, {new}): the first of "
        "python3, python3.13 ... python3.10 that is 3.10 or newer, python3 is 3.9\n"
    )


@pytest.mark.parametrize("case", ["other interpreter", "same interpreter", "broken", "too old", "no pip"])
def test_a_venv_made_by_another_interpreter_is_made_anew(tmp_path, case):
    """PYTHON=python3.12 over a .venv that python3.11 made (or a broken one, or a 3.9 one): made anew, saying why;
    over one that python3.12 made: kept."""
    bins = tmp_path / "bin"
    py311 = fake_python(bins, "python3.11", "3.11")
    py312 = fake_python(bins, "python3.12", "3.12", pip=case != "no pip")  # the venv's and PYTHON's
    made_by = {
        "other interpreter": py311,
        "same interpreter": py312,
        "broken": None,
        "too old": fake_python(bins, "python3.9", "3.9"),
        "no pip": py312,
    }[case]
    venv = fake_venv(tmp_path / "venv", made_by)
    out = venv_sh(venv, PYTHON=str(py312))
    assert out.returncode == 0, out.stderr
    why = {
        "other interpreter": f"{venv} was made by {py311}, not by PYTHON={py312} ({py312})",
        "broken": f"{venv} does not run (broken, or the Python that made it is gone)",
        "too old": f"{venv} is Python 3.9, older than 3.10",
        "no pip": f"{venv} has no pip (an interrupted set-up)",
    }
    if case == "same interpreter":
        assert out.stdout == f"make: would keep {venv} (Python 3.12, {py312})\n"
    else:
        assert out.stdout == f"make: would make {venv} anew with {py312} (Python 3.12, {py312}): {why[case]}\n"


def test_a_python_without_ensurepip_names_the_package(tmp_path):
    """Debian and Ubuntu ship venv's ensurepip apart: the line names the package to install."""
    py = fake_python(tmp_path / "bin", "python3.12", "3.12", ensurepip=False)
    out = venv_sh(tmp_path / "venv", PYTHON=str(py))
    assert out.returncode == 1
    assert out.stderr == (
        f"make: {py} (Python 3.12) lacks the venv/ensurepip modules: sudo apt install "
        "python3.12-venv (Debian/Ubuntu; or python3-venv), then make again\n"
    )


def test_a_folder_that_is_not_a_venv_is_left_alone(tmp_path):
    (tmp_path / "venv").mkdir()
    (tmp_path / "venv" / "mine.txt").write_text("not a venv")
    out = venv_sh(tmp_path / "venv", PYTHON=sys.executable)
    assert out.returncode == 1 and "is not a venv (no pyvenv.cfg)" in out.stderr
    assert (tmp_path / "venv" / "mine.txt").exists()


def test_no_free_port_is_one_line():
    with pytest.raises(ValueError, match=r"^--port must be a TCP port, 1 to 65535, got 70000$"):
        lab.free_port_from(70000)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        with pytest.raises(
            ValueError,
            match=rf"^ports {port} to {port} on 127.0.0.1 are all taken: pick another, "
            rf"e.g. make lab PORT={port + 1}$",
        ):
            lab.free_port_from(port, tries=1)


def test_the_cli_runs_from_a_notebook_cell_with_the_kernels_python(tmp_path):
    """In a kernel whose PATH has no venv (the learner's shell), ``%ropepool explain`` and
    ``!{sys.executable} -m ropepool`` both reach ropepool."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    error = "k shape must be [num_tokens, num_kv_heads, head_dim], got (6, 32, 128)"
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("%load_ext ropepool"),
            nbformat.v4.new_code_cell(f'%ropepool explain "{error}" --model qwen2.5-7b'),
            nbformat.v4.new_code_cell("import sys\n!{sys.executable} -m ropepool explain --help"),
        ]
    )
    env_path = os.pathsep.join(
        p
        for p in os.environ.get("PATH", "").split(os.pathsep)
        if Path(sys.prefix) not in Path(p).parents and p != str(Path(sys.executable).parent)
    )
    old = os.environ["PATH"]
    os.environ["PATH"] = env_path  # the kernel inherits it, as a lab started from a shell without the venv
    try:
        nbclient.NotebookClient(nb, timeout=120, resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        os.environ["PATH"] = old
    text = lambda cell: "".join(o.get("text", "") for o in cell.outputs)  # noqa: E731
    explained, helped = text(nb.cells[1]), text(nb.cells[2])
    assert "num_kv_heads" in explained and "No module named" not in explained, explained
    assert "usage: python -m ropepool explain" in helped, helped


def test_doctor_reports_the_venvs_size(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.bin").write_bytes(b"1" * 1000)
    (tmp_path / "y.bin").write_bytes(b"2" * 234)
    (tmp_path / "link").symlink_to(tmp_path / "a")  # counted as a link, never followed
    assert doctor.folder_bytes(str(tmp_path)) == 1234 + len(str(tmp_path / "a"))
    rows = dict(doctor.findings())
    in_venv = sys.prefix != sys.base_prefix
    assert rows["environment"].startswith(f"venv {sys.prefix}: " if in_venv else "no venv")
    assert rows["environment"].endswith(" MB on disk") or not in_venv


def test_the_first_start_opens_with_the_side_bars_closed(tmp_path):
    """The default workspace, written once, holds a layout with the left side bar (the file browser)
    collapsed; jupyterlab_server reads it from the folder the server's argv names; a learner's own
    layout there is kept."""
    from jupyterlab_server.workspaces_handler import WorkspacesManager

    lab.sync_workspace(tmp_path, lab.NOTEBOOKS)
    folder = tmp_path / ".lab-workspaces"
    assert f"--LabApp.workspaces_dir={folder}" in lab.lab_command(8888, False, tmp_path)
    layout = WorkspacesManager(folder).load("default")["data"]["layout-restorer:data"]
    assert layout["left"]["collapsed"] is True
    (written,) = folder.iterdir()
    written.write_text(json.dumps({"data": {"mine": 1}, "metadata": {"id": "default"}}))
    assert lab.install_lab_layout(tmp_path) is None
    assert WorkspacesManager(folder).load("default")["data"] == {"mine": 1}


def test_the_kernels_step_builds_the_batch_invariant_matmul_too(capsys):
    """``make kernels`` (set-up) builds every library a notebook calls, so that notebook 15's deterministic
    engine never waits for a compiler in front of a learner."""
    from ropepool.kernels import invariant

    doctor.build_kernels()
    said = capsys.readouterr().out
    line = next((ln for ln in said.splitlines() if "batch-invariant matmul" in ln), None)
    assert line is not None, said
    assert line.endswith(": ready") == (invariant.unavailable_reason() is None), line
