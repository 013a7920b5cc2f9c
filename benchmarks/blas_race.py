"""Another local user races the BLAS loader through a shared TMPDIR: can she get her library loaded?

Needs root (as CI has): a throwaway user is created with ``useradd`` and removed afterwards. The
shared temp dir is group-writable without the sticky bit (a lab's scratch folder), so she can
rename what the victim makes there. She watches it; for each new ``ropepool-blas-*`` folder she
renames it away, puts a folder of her own in its place, and, once a ``libopenblas.so.0`` appears
in it, swaps that link for one to her own copy of the library. Each attempt is a fresh Python of
this venv that runs ``_ropepool_blas.load()`` with ``TMPDIR`` set to the shared folder, then reads
``/proc/self/maps``: she wins when her file is mapped into the victim.

    .venv/bin/python benchmarks/blas_race.py                 # 100 attempts against this checkout
    .venv/bin/python benchmarks/blas_race.py --root OLD      # ... against the loader in OLD/_ropepool_blas.py

Prints one JSON line: attempts, wins, loads, refusals (loads refused because the folder was swapped).
Exit status 0 when she never won, 1 when she did, 2 when it cannot run here (the reason on stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ATTACKER = r"""
import os, sys, time
shared, evil = sys.argv[1], sys.argv[2]
seen = set()
while True:
    for name in os.listdir(shared):
        if not name.startswith("ropepool-blas-") or name in seen:
            continue
        seen.add(name)
        path = os.path.join(shared, name)
        try:
            os.rename(path, os.path.join(shared, ".stolen-" + name))
            os.mkdir(path)
            os.chmod(path, 0o777)
        except OSError:
            continue
        end = time.monotonic() + 1.0
        while time.monotonic() < end:  # the victim's own link first, then hers over it
            if os.path.lexists(os.path.join(path, "libopenblas.so.0")):
                try:
                    os.symlink(evil, os.path.join(path, ".hers"))
                    os.rename(os.path.join(path, ".hers"), os.path.join(path, "libopenblas.so.0"))
                except OSError:
                    pass
                break
"""

VICTIM = r"""
import json, sys
import _ropepool_blas as hook
state = hook.load()
with open("/proc/self/maps") as f:
    won = sys.argv[1] in f.read()
print(json.dumps({"won": won, "status": state["status"], "reason": state["reason"]}))
"""


def cannot_run() -> str | None:
    """Why the race cannot be staged here, or None."""
    if not sys.platform.startswith("linux"):
        return "the loader acts on Linux only"
    if os.geteuid() != 0:
        return "creating a second user needs root (CI runs as root)"
    if not (shutil.which("useradd") and shutil.which("userdel")):
        return "no useradd/userdel to create a second user"
    if not any(os.access(p, os.X_OK) for p in ("/usr/bin/python3", "/usr/local/bin/python3")):
        return "no system Python the second user can run"
    sys.path.insert(0, str(ROOT))
    import _ropepool_blas

    if not (_ropepool_blas.applies() and _ropepool_blas._openblas()):
        return "no OpenBLAS to load here (Linux x86-64 with ngsolve-openblas only)"
    return None


def race(attempts: int, root: Path) -> dict:
    """Stage the race ``attempts`` times against the loader in ``root``; the tally."""
    import _ropepool_blas

    user = f"rp-race-{os.getpid()}"
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", user],
        check=True,
        capture_output=True,
    )
    base = Path(tempfile.mkdtemp(prefix="ropepool-race-"))
    attacker = None
    try:
        who = pwd.getpwnam(user)
        os.chmod(base, 0o711)  # she can pass through, not list
        shared = base / "shared"  # the lab's scratch folder: her group may write it, no sticky bit
        shared.mkdir()
        os.chown(shared, 0, who.pw_gid)
        os.chmod(shared, 0o770)
        evil = base / "hers"
        evil.mkdir()
        shutil.copyfile(_ropepool_blas._openblas(), evil / "libopenblas.so.0")  # "her" library: a copy she owns
        os.chown(evil, who.pw_uid, who.pw_gid)
        os.chown(evil / "libopenblas.so.0", who.pw_uid, who.pw_gid)
        python = next(p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.access(p, os.X_OK))
        attacker = subprocess.Popen(
            [python, "-I", "-S", "-c", ATTACKER, str(shared), str(evil / "libopenblas.so.0")],
            user=who.pw_uid,
            group=who.pw_gid,
            extra_groups=[],
            cwd="/",
        )
        time.sleep(0.2)
        if attacker.poll() is not None:
            raise RuntimeError(f"the attacker did not start (exit status {attacker.returncode})")
        env = dict(os.environ, TMPDIR=str(shared), PYTHONPATH=str(root))
        env.pop("ROPEPOOL_BLAS", None)
        tally = {"attempts": attempts, "wins": 0, "loads": 0, "refusals": 0, "other": 0, "reasons": []}
        for _ in range(attempts):
            done = subprocess.run(
                [sys.executable, "-c", VICTIM, str(evil)],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                cwd=str(base),
            )
            try:
                out = json.loads(done.stdout.strip().splitlines()[-1])
            except (IndexError, ValueError):
                out = {"won": False, "status": f"exit {done.returncode}", "reason": done.stderr.strip()[-200:]}
            tally["wins"] += out["won"]
            tally["loads"] += out["status"] == "loaded" and not out["won"]
            tally["refusals"] += "replaced" in out["reason"]
            if out["status"] != "loaded" and "replaced" not in out["reason"]:
                tally["other"] += 1
                tally["reasons"].append(out["reason"])
        tally["reasons"] = sorted(set(tally["reasons"]))[:3]
        return tally
    finally:
        if attacker is not None:
            attacker.kill()
            attacker.wait()
        shutil.rmtree(base, ignore_errors=True)
        subprocess.run(["userdel", user], capture_output=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=100)
    parser.add_argument("--root", type=Path, default=ROOT, help="folder holding the _ropepool_blas.py to attack")
    args = parser.parse_args(argv)
    why = cannot_run()
    if why:
        print(f"blas_race: cannot run here: {why}", file=sys.stderr)
        return 2
    tally = race(args.attempts, args.root.resolve())
    print(json.dumps(tally))
    return 1 if tally["wins"] else 0


if __name__ == "__main__":
    sys.exit(main())
