"""What recording a run costs, against the step it records: SmolLM2 (or the tiny stand-in offline).

    .venv/bin/python benchmarks/recording_cost.py            # SmolLM2 where it can be fetched
    .venv/bin/python benchmarks/recording_cost.py --tiny     # the tiny random-weight Llama

Eight chat prompts behind one system prompt (the sharing scenario's, twice over), 16 new tokens each,
served by two engines that take turns step by step (a new random order each round): one recorded
(:func:`ropepool.engine.recording.record`), one not. Printed: the median step time of each, their
ratio, and the median time spent in the recorder itself (timed around its call) as a share of the
recorded engine's step. Then the same with a pool 64 times larger: the recorder's time must not grow
with the pool (target: within 1.5x; a full copy of the books would grow 64x).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from ropepool.engine import Engine
from ropepool.engine.recording import record
from ropepool.teaching.inspector.scenarios import SYSTEM, QUESTIONS, tiny_prompts

TARGET_POOL = 1.5


def prompts_and_model(tiny: bool):
    from ropepool.loaders.tiny import build

    if not tiny:
        from ropepool.loaders.fetch import ModelUnavailable
        from ropepool.loaders.smollm2 import load_smollm2

        try:
            model, tok, _ = load_smollm2(pairs="gptj")
            chats = [
                tok.apply_chat_template([{"role": "system", "content": SYSTEM}, {"role": "user", "content": q}])
                for q in QUESTIONS * 2
            ]
            return model, chats, "SmolLM2-135M-Instruct"
        except ModelUnavailable as err:
            print(f"SmolLM2 is not here ({err}): the tiny stand-in")
    return build("llama-gqa"), tiny_prompts(8, 40, 4), "tiny Llama"


def measure(model, prompts, pool_rows: int, rounds: int, seed: int):
    engines = {}
    for name in ("plain", "recorded"):
        engine = Engine(model, pool_rows=pool_rows)
        for p in prompts:
            engine.add_request(p, 16)
        engines[name] = engine
    rec = record(engines["recorded"])
    inside = []
    (watcher,) = engines["recorded"].watchers

    def timed(engine, batch, records):
        t = time.perf_counter()
        watcher(engine, batch, records)
        inside.append(time.perf_counter() - t)

    engines["recorded"].watchers[:] = [timed]
    times = {name: [] for name in engines}
    rng = random.Random(seed)
    for _ in range(rounds):
        order = list(engines)
        rng.shuffle(order)
        for name in order:
            if engines[name].done:
                continue
            t = time.perf_counter()
            engines[name].step()
            times[name].append(time.perf_counter() - t)
    return {k: statistics.median(v) for k, v in times.items()}, statistics.median(inside), len(rec)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny", action="store_true", help="the tiny stand-in, not SmolLM2")
    args = ap.parse_args()
    model, prompts, name = prompts_and_model(args.tiny)
    print(f"{name}: {len(prompts)} prompts, 16 new tokens each; medians over every step, engines interleaved")
    rows = -(-(sum(map(len, prompts)) + 16 * len(prompts)) // 64) * 64
    inside = {}
    for pool in (rows, 64 * rows):
        step, inside[pool], steps = measure(model, prompts, pool, rounds=64, seed=pool)
        print(
            f"pool_rows {pool:>7}: step {1e3 * step['plain']:7.2f} ms plain, {1e3 * step['recorded']:7.2f} ms recorded "
            f"(x{step['recorded'] / step['plain']:.3f}); the recorder {1e6 * inside[pool]:7.1f} us a step "
            f"= {100 * inside[pool] / step['recorded']:.2f}% of it; {steps} steps"
        )
    ratio = inside[64 * rows] / inside[rows]
    verdict = "met" if ratio <= TARGET_POOL else "MISS"
    print(f"recorder time at {64 * rows} rows over {rows} rows: x{ratio:.2f} (target <= {TARGET_POOL}): {verdict}")


if __name__ == "__main__":
    main()
