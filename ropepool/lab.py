"""``python -m ropepool lab``: JupyterLab on the notebook suite, on loopback, behind a token.

``make lab`` and the end-to-end test both start the server through :func:`lab_command` and
:func:`lab_env`, so what the test checks is what learners run. Authentication is never turned
off: without ``--token`` a fresh random one is made and printed in the URL (Jupyter masks a
token it was given, so we print the URL ourselves). The token reaches the server through its
environment (``JUPYTER_TOKEN``), never its command line, which every local user can read in
the process list.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def lab_command(port: int, open_browser: bool = True) -> list[str]:
    """argv of the JupyterLab server: 127.0.0.1 only, notebooks/ as root; the token is not in it
    (see :func:`lab_env`)."""
    argv = [
        sys.executable, "-m", "jupyterlab",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        f"--ServerApp.root_dir={NOTEBOOKS}",
        "--ServerApp.port_retries=0",  # the printed URL must be the real one
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


def main(port: int, token: str | None, open_browser: bool) -> None:
    token = token or secrets.token_hex(24)
    argv = lab_command(port, open_browser)
    print(f"ropepool: JupyterLab on the notebook suite at http://127.0.0.1:{port}/lab?token={token}", flush=True)
    os.execve(argv[0], argv, lab_env(token))
