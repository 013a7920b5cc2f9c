"""A regression guard: the op's decode and prefill races and the engine's decode steps, REV against the working tree.

    .venv/bin/python benchmarks/compare.py main              # before a merge that touches the op
    .venv/bin/python benchmarks/compare.py cfacaa4 --rounds 9
    .venv/bin/python benchmarks/compare.py HEAD --quick      # seconds: float32 only, a tiny model

REV is checked out into a temporary ``git worktree`` (in a private temporary folder, removed at
the end, whatever happens). Two worker processes run this same script with the same Python, one
with ``PYTHONPATH`` set to REV's tree, one to the working tree (uncommitted changes included), so
each imports its own ``ropepool`` while the harness (``benchmarks/decode_race.py``'s races,
``benchmarks/engine_bench.py``'s steps) is the working tree's. The two take turns: in each of
``--rounds`` rounds every benchmark runs once on each side, the side that goes first alternating
round by round, so that whatever else loads the machine falls on both alike.

Benchmarks (Llama-3-8B shapes: Hq 32, Hkv 8, D 128, 4,096 pool rows):

- ``decode DTYPE mx``: ``rope_pool_fused(..., inplace=True)`` at T = 1 on mx inputs, raced against
  the composition (``mx.fast.rope`` on q and k plus a pool scatter) in the same process;
- ``decode DTYPE numpy``: the same on NumPy inputs, raced against a NumPy version of the op;
- ``prefill DTYPE T=64``: the op as called by default, against the composition; ``T=2048``:
  against the MLX copy floor (one MLX copy of each buffer it writes; the composition's float16
  ``mx.fast.rope`` takes seconds a call on a CPU);
- ``engine SmolLM2 step``: one request's decode step on SmolLM2-135M (the cached GGUF; skipped,
  saying so, when it is absent); ``--quick`` times a tiny random-weight Llama instead.

Printed per benchmark: the median over rounds of each side's time (each itself a median of a
race's calls), new/old, how many rounds new was slower by more than the threshold, and each
side's speed-up over what it was raced against, with new/old of the time over that reference's
(the reference is the same MLX or NumPy code on both sides: the ratio divides out the load of the
moment). A slip is named when new/old exceeds ``1 + --threshold`` (default 10%) in the ratio of
the medians and in most rounds' own ratios, in time and (where there is one) against the
reference: one noisy round cannot name a slip, and one quiet round cannot hide one. Exit status
1 when a slip is named, 2 when the comparison could not run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the working tree this script belongs to
DTYPES = ("float16", "bfloat16", "float32")


@dataclass
class Bench:
    """One benchmark: its request to a worker, and each side's results round by round."""

    name: str
    request: dict
    ref: str = ""  # what its speed-up is against
    old: list = field(default_factory=list)  # (seconds, reference seconds) per round
    new: list = field(default_factory=list)
    error: str = ""


def benches(quick: bool, dtypes, engine: str | None) -> list[Bench]:
    """The benchmarks of one comparison, in the order they run in each round."""
    dec, pre = (10, 5) if quick else (40, 8)  # calls per race
    out = [Bench(f"decode {dt} mx", dict(race="mx", dtype=dt, tokens=1, repeats=dec), "composition") for dt in dtypes]
    out += [
        Bench(f"decode {dt} numpy", dict(race="numpy", dtype=dt, tokens=1, repeats=dec), "NumPy op")
        for dt in dtypes
        if dt != "bfloat16"  # NumPy has no bfloat16
    ]
    out += [
        Bench(f"prefill {dt} T=64", dict(race="prefill", dtype=dt, tokens=64, repeats=pre), "composition")
        for dt in dtypes
    ]
    if not quick:  # against the copy floor: the composition takes seconds a call at float16 on a CPU
        out += [
            Bench(f"prefill {dt} T=2048", dict(race="floor", dtype=dt, tokens=2048, repeats=5), "MLX copy floor")
            for dt in dtypes
        ]
    if engine:
        out.append(Bench(f"engine {engine} step", dict(engine=engine, steps=4 if quick else 16)))
    return out


# ---- the worker: one side, driven over stdin/stdout ---------------------------------------------


