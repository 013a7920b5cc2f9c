"""What an engine step costs: O(the step's new tokens and pages), not O(the pool, the tree or the context).

    .venv/bin/python benchmarks/step_cost.py              # every target, met or MISS
    .venv/bin/python benchmarks/step_cost.py --quick      # fewer rounds

Four measurements, each target printed met or MISS (medians of interleaved rounds; ratios from one run):

1. pool size: a tiny Llama, 4 requests decoding; one step's time at ``pool_rows`` = 1,048,576 over
   the time at 4,096, prefix cache on and off (the engines take turns, in a new random order each round);
2. eviction: 16,384 prompts cached in the tree (2 pages each), then the admission of a request
   that forces the eviction of 32,768 pages (``schedule()`` alone, undone by the undo log between rounds);
3. bookkeeping: one decoding request's ``schedule()`` + ``postprocess()`` (no forward pass: the
   logits are given) with 4,096 tokens of context over one with 64;
4. SmolLM2's 30 layers (a tiny model with 30 layers here): the slots are read on the host, and the
   op's values checked and its write planned, once per step (counted, not timed).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time

import mlx.core as mx

from ropepool import validation
from ropepool.engine import Engine
from ropepool.loaders.tiny import tiny

TARGET_POOL = 1.2  # step time at 1,048,576 rows within this factor of 4,096 rows
TARGET_EVICT_MS = 50.0  # admitting a request that evicts 32,768 pages
TARGET_CONTEXT = 1.2  # bookkeeping at 4,096 tokens of context within this factor of 64


def model(layers=2):
    return tiny("llama", num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2)


def decoding_engine(m, pool_rows: int, prefix_cache: bool) -> Engine:
    """An engine whose 4 requests have prefilled and decode one token a step from now on."""
    engine = Engine(m, pool_rows=pool_rows, prefix_cache=prefix_cache)
    for i in range(4):
        engine.add_request([(7 * i + j) % 150 + 1 for j in range(16)], 1000)
    engine.step()  # the 4 prompts
    engine.step()
    return engine


def pool_size(rounds: int, steps: int) -> list[tuple[str, bool]]:
    m = model()
    engines = {(rows, cache): decoding_engine(m, rows, cache) for rows in (4096, 1 << 20) for cache in (True, False)}
    times = {key: [] for key in engines}
    order = random.Random(0)
    for _ in range(rounds):
        for key in order.sample(list(engines), len(engines)):
            for _ in range(steps):
                t0 = time.perf_counter()
                engines[key].step()
                times[key].append(time.perf_counter() - t0)
    med = {key: statistics.median(ts) for key, ts in times.items()}
    checks = []
    print("1. one decode step, tiny Llama (2 layers), 4 requests decoding")
    for cache in (True, False):
        small, big = med[(4096, cache)], med[(1 << 20, cache)]
        print(
            f"   prefix cache {'on ' if cache else 'off'}: pool 4,096 rows {small * 1e3:.2f} ms, "
            f"1,048,576 rows {big * 1e3:.2f} ms: {big / small:.2f}x"
        )
        text = f"prefix cache {'on ' if cache else 'off'}: 1,048,576 rows {big / small:.2f}x the step at 4,096"
        checks.append((f"{text} <= {TARGET_POOL}x", big / small <= TARGET_POOL))
    return checks


def eviction(rounds: int) -> list[tuple[str, bool]]:
    prompts, pages = 16384, 2
    cached = pool = prompts * pages
    engine = Engine(model(1), pool_rows=pool)
    s, a = engine.scheduler, engine.allocator
    for i in range(prompts):  # as finished requests leave them: held by the tree alone
        own = a.allocate(pages)
        s.cache.insert([10_000 + i, i], own, None)  # token ids the tree alone sees: 16,384 branches
        a.release(own)
    assert s.cache.num_evictable() == cached and a.num_free == 0
    req = engine.add_request([151] * pool, 1)  # needs every row of the pool: evicts every cached page
    wall, cpu = [], []
    for _ in range(rounds):
        engine.journal.begin()
        t0, c0 = time.perf_counter(), time.process_time()
        batch = s.schedule()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        assert batch.admitted == [req] and len(batch.reclaimed) == cached
        engine.journal.rollback()  # the undo log puts all 32,768 pages back in the tree
        assert s.cache.num_evictable() == cached
    ms, cpu_ms = statistics.median(wall) * 1e3, statistics.median(cpu) * 1e3
    print(
        f"2. {prompts:,} prompts cached ({cached:,} pages); admitting a request that evicts all of them: "
        f"{ms:.1f} ms wall, {cpu_ms:.1f} ms of CPU time (medians of {rounds}; on a loaded machine the CPU time "
        f"is the work, the wall time includes waiting for a core)"
    )
    text = f"eviction of {cached:,} pages at admission {cpu_ms:.1f} ms of CPU ({ms:.1f} ms wall)"
    return [(f"{text} <= {TARGET_EVICT_MS:.0f} ms", cpu_ms <= TARGET_EVICT_MS)]


def bookkeeping(rounds: int, steps: int) -> list[tuple[str, bool]]:
    m = model(1)
    vocab = m.args.vocab_size
    engines = {}
    for context in (64, 4096):
        engine = Engine(m, pool_rows=8192, max_step_tokens=4096)
        engine.add_request([(5 * j) % 150 + 1 for j in range(context)], 4000)
        engine.step()  # the prompt: the request decodes from here on
        engines[context] = engine
    logits = mx.zeros((1, vocab))
    times = {c: [] for c in engines}
    order = random.Random(1)
    for _ in range(rounds):
        for c in order.sample(list(engines), 2):
            s = engines[c].scheduler
            for _ in range(steps):
                engines[c].journal.begin()
                t0 = time.perf_counter()
                batch = s.schedule()
                s.postprocess(batch, logits)
                times[c].append(time.perf_counter() - t0)
                engines[c].journal.commit()
    small, big = (statistics.median(times[c]) for c in (64, 4096))
    print(
        f"3. bookkeeping of one decode step (schedule + postprocess): 64 tokens of context {small * 1e6:.0f} us, "
        f"4,096 tokens {big * 1e6:.0f} us: {big / small:.2f}x"
    )
    return [
        (
            f"bookkeeping at 4,096 tokens of context {big / small:.2f}x that at 64 <= {TARGET_CONTEXT}x",
            big / small <= TARGET_CONTEXT,
        )
    ]


def slot_reads() -> list[tuple[str, bool]]:
    engine = Engine(model(30), pool_rows=256)
    for i in range(4):
        engine.add_request([i + 1, 2, 3, 4], 3)
    reads, original = [], validation.read_slots

    def counted(slots):
        reads.append(1)
        return original(slots)

    validation.read_slots = counted
    try:
        engine.step()
        engine.step()
    finally:
        validation.read_slots = original
    per_step = len(reads) / 2
    print(f"4. 30 layers: the slots read on the host {per_step:g} time(s) per step")
    return [(f"30 layers: validation and planning {per_step:g} time(s) per step == 1", per_step == 1)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds")
    args = ap.parse_args(argv)
    rounds = 5 if args.quick else 15
    print(f"ropepool.engine step costs; device {mx.default_device()}; load {os.getloadavg()[0]:.1f}")
    checks = pool_size(rounds, 12) + eviction(rounds) + bookkeeping(rounds, 20) + slot_reads()
    print("Targets (a step costs what it changes)")
    print("\n".join(f"  {'met ' if ok else 'MISS'}  {text}" for text, ok in checks))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
