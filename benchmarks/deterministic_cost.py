"""What ``deterministic=True`` costs: tokens per second against the default engine, on SmolLM2.

    .venv/bin/python benchmarks/deterministic_cost.py                 # 5 rounds, 16 new tokens
    .venv/bin/python benchmarks/deterministic_cost.py --repeats 9 --new 32

SmolLM2-135M-Instruct as ``load_smollm2`` loads it on the CPU (float32 weights: the default's matmuls run
on OpenBLAS, the deterministic ones on ``ropepool/kernels/rowdot.cpp``), four chat prompts, no stop
token. Three workloads, each run by both engines in turn within every round (which goes first alternates),
after a warm-up, in one process:

- prefill: the four prompts in one step (prompt tokens per second);
- 1 request: one prompt, ``--new`` tokens (new tokens per second over the whole call);
- 4 requests: the four prompts at once, ``--new`` tokens each.

It prints the medians and the ratio deterministic / default of each, and checks on the way that the
deterministic logits of the first prompt served alone equal those it gets beside the three others, bit
for bit, while the default's differ (how many of them). Timings on a shared machine are noisy: the
ratio from one interleaved run is the number to read, not the absolute rates.
"""

from __future__ import annotations

import argparse
import statistics
import time

import mlx.core as mx
import numpy as np

from ropepool.engine import Engine, generate


def prefill_rate(model, prompts, deterministic: bool) -> float:
    """Prompt tokens per second of one step that prefills every prompt."""
    engine = Engine(model, pool_rows=2048, max_step_tokens=4096, deterministic=deterministic)
    for p in prompts:
        engine.add_request(p, 1)
    start = time.perf_counter()
    engine.step()
    return sum(map(len, prompts)) / (time.perf_counter() - start)


def decode_rate(model, prompts, new: int, deterministic: bool) -> float:
    """New tokens per second of ``generate`` over ``prompts`` (prefill included)."""
    start = time.perf_counter()
    out = generate(model, prompts, new, pool_rows=2048, keep_logits=False, deterministic=deterministic)
    return sum(len(r.tokens) for r in out) / (time.perf_counter() - start)


def alone_and_beside(model, prompts, new: int, deterministic: bool) -> int:
    """How many logits of prompt 0 differ between serving it alone and beside the others."""
    alone = generate(model, prompts[:1], new, pool_rows=2048, deterministic=deterministic)[0].logits
    beside = generate(model, prompts, new, pool_rows=2048, deterministic=deterministic)[0].logits
    return int(np.sum(np.array(alone) != np.array(beside)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--new", type=int, default=16)
    args = ap.parse_args()
    from ropepool.loaders.smollm2 import QUESTIONS, load_smollm2

    model, tokenizer, _ = load_smollm2(pairs="gptj")
    extra = "Name a primary colour."
    prompts = [tokenizer.apply_chat_template([{"role": "user", "content": q}]) for q in (*QUESTIONS, extra)]
    mx.eval(model.parameters())
    for det in (False, True):
        print(f"deterministic={det}: prompt 0's logits alone vs beside 3 others: "
              f"{alone_and_beside(model, prompts, 4, det)} of {4 * model.args.vocab_size} differ")  # fmt: skip
    work = {
        "prefill (4 prompts, 1 step)": lambda det: prefill_rate(model, prompts, det),
        "1 request": lambda det: decode_rate(model, prompts[:1], args.new, det),
        "4 requests": lambda det: decode_rate(model, prompts, args.new, det),
    }
    for name, run in work.items():
        run(False), run(True)  # warm-up: kernels built, weights converted
        rates = {False: [], True: []}
        for i in range(args.repeats):
            for det in (False, True) if i % 2 == 0 else (True, False):
                rates[det].append(run(det))
        default, det = statistics.median(rates[False]), statistics.median(rates[True])
        print(f"{name:28s} default {default:8.1f} tok/s   deterministic {det:8.1f} tok/s   ratio {det / default:.2f}")


if __name__ == "__main__":
    main()
