"""The largest logit difference between ropepool.engine and mlx-lm, per architecture and backend.

    .venv/bin/python benchmarks/engine_logits.py             # tiny random-weight models, every backend here
    .venv/bin/python benchmarks/engine_logits.py --smollm2   # also SmolLM2-135M-Instruct as shipped

Each model (:data:`ropepool.loaders.tiny.ARCHS`: an mlx-lm model class built from a
config dict with seeded random weights, the models ``tests/test_engine.py`` checks) serves four
prompts at once through a pool too small for all of them (requests wait, rows are reused); every
logit the engine chose a token from
is compared with mlx-lm's own forward pass of that request alone (:func:`ropepool.engine.mlx_lm_loop.greedy`,
mlx-lm's ``generate_step`` and KV cache). Prints the numbers and the tolerance the tests hold them
to; asserts nothing (``tests/test_engine.py`` and ``tests/test_smollm2.py`` do).
"""

from __future__ import annotations

import argparse

import mlx.core as mx

import ropepool
from ropepool.engine import generate
from ropepool.engine.mlx_lm_loop import greedy
from ropepool.loaders.tiny import ARCHS, build
from ropepool.tolerance import ENGINE_LOGITS_FLOAT32, ENGINE_LOGITS_SMOLLM2

PROMPTS = [[1, 5, 9, 3], [2, 4], [8, 7, 6, 5, 4, 3, 2, 1, 0], [100]]
NEW, POOL_ROWS = 4, 12  # 9 + 4 - 1 = 12: the longest request needs the whole pool


def largest_difference(model, prompts, new, backend, pool_rows, stop=None) -> float:
    """max |engine logit - mlx-lm logit| over every token of every request."""
    served = generate(model, prompts, new, pool_rows=pool_rows, backend=backend, stop=stop)
    alone = greedy(model, prompts, new, stop=stop)
    for s, a in zip(served, alone):
        if s.tokens != a.tokens:
            raise SystemExit("the engine chose other tokens than mlx-lm")
    return max(float(mx.abs(s.logits - a.logits).max()) for s, a in zip(served, alone))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smollm2", action="store_true", help="also the real model (fetched by make setup)")
    args = ap.parse_args(argv)
    backends = [n for n, s in ropepool.available_backends().items() if s.available]
    print(
        f"largest |logit difference| against mlx-lm, float32 (tests allow atol {ENGINE_LOGITS_FLOAT32['atol']:g}, "
        f"rtol {ENGINE_LOGITS_FLOAT32['rtol']:g}); device {mx.default_device()}"
    )
    print(f"  {'model':24}" + "".join(f"{b:>12}" for b in backends))
    for name, (label, _, _) in ARCHS.items():
        model = build(name)
        diffs = [largest_difference(model, PROMPTS, NEW, b, POOL_ROWS) for b in backends]
        print(f"  {label:24}" + "".join(f"{d:>12.1e}" for d in diffs))
    if args.smollm2:
        from ropepool.loaders.smollm2 import QUESTIONS, load_smollm2

        model, tokenizer, _ = load_smollm2(pairs="gptj")  # as shipped: GGUF rows, GPT-J pairs
        prompts = [tokenizer.apply_chat_template([{"role": "user", "content": q}]) for q in QUESTIONS]
        diffs = [largest_difference(model, prompts, 10, b, 96, stop=tokenizer.eos_token_id) for b in backends]
        print(
            f"  {'SmolLM2-135M (Q4_1)':24}"
            + "".join(f"{d:>12.1e}" for d in diffs)
            + f"   (tests allow atol {ENGINE_LOGITS_SMOLLM2['atol']:g}: 30 layers of quantized matmuls)"
        )


if __name__ == "__main__":
    main()
