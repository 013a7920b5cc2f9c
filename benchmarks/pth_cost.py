"""What the start-up hook ``ropepool-blas.pth`` costs a Python start, and what loading OpenBLAS costs ``import mlx``.

1. ``python -c pass`` in two throwaway venvs of the same base Python that differ only in
   ``ropepool-blas.pth`` (both hold ``_ropepool_blas.py``): medians of ``--starts`` starts each,
   interleaved start by start. ``--before REV`` adds a third venv with the hook as it was at a
   git revision.
2. The same cost measured inside one Python: ``site.addsitedir`` of a folder holding only the
   ``.pth`` against an empty folder, 200 times each, interleaved (no process start, no scheduler noise).
3. ``python -c "import mlx.core"`` in this venv with OpenBLAS loaded and with ``ROPEPOOL_BLAS=off``,
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
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "_ropepool_blas.py").write_text(loader)
    if pth is not None:
        Path(site, "ropepool-blas.pth").write_text(pth)
    subprocess.run([str(python), "-m", "compileall", "-q", site], check=True)  # as pip does on install
    return str(python)


def _run(cmd: list[str], env: dict) -> tuple[float, float]:
    """(wall ms, CPU ms of the child: user + system) of one run of ``cmd``."""
    t0 = time.perf_counter()
    child = subprocess.Popen(cmd, env=env)
    _, status, usage = os.wait4(child.pid, 0)
    wall = (time.perf_counter() - t0) * 1e3
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"{cmd} failed with exit status {child.returncode}")
    return wall, (usage.ru_utime + usage.ru_stime) * 1e3


def race(commands: dict[str, tuple[list[str], dict]], starts: int) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) ms of each command, started ``starts`` times, interleaved in a shuffled order per round.

    CPU time (the child's user + system) is what the start costs; wall time adds waiting for a core
    on a busy machine."""
    times = {name: [] for name in commands}
    for cmd, env in commands.values():  # warm the file cache
        _run(cmd, env)
    rng = random.Random(0)
    for _ in range(starts):
        order = list(commands)
        rng.shuffle(order)
        for name in order:
            times[name].append(_run(*commands[name]))
    return {name: tuple(statistics.median(x) for x in zip(*t)) for name, t in times.items()}


#: The start-up hook's target: ``python -c pass`` within this many ms of a venv without the hook.
TARGET_MS = 1.0


def show(title: str, results: dict[str, tuple[float, float]], base: str) -> None:
    print(title)
    for name, (wall, cpu) in results.items():
        print(
            f"  {name:<30} wall {wall:7.2f} ms ({wall - results[base][0]:+6.2f})   "
            f"CPU {cpu:7.2f} ms ({cpu - results[base][1]:+6.2f})"
        )


IN_PROCESS = r"""
import site, statistics, sys, time
with_pth, empty = sys.argv[1], sys.argv[2]
def cost(folder):
    t0 = time.perf_counter()
    site.addsitedir(folder)
    spent = time.perf_counter() - t0
    sys.path.remove(folder)
    sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "_RopepoolBlasHook"]
    return spent
pairs = [(cost(with_pth), cost(empty)) for _ in range(200)]
a, b = (statistics.median(x) * 1e3 for x in zip(*pairs))
print(f"site.addsitedir in one Python, medians of 200 interleaved: with the .pth {a:.3f} ms, "
      f"empty folder {b:.3f} ms ({a - b:+.3f} ms)")
"""


def in_process(pth: str, tmp: str) -> str:
    with_pth, empty = Path(tmp, "with-pth"), Path(tmp, "empty")
    with_pth.mkdir()
    empty.mkdir()
    (with_pth / "ropepool-blas.pth").write_text(pth)
    return subprocess.run(
        [sys._base_executable, "-S", "-c", IN_PROCESS, str(with_pth), str(empty)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def git_show(rev: str, path: str) -> str:
    return subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=50)
    parser.add_argument("--before", help="a git revision whose hook is timed too")
    args = parser.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ROPEPOOL_BLAS", "PYTHONDONTWRITEBYTECODE")}
    loader, pth = (ROOT / "_ropepool_blas.py").read_text(), (ROOT / "ropepool-blas.pth").read_text()
    with tempfile.TemporaryDirectory() as tmp:
        venvs = {
            "without the hook": make_venv(Path(tmp, "none"), loader, None),
            "with the hook": make_venv(Path(tmp, "hook"), loader, pth),
        }
        if args.before:
            old_loader, old_pth = (git_show(args.before, f) for f in ("_ropepool_blas.py", "ropepool-blas.pth"))
            venvs[f"with the hook at {args.before}"] = make_venv(Path(tmp, "before"), old_loader, old_pth)
        starts = race({name: ([py, "-c", "pass"], env) for name, py in venvs.items()}, args.starts)
        show(
            f"python -c pass, medians of {args.starts} interleaved starts ({sys.version.split()[0]}):",
            starts,
            "without the hook",
        )
        extra = starts["with the hook"][1] - starts["without the hook"][1]
        print(
            f"  {'met ' if extra <= TARGET_MS else 'MISS'}  the hook adds {extra:+.2f} ms of CPU time to "
            f"python -c pass (<= {TARGET_MS:g} ms; judged on CPU time: wall time adds waiting for a core)"
        )
        print(in_process(pth, tmp))
        here = dict(env, PYTHONPATH=str(ROOT))
        imports = {
            "OpenBLAS loaded": ([sys.executable, "-c", "import mlx.core"], here),
            "ROPEPOOL_BLAS=off": ([sys.executable, "-c", "import mlx.core"], dict(here, ROPEPOOL_BLAS="off")),
        }
        if args.before:
            old = Path(tmp, "old-loader")
            old.mkdir()
            (old / "_ropepool_blas.py").write_text(git_show(args.before, "_ropepool_blas.py"))
            imports[f"loaded by {args.before}'s loader"] = (
                [sys.executable, "-c", "import mlx.core"],
                dict(env, PYTHONPATH=str(old)),
            )
        show(
            f"python -c 'import mlx.core' in this venv, medians of {args.starts} interleaved starts:",
            race(imports, args.starts),
            "ROPEPOOL_BLAS=off",
        )


if __name__ == "__main__":
    main()