def worker() -> int:
    """Answer one JSON line per request line: ``{"s": seconds, "ref": seconds}`` or ``{"error": ...}``."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # whatever else prints (kernel builds, C code) goes to stderr, not into the answers
    sys.stdout = sys.stderr
    import ropepool

    out.write(json.dumps({"ropepool": ropepool.__file__}) + "\n")
    models: dict = {}
    for line in sys.stdin:
        try:
            answer = measure(json.loads(line), models)
        except Exception as err:  # a side that cannot run a benchmark: said in the table, the others go on
            answer = {"error": f"{type(err).__name__}: {err}"[:200]}
        out.write(json.dumps(answer) + "\n")
    return 0


def measure(req: dict, models: dict) -> dict:
    """One benchmark's seconds on this side (and its reference's, where it has one)."""
    if "race" in req:
        from decode_race import MLX_RACE, NUMPY_RACE, race

        methods = {  # the op's call, then what it races against
            "mx": (MLX_RACE[1], MLX_RACE[2]),  # in place, against the composition
            "numpy": NUMPY_RACE,
            "prefill": (MLX_RACE[0], MLX_RACE[2]),  # as called by default
            "floor": (MLX_RACE[0], "copy (mlx)"),  # the bytes it writes, copied by MLX
        }[req["race"]]
        rows = race(req["dtype"], req["repeats"], methods, tokens=req["tokens"])
        mine, ref = (rows[m].median_ms / 1e3 for m in methods)
        return {"s": mine, "ref": ref}
    import engine_bench

    if req["engine"] not in models:
        if req["engine"] == "SmolLM2":
            model, _, prompts = engine_bench.smollm2_model()
            models["SmolLM2"] = model, prompts[0]
        else:
            models[req["engine"]] = engine_bench.build(64, 2, 256), [(7 * i + 3) % 256 for i in range(32)]
    model, prompt = models[req["engine"]]
    return {"s": statistics.median(engine_bench.decode_steps(model, prompt, req["steps"]))}


class Side:
    """A worker process importing ``ropepool`` from ``tree``."""

    def __init__(self, label: str, tree: Path):
        env = {**os.environ, "PYTHONPATH": str(tree)}
        self.label = label
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker"],
            cwd=tree,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        hello = self._read()
        self.ropepool = hello.get("ropepool", "")
        if not self.ropepool.startswith(str(tree)):
            raise RuntimeError(f"the {label} side imported ropepool from {self.ropepool or '?'}, not from {tree}")

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.label} side's worker ended (exit status {self.proc.wait()})")
        return json.loads(line)

    def ask(self, request: dict) -> dict:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# ---- the comparison -----------------------------------------------------------------------------


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout.strip()


def run_rounds(old: Side, new: Side, todo: list[Bench], rounds: int) -> None:
    """A warm-up of every benchmark on each side, then ``rounds`` rounds, the first side alternating."""
    for b in todo:
        for side in (old, new):
            got = side.ask(b.request)
            if "error" in got:
                b.error = b.error or f"{side.label}: {got['error']}"
    for r in range(rounds):
        print(f"[compare] round {r + 1}/{rounds}", file=sys.stderr, flush=True)
        for b in todo:
            if b.error:
                continue
            for side in (old, new) if r % 2 == 0 else (new, old):
                got = side.ask(b.request)
                if "error" in got:
                    b.error = f"{side.label}: {got['error']}"
                    break
                (b.old if side is old else b.new).append((got["s"], got.get("ref")))


def ratios(b: Bench) -> tuple[float, list[float], float | None, list[float]]:
    """new/old of the medians and round by round; the same for the time over the reference's time
    (the reference is the same code on both sides, so this one divides out the machine's load of
    the moment), None where the benchmark has no reference."""
    per_round = [n / o for (n, _), (o, _) in zip(b.new, b.old)]
    ratio = statistics.median(s for s, _ in b.new) / statistics.median(s for s, _ in b.old)
    if not b.ref:
        return ratio, per_round, None, []
    norm_rounds = [(n / nr) / (o / orf) for (n, nr), (o, orf) in zip(b.new, b.old)]
    norm = statistics.median(s / r for s, r in b.new) / statistics.median(s / r for s, r in b.old)
    return ratio, per_round, norm, norm_rounds


def slipped(b: Bench, threshold: float) -> tuple[int, bool]:
    """The rounds in which new was slower than old by more than ``threshold``, and whether that is a
    slip: new/old above ``1 + threshold`` in the medians and in most rounds, in time and, where the
    benchmark has a reference, against it too."""
    ratio, per_round, norm, norm_rounds = ratios(b)
    limit = 1 + threshold
    slower = sum(x > limit for x in per_round)
    slip = ratio > limit and slower > len(per_round) / 2
    if norm is not None:
        slip = slip and norm > limit and sum(x > limit for x in norm_rounds) > len(norm_rounds) / 2
    return slower, slip


def speedup(rows) -> str:
    """The median over rounds of the reference's time over the op's."""
    return f"{statistics.median(ref / s for s, ref in rows):.2f}x"


def table(todo: list[Bench], threshold: float) -> tuple[list[str], list[str]]:
    """The printed table's lines and the benchmarks that slipped, named with their ratios."""
    lines = [
        f"{'benchmark':<24} {'old':>10} {'new':>10} {'new/old':>8} {'slower':>7}   speed-up (reference / op) old -> new"
    ]
    slips = []
    for b in todo:
        if b.error:
            lines.append(f"{b.name:<24} not compared ({b.error})")
            continue
        ratio, _, norm, _ = ratios(b)
        slower, slip = slipped(b, threshold)
        old = statistics.median(s for s, _ in b.old)
        new = statistics.median(s for s, _ in b.new)
        unit, scale = ("ms", 1e3) if old > 2e-3 else ("us", 1e6)
        ref = f"   {speedup(b.old)} -> {speedup(b.new)} over the {b.ref} (new/old {norm:.2f})" if b.ref else ""
        lines.append(
            f"{b.name:<24} {old * scale:>7.1f} {unit} {new * scale:>7.1f} {unit} {ratio:>8.2f} "
            f"{slower:>3}/{len(b.old):<3}{ref}" + ("   SLIP" if slip else "")
        )
        if slip:
            slips.append(f"{b.name} ({ratio:.2f}x the time, slower in {slower} of {len(b.old)} rounds)")
    return lines, slips


