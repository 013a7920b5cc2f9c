"""The engine on a busy laptop: SmolLM2's tok/s quiet and with all cores but one spinning, under the thread
policy (``ropepool.blas_threads``) and with OpenBLAS pinned to 1 and to every core; then notebook 10's fused
race on the ``cpu`` backend at 1 and 8 tokens for every dtype.

    .venv/bin/python benchmarks/busy.py                 # about 3 minutes on 2 cores
    .venv/bin/python benchmarks/busy.py --rounds 5 --new 32

One process. For each condition (quiet, then N-1 busy-looping processes this script starts and stops),
after a warm-up, each round runs every method once in a shuffled order: "policy" (the defaults: the
engine's step adapts OpenBLAS's threads to the cores free), "1 thread" and "N threads" (pinned). One
request and four requests (chat prompts, ``--new`` tokens each, no stop token). Throughput counts new
tokens over the whole call, prefill included; medians over rounds. Targets are printed met or MISS; none
is asserted by a test. Run it where the user's ``OPENBLAS_NUM_THREADS`` is unset (it is refused otherwise:
the policy keeps the user's setting).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time

import mlx.core as mx

TARGET_BUSY = 0.5  # one request, N-1 cores spinning, against quiet (the policy both times)
TARGET_QUIET = 0.85  # the policy, quiet, against the better of 1 and N threads pinned
TARGET_BATCH_GAIN = 2.5  # four requests' throughput over one request's, quiet
TARGET_FUSED_QK_FP8 = 1.0  # cpu backend, QK-norm + RoPE + FP8 + write at 8 tokens: separate ops' time / fused
TARGET_FUSED_ROPE = 1.0  # cpu backend, RoPE + write at 1 token: must stay above


def spinners(n: int) -> list:
    """``n`` processes that each keep a core busy until killed."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def serve_rates(model, prompts, new: int, rounds: int, cores: int) -> dict:
    """``{(method, requests): tok/s}``: medians over ``rounds``, methods interleaved in a shuffled order."""
    from ropepool import blas_threads
    from ropepool.engine import generate

    def run(method, batch):
        rows = sum(len(p) + new for p in batch)
        if method == "policy":
            return generate(model, batch, new, pool_rows=rows)
        with blas_threads.pinned(1 if method == "1 thread" else cores):
            return generate(model, batch, new, pool_rows=rows)

    runs = [(m, n) for m in ("policy", "1 thread", f"{cores} threads") for n in (1, 4)]
    for m, n in runs:  # warm-up: the policy sees the load of this condition
        run(m, prompts[:n])
    run("policy", prompts[:1])
    times = {r: [] for r in runs}
    order = random.Random(0)
    for _ in range(rounds):
        for m, n in order.sample(runs, len(runs)):
            t0 = time.perf_counter()
            run(m, prompts[:n])
            times[(m, n)].append(time.perf_counter() - t0)
    return {(m, n): n * new / statistics.median(ts) for (m, n), ts in times.items()}


def fused_races(rounds: int) -> list[tuple[str, float, float, float]]:
    """Notebook 10's race on the cpu backend: (what, dtype, T, unfused / fused) for every dtype."""
    from ropepool.teaching import fusion_cost as fc

    out = []
    for dtype in (mx.float32, mx.float16, mx.bfloat16):
        for T, extras, what in ((1, False, "RoPE + write"), (8, True, "QK-norm + RoPE + FP8 + write")):
            cost = fc.measure(fc.decode_step(T=T, dtype=dtype, fused_extras=extras), rounds=rounds, backend="cpu")
            out.append((what, str(dtype).rsplit(".", 1)[-1], T, cost.ratio))
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--new", type=int, default=24, help="new tokens per request")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--fused-rounds", type=int, default=30)
    args = ap.parse_args(argv)
    from ropepool import blas_threads

    off = [n for n in blas_threads.USER_SETTINGS if os.environ.get(n, "").strip()]
    if off:
        sys.exit(f"busy.py: unset {', '.join(off)} (the policy keeps a thread count the user set)")
    from ropepool.loaders.smollm2 import QUESTIONS, load_smollm2

    model, tokenizer, _ = load_smollm2(pairs="gptj")
    mx.eval(model.parameters())
    cores = len(os.sched_getaffinity(0))
    extra = ("What color is the sky on a clear day?", "Name a prime number.")
    prompts = [tokenizer.apply_chat_template([{"role": "user", "content": q}]) for q in (*QUESTIONS, *extra)][:4]
    print(
        f"SmolLM2-135M-Instruct float32 on {cores} cores, {args.new} new tokens per request, medians of "
        f"{args.rounds} rounds, methods interleaved; load {os.getloadavg()[0]:.1f}"
    )
    rates = {}
    for condition, busy in (("quiet", 0), (f"{cores - 1} of {cores} cores spinning", cores - 1)):
        procs = spinners(busy)
        try:
            time.sleep(0.5 if busy else 0)
            rates[condition] = serve_rates(model, prompts, args.new, args.rounds, cores)
            chosen = blas_threads.describe()
        finally:
            for p in procs:
                p.kill()
                p.wait()
        print(f"{condition}: (policy: {chosen})")
        for (m, n), r in rates[condition].items():
            print(f"  {m:10} {n} request{'s' if n > 1 else ' '}  {r:6.1f} tok/s")
    races = fused_races(args.fused_rounds)
    print("cpu backend, separate MLX ops' time / the fused call's (notebook 10's race):")
    for what, dtype, T, ratio in races:
        print(f"  {what:30} T = {T}  {dtype:9} {ratio:5.2f}x")
    quiet, busy = rates["quiet"], rates[f"{cores - 1} of {cores} cores spinning"]
    best_pinned = max(quiet[("1 thread", 1)], quiet[(f"{cores} threads", 1)])
    checks = [
        (
            f"busy: one request keeps {busy[('policy', 1)] / quiet[('policy', 1)]:.2f}x its quiet tok/s >= {TARGET_BUSY}x",
            busy[("policy", 1)] / quiet[("policy", 1)] >= TARGET_BUSY,
        ),
        (
            f"quiet: the policy {quiet[('policy', 1)] / best_pinned:.2f}x the better of 1 and {cores} threads pinned "
            f">= {TARGET_QUIET}x",
            quiet[("policy", 1)] / best_pinned >= TARGET_QUIET,
        ),
        (
            f"quiet: four requests {quiet[('policy', 4)] / quiet[('policy', 1)]:.2f}x one request >= {TARGET_BATCH_GAIN}x",
            quiet[("policy", 4)] / quiet[("policy", 1)] >= TARGET_BATCH_GAIN,
        ),
    ]
    for what, dtype, T, ratio in races:
        target = TARGET_FUSED_QK_FP8 if T == 8 else TARGET_FUSED_ROPE
        checks.append((f"fused {what}, T = {T}, {dtype}: {ratio:.2f}x >{'=' if T == 8 else ''} {target}x",
                       ratio >= target if T == 8 else ratio > target))  # fmt: skip
    print("Targets")
    print("\n".join(f"  {'met ' if ok else 'MISS'}  {text}" for text, ok in checks))
    return dict(rates=rates, races=races, checks=checks)


if __name__ == "__main__":
    main()
