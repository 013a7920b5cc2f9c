"""What the start-up hook ``ropepool-blas.pth`` costs a Python start, and what loading OpenBLAS costs ``import mlx``.

1. ``python -c pass`` in two throwaway venvs of the same base Python that differ only in
   ``ropepool-blas.pth`` (both hold ``_ropepool_blas.py``): medians of ``--starts`` starts each,
   interleaved start by start. ``--before REV`` adds a third venv with the hook as it was at a
   git revision.
2. ``python -c "import mlx.core"`` in this venv with OpenBLAS loaded and with ``ROPEPOOL_BLAS=off``,
   interleaved the same way.

    .venv/bin/python benchmarks/pth_cost.py [--starts 50] [--before REV]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def make_venv(where: Path, loader: str, pth: str | None) -> str:
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "_ropepool_blas.py").write_text(loader)
    if pth is not None:
        Path(site, "ropepool-blas.pth").write_text(pth)
    subprocess.run([str(python), "-m", "compileall", "-q", site], check=True)  # as pip does on install
    return str(python)


def race(commands: dict[str, tuple[list[str], dict]], starts: int) -> dict[str, float]:
    """Median wall time in ms of each command, started ``starts`` times, interleaved in a shuffled order per round."""
    times = {name: [] for name in commands}
    for name, (cmd, env) in commands.items():  # warm the file cache and the .pyc files
        subprocess.run(cmd, env=env, check=True)
    rng = random.Random(0)
    for _ in range(starts):
        order = list(commands)
        rng.shuffle(order)
        for name in order:
            cmd, env = commands[name]
            t0 = time.perf_counter()
            subprocess.run(cmd, env=env, check=True)
            times[name].append((time.perf_counter() - t0) * 1e3)
    return {name: statistics.median(t) for name, t in times.items()}


def git_show(rev: str, path: str) -> str:
    return subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=50)
    parser.add_argument("--before", help="a git revision whose hook is timed too")
    args = parser.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ROPEPOOL_BLAS", "PYTHONDONTWRITEBYTECODE")}
    loader, pth = (ROOT / "_ropepool_blas.py").read_text(), (ROOT / "ropepool-blas.pth").read_text()
    with tempfile.TemporaryDirectory() as tmp:
        venvs = {"without the hook": make_venv(Path(tmp, "none"), loader, None),
                 "with the hook": make_venv(Path(tmp, "hook"), loader, pth)}
        if args.before:
            venvs[f"with the hook at {args.before}"] = make_venv(
                Path(tmp, "before"), git_show(args.before, "_ropepool_blas.py"), git_show(args.before, "ropepool-blas.pth"))
        starts = race({name: ([py, "-c", "pass"], env) for name, py in venvs.items()}, args.starts)
    base = starts["without the hook"]
    print(f"python -c pass, medians of {args.starts} interleaved starts ({sys.version.split()[0]}):")
    for name, ms in starts.items():
        print(f"  {name:<28} {ms:6.2f} ms  ({ms - base:+.2f} ms)")
    here = dict(env, PYTHONPATH=str(ROOT))
    imports = race({"OpenBLAS loaded": ([sys.executable, "-c", "import mlx.core"], here),
                    "ROPEPOOL_BLAS=off": ([sys.executable, "-c", "import mlx.core"], dict(here, ROPEPOOL_BLAS="off"))},
                   args.starts)
    off = imports["ROPEPOOL_BLAS=off"]
    print(f"python -c 'import mlx.core' in this venv, medians of {args.starts} interleaved starts:")
    for name, ms in imports.items():
        print(f"  {name:<28} {ms:6.2f} ms  ({ms - off:+.2f} ms)")


if __name__ == "__main__":
    main()
