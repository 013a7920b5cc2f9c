"""``python -m ropepool lab``: JupyterLab on the notebook suite, on loopback, behind a token.

``make lab`` and the end-to-end test both start the server through :func:`lab_command`,
so what the test checks is what learners run. Authentication is never turned off: without
``--token`` a fresh random one is made and printed in the URL (Jupyter masks a token it was
given, so we print the URL ourselves).
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def lab_command(port: int, token: str, open_browser: bool = True) -> list[str]:
    """argv of the JupyterLab server: 127.0.0.1 only, a token always, notebooks/ as root."""
    if not token:
        raise ValueError("lab_command needs a non-empty token: authentication is never turned off")
    argv = [
        sys.executable, "-m", "jupyterlab",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        f"--ServerApp.root_dir={NOTEBOOKS}",
        f"--IdentityProvider.token={token}",
        "--ServerApp.port_retries=0",  # the printed URL must be the real one
    ]
    if not open_browser:
        argv.append("--no-browser")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--allow-root")  # JupyterLab refuses root otherwise (containers, CI)
    return argv


def main(port: int, token: str | None, open_browser: bool) -> None:
    token = token or secrets.token_hex(24)
    argv = lab_command(port, token, open_browser)
    print(f"ropepool: JupyterLab on the notebook suite at http://127.0.0.1:{port}/lab?token={token}", flush=True)
    os.execv(argv[0], argv)