def smollm2_cached() -> bool:
    """Whether SmolLM2's GGUF is in the model cache (nothing is downloaded here)."""
    sys.path.insert(0, str(ROOT))
    try:
        from ropepool.loaders.fetch import cache_dir
        from ropepool.loaders.smollm2 import SMOLLM2

        return (cache_dir() / Path(SMOLLM2.member).name).is_file()
    except Exception:
        return False
    finally:
        sys.path.remove(str(ROOT))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rev", help="the git revision to compare the working tree against (main, cfacaa4, HEAD~3 ...)")
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 7; --quick 3)")
    ap.add_argument("--threshold", type=float, default=0.10, help="new/old above 1 + this is a slip (default 0.10)")
    ap.add_argument("--quick", action="store_true", help="float32 only, T=64 prefill, a tiny model: seconds")
    ap.add_argument("--no-engine", action="store_true", help="the op's races only")
    ap.add_argument("--only", default="", metavar="TEXT", help="only the benchmarks whose name holds TEXT")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    if argv is None and sys.argv[1:2] == ["--worker"]:
        return worker()
    args = ap.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 7)
    if rounds < 1 or not 0 < args.threshold < 10:
        ap.error("--rounds must be >= 1 and --threshold in (0, 10)")
    try:
        commit = git("rev-parse", "--verify", "--quiet", f"{args.rev}^{{commit}}")
    except subprocess.CalledProcessError:
        print(f"compare: {args.rev!r} is no commit of {ROOT}", file=sys.stderr)
        return 2
    engine = None
    skipped = ""
    if args.no_engine:
        skipped = "engine: not run (--no-engine)"
    elif args.quick:
        engine = "tiny Llama"
    elif smollm2_cached():
        engine = "SmolLM2"
    else:
        skipped = "engine SmolLM2 step: skipped (the model is not cached; `make model` fetches it)"
    todo = [b for b in benches(args.quick, ("float32",) if args.quick else DTYPES, engine) if args.only in b.name]
    if not todo:
        ap.error(f"no benchmark's name holds {args.only!r}")
    here = git("rev-parse", "--short", "HEAD") + (" + uncommitted changes" if git("status", "--porcelain") else "")
    tmp = Path(tempfile.mkdtemp(prefix="ropepool-compare-"))  # 0700, ours alone
    tree = tmp / "tree"
    sides = []
    started = time.perf_counter()
    try:
        git("worktree", "add", "--detach", "--quiet", str(tree), commit)
        print(
            f"compare: old = {args.rev} ({commit[:10]}, a worktree at {tree}, removed after); new = the working "
            f"tree ({here}); {rounds} interleaved rounds; medians; load {os.getloadavg()[0]:.1f} on "
            f"{os.cpu_count()} CPUs",
            flush=True,
        )
        sides = [Side("old", tree), Side("new", ROOT)]
        run_rounds(*sides, todo, rounds)
    except (RuntimeError, subprocess.CalledProcessError, json.JSONDecodeError) as err:
        print(f"compare: {getattr(err, 'stderr', '') or err}".strip(), file=sys.stderr)
        return 2
    finally:
        for side in sides:
            side.close()
        if tree.exists():
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    lines, slipped = table(todo, args.threshold)
    print("\n".join(lines))
    if skipped:
        print(skipped)
    print(
        f"Slips (new/old > {1 + args.threshold:.2f} in the median and in most rounds): "
        + ("; ".join(slipped) if slipped else "none")
        + f"   [{time.perf_counter() - started:.0f} s]"
    )
    return 1 if slipped else 0


if __name__ == "__main__":
    raise SystemExit(main())
